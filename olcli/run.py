"""One pass over the inputs: parse chunk by chunk, predict, learn, report.

Python works per chunk (a few MiB of lines); everything per example or per
token happens in the numba kernels.
"""

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from olcli import __version__
from olcli.engine import driver
from olcli.engine.format import format_predictions
from olcli.engine.losses import BINARY_LOSSES, LOSS_CODES, UNBOUNDED_LOSSES
from olcli.engine.registry import ALGORITHMS
from olcli.errors import DataError
from olcli.inputs import CHUNK_BYTES, detect_format, read_chunks
from olcli.model import COUNTER_NAMES, Model
from olcli.parsing import FeatureSpec, parse_chunk
from olcli.report import ProgressTable, progress_records, summarize
from olcli.signals import StopSignals

MAX_WARNINGS = 5


@dataclass
class RunOptions:
    sources: list
    learn: bool
    input_format: str = "auto"     # auto | vw | libsvm
    strict: bool = False
    quiet: bool = False
    chunk_bytes: int = CHUNK_BYTES


@dataclass
class RunResult:
    report: dict
    bad_lines: int = 0
    bad_line_samples: list = field(default_factory=list)


class PredictionWriter:
    """-p: one prediction per example, with its tag; '-' is standard output."""

    def __init__(self, path: str, link: str):
        self.link = link
        self.stream = sys.stdout.buffer if path == "-" else open(path, "wb")

    def write(self, predictions: np.ndarray, parsed, data: np.ndarray) -> None:
        values = predictions[:parsed.n_examples]
        if self.link == "logistic":
            values = 1.0 / (1.0 + np.exp(-np.clip(values, -700.0, 700.0)))
        self.stream.write(format_predictions(values, parsed.n_examples, parsed.tags, data).tobytes())

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
    chunks = read_chunks(options.sources, options.chunk_bytes)
    started = time.perf_counter()
    try:
        with StopSignals() as signals:
            while True:
                with signals.waiting_for_input():
                    chunk = next(chunks, None)
                if chunk is None:
                    break
                session.process(chunk)
                signals.check()
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
        self.binary_labels = model.loss in BINARY_LOSSES
        self.stats = driver.new_stats()
        self.auc_histogram = np.zeros((2, driver.AUC_BINS))
        self.progress = np.zeros((driver.MAX_PROGRESS_ROWS, driver.N_PROGRESS_COLUMNS))
        self.counters = np.array([model.counters[name] for name in COUNTER_NAMES])
        self.features = FeatureSpec.build(model.interactions, model.ignore, model.keep, model.ignore_linear)
        self.table = None if options.quiet else ProgressTable(stderr)
        self.records = []
        self.input_format = None if options.input_format == "auto" else options.input_format

    def process(self, chunk) -> None:
        model, options = self.model, self.options
        if self.input_format is None:
            self.input_format = detect_format(chunk.data)
            if model.input_format and self.input_format != model.input_format:
                raise DataError(
                    f"{chunk.source} looks like {self.input_format} input, but the model was trained "
                    f"on {model.input_format} input (features would hash differently); "
                    f"pass --format {model.input_format} if the data really is {model.input_format}")
        parsed = parse_chunk(chunk, self.input_format, model.bits, model.constant, self.binary_labels,
                             self.features)
        stop = None
        if parsed.bad_lines and options.strict:
            # Learn what precedes the bad line, then stop.
            stop = parsed.bad_lines[0]
            parsed.n_examples = int(np.searchsorted(
                parsed.example_line[:parsed.n_examples], stop.line - chunk.first_line + 1))
        else:
            _report_bad_lines(parsed.bad_lines, self.result, self.stderr)
        chunk_predictions = np.empty(parsed.n_examples)
        n_rows = driver.run_chunk(
            self.algorithm_code, model.state, self.params, self.loss_code, self.loss_params, options.learn,
            self.counters, parsed.n_examples, parsed.labels, parsed.importance, parsed.base,
            parsed.row_ptr, parsed.index, parsed.value, parsed.feature_count,
            chunk_predictions, self.stats, self.auc_histogram, self.progress)
        new_records = progress_records(self.progress[:n_rows])
        self.records += new_records
        if self.table is not None:
            self.table.write(new_records)
        if self.predictions is not None:
            self.predictions.write(chunk_predictions, parsed, chunk.data)
        if stop is not None:
            self.result.bad_lines += 1
            self.result.bad_line_samples.append(str(stop))
            raise DataError(f"{stop} (--strict stops at the first bad line)")

    def finish(self, elapsed: float) -> None:
        model = self.model
        if self.options.learn:
            model.counters = dict(zip(COUNTER_NAMES, self.counters.tolist()))
            if model.input_format is None:
                model.input_format = self.input_format
        report = summarize(self.stats, self.auc_histogram, model.loss, elapsed)
        report.update({
            "olcli_version": __version__,
            "format": self.input_format,
            "algorithm": model.algorithm,
            "params": dict(model.params),
            "loss": model.loss,
            "bits": model.bits,
            "bad_lines": self.result.bad_lines,
            "bad_line_samples": self.result.bad_line_samples,
            "progress": self.records,
        })
        self.result.report = report


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
