"""``olcli serve --workers N``: a small supervisor and N worker processes.

The supervisor holds no model. ``olcli serve`` checks the options, then replaces itself
(``os.execv``: the same pid, so ``--pid-file``, signals and the caller's ``wait`` reach it) by a
fresh interpreter that imports only this module, the standard library and olcli's light modules
(olcli/serve_ports.py): no NumPy, no model code, no typer. It starts the workers as fresh
interpreters too (``subprocess``), each a whole serving process (olcli/serve_process.py) with
its own sockets on the same ports (SO_REUSEPORT: the kernel spreads connections). The
supervisor reserves the ports, writes the port and pid files once every worker is ready,
forwards SIGHUP (and one worker's ``POST /reload``) to every worker, stops them on
SIGTERM/SIGINT, restarts a worker that died, and removes the shared tables' folder at stop.

The workers tell the supervisor that they are ready, have failed or have reloaded by one line
of JSON each on one pipe: a write of less than PIPE_BUF (4096) bytes is never interleaved with
another, so the pipe needs no lock (and no ``multiprocessing`` queue, whose semaphore would
start a resource-tracker process beside the server)."""

import json
import os
import select
import signal
import subprocess
import sys
import time
from dataclasses import asdict

from olcli import signals
from olcli.errors import OlcliError
from olcli.serve_log import EventLog
from olcli.serve_options import ServeOptions
from olcli.serve_ports import announce, listening_sockets, remove_table_folder, remove_written

STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
START_TIMEOUT = 600.0     # seconds for every worker to be ready (a cold kernel cache: each compiles them)
MESSAGE_BYTES = 4000      # one message, less than PIPE_BUF: written whole
# A fresh interpreter's start: olcli from where this one found it, then main(arguments).
_BOOT = ("import sys\nif sys.argv[1] not in sys.path: sys.path.append(sys.argv[1])\n"
         "from olcli.serve_workers import main\nmain(sys.argv[2:])")


def _command(*args) -> list:
    """The command line of a fresh interpreter like this one (same flags) running ``main(args)``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    flags = getattr(subprocess, "_args_from_interpreter_flags", list)()   # -X, -W, -O..., as multiprocessing does
    return [sys.executable, *flags, "-c", _BOOT, root, *map(str, args)]


def become_supervisor(options: ServeOptions, log: EventLog) -> None:
    """Replace this process by the supervisor (same pid); supervise here only where a process
    cannot replace itself. SIGTERM, SIGINT and SIGHUP are held (blocked, not lost) from before
    the replacement until the supervisor's own handlers are in; one that arrived before is an
    ``interrupted by`` stop (olcli/signals.py)."""
    if sys.executable and hasattr(os, "execv"):
        held = signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
        try:
            signals.check()
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except (OSError, ValueError):
                    pass
            os.execv(sys.executable, _command("supervise", json.dumps(asdict(options))))
        except OSError:
            pass
        finally:   # reached only if the replacement did not happen
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
    supervise(options, log)


def main(argv: list) -> None:
    """The fresh interpreters' entry: ``supervise OPTIONS`` or ``worker INDEX FD OPTIONS PORTS``."""
    if argv[0] == "worker":
        worker_main(int(argv[1]), int(argv[2]), json.loads(argv[3]), json.loads(argv[4]))
        return
    options = ServeOptions(**json.loads(argv[1]))
    code = 0
    try:
        supervise(options, EventLog(options.log_format), held=True)
    except OlcliError as exc:
        sys.stderr.write(f"Error: {exc}\n")
        code = exc.exit_code
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


# --- the workers ---

def worker_main(index: int, fd: int, options: dict, ports: dict) -> None:
    """A worker process: its own sockets on the supervisor's ports (SO_REUSEPORT); ready,
    failed and reloaded told to the supervisor on the pipe ``fd``."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the supervisor decides when to stop
    _stop_with_parent()
    log = EventLog(options["log_format"], worker=index)

    def tell(kind, detail):
        message = [kind, index, detail]
        data = (json.dumps(message) + "\n").encode()
        while len(data) > MESSAGE_BYTES:   # a long error text, shortened
            message[2] = message[2][:len(message[2]) // 2]
            data = (json.dumps(message) + "\n").encode()
        os.write(fd, data)

    try:
        import asyncio

        from olcli.serve_process import serve_process

        worker_options = ServeOptions(**{**options, "port": ports["line"], "http_port": ports.get("http")})
        sockets = listening_sockets(worker_options, reuse_port=True, listen=True)
        code = asyncio.run(serve_process(worker_options, log, sockets, lambda: tell("ready", os.getpid()),
                                         stop_signals=(signal.SIGTERM,),
                                         on_reload=lambda: tell("reloaded", os.getpid())))
    except OlcliError as exc:
        tell("failed", str(exc))
        sys.exit(exc.exit_code)
    except BaseException as exc:
        tell("failed", f"{type(exc).__name__}: {exc}")
        raise
    sys.exit(code)


def _stop_with_parent() -> None:
    """Linux: a worker gets SIGTERM when its supervisor dies, even by SIGKILL (no orphans)."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGTERM))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the supervisor already died
        os.kill(os.getpid(), signal.SIGTERM)


class _Messages:
    """The workers' lines on the pipe, read as they come."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""

    def get(self, timeout: float) -> list:
        """The messages that arrive within ``timeout`` seconds (maybe none): (kind, index, detail)."""
        if not select.select([self.fd], [], [], timeout)[0]:
            return []
        self.buffer += os.read(self.fd, 1 << 16)
        *lines, self.buffer = self.buffer.split(b"\n")
        return [tuple(json.loads(line)) for line in lines if line]


# --- the supervisor ---

def supervise(options: ServeOptions, log: EventLog, held: bool = False) -> None:
    """Start the workers, forward SIGHUP and SIGTERM/SIGINT to them, restart one that dies.
    ``held``: the stop signals arrive blocked (``become_supervisor``); unblocked once handled."""
    # Reserve the ports (bound, not listening: only the workers' sockets get connections).
    reserved = listening_sockets(options, reuse_port=True, listen=False)
    ports = json.dumps({name: sock.getsockname()[1] for name, sock in reserved.items()})
    received = []
    previous = {signum: signal.signal(signum, lambda s, f: received.append(s)) for signum in STOPS}
    if held:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)
    reader, writer = os.pipe()
    messages = _Messages(reader)
    arguments = json.dumps(asdict(options))
    workers = {}

    def start(index):
        workers[index] = subprocess.Popen(_command("worker", index, writer, arguments, ports),
                                          stdin=subprocess.DEVNULL, pass_fds=(writer,))

    try:
        for index in range(options.workers):
            start(index)
        ready, deadline = set(), time.monotonic() + START_TIMEOUT
        while len(ready) < options.workers:
            if received and received[-1] in (signal.SIGTERM, signal.SIGINT):
                return
            news = messages.get(0.2)
            if not news:
                if time.monotonic() > deadline:
                    raise OlcliError(f"the workers did not start within {START_TIMEOUT:g} s")
                if any(process.poll() is not None for process in workers.values()):
                    raise OlcliError("a worker stopped while starting (see the log above)")
            for kind, index, detail in news:
                if kind == "failed":
                    raise OlcliError(f"worker {index}: {detail}")
                if kind == "ready":
                    ready.add(index)
        announce(options, log, reserved, os.getpid())
        while True:
            for kind, index, detail in messages.get(0.2):
                if kind == "failed":
                    log("worker_failed", "error", worker=index, error=detail)
                elif kind == "reloaded":   # POST /reload reached one worker: reload the others too
                    for other, process in workers.items():
                        if other != index and process.poll() is None:
                            os.kill(process.pid, signal.SIGHUP)
            stopping = False
            while received:
                signum = received.pop(0)
                if signum == signal.SIGHUP:
                    log("sighup", note="reloading every worker")
                    for process in workers.values():
                        if process.poll() is None:
                            os.kill(process.pid, signal.SIGHUP)
                else:
                    log("stopping", signal=signal.Signals(signum).name)
                    stopping = True
            if stopping:
                break
            for index, process in list(workers.items()):
                if process.poll() is not None:
                    log("worker_died", "error", worker=index, pid=process.pid, exitcode=process.returncode,
                        note="restarting it")
                    time.sleep(0.5)
                    start(index)
    finally:
        for process in workers.values():
            if process.poll() is None:
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + options.shutdown_timeout + 5
        for process in workers.values():
            try:
                process.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for sock in reserved.values():
            sock.close()
        os.close(reader)
        os.close(writer)
        remove_written(options.port_file)
        remove_written(options.http_port_file)
        remove_written(options.pid_file)
        remove_table_folder(os.getpid())
        log("stopped", workers=options.workers)
