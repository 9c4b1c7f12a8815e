"""The commands behind the CLI: build or load a model, check paths, run, save, report.

Everything that can be refused is refused before any data is read.
"""

import os
import signal
import sys

import numpy as np

from olcli import model as model_file
from olcli.engine.registry import ALGORITHMS, slots
from olcli.errors import ModelError, OlcliError, UsageError
from olcli.inputs import check_readable
from olcli.report import render_summary, write_json
from olcli.signals import RunStopped
from olcli.run import PredictionWriter, RunOptions, RunResult, run

class PipeClosed(OlcliError):
    """The reader of -p - went away (e.g. `| head`): stop like SIGPIPE would (141)."""

    exit_code = 128 + signal.SIGPIPE


DEFAULTS = {"bits": 18, "loss": "squared", "link": "identity", "constant": True}
MAX_BITS = 30


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


def new_model(algorithm: str, params: dict, bits: int | None, loss: str | None,
              link: str | None, constant: bool | None) -> model_file.Model:
    spec = ALGORITHMS[algorithm]
    resolved = {}
    for name, default in spec.params.items():
        value = params.get(name)
        resolved[name] = float(default if value is None else value)
    if resolved.get("eta", 1.0) <= 0:
        raise UsageError("the learning rate (-l) must be positive")
    if resolved.get("delta", 0.0) < 0:
        raise UsageError("--delta must be zero or positive")
    bits = DEFAULTS["bits"] if bits is None else bits
    if not 1 <= bits <= MAX_BITS:
        raise UsageError(f"-b/--bits must be between 1 and {MAX_BITS} (got {bits})")
    names = slots(algorithm)
    state = np.zeros((model_file.table_rows(bits), len(names)))
    return model_file.Model(
        algorithm=algorithm, params=resolved, bits=bits,
        loss=loss or DEFAULTS["loss"], link=link or DEFAULTS["link"], input_format=None,
        constant=DEFAULTS["constant"] if constant is None else constant,
        state=state, slots=names)


def _continue_model(path: str, algorithm: str, params: dict, bits, loss, link, constant):
    """Load -i and refuse options that contradict it (it carries its own)."""
    model = model_file.load(path)
    if model.algorithm not in ALGORITHMS:
        raise ModelError(f"{path} uses algorithm {model.algorithm!r}, unknown to this olcli")
    given = {"bits": bits, "loss": loss, "link": link, "constant": constant}
    given.update({name: value for name, value in params.items()})
    held = {"bits": model.bits, "loss": model.loss, "link": model.link, "constant": model.constant}
    held.update(model.params)
    if algorithm != model.algorithm:
        raise UsageError(f"{path} was trained with --{model.algorithm}; drop --{algorithm} to continue it")
    for name, value in given.items():
        if value is not None and name in held and value != held[name]:
            raise UsageError(f"{path} was trained with {name} = {held[name]!r}, not {value!r}; "
                             f"drop that option to continue with the model's own")
    return model


def train(*, sources, final_model, initial_model, predictions, algorithm, params, bits,
          loss, link, input_format, constant, report, quiet, strict) -> None:
    check_readable(sources)
    _check_writable(final_model, "model")
    _check_writable(predictions, "predictions file")
    _check_writable(report, "report")
    if initial_model:
        model = _continue_model(initial_model, algorithm, params, bits, loss, link, constant)
    else:
        model = new_model(algorithm, params, bits, loss, link, constant)
    _check_format(model, input_format)
    options = RunOptions(sources=sources, learn=True, input_format=input_format,
                         strict=strict, quiet=quiet)
    _execute(model, options, predictions, link or model.link, report, final_model)


def test(*, sources, initial_model, predictions, loss, link, input_format, report, quiet, strict) -> None:
    check_readable(sources)
    _check_writable(predictions, "predictions file")
    _check_writable(report, "report")
    model = model_file.load(initial_model)
    if model.algorithm not in ALGORITHMS:
        raise ModelError(f"{initial_model} uses algorithm {model.algorithm!r}, unknown to this olcli")
    if loss:
        model.loss = loss
    _check_format(model, input_format)
    options = RunOptions(sources=sources, learn=False, input_format=input_format,
                         strict=strict, quiet=quiet)
    _execute(model, options, predictions, link or model.link, report, None)


def _check_format(model, input_format: str) -> None:
    if input_format != "auto" and model.input_format and input_format != model.input_format:
        raise UsageError(f"the model was trained on {model.input_format} input; "
                         f"--format {input_format} would hash features differently")


def _execute(model, options: RunOptions, predictions_path, link, report_path, model_path) -> None:
    """Run, then always keep what was learned: the model is saved (atomically) even
    when the run stops on an error or an interrupt, and the report says so."""
    writer = PredictionWriter(predictions_path, link) if predictions_path else None
    outcome = None
    result = RunResult(report={})
    try:
        run(model, options, writer, result=result)
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
    complete = outcome is None
    report = dict(result.report)
    report.update({"complete": complete, "stopped_by": None if complete else str(outcome),
                   "command": "train" if options.learn else "test",
                   "inputs": list(options.sources), "model_out": model_path,
                   "model_examples": int(model.counters["examples"])})
    if model_path:
        model_file.save(model, model_path)
    if report_path:
        write_json(report_path, report)
    if not options.quiet:
        sys.stderr.write(render_summary(report))
    if outcome is not None:
        if model_path:
            outcome.args = (f"{outcome}; the model learned so far ({int(model.counters['examples'])} "
                            f"examples) was written to {model_path}",)
        raise outcome


def inspect(path: str, top: int) -> None:
    model = model_file.load(path)
    header = model.file_header
    weights = model.state[:, 0]
    nonzero = np.flatnonzero(weights)
    out = sys.stdout
    out.write(f"model: {path}\n")
    out.write(f"format version: {header['format_version']} (olcli {header['olcli_version']})\n")
    paper = ALGORITHMS[model.algorithm].paper if model.algorithm in ALGORITHMS else "unknown to this olcli"
    out.write(f"algorithm: {model.algorithm}  ({paper})\n")
    out.write("hyper-parameters: " + ", ".join(f"{k}={v:g}" for k, v in model.params.items()) + "\n")
    out.write(f"bits: {model.bits}  loss: {model.loss}  link: {model.link}  "
              f"input format: {model.input_format}  constant: {'yes' if model.constant else 'no'}\n")
    out.write(f"state slots: {', '.join(model.slots)}  rows: {model.rows} "
              f"(constant at row {model.rows - 1})\n")
    out.write("counters: " + ", ".join(f"{k}={v:g}" for k, v in model.counters.items()) + "\n")
    out.write(f"non-zero weights: {nonzero.size}\n")
    order = nonzero[np.argsort(-np.abs(weights[nonzero]), kind="stable")][:top]
    if order.size:
        out.write("largest weights (index: weight):\n")
        for row in order:
            name = " (constant)" if row == model.rows - 1 else ""
            out.write(f"  {row}: {weights[row]:.6g}{name}\n")
