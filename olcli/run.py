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
from olcli.engine.losses import BINARY_LOSSES, LOSS_CODES
from olcli.engine.registry import ALGORITHMS
from olcli.errors import DataError
from olcli.inputs import CHUNK_BYTES, detect_format, read_chunks
from olcli.model import COUNTER_NAMES, Model
from olcli.parsing import parse_chunk
from olcli.report import ProgressTable, progress_records, summarize

MAX_WARNINGS = 5


@dataclass
class RunOptions:
    sources: list
    learn: bool
    input_format: str = "auto"     # auto | vw | libsvm
    link: str = "identity"         # for -p output
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

    Errors and KeyboardInterrupt propagate unchanged; ``result.report`` and the
    model then hold everything up to the last whole chunk, so the caller can
    still save and report what was learned."""
    stderr = stderr if stderr is not None else sys.stderr
    algorithm = ALGORITHMS[model.algorithm]
    params = np.array([model.params[name] for name in algorithm.params], dtype=np.float64)
    loss_code = LOSS_CODES[model.loss]
    binary_labels = model.loss in BINARY_LOSSES
    stats = driver.new_stats()
    auc_histogram = np.zeros((2, driver.AUC_BINS))
    progress = np.zeros((driver.MAX_PROGRESS_ROWS, driver.N_PROGRESS_COLUMNS))
    counters = np.array([model.counters[name] for name in COUNTER_NAMES])
    table = None if options.quiet else ProgressTable(stderr)
    result = result if result is not None else RunResult(report={})
    records = []
    input_format = None if options.input_format == "auto" else options.input_format
    started = time.perf_counter()
    try:
        for chunk in read_chunks(options.sources, options.chunk_bytes):
            if input_format is None:
                input_format = detect_format(chunk.data)
            parsed = parse_chunk(chunk, input_format, model.bits, model.constant, binary_labels)
            stop = None
            if parsed.bad_lines and options.strict:
                # Learn what precedes the bad line, then stop.
                stop = parsed.bad_lines[0]
                parsed.n_examples = int(np.searchsorted(
                    parsed.example_line[:parsed.n_examples], stop.line - chunk.first_line + 1))
            else:
                _report_bad_lines(parsed.bad_lines, result, stderr)
            chunk_predictions = np.empty(parsed.n_examples)
            n_rows = driver.run_chunk(
                algorithm.code, model.state, params, loss_code, options.learn, counters,
                parsed.n_examples, parsed.labels, parsed.importance, parsed.base,
                parsed.row_ptr, parsed.index, parsed.value,
                chunk_predictions, stats, auc_histogram, progress)
            new_records = progress_records(progress[:n_rows])
            records += new_records
            if table is not None:
                table.write(new_records)
            if predictions is not None:
                predictions.write(chunk_predictions, parsed, chunk.data)
            if stop is not None:
                result.bad_lines += 1
                result.bad_line_samples.append(str(stop))
                raise DataError(f"{stop} (--strict stops at the first bad line)")
    finally:
        elapsed = time.perf_counter() - started
        if options.learn:
            model.counters = dict(zip(COUNTER_NAMES, counters.tolist()))
            if model.input_format is None:
                model.input_format = input_format
        result.report = summarize(stats, auc_histogram, model.loss, elapsed)
        result.report.update({
            "olcli_version": __version__,
            "format": input_format,
            "algorithm": model.algorithm,
            "params": dict(model.params),
            "loss": model.loss,
            "bits": model.bits,
            "bad_lines": result.bad_lines,
            "bad_line_samples": result.bad_line_samples,
            "progress": records,
        })
    return result


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
