"""FTRL-Proximal with per-coordinate learning rates and L1/L2 (``--ftrl``).

McMahan et al. 2013 ("Ad click prediction", Algorithm 1), as derived in
adaptive-ftrl-notes-qian.md (FTRL-Proximal with r_t = sigma_t/2 |w - w_t|^2 and
the per-coordinate schedule eta_{t,i} = alpha / (beta + sqrt(n_i))):

    w_i = 0                                                if |z_i| <= l1
    w_i = -(z_i - sign(z_i) l1) / ((beta + sqrt(n_i)) / alpha + l2)   otherwise
    sigma = (sqrt(n_i + g_i**2) - sqrt(n_i)) / alpha
    z_i += g_i - sigma w_i;   n_i += g_i**2

Weights are computed on demand from (z, n), so untouched coordinates need no
bookkeeping.
"""

import math

from numba import njit

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
def predict(state, index, value, lo, hi, offset, params, rounds, learning):
    p = 0.0
    for j in range(lo, hi):
        p += _weight(state, offset + index[j], params) * value[j]
    return p


@njit
def update(state, index, value, lo, hi, offset, g, params, rounds):
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
def weight(state, i, params, rounds):
    return _weight(state, i, params)


# Entry points, compiled and cached for this algorithm (the loops are in driver.py).

@njit(cache=True, nogil=True)
def run_chunk(table, settings, batch, tally, predictions):
    return run_binary(predict, update, table, settings, batch, tally, predictions)


@njit(cache=True, nogil=True)
def run_chunk_multiclass(table, settings, batch, tally, predictions, scores):
    return run_multiclass(predict, update, table, settings, batch, tally, predictions, scores)


@njit(cache=True)
def weights_at(state, params, rounds, rows):
    return weights_loop(weight, state, params, rounds, rows)
