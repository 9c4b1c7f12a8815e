import math

import numpy as np
import pytest

from olcli.engine import driver, losses
from olcli.engine.adagrad import G, W
from tests import naive

BITS = 6
ROWS = (1 << BITS) + 1


def sparse_stream(seed, n, loss, scales=(-3, 3)):
    """Seeded sparse examples: a few distinct indices each (plus the constant),
    per-feature scales spanning 10**scales, importance weights including 0."""
    rng = np.random.default_rng(seed)
    feature_scale = 10.0 ** rng.uniform(*scales, size=ROWS)
    feature_scale[-1] = 1.0
    examples = []
    for _ in range(n):
        k = int(rng.integers(1, 8))
        index = np.append(rng.choice(ROWS - 1, size=k, replace=False), ROWS - 1).astype(np.int32)
        value = rng.normal(size=k + 1) * feature_scale[index]
        value[-1] = 1.0
        if loss == "squared":
            label = float(rng.normal() * 3)
        else:
            label = float(rng.choice([-1.0, 1.0]))
        importance = float(rng.choice([0.0, 0.5, 1.0, 1.0, 3.0]))
        base = float(rng.normal() * 0.1)
        examples.append((index, value, label, importance, base))
    return examples


def pack(examples):
    row_ptr = np.zeros(len(examples) + 1, np.int64)
    for e, (index, *_) in enumerate(examples):
        row_ptr[e + 1] = row_ptr[e] + len(index)
    index = np.concatenate([ex[0] for ex in examples])
    value = np.concatenate([ex[1] for ex in examples])
    labels = np.array([ex[2] for ex in examples])
    importance = np.array([ex[3] for ex in examples])
    base = np.array([ex[4] for ex in examples])
    return labels, importance, base, row_ptr, index, value


def run(state, examples, loss, params, learn=True, rounds=None):
    labels, importance, base, row_ptr, index, value = pack(examples)
    predictions = np.empty(len(examples))
    stats = driver.new_stats()
    rounds = np.zeros(len(driver.COUNTER_NAMES)) if rounds is None else rounds
    driver.run_chunk(0, state, params, losses.LOSS_CODES[loss], learn, rounds, len(examples),
                     labels, importance, base, row_ptr, index, value, predictions, stats,
                     np.zeros((2, driver.AUC_BINS)), np.zeros((driver.MAX_PROGRESS_ROWS, 7)))
    return predictions, stats


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
@pytest.mark.parametrize("eta,delta", [(0.3, 1e-6), (0.05, 1.0), (1.0, 0.0)])
def test_adagrad_matches_the_paper_step_by_step(loss, eta, delta):
    examples = sparse_stream(seed=hash((loss, eta)) % 1000, n=300, loss=loss)
    reference = naive.AdaGradDiagonal(ROWS, eta, delta)
    state = np.zeros((ROWS, 2))
    params = np.array([eta, delta])
    rounds = np.zeros(len(driver.COUNTER_NAMES))
    for index, value, label, importance, base in examples:
        (p,), _ = run(state, [(index, value, label, importance, base)], loss, params, rounds=rounds)
        features = dict(zip(index.tolist(), value.tolist()))
        expected = reference.predict(features, base)
        assert p == pytest.approx(expected, rel=1e-9, abs=1e-12)
        if importance > 0:
            reference.learn(features, label, importance, loss, base)
        np.testing.assert_allclose(state[:, W], reference.x, rtol=1e-9, atol=1e-12)
    assert rounds[driver.C_ROUNDS] == sum(1 for ex in examples if ex[3] > 0)
    assert rounds[driver.C_EXAMPLES] == len(examples)


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
def test_one_chunk_equals_example_by_example(loss):
    examples = sparse_stream(seed=7, n=200, loss=loss)
    params = np.array([0.3, 1e-6])
    whole = np.zeros((ROWS, 2))
    predictions, _ = run(whole, examples, loss, params)
    single = np.zeros((ROWS, 2))
    one_by_one = [run(single, [ex], loss, params)[0][0] for ex in examples]
    assert predictions.tolist() == one_by_one
    assert np.array_equal(whole, single)


def test_progressive_loss_is_charged_before_learning():
    examples = sparse_stream(seed=3, n=50, loss="logistic")
    params = np.array([0.3, 1e-6])
    state = np.zeros((ROWS, 2))
    predictions, stats = run(state, examples, "logistic", params)
    expected = sum(h * naive.loss("logistic", p, y) for p, (_, _, y, h, _) in zip(predictions, examples))
    assert stats[driver.S_LOSS] == pytest.approx(expected, rel=1e-12)
    assert stats[driver.S_WEIGHT] == sum(ex[3] for ex in examples)
    assert predictions[0] == examples[0][4]  # first prediction: the zero model plus base


def test_learn_false_never_changes_the_state():
    examples = sparse_stream(seed=5, n=100, loss="squared")
    state = np.random.default_rng(1).normal(size=(ROWS, 2))
    state[:, G] = np.abs(state[:, G])
    before = state.copy()
    run(state, examples, "squared", np.array([0.3, 1e-6]), learn=False)
    assert np.array_equal(state, before)


def test_duplicate_index_is_applied_once_per_occurrence():
    # VW's semantics: each occurrence updates in turn with its own g_i.
    state = np.zeros((ROWS, 2))
    index = np.array([3, 3], np.int32)
    value = np.array([1.0, 2.0])
    run(state, [(index, value, 1.0, 1.0, 0.0)], "squared", np.array([0.5, 0.0]))
    g = 2.0 * (0.0 - 1.0)
    g1, g2 = g * 1.0, g * 2.0
    w = -0.5 * g1 / math.sqrt(g1 * g1)
    w -= 0.5 * g2 / math.sqrt(g1 * g1 + g2 * g2)
    assert state[3, W] == pytest.approx(w, rel=1e-15)


@pytest.mark.parametrize("loss", ["squared", "logistic", "hinge"])
@pytest.mark.parametrize("p", [-1e300, -1e6, -40.0, 0.0, 3.5, 40.0, 1e6, 1e300])
@pytest.mark.parametrize("y", [-1.0, 1.0])
def test_losses_are_finite_and_match_their_definitions(loss, p, y):
    value = losses.loss_value(losses.LOSS_CODES[loss], p, y)
    derivative = losses.loss_derivative(losses.LOSS_CODES[loss], p, y)
    if loss == "squared" and abs(p) > 1e150:
        return  # (p - y)**2 overflows float64 by definition
    assert math.isfinite(value) and math.isfinite(derivative)
    assert value == pytest.approx(naive.loss(loss, p, y), rel=1e-12, abs=1e-300)
    assert derivative == pytest.approx(naive.dloss(loss, p, y), rel=1e-12, abs=1e-300)
