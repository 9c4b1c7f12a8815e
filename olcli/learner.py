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
from dataclasses import asdict, dataclass, field

import numpy as np

from olcli import model as model_file
from olcli.engine import registry
from olcli.engine.losses import BINARY_LOSSES, LOSS_CODES, NONNEGATIVE_LOSSES, UNBOUNDED_LOSSES
from olcli.engine.records import (
    ADDITIVE_COUNTERS, C_EXAMPLES, C_MAX_LABEL, C_MIN_LABEL, C_ROUNDS, C_WEIGHT, COUNTER_NAMES, H_SEEN,
    S_DIVERGED, S_LOSS, S_WEIGHT, Batch, Settings, Table, new_tally)
from olcli.errors import DataError, Diverged, UsageError
from olcli.memory import MemoryGuard  # noqa: F401  (the runs' guard, re-exported)
# new_model and check_tau: re-exported, the library's door to a new model
from olcli.new_model import check_tau, new_model, spelled_out  # noqa: F401
from olcli.settings import (  # noqa: F401  (the keywords and limits, re-exported for the library's users)
    FORMATS, HASHES, INDEXING_ONE, INDEXING_UNDECIDED, INDEXING_ZERO, KEYWORDS, LINKS, MAX_BITS, MAX_CLASSES,
    MAX_INTERACTION, merge_difference)


@dataclass
class Processed:
    """What one kernel call gave back."""
    predictions: np.ndarray     # per example: the prediction (multiclass: the class 1..K)
    scores: np.ndarray | None   # multiclass: (n, K) class scores
    progress_rows: int          # rows of VW's table written to tally.progress
    diverged_at: int            # batch position of the first non-finite prediction, or -1
    label_base: np.ndarray | None = None  # multiclass: per example, the label of the first class (0 or 1)


@dataclass
class BatchResult:
    """``learn``/``evaluate``: the progressive predictions and loss of one batch."""
    predictions: np.ndarray     # raw predictions before learning each example (multiclass: classes)
    loss: float | None          # importance-weighted average loss over the labeled examples
    weight: float               # their importance weight
    examples: int
    scores: np.ndarray | None = None            # multiclass: (n, K)
    bad_lines: list = field(default_factory=list)  # skipped lines (skip_bad_lines=True)


@dataclass(frozen=True)
class Summary:
    """What a learner has seen since it was made or loaded (the report's numbers),
    and its model's lifetime counters."""
    examples: int
    labeled_examples: int
    weighted_example_sum: float
    weighted_label_sum: float
    average_loss: float | None
    best_constant: float | None
    best_constant_loss: float | None
    total_features: int
    accuracy: float | None
    auc: float | None
    multiclass_log_loss: float | None
    model_examples: int          # lifetime: examples the model learned from
    model_rounds: int            # lifetime: updates

    def as_dict(self) -> dict:
        return asdict(self)


class Learner:
    """An online linear learner: learn and predict on batches, save, load, merge.

    ``Learner(algorithm="mix", loss=None, bits=18, interactions=(), *,
    link="identity", constant=True, ignore="", keep="", ignore_linear="",
    oaa=None, softmax=None, quantile_tau=0.5, input_format="auto", **hyper)``:
    ``algorithm`` one of ``olcli.algorithms()``; ``hyper`` its hyper-parameters by
    their registry names (``eta``, ``alpha``, ``epsilon``, ``l1``, ...); ``loss`` None
    is squared (as VW), or logistic with ``softmax``; the
    options are those of ``olcli train`` and are checked with the same messages.
    """

    def __init__(self, algorithm=None, loss=None, bits=18, interactions=(), *, oaa=None, softmax=None,
                 input_format="auto", **options):
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
        self._params = np.array([model.params[p.name] for p in spec.params], dtype=np.float64)
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

            m = self.model
            self._features = FeatureSpec.build(m.interactions, m.ignore, m.keep, m.ignore_linear, m.ngram, m.skips,
                                               m.hash_seed, m.permutations, m.leave_duplicate_interactions,
                                               m.hash == "strings")
        return self._features

    def settings(self, learn: bool) -> Settings:
        m = self.model
        clip = self._spec.unbounded_loss_clipped and m.loss in UNBOUNDED_LOSSES
        return Settings(self._params, int(LOSS_CODES[m.loss]), float(m.loss_tau), bool(clip), bool(learn),
                        int(m.block_rows), int(m.classes), m.multiclass == "softmax",
                        math.nan if m.min_prediction is None else float(m.min_prediction),
                        math.nan if m.max_prediction is None else float(m.max_prediction))

    def table(self) -> Table:
        return Table(self.model.state, self.model.counters, self.model.scalars)

    # --- the door: one kernel call ---

    def process(self, batch: Batch, learn: bool, tally=None) -> Processed:
        """Predict every example of ``batch`` (learning from it when ``learn``),
        accounting into ``tally`` (the learner's own by default). The kernel
        releases the GIL."""
        tally = self.tally if tally is None else tally
        n = len(batch.labels)
        predictions = np.empty(n)
        table = self.table()
        settings = self.settings(learn)
        if self.model.classes:
            return self._process_multiclass(batch, learn, tally, table, settings)
        else:
            scores = None
            rows = self._kernels.run_chunk(table, settings, batch, tally, predictions)
        diverged_at = int(tally.stats[S_DIVERGED]) - 1
        tally.stats[S_DIVERGED] = 0.0
        return Processed(predictions, scores, int(rows), diverged_at)

    def _process_multiclass(self, batch, learn, tally, table, settings) -> Processed:
        """Multiclass labels as VW's --oaa reads them (oaa.cc): labels 1..K, or 0..K-1 once
        a 0 is learned from (0-indexed), or 1..K for good once K is; before either (or with
        --indexing) the model's indexing holds. The kernels know classes 1..K: labels are
        mapped in, predictions out; a batch where the indexing is decided runs as two calls."""
        m = self.model
        k = m.classes
        labels = batch.labels
        switch = -1
        if learn and m.indexing == INDEXING_UNDECIDED:
            deciding = np.flatnonzero((labels == 0.0) | (labels == k))
            switch = int(deciding[0]) if deciding.size else -1
        if switch < 0:
            return self._multiclass_call(batch, 0, len(labels), learn, tally, table, settings, m.indexing)
        first = None
        if switch > 0:
            first = self._multiclass_call(batch, 0, switch, learn, tally, table, settings, m.indexing)
            if first.diverged_at >= 0:
                return first
            saved = tally.progress[:first.progress_rows].copy()
        m.indexing = 0 if labels[switch] == 0.0 else 1
        rest = self._multiclass_call(batch, switch, len(labels), learn, tally, table, settings, m.indexing)
        if first is None:
            return rest
        rows = first.progress_rows + rest.progress_rows
        tally.progress[first.progress_rows:rows] = tally.progress[:rest.progress_rows].copy()
        tally.progress[:first.progress_rows] = saved
        return Processed(np.concatenate([first.predictions, rest.predictions]),
                         np.concatenate([first.scores, rest.scores]), rows,
                         rest.diverged_at + switch if rest.diverged_at >= 0 else -1,
                         np.concatenate([first.label_base, rest.label_base]))

    def _multiclass_call(self, batch, a, b, learn, tally, table, settings, indexing) -> Processed:
        k = self.model.classes
        labels = batch.labels[a:b]
        # Into the kernels' classes 1..K; 0 there is "no class" (every class a negative, a 0/1
        # loss of 1), which VW's oaa.cc gives a label outside the range (it warns).
        if indexing == 0:    # 0..K-1 -> classes 1..K
            inside = np.where(labels >= k, 0.0, labels + 1.0)
        else:                # 1..K; a 0 (indexing 1, or before any is learned) is outside
            inside = labels
        part = Batch(np.ascontiguousarray(inside), batch.importance[a:b], batch.base[a:b],
                     batch.row_ptr[a:b + 1], batch.index, batch.value, batch.feature_count[a:b])
        n = b - a
        predictions = np.empty(n)
        scores = np.empty((n, k))
        seen = tally.holdout[H_SEEN]
        rows = int(self._kernels.run_chunk_multiclass(table, settings, part, tally, predictions, scores))
        outside = np.flatnonzero((inside == 0.0) & ~np.isnan(labels))
        if outside.size:
            _vw_log_loss_outside(tally, part, labels, scores, outside, seen, indexing, k,
                                 self.model.multiclass == "softmax")
        diverged_at = int(tally.stats[S_DIVERGED]) - 1
        tally.stats[S_DIVERGED] = 0.0
        base = 0 if indexing == 0 else 1
        if base == 0:  # classes 1..K are the labels 0..K-1
            predictions -= 1.0
            from olcli.engine.records import R_LABEL, R_PREDICTION

            tally.progress[:rows, R_LABEL] -= 1.0
            tally.progress[:rows, R_PREDICTION] -= 1.0
        return Processed(predictions, scores, rows, diverged_at, np.full(n, base, np.int64))

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
        from olcli.parsing import batch_of

        if isinstance(examples, tuple) and len(examples) in (2, 3):
            return self._matrix_batch(*examples), []
        if isinstance(examples, np.ndarray) or hasattr(examples, "tocsr"):
            return self._matrix_batch(examples, None), []
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

    def _matrix_batch(self, X, y, weight=None) -> Batch:
        from olcli.engine.parse import csr_examples

        m = self.model
        if m.interactions:
            raise UsageError("interactions need namespaces: give VW lines, not a matrix, to a learner "
                             "with interactions")
        if m.input_format is None:
            m.input_format = "libsvm"
        elif m.input_format != "libsvm":
            raise UsageError(f"the model was trained on {m.input_format} input; a matrix is libsvm input "
                             "(column j = libsvm index j) and would hash features differently")
        indptr, indices, data, n = _csr_parts(X)
        labels = np.full(n, np.nan) if y is None else _vector(y, n, "y")
        importance = np.ones(n) if weight is None else _vector(weight, n, "weight")
        bad = np.flatnonzero(~np.isfinite(data))
        if bad.size:
            row = int(np.searchsorted(indptr, bad[0], side="right") - 1)
            raise DataError(f"X row {row}, column {int(indices[bad[0]])}: NaN or infinite value ({data[bad[0]]})")
        if y is not None and not np.all(np.isfinite(labels)):
            row = int(np.flatnonzero(~np.isfinite(labels))[0])
            raise DataError(f"y[{row}]: NaN or infinite label ({labels[row]})")
        if not np.all(np.isfinite(importance) & (importance >= 0)):
            row = int(np.flatnonzero(~(np.isfinite(importance) & (importance >= 0)))[0])
            raise DataError(f"weight[{row}]: importance must be a finite number >= 0 (got {importance[row]})")
        keep = self.feature_spec.namespace_mode[ord(" ")] == 0
        mask = (1 << m.bits) - 1
        out_labels, row_ptr, index, value, feature_count, bad_row = csr_examples(
            indptr, indices, data, labels, mask, (1 << m.bits) if m.constant else -1, self.label_kind, keep)
        if bad_row >= 0:
            wanted = (f"a class number 0..{m.classes}" if m.classes else "-1 or +1 (or 0/1) for this loss")
            raise DataError(f"y[{bad_row}]: label must be {wanted} (got {labels[bad_row]:g})")
        return Batch(out_labels, importance, np.zeros(n), row_ptr, index, value, feature_count)

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
        return self._kernels.weights_at(self.table(), self.settings(False), np.asarray(rows, np.int64))

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
        model_file.save(self.model, os.fspath(path))

    def to_bytes(self) -> bytes:
        return model_file.encode(self.model)

    @classmethod
    def from_bytes(cls, raw: bytes, name: str = "<bytes>") -> "Learner":
        return cls.from_model(model_file.decode(bytes(raw), name))

    def copy(self) -> "Learner":
        """An independent learner with the same model and summary so far."""
        return _restore(self.to_bytes(), self.input_format_option, tuple(self.tally))

    @classmethod
    def merge(cls, learners, base: "Learner | None" = None) -> "Learner":
        """Combine learners that each learned a separate shard starting from ``base``
        (the common starting learner; None = a fresh one) with the algorithm's merge
        rule (each algorithm module's ``merge``; docs, "Python API"). Counters add the
        shards' increments over the base. An algorithm with global scalars (registry
        ``scalars``: --gd, --coin) gets them too: its ``merge`` takes
        ``base_scalars``/``shard_scalars`` (it may need them for the weights) and
        its module-level ``merge_scalars`` gives the merged learner's. One learner:
        an exact copy of it."""
        learners = list(learners)
        if not learners:
            raise UsageError("merge needs at least one learner")
        for k, other in enumerate(learners + ([base] if base is not None else [])):
            if not isinstance(other, Learner):
                what = "base" if k == len(learners) else f"learners[{k}]"
                raise UsageError(f"merge takes olcli Learner objects: {what} is a {type(other).__name__} ({other!r:.40})")
        first = learners[0].model
        for other in learners[1:] + ([base] if base is not None else []):
            _check_compatible(first, other.model)
        if len(learners) == 1:
            return learners[0].copy()
        # Every merge rule works row by row and keeps a row that is zero in the base and
        # in every shard at zero: the rules run on the rows some learner touched only.
        touched = [model_file.nonzero_rows(lr.model.state) for lr in learners]
        if base is None:
            base_counters = np.zeros_like(first.counters)
        else:
            base_counters = base.model.counters
            touched.append(model_file.nonzero_rows(base.model.state))
        rows = np.unique(np.concatenate(touched))
        base_state = (np.zeros((len(rows), first.state.shape[1])) if base is None
                      else base.model.state[rows])
        kernels, spec, params = learners[0]._kernels, learners[0]._spec, learners[0]._params
        shard_weights = [float(lr.model.counters[C_WEIGHT] - base_counters[C_WEIGHT]) for lr in learners]
        arguments = (base_state, [lr.model.state[rows] for lr in learners], params, float(base_counters[C_ROUNDS]),
                     [float(lr.model.counters[C_ROUNDS]) for lr in learners], shard_weights)
        scalars = first.scalars
        if spec.scalars:
            base_scalars = (np.array(spec.initial_scalars(first.params), dtype=np.float64) if base is None
                            else base.model.scalars)
            shard_scalars = [lr.model.scalars for lr in learners]
            state = kernels.merge(*arguments, base_scalars=base_scalars, shard_scalars=shard_scalars)
            scalars = kernels.merge_scalars(base_scalars, shard_scalars, *arguments[2:])
        else:
            state = kernels.merge(*arguments)
        counters = base_counters.copy()
        additive = list(ADDITIVE_COUNTERS)
        counters[additive] += sum(lr.model.counters[additive] - base_counters[additive] for lr in learners)
        counters[C_MIN_LABEL] = min(lr.model.counters[C_MIN_LABEL] for lr in learners)
        counters[C_MAX_LABEL] = max(lr.model.counters[C_MAX_LABEL] for lr in learners)
        merged = learners[0].copy()
        full = model_file.zeroed_state(*first.state.shape)
        full[rows] = state
        merged.model.state = full
        merged.model.counters = counters
        merged.model.scalars = np.array(scalars, dtype=np.float64, copy=True)
        merged.reset_summary()
        return merged

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


def _restore(raw: bytes, input_format: str, tally) -> Learner:
    learner = Learner.from_model(model_file.decode(raw, "<pickle>"), input_format)
    learner.tally = type(learner.tally)(*(np.array(a) for a in tally))
    return learner


def load(path) -> Learner:
    """A learner from a model file written by ``olcli train -f`` or ``Learner.save``."""
    return Learner.from_model(model_file.load(os.fspath(path)))


def _vw_log_loss_outside(tally, part, labels, scores, outside, seen, indexing, k, softmax) -> None:
    """The multiclass log loss of an example whose label is outside the classes, as VW's
    oaa.cc takes it: the probability of class ((label if 0-indexed else label - 1) mod 2^32)
    mod K (the kernels, knowing no class, took class K's). Held-out examples are not in it."""
    from olcli.engine.multiclass import log_probabilities
    from olcli.engine.records import H_PERIOD, S_LOG_LOSS

    period = tally.holdout[H_PERIOD]
    log_probs = np.empty(k)
    for e in outside:
        if period > 0 and (seen + e + 1) % period == 0:
            continue
        label = int(labels[e])
        index = ((label if indexing == 0 else label - 1) & 0xFFFFFFFF) % k
        log_probabilities(scores[e], softmax, log_probs)
        tally.stats[S_LOG_LOSS] += part.importance[e] * (log_probs[k - 1] - log_probs[index])


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


def _check_compatible(a: model_file.Model, b: model_file.Model) -> None:
    """The settings whose merge rule is "equal" (settings.MERGE_EQUAL) must agree; the input
    format too, once both know it."""
    difference = merge_difference(a, b)
    if difference:
        what, left, right = difference
        raise UsageError(f"cannot merge learners with different {what}: {left!r} and {right!r}")
    if a.input_format and b.input_format and a.input_format != b.input_format:
        raise UsageError(f"cannot merge learners of {a.input_format} and {b.input_format} input")


def _refuse_complex(values, what: str) -> None:
    if np.iscomplexobj(values):
        raise DataError(f"{what} has complex values (dtype {np.asarray(values).dtype}): give real numbers "
                        "(the imaginary part would be dropped)")


def _vector(values, n: int, what: str) -> np.ndarray:
    _refuse_complex(values, what)
    out = np.asarray(values, dtype=np.float64).reshape(-1)
    if out.shape[0] != n:
        raise UsageError(f"{what} has {out.shape[0]} entries but X has {n} rows")
    return np.ascontiguousarray(out)


def _csr_parts(X):
    """(indptr int64, indices int64, data float64, rows) of a dense or sparse matrix,
    column indices increasing within a row."""
    if hasattr(X, "tocsr"):
        csr = X.tocsr()
        if csr.ndim != 2:
            raise UsageError("X must be a 2-dimensional matrix")
        _refuse_complex(csr.data, "X")
        if csr.indices.size and int(csr.indices.min()) < 0:
            at = int(np.flatnonzero(np.asarray(csr.indices) < 0)[0])
            row = int(np.searchsorted(csr.indptr, at, side="right") - 1)
            raise DataError(f"X row {row}: negative column index {int(csr.indices[at])} (a damaged sparse matrix; "
                            "column indices are 0 or more)")
        if not csr.has_sorted_indices:
            csr = csr.sorted_indices()
        return (np.asarray(csr.indptr, np.int64), np.asarray(csr.indices, np.int64),
                np.asarray(csr.data, np.float64), csr.shape[0])
    _refuse_complex(X, "X")
    dense = np.asarray(X, dtype=np.float64)
    if dense.ndim == 1:
        dense = dense.reshape(1, -1)
    if dense.ndim != 2:
        raise UsageError(f"X must be a 2-dimensional matrix (got {dense.ndim} dimensions)")
    nonzero = dense != 0.0
    rows, columns = np.nonzero(nonzero)
    indptr = np.zeros(dense.shape[0] + 1, np.int64)
    np.cumsum(nonzero.sum(axis=1), out=indptr[1:])
    return indptr, columns.astype(np.int64), dense[rows, columns], dense.shape[0]
