"""AdaGrad with diagonal matrices, composite mirror descent form.

Duchi, Hazan, Singer (2010 techreport), Figure 1 with the composite mirror
descent update of Eq. (4) and phi = 0; §6 writes the diagonal case in closed form:

    G_i += g_i**2,   H_i = delta + sqrt(G_i),   w_i <- w_i - eta * g_i / H_i

With delta = 0 and a gradient so small that its square underflows, H_i = 0 and
the paper's pseudo-inverse leaves w_i unchanged. Only the coordinates present in the example are touched (a zero gradient
coordinate leaves w_i and G_i unchanged), so an update costs O(nnz). When a
feature index occurs twice in one example, each occurrence is applied in turn,
as VW does.
"""

import math

from numba import njit

SLOTS = ("w", "G")
W, G = 0, 1
PARAMS = ("eta", "delta")
P_ETA, P_DELTA = 0, 1


@njit(cache=True)
def predict(state, index, value, lo, hi):
    p = 0.0
    for j in range(lo, hi):
        p += state[index[j], W] * value[j]
    return p


@njit(cache=True)
def update(state, index, value, lo, hi, g, params):
    eta = params[P_ETA]
    delta = params[P_DELTA]
    for j in range(lo, hi):
        g_i = g * value[j]
        if g_i == 0.0:
            continue
        i = index[j]
        state[i, G] += g_i * g_i
        h = delta + math.sqrt(state[i, G])
        if h > 0.0:  # H = 0 only when delta = 0 and g_i**2 underflowed: pseudo-inverse, no step
            state[i, W] -= eta * g_i / h
