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
    (["--adagrad", "--l1", "0.1", "--l2", "0.1"], "not both"),
    (["-l", "0"], "must be > 0"),
    (["--ftrl", "--l1", "-1"], "must be >= 0"),
    (["--scinol1", "--epsilon", "0"], "must be > 0"),
    (["--loss", "quantile", "--quantile-tau", "1.5"], "between 0 and 1"),
    (["--adaptive", "--ftrl"], "--adaptive does not apply to --ftrl (it applies to: --gd)"),
    (["--adagrad", "--coin-alpha", "2"], "--coin-alpha does not apply to --adagrad (it applies to: --coin, --mix)"),
    # no flag: --l1 selects --gd (tests/test_default_decided.py), unless no learner takes all the options given
    (["--l1", "0.1", "--epsilon", "2"],
     "--l1 does not apply to --mix (it applies to: --adagrad, --adagrad-dual, --ftrl, --gd)"),
    (["--coin", "--coin-alpha", "0"], "must be > 0"),
    (["--gd", "--power-t", "-1"], "must be >= 0"),
    (["--min-prediction", "2", "--max-prediction", "1"], "above max_prediction"),
])
def test_options_an_algorithm_does_not_have_are_usage_errors(cli, args, message):
    code, _, err = cli("train", *args, stdin=b"1 |f a\n")
    assert code == 2, err
    assert message in err


CONTINUE_CASES = [(name, []) for name in ALGORITHMS] + [
    ("adagrad", ["--l1", "0.001"]), ("adagrad", ["--l2", "0.01", "--radius", "2"]),
    ("adagrad-dual", ["--l1", "0.001"]), ("ftrl", ["--l1", "1", "--l2", "0.5"]),
    ("sgd", ["--power-t", "0.3", "--initial-t", "3"]), ("gd", ["--l1", "1e-6", "--l2", "1e-5"]),
    ("gd", ["--adaptive", "--invariant", "--initial-t", "1", "--power-t", "0.4"]),
    ("gd", ["--normalized", "--min-prediction", "-0.5", "--max-prediction", "0.5"]),
    ("coin", ["--coin-alpha", "2", "--coin-beta", "0.5"]),
]


@pytest.mark.parametrize("name,extra", CONTINUE_CASES)
def test_continuing_is_bit_identical_for_every_algorithm(cli, sample, tmp_path, name, extra):
    lines = (sample / "a9a_train.vw").read_bytes().splitlines(keepends=True)
    (tmp_path / "A.vw").write_bytes(b"".join(lines[:2500]))
    (tmp_path / "B.vw").write_bytes(b"".join(lines[2500:4000]))
    args = ["--loss", "logistic", "--quiet", *([] if extra[:1] == ["--adaptive"] else [f"--{name}"]), *extra]
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


# Predictions invariant to rescaling any feature by c > 0 (exactly for c = 2^k): ScInOL
# (Kempka et al. 2019), --coin (x only as x / M, coin.py) and --gd with VW's
# defaults and any normalized setting with power_t 1/2 and initial_t 0 (NG's design:
# its step on w_i scales as 1/x_i^2, gd.py).
# --mix: its members are, and its weights depend only on their losses.
SCALE_INVARIANT = ("scinol1", "scinol2", "coin", "gd", ("gd", {"normalized": 1}),
                   ("gd", {"normalized": 1, "invariant": 1}), "mix")


def _predictions(name, rows, multipliers, loss="logistic", **hyper):
    if isinstance(name, tuple):
        name, hyper = name
    dim = len(multipliers)
    row_ptr = np.cumsum([0] + [len(r[0]) for r in rows]).astype(np.int64)
    index = np.concatenate([r[0] for r in rows])
    value = np.concatenate([r[1] * multipliers[r[0]] for r in rows])
    labels = np.array([r[2] for r in rows])
    learner = Learner(name, loss=loss, bits=4, **hyper)  # 17 rows: the stream's dim rows and unused ones
    batch = Batch(labels, np.ones(len(rows)), np.zeros(len(rows)), row_ptr, index, value, np.diff(row_ptr))
    return learner.process(batch, True, new_tally()).predictions


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.floats(1e-4, 1e4), min_size=12, max_size=12),
       st.sampled_from(["logistic", "hinge", "absolute", "squared"]))
def test_scale_invariant_predictions_are_invariant_to_feature_scaling(seed, multipliers, loss):
    rows = _stream(seed)
    for name in SCALE_INVARIANT:
        plain = _predictions(name, rows, np.ones(12), loss)
        scaled = _predictions(name, rows, np.array(multipliers), loss)
        np.testing.assert_allclose(scaled, plain, rtol=1e-7, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10**6), st.lists(st.integers(-30, 30), min_size=12, max_size=12))
def test_scale_invariant_learners_are_exactly_invariant_to_power_of_two_scaling(seed, exponents):
    # Multiplying by 2**k commutes with every floating-point operation (no
    # rounding), so a truly scale-invariant implementation is bit-identical.
    rows = _stream(seed)
    for name in SCALE_INVARIANT:
        plain = _predictions(name, rows, np.ones(12))
        scaled = _predictions(name, rows, 2.0 ** np.array(exponents, dtype=float))
        assert plain.tolist() == scaled.tolist()


@pytest.mark.parametrize("name,hyper", [("adagrad", {}), ("sgd", {}), ("gd", {"adaptive": 1}),
                                        ("gd", {"adaptive": 0, "normalized": 0, "invariant": 0}),
                                        ("gd", {"initial_t": 1.0})])
def test_learners_that_are_not_scale_invariant(name, hyper):
    # The property tests above can fail: a learner with a learning rate in the
    # features' units does change (--gd: AdaGrad alone, plain SGD, or a G that
    # starts at initial_t instead of 0).
    rows = _stream(1)
    multipliers = np.full(12, 1000.0)
    assert not np.allclose(_predictions(name, rows, multipliers, **hyper),
                           _predictions(name, rows, np.ones(12), **hyper))


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


@pytest.mark.parametrize("flags,invariant", [(["--scinol1"], True), (["--scinol2"], True), (["--adagrad"], False),
                                             (["--gd"], True), (["--coin"], True), (["--adaptive"], False)])
def test_scale_invariance_through_the_cli(cli, sample, tmp_path, flags, invariant):
    scaled = _rescaled_libsvm(sample / "a9a_train.libsvm", tmp_path)
    _, plain, _ = cli("train", sample / "a9a_train.libsvm", *flags, "--loss", "logistic", "-p", "-", "--quiet")
    _, rescaled, _ = cli("train", scaled, *flags, "--loss", "logistic", "-p", "-", "--quiet")
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


@pytest.mark.parametrize("flags,expected", [
    (["--gd"], dict(adaptive=1, normalized=1, invariant=1, eta=0.5, initial_t=0)),
    (["--adaptive"], dict(adaptive=1, normalized=0, invariant=0, eta=10, initial_t=0)),
    (["--normalized", "--invariant", "-l", "0.3"], dict(adaptive=0, normalized=1, invariant=1, eta=0.3)),
    (["--gd", "--invariant"], dict(adaptive=0, normalized=0, invariant=1, eta=10, initial_t=1)),
    (["--adaptive", "--normalized"], dict(adaptive=1, normalized=1, invariant=0, eta=0.5)),
    (["--invariant", "--initial-t", "4"], dict(invariant=1, eta=10, initial_t=4)),
])
def test_vw_rules_for_the_gd_switches(cli, flags, expected):
    """VW's gd_setup: none of --adaptive/--normalized/--invariant = all three; any =
    exactly those; -l 10 unless both adaptive and normalized; plain SGD starts t at 1."""
    code, _, err = cli("train", *flags, "-f", "m.olm", "--quiet", stdin=b"1 |f a\n0 |f b\n")
    assert code == 0, err
    params = model_file.load("m.olm").params
    assert model_file.load("m.olm").algorithm == "gd"
    assert {k: params[k] for k in expected} == expected
    api = Learner("gd", **{name: 1 for name in ("adaptive", "normalized", "invariant") if f"--{name}" in flags},
                  **({"eta": 0.3} if "-l" in flags else {}), **({"initial_t": 4} if "--initial-t" in flags else {}))
    assert {k: api.params[k] for k in expected} == expected


def test_gd_switches_in_the_api_take_booleans():
    assert Learner("gd", adaptive=True, normalized=False).params["adaptive"] == 1.0
    assert Learner("gd", normalized=True).params["adaptive"] == 0.0
    with pytest.raises(ValueError, match="on or off"):
        Learner("gd", adaptive=2)
    # a model from a file keeps what it was trained with (the rules are for what is given)
    learner = Learner("gd", adaptive=True)
    again = Learner.from_bytes(learner.to_bytes())
    assert again.params == learner.params


def test_vw_sgd_is_olcli_sgd(cli):
    """VW's --sgd (gd with no switch: -l 10, t from 1) is olcli's --sgd -l 10 --initial-t 1
    (unit importances, squared loss: the logistic float32 gate aside)."""
    rng = np.random.default_rng(3)
    lines = "".join(f"{rng.normal():.5f} |f a:{rng.normal():.4f} b:{rng.normal():.4f} c\n" for _ in range(300))
    plain = Learner("gd", adaptive=0, normalized=0, invariant=0)
    assert (plain.params["eta"], plain.params["initial_t"]) == (10.0, 1.0)  # VW's defaults for --sgd
    # (a stable rate: at -l 10 this stream bangs between the label bounds, where rounding decides)
    pairs = [(dict(eta=0.1), dict(eta=0.1, initial_t=1.0)),
             (dict(power_t=0.3, initial_t=2.0, eta=0.05), dict(eta=0.05 * 2.0 ** 0.3, initial_t=2.0, power_t=0.3))]
    for gd_hyper, sgd_hyper in pairs:
        gd_learner = Learner("gd", adaptive=0, normalized=0, invariant=0, **gd_hyper)
        sgd_learner = Learner("sgd", **sgd_hyper)
        a = gd_learner.learn(lines).predictions
        b = sgd_learner.learn(lines).predictions
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
        assert np.std(a) > 0.01
        np.testing.assert_allclose(gd_learner.weights(), sgd_learner.weights(), rtol=1e-12, atol=1e-12)


def test_min_and_max_prediction(cli, tmp_path):
    data = "".join(f"{y} |f a\n" for y in (3.0, 5.0, 4.0, 6.0, 8.0, 2.0, 9.0))
    (tmp_path / "d.vw").write_text(data)
    code, out, err = cli("train", "d.vw", "--sgd", "-l", "5", "--min-prediction", "3.5", "--max-prediction", "4.5",
                         "-p", "-", "-f", "m.olm", "--quiet")
    assert code == 0, err
    predictions = [float(x) for x in out.split()]
    assert min(predictions[1:]) >= 3.5 and max(predictions) <= 4.5 and 4.5 in predictions
    assert predictions[0] == 3.5  # the zero model, clipped up
    # one end given: the other follows the labels seen (VW would keep it at 0)
    code, out, _ = cli("train", "d.vw", "--sgd", "-l", "5", "--max-prediction", "4.5", "-p", "-", "--quiet")
    assert [float(x) for x in out.split()][0] == 0.0 and max(float(x) for x in out.split()) == 4.5
    code, out, _ = cli("train", "d.vw", "--sgd", "-l", "5", "--min-prediction", "3.5", "-p", "-", "--quiet")
    assert min(float(x) for x in out.split()) == 3.5 and max(float(x) for x in out.split()) > 4.5
    # the model keeps the range: test clips, -i refuses another
    _, header, _ = cli("inspect", "m.olm")
    assert b"prediction range: [3.5, 4.5]" in header
    code, out, _ = cli("test", "d.vw", "-i", "m.olm", "-p", "-", "--quiet")
    assert all(3.5 <= float(x) <= 4.5 for x in out.split())
    code, _, err = cli("train", "d.vw", "-i", "m.olm", "--max-prediction", "5", "--quiet")
    assert code == 2 and "max_prediction = 4.5" in err
