"""Library errors carry the option, value and reason as fields; the message is unchanged."""

import pickle

import pytest

from olcli.errors import ModelError, OlcliError, UsageError
from olcli.new_model import new_model
from olcli.settings import run_settings


def test_message_without_fields_is_the_message():
    error = UsageError("--bits 40 is over 30")
    assert str(error) == "--bits 40 is over 30"
    assert (error.option, error.value, error.reason) == (None, None, None)
    assert isinstance(error, ValueError) and error.exit_code == 2
    assert str(ModelError("m.olm is not a model")) == "m.olm is not a model"


def test_fields_alone_make_a_message_and_survive_pickling():
    error = OlcliError(option="bits", value=40, reason="40 is over 30")
    assert str(error) == "bits: 40 is over 30"
    again = pickle.loads(pickle.dumps(UsageError("said", option="bits", value=40, reason="too many")))
    assert (str(again), again.option, again.value, again.reason) == ("said", "bits", 40, "too many")


def test_a_refused_model_setting_carries_its_fields():
    with pytest.raises(UsageError) as caught:
        new_model(quantile_tau=1.5)
    assert str(caught.value) == "quantile_tau (--quantile-tau) must be between 0 and 1 (got 1.5)"
    assert caught.value.option == "quantile_tau" and caught.value.value == 1.5
    assert caught.value.reason == "1.5 is not between 0 and 1"
    with pytest.raises(UsageError) as caught:
        new_model(hash_seed=-1)
    assert caught.value.option == "hash_seed" and caught.value.value == -1


def test_a_refused_run_setting_carries_its_fields():
    with pytest.raises(UsageError) as caught:
        run_settings(passes=0)
    assert str(caught.value) == "--passes must be at least 1"
    assert (caught.value.option, caught.value.value, caught.value.reason) == ("passes", 0, "--passes must be at least 1")
