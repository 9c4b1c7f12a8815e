"""Training beyond one machine, on a Dask cluster.

``olcli train DATA... --workers N`` starts a local Dask cluster of N worker
processes; ``--scheduler ADDRESS`` uses a cluster the user started (``dask
scheduler`` and ``dask worker``, dask-jobqueue, dask-kubernetes). This module is
the only one that imports dask (lazily: ``import olcli`` and ``olcli --help``
never do), and it is a user of ``olcli.Learner`` like every other part of olcli:

- **Shards** (``cut_shards``): each input file is a shard; an uncompressed file
  is cut into byte ranges at line ends so that there are at least as many shards
  as worker threads (``--shards K`` sets the number). Compressed files and the
  shard boundaries are read by the workers themselves, at the same path (a
  shared file system, as for any Dask job that reads files).
- **A pass** (``ScaleOut._pass``): the driver broadcasts the current model once
  (``Client.scatter(..., broadcast=True)``, the model file's bytes); one task per
  shard (``learn_shard``) rebuilds a ``Learner`` from those bytes and feeds its
  byte range through the CLI's own chunk reader (``inputs``), parser
  (``parsing.parse_chunk``) and learning loop (``run._learn_piece`` ->
  ``Learner.process``); the shards' learners are combined by a fixed binary tree
  of pairwise ``Learner.merge(pair, base=the broadcast learner)`` tasks
  (``merge_parts``), shard 0 with 1, 2 with 3, ... so the result depends on the
  shards, never on which worker ran what or when (the rules are associative,
  so the tree equals one flat merge up to rounding: tests/test_scaleout.py).
  Counters add up; holdout and early stop are those of ``olcli/run.py``.
- **Faults**: a task whose worker dies is run again on another worker by the
  scheduler (up to its ``allowed-failures``, 3 by default); a task that raises
  an unexpected exception is retried ``RETRIES`` times; nothing waits for a
  particular worker. A run that cannot finish (the scheduler gone, no worker for
  ``NO_WORKER_SECONDS``, a task that killed its workers) fails with one message
  and writes no model: the previous file is untouched.
- **Reports**: a line per pass (shard-averaged progressive loss, holdout loss,
  examples, features, workers used, seconds in tasks and in merges) and a
  ``scale_out`` section in the JSON report.

The worker-side functions (``survey_shard``, ``learn_shard``, ``merge_parts``)
import nothing from dask, so they can be called, and tested, without a cluster.
"""

import copy
import io
import logging
import math
import os
import signal
import socket
import sys
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import numpy as np

from olcli import errors, signals
from olcli.engine.records import (
    C_EXAMPLES, H_LOSS, H_SEEN, H_WEIGHT, S_EXAMPLES, S_FEATURES, S_LOSS, S_NEXT_DUMP, S_WEIGHT, new_holdout,
    new_tally)
from olcli.errors import DataError, Diverged, MissingExtra, OlcliError, UsageError

RETRIES = 3                 # retries of a task that raised an unexpected exception (OSError, MemoryError, ...)
CONNECT_SECONDS = 10.0      # reaching a --scheduler
NO_WORKER_SECONDS = 60.0    # a pass fails when the cluster has had no worker this long
WAIT_TICK = 0.25            # the driver checks signals and the cluster this often while waiting
SAMPLES = 5                 # bad lines kept per shard for the warnings (sinks.MAX_WARNINGS)
FEATURE = "--workers/--scheduler (training on a Dask cluster)"


class ClusterError(OlcliError):
    """The cluster could not finish the run (scheduler gone, no workers, tasks killed)."""


def _dask():
    """(dask, distributed), or MissingExtra naming the extra to install."""
    try:
        import dask
        import distributed
    except ImportError:
        raise MissingExtra(FEATURE, "dask") from None
    return dask, distributed


def _dask_installed() -> None:
    """MissingExtra naming the extra to install when Dask is not there; imports nothing."""
    from importlib.util import find_spec

    if find_spec("dask") is None or find_spec("distributed") is None:
        raise MissingExtra(FEATURE, "dask")


# --------------------------------------------------------------------------------------------
# Shards


@dataclass(frozen=True)
class Shard:
    """One task's part of the data: a whole file, or bytes [start, end) of an
    uncompressed one (whole lines)."""
    index: int
    name: str           # the path as given (messages)
    path: str           # absolute path, as the workers open it
    start: int = 0
    end: int | None = None   # None: to the end of the file (always for compressed files)

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end is None

    def describe(self) -> str:
        if self.whole:
            return self.name
        return f"{self.name} bytes {self.start}-{self.end}"


_PEEK = 6
_SCAN = 1 << 16


def _compressed(path: str) -> bool:
    from olcli.inputs import _MAGIC

    with open(path, "rb") as f:
        start = f.read(_PEEK)
    return any(start.startswith(magic) for magic, _ in _MAGIC)


def _line_start_near(f, nominal: int, low: int, size: int) -> int:
    """The start of a line (just after a '\\n') nearest to ``nominal``, above ``low``
    and below ``size``; ``size`` when there is none."""
    after = size
    f.seek(nominal)
    position = nominal
    while position < size:
        piece = f.read(_SCAN)
        if not piece:
            break
        found = piece.find(b"\n")
        if found >= 0:
            after = position + found + 1
            break
        position += len(piece)
    start = max(low, nominal - _SCAN)
    found = _peek(f, start, nominal - start).rfind(b"\n") if nominal > start else -1
    before = start + found + 1 if found >= 0 else low
    candidates = [c for c in (before, after) if low < c < size]
    return min(candidates, key=lambda c: abs(c - nominal)) if candidates else size


def refuse_streams(sources: list) -> None:
    """Standard input, pipes and sockets cannot be sharded: the workers read the files."""
    from olcli.inputs import is_stream

    for source in sources:
        if is_stream(source):
            what = "standard input" if source == "-" else f"{source} (a pipe, socket or descriptor)"
            raise UsageError(f"{FEATURE} reads DATA files on the workers, so {what} cannot be used: "
                             "write the data to a file (on a file system every worker sees) first")


def cut_shards(sources: list, count: int) -> list:
    """The shards of ``sources``, in input order: every file at least one shard,
    uncompressed files cut at line ends into byte ranges of about the total size
    (on disk) / ``count``, so about ``count`` shards of similar size in all.
    Standard input and pipes cannot be sharded (the workers read the files)."""
    refuse_streams(sources)
    files = []
    for source in sources:
        path = os.path.abspath(source)
        size = os.path.getsize(path)
        files.append((source, path, size, _compressed(path)))
    target = sum(size for _, _, size, _ in files) / max(1, count)
    shards = []
    for source, path, size, packed in files:
        parts = 1
        if not packed and size > 0 and target > 0:
            parts = max(1, int(round(size / target)))
        if parts == 1:
            shards.append(Shard(len(shards), source, path))
            continue
        cuts = [0]
        with open(path, "rb") as f:
            for k in range(1, parts):
                cut = _line_start_near(f, max(cuts[-1], size * k // parts), cuts[-1], size)
                if cut < size and cut > cuts[-1]:
                    cuts.append(cut)
            with_newlines = b"\n" in _peek(f, 0, _SCAN)
        if len(cuts) == 1 or not with_newlines:  # one line, or old-Mac '\r' lines: one shard
            shards.append(Shard(len(shards), source, path))
            continue
        cuts.append(size)
        for start, end in zip(cuts[:-1], cuts[1:]):
            shards.append(Shard(len(shards), source, path, start, end))
    return shards


def _peek(f, offset: int, size: int) -> bytes:
    f.seek(offset)
    return f.read(size)


class _Range(io.RawIOBase):
    """Bytes [start, end) of a file, as a forward-only raw stream."""

    def __init__(self, path: str, start: int, end: int):
        self.file = io.FileIO(path, "rb")
        self.file.seek(start)
        self.left = end - start

    def readable(self):
        return True

    def readinto(self, buffer):
        if self.left <= 0:
            return 0
        view = memoryview(buffer)[:min(len(buffer), self.left)]
        got = self.file.readinto(view)
        self.left -= got or 0
        return got

    def close(self):
        try:
            self.file.close()
        finally:
            super().close()


def shard_chunks(shard: Shard, first_line: int = 1, chunk_bytes: int | None = None):
    """The shard's text as ``inputs.Chunk``s of whole lines (the CLI's reader:
    decompression, BOM, line ends), numbered from ``first_line``."""
    from olcli.inputs import CHUNK_BYTES, chunks_of, open_source

    chunk_bytes = chunk_bytes or CHUNK_BYTES
    try:
        if shard.whole:
            stream, counted = open_source(shard.path)
        else:
            counted = _Range(shard.path, shard.start, shard.end)
            stream = io.BufferedReader(counted, buffer_size=1 << 16)
    except OSError as exc:
        raise DataError(f"cannot read {shard.name}: {exc.strerror or exc}") from exc
    for chunk in chunks_of(stream, counted, shard.name, chunk_bytes):
        chunk.first_line += first_line - 1
        yield chunk


def _count_kernel():
    from olcli.engine.jit import njit

    @njit(cache=True, nogil=True)
    def count_lines_and_examples(buf):
        """(lines, lines the parser reads as examples or bad lines): a line is
        skipped when it is only spaces and tabs (one '\\r' before its end
        aside), as engine/parse.py skips it; a line with a NUL byte is bad."""
        n = len(buf)
        lines = 0
        examples = 0
        pos = 0
        while pos < n:
            content = False
            nul = False
            end = pos
            while end < n and buf[end] != 10:
                c = buf[end]
                if c == 0:
                    nul = True
                elif c != 32 and c != 9:
                    if not (c == 13 and (end + 1 == n or buf[end + 1] == 10)):
                        content = True
                end += 1
            lines += 1
            if content and not nul:
                examples += 1
            pos = end + 1
        return lines, examples

    return count_lines_and_examples


_COUNTER = None


def survey_shard(shard: Shard) -> tuple:
    """(lines, examples) of a shard, examples counted as the parser counts them
    except that a bad line counts as one (counting exactly would cost a parse)."""
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = _count_kernel()
    lines = examples = 0
    try:
        for chunk in shard_chunks(shard):
            a, b = _COUNTER(chunk.data)
            lines += int(a)
            examples += int(b)
    except OlcliError as exc:
        return _Failure.of(exc, shard)
    return lines, examples


# --------------------------------------------------------------------------------------------
# The tasks: learn a shard, merge two results


@dataclass(frozen=True)
class Job:
    """What one shard task needs besides the broadcast model."""
    shard: Shard
    pass_number: int
    first_line: int = 1          # line number of the shard's first line in its file
    holdout_period: int = 0      # 0: no holdout
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
class _Failure:
    """A shard task's OlcliError, returned (not raised) so that Dask does not retry
    what would fail again the same way."""
    kind: str
    message: str
    shard: int

    @staticmethod
    def of(exc: OlcliError, shard: Shard) -> "_Failure":
        return _Failure(type(exc).__name__, str(exc), shard.index)

    def error(self) -> OlcliError:
        kind = getattr(errors, self.kind, None)
        if kind is None or not (isinstance(kind, type) and issubclass(kind, OlcliError)) or kind is MissingExtra:
            kind = OlcliError
        return kind(self.message)


class _NoProgress:
    """run._learn_piece's progress sink: the table is not printed on workers."""

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
    from olcli.learner import Learner

    with _BROADCAST_LOCK:  # a worker may run several tasks at once (threads)
        if _BROADCAST[0] is not state:
            _BROADCAST[:] = [None, None]  # let the previous pass's table go first
            _BROADCAST[:] = [state, Learner.from_bytes(state, "<the broadcast model>")]
        return _BROADCAST[1]


def learn_shard(state: bytes, job: Job):
    """One shard learned from the broadcast model: a Part, or a _Failure."""
    from olcli.learner import Learner
    from olcli.parsing import parse_chunk
    from olcli.pipeline import Piece
    from olcli.run import RunOptions, _learn_piece

    started = time.perf_counter()
    shard = job.shard
    try:
        base = _broadcast_learner(state)
        learner = Learner.from_model(copy.deepcopy(base.model))
        model = learner.model
        learner.tally = new_tally()
        learner.tally.holdout[:] = new_holdout(job.holdout_period, job.pass_number > 1 and job.holdout_period > 0)
        learner.tally.holdout[H_SEEN] = job.holdout_offset
        options = RunOptions(sources=[shard.name], learn=True, strict=job.strict)
        bad_count, samples = 0, []
        check = job.check_format
        for chunk in shard_chunks(shard, job.first_line, job.chunk_bytes):
            if check:
                from olcli.inputs import vote_format

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
            _learn_piece(learner, Piece(parsed, chunk.data, stop, (chunk.source, chunk.first_line)), options,
                         None, _NoProgress(), job.pass_number)
            if stop is not None:
                raise DataError(f"{stop} (--strict stops at the first bad line)")
    except OlcliError as exc:
        return _Failure.of(exc, shard)
    tally = learner.tally
    report = ShardReport(shard.index, _worker_name(), time.perf_counter() - started, time.time(),
                         int(tally.stats[S_EXAMPLES]), bad_count, samples)
    return Part(learner.to_bytes(), shard.index, shard.index, tally.stats.copy(), tally.auc.copy(),
                np.array([tally.holdout[H_LOSS], tally.holdout[H_WEIGHT]]), [report])


def merge_parts(state: bytes, left, right):
    """Two consecutive parts merged with the algorithm's rule, from the broadcast
    model as the base (Learner.merge); their tallies added. A failure wins."""
    from olcli.learner import Learner

    for side in (left, right):
        if isinstance(side, _Failure):
            return side
    started = time.perf_counter()
    base = _broadcast_learner(state)
    merged = Learner.merge([Learner.from_bytes(left.model, "<a shard's model>"),
                            Learner.from_bytes(right.model, "<a shard's model>")], base=base)
    seconds = time.perf_counter() - started
    return Part(merged.to_bytes(), left.first, right.last, left.stats + right.stats, left.auc + right.auc,
                left.holdout + right.holdout, left.shards + right.shards,
                left.merge_seconds + right.merge_seconds + seconds, left.merges + right.merges + 1)


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


# --------------------------------------------------------------------------------------------
# The cluster


@contextmanager
def _spawn_without_main():
    """Dask starts worker processes with multiprocessing's spawn, which imports
    the parent's __main__ again in each child: the olcli script (or ``python -m
    olcli``, or a benchmark) would run there. Hide it while the cluster lives
    (workers restarted after a crash are spawned too); the workers import only
    what the tasks need."""
    main = sys.modules.get("__main__")
    if main is None:
        yield
        return
    saved = {name: vars(main)[name] for name in ("__spec__", "__file__") if name in vars(main)}
    main.__spec__ = None
    if "__file__" in vars(main):
        del main.__file__
    try:
        yield
    finally:
        main.__spec__ = saved.get("__spec__")
        if "__file__" in saved:
            main.__file__ = saved["__file__"]


@contextmanager
def _quiet_dask_logs():
    """Dask logs lost connections and restarted workers as tracebacks on stderr;
    olcli says what happened itself, in one line."""
    loggers = [logging.getLogger(name) for name in ("distributed", "tornado", "asyncio")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def _free_port(port: int) -> int:
    """``port`` if it is free on 127.0.0.1, else 0 (any)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return 0
    return port


def _listening(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


def _ignore_interrupts() -> None:
    """In a local worker process: Ctrl-C on the terminal reaches the whole process
    group, and the driver alone decides what it means (the workers would die with
    tracebacks). Called again for workers the nanny restarts."""
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread: nothing to do
        pass


def _worker_plugin():
    """A WorkerPlugin that runs _ignore_interrupts on every worker, also on
    workers started later."""
    from distributed import WorkerPlugin

    class IgnoreInterrupts(WorkerPlugin):
        name = "olcli-ignore-interrupts"

        def setup(self, worker):
            _ignore_interrupts()

    return IgnoreInterrupts()


def _warm(algorithm: str, classes: int) -> float:
    """On a worker: import olcli and load the learning and counting kernels, so
    that the first pass does not include compiling. Returns the seconds it took."""
    started = time.perf_counter()
    from olcli.learner import Learner

    learner = Learner(algorithm, oaa=classes or None)
    learner.learn([])
    global _COUNTER
    if _COUNTER is None:
        _COUNTER = _count_kernel()
    _COUNTER(np.zeros(0, np.uint8))
    return time.perf_counter() - started


PROBE_SECONDS = 5.0         # connecting to a --scheduler, then its first bytes
_NOT_DASK = ("is not a Dask scheduler ({why}); give the address `dask scheduler` prints "
             "(tcp://HOST:8786 by default), not a web, dashboard or olcli serve port")


def _scheduler_address(address: str) -> tuple:
    """(scheme, host, port) of a scheduler address as Dask reads it: ``[SCHEME://]HOST[:PORT]``,
    the scheme tcp and the port 8786 when left out, an IPv6 host in brackets (``[::1]:8786``)
    or bare without a port. Parsed here, without importing Dask, so that a wrong address is
    an error before the seconds ``import distributed`` takes."""
    scheme, separator, location = address.partition("://")
    if not separator:
        scheme, location = "tcp", address
    port = ""
    if location.startswith("["):
        host, closed, rest = location[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ClusterError(f"--scheduler {address!r} is not an address like tcp://HOST:8786 (an IPv6 host "
                               "goes in brackets: tcp://[::1]:8786)")
        port = rest[1:]
    elif location.count(":") == 1:
        host, port = location.split(":")
    else:  # a host alone, or a bare IPv6 address
        host = location
    if scheme == "tcp" and not host:
        raise ClusterError(f"--scheduler {address!r} is not an address like tcp://HOST:8786 (no host)")
    try:
        number = int(port) if port else 8786
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise ClusterError(f"--scheduler {address!r} is not an address like tcp://HOST:8786 (the port {port!r} "
                           "is not a number from 1 to 65535)")
    return scheme, host, number


def _connect(host: str, port: int) -> socket.socket:
    """A TCP connection to the scheduler. A scheduler started a moment ago (`dask scheduler ... &`
    just before olcli) may not listen yet: a refused connection is tried again, every 0.1 s,
    for PROBE_SECONDS, as Dask's own client retries."""
    refused_until = time.monotonic() + PROBE_SECONDS
    while True:
        try:
            return socket.create_connection((host, port), timeout=PROBE_SECONDS)
        except ConnectionRefusedError:
            if time.monotonic() >= refused_until:
                raise
            time.sleep(0.1)


def probe_scheduler(address: str) -> None:
    """Check, before Dask's client talks to it, that ``address`` is a Dask scheduler: a
    scheduler sends its handshake (an 8-byte frame length, then a small message) as soon as it
    accepts a connection (distributed/comm/core.py ``on_connection``). Something else (an HTTP
    server, a database, olcli serve's ports) sends nothing or something else: Dask's client
    would then wait forever, or read "HTTP/1.1" as a length of 3 EiB and raise MemoryError.
    Here each such case is a ClusterError naming the address, within 2 x PROBE_SECONDS.
    Only tcp:// addresses are probed (tls://, ucx:// and others go to Dask as given)."""
    import struct

    scheme, host, port = _scheduler_address(address)
    if scheme != "tcp":
        return
    try:
        connection = _connect(host, port)
    except socket.timeout:
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: no answer to a connection within "
                           f"{PROBE_SECONDS:g} s (is the address routable from here, and the port open? olcli never "
                           f"falls back to training here)") from None
    except OSError as exc:
        reason = "connection refused: nothing listens there" if isinstance(exc, ConnectionRefusedError) else (
            exc.strerror or str(exc))
        raise ClusterError(f"cannot reach the Dask scheduler at {address}: {reason}; start one with "
                           f"`dask scheduler`, or give --workers N for a local cluster (olcli never falls back to "
                           f"training here)") from None
    with connection:
        connection.settimeout(PROBE_SECONDS)
        received, closed, deadline = b"", False, time.monotonic() + PROBE_SECONDS
        try:
            while len(received) < 8 and time.monotonic() < deadline:
                connection.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = connection.recv(8 - len(received))
                if not chunk:
                    closed = True
                    break
                received += chunk
        except socket.timeout:
            pass
        except OSError as exc:
            raise ClusterError(f"--scheduler {address} " + _NOT_DASK.format(
                why=f"it reset the connection: {exc.strerror or exc}")) from None
    if not received and closed:
        raise ClusterError(f"--scheduler {address} " + _NOT_DASK.format(
            why="it accepted a connection and closed it without a greeting"))
    if not received:
        raise ClusterError(f"--scheduler {address} " + _NOT_DASK.format(
            why=f"it accepted a connection but sent nothing in {PROBE_SECONDS:g} s, where a scheduler greets "
                "at once"))
    if len(received) < 8:
        raise ClusterError(f"--scheduler {address} " + _NOT_DASK.format(
            why=f"it sent {received!r} and closed the connection"))
    (length,) = struct.unpack("<Q", received)
    if not 0 < length < (1 << 24):
        raise ClusterError(f"--scheduler {address} " + _NOT_DASK.format(why=f"it greeted with {received!r}"))


class Cluster:
    """A connection to a Dask scheduler: a local cluster started here (``workers``)
    or an existing one (``scheduler``). Closed (and a local cluster's processes
    stopped) by ``close``."""

    def __init__(self, workers: int | None = None, scheduler: str | None = None, stderr=None, quiet=False):
        self.workers, self.scheduler = workers, scheduler
        self.stderr = stderr if stderr is not None else sys.stderr
        self.quiet = quiet
        self.client = self.cluster = None
        self.dashboard = None
        self.address = scheduler
        self.startup_seconds = None
        self._stack = []

    def _enter(self, manager):
        manager.__enter__()
        self._stack.append(manager)

    def start(self, algorithm: str = "adagrad", classes: int = 0) -> "Cluster":
        if self.workers is None:  # is it a Dask scheduler? Known in seconds, before importing Dask takes its own
            probe_scheduler(self.scheduler)
        dask, distributed = _dask()
        started = time.perf_counter()
        self._enter(_quiet_dask_logs())
        if self.workers is not None:
            self._enter(_spawn_without_main())
            self._enter(dask.config.set({"distributed.scheduler.allowed-failures": 3}))
            try:
                self.cluster = distributed.LocalCluster(
                    n_workers=self.workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                    dashboard_address=f"127.0.0.1:{_free_port(8787)}", silence_logs=logging.CRITICAL)
            except Exception as exc:  # a cluster that cannot start says why, in one line
                raise ClusterError(f"could not start a local Dask cluster of {self.workers} workers: "
                                   f"{type(exc).__name__}: {exc}") from exc
            self.address = self.cluster.scheduler_address
            self.client = distributed.Client(self.cluster, set_as_default=False)
            self.dashboard = self.cluster.dashboard_link
            self.client.register_plugin(_worker_plugin())
        else:  # probed above, before Dask was imported
            try:
                self.client = distributed.Client(self.scheduler, timeout=CONNECT_SECONDS, set_as_default=False)
            except Exception as exc:
                raise ClusterError(
                    f"cannot reach the Dask scheduler at {self.scheduler} ({type(exc).__name__}: {exc}); start "
                    f"one with `dask scheduler` and workers with `dask worker {self.scheduler}`, or give "
                    f"--workers N for a local cluster (olcli never falls back to training here)") from None
            self.address = self.client.scheduler.address
            port = self.client.scheduler_info().get("services", {}).get("dashboard")
            host = self.address.split("://")[-1].rsplit(":", 1)[0]
            if port and _listening(host, port):
                self.dashboard = f"http://{host}:{port}/status"
        self._wait_for_workers()
        try:
            warmed = self.client.run(_warm, algorithm, classes)
        except Exception as exc:
            raise ClusterError(f"olcli does not run on the Dask workers ({type(exc).__name__}: {exc}): install "
                               "the same olcli (and numba) in the workers' environment") from None
        self.startup_seconds = time.perf_counter() - started
        if not self.quiet:
            kind = (f"local Dask cluster of {self.workers} worker processes" if self.workers is not None
                    else f"Dask scheduler {self.address}")
            self.stderr.write(f"{kind}: {self.threads()} worker threads, ready in {self.startup_seconds:.1f} s "
                              f"(olcli loaded on the workers in {max(warmed.values(), default=0):.1f} s)\n")
            if self.dashboard:
                self.stderr.write(f"Dask dashboard: {self.dashboard}\n")
            self.stderr.flush()
        return self

    def _wait_for_workers(self) -> None:
        deadline = time.monotonic() + NO_WORKER_SECONDS
        while not self.client.scheduler_info().get("workers"):
            if time.monotonic() > deadline:
                raise ClusterError(f"the Dask scheduler at {self.address} has had no worker for "
                                   f"{NO_WORKER_SECONDS:.0f} s: start some with `dask worker {self.address}`")
            signals.check()
            time.sleep(WAIT_TICK)

    def worker_addresses(self) -> set:
        return set(self.client.scheduler_info().get("workers", {}))

    def threads(self) -> int:
        return sum(info.get("nthreads", 1) for info in self.client.scheduler_info().get("workers", {}).values())

    def close(self) -> None:
        with signals.critical():
            try:
                if self.client is not None:
                    self.client.close(timeout=10)
                if self.cluster is not None:
                    self.cluster.close(timeout=20)
            except Exception:  # closing is best effort; the local processes die with their nanny
                pass
            finally:
                self.client = self.cluster = None
                while self._stack:
                    self._stack.pop().__exit__(None, None, None)


# --------------------------------------------------------------------------------------------
# The run: passes on the cluster


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
        from olcli.run import _BestPass

        self.best = _BestPass()

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
            for k, found in enumerate(self._gather(futures, "counting the shards' lines")):
                if isinstance(found, _Failure):
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
        from olcli.inputs import vote_format

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

    # --- waiting, boundedly ---

    def _gather(self, futures: list, what: str) -> list:
        """The futures' results, waiting in short ticks: a signal stops the wait,
        a lost scheduler or a cluster without workers ends it with a message."""
        client = self.cluster.client
        no_workers_since = None
        remaining = [len(futures)]
        lock, finished = threading.Lock(), threading.Event()

        def one_done(_):
            with lock:
                remaining[0] -= 1
                if remaining[0] <= 0:
                    finished.set()

        for future in futures:
            future.add_done_callback(one_done)
        while not finished.wait(WAIT_TICK):
            signals.check()
            if client.status not in ("running", "connecting"):
                raise ClusterError(f"lost the connection to the Dask scheduler at {self.cluster.address} while "
                                   f"{what}")
            if self.cluster.worker_addresses():
                no_workers_since = None
            elif no_workers_since is None:
                no_workers_since = time.monotonic()
            elif time.monotonic() - no_workers_since > NO_WORKER_SECONDS:
                raise ClusterError(f"the Dask cluster at {self.cluster.address} has had no worker for "
                                   f"{NO_WORKER_SECONDS:.0f} s while {what}")
        try:
            return client.gather(futures)
        except Exception as exc:
            raise self._explain(exc, what) from None

    def _explain(self, exc: BaseException, what: str) -> ClusterError:
        name = type(exc).__name__
        if name == "KilledWorker":
            return ClusterError(f"a task died with its worker too often while {what} (the scheduler's "
                                f"allowed-failures): {exc}; is a worker running out of memory?")
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else name
        if name in ("CancelledError", "FutureCancelledError"):
            return ClusterError(f"lost the Dask scheduler at {self.cluster.address} while {what} ({detail})")
        return ClusterError(f"a task failed {RETRIES + 1} times while {what}: {name}: {detail}")

    # --- the passes ---

    def run(self, result) -> None:
        """All passes, with run.py's holdout and early stop; fills ``result.report``
        after each pass (so a stopped run reports what it did)."""
        from olcli.run import _end_pass

        learner, options = self.learner, self.options
        best = self.best
        self.started = time.perf_counter()
        pass_number = 0
        if not options.quiet:
            self.stderr.write(f"{len(self.shards)} shards: " + ", ".join(s.describe() for s in self.shards[:6])
                              + (", ..." if len(self.shards) > 6 else "") + "\n" + self.HEADER)
            self.stderr.flush()
        try:
            for pass_number in range(1, options.passes + 1):
                self._pass(pass_number)
                stop = _end_pass(learner, options, best, pass_number)
                self._print_pass(self.passes[-1])
                result.report = self.report()
                if stop:
                    break
        finally:
            completed = self.passes[-1].number if self.passes else None
            if best.snapshot is not None and best.number != completed:
                # -f keeps the pass with the best holdout loss (run.py does the same).
                from olcli.model import restore

                restore(learner.model.state, best.snapshot[0])
                learner.model.counters[:] = best.snapshot[1]
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
        part = self._gather([root], f"learning pass {number}")[0]
        wall = time.perf_counter() - started
        ended = time.time()
        lost = len(before - self.cluster.worker_addresses())
        del broadcast, learned, root
        if isinstance(part, _Failure):
            raise part.error()
        merged = type(learner).from_bytes(part.model, "<the merged model>")
        learner.model.state = merged.model.state
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
        from olcli.run import report_of

        learner, options = self.learner, self.options
        elapsed = time.perf_counter() - self.started
        report = report_of(learner, options, elapsed, bad_lines=self.bad_lines,
                           bad_line_samples=list(self.bad_samples), progress=[], passes=len(self.passes),
                           best=self.best, cache=None, cache_reused=False)
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
    (commands._Session._finish), as for a run on one machine.

    A run that cannot finish (a data error, a lost scheduler, a diverged model)
    writes no model: the previous file is untouched, and the message says so. A
    signal (Ctrl-C, SIGTERM) stops it after the pass in progress is abandoned,
    and the model of the last completed pass is written, as one machine writes
    the model learned so far."""
    from olcli.run import RunResult

    check_options(options, cluster_options, prediction_output)
    _dask_installed()
    learner = session.learner
    session.finished = True  # from here on this function reports whatever happens
    started_examples = float(learner.model.counters[C_EXAMPLES])
    from olcli.model import copy_state

    start_state = (copy_state(learner.model.state), learner.model.counters.copy())  # its touched rows only
    result = RunResult(report={})
    outcome, ran, trainer = None, False, None
    cluster = Cluster(cluster_options.get("workers"), cluster_options.get("scheduler"), quiet=options.quiet)
    try:
        try:
            with signals.immediate():  # nothing learned yet: a signal stops at once
                cluster.start(learner.algorithm, learner.model.classes)
                trainer = ScaleOut(learner, options, cluster, cluster_options.get("shards"))
                trainer.prepare()
            ran = True
            with signals.deferred():
                trainer.run(result)
        finally:
            cluster.close()
    except signals.RunStopped as exc:
        outcome = exc
    except KeyboardInterrupt:
        outcome = signals.RunStopped(signal.SIGINT)
    except OlcliError as exc:
        outcome = exc
    except MemoryError:
        outcome = OlcliError("out of memory on the driver: use a smaller -b")
    except OSError as exc:
        outcome = OlcliError(f"input/output error: {exc}")
    if outcome is not None and not isinstance(outcome, signals.RunStopped):
        # A run that cannot finish keeps the previous model file as it was (the
        # session's ending then says that nothing was learned and -f was not written).
        learner.model.state, learner.model.counters = start_state
        done = len(trainer.passes) if trainer is not None else 0
        if session.model_path and done and not isinstance(outcome, Diverged):
            outcome.args = (f"{outcome}; a cluster run that cannot finish keeps none of its passes "
                            f"({done} complete)",)
    if trainer is not None and not result.report:
        result.report = trainer.report()
    with signals.finishing():
        session._finish(outcome, result, None, started_examples, ran, list(extra))
