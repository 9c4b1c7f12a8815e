"""The commands behind the CLI: build or load a model, check paths, run, save, report.

Everything that can be refused is refused before any data is read: options,
inputs (missing, unreadable, a directory), outputs (unwritable, a directory, a
read-only file system) and outputs that are the same file as an input or as
another output (olcli/paths.py). Then a run ends, whatever happens — an error, a
full disk, a closed pipe, SIGINT/SIGTERM/SIGHUP at any moment — with the model
learned so far saved atomically (or the previous file untouched when nothing
was learned), the report saying whether the run was complete, and one line on
stderr saying what was saved (docs, "What olcli guarantees when things go
wrong").
"""

import dataclasses
import io
import json
import os
import re
import signal
import sys

import numpy as np

from olcli import model as model_file
from olcli import signals, startup
from olcli.atomic import atomic_write
from olcli.engine import registry
from olcli.engine.records import C_EXAMPLES, new_tally
from olcli.errors import DataError, Diverged, OlcliError, UsageError
from olcli.inputs import check_readable
from olcli.learner import Learner, check_tau, empty_batch, new_model
from olcli.names import FeatureNames
from olcli.paths import (
    CLOSED_STREAMS, OutputError, PipeClosed, check_distinct, check_input, check_output, error_name)
from olcli.pipeline import default_cache_path
from olcli.report import render_summary
from olcli.run import RunOptions, RunResult, run
from olcli.settings import BY_NAME, RunSettings, conflicts, run_settings
from olcli.signals import RunStopped
from olcli.sinks import PredictionWriter

PIPE_CLOSED = "the program reading the predictions closed the pipe"


def _role_output(path, role, outputs, stdout_users=None):
    """Check one output (None: not given) and add it to ``outputs``."""
    if path is None:
        return None
    output = check_output(path, role)
    if output.kind == "stdout" and "stdout" in CLOSED_STREAMS:
        raise UsageError(f"{role} {path} is standard output, which is closed: "
                         "give a file, or run olcli with standard output open")
    outputs.append(output)
    return output


def _data_inputs(sources) -> list:
    check_readable(sources)
    if "-" in sources and "stdin" in CLOSED_STREAMS:
        raise DataError("standard input is closed, so there is nothing to read: give DATA files, or pipe data in")
    inputs = []
    for source in sources:
        info = check_input(source)
        inputs.append(("data", source, info))
    return inputs


def _model_input(path) -> list:
    """-i as an input for the same-file checks (loading it says what is wrong with it)."""
    if path is None:
        return []
    try:
        info = os.stat(path)
    except OSError:
        info = None
    return [("initial model (-i)", path, info)]


def _stdout_for(audit: bool, outputs: list) -> None:
    if audit:
        _role_output("-", "standard output (--audit)", outputs)


def hyper_parameters(algorithm: str, options: dict) -> dict:
    """CLI options (by the train command's names) -> the algorithm's hyper-parameters;
    refuses an option the algorithm does not have."""
    spec = registry.get(algorithm)
    for option, value in options.items():
        if value is not None and option not in spec.options:
            users = ", ".join(f"--{name}" for name in registry.supporting(option)) or "none"
            raise UsageError(f"{'/'.join(registry.OPTIONS[option].flags)} does not apply to --{algorithm} "
                             f"(it applies to: {users})")
    return {name: options[option] for option, name in spec.options.items() if options.get(option) is not None}


# VW's --initial_weight and --constant: options of train outside registry.OPTIONS, taken by the
# learners that keep their weights as state (model.INITIAL_WEIGHT_ALGORITHMS); VW's spellings
# select VW's default learner.
_START_OPTIONS = {"initial_weight": "--initial-weight", "initial_constant": "--constant"}


def implied_algorithm(options: dict, initial_weight=None, initial_constant=None) -> tuple:
    """The learner of a new model given no algorithm flag: (algorithm, note).

    The default (registry.DEFAULT_ALGORITHM) unless an option given is one the
    default cannot honour (VW's --l1, --l2, --initial_weight, --constant,
    --adaptive...; --radius): then the learner that takes every option given,
    preferring the one the options name (registry.Option.implies: gd, VW's own
    learner, for VW's spellings). ``note`` is the one line that says so (None when
    the default runs). When no learner takes them all, the default is kept and
    hyper_parameters refuses the options it does not take, by name."""
    default = registry.get(registry.DEFAULT_ALGORITHM)
    given = [name for name, value in options.items() if value is not None]
    starts = [name for name, value in (("initial_weight", initial_weight), ("initial_constant", initial_constant))
              if value is not None and value != 0.0]
    foreign = [name for name in given if name not in default.options]
    if default.name not in model_file.INITIAL_WEIGHT_ALGORITHMS:
        foreign += starts
    if not foreign:
        return default.name, None
    preferred = [registry.OPTIONS[name].implies if name in registry.OPTIONS else "gd" for name in foreign]
    candidates = [name for name in dict.fromkeys(preferred + list(registry.ALGORITHMS))
                  if name and all(option in registry.get(name).options for option in given)
                  and (not starts or name in model_file.INITIAL_WEIGHT_ALGORITHMS)]
    if not candidates:
        return default.name, None
    chosen = candidates[0]
    spelled = [_START_OPTIONS.get(name) or registry.OPTIONS[name].flags[-1] for name in foreign]
    whose = " (VW's default learner)" if chosen == "gd" else ""
    note = (f"{' and '.join(spelled)}: not an option of the default learner (--{default.name}); learning with "
            f"--{chosen}{whose}, which takes {'them' if len(spelled) > 1 else 'it'} (an algorithm flag "
            "chooses another)")
    return chosen, note


def load_learner(path: str, input_format: str = "auto"):
    """A learner from a model file this olcli can use: the header validated field
    by field (model.validate), and every weight a finite number."""
    learner = Learner.from_model(model_file.load(path), input_format)
    _check_weights(learner, path)
    return learner


def _check_weights(learner, path: str, block: int = 1 << 20) -> None:
    """The weights the file's state and hyper-parameters give must be finite: a file
    can hold a consistent-looking state with hyper-parameters that overflow it."""
    rows = model_file.nonzero_rows(learner.model.state)  # an all-zero row's weight is 0
    for start in range(0, len(rows), block):
        weights = learner.weights_at(rows[start:start + block])
        bad = np.flatnonzero(~np.isfinite(weights))
        if bad.size:
            raise model_file.ModelError(f"{path} is corrupted (the weight of row {int(rows[start + bad[0]])} is "
                                        f"not a finite number with the header's hyper-parameters)")


def _continue_model(path: str, algorithm: str | None, options: dict, settings: dict, input_format: str):
    """Load -i and refuse options that contradict it (it carries its own)."""
    learner = load_learner(path, input_format)
    model = learner.model
    if model.predict_only:
        from olcli.learner import predict_only_refusal

        raise UsageError(predict_only_refusal(path, model))
    if algorithm is not None and algorithm != model.algorithm:
        raise UsageError(f"{path} was trained with --{model.algorithm}; drop --{algorithm} to continue it")
    given = registry.get(model.algorithm).resolve(hyper_parameters(model.algorithm, options))
    given = {name: given[name] for name in hyper_parameters(model.algorithm, options)}
    given.update(settings)
    conflict = conflicts(model, given)   # the settings a run may not change (settings.MUST_MATCH)
    if conflict:
        name, held, value = conflict
        raise UsageError(f"{path} was trained with {name} = {held!r}, not {value!r}; "
                         f"drop that option to continue with the model's own")
    return learner


def train(*, sources, final_model, initial_model, predictions, algorithm, options, settings, run, input_format,
          report, quiet, strict, progress=False, multiclass=("", 0), probabilities=False, text_outputs=None,
          scale_out=None, learn=True, vw_header=False) -> None:
    """A training run (``learn=False``: VW's -t without -i, predicting with the new model
    the options describe, weights at their start, and learning nothing). ``settings``: the
    model's settings as given (settings.MODEL_SETTINGS by name; None: not given), ``run``:
    the run's (settings.RUN_SETTINGS), ``options``: the hyper-parameter options."""
    text_outputs = text_outputs or {}
    with signals.deferred():  # the checks take milliseconds; a signal meanwhile stops right after them
        run = _run_settings(run, scale_out)
        prediction_output = _train_outputs(sources, initial_model, final_model, predictions, report, run,
                                           text_outputs)
    session = _Session("train", sources, report, final_model, quiet)
    session.predict_only_model = bool(settings.get("predict_only"))
    startup.prepare_kernels(quiet)
    with session:
        with signals.immediate():  # loading and compiling: nothing to lose, a signal stops at once
            session.learner = learner = _train_learner(session, initial_model, algorithm, options, settings, run,
                                                       multiclass, input_format)
        names = FeatureNames(learner.model.block_rows) if text_outputs.get("invert_hash") else None
        run_options = RunOptions(sources=sources, learn=learn, input_format=input_format, strict=strict, quiet=quiet,
                                 progress=progress, audit=bool(text_outputs.get("audit")), names=names,
                                 **dataclasses.asdict(run))
        extra = _text_outputs(text_outputs, names)
        if scale_out:  # --workers/--scheduler: the passes run on a Dask cluster
            from olcli import scaleout

            return scaleout.execute(session, run_options, scale_out, prediction_output, extra)
        if vw_header and not quiet:
            _write_vw_header(learner.model, run_options, final_model, predictions, probabilities, settings["link"])
        session.execute(run_options, prediction_output, settings["link"] or learner.model.link, probabilities, extra)


def _run_settings(given: dict, scale_out) -> RunSettings:
    """The run's settings, each checked by its row of the table."""
    run = run_settings(**given)
    if run.holdout_after and scale_out:
        raise UsageError("--holdout-after with --workers/--scheduler: not supported (the shards of a pass are "
                         "learned at once, there is no 'after the first N'); use --holdout-period")
    return run


def _train_outputs(sources, initial_model, final_model, predictions, report, run, text_outputs):
    """Every input and output of a training run checked (and distinct); the -p output."""
    inputs = _data_inputs(sources) + _model_input(initial_model)
    outputs = []
    cache_path = run.cache_path
    if cache_path is None and run.passes > 1:
        cache_path = default_cache_path(sources)
    cache_output = _role_output(cache_path, "example cache (--cache)" if run.cache_path else "example cache", outputs)
    if cache_output is not None and cache_output.kind != "file":
        raise UsageError(f"{cache_output.role} {cache_path} must be a regular file (the later passes read "
                         "it back; a device, FIFO or socket cannot be): give a file name")
    _role_output(text_outputs.get("invert_hash"), "invert-hash file (--invert-hash)", outputs)
    _role_output(text_outputs.get("readable_model"), "readable model (--readable-model)", outputs)
    _role_output(final_model, "model (-f)", outputs)
    prediction_output = _role_output(predictions, "predictions file (-p)", outputs)
    _role_output(report, "report (--report)", outputs)
    _stdout_for(bool(text_outputs.get("audit")), outputs)
    check_distinct(inputs, outputs, allowed=(("model (-f)", "initial model (-i)"),))
    return prediction_output


def _train_learner(session, initial_model, algorithm, options, settings, run, multiclass, input_format):
    """-i's model (refusing settings that contradict it), or a new one from the settings given."""
    mode, classes = multiclass
    given = {name: value for name, value in settings.items() if BY_NAME[name].on_continue == "match"}
    if initial_model:
        learner = _continue_model(initial_model, algorithm, options, given, input_format)
        model = learner.model
        if mode and (mode, classes) != (model.multiclass, model.classes):
            raise UsageError(
                f"{initial_model} was trained with "
                f"{'--' + model.multiclass + ' ' + str(model.classes) if model.classes else 'binary/real labels'}; "
                f"drop --{mode} to continue it")
        return learner
    if algorithm is None:
        algorithm, session.algorithm_note = implied_algorithm(options, settings.get("initial_weight"),
                                                              settings.get("initial_constant"))
        if session.algorithm_note:
            sys.stderr.write(f"note: {session.algorithm_note}\n")
    copies = 2 if (run.passes > 1 or run.holdout_after) and run.holdout_period else 1
    model = new_model(algorithm, oaa=classes if mode == "oaa" else None, softmax=classes if mode == "softmax" else None,
                      copies=copies, **given, **hyper_parameters(algorithm, options))
    return Learner.from_model(model, input_format)


def _text_outputs(text_outputs: dict, names) -> list:
    """--readable-model and --invert-hash: (path, role, names) written after the run."""
    extra = []
    if text_outputs.get("readable_model"):
        extra.append((text_outputs["readable_model"], "readable model (--readable-model)", None))
    if names is not None:
        extra.append((text_outputs["invert_hash"], "invert-hash file (--invert-hash)", names))
    return extra


def _write_vw_header(model, options: RunOptions, final_model, predictions, probabilities, link) -> None:
    """olcli vw: VW's lines before the table (olcli/vw.py's header)."""
    from olcli import vw

    cache = options.cache_path
    if cache is None and options.passes > 1:
        cache = default_cache_path(options.sources)
    sys.stderr.write(vw.header(model, sources=options.sources, final_model=final_model, predictions=predictions,
                               cache_path=cache, cache_exists=bool(cache) and os.path.exists(cache),
                               kill_cache=options.kill_cache, passes=options.passes, testing=not options.learn,
                               probabilities=probabilities, link=link))


def test(*, sources, initial_model, predictions, loss, quantile_tau, link, input_format, report, quiet,
         strict, probabilities=False, audit=False, progress=False, threads=None, progress_every=None,
         vw_header=False) -> None:
    with signals.deferred():
        inputs = _data_inputs(sources) + _model_input(initial_model)
        outputs = []
        prediction_output = _role_output(predictions, "predictions file (-p)", outputs)
        _role_output(report, "report (--report)", outputs)
        _stdout_for(audit, outputs)
        check_distinct(inputs, outputs)
    session = _Session("test", sources, report, None, quiet)
    startup.prepare_kernels(quiet)
    with session:
        with signals.immediate():
            learner = load_learner(initial_model, input_format)
            if loss:
                learner.model.loss = loss
            if quantile_tau is not None:
                learner.model.loss_tau = check_tau(quantile_tau)
            session.learner = learner
        run_options = RunOptions(sources=sources, learn=False, input_format=input_format,
                                 strict=strict, quiet=quiet, progress=progress, audit=audit,
                                 progress_every=progress_every)
        if threads is not None:
            run_options.threads = threads
        if vw_header and not quiet:
            _write_vw_header(learner.model, run_options, None, predictions, probabilities, link)
        session.execute(run_options, prediction_output, link or learner.model.link, probabilities, [])


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


class _Session:
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
        outcome = None
        result = RunResult(report={})
        writer = None
        ran = False
        try:
            with signals.immediate():
                if prediction_output is not None:  # opening a FIFO waits for its reader
                    writer = PredictionWriter(prediction_output, link, model.classes,
                                              model.multiclass == "softmax", probabilities)
                _warm_up(learner, options.learn, writer, options.audit)
            ran = True
            with signals.deferred():
                run(learner, options, writer, result=result)
        except RunStopped as exc:
            outcome = exc
        except KeyboardInterrupt:  # a library caller's SIGINT, without olcli's handlers
            outcome = RunStopped(signal.SIGINT)
        except BrokenPipeError:  # --audit's reader went away
            outcome = PipeClosed(PIPE_CLOSED.replace("predictions", "audit output"))
        except OlcliError as exc:
            outcome = exc
        except MemoryError:
            outcome = OlcliError("out of memory: the process could not allocate what this run needs; use a "
                                 "smaller -b, fewer interactions or fewer classes")
        except OSError as exc:  # not an input (those are DataErrors) nor -p: standard output (--audit)
            outcome = OutputError(f"cannot write standard output: {error_name(exc)}")
        with signals.finishing():
            self._finish(outcome, result, writer, started_examples, ran, extra)

    def _finish(self, outcome, result, writer, started_examples, ran, extra) -> None:
        learner, model, model_path = self.learner, self.learner.model, self.model_path
        if writer is not None:
            try:
                writer.close()
            except OlcliError as exc:
                outcome = outcome or exc
        report = dict(result.report) or {"examples": 0, "bad_lines": 0}  # stopped before the run began
        read = int(report.get("examples") or 0)
        bad = int(report.get("bad_lines") or 0)
        if outcome is None and not model_file.all_finite(model.state):
            outcome = Diverged(f"the model's weights are not finite numbers; {learner.divergence_advice()}")
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
        if write_model:
            try:
                saved = model
                if self.predict_only_model:  # --predict-only-model: the weights, without the optimizer's state
                    saved = model_file.weights_only(model, learner.weights_at(np.arange(model.rows, dtype=np.int64)))
                atomic_write(model_path, model_file.encode(saved), role="model (-f)")
            except OlcliError as exc:
                write_model = False
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
        outcome = _explained(outcome, write_model, model_path, examples, learned, self.command, read)
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


def _explained(outcome, write_model: bool, model_path, examples: int, learned: float, command: str, read: int):
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
    elif "cannot write model" in str(outcome):
        pass
    elif model_path and learned <= 0:
        outcome.args = ((f"{outcome} before any example was learned; " if stopped else f"{outcome}; nothing was "
                         f"learned, so ") + f"{model_path} was not written",)
    elif stopped and command == "train":
        outcome.args = (f"{outcome} after {int(learned)} examples (no -f given: no model was saved)",)
    elif stopped:
        outcome.args = (f"{outcome} after {read} examples",)
    return outcome


def inspect(path: str, top: int, readable: bool = False, invert_hash: list | None = None) -> None:
    startup.prepare_kernels(quiet=False)
    with signals.immediate():  # read-only: a signal stops it at once
        if "stdout" in CLOSED_STREAMS:
            raise UsageError("standard output is closed: inspect prints to it")
        if invert_hash:
            check_readable(invert_hash)
        learner = load_learner(path)
        try:
            _inspect(learner, path, top, readable, invert_hash)
            sys.stdout.flush()
        except BrokenPipeError:
            raise PipeClosed("the program reading inspect's output closed the pipe") from None
        except OSError as exc:
            raise OutputError(f"cannot write standard output: {error_name(exc)}") from None


def _inspect(learner, path, top, readable, invert_hash) -> None:
    model = learner.model
    if readable or invert_hash:
        from olcli.readable import write_readable

        names = None
        if invert_hash:
            collected = FeatureNames(model.block_rows)
            run(learner, RunOptions(sources=list(invert_hash), learn=False, quiet=True, names=collected),
                stderr=io.StringIO())
            names = collected.names
        write_readable(learner, sys.stdout, names)
        return
    header = model.file_header
    touched = model_file.nonzero_rows(model.state)  # an all-zero row's weight is 0
    touched_weights = learner.weights_at(touched)
    nonzero = touched[touched_weights != 0.0]
    weights = dict(zip(nonzero.tolist(), touched_weights[touched_weights != 0.0].tolist()))
    out = sys.stdout
    out.write(f"model: {path}\n")
    out.write(f"format version: {header['format_version']} (olcli {header['olcli_version']})\n")
    out.write(f"algorithm: {model.algorithm}  ({registry.get(model.algorithm).paper})\n")
    out.write("hyper-parameters: " + ", ".join(f"{k}={v:g}" for k, v in model.params.items()) + "\n")
    out.write(f"bits: {model.bits}  loss: {model.loss}  link: {model.link}  "
              f"input format: {model.input_format}  constant: {'yes' if model.constant else 'no'}\n")
    if model.interactions or model.ignore or model.keep or model.ignore_linear:
        out.write(f"interactions: {' '.join(model.interactions) or '-'}  ignore: {model.ignore or '-'}  "
                  f"keep: {model.keep or '-'}  ignore-linear: {model.ignore_linear or '-'}\n")
    extras = [f"ngram: {' '.join(model.ngram)}" if model.ngram else "",
              f"skips: {' '.join(model.skips)}" if model.skips else "",
              f"hash-seed: {model.hash_seed}" if model.hash_seed else "",
              f"hash: {model.hash}" if model.hash != "all" else "",
              "permutations" if model.permutations else "",
              "leave-duplicate-interactions" if model.leave_duplicate_interactions else "",
              f"predict-only (weights of --{model.predict_only})" if model.predict_only else ""]
    if any(extras):
        out.write("  ".join(e for e in extras if e) + "\n")
    out.write(f"state slots: {', '.join(model.slots)}  rows: {model.rows} "
              f"(constant at row {model.rows - 1})\n")
    out.write("counters: " + ", ".join(f"{k}={v:g}" for k, v in learner.counters.items()) + "\n")
    if model.scalars.size:
        names = [name for name, _ in registry.get(model.algorithm).scalars]
        out.write("scalars: " + ", ".join(f"{k}={v:g}" for k, v in zip(names, model.scalars.tolist())) + "\n")
    if model.min_prediction is not None or model.max_prediction is not None:
        ends = ["labels seen" if v is None else f"{v:g}" for v in (model.min_prediction, model.max_prediction)]
        out.write(f"prediction range: [{ends[0]}, {ends[1]}] (--min-prediction, --max-prediction)\n")
    out.write(f"non-zero weights: {nonzero.size}\n")
    order = nonzero[np.argsort(-np.abs(touched_weights[touched_weights != 0.0]), kind="stable")][:top]
    if order.size:
        out.write("largest weights (index: weight):\n")
        for row in order:
            block, index = divmod(int(row), model.block_rows)
            name = " (constant)" if index == model.block_rows - 1 else ""
            where = f"class {block + 1} index {index}" if model.classes else str(index)
            out.write(f"  {where}: {weights[row]:.6g}{name}\n")
