"""Plain online (sub)gradient descent with a 1/sqrt(t) rate (``--sgd``).

The baseline the AdaGrad and ScInOL papers compare against (ScInOL §4: "SGD
with eta_t ~ 1/sqrt(t)"): w_i <- w_i - (eta / sqrt(t)) g_i, t the round number.
"""

import math

from numba import njit

from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass

SLOTS = ("w",)
W = 0
PARAMS = ("eta",)
P_ETA = 0


@njit
def predict(state, index, value, lo, hi, offset, params, rounds, learning):
    p = 0.0
    for j in range(lo, hi):
        p += state[offset + index[j], W] * value[j]
    return p


@njit
def update(state, index, value, lo, hi, offset, g, params, rounds):
    rate = params[P_ETA] / math.sqrt(rounds + 1.0)
    for j in range(lo, hi):
        state[offset + index[j], W] -= rate * g * value[j]


@njit
def weight(state, i, params, rounds):
    return state[i, W]


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
