"""Coin betting, VW's ``--coin`` (``--coin``): no learning rate.

Per coordinate, a Krichevsky-Trofimov bettor (Orabona & Pál 2016, "Coin
Betting and Parameter-Free Online Learning": online linear optimisation as
betting on the outcomes -g_i of a coin, the KT bet being a signed fraction of
the bettor's wealth, the fraction the average of the past outcomes), with the
round count replaced by the data-dependent
(L M + G)/(L M) of COCOB (Orabona & Tommasi 2017), as VW's ``reductions/ftrl.cc``
implements it (``learn_coin_betting`` = ``coin_betting_predict`` then
``coin_betting_update_after_prediction``; written out and checked against VW
9.11.9 in tests/naive_vw.py ``VWCoin`` and benchmarks/results/vw_learners.md):

    bet_i(M) = (alpha + wealth_i) / (L_i M (L_i M + G_i)) Z_i
               (0 while L_i M (L_i M + G_i) < 2^-1022, the smallest normal double)
    Z_i = -sum g_i,   G_i = sum |g_i|,   wealth_i = sum -g_i bet_i,   g_i = k loss'(p) x_i
    M_i = largest |x_i|,   L_i = largest |k loss'(p)| (at least beta)

Predicting an example that is learned from (``coin_betting_predict``): with
M' = max(M_i, |x_i|) (not stored), p = sum_i bet_i(M') x_i / A, where A is the
running average of the examples' normalised squared norms, including this one:

    normalized_sum_norm_x += k sum_i (x_i / M')^2,   total_weight += k
    A = (normalized_sum_norm_x + 1e-6) / total_weight

Update (every labeled example with k > 0, whatever its loss), with d = k
loss'(p) at the clipped p, for each feature: M_i = max(M_i, |x_i|); if |d| > L_i:
L_i = max(|d|, beta); w = bet_i(M_i) with the new M_i, L_i; Z_i -= d x_i;
G_i += |d x_i|; wealth_i -= d x_i w; and the stored weight w_i = w / A.
A test, held-out or unlabeled example is predicted with the stored weights,
p = sum_i w_i x_i (VW's ``predict``): not the progressive prediction above.

alpha (``--coin-alpha``, 4) is the initial wealth per coordinate and beta
(``--coin-beta``, 1) the floor of the gradient-size estimate L; VW spells them
--ftrl_alpha and --ftrl_beta (with --coin their defaults are 4 and 1).

The bet is 0 while its denominator is 0 (L_i M = 0: a row no gradient or no value
has reached) and also while it is a subnormal (below ``TINY``, 2^-1022), which
needs L_i M below 1.5e-154: with beta 0 an importance of 1e-160 gives L_i =
|k loss'| = 5e-161, and with any beta a value of 1e-160 gives M_i = 1e-160.
(alpha + wealth_i) over a subnormal overflows to inf, and inf Z_i is NaN on a
fresh row (Z_i = 0), else +-inf: either would enter the state. A normal
denominator bets as the formula says.

Scale: multiplying a feature by c > 0 multiplies its M_i, Z_i and G_i by c and
leaves its wealth, L_i and x_i / M_i unchanged, so its bet is divided by c and
every prediction is unchanged, from the first example on (M' includes the
current |x_i|); exactly, bit for bit, for powers of two (tests/test_algorithms.py).
Scaling the labels is another matter: alpha and beta are in the loss's units.

Where olcli differs from VW: float64 instead of float32; the base (VW's initial
value) is added to the progressive prediction, which VW leaves out while
learning (it adds it at test time); an example of importance 0 is not learned
from (VW's --coin raises M_i and rewrites w_i for it).
"""

import numpy as np
from olcli.engine.jit import njit

from olcli.engine import merge_common
from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass

SLOTS = ("w", "Z", "G", "M", "wealth", "L")
W, Z, G, M, WEALTH, L = range(6)   # VW's W_XT, W_ZT, W_G2, W_MX, W_WE, W_MG
PARAMS = ("alpha", "beta")
P_ALPHA, P_BETA = 0, 1
SCALARS = ("normalized_sum_norm_x", "total_weight")
NORM_X_SUM, TOTAL_WEIGHT = 0, 1
# The smallest normal double, 2^-1022 (np.finfo(np.float64).tiny): a bet's denominator
# below it (0 or a subnormal) bets 0 (module docstring).
TINY = 2.2250738585072014e-308


@njit(inline="always")
def _bet(state, i, m, alpha):
    """The KT/COCOB bet of coordinate i at scale m: 0 while L m (L m + G) is below
    ``TINY``, the smallest normal double (0 while L m is 0, and where the product
    underflows to a subnormal, over which (alpha + wealth) would overflow)."""
    lm = state[i, L] * m
    denominator = lm * (lm + state[i, G])
    if denominator >= TINY:
        return (alpha + state[i, WEALTH]) / denominator * state[i, Z]
    return 0.0


@njit(inline="always")
def _average_norm(scalars):
    """A = (sum_t h_t ||x_t / M||^2 + 1e-6) / sum_t h_t; NaN where that is 0, which it is only
    once the sum of importance weights overflowed (weights near 1e308): the learner has
    diverged, and dividing by NaN says so (a non-finite prediction, which the loops stop at)
    where dividing by 0 stopped the kernel with an exception."""
    average = (scalars[NORM_X_SUM] + 1e-6) / scalars[TOTAL_WEIGHT]
    return average if average > 0.0 else np.nan


@njit
def predict(table, settings, index, value, lo, hi, offset, learning, h):
    state = table.state
    p = 0.0
    if not learning:  # VW's predict: the stored weights
        for j in range(lo, hi):
            p += state[offset + index[j], W] * value[j]
        return p
    alpha = settings.params[P_ALPHA]
    norm_x = 0.0
    for j in range(lo, hi):
        i = offset + index[j]
        x = value[j]
        m = max(state[i, M], abs(x))
        p += _bet(state, i, m, alpha) * x
        if m > 0.0:
            ratio = x / m
            norm_x += ratio * ratio
    scalars = table.scalars
    scalars[NORM_X_SUM] += h * norm_x
    scalars[TOTAL_WEIGHT] += h
    return p / _average_norm(scalars)


@njit(inline="always")
def _learn_feature(state, i, x, d, alpha, beta, average):
    """The update of row i for a feature of value x, d = k loss'(p) (module docstring):
    M_i and L_i raised, the bet w at the new M_i and L_i, then Z_i, G_i, the wealth and
    the stored weight w / A (A = ``average``)."""
    gradient = d * x
    if abs(x) > state[i, M]:
        state[i, M] = abs(x)
    if abs(d) > state[i, L]:
        state[i, L] = abs(d) if abs(d) > beta else beta
    w = _bet(state, i, state[i, M], alpha)
    state[i, Z] -= gradient
    state[i, G] += abs(gradient)
    state[i, WEALTH] -= gradient * w
    state[i, W] = w / average


@njit
def update(table, settings, index, value, lo, hi, offset, p, y, h, g):
    state, params = table.state, settings.params
    alpha, beta = params[P_ALPHA], params[P_BETA]
    average = _average_norm(table.scalars)
    for j in range(lo, hi):
        _learn_feature(state, offset + index[j], value[j], g, alpha, beta, average)


@njit
def update_classes(table, settings, index, value, lo, hi, block_rows, n_classes, d):
    """``update`` of every class c = 0 .. K-1 of one multiclass example (class c's rows
    at offset c * block_rows, its d = k loss'(p) in d[c]) in one loop over the
    example's features, the K classes of a feature (adjacent rows, row_pool.RowPool)
    together. The same bits as K calls of ``update`` in class order: class c's update
    reads and writes only class c's rows, and A (the scalars) is not changed by any."""
    state, params = table.state, settings.params
    alpha, beta = params[P_ALPHA], params[P_BETA]
    average = _average_norm(table.scalars)
    for j in range(lo, hi):
        row = index[j]
        x = value[j]
        for c in range(n_classes):
            _learn_feature(state, c * block_rows + row, x, d[c], alpha, beta, average)


@njit
def weight(table, settings, i):
    return table.state[i, W]


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

def all_weights(state, params, rounds, scalars=None):
    """Every row's weight (the stored w slot)."""
    return state[:, W].copy()


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights, base_scalars=None,
          shard_scalars=None):
    """Combine --coin learners that all started from ``base``.

    Arguments as the other modules' ``merge``, plus each learner's scalars
    (``base_scalars``, ``shard_scalars``: normalized_sum_norm_x, total_weight;
    needed, since the stored weight is the merged bettor's bet over the merged
    A). Returns a NEW state array; ``merge_scalars`` gives the scalars that go
    with it. The inputs are not modified. Shards whose rounds did not move are
    left out; with one shard left the result is a copy of it
    (merge_common.prepare).

    Rule, per coordinate, over the shards k that changed its row, with
    dG_k = G_k - G_base (the gradient mass shard k put on it):

        M = max M_k,   L = max L_k                 (running maxima: exact for the union)
        Z = Z_base + sum_k (Z_k - Z_base)           (the sum of -g: the union's)
        G = G_base + sum_k dG_k                     (the sum of |g|: the union's)
        wealth = max_k wealth_k  over the k with dG_k > 0
        w = bet / A,   bet = (alpha + wealth) Z / (L M (L M + G))
                      (0 while L M (L M + G) < TINY, the smallest normal double: _bet's rule)

    with A from the merged scalars: the state is a bettor, and w is what the
    kernel's ``_bet`` and stored weight give for it. A row changed without
    gradient mass (only M or L moved) takes the max over the shards that
    changed it; a row no shard changed keeps the base's row.

    Why. A KT bettor is a betting fraction Z / (L M + G), made of two sums over
    its coin outcomes -g_i, and a wealth alpha + wealth that it bets that
    fraction of. One machine that saw every shard's examples holds the two sums
    over all of them: they add, as FTRL's z and n or AdaGrad's G do (the
    outcomes were drawn at the shards' weights, not at that machine's: the
    approximation every merge makes). Its wealth is no such sum and cannot be
    computed from the shards' (it depends on the order and on the fractions
    that machine would have bet), but it can be bounded. Where the coin is
    biased (a feature that predicts), a KT bettor's wealth grows with the
    evidence (Orabona & Pal 2016: it is at least the potential of (Z, G), which
    grows with the number of outcomes at a given bias): the bettor that saw all
    the examples can be expected to be at least as rich as the richest bettor
    that saw a part of them. So the max is the largest wealth that, there,
    stays at or below one machine's; where the coin is fair, every bettor
    slowly loses and Z / (L M + G) is near 0, so the bet is small whatever the
    wealth. Larger choices overshoot: adding the shards' winnings counts the
    base's stake once per shard (a K-fold leveraged bet: each shard bet that
    whole stake at the same time), and multiplying their gains compounds
    approaches to the optimum that one machine makes once; the weights then
    oscillate from pass to pass or blow up (benchmarks/results/scale_out.md,
    "--coin's merge: the rules tried"). Smaller choices keep the merged
    bettors poorer than one machine: the dG-weighted mean of the wealth (one
    stake split between the K games) measured 1.027 x one machine's holdout
    loss on the text generator with 4 shards after 4 passes against 3, the
    max 1.008.

    The merged weight is that bettor's bet, not an average of the shards'
    weights: averaging weights keeps every shard's fraction, in which the
    prior L M in the denominator counts once per shard, and their wealth. On
    the text generator (200,000 examples, many rare features) the shards'
    dG-averaged weights after one pass on 4 shards were about half a single
    machine's in every frequency band (least-squares slope 1.96), and the
    bettors rebuilt to hold them (the rule before this one) stayed behind pass
    after pass (1.051 x one machine's holdout loss, 1.037 x its test loss).
    So the merged weight need not lie between the shards' weights (the union's
    fraction can exceed every shard's), and a row one shard changed keeps that
    shard's bettor (Z, G, M, wealth, L) while its stored weight becomes that
    bettor's current bet over the merged A.

    The cost: the union's bettor trusts the shards' direction. Where they are
    undertrained and wrong (cod-rna, unscaled, 16 shards of 3,700 examples
    merged once from scratch: several weights of the wrong sign) it amplifies
    them, test loss 0.84 against 0.40 for a shard alone and 0.39 for the
    averaged weights (benchmarks/results/merge_rules.md); merged after every
    pass it catches up and ends better than the averaged weights there.

    VW: ftrl.cc (--ftrl, --pistol, --coin) has no merge function and no
    allreduce in end_pass; VW's merge_models refuses it.

    Tested invariants (tests/test_merge.py): one shard = a copy; idle shards
    change nothing; rows no shard changed keep the base; Z and G add the
    increments; the wealth is the richest contributing shard's; the stored
    weight is the merged bettor's bet over the merged A; symmetric in the shard
    order, and associative up to rounding.
    """
    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result
    if base_scalars is None or shard_scalars is None:
        raise ValueError("merging --coin learners needs their scalars (normalized_sum_norm_x, total_weight)")
    touched = np.stack([(shards[k] != base).any(axis=1) for k in active])
    changed = touched.any(axis=0)
    m = np.max(np.stack([base[:, M]] + [shards[k][:, M] for k in active]), axis=0)
    lipschitz = np.max(np.stack([base[:, L]] + [shards[k][:, L] for k in active]), axis=0)
    grown = np.where(touched, merge_common.column(shards, active, G) - base[:, G], 0.0)
    grown = np.maximum(grown, 0.0)
    z = base[:, Z] + np.where(touched, merge_common.column(shards, active, Z) - base[:, Z], 0.0).sum(axis=0)
    wealths = merge_common.column(shards, active, WEALTH)
    total = grown.sum(axis=0)
    # the richest shard among those that put gradient mass on the row (among those
    # that changed it, where none did: only M or L moved)
    richest = np.where(grown > 0.0, wealths, -np.inf).max(axis=0)   # grown is 0 where untouched
    wealth = np.where(np.isfinite(richest), richest, np.where(touched, wealths, -np.inf).max(axis=0))
    g_sum = base[:, G] + total
    lm = lipschitz * m
    merged = merge_scalars(base_scalars, shard_scalars, params, base_rounds, shard_rounds, shard_weights)
    average = (merged[NORM_X_SUM] + 1e-6) / merged[TOTAL_WEIGHT]
    denominator = lm * (lm + g_sum)
    normal = denominator >= TINY   # _bet's rule; 1.0 below stands in where the bet is 0
    with np.errstate(divide="ignore", invalid="ignore"):
        bet = np.where(normal, (params[P_ALPHA] + wealth) / np.where(normal, denominator, 1.0) * z, 0.0)
    out = np.array(base, dtype=np.float64, copy=True)
    out[changed, W] = bet[changed] / average
    out[changed, Z] = z[changed]
    out[changed, G] = g_sum[changed]
    out[changed, M] = m[changed]
    out[changed, WEALTH] = wealth[changed]
    out[changed, L] = lipschitz[changed]
    return out


def merge_scalars(base_scalars, shard_scalars, params, base_rounds, shard_rounds, shard_weights):
    """The scalars that go with ``merge``'s state: the base's sums plus every
    shard's increments (sums over examples: the union's). One shard, or at most
    one that learned: that learner's scalars (as merge_common.prepare returns
    its state)."""
    if len(shard_scalars) == 1:
        return np.array(shard_scalars[0], dtype=np.float64, copy=True)
    active = [k for k, r in enumerate(shard_rounds) if r > base_rounds]
    if not active:
        return np.array(base_scalars, dtype=np.float64, copy=True)
    if len(active) == 1:
        return np.array(shard_scalars[active[0]], dtype=np.float64, copy=True)
    out = np.array(base_scalars, dtype=np.float64, copy=True)
    for slot in (NORM_X_SUM, TOTAL_WEIGHT):
        out[slot] = base_scalars[slot] + sum(shard_scalars[k][slot] - base_scalars[slot] for k in active)
    return out
