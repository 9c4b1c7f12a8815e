"""Where a run's results go: predictions (-p), --audit lines, the progress table
or bar, and bad-line warnings. Each sink has one job; the pass loop (run.py)
hands them what a kernel call produced."""

import errno
import sys

import numpy as np

from olcli.learner import apply_link
from olcli.names import name_of
from olcli.paths import Output, OutputError, PipeClosed, check_output, error_name, open_in_place, write_all
from olcli.report import ProgressBar, ProgressTable, progress_records

MAX_WARNINGS = 5


class PredictionWriter:
    """-p: one prediction per example, with its tag; '-' is standard output.

    Multiclass: the predicted class, or with --probabilities VW's
    ``1:p1 2:p2 ... K:pK`` (softmax, or normalized sigmoids for OAA).

    ``path`` is a path or a ``paths.Output``: standard output is written through
    sys.stdout, a character device, FIFO, socket or /dev/fd/N in place, a regular
    file is truncated and written as the run goes (so it can be followed with
    ``tail -f``). A write that fails stops the run: a reader that went away is
    ``PipeClosed`` (exit 141, quietly), anything else (a full disk, an I/O error)
    an ``OutputError`` naming the file; the model is saved either way."""

    def __init__(self, path, link: str, classes: int = 0, softmax: bool = False, probabilities: bool = False):
        self.link = link
        self.classes = classes
        self.softmax = softmax
        self.probabilities = probabilities
        output = path if isinstance(path, Output) else check_output(path, "predictions file")
        self.output = output
        try:
            if output.kind == "stdout" and output.path == "-":
                self.stream = sys.stdout.buffer
            elif output.kind == "file":
                self.stream = open(output.target, "wb")
            else:
                self.stream = open_in_place(output)
        except OSError as exc:
            raise OutputError(f"cannot write {output.role} {output.path}: {error_name(exc)}") from exc

    def _failed(self, exc: OSError):
        if isinstance(exc, BrokenPipeError) or exc.errno == errno.EPIPE:
            return PipeClosed(f"the program reading the predictions ({self.output.path}) closed the pipe")
        return OutputError(f"cannot write {self.output.role} {self.output.path}: {error_name(exc)}")

    def write(self, predictions: np.ndarray, scores, tags: np.ndarray, data: np.ndarray, label_base=None) -> None:
        """One line per example: ``predictions`` (multiclass: the classes, ``scores``
        the class scores), ``tags`` (n, 2) byte spans into ``data``; ``label_base``
        (multiclass) the label of the first class per example, 1 by default (0 once
        VW's 0-indexed labels are in use)."""
        try:
            self._write(predictions, scores, tags, data, label_base)
        except OSError as exc:
            raise self._failed(exc) from exc

    def _write(self, predictions, scores, tags, data, label_base=None) -> None:
        n = len(predictions)
        if self.classes and self.probabilities:
            self._write_probabilities(scores, tags, data, label_base)
            return
        from olcli.engine.format import format_predictions  # its kernels only when -p is given

        values = predictions
        if not self.classes:
            values = apply_link(self.link, values)
        write_all(self.stream, format_predictions(values, n, tags, data, bool(self.classes)))

    def _write_probabilities(self, scores, tags, data, label_base=None) -> None:
        from olcli.engine.multiclass import log_probabilities

        lines = []
        log_probs = np.empty(self.classes)
        for e in range(len(scores)):  # one line of K numbers: Python per example is fine next to formatting K values
            log_probabilities(scores[e], self.softmax, log_probs)
            first = 1 if label_base is None else int(label_base[e])
            text = " ".join(f"{k + first}:{p:.6f}" for k, p in enumerate(np.exp(log_probs)))
            start, end = tags[e]
            tag = b" " + data[start:end].tobytes() if end > start else b""
            lines.append(text.encode() + tag + b"\n")
        write_all(self.stream, b"".join(lines))

    def close(self) -> None:
        try:
            if self.stream is sys.stdout.buffer:
                self.stream.flush()
            else:
                self.stream.close()
        except OSError as exc:
            raise self._failed(exc) from exc


def write_audit(learner, named, data, e: int, weights: list, prediction, tags) -> None:
    """VW's --audit for example ``e``: the prediction, then each feature occurrence
    as name:index:value:weight (``weights``: per class, the weights the example met,
    before its own update; comma-separated for multiclass)."""
    lo, hi = int(named.row_ptr[e]), int(named.row_ptr[e + 1])
    rows = named.index[lo:hi]
    fields = []
    for j in range(hi - lo):
        weight = ",".join(f"{w[j]:.6g}" for w in weights)
        fields.append(f"{name_of(named.names, data, lo + j)}:{rows[j]}:{named.value[lo + j]:.6g}:{weight}")
    start, end = tags[e]
    tag = " " + data[start:end].tobytes().decode("utf-8", errors="replace") if end > start else ""
    shown = f"{int(prediction)}" if learner.classes else f"{prediction:.6f}"
    sys.stdout.write(f"{shown}{tag}\n\t" + "\t".join(fields) + "\n")


class Progress:
    """VW's progress table on stderr (or --progress's bar on a terminal), and the
    rows kept for the report."""

    def __init__(self, stderr, quiet: bool, bar: bool):
        self.table = None if quiet or bar else ProgressTable(stderr)
        self.bar = ProgressBar(stderr) if bar and _is_terminal(stderr) else None
        self.stderr = self.bar if self.bar is not None else stderr  # warnings go above the bar
        self.records = []

    def rows(self, progress: np.ndarray, holdout: bool) -> None:
        records = progress_records(progress, holdout)
        self.records += records
        if self.table is not None:
            self.table.write(records)

    def start_pass(self, number: int, total) -> None:
        if self.bar is not None:
            self.bar.start_pass(number, total)

    def advance(self, done, examples: int) -> None:
        if self.bar is not None:
            self.bar.advance(done, examples)

    def finish_pass(self) -> None:
        if self.bar is not None:
            self.bar.finish_pass()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


class BadLines:
    """Default (not --strict): skip bad lines, count them, and warn about the first few."""

    def __init__(self, progress: Progress):
        self.progress = progress
        self.count = 0
        self.samples = []

    def __call__(self, bad_lines: list) -> None:
        for bad in bad_lines:
            self.count += 1
            if len(self.samples) < MAX_WARNINGS:
                self.samples.append(str(bad))
                self.progress.stderr.write(f"warning: skipping {bad}\n")
                if len(self.samples) == MAX_WARNINGS:
                    self.progress.stderr.write("warning: further bad lines are skipped silently; "
                                               "the count is in the summary\n")

    def stopped_at(self, bad) -> None:
        """--strict's bad line: counted and kept as a sample, no warning (the error says it)."""
        self.count += 1
        self.samples.append(str(bad))


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
