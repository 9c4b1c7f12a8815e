"""Training beyond one machine, on a Dask cluster: the driver of the passes.

``olcli train DATA... --workers N`` starts a local Dask cluster of N worker processes;
``--scheduler ADDRESS`` uses a cluster the user started (``dask scheduler`` and ``dask
worker``, dask-jobqueue, dask-kubernetes). The parts, each a module with one job:

- **Shards** (olcli/shards.py ``cut_shards``): each input file is a shard; an uncompressed file
  is cut into byte ranges at line ends so that there are at least as many shards as worker
  threads (``--shards K`` sets the number), read by the workers at the same path.
- **The tasks** (olcli/shard_tasks.py): ``learn_shard`` learns one shard from the broadcast
  model through the CLI's own reader, parser and ``run.learn_piece``; ``merge_parts`` merges two
  parts with ``Learner.merge(pair, base=the broadcast learner)`` in a fixed binary tree, shard 0
  with 1, 2 with 3, ... so the result depends on the shards, never on which worker ran what or
  when (the rules are associative, so the tree equals one flat merge up to rounding:
  tests/test_scaleout.py).
- **The cluster** (olcli/dask_cluster.py ``Cluster``): starting or reaching it, and waiting on
  tasks boundedly.
- **A pass** (``ScaleOut._pass``, here): the driver broadcasts the current model once
  (``Client.scatter(..., broadcast=True)``, the model file's bytes), submits one task per shard
  and the merge tree, and takes the merged model. The passes are run by the local run's own
  loop (``run.PassLoop``: holdout, early stop, the best pass kept); counters add up.
- **Faults**: a task whose worker dies is run again on another worker by the scheduler (up to
  its ``allowed-failures``, 3 by default); a task that raises an unexpected exception is
  retried ``RETRIES`` times; nothing waits for a particular worker. A run that cannot finish
  (the scheduler gone, no worker for ``NO_WORKER_SECONDS``, a task that killed its workers)
  fails with one message and writes no model: the previous file is untouched.
- **Reports**: a line per pass (shard-averaged progressive loss, holdout loss, examples,
  features, workers used, seconds in tasks and in merges) and a ``scale_out`` section in the
  JSON report.

The survey before pass 1 (``survey_shard``) counts each shard's lines and the lines the parser
reads as examples (the holdout needs them) with the parser's own rule,
``engine/parse.count_lines_and_examples``.
"""

import math
import sys
import time
import uuid
from dataclasses import dataclass, replace

import numpy as np

from olcli import signals
from olcli.engine.parse import count_lines_and_examples
from olcli.dask_cluster import (RETRIES, Cluster, ClusterError, dask_installed,  # noqa: F401 (ClusterError: re-exported)
                                probe_scheduler)
from olcli.engine.records import (C_EXAMPLES, H_LOSS, H_WEIGHT, S_EXAMPLES, S_FEATURES, S_LOSS, S_NEXT_DUMP,
                                  S_WEIGHT, new_holdout)
from olcli.errors import Diverged, OlcliError, UsageError
from olcli.inputs import vote_format
from olcli.row_pool import copy_state
from olcli.run import Outcome, PassLoop, RunResult, report_of
from olcli.shard_tasks import (SAMPLES, Job, Part, TaskFailure, finish_pass, learn_shard,  # noqa: F401
                               merge_levels, merge_parts, tree)
from olcli.shards import FEATURE, cut_shards, refuse_streams, shard_chunks  # noqa: F401

# Re-exported: the shard and merge tasks, run without a cluster by tests/test_scaleout.py and
# benchmarks/scale_out.py, and the scheduler probe (tests/test_service_promises.py).
__all__ = ["ClusterError", "Job", "Part", "ScaleOut", "check_options", "cut_shards", "execute", "finish_pass",
           "learn_shard", "merge_levels", "merge_parts", "probe_scheduler", "refuse_streams", "shard_chunks",
           "survey_shard", "tree"]


def survey_shard(shard) -> tuple:
    """(lines, examples) of a shard, examples counted as the parser counts them
    except that a bad line counts as one (counting exactly would cost a parse)."""
    lines = examples = 0
    try:
        for chunk in shard_chunks(shard):
            a, b = count_lines_and_examples(chunk.data)
            lines += int(a)
            examples += int(b)
    except OlcliError as exc:
        return TaskFailure.of(exc, shard)
    return lines, examples



def _warm(algorithm: str, classes: int) -> float:
    """On a worker: import olcli and load the learning and counting kernels, so
    that the first pass does not include compiling. Returns the seconds it took."""
    started = time.perf_counter()
    from olcli.learner import Learner

    learner = Learner(algorithm, oaa=classes or None)
    learner.learn([])
    count_lines_and_examples(np.zeros(0, np.uint8))
    return time.perf_counter() - started


@dataclass
class PassReport:
    number: int
    shards: int
    workers_used: int
    examples: int
    features: int
    progressive_loss: float | None
    holdout_loss: float | None
    holdout_weight: float        # importance weight of the held-out labeled examples
    task_seconds: float
    merge_seconds: float
    merge_tail_seconds: float
    broadcast_seconds: float
    wall_seconds: float
    workers_lost: int

    def as_dict(self) -> dict:
        return {"pass": self.number, **{k: v for k, v in vars(self).items() if k != "number"}}


def _number(x):
    return None if x is None or not math.isfinite(x) else float(x)


class ScaleOut:
    """The passes of one ``olcli train`` on a cluster, through one driver ``Learner``."""

    HEADER = ("pass  shards workers      examples        features  progressive      holdout   tasks s  merges s"
              "   wall s\n")

    def __init__(self, learner, options, cluster: Cluster, shards: int | None = None, stderr=None):
        self.learner, self.options, self.cluster = learner, options, cluster
        self.shard_count = shards
        self.stderr = stderr if stderr is not None else sys.stderr
        self.shards = []
        self.jobs = []
        self.passes = []
        self.survey_seconds = None
        self.bad_lines, self.bad_samples = 0, []
        self.run_id = uuid.uuid4().hex[:8]
        self.started = time.perf_counter()
        self.loop = PassLoop(learner, options, whole_passes=True)   # run.py's pass loop

    # --- before pass 1 ---

    def prepare(self) -> None:
        """Cut the shards, decide the input format, count what holdout and line
        numbers need (the survey, one cheap task per shard)."""
        options, learner = self.options, self.learner
        count = self.shard_count or max(1, self.cluster.threads())
        self.shards = cut_shards(options.sources, count)
        self._decide_format()
        period = options.holdout
        lines = [0] * len(self.shards)
        examples = [0] * len(self.shards)
        ranged = any(not shard.whole for shard in self.shards)
        if len(self.shards) > 1 and (period or ranged):
            started = time.perf_counter()
            futures = [self.cluster.client.submit(survey_shard, shard, key=f"olcli-survey-{self.run_id}-{k}",
                                                  retries=RETRIES, pure=False)
                       for k, shard in enumerate(self.shards)]
            for k, found in enumerate(self.cluster.gather(futures, "counting the shards' lines")):
                if isinstance(found, TaskFailure):
                    raise found.error()
                lines[k], examples[k] = found
            self.survey_seconds = time.perf_counter() - started
        seen = 0
        line_in_file = {}
        auto = learner.input_format_option == "auto"
        for k, shard in enumerate(self.shards):
            first_line = 1 + line_in_file.get(shard.path, 0) if shard.start > 0 else 1
            line_in_file[shard.path] = (first_line - 1) + lines[k]
            self.jobs.append(Job(shard, 0, first_line, period, seen % period if period else 0, options.strict,
                                 auto and shard.start == 0, options.chunk_bytes))
            seen += examples[k]

    def _decide_format(self) -> None:
        """A new model's input format, as on one machine: the first lines that
        say (inputs.vote_format) of the first input that has such lines."""
        learner = self.learner
        if learner.model.input_format is not None or learner.input_format_option != "auto":
            learner.decide_format(learner.input_format_option if learner.input_format_option != "auto"
                                  else learner.model.input_format, self.options.sources[0])
            return
        for shard in self.shards:
            if shard.start > 0:
                continue
            for chunk in shard_chunks(shard):
                detected = vote_format(chunk.data)
                if detected is not None:
                    learner.decide_format(detected, shard.name)
                    return
                break
        learner.decide_format("vw", self.options.sources[0])

    # --- the passes ---

    def run(self, result) -> None:
        """All passes, through run.py's pass loop (holdout, early stop, the best pass kept);
        fills ``result.report`` after each pass (so a stopped run reports what it did)."""
        options = self.options
        self.started = time.perf_counter()
        if not options.quiet:
            self.stderr.write(f"{len(self.shards)} shards: " + ", ".join(s.describe() for s in self.shards[:6])
                              + (", ..." if len(self.shards) > 6 else "") + "\n" + self.HEADER)
            self.stderr.flush()

        try:
            for _record in self.loop.passes(self._pass):
                self._print_pass(self.passes[-1])   # the pass's line, with the cluster's numbers
                result.report = self.report()
        finally:
            self.loop.keep_best()
            result.bad_lines, result.bad_line_samples = self.bad_lines, list(self.bad_samples)
            result.report = self.report()

    def _pass(self, number: int) -> None:
        learner, client = self.learner, self.cluster.client
        started = time.perf_counter()
        before = self.cluster.worker_addresses()
        state = learner.to_bytes()
        broadcast = client.scatter(state, broadcast=True, hash=False)
        broadcast_seconds = time.perf_counter() - started
        key = f"olcli-{self.run_id}-p{number}"
        learned = [client.submit(learn_shard, broadcast, replace(job, pass_number=number),
                                 key=f"{key}-learn-{k}", retries=RETRIES, pure=False)
                   for k, job in enumerate(self.jobs)]
        counter = iter(range(len(learned)))
        root = tree(learned, lambda a, b: client.submit(merge_parts, broadcast, a, b, retries=RETRIES, pure=False,
                                                        key=f"{key}-merge-{next(counter)}"))
        part = self.cluster.gather([root], f"learning pass {number}")[0]
        wall = time.perf_counter() - started
        ended = time.time()
        lost = len(before - self.cluster.worker_addresses())
        del broadcast, learned, root
        if isinstance(part, TaskFailure):
            raise part.error()
        merged = type(learner).from_bytes(part.model, "<the merged model>")
        finish_pass(learner, merged, part, number == 1)
        learner.model.pool = merged.model.pool
        learner.model.counters = merged.model.counters
        learner.model.scalars = merged.model.scalars   # --gd, --coin, --mix: their global numbers
        tally = learner.tally
        tally.stats[:] += part.stats
        tally.stats[S_NEXT_DUMP] = 1.0
        tally.auc[:] += part.auc
        tally.holdout[:] = new_holdout(self.options.holdout, number > 1)
        tally.holdout[H_LOSS], tally.holdout[H_WEIGHT] = part.holdout
        if number == 1:
            for report in part.shards:
                self.bad_lines += report.bad_lines
                for sample in report.bad_samples:
                    if len(self.bad_samples) < SAMPLES:
                        self.bad_samples.append(sample)
                        if not self.options.quiet:
                            self.stderr.write(f"warning: skipping {sample}\n")
        stats = part.stats
        holdout_loss = part.holdout[0] / part.holdout[1] if self.options.holdout and part.holdout[1] > 0 else None
        self.passes.append(PassReport(
            number=number, shards=len(part.shards), workers_used=len({r.worker for r in part.shards}),
            examples=int(stats[S_EXAMPLES]), features=int(stats[S_FEATURES]),
            progressive_loss=_number(stats[S_LOSS] / stats[S_WEIGHT]) if stats[S_WEIGHT] > 0 else None,
            holdout_loss=_number(holdout_loss), holdout_weight=float(part.holdout[1]), task_seconds=sum(r.seconds for r in part.shards),
            merge_seconds=part.merge_seconds,
            merge_tail_seconds=max(0.0, ended - max(r.finished for r in part.shards)),
            broadcast_seconds=broadcast_seconds, wall_seconds=wall, workers_lost=lost))

    def _print_pass(self, p: PassReport) -> None:
        if self.options.quiet:
            return

        def loss(x):
            return "n/a" if x is None else f"{x:.6f}"

        holdout = loss(p.holdout_loss) + (" h" if p.holdout_loss is not None else "")
        self.stderr.write(f"{p.number:>4} {p.shards:>7} {p.workers_used:>7} {p.examples:>13,} {p.features:>15,} "
                          f"{loss(p.progressive_loss):>12} {holdout:>12} {p.task_seconds:>9.2f} "
                          f"{p.merge_seconds:>9.2f} {p.wall_seconds:>8.2f}"
                          + (f"  ({p.workers_lost} worker(s) lost, their tasks re-run)" if p.workers_lost else "")
                          + "\n")
        self.stderr.flush()

    def report(self) -> dict:
        """The JSON report's numbers, as olcli/run.py gives them (run.report_of), plus ``scale_out``."""
        learner, options = self.learner, self.options
        elapsed = time.perf_counter() - self.started
        report = report_of(learner, options, elapsed, bad_lines=self.bad_lines,
                           bad_line_samples=list(self.bad_samples), progress=[], passes=len(self.passes),
                           best=self.loop.best, cache=None, cache_reused=False)
        report["scale_out"] = self.scale_out_report()
        return report

    def scale_out_report(self) -> dict:
        cluster = self.cluster
        return {
            "scheduler": cluster.address,
            "local_cluster": cluster.workers is not None,
            "dashboard": cluster.dashboard,
            "startup_seconds": cluster.startup_seconds,
            "survey_seconds": self.survey_seconds,
            "retries": RETRIES,
            "shards": [{"index": s.index, "source": s.name, "start": s.start, "end": s.end} for s in self.shards],
            "passes": [p.as_dict() for p in self.passes],
        }



# --------------------------------------------------------------------------------------------
# From the train command


def check_options(options, cluster: dict, prediction_output=None) -> None:
    """Refuse what a cluster run cannot do, before anything is read or started."""
    workers, scheduler, shards = cluster.get("workers"), cluster.get("scheduler"), cluster.get("shards")
    if workers is not None and scheduler is not None:
        raise UsageError("--workers starts a local Dask cluster and --scheduler uses an existing one: give one")
    if workers is None and scheduler is None:
        raise UsageError("--shards needs --workers N or --scheduler ADDRESS")
    refuse_streams(options.sources)
    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1")
    if shards is not None and shards < 1:
        raise UsageError("--shards must be at least 1")
    refused = [(prediction_output is not None, "-p/--predictions"), (options.audit, "--audit"),
               (options.names is not None, "--invert-hash"), (options.cache_path is not None, "--cache")]
    for given, flag in refused:
        if given:
            raise UsageError(f"{flag} does not work with {FEATURE.split(' ')[0]}: the shards are learned on the "
                             "workers" + ("; score the trained model with `olcli test -p`" if flag.startswith("-p")
                                          else ""))


def execute(session, options, cluster_options: dict, prediction_output=None, extra=()) -> None:
    """``olcli train --workers/--scheduler``: the passes on a cluster, then the
    model saved and the report written by the train session's own ending
    (``session.Session.finish``), as for a run on one machine.

    A run that cannot finish (a data error, a lost scheduler, a diverged model)
    writes no model: the previous file is untouched, and the message says so. A
    signal (Ctrl-C, SIGTERM) stops it after the pass in progress is abandoned,
    and the model of the last completed pass is written, as one machine writes
    the model learned so far."""
    check_options(options, cluster_options, prediction_output)
    dask_installed()
    learner = session.learner
    session.finished = True  # from here on this function reports whatever happens
    started_examples = float(learner.model.counters[C_EXAMPLES])
    start_state = (copy_state(learner.model.pool), learner.model.counters.copy())  # its touched rows only
    result = RunResult(report={})
    outcome, ran, trainer = None, False, None
    cluster = Cluster(cluster_options.get("workers"), cluster_options.get("scheduler"), quiet=options.quiet)
    with Outcome("out of memory on the driver: use a smaller -b",
                 lambda exc: OlcliError(f"input/output error: {exc}")) as caught:
        try:
            with signals.immediate():  # nothing learned yet: a signal stops at once
                cluster.start(_warm, learner.algorithm, learner.model.classes)
                trainer = ScaleOut(learner, options, cluster, cluster_options.get("shards"))
                trainer.prepare()
            ran = True
            with signals.deferred():
                trainer.run(result)
        finally:
            cluster.close()
    outcome = caught.error
    if outcome is not None and not isinstance(outcome, signals.RunStopped):
        # A run that cannot finish keeps the previous model file as it was (the
        # session's ending then says that nothing was learned and -f was not written).
        learner.model.pool, learner.model.counters = start_state
        done = len(trainer.passes) if trainer is not None else 0
        if session.model_path and done and not isinstance(outcome, Diverged):
            outcome.args = (f"{outcome}; a cluster run that cannot finish keeps none of its passes "
                            f"({done} complete)",)
    if trainer is not None and not result.report:
        result.report = trainer.report()
    with signals.finishing():
        session.finish(outcome, result, None, started_examples, ran, list(extra))
