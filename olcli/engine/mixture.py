"""A mixture of learners by exponential weights (``--mix``, the default): VW's default
learner (``--gd``) at three learning rates, -l eta, 6 eta and 20 eta (0.5, 3 and 10 by
default), and coin betting (``--coin``), on the same hashed features, their predictions
mixed with weights from their past losses.

The rule is the exponentially weighted average forecaster (Cesa-Bianchi &
Lugosi 2006, "Prediction, Learning, and Games", §2.1; for exp-concave losses
§3.3, Proposition 3.1), which is Vovk's aggregating algorithm (Vovk 1990,
"Aggregating strategies"; 2001, "Competitive on-line statistics") with the
weighted average as substitution function. Neither text is in the project's
papers; the section numbers are from the book as the author remembers it. For
example t, member k's (clipped) prediction p_k and its cumulative loss L_k over
the examples before it (which ones: "Which losses count", below):

    pi_k = q_k exp(-eta L_k) / sum_j q_j exp(-eta L_j)
    p    = sum_k pi_k p_k                       (then clipped, as every learner's)

The prior q (PRIOR) is 0.7 for --gd at -l eta and 0.1 for each of the others:
without evidence the mixture is mostly VW's default learner. The aggregating
algorithm allows any prior; its bound against member k is ln(1/q_k) / eta: 2.3 /
eta against each of --gd at 6 eta, 20 eta and --coin, 0.36 / eta against --gd.
Why these members: VW's learner tuned in hindsight over -l (0.03 .. 10) is what a
user would otherwise run, and the best -l is 0.5 on some sets, 3 on others (sst2,
phishing, covtype), 10 on cod_rna; --coin wins where the features' scales differ
(msd_year, california). Measured (benchmarks/results/defaults_vs_vw.md,
benchmarks/results/mix_rates.md): within 1.05 x VW tuned in hindsight on 11 of 11
binary and regression sets, within 1.02 x min(VW default, VW --coin) on 11 of 11
(the three-member default of format 4, --gd, --coin and ScInOL2 at 0.9/0.05/0.05,
was 1.21 x tuned VW on cod_rna, 1.14 x on sst2, 1.19 x on the generated regression);
ScInOL2 as a fifth member changed no set by more than 0.1% and cost 26% more
kernel time. Why the prior 0.7 and not uniform: with the uniform prior, VW's own
test cases of 5 to 25 examples (509, 524, 720, 538, 725 of vw_tests) ended 3-28%
above VW's reference loss, because the weights had not left their start and each
prediction was mostly barely trained members'.

Members: the parameter ``members`` (``--mix-members N``) mixes the first N of MEMBERS
(gd, gd_x6, gd_x20, coin), the prior's first N entries renormalised; the others weigh 0,
have no columns in the state (N < 4: the first 3 N slots, registry.state_slots, 48 bytes a
row for two), their L_k stay 0 and their scalars at their start. coin's --coin-alpha and
--coin-beta are refused when coin is not mixed (registry._mix_rules). Not given, N is 4 for one output and 2
(gd at eta and 6 eta) with --oaa/--softmax: on the multiclass sets every subset was
measured (benchmarks/results/mix_members_multiclass_s44.md, progressive 0/1 error) and
gd with gd_x6 is as good as all four (letter 0.4651 both, news20 0.1750 against 0.1758,
the multiclass generator 0.4590 both; --softmax within 0.05%), while gd_x20 and coin
are 60% of the per-class work (news20, 4,000 documents: 0.44 s of learning against
1.21 s). With one output -l 10 (cod_rna) and coin (msd_year, california) are the
members that win. A model file of format 5 has no ``members`` and mixes all four.

eta is fixed by the loss, not tuned, and by the loss the L_k were summed in, the
model's own (``settings.params[P_LOSS]``), not by the loss a test scores with
(``settings.loss``): ``olcli test --loss X`` changes what is reported, never the
weights pi_k or the predictions. It is 1 for the logistic loss (the loss is
1-exp-concave in the probability; here the margins are mixed, not the
probabilities, so Vovk's bound ln k is a guide, not a guarantee) and for
multiclass (Hedge on the members' 0/1 errors: "Multiclass", below); 1/(2 R^2) for the squared loss, R = the spread of the labels seen
(max - min; the square loss on an interval of width R is 1/(2 R^2)-exp-concave,
Cesa-Bianchi & Lugosi §3.3), and 1/R for the absolute, quantile and hinge
losses (Hedge's scale for losses bounded by R). R is the labels' spread, not
VW's clipping range, because that range starts at 0: on years (msd_year,
labels 1922..2011) it is 2011 wide where the labels spread over 90, and eta
from it was 500 times smaller, which left the mixture near uniform for long
enough to cost 5.7% over its best member (benchmarks/results/defaults_vs_vw.md).
The predictions are clipped to VW's range, so with labels far from 0 the
exp-concavity argument is a guide there too. R = 0 (one label value so far):
eta = 0, uniform weights.

Every member learns exactly as it does alone: from its own clipped prediction,
its own derivative, with its
own state, and the label range and counters are the model's, as alone. So each
member, run alone by its flag (``--gd -l 3`` for the second), ends bit for bit
where it ends inside the mixture (tests/test_mixture.py), and the mixture's only
own state is the four cumulative losses L_k (the table's scalars ``loss_gd``,
``loss_gd_x6``, ``loss_gd_x20``, ``loss_coin``) and the labels' spread (``labels_seen``, ``labels_low``,
``labels_high``; every labeled example seen while learning, as VW's label
range).

Which losses count: only those of examples no member has learned yet. The
weights are meant to pick the member that predicts new examples best, and a
member's loss on an example it has already learned from measures how well it
remembers, not how well it generalises: in a second pass over the same data a
member that fits its training examples more closely looks better than it is
(on one machine a member that fits closely gains in pass 2 that way), and after a merge
on a cluster (olcli/scaleout.py) the loss on the shard's examples, learned in
the pass before, swung the weights from --coin to ScInOL2 (a member of the
format-4 default) on the text generator while merged --coin predicted the test
part better
(benchmarks/results/scale_out.md). So, while learning (labeled, importance
> 0):
- in the first pass of a run, every example adds its members' losses, the
  ones learned from and the held-out ones (never learned: each is predicted
  by the members' predictors before its loss is added, so the weights still
  depend only on examples before it, as progressive validation);
- in a later pass with holdout (the tally's H_ROWS, set by run.py and
  scaleout.py for passes after the first when there is holdout), only the
  held-out examples add theirs: every other example of the pass was learned
  in a pass before. This is VW's own rule for what a later pass may report
  (its holdout loss, VW's is_test_only in every pass);
- a later pass without holdout (--holdout-off) cannot be told from a first
  pass in the kernel (the tally carries no pass number), so it counts its
  examples as a first pass does: the old rule, which rewards remembering;
  a run that wants the weights picked on new examples keeps holdout on.
A held-out example's loss enters the weights of the examples after it, also
in later passes, where the same held-out example is scored again: its
previous score then already moved the weights a little , so the holdout loss of a pass after the first is very
slightly optimistic for the mixture (4 numbers fitted on the held-out part); a
member's own columns never see it.
On a cluster, after the first pass on K >= 2 shards, L_k adds the shards'
mean increment, not their sum (``pass_scalars``): the K copies each learned
1/K of the data from the same start, K runs of one learning curve's start.

Multiclass (--oaa K, --softmax K): each member predicts its K class scores and
learns from them as alone (OAA: the binary loss of each class; softmax: the
cross entropy of its own softmax); its loss for the weights is the 0/1 error of
its own scores (its argmax against the label: the loss VW's --oaa prints and a
user reads), eta = 1 (Hedge on a loss in [0, 1]); the mixture's class scores are
sum_k pi_k scores_k (not clipped, as no class score is). Not the multiclass log
loss: on letter (--oaa 26 --loss logistic) --coin has the lowest log loss (2.141
against --gd's 2.309) and a higher 0/1 error (0.564 against 0.524), and weights
from the log loss gave the mixture 0.5623; from the 0/1 error, 0.5243 (VW 0.5240).

The mixture is a linear model: its weight for a row is sum_k pi_k w_k (each
member's weight as it reports it), so ``weights()``, readable models, inspect
and serve read one weight per feature. A prediction from those weights can
differ from the progressive one: while learning each member's prediction is
clipped to the label range before mixing, and --coin predicts with bets at the
example's scale divided by its running norm (its stored weights are its test
predictor, coin.py).

State: the members' slots side by side (``gd.w gd.G gd.N``, ``gd_x6.*``,
``gd_x20.*``, then coin's six: 15 float64 columns, 120 bytes a row; the mixed members'
only with fewer, "Members"), so the model is
the members' tables together. In memory, the multiclass default with two or three gd
members keeps each member's rows in a region of their own (``split_of``), and its members
learn a chunk on two threads (``learn_part``, olcli/member_threads.py); the model file and
every reader see the rows as above (row_pool.RowPool); the scalars are each gd member's four, coin's two,
the four losses and the labels seen. The three gd members' normalisers N (the
largest |x_i| seen) are not one shared column: a member raises N_i only at an
example it updates on, and it skips an example whose loss is 0 in float32 (the
logistic gate y p >= 16.6, or a squared loss at a prediction clipped to the
label), which happens at -l 10 where it does not at -l 0.5 (sst2: N differs on 27
of 14,394 rows between -l 0.5 and -l 10 alone; letter --oaa 26: 2 of 442), so a
shared column would make the members differ from themselves alone.
Hyper-parameters: the members' untuned defaults, each settable (-l, --power-t,
--initial-t for the gd members: -l sets the first one's rate, the others follow at
RATES times it; --coin-alpha/--coin-beta for coin). Predicting, the three gd members'
dot products are one loop over the example's features (each member's sum in the
order it takes alone, so the same bits).

Scale: gd (normalized) is invariant to the scale of each feature only
approximately (its rescaling when a larger value arrives), coin exactly
(coin.py); the mixture weights depend only on the losses,
so the mixture is as scale invariant as its members are.
"""
import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine import coin, gd
from olcli.engine.driver import (account_binary, clip_range, clip_to, most_features, progress_row, start_example,
                                 widen_label_range)
from olcli.engine.losses import LOGISTIC, SQUARED, loss_derivative, loss_value
from olcli.engine.multiclass import account_multiclass, class_gradients, log_probabilities
from olcli.engine.records import C_ROUNDS, H_ROWS, S_DIVERGED, Settings, Table
from olcli.engine.borrowed import borrowed, lend_batch, lend_settings, lend_table, lend_tally, release
from olcli.engine.features import STAMP_SLOTS
from olcli.engine.scinol_common import prefetch_rows

# The members, in the order of the state's columns, the scalars and the losses.
RATES = (1.0, 6.0, 20.0)   # the gd members' -l as multiples of eta (0.5: 0.5, 3, 10)
GD_MEMBERS = ("gd", "gd_x6", "gd_x20")
MEMBERS = GD_MEMBERS + ("coin",)
N_GD = len(GD_MEMBERS)
N_MEMBERS = len(MEMBERS)
# The prior weights q_k (module docstring, "The prior"), in MEMBERS order.
PRIOR = (0.7, 0.1, 0.1, 0.1)

SLOTS = tuple(f"{m}.{s}" for m in GD_MEMBERS for s in gd.SLOTS) + tuple(f"coin.{s}" for s in coin.SLOTS)
GD_WIDTH = len(gd.SLOTS)
GD_COLUMNS = tuple((k * GD_WIDTH, (k + 1) * GD_WIDTH) for k in range(N_GD))
COIN_COLUMNS = (N_GD * GD_WIDTH, N_GD * GD_WIDTH + len(coin.SLOTS))
MEMBER_COLUMNS = dict(zip(MEMBERS, GD_COLUMNS + (COIN_COLUMNS,)))
PARAMS = ("eta", "power_t", "initial_t", "alpha", "beta", "members")
P_ETA, P_POWER_T, P_INITIAL_T, P_ALPHA, P_BETA, P_MEMBERS = range(6)
# settings.params[P_LOSS], after PARAMS: the code (losses.LOSS_CODES) of the model's own loss, which
# the L_k are summed in and mixing_rate reads; the Learner appends it (kernel_params), neither an
# option nor stored in the model file
P_LOSS = len(PARAMS)
# (scalar names are keys of the model header's "scalars" object: no dots, which header paths use)
SCALARS = (tuple(f"{m}_{s}" for m in GD_MEMBERS for s in gd.SCALARS) + tuple(f"coin_{s}" for s in coin.SCALARS)
           + tuple(f"loss_{m}" for m in MEMBERS) + ("labels_seen", "labels_low", "labels_high"))
GD_SCALAR_WIDTH = len(gd.SCALARS)
GD_SCALARS = tuple((k * GD_SCALAR_WIDTH, (k + 1) * GD_SCALAR_WIDTH) for k in range(N_GD))
COIN_SCALARS = (N_GD * GD_SCALAR_WIDTH, N_GD * GD_SCALAR_WIDTH + len(coin.SCALARS))
MEMBER_SCALARS = dict(zip(MEMBERS, GD_SCALARS + (COIN_SCALARS,)))
LOSSES = COIN_SCALARS[1]          # scalars[LOSSES + k]: member k's cumulative loss
SEEN, LOW, HIGH = LOSSES + N_MEMBERS, LOSSES + N_MEMBERS + 1, LOSSES + N_MEMBERS + 2

_CO0, _CO1 = COIN_COLUMNS
_CS0, _CS1 = COIN_SCALARS
_W1, _W2 = GD_COLUMNS[1][0] + gd.W, GD_COLUMNS[2][0] + gd.W   # the second and third gd members' w columns


def member_params(params):
    """Each member's parameter array, in MEMBERS order (gd's in gd.PARAMS order:
    -l eta x RATES[k], adaptive, normalized and invariant on, no --l1/--l2; coin's),
    from the mixture's, in PARAMS order. Plain Python and NumPy; the kernels do the same."""
    p = np.asarray(params, dtype=np.float64)
    return tuple(np.array([p[P_ETA] * rate, p[P_POWER_T], p[P_INITIAL_T], 1.0, 1.0, 1.0, 0.0, 0.0])
                 for rate in RATES) + (np.array([p[P_ALPHA], p[P_BETA]]),)


@njit(inline="always")
def _member_settings(settings, params):
    return Settings(params, settings.loss, settings.tau, False, settings.learn, settings.block_rows,
                    settings.classes, settings.softmax, settings.min_prediction, settings.max_prediction)


@njit(inline="always")
def _gd_settings(settings, k):
    p = settings.params
    return _member_settings(settings, np.array([p[P_ETA] * RATES[k], p[P_POWER_T], p[P_INITIAL_T], 1.0, 1.0, 1.0,
                                                0.0, 0.0]))


@njit(inline="always")
def mixed(settings):
    """The number of members mixed, n: the first n of MEMBERS ("Members", module docstring)."""
    return np.int64(settings.params[P_MEMBERS])


@njit(inline="always")
def split_of(settings):
    """How the pool lays the members out (olcli/model.py pool_split, row_pool.RowPool's split S):
    with --oaa/--softmax and 2 to N_GD members mixed (gd members only), S = that number and
    each member's rows are a region of their own (the kernels' state: S regions of R rows of
    GD_WIDTH columns, member k's row for pool row p at k R + p), so that two threads can
    learn two members at once without writing a cache line in common (``learn_part``);
    else 1, the members' columns side by side in each row."""
    n = mixed(settings)
    if settings.classes > 0 and n >= 2 and n <= N_GD:
        return n
    return np.int64(1)


@njit(inline="always")
def split_layout(state, split, first):
    """gd.update_classes' layout (gd._update_outputs) of the gd members first, first + 1, ...
    in the state (split_of)."""
    if split > 1:
        region = np.int64(state.shape[0] // split)
        return (np.int64(1), first * region, region, np.int64(0))
    return (np.int64(1), np.int64(0), np.int64(0), np.int64(GD_WIDTH))


@njit(inline="always")
def _update_buffers(batch, outputs):
    """gd.update_learners' and gd.update_classes' buffers for ``outputs`` learner outputs (members
    x classes) over the batch's examples: work, active, rates and stamps (gd._update_outputs)."""
    return (np.empty((gd.WORK_ROWS, outputs)), np.empty((gd.ACTIVE_ROWS, outputs), np.int64),
            np.empty((most_features(batch.row_ptr, len(batch.labels)), outputs)), np.zeros(STAMP_SLOTS, np.int64))


@njit(inline="always")
def _gd_rates(settings, n_gd):
    """The first n_gd gd members' -l (as _gd_settings gives them), power_t and initial_t:
    what gd.update_learners and gd.update_classes take for them."""
    etas = np.empty(n_gd)
    for k in range(n_gd):
        etas[k] = settings.params[P_ETA] * RATES[k]
    return etas, settings.params[P_POWER_T], settings.params[P_INITIAL_T]


@njit(inline="always")
def _members(table, settings):
    """Each member's Table (its columns of the state, its scalars, the model's
    counters) and Settings (its parameters), in MEMBERS order."""
    state, scalars, counters = table.state, table.scalars, table.counters
    return (Table(state[:, 0:3], counters, scalars[0:4]), _gd_settings(settings, 0),
            Table(state[:, 3:6], counters, scalars[4:8]), _gd_settings(settings, 1),
            Table(state[:, 6:9], counters, scalars[8:12]), _gd_settings(settings, 2)) + _coin_member(table, settings)


@njit(inline="always")
def _coin_member(table, settings):
    """coin's Table and Settings (``_members``' last two)."""
    p = settings.params
    return (Table(table.state[:, _CO0:_CO1], table.counters, table.scalars[_CS0:_CS1]),
            _member_settings(settings, np.array([p[P_ALPHA], p[P_BETA]])))


@njit(inline="always")
def _feature_terms(state, coin_state, i, x, learning, alpha):
    """Row i's terms of the members' prediction sums for a feature of value x: w x for
    each gd member; coin's bet at M' = max(M_i, |x|) times x and (x / M')^2 while
    learning (coin.predict), its stored w x otherwise (and 0)."""
    if not learning:
        return state[i, gd.W] * x, state[i, _W1] * x, state[i, _W2] * x, coin_state[i, coin.W] * x, 0.0
    m = max(coin_state[i, coin.M], abs(x))
    ratio = x / m if m > 0.0 else 0.0
    return (state[i, gd.W] * x, state[i, _W1] * x, state[i, _W2] * x, coin._bet(coin_state, i, m, alpha) * x,
            ratio * ratio)


@njit(inline="always")
def _gd_class_sums(state, index, value, lo, hi, block_rows, n_gd, sums, split, first):
    """sums[c, k] = sum_i w_i x_i of the gd members first .. n_gd - 1 for every class c (the
    multiclass default's two in one loop without a test per row), each over the features
    in their order: with split S > 1 from member k's region (split_of), else from the
    members' columns side by side in each row (first = 0)."""
    n_classes = sums.shape[0]
    if split > 1:
        region = state.shape[0] // split
        for j in range(lo, hi):
            x = value[j]
            for k in range(first, n_gd):
                r = index[j] + k * region
                for c in range(n_classes):
                    sums[c, k] += state[r + c * block_rows, gd.W] * x
        return
    if n_gd == 2:
        for j in range(lo, hi):
            row = index[j]
            x = value[j]
            for c in range(n_classes):
                i = c * block_rows + row
                sums[c, 0] += state[i, gd.W] * x
                sums[c, 1] += state[i, _W1] * x
        return
    for j in range(lo, hi):
        row = index[j]
        x = value[j]
        for c in range(n_classes):
            i = c * block_rows + row
            sums[c, 0] += state[i, gd.W] * x
            if n_gd > 1:
                sums[c, 1] += state[i, _W1] * x
            if n_gd > 2:
                sums[c, 2] += state[i, _W2] * x


@njit(inline="always")
def predict_classes(state, scalars, coin_table, coin_settings, index, value, lo, hi, block_rows, learning, h, base,
                    sums, norms, member, n, split):
    """Every member's prediction for every output c (rows at offset c * block_rows; one
    output for a binary example, K classes for a multiclass one) plus the base,
    member[k, c], in one loop over the example's features, the K classes of a feature
    (adjacent rows, row_pool.RowPool) together: the gd members' as gd.predict without
    --l1 (sum_i w_i x_i times contraction) and coin's as coin.predict, each sum taken
    over the features in their order and coin's normalised sums added class after
    class, so each is the same number as K calls of those give (adding coin's 0 where
    M' = 0 changes no sum of squares). ``sums`` (K, N_MEMBERS) and ``norms`` (K): scratch.
    With n < N_MEMBERS members mixed the state holds only their columns (the first 3 n:
    registry.state_slots), so only theirs are read; the others' predictions are the base
    and coin's running norm is not kept. ``split``: how the state holds them (split_of)."""
    n_classes = len(norms)
    prefetch_rows(state, index, lo, hi, 0)
    coin_state = coin_table.state
    alpha = coin_settings.params[coin.P_ALPHA]
    if n_classes == 1 and n == N_MEMBERS:   # one output: the sums in registers
        p0 = p1 = p2 = p3 = norm = 0.0
        for j in range(lo, hi):
            t0, t1, t2, t3, t4 = _feature_terms(state, coin_state, index[j], value[j], learning, alpha)
            p0 += t0
            p1 += t1
            p2 += t2
            p3 += t3
            norm += t4
        sums[0, 0], sums[0, 1], sums[0, 2], sums[0, 3], norms[0] = p0, p1, p2, p3, norm
    elif n == N_MEMBERS:
        sums[:, :] = 0.0
        norms[:] = 0.0
        for j in range(lo, hi):
            row = index[j]
            x = value[j]
            for c in range(n_classes):
                t0, t1, t2, t3, t4 = _feature_terms(state, coin_state, c * block_rows + row, x, learning, alpha)
                sums[c, 0] += t0
                sums[c, 1] += t1
                sums[c, 2] += t2
                sums[c, 3] += t3
                norms[c] += t4
    else:
        sums[:, :] = 0.0
        norms[:] = 0.0
        _gd_class_sums(state, index, value, lo, hi, block_rows, min(n, N_GD), sums, split, 0)
    coin_scalars = coin_table.scalars
    for c in range(n_classes):
        for k in range(N_GD):
            member[k, c] = base + sums[c, k] * scalars[k * GD_SCALAR_WIDTH + gd.CONTRACTION]
        p = sums[c, 3]
        if learning and n > N_GD:
            coin_scalars[coin.NORM_X_SUM] += h * norms[c]
            coin_scalars[coin.TOTAL_WEIGHT] += h
            p /= coin._average_norm(coin_scalars)
        member[N_GD, c] = base + p


@njit(inline="always")
def see_label(scalars, y):
    """The spread of the labels seen (not VW's clipping range, which starts at 0)."""
    if scalars[SEEN] == 0.0:
        scalars[LOW] = y
        scalars[HIGH] = y
    elif y < scalars[LOW]:
        scalars[LOW] = y
    elif y > scalars[HIGH]:
        scalars[HIGH] = y
    scalars[SEEN] += 1.0


@njit(inline="always")
def mixing_rate(settings, scalars):
    """eta of the exponential weights by the model's own loss (P_LOSS) and the labels' spread."""
    return rate_of(np.int64(settings.params[P_LOSS]), settings.classes, scalars[HIGH] - scalars[LOW])


@njit(inline="always")
def rate_of(loss, classes, width):
    """eta (module docstring) for the model's own loss, K ``classes`` (0: one output) and the
    labels' spread R = ``width``: 1 for multiclass and the logistic loss, 1/(2 R^2) for the
    squared loss, 1/R for the others (0 while R = 0). mixture_v1's rule too."""
    if classes > 0 or loss == LOGISTIC:
        return 1.0
    if not width > 0.0:
        return 0.0
    if loss == SQUARED:
        return 1.0 / (2.0 * width * width)
    return 1.0 / width


@njit(inline="always")
def mixture_weights(scalars, rate, out, n):
    """out[k] = q_k exp(-rate L_k) / sum_j q_j exp(-rate L_j) over the n members mixed
    (j < n), q the PRIOR, computed from the smallest of their L; 0 for the others."""
    low = scalars[LOSSES]
    for k in range(1, n):
        low = min(low, scalars[LOSSES + k])
    total = 0.0
    for k in range(n):
        out[k] = PRIOR[k] * math.exp(-rate * (scalars[LOSSES + k] - low))
        total += out[k]
    for k in range(n):
        out[k] /= total
    for k in range(n, N_MEMBERS):
        out[k] = 0.0


@njit(inline="always")
def counts_loss(holdout, learn, held_out, learning, h, y):
    """Whether the example's losses enter the members' cumulative losses L_k: only
    an example no member has learned yet (module docstring, "Which losses count").
    In the first pass (holdout[H_ROWS] unset) every example learned from and every
    held-out one; in a later pass with holdout (H_ROWS set) only the held-out ones,
    as the ones learned from were learned in the passes before."""
    if not learn or np.isnan(y) or not h > 0.0:
        return False
    if held_out:
        return True
    return learning and holdout[H_ROWS] == 0.0


@njit(inline="always")
def _learn_member(update, member_table, member_settings, settings, index, value, lo, hi, offset, p, y, h):
    """A member learns from its own clipped prediction p, as alone."""
    derivative = loss_derivative(settings.loss, p, y, settings.tau)
    update(member_table, member_settings, index, value, lo, hi, offset, p, y, h, h * derivative)


@njit(inline="always")
def _run_binary(table, settings, batch, tally, predictions):
    """driver.run_binary for the mixture (the same bookkeeping, from driver's helpers;
    a change there must be made here too: tests/test_mixture.py compares the two). The
    loop is compiled twice: for the four members with their count a constant (the loops
    over the members unrolled: one output's examples are short, and the runtime count
    cost the click log 3-4% of learning), and for fewer."""
    n = mixed(settings)
    if n == N_MEMBERS:
        return _binary_loop(table, settings, batch, tally, predictions, N_MEMBERS)
    return _binary_loop(table, settings, batch, tally, predictions, n)


@njit(inline="always")
def _binary_loop(table, settings, batch, tally, predictions, n):
    """_run_binary's loop for n members mixed."""
    t_coin, s_coin = _coin_member(table, settings)
    counters, scalars, state = table.counters, table.scalars, table.state
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    learn = settings.learn
    index, value = batch.index, batch.value
    n_gd = min(n, N_GD)
    etas, power_t, initial_t = _gd_rates(settings, n_gd)
    # The loop's own arrays, as borrowed views (engine/borrowed.py): passed to a function
    # at every example, each had its references counted there (~5% of the loop's time).
    # ``owners`` holds them to the loop's end.
    member_owner = np.empty(N_MEMBERS)
    work_owner, active_owner, rates_owner, stamps_owner = _update_buffers(batch, n_gd)
    owners = (member_owner, member_owner.reshape((N_MEMBERS, 1)), np.empty((1, N_MEMBERS)), np.empty(1),
              np.empty(N_MEMBERS), etas, work_owner, active_owner, rates_owner, stamps_owner, s_coin.params)
    member, one_output, sums, norms = borrowed(owners[0]), borrowed(owners[1]), borrowed(owners[2]), borrowed(owners[3])
    pi, etas, work, active = borrowed(owners[4]), borrowed(owners[5]), borrowed(owners[6]), borrowed(owners[7])
    rates, stamps = borrowed(owners[8]), borrowed(owners[9])
    s_coin = _member_settings(settings, borrowed(owners[10]))
    n_rows = np.int64(0)
    for e in range(len(batch.labels)):
        lo = batch.row_ptr[e]
        hi = batch.row_ptr[e + 1]
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learning = start_example(holdout, learn, h, y)
        if learn and not np.isnan(y):
            widen_label_range(counters, settings, y)
            see_label(scalars, y)
        base = batch.base[e]
        predict_classes(state, scalars, t_coin, s_coin, index, value, lo, hi, 0, learning, h, base, sums, norms,
                        one_output, n, 1)
        finite = True
        for k in range(N_MEMBERS):
            finite = finite and np.isfinite(member[k])
        if not finite:
            predictions[e] = np.nan
            stats[S_DIVERGED] = e + 1
            return n_rows
        mixture_weights(scalars, mixing_rate(settings, scalars), pi, n)
        low, high = clip_range(counters, settings)
        p = 0.0
        for k in range(N_MEMBERS):
            member[k] = clip_to(member[k], low, high)
        for k in range(n):
            p += pi[k] * member[k]
        p = clip_to(p, low, high)
        predictions[e] = p
        labeled = account_binary(tally, counters, settings, held_out, batch.feature_count[e], y, h, p)
        if counts_loss(holdout, learn, held_out, learning, h, y):
            for k in range(n):
                scalars[LOSSES + k] += h * loss_value(settings.loss, member[k], y, settings.tau)
        if labeled and learning:
            gd.update_learners(state, scalars, etas, power_t, initial_t, settings.loss, settings.tau, index, value,
                               lo, hi, one_output, y, h, work, active, rates, stamps, e + 1)
            if n > N_GD:
                _learn_member(coin.update, t_coin, s_coin, settings, index, value, lo, hi, 0, member[3], y, h)
            counters[C_ROUNDS] += 1.0
        n_rows = progress_row(progress, n_rows, stats, holdout, y, p, batch.feature_count[e])
    release(owners)
    return n_rows


@njit(inline="always")
def _class_error(scores, label):
    """The 0/1 error of scores for the label: 1 unless the label's class has the
    highest score (the first of equal ones, as the prediction), the loss VW's --oaa
    prints and the multiclass weights are chosen by."""
    best = 0
    for c in range(1, len(scores)):
        if scores[c] > scores[best]:
            best = c
    return 0.0 if best == label else 1.0


@njit(inline="always")
def _member_class_gradients(k, count, settings, scores, label, h, log_probs, g, scalars):
    """Member k's class gradients g from its own scores, as in multiclass.run_multiclass;
    with ``count``, its 0/1 error is added to its L_k. The log probabilities only for
    --softmax, whose gradients are made of them (one against all takes each class's
    binary loss derivative)."""
    if settings.softmax:
        log_probabilities(scores, True, log_probs)
    if count:
        scalars[LOSSES + k] += h * _class_error(scores, label)
    class_gradients(scores, label, log_probs, settings.softmax, settings.loss, settings.tau, False, g)


@njit(inline="always")
def _learn_coin_classes(count, member_table, member_settings, settings, index, value, lo, hi, block_rows, scores,
                        label, h, log_probs, g, scalars):
    """--coin's K classes learn from its own scores (coin.update_classes: one loop over
    the features for all K)."""
    _member_class_gradients(N_GD, count, settings, scores, label, h, log_probs, g, scalars)
    for c in range(settings.classes):
        g[c] *= h   # coin.update's d = k loss'(p) of class c
    coin.update_classes(member_table, member_settings, index, value, lo, hi, block_rows, settings.classes, g)


@njit(inline="always")
def _mixed_classes(scalars, member, n, pi, scores):
    """An example's class scores, scores[c] = sum_k pi_k member[k, c] over the n members mixed
    (pi: their weights from the L_k, into ``pi``); returns the best class (the first of equal
    scores) and whether every member's score and the mixture's are finite."""
    mixture_weights(scalars, 1.0, pi, n)
    best = np.int64(0)
    for c in range(len(scores)):
        total = 0.0
        for k in range(n):
            total += pi[k] * member[k, c]
        scores[c] = total
        if scores[c] > scores[best]:
            best = c
    return best, np.all(np.isfinite(member)) and np.all(np.isfinite(scores))


@njit(inline="always")
def _run_multiclass(table, settings, batch, tally, predictions, scores):
    """multiclass.run_multiclass for the mixture."""
    t_coin, s_coin = _coin_member(table, settings)
    counters, scalars, state = table.counters, table.scalars, table.state
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    learn = settings.learn
    n_classes, block_rows = settings.classes, settings.block_rows
    index, value = batch.index, batch.value
    log_probs = np.empty(n_classes)
    g = np.empty((N_MEMBERS, n_classes))   # each member's class gradients
    member = np.empty((N_MEMBERS, n_classes))
    n = mixed(settings)
    n_gd = min(n, N_GD)
    split = split_of(settings)
    layout = split_layout(state, split, 0)
    etas, power_t, initial_t = _gd_rates(settings, n_gd)
    work, active, rates, stamps = _update_buffers(batch, n_gd * n_classes)
    sums = np.empty((n_classes, N_MEMBERS))
    norms = np.empty(n_classes)
    pi = np.empty(N_MEMBERS)
    n_rows = np.int64(0)
    for e in range(len(batch.labels)):
        lo = batch.row_ptr[e]
        hi = batch.row_ptr[e + 1]
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learning = start_example(holdout, learn, h, y)
        base = batch.base[e]
        predict_classes(state, scalars, t_coin, s_coin, index, value, lo, hi, block_rows, learning, h, base, sums,
                        norms, member, n, split)
        best, finite = _mixed_classes(scalars, member, n, pi, scores[e])
        predictions[e] = best + 1
        if not finite:
            stats[S_DIVERGED] = e + 1
            return n_rows
        label = account_multiclass(tally, counters, settings, held_out, batch.feature_count[e], y, h, scores[e], best,
                                   log_probs)
        count = counts_loss(holdout, learn, held_out, learning, h, y)
        if learning and not np.isnan(y):
            for k in range(n_gd):   # the gd members' K classes, from their own scores, in one call
                _member_class_gradients(k, count, settings, member[k], label, h, log_probs, g[k], scalars)
            gd.update_classes(state, scalars, etas, power_t, initial_t, settings.loss, settings.tau, index, value,
                              lo, hi, member, label, settings.softmax, h, g, block_rows, layout, work, active, rates,
                              stamps, e + 1)
            if n > N_GD:
                _learn_coin_classes(count, t_coin, s_coin, settings, index, value, lo, hi, block_rows, member[3],
                                    label, h, log_probs, g[N_GD], scalars)
            counters[C_ROUNDS] += 1.0
        elif count:   # a held-out example
            for k in range(n):
                scalars[LOSSES + k] += h * _class_error(member[k], label)
        n_rows = progress_row(progress, n_rows, stats, holdout, y, best + 1, batch.feature_count[e])
    return n_rows


# ---------------------------------------------------------------------------
# The members on two threads (olcli/member_threads.py). With the pool split member-major
# (split_of > 1: --oaa/--softmax, 2 or 3 gd members), a chunk's members learn in two
# parts at once, each part's members from their own class scores as in _run_multiclass,
# keeping every example's scores (``out``); then ``_finish_multiclass`` does the
# mixture's own work over the chunk in order: the weights, the class scores, the report
# and the cumulative losses L_k. Exact: a member's prediction and update read only the
# example, its own cells and scalars and whether the holdout takes the example, none of
# which depends on the mixture's weights or on another member; the weights read only the
# members' scores. So every number is the one _run_multiclass gives
# (tests/test_member_threads.py). Each member's rows are a region of the state of their
# own (split_of), so the two threads write no cache line in common (in one row, or in
# regions side by side within a feature's rows, the lines the two share cost the threads
# what they save: benchmarks/results/member_threads_s45.md).


@njit(inline="always")
def part_members(settings, part):
    """(first member, number of members) of part 0 or 1: the first ceil(S/2) members of the
    split S, then the others."""
    split = split_of(settings)
    half = (split + 1) // 2
    if part == 0:
        return np.int64(0), half
    return half, split - half


@njit(inline="always")
def _learn_part(table, settings, batch, tally, part, out):
    """The members of part ``part`` (``part_members``) through the chunk, as _run_multiclass
    learns them, from copies of the holdout and of the scalars (the loop's own are
    ``_finish_multiclass``'s to change; the part's members' scalars are written back at the
    end). out[k, e K + c]: member k's score of class c for example e. Stops before learning
    an example a member of the part scores a non-finite number for; returns its position,
    or n. The other part's members may then have learned past it: a diverged learner is
    neither saved nor served (olcli/run.py, olcli/served.py)."""
    first, count = part_members(settings, part)
    split = split_of(settings)
    holdout = tally.holdout.copy()
    own = table.scalars.copy()
    state = table.state
    layout = split_layout(state, split, first)
    learn, softmax, block_rows = settings.learn, settings.softmax, settings.block_rows
    n_classes = settings.classes
    index, value = batch.index, batch.value
    log_probs = np.empty(n_classes)
    member = np.empty((count, n_classes))
    g = np.empty((count, n_classes))
    sums = np.empty((n_classes, N_MEMBERS))
    rates_all, power_t, initial_t = _gd_rates(settings, first + count)
    etas = rates_all[first:first + count]
    own_part = own[first * GD_SCALAR_WIDTH:]
    work, active, rates, stamps = _update_buffers(batch, count * n_classes)
    n = len(batch.labels)
    stop = n
    for e in range(n):
        lo = batch.row_ptr[e]
        hi = batch.row_ptr[e + 1]
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learning = start_example(holdout, learn, h, y)
        base = batch.base[e]
        sums[:, :] = 0.0
        _gd_class_sums(state, index, value, lo, hi, block_rows, first + count, sums, split, first)
        finite = True
        for k in range(count):
            contraction = own[(first + k) * GD_SCALAR_WIDTH + gd.CONTRACTION]
            for c in range(n_classes):
                score = base + sums[c, first + k] * contraction
                member[k, c] = score
                out[first + k, e * n_classes + c] = score
                finite = finite and np.isfinite(score)
        if not finite:
            stop = e
            break
        if learning and not np.isnan(y):
            label = np.int64(int(y) - 1)
            for k in range(count):
                _member_class_gradients(first + k, False, settings, member[k], label, h, log_probs, g[k], own)
            gd.update_classes(state, own_part, etas, power_t, initial_t, settings.loss, settings.tau, index, value,
                              lo, hi, member, label, softmax, h, g, block_rows, layout, work, active, rates, stamps,
                              e + 1)
    scalars = table.scalars
    for i in range(first * GD_SCALAR_WIDTH, (first + count) * GD_SCALAR_WIDTH):
        scalars[i] = own[i]
    return stop


@njit(inline="always")
def _finish_multiclass(table, settings, batch, tally, predictions, scores, out, stop):
    """_run_multiclass's own work over the chunk, given every member's class scores in
    ``out`` (``_learn_part``), up to example ``stop`` (a member's first non-finite score)."""
    counters, scalars = table.counters, table.scalars
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    learn = settings.learn
    n_classes = settings.classes
    log_probs = np.empty(n_classes)
    member = np.empty((N_MEMBERS, n_classes))
    pi = np.empty(N_MEMBERS)
    n = mixed(settings)
    n_rows = np.int64(0)
    for e in range(len(batch.labels)):
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learning = start_example(holdout, learn, h, y)
        base = batch.base[e]
        for k in range(N_MEMBERS):   # the members not mixed: the base, as predict_classes gives them
            for c in range(n_classes):
                member[k, c] = out[k, e * n_classes + c] if k < n else base
        best, finite = _mixed_classes(scalars, member, n, pi, scores[e])
        predictions[e] = best + 1
        if e == stop or not finite:
            stats[S_DIVERGED] = e + 1
            return n_rows
        label = account_multiclass(tally, counters, settings, held_out, batch.feature_count[e], y, h, scores[e], best,
                                   log_probs)
        if counts_loss(holdout, learn, held_out, learning, h, y):
            for k in range(n):
                scalars[LOSSES + k] += h * _class_error(member[k], label)
        if learning and not np.isnan(y):
            counters[C_ROUNDS] += 1.0
        n_rows = progress_row(progress, n_rows, stats, holdout, y, best + 1, batch.feature_count[e])
    return n_rows


@njit(inline="always")
def _weights(table, settings, rows):
    """sum_k pi_k w_k for each row (the members' weight() as they report it)."""
    t_g0, s_g0, t_g1, s_g1, t_g2, s_g2, t_coin, s_coin = _members(table, settings)
    pi = np.empty(N_MEMBERS)
    mixture_weights(table.scalars, mixing_rate(settings, table.scalars), pi, mixed(settings))
    out = np.empty(len(rows))
    n = mixed(settings)   # the state holds the columns of these members only
    split = split_of(settings)
    if split > 1:   # member k's row of pool row i: k R + i (split_of)
        region = table.state.shape[0] // split
        v_g0 = Table(table.state, table.counters, table.scalars[0:4])
        v_g1 = Table(table.state, table.counters, table.scalars[4:8])
        v_g2 = Table(table.state, table.counters, table.scalars[8:12])
        for r in range(len(rows)):
            i = rows[r]
            w = pi[0] * gd.weight(v_g0, s_g0, i)
            w += pi[1] * gd.weight(v_g1, s_g1, i + region)
            if n > 2:
                w += pi[2] * gd.weight(v_g2, s_g2, i + 2 * region)
            out[r] = w
        return out
    for r in range(len(rows)):
        i = rows[r]
        w = pi[0] * gd.weight(t_g0, s_g0, i)
        if n > 1:
            w += pi[1] * gd.weight(t_g1, s_g1, i)
        if n > 2:
            w += pi[2] * gd.weight(t_g2, s_g2, i)
        if n > 3:
            w += pi[3] * coin.weight(t_coin, s_coin, i)
        out[r] = w
    return out


@njit
def weight(table, settings, i):
    """Row i's weight, sum_k pi_k w_k (weights_at does the same for many rows)."""
    return _weights(table, settings, np.array([i], dtype=np.int64))[0]


# Entry points, compiled and cached for this algorithm. The mixture has no
# predict/update kernels for driver.run_binary: its members learn from their own
# predictions, which the driver's one-prediction loop does not carry, so its
# loops are _run_binary and _run_multiclass above (from driver's helpers).

@njit(cache=True, nogil=True)
def run_chunk(table, settings, batch, tally, predictions):
    return _run_binary(lend_table(table), lend_settings(settings), lend_batch(batch), lend_tally(tally),
                       borrowed(predictions))


@njit(cache=True, nogil=True)
def run_chunk_multiclass(table, settings, batch, tally, predictions, scores):
    return _run_multiclass(lend_table(table), lend_settings(settings), lend_batch(batch), lend_tally(tally),
                           borrowed(predictions), borrowed(scores))


@njit(cache=True, nogil=True)
def learn_part(table, settings, batch, tally, part, out):
    """``_learn_part``: one part of the members through a multiclass chunk (olcli/member_threads.py)."""
    return _learn_part(lend_table(table), lend_settings(settings), lend_batch(batch), lend_tally(tally), part,
                       borrowed(out))


@njit(cache=True, nogil=True)
def finish_chunk_multiclass(table, settings, batch, tally, predictions, scores, out, stop):
    """``_finish_multiclass``: the mixture's work over a chunk its parts learned."""
    return _finish_multiclass(lend_table(table), lend_settings(settings), lend_batch(batch), lend_tally(tally),
                              borrowed(predictions), borrowed(scores), borrowed(out), stop)


@njit(cache=True)
def weights_at(table, settings, rows):
    return _weights(table, settings, rows)


# ---------------------------------------------------------------------------
# Merging learners trained on separate shards (plain NumPy, not compiled).

def _slices():
    """(member module, its columns, its scalars), in MEMBERS order."""
    return tuple((coin if name == "coin" else gd, slice(*MEMBER_COLUMNS[name]), slice(*MEMBER_SCALARS[name]))
                 for name in MEMBERS)


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights, base_scalars=None, shard_scalars=None):
    """Combine mixtures that all started from ``base``: each member's columns by
    that member's own ``merge`` rule (gd.merge at its own rate, coin.merge, with
    their own parameters and scalars). Arguments and result as those; the
    mixture's scalars come from ``merge_scalars``."""
    base_scalars, shard_scalars = _scalars_or_initial(params, base_scalars, shard_scalars, len(shards))
    out = np.array(base, dtype=np.float64, copy=True)
    mixed = int(np.asarray(params)[P_MEMBERS])   # the state holds these members' columns
    for (module, columns, scalar_slice), member in list(zip(_slices(), member_params(params)))[:mixed]:
        out[:, columns] = module.merge(base[:, columns], [s[:, columns] for s in shards], member, base_rounds,
                                       shard_rounds, shard_weights, base_scalars=base_scalars[scalar_slice],
                                       shard_scalars=[s[scalar_slice] for s in shard_scalars])
    return out


def merge_scalars(base_scalars, shard_scalars, params, base_rounds, shard_rounds, shard_weights):
    """Each member's scalars by its own ``merge_scalars``; each member's
    cumulative loss is the base's plus every shard's increment (the loss it
    incurred on the union of the shards' examples, each learned from where it was),
    so the merged mixture weights are those of the members' total losses."""
    base_scalars, shard_scalars = _scalars_or_initial(params, base_scalars, shard_scalars, len(shard_rounds))
    out = np.array(base_scalars, dtype=np.float64, copy=True)
    for (module, _, scalar_slice), member in zip(_slices(), member_params(params)):
        out[scalar_slice] = module.merge_scalars(base_scalars[scalar_slice], [s[scalar_slice] for s in shard_scalars],
                                                 member, base_rounds, shard_rounds, shard_weights)
    if len(shard_scalars) == 1:
        out[LOSSES:] = shard_scalars[0][LOSSES:]
        return out
    if sum(r > base_rounds for r in shard_rounds) == 1:
        out[LOSSES:] = shard_scalars[[r > base_rounds for r in shard_rounds].index(True)][LOSSES:]
        return out
    active = [k for k, r in enumerate(shard_rounds) if r > base_rounds]
    losses = slice(LOSSES, LOSSES + N_MEMBERS)
    out[losses] = base_scalars[losses] + sum((shard_scalars[k][losses] - base_scalars[losses] for k in active),
                                             np.zeros(N_MEMBERS))
    seen = [s for s in [base_scalars] + [shard_scalars[k] for k in active] if s[SEEN] > 0]
    out[SEEN] = base_scalars[SEEN] + sum(shard_scalars[k][SEEN] - base_scalars[SEEN] for k in active)
    if seen:
        out[LOW], out[HIGH] = min(s[LOW] for s in seen), max(s[HIGH] for s in seen)
    return out


def pass_scalars(base_scalars, merged_scalars, shards_learned, first_pass):
    """The scalars after a pass learned on ``shards_learned`` shards and merged
    (olcli/shard_tasks.py ``finish_pass``; ``merged_scalars`` from ``merge_scalars``,
    the pass's start ``base_scalars``). After the run's first pass on K >= 2
    shards each member's cumulative loss adds the shards' mean increment,

        L_k = base L_k + (1/K) sum over the shards s of (L_k,s - base L_k),

    and after a later pass, or on one shard, the merged sum (base plus every
    shard's increment) as it is; the members' own scalars and the labels seen
    as merged. Why: in the first pass every shard's copy starts from the same
    learner and learns 1/K of the data, so the K shards' losses are K runs of
    the start of one learning curve, not one run over all the data as on one
    machine, and their sum weighs that start K times. It favours the member
    that starts fastest: on covtype with 4 shards the sum ranked --gd -l 0.5
    first (L 9535; -l 3 9611, -l 10 10891; one machine ranks -l 3 first, 9024
    against 9141) and kept all the weight on it for 3 passes although merged
    -l 3 and -l 10 predicted the test part better (0.5292 and 0.5189 against
    0.5537; benchmarks/results/scale_out_s38.md). With the mean, pass 1 counts
    as one learning curve, and the later passes' held-out losses (with holdout
    only held-out examples add losses, ``counts_loss``; examples no member,
    merged or not, has learned) are summed over the shards as one machine
    sums them. Not done inside ``merge_scalars``, which must stay associative
    for the merge tree (the pairwise merges share the pass's base)."""
    out = np.array(merged_scalars, dtype=np.float64, copy=True)
    if first_pass and shards_learned >= 2:
        losses = slice(LOSSES, LOSSES + N_MEMBERS)
        base = np.asarray(base_scalars, dtype=np.float64)[losses]
        out[losses] = base + (out[losses] - base) / shards_learned
    return out


def initial_scalars(params):
    p = np.asarray(params, dtype=np.float64)
    gd_start = [p[P_INITIAL_T], p[P_INITIAL_T], 0.0, 1.0] * N_GD
    return np.array(gd_start + [0.0, 0.0] + [0.0] * N_MEMBERS + [0.0, 0.0, 0.0])


def _scalars_or_initial(params, base_scalars, shard_scalars, count):
    initial = initial_scalars(params)
    base_scalars = initial if base_scalars is None else np.asarray(base_scalars, dtype=np.float64)
    shard_scalars = [initial if sc is None else np.asarray(sc, dtype=np.float64)
                     for sc in (shard_scalars or [None] * count)]
    return base_scalars, shard_scalars
