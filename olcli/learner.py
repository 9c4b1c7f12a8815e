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
    ADDITIVE_COUNTERS, C_EXAMPLES, C_MAX_LABEL, C_MIN_LABEL, C_ROUNDS, C_WEIGHT, COUNTER_NAMES, N_COUNTERS,
    H_SEEN, S_DIVERGED, S_LOSS, S_WEIGHT, Batch, Settings, Table, new_tally)
from olcli.errors import DataError, Diverged, OlcliError, UsageError
from olcli.memory import available_memory, meminfo
from olcli.settings import KEYWORDS, merge_difference

KEYWORD_NAMES = frozenset(row.name for row in KEYWORDS)

from olcli.settings import (  # noqa: F401  (the limits, re-exported for the library's users)
    FORMATS, HASHES, INDEXING_ONE, INDEXING_UNDECIDED, INDEXING_ZERO, LINKS, MAX_BITS, MAX_CLASSES, MAX_INTERACTION)


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


def _interaction_specs(interactions) -> list:
    if interactions is None:
        return []
    specs = [interactions] if isinstance(interactions, str) else list(interactions)
    for spec in specs:
        if not isinstance(spec, str) or not 2 <= len(spec) <= MAX_INTERACTION:
            raise UsageError(f"interaction {spec!r}: expected 2 to {MAX_INTERACTION} namespace letters "
                             "(first letters of namespaces, ':' for any)")
    return specs


def _letters(what: str, value) -> str:
    value = value or ""
    if not isinstance(value, str):
        value = "".join(value)
    return value  # any Unicode letter: engine.features.namespace_letters maps it to its namespace byte


# What a run needs besides the rows it touches (the interpreter, the compiled kernels,
# the parser's buffers): a run starts only with this much available, and is stopped
# (what it learned written) when less than MEMORY_RESERVE is left (MemoryGuard).
MEMORY_FLOOR = 256 << 20
MEMORY_RESERVE = 512 << 20


def check_memory(bits: int, n_slots: int, classes: int, copies: int = 1) -> None:
    """Refuse a run that cannot start. The table is mapped without reserving memory
    (model.zeroed_state): it costs the pages its examples touch, not 2^bits rows x
    slots, so what is judged here is what the run touches before its first example
    (MEMORY_FLOOR) and the table's address space; MemoryGuard watches the rest.
    ``copies`` is accepted for the callers' sake (a kept best pass now copies only
    its touched rows)."""
    rows = max(1, classes) * model_file.table_rows(bits)
    available = available_memory()
    gib = 1 << 30
    if available is not None and available < MEMORY_FLOOR:
        raise UsageError(f"only {available / gib:.2f} GiB of memory is available; a run needs at least "
                         f"{MEMORY_FLOOR / gib:.2f} GiB besides the rows of -b {bits}'s table it touches")
    table = rows * n_slots * 8
    total = meminfo("MemTotal")
    limit = TABLE_SPACE_FACTOR * total if total else 1 << 46
    if table > limit:
        raise UsageError(f"-b {bits}{f' with {classes} classes' if classes else ''} is a table of {rows:,} rows x "
                         f"{n_slots} slots ({table / gib:,.0f} GiB of address space), more than "
                         f"{TABLE_SPACE_FACTOR} x this machine's {total / gib:.0f} GiB of memory that olcli maps: "
                         "use a smaller -b")


# A table may span at most this many times the machine's memory: its untouched pages cost
# nothing, but every save walks its page map (about 0.15 s per 26 GiB) and a touched page
# costs a page-table entry besides its 4 KiB.
TABLE_SPACE_FACTOR = 16


class MemoryGuard:
    """Stops a run before the machine runs out of memory: ``check()`` (after each
    kernel call; it reads /proc/meminfo at most every ``every`` seconds) raises
    OlcliError when less than ``reserve`` bytes are available, so that the run ends
    the way an interrupted one does, with what it learned written (saving needs
    memory for the touched rows only, which the reserve leaves)."""

    def __init__(self, reserve: int = MEMORY_RESERVE, every: float = 0.05):
        self.reserve, self.every, self._next = reserve, every, 0.0

    def check(self) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every
        available = available_memory()
        if available is not None and available < self.reserve:
            raise OlcliError(f"out of memory: only {available / (1 << 20):.0f} MiB of memory is left (the "
                             f"rows this run touched, at {self.reserve >> 20} MiB kept in reserve); stopped "
                             "before the system would kill it: use a smaller -b, fewer interactions or "
                             "fewer classes")


def check_tau(quantile_tau) -> float:
    tau = 0.5 if quantile_tau is None else float(quantile_tau)
    if not 0.0 < tau < 1.0:
        raise UsageError(f"quantile_tau (--quantile-tau) must be between 0 and 1 (got {tau:g})")
    return tau


# VW's initial label range (shared_data): [0, 0], widened by the labels seen;
# [-50, 50] for the logistic loss, whose labels are -1/+1 but whose scores are not.
INITIAL_LABEL_RANGE = {"logistic": (-50.0, 50.0), "poisson": (-50.0, 50.0)}


def new_model(algorithm=None, loss=None, bits=None, interactions=(), *, oaa=None, softmax=None, copies: int = 1,
              **options) -> model_file.Model:
    """A fresh model, every option checked (the messages name the CLI spelling too).

    ``options``: the settings table's keywords (settings.KEYWORDS; None or not given: the
    row's default) and the algorithm's hyper-parameters by their registry names."""
    from olcli.parsing import check_grams

    hyper = {name: value for name, value in options.items() if name not in KEYWORD_NAMES}
    given = {**options, "loss": loss, "bits": bits, "interactions": interactions}
    s = {row.name: row.default if given.get(row.name) is None else given[row.name] for row in KEYWORDS}
    loss, bits, interactions, link, constant = s["loss"], s["bits"], s["interactions"], s["link"], s["constant"]
    ignore, keep, ignore_linear, quantile_tau = s["ignore"], s["keep"], s["ignore_linear"], s["quantile_tau"]
    ngram, skips, hash_seed, hash, indexing = s["ngram"], s["skips"], s["hash_seed"], s["hash"], s["indexing"]
    permutations, leave_duplicate_interactions = s["permutations"], s["leave_duplicate_interactions"]
    min_prediction, max_prediction = s["min_prediction"], s["max_prediction"]
    initial_weight, initial_constant = s["initial_weight"], s["initial_constant"]

    ngram, skips = [str(v) for v in ngram or ()], [str(v) for v in skips or ()]
    check_grams(ngram, skips)
    if hash not in HASHES:
        raise UsageError(f"hash (--hash) must be one of {', '.join(HASHES)} (got {hash!r})")
    if not isinstance(hash_seed, (int, np.integer)) or not 0 <= hash_seed < 2 ** 32:
        raise UsageError(f"hash_seed (--hash-seed) must be a whole number 0 to 2^32-1 (got {hash_seed})")
    spec = registry.get(algorithm or registry.DEFAULT_ALGORITHM)
    params = spec.resolve(hyper)
    if oaa is not None and softmax is not None:
        raise UsageError("choose oaa (--oaa) or softmax (--softmax), not both")
    mode, classes = ("oaa", oaa) if oaa is not None else ("softmax", softmax) if softmax is not None else ("", 0)
    if mode and (not isinstance(classes, (int, np.integer)) or not 2 <= classes <= MAX_CLASSES):
        raise UsageError(f"--{mode} takes the number of classes, 2 to {MAX_CLASSES} (got {classes})")
    if mode == "softmax":
        if loss not in (None, "logistic"):
            raise UsageError("--softmax learns the multinomial logistic loss; drop --loss (or use --oaa)")
        loss = "logistic"
    loss = loss or "squared"
    if loss not in LOSS_CODES:
        raise UsageError(f"loss (--loss) must be one of {', '.join(LOSS_CODES)} (got {loss!r})")
    link = link or "identity"
    if link not in LINKS:
        raise UsageError(f"link (--link) must be one of {', '.join(LINKS)} (got {link!r})")
    bits = 18 if bits is None else bits
    if not isinstance(bits, (int, np.integer)) or not 1 <= bits <= MAX_BITS:
        raise UsageError(f"bits (-b/--bits) must be between 1 and {MAX_BITS} (got {bits})")
    check_memory(bits, len(spec.slots), classes, copies)
    counters = np.zeros(N_COUNTERS)
    counters[C_MIN_LABEL], counters[C_MAX_LABEL] = INITIAL_LABEL_RANGE.get(loss, (0.0, 0.0))
    for name, value in (("min_prediction (--min-prediction)", min_prediction),
                        ("max_prediction (--max-prediction)", max_prediction)):
        if value is not None and not math.isfinite(value):
            raise UsageError(f"{name} must be a finite number (got {value})")
    if min_prediction is not None and max_prediction is not None and min_prediction > max_prediction:
        raise UsageError(f"min_prediction ({min_prediction:g}) is above max_prediction ({max_prediction:g})")
    if indexing not in (None, 0, 1):
        raise UsageError(f"indexing (--indexing) must be 0 or 1 (got {indexing!r})")
    if indexing is not None and not mode:
        raise UsageError("--indexing is for --oaa/--softmax labels")
    initial_weight = 0.0 if initial_weight is None else initial_weight
    if not isinstance(initial_weight, (int, float, np.number)) or not math.isfinite(initial_weight):
        raise UsageError(f"initial_weight (--initial-weight) must be a finite number (got {initial_weight})")
    if initial_weight != 0.0 and spec.name not in model_file.INITIAL_WEIGHT_ALGORITHMS:
        raise UsageError(f"--initial-weight: --{spec.name} does not keep its weights as state (they follow from "
                         f"its sums); it works with --{', --'.join(model_file.INITIAL_WEIGHT_ALGORITHMS)}")
    initial_constant = 0.0 if initial_constant is None else initial_constant
    if not isinstance(initial_constant, (int, float, np.number)) or not math.isfinite(initial_constant):
        raise UsageError(f"initial_constant (--constant) must be a finite number (got {initial_constant})")
    if initial_constant != 0.0 and spec.name not in model_file.INITIAL_WEIGHT_ALGORITHMS:
        raise UsageError(f"--constant with --{spec.name}: not supported; --{spec.name} keeps no weights to start "
                         f"from (they follow from its sums; VW's --constant sets the weight of its gd learners "
                         f"only); olcli takes it with --{', --'.join(model_file.INITIAL_WEIGHT_ALGORITHMS)}")
    if initial_constant != 0.0 and not constant:
        raise UsageError("--constant with --noconstant: there is no constant feature to start at "
                         f"{initial_constant:g}")
    state = model_file.zeroed_state(max(1, classes) * model_file.table_rows(bits), len(spec.slots))
    if initial_weight != 0.0:
        state[:, 0] = float(initial_weight)  # VW: every weight, the constant's included
    if initial_constant != 0.0:
        # VW's --constant: the constant's weight (after --initial_weight); with --oaa that of
        # the first class only, as VW sets the one weight at the constant's index
        state[model_file.table_rows(bits) - 1, 0] = float(initial_constant)
    return model_file.Model(
        counters=counters, scalars=np.array(spec.initial_scalars(params), dtype=np.float64),
        min_prediction=None if min_prediction is None else float(min_prediction),
        max_prediction=None if max_prediction is None else float(max_prediction),
        algorithm=spec.name, params=params, bits=int(bits), loss=loss, loss_tau=check_tau(quantile_tau),
        link=link, input_format=None, constant=bool(constant),
        state=state, slots=spec.slots, initial_weight=float(initial_weight),
        initial_constant=float(initial_constant),
        indexing=INDEXING_UNDECIDED if indexing is None else int(indexing),
        interactions=_interaction_specs(interactions), ignore=_letters("ignore (--ignore)", ignore),
        keep=_letters("keep (--keep)", keep), ignore_linear=_letters("ignore_linear (--ignore-linear)", ignore_linear),
        classes=int(classes), multiclass=mode, ngram=ngram, skips=skips, hash_seed=int(hash_seed),
        permutations=bool(permutations), leave_duplicate_interactions=bool(leave_duplicate_interactions),
        hash=hash)


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


def _spelled_out(function):
    """``function``'s signature with the settings table's keywords (settings.KEYWORDS) and
    their defaults spelled out, for help() and the docs; the rest of ``**options`` are the
    algorithm's hyper-parameters (``**hyper``)."""
    from inspect import Parameter, signature

    original = signature(function)
    named = [p for p in original.parameters.values() if p.kind != p.VAR_KEYWORD]
    present = {p.name for p in named}
    keywords = [Parameter(row.name, Parameter.KEYWORD_ONLY, default=row.default)
                for row in KEYWORDS if row.name not in present]
    return original.replace(parameters=named + keywords + [Parameter("hyper", Parameter.VAR_KEYWORD)])


Learner.__init__.__signature__ = _spelled_out(Learner.__init__)
new_model.__signature__ = _spelled_out(new_model)


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
