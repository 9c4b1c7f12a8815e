"""The tasks of a run on a Dask cluster: learn one shard from the broadcast model
(``learn_shard``), merge two learned parts (``merge_parts``), and the fixed binary tree that
combines the shards' parts (``tree``). They import nothing from dask, so they can be called,
and tested, without a cluster.

A shard task rebuilds a ``Learner`` from the broadcast model's bytes and feeds its byte range
through the CLI's own chunk reader (olcli/shards.py), parser (``parsing.parse_chunk``) and
learning of a piece (``run.learn_piece`` -> ``Learner.process``). The parts are combined by
pairwise ``Learner.merge(pair, base=the broadcast learner)``, shard 0 with 1, 2 with 3, ... so
the result depends on the shards, never on which worker ran what or when. An ``OlcliError`` of
a task is returned as a ``TaskFailure`` (not raised), so that Dask does not retry what would
fail again the same way.
"""

import copy
import math
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from olcli import errors
from olcli.engine.records import H_LOSS, H_SEEN, H_WEIGHT, S_EXAMPLES, new_holdout, new_tally
from olcli.errors import DataError, MissingExtra, OlcliError
from olcli.inputs import vote_format
from olcli.learner import Learner
from olcli.parsing import parse_chunk
from olcli.pipeline import Piece
from olcli.run import RunOptions, learn_piece
from olcli.shards import Shard, shard_chunks

SAMPLES = 5                 # bad lines kept per shard for the warnings (sinks.MAX_WARNINGS)


@dataclass(frozen=True)
class Job:
    """What one shard task needs besides the broadcast model."""
    shard: Shard
    pass_number: int
    first_line: int = 1          # line number of the shard's first line in its file
    holdout: int = 0             # the run's holdout (run.RunOptions.holdout, the kernels' H_PERIOD); 0: none
    holdout_offset: int = 0      # examples before this shard in the data (mod the period)
    strict: bool = False
    check_format: bool = False   # check the file's first lines against the model's input format
    chunk_bytes: int | None = None


@dataclass
class ShardReport:
    index: int
    worker: str
    seconds: float
    finished: float              # time.time() when it ended (the merge tail of a pass is measured from it)
    examples: int
    bad_lines: int
    bad_samples: list


@dataclass
class Part:
    """A learned shard, or the merge of consecutive ones."""
    model: bytes                 # the model file's bytes (Learner.to_bytes)
    first: int                   # shard indices first..last
    last: int
    stats: np.ndarray            # the tallies' statistics, summed (records.S_*)
    auc: np.ndarray              # the AUC histograms, summed
    holdout: np.ndarray          # holdout loss and weight, summed
    shards: list = field(default_factory=list)   # ShardReport per shard
    merge_seconds: float = 0.0   # time spent in merge tasks below this part
    merges: int = 0


@dataclass
class TaskFailure:
    """A shard task's OlcliError, returned (not raised) so that Dask does not retry
    what would fail again the same way."""
    kind: str
    message: str
    shard: int

    @staticmethod
    def of(exc: OlcliError, shard: Shard) -> "TaskFailure":
        return TaskFailure(type(exc).__name__, str(exc), shard.index)

    def error(self) -> OlcliError:
        kind = getattr(errors, self.kind, None)
        if kind is None or not (isinstance(kind, type) and issubclass(kind, OlcliError)) or kind is MissingExtra:
            kind = OlcliError
        return kind(self.message)


class _NoProgress:
    """learn_piece's progress sink: the table is not printed on workers."""

    def rows(self, rows, holdout=False):
        pass


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"


_BROADCAST_LOCK = threading.Lock()
_BROADCAST = [None, None]   # this worker's last broadcast model: (its bytes object, the decoded Learner)


def _broadcast_learner(state: bytes):
    """The broadcast model, decoded once per worker and pass (every task of a pass
    on this worker gets the same bytes object): decoding checks the whole table,
    seconds at -b 24. Callers must not change it (learn_shard copies it)."""
    with _BROADCAST_LOCK:  # a worker may run several tasks at once (threads)
        if _BROADCAST[0] is not state:
            _BROADCAST[:] = [None, None]  # let the previous pass's table go first
            _BROADCAST[:] = [state, Learner.from_bytes(state, "<the broadcast model>")]
        return _BROADCAST[1]


def learn_shard(state: bytes, job: Job):
    """One shard learned from the broadcast model: a Part, or a TaskFailure."""
    started = time.perf_counter()
    shard = job.shard
    try:
        base = _broadcast_learner(state)
        learner = Learner.from_model(copy.deepcopy(base.model))
        learner.use_threads(False)   # the default's members on one thread: the cluster's workers fill the cores
        model = learner.model
        learner.tally = new_tally()
        learner.tally.holdout[:] = new_holdout(job.holdout, job.pass_number > 1 and job.holdout > 0)
        learner.tally.holdout[H_SEEN] = job.holdout_offset
        options = RunOptions(sources=[shard.name], learn=True, strict=job.strict)
        bad_count, samples = 0, []
        check = job.check_format
        for chunk in shard_chunks(shard, job.first_line, job.chunk_bytes):
            if check:
                detected = vote_format(chunk.data)
                if detected is not None:
                    learner.decide_format(detected, shard.name)  # refuses data of another format
                    check = False
            parsed = parse_chunk(chunk, model.input_format, model.bits, model.constant, learner.label_kind,
                                 learner.feature_spec)
            stop = None
            if parsed.bad_lines and job.strict:
                stop = parsed.bad_lines[0]
                parsed.n_examples = int(np.searchsorted(parsed.example_line[:parsed.n_examples],
                                                        stop.line - chunk.first_line + 1))
            else:
                bad_count += len(parsed.bad_lines)
                samples.extend(str(bad) for bad in parsed.bad_lines[:SAMPLES - len(samples)])
            learn_piece(learner, Piece(parsed, chunk.data, stop, (chunk.source, chunk.first_line)), options,
                         None, _NoProgress(), job.pass_number)
            if stop is not None:
                raise DataError(f"{stop} (--strict stops at the first bad line)")
        model_bytes = learner.to_bytes()   # Diverged for a model no file can hold: a failure, not retried
    except OlcliError as exc:
        return TaskFailure.of(exc, shard)
    tally = learner.tally
    report = ShardReport(shard.index, _worker_name(), time.perf_counter() - started, time.time(),
                         int(tally.stats[S_EXAMPLES]), bad_count, samples)
    return Part(model_bytes, shard.index, shard.index, tally.stats.copy(), tally.auc.copy(),
                np.array([tally.holdout[H_LOSS], tally.holdout[H_WEIGHT]]), [report])


def merge_parts(state: bytes, left, right):
    """Two consecutive parts merged with the algorithm's rule, from the broadcast
    model as the base (Learner.merge); their tallies added. A failure wins."""
    for side in (left, right):
        if isinstance(side, TaskFailure):
            return side
    started = time.perf_counter()
    base = _broadcast_learner(state)
    merged = Learner.merge([Learner.from_bytes(left.model, "<a shard's model>"),
                            Learner.from_bytes(right.model, "<a shard's model>")], base=base)
    seconds = time.perf_counter() - started
    return Part(merged.to_bytes(), left.first, right.last, left.stats + right.stats, left.auc + right.auc,
                left.holdout + right.holdout, left.shards + right.shards,
                left.merge_seconds + right.merge_seconds + seconds, left.merges + right.merges + 1)


def finish_pass(base: Learner, merged: Learner, part: Part, first_pass: bool) -> None:
    """The merged learner of a pass (from the merge tree's root ``part``), given the
    learner the pass started from (``base``) and whether it was the run's first
    pass: an algorithm whose kernel module has ``pass_scalars(base_scalars,
    merged_scalars, shards_learned, first_pass)`` (the mixture, engine/mixture.py:
    its members' first-pass losses as the shards' mean) gets its scalars from it;
    ``shards_learned`` counts the shards that read examples. Applied once per
    pass, after the tree, because the pairwise merges must stay associative."""
    rule = getattr(merged._kernels, "pass_scalars", None)
    if rule is None:
        return
    learned = sum(1 for report in part.shards if report.examples > 0)
    merged.model.scalars = np.array(rule(base.model.scalars, merged.model.scalars, learned, first_pass),
                                    dtype=np.float64)


def tree(items: list, merge) -> object:
    """Combine ``items`` pairwise, level by level (0 with 1, 2 with 3, ...; an odd
    last one moves up a level as it is): ``merge(a, b)`` is called
    len(items) - 1 times, in ceil(log2(len(items))) levels."""
    if not items:
        raise ValueError("nothing to combine")
    level = list(items)
    while len(level) > 1:
        level = [merge(level[k], level[k + 1]) if k + 1 < len(level) else level[k]
                 for k in range(0, len(level), 2)]
    return level[0]


def merge_levels(count: int) -> int:
    return math.ceil(math.log2(count)) if count > 1 else 0
