"""The scores of one contextual-bandit event's action lines in one kernel call (``olcli serve``'s rank).

``CbExploreAdf.scores`` (olcli/cb.py) parses an event's K action lines (each action's features with
the shared ones, as ``action_lines`` writes them) through ``Learner.to_batch`` and takes the dot
products with the weights in numpy: a handful of Python and Numba calls, ~0.1 ms at a served event's
size, around well under 10 µs of arithmetic. Here one call does what ``engine/single.py`` does for a
plain model's lines, with two differences: the scores are the raw linear scores (the model's
prediction range opened to (−∞, ∞), as ``CbExploreAdf.scores`` does when the kernel scores
interactions), left in a buffer for the caller, not written as text; and the parsed lines are kept
as the parser hashed them (``rows``, ``hashed``, ``values``, ``counts``: row pointers, hashed
indices, values, VW's feature counts), so that the reward of the action played learns its parsed
line (``CbLearner.learn_parsed``) instead of parsing it again. The parser (``parse.parse_into``)
and the example loop (the algorithm's ``run_chunk``, learn off, into a scratch tally) are the batch
path's own kernels; the entry's arguments are the request's bytes, the address of the arrays'
descriptors (``single.descriptors``) and two None-or-True flags, so that the entries are compiled
ahead of time like the others (olcli/aot/aot_signatures.json).

A line the parser refuses, a diverged score, or more parsed features than the buffers hold return a
code below 0: the caller uses ``CbExploreAdf.scores``, which names the problem.

The same call also learns one kept line (``EventScorer.learn``: the reward of the action played, ``job``'s
mode LEARN): the line's hashed indices to the pool's rows (``pool_index``; a feature without its row yet
returns NEW_FEATURES before anything is written, and the caller's own path, ``Learner.process``, gives it
one), then the algorithm's ``run_chunk`` with learning on, the learner's own settings and tally: what
``Learner.process`` does for that one-line batch, without a dozen Python and NumPy steps around it. One
entry for both keeps the build at one compiled function per algorithm (the ``run_chunk`` they call is the
same compiled callee: ``learn`` is a run-time bool).
"""

import numpy as np

from olcli.engine import jit
from olcli.engine.jit import intrinsic, njit, types
from olcli.engine import adagrad, adagrad_dual, coin, ftrl, gd, mixture, scinol1, scinol2, sgd
from olcli.engine.parse import MAX_EXAMPLE_FEATURES, parse_buffers, parse_into
from olcli.engine.records import S_DIVERGED, Batch, Settings, Table, Tally
from olcli.engine.single import (K_BLOCK_ROWS, K_CLIP, K_CONSTANT, K_LABEL_KIND, K_LOSS, K_MASK, K_TAU, N_CONFIG,
                                 SPEC_DTYPES, descriptors)

BAD_LINES = -1
DIVERGED = -2
TOO_LARGE = -3
NEW_FEATURES = -4

# ``job``: what a call does (MODE_SCORE: parse and score ``data``; MODE_LEARN: learn the line in ``hashed``
# and ``values``' first JOB_FEATURES entries with this label, importance weight, VW feature count and
# clipping range (the model's --min/--max-prediction, NaN: the label range seen)).
JOB_MODE, JOB_LABEL, JOB_WEIGHT, JOB_COUNT, JOB_FEATURES, JOB_MIN, JOB_MAX = range(7)
N_JOB = 7
MODE_SCORE, MODE_LEARN = 0.0, 1.0

# The arrays an entry reads (``olcli.aot.value_key``'s names; ``{spec}`` as in engine/single.py): the
# model's state, counters and scalars, the settings' params, ``config``, the feature spec, interactions
# and their lengths, a scratch tally (stats, auc, progress, holdout), the parser's buffers, the
# scores, the pool's index, the parsed lines kept for learning (rows, hashed, values, counts), ``job``
# and the learner's own tally (stats, auc, progress, holdout: what learning counts into).
ARRAYS_KEY = ("t(a(<f8,2,C,w),a(<f8,1,C,w),a(<f8,1,C,w),a(<f8,1,C,w),a(<f8,1,C,w),a({spec},1,C,w),"
              "a(<i8,2,C,w),a(<i8,1,C,w),a(<f8,1,C,w),a(<f8,2,C,w),a(<f8,2,C,w),a(<f8,1,C,w),"
              "t(a(<f8,1,C,w),a(<f8,1,C,w),a(<f8,1,C,w),a(<i8,2,C,w),a(<i8,1,C,w),a(<i8,1,C,w),a(<i4,1,C,w),"
              "a(<f8,1,C,w),a(|u1,1,C,w),a(<i8,2,C,w),a(<i8,1,C,w),a(<i8,2,C,w),a(<u8,1,C,w),a(<i8,1,C,w),"
              "a(<i8,1,C,w)),a(<f8,1,C,w),a(<i4,1,C,w),a(<i8,1,C,w),a(<i4,1,C,w),a(<f8,1,C,w),a(<i8,1,C,w),"
              "a(<f8,1,C,w),a(<f8,1,C,w),a(<f8,2,C,w),a(<f8,2,C,w),a(<f8,1,C,w))")


@intrinsic
def _arrays_at(typingctx, address_type, narrow_type):
    """The tuple of arrays whose descriptors are at ``address``, typed as ``ARRAYS_KEY`` says:
    views without owners (engine/single.py's ``_arrays_at``, for this tuple)."""
    from olcli.aot.keys import key_type

    narrow = None if isinstance(narrow_type, types.NoneType) else True
    arrays_type = key_type(ARRAYS_KEY.format(spec=SPEC_DTYPES[narrow]))

    def codegen(cgctx, builder, signature, args):
        pointer = builder.inttoptr(args[0], cgctx.get_value_type(arrays_type).as_pointer())
        return builder.load(pointer)

    return arrays_type(address_type, narrow_type), codegen


@njit(inline="always")
def _learn_line(run_chunk, table, params, config, job, buffers, scores, pool_index, hashed, values, tally):
    """Learn the line of ``job[JOB_FEATURES]`` hashed indices and values in ``hashed``/``values`` (module
    docstring): 1, DIVERGED (the learner's divergence flag read and cleared, as ``Learner.process``) or
    NEW_FEATURES (an index without its pool row; nothing written)."""
    labels, importance, base, row_ptr = buffers[0], buffers[1], buffers[2], buffers[5]   # parse_buffers' order
    index, value, feature_count = buffers[6], buffers[7], buffers[10]
    m = np.int64(job[JOB_FEATURES])
    if m > len(index) or len(labels) < 1:
        return np.int64(TOO_LARGE)
    for j in range(m):
        row = pool_index[hashed[j]]
        if row == 0:   # a group is handed out by learning only (Learner.process: row_pool.RowPool.rows_for)
            return np.int64(NEW_FEATURES)
        index[j] = row
        value[j] = values[j]
    labels[0] = job[JOB_LABEL]
    importance[0] = job[JOB_WEIGHT]
    base[0] = 0.0
    row_ptr[0] = 0
    row_ptr[1] = m
    feature_count[0] = np.int64(job[JOB_COUNT])
    learn = job[JOB_MODE] == MODE_LEARN   # True, typed as a run-time bool (as the scoring's False)
    settings = Settings(params, np.int64(config[K_LOSS]), config[K_TAU], config[K_CLIP] != 0.0, learn,
                        np.int64(config[K_BLOCK_ROWS]), np.int64(0), False, job[JOB_MIN], job[JOB_MAX])
    batch = Batch(labels[:1], importance[:1], base[:1], row_ptr[:2], index, value, feature_count[:1])
    run_chunk(table, settings, batch, tally, scores[:1])
    if tally.stats[S_DIVERGED] != 0.0:
        tally.stats[S_DIVERGED] = 0.0
        return np.int64(DIVERGED)
    return np.int64(1)


@njit(inline="always")
def _scores(run_chunk, data, address, interacting, narrow):
    """Parse ``data`` (the event's action lines, each ending in '\\n'), keep the parsed lines (row
    pointers, hashed indices, values, feature counts), score every line without learning and with
    the prediction range open; returns the number of lines scored (their scores in ``scores``), or
    BAD_LINES / DIVERGED / TOO_LARGE. With ``job``'s mode LEARN: ``_learn_line`` (``data`` unread)."""
    (state, counters, scalars, params, config, namespace_mode, interactions, lengths, stats, auc, progress,
     holdout, buffers, scores, pool_index, rows, hashed, values, counts, job, learner_stats, learner_auc,
     learner_progress, learner_holdout) = _arrays_at(address, narrow)
    if job[JOB_MODE] == MODE_LEARN:
        return _learn_line(run_chunk, Table(state, counters, scalars), params, config, job, buffers, scores,
                           pool_index, hashed, values,
                           Tally(learner_stats, learner_auc, learner_progress, learner_holdout))
    buf = np.frombuffer(data, np.uint8)
    (n, labels, importance, base, tags, example_line, row_ptr, index, value, feature_count, n_errors, errors,
     n_lines, names, consumed) = parse_into(buf, np.int64(config[K_MASK]), np.int64(config[K_CONSTANT]),
                                            np.int64(config[K_LABEL_KIND]), namespace_mode, interactions, lengths,
                                            float(MAX_EXAMPLE_FEATURES), buffers, None, interacting)
    if n_errors > 0:
        return np.int64(BAD_LINES)
    used = row_ptr[n]
    if n > len(scores) or n + 1 > len(rows) or used > len(hashed):
        return np.int64(TOO_LARGE)
    for e in range(n + 1):
        rows[e] = row_ptr[e]
    for e in range(n):
        counts[e] = feature_count[e]
    for j in range(used):   # kept as hashed, then hashed indices -> the pool's rows (never touched: the template's)
        hashed[j] = index[j]
        values[j] = value[j]
        index[j] = pool_index[index[j]]
    learn = n < 0  # False, typed as a run-time bool (as the batch path's Settings)
    settings = Settings(params, np.int64(config[K_LOSS]), config[K_TAU], config[K_CLIP] != 0.0, learn,
                        np.int64(config[K_BLOCK_ROWS]), np.int64(0), False, -np.inf, np.inf)
    batch = Batch(labels[:n], importance[:n], base[:n], row_ptr[:n + 1], index, value, feature_count[:n])
    run_chunk(Table(state, counters, scalars), settings, batch, Tally(stats, auc, progress, holdout), scores[:n])
    if stats[S_DIVERGED] != 0.0:
        stats[S_DIVERGED] = 0.0
        return np.int64(DIVERGED)
    return np.int64(n)


# One cached entry per algorithm (the dispatchers must be named in the entry for it to be cached).
@njit(cache=True)
def scores_adagrad(data, address, interacting, narrow):
    return _scores(adagrad.run_chunk, data, address, interacting, narrow)


@njit(cache=True)
def scores_adagrad_dual(data, address, interacting, narrow):
    return _scores(adagrad_dual.run_chunk, data, address, interacting, narrow)


@njit(cache=True)
def scores_ftrl(data, address, interacting, narrow):
    return _scores(ftrl.run_chunk, data, address, interacting, narrow)


@njit(cache=True)
def scores_scinol1(data, address, interacting, narrow):
    return _scores(scinol1.run_chunk, data, address, interacting, narrow)


@njit(cache=True)
def scores_scinol2(data, address, interacting, narrow):
    return _scores(scinol2.run_chunk, data, address, interacting, narrow)


@njit(cache=True)
def scores_sgd(data, address, interacting, narrow):
    return _scores(sgd.run_chunk, data, address, interacting, narrow)


@njit(cache=True)
def scores_gd(data, address, interacting, narrow):
    return _scores(gd.run_chunk, data, address, interacting, narrow)


@njit(cache=True)
def scores_coin(data, address, interacting, narrow):
    return _scores(coin.run_chunk, data, address, interacting, narrow)


@njit(cache=True)
def scores_mix(data, address, interacting, narrow):
    return _scores(mixture.run_chunk, data, address, interacting, narrow)


ENTRIES = {"adagrad": scores_adagrad, "adagrad-dual": scores_adagrad_dual, "ftrl": scores_ftrl,
           "scinol1": scores_scinol1, "scinol2": scores_scinol2, "sgd": scores_sgd, "gd": scores_gd,
           "coin": scores_coin, "mix": scores_mix}


class EventScorer:
    """The raw scores of an event's action lines in one kernel call, and those lines as parsed (see the
    module's docstring). The model's arrays are read in place: learning between calls (on the same
    thread) is seen by the next call; when learning replaced an array (the pool grew) the descriptors
    are taken again. Not for concurrent use (one set of buffers)."""

    def __init__(self, learner):
        from olcli.engine.records import new_tally

        self.learner = learner
        model = learner.model
        self._entry = ENTRIES[model.algorithm]
        settings = learner.settings(False)
        config = np.zeros(N_CONFIG)
        config[K_LOSS] = settings.loss
        config[K_TAU] = settings.tau
        config[K_CLIP] = settings.clip
        config[K_BLOCK_ROWS] = settings.block_rows
        config[K_MASK] = (1 << model.bits) - 1
        config[K_CONSTANT] = (1 << model.bits) if model.constant else -1
        config[K_LABEL_KIND] = learner.label_kind
        self._config, self._params = config, settings.params
        features = learner.feature_spec
        spec = features.namespace_mode
        narrow = spec.astype(np.int8)
        if np.array_equal(narrow.astype(spec.dtype), spec):
            spec = narrow
        self._spec, self._interactions, self._lengths = spec, features.interactions, features.lengths
        self._interacting = True if len(features.lengths) else None
        self._narrow = True if spec.dtype == np.int8 else None
        tally = new_tally()   # the ranking is not counted in the learner's progress
        self._tally = (tally.stats, tally.auc, tally.progress, tally.holdout)
        self._job = np.zeros(N_JOB)
        self._capacity = 0
        self._model_arrays = None
        self._grow(1 << 12)

    @staticmethod
    def supports(learner) -> bool:
        """Whether this path can score the learner's events: an algorithm with an entry here, one
        output (squared loss, as a CB learner's), VW text input."""
        model = learner.model
        return model.algorithm in ENTRIES and model.input_format == "vw" and not model.classes

    def score(self, data: bytes) -> int:
        """Score ``data`` (bytes of whole lines): the number of lines, their scores in ``scores[:n]``
        and the parsed lines in ``rows``, ``hashed``, ``values`` and ``counts``; or a code below 0 (the
        caller's own path says what went wrong)."""
        self._check()
        if len(data) > self._capacity:
            self._grow(len(data))
        if self._call is None:
            return TOO_LARGE
        return int(self._call(data, self._address, self._interacting, self._narrow))

    def learn(self, label: float, weight: float, index, value, count: int):
        """``Learner.process(batch, True)`` of the one-line batch (``label``, importance ``weight``, base 0, the
        hashed ``index`` (int32) and ``value`` of a line as ``score`` kept it, VW's feature ``count``) in one
        call (module docstring): False when learned, True when the prediction diverged (the learner's flag
        cleared), None when nothing was learned (a feature without its pool row, or no compiled entry): the
        caller's own path learns it then. Overwrites the lines kept by the last ``score``."""
        m = len(index)
        self._check()
        if self._call is None or m > len(self.hashed):
            return None
        self.hashed[:m] = index
        self.values[:m] = value
        model = self.learner.model
        low, high = model.min_prediction, model.max_prediction
        job = self._job
        job[:] = (MODE_LEARN, label, weight, count, m, np.nan if low is None else low,
                  np.nan if high is None else high)
        try:
            done = self._call(b"", self._address, self._interacting, self._narrow)
        finally:
            job[JOB_MODE] = MODE_SCORE
        if done == NEW_FEATURES or done == TOO_LARGE:
            return None
        return done == DIVERGED

    def _check(self) -> None:
        """The descriptors taken again when the model, its pool or the learner's tally was replaced
        (learning grew the pool, a reset of the tally)."""
        model = self.learner.model
        pool = model.pool
        arrays = self._model_arrays
        if (arrays is None or arrays[0] is not pool.state or arrays[1] is not pool.index
                or arrays[2] is not model.counters or arrays[3] is not model.scalars
                or arrays[4] is not self.learner.tally):
            self._grow(self._capacity)

    def _grow(self, length: int) -> None:
        """Buffers for up to ``length`` bytes, the descriptors of every array, and the entry's compiled
        function (None when the AOT module lacks it: the caller's own path scores)."""
        model = self.learner.model
        pool = model.pool
        learned = self.learner.tally
        self._model_arrays = (pool.state, pool.index, model.counters, model.scalars, learned)
        if length != self._capacity or not hasattr(self, "_buffers"):
            self._buffers = parse_buffers(length)
            lines = len(self._buffers[0])
            features = len(self._buffers[6])
            self.scores = np.empty(lines)
            self.rows = np.empty(lines + 1, np.int64)
            self.hashed = np.empty(features, np.int32)
            self.values = np.empty(features)
            self.counts = np.empty(lines, np.int64)
            self._capacity = length
        arrays = (pool.state, model.counters, model.scalars, self._params, self._config, self._spec,
                  self._interactions, self._lengths, *self._tally, self._buffers, self.scores, pool.index,
                  self.rows, self.hashed, self.values, self.counts, self._job, learned.stats, learned.auc,
                  learned.progress, learned.holdout)
        self._arrays = arrays   # held while their descriptors are used
        self._call = None
        from olcli import aot

        if aot.value_key(arrays) != ARRAYS_KEY.format(spec=SPEC_DTYPES[self._narrow]):
            return
        self._descriptors = descriptors(arrays)
        self._address = self._descriptors.__array_interface__["data"][0]
        arguments = (b"", self._address, self._interacting, self._narrow)
        if jit.MODE == "aot":
            self._call = aot.exported(self._entry, arguments)
            return
        from numba import typeof

        self._entry(*arguments)  # load or compile it
        self._call = self._entry
        overload = self._entry.overloads.get(tuple(typeof(a) for a in arguments))
        if overload is not None and getattr(overload, "entry_point", None) is not None:
            self._call = overload.entry_point
