"""A few lines in, their reply text out, in one kernel call (``olcli serve``'s single-example path).

``Learner.predict``/``olcli serve``'s batch path make several calls per request: the parser
(whose result arrays are boxed into Python objects), the algorithm's ``run_chunk`` (its
arguments are NamedTuples, typed by Numba in Python on every call) and the formatter. For a
batch of thousands of lines that is nothing; for one line it is ~30 µs of Python and Numba
dispatch around well under a microsecond of arithmetic. Here one call parses the lines with
the parser's own chunk kernel body (``parse.parse_into``: the same ``_parse_chunk`` as
``parse_lines``, filling buffers allocated once), predicts them with the algorithm's own
``run_chunk``/``run_chunk_multiclass`` (learn off) and writes the reply text with the same
``format_predictions``, into a reply buffer allocated once: the batch path's kernels, called
from inside one kernel. The predictions are therefore those of the batch path, computed by
the same code; the link (``identity``/``logistic``) is the only arithmetic added, written as
``learner.logistic`` is (other links are left to the batch path).

What a call costs besides the work (~1 µs for one click-log line): its arguments are the
request's bytes, the address of the descriptors of every other array (``descriptors``: the
model's state, the settings, the parser's buffers, the reply buffer; ~30 arrays, laid out as
Numba lays out a tuple of arrays, without owners) and four None-or-True flags. Passing the
~30 arrays themselves cost ~9 µs a call (each unboxed, given an owner and released by the
compiled function's wrapper) against ~1.5 µs for these plain values. Inside, the arrays are
borrowed views (engine/borrowed.py: no reference counting), the parser's arrays, the
predictions and the reply text are buffers allocated once (no allocation per call), and the
reply is written in place. The arguments are plain values so that the entries are compiled
ahead of time like every other kernel (olcli/aot): ``olcli serve`` compiles nothing; the
compiled function is called directly, without typing its arguments on every call.

Anything the fast path does not do (a bad line, a diverged prediction, multiclass
probabilities, learning, an algorithm without an entry here, or, with the kernels compiled
ahead, a kind of model whose entry the build leaves out: olcli/aot/selection.py builds the
default learner's plain form only) is left to the batch path: ``LinePredictor.reply``
returns None and the caller uses it.

Numba caches a module-level entry point that names the kernels it calls; closures over
them and kernels passed in from Python are not cached. Hence one written-out entry per
algorithm (an algorithm missing from ``ENTRIES`` simply has no fast path).
"""

import math

import numpy as np

from olcli.engine import jit
from olcli.engine.jit import intrinsic, njit, types
from olcli.engine import adagrad, adagrad_dual, coin, ftrl, gd, mixture, mixture_v1, scinol1, scinol2, sgd
from olcli.engine.format import write_lines
from olcli.engine.parse import MAX_EXAMPLE_FEATURES, parse_buffers, parse_into
from olcli.engine.records import S_DIVERGED, Batch, Settings, Table, Tally

# The float64 ``config`` array: everything of Settings and the parser that is a number.
(K_LOSS, K_TAU, K_CLIP, K_BLOCK_ROWS, K_CLASSES, K_SOFTMAX, K_MIN_PREDICTION, K_MAX_PREDICTION,
 K_LIBSVM, K_MASK, K_CONSTANT, K_LABEL_KIND, K_LOGISTIC_LINK, K_FIRST_CLASS) = range(14)
N_CONFIG = 14

# Return codes below 0: leave these lines to the batch path.
BAD_LINES = -1
DIVERGED = -2


# The arrays an entry reads, as ``olcli.aot.value_key`` names their types (``{spec}``: the
# feature spec's dtype, int8 when every entry fits, else int64): ``LinePredictor`` checks its
# arrays against it before it passes their descriptors.
ARRAYS_KEY = ("t(a(<f8,2,C,w),a(<f8,1,C,w),a(<f8,1,C,w),a(<f8,1,C,w),a(<f8,1,C,w),a({spec},1,C,w),"
              "a(<i8,2,C,w),a(<i8,1,C,w),a(<f8,1,C,w),a(<f8,2,C,w),a(<f8,2,C,w),a(<f8,1,C,w),a(|u1,1,C,w),"
              "t(a(<f8,1,C,w),a(<f8,1,C,w),a(<f8,1,C,w),a(<i8,2,C,w),a(<i8,1,C,w),a(<i8,1,C,w),a(<i4,1,C,w),"
              "a(<f8,1,C,w),a(|u1,1,C,w),a(<i8,2,C,w),a(<i8,1,C,w),a(<i8,2,C,w),a(<u8,1,C,w),a(<i8,1,C,w),"
              "a(<i8,1,C,w)),a(<f8,1,C,w),a(<i4,1,C,w))")
SPEC_DTYPES = {True: "|i1", None: "<i8"}   # by the entries' ``narrow`` flag


def descriptors(arrays) -> np.ndarray:
    """The arrays (a tuple of arrays and tuples of them) as Numba lays out such a tuple: for
    each array, in order, its owner (meminfo) and parent pointers (0: none, a borrowed view),
    its size, item size, data address, shape and strides, each 8 bytes, with no padding
    between (every field is 8 bytes wide). Valid while the arrays live."""
    words = []

    def add(value):
        if isinstance(value, tuple):
            for member in value:
                add(member)
        else:
            words.extend((0, 0, value.size, value.itemsize, value.__array_interface__["data"][0], *value.shape,
                          *value.strides))
    add(arrays)
    return np.array(words, np.int64)


@intrinsic
def _arrays_at(typingctx, address_type, narrow_type):
    """The tuple of arrays whose ``descriptors`` are at ``address``, typed as ``ARRAYS_KEY``
    says (the spec int8 when ``narrow`` is True, int64 when None): views without owners, so
    that neither taking them out of the tuple nor passing them on counts references (an
    atomic increment and decrement of each of ~30 arrays, ~0.3 µs a call, otherwise)."""
    from olcli.aot.keys import key_type

    narrow = None if isinstance(narrow_type, types.NoneType) else True
    arrays_type = key_type(ARRAYS_KEY.format(spec=SPEC_DTYPES[narrow]))

    def codegen(cgctx, builder, signature, args):
        pointer = builder.inttoptr(args[0], cgctx.get_value_type(arrays_type).as_pointer())
        return builder.load(pointer)

    return arrays_type(address_type, narrow_type), codegen


@njit(inline="always")
def _reply(run_chunk, run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow):
    """Parse ``data`` (bytes of whole lines) into the context's parser buffers, predict every
    example without learning (accounting into the tally arrays), write the reply lines into
    the context's ``out``; returns their length, or BAD_LINES / DIVERGED (nothing written; the
    tally may have counted the examples before a divergence, as the batch path's does).
    ``libsvm``, ``interacting``, ``multiclass`` and ``narrow`` are None or True (types, not
    values): Numba compiles only the parser branch and the example loop a model uses; the
    arrays are at ``address`` (``descriptors``, their types ``ARRAYS_KEY``)."""
    # Borrowed views: the caller holds the arrays, and the callees take the views without
    # counting references (~1 µs a call otherwise).
    (state, counters, scalars, params, config, namespace_mode, interactions, lengths, stats, auc, progress,
     holdout, out, buffers, predicted, pool_index) = _arrays_at(address, narrow)
    buf = np.frombuffer(data, np.uint8)
    (n, labels, importance, base, tags, example_line, row_ptr, index, value, feature_count, n_errors, errors,
     n_lines, names, consumed) = parse_into(buf, np.int64(config[K_MASK]), np.int64(config[K_CONSTANT]),
                                            np.int64(config[K_LABEL_KIND]), namespace_mode, interactions, lengths,
                                            float(MAX_EXAMPLE_FEATURES), buffers, libsvm, interacting)
    if n_errors > 0:
        return np.int64(BAD_LINES)
    for j in range(row_ptr[n]):   # hashed indices -> the pool's rows (never touched: the template's)
        index[j] = pool_index[index[j]]
    table = Table(state, counters, scalars)
    classes = np.int64(config[K_CLASSES])
    learn = n < 0  # False, typed as a run-time bool (as the batch path's Settings): the same run_chunk
    settings = Settings(params, np.int64(config[K_LOSS]), config[K_TAU], config[K_CLIP] != 0.0, learn,
                        np.int64(config[K_BLOCK_ROWS]), classes, config[K_SOFTMAX] != 0.0,
                        config[K_MIN_PREDICTION], config[K_MAX_PREDICTION])
    batch = Batch(labels[:n], importance[:n], base[:n], row_ptr[:n + 1], index, value, feature_count[:n])
    tally = Tally(stats, auc, progress, holdout)
    if n <= len(predicted):
        predictions = predicted[:n]
    else:  # more examples than the buffer holds (the parser allocated its arrays too)
        predictions = np.empty(n)
    if multiclass is not None:
        run_chunk_multiclass(table, settings, batch, tally, predictions, np.empty((n, classes)))
    else:
        run_chunk(table, settings, batch, tally, predictions)
    if stats[S_DIVERGED] != 0.0:
        stats[S_DIVERGED] = 0.0
        return np.int64(DIVERGED)
    if classes > 0 and config[K_FIRST_CLASS] == 0.0:
        for e in range(n):  # VW's 0-indexed labels (kernel_calls._multiclass_call): classes 1..K are 0..K-1
            predictions[e] -= 1.0
    if classes == 0 and config[K_LOGISTIC_LINK] != 0.0:
        for e in range(n):  # learner.logistic, element by element
            predictions[e] = 1.0 / (1.0 + math.exp(-min(max(predictions[e], -700.0), 700.0)))
    return np.int64(write_lines(out, predictions, n, tags, buf, classes > 0))


# One cached entry per algorithm (the dispatchers must be named in the entry for it to be cached).
# Not nogil: the server calls them from its one event loop thread, where releasing and taking
# the GIL back cost ~0.1 µs a call for nothing.
@njit(cache=True)
def reply_adagrad(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(adagrad.run_chunk, adagrad.run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow)


@njit(cache=True)
def reply_adagrad_dual(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(adagrad_dual.run_chunk, adagrad_dual.run_chunk_multiclass, data, address, libsvm,
                  interacting, multiclass, narrow)


@njit(cache=True)
def reply_ftrl(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(ftrl.run_chunk, ftrl.run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow)


@njit(cache=True)
def reply_scinol1(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(scinol1.run_chunk, scinol1.run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow)


@njit(cache=True)
def reply_scinol2(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(scinol2.run_chunk, scinol2.run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow)


@njit(cache=True)
def reply_sgd(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(sgd.run_chunk, sgd.run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow)


@njit(cache=True)
def reply_gd(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(gd.run_chunk, gd.run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow)


@njit(cache=True)
def reply_coin(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(coin.run_chunk, coin.run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow)


@njit(cache=True)
def reply_mix(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(mixture.run_chunk, mixture.run_chunk_multiclass, data, address, libsvm, interacting, multiclass, narrow)


@njit(cache=True)
def reply_mix_v1(data, address, libsvm, interacting, multiclass, narrow):
    return _reply(mixture_v1.run_chunk, mixture_v1.run_chunk_multiclass, data, address, libsvm, interacting,
                  multiclass, narrow)


ENTRIES = {"adagrad": reply_adagrad, "adagrad-dual": reply_adagrad_dual, "ftrl": reply_ftrl,
           "scinol1": reply_scinol1, "scinol2": reply_scinol2, "sgd": reply_sgd, "gd": reply_gd,
           "coin": reply_coin, "mix": reply_mix, "mix-v1": reply_mix_v1}


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
        self._state, self._index = model.pool.state, model.pool.index
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
        self._counters, self._scalars = model.counters, model.scalars
        # The parser reads the feature spec on every call (two scans of 256 entries, and one entry
        # per feature): as int8 when every entry fits (the usual spec: modes, n-gram sizes, flags,
        # a hash seed of 0), 770 bytes instead of 6 KiB: ~55 fewer cache lines to bring back
        # after the client ran (2 KiB of int64 entries is 32 lines). The same values, so the same parse.
        spec = features.namespace_mode
        narrow = spec.astype(np.int8)
        if np.array_equal(narrow.astype(spec.dtype), spec):
            spec = narrow
        self._fixed = (learner.table().state, model.counters, model.scalars, settings.params, config, spec,
                       features.interactions, features.lengths, tally.stats, tally.auc, tally.progress,
                       tally.holdout)
        # None or not: which parser and example loop the entry compiles (one per kind of model)
        self._libsvm = True if model.input_format == "libsvm" else None
        self._interacting = True if len(features.lengths) else None
        self._multiclass = True if model.classes else None
        self._narrow = True if spec.dtype == np.int8 else None
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
        if (self.learner.model is not model or model.pool.state is not self._state
                or model.pool.index is not self._index
                or model.counters is not self._counters or model.scalars is not self._scalars):
            return None  # the learner's model (or an array of it) was replaced: build a new predictor
        if len(data) > self._capacity or type(data) is not bytes:
            data = bytes(data)  # the entry is compiled for bytes
            if len(data) > self._capacity:
                self._grow(len(data))
        call = self._call
        if call is None:
            return None  # no compiled entry for this kind of model (``_grow``): the batch path answers
        size = call(data, self._address, self._libsvm, self._interacting, self._multiclass, self._narrow)
        if size < 0:
            return None
        return self._view[:size].tobytes()

    def _grow(self, length: int) -> None:
        """The buffers for reads of up to ``length`` bytes, allocated once: the parser's arrays
        (engine/parse.py ``parse_buffers``), the predictions, and the reply: an example takes at
        least 2 bytes of input (a character and '\\n') and at most 33 of reply plus its tag
        (part of the input). Then the entry's compiled function for these arguments, called
        directly (their types never change: the same arrays; the input is always bytes). With
        the kernels compiled ahead of time (``jit.MODE == "aot"``) an entry the module lacks (a
        form olcli/aot/selection.py does not build, or one ``olcli.aot.build record`` did not
        meet) is not compiled at run time: ``reply`` returns None and the batch path, compiled
        ahead too, answers."""
        self._out = np.empty(33 * (length // 2 + 1) + length, np.uint8)
        self._view = memoryview(self._out)  # slices of a memoryview cost less than an array's
        self._capacity = length
        buffers = parse_buffers(length)
        self._arrays = (*self._fixed, self._out, buffers, np.empty(len(buffers[0])), self._index)
        self._call = None
        from olcli import aot

        if aot.value_key(self._arrays) != ARRAYS_KEY.format(spec=SPEC_DTYPES[self._narrow]):
            return  # arrays of other types than the entries read: the batch path answers
        self._descriptors = descriptors(self._arrays)   # held here, with the arrays, while used
        self._address = self._descriptors.__array_interface__["data"][0]
        arguments = (b"", self._address, self._libsvm, self._interacting, self._multiclass, self._narrow)
        if jit.MODE == "aot":
            self._call = aot.exported(self._entry, arguments)
            return
        from numba import typeof

        self._entry(*arguments)  # load or compile it
        self._call = self._entry
        overload = self._entry.overloads.get(tuple(typeof(a) for a in arguments))
        if overload is not None and getattr(overload, "entry_point", None) is not None:
            self._call = overload.entry_point
