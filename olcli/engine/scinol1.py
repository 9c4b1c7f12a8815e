"""ScInOL1, scale-invariant online learning (``--scinol1``).

Kempka, Kotłowski, Warmuth 2019, Algorithm 1. Per coordinate: G_i (negative
gradient sum), S2_i (sum of squared gradients), M_i (max |x_i|), beta_i:

    before predicting, for x_i != 0:
        M_i <- max(M_i, |x_i|)
        beta_i <- min(beta_i, eps (S2_i + M_i**2) / (x_i**2 t))
    theta = G_i / sqrt(S2_i + M_i**2)
    w_i = beta_i sign(theta) / (2 sqrt(S2_i + M_i**2)) (exp(|theta|/2) - 1)
    after the loss:  G_i -= g x_i;  S2_i += (g x_i)**2

with 0/0 = 0. beta_i starts at eps; a row whose M_i is still 0 has never been
touched, so its beta is set to eps when it first is (unseen rows stay zero and
sparse models stay sparse). M and beta change only for examples that are
learned from; test and unlabeled examples use the stored state. No learning
rate: predictions are invariant to rescaling any feature (Appendix B).
"""

import math

from numba import njit

from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.multiclass import run_multiclass

from olcli.engine.scinol_common import M, S2, accumulate, raise_max, theta_and_scale

SLOTS = ("G", "S2", "M", "beta")
BETA = 3
PARAMS = ("epsilon",)
P_EPSILON = 0


@njit
def _weight(state, i):
    theta, scale = theta_and_scale(state, i)
    if scale == 0.0:
        return 0.0
    a = state[i, BETA] / (2.0 * scale)
    half = abs(theta) / 2.0
    if half < 700.0:
        magnitude = a * (math.exp(half) - 1.0)
    else:  # a * e^half overflows only when a is not tiny: go through logs
        magnitude = math.exp(math.log(a) + half) - a if a > 0.0 else 0.0
    return math.copysign(magnitude, theta) if theta != 0.0 else 0.0


@njit
def predict(state, index, value, lo, hi, offset, params, rounds, learning):
    epsilon = params[P_EPSILON]
    t = rounds + 1.0
    p = 0.0
    for j in range(lo, hi):
        i = offset + index[j]
        x = value[j]
        if learning and x != 0.0:
            raise_max(state, i, x, epsilon)
            m = state[i, M]
            state[i, BETA] = min(state[i, BETA], epsilon * (state[i, S2] + m * m) / (x * x * t))
        p += _weight(state, i) * x
    return p


@njit
def update(state, index, value, lo, hi, offset, g, params, rounds):
    for j in range(lo, hi):
        accumulate(state, offset + index[j], g * value[j])


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
