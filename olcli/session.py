"""A train or test run from the moment its options are accepted (``Session``): whatever
stops it — an error, a full disk, a closed pipe, SIGINT/SIGTERM/SIGHUP at any moment —
the model learned so far is saved atomically (or the previous file left untouched when
nothing was learned), the report says whether the run was complete, and one line on
stderr says what was saved (docs, "What olcli guarantees when things go wrong").
"""

import io
import json
import re
import signal
import sys

import numpy as np

from olcli import model as model_file
from olcli import signals
from olcli.atomic import atomic_write
from olcli.engine.records import C_EXAMPLES, new_tally
from olcli.errors import DataError, Diverged, OlcliError
from olcli.learner import empty_batch
from olcli.paths import OutputError, PipeClosed, error_name
from olcli.report import render_summary
from olcli.run import Outcome, RunOptions, RunResult, run
from olcli.signals import RunStopped
from olcli.sinks import PredictionWriter

PIPE_CLOSED = "the program reading the predictions closed the pipe"


def _warm_up(learner, learn: bool, writer, audit: bool) -> None:
    """Compile or load the kernels the run will call, while a signal can still stop
    olcli at once (a first compilation takes seconds; in the run it could not be
    interrupted until it ended). Learns nothing and changes nothing."""
    learner.process(empty_batch(), learn, new_tally())
    if audit:
        learner.weights_at(np.zeros(0, np.int64))
    if writer is not None:
        from olcli.engine.format import format_predictions

        format_predictions(np.empty(0), 0, np.zeros((0, 2), np.int64), np.frombuffer(b"", np.uint8),
                           bool(learner.model.classes))
        if learner.model.classes and writer.probabilities:
            from olcli.engine.multiclass import log_probabilities

            log_probabilities(np.zeros(learner.model.classes), learner.model.multiclass == "softmax",
                              np.zeros(learner.model.classes))


class Session:
    """One train or test run from the moment its options are accepted: whatever
    stops it, the model learned so far is saved (when anything was learned), the
    report written, and one line says what happened."""

    def __init__(self, command, sources, report_path, model_path, quiet):
        self.command, self.sources = command, list(sources)
        self.report_path, self.model_path, self.quiet = report_path, model_path, quiet
        self.learner = None
        self.finished = False
        self.predict_only_model = False   # -f writes the weights only (--predict-only-model)
        self.algorithm_note = None        # why the learner is not the default one (implied_algorithm)

    def __enter__(self):
        return self  # a signal during start-up (imports, options, checks) stops the first immediate phase

    def __exit__(self, kind, exc, trace):
        if self.finished or exc is None:
            return False
        if isinstance(exc, (RunStopped, KeyboardInterrupt)):
            # Stopped before the run started (loading a model, compiling): nothing
            # was learned, nothing is saved; the report says so.
            stopped = exc if isinstance(exc, RunStopped) else RunStopped(signal.SIGINT)
            with signals.finishing():
                message = str(stopped)
                if self.model_path:
                    message += f" before any example was learned; {self.model_path} was not written"
                self._write_report({"complete": False, "stopped_by": message, "model_out": None,
                                    "examples": 0, "model_examples": self._model_examples()})
            if isinstance(exc, KeyboardInterrupt):
                raise RunStopped(signal.SIGINT, message) from None
            exc.args = (message,)
        return False

    def _model_examples(self) -> int:
        return int(self.learner.model.counters[C_EXAMPLES]) if self.learner is not None else 0

    def _write_report(self, report: dict) -> None:
        if not self.report_path:
            return
        report = {"olcli_version": __import__("olcli").__version__, "command": self.command,
                  "inputs": self.sources, **report}
        atomic_write(self.report_path, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode("utf-8"),
                     role="report (--report)")

    def execute(self, options: RunOptions, prediction_output, link, probabilities, extra) -> None:
        """Run, then always keep what was learned: the model is saved (atomically)
        even when the run stops on an error, a signal or a failed output, and the
        report says so."""
        self.finished = True  # from here on this method reports whatever happens
        learner = self.learner
        model = learner.model
        if probabilities and not model.classes:
            link = "logistic"  # binary: --probabilities is --link logistic
        started_examples = float(model.counters[C_EXAMPLES])
        result = RunResult(report={})
        writer = None
        ran = False
        with Outcome("out of memory: the process could not allocate what this run needs; use a smaller -b, "
                     "fewer interactions or fewer classes",
                     # not an input (those are DataErrors) nor -p: standard output (--audit)
                     lambda exc: OutputError(f"cannot write standard output: {error_name(exc)}"),
                     # --audit's reader went away
                     broken_pipe=lambda: PipeClosed(PIPE_CLOSED.replace("predictions", "audit output"))) as caught:
            with signals.immediate():
                if prediction_output is not None:  # opening a FIFO waits for its reader
                    writer = PredictionWriter(prediction_output, link, model.classes,
                                              model.multiclass == "softmax", probabilities)
                _warm_up(learner, options.learn, writer, options.audit)
            ran = True
            with signals.deferred():
                run(learner, options, writer, result=result)
        outcome = caught.error
        with signals.finishing():
            self.finish(outcome, result, writer, started_examples, ran, extra)

    def finish(self, outcome, result, writer, started_examples, ran, extra) -> None:
        learner, model, model_path = self.learner, self.learner.model, self.model_path
        if writer is not None:
            try:
                writer.close()
            except OlcliError as exc:
                outcome = outcome or exc
        report = dict(result.report) or {"examples": 0, "bad_lines": 0}  # stopped before the run began
        read = int(report.get("examples") or 0)
        bad = int(report.get("bad_lines") or 0)
        unsavable = learner.unsavable() if outcome is None else None
        if unsavable is not None:   # a model file holds finite numbers only
            outcome = Diverged(f"the model cannot be written as a model file: {unsavable}")
        if outcome is None and read == 0 and bad > 0:
            first = result.bad_line_samples[0] if result.bad_line_samples else "?"
            hint = "" if "interactions would generate" in first else "; is the data in the format you think (--format)?"
            if re.search(r"is not a number: '\d+:[-+.\deE]+' in ", first):
                # VW's cost-sensitive labels (class:cost); VW's simple-label parser reads '1:1' as 1
                hint = ("; that label looks like a cost-sensitive one (class:cost): olcli's labels are numbers (a class "
                        "number with --oaa), and VW's cost-sensitive reductions (--csoaa, --csoaa_ldf, --wap_ldf) "
                        "are not supported")
            outcome = DataError(f"no example could be read: all {bad} non-blank lines were bad (first: {first}){hint}")
        warnings = []
        if bad > 0 and bad > read:  # most lines: more than half of the non-blank lines (MostlySkipped)
            warnings.append(f"WARNING: {bad} of {bad + read} lines ({100 * bad / (bad + read):.1f}%) were bad and "
                            "skipped; is this the right data, in the right --format?")
            if outcome is None:
                first = result.bad_line_samples[0] if result.bad_line_samples else "?"
                outcome = MostlySkipped(f"most lines were bad and skipped ({bad} of {bad + read}), so the run "
                                        f"exits 1 (first: {first})")
        learned = float(model.counters[C_EXAMPLES]) - started_examples
        if outcome is None and signals.pending():
            outcome = RunStopped(signals.pending())
        write_model = bool(model_path) and not isinstance(outcome, Diverged) and (outcome is None or learned > 0)
        save_failed = False
        if write_model:
            try:
                saved = model
                if self.predict_only_model:  # --predict-only-model: the weights, without the optimizer's state
                    saved = model_file.weights_only(model, learner.weights_at(np.arange(model.rows, dtype=np.int64)))
                atomic_write(model_path, model_file.Encoded(saved), role="model (-f)")
            except OlcliError as exc:
                write_model, save_failed = False, True
                if outcome is None:
                    outcome = exc
                else:
                    outcome.args = (f"{outcome}; and {exc}",)
        for path, role, names in extra:
            try:
                from olcli.readable import write_readable  # only for --readable-model/--invert-hash

                stream = io.StringIO()
                write_readable(learner, stream, names.names if names is not None else None)
                atomic_write(path, stream.getvalue().encode("utf-8"), role=role)
            except OlcliError as exc:
                outcome = outcome or exc
        if outcome is None and signals.pending():
            outcome = RunStopped(signals.pending())
        examples = int(model.counters[C_EXAMPLES])
        outcome = _explained(outcome, write_model, save_failed, model_path, examples, learned, self.command,
                             read)
        finished = outcome is None or isinstance(outcome, MostlySkipped)  # the whole input was read
        report.update({"complete": finished, "stopped_by": None if finished else str(outcome),
                       "error": None if outcome is None else str(outcome),
                       "command": self.command, "inputs": self.sources,
                       "model_out": model_path if write_model else None, "model_examples": examples,
                       "warnings": warnings, "algorithm_note": self.algorithm_note})
        try:
            self._write_report(report)
            if outcome is None and signals.pending():  # arrived while the report was written
                outcome = RunStopped(signals.pending(), f"interrupted by {signals.NAMES.get(signals.pending())} "
                                     "after the run (everything was written)")
                report.update({"complete": False, "stopped_by": str(outcome)})
                self._write_report(report)
        except OlcliError as exc:
            outcome = outcome or exc
        signals.commit()  # the outcome accounts for any signal so far; a later one comes after the work
        if ran and not self.quiet and result.report:
            sys.stderr.write(render_summary(report))
        for line in warnings:
            sys.stderr.write(line + "\n")
        if outcome is not None:
            raise outcome


class MostlySkipped(DataError):
    """A run that read its whole input but skipped most lines as bad (more than half of
    the non-blank lines): the model and report are written, and the run exits 1, so
    that a scheduled job (cron) notices the mistake (the wrong data, --format, --oaa K)."""


def _explained(outcome, write_model: bool, save_failed: bool, model_path, examples: int, learned: float,
               command: str, read: int):
    """The outcome's message completed with what happened to the model: one line
    that says what was saved."""
    if outcome is None:
        return None
    stopped = isinstance(outcome, RunStopped)
    if isinstance(outcome, Diverged):
        outcome.args = (f"{outcome}. No model was written" + (f" ({model_path} is unchanged)" if model_path else ""),)
    elif write_model and isinstance(outcome, MostlySkipped):
        outcome.args = (f"{outcome}; the model ({examples} examples) was written to {model_path}",)
    elif write_model:
        outcome.args = (f"{outcome}; the model learned so far ({examples} examples) was written to {model_path}",)
    elif save_failed:  # the message already says the model could not be written
        pass
    elif model_path and learned <= 0:
        outcome.args = ((f"{outcome} before any example was learned; " if stopped else f"{outcome}; nothing was "
                         f"learned, so ") + f"{model_path} was not written",)
    elif stopped and command == "train":
        outcome.args = (f"{outcome} after {int(learned)} examples (no -f given: no model was saved)",)
    elif stopped:
        outcome.args = (f"{outcome} after {read} examples",)
    return outcome
