"""``olcli serve --workers N``: the supervisor. N worker processes (``multiprocessing`` spawn),
each a whole serving process (olcli/serve_process.py) with its own sockets on the same ports
(SO_REUSEPORT: the kernel spreads connections); the supervisor reserves the ports, writes the
port and pid files once every worker is ready, forwards SIGHUP (and one worker's ``POST /reload``)
to every worker, stops them on SIGTERM/SIGINT and restarts a worker that died."""

import asyncio
import os
import signal
import sys
import time
from dataclasses import asdict

from olcli.errors import OlcliError
from olcli.serve_log import EventLog
from olcli.serve_options import ServeOptions
from olcli.serve_process import announce, listening_sockets, remove_written, serve_process


def _worker_main(options: ServeOptions, index: int, ports: dict, queue) -> None:
    """A worker process: its own sockets on the supervisor's ports (SO_REUSEPORT)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the supervisor decides when to stop
    _stop_with_parent()
    log = EventLog(options.log_format, worker=index)
    try:
        worker_options = ServeOptions(**{**asdict(options), "port": ports["line"],
                                         "http_port": ports.get("http")})
        sockets = listening_sockets(worker_options, reuse_port=True, listen=True)
        asyncio.run(serve_process(worker_options, log, sockets,
                                   lambda: queue.put(("ready", index, os.getpid())), stop_signals=(signal.SIGTERM,),
                                   on_reload=lambda: queue.put(("reloaded", index, os.getpid()))))
    except OlcliError as exc:
        queue.put(("failed", index, str(exc)))
        sys.exit(exc.exit_code)
    except BaseException as exc:
        queue.put(("failed", index, f"{type(exc).__name__}: {exc}"))
        raise


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


def supervise(options: ServeOptions, log: EventLog) -> None:
    """Start the workers, forward SIGHUP and SIGTERM/SIGINT to them, restart one that dies."""
    import multiprocessing
    import queue as queues

    from olcli.shared_table import remove_folder

    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    # Reserve the ports (bound, not listening: only the workers' sockets get connections).
    reserved = listening_sockets(options, reuse_port=True, listen=False)
    ports = {name: sock.getsockname()[1] for name, sock in reserved.items()}
    received = []
    previous = {signum: signal.signal(signum, lambda s, f: received.append(s))
                for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    workers = {}

    def start(index):
        process = context.Process(target=_worker_main, args=(options, index, ports, messages),
                                  name=f"olcli-serve-worker-{index}", daemon=False)
        process.start()
        workers[index] = process
        return process

    try:
        for index in range(options.workers):
            start(index)
        ready, deadline = set(), time.monotonic() + 120
        while len(ready) < options.workers:
            if received and received[-1] in (signal.SIGTERM, signal.SIGINT):
                return
            try:
                kind, index, detail = messages.get(timeout=0.2)
            except queues.Empty:
                if time.monotonic() > deadline:
                    raise OlcliError("the workers did not start within 120 s")
                if any(not p.is_alive() for p in workers.values()):
                    raise OlcliError("a worker stopped while starting (see the log above)")
                continue
            if kind == "failed":
                raise OlcliError(f"worker {index}: {detail}")
            ready.add(index)
        announce(options, log, reserved, os.getpid())
        stopping = False
        while not stopping:
            try:
                kind, index, detail = messages.get(timeout=0.2)
                if kind == "failed":
                    log("worker_failed", "error", worker=index, error=detail)
                elif kind == "reloaded":   # POST /reload reached one worker: reload the others too
                    for other, process in workers.items():
                        if other != index and process.is_alive():
                            os.kill(process.pid, signal.SIGHUP)
            except queues.Empty:
                pass
            while received:
                signum = received.pop(0)
                if signum == signal.SIGHUP:
                    log("sighup", note="reloading every worker")
                    for process in workers.values():
                        if process.is_alive():
                            os.kill(process.pid, signal.SIGHUP)
                else:
                    log("stopping", signal=signal.Signals(signum).name)
                    stopping = True
            if stopping:
                break
            for index, process in list(workers.items()):
                if not process.is_alive():
                    log("worker_died", "error", worker=index, pid=process.pid, exitcode=process.exitcode,
                        note="restarting it")
                    time.sleep(0.5)
                    start(index)
    finally:
        for process in workers.values():
            if process.is_alive():
                os.kill(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + options.shutdown_timeout + 5
        for process in workers.values():
            process.join(max(0.1, deadline - time.monotonic()))
            if process.is_alive():
                process.kill()
                process.join(5)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for sock in reserved.values():
            sock.close()
        remove_written(options.port_file)
        remove_written(options.http_port_file)
        remove_written(options.pid_file)
        messages.close()
        
        remove_folder(os.getpid())
        log("stopped", workers=options.workers)
