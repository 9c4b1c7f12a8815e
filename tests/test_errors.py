"""Library errors carry the option, value and reason as fields; the message is unchanged."""

import pickle
import subprocess
import sys

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
    assert str(error) == "bits 40 is over 30" and error.from_fields
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
    assert str(caught.value) == "passes must be at least 1"   # the Python API names the keyword
    assert (caught.value.option, caught.value.value, caught.value.reason) == ("passes", 0, "must be at least 1")


@pytest.mark.parametrize("args, line", [
    (["--passes", "0"], "Error: --passes must be at least 1\n"),
    (["--holdout-period", "1", "--passes", "2"], "Error: --holdout-period must be 2 or more (or use --holdout-off)\n"),
    (["--early-terminate", "0", "--passes", "2"], "Error: --early-terminate must be at least 1\n")])
def test_the_command_line_words_a_run_setting_with_its_flag(tmp_path, args, line):
    data = tmp_path / "d.txt"
    data.write_text("1 | a\n0 | b\n")
    done = subprocess.run([sys.executable, "-m", "olcli", "train", str(data), *args, "--quiet"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 2
    assert done.stderr.endswith(line), done.stderr
