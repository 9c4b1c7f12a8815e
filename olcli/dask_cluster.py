"""A connection to a Dask cluster for a training run (``Cluster``): a local cluster of worker
processes started here (``--workers N``) or a scheduler the user started (``--scheduler
ADDRESS``, probed before Dask is imported: ``probe_scheduler``), and waiting on its tasks
boundedly (``Cluster.gather``): a signal stops the wait, a lost scheduler or a cluster without
workers for ``NO_WORKER_SECONDS`` ends it with one message. This module and
olcli/shard_tasks.py (a worker's name) are the only ones that import dask, lazily: ``import
olcli`` and ``olcli --help`` never do.
"""

import logging
import signal
import socket
import sys
import threading
import time
from contextlib import contextmanager

from olcli import signals
from olcli.errors import MissingExtra, OlcliError
from olcli.shards import FEATURE

RETRIES = 3                 # retries of a task that raised an unexpected exception (OSError, MemoryError, ...)
CONNECT_SECONDS = 10.0      # reaching a --scheduler
NO_WORKER_SECONDS = 60.0    # a pass fails when the cluster has had no worker this long
WAIT_TICK = 0.25            # the driver checks signals and the cluster this often while waiting


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


def dask_installed() -> None:
    """MissingExtra naming the extra to install when Dask is not there; imports nothing."""
    from importlib.util import find_spec

    if find_spec("dask") is None or find_spec("distributed") is None:
        raise MissingExtra(FEATURE, "dask")


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


PROBE_SECONDS = 5.0         # connecting to a --scheduler, then its first bytes
_NOT_DASK = ("is not a Dask scheduler ({why}); give the address `dask scheduler` prints "
             "(tcp://HOST:8786 by default), not a web, dashboard or olcli serve port")


def scheduler_address(address: str) -> tuple:
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

    scheme, host, port = scheduler_address(address)
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

    def start(self, warm, *args) -> "Cluster":
        """Connect (a local cluster: start it), wait for a worker, and run ``warm(*args)`` on
        every worker (loading olcli and its kernels there; it returns the seconds it took)."""
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
            warmed = self.client.run(warm, *args)
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
        """Until a worker is there; for olcli's own local cluster, until all of its ``--workers``
        are (the user asked for them; a loaded machine registers them seconds apart), or, after
        NO_WORKER_SECONDS, with those that are."""
        deadline = time.monotonic() + NO_WORKER_SECONDS
        wanted = self.workers if self.cluster is not None else 1
        while (present := len(self.client.scheduler_info().get("workers") or ())) < wanted:
            if time.monotonic() > deadline:
                if present:
                    return
                raise ClusterError(f"the Dask scheduler at {self.address} has had no worker for "
                                   f"{NO_WORKER_SECONDS:.0f} s: start some with `dask worker {self.address}`")
            signals.check()
            time.sleep(WAIT_TICK)


    def gather(self, futures: list, what: str) -> list:
        """The futures' results, waiting in short ticks: a signal stops the wait,
        a lost scheduler or a cluster without workers ends it with a message."""
        client = self.client
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
                raise ClusterError(f"lost the connection to the Dask scheduler at {self.address} while "
                                   f"{what}")
            if self.worker_addresses():
                no_workers_since = None
            elif no_workers_since is None:
                no_workers_since = time.monotonic()
            elif time.monotonic() - no_workers_since > NO_WORKER_SECONDS:
                raise ClusterError(f"the Dask cluster at {self.address} has had no worker for "
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
            return ClusterError(f"lost the Dask scheduler at {self.address} while {what} ({detail})")
        return ClusterError(f"a task failed {RETRIES + 1} times while {what}: {name}: {detail}")

    # --- the passes ---

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

