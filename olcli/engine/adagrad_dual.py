"""AdaGrad with diagonal matrices, primal-dual subgradient (RDA) form (``--adagrad-dual``).

Duchi, Hazan, Singer (2010 techreport), Figure 1 with the primal-dual update of
Eq. (3) and phi = l1 |w|_1, solved in closed form as Eq. (22) of §6.1:

    u_i = sum of g_i over rounds,  H_i = delta + sqrt(sum g_i**2)
    w_i = sign(-u_i) (eta t / H_i) [|u_i| / t - l1]_+        (t: rounds so far)

The weights are a function of (u, G, t), so sparse updates are exact without
any bookkeeping ("even simpler just in time evaluation", §6.1). With t = 0 or
H_i = 0 the weight is 0.
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine import merge_common
from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass
from olcli.engine.records import C_ROUNDS

SLOTS = ("u", "G")
U, G = 0, 1
PARAMS = ("eta", "delta", "l1")
P_ETA, P_DELTA, P_L1 = 0, 1, 2


@njit
def _weight(state, i, params, rounds):
    u = state[i, U]
    h = params[P_DELTA] + math.sqrt(state[i, G])
    if rounds <= 0.0 or h <= 0.0 or u == 0.0:
        return 0.0
    excess = abs(u) / rounds - params[P_L1]
    if excess <= 0.0:
        return 0.0
    return -math.copysign(params[P_ETA] * rounds / h * excess, u)


@njit
def predict(table, settings, index, value, lo, hi, offset, learning, h):
    state, params, rounds = table.state, settings.params, table.counters[C_ROUNDS]
    p = 0.0
    for j in range(lo, hi):
        p += _weight(state, offset + index[j], params, rounds) * value[j]
    return p


@njit
def update(table, settings, index, value, lo, hi, offset, p, y, h, g):
    state = table.state
    for j in range(lo, hi):
        g_i = g * value[j]
        i = offset + index[j]
        state[i, U] += g_i
        state[i, G] += g_i * g_i


@njit
def weight(table, settings, i):
    state, params, rounds = table.state, settings.params, table.counters[C_ROUNDS]
    return _weight(state, i, params, rounds)


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
    """Every row's weight at ``rounds``: ``weight`` for all rows at once, in NumPy
    (same operations in the same order)."""
    u = state[:, U]
    h = params[P_DELTA] + np.sqrt(state[:, G])
    if rounds <= 0.0:
        return np.zeros(len(u))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        excess = np.abs(u) / rounds - params[P_L1]
        w = -np.copysign(params[P_ETA] * rounds / h * excess, u)
    return np.where((h > 0.0) & (u != 0.0) & (excess > 0.0), w, 0.0)


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights):
    """Combine AdaGrad dual (RDA) learners that all started from ``base``.

    base: state array (rows, slots) all shards started from; shards: list of
    state arrays (same shape) after each learned its shard; params: float64
    array in PARAMS order; base_rounds: float, the rounds counter of the base;
    shard_rounds: list of float, each shard's rounds counter after learning
    (includes base_rounds); shard_weights: list of float, importance-weighted
    count of examples each shard learned from (not needed: weighs per
    coordinate). Returns a NEW state array (same shape) for the combined
    learner, whose rounds counter will be R = base_rounds + sum(r - base_rounds).
    The inputs are not modified. Shards whose rounds did not move are left out;
    with one shard left the result is a copy of it (merge_common.prepare).

    Rule, per coordinate, over the shards k that learned, with
    dG_k = G_k - G_base and w_k shard k's weight at its own rounds r_k:

        w = sum_k dG_k w_k / sum_k dG_k          (as adagrad.merge)
        G = G_base + sum_k dG_k,   H = delta + sqrt(G)
        u = -sign(w) (|w| H / eta + l1 R)        if w != 0
        u = clip(u_base + sum_k (u_k - u_base), -l1 R, l1 R)   if w == 0

    u is rebuilt by inverting the closed form w = sign(-u) (eta t / H)
    [|u|/t - l1]_+ of Eq. (22) (Duchi, Hazan, Singer 2010, §6.1) at t = R, so
    the merged learner, read at its own rounds R, has weight w exactly (up to
    rounding). A coordinate no shard updated keeps the base's row.

    Why not simply add the sums. u and G are sums of gradients, so
    u_base + sum_k (u_k - u_base) looks exact: it is the state of one learner
    that received every shard's gradients. But those gradients were computed
    at each shard's own weights: every shard that moved from the base toward
    the optimum put that whole approach into its u, and the sum counts it once
    per shard. With l1 = 0, w = -eta u / H: N shards that agree give
    u ~ N u_1 and H ~ sqrt(N) H_1, so the weight overshoots by sqrt(N)
    (measured, benchmarks/results/merge_rules.md: a9a test loss 0.549 after
    merging 16 shards, against 0.332 for this rule and 0.327 sequential). So
    the weight is averaged as AdaGrad's is (the same per-coordinate weights
    dG_k; a shard that never saw a feature does not dilute it), G is added (the
    step sizes of a learner that has seen all examples; see adagrad.merge), and
    u is chosen to give that weight.

    Why t = R. The weight depends on the rounds counter, and the merged learner
    is read at R, more than any shard's r_k: with l1 > 0 a kept u would shrink
    (|u| - l1 t grows smaller as t grows). Rebuilding u at t = R keeps the
    averaged weight. A coordinate no shard updated keeps the base's u and so
    does shrink as t reaches R, as after sequential training (as AdaGrad's lazy
    rows do).

    When the average is 0 (every updating shard kept the weight inside the L1
    band, or weights cancel), any |u| <= l1 R keeps it 0; u is the union sum
    of gradients clipped into that band. For a coordinate every shard kept at 0
    the union sum is exactly what RDA thresholds, the mean gradient over all R
    rounds against l1, so pooled evidence can bring the feature in later, as
    sequential training would.

    VW has no dual-averaging learner to compare with (its allreduce averages
    whatever gd keeps in its weight slots; see adagrad.merge).

    Tested invariants (tests/test_merge.py): one shard = a copy; idle shards
    change nothing; rows no shard updated keep the base; the weight at R of a
    row one shard updated equals that shard's weight at its rounds; the merged
    weight lies between the updating shards' weights; symmetric in the shard
    order and associative, up to rounding.
    """
    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result
    rounds = merge_common.merged_rounds(base_rounds, shard_rounds)
    eta = params[P_ETA]
    l1 = params[P_L1]
    grown = merge_common.column(shards, active, G) - base[:, G]
    weights = merge_common.weights_where(all_weights, shards, active, params, shard_rounds, grown > 0.0)
    w, total = merge_common.weighted_mean(weights, grown)
    updated = total > 0.0
    g = base[:, G] + total
    h = params[P_DELTA] + np.sqrt(g)
    band = l1 * rounds
    pooled = base[:, U] + (merge_common.column(shards, active, U) - base[:, U]).sum(axis=0)
    inside = np.clip(pooled, -band, band)
    while True:  # l1 R may round up: step inside until the weight formula gives 0
        out_of_band = (rounds > 0.0) & (np.abs(inside) / rounds - l1 > 0.0)
        if not out_of_band.any():
            break
        inside[out_of_band] = np.nextafter(inside[out_of_band], 0.0)
    u = np.where(w != 0.0, -np.copysign(np.abs(w) * h / eta + band, w), inside)
    out = np.array(base, dtype=np.float64, copy=True)
    out[updated, U] = u[updated]
    out[updated, G] = g[updated]
    return out
