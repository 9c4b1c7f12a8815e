"""ScInOL2, scale-invariant online learning (``--scinol2``).

Kempka, Kotłowski, Warmuth 2019, Algorithm 2. Per coordinate: G_i (negative
gradient sum), S2_i (sum of squared gradients), M_i (max |x_i|), eta_i (starts
at eps):

    before predicting:  M_i <- max(M_i, |x_i|)
    theta = G_i / sqrt(S2_i + M_i**2)
    w_i = sign(theta) min(|theta|, 1) / (2 sqrt(S2_i + M_i**2)) eta_i
    after the loss:  G_i -= g x_i;  S2_i += (g x_i)**2;  eta_i -= g x_i w_i

with 0/0 = 0. As in scinol1.py, eta_i is set to eps when a row is first
touched, and M changes only for examples that are learned from. No learning
rate: predictions are invariant to rescaling any feature (Appendix B).
"""

import math

from numba import njit

from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass

from olcli.engine.scinol_common import accumulate, raise_max, theta_and_scale

SLOTS = ("G", "S2", "M", "eta")
ETA = 3
PARAMS = ("epsilon",)
P_EPSILON = 0


@njit
def _weight(state, i):
    theta, scale = theta_and_scale(state, i)
    if scale == 0.0:
        return 0.0
    clipped = min(abs(theta), 1.0)
    return math.copysign(clipped, theta) / (2.0 * scale) * state[i, ETA] if theta != 0.0 else 0.0


@njit
def predict(state, index, value, lo, hi, offset, params, rounds, learning):
    epsilon = params[P_EPSILON]
    p = 0.0
    for j in range(lo, hi):
        i = offset + index[j]
        x = value[j]
        if learning and x != 0.0:
            raise_max(state, i, x, epsilon)
        p += _weight(state, i) * x
    return p


@njit
def update(state, index, value, lo, hi, offset, g, params, rounds):
    for j in range(lo, hi):
        gx = g * value[j]
        i = offset + index[j]
        w = _weight(state, i)  # the weight used in the prediction: the state has not changed since
        accumulate(state, i, gx)
        state[i, ETA] -= gx * w


@njit
def weight(state, i, params, rounds):
    """Row i's weight from the stored state (M as it is: not raised for an example)."""
    return _weight(state, i)


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
