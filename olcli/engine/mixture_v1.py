"""The default mixture of model format 4 and before (``mix-v1``), kept so that a model
file written by it loads, predicts and continues learning exactly as it did: VW's default
learner (``--gd``), coin betting (``--coin``) and ScInOL2 (``--scinol2``) on the same hashed
features, mixed by exponential weights with the prior (0.9, 0.05, 0.05). It has no flag
(registry.LEGACY; a file of format 4 or before naming "mix" with these slots is read as it,
olcli/model.py); today's default is mixture.py, whose docstring gives the rule
(the exponentially weighted average forecaster, eta by the loss, which losses count, the
multiclass 0/1 weights), the same here with these three members: eta by the model's own loss,
the one the L_k were summed in (``settings.params[P_LOSS]``), so a test scoring with another loss
(``olcli test --loss``) changes what is reported, never the predictions. Its kernels are compiled by
Numba's JIT on first use (once per machine, then from Numba's cache), not ahead at install
(docs, "Model files": an old default model costs one compile; a fresh install stays short).

The prior: (0.9, 0.05, 0.05), measured on VW's own test cases (37 of 43 within 1.02 x VW's
reference with the uniform prior, 42 with this one; benchmarks/results/defaults_vs_vw.md).

State: ``gd.w gd.G gd.N``, then coin's six columns, then ScInOL2's four (104 bytes a row);
scalars: gd's four, coin's two, the three cumulative losses, the labels seen (how many, min,
max). Tests: tests/test_mixture_v1.py (files of sample_data/mix_v1 continue bit for bit).
"""

import math

import numpy as np
from olcli.engine.jit import njit

from olcli.engine import coin, gd, scinol2
from olcli.engine.driver import account_binary, clip_prediction, progress_row, start_example, widen_label_range
from olcli.engine.losses import loss_derivative, loss_value
from olcli.engine.mixture import rate_of
from olcli.engine.multiclass import account_multiclass, class_gradients, log_probabilities
from olcli.engine.records import C_ROUNDS, H_ROWS, S_DIVERGED, Settings, Table

MEMBERS = ("gd", "coin", "scinol2")
N_MEMBERS = 3
SLOTS = (tuple(f"gd.{s}" for s in gd.SLOTS) + tuple(f"coin.{s}" for s in coin.SLOTS)
         + tuple(f"scinol2.{s}" for s in scinol2.SLOTS))
GD_COLUMNS = (0, len(gd.SLOTS))
COIN_COLUMNS = (GD_COLUMNS[1], GD_COLUMNS[1] + len(coin.SLOTS))
SCINOL2_COLUMNS = (COIN_COLUMNS[1], COIN_COLUMNS[1] + len(scinol2.SLOTS))
PARAMS = ("eta", "power_t", "initial_t", "alpha", "beta", "epsilon")
P_ETA, P_POWER_T, P_INITIAL_T, P_ALPHA, P_BETA, P_EPSILON = range(6)
# settings.params[P_LOSS], after PARAMS: the model's own loss (mixture.P_LOSS)
P_LOSS = len(PARAMS)
# (scalar names are keys of the model header's "scalars" object: no dots, which header paths use)
SCALARS = (tuple(f"gd_{s}" for s in gd.SCALARS) + tuple(f"coin_{s}" for s in coin.SCALARS)
           + tuple(f"loss_{m}" for m in MEMBERS) + ("labels_seen", "labels_low", "labels_high"))
GD_SCALARS = (0, len(gd.SCALARS))
COIN_SCALARS = (GD_SCALARS[1], GD_SCALARS[1] + len(coin.SCALARS))
LOSSES = COIN_SCALARS[1]          # scalars[LOSSES + k]: member k's cumulative loss
SEEN, LOW, HIGH = LOSSES + 3, LOSSES + 4, LOSSES + 5   # the labels seen: how many, their min and max

# The prior weights q_k (module docstring, "The prior"): --gd, --coin, ScInOL2.
PRIOR = (0.9, 0.05, 0.05)

_GD0, _GD1 = GD_COLUMNS
_CO0, _CO1 = COIN_COLUMNS
_SC0, _SC1 = SCINOL2_COLUMNS
_GS0, _GS1 = GD_SCALARS
_CS0, _CS1 = COIN_SCALARS


def member_params(params):
    """The members' parameter arrays (gd's in gd.PARAMS order: adaptive,
    normalized and invariant on, no --l1/--l2; coin's; ScInOL2's) from the
    mixture's, in PARAMS order. Plain Python and NumPy; the kernels do the same."""
    p = np.asarray(params, dtype=np.float64)
    return (np.array([p[P_ETA], p[P_POWER_T], p[P_INITIAL_T], 1.0, 1.0, 1.0, 0.0, 0.0]),
            np.array([p[P_ALPHA], p[P_BETA]]), np.array([p[P_EPSILON]]))


@njit(inline="always")
def _member_settings(settings, params, clip):
    return Settings(params, settings.loss, settings.tau, clip, settings.learn, settings.block_rows,
                    settings.classes, settings.softmax, settings.min_prediction, settings.max_prediction)


@njit(inline="always")
def _members(table, settings):
    """Each member's Table (its columns of the state, its scalars, the model's
    counters) and Settings (its parameters; ScInOL2 clips the derivative of an
    unbounded loss as alone: settings.clip, registry unbounded_loss_clipped)."""
    p = settings.params
    gd_params = np.array([p[P_ETA], p[P_POWER_T], p[P_INITIAL_T], 1.0, 1.0, 1.0, 0.0, 0.0])
    coin_params = np.array([p[P_ALPHA], p[P_BETA]])
    scinol_params = np.array([p[P_EPSILON]])
    state, scalars, counters = table.state, table.scalars, table.counters
    return (Table(state[:, _GD0:_GD1], counters, scalars[_GS0:_GS1]),
            _member_settings(settings, gd_params, False),
            Table(state[:, _CO0:_CO1], counters, scalars[_CS0:_CS1]),
            _member_settings(settings, coin_params, False),
            Table(state[:, _SC0:_SC1], counters, scalars[_GS0:_GS0]),
            _member_settings(settings, scinol_params, settings.clip))


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
    """eta of the exponential weights by the model's own loss (P_LOSS) and the labels' spread:
    today's default's rule (mixture.rate_of)."""
    return rate_of(np.int64(settings.params[P_LOSS]), settings.classes, scalars[HIGH] - scalars[LOW])


@njit(inline="always")
def mixture_weights(scalars, rate, out):
    """out[k] = q_k exp(-rate L_k) / sum_j q_j exp(-rate L_j), q the PRIOR, computed
    from the smallest L."""
    low = scalars[LOSSES]
    for k in range(1, N_MEMBERS):
        low = min(low, scalars[LOSSES + k])
    total = 0.0
    for k in range(N_MEMBERS):
        out[k] = PRIOR[k] * math.exp(-rate * (scalars[LOSSES + k] - low))
        total += out[k]
    for k in range(N_MEMBERS):
        out[k] /= total


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
def _count_losses(scalars, settings, member, y, h):
    """Each member's loss of its own clipped prediction, added to its L_k."""
    for k in range(N_MEMBERS):
        scalars[LOSSES + k] += h * loss_value(settings.loss, member[k], y, settings.tau)


@njit(inline="always")
def _learn_member(update, member_table, member_settings, settings, index, value, lo, hi, offset, p, y, h):
    """Member k learns from its own clipped prediction p, as alone."""
    derivative = loss_derivative(settings.loss, p, y, settings.tau)
    if member_settings.clip:
        derivative = min(max(derivative, -1.0), 1.0)
    update(member_table, member_settings, index, value, lo, hi, offset, p, y, h, h * derivative)


@njit(inline="always")
def _run_binary(table, settings, batch, tally, predictions):
    """driver.run_binary for the mixture (the same bookkeeping, from driver's helpers;
    a change there must be made here too: tests/test_mixture.py compares the two)."""
    t_gd, s_gd, t_coin, s_coin, t_sc, s_sc = _members(table, settings)
    counters, scalars = table.counters, table.scalars
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    learn = settings.learn
    index, value = batch.index, batch.value
    member = np.empty(N_MEMBERS)
    pi = np.empty(N_MEMBERS)
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
        member[0] = base + gd.predict(t_gd, s_gd, index, value, lo, hi, 0, learning, h)
        member[1] = base + coin.predict(t_coin, s_coin, index, value, lo, hi, 0, learning, h)
        member[2] = base + scinol2.predict(t_sc, s_sc, index, value, lo, hi, 0, learning, h)
        if not (np.isfinite(member[0]) and np.isfinite(member[1]) and np.isfinite(member[2])):
            predictions[e] = np.nan
            stats[S_DIVERGED] = e + 1
            return n_rows
        mixture_weights(scalars, mixing_rate(settings, scalars), pi)
        p = 0.0
        for k in range(N_MEMBERS):
            member[k] = clip_prediction(member[k], counters, settings)
            p += pi[k] * member[k]
        p = clip_prediction(p, counters, settings)
        predictions[e] = p
        labeled = account_binary(tally, counters, settings, held_out, batch.feature_count[e], y, h, p)
        if counts_loss(holdout, learn, held_out, learning, h, y):
            _count_losses(scalars, settings, member, y, h)
        if labeled and learning:
            _learn_member(gd.update, t_gd, s_gd, settings, index, value, lo, hi, 0, member[0], y, h)
            _learn_member(coin.update, t_coin, s_coin, settings, index, value, lo, hi, 0, member[1], y, h)
            _learn_member(scinol2.update, t_sc, s_sc, settings, index, value, lo, hi, 0, member[2], y, h)
            counters[C_ROUNDS] += 1.0
        n_rows = progress_row(progress, n_rows, stats, holdout, y, p, batch.feature_count[e])
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
def _count_class_losses(scalars, settings, member, label, h, log_probs):
    """Each member's 0/1 error of its own scores, added to its L_k."""
    for k in range(N_MEMBERS):
        scalars[LOSSES + k] += h * _class_error(member[k], label)


@njit(inline="always")
def _learn_member_classes(k, count, update, member_table, member_settings, settings, index, value, lo, hi,
                          block_rows, scores, label, h, log_probs, g, scalars):
    """Member k's K classes learn from its own scores, as in multiclass.run_multiclass;
    with ``count``, its multiclass log loss is added to its L_k."""
    n_classes = settings.classes
    log_probabilities(scores, settings.softmax, log_probs)
    if count:
        scalars[LOSSES + k] += h * _class_error(scores, label)
    class_gradients(scores, label, log_probs, settings.softmax, settings.loss, settings.tau,
                    member_settings.clip, g)
    for c in range(n_classes):
        y_c = (1.0 if c == label else -1.0) if not settings.softmax else np.nan
        update(member_table, member_settings, index, value, lo, hi, c * block_rows, scores[c], y_c, h, h * g[c])


@njit(inline="always")
def _run_multiclass(table, settings, batch, tally, predictions, scores):
    """multiclass.run_multiclass for the mixture."""
    t_gd, s_gd, t_coin, s_coin, t_sc, s_sc = _members(table, settings)
    counters, scalars = table.counters, table.scalars
    stats, holdout, progress = tally.stats, tally.holdout, tally.progress
    learn = settings.learn
    n_classes, block_rows = settings.classes, settings.block_rows
    index, value = batch.index, batch.value
    log_probs = np.empty(n_classes)
    g = np.empty(n_classes)
    member = np.empty((N_MEMBERS, n_classes))
    pi = np.empty(N_MEMBERS)
    n_rows = np.int64(0)
    for e in range(len(batch.labels)):
        lo = batch.row_ptr[e]
        hi = batch.row_ptr[e + 1]
        y = batch.labels[e]
        h = batch.importance[e]
        held_out, learning = start_example(holdout, learn, h, y)
        base = batch.base[e]
        for c in range(n_classes):
            offset = c * block_rows
            member[0, c] = base + gd.predict(t_gd, s_gd, index, value, lo, hi, offset, learning, h)
            member[1, c] = base + coin.predict(t_coin, s_coin, index, value, lo, hi, offset, learning, h)
            member[2, c] = base + scinol2.predict(t_sc, s_sc, index, value, lo, hi, offset, learning, h)
        mixture_weights(scalars, 1.0, pi)
        best = np.int64(0)
        for c in range(n_classes):
            scores[e, c] = pi[0] * member[0, c] + pi[1] * member[1, c] + pi[2] * member[2, c]
            if scores[e, c] > scores[e, best]:
                best = c
        predictions[e] = best + 1
        if not (np.all(np.isfinite(member)) and np.all(np.isfinite(scores[e]))):
            stats[S_DIVERGED] = e + 1
            return n_rows
        label = account_multiclass(tally, counters, settings, held_out, batch.feature_count[e], y, h, scores[e], best,
                                   log_probs)
        count = counts_loss(holdout, learn, held_out, learning, h, y)
        if learning and not np.isnan(y):
            _learn_member_classes(0, count, gd.update, t_gd, s_gd, settings, index, value, lo, hi, block_rows,
                                  member[0], label, h, log_probs, g, scalars)
            _learn_member_classes(1, count, coin.update, t_coin, s_coin, settings, index, value, lo, hi,
                                  block_rows, member[1], label, h, log_probs, g, scalars)
            _learn_member_classes(2, count, scinol2.update, t_sc, s_sc, settings, index, value, lo, hi,
                                  block_rows, member[2], label, h, log_probs, g, scalars)
            counters[C_ROUNDS] += 1.0
        elif count:   # a held-out example
            _count_class_losses(scalars, settings, member, label, h, log_probs)
        n_rows = progress_row(progress, n_rows, stats, holdout, y, best + 1, batch.feature_count[e])
    return n_rows


@njit(inline="always")
def _weights(table, settings, rows):
    """sum_k pi_k w_k for each row (the members' weight() as they report it)."""
    t_gd, s_gd, t_coin, s_coin, t_sc, s_sc = _members(table, settings)
    pi = np.empty(N_MEMBERS)
    mixture_weights(table.scalars, mixing_rate(settings, table.scalars), pi)
    out = np.empty(len(rows))
    for r in range(len(rows)):
        i = rows[r]
        out[r] = (pi[0] * gd.weight(t_gd, s_gd, i) + pi[1] * coin.weight(t_coin, s_coin, i)
                  + pi[2] * scinol2.weight(t_sc, s_sc, i))
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
    return _run_binary(table, settings, batch, tally, predictions)


@njit(cache=True, nogil=True)
def run_chunk_multiclass(table, settings, batch, tally, predictions, scores):
    return _run_multiclass(table, settings, batch, tally, predictions, scores)


@njit(cache=True)
def weights_at(table, settings, rows):
    return _weights(table, settings, rows)


# ---------------------------------------------------------------------------
# Merging learners trained on separate shards (plain NumPy, not compiled).

def _slices():
    return ((gd, slice(*GD_COLUMNS), slice(*GD_SCALARS)), (coin, slice(*COIN_COLUMNS), slice(*COIN_SCALARS)),
            (scinol2, slice(*SCINOL2_COLUMNS), None))


def merge(base, shards, params, base_rounds, shard_rounds, shard_weights, base_scalars=None, shard_scalars=None):
    """Combine mixtures that all started from ``base``: each member's columns by
    that member's own ``merge`` rule (gd.merge, coin.merge, scinol2.merge, with
    their own parameters and scalars). Arguments and result as those; the
    mixture's scalars come from ``merge_scalars``."""
    base_scalars, shard_scalars = _scalars_or_initial(params, base_scalars, shard_scalars, len(shards))
    out = np.array(base, dtype=np.float64, copy=True)
    for (module, columns, scalar_slice), member in zip(_slices(), member_params(params)):
        arguments = (base[:, columns], [s[:, columns] for s in shards], member, base_rounds, shard_rounds,
                     shard_weights)
        if scalar_slice is None:
            out[:, columns] = module.merge(*arguments)
        else:
            out[:, columns] = module.merge(*arguments, base_scalars=base_scalars[scalar_slice],
                                           shard_scalars=[s[scalar_slice] for s in shard_scalars])
    return out


def merge_scalars(base_scalars, shard_scalars, params, base_rounds, shard_rounds, shard_weights):
    """gd's and coin's scalars by their own ``merge_scalars``; each member's
    cumulative loss is the base's plus every shard's increment (the loss it
    incurred on the union of the shards' examples, each learned from where it was),
    so the merged mixture weights are those of the members' total losses."""
    base_scalars, shard_scalars = _scalars_or_initial(params, base_scalars, shard_scalars, len(shard_rounds))
    out = np.array(base_scalars, dtype=np.float64, copy=True)
    for (module, _, scalar_slice), member in zip(_slices(), member_params(params)):
        if scalar_slice is not None:
            out[scalar_slice] = module.merge_scalars(base_scalars[scalar_slice],
                                                     [s[scalar_slice] for s in shard_scalars], member,
                                                     base_rounds, shard_rounds, shard_weights)
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


def initial_scalars(params):
    p = np.asarray(params, dtype=np.float64)
    return np.array([p[P_INITIAL_T], p[P_INITIAL_T], 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])


def _scalars_or_initial(params, base_scalars, shard_scalars, count):
    initial = initial_scalars(params)
    base_scalars = initial if base_scalars is None else np.asarray(base_scalars, dtype=np.float64)
    shard_scalars = [initial if sc is None else np.asarray(sc, dtype=np.float64)
                     for sc in (shard_scalars or [None] * count)]
    return base_scalars, shard_scalars
