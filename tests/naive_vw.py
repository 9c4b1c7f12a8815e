"""Slow, obviously-correct pure-Python references of two Vowpal Wabbit learners.

They are the oracles for olcli's fast kernels of VW's default learner and of
``--coin`` (project issue "Good without tuning"), so they follow VW 9.x
(vowpalwabbit 9.11.9) operation by operation, read from VW's sources, and say
where each formula comes from:

* :class:`VWGradientDescent` -- VW's ``gd`` reduction (``reductions/gd.cc``):
  plain, adaptive (AdaGrad), normalized (Ross, Mineiro & Langford 2013,
  "Normalized Online Learning", algorithms NG and NAG) and importance-invariant
  (Karampatziakis & Langford 2011, "Online Importance Weight Aware Updates")
  SGD, with VW's defaults ``--adaptive --normalized --invariant -l 0.5
  --power_t 0.5 --initial_t 0`` and VW's --l1/--l2 ("truncated gradient" and
  a global contraction).
* :class:`VWCoin` -- VW's ``--coin`` (``reductions/ftrl.cc``, the
  ``coin_betting_*`` functions): per-coordinate Krichevsky-Trofimov coin betting
  (Orabona & Pal 2016, "Coin Betting and Parameter-Free Online Learning"), in
  the COCOB-like form VW implements (Orabona & Tommasi 2017), with VW's
  normalisation by each coordinate's largest |x| and by the running average
  normalised squared norm of the examples.

Both share VW's bookkeeping (:class:`SharedData`, after VW's ``shared_data``):
the label range seen so far, [min_label, max_label], to which every prediction
is clipped, and ``t``, the importance-weighted example count.

Interface: ``learn(features, label, importance=1.0, initial=0.0)`` predicts,
then updates (progressive validation), and returns the prediction it made;
``predict(features)`` only predicts; ``loss(prediction, label)`` is the loss VW
adds to its "average loss" (importance times this). ``features`` is a list of
``(index, value)`` pairs in VW's traversal order (namespaces in order of first
appearance, the constant feature, then interactions); indices are VW's weight
slots (hash masked to -b bits): no hashing in here. A repeated index is
processed once per occurrence, as VW does.

Precision. VW stores weights and state in float32 and computes the per-feature
arithmetic in float32 (the global sums ``normalized_sum_norm_x``,
``total_weight``, ``t``, ``contraction``, ``gravity`` and the loss sum are
double). These references compute everything in float64, so they agree with VW
to float32 rounding (about 1e-7 relative per operation), not bit for bit: on
VW's test cases and the project's datasets the progressive losses agree to a few
1e-6 relative or better. Where a run is chaotic (e.g. --sgd or --adaptive alone,
whose default -l 10 makes predictions bang between the clipping bounds) rounding
differences grow and no float64 reference can follow VW; see
benchmarks/check_vw_reference.py's "sens" column. Three places are not plain
float32-vs-float64 rounding and are handled explicitly:

* ``inv_sqrt``: gd.cc's source computes 1/sqrt(G) (``inv_sqrt``, power_t 0.5
  with --adaptive) with the SSE instruction ``rsqrtss`` on x86 (12-bit
  approximation, relative error up to 3.7e-4; NEON: estimate plus two Newton
  steps; else the Quake trick). The vowpalwabbit 9.11.9 wheel, however, contains
  no rsqrtss/rsqrtps instruction nor the Quake constant, and its weights agree
  with an exact 1/sqrt to 1e-7 while rsqrtss would move them by 1e-5; so the
  default here is the exact ``1/sqrt``. Pass ``inv_sqrt=`` another callable to
  model a build that uses the approximation.
* ``float32_loss_gate`` (default True): VW updates only when its float32 loss
  is > 0 (``compute_update``). For logistic loss log(1 + exp(-m)) rounds to 0
  in float32 once exp(-m) <= 2**-24 (margin m >= 16.64), where float64 still
  sees a tiny positive loss; VW then skips the update AND the adaptive and
  normalisation bookkeeping (G, N, normalized_sum_norm_x, total_weight). The
  reference reproduces that decision; without it w8a's logistic loss moves by
  0.7%.
* Poisson loss: the 9.11.9 binary clamps the prediction to [-44, 44] and guards
  the invariant update against overflow (see :class:`PoissonLoss`), which the
  source snapshot of loss_functions.cc does not show.

The logistic importance-invariant update needs W(e^x) (Lambert W); VW uses a
one-step approximation (absolute error < 9e-5), reproduced in
:func:`lambert_w_exp_minus_x`.
"""

import math

FLT_MAX = 3.4028234663852886e38
# gd.cc: X_MIN = 1.084202e-19f (about sqrt(FLT_MIN)), X2_MIN = X_MIN^2, X2_MAX = FLT_MAX
X_MIN = 1.084202e-19
X2_MIN = X_MIN * X_MIN
X2_MAX = FLT_MAX
# VW's constant feature: hash 11650396 ("constant" in constant.h), in namespace 128.
CONSTANT_HASH = 11650396


def constant_index(bits: int = 18) -> int:
    """Weight slot of VW's constant (bias) feature at -b ``bits`` (116060 at -b 18)."""
    return CONSTANT_HASH & ((1 << bits) - 1)


def exact_inv_sqrt(x: float) -> float:
    """1/sqrt(x); +inf at 0 (rsqrtss gives +inf there too)."""
    return math.inf if x == 0.0 else 1.0 / math.sqrt(x)


def _exp(x: float) -> float:
    """VW's correctedExp: exp, saturating to +inf instead of raising."""
    try:
        return math.exp(x)
    except OverflowError:
        return math.inf


def _expm1(x: float) -> float:
    try:
        return math.expm1(x)
    except OverflowError:
        return math.inf


# ---------------------------------------------------------------------------
# Shared data: label range, prediction clipping, t
# ---------------------------------------------------------------------------

class SharedData:
    """VW's ``shared_data`` fields the learners read (shared_data.h, global_data.cc,
    parse_args.cc ``parse_example_tweaks``, loss_functions.cc ``get_loss_function``).

    * ``min_label = max_label = 0`` initially (shared_data.h); for logistic and
      poisson loss VW starts them at -50 / +50 (``get_loss_function``).
    * Before each example is learned, VW's ``scorer`` calls ``set_minmax(label)``:
      ``min_label = min(min_label, label)``, ``max_label = max(max_label, label)``
      -- so the current label is already inside the range its own prediction is
      clipped to.
    * ``--min_prediction`` / ``--max_prediction`` set ``min_label`` / ``max_label``
      AND turn ``set_minmax`` off (it becomes a no-op), so the range is fixed; the
      other end keeps its default 0 (or is not moved to +-50 for logistic/poisson,
      whose -50/+50 start is skipped when set_minmax is off).
    * ``finalize_prediction`` (gd.cc): NaN -> 0, then clip to [min_label,
      max_label] (checked as ``> max`` first, then ``< min``).
    * ``t`` (double): sum of importance weights of the examples seen, starting at
      --initial_t (or 1 for plain SGD, see :class:`VWGradientDescent`); VW adds an
      example's weight after learning it (``shared_data::update``).
    """

    def __init__(self, loss_name: str = "squared", min_prediction=None, max_prediction=None, t: float = 0.0):
        self.fixed = min_prediction is not None or max_prediction is not None
        self.min_label = 0.0
        self.max_label = 0.0
        if not self.fixed and loss_name in ("logistic", "poisson"):
            self.min_label, self.max_label = -50.0, 50.0
        if min_prediction is not None:
            self.min_label = float(min_prediction)
        if max_prediction is not None:
            self.max_label = float(max_prediction)
        self.t = float(t)

    def see_label(self, label: float) -> None:
        """VW's default ``set_minmax`` (global_data.cc), run by the scorer before learning."""
        if self.fixed:
            return
        self.min_label = min(self.min_label, label)
        self.max_label = max(self.max_label, label)

    def clip(self, prediction: float) -> float:
        """VW's ``finalize_prediction`` (gd.cc)."""
        if math.isnan(prediction):
            return 0.0
        if prediction > self.max_label:
            return self.max_label
        if prediction < self.min_label:
            return self.min_label
        return prediction


# ---------------------------------------------------------------------------
# Losses (loss_functions.cc)
# ---------------------------------------------------------------------------

def lambert_w_exp_minus_x(x: float) -> float:
    """W(e^x) - x, as VW's ``logloss::wexpmx`` approximates it (absolute error < 9e-5).

    W is Lambert's W; w = W(e^x) solves w + log(w) = x. Start from
    w0 = 0.86 x + 0.01 (x >= 1) or exp(0.8 x - 0.65) (x < 1), take the residual
    r = x - log(w0) - w0, and make one step of the Fritsch-Shafer-Crowley
    iteration: with t = 1 + w0 and u = 2 t (t + 2 r / 3),
    W ~= w0 (1 + r / t * (u - r) / (u - 2 r)). Returns that minus x.
    """
    if x >= 1.0:
        w = 0.86 * x + 0.01
        r = x - math.log(w) - w
    else:
        w = _exp(0.8 * x - 0.65)
        r = 0.2 * x + 0.65 - w  # = x - log(w) - w for this w
    t = 1.0 + w
    u = 2.0 * t * (t + 2.0 * r / 3.0)
    return w * (1.0 + r / t * (u - r) / (u - 2.0 * r)) - x


class Loss:
    """The methods of VW's ``loss_function`` (loss_functions.cc) the learners call.

    * ``loss(sd, p, y)``: ``get_loss``; what VW averages (times importance).
    * ``update(p, y, s, h)``: ``get_update``, the importance-invariant update of
      Karampatziakis & Langford (2011): the multiplier u such that moving the
      weights by u * (per-feature rate) * x_i moves the prediction from p by
      h * u, where h = sensitivity ("pred_per_update", the prediction change per
      unit update) and s = ``update_scale`` = eta * importance (times t^-power_t
      for non-adaptive SGD). It integrates the gradient flow
      dp/d(tau) = -h * loss'(p) over tau in [0, s] in closed form, so an example
      of importance k equals k examples of importance 1 done in the limit of
      tiny steps, and the prediction never overshoots the label.
    * ``unsafe_update(p, y, s)``: ``get_unsafe_update``, the plain gradient step
      u = -s * loss'(p) (--invariant off).
    * ``square_grad(p, y)``: ``get_square_grad`` = loss'(p)^2, for AdaGrad.
    * ``first_derivative(sd, p, y)``: loss'(p), for --coin and for --l1/--l2.
    """

    name = ""

    def loss(self, sd, p, y):
        raise NotImplementedError

    def update(self, p, y, s, h):
        raise NotImplementedError

    def unsafe_update(self, p, y, s):
        raise NotImplementedError

    def square_grad(self, p, y):
        d = self.first_derivative(None, p, y)
        return d * d

    def first_derivative(self, sd, p, y):
        raise NotImplementedError


class SquaredLoss(Loss):
    """(p - y)^2, with VW's treatment of predictions outside [min_label, max_label]."""

    name = "squared"

    def loss(self, sd, p, y):
        """``squaredloss::get_loss``: (p - y)^2 when p is inside the label range.
        A prediction outside it (possible only when the range is fixed by
        --min/max_prediction with min > max, since predictions are clipped) is
        charged by the tangent at the boundary: 0 if the label is the boundary,
        else (y - b)^2 + 2 |y - b| |b - p| for the crossed boundary b. A label
        outside a fixed range gets the ordinary (p_clipped - y)^2."""
        if sd.min_label <= p <= sd.max_label:
            return (p - y) * (p - y)
        if p < sd.min_label:
            if y == sd.min_label:
                return 0.0
            return (y - sd.min_label) ** 2 + 2.0 * (y - sd.min_label) * (sd.min_label - p)
        if y == sd.max_label:
            return 0.0
        return (sd.max_label - y) ** 2 + 2.0 * (sd.max_label - y) * (p - sd.max_label)

    def update(self, p, y, s, h):
        """K&L 2011, squared loss: p moves toward y by the factor 1 - exp(-2 s h):
        u = (y - p) (1 - exp(-2 s h)) / h; first-order 2 (y - p) s when s h < 1e-6
        (avoids cancellation)."""
        if s * h < 1e-6:
            return 2.0 * (y - p) * s
        return (y - p) * (1.0 - _exp(-2.0 * s * h)) / h

    def unsafe_update(self, p, y, s):
        return 2.0 * (y - p) * s

    def square_grad(self, p, y):
        return 4.0 * (p - y) * (p - y)

    def first_derivative(self, sd, p, y):
        """2 (p - y) with p first clipped to the label range (lower end checked first)."""
        if sd is not None:
            if p < sd.min_label:
                p = sd.min_label
            elif p > sd.max_label:
                p = sd.max_label
        return 2.0 * (p - y)


class ClassicSquaredLoss(SquaredLoss):
    """--loss_function classic: (p - y)^2 without range handling, plain (non-invariant) update."""

    name = "classic"

    def loss(self, sd, p, y):
        return (p - y) * (p - y)

    def update(self, p, y, s, h):
        return 2.0 * (y - p) * s

    def first_derivative(self, sd, p, y):
        return 2.0 * (p - y)


class LogisticLoss(Loss):
    """log(1 + exp(-y p)) for y in {-1, +1}; VW 9 maps a label y in
    [logistic_min, logistic_max] (default [-1, 1]) to q = (y - min) / (max - min)
    and mixes the two sides: loss = q l(p, +1) + (1 - q) l(p, -1) (so a 0 label
    with the defaults costs half of each side); updates and derivatives mix alike."""

    name = "logistic"

    def __init__(self, logistic_min: float = -1.0, logistic_max: float = 1.0):
        self.lo, self.hi = float(logistic_min), float(logistic_max)

    def _q(self, y):
        return (y - self.lo) / (self.hi - self.lo)

    @staticmethod
    def _loss1(p, y):
        return math.log(1.0 + _exp(-y * p))

    def loss(self, sd, p, y):
        q = self._q(y)
        return q * self._loss1(p, 1.0) + (1.0 - q) * self._loss1(p, -1.0)

    @staticmethod
    def _update1(p, y, s, h):
        """K&L 2011, logistic loss: the flow dp/dtau = h y / (1 + e^{y p}) gives
        y p' + e^{y p'} = y p + e^{y p} + s h =: x, so y p' = x - W(e^x) and
        u = (p' - p) / h = -(y (W(e^x) - x) + p) / h. First order
        y s / (1 + e^{y p}) when s h < 1e-6."""
        d = _exp(y * p)
        if s * h < 1e-6:
            return y * s / (1.0 + d)
        x = s * h + y * p + d
        return -(y * lambert_w_exp_minus_x(x) + p) / h

    def update(self, p, y, s, h):
        q = self._q(y)
        return q * self._update1(p, 1.0, s, h) + (1.0 - q) * self._update1(p, -1.0, s, h)

    def unsafe_update(self, p, y, s):
        q = self._q(y)
        return q * (s / (1.0 + _exp(p))) + (1.0 - q) * (-s / (1.0 + _exp(-p)))

    def first_derivative(self, sd, p, y):
        q = self._q(y)
        return q * (-1.0 / (1.0 + _exp(p))) + (1.0 - q) * (1.0 / (1.0 + _exp(-p)))


class HingeLoss(Loss):
    """max(0, 1 - y p) for y in {-1, +1}."""

    name = "hinge"

    def loss(self, sd, p, y):
        return max(0.0, 1.0 - y * p)

    def update(self, p, y, s, h):
        """K&L 2011, hinge: the flow stops at the hinge y p' = 1:
        u = y min(s, (1 - y p) / h); 0 when y p >= 1."""
        if y * p >= 1.0:
            return 0.0
        err = 1.0 - y * p
        return y * (s if s * h < err else err / h)

    def unsafe_update(self, p, y, s):
        return 0.0 if y * p >= 1.0 else y * s

    def first_derivative(self, sd, p, y):
        return 0.0 if y * p >= 1.0 else -y


class QuantileLoss(Loss):
    """Pinball loss: tau (y - p) if y > p else (1 - tau) (p - y); --loss_function
    quantile/pinball/absolute all build this with --quantile_tau (default 0.5, so
    "absolute" is 0.5 |y - p|)."""

    name = "quantile"

    def __init__(self, tau: float = 0.5):
        self.tau = float(tau)

    def loss(self, sd, p, y):
        e = y - p
        return self.tau * e if e > 0 else -(1.0 - self.tau) * e

    def update(self, p, y, s, h):
        """K&L 2011, quantile: the flow stops at p' = y:
        u = tau s unless tau s h >= y - p, then (y - p) / h (mirror for y < p)."""
        err = y - p
        if err == 0:
            return 0.0
        step = s * h
        if err > 0:
            return self.tau * s if self.tau * step < err else err / h
        return (self.tau - 1.0) * s if -(1.0 - self.tau) * step > err else err / h

    def unsafe_update(self, p, y, s):
        err = y - p
        if err == 0:
            return 0.0
        return self.tau * s if err > 0 else -(1.0 - self.tau) * s

    def first_derivative(self, sd, p, y):
        e = y - p
        if e == 0:
            return 0.0
        return -self.tau if e > 0 else 1.0 - self.tau


class PoissonLoss(Loss):
    """Poisson deviance with log link, 2 (y (log(y + 1e-6) - p) - (y - e^p)), as the
    vowpalwabbit 9.11.9 binary computes it. Its source snapshot (loss_functions.cc)
    shows the plain formulas below, but the released library (read from its machine
    code: the poisson methods reference the float constants 44 and FLT_MAX) first
    clamps the prediction to [-44, 44] in every method (loss, derivatives, updates)
    and guards the invariant update against overflow; matching VW needs both."""

    name = "poisson"
    CLAMP = 44.0

    def _p(self, p):
        return min(max(p, -self.CLAMP), self.CLAMP)

    def loss(self, sd, p, y):
        p = self._p(p)
        return 2.0 * (y * (math.log(y + 1e-6) - p) - (y - _exp(p)))

    def update(self, p, y, s, h):
        """Closed form of the flow dp/dtau = h (y - e^p), tau in [0, s]:
        y > 0: e^{-p'} = 1/y + (e^{-p} - 1/y) e^{-y s h}, i.e.
        u = y s - log1p(e^p expm1(y s h) / y) / h, and once y s h > 44 its limit
        p' = log y: u = -(p - log y) / h (the 9.11.9 guard);
        y = 0: u = -log1p(e^p s h) / h, or -(log(s h) + p) / h if e^p s h overflows."""
        p = self._p(p)
        ep = _exp(p)
        if y > 0:
            a = y * s * h
            if a > self.CLAMP:
                return -(p - math.log(y)) / h
            return y * s - math.log1p(ep * _expm1(a) / y) / h
        x = s * ep * h
        if abs(x) <= FLT_MAX:
            return -math.log1p(x) / h
        return -(math.log(s * h) + p) / h

    def unsafe_update(self, p, y, s):
        return (y - _exp(self._p(p))) * s

    def square_grad(self, p, y):
        d = _exp(self._p(p)) - y
        return d * d

    def first_derivative(self, sd, p, y):
        return _exp(self._p(p)) - y


def make_loss(name: str = "squared", quantile_tau: float = 0.5, logistic_min: float = -1.0,
              logistic_max: float = 1.0) -> Loss:
    """VW's ``get_loss_function`` by --loss_function name."""
    if name == "squared":
        return SquaredLoss()
    if name == "classic":
        return ClassicSquaredLoss()
    if name == "logistic":
        return LogisticLoss(logistic_min, logistic_max)
    if name == "hinge":
        return HingeLoss()
    if name in ("quantile", "pinball", "absolute"):
        return QuantileLoss(quantile_tau)
    if name == "poisson":
        return PoissonLoss()
    raise ValueError(f"unknown loss {name!r}")


def _float32_loss_is_zero(loss: Loss, sd: SharedData, p: float, y: float) -> bool:
    """Whether VW's float32 ``get_loss`` is exactly 0 where float64 is not.

    Only logistic loss matters in practice: float32 computes log(1 + e), e = exp(-m)
    (e > 0), and 1 + e rounds to 1 when e <= 2**-24 (round-to-nearest-even), giving 0.
    For each side of the mixed label that carries weight, check that rounding."""
    if not isinstance(loss, LogisticLoss):
        return False
    q = loss._q(y)
    for side, weight in ((1.0, q), (-1.0, 1.0 - q)):
        if weight != 0.0 and _exp(-side * p) > 2.0 ** -24:
            return False
    return True


# ---------------------------------------------------------------------------
# VW's default learner: gd.cc
# ---------------------------------------------------------------------------

class _GDWeight:
    """One weight slot of gd.cc's strided weight vector:
    w[0] = weight, w[adaptive] = G (sum of squared gradients, AdaGrad),
    w[normalized] = N (largest |x| seen for this feature), w[spare] = the
    per-feature rate computed in the last sensitivity pass."""

    __slots__ = ("w", "g2", "norm", "rate")

    def __init__(self, g2: float = 0.0):
        self.w = 0.0
        self.g2 = g2
        self.norm = 0.0
        self.rate = 0.0


class VWGradientDescent:
    """VW's ``gd`` base learner, one example at a time (gd.cc ``learn`` = ``predict``
    then ``update``; the scorer's ``set_minmax`` and VW's ``shared_data::update`` around it).

    Options, as VW's command line (``gd_setup``, parse_args.cc ``parse_update_options``):

    * ``adaptive``, ``normalized``, ``invariant`` (and ``sgd``): when none of
      --sgd/--adaptive/--normalized/--invariant is given (all None here) VW uses
      all three; as soon as one is given, exactly the given ones are on.
    * ``learning_rate`` (-l, eta): 0.5 by default; 10 when not given and not both
      adaptive and normalized.
    * ``power_t`` (0.5), ``initial_t``: t starts at --initial_t (0); for plain SGD
      (neither adaptive nor normalized) at 1 unless given, and then
      eta *= t0^power_t.
    * ``l1``, ``l2``: VW's --l1/--l2 (truncated gradient via ``gravity``, L2 via a
      global ``contraction``), see :meth:`_regularize`.
    * ``loss``: a :class:`Loss` or a name for :func:`make_loss` (``loss_options``
      passes quantile_tau / logistic_min / logistic_max).
    * ``min_prediction``, ``max_prediction``: see :class:`SharedData`.
    * ``inv_sqrt``: the 1/sqrt used for 1/sqrt(G) when power_t == 0.5 (exact, as VW 9.11.9).
    * ``float32_loss_gate``: see the module docstring.

    Per-feature state (gd.cc ``pred_per_update_feature``, ``compute_rate_decay``,
    ``update_feature``), with g = loss'(p) at the clipped prediction p, x clamped
    to |x| >= X_MIN = 1.084202e-19 for the state updates (x2 = max(x^2, X_MIN^2)),
    q = power_t, and two branches, as VW specialises its code on q == 0.5:

    * adaptive: G_i += importance * g^2 * x2                          (AdaGrad)
    * normalized, on a new scale |x| > N_i: if N_i > 0, rescale w_i as if the new
      scale had always been the scale (NG/NAG), then N_i = |x|:
        q = 0.5:  w_i *= N_i/|x| (adaptive) or (N_i/|x|)^2 (not adaptive)
        q != 0.5: w_i *= (|x|/N_i)^(2 (q - 1))
    * rate_i (stored in the "spare" slot), the per-feature step factor:
        q = 0.5:  1/sqrt(G_i) / N_i (both), 1/sqrt(G_i) (adaptive only),
                  1/N_i^2 (normalized only)
        q != 0.5: G_i^-q (if adaptive) * (N_i^2)^(q - 1) (if normalized)
      -- the q != 0.5 branch uses q - 1 even without --adaptive (VW's gd_setup
      computes that exponent before the flags turn adaptive off), where the
      q = 0.5 branch uses -1; the reference follows VW.
    * norm_x = sum_i x2 / N_i^2   (x2 > FLT_MAX counts 1)

    Global state (``get_pred_per_update``, ``average_update``, ``get_scale``):

    * normalized_sum_norm_x += importance * norm_x; total_weight += importance
      (both start at initial_t when initial_t > 0; only examples with loss > 0
      count, as only they reach this code)
    * update_multiplier, NG/NAG's global factor from the average squared norm of
      the examples in per-feature normalised units:
        q = 0.5:  sqrt(total_weight / normalized_sum_norm_x) (adaptive), the
                  ratio itself (not adaptive)
        q != 0.5: (normalized_sum_norm_x / total_weight)^(q - 1)
    * sensitivity h = update_multiplier * sum_i x2 * rate_i   (adaptive or
      normalized; plain SGD: h = sum_i x_i^2)
    * update_scale s = eta * importance, times (t + importance)^-q when not adaptive
    * u = loss.update(p, y, s, h) (invariant) or loss.unsafe_update(p, y, s),
      then w_i += update_multiplier * u * rate_i * x_i  (plain SGD: u * x_i)

    The update happens only when the (clipped) prediction's loss is > 0; the
    per-feature state is updated before the weights, all in one example.
    """

    def __init__(self, loss="squared", adaptive=None, normalized=None, invariant=None, sgd=False, adax=False,
                 power_t=0.5, initial_t=None, learning_rate=None, l1=0.0, l2=0.0, min_prediction=None,
                 max_prediction=None, inv_sqrt=exact_inv_sqrt, float32_loss_gate=True, **loss_options):
        self.loss_fn = loss if isinstance(loss, Loss) else make_loss(loss, **loss_options)
        # gd_setup: VW's default update rule, or exactly the flags given.
        if sgd or adaptive is not None or normalized is not None or invariant is not None:
            self.adaptive, self.normalized, self.invariant = bool(adaptive), bool(normalized), bool(invariant)
        else:
            self.adaptive = self.normalized = self.invariant = True
        self.adax = bool(adax)
        if self.adax and not self.adaptive:
            raise ValueError("adax needs adaptive (VW: 'Cannot use adax without adaptive')")
        self.power_t = float(power_t)
        self.sqrt_rate = self.power_t == 0.5  # gd_setup picks the sqrt specialisation
        self.neg_power_t = -self.power_t
        # gd_setup computes neg_norm_power = (adaptive ? power_t - 1 : -1) while
        # weights.adaptive still holds its default (true), before the flags switch
        # it off: so it is power_t - 1 even without --adaptive. (Only the non-sqrt
        # path, power_t != 0.5, reads it; the sqrt path branches on adaptive.)
        self.neg_norm_power = self.power_t - 1.0
        eta = learning_rate
        if eta is None:
            eta = 0.5 if (self.adaptive and self.normalized) else 10.0
        t0 = initial_t
        if not self.adaptive and not self.normalized:
            if t0 is None:
                t0 = 1.0
            eta *= t0 ** self.power_t
        self.initial_t = 0.0 if t0 is None else float(t0)
        self.eta = float(eta)
        self.sd = SharedData(self.loss_fn.name, min_prediction, max_prediction, t=self.initial_t)
        # gd_setup: with initial_t > 0 the normaliser sums start as if initial_t
        # examples of norm 1 had been seen; save_load: G starts at initial_t.
        self.normalized_sum_norm_x = self.initial_t if self.initial_t > 0 else 0.0
        self.total_weight = self.initial_t if self.initial_t > 0 else 0.0
        self.g2_default = self.initial_t if (self.adaptive and self.initial_t > 0) else 0.0
        self.update_multiplier = 1.0
        self.l1, self.l2 = float(l1), float(l2)
        self.gravity = 0.0  # sd->gravity: accumulated L1 truncation
        self.contraction = 1.0  # sd->contraction: accumulated L2 shrinkage
        self.inv_sqrt = inv_sqrt
        self.float32_loss_gate = float32_loss_gate
        self.weights = {}

    # -- state access ---------------------------------------------------------

    def _slot(self, index):
        slot = self.weights.get(index)
        if slot is None:
            slot = self.weights[index] = _GDWeight(self.g2_default)
        return slot

    def weight(self, index) -> float:
        """The weight as VW would print it: truncated by gravity, times contraction."""
        slot = self.weights.get(index)
        return 0.0 if slot is None else _trunc_weight(slot.w, self.gravity) * self.contraction

    # -- prediction -----------------------------------------------------------

    def raw_prediction(self, features, initial=0.0) -> float:
        """gd.cc ``predict``: initial + sum w_i x_i (with --l1, each w_i truncated
        toward 0 by gravity: ``trunc_predict``), times contraction."""
        total = initial
        for index, x in features:
            slot = self.weights.get(index)
            if slot is not None:
                w = _trunc_weight(slot.w, self.gravity) if self.l1 > 0 else slot.w
                total += w * x
        return total * self.contraction

    def predict(self, features, initial=0.0) -> float:
        return self.sd.clip(self.raw_prediction(features, initial))

    def loss(self, prediction, label) -> float:
        return self.loss_fn.loss(self.sd, prediction, label)

    # -- learning -------------------------------------------------------------

    def learn(self, features, label, importance=1.0, initial=0.0) -> float:
        """The scorer's ``set_minmax``, gd's ``learn`` (predict, then ``update``),
        then ``shared_data::update`` (t += importance). Returns the prediction."""
        self.sd.see_label(label)
        prediction = self.predict(features, initial)
        if importance > 0:
            self._update(features, prediction, label, importance)
        self.sd.t += importance
        return prediction

    def _rate(self, slot) -> float:
        """gd.cc ``compute_rate_decay``: the per-feature learning-rate factor."""
        rate = 1.0
        if self.sqrt_rate:
            if self.adaptive:
                rate = self.inv_sqrt(slot.g2)
            if self.normalized:
                inv_norm = 1.0 / slot.norm
                rate *= inv_norm if self.adaptive else inv_norm * inv_norm
        else:
            if self.adaptive:
                rate = slot.g2 ** self.neg_power_t if slot.g2 > 0 else math.inf
            if self.normalized:
                rate *= (slot.norm * slot.norm) ** self.neg_norm_power
        return rate

    def _average_update(self) -> float:
        """gd.cc ``average_update`` (NG/NAG's global normaliser; VW casts both sums to float)."""
        if not self.normalized:
            return 1.0
        if self.sqrt_rate:
            avg_norm = self.total_weight / self.normalized_sum_norm_x
            return math.sqrt(avg_norm) if self.adaptive else avg_norm
        return (self.normalized_sum_norm_x / self.total_weight) ** self.neg_norm_power

    def _pred_per_update(self, features, prediction, label, importance) -> float:
        """gd.cc ``sensitivity`` / ``get_pred_per_update`` (the stateful variant):
        updates G, N (rescaling w), the per-feature rate and the global normaliser,
        and returns h, the change of the prediction per unit of update."""
        if not (self.adaptive or self.normalized):
            return sum(x * x for _, x in features)  # ec.get_total_sum_feat_sq()
        grad_squared = importance
        if not self.adax:
            grad_squared *= self.loss_fn.square_grad(prediction, label)
        if grad_squared == 0:
            return 1.0  # VW returns early: no state change at all
        norm_x = 0.0
        pred_per_update = 0.0
        for index, x in features:
            slot = self._slot(index)
            x2 = x * x
            if x2 < X2_MIN:
                x = X_MIN if x > 0 else -X_MIN
                x2 = X2_MIN
            if self.adaptive:
                slot.g2 += grad_squared * x2
            if self.normalized:
                x_abs = abs(x)
                if x_abs > slot.norm:  # a new scale: rescale w as if it had always been the scale
                    if slot.norm > 0:
                        if self.sqrt_rate:
                            rescale = slot.norm / x_abs
                            slot.w *= rescale if self.adaptive else rescale * rescale
                        else:
                            rescale = x_abs / slot.norm
                            slot.w *= (rescale * rescale) ** self.neg_norm_power
                    slot.norm = x_abs
                norm_x2 = x2 / (slot.norm * slot.norm)
                if x2 > X2_MAX:
                    norm_x2 = 1.0  # VW: "The features have too much magnitude"
                norm_x += norm_x2
            slot.rate = self._rate(slot)
            pred_per_update += x2 * slot.rate
        if self.normalized:
            self.normalized_sum_norm_x += importance * norm_x
            self.total_weight += importance
            self.update_multiplier = self._average_update()
            pred_per_update *= self.update_multiplier
        return pred_per_update

    def _scale(self, importance) -> float:
        """gd.cc ``get_scale``: eta * importance, times t^-power_t without --adaptive,
        t = sd.t + importance (this example included)."""
        scale = self.eta * importance
        if not self.adaptive:
            scale *= (self.sd.t + importance) ** self.neg_power_t
        return scale

    def _update(self, features, prediction, label, importance) -> None:
        """gd.cc ``update`` = ``compute_update`` then ``train``."""
        update = 0.0
        loss = self.loss_fn.loss(self.sd, prediction, label)
        if loss > 0 and self.float32_loss_gate and _float32_loss_is_zero(self.loss_fn, self.sd, prediction, label):
            loss = 0.0
        if loss > 0:
            pred_per_update = self._pred_per_update(features, prediction, label, importance)
            scale = self._scale(importance)
            if self.invariant:
                update = self.loss_fn.update(prediction, label, scale, pred_per_update)
            else:
                update = self.loss_fn.unsafe_update(prediction, label, scale)
            if (self.l1 > 0 or self.l2 > 0) and abs(update) > 1e-8:
                update = self._regularize(update, prediction, label)
        if math.isnan(update):
            update = 0.0  # VW: "update is NAN, replacing with 0"
        if update != 0.0:
            if self.normalized:
                update *= self.update_multiplier
            use_rate = self.adaptive or self.normalized
            for index, x in features:
                if -FLT_MAX < x < FLT_MAX:
                    slot = self._slot(index)
                    slot.w += update * x * (slot.rate if use_rate else 1.0)
        if self.contraction < 1e-9 or self.gravity > 1e3:
            self._sync_weights()

    def _regularize(self, update, prediction, label) -> float:
        """gd.cc ``compute_update`` with reg_mode: with eta_bar = -u / loss'(p) (the
        effective step size of this example), L2 multiplies the global contraction
        by (1 - l2 eta_bar) and L1 adds l1 eta_bar to the truncation threshold
        ``gravity`` (Langford, Li & Zhang 2009 truncated gradient, applied lazily
        in predict); the update is divided by the contraction so that
        contraction * w moves by u."""
        dev1 = self.loss_fn.first_derivative(self.sd, prediction, label)
        eta_bar = -update / dev1 if abs(dev1) > 1e-8 else 0.0
        if abs(dev1) > 1e-8:
            self.contraction *= 1.0 - self.l2 * eta_bar
        update /= self.contraction
        self.gravity += eta_bar * self.l1
        return update

    def _sync_weights(self) -> None:
        """gd.cc ``sync_weights``: fold gravity and contraction into the weights."""
        for slot in self.weights.values():
            slot.w = _trunc_weight(slot.w, self.gravity) * self.contraction
        self.gravity = 0.0
        self.contraction = 1.0


def _trunc_weight(w: float, gravity: float) -> float:
    """VW::trunc_weight: move w toward 0 by gravity, to 0 if it would cross."""
    if gravity < abs(w):
        return w - math.copysign(gravity, w)
    return 0.0


# ---------------------------------------------------------------------------
# VW --coin: ftrl.cc coin betting
# ---------------------------------------------------------------------------

SMALLEST_NORMAL = 2.2250738585072014e-308   # 2**-1022, sys.float_info.min


class _CoinWeight:
    """ftrl.cc's six slots per weight for --coin (stride 8):
    W_XT current parameter, W_ZT sum of negative gradients, W_G2 sum of |gradients|,
    W_MX largest |x|, W_WE wealth (reward), W_MG largest |loss'| (Lipschitz)."""

    __slots__ = ("xt", "zt", "g2", "mx", "we", "mg")

    def __init__(self):
        self.xt = self.zt = self.g2 = self.mx = self.we = self.mg = 0.0


class VWCoin:
    """VW's ``--coin`` (ftrl.cc ``learn_coin_betting`` = ``coin_betting_predict`` then
    ``coin_betting_update_after_prediction``), defaults ``ftrl_alpha = 4``
    (initial wealth, per coordinate) and ``ftrl_beta = 1`` (floor of the Lipschitz
    estimate) from ``ftrl_setup``.

    Per coordinate i it is a Krichevsky-Trofimov bettor (Orabona & Pal 2016: the
    KT bet w = (sum of past coin outcomes) / (rounds) * wealth, with the coin
    c_t = -g_t), with the round count replaced by the data-dependent
    (L M + sum |g|) / (L M) of COCOB (Orabona & Tommasi 2017), L = largest
    |loss'| so far (at least beta), M = largest |x_i| so far:

        w_i = (alpha + Wealth_i) / (L_i M_i (L_i M_i + G_i)) * Z_i
        Z_i = -sum g_i,  G_i = sum |g_i|,  Wealth_i = sum (-g_i w_i),
        g_i = importance * loss'(p) * x_i
        (w_i = 0 while L_i M_i (L_i M_i + G_i) is below the smallest normal double)

    and the prediction is divided by the average normalised squared norm
    A = (sum_t importance_t ||x_t / M||^2 + 1e-6) / sum_t importance_t
    (M per coordinate, including the current example): p = sum_i w_i x_i / A.

    Prediction pass, for each feature (``inner_coin_betting_predict``): M' =
    max(M_i, |x|) without storing it; w = (alpha + We)/(L M' (L M' + G)) Z if
    L M' (L M' + G) is a normal double (VW: if L M' > 0) else 0; sum w x; add
    (x / M')^2 to the example's normalised norm.
    Then (``coin_betting_predict``) the global sums, A, and p = clip(sum / A).
    Update pass (``inner_coin_betting_update_after_prediction``), with
    d = importance * loss'(clipped p): M_i = max(M_i, |x|); if |d| > L_i:
    L_i = max(|d|, beta); w_i recomputed with the new M_i, L_i (the same rule);
    Z_i -= d x; G_i += |d x|; Wealth_i += -d x w_i; W_XT = w_i / A (stored; used
    only by a test-time :meth:`predict`). Every labelled example updates, even at
    zero loss. VW's --l1/--l2 do not affect --coin.
    """

    def __init__(self, loss="squared", alpha=4.0, beta=1.0, min_prediction=None, max_prediction=None,
                 **loss_options):
        self.loss_fn = loss if isinstance(loss, Loss) else make_loss(loss, **loss_options)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.sd = SharedData(self.loss_fn.name, min_prediction, max_prediction)
        self.normalized_sum_norm_x = 0.0
        self.total_weight = 0.0
        self.average_squared_norm_x = 0.0
        self.weights = {}

    def _slot(self, index):
        slot = self.weights.get(index)
        if slot is None:
            slot = self.weights[index] = _CoinWeight()
        return slot

    def _bet(self, slot, mx) -> float:
        """The KT/COCOB bet of one coordinate for a scale ``mx``: 0 while the
        denominator L M (L M + G) is below the smallest normal double (VW tests
        L M > 0, which a normal product implies; in float64 a positive L M below
        1.5e-154 can make the product a subnormal, or 0, over which the wealth
        overflows to inf or divides by zero: olcli's departure, coin.py)."""
        lm = slot.mg * mx
        denominator = lm * (lm + slot.g2)
        if denominator >= SMALLEST_NORMAL:
            return (self.alpha + slot.we) / denominator * slot.zt
        return 0.0

    def predict(self, features, initial=0.0) -> float:
        """What VW predicts at test time (ftrl.cc ``predict``: ``inline_predict`` over
        the stored W_XT, then clip) -- not the progressive prediction of :meth:`learn`,
        which recomputes each bet and divides by A. (VW 9.11.9's ``-p`` output during
        --coin training is this value taken before the example is learned, while the
        average loss it reports is that of the progressive prediction.)"""
        total = initial
        for index, x in features:
            slot = self.weights.get(index)
            if slot is not None:
                total += slot.xt * x
        return self.sd.clip(total)

    def loss(self, prediction, label) -> float:
        return self.loss_fn.loss(self.sd, prediction, label)

    def progressive_prediction(self, total, initial) -> float:
        """The prediction while learning, before clipping: sum_i bet_i x_i / A. VW's
        partial prediction starts at the label's initial value only through
        inline_predict; coin_betting_predict ignores it (ec.partial_prediction = sum / A)."""
        return total / self.average_squared_norm_x

    def learn(self, features, label, importance=1.0, initial=0.0) -> float:
        self.sd.see_label(label)
        # coin_betting_predict
        total = 0.0
        normalized_squared_norm_x = 0.0
        for index, x in features:
            slot = self.weights.get(index) or _CoinWeight()
            mx = max(slot.mx, abs(x))
            total += self._bet(slot, mx) * x
            if mx > 0:
                normalized_squared_norm_x += (x / mx) ** 2
        self.normalized_sum_norm_x += importance * normalized_squared_norm_x
        self.total_weight += importance
        self.average_squared_norm_x = (self.normalized_sum_norm_x + 1e-6) / self.total_weight
        prediction = self.sd.clip(self.progressive_prediction(total, initial))
        # coin_betting_update_after_prediction
        d = self.loss_fn.first_derivative(self.sd, prediction, label) * importance
        for index, x in features:
            slot = self._slot(index)
            gradient = d * x
            if abs(x) > slot.mx:
                slot.mx = abs(x)
            if abs(d) > slot.mg:
                slot.mg = abs(d) if abs(d) > self.beta else self.beta
            w = self._bet(slot, slot.mx)
            slot.zt -= gradient
            slot.g2 += abs(gradient)
            slot.we -= gradient * w
            slot.xt = w / self.average_squared_norm_x
        self.sd.t += importance
        return prediction
