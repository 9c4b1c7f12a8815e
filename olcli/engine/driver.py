"""The chunk loop: progressive validation, then learning, one example at a time.

For each example the model predicts first (progressive validation: the loss is
charged before the example is learned from), then, when learning and the example
has a label and positive importance, the algorithm updates with the scalar
derivative ``g = importance * dloss/dp``.

Statistics go into a float64 array with the named slots below; progress rows
(VW's table, printed at doubling example weight) go into ``progress``.
"""

import numpy as np
from numba import njit

from olcli.engine import adagrad, adagrad_dual, ftrl, scinol1, scinol2, sgd
from olcli.engine.losses import loss_derivative, loss_value, sigmoid
from olcli.model import COUNTER_NAMES

# Algorithm codes (olcli/engine/registry.py maps names to them).
N_ALGORITHMS = 6
ADAGRAD, ADAGRAD_DUAL, FTRL, SCINOL1, SCINOL2, SGD = range(N_ALGORITHMS)

# Loss parameters (one array).
L_TAU = 0    # quantile level
L_CLIP = 1   # 1: clip dloss/dp to [-1, 1] (ScInOL with an unbounded loss)

# Run statistics (one array, named slots).
S_EXAMPLES = 0        # examples seen, labeled or not
S_WEIGHT = 1          # importance-weighted count of labeled examples
S_UNLABELED_WEIGHT = 2
S_LOSS = 3            # importance-weighted progressive loss sum
S_LABEL_SUM = 4       # importance-weighted label sum
S_LABEL_SQUARES = 5   # importance-weighted squared-label sum (best constant, squared loss)
S_POSITIVE = 6        # importance weight of label +1
S_NEGATIVE = 7        # importance weight of label -1
S_OTHER_LABELS = 8    # labeled examples whose label is not -1/+1
S_CORRECT = 9         # importance weight of sign(prediction) == label, for -1/+1 labels
S_FEATURES = 10       # total feature number
S_NEXT_DUMP = 11      # example weight at which the next progress row is due
S_SINCE_LOSS = 12
S_SINCE_WEIGHT = 13
S_LABELED = 14        # labeled examples
S_LOG_LOSS = 15       # multiclass: importance-weighted log loss of the class probabilities
S_DIVERGED = 16       # 1 + the chunk position of the example whose prediction was NaN/inf; 0 = fine
N_STATS = 17

# The model's lifetime counters (saved in its header), updated example by example
# so that a run continued with -i adds up exactly as one long run does.
C_ROUNDS = COUNTER_NAMES.index("rounds")
C_EXAMPLES = COUNTER_NAMES.index("examples")
C_LABELED = COUNTER_NAMES.index("labeled_examples")
C_WEIGHT = COUNTER_NAMES.index("weighted_examples")
C_LABEL_SUM = COUNTER_NAMES.index("weighted_labels")
C_LOSS = COUNTER_NAMES.index("loss_sum")
C_FEATURES = COUNTER_NAMES.index("total_features")

# Progress row columns.
R_AVERAGE_LOSS, R_SINCE_LAST, R_COUNTER, R_WEIGHT, R_LABEL, R_PREDICTION, R_FEATURES = range(7)
N_PROGRESS_COLUMNS = 7
MAX_PROGRESS_ROWS = 128

AUC_BINS = 1 << 16

# Holdout (--passes): one array per pass, named slots.
H_PERIOD = 0        # every H_PERIOD-th example of the data is held out; 0 = no holdout
H_SEEN = 1          # examples of this pass processed so far
H_ROWS = 2          # 1: progress rows report the holdout loss (passes after the first)
H_LOSS = 3          # importance-weighted loss of held-out examples in this pass
H_WEIGHT = 4
H_SINCE_LOSS = 5
H_SINCE_WEIGHT = 6
N_HOLDOUT = 7


def new_stats():
    stats = np.zeros(N_STATS)
    stats[S_NEXT_DUMP] = 1.0
    return stats


def new_holdout(period=0, report_rows=False):
    holdout = np.zeros(N_HOLDOUT)
    holdout[H_PERIOD] = period
    holdout[H_ROWS] = 1.0 if report_rows else 0.0
    return holdout


# The switches below are inlined into kernels compiled for one algorithm (a
# closure constant, see _kernels), so Numba prunes the other branches: a run
# compiles and loads only the algorithm it uses.

@njit(inline="always")
def _predict(algorithm, state, index, value, lo, hi, offset, params, rounds, learning):
    if algorithm == ADAGRAD:
        return adagrad.predict(state, index, value, lo, hi, offset, params, rounds, learning)
    if algorithm == ADAGRAD_DUAL:
        return adagrad_dual.predict(state, index, value, lo, hi, offset, params, rounds, learning)
    if algorithm == FTRL:
        return ftrl.predict(state, index, value, lo, hi, offset, params, rounds, learning)
    if algorithm == SCINOL1:
        return scinol1.predict(state, index, value, lo, hi, offset, params, rounds, learning)
    if algorithm == SCINOL2:
        return scinol2.predict(state, index, value, lo, hi, offset, params, rounds, learning)
    return sgd.predict(state, index, value, lo, hi, offset, params, rounds, learning)


@njit(inline="always")
def _update(algorithm, state, index, value, lo, hi, offset, g, params, rounds):
    if algorithm == ADAGRAD:
        adagrad.update(state, index, value, lo, hi, offset, g, params, rounds)
    elif algorithm == ADAGRAD_DUAL:
        adagrad_dual.update(state, index, value, lo, hi, offset, g, params, rounds)
    elif algorithm == FTRL:
        ftrl.update(state, index, value, lo, hi, offset, g, params, rounds)
    elif algorithm == SCINOL1:
        scinol1.update(state, index, value, lo, hi, offset, g, params, rounds)
    elif algorithm == SCINOL2:
        scinol2.update(state, index, value, lo, hi, offset, g, params, rounds)
    else:
        sgd.update(state, index, value, lo, hi, offset, g, params, rounds)


@njit(inline="always")
def _weight(algorithm, state, i, params, rounds):
    if algorithm == ADAGRAD:
        return adagrad.weight(state, i, params, rounds)
    if algorithm == ADAGRAD_DUAL:
        return adagrad_dual.weight(state, i, params, rounds)
    if algorithm == FTRL:
        return ftrl.weight(state, i, params, rounds)
    if algorithm == SCINOL1:
        return scinol1.weight(state, i, params, rounds)
    if algorithm == SCINOL2:
        return scinol2.weight(state, i, params, rounds)
    return sgd.weight(state, i, params, rounds)


@njit(inline="always")
def count_loss(stats, loss, label, weight):
    """A labeled example's progressive loss and label, for the binary and the
    multiclass kernels alike."""
    stats[S_LABELED] += 1.0
    stats[S_WEIGHT] += weight
    stats[S_LOSS] += weight * loss
    stats[S_SINCE_LOSS] += weight * loss
    stats[S_SINCE_WEIGHT] += weight
    stats[S_LABEL_SUM] += weight * label


@njit(inline="always")
def _account(stats, auc_histogram, loss, label, weight, p):
    """Progressive-validation bookkeeping for one labeled example."""
    count_loss(stats, loss, label, weight)
    stats[S_LABEL_SQUARES] += weight * label * label
    if label == 1.0 or label == -1.0:
        if label == 1.0:
            stats[S_POSITIVE] += weight
        else:
            stats[S_NEGATIVE] += weight
        if (p > 0.0 and label == 1.0) or (p <= 0.0 and label == -1.0):
            stats[S_CORRECT] += weight
        b = int(sigmoid(p) * AUC_BINS)
        if b >= AUC_BINS:
            b = AUC_BINS - 1
        auc_histogram[0 if label == 1.0 else 1, b] += weight
    else:
        stats[S_OTHER_LABELS] += 1.0


@njit(inline="always")
def start_example(holdout, learn, h, y):
    """(held out, learning) for the next example of the pass: every H_PERIOD-th is
    held out; an example is learned from when learning, labeled, with positive
    importance, and not held out."""
    holdout[H_SEEN] += 1.0
    period = holdout[H_PERIOD]
    held_out = period > 0.0 and holdout[H_SEEN] % period == 0.0
    return held_out, learn and h > 0.0 and not np.isnan(y) and not held_out


@njit(inline="always")
def count_example(stats, counters, learn, features):
    stats[S_EXAMPLES] += 1.0
    stats[S_FEATURES] += features
    if learn:
        counters[C_EXAMPLES] += 1.0
        counters[C_FEATURES] += features


@njit(inline="always")
def count_labeled(holdout, counters, learn, held_out, h, y, example_loss):
    """Holdout sums and the model's lifetime counters for a labeled example."""
    if held_out:
        holdout[H_LOSS] += h * example_loss
        holdout[H_WEIGHT] += h
        holdout[H_SINCE_LOSS] += h * example_loss
        holdout[H_SINCE_WEIGHT] += h
    if learn:
        counters[C_LABELED] += 1.0
        counters[C_WEIGHT] += h
        counters[C_LABEL_SUM] += h * y
        counters[C_LOSS] += h * example_loss


@njit
def progress_row(progress, n_rows, stats, holdout, label, prediction, features):
    """VW's table: a row each time the example weight reaches the next power of two.
    Rows report the holdout loss when H_ROWS is set (passes after the first)."""
    seen = stats[S_WEIGHT] + stats[S_UNLABELED_WEIGHT]
    if seen < stats[S_NEXT_DUMP] or n_rows >= MAX_PROGRESS_ROWS:
        return n_rows
    row = progress[n_rows]
    if holdout[H_ROWS] > 0.0:
        row[R_AVERAGE_LOSS] = holdout[H_LOSS] / holdout[H_WEIGHT] if holdout[H_WEIGHT] > 0 else np.nan
        row[R_SINCE_LAST] = (holdout[H_SINCE_LOSS] / holdout[H_SINCE_WEIGHT]
                             if holdout[H_SINCE_WEIGHT] > 0 else np.nan)
        holdout[H_SINCE_LOSS] = 0.0
        holdout[H_SINCE_WEIGHT] = 0.0
    else:
        row[R_AVERAGE_LOSS] = stats[S_LOSS] / stats[S_WEIGHT] if stats[S_WEIGHT] > 0 else np.nan
        row[R_SINCE_LAST] = (stats[S_SINCE_LOSS] / stats[S_SINCE_WEIGHT]
                             if stats[S_SINCE_WEIGHT] > 0 else np.nan)
    row[R_COUNTER] = stats[S_EXAMPLES]
    row[R_WEIGHT] = seen
    row[R_LABEL] = label
    row[R_PREDICTION] = prediction
    row[R_FEATURES] = features
    stats[S_SINCE_LOSS] = 0.0
    stats[S_SINCE_WEIGHT] = 0.0
    while stats[S_NEXT_DUMP] <= seen:
        stats[S_NEXT_DUMP] *= 2.0
    return n_rows + 1


def _kernels(algorithm):
    """run_chunk and weights_at compiled for one algorithm (a closure constant;
    each algorithm is its own cache entry)."""

    @njit(cache=True, nogil=True)
    def run_chunk(state, params, loss, loss_params, learn, counters,
                  n_examples, labels, importance, base, row_ptr, index, value, feature_count,
                  predictions, stats, auc_histogram, progress, holdout):
        """Predict (and learn from, when ``learn``) examples 0..n_examples-1.

        ``counters`` holds the model's lifetime counters (C_* slots); they change
        only when learning. An example is learned from when learning and it has a
        label and positive importance; only then may the algorithm change state
        while predicting (ScInOL raises M first). With holdout (H_PERIOD > 0) every
        H_PERIOD-th example of the pass is scored but never learned from; its loss
        goes to the pass's holdout sums. Returns the number of progress rows written.
        """
        tau = loss_params[L_TAU]
        clip = loss_params[L_CLIP] > 0.0
        n_rows = np.int64(0)  # not 0: a literal would compile progress_row twice
        for e in range(n_examples):
            lo = row_ptr[e]
            hi = row_ptr[e + 1]
            y = labels[e]
            h = importance[e]
            held_out, learning = start_example(holdout, learn, h, y)
            p = base[e] + _predict(algorithm, state, index, value, lo, hi, 0, params,
                                   counters[C_ROUNDS], learning)
            predictions[e] = p
            if not np.isfinite(p):  # diverged: stop before this example counts or teaches anything
                stats[S_DIVERGED] = e + 1
                return n_rows
            count_example(stats, counters, learn, feature_count[e])
            if np.isnan(y):
                stats[S_UNLABELED_WEIGHT] += h
            else:
                example_loss = loss_value(loss, p, y, tau)
                _account(stats, auc_histogram, example_loss, y, h, p)
                count_labeled(holdout, counters, learn, held_out, h, y, example_loss)
                if learn:
                    if learning:
                        derivative = loss_derivative(loss, p, y, tau)
                        if clip:
                            derivative = min(max(derivative, -1.0), 1.0)
                        _update(algorithm, state, index, value, lo, hi, 0, h * derivative, params,
                                counters[C_ROUNDS])
                        counters[C_ROUNDS] += 1.0
            n_rows = progress_row(progress, n_rows, stats, holdout, y, p, feature_count[e])
        return n_rows

    @njit(cache=True)
    def weights_at(state, params, rounds, rows):
        out = np.empty(len(rows))
        for k in range(len(rows)):
            out[k] = _weight(algorithm, state, rows[k], params, rounds)
        return out

    return run_chunk, weights_at


_KERNELS = [_kernels(code) for code in range(N_ALGORITHMS)]


def run_chunk(algorithm, *arguments):
    """``run_chunk(algorithm, state, params, loss, loss_params, learn, counters,
    n_examples, labels, importance, base, row_ptr, index, value, feature_count,
    predictions, stats, auc_histogram, progress, holdout)``: the kernel above,
    compiled for ``algorithm`` (an engine code). It releases the GIL."""
    return _KERNELS[algorithm][0](*arguments)


def weights_at(algorithm, state, params, rounds, rows):
    """The current weights of the given rows (each module's weight(), which
    leaves the state unchanged)."""
    return _KERNELS[algorithm][1](state, params, rounds, np.asarray(rows, np.int64))


def weights(algorithm, state, params, rounds):
    """Every row's current weight (lazy shrinkage paid, on-demand weights computed)."""
    return weights_at(algorithm, state, params, rounds, np.arange(state.shape[0]))
