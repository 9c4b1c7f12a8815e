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
request's bytes, the address of one ``Context`` (every other array; ~15 arrays passed one by
one cost ~0.5 µs, the context object itself ~0.07 µs more than an int) with its type, and three
None-or-True flags; inside, the arrays are borrowed views (engine/borrowed.py: no reference
counting, ~1 µs otherwise), the parser's arrays, the predictions and the reply text are the
context's buffers (no allocation per call), and the reply is written in place.

Anything the fast path does not do (a bad line, a diverged prediction, multiclass
probabilities, learning, an algorithm without an entry here) is left to the batch path:
``LinePredictor.reply`` returns None and the caller uses it.

Numba caches a module-level entry point that names the kernels it calls; closures over
them and kernels passed in from Python are not cached. Hence one written-out entry per
algorithm (an algorithm missing from ``ENTRIES`` simply has no fast path).
"""

import math

import numpy as np
from numba import typeof
from numba.core import cgutils, types
from numba.experimental import structref
from numba.extending import intrinsic, overload

from olcli.engine.jit import njit
from olcli.engine import adagrad, adagrad_dual, coin, ftrl, gd, mixture, scinol1, scinol2, sgd
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


@structref.register
class ContextType(types.StructRef):
    def preprocess_fields(self, fields):
        return tuple((name, types.unliteral(kind)) for name, kind in fields)


class Context(structref.StructRefProxy):
    """Every array an entry reads or fills but the request's bytes, in one object (``new_context``):
    Numba unboxes it as one argument, where passing the ~15 arrays themselves cost ~0.5 µs a call."""


structref.define_boxing(ContextType, Context)


def _context(arrays):
    raise NotImplementedError("_context() is for compiled code")


@overload(_context)
def _context_overload(arrays):
    context_type = ContextType([("arrays", arrays)])

    def build(arrays):
        context = structref.new(context_type)
        context.arrays = arrays
        return context
    return build


@njit(cache=True)
def new_context(arrays):
    """A Context holding ``arrays`` (the tuple ``_reply`` unpacks): the model's state, counters,
    scalars, the settings and feature spec, the tally, the reply buffer, the parser's buffers
    and the predictions buffer."""
    return _context(arrays)


def _without_owners(cgctx, builder, kind, value):
    """``value`` (of Numba type ``kind``) with every array in it an array without an owner."""
    if isinstance(kind, types.Array):
        array = cgutils.create_struct_proxy(kind)(cgctx, builder, value=value)
        array.meminfo = cgutils.get_null_value(array.meminfo.type)
        array.parent = cgutils.get_null_value(array.parent.type)
        return array._getvalue()
    if isinstance(kind, types.BaseTuple):
        for k, member in enumerate(kind):
            value = builder.insert_value(value, _without_owners(cgctx, builder, member,
                                                                builder.extract_value(value, k)), k)
    return value


@intrinsic
def _arrays_at(typingctx, address_type, context_typeref):
    """The arrays of the ``Context`` whose payload is at ``address`` (``context._meminfo.data``),
    its type given by ``context_typeref``, as borrowed views (engine/borrowed.py): the same
    arrays without an owner, so that neither taking them out of the context nor passing them on
    counts references (an atomic increment and decrement of each of ~30 arrays, ~0.3 µs a call,
    otherwise). The entry gets the address (an int) rather than the context object: unboxing a
    structref proxy (its ``_meminfo`` attribute, the MemInfo object) cost ~0.07 µs more per call
    and touches more of Python's objects after the client's turn on the CPU. Valid while the
    context is alive: ``LinePredictor`` holds it."""
    context_type = context_typeref.instance_type
    arrays_type = context_type.field_dict["arrays"]

    def codegen(cgctx, builder, signature, args):
        payload_type = context_type.get_data_type()
        pointer_type = cgctx.data_model_manager[payload_type].get_value_type().as_pointer()
        payload = cgutils.create_struct_proxy(payload_type)(cgctx, builder,
                                                            ref=builder.inttoptr(args[0], pointer_type))
        return _without_owners(cgctx, builder, arrays_type, payload.arrays)

    return arrays_type(address_type, context_typeref), codegen


@njit(inline="always")
def _reply(run_chunk, run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass):
    """Parse ``data`` (bytes of whole lines) into the context's parser buffers, predict every
    example without learning (accounting into the tally arrays), write the reply lines into
    the context's ``out``; returns their length, or BAD_LINES / DIVERGED (nothing written; the
    tally may have counted the examples before a divergence, as the batch path's does).
    ``libsvm``, ``interacting`` and ``multiclass`` are None or not (types, not values): Numba
    compiles only the parser branch and the example loop a model uses."""
    # Borrowed views: the context (at ``address``, of type ``kind``) holds the arrays, and the
    # callees take the views without counting references (~1 µs a call otherwise).
    (state, counters, scalars, params, config, namespace_mode, interactions, lengths, stats, auc, progress,
     holdout, out, buffers, predicted) = _arrays_at(address, kind)
    buf = np.frombuffer(data, np.uint8)
    (n, labels, importance, base, tags, example_line, row_ptr, index, value, feature_count, n_errors, errors,
     n_lines, names, consumed) = parse_into(buf, np.int64(config[K_MASK]), np.int64(config[K_CONSTANT]),
                                            np.int64(config[K_LABEL_KIND]), namespace_mode, interactions, lengths,
                                            float(MAX_EXAMPLE_FEATURES), buffers, libsvm, interacting)
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
        for e in range(n):  # VW's 0-indexed labels (learner._multiclass_call): classes 1..K are 0..K-1
            predictions[e] -= 1.0
    if classes == 0 and config[K_LOGISTIC_LINK] != 0.0:
        for e in range(n):  # learner.logistic, element by element
            predictions[e] = 1.0 / (1.0 + math.exp(-min(max(predictions[e], -700.0), 700.0)))
    return np.int64(write_lines(out, predictions, n, tags, buf, classes > 0))


# One cached entry per algorithm (the dispatchers must be named in the entry for it to be cached).
# Not nogil: the server calls them from its one event loop thread, where releasing and taking
# the GIL back cost ~0.1 µs a call for nothing.
@njit(cache=True)
def reply_adagrad(data, address, kind, libsvm, interacting, multiclass):
    return _reply(adagrad.run_chunk, adagrad.run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass)


@njit(cache=True)
def reply_adagrad_dual(data, address, kind, libsvm, interacting, multiclass):
    return _reply(adagrad_dual.run_chunk, adagrad_dual.run_chunk_multiclass, data, address, kind, libsvm,
                  interacting, multiclass)


@njit(cache=True)
def reply_ftrl(data, address, kind, libsvm, interacting, multiclass):
    return _reply(ftrl.run_chunk, ftrl.run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass)


@njit(cache=True)
def reply_scinol1(data, address, kind, libsvm, interacting, multiclass):
    return _reply(scinol1.run_chunk, scinol1.run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass)


@njit(cache=True)
def reply_scinol2(data, address, kind, libsvm, interacting, multiclass):
    return _reply(scinol2.run_chunk, scinol2.run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass)


@njit(cache=True)
def reply_sgd(data, address, kind, libsvm, interacting, multiclass):
    return _reply(sgd.run_chunk, sgd.run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass)


@njit(cache=True)
def reply_gd(data, address, kind, libsvm, interacting, multiclass):
    return _reply(gd.run_chunk, gd.run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass)


@njit(cache=True)
def reply_coin(data, address, kind, libsvm, interacting, multiclass):
    return _reply(coin.run_chunk, coin.run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass)


@njit(cache=True)
def reply_mix(data, address, kind, libsvm, interacting, multiclass):
    return _reply(mixture.run_chunk, mixture.run_chunk_multiclass, data, address, kind, libsvm, interacting, multiclass)


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
        self._counters, self._scalars = model.counters, model.scalars
        # The parser reads the feature spec on every call (two scans of 256 entries, and one entry
        # per feature): as int8 when every entry fits (the usual spec: modes, n-gram sizes, flags,
        # a hash seed of 0), 770 bytes instead of 6 KiB: ~55 fewer cache lines to bring back
        # after the client ran (2 KiB of int64 entries is 32 lines). The same values, so the same parse.
        spec = features.namespace_mode
        narrow = spec.astype(np.int8)
        if np.array_equal(narrow.astype(spec.dtype), spec):
            spec = narrow
        self._fixed = (model.state, model.counters, model.scalars, settings.params, config, spec,
                       features.interactions, features.lengths, tally.stats, tally.auc, tally.progress,
                       tally.holdout)
        # None or not: which parser and example loop the entry compiles (one per kind of model)
        self._libsvm = True if model.input_format == "libsvm" else None
        self._interacting = True if len(features.lengths) else None
        self._multiclass = True if model.classes else None
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
        if (self.learner.model is not model or model.state is not self._state
                or model.counters is not self._counters or model.scalars is not self._scalars):
            return None  # the learner's model (or an array of it) was replaced: build a new predictor
        if len(data) > self._capacity or type(data) is not bytes:
            data = bytes(data)  # the entry is compiled for bytes
            if len(data) > self._capacity:
                self._grow(len(data))
        size = self._call(data, self._address, self._kind, self._libsvm, self._interacting, self._multiclass)
        if size < 0:
            return None
        return self._view[:size].tobytes()

    def _grow(self, length: int) -> None:
        """The buffers for reads of up to ``length`` bytes, allocated once (``Context``): the
        parser's arrays (engine/parse.py ``parse_buffers``), the predictions, and the reply: an
        example takes at least 2 bytes of input (a character and '\\n') and at most 33 of reply
        plus its tag (part of the input)."""
        self._out = np.empty(33 * (length // 2 + 1) + length, np.uint8)
        self._view = memoryview(self._out)  # slices of a memoryview cost less than an array's
        self._capacity = length
        buffers = parse_buffers(length)
        self._context = new_context((*self._fixed, self._out, buffers, np.empty(len(buffers[0]))))
        # the entry reads the context at its payload's address (held alive here by _context)
        self._address, self._kind = self._context._meminfo.data, typeof(self._context)
        arguments = (b"", self._address, self._kind, self._libsvm, self._interacting, self._multiclass)
        self._call = self._entry
        self._call(*arguments)  # load or compile it
        # The compiled function itself, without the dispatcher's typing of its arguments on every
        # call: their types never change (the same context; the input is always bytes). The
        # dispatcher if Numba has no such entry.
        overload = self._entry.overloads.get(tuple(typeof(a) for a in arguments))
        if overload is not None and getattr(overload, "entry_point", None) is not None:
            self._call = overload.entry_point
