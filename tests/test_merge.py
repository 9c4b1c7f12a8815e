"""Merge rules for learners trained on separate shards (issue: Learner API).

Each algorithm module has ``merge(base, shards, params, base_rounds,
shard_rounds, shard_weights)``; the rules and their reasons are in the
docstrings and in benchmarks/results/merge_rules.md. Here: hand-computed values
on tiny states, the shared guarantees (one shard = no merge, idle shards and
untouched rows change nothing, a row one shard updated keeps that shard's
weight), and properties over states made by really training the kernels.
"""

import math
from typing import NamedTuple

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from olcli.engine import adagrad, adagrad_dual, coin, ftrl, gd, scinol1, scinol2, sgd
from olcli.engine.records import C_ROUNDS, C_WEIGHT, N_COUNTERS, Settings, Table
from olcli.engine.registry import ALGORITHMS

MODULES = {"adagrad": adagrad, "adagrad-dual": adagrad_dual, "ftrl": ftrl,
           "scinol1": scinol1, "scinol2": scinol2, "sgd": sgd, "gd": gd, "coin": coin}
NAMES = {module: name for name, module in MODULES.items()}

# The slot holding the squared-gradient sum each adaptive rule weighs by (--gd: when adaptive).
GROWTH_SLOT = {"adagrad": adagrad.G, "adagrad-dual": adagrad_dual.G, "ftrl": ftrl.N,
               "scinol1": 1, "scinol2": 1, "gd": gd.G, "coin": coin.G}


def initial_scalars(module, params):
    """A fresh learner's global scalars (registry), or None for an algorithm without."""
    spec = ALGORITHMS[NAMES[module]]
    if not spec.scalars:
        return None
    return np.array(spec.initial_scalars(dict(zip(module.PARAMS, params))), dtype=np.float64)


def _table(state, rounds, scalars=None):
    """The kernels' records around a bare state (no label range: nothing is clipped).
    Every example has importance 1, so the weighted count is the rounds."""
    counters = np.zeros(N_COUNTERS)
    counters[C_ROUNDS] = rounds
    counters[C_WEIGHT] = rounds
    return Table(state, counters, np.zeros(0) if scalars is None else scalars)


def _settings(params):
    return Settings(np.asarray(params, dtype=np.float64), 1, 0.5, False, True, 0, 0, False, math.nan, math.nan)


def kernel_weights(module, state, params, rounds, scalars=None):
    """Row weights from the compiled kernel, one call per row."""
    if scalars is None:
        scalars = initial_scalars(module, params)
    return np.array([module.weight(_table(state, rounds, scalars), _settings(params), i) for i in range(len(state))])


def all_weights(module, state, params, rounds, scalars=None):
    """The module's all_weights, with the learner's scalars where it has them."""
    if getattr(module, "SCALARS", None):
        return module.all_weights(state, params, rounds, scalars)
    return module.all_weights(state, params, rounds)


def merge(module, base, shards, params, base_rounds, rounds, weights, base_scalars=None, shard_scalars=None):
    """The module's merge, and the merged scalars (None for an algorithm without)."""
    if not getattr(module, "SCALARS", None):
        return module.merge(base, shards, params, base_rounds, rounds, weights), None
    base_scalars = initial_scalars(module, params) if base_scalars is None else base_scalars
    shard_scalars = [base_scalars] * len(shards) if shard_scalars is None else shard_scalars
    state = module.merge(base, shards, params, base_rounds, rounds, weights, base_scalars=base_scalars,
                         shard_scalars=shard_scalars)
    return state, module.merge_scalars(base_scalars, shard_scalars, params, base_rounds, rounds, weights)


# ---------------------------------------------------------------------------
# Hand-computed values. Rows: 0 = untouched by every shard, then the cases.

def test_adagrad_hand_computed_without_regularisation():
    params = np.array([0.5, 0.0, 0.0, 0.0, 0.0])        # eta, delta, l1, l2, radius
    base = np.array([[0.5, 1.0, 0.0],                    # w, G, last
                     [0.0, 0.0, 0.0],
                     [1.0, 1.0, 0.0],
                     [0.0, 0.0, 0.0]])
    a = np.array([[0.5, 1.0, 0.0],
                  [0.3, 4.0, 0.0],                       # only a updated it
                  [2.0, 4.0, 0.0],                       # dG_a = 3
                  [1.0, 2.0, 0.0]])                      # dG_a = 2
    b = np.array([[0.5, 1.0, 0.0],
                  [0.0, 0.0, 0.0],
                  [0.0, 2.0, 0.0],                       # dG_b = 1
                  [3.0, 2.0, 0.0]])                      # dG_b = 2
    merged = adagrad.merge(base, [a, b], params, 5.0, [9.0, 7.0], [4.0, 2.0])
    # row 2: w = (3 * 2 + 1 * 0) / 4 = 1.5, G = 1 + (3 * 3 + 1 * 1) / 4 = 3.5 (VW
    # would give w = (4 * 2 + 2 * 0) / 6 = 1.33 and G = (16 + 4) / 6 = 3.33: it
    # weighs and averages by the totals, base included); row 3: G = 0 + (4 + 4) / 4
    assert merged.tolist() == [[0.5, 1.0, 0.0],
                               [0.3, 4.0, 0.0],
                               [1.5, 3.5, 0.0],
                               [2.0, 2.0, 0.0]]


def test_adagrad_hand_computed_lazy_l1_settles_each_shard_at_its_own_rounds():
    params = np.array([1.0, 0.0, 0.1, 0.0, 0.0])        # eta 1, delta 0, l1 0.1
    base = np.array([[1.0, 4.0, 10.0],
                     [1.0, 4.0, 10.0],
                     [0.0, 0.0, 0.0]])
    a = np.array([[1.0, 4.0, 10.0],
                  [2.0, 16.0, 12.0],                     # h = 4, owes 2 at a's round 14: 2 - 0.05
                  [-1.0, 1.0, 14.0]])                    # h = 1, owes nothing
    b = np.array([[1.0, 4.0, 10.0],
                  [0.9, 4.0, 12.0],                      # only read (settled): G did not grow
                  [0.5, 4.0, 11.0]])                     # h = 2, owes 1 at b's round 12: 0.5 - 0.05
    merged = adagrad.merge(base, [a, b], params, 10.0, [14.0, 12.0], [4.0, 2.0])
    assert merged[0].tolist() == [1.0, 4.0, 10.0]        # keeps the base, owes 6 rounds at 16
    assert merged[1].tolist() == pytest.approx([1.95, 16.0, 16.0], rel=1e-15)
    # (1 * -1 + 4 * 0.45) / 5 = 0.16, G = (1 * 1 + 4 * 4) / 5, settled at the merged round 10 + 4 + 2
    assert merged[2].tolist() == pytest.approx([0.16, 3.4, 16.0], rel=1e-14)
    assert adagrad.weight(_table(merged, 16.0), _settings(params), 0) == pytest.approx(0.7, rel=1e-15)


def test_adagrad_hand_computed_lazy_l2():
    params = np.array([1.0, 0.0, 0.0, 0.5, 0.0])        # eta 1, delta 0, l2 0.5
    base = np.zeros((1, 3))
    a = np.array([[1.0, 4.0, 12.0]])                     # factor 2 / 2.5 = 0.8, owes 2 at 14: 0.64
    b = np.array([[2.0, 1.0, 11.0]])                     # factor 1 / 1.5, owes 1 at 12: 4/3
    merged = adagrad.merge(base, [a, b], params, 10.0, [14.0, 12.0], [1.0, 1.0])
    # (4 * 0.64 + 1 * 4/3) / 5, G = (4 * 4 + 1 * 1) / 5
    assert merged[0].tolist() == pytest.approx([0.7786666666666667, 3.4, 16.0], rel=1e-15)


def test_adagrad_radius_bounds_the_merge_despite_rounding():
    params = np.array([1.0, 0.0, 0.0, 0.0, 0.3])        # radius 0.3
    base = np.zeros((1, 3))
    shards = [np.array([[0.3, g, 0.0]]) for g in (7.0, 23.0, 48.0)]
    # (7 * 0.3 + 23 * 0.3 + 48 * 0.3) / 78 rounds to 0.30000000000000004
    merged = adagrad.merge(base, shards, params, 0.0, [1.0, 1.0, 1.0], [1.0, 1.0, 1.0])
    assert merged[0].tolist() == [0.3, (49.0 + 529.0 + 2304.0) / 78.0, 0.0]


def test_adagrad_dual_hand_computed():
    params = np.array([1.0, 0.0, 0.0])                   # eta 1, delta 0, l1 0: w = -u / sqrt(G)
    base = np.array([[0.5, 1.0],
                     [0.0, 0.0]])
    a = np.array([[0.5, 1.0],
                  [-2.0, 4.0]])                          # w_a = 1
    b = np.array([[0.5, 1.0],
                  [1.0, 1.0]])                           # w_b = -1
    merged = adagrad_dual.merge(base, [a, b], params, 2.0, [6.0, 8.0], [4.0, 6.0])
    # w = (4 * 1 + 1 * -1) / 5 = 0.6, G = 5, u = -0.6 sqrt(5). (Adding the sums
    # instead would give u = -1, weight 1 / sqrt(5) = 0.447.)
    assert merged[0].tolist() == [0.5, 1.0]
    assert merged[1].tolist() == pytest.approx([-1.3416407864998738, 5.0], rel=1e-15)


def test_adagrad_dual_hand_computed_with_l1_rebuilds_u_at_the_merged_rounds():
    params = np.array([1.0, 0.0, 0.1])                   # eta 1, delta 0, l1 0.1
    base = np.array([[0.0, 0.0],
                     [0.0, 0.0],
                     [-0.2, 1.0]])                       # |u| / 2 = l1: weight 0
    a = np.array([[-2.0, 4.0],                           # at t = 6: (6 / 2) (2/6 - 0.1) = 0.7
                  [0.3, 1.0],                            # 0.3 / 6 < l1: weight 0
                  [0.55, 2.0]])                          # 0.55 / 6 < l1: weight 0
    b = np.array([[1.0, 1.0],                            # at t = 8: -(8 / 1) (1/8 - 0.1) = -0.2
                  [0.5, 4.0],                            # 0.5 / 8 < l1
                  [0.75, 3.0]])                          # 0.75 / 8 < l1
    merged = adagrad_dual.merge(base, [a, b], params, 2.0, [6.0, 8.0], [4.0, 6.0])
    # R = 12. Row 0: w = (4 * 0.7 + 1 * -0.2) / 5 = 0.52, G = 5,
    # u = -(0.52 sqrt(5) + 0.1 * 12) = -2.362755...
    assert merged[0].tolist() == pytest.approx([-2.3627553482998906, 5.0], rel=1e-15)
    assert adagrad_dual.weight(_table(merged, 12.0), _settings(params), 0) == pytest.approx(0.52, rel=1e-14)
    # Row 1: both weights 0: u = pooled sum 0.8, inside [-1.2, 1.2]
    assert merged[1].tolist() == pytest.approx([0.8, 5.0], rel=1e-15)
    # Row 2: pooled -0.2 + 0.75 + 0.95 = 1.5, clipped to l1 R = 1.2
    assert merged[2].tolist() == pytest.approx([1.2, 4.0], rel=1e-15)
    assert adagrad_dual.weight(_table(merged, 12.0), _settings(params), 2) == 0.0


def test_ftrl_hand_computed():
    params = np.array([1.0, 1.0, 1.0, 0.0])              # alpha 1, beta 1, l1 1, l2 0: D = 1 + sqrt(n)
    base = np.array([[0.3, 2.0],
                     [0.0, 0.0],
                     [0.0, 0.0]])
    a = np.array([[0.3, 2.0],
                  [-5.0, 9.0],                           # w_a = -(-5 + 1) / 4 = 1
                  [0.5, 1.0]])                           # |z| <= l1: 0
    b = np.array([[0.3, 2.0],
                  [11.0, 16.0],                          # w_b = -(11 - 1) / 5 = -2
                  [0.75, 1.0]])                          # 0
    merged = ftrl.merge(base, [a, b], params, 0.0, [3.0, 4.0], [3.0, 4.0])
    assert merged[0].tolist() == [0.3, 2.0]
    # w = (9 * 1 + 16 * -2) / 25 = -0.92, n = 25, D = 6: z = -(-0.92 * 6 - 1) = 6.52
    assert merged[1].tolist() == pytest.approx([6.52, 25.0], rel=1e-15)
    assert ftrl.weight(_table(merged, 7.0), _settings(params), 1) == pytest.approx(-0.92, rel=1e-15)
    # weights 0: pooled z 1.25 clipped into [-1, 1]
    assert merged[2].tolist() == [1.0, 2.0]


def test_ftrl_hand_computed_without_l1():
    params = np.array([1.0, 1.0, 0.0, 0.0])
    base = np.zeros((1, 2))
    a = np.array([[-4.0, 9.0]])                          # w_a = 1
    b = np.array([[10.0, 16.0]])                         # w_b = -2
    merged = ftrl.merge(base, [a, b], params, 0.0, [3.0, 4.0], [3.0, 4.0])
    assert merged[0].tolist() == pytest.approx([5.52, 25.0], rel=1e-15)   # z = 0.92 * 6


def test_sgd_hand_computed():
    params = np.array([0.5])
    base = np.array([[1.0], [2.0], [0.0]])
    a = np.array([[1.0], [4.0], [1.0]])
    b = np.array([[1.0], [0.0], [0.0]])
    merged = sgd.merge(base, [a, b], params, 1.0, [4.0, 2.0], [3.0, 1.0])
    # p = (0.75, 0.25); row 2 is diluted: only a saw it
    assert merged[:, 0].tolist() == [1.0, 3.0, 0.75]
    # all weights 0: the plain mean
    plain = sgd.merge(base, [a, b], params, 1.0, [4.0, 2.0], [0.0, 0.0])
    assert plain[:, 0].tolist() == [1.0, 2.0, 0.5]


def test_scinol1_hand_computed():
    params = np.array([1.0])                             # epsilon
    base = np.array([[0.5, 1.0, 1.0, 0.75],              # G, S2, M, beta
                     [0.0, 0.0, 0.0, 0.0],
                     [0.0, 0.0, 0.0, 0.0]])
    a = np.array([[0.5, 1.0, 1.0, 0.75],
                  [2.0, 3.0, 1.0, 0.5],                  # s = 2, theta = 1: w_a = 0.5 (e^0.5 - 1) / 4
                  [0.0, 0.0, 3.0, 0.2]])                 # touched, no gradient
    b = np.array([[0.5, 1.0, 1.0, 0.75],
                  [0.0, 12.0, 2.0, 0.25],                # s = 4, theta = 0: w_b = 0
                  [0.0, 0.0, 0.0, 0.0]])                 # untouched
    merged = scinol1.merge(base, [a, b], params, 3.0, [5.0, 6.0], [2.0, 3.0])
    assert merged[0].tolist() == [0.5, 1.0, 1.0, 0.75]
    # S2 = 15, M = 2, s = sqrt(19), beta = 0.25, w = 3 w_a / 15 = 0.025 (e^0.5 - 1),
    # G = 2 log(1 + 2 w s / beta) s
    assert merged[1].tolist() == pytest.approx([3.907597280357171, 15.0, 2.0, 0.25], rel=1e-14)
    assert scinol1.weight(_table(merged, 14.0), _settings(params), 1) == pytest.approx(0.016218031767503204,
                                                                         rel=1e-14)
    assert merged[2].tolist() == [0.0, 0.0, 3.0, 0.2]


def test_scinol2_hand_computed():
    params = np.array([1.0])                             # epsilon
    base = np.array([[0.5, 1.0, 1.0, 0.75],              # G, S2, M, eta
                     [0.0, 0.0, 0.0, 0.0],
                     [0.0, 0.0, 0.0, 0.0],
                     [0.0, 0.0, 0.0, 0.0]])
    a = np.array([[0.5, 1.0, 1.0, 0.75],
                  [2.0, 3.0, 1.0, 2.0],                  # s = 2, theta = 1: w_a = 1 / 4 * 2 = 0.5
                  [2.0, 3.0, 1.0, 2.0],                  # the same
                  [0.0, 0.0, 3.0, 1.0]])                 # touched (eta = eps), no gradient
    b = np.array([[0.5, 1.0, 1.0, 0.75],
                  [-1.0, 12.0, 2.0, 2.0],                # s = 4, theta = -1/4: w_b = -1/4 / 8 * 2 = -1/16
                  [-1.0, 12.0, 2.0, 4.0],                # w_b = -1/8
                  [0.0, 0.0, 0.0, 0.0]])
    merged = scinol2.merge(base, [a, b], params, 3.0, [5.0, 6.0], [2.0, 3.0])
    assert merged[0].tolist() == [0.5, 1.0, 1.0, 0.75]
    # w = (3 * 0.5 - 12 / 16) / 15 = 0.05, mean |theta| = (3 * 1 + 12 / 4) / 15 = 0.4,
    # s = sqrt(19): G = 0.4 sqrt(19), eta = 2 * 0.05 sqrt(19) / 0.4 = sqrt(19) / 4
    assert merged[1].tolist() == pytest.approx([1.7435595774162698, 15.0, 2.0, 1.0897247358851685],
                                               rel=1e-15)
    assert scinol2.weight(_table(merged, 14.0), _settings(params), 1) == pytest.approx(0.05, rel=1e-14)
    # w = (1.5 - 1.5) / 15 = 0: G = 0, eta = (3 * 2 + 12 * 4) / 15 = 3.6
    assert merged[2].tolist() == pytest.approx([0.0, 15.0, 2.0, 3.6], rel=1e-15)
    assert merged[3].tolist() == [0.0, 0.0, 3.0, 1.0]


def test_gd_hand_computed():
    #               eta  power_t initial_t adaptive normalized invariant l1  l2
    params = np.array([0.5, 0.5, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    base = np.array([[0.5, 1.0, 1.0],                    # w, G, N: no shard touches it
                     [0.0, 0.0, 0.0],
                     [1.0, 1.0, 1.0]])
    a = np.array([[0.5, 1.0, 1.0],
                  [0.2, 4.0, 2.0],                       # dG 4
                  [2.0, 3.0, 1.0]])                      # dG 2
    b = np.array([[0.5, 1.0, 1.0],
                  [-0.4, 1.0, 1.0],                      # dG 1 (N 1: not rescaled to the merged 2)
                  [0.5, 2.0, 4.0]])                      # dG 1
    scalars = [np.array([0.0, 0.0, 0.0, 1.0]), np.array([3.0, 2.0, 0.0, 1.0]), np.array([5.0, 4.0, 0.0, 1.0])]
    merged, merged_scalars = merge(gd, base, [a, b], params, 2.0, [4.0, 5.0], [2.0, 3.0], scalars[0], scalars[1:])
    # row 1 (the base never learned it: the mean): (4 * 0.2 + 1 * -0.4) / 5 = 0.08, G = (4 * 4 + 1 * 1) / 5,
    # N = 2; row 2 (learned, G_base 1: the mean's move lengthened): mean (2 * 2 + 1 * 0.5) / 3 = 1.5,
    # n = (2 + 1)^2 / (2^2 + 1^2) = 1.8, w = 1 + sqrt(1.8) (1.5 - 1); G = 1 + (2 * 2 + 1 * 1) / 3, N = 4
    np.testing.assert_allclose(merged, [[0.5, 1.0, 1.0], [0.08, 3.4, 2.0],
                                        [1.0 + math.sqrt(1.8) * 0.5, 1.0 + 5.0 / 3.0, 4.0]], rtol=1e-15)
    assert merged_scalars.tolist() == [8.0, 6.0, 0.0, 1.0]
    # initial_t 2: VW's G starts there on a row's first touch, and counts once
    params[gd.P_INITIAL_T] = 2.0
    a[1, gd.G], b[1, gd.G] = 6.0, 3.0
    merged, _ = merge(gd, base, [a, b], params, 2.0, [4.0, 5.0], [2.0, 3.0], scalars[0], scalars[1:])
    assert merged[1].tolist() == pytest.approx([0.08, 2.0 + 3.4, 2.0], rel=1e-15)


def test_gd_hand_computed_with_l2():
    params = np.array([0.5, 0.5, 0.0, 1.0, 1.0, 1.0, 0.0, 0.1])
    base = np.array([[0.5, 1.0, 1.0], [0.0, 0.0, 0.0], [0.5, 1.0, 1.0]])
    a = np.array([[0.5, 1.0, 1.0], [0.2, 4.0, 2.0],      # predicts with 0.2 * 0.5 = 0.1
                  [0.8, 3.0, 1.0]])                      # 0.8 * 0.5 = 0.4; the base as a sees it 0.25; dG 2
    b = np.array([[0.5, 1.0, 1.0], [-0.4, 1.0, 1.0],     # -0.4 * 0.8 = -0.32
                  [0.3, 2.0, 1.0]])                      # 0.3 * 0.8 = 0.24; the base as b sees it 0.4; dG 1
    scalars = [np.array([0.0, 0.0, 0.0, 1.0]), np.array([3.0, 2.0, 0.0, 0.5]), np.array([5.0, 4.0, 0.0, 0.8])]
    merged, merged_scalars = merge(gd, base, [a, b], params, 2.0, [4.0, 5.0], [2.0, 3.0], scalars[0], scalars[1:])
    # contraction 0.5 * 0.8 = 0.4 (every shard's shrinkage, as sequential training would);
    # row 1: w = (4 * 0.1 + 1 * -0.32) / 5 = 0.016, stored as 0.016 / 0.4; row 0 keeps the base's row;
    # row 2 (learned): mean (2 * 0.4 + 1 * 0.24) / 3, the learning moves 0.4 - 0.25 and 0.24 - 0.4,
    # their dG-weighted mean (2 * 0.15 - 0.16) / 3, n = 1.8: w = 1.04 / 3 + (sqrt(1.8) - 1) 0.14 / 3
    row2 = 1.04 / 3.0 + (math.sqrt(1.8) - 1.0) * 0.14 / 3.0
    assert merged_scalars.tolist() == pytest.approx([8.0, 6.0, 0.0, 0.4], rel=1e-15)
    np.testing.assert_allclose(merged, [[0.5, 1.0, 1.0], [0.04, 3.4, 2.0], [row2 / 0.4, 1.0 + 5.0 / 3.0, 1.0]],
                               rtol=1e-13)
    assert all_weights(gd, merged, params, 0.0, merged_scalars).tolist() == pytest.approx([0.2, 0.016, row2],
                                                                                          rel=1e-13)


def test_gd_relaxed_move_of_equal_shards_is_sqrt_k_times_one_shards():
    """3b: K shards that grew a learned row alike (equal dG) and moved it alike: the merged
    move is sqrt(K) times one shard's (the mean's is one shard's); on a row the base never
    learned (G_base 0) the merged weight is the shards' mean; G grows by one shard's
    increment either way."""
    params = np.array([3.0, 0.5, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0])
    base = np.array([[0.25, 2.0, 1.0],     # learned
                     [0.0, 0.0, 0.0]])     # never learned
    for count in (2, 3, 4):
        shards = [np.array([[0.25 + 0.5, 2.0 + 1.5, 1.0], [0.1 * (k + 1), 1.5, 1.0]]) for k in range(count)]
        merged, _ = merge(gd, base, shards, params, 10.0, [20.0] * count, [10.0] * count)
        assert merged[0].tolist() == pytest.approx([0.25 + math.sqrt(count) * 0.5, 3.5, 1.0], rel=1e-15)
        assert merged[1].tolist() == pytest.approx([0.1 * (count + 1) / 2.0, 1.5, 1.0], rel=1e-15)


def test_coin_hand_computed():
    params = np.array([4.0, 1.0])                        # alpha, beta
    base = np.array([[0.3, 1.0, 1.0, 1.0, 0.5, 1.0],     # w, Z, G, M, wealth, L: no shard touches it
                     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],     # both shards, from a zero base
                     [0.2, 1.0, 2.0, 1.0, 0.5, 1.0],     # both shards, from a learned base
                     [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])    # shard a only
    a = np.array([[0.3, 1.0, 1.0, 1.0, 0.5, 1.0],
                  [0.1, 2.0, 3.0, 2.0, 1.0, 1.0],
                  [0.25, 2.0, 3.0, 1.0, 1.5, 1.0],
                  [0.3, 0.5, 0.5, 1.0, 0.2, 1.0]])
    b = np.array([[0.3, 1.0, 1.0, 1.0, 0.5, 1.0],
                  [-0.05, -1.0, 1.0, 1.0, 0.5, 2.0],
                  [0.1, 0.5, 5.0, 2.0, 0.3, 1.0],
                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    scalars = [np.array([0.0, 0.0]), np.array([3.0, 2.0]), np.array([5.0, 4.0])]
    merged, merged_scalars = merge(coin, base, [a, b], params, 2.0, [4.0, 5.0], [2.0, 3.0], scalars[0], scalars[1:])
    assert merged_scalars.tolist() == [8.0, 6.0]
    average = (8.0 + 1e-6) / 6.0
    assert merged[0].tolist() == base[0].tolist()
    # row 1: Z = 2 - 1 = 1, G = 3 + 1 = 4, M = 2, L = 2 (L M = 4),
    # wealth the richer shard's: max(1.0, 0.5) = 1.0, bet = (4 + 1) * 1 / (4 * 8) = 0.15625
    assert merged[1].tolist() == pytest.approx([0.15625 / average, 1.0, 4.0, 2.0, 1.0, 2.0], rel=1e-14)
    # row 2: Z = 1 + 1 - 0.5 = 1.5, G = 2 + 1 + 3 = 6, M = 2, L = 1 (L M = 2),
    # wealth max(1.5, 0.3) = 1.5, bet = 5.5 * 1.5 / (2 * 8) = 0.515625
    assert merged[2].tolist() == pytest.approx([0.515625 / average, 1.5, 6.0, 2.0, 1.5, 1.0], rel=1e-14)
    # row 3, shard a's bettor: bet = 4.2 * 0.5 / (1 * 1.5) = 1.4, its weight over the merged A
    assert merged[3].tolist() == pytest.approx([1.4 / average, 0.5, 0.5, 1.0, 0.2, 1.0], rel=1e-14)


def test_coin_merge_bets_0_where_the_denominator_is_subnormal():
    """The merged bettor's bet is the kernel's (coin._bet): 0 while L M (L M + G) is below
    the smallest normal double. Rows 0 and 1: two shards' tiny-importance updates with
    beta 0 (L = 5e-161, M = 1, G = 1e-160: L M (L M + G) = 7.5e-321, a subnormal), where
    (alpha + wealth) / it overflowed and the stored weight was NaN (Z = 0) or inf; row 2
    an ordinary bettor; row 3 one whose L M (L M + G) = 2.25e-308 is just normal: it bets,
    (4 / 2.25e-308) 1e-300 = 1.8e8. Every stored weight is what the kernel's progressive
    prediction gives the merged state for x = 1 at importance 0 (M' = M = 1: bet / A)."""
    params = np.array([4.0, 0.0])                        # alpha, beta 0
    base = np.zeros((5, 6))
    a = np.array([[0.0, 5e-161, 5e-161, 1.0, 0.0, 5e-161],
                  [0.0, 5e-161, 5e-161, 1.0, 0.0, 5e-161],
                  [0.3, 0.5, 0.5, 1.0, 0.2, 1.0],
                  [0.0, 1e-300, 0.0, 1.0, 0.0, 1.5e-154],
                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    b = np.array([[0.0, -5e-161, 5e-161, 1.0, 0.0, 5e-161],
                  [0.0, 5e-161, 5e-161, 1.0, 0.0, 5e-161],
                  [-0.1, -0.25, 0.25, 1.0, 0.1, 0.5],
                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                  [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    scalars = [np.array([0.0, 0.0]), np.array([1.0, 1.0]), np.array([2.0, 2.0])]
    merged, merged_scalars = merge(coin, base, [a, b], params, 0.0, [1.0, 2.0], [1.0, 2.0], scalars[0], scalars[1:])
    assert np.isfinite(merged).all()
    lm = merged[:, coin.L] * merged[:, coin.M]
    assert 0.0 < (lm * (lm + merged[:, coin.G]))[0] < np.finfo(np.float64).tiny
    assert merged[:2, coin.W].tolist() == [0.0, 0.0]
    assert merged[2, coin.W] != 0.0 and 1e8 < merged[3, coin.W] < 1e9
    for row in range(4):
        table = _table(merged.copy(), 3.0, merged_scalars.copy())
        p = coin.predict(table, _settings(params), np.array([row], np.int32), np.array([1.0]), 0, 1, 0, True, 0.0)
        assert p == merged[row, coin.W], row
    assert merged[:, coin.W].tolist() == _coin_bets_over_a(merged, params, merged_scalars).tolist()


def test_mixture_pass_scalars_count_the_first_pass_as_the_shards_mean():
    """mixture.pass_scalars: after the run's first pass on K >= 2 shards each
    member's cumulative loss is the base's plus the shards' mean increment,
    base L + (merged L - base L) / K; after a later pass, or with one shard, the
    merged scalars as they are; the members' own scalars and the labels seen are
    always the merged ones."""
    from olcli.engine import mixture

    base = np.arange(len(mixture.SCALARS), dtype=np.float64)
    merged = base + 0.5
    base[mixture.LOSSES:mixture.LOSSES + 4] = [100.0, 90.0, 120.0, 95.0]
    merged[mixture.LOSSES:mixture.LOSSES + 4] = [130.0, 115.0, 150.0, 126.0]   # 4 shards added 30, 25, 30, 31
    out = mixture.pass_scalars(base, merged, 4, True)
    assert out[mixture.LOSSES:mixture.LOSSES + 4].tolist() == [107.5, 96.25, 127.5, 102.75]
    rest = np.r_[0:mixture.LOSSES, mixture.LOSSES + 4:len(mixture.SCALARS)]
    assert out[rest].tolist() == merged[rest].tolist()
    assert mixture.pass_scalars(base, merged, 4, False).tolist() == merged.tolist()
    assert mixture.pass_scalars(base, merged, 1, True).tolist() == merged.tolist()
    assert merged[mixture.LOSSES] == 130.0   # the inputs are left alone


# ---------------------------------------------------------------------------
# Training real states: random sparse logistic streams through the kernels.

def _stream(rng, n, features, scale, factor):
    rows = []
    for _ in range(n):
        k = int(rng.integers(1, len(features) + 1))
        index = np.sort(rng.choice(features, size=k, replace=False)).astype(np.int64)
        value = rng.normal(size=k) * scale[index] * factor[index]
        rows.append((index, value, float(rng.choice([-1.0, 1.0]))))
    return rows


def _train(module, state, params, rounds, rows, scalars=None):
    """Learn from ``rows`` (logistic loss, importance 1) in place; returns the new rounds."""
    for index, value, label in rows:
        p = module.predict(_table(state, rounds, scalars), _settings(params), index, value, 0, len(index), 0,
                           True, 1.0)
        z = label * p
        sigma = math.exp(-z) / (1.0 + math.exp(-z)) if z >= 0.0 else 1.0 / (1.0 + math.exp(z))
        table = _table(state, rounds, scalars)
        table.counters[C_WEIGHT] += 1.0  # the kernels see this example's importance counted
        module.update(table, _settings(params), index, value, 0, len(index), 0, p, label, 1.0, -label * sigma)
        rounds += 1.0
    return rounds


def _params(name, rng):
    if name == "adagrad":
        reg = rng.integers(3)
        return np.array([rng.uniform(0.1, 1.0), rng.choice([0.0, 1e-6, 0.1]),
                         rng.uniform(1e-4, 0.05) if reg == 1 else 0.0,
                         rng.uniform(1e-3, 0.5) if reg == 2 else 0.0,
                         rng.choice([0.0, rng.uniform(0.2, 2.0)])])
    if name == "adagrad-dual":
        return np.array([rng.uniform(0.1, 1.0), rng.choice([1e-6, 0.1]),
                         rng.choice([0.0, rng.uniform(1e-3, 0.1)])])
    if name == "ftrl":
        return np.array([rng.uniform(0.1, 1.0), rng.uniform(0.1, 2.0),
                         rng.choice([0.0, rng.uniform(0.01, 1.0)]), rng.choice([0.0, rng.uniform(0.01, 1.0)])])
    if name in ("scinol1", "scinol2"):
        return np.array([rng.uniform(0.1, 10.0)])
    if name == "gd":  # eta, power_t, initial_t, adaptive, normalized, invariant, l1, l2
        adaptive, normalized = rng.integers(2, size=2)
        reg = rng.integers(4)
        return np.array([rng.uniform(0.1, 1.0), rng.choice([0.5, rng.uniform(0.2, 0.8)]),
                         rng.choice([0.0, rng.uniform(0.5, 5.0)]) if adaptive or normalized else 1.0,
                         adaptive, normalized, rng.integers(2),
                         rng.uniform(1e-4, 0.01) if reg in (1, 3) else 0.0,
                         rng.uniform(1e-3, 0.05) if reg in (2, 3) else 0.0])
    if name == "coin":
        return np.array([rng.uniform(0.5, 8.0), rng.choice([0.0, rng.uniform(0.1, 2.0)])])
    return np.array([rng.uniform(0.05, 1.0), rng.choice([0.5, rng.uniform(0.0, 1.0)]),
                     rng.choice([0.0, rng.uniform(0.0, 10.0)])])


class Scenario(NamedTuple):
    """A base and the shards trained from it, with everything merge takes."""
    name: str
    module: object
    params: np.ndarray
    base: np.ndarray
    base_rounds: float
    shards: list
    rounds: list
    weights: list
    base_scalars: object        # None for an algorithm without scalars
    shard_scalars: list

    def merge(self, order=None):
        """(state, scalars) of merging the shards (in ``order``)."""
        order = range(len(self.shards)) if order is None else order
        return merge(self.module, self.base, [self.shards[k] for k in order], self.params, self.base_rounds,
                     [self.rounds[k] for k in order], [self.weights[k] for k in order], self.base_scalars,
                     [self.shard_scalars[k] for k in order] if self.base_scalars is not None else None)

    def weights_of(self, state, rounds, scalars):
        return all_weights(self.module, state, self.params, rounds, scalars)

    def own_weights(self):
        """(shards, rows): each shard's weights at its own rounds."""
        return np.stack([self.weights_of(s, r, sc) for s, r, sc in zip(self.shards, self.rounds, self.shard_scalars)])

    @property
    def merged_rounds(self):
        return _merged_rounds(self.base_rounds, self.rounds)


def _scenario(name, seed, n_shards=3, dim=10, factor=None):
    """A base trained on a prefix (or none), and shards trained from it on
    streams over random feature subsets (so some rows are seen by one shard or
    none, and the last two rows by none); feature i's values are multiplied by
    ``factor[i]`` (default 1)."""
    rng = np.random.default_rng(seed)
    module = MODULES[name]
    params = _params(name, rng)
    scale = 10.0 ** rng.uniform(-1.5, 1.5, size=dim)
    factor = np.ones(dim) if factor is None else factor
    base = np.zeros((dim, len(module.SLOTS)))
    base_scalars = initial_scalars(module, params)
    base_features = rng.choice(dim, size=int(rng.integers(1, dim // 2)), replace=False)
    base_stream = _stream(rng, int(rng.integers(0, 25)), base_features, scale, factor)
    base_rounds = _train(module, base, params, 0.0, base_stream, base_scalars)
    shards, rounds, weights, shard_scalars = [], [], [], []
    for _ in range(n_shards):
        shard = base.copy()
        scalars = None if base_scalars is None else base_scalars.copy()
        features = rng.choice(dim - 2, size=int(rng.integers(1, dim // 2 + 2)), replace=False)
        rows = _stream(rng, int(rng.integers(1, 30)), features, scale, factor)
        rounds.append(_train(module, shard, params, base_rounds, rows, scalars))
        shards.append(shard)
        shard_scalars.append(scalars)
        weights.append(float(len(rows)))
    return Scenario(name, module, params, base, base_rounds, shards, rounds, weights, base_scalars, shard_scalars)


def _merged_rounds(base_rounds, rounds):
    return base_rounds + sum(r - base_rounds for r in rounds)


def _per_coordinate(sc):
    """Whether the rule weighs per coordinate (else like SGD's, by shard shares)."""
    return not (sc.name == "sgd" or (sc.name == "gd" and sc.params[gd.P_ADAPTIVE] == 0.0))


def _contributors(sc):
    """(shards, rows): shard k added squared gradients to the row (sgd: changed it)."""
    if not _per_coordinate(sc):
        return np.stack([(s != sc.base).any(axis=1) for s in sc.shards])
    slot = GROWTH_SLOT[sc.name]
    return np.stack([s[:, slot] > sc.base[:, slot] for s in sc.shards])


def _comparable(sc, merged):
    """The shards' weights, each at its own rounds with its own scalars."""
    return sc.own_weights()


SEEDS = st.integers(0, 2**32 - 1)


# ---------------------------------------------------------------------------
# What every rule guarantees.

@pytest.mark.parametrize("name", MODULES)
@settings(max_examples=25, deadline=None)
@given(seed=SEEDS)
def test_all_weights_is_the_kernel_weight_bit_for_bit(name, seed):
    sc = _scenario(name, seed)
    for state, r, scalars in [(sc.base, sc.base_rounds, sc.base_scalars)] + list(zip(sc.shards, sc.rounds,
                                                                                      sc.shard_scalars)):
        for at in (r, r + 7.0):
            assert np.array_equal(sc.weights_of(state, at, scalars),
                                  kernel_weights(sc.module, state, sc.params, at, scalars))


EXTREMES = {
    # name: (params, state rows, rounds[, scalars])
    "adagrad": ([0.5, 0.0, 0.01, 0.0, 0.0], [[1e-3, 4.0, 0.0], [-2.0, 0.0, 0.0], [3.0, 1e-30, 5.0], [0.0, 1.0, 0.0]],
                1e6),
    "adagrad-dual": ([0.5, 0.0, 0.1], [[0.2, 4.0], [-1e300, 1e300], [0.1, 0.0], [0.0, 1.0]], 2.0),
    "ftrl": ([0.5, 1.0, 0.25, 0.5], [[0.25, 4.0], [-0.25, 1.0], [0.2500001, 0.0], [-1e300, 1e300]], 0.0),
    "scinol1": ([1.0], [[1500.0, 0.0, 1.0, 1e-300], [1500.0, 0.0, 1.0, 0.0], [-1399.0, 0.0, 1.0, 0.5],
                        [0.0, 0.0, 0.0, 1.0]], 0.0),
    "scinol2": ([1.0], [[5.0, 0.0, 1.0, 2.0], [-1e-300, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 1.0],
                        [1e300, 1e300, 1e150, 1e300]], 0.0),
    "sgd": ([0.5, 0.5, 0.0], [[-0.0], [1e300], [5e-324], [0.0]], 0.0),
    # gravity 0.5 and contraction 1e-3: w inside, at and beyond the truncation band
    "gd": ([0.5, 0.5, 0.0, 1.0, 1.0, 1.0, 0.01, 0.01], [[0.5, 1.0, 1.0], [-0.5000001, 1.0, 1.0], [-1e300, 0.0, 0.0],
                                                          [0.25, 0.0, 0.0]], 0.0, [1.0, 1.0, 0.5, 1e-3]),
    "coin": ([4.0, 1.0], [[-0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [1e300, 1.0, 1.0, 1.0, 1.0, 1.0],
                          [5e-324, 0.0, 0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]], 0.0),
}


@pytest.mark.parametrize("name", MODULES)
def test_all_weights_is_the_kernel_weight_at_the_extremes(name):
    """Branches random training does not reach: ScInOL1's theta / 2 >= 700,
    gradients whose square underflows, the L1 band's edge, overflow."""
    params, rows, rounds, *scalars = EXTREMES[name]
    module = MODULES[name]
    state, params = np.array(rows, dtype=float), np.array(params, dtype=float)
    scalars = np.array(scalars[0], dtype=float) if scalars else initial_scalars(module, params)
    for at in (rounds, rounds + 3.0):
        assert np.array_equal(all_weights(module, state, params, at, scalars),
                              kernel_weights(module, state, params, at, scalars), equal_nan=True)


@pytest.mark.parametrize("name", MODULES)
@settings(max_examples=15, deadline=None)
@given(seed=SEEDS)
def test_one_shard_is_no_merge(name, seed):
    sc = _scenario(name, seed, n_shards=1)
    merged, scalars = sc.merge()
    assert merged is not sc.shards[0]
    assert merged.tobytes() == sc.shards[0].tobytes()
    if scalars is not None:
        assert scalars.tobytes() == sc.shard_scalars[0].tobytes()


@pytest.mark.parametrize("name", MODULES)
@settings(max_examples=15, deadline=None)
@given(seed=SEEDS)
def test_merge_leaves_its_inputs_alone(name, seed):
    sc = _scenario(name, seed)
    inputs = [sc.base, sc.params] + sc.shards + [x for x in [sc.base_scalars] + sc.shard_scalars if x is not None]
    copies = [x.copy() for x in inputs]
    sc.merge()
    # Bytes, not np.array_equal: NaN != NaN, should a state ever hold one.
    assert all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()
               for x, y in zip(inputs, copies))


@pytest.mark.parametrize("name", MODULES)
@settings(max_examples=15, deadline=None)
@given(seed=SEEDS)
def test_shards_that_learned_nothing_change_nothing(name, seed):
    sc = _scenario(name, seed)
    merged, merged_scalars = sc.merge()
    idle = sc.base.copy()
    idle_scalars = None if sc.base_scalars is None else sc.base_scalars.copy()

    def merge_of(shards, rounds, weights, scalars):
        return merge(sc.module, sc.base, shards, sc.params, sc.base_rounds, rounds, weights, sc.base_scalars,
                     scalars if sc.base_scalars is not None else None)

    with_idle, with_idle_scalars = merge_of(
        [idle, sc.shards[0], sc.shards[1], idle.copy(), sc.shards[2]],
        [sc.base_rounds, sc.rounds[0], sc.rounds[1], sc.base_rounds, sc.rounds[2]],
        [0.0, sc.weights[0], sc.weights[1], 0.0, sc.weights[2]],
        [idle_scalars, sc.shard_scalars[0], sc.shard_scalars[1], idle_scalars, sc.shard_scalars[2]])
    assert with_idle.tobytes() == merged.tobytes()
    alone, alone_scalars = merge_of([idle, sc.shards[1]], [sc.base_rounds, sc.rounds[1]], [0.0, sc.weights[1]],
                                    [idle_scalars, sc.shard_scalars[1]])
    assert alone.tobytes() == sc.shards[1].tobytes()
    nothing, nothing_scalars = merge_of([idle, idle], [sc.base_rounds] * 2, [0.0, 0.0], [idle_scalars] * 2)
    assert nothing.tobytes() == sc.base.tobytes()
    if sc.base_scalars is not None:
        assert with_idle_scalars.tobytes() == merged_scalars.tobytes()
        assert alone_scalars.tobytes() == sc.shard_scalars[1].tobytes()
        assert nothing_scalars.tobytes() == sc.base_scalars.tobytes()


@pytest.mark.parametrize("name", MODULES)
@settings(max_examples=25, deadline=None)
@given(seed=SEEDS)
def test_rows_no_shard_touched_keep_the_base(name, seed):
    sc = _scenario(name, seed)
    merged, merged_scalars = sc.merge()
    untouched = ~np.stack([(s != sc.base).any(axis=1) for s in sc.shards]).any(axis=0)
    assert untouched[-2:].all()
    assert merged[untouched].tobytes() == sc.base[untouched].tobytes()


@pytest.mark.parametrize("name", [n for n in MODULES if n not in ("sgd", "coin")])
@settings(max_examples=25, deadline=None)
@given(seed=SEEDS)
def test_a_row_one_shard_updated_keeps_that_shards_weight(name, seed):
    sc = _scenario(name, seed)
    if not _per_coordinate(sc):
        return  # --gd without adaptive merges as --sgd (below)
    merged, merged_scalars = sc.merge()
    merged_w = sc.weights_of(merged, sc.merged_rounds, merged_scalars)
    contributors = _contributors(sc)
    own = _comparable(sc, merged)
    for k in range(len(sc.shards)):
        sole = contributors[k] & (contributors.sum(axis=0) == 1)
        if name == "adagrad":  # the average has one term: the settled weight, exactly
            assert np.array_equal(merged_w[sole], own[k][sole])
        else:  # --gd with --l1/--l2 stores w + gravity: exact to the rounding of gravity
            floor = 4e-16 * merged_scalars[gd.GRAVITY] * merged_scalars[gd.CONTRACTION] if name == "gd" else 0.0
            np.testing.assert_allclose(merged_w[sole], own[k][sole], rtol=1e-9, atol=1e-300 + floor)


def _coin_bets_over_a(state, params, scalars):
    """Each row's --coin bet (alpha + wealth) Z / (L M (L M + G)), 0 while L M (L M + G)
    is below the smallest normal double, over A = (normalized_sum_norm_x + 1e-6) /
    total_weight (the module docstring's formulas)."""
    lm = state[:, coin.L] * state[:, coin.M]
    denominator = lm * (lm + state[:, coin.G])
    normal = denominator >= np.finfo(np.float64).tiny
    safe = np.where(normal, denominator, 1.0)
    bet = np.where(normal, (params[coin.P_ALPHA] + state[:, coin.WEALTH]) / safe * state[:, coin.Z], 0.0)
    return bet / ((scalars[0] + 1e-6) / scalars[1])


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS)
def test_coin_a_row_one_shard_updated_keeps_that_shards_bettor(seed):
    """--coin: a row one shard changed keeps that shard's Z, G, M, wealth and L;
    its stored weight is that bettor's bet over the merged A."""
    sc = _scenario("coin", seed)
    merged, merged_scalars = sc.merge()
    touched = np.stack([(s != sc.base).any(axis=1) for s in sc.shards])
    for k in range(len(sc.shards)):
        sole = touched[k] & (touched.sum(axis=0) == 1)
        for slot in (coin.Z, coin.G, coin.M, coin.WEALTH, coin.L):
            np.testing.assert_allclose(merged[sole, slot], sc.shards[k][sole, slot], rtol=1e-12, atol=1e-300)
    expected_scalars = sc.base_scalars + sum(x - sc.base_scalars for x in sc.shard_scalars)
    changed = touched.any(axis=0)
    np.testing.assert_allclose(merged[changed, coin.W],
                               _coin_bets_over_a(merged, sc.params, expected_scalars)[changed], rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=SEEDS)
def test_coin_sums_add_and_the_wealth_is_the_richest_shards(seed):
    """--coin: Z (the sum of -g) adds the shards' increments, as G does; the
    wealth is the largest of the shards that put gradient mass on the row."""
    sc = _scenario("coin", seed)
    merged, _ = sc.merge()
    touched = np.stack([(s != sc.base).any(axis=1) for s in sc.shards])
    expected_z = sc.base[:, coin.Z] + np.where(touched, np.stack([s[:, coin.Z] for s in sc.shards])
                                               - sc.base[:, coin.Z], 0.0).sum(axis=0)
    np.testing.assert_allclose(merged[:, coin.Z], expected_z, rtol=1e-12, atol=1e-12)
    contributors = _contributors(sc)
    some = contributors.any(axis=0)
    wealths = np.stack([s[:, coin.WEALTH] for s in sc.shards])
    assert merged[some, coin.WEALTH].tolist() == np.where(contributors, wealths, -np.inf).max(axis=0)[some].tolist()


@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, powers=st.lists(st.integers(-6, 6), min_size=10, max_size=10))
def test_coin_merge_keeps_scale_invariance_exactly(seed, powers):
    """--coin: multiplying feature i by c_i = 2**k on every shard (and the base)
    multiplies its Z, G and M by c_i and leaves its wealth and L, so the merged
    bettor's bet and weight are divided by c_i, bit for bit (coin.py's docstring)."""
    c = 2.0 ** np.array(powers, dtype=float)
    merged = []
    for factor in (None, c):
        sc = _scenario("coin", seed, factor=factor)
        state, scalars = sc.merge()
        merged.append((state, scalars))
    (plain, plain_scalars), (scaled, scaled_scalars) = merged
    assert scaled_scalars.tobytes() == plain_scalars.tobytes()
    assert np.array_equal(scaled[:, coin.W] * c, plain[:, coin.W])
    for slot in (coin.Z, coin.G, coin.M):
        assert np.array_equal(scaled[:, slot], plain[:, slot] * c)
    for slot in (coin.WEALTH, coin.L):
        assert np.array_equal(scaled[:, slot], plain[:, slot])


@pytest.mark.parametrize("name", ["sgd", "gd"])
def test_sgd_dilutes_a_row_one_shard_saw_by_its_share(name):
    seed = 7
    while True:  # --gd: a scenario without adaptive, normalized or --l1/--l2
        sc = _scenario(name, seed)
        if name == "sgd" or not sc.params[[gd.P_ADAPTIVE, gd.P_NORMALIZED, gd.P_L1, gd.P_L2]].any():
            break
        seed += 1
    merged, _ = sc.merge()
    changed = np.stack([(s != sc.base).any(axis=1) for s in sc.shards])
    sole = changed[0] & (changed.sum(axis=0) == 1)
    assert sole.any()
    share = sc.weights[0] / sum(sc.weights)
    expected = sc.base[sole, 0] + share * (sc.shards[0][sole, 0] - sc.base[sole, 0])
    np.testing.assert_allclose(merged[sole, 0], expected, rtol=1e-12)


# ---------------------------------------------------------------------------
# Properties: the averaging, its symmetry and its associativity.

def _close(x, y):
    tolerance = 1e-9 * max(1.0, float(np.max(np.abs(x), initial=0.0)), float(np.max(np.abs(y), initial=0.0)))
    np.testing.assert_allclose(x, y, rtol=1e-9, atol=tolerance)


@pytest.mark.parametrize("name", [n for n in MODULES if n != "coin"])
@settings(max_examples=40, deadline=None)
@given(seed=SEEDS)
def test_the_merged_weight_lies_between_the_contributing_shards_weights(name, seed):
    """Not --coin: its merged weight is the bet of a bettor holding the union's
    sums (test_coin_a_row_one_shard_updated_keeps_that_shards_bettor), which can
    exceed every shard's weight."""
    sc = _scenario(name, seed)
    if name == "gd" and not _per_coordinate(sc) and sc.params[[gd.P_L1, gd.P_L2]].any():
        return  # the SGD rule anchored at the base: the base undergoes every shard's L1/L2 shrinkage
    merged, merged_scalars = sc.merge()
    merged_w = sc.weights_of(merged, sc.merged_rounds, merged_scalars)
    own = _comparable(sc, merged)
    contributors = _contributors(sc)
    if not _per_coordinate(sc):  # every shard's weight counts on a row any shard changed
        contributors[:, contributors.any(axis=0)] = True
    some = contributors.any(axis=0)
    if name == "gd":  # adaptive: the rows 3b lengthens are test_gd_relaxed_rows_follow_the_formula's
        some &= ~_gd_relaxed_rows(sc)
    low = np.where(contributors, own, np.inf).min(axis=0)[some]
    high = np.where(contributors, own, -np.inf).max(axis=0)[some]
    slack = 1e-9 * np.maximum(np.abs(low), np.abs(high)) + 1e-300
    assert np.all(merged_w[some] >= low - slack)
    assert np.all(merged_w[some] <= high + slack)


def _gd_relaxed_rows(sc):
    """Adaptive --gd's rows that gd.merge's 3b lengthens: the base had learned the row
    (G > 0) and two or more shards grew its G."""
    if sc.name != "gd" or sc.params[gd.P_ADAPTIVE] == 0.0:
        return np.zeros(len(sc.base), dtype=bool)
    grew = np.stack([s[:, gd.G] > sc.base[:, gd.G] for s in sc.shards])
    return (sc.base[:, gd.G] > 0.0) & (grew.sum(axis=0) >= 2)


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS)
def test_gd_relaxed_rows_follow_the_formula(seed):
    """Adaptive --gd, row by row in plain Python from gd.merge's 3b: on a row the base had
    learned and two or more shards grew, w = w_mean + (sqrt(n) - 1) sum_k dG_k m_k / sum_k dG_k
    with w_mean = sum_k dG_k w_k / sum_k dG_k over the shards that grew it (w_k the weight
    it predicts with), m_k = w_k - (the base's weight under shard k's scalars) and
    n = (sum_k dG_k)^2 / sum_k dG_k^2."""
    sc = _scenario("gd", seed)
    assume(sc.params[gd.P_ADAPTIVE] > 0.0)
    rows = _gd_relaxed_rows(sc)
    assume(rows.any())
    merged, merged_scalars = sc.merge()
    merged_w = sc.weights_of(merged, sc.merged_rounds, merged_scalars)
    own = sc.own_weights()
    base_seen = [sc.weights_of(sc.base, sc.base_rounds, scalars) for scalars in sc.shard_scalars]
    for i in np.flatnonzero(rows):
        grown = [(float(s[i, gd.G] - sc.base[i, gd.G]), k) for k, s in enumerate(sc.shards)
                 if s[i, gd.G] > sc.base[i, gd.G]]
        total = sum(d for d, _ in grown)
        mean = sum(d * own[k][i] for d, k in grown) / total
        move = sum(d * (own[k][i] - base_seen[k][i]) for d, k in grown) / total
        n = total ** 2 / sum(d * d for d, _ in grown)
        expected = mean + (math.sqrt(n) - 1.0) * move
        floor = 1e-12 * (1.0 + merged_scalars[gd.GRAVITY]) * max(1.0, abs(mean), abs(move))
        assert merged_w[i] == pytest.approx(expected, rel=1e-9, abs=floor)


@pytest.mark.parametrize("name", MODULES)
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, order=st.permutations([0, 1, 2]))
def test_merge_is_symmetric_in_the_shard_order(name, seed, order):
    sc = _scenario(name, seed)
    merged, merged_scalars = sc.merge()
    shuffled, shuffled_scalars = sc.merge(order)
    _close(sc.weights_of(shuffled, sc.merged_rounds, shuffled_scalars),
           sc.weights_of(merged, sc.merged_rounds, merged_scalars))
    _close(shuffled, merged)
    if merged_scalars is not None:
        _close(shuffled_scalars, merged_scalars)


def _mean_increment_rule(sc):
    """AdaGrad and adaptive --gd grow G by the increments' dG-weighted mean
    (merge_common.mean_increment), which a tree of merges does not reproduce."""
    return sc.name == "adagrad" or (sc.name == "gd" and sc.params[gd.P_ADAPTIVE] > 0.0)


@pytest.mark.parametrize("name", [name for name in MODULES if name != "adagrad"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(seed=SEEDS)
def test_merging_pairwise_equals_merging_at_once(name, seed):
    """A tree of pairwise merges gives the flat merge: the merged learner
    carries the rounds, the weight and the scalars of its shards together.
    Not for the mean-increment rule (AdaGrad, adaptive --gd: the pair's G
    increment is a mean, and the pair then weighs as one shard)."""
    sc = _scenario(name, seed)
    assume(not _mean_increment_rule(sc))
    flat, flat_scalars = sc.merge()
    pair, pair_scalars = merge(sc.module, sc.base, sc.shards[:2], sc.params, sc.base_rounds, sc.rounds[:2],
                               sc.weights[:2], sc.base_scalars,
                               sc.shard_scalars[:2] if sc.base_scalars is not None else None)
    pair_rounds = _merged_rounds(sc.base_rounds, sc.rounds[:2])
    tree, tree_scalars = merge(sc.module, sc.base, [pair, sc.shards[2]], sc.params, sc.base_rounds,
                               [pair_rounds, sc.rounds[2]], [sc.weights[0] + sc.weights[1], sc.weights[2]],
                               sc.base_scalars,
                               [pair_scalars, sc.shard_scalars[2]] if sc.base_scalars is not None else None)
    _close(sc.weights_of(tree, sc.merged_rounds, tree_scalars), sc.weights_of(flat, sc.merged_rounds, flat_scalars))
    if flat_scalars is not None:
        _close(tree_scalars, flat_scalars)


@pytest.mark.parametrize("name", ["adagrad", "adagrad-dual", "ftrl", "scinol1", "scinol2", "gd", "coin"])
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS)
def test_accumulators_add_the_shards_increments(name, seed):
    sc = _scenario(name, seed)
    merged, _ = sc.merge()
    slot = GROWTH_SLOT[name]
    base = sc.base[:, slot]
    if name == "gd":  # VW's G starts at initial_t on a row's first touch: that counts once
        base = np.where((base == 0.0) & np.stack([s[:, slot] > 0.0 for s in sc.shards]).any(axis=0),
                        sc.params[gd.P_INITIAL_T], base)
    grown = np.stack([np.where(s[:, slot] != sc.base[:, slot], s[:, slot] - base, 0.0) for s in sc.shards])
    if _mean_increment_rule(sc):  # sum_k dG_k^2 / sum_k dG_k over the shards that grew the row
        total = grown.sum(axis=0)
        expected = base + np.divide((grown ** 2).sum(axis=0), total, out=np.zeros_like(total), where=total > 0)
    else:
        expected = base + grown.sum(axis=0)
    np.testing.assert_allclose(merged[:, slot], expected, rtol=1e-12)


@pytest.mark.parametrize("name", ["adagrad", "gd"])
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, copies=st.integers(2, 5))
def test_merging_copies_of_one_learner_gives_it_back(name, seed, copies):
    """K shards that learned the same examples from the same base: the merged
    weights and accumulators are that one learner's (the mean increment of
    equal increments is the increment); only the rounds counter adds up."""
    sc = _scenario(name, seed)
    shard, rounds, scalars = sc.shards[0], sc.rounds[0], sc.shard_scalars[0]
    merged, _ = merge(sc.module, sc.base, [shard] * copies, sc.params, sc.base_rounds, [rounds] * copies,
                      [sc.weights[0]] * copies, sc.base_scalars,
                      [scalars] * copies if sc.base_scalars is not None else None)
    slot = GROWTH_SLOT[name]
    np.testing.assert_allclose(merged[:, slot], shard[:, slot], rtol=1e-12)
    if name == "adagrad" and not sc.params[[adagrad.P_L1, adagrad.P_L2]].any():
        np.testing.assert_allclose(merged[:, adagrad.W], shard[:, adagrad.W], rtol=1e-12)


@pytest.mark.parametrize("name", ["gd", "coin"])
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS)
def test_global_sums_add_the_shards_increments(name, seed):
    """normalized_sum_norm_x and total_weight are sums over examples."""
    sc = _scenario(name, seed)
    _, scalars = sc.merge()
    active = [x for x, r in zip(sc.shard_scalars, sc.rounds) if r > sc.base_rounds]
    expected = sc.base_scalars[:2] + sum(x[:2] - sc.base_scalars[:2] for x in active)
    np.testing.assert_allclose(scalars[:2], expected, rtol=1e-12)


@pytest.mark.parametrize("name", ["scinol1", "scinol2"])
@settings(max_examples=30, deadline=None)
@given(seed=SEEDS, powers=st.lists(st.integers(-6, 6), min_size=10, max_size=10))
def test_scinol_merge_keeps_scale_invariance_exactly(name, seed, powers):
    """Multiplying feature i by c_i = 2**k on every shard (and the base) divides
    its merged weight by c_i, bit for bit (Kempka et al. 2019, Appendix B)."""
    c = 2.0 ** np.array(powers, dtype=float)
    merged = []
    for factor in (None, c):
        sc = _scenario(name, seed, factor=factor)
        state, _ = sc.merge()
        merged.append((state, sc.weights_of(state, sc.merged_rounds, None)))
    (plain, plain_w), (scaled, scaled_w) = merged
    assert np.array_equal(scaled_w * c, plain_w)
    touched = scaled[:, 2] > 0.0
    assert np.all(scaled[touched, 3] > 0.0)   # beta / eta stay positive


# ---------------------------------------------------------------------------
# Arguments and size.

@pytest.mark.parametrize("bad", [
    dict(shards=[]), dict(rounds=[3.0]), dict(weights=[1.0, -1.0]), dict(shards=[np.zeros((2, 3)), np.zeros((3, 3))]),
])
def test_inconsistent_arguments_are_refused(bad):
    base = np.zeros((2, 3))
    shards = bad.get("shards", [np.zeros((2, 3)), np.zeros((2, 3))])
    with pytest.raises(ValueError):
        adagrad.merge(base, shards, np.array([0.5, 1e-6, 0.0, 0.0, 0.0]), 0.0,
                      bad.get("rounds", [1.0] * len(shards)), bad.get("weights", [1.0] * len(shards)))


@pytest.mark.parametrize("name", MODULES)
def test_two_to_the_eighteen_rows_merge_well_under_a_second(name):
    import time

    rng = np.random.default_rng(1)
    module = MODULES[name]
    params = {"adagrad": [0.3, 1e-6, 0.0, 0.01, 0.0], "adagrad-dual": [0.3, 1e-6, 0.01],
              "ftrl": [0.5, 1.0, 0.1, 0.1], "scinol1": [1.0], "scinol2": [1.0], "sgd": [0.5, 0.5, 0.0],
              "gd": [0.5, 0.5, 0.0, 1.0, 1.0, 1.0, 0.01, 0.01], "coin": [4.0, 1.0]}[name]
    rows = 1 << 18
    base = np.abs(rng.normal(size=(rows, len(module.SLOTS))))
    shards = [base + np.abs(rng.normal(size=base.shape)) * (rng.random((rows, 1)) < 0.5) for _ in range(2)]
    if name == "adagrad":
        for shard in shards:
            shard[:, adagrad.LAST] = base[:, adagrad.LAST] + 40.0
    scalars = [np.array([10.0, 10.0, 0.1, 0.5]), np.array([60.0, 60.0, 0.2, 0.25]), np.array([70.0, 70.0, 0.3, 0.2])]
    start = time.process_time()  # this process's CPU time: other jobs on the machine do not count
    merge(module, base, shards, np.array(params), 10.0, [60.0, 70.0], [50.0, 60.0],
          scalars[0][:len(module.SCALARS)] if hasattr(module, "SCALARS") else None,
          [x[:len(module.SCALARS)] for x in scalars[1:]] if hasattr(module, "SCALARS") else None)
    assert time.process_time() - start < 1.0
