"""olcli as a library: the one door to the engine.

A ``Learner`` holds a model (algorithm, hyper-parameters, hashed feature table,
optimizer state, lifetime counters) and learns and predicts on batches. Every
part of olcli that learns or predicts goes through it: the ``train`` and
``test`` commands, the scikit-learn estimators, ``olcli serve`` and training on
a cluster. A batch is learned by one call of the algorithm's Numba kernel,
which releases the GIL.

Examples can be given as VW or libsvm lines (an iterable of ``str``/``bytes``,
or one ``bytes``/``str`` buffer of lines), or as ``(X, y[, weight])`` with X a
NumPy array or a SciPy sparse matrix: column j is the feature with libsvm index
j (hashed as libsvm input is: index modulo 2^bits), so ``(X, y)`` and the libsvm
lines ``y j:X[j] ...`` (columns in increasing order, zeros left out) give the
same model, bit for bit.

    >>> import olcli
    >>> learner = olcli.Learner("scinol2", loss="logistic")
    >>> result = learner.learn(["1 | price:0.5 sqft:2", "-1 | price:3 sqft:0.2"])
    >>> learner.predict(["| price:0.4 sqft:1.8"]).shape
    (1,)
"""

import math
import os
import time

import numpy as np

from olcli import member_threads, merging
from olcli import model as model_file
from olcli.engine import registry
from olcli.engine.losses import BINARY_LOSSES, LOSS_CODES, NONNEGATIVE_LOSSES, UNBOUNDED_LOSSES
from olcli.engine.records import (
    C_EXAMPLES, C_ROUNDS, COUNTER_NAMES, S_DIVERGED, S_LOSS, S_WEIGHT, Batch, Settings, Table, new_tally)
from olcli.errors import DataError, Diverged, UsageError
from olcli.kernel_calls import Processed, process_multiclass
from olcli.memory import MemoryGuard  # noqa: F401  (the runs' guard, re-exported)
# new_model: re-exported, the library's door to a new model
from olcli.new_model import new_model, spelled_out  # noqa: F401
from olcli.records import Frozen, Record
from olcli.settings import (  # noqa: F401  (the keywords and limits, re-exported for the library's users)
    FORMATS, HASHES, INDEXING_ONE, INDEXING_UNDECIDED, INDEXING_ZERO, KEYWORDS, LINKS, MAX_BITS, MAX_CLASSES,
    MAX_INTERACTION)


class BatchResult(Record):
    """``learn``/``evaluate``: the progressive predictions and loss of one batch."""
    __slots__ = _fields = ("predictions", "loss", "weight", "examples", "scores", "bad_lines")

    def __init__(
            self,
            predictions: np.ndarray,     # raw predictions before learning each example (multiclass: classes)
            loss: float | None,          # importance-weighted average loss over the labeled examples
            weight: float,               # their importance weight
            examples: int,
            scores: np.ndarray | None = None,   # multiclass: (n, K)
            bad_lines: list | None = None,      # skipped lines (skip_bad_lines=True)
    ):
        self.predictions, self.loss, self.weight, self.examples = predictions, loss, weight, examples
        self.scores, self.bad_lines = scores, [] if bad_lines is None else bad_lines


class Summary(Frozen):
    """What a learner has seen since it was made or loaded (the report's numbers),
    and its model's lifetime counters (``model_examples``: examples the model learned
    from; ``model_rounds``: updates)."""
    __slots__ = _fields = ("examples", "labeled_examples", "weighted_example_sum", "weighted_label_sum",
                           "average_loss", "best_constant", "best_constant_loss", "total_features", "accuracy", "auc",
                           "multiclass_log_loss", "model_examples", "model_rounds")

    def __init__(self, examples: int, labeled_examples: int, weighted_example_sum: float, weighted_label_sum: float,
                 average_loss: float | None, best_constant: float | None, best_constant_loss: float | None,
                 total_features: int, accuracy: float | None, auc: float | None, multiclass_log_loss: float | None,
                 model_examples: int, model_rounds: int):
        for name, value in zip(self._fields, (
                examples, labeled_examples, weighted_example_sum, weighted_label_sum, average_loss, best_constant,
                best_constant_loss, total_features, accuracy, auc, multiclass_log_loss, model_examples,
                model_rounds)):
            object.__setattr__(self, name, value)

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self._fields}


class Learner:
    """An online linear learner: learn and predict on batches, save, load, merge.

    ``Learner(algorithm="mix", loss=None, bits=18, interactions=(), *, oaa=None,
    softmax=None, input_format="auto", ..., **hyper)``, the ``...`` being the settings
    table's keywords with their defaults (settings.KEYWORDS: link, constant, ignore, ...;
    ``help(Learner)`` lists them): ``algorithm`` one of ``olcli.algorithms()``; ``hyper`` its hyper-parameters by
    their registry names (``eta``, ``alpha``, ``epsilon``, ``l1``, ...); ``loss`` None
    is squared (as VW), or logistic with ``softmax``; the
    options are those of ``olcli train`` and are checked with the same messages.
    """

    def __new__(cls, *args, cb=None, **options):
        """``cb=``: a contextual-bandit learner (``olcli.cb_learner.CbLearner``, VW's ``--cb_explore_adf`` or
        ``--cb_adf`` over a base learner built from the other arguments) instead of a ``Learner``."""
        if cb is None:
            return super().__new__(cls)
        from olcli import cb_learner

        options.update(zip(("algorithm", "loss", "bits", "interactions"), args))
        settings = cb_learner.settings_of(cb, options.get("constant", True))
        return cb_learner.CbLearner(Learner(**cb_learner.base_options(settings, options)), settings)

    def __init__(self, algorithm=None, loss=None, bits=18, interactions=(), *, oaa=None, softmax=None,
                 input_format="auto", cb=None, **options):
        model = new_model(algorithm, loss, bits, interactions, oaa=oaa, softmax=softmax, **options)
        self._attach(model, input_format)

    @classmethod
    def from_model(cls, model: model_file.Model, input_format: str = "auto") -> "Learner":
        learner = cls.__new__(cls)
        learner._attach(model, input_format)
        return learner

    def _attach(self, model: model_file.Model, input_format: str) -> None:
        if input_format not in FORMATS:
            raise UsageError(f"input_format (--format) must be one of {', '.join(FORMATS)} (got {input_format!r})")
        if input_format != "auto" and model.input_format and input_format != model.input_format:
            raise UsageError(f"the model was trained on {model.input_format} input; "
                             f"--format {input_format} would hash features differently")
        self.model = model
        self.input_format_option = input_format
        spec = registry.get(model.algorithm)
        self._spec = spec
        self._kernels = spec.kernels()
        self._chunks = member_threads.chunks(self._kernels)   # multiclass chunks: the members on two threads
        self._params = kernel_params(self._kernels, spec, model)
        self.tally = new_tally()
        self._features = None
        self._started = time.perf_counter()

    # --- what the learner is ---

    @property
    def algorithm(self) -> str:
        return self.model.algorithm

    @property
    def params(self) -> dict:
        return dict(self.model.params)

    @property
    def loss(self) -> str:
        return self.model.loss

    @property
    def classes(self) -> int:
        return self.model.classes

    @property
    def counters(self) -> dict:
        """The model's lifetime counters, by name."""
        return dict(zip(COUNTER_NAMES, self.model.counters.tolist()))

    @property
    def label_kind(self) -> int:
        """What the parser accepts as a label: any number, -1/+1 (logistic loss), any
        number with 0 read as -1 (hinge loss) or 1..K."""
        from olcli.engine.parse import LABELS_ANY, LABELS_BINARY, LABELS_HINGE, LABELS_NONNEGATIVE

        if self.model.classes:
            return self.model.classes
        if self.model.loss == "hinge":
            return LABELS_HINGE
        if self.model.loss in NONNEGATIVE_LOSSES:
            return LABELS_NONNEGATIVE
        return LABELS_BINARY if self.model.loss in BINARY_LOSSES else LABELS_ANY

    @property
    def feature_spec(self):
        """The parser's view of the model's namespace options (parsing.FeatureSpec)."""
        if self._features is None:
            from olcli.parsing import FeatureSpec

            self._features = FeatureSpec.of(self.model)
        return self._features

    def settings(self, learn: bool) -> Settings:
        m = self.model
        clip = self._spec.unbounded_loss_clipped and m.loss in UNBOUNDED_LOSSES
        return Settings(self._params, int(LOSS_CODES[m.loss]), float(m.loss_tau), bool(clip), bool(learn),
                        1, int(m.classes), m.multiclass == "softmax",   # class k: pool row + k (row_pool.RowPool)
                        math.nan if m.min_prediction is None else float(m.min_prediction),
                        math.nan if m.max_prediction is None else float(m.max_prediction))

    def table(self) -> Table:
        """The kernels' Table: the pool's state (a split pool's as its members' rows, row_pool.RowPool)."""
        pool = self.model.pool
        return Table(pool.members() if pool.split > 1 else pool.state, self.model.counters, self.model.scalars)

    # --- the door: one kernel call ---

    def process(self, batch: Batch, learn: bool, tally=None) -> Processed:
        """Predict every example of ``batch`` (learning from it when ``learn``),
        accounting into ``tally`` (the learner's own by default). The kernel
        releases the GIL."""
        tally = self.tally if tally is None else tally
        n = len(batch.labels)
        predictions = np.empty(n)
        # hashed indices -> the pool's rows (learning hands out rows to new features first)
        lo, hi = int(batch.row_ptr[0]), int(batch.row_ptr[n])
        batch = batch._replace(index=self.model.pool.rows_for(batch.index[lo:hi], learn), value=batch.value[lo:hi],
                               row_ptr=batch.row_ptr - lo)
        table = self.table()
        settings = self.settings(learn)
        if self.model.classes:
            return process_multiclass(self, batch, learn, tally, table, settings)
        else:
            scores = None
            rows = self._kernels.run_chunk(table, settings, batch, tally, predictions)
        diverged_at = int(tally.stats[S_DIVERGED]) - 1
        tally.stats[S_DIVERGED] = 0.0
        return Processed(predictions, scores, int(rows), diverged_at)

    def use_threads(self, more_than_one: bool) -> None:
        """Whether the default's members may learn a chunk on two threads (olcli/member_threads.py:
        by default where the machine has two cores or more); ``--threads 1`` runs ask for one."""
        if isinstance(self._chunks, member_threads.MemberThreads):
            self._chunks.enabled = more_than_one and member_threads.cores() > 1

    def divergence_advice(self) -> str:
        rates = [p for p in self._spec.params if p.option == "learning_rate"]
        advice = (f"lower {rates[0].flag} ({rates[0].name})" if rates
                  else "check the data for extreme feature values")
        return f"{advice}, or use --scinol2 (no learning rate)" if self.algorithm != "scinol2" else advice

    # --- examples in ---

    def parse(self, data, source: str = "<examples>", first_line: int = 1):
        """Lines (one buffer of whole lines, uint8 array or bytes) -> parsing.ParsedChunk,
        deciding the input format on first use."""
        from olcli.inputs import Chunk, detect_format
        from olcli.parsing import parse_chunk

        if not isinstance(data, np.ndarray):
            data = np.frombuffer(bytes(data), dtype=np.uint8)
        chunk = Chunk(source, first_line, data)
        fmt = self.decide_format(detect_format(data), source)
        return parse_chunk(chunk, fmt, self.model.bits, self.model.constant, self.label_kind, self.feature_spec)

    def decide_format(self, detected: str, source: str) -> str:
        """The input format to parse with: the option's, else the model's, else ``detected``;
        the first data decides a new model's format."""
        m = self.model
        if self.input_format_option != "auto":
            fmt = self.input_format_option
        elif m.input_format:
            if detected != m.input_format:
                raise DataError(
                    f"{source} looks like {detected} input, but the model was trained "
                    f"on {m.input_format} input (features would hash differently); "
                    f"pass --format {m.input_format} if the data really is {m.input_format}")
            fmt = m.input_format
        else:
            fmt = detected
        if m.input_format is None:
            m.input_format = fmt
        return fmt

    def to_batch(self, examples, skip_bad_lines: bool = False, labels_needed: bool = False):
        """Any accepted form of examples -> (Batch, bad lines skipped)."""
        from olcli.matrix import matrix_batch
        from olcli.parsing import batch_of

        if isinstance(examples, tuple) and len(examples) in (2, 3):
            return matrix_batch(self, *examples), []
        if isinstance(examples, np.ndarray) or hasattr(examples, "tocsr"):
            return matrix_batch(self, examples, None), []
        if isinstance(examples, str):
            data = examples.encode("utf-8")
        elif isinstance(examples, (bytes, bytearray, memoryview)):
            data = bytes(examples)
        else:
            lines = []
            for line in examples:
                if isinstance(line, str):
                    line = line.encode("utf-8")
                elif not isinstance(line, (bytes, bytearray)):
                    raise UsageError(f"examples must be VW/libsvm lines (str or bytes), one buffer, "
                                     f"or (X, y[, weight]); got an item of type {type(line).__name__}")
                lines.append(bytes(line).rstrip(b"\n"))
            data = b"\n".join(lines) + b"\n" if lines else b""
        parsed = self.parse(data)
        if parsed.bad_lines and not skip_bad_lines:
            bad = parsed.bad_lines[0]
            raise DataError(f"{bad} ({len(parsed.bad_lines)} bad line(s); nothing of this batch was learned; "
                            "pass skip_bad_lines=True to skip them)")
        return batch_of(parsed), parsed.bad_lines

    # --- the public API ---

    def learn(self, examples, *, skip_bad_lines: bool = False) -> BatchResult:
        """Learn from a batch, progressively: each example is predicted, scored,
        then learned from. Returns the predictions and the batch's average loss."""
        return self._run(examples, True, skip_bad_lines)

    def evaluate(self, examples, *, skip_bad_lines: bool = False) -> BatchResult:
        """Predict and score a batch without learning (counted in ``summary()``)."""
        return self._run(examples, False, skip_bad_lines)

    def _run(self, examples, learn: bool, skip_bad_lines: bool) -> BatchResult:
        if learn and self.model.predict_only:
            raise UsageError(predict_only_refusal("this learner", self.model))
        batch, bad_lines = self.to_batch(examples, skip_bad_lines)
        before_loss, before_weight = self.tally.stats[S_LOSS], self.tally.stats[S_WEIGHT]
        done = self.process(batch, learn)
        if done.diverged_at >= 0:
            raise Diverged(f"the model diverged at example {done.diverged_at} of the batch: its prediction is "
                           f"not a finite number after {int(self.model.counters[C_ROUNDS])} updates; "
                           f"{self.divergence_advice()}")
        weight = float(self.tally.stats[S_WEIGHT] - before_weight)
        loss = float(self.tally.stats[S_LOSS] - before_loss) / weight if weight > 0 else None
        return BatchResult(done.predictions, loss, weight, len(batch.labels), done.scores, bad_lines)

    def decision_function(self, examples) -> np.ndarray:
        """Raw scores: (n,) for one output, (n, K) class scores for multiclass. No
        learning, not counted."""
        batch, _ = self.to_batch(examples)
        done = self.process(batch, False, new_tally())
        return done.scores if self.model.classes else done.predictions

    def predict(self, examples) -> np.ndarray:
        """Predictions without learning: the class (1..K) for multiclass, else the
        score through the model's link (probabilities of +1 with ``link="logistic"``)."""
        batch, _ = self.to_batch(examples)
        done = self.process(batch, False, new_tally())
        if self.model.classes:
            return done.predictions.astype(np.int64)
        return apply_link(self.model.link, done.predictions)

    def line_predictor(self, link=None, tally=None):
        """The single-example path: an object whose ``reply(lines)`` gives the text ``olcli test
        -p`` writes for a few VW/libsvm lines (``bytes``, each ending in '\\n') in one kernel call,
        without learning, accounting into ``tally``; ``None`` from ``reply`` leaves those lines to
        ``process`` (a bad line, a divergence). None when the model has no fast path
        (engine/single.py)."""
        from olcli.engine.single import LinePredictor

        link = link or self.model.link
        if not LinePredictor.supports(self, link):
            return None
        return LinePredictor(self, link, new_tally() if tally is None else tally)

    def predict_proba(self, examples) -> np.ndarray:
        """Class probabilities, (n, K) for multiclass (softmax, or VW's normalized
        sigmoids for OAA), (n, 2) of labels -1 and +1 otherwise."""
        scores = self.decision_function(examples)
        if not self.model.classes:
            p = logistic(scores)
            return np.column_stack([1.0 - p, p])
        from olcli.engine.multiclass import log_probabilities

        out = np.empty_like(scores)
        softmax = self.model.multiclass == "softmax"
        for e in range(len(scores)):
            log_probabilities(scores[e], softmax, out[e])
        return np.exp(out)

    def weights(self) -> np.ndarray:
        """Every row's current weight (lazy terms paid, on-demand weights computed):
        shape (rows,), or (K, rows per class) for multiclass; the last row of a
        block is the constant."""
        m = self.model
        w = self.weights_at(np.arange(m.rows, dtype=np.int64))
        return w.reshape(m.classes, m.block_rows) if m.classes else w

    def weights_at(self, rows) -> np.ndarray:
        """The current weights of table rows (k * block_rows + hashed index for class k)."""
        return self._kernels.weights_at(self.table(), self.settings(False), self.model.pool.pool_rows(rows))

    def summary(self) -> Summary:
        from olcli.report import summarize

        numbers = summarize(self.tally.stats, self.tally.auc, self.model.loss, self.model.classes)
        return Summary(**numbers, model_examples=int(self.model.counters[C_EXAMPLES]),
                       model_rounds=int(self.model.counters[C_ROUNDS]))

    def reset_summary(self) -> None:
        """Start counting ``summary()`` afresh (the model is unchanged)."""
        self.tally = new_tally()

    # --- save, load, copy, merge ---

    def save(self, path) -> None:
        """The model file ``olcli train -f`` writes, written atomically."""
        self._check_savable()
        model_file.save(self.model, os.fspath(path))

    def to_bytes(self) -> bytes:
        """The model file's bytes (``save``'s); ``copy`` and pickling go through them."""
        self._check_savable()
        return model_file.encode(self.model)

    def unsavable(self) -> str | None:
        """Why the model cannot be written as a model file, which holds finite numbers only
        (what is not finite, and what to do), or None when it can."""
        problem = model_file.unsavable(self.model)
        if problem is None:
            return None
        what, diverged = problem
        if diverged:
            return f"{what}: it diverged; {self.divergence_advice()}"
        return f"{what}: the labels or importance weights are too large; check the data for extreme values"

    def _check_savable(self) -> None:
        problem = self.unsavable()
        if problem is not None:   # as olcli train -f, which writes no model then either
            raise Diverged(f"this learner cannot be written as a model file: {problem}")

    @classmethod
    def from_bytes(cls, raw: bytes, name: str = "<bytes>") -> "Learner":
        return cls.from_model(model_file.decode(bytes(raw), name))

    def copy(self) -> "Learner":
        """An independent learner with the same model and summary so far."""
        return _restore(self.to_bytes(), self.input_format_option, tuple(self.tally))

    @classmethod
    def merge(cls, learners, base: "Learner | None" = None) -> "Learner":
        """Combine learners that each learned a separate shard starting from ``base``
        (None = a fresh one) with the algorithm's merge rule (olcli/merging.py)."""
        return merging.merge(cls, learners, base)

    def __reduce__(self):
        """Pickling (scikit-learn, multiprocessing): the model file's bytes and the summary so far."""
        return _restore, (self.to_bytes(), self.input_format_option, tuple(self.tally))

    def __repr__(self) -> str:
        m = self.model
        extra = f", {m.multiclass}={m.classes}" if m.classes else ""
        return (f"Learner({m.algorithm!r}, loss={m.loss!r}, bits={m.bits}{extra}, "
                f"examples={int(m.counters[C_EXAMPLES])})")


def empty_batch() -> Batch:
    """A batch of no examples with the parser's array types: calling a kernel with
    it compiles (or loads) the kernel without learning anything."""
    return Batch(np.empty(0), np.empty(0), np.empty(0), np.zeros(1, np.int64), np.empty(0, np.int32),
                 np.empty(0), np.empty(0, np.int64))


Learner.__init__.__signature__ = spelled_out(Learner.__init__)
# what inspect.signature(Learner) and help() show: __init__'s keywords, not __new__'s (*args, cb=None, **options)
Learner.__signature__ = Learner.__init__.__signature__.replace(
    parameters=list(Learner.__init__.__signature__.parameters.values())[1:])


def _restore(raw: bytes, input_format: str, tally) -> Learner:
    learner = Learner.from_model(model_file.decode(raw, "<pickle>"), input_format)
    learner.tally = type(learner.tally)(*(np.array(a) for a in tally))
    return learner


def load(path):
    """A learner from a model file written by ``olcli train -f`` or ``Learner.save``; a contextual-bandit
    model (its ``cb`` field set) gives its ``CbLearner`` (olcli/cb_learner.py)."""
    learner = Learner.from_model(model_file.load(os.fspath(path)))
    if learner.model.cb is None:
        return learner
    from olcli.cb_learner import CbLearner

    return CbLearner.from_learner(learner)


def kernel_params(kernels, spec, model: model_file.Model) -> np.ndarray:
    """The kernels' ``settings.params``: the model's hyper-parameters in the algorithm's PARAMS
    order, then, for a mixture (a kernel module with ``P_LOSS``), the code of the model's own
    loss, by which its weights' rate is (engine/mixture.py mixing_rate). Taken when the learner
    is made, from the loss the model learned with: a test that then scores with another loss
    (``olcli test --loss``, which sets ``model.loss``) predicts as the model does."""
    values = [model.params[p.name] for p in spec.params]
    if hasattr(kernels, "P_LOSS"):
        values.append(LOSS_CODES[model.loss])
    return np.array(values, dtype=np.float64)


def predict_only_refusal(what: str, model: model_file.Model) -> str:
    return (f"{what} was saved with --predict-only-model: it holds the weights of --{model.predict_only} "
            "without its optimizer state, so it predicts (test, serve) but cannot learn further; "
            "continue from the full model instead")


def apply_link(link: str, x: np.ndarray) -> np.ndarray:
    """A prediction through a link: identity, logistic (1 / (1 + e^-x)), poisson (e^x, the mean
    of a count whose log the model predicts: VW's --link poisson)."""
    if link == "logistic":
        return logistic(x)
    if link == "poisson":
        with np.errstate(over="ignore"):
            return np.exp(x)
    return x


def logistic(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(x, -700.0, 700.0)))
