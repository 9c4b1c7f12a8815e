"""VW's default learner (``--gd``): normalized, adaptive, importance-invariant SGD.

VW's ``gd`` reduction (vowpal_wabbit ``reductions/gd.cc``), as written out and
checked against VW 9.11.9 in tests/naive_vw.py (``VWGradientDescent``) and
benchmarks/results/vw_learners.md. Three switches, each a paper:

- ``adaptive``: AdaGrad's per-feature rate 1/sqrt(G_i), G_i = sum of squared
  gradients (Duchi, Hazan & Singer 2011, diagonal form);
- ``normalized``: per-feature normalisation by N_i, the largest |x_i| seen,
  and a global factor from the average normalised squared norm of the examples
  (Ross, Mineiro & Langford 2013, "Normalized Online Learning", algorithms NG
  and NAG; VW's ``pred_per_update_feature`` and ``average_update``);
- ``invariant``: the importance-invariant update (Karampatziakis & Langford
  2011, "Online Importance Weight Aware Updates"), the closed form of the
  gradient flow over the example's whole importance (losses.invariant_update;
  VW's ``loss_function::get_update``).

VW's rule for the switches (registry._vw_gd_rules): none given = all three on;
any given = exactly those. Example (x, y), importance k, g = dloss/dp at the
clipped prediction p, q = power_t, eta the rate, t0 = initial_t. Per feature,
with x2 = max(x_i^2, X_MIN^2) (gd.cc ``pred_per_update_feature``):

    adaptive:    G_i += k g^2 x2                      (G_i starts at t0)
    normalized:  if |x_i| > N_i: w_i *= (N_i/|x_i|) (adaptive, q = 1/2) or
                 (N_i/|x_i|)^2 (not adaptive, q = 1/2) or (|x_i|/N_i)^(2(q-1))
                 (q != 1/2), then N_i = |x_i|     (NG: as if it had always been the scale)
                 norm_x += x2 / N_i^2
    rate_i:      q = 1/2: 1/(N_i sqrt(G_i)), 1/sqrt(G_i), 1/N_i^2 (both, adaptive, normalized)
                 q != 1/2: G_i^-q (if adaptive) times (N_i^2)^(q-1) (if normalized)
    h = sum_i x2 rate_i  (plain SGD: sum_i x_i^2)

globally (``get_pred_per_update``, ``average_update``, ``get_scale``), normalized:

    normalized_sum_norm_x += k norm_x,  total_weight += k    (both start at t0)
    m = sqrt(total_weight / normalized_sum_norm_x) (adaptive, q = 1/2), that ratio
        (not adaptive, q = 1/2), (normalized_sum_norm_x / total_weight)^(q-1) (q != 1/2)
    h *= m
    s = eta k, times (t + k)^-q without adaptive (t = t0 + the importance of the
        labeled examples before; plain SGD: eta *= t0^q, t0 = 1 unless given)
    u = invariant_update(p, y, s, h)   or   -s g   (invariant off)
    w_i += m u rate_i x_i   (plain SGD: u x_i)

The update happens only when the loss at p is > 0, decided as VW decides it in
float32: a logistic loss whose exp(-y p) <= 2^-24 is 0 there, and VW then skips
the example entirely (benchmarks/results/vw_learners.md, "float32 loss gate").
VW's --l1/--l2 (``compute_update``): with eta_bar = -u/g, L2 multiplies a global
``contraction`` by 1 - l2 eta_bar and u is divided by it; L1 adds l1 eta_bar to a
global ``gravity`` (truncated gradient, Langford, Li & Zhang 2009), by which every
weight is truncated toward 0 when read. Both are folded into the weights when
contraction < 1e-9 or gravity > 1e3 (``sync_weights``).

State: slots w (VW's weight, before gravity and contraction), G (adaptive
accumulator) and N (normaliser); the globals normalized_sum_norm_x,
total_weight, gravity and contraction are the table's scalars (registry), and
t comes from the model's counters (weighted_examples), so -i continues exactly.
In ``update`` (one learner) the per-feature rate (VW's "spare" slot) is computed
twice, in the sensitivity pass and in the update pass, from the same G_i and N_i,
instead of being stored (``_update_outputs``, the mixture's members, keeps it):
keeping the sensitivity pass's rates in a buffer on the stack for the update
(and computing again those of a row the example holds twice) measured no faster
on the click log (benchmarks/results/kernel_cpu.md), the square root and the
divisions overlapping with the rest of the work.

Speed (the same results): predict, update and the sensitivity pass are inlined
into the example loop (a call of a compiled function counts references to each
array it takes, atomically); predict first asks for the rows it is about to
read (scinol_common.prefetch_rows); and with the logistic loss the update takes
the loss gate, the derivative and the invariant update from one or two
exponentials (``_logistic_derivative``) instead of four and a logarithm.

Where olcli differs from VW: float64 instead of float32 arithmetic; the base
(VW's initial value) is added after the contraction, not scaled by it; VW's
absolute loss is 0.5|y - p| (its quantile loss at tau 0.5) where olcli's is
|y - p|, whose invariant update stops at y in the same way; with --softmax a
class has no loss of its own, so its update is the gradient step -s g (as with
the invariant update off), after the same adaptive and normalised bookkeeping.
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine import merge_common
from olcli.engine.driver import run_binary, weights_loop
from olcli.engine.features import has_repeat
from olcli.engine.losses import LOGISTIC, invariant_update, logistic_invariant_update, loss_derivative, loss_value
from olcli.engine.multiclass import run_multiclass
from olcli.engine.records import C_WEIGHT
from olcli.engine.scinol_common import prefetch_rows

SLOTS = ("w", "G", "N")
W, G, N = 0, 1, 2
PARAMS = ("eta", "power_t", "initial_t", "adaptive", "normalized", "invariant", "l1", "l2")
P_ETA, P_POWER_T, P_INITIAL_T, P_ADAPTIVE, P_NORMALIZED, P_INVARIANT, P_L1, P_L2 = range(8)
SCALARS = ("normalized_sum_norm_x", "total_weight", "gravity", "contraction")
WIDTH, SCALAR_WIDTH = len(SLOTS), len(SCALARS)   # one learner's state columns and scalars
# _update_outputs' layout of learners' columns side by side in each row: (row_scale,
# member_base, member_rows, member_cols)
MULTICLASS_LAYOUT = (1, 0, 0, WIDTH)
NORM_X_SUM, TOTAL_WEIGHT, GRAVITY, CONTRACTION = range(4)

FLT_MAX = 3.4028234663852886e38   # VW skips features this large in the update (float32's largest)
X_MIN = 1.084202e-19              # gd.cc X_MIN, about sqrt(FLT_MIN): smaller |x| count as X_MIN
X2_MIN = X_MIN * X_MIN
X2_MAX = FLT_MAX
LOGISTIC_FLOAT32_ZERO = 2.0 ** -24  # log(1 + e) is 0 in float32 once e <= 2^-24


@njit(inline="always")
def _truncated(w, gravity):
    """VW's trunc_weight: w moved toward 0 by gravity, 0 if it would cross."""
    if gravity < abs(w):
        return w - math.copysign(gravity, w)
    return 0.0


@njit(inline="always")
def _rate(g2, n, power_t, adaptive, normalized):
    """gd.cc compute_rate_decay: the per-feature factor of the step."""
    rate = 1.0
    if power_t == 0.5:
        if adaptive:
            rate = 1.0 / math.sqrt(g2) if g2 > 0.0 else math.inf
        if normalized:
            inv_norm = 1.0 / n
            rate *= inv_norm if adaptive else inv_norm * inv_norm
    else:
        if adaptive:
            rate = g2 ** -power_t if g2 > 0.0 else math.inf
        if normalized:
            rate *= (n * n) ** (power_t - 1.0)
    return rate


@njit(inline="always")
def _average_update(scalars, power_t, adaptive):
    """gd.cc average_update: NG/NAG's global factor (1 before any normalised update)."""
    if scalars[TOTAL_WEIGHT] == 0.0 or scalars[NORM_X_SUM] == 0.0:
        return 1.0
    if power_t == 0.5:
        ratio = scalars[TOTAL_WEIGHT] / scalars[NORM_X_SUM]
        return math.sqrt(ratio) if adaptive else ratio
    return (scalars[NORM_X_SUM] / scalars[TOTAL_WEIGHT]) ** (power_t - 1.0)


@njit(inline="always")
def _clamped(x):
    """gd.cc pred_per_update_feature's x and x^2, |x| raised to X_MIN."""
    x2 = x * x
    if x2 < X2_MIN:
        return (X_MIN if x > 0.0 else -X_MIN), X2_MIN
    return x, x2


@njit(inline="always")
def _feature_sensitivity(state, i, c, x, x2, grad_squared, g2_start, power_t, adaptive, normalized):
    """One feature's share of the sensitivity pass (gd.cc pred_per_update_feature) for
    the learner whose slots are state[i, c + W], state[i, c + G], state[i, c + N]; x,
    x2 from ``_clamped``, grad_squared = k g^2. Adaptive: G_i += k g^2 x2 (G_i starts at
    g2_start). Normalized: a larger |x| rescales w_i (as if it had always been the
    scale) and becomes N_i. Returns (norm_x's term x2 / N_i^2, or 0 when not normalized;
    h's term x2 rate_i; rate_i)."""
    if adaptive:
        if state[i, c + G] == 0.0:  # first touch: VW's G starts at initial_t
            state[i, c + G] = g2_start
        state[i, c + G] += grad_squared * x2
    norm = 0.0
    if normalized:
        x_abs = abs(x)
        n = state[i, c + N]
        if x_abs > n:
            if n > 0.0:
                if power_t == 0.5:
                    rescale = n / x_abs
                    state[i, c + W] *= rescale if adaptive else rescale * rescale
                else:
                    rescale = x_abs / n
                    state[i, c + W] *= (rescale * rescale) ** (power_t - 1.0)
            state[i, c + N] = x_abs
            n = x_abs
        norm = 1.0 if x2 > X2_MAX else x2 / (n * n)
    rate = _rate(state[i, c + G], state[i, c + N], power_t, adaptive, normalized)
    return norm, x2 * rate, rate


@njit(inline="always")
def _raise(state, i, c, x, x2, grad_squared, g2_start, power_t):
    """``_feature_sensitivity``'s changes to the state, adaptive and normalized: G_i
    (starting at g2_start) and N_i (w_i rescaled) of the learner at columns c, for x, x2
    from ``_clamped``; returns the new G_i and N_i."""
    if state[i, c + G] == 0.0:  # first touch: VW's G starts at initial_t
        state[i, c + G] = g2_start
    state[i, c + G] += grad_squared * x2
    x_abs = abs(x)
    n = state[i, c + N]
    if x_abs > n:
        if n > 0.0:
            if power_t == 0.5:
                state[i, c + W] *= n / x_abs
            else:
                rescale = x_abs / n
                state[i, c + W] *= (rescale * rescale) ** (power_t - 1.0)
        state[i, c + N] = x_abs
        n = x_abs
    return state[i, c + G], n


@njit(inline="always")
def _adaptive_rate(g2, power_t):
    """``_rate``'s adaptive factor: G_i^-power_t (inf while G_i is 0)."""
    if power_t == 0.5:
        return 1.0 / math.sqrt(g2) if g2 > 0.0 else math.inf
    return g2 ** -power_t if g2 > 0.0 else math.inf


@njit(inline="always")
def _norm_terms(n, x2, power_t):
    """What an adaptive, normalized feature's sensitivity takes from N_i = n alone:
    ``_rate``'s normalized factor (1/N_i at power_t 0.5, else (N_i^2)^(power_t - 1)), and
    norm_x's term x2 / N_i^2 (1 when x2 > X2_MAX), as ``_feature_sensitivity`` has them."""
    factor = 1.0 / n if power_t == 0.5 else (n * n) ** (power_t - 1.0)
    return factor, (1.0 if x2 > X2_MAX else x2 / (n * n))


@njit(inline="always")
def _move(state, i, c, u, x, power_t, adaptive, normalized):
    """The update pass for one feature of the learner at columns c: w_i += u x rate_i
    (plain SGD: u x). u includes the global factor m."""
    if adaptive or normalized:
        state[i, c + W] += u * x * _rate(state[i, c + G], state[i, c + N], power_t, adaptive, normalized)
    else:
        state[i, c + W] += u * x


@njit(inline="always")
def _sensitivity(state, params, scalars, index, value, lo, hi, offset, h, d, adaptive, normalized):
    """gd.cc sensitivity (get_pred_per_update with pred_per_update_feature):
    updates G, N (rescaling w) and the normalised sums, and returns (h, m): the
    change of the prediction per unit of update, and the global factor m."""
    power_t = params[P_POWER_T]
    if not adaptive and not normalized:
        total = 0.0
        for j in range(lo, hi):
            total += value[j] * value[j]
        return total, 1.0
    grad_squared = h * (d * d)
    if grad_squared == 0.0:  # VW returns at once: nothing changes
        return 1.0, _average_update(scalars, power_t, adaptive)
    g2_start = params[P_INITIAL_T] if adaptive else 0.0
    norm_x = 0.0
    per_update = 0.0
    for j in range(lo, hi):
        x, x2 = _clamped(value[j])
        norm, per, _ = _feature_sensitivity(state, offset + index[j], 0, x, x2, grad_squared, g2_start, power_t,
                                         adaptive, normalized)
        norm_x += norm
        per_update += per
    multiplier = 1.0
    if normalized:
        scalars[NORM_X_SUM] += h * norm_x
        scalars[TOTAL_WEIGHT] += h
        multiplier = _average_update(scalars, power_t, adaptive)
        per_update *= multiplier
    return per_update, multiplier


@njit(inline="always")
def _loss_is_positive(loss, p, y, tau):
    """VW updates only when its float32 loss is > 0 (gd.cc compute_update)."""
    if not loss_value(loss, p, y, tau) > 0.0:
        return False
    return not (loss == LOGISTIC and math.exp(-y * p) <= LOGISTIC_FLOAT32_ZERO)


@njit(inline="always")
def _logistic_derivative(p, y):
    """The logistic loss's (``_loss_is_positive``, ``loss_derivative``, exp(y p) or
    NaN when not needed for them): the same bits as losses.py's formulas from one
    or two exponentials instead of four and a logarithm. (-y) p is -(y p) exactly,
    so exp(-(-y p)) is exp(y p); with y p <= 0 the loss is >= log 2 > 0, with
    y p > 0 it is > 0 exactly when exp(-y p) is, which the float32 gate's
    exp(-y p) > 2^-24 implies."""
    yp = y * p
    if yp <= 0.0:  # sigmoid(-y p) = 1 / (1 + exp(y p))
        exp_yp = math.exp(yp)
        return True, -y * (1.0 / (1.0 + exp_yp)), exp_yp
    exp_minus = math.exp(-y * p)  # sigmoid(-y p) = e / (1 + e), e = exp(-y p) < 1
    return exp_minus > LOGISTIC_FLOAT32_ZERO, -y * (exp_minus / (1.0 + exp_minus)), math.nan


@njit(inline="always")
def _derivative(loss, tau, p, y):
    """gd.cc compute_update's gate and derivative: (whether the example updates at all,
    its float32 loss at p being > 0; g = dloss/dp; exp(y p) for the logistic loss's
    invariant update, or NaN when not computed)."""
    if loss == LOGISTIC:
        return _logistic_derivative(p, y)
    if not _loss_is_positive(loss, p, y, tau):
        return False, 0.0, math.nan
    return True, loss_derivative(loss, p, y, tau), math.nan


@njit(inline="always")
def _scale(params, counters, eta, h, power_t, adaptive, normalized):
    """gd.cc get_scale: s = eta k, times (t + k)^-q without adaptive (t counts the
    labeled importance before, counters[C_WEIGHT] includes this example's; plain SGD:
    eta *= t0^q)."""
    scale = eta * h
    if not adaptive:
        t0 = params[P_INITIAL_T]
        if not normalized:
            scale = eta * t0 ** power_t * h
        scale *= (t0 + counters[C_WEIGHT]) ** -power_t
    return scale


@njit(inline="always")
def _step(loss, tau, p, y, d, scale, per_update, exp_yp, invariant):
    """u: the importance-invariant update (losses.invariant_update, the logistic one from
    exp(y p)), or the gradient step -s g when not invariant."""
    if not invariant:
        return -scale * d
    if loss == LOGISTIC:
        if np.isnan(exp_yp):
            exp_yp = math.exp(y * p)
        return logistic_invariant_update(p, y, scale, per_update, exp_yp)
    return invariant_update(loss, p, y, tau, scale, per_update)


@njit
def _sync(state, scalars):
    """gd.cc sync_weights: fold gravity and contraction into every weight."""
    gravity, contraction = scalars[GRAVITY], scalars[CONTRACTION]
    for i in range(state.shape[0]):
        w = state[i, W]
        if w != 0.0:
            state[i, W] = _truncated(w, gravity) * contraction
    scalars[GRAVITY] = 0.0
    scalars[CONTRACTION] = 1.0


@njit(inline="always")
def predict(table, settings, index, value, lo, hi, offset, learning, h):
    """gd.cc predict: sum_i w_i x_i (with --l1 each w_i truncated by gravity), times contraction."""
    state, scalars = table.state, table.scalars
    prefetch_rows(state, index, lo, hi, offset)
    gravity = scalars[GRAVITY]
    truncate = settings.params[P_L1] > 0.0
    p = 0.0
    for j in range(lo, hi):
        w = state[offset + index[j], W]
        if truncate:
            w = _truncated(w, gravity)
        p += w * value[j]
    return p * scalars[CONTRACTION]


@njit(inline="always")
def update(table, settings, index, value, lo, hi, offset, p, y, h, g):
    """gd.cc update (compute_update, then train); see the module docstring."""
    state, params, scalars = table.state, settings.params, table.scalars
    adaptive = params[P_ADAPTIVE] > 0.0
    normalized = params[P_NORMALIZED] > 0.0
    power_t = params[P_POWER_T]
    softmax_class = np.isnan(y)  # no loss of its own: the gradient g is given
    exp_yp = math.nan
    if softmax_class:
        d = g / h
        if d == 0.0:
            return
    else:
        moves, d, exp_yp = _derivative(settings.loss, settings.tau, p, y)
        if not moves:
            return
    if (adaptive or normalized) and h * (d * d) == 0.0:
        # The squared gradient underflows to 0 (a --softmax class of probability below
        # ~1e-162): VW's sensitivity returns at once, "nothing changes", but VW then still
        # moves each weight by u x times the rate it stored at the feature's last update
        # (0 for a feature never updated), a step of |d| < 1e-150. Here the rate is
        # computed from G and N, which for a row never updated is 1/0: so nothing moves.
        return
    per_update, multiplier = _sensitivity(state, params, scalars, index, value, lo, hi, offset, h, d,
                                          adaptive, normalized)
    scale = _scale(params, table.counters, params[P_ETA], h, power_t, adaptive, normalized)
    u = _step(settings.loss, settings.tau, p, y, d, scale, per_update, exp_yp,
              not softmax_class and params[P_INVARIANT] > 0.0)
    l1, l2 = params[P_L1], params[P_L2]
    if (l1 > 0.0 or l2 > 0.0) and abs(u) > 1e-8:
        eta_bar = 0.0
        if abs(d) > 1e-8:
            eta_bar = -u / d
            scalars[CONTRACTION] *= 1.0 - l2 * eta_bar
            if scalars[CONTRACTION] == 0.0:  # every weight is 0 now: fold that in (VW divides by 0)
                _sync(state, scalars)
        u /= scalars[CONTRACTION]
        scalars[GRAVITY] += eta_bar * l1
    if np.isnan(u):  # VW: "update is NAN, replacing with 0"
        u = 0.0
    if u != 0.0:
        if normalized:
            u *= multiplier
        for j in range(lo, hi):
            x = value[j]
            if -FLT_MAX < x < FLT_MAX:  # VW skips features too large for float32
                _move(state, offset + index[j], 0, u, x, power_t, adaptive, normalized)
    if scalars[CONTRACTION] < 1e-9 or scalars[GRAVITY] > 1e3:
        _sync(state, scalars)


# update_learners' work rows (work[ROW, a] for learner k's output c, a = k K + c) and its
# ``active`` rows (active[ROW, n] for the n-th updating output)
_WD, _WSQ, _WNORM, _WPER, _WEXP, _WU = range(6)
WORK_ROWS = 6
_AID, _AROW, _ACOL = range(3)
ACTIVE_ROWS = 3


@njit(inline="always")
def _update_outputs(state, scalars, etas, power_t, initial_t, loss, tau, index, value, lo, hi, preds, y, label,
                    softmax, h, g, block_rows, layout, work, active, rates, stamps, stamp):
    """``update`` of M = len(etas) learners with K = preds.shape[1] outputs each (K = 1:
    binary; K classes, one against all or --softmax) on one example, learner after
    learner, output after output. Learner k's output c: its weights, squared gradients
    and scales are the columns W, G, N at WIDTH k (its own Table's columns) of the rows
    at offset c * block_rows (class c's rows, as for ``update``); its prediction
    preds[k, c]; its label y (label < 0: binary), +1 (c == label) or -1, or with
    ``softmax`` none and the gradient h g[k, c]. Learner k's scalars are ``scalars`` at
    SCALAR_WIDTH k (its K outputs take them in turn, as K calls of ``update`` do), its
    -l etas[k]. All adaptive, normalized and invariant, without --l1/--l2 (the mixture's
    gd members, mixture.member_params). ``work``: a (WORK_ROWS, M K) buffer,
    ``active``: an (ACTIVE_ROWS, M K) int64 one, ``rates``: a (hi - lo or more, M K) one,
    all overwritten. The sensitivity pass keeps each output's rate_i of each feature in
    ``rates``, and the update pass multiplies by it: G_i and N_i of an output's row change
    only in the sensitivity pass, so it is the number ``update`` computes again, unless
    the example holds a row twice (a hand-made Batch; the parser merges repeats), which
    ``features.has_repeat`` finds (``stamps``, int64[STAMP_SLOTS], and this call's
    ``stamp``, as the parser's) and then the rate is computed again.

    The same arithmetic in the same order as M K calls of ``update`` (the same bits), in
    one loop over the example's features for the sensitivity pass of every output and
    one for their weight changes (a feature's rows and a learner's columns are next to
    each other: row_pool.RowPool, the mixture's columns), the scalars taken learner after
    learner, output after output, between the two: exact because an output's update
    reads and writes only its own cells and its learner's scalars, which the
    sensitivity pass does not read.

    ``layout`` (multiclass; a binary example's learner k is at row index[j], columns
    k WIDTH): (row_scale, member_base, member_rows, member_cols), learner k's output c of
    the feature at row r = index[j] being row r row_scale + member_base + k member_rows +
    c block_rows, columns k member_cols + (W, G, N): MULTICLASS_LAYOUT (1, 0, 0, WIDTH) for
    the learners' columns side by side in each row; (1, f R, R, 0) for a state of S
    regions of R rows, one per learner (row_pool.RowPool's split S; mixture.split_layout),
    whose first learner here is its learner f."""
    row_scale, member_base, member_rows, member_cols = layout
    n_learners = len(etas)
    n_outputs = preds.shape[1]
    # 1. each output's derivative, and whether it updates at all (``update``'s returns)
    n_active = 0
    for k in range(n_learners):
        for c in range(n_outputs):
            a = k * n_outputs + c
            exp_yp = math.nan
            if softmax:
                d = (h * g[k, c]) / h
                if d == 0.0:
                    continue
            else:
                moves, d, exp_yp = _derivative(loss, tau, preds[k, c], _label(y, label, c))
                if not moves:
                    continue
            if h * (d * d) == 0.0:
                continue
            work[_WD, a] = d
            work[_WEXP, a] = exp_yp
            work[_WSQ, a] = h * (d * d)
            work[_WNORM, a] = 0.0
            work[_WPER, a] = 0.0
            active[_AID, n_active] = a
            active[_AROW, n_active] = member_base + k * member_rows + c * block_rows
            active[_ACOL, n_active] = k * member_cols
            n_active += 1
    if n_active == 0:
        return
    # 2. the sensitivity pass (_feature_sensitivity, adaptive and normalized) of every updating
    # output. A feature's outputs often share one N_i (the largest |x| seen: every output that
    # updates raises it), and then the terms that depend on N_i only (two divisions) are
    # computed again only when an output's N_i differs from the one before. Where they do
    # not share it (the logistic loss skips the outputs it predicts surely, and word counts
    # keep raising N_i: news20), that test is a branch the processor mispredicts, which costs
    # more than the divisions: after a feature where more than 1 output in 4 had an N_i
    # other than the one before, the example's other features compute the terms for every
    # output. Either way the numbers are the same.
    one = n_outputs == 1   # (binary: output a is learner a, at row index[j])
    shared = True
    for j in range(lo, hi):
        x, x2 = _clamped(value[j])
        row = index[j]
        scaled = row * row_scale
        if shared:
            last_n = math.nan   # (never equal: the first output computes the terms)
            factor = norm = 0.0
            changes = 0
            for n in range(n_active):
                a = active[_AID, n]
                i, col = (row, a * WIDTH) if one else (active[_AROW, n] + scaled, active[_ACOL, n])
                g2, n_i = _raise(state, i, col, x, x2, work[_WSQ, a], initial_t, power_t)
                if n_i != last_n:
                    last_n = n_i
                    factor, norm = _norm_terms(n_i, x2, power_t)
                    changes += 1
                rate = _adaptive_rate(g2, power_t) * factor
                rates[j - lo, a] = rate
                work[_WNORM, a] += norm
                work[_WPER, a] += x2 * rate
            shared = 4 * (changes - 1) < n_active
        else:
            for n in range(n_active):
                a = active[_AID, n]
                i, col = (row, a * WIDTH) if one else (active[_AROW, n] + scaled, active[_ACOL, n])
                norm, per, rates[j - lo, a] = _feature_sensitivity(state, i, col, x, x2, work[_WSQ, a], initial_t,
                                                                   power_t, True, True)
                work[_WNORM, a] += norm
                work[_WPER, a] += per
    # 3. output after output: the learner's normalised sums, the global factor, the step u
    n_moving = 0
    for n in range(n_active):
        a = active[_AID, n]
        k = a // n_outputs
        c = a - k * n_outputs
        own = scalars[k * SCALAR_WIDTH:(k + 1) * SCALAR_WIDTH]
        own[NORM_X_SUM] += h * work[_WNORM, a]
        own[TOTAL_WEIGHT] += h
        multiplier = _average_update(own, power_t, True)
        u = _step(loss, tau, preds[k, c], _label(y, label, c), work[_WD, a], etas[k] * h, work[_WPER, a] * multiplier,
                  work[_WEXP, a], not softmax)
        if np.isnan(u):
            u = 0.0
        if u != 0.0:
            work[_WU, a] = u * multiplier
            for r in range(ACTIVE_ROWS):   # n_moving <= n: an entry already read
                active[r, n_moving] = active[r, n]
            n_moving += 1
    # 4. the weights of every moving output, feature by feature
    if n_moving == 0:
        return
    repeated = has_repeat(index, lo, hi, stamps, stamp)
    for j in range(lo, hi):
        x = value[j]
        if -FLT_MAX < x < FLT_MAX:
            row = index[j]
            scaled = row * row_scale
            for n in range(n_moving):
                a = active[_AID, n]
                i, col = (row, a * WIDTH) if one else (active[_AROW, n] + scaled, active[_ACOL, n])
                if repeated:   # a row twice: its rate is the one of its G_i, N_i after both
                    _move(state, i, col, work[_WU, a], x, power_t, True, True)
                else:   # _move at the sensitivity pass's rate: the same G_i, N_i, so the same number
                    state[i, col + W] += work[_WU, a] * x * rates[j - lo, a]


@njit(inline="always")
def _label(y, label, c):
    """Output c's label: y for a binary example (label < 0), else +1 for the example's
    class and -1 for the others (one against all)."""
    if label < 0:
        return y
    return 1.0 if c == label else -1.0


@njit
def update_learners(state, scalars, etas, power_t, initial_t, loss, tau, index, value, lo, hi, preds, y, h, work,
                    active, rates, stamps, stamp):
    """``_update_outputs`` for a binary example: learner k's prediction preds[k, 0], the label
    y. Not inlined: the mixture's binary loop calls this one compiled body."""
    _update_outputs(state, scalars, etas, power_t, initial_t, loss, tau, index, value, lo, hi, preds, y, -1, False, h,
                    preds, 0, MULTICLASS_LAYOUT, work, active, rates, stamps, stamp)


@njit
def update_classes(state, scalars, etas, power_t, initial_t, loss, tau, index, value, lo, hi, scores, label, softmax,
                   h, g, block_rows, layout, work, active, rates, stamps, stamp):
    """``_update_outputs`` for a multiclass example: learner k's class scores scores[k],
    the class ``label``, with ``softmax`` the gradients g[k], the state laid out as
    ``layout`` says. Not inlined: the mixture's multiclass loops call this one compiled body."""
    _update_outputs(state, scalars, etas, power_t, initial_t, loss, tau, index, value, lo, hi, scores, math.nan,
                    label, softmax, h, g, block_rows, layout, work, active, rates, stamps, stamp)


@njit
def weight(table, settings, i):
    gravity, contraction = weight_scalars(table)
    return weight_of(table.state[i, W], gravity, contraction)


@njit(inline="always")
def weight_scalars(table):
    """(gravity, contraction): what turns a row's stored w into the weight predictions use (``weight_of``)."""
    scalars = table.scalars
    return scalars[GRAVITY], scalars[CONTRACTION]


@njit(inline="always")
def may_have_folded(table, settings, gravity, contraction):
    """Whether an ``update`` that began with the scalars (``gravity``, ``contraction``) may have folded them into
    every stored w (``_sync``, VW's sync_weights), so that a copy of stored w taken before it is stale. A fold
    leaves contraction at exactly 1. Without --l2, contraction does not move otherwise, and a fold leaves gravity
    at 0; with --l2, an update that regularizes multiplies contraction by 1 - l2 eta_bar < 1. So: contraction
    back at 1 after it was not, or at 1 with --l2, or with gravity at 0 after it was not or with --l1. True
    also where nothing was folded (an update that regularized nothing while contraction was 1: the first of a
    run, or just after a fold), which costs the caller a copy made again, never a stale one."""
    scalars = table.scalars
    if scalars[CONTRACTION] != 1.0:
        return False
    params = settings.params
    if contraction != 1.0 or params[P_L2] > 0.0:
        return True
    return scalars[GRAVITY] == 0.0 and (gravity != 0.0 or params[P_L1] > 0.0)


@njit(inline="always")
def weight_of(w, gravity, contraction):
    """The weight predictions use for stored w: VW's trunc_weight(w, gravity) · contraction (--l1, --l2)."""
    return _truncated(w, gravity) * contraction


# Entry points, compiled and cached for this algorithm (the loops are in driver.py).

@njit(cache=True, nogil=True)
def run_chunk(table, settings, batch, tally, predictions):
    return run_binary(predict, update, table, settings, batch, tally, predictions)


@njit(cache=True, nogil=True)
def run_chunk_multiclass(table, settings, batch, tally, predictions, scores):
    return run_multiclass(predict, update, table, settings, batch, tally, predictions, scores)


@njit(cache=True)
def weights_at(table, settings, rows):
    return weights_loop(weight, table, settings, rows)


# ---------------------------------------------------------------------------
# Merging learners trained on separate shards (plain NumPy, not compiled).

def all_weights(state, params, rounds, scalars=None):
    """Every row's weight: ``weight`` for all rows at once (gravity and
    contraction from ``scalars``; None = none, as without --l1/--l2)."""
    w = state[:, W]
    if scalars is None:
        return w.copy()
    gravity = scalars[GRAVITY]
    truncated = np.where(gravity < np.abs(w), w - np.copysign(gravity, w), 0.0)
    return truncated * scalars[CONTRACTION]


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights, base_scalars=None,
          shard_scalars=None):
    """Combine --gd learners that all started from ``base``.

    Arguments as the other modules' ``merge``, plus each learner's scalars
    (``base_scalars``, ``shard_scalars``; None: the initial ones, i.e. no
    --l1/--l2 state). Returns a NEW state array; ``merge_scalars`` gives the
    scalars that go with it. The inputs are not modified. Shards whose rounds
    did not move are left out; with one shard left the result is a copy of it
    (merge_common.prepare).

    Rule, per coordinate, over the shards k that changed its row (w, G or N):

    1. each shard's weight is the one it predicts with, w_k = trunc(w, gravity_k)
       contraction_k (``all_weights``);
    2. normalized: N = max of the N_k, the largest |x| any shard saw (exact for
       the union of the examples). The weights are not rescaled to it, although
       NG rescales a weight when a larger value arrives (Ross et al. 2013; gd.cc
       pred_per_update_feature): that guards the worst case of one learner, and
       at a merge it shrinks weights a shard learned well because another shard
       met one larger value; measured in benchmarks/results/merge_rules.md
       (cod-rna, whose features are unscaled: test loss 0.4952 rescaled, 0.4772
       not, after one merge of 4 shards; a9a and phishing: no difference);
    3. adaptive: with dG_k = G_k - G_base (G_base = initial_t for a row the
       base never touched: VW's G starts there),
           w = sum_k dG_k w_k / sum_k dG_k,   G = G_base + sum_k dG_k^2 / sum_k dG_k
       (AdaGrad's rule, adagrad.merge: a shard's squared-gradient mass is how
       much it learned about the feature, a shard that never saw it does not
       dilute it, and G grows by the increments' dG-weighted mean, as far as
       the averaged weight moved: one shard's increment, or VW's
       sum G_k^2 / sum G_k from a zero base; covtype, 4 shards: 1.014 x one
       machine after one extra pass, 1.022 with the sum);
    3b. adaptive, relaxed: on a row the base had learned (G_base > 0) and two
       or more shards grew, the mean's move is lengthened to sqrt(n) times,
           w = w_mean + (sqrt(n) - 1) sum_k dG_k m_k / sum_k dG_k,
           n = (sum_k dG_k)^2 / sum_k dG_k^2 = sum_k dG_k / (G's growth above),
       m_k = w_k - w_base,k the shard's learning move (w_base,k: the base's weight
       under shard k's gravity and contraction, as in 4; without --l1/--l2
       w = w_base + sqrt(n) (w_mean - w_base)). n is the dG weights' effective
       number of shards (K for K equal increments, 1 when one shard dominates).
       Why: after a pass, each shard's move from a common learned start is a
       drift, alike on every shard (they descend the same expected loss), plus
       independent noise. One learner over all K shards' examples would add the
       K drifts; the mean keeps one, 1/K of a pass's progress: the known
       slowness of iterative parameter mixing (McDonald, Hall & Mann 2010,
       "Distributed training strategies for the structured perceptron"; not in
       the project's papers), for which the 4-shard default needed 5 passes
       where one machine needs 3. sqrt(n) times the mean is the longest move
       whose noise is no larger than one shard's own (K equal shards: variance
       K sigma^2 / K = sigma^2), and it composes along the merge tree (two
       pairs at sqrt(2), then the pairs at sqrt(2): sqrt(4)). Not on a row's
       first merge (G_base = 0): there each shard's weight is its own estimate
       from scratch (AdaGrad's first steps are its largest), not a drift from a
       common start; lengthened there too, covtype's -l 10 member on 4 shards
       tested at 0.627 after pass 1 against 0.535. Where a shard had
       converged (its move the whole way to its optimum) the longer move
       over-steps by sqrt(n) - 1 of it and the next pass comes back; measured
       over 5 passes on covtype, a9a and the text generator
       (benchmarks/results/scale_out_s40.md: covtype, 4 shards, the default's
       holdout loss after 4 passes 1.0236 -> 1.011 x one machine after 3).
       G grows as above: after the merge the steps stay one shard's;
    not adaptive: w = w_base + sum_k p_k (w_k - w_base,k)
       over all shards that learned, p_k their importance shares and w_base,k
       the base's weight as shard k sees it (sgd.merge's sum_k p_k w_k: there is
       nothing per coordinate to weigh by; anchored at the base so that L1/L2
       shrinkage is counted as in 4);
    4. --l1/--l2: the merged learner's gravity and contraction are what one
       learner that saw every shard's examples would hold (``merge_scalars``:
       gravity adds the shards' increments, contraction multiplies their
       ratios). A row no shard changed keeps the base's row, so it undergoes
       every shard's L1/L2 shrinkage, as after sequential training, while a row
       a shard changed carries that shard's own (adagrad.merge treats its lazy
       shrinkage the same way); for such a row the stored w is the one that
       gives the merged weight under the merged gravity and contraction,
       w = sign(w_merged) (|w_merged| / contraction + gravity) (the weight
       formula inverted, as ftrl.merge inverts its own; exact up to the rounding
       of gravity, the precision of VW's own representation). When the merged
       contraction is below 1e-9 or the gravity above 1e3, both are folded into
       every weight instead, as VW's sync_weights does during training.

    VW: its gd.cc merge uses do_weighting (the G-weighted mean of the totals,
    see adagrad.merge) for adaptive weights and the plain mean otherwise, adds
    total_weight and normalized_sum_norm_x over models without subtracting the
    base (benchmarks/results/merge_rules.md, "What VW does"), and averages N
    with the same weights as w.

    Tested invariants (tests/test_merge.py): one shard = a copy; idle shards
    change nothing; rows no shard changed keep the base's row; a row one shard
    changed gets that shard's weight; the merged weight lies between the
    shards' weights except on the rows 3b lengthens (there it is 3b's formula);
    symmetric in the shard order; associative up to rounding when not adaptive
    (adaptive: the mean increment, as adagrad.merge).
    """
    result, active = merge_common.prepare(base, shards, base_rounds, shard_rounds, shard_weights)
    if result is not None:
        return result
    base_scalars, shard_scalars = _scalars_or_initial(params, base_scalars, shard_scalars, len(shards))
    touched = np.stack([(shards[k] != base).any(axis=1) for k in active])
    changed = touched.any(axis=0)
    n = np.max(np.stack([base[:, N]] + [shards[k][:, N] for k in active]), axis=0)
    weights = np.stack([all_weights(shards[k], params, shard_rounds[k], shard_scalars[k]) for k in active])
    out = np.array(base, dtype=np.float64, copy=True)
    gravity, contraction = merged_regularization(base_scalars, [shard_scalars[k] for k in active])
    if params[P_ADAPTIVE] > 0.0:
        start = np.where(base[:, G] > 0.0, base[:, G], params[P_INITIAL_T])
        grown = np.maximum(np.where(touched, np.stack([shards[k][:, G] for k in active]) - start, 0.0), 0.0)
        w, total = merge_common.weighted_mean(weights, grown)
        # a row changed with no squared gradient to weigh by: the plain mean of the changers
        plain = np.where(touched, weights, 0.0).sum(axis=0) / np.maximum(touched.sum(axis=0), 1)
        w = np.where(total > 0.0, w, plain)
        increment = merge_common.mean_increment(grown, total)
        out[changed, G] = (start + increment)[changed]
        # 3b. relaxed on rows the base had learned and two or more shards grew: w plus
        # (sqrt(n) - 1) times the shards' dG-weighted mean learning move
        relaxed = (base[:, G] > 0.0) & ((grown > 0.0).sum(axis=0) >= 2)
        if relaxed.any():
            moves = np.stack([weights[a] - all_weights(base, params, base_rounds, shard_scalars[k])
                              for a, k in enumerate(active)])
            move, _ = merge_common.weighted_mean(moves, grown)
            shards_n = np.divide(total, increment, out=np.ones_like(total), where=increment > 0.0)
            w = np.where(relaxed, w + (np.sqrt(shards_n) - 1.0) * move, w)
    if params[P_ADAPTIVE] <= 0.0:
        # sgd.merge's w = sum_k p_k w_k, anchored at the base: w = base + sum_k p_k (w_k - base_k),
        # each weight as its learner sees it (base_k: the base row under shard k's L1/L2), so that a
        # shard that left a row alone adds nothing, and pairwise merging equals merging at once
        counts = np.array([float(shard_weights[k]) for k in active])
        share = counts / counts.sum() if counts.sum() > 0.0 else np.full(len(active), 1.0 / len(active))

        def seen(scalars):
            return all_weights(base, params, base_rounds, scalars)

        moved = np.stack([weights[a] - seen(shard_scalars[k]) for a, k in enumerate(active)])
        w = seen(np.array([0.0, 0.0, gravity, contraction])) + (share[:, None] * moved).sum(axis=0)
    if _folds(gravity, contraction):
        out[:, W] = all_weights(base, params, base_rounds, np.array([0.0, 0.0, gravity, contraction]))
        stored = w
    else:
        with np.errstate(over="ignore"):
            stored = np.where(w != 0.0, np.copysign(np.abs(w) / contraction + gravity, w), 0.0)
    out[changed, W] = stored[changed]
    out[changed, N] = n[changed]
    return out


def _folds(gravity, contraction):
    """sync_weights' condition: fold them into the weights."""
    return contraction < 1e-9 or gravity > 1e3


def _scalars_or_initial(params, base_scalars, shard_scalars, count):
    initial = np.array([params[P_INITIAL_T], params[P_INITIAL_T], 0.0, 1.0])
    base_scalars = initial if base_scalars is None else base_scalars
    shard_scalars = [initial if sc is None else sc for sc in (shard_scalars or [None] * count)]
    return base_scalars, shard_scalars


def merged_regularization(base_scalars, active_scalars):
    """(gravity, contraction) of one learner that saw the base's and every shard's
    examples: the base's gravity plus the shards' increments, its contraction
    times the shards' ratios. After a shard folded them into its weights
    (sync_weights, at contraction < 1e-9 or gravity > 1e3) its increments are
    unknown and count as none."""
    gravity = base_scalars[GRAVITY] + sum(max(sc[GRAVITY] - base_scalars[GRAVITY], 0.0) for sc in active_scalars)
    contraction = base_scalars[CONTRACTION]
    for sc in active_scalars:
        contraction *= min(sc[CONTRACTION] / base_scalars[CONTRACTION], 1.0)
    return gravity, contraction


def merge_scalars(base_scalars, shard_scalars, params, base_rounds, shard_rounds, shard_weights):
    """The scalars that go with ``merge``'s state: the normalised sums are the
    base's plus every shard's increments (sums over examples: the union's);
    gravity and contraction as ``merged_regularization`` (0 and 1 where merge
    folds them into the weights). One shard, or at most one that learned: that
    learner's scalars (as merge_common.prepare returns its state)."""
    base_scalars, shard_scalars = _scalars_or_initial(params, base_scalars, shard_scalars, len(shard_rounds))
    if len(shard_scalars) == 1:
        return np.array(shard_scalars[0], dtype=np.float64, copy=True)
    active = [k for k, r in enumerate(shard_rounds) if r > base_rounds]
    if not active:
        return np.array(base_scalars, dtype=np.float64, copy=True)
    if len(active) == 1:
        return np.array(shard_scalars[active[0]], dtype=np.float64, copy=True)
    out = np.array(base_scalars, dtype=np.float64, copy=True)
    for slot in (NORM_X_SUM, TOTAL_WEIGHT):
        out[slot] = base_scalars[slot] + sum(shard_scalars[k][slot] - base_scalars[slot] for k in active)
    gravity, contraction = merged_regularization(base_scalars, [shard_scalars[k] for k in active])
    out[GRAVITY], out[CONTRACTION] = (0.0, 1.0) if _folds(gravity, contraction) else (gravity, contraction)
    return out
