"""Plain online (sub)gradient descent with a decaying rate (``--sgd``).

The baseline the AdaGrad and ScInOL papers compare against (ScInOL §4: "SGD
with eta_t ~ 1/sqrt(t)"): w_i <- w_i - eta_t g_i with

    eta_t = eta / (initial_t + t)^power_t,   t the round number (1 for the first update),

by default (power_t 1/2, initial_t 0) eta / sqrt(t). VW's ``--sgd`` (its gd with
none of --adaptive/--normalized/--invariant, registry._vw_gd_rules) is this rule
with eta * initial_t^power_t as eta, initial_t 1 and -l 10 by default, when every
example has importance 1 (VW's t is the importance sum, olcli's the update count):
so ``olcli --sgd -l 10 --initial-t 1`` is VW's ``--sgd`` (tests/test_algorithms.py
compares it with ``--gd`` with all switches off).
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine import merge_common
from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass
from olcli.engine.records import C_ROUNDS

SLOTS = ("w",)
W = 0
PARAMS = ("eta", "power_t", "initial_t")
P_ETA, P_POWER_T, P_INITIAL_T = 0, 1, 2


@njit
def predict(table, settings, index, value, lo, hi, offset, learning, h):
    state = table.state
    p = 0.0
    for j in range(lo, hi):
        p += state[offset + index[j], W] * value[j]
    return p


@njit
def update(table, settings, index, value, lo, hi, offset, p, y, h, g):
    state, params, rounds = table.state, settings.params, table.counters[C_ROUNDS]
    t = params[P_INITIAL_T] + (rounds + 1.0)
    power_t = params[P_POWER_T]
    rate = params[P_ETA] / (math.sqrt(t) if power_t == 0.5 else t ** power_t)
    for j in range(lo, hi):
        state[offset + index[j], W] -= rate * g * value[j]


@njit
def weight(table, settings, i):
    state = table.state
    return state[i, W]


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
    """Every row's weight (the w slot)."""
    return state[:, W].copy()


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights):
    """Combine SGD learners that all started from ``base``.

    base: state array (rows, slots) all shards started from; shards: list of
    state arrays (same shape) after each learned its shard; params: float64
    array in PARAMS order; base_rounds: float, the rounds counter of the base;
    shard_rounds: list of float, each shard's rounds counter after learning
    (includes base_rounds); shard_weights: list of float, importance-weighted
    count of examples each shard learned from. Returns a NEW state array (same
    shape) for the combined learner, whose rounds counter will be
    base_rounds + sum(r - base_rounds). The inputs are not modified. Shards
    whose rounds did not move are left out; with one shard left the result is
    a copy of it (merge_common.prepare).

    Rule: over the shards k that learned, with p_k = shard_weights[k] / sum of
    their weights (p_k = 1 / their number when those weights are all 0),

        w = sum_k p_k w_k

    and a row no shard changed keeps the base's value exactly.

    Why. SGD keeps no per-coordinate statistics, so there is nothing finer
    than how much each shard learned to weigh by. Averaging the machines' SGD
    solutions is parallelized SGD (Zinkevich, Weimer, Smola, Li 2010); weighing
    by examples is what VW's model merging does for plain gd weights (merge.cc
    ``calc_per_model_weighting``, gd.cc ``merge_weights_simple``), and its
    allreduce takes the plain mean (accumulate.cc ``accumulate_avg``, from
    gd.cc ``end_pass``), our fallback. VW's per-model weights are the models'
    lifetime example counts, so a base's examples count once per model and a
    model that learned nothing still pulls toward the base; here the weights
    are what each shard learned, so an idle shard weighs nothing. The rate
    eta / (initial_t + t)^power_t then continues from t = the merged rounds,
    as if all examples had been seen in one run. The cost of having no per-coordinate
    weights: a feature only shard k saw moves by p_k of what k learned
    (w_base + p_k (w_k - w_base)); the adaptive learners avoid that.

    Tested invariants (tests/test_merge.py): one shard = a copy; idle shards
    change nothing; rows no shard changed keep the base; the merged weight
    lies between the shards' weights; symmetric in the shard order, and
    associative when a merged learner's weight is the sum of its shards'.
    """
    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result
    counts = np.array([float(shard_weights[k]) for k in active])
    total = counts.sum()
    share = counts / total if total > 0.0 else np.full(len(active), 1.0 / len(active))
    values = merge_common.column(shards, active, W)
    w = (share[:, None] * values).sum(axis=0)
    changed = (values != base[:, W]).any(axis=0)
    out = np.array(base, dtype=np.float64, copy=True)
    out[changed, W] = w[changed]
    return out
