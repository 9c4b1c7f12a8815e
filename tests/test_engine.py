"""The fast kernels against the dense, slow references of tests/naive.py, step by step."""

import math
import zlib

import numpy as np
import pytest

from olcli.engine import losses
from olcli.engine.records import C_ROUNDS, S_LOSS, S_WEIGHT, Batch, new_tally
from olcli.engine.registry import ALGORITHMS
from olcli.learner import Learner
from tests import naive, naive_vw

BITS = 6
ROWS = (1 << BITS) + 1
LOSSES = ["squared", "logistic", "hinge", "absolute", "quantile", "poisson"]

# Parameter variants per algorithm (the registry's defaults fill the rest).
VARIANTS = {
    "adagrad": [{}, {"eta": 0.05, "delta": 1.0, "radius": 0.2}, {"l1": 0.02}, {"l2": 0.5},
                {"eta": 1.0, "delta": 0.0}, {"l1": 0.3, "radius": 0.5}],
    "adagrad-dual": [{}, {"l1": 0.01}, {"eta": 1.0, "delta": 0.0, "l1": 0.2}],
    "ftrl": [{}, {"alpha": 0.1, "beta": 0.5, "l1": 0.5, "l2": 0.1}, {"l1": 2.0}],
    "scinol1": [{}, {"epsilon": 0.1}],
    "scinol2": [{}, {"epsilon": 0.1}],
    "sgd": [{}, {"eta": 0.05}, {"eta": 2.0, "power_t": 0.3, "initial_t": 5.0}, {"power_t": 0.0}],
}
CASES = [(name, variant) for name in naive.REFERENCES for variant in VARIANTS[name]]

# VW's learners, against tests/naive_vw.py: the variants of the VW test cases the
# benchmark runs (vw_tests/INDEX.md 584, 3, 5, 7, 680) and the other switch settings.
VW_VARIANTS = {
    "gd": [{}, {"invariant": 1}, {"initial_t": 1, "adaptive": 1, "invariant": 1}, {"power_t": 0.45},
           {"normalized": 1}, {"adaptive": 1}, {"normalized": 1, "invariant": 1, "power_t": 0.3},
           {"adaptive": 1, "power_t": 0.7, "eta": 0.3}, {"adaptive": 0, "normalized": 0, "invariant": 0},
           {"adaptive": 0, "normalized": 0, "invariant": 0, "eta": 1.0, "initial_t": 4.0, "power_t": 0.3},
           {"initial_t": 10}, {"l1": 0.001, "l2": 0.001}, {"l2": 0.01}, {"l1": 0.01, "eta": 2.0},
           # strong enough that contraction < 1e-9 or gravity > 1e3 fold them into the weights
           {"l2": 0.5}, {"l1": 0.3, "l2": 0.3}, {"l1": 20.0}],
    "coin": [{}, {"alpha": 0.5, "beta": 0.1}],
}
VW_CASES = [(name, variant) for name in VW_VARIANTS for variant in VW_VARIANTS[name]]


def sparse_stream(seed, n, loss, scales=(-3, 3), real_labels=False):
    """Seeded sparse examples: a few distinct indices each plus the constant,
    per-feature scales spanning 10**scales, importance weights including 0,
    and some unlabeled examples."""
    rng = np.random.default_rng(seed)
    feature_scale = 10.0 ** rng.uniform(*scales, size=ROWS)
    feature_scale[-1] = 1.0
    examples = []
    for _ in range(n):
        k = int(rng.integers(1, 8))
        index = np.append(rng.choice(ROWS - 1, size=k, replace=False), ROWS - 1).astype(np.int32)
        value = rng.normal(size=k + 1) * feature_scale[index]
        value[-1] = 1.0
        if loss == "poisson":
            label = float(rng.poisson(2.0))  # a count
        elif loss in ("squared", "absolute", "quantile") or real_labels:
            label = float(rng.normal() * 3)
        else:
            label = float(rng.choice([-1.0, 1.0]))
        if rng.random() < 0.05:
            label = math.nan
        importance = float(rng.choice([0.0, 0.5, 1.0, 1.0, 3.0]))
        base = float(rng.normal() * 0.1)
        examples.append((index, value, label, importance, base))
    return examples


def case_seed(name, loss, variant):
    """A seed fixed per case. Not hash(): str hashes change with every process
    (PYTHONHASHSEED), which made each CI run draw different streams."""
    return zlib.crc32(repr((name, loss, sorted(variant.items()))).encode()) % 10000


def pack(examples):
    row_ptr = np.zeros(len(examples) + 1, np.int64)
    for e, (index, *_) in enumerate(examples):
        row_ptr[e + 1] = row_ptr[e] + len(index)
    return (np.array([ex[2] for ex in examples]), np.array([ex[3] for ex in examples]),
            np.array([ex[4] for ex in examples]), row_ptr,
            np.concatenate([ex[0] for ex in examples]), np.concatenate([ex[1] for ex in examples]))


def learner(name, loss="logistic", params=None, tau=0.3):
    """A learner over a table of ROWS rows (the stream's last row is the constant)."""
    return Learner(name, loss=loss, bits=BITS, quantile_tau=tau, **(params or {}))


def clipped(name, loss):
    return ALGORITHMS[name].unbounded_loss_clipped and loss in losses.UNBOUNDED_LOSSES


def run(learner, examples, learn=True):
    """The examples through the learner's one door (Learner.process): (predictions, stats)."""
    labels, importance, base, row_ptr, index, value = pack(examples)
    tally = new_tally()
    done = learner.process(Batch(labels, importance, base, row_ptr, index, value, np.diff(row_ptr)), learn, tally)
    return done.predictions, tally.stats


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("name,variant", CASES, ids=[f"{n}-{i}" for n, v in VARIANTS.items() for i in range(len(v))])
def test_engine_matches_the_paper_step_by_step(name, variant, loss):
    params = {**ALGORITHMS[name].defaults, **variant}
    tau = 0.3
    clip = clipped(name, loss)
    examples = sparse_stream(seed=case_seed(name, loss, variant), n=150, loss=loss)
    reference = naive.REFERENCES[name](ROWS, params)
    fast = learner(name, loss, variant, tau)
    low, high = (-50.0, 50.0) if loss in ("logistic", "poisson") else (0.0, 0.0)  # VW's initial label range
    for step, (index, value, label, importance, base) in enumerate(examples):
        (p,), _ = run(fast, [(index, value, label, importance, base)])
        features = dict(zip(index.tolist(), value.tolist()))
        if not math.isnan(label):  # every labeled example seen while learning widens the range
            low, high = min(low, label), max(high, label)
        if importance > 0 and not math.isnan(label):
            expected = reference.learn(features, label, importance, loss, tau, base, clip, (low, high))
        else:
            expected = min(max(base + reference.predict(features), low), high) - base
        assert p == pytest.approx(base + expected, rel=1e-9, abs=1e-9), f"prediction {step}"
        got = fast.weights()
        want = np.array(reference.weights())
        scale = max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * scale, err_msg=f"weights after {step}")
    assert fast.model.counters[C_ROUNDS] == reference.t


def test_every_algorithm_has_a_step_by_step_reference():
    # --mix: naive.Mixture, in tests/test_mixture.py
    assert set(ALGORITHMS) == set(naive.REFERENCES) | set(VW_VARIANTS) | {"mix"}


class AbsoluteLoss(naive_vw.QuantileLoss):
    """olcli's absolute loss |p - y|: twice VW's (its quantile loss at tau 0.5),
    so its updates are VW's with twice the step, and its flow stops at y alike."""

    name = "absolute"

    def __init__(self):
        super().__init__(0.5)

    def loss(self, sd, p, y):
        return 2.0 * super().loss(sd, p, y)

    def update(self, p, y, s, h):
        return super().update(p, y, 2.0 * s, h)

    def unsafe_update(self, p, y, s):
        return super().unsafe_update(p, y, 2.0 * s)

    def first_derivative(self, sd, p, y):
        return 2.0 * super().first_derivative(sd, p, y)


def vw_loss(loss, tau):
    return AbsoluteLoss() if loss == "absolute" else naive_vw.make_loss(loss, quantile_tau=tau)


class GradientDescentWithBase(naive_vw.VWGradientDescent):
    """olcli adds the base after the contraction (VW multiplies it by the contraction too)."""

    def raw_prediction(self, features, initial=0.0):
        return initial + super().raw_prediction(features, 0.0)


class CoinWithBase(naive_vw.VWCoin):
    """olcli adds the base to the progressive prediction (VW leaves it out while learning)."""

    def progressive_prediction(self, total, initial):
        return initial + super().progressive_prediction(total, initial)


def vw_reference(name, params, loss, tau):
    """tests/naive_vw.py's learner with olcli's resolved hyper-parameters."""
    if name == "coin":
        return CoinWithBase(vw_loss(loss, tau), alpha=params["alpha"], beta=params["beta"])
    return GradientDescentWithBase(
        vw_loss(loss, tau), adaptive=params["adaptive"] > 0, normalized=params["normalized"] > 0,
        invariant=params["invariant"] > 0, power_t=params["power_t"], initial_t=params["initial_t"],
        learning_rate=params["eta"], l1=params["l1"], l2=params["l2"])


def vw_state(reference, rows):
    """The reference's per-feature state as olcli's table (slots in the module's order)."""
    if isinstance(reference, naive_vw.VWCoin):
        names = ("xt", "zt", "g2", "mx", "we", "mg")
    else:
        names = ("w", "g2", "norm")
    state = np.zeros((rows, len(names)))
    for index, slot in reference.weights.items():
        state[index] = [getattr(slot, n) for n in names]
    return state


def vw_scalars(reference):
    if isinstance(reference, naive_vw.VWCoin):
        return [reference.normalized_sum_norm_x, reference.total_weight]
    return [reference.normalized_sum_norm_x, reference.total_weight, reference.gravity, reference.contraction]


def vw_weights(reference, rows):
    if isinstance(reference, naive_vw.VWCoin):
        return vw_state(reference, rows)[:, 0]
    return np.array([reference.weight(i) for i in range(rows)])


def assert_close(got, want, what):
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * scale, err_msg=what)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("name,variant", VW_CASES,
                         ids=[f"{n}-{i}" for n, v in VW_VARIANTS.items() for i in range(len(v))])
def test_vw_learners_match_naive_vw_step_by_step(name, variant, loss, real_labels=False):
    """--gd and --coin against tests/naive_vw.py (checked against VW 9.11.9 itself):
    every prediction, every slot of the state and the global sums, after every
    example. The stream mixes feature scales over six decades, importance weights
    (0 included), unlabeled examples and a base. Where olcli departs from VW on
    purpose the references are adapted, not the tolerance: the base is added
    outside (GradientDescentWithBase, CoinWithBase), absolute is |p - y|
    (AbsoluteLoss), and an example of importance 0 only widens the label range
    and is predicted, as every olcli learner does (VW's --coin would raise M)."""
    tau = 0.3
    fast = learner(name, loss, variant, tau)
    reference = vw_reference(name, fast.params, loss, tau)
    examples = sparse_stream(seed=case_seed(name, loss, variant), n=150, loss=loss,
                             real_labels=real_labels)
    for step, (index, value, label, importance, base) in enumerate(examples):
        (p,), _ = run(fast, [(index, value, label, importance, base)])
        expected = reference_step(reference, list(zip(index.tolist(), value.tolist())), label, importance, base)
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-9), f"prediction {step}"
        assert_close(fast.model.state, vw_state(reference, ROWS), f"state after {step}")
        assert_close(fast.model.scalars, vw_scalars(reference), f"scalars after {step}")
        assert_close(fast.weights(), vw_weights(reference, ROWS), f"weights after {step}")


@pytest.mark.parametrize("name,variant", [("gd", {}), ("gd", {"adaptive": 1}), ("coin", {})])
def test_hinge_on_real_labels_matches_naive_vw(name, variant):
    """VW's hinge loss takes any real label y: max(0, 1 - y p) (VW test 578 trains
    it on regression labels); the kernels get what the parser now lets through."""
    test_vw_learners_match_naive_vw_step_by_step(name, variant, "hinge", real_labels=True)


def reference_step(reference, features, label, importance, base):
    """One example through a tests/naive_vw.py learner as the kernel takes it: unlabeled
    (NaN) is predicted; importance > 0 is learned; importance 0 has its label seen, then is
    predicted. Returns the prediction."""
    if math.isnan(label):
        return reference.predict(features, base)
    if importance > 0:
        return reference.learn(features, label, importance, base)
    reference.sd.see_label(label)
    return reference.predict(features, base)


def subnormal_denominator_stream(seed, n=120):
    """Examples whose --coin bets divide by a subnormal L M (L M + G) (or one that
    underflows to 0): importance weights of 1e-300 .. 1e-155 (L = |k loss'| on a fresh
    row, with beta 0) and values of 1e-200 .. 1e-155 (M), among ordinary ones, so
    rows move from tiny to ordinary L M and back to tiny rows."""
    rng = np.random.default_rng(seed)
    head = [([0], [1.0], 1.0, 1e-160), ([1], [1.0], -1.0, 1e-170), ([0, 2], [1.0, 3.0], 1.0, 1e-155),
            ([3], [1e-160], 1.0, 1.0), ([3, 4], [1e-160, 1e10], -1.0, 1e-160), ([0, 1, 2], [1.0, 1.0, 1.0], 1.0, 1.0)]
    examples = [(np.array(i, np.int32), np.array(v), y, h, 0.0) for i, v, y, h in head]
    for _ in range(n - len(head)):
        k = int(rng.integers(1, 5))
        index = rng.choice(ROWS - 1, size=k, replace=False).astype(np.int32)
        value = rng.normal(size=k) * 10.0 ** rng.choice([0.0, 0.0, 2.0, -155.0, -160.0, -200.0], size=k)
        importance = float(rng.choice([1.0, 0.5, 1e-155, 1e-160, 1e-170, 1e-300, 0.0]))
        examples.append((index, value, float(rng.choice([-1.0, 1.0])), importance, float(rng.normal() * 0.1)))
    return examples


@pytest.mark.parametrize("loss", ["logistic", "squared", "hinge"])
@pytest.mark.parametrize("variant", [{"beta": 0.0}, {}, {"alpha": 0.5, "beta": 0.0}])
def test_coin_bets_0_where_its_denominator_is_subnormal(variant, loss):
    """--coin's bet is 0 while L M (L M + G) is below the smallest normal double, in the
    kernel as in tests/naive_vw.py's VWCoin: with beta 0 and tiny importance weights, or
    tiny values, that product is subnormal (or 0), where (alpha + wealth) / it overflowed
    and inf * Z put NaN in the state (Z is 0 on a fresh row). After every example: every
    number finite, the same rows betting 0 (the stored weights' zeros, exactly), and the
    predictions, state and sums to the 1e-9 of the test above (not bit for bit: the
    references round some steps differently, e.g. the logistic derivative, on any stream)."""
    fast = learner("coin", loss, variant)
    reference = vw_reference("coin", fast.params, loss, 0.3)
    for step, (index, value, label, importance, base) in enumerate(subnormal_denominator_stream(7)):
        (p,), _ = run(fast, [(index, value, label, importance, base)])
        expected = reference_step(reference, list(zip(index.tolist(), value.tolist())), label, importance, base)
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-9), f"prediction {step}"
        assert np.isfinite(fast.model.state).all() and np.isfinite(fast.model.scalars).all(), f"after {step}"
        want = vw_state(reference, ROWS)
        assert np.array_equal(fast.model.state[:, 0] == 0.0, want[:, 0] == 0.0), f"rows betting 0 after {step}"
        assert_close(fast.model.state, want, f"state after {step}")
        assert_close(fast.model.scalars, vw_scalars(reference), f"scalars after {step}")


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_one_chunk_equals_example_by_example(name):
    examples = sparse_stream(seed=7, n=200, loss="logistic")
    whole = learner(name)
    predictions, _ = run(whole, examples)
    single = learner(name)
    one_by_one = [run(single, [ex])[0][0] for ex in examples]
    assert predictions.tolist() == one_by_one
    assert np.array_equal(whole.model.state, single.model.state)


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_learn_false_never_changes_the_state(name):
    fast = learner(name)
    run(fast, sparse_stream(seed=4, n=100, loss="logistic"))
    before, counters = fast.model.state.copy(), fast.model.counters.copy()
    run(fast, sparse_stream(seed=5, n=100, loss="logistic"), learn=False)
    assert np.array_equal(fast.model.state, before) and np.array_equal(fast.model.counters, counters)


def test_progressive_loss_is_charged_before_learning():
    examples = [ex for ex in sparse_stream(seed=3, n=60, loss="logistic") if not math.isnan(ex[2])]
    predictions, stats = run(learner("adagrad"), examples)
    expected = sum(h * naive.loss("logistic", p, y) for p, (_, _, y, h, _) in zip(predictions, examples))
    assert stats[S_LOSS] == pytest.approx(expected, rel=1e-12)
    assert stats[S_WEIGHT] == sum(ex[3] for ex in examples)
    assert predictions[0] == examples[0][4]  # first prediction: the zero model plus base


def test_lazy_l1_equals_dense_shrinkage_over_long_gaps():
    # A feature seen once, then absent for many rounds, is shrunk to exactly the
    # dense algorithm's value (here: to zero after enough rounds) when read again.
    params = {**ALGORITHMS["adagrad"].defaults, "l1": 0.001}
    rare = (np.array([5, ROWS - 1], np.int32), np.array([1.0, 1.0]), 1.0, 1.0, 0.0)
    common = (np.array([7, ROWS - 1], np.int32), np.array([1.0, 1.0]), -1.0, 1.0, 0.0)
    stream = [rare] + [common] * 500 + [rare]
    fast = learner("adagrad", params={"l1": 0.001})
    reference = naive.REFERENCES["adagrad"](ROWS, params)
    for step, ex in enumerate(stream):
        (p,), _ = run(fast, [ex])
        expected = reference.learn(dict(zip(ex[0].tolist(), ex[1].tolist())), ex[2], ex[3], "logistic")
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-12)
    got = fast.weights()
    np.testing.assert_allclose(got, reference.weights(), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("p", [-1e300, -1e6, -40.0, 0.0, 3.5, 40.0, 1e6, 1e300])
@pytest.mark.parametrize("y", [-1.0, 1.0])
def test_losses_are_finite_and_match_their_definitions(loss, p, y):
    if loss == "poisson":
        y = 3.0 if y > 0 else 0.0  # a count
    code = losses.LOSS_CODES[loss]
    value = losses.loss_value(code, p, y, 0.3)
    derivative = losses.loss_derivative(code, p, y, 0.3)
    if loss == "squared" and abs(p) > 1e150:
        return  # (p - y)**2 overflows float64 by definition
    assert math.isfinite(value) and math.isfinite(derivative)
    assert value == pytest.approx(naive.loss(loss, p, y, 0.3), rel=1e-12, abs=1e-300)
    assert derivative == pytest.approx(naive.dloss(loss, p, y, 0.3), rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("loss", ["quantile", "absolute"])
def test_derivative_at_the_kink_is_zero(loss):
    # VW's quantileloss::first_derivative: 0 at p = y (a prediction clipped to a label
    # bound meets that label exactly); --coin learns from every example, so it matters.
    code = losses.LOSS_CODES[loss]
    assert losses.loss_derivative(code, 0.7, 0.7, 0.3) == 0.0
    assert losses.loss_derivative(code, 0.7, 0.8, 0.3) < 0.0 < losses.loss_derivative(code, 0.8, 0.7, 0.3)
