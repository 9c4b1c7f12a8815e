"""AdaGrad with diagonal matrices, composite mirror descent form (``--adagrad``).

Duchi, Hazan, Singer (2010 techreport), Figure 1 with the composite mirror
descent update of Eq. (4); §6 gives the diagonal closed forms:

    G_i += g_i**2,   H_i = delta + sqrt(G_i)
    phi = 0:                 w_i <- w_i - eta g_i / H_i
    phi = l1 |w|_1 (Eq. 24): v = w_i - eta g_i / H_i;  w_i <- sign(v) [|v| - l1 eta / H_i]_+
    phi = l2/2 |w|^2 (Eq. 25): w_i <- (s_i w_i - eta g_i) / (eta l2 + delta + s_i),  s_i = sqrt(G_i)

``--radius R`` projects each weight into [-R, R] after its update (the
per-coordinate box of Streeter & McMahan 2010, §3).

Lazy regularization (§6.1, "just in time"): with l1 or l2, every round shrinks
every coordinate, also those absent from the example. A coordinate untouched for
k rounds owes k shrinkages: ``k l1 eta / H_i`` (clipped at zero) or the factor
``(s_i / (eta l2 + delta + s_i))**k``; it pays them when it is next read. Slot
``last`` is the round up to which ``w`` is settled. The saved file keeps this
lazy form; readers (test, inspect) add what is owed, so a continued run is
bit-identical to an uninterrupted one.

With delta = 0 and a gradient so small that its square underflows, H_i = 0 and
the paper's pseudo-inverse leaves w_i unchanged. Only the coordinates present
in the example are touched (O(nnz)). When a feature index occurs twice in one
example, each occurrence is applied in turn, as VW does.
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine import merge_common
from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass
from olcli.engine.records import C_ROUNDS

SLOTS = ("w", "G", "last")
W, G, LAST = 0, 1, 2
PARAMS = ("eta", "delta", "l1", "l2", "radius")
P_ETA, P_DELTA, P_L1, P_L2, P_RADIUS = 0, 1, 2, 3, 4


@njit
def _settled(state, i, params, rounds):
    """w_i after paying the shrinkage owed for rounds last+1 .. rounds."""
    w = state[i, W]
    owed = rounds - state[i, LAST]
    if owed <= 0.0 or w == 0.0 or (params[P_L1] <= 0.0 and params[P_L2] <= 0.0):
        return w
    eta = params[P_ETA]
    s = math.sqrt(state[i, G])
    h = params[P_DELTA] + s
    if params[P_L1] > 0.0:
        if h <= 0.0:
            return w
        shrunk = abs(w) - owed * params[P_L1] * eta / h
        return math.copysign(shrunk, w) if shrunk > 0.0 else 0.0
    return w * (s / (eta * params[P_L2] + params[P_DELTA] + s)) ** owed


@njit
def predict(table, settings, index, value, lo, hi, offset, learning, h):
    state, params, rounds = table.state, settings.params, table.counters[C_ROUNDS]
    lazy = params[P_L1] > 0.0 or params[P_L2] > 0.0
    p = 0.0
    for j in range(lo, hi):
        i = offset + index[j]
        if lazy:
            w = _settled(state, i, params, rounds)
            if learning:
                state[i, W] = w
                state[i, LAST] = rounds
        else:
            w = state[i, W]
        p += w * value[j]
    return p


@njit
def update(table, settings, index, value, lo, hi, offset, p, y, h, g):
    state, params, rounds = table.state, settings.params, table.counters[C_ROUNDS]
    eta = params[P_ETA]
    delta = params[P_DELTA]
    l1 = params[P_L1]
    l2 = params[P_L2]
    radius = params[P_RADIUS]
    for j in range(lo, hi):
        g_i = g * value[j]
        if g_i == 0.0:
            continue
        i = offset + index[j]
        state[i, G] += g_i * g_i
        s = math.sqrt(state[i, G])
        h = delta + s
        if h <= 0.0:  # delta = 0 and g_i**2 underflowed: pseudo-inverse, no step
            continue
        w = state[i, W]
        if l1 > 0.0:
            v = w - eta * g_i / h
            shrunk = abs(v) - l1 * eta / h
            w = math.copysign(shrunk, v) if shrunk > 0.0 else 0.0
            state[i, LAST] = rounds + 1
        elif l2 > 0.0:
            w = (s * w - eta * g_i) / (eta * l2 + delta + s)
            state[i, LAST] = rounds + 1
        else:
            w -= eta * g_i / h
        if radius > 0.0:
            w = min(max(w, -radius), radius)
        state[i, W] = w


@njit
def weight(table, settings, i):
    """Row i's weight as of ``rounds`` (lazy shrinkage paid; the state is not changed)."""
    state, params, rounds = table.state, settings.params, table.counters[C_ROUNDS]
    return _settled(state, i, params, rounds)


# Entry points, compiled and cached for this algorithm (the loops are in driver.py).

@njit(cache=True, nogil=True)
def run_chunk(table, settings, batch, tally, predictions):
    return run_binary(predict, update, table, settings, batch, tally, predictions)


@njit(cache=True, nogil=True)
def run_chunk_multiclass(table, settings, batch, tally, predictions, scores):
    return run_multiclass(predict, update, table, settings, batch, tally, predictions, scores)


@njit(cache=True)
def weights_at(table, settings, rows):
    return weights_loop(weight, table, settings, rows)


# ---------------------------------------------------------------------------
# Merging learners trained on separate shards (plain NumPy, not compiled).

def all_weights(state, params, rounds):
    """Every row's weight as of ``rounds``: ``weight`` for all rows at once, in
    NumPy (same operations in the same order, so the same bits). The state is
    not changed."""
    w = state[:, W].copy()
    l1 = params[P_L1]
    l2 = params[P_L2]
    if l1 <= 0.0 and l2 <= 0.0:
        return w
    eta = params[P_ETA]
    delta = params[P_DELTA]
    owed = rounds - state[:, LAST]
    s = np.sqrt(state[:, G])
    h = delta + s
    pay = (owed > 0.0) & (w != 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore", under="ignore"):
        if l1 > 0.0:
            pay &= h > 0.0
            shrunk = np.abs(w) - owed * l1 * eta / h
            settled = np.where(shrunk > 0.0, np.copysign(shrunk, w), 0.0)
            return np.where(pay, settled, w)
        factor = s / (eta * l2 + delta + s)
    settled = w.copy()
    settled[pay] *= merge_common.libm(math.pow, factor[pay], owed[pay])
    return settled


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights):
    """Combine AdaGrad learners that all started from ``base``.

    base: state array (rows, slots) all shards started from; shards: list of
    state arrays (same shape) after each learned its shard; params: float64
    array in PARAMS order; base_rounds: float, the rounds counter of the base;
    shard_rounds: list of float, each shard's rounds counter after learning
    (includes base_rounds); shard_weights: list of float, importance-weighted
    count of examples each shard learned from (not needed here: AdaGrad weighs
    per coordinate). Returns a NEW state array (same shape) for the combined
    learner, whose rounds counter will be base_rounds + sum(r - base_rounds).
    The inputs are not modified. Shards whose rounds did not move are left out;
    with one shard left the result is a copy of it (merge_common.prepare).

    Rule, per coordinate i, over the shards k that learned, with
    dG_k = G_k - G_base >= 0 (the squared gradients shard k added) and w_k
    shard k's weight as of its own rounds (lazy L1/L2 shrinkage paid):

        w_i    = sum_k dG_k w_k / sum_k dG_k
        G_i    = G_base + sum_k dG_k^2 / sum_k dG_k
        last_i = merged rounds            (only with --l1/--l2; else as the base)

    A coordinate no shard updated (every dG_k = 0) keeps the base's row.

    Why the weights are averaged with weights dG_k. AdaGrad's step on a
    coordinate is eta g / (delta + sqrt(G)) (Duchi, Hazan, Singer 2010, §6): the
    squared-gradient mass a shard put on a coordinate is how much it learned
    about it. A shard that never saw the feature (dG_k = 0) has no opinion and
    must not dilute the others, as a plain mean would (it divides a rare
    feature's weight by the number of shards). VW does the same for
    ``--adaptive`` weights: ``accumulate_weighted_avg`` (vowpalwabbit
    accumulate.cc, with ``do_weighting`` in accumulate.h; run by gd.cc
    ``end_pass`` after each pass under allreduce) and gd.cc ``merge`` ->
    ``merge_weights_with_save_resume`` (model merging). VW weighs by each node's
    total G_k = G_base + dG_k, not by its increment: from a zero base that is the
    same; from a trained base the base's G enters every node's weight, pulling
    the result toward the base, and a node that learned nothing still weighs
    G_base. Increments make idle shards weightless.

    Why G grows by the dG-weighted mean of the increments, not their sum. The
    merged weight is an average: it has moved about as far as one shard's
    weight moved, not as far as one learner that saw every shard's examples in
    turn. With G = G_base + sum_k dG_k (the rule until 2026-11, "the G of one
    learner that received every gradient") the steps after the merge were those
    of a learner K times further along, too small for weights that were not:
    on covtype, 4 shards, the test loss after 4 passes stayed 1.023 x one
    machine's after 3, against 1.016 with the mean (benchmarks/results/
    scale_out.md, "Why the accumulators grow by a mean"). The mean keeps what
    the sum had: a row one shard updated gets exactly that shard's G; an idle
    shard (dG_k = 0) neither weighs nor counts; and it adds what the sum
    lacked: merging K copies of one learner gives that learner back. From a
    zero base (the first merge) it is VW's rule: ``accumulate_weighted_avg``
    scales each node's G by its share G_k / sum_j G_j before summing (its
    comment: "a crude max"), so its G is sum_k G_k**2 / sum_k G_k. After that
    VW weighs totals, base included, olcli increments (above). What the mean
    gives up: a tree of pairwise merges is no longer exactly one flat merge
    (the pair's increment is a mean, and then weighs as one shard), so the
    cluster's result depends on the tree, which olcli/scaleout.py fixes by the
    shards' order. (VW's gd merge also counts the base once per model in its
    ``--normalized`` sums total_weight and normalized_sum_norm_x, which it adds
    over models without subtracting the base; olcli has no such state.)

    Lazy L1/L2. Each shard's weight is first settled to that shard's own rounds
    (``all_weights``, the shrinkage formula of ``_settled``), so the average is
    of weights the shards would predict with; ``last`` is set to the merged
    rounds: nothing more is owed. A coordinate no shard updated keeps the base's
    ``w`` and ``last`` and so owes the shrinkage of every merged round, as it
    would after sequential training. A shard that only read such a coordinate
    settled it (w and last changed, G did not): the base row, paying for all
    rounds, stands for it. With ``--radius`` the mean of weights in [-R, R] is
    in [-R, R]; it is clipped once more against rounding.

    Tested invariants (tests/test_merge.py): one shard = a copy; idle shards
    change nothing; rows no shard updated keep the base; a row one shard updated
    gets exactly that shard's settled weight; the merged weight lies between the
    updating shards' weights; symmetric in the shard order; merging copies of
    one learner gives it back.
    """
    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result
    rounds = merge_common.merged_rounds(base_rounds, shard_rounds)
    grown = merge_common.column(shards, active, G) - base[:, G]
    weights = merge_common.weights_where(all_weights, shards, active, params, shard_rounds, grown > 0.0)
    w, total = merge_common.weighted_mean(weights, grown)
    radius = params[P_RADIUS]
    if radius > 0.0:
        w = np.clip(w, -radius, radius)
    updated = total > 0.0
    out = np.array(base, dtype=np.float64, copy=True)
    out[updated, W] = w[updated]
    out[updated, G] = base[updated, G] + merge_common.mean_increment(grown, total)[updated]
    if params[P_L1] > 0.0 or params[P_L2] > 0.0:
        out[updated, LAST] = rounds
    return out
