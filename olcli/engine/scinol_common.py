"""Bookkeeping shared by ScInOL1 and ScInOL2 (Kempka, Kotłowski, Warmuth 2019,
Algorithms 1 and 2): slots G (negative gradient sum), S2 (sum of squared
gradients) and M (max |x_i|) come first in both tables; slot 3 is beta (ScInOL1)
or eta (ScInOL2), both starting at eps.
"""

import math

from numba import njit

G, S2, M, WEALTH = 0, 1, 2, 3


@njit
def theta_and_scale(state, i):
    """theta = G_i / sqrt(S2_i + M_i**2) and that square root (0/0 = 0)."""
    scale = math.sqrt(state[i, S2] + state[i, M] * state[i, M])
    if scale == 0.0:
        return 0.0, 0.0
    return state[i, G] / scale, scale


@njit
def raise_max(state, i, x, epsilon):
    """M_i <- max(M_i, |x_i|) before predicting. A row whose M_i is still 0 has
    never been touched: its slot 3 gets its initial value eps now, so that
    unseen rows stay all-zero (and sparse models sparse)."""
    if state[i, M] == 0.0:
        state[i, WEALTH] = epsilon
    state[i, M] = max(state[i, M], abs(x))


@njit
def accumulate(state, i, gx):
    """After the loss: G_i -= g x_i; S2_i += (g x_i)**2."""
    state[i, G] -= gx
    state[i, S2] += gx * gx
