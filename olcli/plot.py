"""``olcli plot``: learning curves from ``--report`` files (docs: Getting started, "Learning curves").

Reports -> curve records (plain data: ``load_curves``) -> a picture (``render_figure``,
Matplotlib) or text (``render_text``, plotext). Both libraries come with the optional extra
``olcli[plot]`` and are imported only inside the functions that draw, so ``import olcli`` and
``olcli --help`` never load them.

What is drawn, from each report:
- the progressive (importance-weighted) average loss at each row of VW's table, against the
  example counter on a log axis; the run's final average loss (the summary) ends the curve,
  since the table's last row is at the last power of two;
- with several passes and a holdout, the rows of the passes after the first report the
  holdout loss (VW's ``h``): Matplotlib draws them dashed in the run's colour, the text plot as
  a series of their own named ``NAME (h)``;
- the holdout loss of each pass, in a second panel, with the pass whose model was kept marked.
"""

import json
import math
import os
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from olcli.atomic import atomic_write
from olcli.errors import DataError, OlcliError, UsageError

MISSING_EXTRA = 'olcli plot needs the optional extra: pip install "olcli[plot]"'
PICTURE_FORMATS = ("png", "svg", "pdf")

# Text plot size when stdout is not a terminal (shutil's fallback; COLUMNS/LINES override it).
TEXT_FALLBACK_SIZE = (100, 36)
# One colour per run, in the order of the reports: Matplotlib's and the terminal's versions of
# blue, orange/yellow, green, red, purple, cyan, ...
FIGURE_COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:cyan",
                 "tab:brown", "tab:pink", "tab:olive", "tab:gray")
TERMINAL_COLORS = (12, 11, 10, 9, 13, 14, 3, 5, 2, 8)
# Without colours, series differ by their character: per run, one for the progressive loss
# and one for the holdout ("h") rows.
TEXT_MARKERS = (("*", "+"), ("o", "x"), ("#", "="), ("@", "%"), ("$", "&"), ("~", "^"))


@dataclass
class Curve:
    """One report's points, ready to draw."""

    name: str                   # legend name: --label, else the file name without .json
    source: str                 # the report's path, as given
    measure: str                # what the losses are, e.g. "logistic loss", "0/1 error"
    progressive: list           # [(example counter, progressive average loss)], in order
    holdout_rows: list          # [(example counter, holdout loss)]: the table's "h" rows
    holdout_by_pass: list       # [(pass, holdout loss)]
    best_pass: int | None       # the pass whose model was kept
    complete: bool              # false when the run stopped early
    inputs: list = field(default_factory=list)
    notes: list = field(default_factory=list)   # what is missing, said on stderr

    @property
    def legend(self) -> str:
        return self.name if self.complete else f"{self.name} (stopped early)"


def plot(reports: list, output: str | None = None, labels=(), stdout=None, stderr=None) -> None:
    """``olcli plot``: read the reports, then write a picture to ``output`` or a text plot to stdout."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    picture_format = _picture_format(output) if output else None
    curves = load_curves(reports, labels)
    for note in notes_for(curves):
        stderr.write(f"note: {note}\n")
    if output:
        atomic_write(output, render_figure(curves, picture_format))
        stderr.write(f"learning curves of {len(curves)} run{'s' if len(curves) > 1 else ''} written to {output}\n")
    else:
        colors = _is_terminal(stdout) and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        width, height = shutil.get_terminal_size(TEXT_FALLBACK_SIZE)
        stdout.write(render_text(curves, width=width, height=height, colors=colors))
        stdout.flush()


# -- reports -> curve records ---------------------------------------------------------------

def load_curves(paths: list, labels=()) -> list:
    """One ``Curve`` per report; ``labels`` name the first len(labels) runs, file names the rest."""
    labels = list(labels or [])
    if len(labels) > len(paths):
        raise UsageError(f"{len(labels)} --label values for {len(paths)} report{'s' if len(paths) > 1 else ''}: "
                         "give one --label per report, in the same order")
    names = labels + _names_from_paths(paths)[len(labels):]
    return [curve_from_report(read_report(path), name, path) for path, name in zip(paths, names)]


def _names_from_paths(paths: list) -> list:
    """File names without .json; where two collide (a/run.json, b/run.json), the paths."""
    stems = [Path(path).stem for path in paths]
    return [stem if stems.count(stem) == 1 else str(Path(path).with_suffix("")) for stem, path in zip(stems, paths)]


def read_report(path: str) -> dict:
    """The parsed report, or a DataError naming the file and what is wrong with it."""
    try:
        with open(path, "rb") as file:
            raw = file.read()
    except FileNotFoundError:
        raise DataError(f"report {path} does not exist") from None
    except IsADirectoryError:
        raise DataError(f"report {path} is a directory, not a JSON report") from None
    except OSError as exc:
        raise DataError(f"cannot read report {path}: {exc.strerror or exc}") from None
    try:
        report = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise DataError(f"{path} is not a JSON report (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise DataError(f"{path} is not a JSON report: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    if not isinstance(report, dict) or "olcli_version" not in report:
        raise DataError(f"{path} is JSON but not an olcli report (no \"olcli_version\"); "
                        "write one with olcli train --report FILE")
    return report


def curve_from_report(report: dict, name: str, path: str) -> Curve:
    """The points of one report. Refuses a report with nothing to draw, and says what is missing."""
    rows = report.get("progress")
    if not isinstance(rows, list):
        raise DataError(f"{path} has no \"progress\" rows (a list) to draw a curve from")
    if not rows:
        examples = report.get("examples")
        why = "the run read no examples" if examples == 0 else "the report lists no rows"
        raise DataError(f"{path} has no progress rows to plot ({why})")
    progressive, holdout_rows = [], []
    for number, row in enumerate(rows, 1):
        counter, loss = _row_point(row, number, path)
        if loss is None:  # no labeled example yet (or a loss that was not finite)
            continue
        (holdout_rows if row.get("holdout") else progressive).append((counter, loss))
    if not progressive and not holdout_rows:
        raise DataError(f"{path}: none of its {len(rows)} progress rows has a loss "
                        "(unlabeled data, or losses that were not finite numbers)")

    notes = []
    final_loss, examples = report.get("average_loss"), report.get("examples")
    if (not report.get("average_loss_is_holdout") and _is_number(final_loss) and _is_number(examples)
            and progressive and not holdout_rows and examples > progressive[-1][0]):
        # The table stops at the last power of two; the summary's average loss is the
        # same progressive loss at the end of the run.
        progressive.append((examples, float(final_loss)))
    points = len(progressive) + len(holdout_rows)
    if points == 1:
        notes.append(f"{path}: one point only (example {(progressive or holdout_rows)[0][0]}); "
                     "a curve needs the loss at two example counts at least")

    holdout_by_pass = []
    losses = report.get("holdout_losses") or []
    if isinstance(losses, list):
        holdout_by_pass = [(number, float(loss)) for number, loss in enumerate(losses, 1) if _is_number(loss)]
        if len(holdout_by_pass) < len(losses):
            missing = [str(number) for number, loss in enumerate(losses, 1) if not _is_number(loss)]
            notes.append(f"{path}: no holdout loss for pass {', '.join(missing)} (no labeled example held out)")
    passes, period = report.get("passes"), report.get("holdout_period")
    if _is_number(passes) and passes > 1 and period and not losses:
        notes.append(f"{path}: {passes} passes but no \"holdout_losses\": no holdout panel for this run")

    best_pass = report.get("best_pass")
    return Curve(name=name, source=path, measure=_measure(report), progressive=progressive,
                 holdout_rows=holdout_rows, holdout_by_pass=holdout_by_pass,
                 best_pass=best_pass if isinstance(best_pass, int) else None,
                 complete=report.get("complete", True) is not False,
                 inputs=[str(x) for x in report.get("inputs") or []], notes=notes)


def _row_point(row, number: int, path: str) -> tuple:
    """(example counter, average loss or None) of one progress row."""
    if not isinstance(row, dict):
        raise DataError(f"{path}: progress row {number} is not an object")
    counter, loss = row.get("example_counter"), row.get("average_loss")
    if not _is_number(counter) or counter < 1:
        raise DataError(f"{path}: progress row {number} has no \"example_counter\" (a positive number)")
    if loss is not None and not _is_number(loss):
        raise DataError(f"{path}: progress row {number}'s \"average_loss\" is not a number")
    return counter, (float(loss) if loss is not None and math.isfinite(loss) else None)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _measure(report: dict) -> str:
    if report.get("classes"):
        return "0/1 error"  # multiclass reports' average_loss
    return f"{report['loss']} loss" if isinstance(report.get("loss"), str) else "loss"


def notes_for(curves: list) -> list:
    """What is missing from each report, then whether the curves can be compared at all."""
    notes = [note for curve in curves for note in curve.notes]
    measures = sorted({curve.measure for curve in curves})
    if len(measures) > 1:
        notes.append(f"the runs measure different losses ({', '.join(measures)}): their curves are not comparable")
    return notes


def _loss_label(curves: list) -> str:
    measures = sorted({curve.measure for curve in curves})
    return measures[0] if len(measures) == 1 else "loss (differs by run)"


def _title(curves: list) -> str:
    inputs = {tuple(curve.inputs) for curve in curves}
    if len(inputs) == 1 and curves[0].inputs:
        return "Learning curves on " + ", ".join(os.path.basename(x) if x != "-" else "stdin" for x in curves[0].inputs)
    return "Learning curves"


def _has_holdout(curves: list) -> bool:
    return any(curve.holdout_by_pass for curve in curves)


def _count(x: float) -> str:
    """Tick labels on the examples axis: 1, 10, 100, 1k, 10k, 1M, ..."""
    for value, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= value:
            return f"{x / value:g}{suffix}"
    return f"{x:g}"


# -- curve records -> a picture (Matplotlib) ------------------------------------------------

def _picture_format(output: str) -> str:
    extension = Path(output).suffix.lower().lstrip(".")
    if extension not in PICTURE_FORMATS:
        raise UsageError(f"-o {output}: the file name must end in "
                         + ", ".join(f".{x}" for x in PICTURE_FORMATS[:-1]) + f" or .{PICTURE_FORMATS[-1]}"
                         + " (or leave -o out for a text plot on stdout)")
    if os.path.isdir(output):
        raise UsageError(f"-o {output} is a directory; give a file name")
    directory = os.path.dirname(os.path.abspath(output))
    if not os.path.isdir(directory):
        raise UsageError(f"cannot write -o {output}: directory {directory} does not exist")
    return extension


def _import_matplotlib():
    try:
        import matplotlib
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.ticker import FuncFormatter, LogLocator, MaxNLocator, NullFormatter
    except ImportError:
        raise OlcliError(MISSING_EXTRA) from None
    return matplotlib, Figure, Line2D, FuncFormatter, LogLocator, MaxNLocator, NullFormatter


def render_figure(curves: list, picture_format: str = "png") -> bytes:
    """The learning curves as a PNG, SVG or PDF file's bytes.

    Matplotlib's object API (a ``Figure``, not pyplot) draws off-screen with the Agg renderer:
    no window, no global state, whatever backend the environment names."""
    matplotlib, Figure, Line2D, FuncFormatter, LogLocator, MaxNLocator, NullFormatter = _import_matplotlib()
    import io

    holdout_panel = _has_holdout(curves)
    figure = Figure(figsize=(12.5, 5.2) if holdout_panel else (8.5, 5.2), layout="constrained")
    axes = figure.subplots(1, 2, width_ratios=(3, 2)) if holdout_panel else [figure.subplots()]
    figure.suptitle(_title(curves), fontsize=13)

    progressive = axes[0]
    for index, curve in enumerate(curves):
        color = FIGURE_COLORS[index % len(FIGURE_COLORS)]
        if curve.progressive:
            x, y = zip(*curve.progressive)
            progressive.plot(x, y, color=color, marker="o", markersize=4, linewidth=1.8, label=curve.legend)
        if curve.holdout_rows:
            x, y = zip(*curve.holdout_rows)
            progressive.plot(x, y, color=color, marker="o", markersize=4, markerfacecolor="white",
                             linestyle="--", linewidth=1.4, label=None if curve.progressive else curve.legend)
    progressive.set_xscale("log")
    progressive.xaxis.set_major_locator(LogLocator(base=10))
    progressive.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _count(x)))
    progressive.xaxis.set_minor_formatter(NullFormatter())
    progressive.set_xlabel("examples (log scale)")
    progressive.set_ylabel(f"average {_loss_label(curves)}")
    progressive.set_title("Progressive validation loss")
    progressive.grid(True, which="major", alpha=0.35)
    handles, names = progressive.get_legend_handles_labels()
    if any(curve.holdout_rows for curve in curves):
        handles.append(Line2D([], [], color="gray", linestyle="--", marker="o", markersize=4, markerfacecolor="white"))
        names.append("holdout loss (passes after the first)")
    progressive.legend(handles, names, loc="best", fontsize=9)

    if holdout_panel:
        by_pass = axes[1]
        for index, curve in enumerate(curves):
            if not curve.holdout_by_pass:
                continue
            color = FIGURE_COLORS[index % len(FIGURE_COLORS)]
            passes, losses = zip(*curve.holdout_by_pass)
            by_pass.plot(passes, losses, color=color, marker="o", markersize=5, linewidth=1.8, label=curve.legend)
            kept = dict(curve.holdout_by_pass).get(curve.best_pass)
            if kept is not None:
                by_pass.plot([curve.best_pass], [kept], color=color, marker="*", markersize=15,
                             markeredgecolor="black", markeredgewidth=0.6, linestyle="none")
        by_pass.xaxis.set_major_locator(MaxNLocator(integer=True))
        by_pass.set_xlabel("pass")
        by_pass.set_ylabel(f"holdout {_loss_label(curves)}")
        by_pass.set_title("Holdout loss by pass")
        by_pass.grid(True, alpha=0.35)
        handles, names = by_pass.get_legend_handles_labels()
        handles.append(Line2D([], [], color="gray", marker="*", markersize=12, markeredgecolor="black",
                              markeredgewidth=0.6, linestyle="none"))
        names.append("pass kept (best holdout loss)")
        by_pass.legend(handles, names, loc="best", fontsize=9)

    buffer = io.BytesIO()
    # Text stays text in an SVG (searchable, smaller); no creation date, so the same reports
    # give the same file.
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "olcli"}):
        figure.savefig(buffer, format=picture_format, dpi=110,
                       metadata={"Date": None} if picture_format in ("svg", "pdf") else None)
    return buffer.getvalue()


# -- curve records -> text (plotext) --------------------------------------------------------

def _import_plotext():
    try:
        import plotext
    except ImportError:
        raise OlcliError(MISSING_EXTRA) from None
    return plotext


def render_text(curves: list, width: int = 100, height: int = 36, colors: bool = False) -> str:
    """The learning curves as text: the progressive panel, then (with passes) the holdout panel
    below it. ``colors``: ANSI colours (a terminal); without, series differ by character."""
    plt = _import_plotext()
    width = max(60, min(width, 200))
    panel_height = max(14, min(height - 2, 30))
    panels = [_text_panel(plt, curves, width, panel_height, colors, holdout=False)]
    if _has_holdout(curves):
        panels.append(_text_panel(plt, curves, width, max(12, panel_height * 2 // 3), colors, holdout=True))
    return "\n".join(panels)


def _text_panel(plt, curves: list, width: int, height: int, colors: bool, holdout: bool) -> str:
    """One panel as text. Two things are done here rather than by plotext: the log scale (the
    points are drawn at log10(examples) on a linear ruler, with ticks named 1, 10, 100, 1k, ...)
    and the legend, printed below the panel, where it can never hide a point."""
    series = []  # (run index, points, name, holdout rows?)
    for index, curve in enumerate(curves):
        if holdout:
            kept = f", pass {curve.best_pass} kept" if curve.best_pass is not None else ""
            series.append((index, curve.holdout_by_pass, f"{curve.legend}{kept}", False))
        else:
            series.append((index, curve.progressive, curve.legend, False))
            series.append((index, curve.holdout_rows, f"{curve.legend} (h: holdout loss)", True))
    series = [entry for entry in series if entry[1]]

    figure = plt.figure
    figure.clear()
    figure.plot_size(width, height)
    figure.theme("simple" if colors else "colorless")
    legend = []
    for index, points, name, holdout_rows in series:
        if colors:
            color = TERMINAL_COLORS[index % len(TERMINAL_COLORS)]
            marker = plt.marker("dot" if holdout_rows else "hd", plt.pixel(foreground=color))
            sample = f"\x1b[38;5;{color}m{'•' if holdout_rows else '▚'}\x1b[0m"
        else:
            marker = sample = TEXT_MARKERS[index % len(TEXT_MARKERS)][holdout_rows]
        x, y = zip(*points)
        signal = figure.signal([math.log10(v) for v in x] if not holdout else list(x), list(y), marker=marker)
        if len(points) > 1:
            signal.lines()
        figure.draw(signal)
        legend.append(f"{sample} {name}")
    if holdout:
        passes = sorted({p for curve in curves for p, _ in curve.holdout_by_pass})
        figure.ruler("x").ticks(passes, [str(p) for p in passes])
        figure.title("Holdout loss by pass")
        figure.label("pass", axis="x")
        figure.label(f"holdout {_loss_label(curves)}", axis="y")
    else:
        counters = [x for _, points, _, _ in series for x, _ in points]
        ticks = _log_ticks(min(counters), max(counters))
        if ticks:
            figure.ruler("x").ticks([math.log10(x) for x in ticks], [_count(x) for x in ticks])
        figure.title(f"{_title(curves)}: progressive validation loss")
        figure.label("examples (log scale)", axis="x")
        figure.label(f"average {_loss_label(curves)}", axis="y")
    text = figure.build().string(colorless=not colors)
    figure.clear()
    lines = text.rstrip("\n").splitlines()
    if not colors:
        lines = [line.rstrip() for line in lines]
    return "\n".join(lines) + "\n" + "    " + "    ".join(legend) + "\n"


def _log_ticks(low: float, high: float) -> list:
    """Tick values for a log axis from low to high: the powers of ten in range, or 1-2-5 steps
    when fewer than two powers of ten fall in it; none when even those do not."""
    decades = [10 ** k for k in range(13)]
    ticks = [x for x in decades if low <= x <= high]
    if len(ticks) < 2:
        ticks = [m * x for x in decades for m in (1, 2, 5) if low <= m * x <= high]
    return ticks if len(ticks) >= 2 else []


def _is_terminal(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
