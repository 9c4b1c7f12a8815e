"""olcli inspect: a model's header, settings, counters and largest weights as text on
stdout (or the whole model, with --readable / --invert-hash)."""

import io
import sys

import numpy as np

from olcli import model as model_file
from olcli import signals, startup
from olcli.commands import load_learner
from olcli.engine import registry
from olcli.errors import UsageError
from olcli.inputs import check_readable
from olcli.names import FeatureNames
from olcli.paths import CLOSED_STREAMS, OutputError, PipeClosed, error_name
from olcli.run import RunOptions, run
from olcli.settings import PREDICTION_RANGE, SHOWN


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


def _words(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return " ".join(value) if isinstance(value, (list, tuple)) else str(value)


def settings_lines(model) -> list:
    """The lines of the model's settings, from the table's rows (settings.SHOWN) in its order:
    each row's words (``Setting.shown``) with its value; by the row's line, "always" shown,
    "any" shown when one of its values is set (an empty one as -), "set" listing the values
    that are set and differ from what an older file reads as (the default it had then)."""
    lines = {}
    for row in SHOWN:
        lines.setdefault(row.shown[0], []).append(row)
    out = []
    for line, rows in lines.items():
        values = [getattr(model, row.field) for row in rows]
        if line == "set":
            words = [row.shown[1].format(_words(value)) for row, value in zip(rows, values)
                     if value and value != row.file_default]
        elif line == "any" and not any(values):
            words = []
        else:
            words = [row.shown[1].format(_words(value) if value or line == "always" else "-")
                     for row, value in zip(rows, values)]
        if words:
            out.append("  ".join(words))
    return out


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
    touched = model.pool.nonzero()[0]  # an all-zero row's weight is 0
    touched_weights = learner.weights_at(touched)
    nonzero = touched[touched_weights != 0.0]
    weights = dict(zip(nonzero.tolist(), touched_weights[touched_weights != 0.0].tolist()))
    out = sys.stdout
    out.write(f"model: {path}\n")
    out.write(f"format version: {header['format_version']} (olcli {header['olcli_version']})\n")
    out.write(f"algorithm: {model.algorithm}  ({registry.get(model.algorithm).paper})\n")
    out.write("hyper-parameters: " + ", ".join(f"{k}={v:g}" for k, v in model.params.items()) + "\n")
    for line in settings_lines(model):
        out.write(line + "\n")
    out.write(f"state slots: {', '.join(model.slots)}  rows: {model.rows} "
              f"(constant at row {model.rows - 1})\n")
    out.write("counters: " + ", ".join(f"{k}={v:g}" for k, v in learner.counters.items()) + "\n")
    if model.scalars.size:
        names = [name for name, _ in registry.get(model.algorithm).scalars]
        out.write("scalars: " + ", ".join(f"{k}={v:g}" for k, v in zip(names, model.scalars.tolist())) + "\n")
    ends = [getattr(model, row.field) for row in PREDICTION_RANGE]
    if any(end is not None for end in ends):
        ends = ["labels seen" if end is None else f"{end:g}" for end in ends]
        out.write(f"prediction range: [{ends[0]}, {ends[1]}] ({', '.join(row.flags[0] for row in PREDICTION_RANGE)})\n")
    out.write(f"non-zero weights: {nonzero.size}\n")
    order = nonzero[np.argsort(-np.abs(touched_weights[touched_weights != 0.0]), kind="stable")][:top]
    if order.size:
        out.write("largest weights (index: weight):\n")
        for row in order:
            block, index = divmod(int(row), model.block_rows)
            name = " (constant)" if index == model.block_rows - 1 else ""
            where = f"class {block + 1} index {index}" if model.classes else str(index)
            out.write(f"  {where}: {weights[row]:.6g}{name}\n")
