"""ScInOL2, scale-invariant online learning (``--scinol2``).

Kempka, Kotłowski, Warmuth 2019, Algorithm 2. Per coordinate: G_i (negative
gradient sum), S2_i (sum of squared gradients), M_i (max |x_i|), eta_i (starts
at eps):

    before predicting:  M_i <- max(M_i, |x_i|)
    theta = G_i / sqrt(S2_i + M_i**2)
    w_i = sign(theta) min(|theta|, 1) / (2 sqrt(S2_i + M_i**2)) eta_i
    after the loss:  G_i -= g x_i;  S2_i += (g x_i)**2;  eta_i -= g x_i w_i

with 0/0 = 0. As in scinol1.py, eta_i is set to eps when a row is first
touched, and M changes only for examples that are learned from. No learning
rate: predictions are invariant to rescaling any feature (Appendix B).

Speed (the same results): the kernels are inlined into the example loop (a call
of a compiled function counts references to each array it takes, atomically),
and predict first asks for the rows it is about to read
(scinol_common.prefetch_rows).
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass

from olcli.engine import merge_common, scinol_common
from olcli.engine.scinol_common import accumulate, prefetch_rows, raise_max, theta_and_scale

SLOTS = ("G", "S2", "M", "eta")
ETA = 3
PARAMS = ("epsilon",)
P_EPSILON = 0


@njit(inline="always")
def _weight(state, i):
    theta, scale = theta_and_scale(state, i)
    if scale == 0.0:
        return 0.0
    clipped = min(abs(theta), 1.0)
    return math.copysign(clipped, theta) / (2.0 * scale) * state[i, ETA] if theta != 0.0 else 0.0


@njit(inline="always")
def predict(table, settings, index, value, lo, hi, offset, learning, h):
    state, params = table.state, settings.params
    epsilon = params[P_EPSILON]
    prefetch_rows(state, index, lo, hi, offset)
    p = 0.0
    for j in range(lo, hi):
        i = offset + index[j]
        x = value[j]
        if learning and x != 0.0:
            raise_max(state, i, x, epsilon)
        p += _weight(state, i) * x
    return p


@njit(inline="always")
def update(table, settings, index, value, lo, hi, offset, p, y, h, g):
    state = table.state
    for j in range(lo, hi):
        gx = g * value[j]
        i = offset + index[j]
        w = _weight(state, i)  # the weight used in the prediction: the state has not changed since
        accumulate(state, i, gx)
        state[i, ETA] -= gx * w


@njit
def weight(table, settings, i):
    """Row i's weight from the stored state (M as it is: not raised for an example)."""
    state = table.state
    return _weight(state, i)


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
    """Every row's weight: ``weight`` for all rows at once, in NumPy (same
    operations in the same order)."""
    theta, scale = scinol_common.all_thetas_and_scales(state)
    clipped = np.minimum(np.abs(theta), 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.copysign(clipped, theta) / (2.0 * scale) * state[:, ETA]
    return np.where((scale == 0.0) | (theta == 0.0), 0.0, w)


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights):
    """Combine ScInOL2 learners that all started from ``base``.

    base: state array (rows, slots) all shards started from; shards: list of
    state arrays (same shape) after each learned its shard; params: float64
    array in PARAMS order; base_rounds: float, the rounds counter of the base;
    shard_rounds: list of float, each shard's rounds counter after learning
    (includes base_rounds); shard_weights: list of float, importance-weighted
    count of examples each shard learned from (not needed: weighs per
    coordinate). Returns a NEW state array (same shape) for the combined
    learner, whose rounds counter will be base_rounds + sum(r - base_rounds).
    The inputs are not modified. Shards whose rounds did not move are left out;
    with one shard left the result is a copy of it (merge_common.prepare).

    Rule, per coordinate, over the shards k that learned, with
    dS2_k = S2_k - S2_base, w_k shard k's weight and theta_k its
    G_k / sqrt(S2_k + M_k**2):

        S2  = S2_base + sum_k dS2_k,   M = max_k M_k,   s = sqrt(S2 + M**2)
        w   = sum_k dS2_k w_k / sum_k dS2_k
        a   = sum_k dS2_k |theta_k| / sum_k dS2_k       (mean |theta|)
        G   = sign(w) a s
        eta = 2 |w| s / min(a, 1)

    (G, eta) are rebuilt so that Algorithm 2's weight
    w = sign(theta) min(|theta|, 1) eta / (2 s), theta = G / s, is the averaged
    w (up to rounding). Where that average is 0, G = 0 and eta is the dS2-mean
    of the shards' eta (a shard that did not touch a row the base had not
    touched counts with eps, the value touching gives it). A row no shard
    added a squared gradient to keeps the base's G and S2 and gets M and, if
    first touched by a shard, eta = eps; a row no shard touched keeps the base.

    Why. S2 is added and M is the max, as in scinol1.merge (the scale the
    learner normalises by, and a running max). The weight is averaged with
    weights dS2_k, so a shard that never saw a feature does not dilute it. The
    weight has two factors, the bet fraction min(|theta|, 1) / (2 s) and the
    wealth eta, so one more choice is needed: theta keeps its meaning (how
    consistently the gradients point one way, already normalised by s) as the
    shards' mean |theta|, with w's sign, and the wealth is whatever holds the
    averaged weight at the merged scale (about sqrt(N) times one shard's
    after N similar shards: the bet fraction shrinks with s). Later updates
    then bet the fraction of a learner that has seen all examples.

    Adding the statistics fails: G (and the wealth eta, which Algorithm 2
    accumulates as eta -= g x w) hold each shard's approach from the base to
    the optimum, so sums count it once per shard. Adding the wealth increments
    (eta_base + sum_k (eta_k - eta_base)) gave a9a test loss 0.424 after 16
    shards; multiplying the wealth ratios (eta_base prod_k eta_k / eta_base,
    the exact union of the shards' bets since eta_t = eta_{t-1} (1 - g x
    beta_t)) gave 4e13; this rule 0.341, a shard alone 0.345, sequential 0.327
    (benchmarks/results/merge_rules.md). Additive wealth can even turn
    negative: two shards that each lost 90% of eps give eps - 2 * 0.9 eps < 0.

    What it preserves: a row one shard updated gets that shard's state (and
    weight) up to rounding; the merged weight lies between the updating
    shards' weights; eta stays > 0; scale invariance (Kempka et al.,
    Appendix B): multiplying a feature by c on every shard multiplies the
    merged weight by 1/c (theta, eta and the averaging weights' ratios do not
    change), bit for bit when c is a power of two. The paper has no
    distributed variant and VW has no ScInOL (its ``--coin`` is a different
    coin-betting learner without a merge).

    Tested in tests/test_merge.py, with symmetry in the shard order and
    associativity up to rounding.
    """
    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result
    grown = merge_common.column(shards, active, scinol_common.S2) - base[:, scinol_common.S2]
    weights = merge_common.weights_where(all_weights, shards, active, params, shard_rounds, grown > 0.0)
    stats = scinol_common.merged_statistics(base, shards, active, grown, weights)
    touched = stats["touched"]
    thetas = np.stack([scinol_common.all_thetas_and_scales(shards[k])[0] for k in active])
    a, _ = merge_common.weighted_mean(np.abs(thetas), grown)
    start = np.where(base[:, scinol_common.M] > 0.0, base[:, ETA], params[P_EPSILON])
    etas = np.where(touched, merge_common.column(shards, active, ETA), start)
    eta_mean, _ = merge_common.weighted_mean(etas, grown)
    w = stats["w"]
    s = np.sqrt(stats["s2"] + stats["m"] * stats["m"])
    betting = (w != 0.0) & (a > 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        g = np.where(betting, np.copysign(a * s, w), 0.0)
        eta = np.where(betting, 2.0 * np.abs(w) * s / np.minimum(a, 1.0), eta_mean)
    updated = stats["updated"]
    out = np.array(base, dtype=np.float64, copy=True)
    out[:, scinol_common.M] = stats["m"]
    out[:, ETA] = np.where(touched.any(axis=0), start, base[:, ETA])
    out[updated, scinol_common.G] = g[updated]
    out[updated, scinol_common.S2] = stats["s2"][updated]
    out[updated, ETA] = eta[updated]
    return out
