"""Reports: compute records as plain data, then render them.

``summarize`` turns the engine's statistics into a dict (the JSON report);
``ProgressTable`` and ``render_summary`` print VW's progressive table and
summary to a text stream (stderr); ``ProgressBar`` is ``--progress``'s bar.
"""

import json
import math

import numpy as np

from olcli.atomic import atomic_write
from olcli.engine.records import (
    R_AVERAGE_LOSS, R_COUNTER, R_FEATURES, R_LABEL, R_PREDICTION, R_SINCE_LAST, R_WEIGHT,
    S_CORRECT, S_EXAMPLES, S_FEATURES, S_LABEL_SQUARES, S_LABEL_SUM, S_LABELED, S_LOG_LOSS, S_LOSS,
    S_NEGATIVE, S_OTHER_LABELS, S_POSITIVE, S_WEIGHT,
)


def best_constant(loss: str, stats: np.ndarray):
    """The constant prediction with the least average loss on the labels seen, and that loss."""
    weight = float(stats[S_WEIGHT])
    if weight <= 0:
        return None, None
    if loss == "squared":   # Python floats: labels near 1e200 overflow to inf and nan quietly (NumPy's scalars warn)
        mean = float(stats[S_LABEL_SUM]) / weight
        return mean, max(float(stats[S_LABEL_SQUARES]) / weight - mean * mean, 0.0)
    positive, negative = stats[S_POSITIVE], stats[S_NEGATIVE]
    if stats[S_OTHER_LABELS] > 0 or positive + negative <= 0:
        return None, None
    if positive == 0 or negative == 0:
        # One class only: hinge is 0 at the label itself; logistic tends to 0
        # as the constant goes to +-infinity (no finite best constant).
        return (1.0 if positive > 0 else -1.0) if loss == "hinge" else None, 0.0
    if loss == "logistic":
        p = positive / (positive + negative)
        return math.log(positive / negative), -(p * math.log(p) + (1 - p) * math.log(1 - p))
    if loss == "hinge":
        return (1.0 if positive >= negative else -1.0), 2.0 * min(positive, negative) / (positive + negative)
    return None, None


def auc_from_histogram(histogram: np.ndarray):
    """Area under the ROC curve from binned predictions (row 0 positives, row 1 negatives).

    Pairs in the same bin count one half, so the value is exact unless a positive
    and a negative prediction share one of the 65,536 bins of sigmoid(prediction).
    """
    positives, negatives = histogram[0], histogram[1]
    total_positive, total_negative = positives.sum(), negatives.sum()
    if total_positive <= 0 or total_negative <= 0:
        return None
    negatives_below = np.cumsum(negatives) - negatives
    wins = np.sum(positives * (negatives_below + 0.5 * negatives))
    return float(wins / (total_positive * total_negative))


def _number(x):
    """JSON-safe float: None for NaN/inf."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def progress_records(rows: np.ndarray, holdout: bool = False) -> list:
    """Progress rows as dicts; ``holdout``: their losses are holdout losses (VW's 'h')."""
    return [{
        "holdout": holdout,
        "average_loss": _number(row[R_AVERAGE_LOSS]),
        "since_last": _number(row[R_SINCE_LAST]),
        "example_counter": int(row[R_COUNTER]),
        "example_weight": float(row[R_WEIGHT]),
        "current_label": _number(row[R_LABEL]),
        "current_prediction": _number(row[R_PREDICTION]),
        "current_features": int(row[R_FEATURES]),
    } for row in rows]


def summarize(stats: np.ndarray, auc_histogram: np.ndarray, loss: str, classes: int = 0) -> dict:
    """The numbers of a learner's tally (Learner.summary, the report). Multiclass:
    average loss is the 0/1 error, plus the log loss."""
    weight = stats[S_WEIGHT]
    constant, constant_loss = (None, None) if classes else best_constant(loss, stats)
    if constant is None:  # no best constant (one class under logistic, labels not -1/+1): no loss of one
        constant_loss = None
    binary = not classes and stats[S_OTHER_LABELS] == 0 and stats[S_POSITIVE] + stats[S_NEGATIVE] > 0
    examples = int(stats[S_EXAMPLES])
    return {
        "examples": examples,
        "labeled_examples": int(stats[S_LABELED]),
        "weighted_example_sum": float(weight),
        "weighted_label_sum": float(stats[S_LABEL_SUM]),
        "average_loss": _number(stats[S_LOSS] / weight) if weight > 0 else None,
        "best_constant": _number(constant),
        "best_constant_loss": _number(constant_loss),
        "total_features": int(stats[S_FEATURES]),
        "accuracy": float(stats[S_CORRECT] / weight) if (binary or classes) and weight > 0 else None,
        "multiclass_log_loss": _number(stats[S_LOG_LOSS] / weight) if classes and weight > 0 else None,
        "auc": auc_from_histogram(auc_histogram) if binary else None,
    }


class ProgressTable:
    """VW's progressive-validation table, one row at each doubling of example weight,
    in VW 9's columns; a row whose losses are holdout losses ends in VW's ' h'."""

    HEADER = ("average  since         example        example        current        current  current\n"
              "loss     last          counter         weight          label        predict features\n")
    classes = 0   # multiclass (K > 0): labels and predictions are class numbers, printed as integers (VW's oaa)

    def __init__(self, stream):
        self.stream = stream
        self.started = False

    def write(self, records: list) -> None:
        if not records:
            return
        if not self.started:
            self.stream.write(self.HEADER)
            self.started = True
        for r in records:
            number = "{:.0f}" if self.classes else "{:.4f}"
            label = "unknown" if r["current_label"] is None else number.format(r["current_label"])
            prediction = r["current_prediction"]
            mark = " h" if r.get("holdout") else ""
            unknown = "unknown" if r.get("holdout") else NOT_AVAILABLE  # VW: a holdout row with no holdout loss yet
            self.stream.write(
                f"{_fixed(r['average_loss'], unknown=unknown):<8} {_fixed(r['since_last'], unknown=unknown):<8} "
                f"{r['example_counter']:>12} {r['example_weight']:>14.1f} {label:>14} "
                f"{'nan' if prediction is None else number.format(prediction):>14} "
                f"{r['current_features']:>8}{mark}\n")
        self.stream.flush()


class ProgressBar:
    """--progress: one bar per pass on a terminal (rich), instead of the table.

    Pass 1 reading the data counts bytes of the input files on disk (compressed
    bytes for .gz/.bz2) against their total size; later passes, which read the
    example cache, count examples against pass 1's. Without a known total
    (standard input, a pipe) the bar shows the examples and the rate only."""

    def __init__(self, stream):
        from rich.console import Console
        from rich.progress import (BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.progress = Progress(
            TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(),
            TextColumn("{task.fields[examples]:>12,} examples  {task.fields[rate]:>9,.0f}/s"),
            TimeElapsedColumn(), TimeRemainingColumn(),
            console=Console(file=stream), auto_refresh=True, refresh_per_second=4)
        self.progress.start()
        self.task = None

    def start_pass(self, number: int, total) -> None:
        if self.task is not None:
            self.progress.stop_task(self.task)
        self.examples = 0
        self.task = self.progress.add_task(f"pass {number}", total=total, examples=0, rate=0.0)

    def advance(self, done, examples: int) -> None:
        """``examples`` more examples were read; ``done``: bytes read so far, or
        None to count examples."""
        self.examples += examples
        elapsed = self.progress.tasks[self.task].elapsed or 0.0
        self.progress.update(self.task, completed=self.examples if done is None else done,
                             examples=self.examples, rate=self.examples / elapsed if elapsed > 0 else 0.0)

    def finish_pass(self) -> None:
        """The pass read everything: show it at 100%."""
        if self.task is None:  # no input at all
            return
        task = self.progress.tasks[self.task]
        if task.total is not None:
            self.progress.update(self.task, completed=task.total)

    def write(self, text: str) -> None:
        """Messages (warnings) go above the bar instead of through it."""
        self.progress.console.print(text, end="", markup=False, highlight=False, soft_wrap=True)

    def close(self) -> None:
        self.progress.stop()


# A number there is none of, as VW 9 prints it (its table and summary: "n.a."), the one
# spelling of olcli's table and summary.
NOT_AVAILABLE = "n.a."


def _fixed(x, digits=6, unknown=NOT_AVAILABLE):
    return unknown if x is None else f"{x:.{digits}f}"


def render_summary(report: dict) -> str:
    """VW's summary lines, as VW prints them (``average loss = X`` for every loss, the
    multiclass 0/1 error included, ending in `` h`` when it is a holdout loss; with
    several passes ``number of examples per pass`` and ``passes used``), then olcli's
    own lines."""
    passes = report.get("passes") or 1
    if passes > 1:
        counted = [f"number of examples per pass = {report['examples'] // passes}", f"passes used = {passes}"]
    else:
        counted = [f"number of examples = {report['examples']}"]
    holdout = report.get("average_loss_is_holdout")
    lines = [
        "",
        "finished run" if report["complete"] else "run stopped early (the reason follows)",
        *counted,
        f"weighted example sum = {report['weighted_example_sum']:.6f}",
        # VW sums no class labels (its multiclass labels are not scalars): 0 with --oaa/--softmax
        f"weighted label sum = {0.0 if report.get('classes') else report['weighted_label_sum']:.6f}",
        "average loss = " + _fixed(report["average_loss"])
        + (" h" if holdout else ""),
    ]
    if not report.get("classes") and report["weighted_example_sum"] > 0:  # as VW: none without labels
        lines.append(f"best constant = {_fixed(report['best_constant'])}")
        if report["best_constant"] is not None:  # no loss of a best constant there is not
            lines.append(f"best constant's loss = {_fixed(report['best_constant_loss'])}")
    lines.append(f"total feature number = {report['total_features']}")
    # olcli's own lines
    if holdout:
        lines.append(f"average loss is the holdout loss of pass {report['best_pass']}, the model kept")
    if report.get("classes"):
        lines.append("average loss is the multiclass 0/1 error")
    if report.get("multiclass_log_loss") is not None:
        lines.append(f"multiclass log loss = {report['multiclass_log_loss']:.6f}")
    if report["accuracy"] is not None:
        lines.append(f"accuracy = {report['accuracy']:.6f}")
    if report["auc"] is not None:
        lines.append(f"auc = {report['auc']:.6f}")
    if report.get("compile_seconds"):
        lines.append(f"compiling kernels seconds = {report['compile_seconds']:.3f} (not in elapsed seconds)")
    lines.append(f"elapsed seconds = {report['elapsed_seconds']:.3f}")
    if report["examples_per_second"] is not None:
        lines.append(f"examples per second = {report['examples_per_second']:.0f}")
    if report.get("holdout_losses"):
        losses = ", ".join(_fixed(x) for x in report["holdout_losses"])
        lines.append(f"passes = {report['passes']} (holdout loss by pass: {losses})")
    if report["bad_lines"]:
        lines.append(f"bad lines skipped = {report['bad_lines']}")
    if report.get("model_out"):
        lines.append(f"model written to {report['model_out']} "
                     f"({report['model_examples']} examples in total)")
    return "\n".join(lines) + "\n"


def write_json(path: str, report: dict) -> None:
    atomic_write(path, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode("utf-8"))
