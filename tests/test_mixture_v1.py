"""Format 4's default (``mix-v1``, olcli/engine/mixture_v1.py: --gd, --coin and ScInOL2,
prior 0.9/0.05/0.05): a model file written by it loads as mix-v1, predicts and continues
learning bit for bit as that code did (sample_data/mix_v1, whose expected.json that code
wrote), is written back as mix-v1 in the current format, and its loop still follows tests/naive.py's
Mixture step by step."""

import hashlib
import json
import os
from types import SimpleNamespace

import numpy as np
import pytest

from olcli import model as model_file
from olcli.engine import mixture_v1
from olcli.engine.records import S_LOSS, S_WEIGHT
from olcli.learner import Learner
from tests import naive
from tests.test_engine import (ROWS, assert_close, case_seed, clipped, learner, run, sparse_stream, vw_reference,
                               vw_scalars, vw_state, vw_weights)

HERE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "sample_data")
FILES = os.path.join(HERE, "mix_v1")
EXPECTED = json.load(open(os.path.join(FILES, "expected.json")))
DATA = {"a9a_logistic": "a9a_train.vw", "vw0002_squared": "vw_0002.dat", "letter_oaa26": "letter_train.vw"}


def in_the_written_order(batch):
    """``batch`` as the parser of the code that wrote expected.json gave it: an example that
    held a hashed index twice (its occurrences, ``feature_count``, outnumber its entries) had
    its distinct indices sorted (the constant's, 2^bits, stays last); today's parser keeps each
    where it first occurs (features.merge_duplicates), which changes the sums' last bits."""
    index, value = batch.index.copy(), batch.value.copy()
    for e in range(len(batch.labels)):
        lo, hi = int(batch.row_ptr[e]), int(batch.row_ptr[e + 1])
        if batch.feature_count[e] > hi - lo:
            order = np.argsort(index[lo:hi], kind="stable")
            index[lo:hi], value[lo:hi] = index[lo:hi][order], value[lo:hi][order]
    return batch._replace(index=index, value=value)


def continues_as_written(loaded, data, want):
    """``loaded`` continued on the lines ``want["continue_lines"]`` of the file ``data``
    (parsed as the code that wrote ``want`` parsed them: ``in_the_written_order``) gives the
    predictions, state, scalars and loss that code gave (sample_data's make_expected.py:
    hashes and float hex)."""
    lines = open(data).read().splitlines()
    lo, hi = want["continue_lines"]
    batch, _ = loaded.to_batch(lines[lo:hi])
    before_loss, before_weight = loaded.tally.stats[S_LOSS], loaded.tally.stats[S_WEIGHT]
    done = loaded.process(in_the_written_order(batch), True)
    loss = float(loaded.tally.stats[S_LOSS] - before_loss) / float(loaded.tally.stats[S_WEIGHT] - before_weight)
    result = SimpleNamespace(predictions=done.predictions, scores=done.scores, loss=loss)
    predictions = np.asarray(result.predictions if result.scores is None else result.scores, dtype=np.float64)
    assert [float(x).hex() for x in predictions.ravel()[:12]] == want["first_predictions_hex"]
    assert hashlib.sha256(predictions.tobytes()).hexdigest() == want["predictions_sha256"]
    state = np.ascontiguousarray(loaded.model.state)
    assert hashlib.sha256(state.tobytes()).hexdigest() == want["state_sha256"]
    assert [float(x).hex() for x in loaded.model.scalars] == want["scalars_hex"]
    assert result.loss == want["loss"]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_an_old_default_model_continues_bit_for_bit(name, tmp_path):
    """Loaded, it is mix-v1; continued on the next lines it gives the predictions, state
    and scalars the 3-member code gave (hashes and float hex written by that code); saved
    again it is the current format, algorithm mix-v1, and reloads to the same state."""
    want = EXPECTED[name]
    loaded = Learner.from_model(model_file.load(os.path.join(FILES, f"{name}.olm")))
    assert loaded.algorithm == "mix-v1"
    assert loaded.model.slots == tuple(mixture_v1.SLOTS)
    continues_as_written(loaded, os.path.join(HERE, DATA[name]), want)
    path = tmp_path / "again.olm"
    loaded.save(path)
    header = model_file.read_header(path.read_bytes(), str(path))[0]
    assert header["format_version"] == model_file.FORMAT_VERSION and header["algorithm"] == "mix-v1"
    again = Learner.from_model(model_file.load(str(path)))
    assert np.array_equal(again.model.state, loaded.model.state)


def test_an_old_default_model_predicts_through_the_cli(tmp_path):
    """`olcli test -i` (the command-line path, serve's one-call kernel too: engine/single.py)
    reads a format-4 default model and predicts with it as the Python API does."""
    import subprocess
    import sys

    model = os.path.join(FILES, "a9a_logistic.olm")
    out = tmp_path / "p.txt"
    lines = open(os.path.join(HERE, "a9a_train.vw")).read().splitlines()[800:900]
    data = tmp_path / "d.vw"
    data.write_text("\n".join(lines) + "\n")
    done = subprocess.run([sys.executable, "-m", "olcli", "test", "-i", model, "-p", str(out), "--quiet", str(data)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    got = np.array([float(v.split()[0]) for v in out.read_text().split("\n") if v])
    want = Learner.from_model(model_file.load(model)).predict(lines)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)   # the -p file's printed digits


def reference_for(fast, loss, tau):
    params = fast.params
    gd_params = {"eta": params["eta"], "power_t": params["power_t"], "initial_t": params["initial_t"],
                 "adaptive": 1.0, "normalized": 1.0, "invariant": 1.0, "l1": 0.0, "l2": 0.0}
    members = [vw_reference("gd", gd_params, loss, tau),
               vw_reference("coin", {"alpha": params["alpha"], "beta": params["beta"]}, loss, tau),
               naive.ScInOL2Member(ROWS, params["epsilon"], clipped("scinol2", loss))]
    return naive.Mixture(members, naive.Mixture.PRIOR_V1, loss, tau)


@pytest.mark.parametrize("loss", ["logistic", "squared", "hinge"])
def test_mix_v1_matches_the_reference_step_by_step(loss):
    """mix-v1's loop against naive.Mixture with format 4's members and prior: every
    prediction, the VW members' state, the losses and the weights after every example."""
    tau = 0.3
    fast = learner("mix-v1", loss, {}, tau)
    reference = reference_for(fast, loss, tau)
    for step, (index, value, label, importance, base) in enumerate(
            sparse_stream(seed=case_seed("mix", loss, {}), n=150, loss=loss)):
        (p,), _ = run(fast, [(index, value, label, importance, base)])
        features = list(zip(index.tolist(), value.tolist()))
        expected = reference.step(features, label, importance, base)
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-9), f"prediction {step}"
        state = fast.model.state
        gd_member, coin_member, scinol2_member = reference.members
        assert_close(state[:, slice(*mixture_v1.GD_COLUMNS)], vw_state(gd_member, ROWS), f"gd state after {step}")
        assert_close(state[:, slice(*mixture_v1.COIN_COLUMNS)], vw_state(coin_member, ROWS),
                     f"coin state after {step}")
        assert_close(fast.model.scalars[:mixture_v1.LOSSES], vw_scalars(gd_member) + vw_scalars(coin_member),
                     f"scalars after {step}")
        assert_close(fast.model.scalars[mixture_v1.LOSSES:mixture_v1.LOSSES + 3], reference.L, f"losses {step}")
        want = reference.weights([vw_weights(gd_member, ROWS), vw_weights(coin_member, ROWS),
                                  scinol2_member.weights()])
        assert_close(fast.weights(), np.array(want), f"weights after {step}")


def test_a_new_model_is_not_mix_v1():
    """The default and --mix are the 4-member mixture; mix-v1 has no flag."""
    from olcli.engine import registry

    assert Learner(loss="logistic", bits=4).algorithm == "mix"
    assert "mix-v1" not in registry.ALGORITHMS and "mix-v1" in registry.LEGACY
