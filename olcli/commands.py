"""The commands behind the CLI: build or load a model, check paths, run, save, report.

Everything that can be refused is refused before any data is read.
"""

import io
import os
import signal
import sys

import numpy as np

from olcli import model as model_file
from olcli.atomic import atomic_write
from olcli.engine import registry
from olcli.errors import Diverged, OlcliError, UsageError
from olcli.inputs import check_readable
from olcli.learner import Learner, check_tau, new_model
from olcli.names import FeatureNames
from olcli.readable import write_readable
from olcli.report import render_summary, write_json
from olcli.run import RunOptions, RunResult, run
from olcli.signals import RunStopped
from olcli.sinks import PredictionWriter

class PipeClosed(OlcliError):
    """The reader of -p - went away (e.g. `| head`): stop like SIGPIPE would (141)."""

    exit_code = 128 + signal.SIGPIPE


def _check_writable(path: str | None, what: str) -> None:
    if path is None or path == "-":
        return
    directory = os.path.dirname(os.path.abspath(path)) or "."
    if os.path.isdir(path):
        raise UsageError(f"{what} {path} is a directory; give a file name")
    if not os.path.isdir(directory):
        raise UsageError(f"cannot write {what} {path}: directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise UsageError(f"cannot write {what} {path}: directory {directory} is not writable")


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


def load_learner(path: str, input_format: str = "auto"):
    """A learner from a model file this olcli can use (checked by model.decode)."""
    from olcli.learner import Learner

    return Learner.from_model(model_file.load(path), input_format)


def _continue_model(path: str, algorithm: str | None, options: dict, settings: dict, input_format: str):
    """Load -i and refuse options that contradict it (it carries its own)."""
    learner = load_learner(path, input_format)
    model = learner.model
    if algorithm is not None and algorithm != model.algorithm:
        raise UsageError(f"{path} was trained with --{model.algorithm}; drop --{algorithm} to continue it")
    given = registry.get(model.algorithm).resolve(hyper_parameters(model.algorithm, options))
    given = {name: given[name] for name in hyper_parameters(model.algorithm, options)}
    given.update(settings)
    held = {"bits": model.bits, "loss": model.loss, "quantile_tau": model.loss_tau, "link": model.link,
            "constant": model.constant, "interactions": model.interactions, "ignore": model.ignore,
            "keep": model.keep, "ignore_linear": model.ignore_linear, "min_prediction": model.min_prediction,
            "max_prediction": model.max_prediction, **model.params}
    for name, value in given.items():
        if value is not None and value != held[name]:
            raise UsageError(f"{path} was trained with {name} = {held[name]!r}, not {value!r}; "
                             f"drop that option to continue with the model's own")
    return learner


def train(*, sources, final_model, initial_model, predictions, algorithm, options, bits,
          loss, quantile_tau, link, input_format, constant, report, quiet, strict, features=None,
          passes=None, progress=False, multiclass=("", 0), probabilities=False, text_outputs=None,
          prediction_range=(None, None)) -> None:
    text_outputs = text_outputs or {}
    features = {name: value for name, value in (features or {}).items()}
    mode, classes = multiclass
    passes = passes or {}
    if passes.get("passes", 1) < 1:
        raise UsageError("--passes must be at least 1")
    if passes.get("holdout_period", 10) < 0 or passes.get("holdout_period") == 1:
        raise UsageError("--holdout-period must be 2 or more (or use --holdout-off)")
    if passes.get("early_terminate", 3) < 1:
        raise UsageError("--early-terminate must be at least 1")
    check_readable(sources)
    _check_writable(passes.get("cache_path"), "cache")
    _check_writable(text_outputs.get("invert_hash"), "invert-hash file")
    _check_writable(text_outputs.get("readable_model"), "readable model")
    _check_writable(final_model, "model")
    _check_writable(predictions, "predictions file")
    _check_writable(report, "report")
    if initial_model:
        learner = _continue_model(initial_model, algorithm, options,
                                  {"bits": bits, "loss": loss, "quantile_tau": quantile_tau, "link": link,
                                   "constant": constant, "min_prediction": prediction_range[0],
                                   "max_prediction": prediction_range[1], **features}, input_format)
        model = learner.model
        if mode and (mode, classes) != (model.multiclass, model.classes):
            raise UsageError(f"{initial_model} was trained with "
                             f"{'--' + model.multiclass + ' ' + str(model.classes) if model.classes else 'binary/real labels'}; "
                             f"drop --{mode} to continue it")
    else:
        algorithm = algorithm or registry.DEFAULT_ALGORITHM
        copies = 2 if passes.get("passes", 1) > 1 and passes.get("holdout_period", 10) else 1
        model = new_model(algorithm, loss, bits, features.get("interactions") or (), link=link,
                          constant=True if constant is None else constant,
                          ignore=features.get("ignore") or "", keep=features.get("keep") or "",
                          ignore_linear=features.get("ignore_linear") or "",
                          oaa=classes if mode == "oaa" else None, softmax=classes if mode == "softmax" else None,
                          quantile_tau=quantile_tau, min_prediction=prediction_range[0],
                          max_prediction=prediction_range[1], copies=copies, **hyper_parameters(algorithm, options))
        learner = Learner.from_model(model, input_format)
    names = FeatureNames(learner.model.block_rows) if text_outputs.get("invert_hash") else None
    run_options = RunOptions(sources=sources, learn=True, input_format=input_format,
                             strict=strict, quiet=quiet, progress=progress, audit=bool(text_outputs.get("audit")),
                             names=names, **passes)
    try:
        _execute(learner, run_options, predictions, link or learner.model.link, report, final_model, probabilities)
    finally:
        if text_outputs.get("readable_model"):
            _write_text(text_outputs["readable_model"], learner, None)
        if names is not None:
            _write_text(text_outputs["invert_hash"], learner, names.names)


def _write_text(path: str, learner, names) -> None:
    stream = io.StringIO()
    write_readable(learner, stream, names)
    atomic_write(path, stream.getvalue().encode("utf-8"))


def test(*, sources, initial_model, predictions, loss, quantile_tau, link, input_format, report, quiet,
         strict, probabilities=False, audit=False, progress=False) -> None:
    check_readable(sources)
    _check_writable(predictions, "predictions file")
    _check_writable(report, "report")
    learner = load_learner(initial_model, input_format)
    if loss:
        learner.model.loss = loss
    if quantile_tau is not None:
        learner.model.loss_tau = check_tau(quantile_tau)
    run_options = RunOptions(sources=sources, learn=False, input_format=input_format,
                             strict=strict, quiet=quiet, progress=progress, audit=audit)
    _execute(learner, run_options, predictions, link or learner.model.link, report, None, probabilities)


def _execute(learner, options: RunOptions, predictions_path, link, report_path, model_path,
             probabilities=False) -> None:
    """Run, then always keep what was learned: the model is saved (atomically) even
    when the run stops on an error or an interrupt, and the report says so."""
    model = learner.model
    if probabilities and not model.classes:
        link = "logistic"  # binary: --probabilities is --link logistic
    writer = (PredictionWriter(predictions_path, link, model.classes, model.multiclass == "softmax", probabilities)
              if predictions_path else None)
    outcome = None
    result = RunResult(report={})
    try:
        run(learner, options, writer, result=result)
    except KeyboardInterrupt:  # SIGINT outside the chunk loop (olcli/signals.py handles it inside)
        outcome = RunStopped(signal.SIGINT)
    except BrokenPipeError:
        outcome = PipeClosed("the program reading the predictions closed the pipe")
    except OlcliError as exc:
        outcome = exc
    finally:
        if writer is not None:
            try:
                writer.close()
            except BrokenPipeError:
                outcome = outcome or PipeClosed("the program reading the predictions closed the pipe")
    if outcome is None and not np.isfinite(model.state).all():
        outcome = Diverged(f"the model's weights are not finite numbers; {learner.divergence_advice()}")
    write_model = bool(model_path) and not isinstance(outcome, Diverged)
    if write_model:
        learner.save(model_path)
    examples = int(learner.counters["examples"])
    if isinstance(outcome, Diverged):
        outcome.args = (f"{outcome}. No model was written" + (f" ({model_path} is unchanged)" if model_path else ""),)
    elif outcome is not None and write_model:
        outcome.args = (f"{outcome}; the model learned so far ({examples} examples) was written to {model_path}",)
    report = dict(result.report)
    report.update({"complete": outcome is None, "stopped_by": None if outcome is None else str(outcome),
                   "command": "train" if options.learn else "test",
                   "inputs": list(options.sources), "model_out": model_path if write_model else None,
                   "model_examples": examples})
    if report_path:
        write_json(report_path, report)
    if not options.quiet:
        sys.stderr.write(render_summary(report))
    if outcome is not None:
        raise outcome


def inspect(path: str, top: int, readable: bool = False, invert_hash: list | None = None) -> None:
    learner = load_learner(path)
    model = learner.model
    if readable or invert_hash:
        names = None
        if invert_hash:
            check_readable(invert_hash)
            collected = FeatureNames(model.block_rows)
            run(learner, RunOptions(sources=list(invert_hash), learn=False, quiet=True, names=collected),
                stderr=io.StringIO())
            names = collected.names
        write_readable(learner, sys.stdout, names)
        return
    header = model.file_header
    weights = learner.weights().reshape(-1)
    nonzero = np.flatnonzero(weights)
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
    order = nonzero[np.argsort(-np.abs(weights[nonzero]), kind="stable")][:top]
    if order.size:
        out.write("largest weights (index: weight):\n")
        for row in order:
            block, index = divmod(int(row), model.block_rows)
            name = " (constant)" if index == model.block_rows - 1 else ""
            where = f"class {block + 1} index {index}" if model.classes else str(index)
            out.write(f"  {where}: {weights[row]:.6g}{name}\n")
