"""K classes: one-against-all (``--oaa K``) and multinomial logistic (``--softmax K``).

The state holds K blocks of ``block_rows`` rows, one per class, so class k's
score is the univariate algorithm's prediction on block k (offset
``k * block_rows``). Each example is one round for all classes:

- OAA: class k learns the binary problem "label == k" (y_k = +1, else -1)
  with the chosen loss, g_k = importance * dloss(p_k, y_k).
- softmax: the loss is the cross entropy of softmax(p), whose gradient is
  g_k = importance * (softmax(p)_k - [k == label]) (|g_k| <= 1).

For ScInOL this is exactly the paper's Appendix G (Algorithms 3 and 4): K
copies per coordinate coupled only through g_t, with M_i shared by all
classes; every class sees every example, so the per-block copies of M_i are
always equal to the shared one.

Progressive loss: the multiclass 0/1 error of argmax_k p_k (ties: lowest k);
also the multiclass log loss, of softmax(p) for --softmax and of the
normalized sigmoids sigma(p_k) / sum_j sigma(p_j) for OAA (VW's --probabilities).
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine.borrowed import borrowed, lend_batch, lend_settings, lend_table, lend_tally
from olcli.engine.driver import count_example, count_labeled, count_loss, progress_row, start_example
from olcli.engine.losses import log1p_exp, loss_derivative, sigmoid
from olcli.engine.records import C_ROUNDS, S_CORRECT, S_DIVERGED, S_LOG_LOSS, S_UNLABELED_WEIGHT


@njit(cache=True)
def log_probabilities(scores, softmax, out):
    """out[k] = log probability of class k (softmax, or normalized sigmoids for OAA)."""
    n = len(scores)
    if softmax:
        top = scores.max()
        total = 0.0
        for k in range(n):
            total += math.exp(scores[k] - top)
        log_total = top + math.log(total)
        for k in range(n):
            out[k] = scores[k] - log_total
        return
    total = 0.0
    for k in range(n):
        total += sigmoid(scores[k])
    for k in range(n):
        out[k] = -log1p_exp(-scores[k]) - math.log(total)  # log sigma(p) = -log(1 + e^-p)


@njit(inline="always")
def _oaa_log_probability(scores, label):
    """``log_probabilities(scores, False, out)[label]``, the same arithmetic for that class
    only: -log(1 + e^-p_label) - log(sum_k sigma(p_k)). (A label of -1 is class K's, by the
    index's wrap-around, as there.)"""
    total = 0.0
    for k in range(len(scores)):
        total += sigmoid(scores[k])
    return -log1p_exp(-scores[label]) - math.log(total)


@njit(inline="always")
def class_gradients(scores, label, log_probs, softmax, loss, tau, clip, g):
    """g[k] = dloss/dp_k of every class for the true class ``label`` (0-based):
    softmax(p)_k - [k == label] (``log_probs`` the softmax's logs), or the binary
    loss of class k against label +1/-1 (OAA; clipped to [-1, 1] when ``clip``)."""
    for k in range(len(scores)):
        if softmax:
            g[k] = math.exp(log_probs[k]) - (1.0 if k == label else 0.0)
        else:
            derivative = loss_derivative(loss, scores[k], 1.0 if k == label else -1.0, tau)
            g[k] = min(max(derivative, -1.0), 1.0) if clip else derivative


@njit(inline="always")
def account_multiclass(tally, counters, settings, held_out, features, y, h, scores, best, log_probs):
    """An example's bookkeeping after its class scores (best: the predicted class,
    0-based): the 0/1 error, accuracy and multiclass log loss, the holdout's sums, the
    counters; with --softmax ``log_probs`` receives the scores' log probabilities (one
    against all needs only the label's: ``_oaa_log_probability``). Returns the label
    (0-based; -1 for the label 0, "no class", whose log probability is then class K's
    by the index's wrap-around, kernel_calls._vw_log_loss_outside; also -1, unused, for an
    unlabeled example: callers test the label y). VW: a held-out labeled example counts
    only in the holdout sums. Shared by run_multiclass and the mixture's loop."""
    stats = tally.stats
    if not (held_out and not np.isnan(y)):
        count_example(stats, counters, settings.learn, features)
    if np.isnan(y):
        stats[S_UNLABELED_WEIGHT] += h
        return np.int64(-1)
    label = np.int64(int(y) - 1)
    error = 0.0 if best == label else 1.0
    if settings.softmax:   # every class's (the caller's gradients are made of them)
        log_probabilities(scores, True, log_probs)
        label_log_prob = log_probs[label]
    else:   # the label's only: log_probabilities' number for it, without the other K - 1 logs
        label_log_prob = _oaa_log_probability(scores, label)
    if not held_out:
        count_loss(stats, error, y, h)
        stats[S_CORRECT] += h * (1.0 - error)
        stats[S_LOG_LOSS] -= h * label_log_prob
    count_labeled(tally.holdout, counters, settings.learn, held_out, h, y, error)
    return label


@njit(inline="always")  # the dispatcher arguments must be inlined for the entry point to be cached
def run_multiclass(predict, update, table, settings, batch, tally, predictions, scores):
    """Like driver.run_binary for K classes; ``scores[e, k]`` receives p_k and
    ``predictions[e]`` the predicted class (1..K). Returns progress rows written.
    Class scores are not clipped (the label range is of class numbers, and
    clipping would make ties of the argmax). Borrowed views, as run_binary's."""
    table, settings, batch, tally = lend_table(table), lend_settings(settings), lend_batch(batch), lend_tally(tally)
    predictions, scores = borrowed(predictions), borrowed(scores)
    counters = table.counters
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    learn, softmax = settings.learn, settings.softmax
    n_classes, block_rows = settings.classes, settings.block_rows
    index, value = batch.index, batch.value
    log_probs = np.empty(n_classes)
    g = np.empty(n_classes)
    n_rows = np.int64(0)  # not 0: a literal would compile progress_row twice
    for e in range(len(batch.labels)):
        lo = batch.row_ptr[e]
        hi = batch.row_ptr[e + 1]
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learning = start_example(holdout, learn, h, y)
        best = np.int64(0)
        for k in range(n_classes):
            scores[e, k] = batch.base[e] + predict(table, settings, index, value, lo, hi, k * block_rows, learning, h)
            if scores[e, k] > scores[e, best]:
                best = k
        predictions[e] = best + 1
        if not np.all(np.isfinite(scores[e])):  # diverged: stop before this example counts
            stats[S_DIVERGED] = e + 1
            return n_rows
        label = account_multiclass(tally, counters, settings, held_out, batch.feature_count[e], y, h, scores[e], best,
                                   log_probs)
        if learning and not np.isnan(y):
            class_gradients(scores[e], label, log_probs, softmax, settings.loss, settings.tau, settings.clip, g)
            for k in range(n_classes):
                # OAA: class k's binary label; softmax has none (NaN): its gradient is g[k]
                y_k = (1.0 if k == label else -1.0) if not softmax else np.nan
                update(table, settings, index, value, lo, hi, k * block_rows, scores[e, k], y_k, h, h * g[k])
            counters[C_ROUNDS] += 1.0
        n_rows = progress_row(progress, n_rows, stats, holdout, y, best + 1, batch.feature_count[e])
    return n_rows
