"""Passes over the inputs: parse chunk by chunk, predict, learn, report.

Python works per chunk (a few MiB of lines); everything per example or per
token happens in the numba kernels. With --passes N > 1 the first pass writes
the parsed chunks to a cache (olcli/cache.py) that later passes read, every
holdout-period-th example is held out, and the model of the pass with the best
holdout loss is kept.
"""

import os
import queue
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from olcli import __version__
from olcli import cache as example_cache
from olcli.engine import driver, multiclass
from olcli.engine.format import format_predictions
from olcli.engine.losses import BINARY_LOSSES, LOSS_CODES, UNBOUNDED_LOSSES
from olcli.engine.registry import ALGORITHMS
from olcli.errors import DataError, Diverged
from olcli.inputs import CHUNK_BYTES, detect_format, input_size, read_chunks
from olcli.model import COUNTER_NAMES, Model
from olcli.names import name_of
from olcli.parsing import FeatureSpec, parse_chunk
from olcli.report import ProgressBar, ProgressTable, progress_records, summarize
from olcli.signals import StopSignals

MAX_WARNINGS = 5
PARSE_AHEAD = 2   # chunks parsed ahead on worker threads


@dataclass
class RunOptions:
    sources: list
    learn: bool
    input_format: str = "auto"     # auto | vw | libsvm
    strict: bool = False
    quiet: bool = False
    progress: bool = False         # --progress: a bar instead of the table, on a terminal
    chunk_bytes: int = CHUNK_BYTES
    passes: int = 1
    holdout_period: int = 10       # used when passes > 1; 0 = --holdout-off
    early_terminate: int = 3       # stop after this many passes without a better holdout loss
    cache_path: str | None = None  # --cache; default <first data file>.olcache when passes > 1
    kill_cache: bool = False       # -k: rebuild the cache
    audit: bool = False            # --audit: every example's features, indices, values, weights on stdout
    names: object = None           # a names.FeatureNames to fill (--invert-hash)

    @property
    def caching(self) -> bool:
        return self.passes > 1 or self.cache_path is not None

    @property
    def holdout(self) -> int:
        return self.holdout_period if self.passes > 1 else 0


@dataclass
class RunResult:
    report: dict
    bad_lines: int = 0
    bad_line_samples: list = field(default_factory=list)


class PredictionWriter:
    """-p: one prediction per example, with its tag; '-' is standard output.

    Multiclass: the predicted class, or with --probabilities VW's
    ``1:p1 2:p2 ... K:pK`` (softmax, or normalized sigmoids for OAA)."""

    def __init__(self, path: str, link: str, model: Model | None = None, probabilities: bool = False):
        self.link = link
        self.classes = model.classes if model is not None else 0
        self.mode = multiclass.SOFTMAX if model is not None and model.multiclass == "softmax" else multiclass.OAA
        self.probabilities = probabilities
        self.stream = sys.stdout.buffer if path == "-" else open(path, "wb")

    def write_classes(self, predictions: np.ndarray, scores: np.ndarray, parsed, data: np.ndarray) -> None:
        n = parsed.n_examples
        if not self.probabilities:
            self.stream.write(format_predictions(predictions[:n], n, parsed.tags, data, True).tobytes())
            return
        lines = []
        log_probs = np.empty(self.classes)
        for e in range(n):  # one line of K numbers: Python per example is fine next to formatting K values
            multiclass.log_probabilities(scores[e], self.mode, log_probs)
            text = " ".join(f"{k + 1}:{p:.6f}" for k, p in enumerate(np.exp(log_probs)))
            start, end = parsed.tags[e]
            tag = b" " + data[start:end].tobytes() if end > start else b""
            lines.append(text.encode() + tag + b"\n")
        self.stream.write(b"".join(lines))

    def write(self, predictions: np.ndarray, parsed, data: np.ndarray) -> None:
        values = predictions[:parsed.n_examples]
        if self.link == "logistic":
            values = 1.0 / (1.0 + np.exp(-np.clip(values, -700.0, 700.0)))
        self.stream.write(format_predictions(values, parsed.n_examples, parsed.tags, data, False).tobytes())

    def close(self) -> None:
        if self.stream is sys.stdout.buffer:
            self.stream.flush()
        else:
            self.stream.close()


def run(model: Model, options: RunOptions, predictions: PredictionWriter | None = None,
        stderr=None, result: RunResult | None = None) -> RunResult:
    """Stream the inputs through the model, filling ``result`` (made if not given).

    On an error, ``--strict`` or a signal the exception propagates, and
    ``result.report`` and the model hold everything learned up to that point,
    so the caller can still save and report it. SIGINT/SIGTERM stop the run
    between chunks (olcli/signals.py)."""
    session = _Session(model, options, predictions, stderr if stderr is not None else sys.stderr,
                       result if result is not None else RunResult(report={}))
    started = time.perf_counter()
    try:
        with StopSignals() as signals:
            for pass_number in range(1, options.passes + 1):
                session.start_pass(pass_number)
                for item in session.pass_chunks(pass_number, signals):
                    session.process(*item)
                    signals.check()
                if session.bar is not None:
                    session.bar.finish_pass()
                if session.end_pass():
                    break
    finally:
        session.finish(time.perf_counter() - started)
    return session.result


class _Session:
    """The state of one run: engine arrays, statistics, progress records."""

    def __init__(self, model: Model, options: RunOptions, predictions, stderr, result: RunResult):
        self.model, self.options, self.predictions, self.stderr, self.result = \
            model, options, predictions, stderr, result
        algorithm = ALGORITHMS[model.algorithm]
        self.algorithm_code = algorithm.code
        self.params = np.array([model.params[name] for name in algorithm.params], dtype=np.float64)
        self.loss_code = LOSS_CODES[model.loss]
        clip = algorithm.unbounded_loss_clipped and model.loss in UNBOUNDED_LOSSES
        self.loss_params = np.array([model.loss_tau, 1.0 if clip else 0.0])
        self.label_kind = model.classes or (1 if model.loss in BINARY_LOSSES else 0)
        self.multiclass_mode = multiclass.SOFTMAX if model.multiclass == "softmax" else multiclass.OAA
        self.stats = driver.new_stats()
        self.auc_histogram = np.zeros((2, driver.AUC_BINS))
        self.progress = np.zeros((driver.MAX_PROGRESS_ROWS, driver.N_PROGRESS_COLUMNS))
        self.counters = np.array([model.counters[name] for name in COUNTER_NAMES])
        self.features = FeatureSpec.build(model.interactions, model.ignore, model.keep, model.ignore_linear)
        self.table = None if options.quiet or options.progress else ProgressTable(stderr)
        self.bar = ProgressBar(stderr) if options.progress and _is_terminal(stderr) else None
        if self.bar is not None:
            self.stderr = self.bar  # warnings are printed above the bar
        self.pass_examples = 0
        self.records = []
        self.input_format = None if options.input_format == "auto" else options.input_format
        self.pass_number = 0
        self.holdout = driver.new_holdout()
        self.cache_path, self.cache_temporary, self.cache_reused = None, False, False
        self.pass_losses, self.best_loss, self.best_pass = [], float("inf"), None
        self.passes_since_best, self.best_snapshot = 0, None
        self.audit_chunk = None

    # --- passes and the cache ---

    def _cache_header(self) -> dict:
        model = self.model
        return {"olcli_version": __version__, "sources": example_cache.fingerprint(self.options.sources),
                "parse": {"format_option": self.options.input_format, "bits": model.bits,
                          "constant": model.constant, "label_kind": self.label_kind,
                          "interactions": list(model.interactions), "ignore": model.ignore,
                          "keep": model.keep, "ignore_linear": model.ignore_linear}}

    def _cache_location(self) -> tuple:
        """(path, temporary): --cache, else beside the first data file, else a temporary file."""
        options = self.options
        if options.cache_path:
            return options.cache_path, False
        first = options.sources[0]
        if first != "-" and os.access(os.path.dirname(os.path.abspath(first)), os.W_OK):
            return first + ".olcache", False
        fd, path = tempfile.mkstemp(prefix="olcli-", suffix=".olcache")
        os.close(fd)
        return path, True

    def start_pass(self, pass_number: int) -> None:
        self.pass_number = pass_number
        self.holdout = driver.new_holdout(self.options.holdout, report_rows=pass_number > 1 and
                                          self.options.holdout > 0)

    def pass_chunks(self, pass_number: int, signals):
        """(parsed chunk, bytes its tags point into, bad line to stop at) per chunk."""
        if pass_number == 1:
            header = self._cache_header() if self.options.caching else None
            if self.options.caching:
                self.cache_path, self.cache_temporary = self._cache_location()
                if not self.options.kill_cache and example_cache.usable(self.cache_path, header, self.options.sources):
                    self.cache_reused = True
            if not self.cache_reused:
                self._start_bar(input_size(self.options.sources))  # bytes of the files
                yield from self._parse_sources(signals, header)
                return
            if self.input_format is None:
                self._set_format(example_cache.header(self.cache_path)["format"], self.cache_path)
        self._start_bar(self.pass_examples if pass_number > 1 else None)  # examples in the cache
        for cached in example_cache.read(self.cache_path):
            yield cached, cached.data, None, None, None

    def _start_bar(self, total) -> None:
        if self.bar is not None:
            self.bar.start_pass(self.pass_number, total)

    def _parsed_ahead(self, signals):
        """(chunk, parsed chunk) in input order.

        A reader thread reads the input (files, compressed files or a pipe) and
        hands each chunk to a parse worker; the parse kernels release the GIL, so
        reading, parsing and learning overlap on both cores, for pipes as for
        files. At most PARSE_AHEAD chunks are read ahead of the one being learned
        (memory stays constant), and each is learned as soon as it is parsed, so
        a slow pipe (tail -f) is learned as it arrives, a chunk at a time. Errors of the reader
        (a damaged archive) surface here, after the chunks before them."""
        model, options = self.model, self.options
        jobs = queue.Queue()
        slots = threading.Semaphore(PARSE_AHEAD)
        stop = threading.Event()
        pool = ThreadPoolExecutor(max_workers=PARSE_AHEAD, thread_name_prefix="olcli-parse")

        def take_slot():
            while not stop.is_set():
                if slots.acquire(timeout=0.1):
                    return True
            return False

        def read():
            try:
                chunks = read_chunks(options.sources, options.chunk_bytes)
                while take_slot():
                    chunk = next(chunks, None)
                    if chunk is None:
                        break
                    if self.input_format is None:
                        self._set_format(detect_format(chunk.data), chunk.source)
                    jobs.put((chunk, pool.submit(parse_chunk, chunk, self.input_format, model.bits,
                                                 model.constant, self.label_kind, self.features)))
                jobs.put(None)
            except BaseException as exc:  # handed to the main thread, which raises it
                jobs.put(exc)

        # A daemon: blocked on a quiet pipe, it must not keep the process alive.
        threading.Thread(target=read, name="olcli-reader", daemon=True).start()
        try:
            while True:
                with signals.waiting_for_input():
                    job = jobs.get()
                if job is None:
                    return
                if isinstance(job, BaseException):
                    raise job
                chunk, future = job
                parsed = future.result()
                slots.release()
                yield chunk, parsed
        finally:
            stop.set()
            pool.shutdown(wait=False, cancel_futures=True)

    def _parse_sources(self, signals, header):
        model, options = self.model, self.options
        writer = None
        try:
            for chunk, parsed in self._parsed_ahead(signals):
                stop = None
                if parsed.bad_lines and options.strict:
                    # Learn what precedes the bad line, then stop.
                    stop = parsed.bad_lines[0]
                    parsed.n_examples = int(np.searchsorted(
                        parsed.example_line[:parsed.n_examples], stop.line - chunk.first_line + 1))
                else:
                    _report_bad_lines(parsed.bad_lines, self.result, self.stderr)
                if header is not None and writer is None:
                    writer = example_cache.CacheWriter(self.cache_path, {**header, "format": self.input_format})
                if writer is not None:
                    writer.add(parsed, chunk.data)
                if options.audit or options.names is not None:
                    named = parse_chunk(chunk, self.input_format, model.bits, model.constant, self.label_kind,
                                        self.features, record=True)
                    if options.names is not None:
                        options.names.add(named, chunk.data)
                    if options.audit:
                        self.audit_chunk = named
                yield parsed, chunk.data, stop, (chunk.source, chunk.first_line), chunk.position
            if writer is not None:
                writer.commit()
                writer = None
        finally:
            if writer is not None:
                writer.abort()

    def _set_format(self, detected: str, source: str) -> None:
        model = self.model
        if model.input_format and detected != model.input_format:
            raise DataError(
                f"{source} looks like {detected} input, but the model was trained "
                f"on {model.input_format} input (features would hash differently); "
                f"pass --format {model.input_format} if the data really is {model.input_format}")
        self.input_format = detected

    def end_pass(self) -> bool:
        """After a pass: track the best holdout loss; True when the run should stop early."""
        if not self.options.holdout:
            return False
        weight = self.holdout[driver.H_WEIGHT]
        loss = self.holdout[driver.H_LOSS] / weight if weight > 0 else float("inf")
        self.pass_losses.append(loss)
        if loss < self.best_loss:
            self.best_loss, self.best_pass, self.passes_since_best = loss, self.pass_number, 0
            self.best_snapshot = (self.model.state.copy(), self.counters.copy())
        else:
            self.passes_since_best += 1
        return self.passes_since_best >= self.options.early_terminate

    # --- one chunk ---

    def process(self, parsed, data, stop, origin=None, done=None) -> None:
        """One chunk; ``done``: bytes of the input files read so far (None when unknown)."""
        self.origin, self.parsed = origin, parsed
        if self.audit_chunk is not None:
            named, self.audit_chunk = self.audit_chunk, None
            for e in range(parsed.n_examples):
                self._audit_example(parsed, named, data, e)
        else:
            self._run(parsed, data, 0, parsed.n_examples)
        if self.pass_number == 1:
            self.pass_examples += parsed.n_examples
        if self.bar is not None:
            self.bar.advance(done, parsed.n_examples)
        if stop is not None:
            self.result.bad_lines += 1
            self.result.bad_line_samples.append(str(stop))
            raise DataError(f"{stop} (--strict stops at the first bad line)")

    def _audit_example(self, parsed, named, data, e) -> None:
        """VW's --audit: the prediction, then each feature occurrence as
        name:index:value:weight (the weight before this example's update; one
        weight per class, comma-separated, for multiclass)."""
        model = self.model
        lo, hi = int(named.row_ptr[e]), int(named.row_ptr[e + 1])
        rows = named.index[lo:hi].astype(np.int64)
        per_class = [driver.weights_at(self.algorithm_code, model.state, self.params, self.counters[driver.C_ROUNDS],
                                       rows + k * model.block_rows) for k in range(max(1, model.classes))]
        prediction = self._run(parsed, data, e, e + 1)
        fields = []
        for j in range(hi - lo):
            weight = ",".join(f"{w[j]:.6g}" for w in per_class)
            fields.append(f"{name_of(named.names, data, lo + j)}:{rows[j]}:{named.value[lo + j]:.6g}:{weight}")
        start, end = parsed.tags[e]
        tag = " " + data[start:end].tobytes().decode("utf-8", errors="replace") if end > start else ""
        shown = f"{int(prediction)}" if model.classes else f"{prediction:.6f}"
        sys.stdout.write(f"{shown}{tag}\n\t" + "\t".join(fields) + "\n")

    def _run(self, parsed, data, first, last):
        """Examples first..last-1 of a chunk through the engine; returns the last prediction."""
        model, options = self.model, self.options
        n = last - first
        chunk_predictions = np.empty(n)
        labels, importance, base = parsed.labels[first:last], parsed.importance[first:last], parsed.base[first:last]
        row_ptr, feature_count = parsed.row_ptr[first:last + 1], parsed.feature_count[first:last]
        if model.classes:
            scores = np.empty((n, model.classes))
            n_rows = multiclass.run_chunk_multiclass(
                self.algorithm_code, model.state, self.params, model.block_rows, model.classes,
                self.multiclass_mode, self.loss_code, self.loss_params, options.learn, self.counters,
                n, labels, importance, base, row_ptr, parsed.index, parsed.value, feature_count,
                scores, chunk_predictions, self.stats, self.progress, self.holdout)
        else:
            n_rows = driver.run_chunk(
                self.algorithm_code, model.state, self.params, self.loss_code, self.loss_params, options.learn,
                self.counters, n, labels, importance, base, row_ptr, parsed.index, parsed.value, feature_count,
                chunk_predictions, self.stats, self.auc_histogram, self.progress, self.holdout)
        new_records = progress_records(self.progress[:n_rows], holdout=bool(self.holdout[driver.H_ROWS] > 0))
        self.records += new_records
        if self.table is not None:
            self.table.write(new_records)
        if self.stats[driver.S_DIVERGED] > 0:
            self._diverged(first + int(self.stats[driver.S_DIVERGED]) - 1)
        if self.predictions is not None:
            span = _Span(parsed, first, last)
            if model.classes:
                self.predictions.write_classes(chunk_predictions, scores, span, data)
            else:
                self.predictions.write(chunk_predictions, span, data)
        return chunk_predictions[-1] if n else None

    def _diverged(self, position: int) -> None:
        if self.origin is not None:
            source, first_line = self.origin
            where = f"{source} line {first_line + int(self.parsed.example_line[position]) - 1}"
        else:
            where = f"pass {self.pass_number}, example {int(self.holdout[driver.H_SEEN])}"
        learned = int(self.counters[driver.C_ROUNDS])
        advice = ("lower -l/--learning-rate" if "eta" in self.model.params or "alpha" in self.model.params
                  else "check the data for extreme values")
        raise Diverged(f"the model diverged at {where}: its prediction is not a finite number after "
                       f"{learned} updates; {advice}, or use --scinol2 (no learning rate)")

    def finish(self, elapsed: float) -> None:
        model = self.model
        if self.bar is not None:
            self.bar.close()
        if self.cache_temporary and self.cache_path and os.path.exists(self.cache_path):
            os.unlink(self.cache_path)
        if self.best_snapshot is not None and self.best_pass != self.pass_number:
            # -f keeps the pass with the best holdout loss.
            model.state[:] = self.best_snapshot[0]
            self.counters[:] = self.best_snapshot[1]
        if self.options.learn:
            model.counters = dict(zip(COUNTER_NAMES, self.counters.tolist()))
            if model.input_format is None:
                model.input_format = self.input_format
        report = summarize(self.stats, self.auc_histogram, model.loss, elapsed, model.classes)
        report.update({
            "olcli_version": __version__,
            "format": self.input_format,
            "algorithm": model.algorithm,
            "params": dict(model.params),
            "loss": model.loss,
            "bits": model.bits,
            "multiclass": model.multiclass or None,
            "classes": model.classes or None,
            "bad_lines": self.result.bad_lines,
            "bad_line_samples": self.result.bad_line_samples,
            "progress": self.records,
            "passes": self.pass_number,
            "holdout_period": self.options.holdout,
            "holdout_losses": [x if x != float("inf") else None for x in self.pass_losses],
            "best_pass": self.best_pass,
            "cache": None if self.cache_temporary else self.cache_path,
            "cache_reused": self.cache_reused,
        })
        if self.best_pass is not None:
            # After several passes the honest number is the holdout loss of the kept model.
            report["average_loss"] = self.best_loss
            report["average_loss_is_holdout"] = True
        else:
            report["average_loss_is_holdout"] = False
        self.result.report = report


class _Span:
    """Examples first..last-1 of a parsed chunk, as the prediction writer sees them."""

    def __init__(self, parsed, first, last):
        self.n_examples = last - first
        self.tags = parsed.tags[first:last]


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _report_bad_lines(bad_lines: list, result: RunResult, stderr) -> None:
    """Default (not --strict): skip, count, and warn about the first few."""
    for bad in bad_lines:
        result.bad_lines += 1
        if len(result.bad_line_samples) < MAX_WARNINGS:
            result.bad_line_samples.append(str(bad))
            stderr.write(f"warning: skipping {bad}\n")
            if len(result.bad_line_samples) == MAX_WARNINGS:
                stderr.write("warning: further bad lines are skipped silently; "
                             "the count is in the summary\n")
