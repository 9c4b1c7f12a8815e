import io

import numpy as np
import pytest

from olcli.engine import driver
from olcli.engine.records import AUC_BINS, new_tally
from olcli.report import ProgressTable, auc_from_histogram, best_constant, progress_records
from tests import naive


def exact_auc(scores, labels):
    positives = [s for s, y in zip(scores, labels) if y == 1]
    negatives = [s for s, y in zip(scores, labels) if y == -1]
    wins = sum((p > n) + 0.5 * (p == n) for p in positives for n in negatives)
    return wins / (len(positives) * len(negatives))


def histogram_of(scores, labels):
    histogram = np.zeros((2, AUC_BINS))
    stats = new_tally().stats
    for s, y in zip(scores, labels):
        driver._account(stats, histogram, 0.0, y, 1.0, s)
    return histogram, stats


@pytest.mark.parametrize("seed", range(5))
def test_binned_auc_is_close_to_exact(seed):
    rng = np.random.default_rng(seed)
    labels = rng.choice([-1.0, 1.0], size=400)
    scores = labels * rng.uniform(0, 1.5) + rng.normal(size=400) * 2
    histogram, _ = histogram_of(scores, labels)
    assert auc_from_histogram(histogram) == pytest.approx(exact_auc(scores, labels), abs=2e-3)


def test_auc_of_tied_scores_is_one_half():
    histogram, _ = histogram_of([0.3] * 10, [1.0, -1.0] * 5)
    assert auc_from_histogram(histogram) == 0.5


def brute_force_constant(loss, labels, weights):
    grid = np.linspace(-5, 5, 20001)
    totals = [sum(w * naive.loss(loss, c, y) for y, w in zip(labels, weights)) for c in grid]
    best = int(np.argmin(totals))
    return grid[best], totals[best] / sum(weights)


@pytest.mark.parametrize("loss,labels", [
    ("squared", [0.5, 2.0, -1.0, 3.0, 1.0]),
    ("logistic", [1.0, -1.0, -1.0, -1.0, 1.0]),
    ("hinge", [1.0, -1.0, -1.0, -1.0, 1.0]),
])
def test_best_constant_minimises_the_loss(loss, labels):
    weights = [1.0, 2.0, 0.5, 1.0, 1.5]
    stats = new_tally().stats
    for y, w in zip(labels, weights):
        driver._account(stats, np.zeros((2, AUC_BINS)), 0.0, y, w, 0.0)
    constant, constant_loss = best_constant(loss, stats)
    _, brute_loss = brute_force_constant(loss, labels, weights)
    assert constant_loss == pytest.approx(brute_loss, abs=1e-6)
    expected_loss = sum(w * naive.loss(loss, constant, y) for y, w in zip(labels, weights)) / sum(weights)
    assert constant_loss == pytest.approx(expected_loss, rel=1e-12)


def test_progress_table_is_vw_shaped():
    rows = np.array([[0.693147, 0.693147, 1, 1.0, -1.0, 0.0, 15],
                     [0.5, 0.306853, 2, 2.0, np.nan, 0.25, 3]])
    stream = io.StringIO()
    ProgressTable(stream).write(progress_records(rows))
    lines = stream.getvalue().splitlines()
    assert lines[0].split() == ["average", "since", "example", "example", "current", "current", "current"]
    assert lines[2].split() == ["0.693147", "0.693147", "1", "1.0", "-1.0000", "0.0000", "15"]
    assert lines[3].split()[4] == "unknown"


@pytest.mark.parametrize("loss,expected", [("logistic", (None, 0.0)), ("hinge", (1.0, 0.0))])
def test_best_constant_with_one_class(loss, expected):
    stats = new_tally().stats
    for _ in range(3):
        driver._account(stats, np.zeros((2, AUC_BINS)), 0.0, 1.0, 1.0, 0.0)
    assert best_constant(loss, stats) == expected


def test_best_constant_of_labels_near_1e200_is_quiet():
    """Squares of labels near 1e200 overflow: the mean is still given, the loss is not a number, and no NumPy
    RuntimeWarning reaches the user's terminal."""
    import math
    import warnings

    stats = new_tally().stats
    for y in (1e200, -1e200, 3e200):
        driver._account(stats, np.zeros((2, AUC_BINS)), 0.0, y, 1.0, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        constant, constant_loss = best_constant("squared", stats)
    assert constant == pytest.approx(1e200) and math.isnan(constant_loss)
