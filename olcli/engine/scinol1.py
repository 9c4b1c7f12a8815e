"""ScInOL1, scale-invariant online learning (``--scinol1``).

Kempka, Kotłowski, Warmuth 2019, Algorithm 1. Per coordinate: G_i (negative
gradient sum), S2_i (sum of squared gradients), M_i (max |x_i|), beta_i:

    before predicting, for x_i != 0:
        M_i <- max(M_i, |x_i|)
        beta_i <- min(beta_i, eps (S2_i + M_i**2) / (x_i**2 t))
    theta = G_i / sqrt(S2_i + M_i**2)
    w_i = beta_i sign(theta) / (2 sqrt(S2_i + M_i**2)) (exp(|theta|/2) - 1)
    after the loss:  G_i -= g x_i;  S2_i += (g x_i)**2

with 0/0 = 0. beta_i starts at eps; a row whose M_i is still 0 has never been
touched, so its beta is set to eps when it first is (unseen rows stay zero and
sparse models stay sparse). M and beta change only for examples that are
learned from; test and unlabeled examples use the stored state. No learning
rate: predictions are invariant to rescaling any feature (Appendix B).

Speed (the same results): the kernels are inlined into the example loop (a call
of a compiled function counts references to each array it takes, atomically),
predict first asks for the rows it is about to read (scinol_common.prefetch_rows),
and a weight with theta = 0 (a row without gradients yet) is 0 without exp.
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass
from olcli.engine.records import C_ROUNDS

from olcli.engine import merge_common, scinol_common
from olcli.engine.scinol_common import M, S2, accumulate, prefetch_rows, raise_max, theta_and_scale

SLOTS = ("G", "S2", "M", "beta")
BETA = 3
PARAMS = ("epsilon",)
P_EPSILON = 0


@njit(inline="always")
def _weight(state, i):
    theta, scale = theta_and_scale(state, i)
    if theta == 0.0:  # also when scale = 0
        return 0.0
    a = state[i, BETA] / (2.0 * scale)
    half = abs(theta) / 2.0
    if half < 700.0:
        magnitude = a * (math.exp(half) - 1.0)
    else:  # a * e^half overflows only when a is not tiny: go through logs
        magnitude = math.exp(math.log(a) + half) - a if a > 0.0 else 0.0
    return math.copysign(magnitude, theta)


@njit(inline="always")
def predict(table, settings, index, value, lo, hi, offset, learning, h):
    state, params, rounds = table.state, settings.params, table.counters[C_ROUNDS]
    epsilon = params[P_EPSILON]
    t = rounds + 1.0
    prefetch_rows(state, index, lo, hi, offset)
    p = 0.0
    for j in range(lo, hi):
        i = offset + index[j]
        x = value[j]
        if learning and x != 0.0:
            raise_max(state, i, x, epsilon)
            m = state[i, M]
            squared = x * x * t
            if squared > 0.0:  # |x| so small that x^2 underflows: the bound is +inf, beta stays
                state[i, BETA] = min(state[i, BETA], epsilon * (state[i, S2] + m * m) / squared)
        p += _weight(state, i) * x
    return p


@njit(inline="always")
def update(table, settings, index, value, lo, hi, offset, p, y, h, g):
    state = table.state
    for j in range(lo, hi):
        accumulate(state, offset + index[j], g * value[j])


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
    operations in the same order, the C library's exp and log: the same bits)."""
    theta, scale = scinol_common.all_thetas_and_scales(state)
    live = (scale != 0.0) & (theta != 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = state[:, BETA] / (2.0 * scale)
    half = np.abs(theta) / 2.0
    magnitude = np.zeros(len(state))
    small = live & (half < 700.0)
    magnitude[small] = a[small] * (merge_common.libm(math.exp, half[small]) - 1.0)
    large = live & (half >= 700.0) & (a > 0.0)  # a e^half overflows only when a is not tiny: go through logs
    magnitude[large] = merge_common.libm(math.exp, merge_common.libm(math.log, a[large]) + half[large]) - a[large]
    return np.where(live, np.copysign(magnitude, theta), 0.0)


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights):
    """Combine ScInOL1 learners that all started from ``base``.

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
    dS2_k = S2_k - S2_base and w_k shard k's weight:

        S2   = S2_base + sum_k dS2_k
        M    = max_k M_k
        beta = min of beta_k over the shards that touched the row (M_k > 0)
        w    = sum_k dS2_k w_k / sum_k dS2_k
        G    = sign(w) 2 log(1 + 2 |w| s / beta) s,    s = sqrt(S2 + M**2)

    G is rebuilt by inverting Algorithm 1's weight
    w = beta sign(theta) (exp(|theta|/2) - 1) / (2 s), theta = G / s, so the
    merged learner's weight is w (up to rounding). A row no shard added a
    squared gradient to keeps the base's G and S2 (it still gets M and beta,
    which change without a gradient); a row no shard touched keeps the base.

    Why. S2 plays AdaGrad's G (the scale the learner normalises by), so it is
    added (see adagrad.merge): the merged learner continues with the caution of
    one that has seen every shard's gradients. M and beta are a running max and
    min (Algorithm 1 lines "M_i <- max", "beta_i <- min"): over the union of
    the shards' examples they are the max and the min of the shards' values,
    exactly. The weight is averaged with weights dS2_k, as AdaGrad's with dG_k,
    so a shard that never saw a feature does not dilute it. G, the negative
    gradient sum, cannot be added: every shard's G holds that shard's whole
    approach from the base to the optimum, and the weight grows exponentially
    in G / s, so the sum counts the approach once per shard and the weight
    explodes (benchmarks/results/merge_rules.md: a9a test loss 32.5 after
    merging 4 shards, 1e6 after 16, against 0.38 and 0.44 for this rule; a
    shard alone scores 0.38 and 0.44). Given S2, M and beta there is exactly
    one G that gives the averaged weight.

    What it preserves: a row one shard updated gets that shard's state (and
    weight) up to rounding; the merged weight lies between the updating
    shards' weights; and scale invariance (Kempka et al., Appendix B):
    multiplying a feature by c on every shard multiplies the merged weight by
    1/c (S2 scales by c**2 on every shard, so the averaging weights do not
    change; beta and theta do not change), bit for bit when c is a power of
    two. The paper has no distributed variant and VW has no ScInOL (its
    ``--coin`` is a different coin-betting learner without a merge).

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
    betas = np.where(touched, merge_common.column(shards, active, BETA), np.inf)
    beta = np.where(touched.any(axis=0), betas.min(axis=0), base[:, BETA])
    w = stats["w"]
    s = np.sqrt(stats["s2"] + stats["m"] * stats["m"])
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        g = np.copysign(2.0 * np.log1p(2.0 * np.abs(w) * s / beta) * s, w)
    g = np.where((w != 0.0) & (beta > 0.0), g, 0.0)
    updated = stats["updated"]
    out = np.array(base, dtype=np.float64, copy=True)
    out[updated, scinol_common.G] = g[updated]
    out[updated, S2] = stats["s2"][updated]
    out[:, M] = stats["m"]
    out[:, BETA] = beta
    return out
