"""A few lines in, their reply text out, in one kernel call (``olcli serve``'s single-example path).

``Learner.predict``/``olcli serve``'s batch path make several calls per request: the parser
(whose result arrays are boxed into Python objects), the algorithm's ``run_chunk`` (its
arguments are NamedTuples, typed by Numba in Python on every call) and the formatter. For a
batch of thousands of lines that is nothing; for one line it is ~30 µs of Python and Numba
dispatch around well under a microsecond of arithmetic. Here one call parses the lines with
the parser's own chunk kernel (``parse._PARSERS``), predicts them with the algorithm's own
``run_chunk``/``run_chunk_multiclass`` (learn off) and writes the reply text with the same
``format_predictions``, into a buffer allocated once: the batch path's kernels, called from
inside one kernel. Its arguments are plain arrays (the records are built inside), so
dispatch is ~1 µs. The predictions are therefore those of the batch path, computed by the
same code; the link (``identity``/``logistic``) is the only arithmetic added, written as
``learner.logistic`` is (other links are left to the batch path).

Anything the fast path does not do (a bad line, a diverged prediction, multiclass
probabilities, learning, an algorithm without an entry here) is left to the batch path:
``LinePredictor.reply`` returns None and the caller uses it.

Numba caches a module-level entry point that names the kernels it calls; closures over
them and kernels passed in from Python are not cached. Hence one written-out entry per
algorithm (an algorithm missing from ``ENTRIES`` simply has no fast path).
"""

import math

import numpy as np
from numba import njit, typeof

from olcli.engine import adagrad, adagrad_dual, coin, ftrl, gd, mixture, scinol1, scinol2, sgd
from olcli.engine.format import format_predictions
from olcli.engine.parse import _PARSERS, MAX_EXAMPLE_FEATURES
from olcli.engine.records import S_DIVERGED, Batch, Settings, Table, Tally

_PARSE_VW = _PARSERS[False, False]
_PARSE_VW_INTERACTING = _PARSERS[False, True]
_PARSE_LIBSVM = _PARSERS[True, False]
_PARSE_LIBSVM_INTERACTING = _PARSERS[True, True]

# The float64 ``config`` array: everything of Settings and the parser that is a number.
(K_LOSS, K_TAU, K_CLIP, K_BLOCK_ROWS, K_CLASSES, K_SOFTMAX, K_MIN_PREDICTION, K_MAX_PREDICTION,
 K_LIBSVM, K_MASK, K_CONSTANT, K_LABEL_KIND, K_LOGISTIC_LINK, K_FIRST_CLASS) = range(14)
N_CONFIG = 14

# Return codes below 0: leave these lines to the batch path.
BAD_LINES = -1
DIVERGED = -2


@njit(inline="always")
def _parse(buf, config, namespace_mode, interactions, lengths, libsvm, interacting):
    """The parser's own chunk kernel for the model's input format. ``libsvm`` and
    ``interacting`` are None or not (types, not values): Numba compiles only the branch a
    model uses, as parse._chunk_parser's closure constants do."""
    mask = np.int64(config[K_MASK])
    constant_index = np.int64(config[K_CONSTANT])
    label_kind = np.int64(config[K_LABEL_KIND])
    max_generated = float(MAX_EXAMPLE_FEATURES)
    budget = np.int64(0)
    record = budget < 0  # False, typed as a run-time bool: a literal would compile the parser again
    if libsvm is not None:
        if interacting is not None:
            return _PARSE_LIBSVM_INTERACTING(buf, mask, constant_index, label_kind, namespace_mode, interactions,
                                             lengths, record, max_generated, budget)
        return _PARSE_LIBSVM(buf, mask, constant_index, label_kind, namespace_mode, interactions, lengths, record,
                             max_generated, budget)
    if interacting is not None:
        return _PARSE_VW_INTERACTING(buf, mask, constant_index, label_kind, namespace_mode, interactions, lengths,
                                     record, max_generated, budget)
    return _PARSE_VW(buf, mask, constant_index, label_kind, namespace_mode, interactions, lengths, record,
                     max_generated, budget)


@njit(inline="always")  # the dispatcher arguments must be inlined for the entry points to be cached
def _reply(run_chunk, run_chunk_multiclass, buf, state, counters, scalars, params, config, namespace_mode,
           interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    """Parse ``buf`` (whole lines), predict every example without learning (accounting into
    the tally arrays), write the reply lines into ``out``; returns their length, or
    BAD_LINES / DIVERGED (nothing written; the tally may have counted the examples
    before a divergence, as the batch path's does)."""
    (n, labels, importance, base, tags, example_line, row_ptr, index, value, feature_count, n_errors, errors,
     n_lines, names, consumed) = _parse(buf, config, namespace_mode, interactions, lengths, libsvm, interacting)
    if n_errors > 0:
        return np.int64(BAD_LINES)
    table = Table(state, counters, scalars)
    classes = np.int64(config[K_CLASSES])
    learn = n < 0  # False, typed as a run-time bool (as the batch path's Settings): the same run_chunk
    settings = Settings(params, np.int64(config[K_LOSS]), config[K_TAU], config[K_CLIP] != 0.0, learn,
                        np.int64(config[K_BLOCK_ROWS]), classes, config[K_SOFTMAX] != 0.0,
                        config[K_MIN_PREDICTION], config[K_MAX_PREDICTION])
    batch = Batch(labels[:n], importance[:n], base[:n], row_ptr[:n + 1], index, value, feature_count[:n])
    tally = Tally(stats, auc, progress, holdout)
    predictions = np.empty(n)
    if multiclass is not None:  # None or not is the type: only one of the loops is compiled
        run_chunk_multiclass(table, settings, batch, tally, predictions, np.empty((n, classes)))
    else:
        run_chunk(table, settings, batch, tally, predictions)
    if stats[S_DIVERGED] != 0.0:
        stats[S_DIVERGED] = 0.0
        return np.int64(DIVERGED)
    if classes > 0 and config[K_FIRST_CLASS] == 0.0:
        for e in range(n):  # VW's 0-indexed labels (learner._multiclass_call): classes 1..K are 0..K-1
            predictions[e] -= 1.0
    if classes == 0 and config[K_LOGISTIC_LINK] != 0.0:
        for e in range(n):  # learner.logistic, element by element
            predictions[e] = 1.0 / (1.0 + math.exp(-min(max(predictions[e], -700.0), 700.0)))
    text = format_predictions(predictions, n, tags, buf, classes > 0)
    size = len(text)
    out[:size] = text
    return np.int64(size)


@njit(cache=True, nogil=True)
def reply_adagrad(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
                  stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(adagrad.run_chunk, adagrad.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


@njit(cache=True, nogil=True)
def reply_adagrad_dual(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
                       stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(adagrad_dual.run_chunk, adagrad_dual.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


@njit(cache=True, nogil=True)
def reply_ftrl(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
               stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(ftrl.run_chunk, ftrl.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


@njit(cache=True, nogil=True)
def reply_scinol1(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
                  stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(scinol1.run_chunk, scinol1.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


@njit(cache=True, nogil=True)
def reply_scinol2(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
                  stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(scinol2.run_chunk, scinol2.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


@njit(cache=True, nogil=True)
def reply_sgd(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
              stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(sgd.run_chunk, sgd.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


@njit(cache=True, nogil=True)
def reply_gd(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
             stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(gd.run_chunk, gd.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


@njit(cache=True, nogil=True)
def reply_coin(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
               stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(coin.run_chunk, coin.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


@njit(cache=True, nogil=True)
def reply_mix(buf, state, counters, scalars, params, config, namespace_mode, interactions, lengths,
              stats, auc, progress, holdout, out, libsvm, interacting, multiclass):
    return _reply(mixture.run_chunk, mixture.run_chunk_multiclass, buf, state, counters, scalars, params, config,
                  namespace_mode, interactions, lengths, stats, auc, progress, holdout, out, libsvm, interacting,
                  multiclass)


ENTRIES = {"adagrad": reply_adagrad, "adagrad-dual": reply_adagrad_dual, "ftrl": reply_ftrl,
           "scinol1": reply_scinol1, "scinol2": reply_scinol2, "sgd": reply_sgd, "gd": reply_gd,
           "coin": reply_coin, "mix": reply_mix}


class LinePredictor:
    """Reply lines for a few VW/libsvm lines of one learner's model, one kernel call each
    (``Learner.line_predictor``). The model's arrays are read in place: learning between
    calls (the same learner, on the same thread) is seen by the next call. Not for
    concurrent use (one reply buffer)."""

    def __init__(self, learner, link: str, tally):
        model = learner.model
        settings = learner.settings(False)
        self.learner = learner
        self._model = model
        self._state = model.state
        self._entry = ENTRIES[model.algorithm]
        config = np.zeros(N_CONFIG)
        config[K_LOSS] = settings.loss
        config[K_TAU] = settings.tau
        config[K_CLIP] = settings.clip
        config[K_BLOCK_ROWS] = settings.block_rows
        config[K_CLASSES] = settings.classes
        config[K_SOFTMAX] = settings.softmax
        config[K_MIN_PREDICTION] = settings.min_prediction
        config[K_MAX_PREDICTION] = settings.max_prediction
        config[K_LIBSVM] = model.input_format == "libsvm"
        config[K_MASK] = (1 << model.bits) - 1
        config[K_CONSTANT] = (1 << model.bits) if model.constant else -1
        config[K_LABEL_KIND] = learner.label_kind
        config[K_LOGISTIC_LINK] = link == "logistic" and not model.classes
        config[K_FIRST_CLASS] = 0 if getattr(model, "indexing", 1) == 0 else 1   # the label of class 1
        features = learner.feature_spec
        self._fixed = (model.counters, model.scalars, settings.params, config, features.namespace_mode,
                       features.interactions, features.lengths, tally.stats, tally.auc, tally.progress,
                       tally.holdout)
        # None or not: which parser and example loop the entry compiles (one per kind of model)
        self._flags = (True if model.input_format == "libsvm" else None,
                       True if len(features.lengths) else None, True if model.classes else None)
        self._grow(1 << 12)

    @staticmethod
    def supports(learner, link: str) -> bool:
        """Whether the fast path can answer for this learner's model and link (else: the batch
        path): an algorithm with an entry here, a known input format, and the identity or
        logistic link (another link is left to ``learner.apply_link``)."""
        model = learner.model
        return (model.algorithm in ENTRIES and model.input_format in ("vw", "libsvm")
                and (bool(model.classes) or link in ("identity", "logistic")))

    def reply(self, data: bytes):
        """The reply text (bytes) for ``data`` (whole lines, each ending in '\\n'), or None:
        a bad line or a diverged prediction, for the batch path to answer."""
        model = self._model
        counters, scalars = self._fixed[0], self._fixed[1]
        if (self.learner.model is not model or model.state is not self._state or model.counters is not counters
                or model.scalars is not scalars):
            return None  # the learner's model (or an array of it) was replaced: build a new predictor
        if len(data) > self._capacity:
            self._grow(len(data))
        size = self._call(np.frombuffer(data, np.uint8), self._state, *self._arguments)
        if size < 0:
            return None
        return self._out[:size].tobytes()

    def _grow(self, length: int) -> None:
        """A reply buffer for reads of up to ``length`` bytes: an example takes at least 2 bytes
        of input (a character and '\\n') and at most 33 of reply plus its tag (part of the input)."""
        self._out = np.empty(33 * (length // 2 + 1) + length, np.uint8)
        self._capacity = length
        self._arguments = (*self._fixed, self._out, *self._flags)
        self._call = self._entry
        self._call(np.frombuffer(b"", np.uint8), self._state, *self._arguments)  # load or compile it
        # The compiled function itself, without the dispatcher's typing of 17 arguments on every
        # call (~0.4 µs of ~3.5): the argument types never change (same arrays; the input is
        # always a read-only uint8 array of bytes). The dispatcher if Numba has no such entry.
        arguments = (np.frombuffer(b"", np.uint8), self._state, *self._arguments)
        overload = self._entry.overloads.get(tuple(typeof(a) for a in arguments))
        if overload is not None and getattr(overload, "entry_point", None) is not None:
            self._call = overload.entry_point
