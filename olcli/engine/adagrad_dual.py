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

from numba import njit

from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass

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
def predict(state, index, value, lo, hi, offset, params, rounds, learning):
    p = 0.0
    for j in range(lo, hi):
        p += _weight(state, offset + index[j], params, rounds) * value[j]
    return p


@njit
def update(state, index, value, lo, hi, offset, g, params, rounds):
    for j in range(lo, hi):
        g_i = g * value[j]
        i = offset + index[j]
        state[i, U] += g_i
        state[i, G] += g_i * g_i


@njit
def weight(state, i, params, rounds):
    return _weight(state, i, params, rounds)


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
