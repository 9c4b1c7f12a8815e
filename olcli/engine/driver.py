"""The example loop: progressive validation, then learning, one example at a time.

For each example the model predicts first (progressive validation: the loss is
charged before the example is learned from), then, when learning and the example
has a label and positive importance, the algorithm updates with the scalar
derivative ``g = importance * dloss/dp``.

The loops here are generic: they take an algorithm's ``predict`` and ``update``
kernels as arguments. Each algorithm module calls them from its own cached entry
points (``run_chunk``, ``run_chunk_multiclass``, ``weights_at``): Numba's on-disk
cache keeps a module-level function that names its own module's kernels, but not
a closure over them nor a kernel passed in from Python, so the entry points live
beside the kernels they compile. A run compiles and loads only the algorithm it
uses. The records (Table, Settings, Batch, Tally) and their slots are in
records.py.
"""

import numpy as np
from olcli.engine.jit import njit

from olcli.engine.borrowed import borrowed, lend_batch, lend_settings, lend_table, lend_tally
from olcli.engine.losses import loss_derivative, loss_value, sigmoid
from olcli.engine.records import (
    AUC_BINS, C_EXAMPLES, C_MAX_LABEL, C_MIN_LABEL, C_FEATURES, C_LABEL_SUM, C_LABELED, C_LOSS, C_ROUNDS, C_WEIGHT, H_LOSS, H_PERIOD,
    H_ROWS, H_SEEN, H_SINCE_LOSS, H_SINCE_WEIGHT, H_WEIGHT, MAX_PROGRESS_ROWS, R_AVERAGE_LOSS, R_COUNTER,
    R_FEATURES, R_LABEL, R_PREDICTION, R_SINCE_LAST, R_WEIGHT, S_CORRECT, S_DIVERGED, S_DUMP_FACTOR, S_DUMP_STEP,
    S_EXAMPLES, S_FEATURES, S_LABEL_SQUARES, S_LABEL_SUM, S_LABELED, S_LOSS, S_NEGATIVE, S_NEXT_DUMP, S_OTHER_LABELS, S_POSITIVE,
    S_SINCE_LOSS, S_SINCE_WEIGHT, S_UNLABELED_WEIGHT, S_WEIGHT)


@njit(inline="always")
def count_loss(stats, loss, label, weight):
    """A labeled example's progressive loss and label, for the binary and the
    multiclass loops alike."""
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
    held out, or with H_PERIOD = -N (VW's --holdout_after N) every one after the
    pass's first N; an example is learned from when learning, labeled, with
    positive importance, and not held out."""
    holdout[H_SEEN] += 1.0
    period = holdout[H_PERIOD]
    held_out = (period > 0.0 and holdout[H_SEEN] % period == 0.0) or (period < 0.0 and holdout[H_SEEN] > -period)
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
    elif learn:  # a held-out example is not among the examples the model learned from
        counters[C_LABELED] += 1.0
        counters[C_WEIGHT] += h
        counters[C_LABEL_SUM] += h * y
        counters[C_LOSS] += h * example_loss


@njit(inline="always")
def widen_label_range(counters, settings, y):
    """VW's label range (shared_data min_label/max_label, its set_minmax): every
    labeled example seen while learning widens it before it is predicted, held
    out or not."""
    if y < counters[C_MIN_LABEL]:
        counters[C_MIN_LABEL] = y
    if y > counters[C_MAX_LABEL]:
        counters[C_MAX_LABEL] = y


@njit(inline="always")
def clip_range(counters, settings):
    """(low, high) of VW's finalize_prediction: the label range seen, or
    --min-prediction/--max-prediction where given. Decision: an end not given keeps
    following the labels (VW turns set_minmax off as soon as either is given, so the
    other end stays at its start, 0: `--min_prediction 0` alone clips every
    prediction to 0)."""
    low = counters[C_MIN_LABEL] if np.isnan(settings.min_prediction) else settings.min_prediction
    high = counters[C_MAX_LABEL] if np.isnan(settings.max_prediction) else settings.max_prediction
    return low, high


@njit(inline="always")
def clip_to(p, low, high):
    """p clipped to [low, high] (low first, as VW)."""
    if p < low:
        return low
    if p > high:
        return high
    return p


@njit(inline="always")
def clip_prediction(p, counters, settings):
    """VW's finalize_prediction: the prediction clipped to ``clip_range``. (A loop that
    clips several predictions of one example takes the range once: an array passed to
    an inlined call costs its reference counts each time.)"""
    low, high = clip_range(counters, settings)
    return clip_to(p, low, high)


@njit(inline="always")
def most_features(row_ptr, n):
    """The most features one of the first n examples has (row pointers ``row_ptr``): the
    rows of a per-feature scratch."""
    most = 0
    for e in range(n):
        most = max(most, row_ptr[e + 1] - row_ptr[e])
    return most


@njit(inline="always")
def account_binary(tally, counters, settings, held_out, features, y, h, p):
    """An example's bookkeeping after its prediction p (the report's sums, the holdout's,
    the counters); returns whether it is labeled. VW: a held-out labeled example counts
    only in the holdout sums. Shared by run_binary and the mixture's loop."""
    stats = tally.stats
    labeled = not np.isnan(y)
    if not (held_out and labeled):
        count_example(stats, counters, settings.learn, features)
    if not labeled:
        stats[S_UNLABELED_WEIGHT] += h
    else:
        example_loss = loss_value(settings.loss, p, y, settings.tau)
        if not held_out:
            _account(stats, tally.auc, example_loss, y, h, p)
        count_labeled(tally.holdout, counters, settings.learn, held_out, h, y, example_loss)
    return labeled


@njit
def progress_row(progress, n_rows, stats, holdout, label, prediction, features):
    """VW's table: a row each time the example weight reaches S_NEXT_DUMP, which then
    becomes the weight times S_DUMP_FACTOR (VW's default: 2, a row at each doubling) or,
    with VW's -P N (an integer), the weight plus N (S_DUMP_STEP), as VW's
    update_dump_interval. Rows report the holdout loss when H_ROWS is set (passes
    after the first)."""
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
    if stats[S_DUMP_STEP] > 0.0:
        stats[S_NEXT_DUMP] = seen + stats[S_DUMP_STEP]
    else:
        stats[S_NEXT_DUMP] = seen * stats[S_DUMP_FACTOR]
    return n_rows + 1


@njit(inline="always")  # the dispatcher arguments must be inlined for the entry point to be cached
def run_binary(predict, update, table, settings, batch, tally, predictions):
    """Predict (and learn from, when ``settings.learn``) every example of ``batch``
    with one algorithm's ``predict``/``update`` kernels.

    ``table.counters`` holds the model's lifetime counters (C_* slots); they change
    only when learning. An example is learned from when learning and it has a
    label and positive importance; only then may the algorithm change state
    while predicting (ScInOL raises M first; --coin adds the example, weighted
    by its importance ``h``, to its running norm before it predicts). The prediction is clipped to the
    label range (VW's rule, clip_prediction) and the loss and its derivative are
    taken there. With holdout (H_PERIOD > 0) every H_PERIOD-th example of the
    pass is scored but never learned from; its loss goes to the pass's holdout
    sums and, as in VW (shared_data::update), nowhere else: a held-out labeled
    example is not in the examples, features, weights, labels or progressive
    loss of ``stats`` (nor in the model's counters). Returns the number of
    progress rows written. The loop works on borrowed views of the records' arrays
    (engine/borrowed.py): no reference counting in it.
    """
    table, settings, batch, tally = lend_table(table), lend_settings(settings), lend_batch(batch), lend_tally(tally)
    predictions = borrowed(predictions)
    counters = table.counters
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    learn = settings.learn
    index, value = batch.index, batch.value
    n_rows = np.int64(0)  # not 0: a literal would compile progress_row twice
    for e in range(len(batch.labels)):
        lo = batch.row_ptr[e]
        hi = batch.row_ptr[e + 1]
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learning = start_example(holdout, learn, h, y)
        if learn and not np.isnan(y):
            widen_label_range(counters, settings, y)
        p = batch.base[e] + predict(table, settings, index, value, lo, hi, 0, learning, h)
        predictions[e] = p
        if not np.isfinite(p):  # diverged: stop before this example counts or teaches anything
            stats[S_DIVERGED] = e + 1
            return n_rows
        p = clip_prediction(p, counters, settings)
        predictions[e] = p
        if account_binary(tally, counters, settings, held_out, batch.feature_count[e], y, h, p) and learning:
            derivative = loss_derivative(settings.loss, p, y, settings.tau)
            if settings.clip:
                derivative = min(max(derivative, -1.0), 1.0)
            update(table, settings, index, value, lo, hi, 0, p, y, h, h * derivative)
            counters[C_ROUNDS] += 1.0
        n_rows = progress_row(progress, n_rows, stats, holdout, y, p, batch.feature_count[e])
    return n_rows


@njit(inline="always")  # the dispatcher arguments must be inlined for the entry point to be cached
def weights_loop(weight, table, settings, rows):
    """The current weights of the given rows (an algorithm's weight(), which
    leaves the state unchanged)."""
    out = np.empty(len(rows))
    for k in range(len(rows)):
        out[k] = weight(table, settings, rows[k])
    return out
