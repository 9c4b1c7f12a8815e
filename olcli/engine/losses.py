"""Losses and their derivatives with respect to the prediction, computed stably.

Conventions (as VW): squared loss is ``(p - y)**2`` with derivative ``2 (p - y)``;
logistic loss is ``log(1 + exp(-y p))`` for y in {-1, +1}; hinge is
``max(0, 1 - y p)`` with the subgradient ``-y`` when ``y p < 1`` and 0 otherwise;
absolute is ``|p - y|`` with subgradient ``sign(p - y)`` (0 at p = y); quantile
with level tau is ``tau (y - p)`` when ``y > p`` and ``(1 - tau) (p - y)``
otherwise, with derivative ``-tau`` when ``y > p``, ``1 - tau`` when ``y < p`` and
0 at p = y (VW's ``quantileloss::first_derivative``: at the kink there is nothing
to learn; any value in [-tau, 1 - tau] is a subgradient). Poisson (p the log of
the mean, labels y >= 0) is VW's: the loss reported is the deviance
``2 (y (log(y + 1e-6) - p) - (y - e^p))`` and the gradient is ``e^p - y``, the
derivative of the negative log-likelihood ``e^p - y p`` (half the deviance's).
"""

import math

from olcli.engine.jit import njit

SQUARED = 0
LOGISTIC = 1
HINGE = 2
ABSOLUTE = 3
QUANTILE = 4
POISSON = 5

LOSS_CODES = {"squared": SQUARED, "logistic": LOGISTIC, "hinge": HINGE,
              "absolute": ABSOLUTE, "quantile": QUANTILE, "poisson": POISSON}
BINARY_LOSSES = ("logistic", "hinge")
# Losses whose derivative is not bounded by 1 (ScInOL's guarantees assume |g| <= 1).
UNBOUNDED_LOSSES = ("squared", "poisson")
# Losses whose labels must be >= 0.
NONNEGATIVE_LOSSES = ("poisson",)


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


# VW 9.11.9's poisson methods take the prediction clamped to [-44, 44] (its released
# library does so in every poisson method; tests/naive_vw.py PoissonLoss), so e^p stays finite.
POISSON_CLAMP = 44.0
FLT_MAX = 3.4028234663852886e38


@njit(inline="always")
def _poisson_clamp(p):
    return min(max(p, -POISSON_CLAMP), POISSON_CLAMP)


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
    if loss == POISSON:
        q = _poisson_clamp(p)
        return 2.0 * (y * (math.log(y + 1e-6) - q) - (y - math.exp(q)))
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
    if loss == POISSON:
        return math.exp(_poisson_clamp(p)) - y
    if y > p:
        return -tau
    return 1.0 - tau if y < p else 0.0


@njit(inline="always")
def sigmoid(x):
    return _sigmoid(x)


# ---------------------------------------------------------------------------
# Importance-invariant updates (Karampatziakis & Langford 2011, "Online
# Importance Weight Aware Updates"; VW's loss_function::get_update), for --gd.

@njit(inline="always")
def lambert_w_exp_minus_x(x):
    """W(e^x) - x as VW's logloss::wexpmx approximates it (absolute error < 9e-5):
    a start w0 (0.86 x + 0.01 for x >= 1, else exp(0.8 x - 0.65)), its residual
    r = x - log(w0) - w0, and one Fritsch-Shafer-Crowley step."""
    if x >= 1.0:
        w = 0.86 * x + 0.01
        r = x - math.log(w) - w
    else:
        w = math.exp(0.8 * x - 0.65)
        r = 0.2 * x + 0.65 - w
    t = 1.0 + w
    u = 2.0 * t * (t + 2.0 * r / 3.0)
    return w * (1.0 + r / t * (u - r) / (u - 2.0 * r)) - x


@njit(inline="always")
def _pinball_update(p, y, s, h, up, down):
    """The flow of a loss with slope -up below the label and +down above it stops
    at p = y: u = up s (or down) unless that would cross y, then (y - p) / h."""
    err = y - p
    if err == 0.0:
        return 0.0
    step = s * h
    if err > 0.0:
        return up * s if up * step < err else err / h
    return -down * s if -down * step > err else err / h


@njit(inline="always")
def logistic_invariant_update(p, y, s, h, exp_yp):
    """``invariant_update`` for the logistic loss, given exp(y p) (gd has it from the
    derivative): -(y W + p) / h, or y s / (1 + e^{y p}) when s h < 1e-6; NaN when s h is
    not a number, as there."""
    if math.isnan(s * h):
        return math.nan
    if s * h < 1e-6:
        return y * s / (1.0 + exp_yp)
    return -(y * lambert_w_exp_minus_x(s * h + y * p + exp_yp) + p) / h


@njit
def invariant_update(loss, p, y, tau, s, h):
    """The multiplier u of the importance-invariant update: moving the weights by
    u (per-feature rate) x_i moves the prediction from p by h u, the closed form of
    the gradient flow dp/dtau = -h loss'(p) over tau in [0, s] (s = eta times the
    importance, h the prediction change per unit update). So importance k is k
    infinitesimal steps, and the prediction never overshoots the label.

    squared:  (y - p)(1 - e^{-2 s h}) / h  (2 (y - p) s when s h < 1e-6)
    logistic: -(y W + p) / h, W = W(e^x) - x, x = s h + y p + e^{y p}  (y s / (1 + e^{y p}) when s h < 1e-6)
    hinge:    y min(s, (1 - y p) / h), 0 when y p >= 1 (y any real label, as VW)
    quantile: slopes tau below the label, 1 - tau above; absolute: slopes 1 and 1
              (VW's absolute is its quantile at tau 0.5, i.e. half of olcli's |p - y|)
    poisson:  y s - log(1 + e^p (e^{y s h} - 1) / y) / h for y > 0, -log(1 + e^p s h) / h for y = 0
              (the flow dp/dtau = h (y - e^p), whose gradient is VW's e^p - y; p clamped to
              [-44, 44] and the limit -(p - log y) / h once y s h > 44, as VW 9.11.9).
    NaN when s h is not a number (s infinite, an importance weight near 1e308 times -l,
    and h = 0): no step, as VW replaces a NaN update by 0; every form above would divide
    by h = 0."""
    if loss == LOGISTIC:
        return logistic_invariant_update(p, y, s, h, math.exp(y * p))
    if math.isnan(s * h):
        return math.nan
    if loss == SQUARED:
        if s * h < 1e-6:
            return 2.0 * (y - p) * s
        return (y - p) * (1.0 - math.exp(-2.0 * s * h)) / h
    if loss == HINGE:
        if y * p >= 1.0:
            return 0.0
        err = 1.0 - y * p
        return y * (s if s * h < err else err / h)
    if loss == ABSOLUTE:
        return _pinball_update(p, y, s, h, 1.0, 1.0)
    if loss == POISSON:
        # As VW 9.11.9: p clamped to [-44, 44]; a step with y s h > 44 (where e^{y s h}
        # overflows float32) gives the flow's limit, the prediction log y; with y = 0 a
        # product e^p s h beyond float32's range is taken in log space.
        q = _poisson_clamp(p)
        if y > 0.0:
            a = y * s * h
            if a > POISSON_CLAMP:
                return -(q - math.log(y)) / h
            return y * s - math.log1p(math.exp(q) * math.expm1(a) / y) / h
        x = s * math.exp(q) * h
        if abs(x) <= FLT_MAX:
            return -math.log1p(x) / h
        return -(math.log(s * h) + q) / h
    return _pinball_update(p, y, s, h, tau, 1.0 - tau)
