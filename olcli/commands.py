"""The commands behind the CLI: build or load a model, check paths, run, save, report.

Everything that can be refused is refused before any data is read.
"""

import io
import os
import signal
import sys

import numpy as np

from olcli import model as model_file
from olcli.engine.registry import ALGORITHMS, DEFAULT_ALGORITHM, OPTION_FLAGS, slots, supporting
from olcli.errors import Diverged, ModelError, OlcliError, UsageError
from olcli.inputs import check_readable
from olcli.report import render_summary, write_json
from olcli.signals import RunStopped
from olcli.atomic import atomic_write
from olcli.commands_support import current_weights
from olcli.names import FeatureNames
from olcli.readable import write_readable
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


# Allowed ranges of the hyper-parameters: (low, low inclusive).
_RANGES = {"eta": (0.0, False), "alpha": (0.0, False), "epsilon": (0.0, False), "delta": (0.0, True),
           "l1": (0.0, True), "l2": (0.0, True), "radius": (0.0, True), "beta": (0.0, True)}


def resolve_params(algorithm: str, options: dict) -> dict:
    """CLI options -> the algorithm's parameters; refuses options it does not have."""
    spec = ALGORITHMS[algorithm]
    for option, value in options.items():
        if value is not None and option not in spec.options:
            users = ", ".join(f"--{name}" for name in supporting(option)) or "none"
            raise UsageError(f"{OPTION_FLAGS[option]} does not apply to --{algorithm} "
                             f"(it applies to: {users})")
    params = dict(spec.params)
    for option, name in spec.options.items():
        if options.get(option) is not None:
            params[name] = float(options[option])
    for name, value in params.items():
        low, inclusive = _RANGES[name]
        if not (value >= low if inclusive else value > low) or value != value or value == float("inf"):
            flag = OPTION_FLAGS[next(o for o, n in spec.options.items() if n == name)]
            raise UsageError(f"{flag} must be {'>=' if inclusive else '>'} {low:g} (got {value:g})")
    if params.get("l1", 0.0) > 0 and params.get("l2", 0.0) > 0 and algorithm == "adagrad":
        raise UsageError("--adagrad takes --l1 or --l2, not both (the paper's closed forms, "
                         "Eq. 24 and Eq. 25, are for one at a time); --ftrl takes both")
    return params


def new_model(algorithm: str, options: dict, bits: int | None, loss: str | None,
              quantile_tau: float | None, link: str | None, constant: bool | None,
              multiclass: tuple = ("", 0), copies: int = 1) -> model_file.Model:
    params = resolve_params(algorithm, options)
    mode, classes = multiclass
    if mode == "softmax":
        if loss not in (None, "logistic"):
            raise UsageError("--softmax learns the multinomial logistic loss; drop --loss (or use --oaa)")
        loss = "logistic"
    bits = DEFAULTS["bits"] if bits is None else bits
    if not 1 <= bits <= MAX_BITS:
        raise UsageError(f"-b/--bits must be between 1 and {MAX_BITS} (got {bits})")
    names = slots(algorithm)
    check_memory(bits, len(names), classes, copies)
    state = np.zeros((max(1, classes) * model_file.table_rows(bits), len(names)))
    return model_file.Model(
        algorithm=algorithm, params=params, bits=bits,
        loss=loss or DEFAULTS["loss"], loss_tau=_check_tau(quantile_tau),
        link=link or DEFAULTS["link"], input_format=None,
        constant=DEFAULTS["constant"] if constant is None else constant,
        state=state, slots=names, classes=classes, multiclass=mode)


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (Linux MemAvailable), if known."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_memory(bits: int, n_slots: int, classes: int, copies: int = 1) -> None:
    """Refuse a table that cannot fit, before allocating it (numpy allocates lazily,
    so a too large table would otherwise fail in the middle of the run)."""
    rows = max(1, classes) * model_file.table_rows(bits)
    needed = rows * n_slots * 8 * copies
    available = available_memory()
    if available is not None and needed > available:
        gib = 1 << 30
        raise UsageError(
            f"-b {bits} needs {needed / gib:.1f} GiB for the model table ({rows:,} rows x {n_slots} state "
            f"slots x 8 bytes{' x ' + str(copies) + ' (the best pass is kept)' if copies > 1 else ''}), "
            f"but only {available / gib:.1f} GiB of memory is available: use a smaller -b "
            f"(each step down halves it)")


def _check_tau(quantile_tau: float | None) -> float:
    tau = 0.5 if quantile_tau is None else quantile_tau
    if not 0.0 < tau < 1.0:
        raise UsageError(f"--quantile-tau must be between 0 and 1 (got {tau:g})")
    return tau


def load_model(path: str) -> model_file.Model:
    """A model file this olcli can use (its algorithm must be one it knows)."""
    model = model_file.load(path)
    if model.algorithm not in ALGORITHMS:
        raise ModelError(f"{path} uses algorithm {model.algorithm!r}, unknown to this olcli")
    return model


def _continue_model(path: str, algorithm: str | None, options: dict, bits, loss, quantile_tau,
                    link, constant, features: dict):
    """Load -i and refuse options that contradict it (it carries its own)."""
    model = load_model(path)
    if algorithm is not None and algorithm != model.algorithm:
        raise UsageError(f"{path} was trained with --{model.algorithm}; drop --{algorithm} to continue it")
    given = resolve_params(model.algorithm, options) if any(v is not None for v in options.values()) else {}
    given = {name: given[name] for option, name in ALGORITHMS[model.algorithm].options.items()
             if options.get(option) is not None}
    given.update({"bits": bits, "loss": loss, "quantile_tau": quantile_tau, "link": link,
                  "constant": constant, **features})
    held = {"bits": model.bits, "loss": model.loss, "quantile_tau": model.loss_tau, "link": model.link,
            "constant": model.constant, "interactions": model.interactions, "ignore": model.ignore,
            "keep": model.keep, "ignore_linear": model.ignore_linear, **model.params}
    for name, value in given.items():
        if value is not None and value != held[name]:
            raise UsageError(f"{path} was trained with {name} = {held[name]!r}, not {value!r}; "
                             f"drop that option to continue with the model's own")
    return model


def train(*, sources, final_model, initial_model, predictions, algorithm, options, bits,
          loss, quantile_tau, link, input_format, constant, report, quiet, strict, features=None,
          passes=None, progress=False, multiclass=("", 0), probabilities=False, text_outputs=None) -> None:
    text_outputs = text_outputs or {}
    mode, classes = multiclass
    if mode and not 2 <= classes <= 10000:
        raise UsageError(f"--{mode} takes the number of classes, 2 to 10000 (got {classes})")
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
        model = _continue_model(initial_model, algorithm, options, bits, loss, quantile_tau, link, constant,
                                features or {})
        if mode and (mode, classes) != (model.multiclass, model.classes):
            raise UsageError(f"{initial_model} was trained with "
                             f"{'--' + model.multiclass + ' ' + str(model.classes) if model.classes else 'binary/real labels'}; "
                             f"drop --{mode} to continue it")
    else:
        copies = 2 if passes.get("passes", 1) > 1 and passes.get("holdout_period", 10) else 1
        model = new_model(algorithm or DEFAULT_ALGORITHM, options, bits, loss, quantile_tau, link, constant,
                          multiclass, copies)
        for name, value in (features or {}).items():
            if value is not None:
                setattr(model, name, value)
    _check_format(model, input_format)
    names = FeatureNames(model.block_rows) if text_outputs.get("invert_hash") else None
    options = RunOptions(sources=sources, learn=True, input_format=input_format,
                         strict=strict, quiet=quiet, progress=progress, audit=bool(text_outputs.get("audit")),
                         names=names, **passes)
    try:
        _execute(model, options, predictions, link or model.link, report, final_model, probabilities)
    finally:
        if text_outputs.get("readable_model"):
            _write_text(text_outputs["readable_model"], model, None)
        if names is not None:
            _write_text(text_outputs["invert_hash"], model, names.names)


def _write_text(path: str, model, names) -> None:
    stream = io.StringIO()
    write_readable(model, stream, names)
    atomic_write(path, stream.getvalue().encode("utf-8"))


def test(*, sources, initial_model, predictions, loss, quantile_tau, link, input_format, report, quiet,
         strict, probabilities=False, audit=False, progress=False) -> None:
    check_readable(sources)
    _check_writable(predictions, "predictions file")
    _check_writable(report, "report")
    model = load_model(initial_model)
    if loss:
        model.loss = loss
    if quantile_tau is not None:
        model.loss_tau = _check_tau(quantile_tau)
    _check_format(model, input_format)
    options = RunOptions(sources=sources, learn=False, input_format=input_format,
                         strict=strict, quiet=quiet, progress=progress, audit=audit)
    _execute(model, options, predictions, link or model.link, report, None, probabilities)


def _check_format(model, input_format: str) -> None:
    if input_format != "auto" and model.input_format and input_format != model.input_format:
        raise UsageError(f"the model was trained on {model.input_format} input; "
                         f"--format {input_format} would hash features differently")


def _execute(model, options: RunOptions, predictions_path, link, report_path, model_path,
             probabilities=False) -> None:
    """Run, then always keep what was learned: the model is saved (atomically) even
    when the run stops on an error or an interrupt, and the report says so."""
    if probabilities and not model.classes:
        link = "logistic"  # binary: --probabilities is --link logistic
    writer = PredictionWriter(predictions_path, link, model, probabilities) if predictions_path else None
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
    if outcome is None and not np.isfinite(model.state).all():
        outcome = Diverged("the model's weights are not finite numbers; lower -l/--learning-rate")
    write_model = bool(model_path) and not isinstance(outcome, Diverged)
    if write_model:
        model_file.save(model, model_path)
    if isinstance(outcome, Diverged):
        outcome.args = (f"{outcome}. No model was written" + (f" ({model_path} is unchanged)" if model_path else ""),)
    elif outcome is not None and write_model:
        outcome.args = (f"{outcome}; the model learned so far ({int(model.counters['examples'])} "
                        f"examples) was written to {model_path}",)
    report = dict(result.report)
    report.update({"complete": outcome is None, "stopped_by": None if outcome is None else str(outcome),
                   "command": "train" if options.learn else "test",
                   "inputs": list(options.sources), "model_out": model_path if write_model else None,
                   "model_examples": int(model.counters["examples"])})
    if report_path:
        write_json(report_path, report)
    if not options.quiet:
        sys.stderr.write(render_summary(report))
    if outcome is not None:
        raise outcome


def inspect(path: str, top: int, readable: bool = False, invert_hash: list | None = None) -> None:
    model = load_model(path)
    if readable or invert_hash:
        names = None
        if invert_hash:
            check_readable(invert_hash)
            collected = FeatureNames(model.block_rows)
            run(model, RunOptions(sources=list(invert_hash), learn=False, quiet=True, names=collected),
                stderr=io.StringIO())
            names = collected.names
        write_readable(model, sys.stdout, names)
        return
    header = model.file_header
    weights = current_weights(model)
    nonzero = np.flatnonzero(weights)
    out = sys.stdout
    out.write(f"model: {path}\n")
    out.write(f"format version: {header['format_version']} (olcli {header['olcli_version']})\n")
    out.write(f"algorithm: {model.algorithm}  ({ALGORITHMS[model.algorithm].paper})\n")
    out.write("hyper-parameters: " + ", ".join(f"{k}={v:g}" for k, v in model.params.items()) + "\n")
    out.write(f"bits: {model.bits}  loss: {model.loss}  link: {model.link}  "
              f"input format: {model.input_format}  constant: {'yes' if model.constant else 'no'}\n")
    if model.interactions or model.ignore or model.keep or model.ignore_linear:
        out.write(f"interactions: {' '.join(model.interactions) or '-'}  ignore: {model.ignore or '-'}  "
                  f"keep: {model.keep or '-'}  ignore-linear: {model.ignore_linear or '-'}\n")
    out.write(f"state slots: {', '.join(model.slots)}  rows: {model.rows} "
              f"(constant at row {model.rows - 1})\n")
    out.write("counters: " + ", ".join(f"{k}={v:g}" for k, v in model.counters.items()) + "\n")
    out.write(f"non-zero weights: {nonzero.size}\n")
    order = nonzero[np.argsort(-np.abs(weights[nonzero]), kind="stable")][:top]
    if order.size:
        out.write("largest weights (index: weight):\n")
        for row in order:
            block, index = divmod(int(row), model.block_rows)
            name = " (constant)" if index == model.block_rows - 1 else ""
            where = f"class {block + 1} index {index}" if model.classes else str(index)
            out.write(f"  {where}: {weights[row]:.6g}{name}\n")
