"""FTRL-Proximal with per-coordinate learning rates and L1/L2 (``--ftrl``).

McMahan et al. 2013 ("Ad click prediction", Algorithm 1), as derived in
M. Qian's Notes on Adaptive Online Learning (FTRL-Proximal with r_t = sigma_t/2 |w - w_t|^2 and
the per-coordinate schedule eta_{t,i} = alpha / (beta + sqrt(n_i))):

    w_i = 0                                                if |z_i| <= l1
    w_i = -(z_i - sign(z_i) l1) / ((beta + sqrt(n_i)) / alpha + l2)   otherwise
    sigma = (sqrt(n_i + g_i**2) - sqrt(n_i)) / alpha
    z_i += g_i - sigma w_i;   n_i += g_i**2

Weights are computed on demand from (z, n), so untouched coordinates need no
bookkeeping.
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine import merge_common
from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass

SLOTS = ("z", "n")
Z, N = 0, 1
PARAMS = ("alpha", "beta", "l1", "l2")
P_ALPHA, P_BETA, P_L1, P_L2 = 0, 1, 2, 3


@njit
def _weight(state, i, params):
    z = state[i, Z]
    l1 = params[P_L1]
    if abs(z) <= l1:
        return 0.0
    return -(z - math.copysign(l1, z)) / ((params[P_BETA] + math.sqrt(state[i, N])) / params[P_ALPHA]
                                          + params[P_L2])


@njit
def predict(table, settings, index, value, lo, hi, offset, learning, h):
    state, params = table.state, settings.params
    p = 0.0
    for j in range(lo, hi):
        p += _weight(state, offset + index[j], params) * value[j]
    return p


@njit
def update(table, settings, index, value, lo, hi, offset, p, y, h, g):
    state, params = table.state, settings.params
    alpha = params[P_ALPHA]
    for j in range(lo, hi):
        g_i = g * value[j]
        if g_i == 0.0:
            continue
        i = offset + index[j]
        w = _weight(state, i, params)
        n = state[i, N]
        sigma = (math.sqrt(n + g_i * g_i) - math.sqrt(n)) / alpha
        state[i, Z] += g_i - sigma * w
        state[i, N] = n + g_i * g_i


@njit
def weight(table, settings, i):
    state, params = table.state, settings.params
    return _weight(state, i, params)


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
    z = state[:, Z]
    l1 = params[P_L1]
    denominator = (params[P_BETA] + np.sqrt(state[:, N])) / params[P_ALPHA] + params[P_L2]
    with np.errstate(divide="ignore", invalid="ignore"):
        w = -(z - np.copysign(l1, z)) / denominator
    return np.where(np.abs(z) <= l1, 0.0, w)


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights):
    """Combine FTRL-Proximal learners that all started from ``base``.

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
    dn_k = n_k - n_base and w_k shard k's weight (from its z_k, n_k):

        w = sum_k dn_k w_k / sum_k dn_k          (as adagrad.merge)
        n = n_base + sum_k dn_k,   D = (beta + sqrt(n)) / alpha + l2
        z = -(w D + sign(w) l1)                  if w != 0
        z = clip(z_base + sum_k (z_k - z_base), -l1, l1)   if w == 0

    z is rebuilt by inverting the weight formula w = -(z - sign(z) l1) / D
    (McMahan et al. 2013, Algorithm 1; Qian's notes) with the
    merged n, so the merged learner's weight is w (up to rounding). A
    coordinate no shard updated keeps the base's row.

    Why. n is AdaGrad's G (the per-coordinate rate is alpha / (beta +
    sqrt(n))): added, as in adagrad.merge, it gives the rates of a learner that
    has seen all examples. The weights are averaged with weights dn_k, as
    AdaGrad's with dG_k: a shard that never saw a feature does not dilute it.
    z cannot simply be added or averaged: the weight is a nonlinear function of
    (z, n) (soft threshold, sqrt(n) in the denominator). Adding the z's counts
    each shard's approach to the optimum once per shard (z grows ~N times, D
    ~sqrt(N): the weight overshoots ~sqrt(N); measured in
    benchmarks/results/merge_rules.md, a9a test loss 0.713 after 16 shards
    against 0.325 for this rule and 0.329 sequential); averaging z while n
    grows would shrink the weight ~sqrt(N) instead. Rebuilding z from the
    averaged weight and the merged n makes the merged learner predict with the
    averaged weight and continue as FTRL from it: later updates
    z += g - sigma w see a z consistent with (w, n).

    When the average is 0 any z in [-l1, l1] keeps it 0. z is the union sum
    clipped into that band: for a coordinate every shard kept at 0, sigma w
    added nothing to z, so z is a plain gradient sum and the union sum is
    exactly what sequential FTRL would hold; clipping leaves it at the edge if
    the pooled gradients would have brought the feature in. (Clipping the
    averaged z instead would keep only one shard's worth of that evidence.)

    VW: its ftrl.cc has no merge function and its end_pass does no allreduce
    (only gd.cc's end_pass averages weights), so ``vw --ftrl`` weights are not
    combined across nodes, and VW's merge_models (merge.cc) refuses a base
    learner without a merge function.

    Tested invariants (tests/test_merge.py): one shard = a copy; idle shards
    change nothing; rows no shard updated keep the base; a row one shard
    updated gets that shard's weight; the merged weight lies between the
    updating shards' weights; symmetric in the shard order and associative, up
    to rounding.
    """
    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result
    l1 = params[P_L1]
    grown = merge_common.column(shards, active, N) - base[:, N]
    weights = merge_common.weights_where(all_weights, shards, active, params, shard_rounds, grown > 0.0)
    w, total = merge_common.weighted_mean(weights, grown)
    updated = total > 0.0
    n = base[:, N] + total
    denominator = (params[P_BETA] + np.sqrt(n)) / params[P_ALPHA] + params[P_L2]
    pooled = base[:, Z] + (merge_common.column(shards, active, Z) - base[:, Z]).sum(axis=0)
    z = np.where(w != 0.0, -(w * denominator + np.copysign(l1, w)), np.clip(pooled, -l1, l1))
    out = np.array(base, dtype=np.float64, copy=True)
    out[updated, Z] = z[updated]
    out[updated, N] = n[updated]
    return out
