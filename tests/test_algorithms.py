"""The algorithm family through the CLI and as properties (issue: algorithm family)."""

import re

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from olcli import model as model_file
from olcli.engine.records import Batch, new_tally
from olcli.engine.registry import ALGORITHMS
from olcli.learner import Learner


@pytest.mark.parametrize("args,message", [
    (["--scinol2", "--l1", "0.1"], "--l1 does not apply to --scinol2"),
    (["--sgd", "--ftrl-beta", "2"], "--ftrl-beta does not apply to --sgd"),
    (["--ftrl", "--delta", "1"], "--delta does not apply to --ftrl"),
    (["--adagrad", "--ftrl"], "choose one algorithm"),
    (["--l1", "0.1", "--l2", "0.1"], "not both"),
    (["-l", "0"], "must be > 0"),
    (["--ftrl", "--l1", "-1"], "must be >= 0"),
    (["--scinol1", "--epsilon", "0"], "must be > 0"),
    (["--loss", "quantile", "--quantile-tau", "1.5"], "between 0 and 1"),
])
def test_options_an_algorithm_does_not_have_are_usage_errors(cli, args, message):
    code, _, err = cli("train", *args, stdin=b"1 |f a\n")
    assert code == 2, err
    assert message in err


CONTINUE_CASES = [(name, []) for name in ALGORITHMS] + [
    ("adagrad", ["--l1", "0.001"]), ("adagrad", ["--l2", "0.01", "--radius", "2"]),
    ("adagrad-dual", ["--l1", "0.001"]), ("ftrl", ["--l1", "1", "--l2", "0.5"]),
]


@pytest.mark.parametrize("name,extra", CONTINUE_CASES)
def test_continuing_is_bit_identical_for_every_algorithm(cli, sample, tmp_path, name, extra):
    lines = (sample / "a9a_train.vw").read_bytes().splitlines(keepends=True)
    (tmp_path / "A.vw").write_bytes(b"".join(lines[:2500]))
    (tmp_path / "B.vw").write_bytes(b"".join(lines[2500:4000]))
    args = ["--loss", "logistic", "--quiet", f"--{name}", *extra]
    assert cli("train", "A.vw", "-f", "a.olm", *args)[0] == 0
    code, predictions_b, err = cli("train", "B.vw", "-i", "a.olm", "-f", "ab.olm", "-p", "-", "--quiet")
    assert code == 0, err
    assert cli("train", "A.vw", "B.vw", "-f", "all.olm", "-p", "all.txt", *args)[0] == 0
    assert (tmp_path / "all.txt").read_bytes().splitlines()[2500:] == predictions_b.splitlines()
    assert (tmp_path / "ab.olm").read_bytes() == (tmp_path / "all.olm").read_bytes()


def _stream(seed, n=120, dim=12):
    rng = np.random.default_rng(seed)
    scale = 10.0 ** rng.uniform(-3, 3, size=dim)
    rows = []
    for _ in range(n):
        k = int(rng.integers(1, dim))
        index = np.sort(rng.choice(dim, size=k, replace=False)).astype(np.int32)
        rows.append((index, rng.normal(size=k) * scale[index], float(rng.choice([-1.0, 1.0]))))
    return rows


def _predictions(name, rows, multipliers, loss="logistic"):
    dim = len(multipliers)
    row_ptr = np.cumsum([0] + [len(r[0]) for r in rows]).astype(np.int64)
    index = np.concatenate([r[0] for r in rows])
    value = np.concatenate([r[1] * multipliers[r[0]] for r in rows])
    labels = np.array([r[2] for r in rows])
    learner = Learner(name, loss=loss, bits=4)  # 17 rows: the stream's dim rows and unused ones
    batch = Batch(labels, np.ones(len(rows)), np.zeros(len(rows)), row_ptr, index, value, np.diff(row_ptr))
    return learner.process(batch, True, new_tally()).predictions


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.floats(1e-4, 1e4), min_size=12, max_size=12),
       st.sampled_from(["logistic", "hinge", "absolute", "squared"]))
def test_scinol_predictions_are_invariant_to_feature_scaling(seed, multipliers, loss):
    rows = _stream(seed)
    for name in ("scinol1", "scinol2"):
        plain = _predictions(name, rows, np.ones(12), loss)
        scaled = _predictions(name, rows, np.array(multipliers), loss)
        np.testing.assert_allclose(scaled, plain, rtol=1e-7, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.integers(-30, 30), min_size=12, max_size=12))
def test_scinol_is_exactly_invariant_to_power_of_two_scaling(seed, exponents):
    # Multiplying by 2**k commutes with every floating-point operation (no
    # rounding), so a truly scale-invariant implementation is bit-identical.
    rows = _stream(seed)
    for name in ("scinol1", "scinol2"):
        plain = _predictions(name, rows, np.ones(12))
        scaled = _predictions(name, rows, 2.0 ** np.array(exponents, dtype=float))
        assert plain.tolist() == scaled.tolist()


def test_adagrad_is_not_scale_invariant():
    # The property test above can fail: a learner with a learning rate does change.
    rows = _stream(1)
    multipliers = np.full(12, 1000.0)
    assert not np.allclose(_predictions("adagrad", rows, multipliers), _predictions("adagrad", rows, np.ones(12)))


def _rescaled_libsvm(path, tmp_path):
    """The same examples with feature i multiplied by 2**(3 * (i % 7) - 9) (powers
    of two: exact in binary, see above). libsvm, so that no two features share a
    row: two differently scaled features hashed into one row (in a9a's VW file,
    f^5 and f^58 collide at -b 18) cannot be invariant."""
    out = []
    for line in path.read_text().splitlines():
        label, *tokens = line.split()
        scaled = []
        for token in tokens:
            name, value = token.split(":")
            scaled.append(f"{name}:{float(value) * 2.0 ** (3 * (int(name) % 7) - 9)!r}")
        out.append(" ".join([label, *scaled]))
    target = tmp_path / "scaled.libsvm"
    target.write_text("\n".join(out) + "\n")
    return target


@pytest.mark.parametrize("name,invariant", [("scinol1", True), ("scinol2", True), ("adagrad", False)])
def test_scale_invariance_through_the_cli(cli, sample, tmp_path, name, invariant):
    scaled = _rescaled_libsvm(sample / "a9a_train.libsvm", tmp_path)
    _, plain, _ = cli("train", sample / "a9a_train.libsvm", f"--{name}", "--loss", "logistic", "-p", "-", "--quiet")
    _, rescaled, _ = cli("train", scaled, f"--{name}", "--loss", "logistic", "-p", "-", "--quiet")
    a = np.array([float(x) for x in plain.split()])
    b = np.array([float(x) for x in rescaled.split()])
    assert len(a) == 6000
    assert (plain == rescaled) == invariant
    assert np.allclose(a, b, atol=1e-3) == invariant


def _nonzero(cli, model):
    _, out, _ = cli("inspect", model)
    return int(re.search(r"non-zero weights: (\d+)", out.decode()).group(1))


@pytest.mark.parametrize("name,strengths", [("adagrad", [0, 1e-4, 1e-3, 1e-2]),
                                            ("adagrad-dual", [0, 1e-3, 1e-2, 3e-2]),
                                            ("ftrl", [0, 1, 5, 20])])
def test_nonzero_weights_fall_as_l1_grows(cli, sample, name, strengths):
    counts = []
    for l1 in strengths:
        extra = ["--l1", str(l1)] if l1 else []
        assert cli("train", sample / "a9a_train.vw", f"--{name}", "--loss", "logistic", "-f", "m.olm",
                   "--quiet", *extra)[0] == 0
        counts.append(_nonzero(cli, "m.olm"))
    assert counts == sorted(counts, reverse=True) and counts[0] > counts[-1], counts


def test_quantile_loss_learns_the_quantile(cli, tmp_path):
    rng = np.random.default_rng(0)
    labels = rng.uniform(0, 10, size=20000)
    (tmp_path / "q.vw").write_text("".join(f"{y:.6f} |f\n" for y in labels))
    for tau in (0.1, 0.9):
        assert cli("train", "q.vw", "--loss", "quantile", "--quantile-tau", str(tau), "--sgd", "-l", "5",
                   "-f", "m.olm", "--quiet")[0] == 0
        constant = model_file.load("m.olm").state[-1, 0]
        assert constant == pytest.approx(10 * tau, abs=0.4)
