"""Losses and their derivatives with respect to the prediction, computed stably.

Conventions (as VW): squared loss is ``(p - y)**2`` with derivative ``2 (p - y)``;
logistic loss is ``log(1 + exp(-y p))`` for y in {-1, +1}; hinge is
``max(0, 1 - y p)`` with the subgradient ``-y`` when ``y p < 1`` and 0 otherwise;
absolute is ``|p - y|`` with subgradient ``sign(p - y)`` (0 at p = y); quantile
with level tau is ``tau (y - p)`` when ``y > p`` and ``(1 - tau) (p - y)``
otherwise, with derivative ``-tau`` when ``y > p``, ``1 - tau`` when ``y < p`` and
0 at p = y (VW's ``quantileloss::first_derivative``: at the kink there is nothing
to learn; any value in [-tau, 1 - tau] is a subgradient).
"""

import math

from numba import njit

SQUARED = 0
LOGISTIC = 1
HINGE = 2
ABSOLUTE = 3
QUANTILE = 4

LOSS_CODES = {"squared": SQUARED, "logistic": LOGISTIC, "hinge": HINGE,
              "absolute": ABSOLUTE, "quantile": QUANTILE}
BINARY_LOSSES = ("logistic", "hinge")
# Losses whose derivative is not bounded by 1 (ScInOL's guarantees assume |g| <= 1).
UNBOUNDED_LOSSES = ("squared",)


@njit(inline="always")
def log1p_exp(x):
    """log(1 + exp(x)) without overflow."""
    if x > 0.0:
        return x + math.log1p(math.exp(-x))
    return math.log1p(math.exp(x))


@njit(inline="always")
def _sigmoid(x):
    """1 / (1 + exp(-x)) without overflow."""
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit
def loss_value(loss, p, y, tau):
    if loss == SQUARED:
        d = p - y
        return d * d
    if loss == LOGISTIC:
        return log1p_exp(-y * p)
    if loss == HINGE:
        margin = 1.0 - y * p
        return margin if margin > 0.0 else 0.0
    if loss == ABSOLUTE:
        return abs(p - y)
    e = y - p
    return tau * e if e > 0.0 else (tau - 1.0) * e


@njit
def loss_derivative(loss, p, y, tau):
    """d loss / d p at the prediction p."""
    if loss == SQUARED:
        return 2.0 * (p - y)
    if loss == LOGISTIC:
        return -y * _sigmoid(-y * p)
    if loss == HINGE:
        return -y if y * p < 1.0 else 0.0
    if loss == ABSOLUTE:
        if p > y:
            return 1.0
        return -1.0 if p < y else 0.0
    if y > p:
        return -tau
    return 1.0 - tau if y < p else 0.0


@njit(inline="always")
def sigmoid(x):
    return _sigmoid(x)
