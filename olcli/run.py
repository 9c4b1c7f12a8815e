"""A run of train or test: passes over the examples through a Learner.

The pieces, each with one job: ``pipeline.Examples`` turns the inputs into
parsed chunks (pass 1 from the text, later passes from the example cache);
``Learner.process`` predicts and learns a chunk in one kernel call; the sinks
(``sinks.py``) write predictions, audit lines, the progress table and warnings;
this module is the pass loop — holdout, early stop, the best pass kept
(``PassLoop``, which a run on a Dask cluster drives too: olcli/scaleout.py), the
learning of one parsed piece (``learn_piece``, also a cluster's shard task's),
the words for what ended a run (``Outcome``), and the report's numbers.

Every kernel call does bounded work: a parsed piece is learned in spans of at
most LEARN_BUDGET feature updates (features x classes; one example may be more,
up to the parser's per-example bound), and a stop request is checked after each
span, so SIGINT/SIGTERM/SIGHUP are honoured within a fraction of a second
whatever the data and options.
"""

import signal
import sys
import time

import numpy as np

from olcli import __version__
from olcli import model as model_file
from olcli.engine.records import (C_ROUNDS, H_LOSS, H_ROWS, H_SEEN, H_SINCE_LOSS, H_SINCE_WEIGHT, H_WEIGHT,
                                  MAX_PROGRESS_ROWS, S_DUMP_FACTOR, S_DUMP_STEP, S_NEXT_DUMP, new_holdout)
from olcli.errors import DataError, Diverged, OlcliError
from olcli.inputs import CHUNK_BYTES
from olcli.learner import MemoryGuard
from olcli.parsing import batch_of
from olcli.records import Frozen, Record
from olcli.pipeline import PARSE_AHEAD, Examples
from olcli.report import summarize
from olcli.signals import RunStopped, StopSignals, critical
from olcli.vw import progress_spacing

LEARN_BUDGET = 1 << 22   # feature updates (features x classes) per learning kernel call
from olcli.sinks import BadLines, Progress, write_audit


class RunOptions(Record):
    """How a run reads, learns and reports (the meaning of each field beside its keyword)."""
    __slots__ = _fields = ("sources", "learn", "input_format", "strict", "quiet", "progress", "chunk_bytes", "passes",
                           "holdout_period", "holdout_after", "early_terminate", "cache_path", "kill_cache", "audit",
                           "names", "threads", "progress_every")

    def __init__(
            self,
            sources: list,
            learn: bool,
            input_format: str = "auto",     # auto | vw | libsvm
            strict: bool = False,
            quiet: bool = False,
            progress: bool = False,         # --progress: a bar instead of the table, on a terminal
            chunk_bytes: int = CHUNK_BYTES,
            passes: int = 1,
            holdout_period: int = 10,       # used when passes > 1; 0 = --holdout-off
            holdout_after: int = 0,         # --holdout-after N: every example after the pass's first N is held out,
                                            # instead of every holdout_period-th, even in one pass (VW's); 0 = not given
            early_terminate: int = 3,       # stop after this many passes without a better holdout loss
            cache_path: str | None = None,  # --cache; default <first data file>.olcache when passes > 1
            kill_cache: bool = False,       # -k: rebuild the cache
            audit: bool = False,            # --audit: every example's features, indices, values, weights on stdout
            names: object = None,           # a names.FeatureNames to fill (--invert-hash)
            threads: int = PARSE_AHEAD,     # --threads: chunks read and parsed ahead on threads; 1 = all on this one
            progress_every: str | None = None,  # VW's -P/--progress: "N" a row every N examples, "X.Y" at weight x X.Y
    ):
        self.sources, self.learn, self.input_format, self.strict = sources, learn, input_format, strict
        self.quiet, self.progress, self.chunk_bytes, self.passes = quiet, progress, chunk_bytes, passes
        self.holdout_period, self.holdout_after, self.early_terminate = holdout_period, holdout_after, early_terminate
        self.cache_path, self.kill_cache, self.audit, self.names = cache_path, kill_cache, audit, names
        self.threads, self.progress_every = threads, progress_every

    @property
    def caching(self) -> bool:
        return self.passes > 1 or self.cache_path is not None

    @property
    def holdout(self) -> int:
        """The kernels' H_PERIOD: the period (passes > 1), -N for --holdout-after N
        (VW: any number of passes), 0 for no holdout (--holdout-off: period 0)."""
        if self.holdout_after > 0 and self.holdout_period != 0:
            return -self.holdout_after
        return self.holdout_period if self.passes > 1 else 0


class RunResult(Record):
    """What a run hands back: the report, and the bad lines skipped (count, first samples)."""
    __slots__ = _fields = ("report", "bad_lines", "bad_line_samples")

    def __init__(self, report: dict, bad_lines: int = 0, bad_line_samples: list | None = None):
        self.report, self.bad_lines = report, bad_lines
        self.bad_line_samples = [] if bad_line_samples is None else bad_line_samples


class BestPass(Record):
    """The holdout loss of each pass, and a snapshot of the best pass's model; ``start``: the
    holdout sums (loss, weight) when the pass began."""
    __slots__ = _fields = ("losses", "loss", "number", "since", "snapshot", "start")

    def __init__(self, losses: list | None = None, loss: float = float("inf"), number: int | None = None,
                 since: int = 0, snapshot: tuple | None = None, start: tuple = (0.0, 0.0)):
        self.losses = [] if losses is None else losses
        self.loss, self.number, self.since, self.snapshot, self.start = loss, number, since, snapshot, start

    def update(self, learner, options, pass_number: int) -> bool:
        """After a pass: track the best holdout loss; True when the run should stop early."""
        if not options.holdout:
            return False
        holdout = learner.tally.holdout
        loss_sum, weight = holdout[H_LOSS] - self.start[0], holdout[H_WEIGHT] - self.start[1]
        loss = loss_sum / weight if weight > 0 else float("inf")
        self.losses.append(loss)
        if loss < self.loss:
            self.loss, self.number, self.since = loss, pass_number, 0
            model = learner.model   # what its model file holds that a pass changes: table, counters, scalars
            self.snapshot = (model_file.snapshot(model.pool), model.counters.copy(), model.scalars.copy())
        else:
            self.since += 1
        return self.since >= options.early_terminate


class PassRecord(Frozen):
    """What the pass loop yields after each pass: its number, its holdout loss (None: no
    holdout, or nothing labeled held out), the best pass so far (None: no holdout), and
    whether it is the loop's last (the last pass, or an early stop)."""
    __slots__ = _fields = ("number", "holdout_loss", "best_pass", "last")

    def __init__(self, number: int, holdout_loss: float | None, best_pass: int | None, last: bool):
        setter = object.__setattr__
        setter(self, "number", number)
        setter(self, "holdout_loss", holdout_loss)
        setter(self, "best_pass", best_pass)
        setter(self, "last", last)


class PassLoop:
    """The pass loop of every run, on one machine (``run`` below) and on a Dask cluster
    (olcli/scaleout.py), as River's ``iter_progressive_val_score``: ``passes(one_pass)``
    runs passes 1..``options.passes``, each by the driver's ``one_pass(number)`` (what
    learning a pass is differs: a stream on one machine, shard tasks on a cluster), and
    yields a ``PassRecord`` after each, which the driver renders as it likes; after each
    pass the holdout loss is tracked (``BestPass``), and the loop stops early after
    ``options.early_terminate`` passes without a better one. At the end, whatever ended
    the loop, ``keep_best`` puts the best pass's model back (-f keeps it).

    ``whole_passes``: the driver applies a pass to the model only once it is complete (a
    cluster merges the shards' models at the end), so a pass left partway leaves the model
    as the last complete pass made it; on one machine a pass changes the model as it goes."""

    def __init__(self, learner, options, whole_passes: bool = False):
        self.learner, self.options, self.whole_passes = learner, options, whole_passes
        self.best = BestPass()
        self.started = 0        # the pass under way, or the last one
        self.in_model = 0       # the pass whose end the model holds (None: a pass left partway)

    def passes(self, one_pass):
        """Run the passes (``one_pass(number)`` each), yielding a ``PassRecord`` after each."""
        for number in range(1, self.options.passes + 1):
            self.started = number
            if not self.whole_passes:
                self.in_model = None
            one_pass(number)
            self.in_model = number
            stop = self.best.update(self.learner, self.options, number)
            held = self.best.losses[-1] if self.options.holdout and self.best.losses else None
            yield PassRecord(number, held if held != float("inf") else None, self.best.number,
                             stop or number == self.options.passes)
            if stop:
                break

    def keep_best(self) -> None:
        """-f keeps the pass with the best holdout loss: its snapshot is put back unless the
        model holds it already."""
        best, model = self.best, self.learner.model
        if best.snapshot is not None and best.number != self.in_model:
            pool, counters, scalars = best.snapshot
            model_file.restore(model.pool, pool)
            model.counters[:] = counters
            model.scalars[:] = scalars


class Outcome:
    """What ended a run, as the run's driver says it (``with Outcome(...) as outcome:``, then
    ``outcome.error``): None when it finished; a ``RunStopped`` for a signal (a
    KeyboardInterrupt is SIGINT's); an ``OlcliError`` as raised; a MemoryError and an OSError
    (a BrokenPipeError first, with ``broken_pipe``) as the driver words them. Anything else
    is a bug and propagates."""

    def __init__(self, out_of_memory: str, os_error, broken_pipe=None):
        self.out_of_memory, self.os_error, self.broken_pipe = out_of_memory, os_error, broken_pipe
        self.error = None

    def __enter__(self) -> "Outcome":
        return self

    def __exit__(self, kind, exc, trace) -> bool:
        if exc is None:
            return False
        if isinstance(exc, RunStopped):
            self.error = exc
        elif isinstance(exc, KeyboardInterrupt):   # a library caller's SIGINT, without olcli's handlers
            self.error = RunStopped(signal.SIGINT)
        elif isinstance(exc, BrokenPipeError) and self.broken_pipe is not None:
            self.error = self.broken_pipe()
        elif isinstance(exc, OlcliError):
            self.error = exc
        elif isinstance(exc, MemoryError):
            self.error = OlcliError(self.out_of_memory)
        elif isinstance(exc, OSError):
            self.error = self.os_error(exc)
        else:
            return False
        return True


def run(learner, options: RunOptions, predictions=None, stderr=None, result: RunResult | None = None) -> RunResult:
    """Stream the inputs through ``learner``, filling ``result`` (made if not given).

    On an error, ``--strict`` or a signal the exception propagates, and
    ``result.report`` and the learner hold everything learned up to that point,
    so the caller can still save and report it. SIGINT/SIGTERM/SIGHUP stop the
    run between kernel calls (olcli/signals.py)."""
    stderr = stderr if stderr is not None else sys.stderr
    result = result if result is not None else RunResult(report={})
    progress = Progress(stderr, options.quiet, options.progress)
    if progress.table is not None:
        progress.table.classes = learner.model.classes  # class numbers as integers, as VW's oaa
    bad_lines = BadLines(progress)
    learner.use_threads(options.threads > 1)
    examples = Examples(learner, options, bad_lines, warn=lambda message: progress.stderr.write(message + "\n"))
    loop = PassLoop(learner, options)
    pass1_examples = 0
    if options.progress_every is not None:
        set_progress_spacing(learner.tally.stats, options.progress_every)
    from olcli.aot import compile_seconds

    def one_pass(pass_number: int) -> None:
        nonlocal pass1_examples
        # The holdout sums run on over the passes (the rows show them, as VW's); each
        # pass's own loss is the difference (BestPass.update).
        sums = learner.tally.holdout[[H_LOSS, H_WEIGHT, H_SINCE_LOSS, H_SINCE_WEIGHT]].copy()
        learner.tally.holdout[:] = new_holdout(options.holdout, pass_number > 1 and options.holdout != 0)
        learner.tally.holdout[[H_LOSS, H_WEIGHT, H_SINCE_LOSS, H_SINCE_WEIGHT]] = sums
        loop.best.start = (sums[0], sums[1])
        text = examples.reads_text(pass_number)
        progress.start_pass(pass_number, examples.input_size if text else
                            (pass1_examples if pass_number > 1 else None))
        for piece in examples.pieces(pass_number, signals):
            learn_piece(learner, piece, options, predictions, progress, pass_number, signals)
            if pass_number == 1:
                pass1_examples += piece.parsed.n_examples
            progress.advance(piece.position, piece.parsed.n_examples)
            if piece.stop is not None:
                bad_lines.stopped_at(piece.stop)
                raise DataError(f"{piece.stop} (--strict stops at the first bad line)")
            signals.check()
        progress.finish_pass()

    started, compiled_before = time.perf_counter(), compile_seconds()
    try:
        with StopSignals() as signals:
            for _record in loop.passes(one_pass):
                pass   # one machine shows its passes as they go (the progress table), nothing after each
    finally:
        with critical():  # what was learned is put in order whole, whatever signal comes
            progress.close()
            examples.close()
            loop.keep_best()
            result.bad_lines, result.bad_line_samples = bad_lines.count, bad_lines.samples
            # elapsed seconds count learning, not compiling (a compile is reported on its own line)
            compiling = compile_seconds() - compiled_before
            result.report = _report(learner, options, time.perf_counter() - started - compiling, progress,
                                    bad_lines, loop.best, loop.started, examples)
            if compile_seconds() > 0:  # every compile of this process (before the run too: loading the kernels)
                result.report["compile_seconds"] = compile_seconds()
    return result


def set_progress_spacing(stats, value: str) -> None:
    """A tally's progress spacing (records.S_DUMP_*); the first row is due at weight 1
    (a factor) or N (a step), as VW's dump_interval."""
    factor, step = progress_spacing(value)
    stats[S_DUMP_FACTOR], stats[S_DUMP_STEP] = factor, step
    stats[S_NEXT_DUMP] = step if step > 0 else 1.0


def spans(row_ptr: np.ndarray, n: int, classes: int, budget: int = LEARN_BUDGET, most: int | None = None) -> list:
    """(first, last) ranges of examples, each at most ``budget`` feature updates
    (features x classes), but at least one example; and at most ``most`` examples."""
    if n == 0:
        return [(0, 0)]
    per_call = max(1, budget // max(1, classes))
    out = []
    first = 0
    while first < n:
        last = int(np.searchsorted(row_ptr[:n + 1], row_ptr[first] + per_call, side="right")) - 1
        last = min(n, max(last, first + 1))
        if most is not None:
            last = min(last, first + most)
        out.append((first, last))
        first = last
    return out


_MEMORY = MemoryGuard()


def learn_piece(learner, piece, options, predictions, progress, pass_number, signals=None) -> None:
    """One parsed chunk through the learner, in kernel calls of bounded work (one
    example at a time with --audit); a stop request is checked after each call."""
    parsed = piece.parsed
    ranges = ([(e, e + 1) for e in range(parsed.n_examples)] if piece.named is not None
              else spans(parsed.row_ptr, parsed.n_examples, learner.model.classes,
                         # -P: rows may come at every example; a kernel call holds MAX_PROGRESS_ROWS
                         most=MAX_PROGRESS_ROWS if options.progress_every is not None else None))
    for first, last in ranges:
        if signals is not None and first > 0:
            signals.check()
        if piece.named is not None:
            model = learner.model
            rows = piece.named.index[piece.named.row_ptr[first]:piece.named.row_ptr[first + 1]].astype(np.int64)
            met = [learner.weights_at(rows + k * model.block_rows) for k in range(max(1, model.classes))]
        done = learner.process(batch_of(parsed, first, last), options.learn)
        _MEMORY.check()   # stops (what was learned is written) before the system runs out of memory
        progress.rows(learner.tally.progress[:done.progress_rows],
                      holdout=bool(learner.tally.holdout[H_ROWS] > 0))
        if done.diverged_at >= 0:
            _diverged(learner, piece, first + done.diverged_at, pass_number, options.learn)
        if predictions is not None:
            predictions.write(done.predictions, done.scores, parsed.tags[first:last], piece.data, done.label_base)
        if piece.named is not None and last > first:
            write_audit(learner, piece.named, piece.data, first, met, done.predictions[-1], parsed.tags)


def _diverged(learner, piece, position: int, pass_number: int, learn: bool = True) -> None:
    if piece.origin is not None:
        source, first_line = piece.origin
        where = f"{source} line {first_line + int(piece.parsed.example_line[position]) - 1}"
    else:
        where = f"pass {pass_number}, example {int(learner.tally.holdout[H_SEEN])}"
    if not learn:
        raise Diverged(f"the model's prediction for {where} is not a finite number: its weights are too large "
                       f"for this example's feature values; check the data for extreme values, or retrain the "
                       f"model (--{learner.algorithm})")
    raise Diverged(f"the model diverged at {where}: its prediction is not a finite number after "
                   f"{int(learner.model.counters[C_ROUNDS])} updates; {learner.divergence_advice()}")


def _report(learner, options, elapsed, progress, bad_lines, best, pass_number, examples) -> dict:
    return report_of(learner, options, elapsed, bad_lines=bad_lines.count, bad_line_samples=bad_lines.samples,
                     progress=progress.records, passes=pass_number, best=best,
                     cache=None if examples.cache_temporary else examples.cache_path,
                     cache_reused=examples.cache_reused)


def report_of(learner, options, elapsed, *, bad_lines, bad_line_samples, progress, passes, best, cache,
              cache_reused) -> dict:
    """The report's numbers of a run (one machine, or a cluster: olcli/scaleout.py):
    the learner's summary, the settings, and the passes with their holdout losses."""
    model = learner.model
    report = summarize(learner.tally.stats, learner.tally.auc, model.loss, model.classes)
    report.update({
        "elapsed_seconds": elapsed,
        "examples_per_second": report["examples"] / elapsed if elapsed > 0 else None,
        "olcli_version": __version__,
        "format": model.input_format or (None if options.input_format == "auto" else options.input_format),
        "algorithm": model.algorithm,
        "params": dict(model.params),
        "loss": model.loss,
        "bits": model.bits,
        "multiclass": model.multiclass or None,
        "classes": model.classes or None,
        "bad_lines": bad_lines,
        "bad_line_samples": bad_line_samples,
        "progress": progress,
        "passes": passes,
        "holdout_period": max(options.holdout, 0),
        "holdout_after": -options.holdout if options.holdout < 0 else None,
        "holdout_losses": [x if x != float("inf") else None for x in best.losses],
        "best_pass": best.number,
        "cache": cache,
        "cache_reused": cache_reused,
    })
    if best.number is not None:
        # After several passes the honest number is the holdout loss of the kept model.
        report["average_loss"] = best.loss
        report["average_loss_is_holdout"] = True
    else:
        report["average_loss_is_holdout"] = False
    return report
