"""AdaGrad with diagonal matrices, composite mirror descent form (``--adagrad``).

Duchi, Hazan, Singer (2010 techreport), Figure 1 with the composite mirror
descent update of Eq. (4); §6 gives the diagonal closed forms:

    G_i += g_i**2,   H_i = delta + sqrt(G_i)
    phi = 0:                 w_i <- w_i - eta g_i / H_i
    phi = l1 |w|_1 (Eq. 24): v = w_i - eta g_i / H_i;  w_i <- sign(v) [|v| - l1 eta / H_i]_+
    phi = l2/2 |w|^2 (Eq. 25): w_i <- (s_i w_i - eta g_i) / (eta l2 + delta + s_i),  s_i = sqrt(G_i)

``--radius R`` projects each weight into [-R, R] after its update (the
per-coordinate box of Streeter & McMahan 2010, §3).

Lazy regularization (§6.1, "just in time"): with l1 or l2, every round shrinks
every coordinate, also those absent from the example. A coordinate untouched for
k rounds owes k shrinkages: ``k l1 eta / H_i`` (clipped at zero) or the factor
``(s_i / (eta l2 + delta + s_i))**k``; it pays them when it is next read. Slot
``last`` is the round up to which ``w`` is settled. The saved file keeps this
lazy form; readers (test, inspect) add what is owed, so a continued run is
bit-identical to an uninterrupted one.

With delta = 0 and a gradient so small that its square underflows, H_i = 0 and
the paper's pseudo-inverse leaves w_i unchanged. Only the coordinates present
in the example are touched (O(nnz)). When a feature index occurs twice in one
example, each occurrence is applied in turn, as VW does.
"""

import math

from numba import njit

from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass

SLOTS = ("w", "G", "last")
W, G, LAST = 0, 1, 2
PARAMS = ("eta", "delta", "l1", "l2", "radius")
P_ETA, P_DELTA, P_L1, P_L2, P_RADIUS = 0, 1, 2, 3, 4


@njit
def _settled(state, i, params, rounds):
    """w_i after paying the shrinkage owed for rounds last+1 .. rounds."""
    w = state[i, W]
    owed = rounds - state[i, LAST]
    if owed <= 0.0 or w == 0.0 or (params[P_L1] <= 0.0 and params[P_L2] <= 0.0):
        return w
    eta = params[P_ETA]
    s = math.sqrt(state[i, G])
    h = params[P_DELTA] + s
    if params[P_L1] > 0.0:
        if h <= 0.0:
            return w
        shrunk = abs(w) - owed * params[P_L1] * eta / h
        return math.copysign(shrunk, w) if shrunk > 0.0 else 0.0
    return w * (s / (eta * params[P_L2] + params[P_DELTA] + s)) ** owed


@njit
def predict(state, index, value, lo, hi, offset, params, rounds, learning):
    lazy = params[P_L1] > 0.0 or params[P_L2] > 0.0
    p = 0.0
    for j in range(lo, hi):
        i = offset + index[j]
        if lazy:
            w = _settled(state, i, params, rounds)
            if learning:
                state[i, W] = w
                state[i, LAST] = rounds
        else:
            w = state[i, W]
        p += w * value[j]
    return p


@njit
def update(state, index, value, lo, hi, offset, g, params, rounds):
    eta = params[P_ETA]
    delta = params[P_DELTA]
    l1 = params[P_L1]
    l2 = params[P_L2]
    radius = params[P_RADIUS]
    for j in range(lo, hi):
        g_i = g * value[j]
        if g_i == 0.0:
            continue
        i = offset + index[j]
        state[i, G] += g_i * g_i
        s = math.sqrt(state[i, G])
        h = delta + s
        if h <= 0.0:  # delta = 0 and g_i**2 underflowed: pseudo-inverse, no step
            continue
        w = state[i, W]
        if l1 > 0.0:
            v = w - eta * g_i / h
            shrunk = abs(v) - l1 * eta / h
            w = math.copysign(shrunk, v) if shrunk > 0.0 else 0.0
            state[i, LAST] = rounds + 1
        elif l2 > 0.0:
            w = (s * w - eta * g_i) / (eta * l2 + delta + s)
            state[i, LAST] = rounds + 1
        else:
            w -= eta * g_i / h
        if radius > 0.0:
            w = min(max(w, -radius), radius)
        state[i, W] = w


@njit
def weight(state, i, params, rounds):
    """Row i's weight as of ``rounds`` (lazy shrinkage paid; the state is not changed)."""
    return _settled(state, i, params, rounds)


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
