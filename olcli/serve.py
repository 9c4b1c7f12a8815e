"""``olcli serve``: a model behind VW's daemon line protocol, and HTTP/JSON with ``--http-port``.

This module is the command's start: it checks the options, watches start-up (a stop signal
before the server listens ends it at once: ``StartupWatch``), then runs one serving process or
the supervisor of ``--workers N``. The parts, each a module with one job:

- ``serve_options``: the options and their checks (``ServeOptions``);
- ``serve_log``: the event log, one line per event on stderr, ``time level event key=value ...``
  or JSON (``--log-format json``);
- ``served``: the model held (load, reload, learn, save) and its answers to a buffer of lines;
- ``serve_lines``: the line protocol (``LineServer``, ``LineConnection``);
- ``serve_http``: HTTP/JSON (Starlette on uvicorn, imported only with ``--http-port``) on the
  same event loop and the same ``Served``;
- ``serve_process``: one serving process: event loop, timer, signals, orderly stop;
- ``serve_ports``: the listening sockets, the port and pid files, the shared tables' folder;
- ``serve_workers``: ``--workers N`` processes (SO_REUSEPORT) under a small supervisor (this
  process, replaced by an interpreter that loads no model code) that forwards SIGHUP/SIGTERM,
  restarts a worker that died and writes the port and pid files.

``EventLog``, ``LineConnection``, ``LineServer``, ``Served`` and ``ServeOptions`` are
re-exported here for callers that serve in-process (benchmarks/serve_vs_vw.py).
"""

import asyncio
import os
import signal
import sys
import threading

from olcli import model as model_file
from olcli import signals
from olcli.serve_lines import LineConnection, LineServer
from olcli.serve_log import EventLog
from olcli.serve_options import ALL_INTERFACES, DEFAULT_PORT, ServeOptions
from olcli.serve_ports import announce, listening_sockets, remove_written
from olcli.serve_process import http_module, serve_process
from olcli.served import Served
from olcli.serve_workers import become_supervisor

__all__ = ["DEFAULT_PORT", "EventLog", "LineConnection", "LineServer", "ServeOptions", "Served", "serve"]


# --- start-up ---

STARTUP_GRACE = 2.0   # seconds a stop signal in start-up has to end the process the usual way


class StartupWatch:
    """A safety net for "a signal during start-up stops the server at once". Python runs a
    signal's handler only between bytecodes of the main thread; should the main thread be in a
    long C call, or should a library swallow the handler's ``RunStopped``, the stop would wait
    for the model load to end. The C-level handler also writes the signal's number to a wakeup
    pipe (``signal.set_wakeup_fd``): a thread reading it ends the process itself
    (``Error: interrupted by SIGTERM``, exit 128 + signal) if it still runs ``STARTUP_GRACE``
    seconds later. Nothing has been announced or written then (the server never listened).
    Closed before the event loop installs its own handlers (and its own wakeup fd)."""

    STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

    def __init__(self):
        self.done = threading.Event()
        self.read_fd, self.write_fd = os.pipe()
        os.set_blocking(self.write_fd, False)
        self.previous = signal.set_wakeup_fd(self.write_fd, warn_on_full_buffer=False)
        threading.Thread(target=self._watch, name="olcli-serve-startup-watch", daemon=True).start()

    def _watch(self) -> None:
        try:
            while not self.done.is_set():
                data = os.read(self.read_fd, 64)
                if not data:
                    return
                stops = [number for number in data if number in self.STOPS]
                if stops and not self.done.wait(STARTUP_GRACE):
                    name = signal.Signals(stops[0]).name
                    try:
                        sys.stderr.write(f"Error: interrupted by {name} (while starting; the server never listened)\n")
                        sys.stderr.flush()
                    finally:
                        os._exit(128 + stops[0])
        finally:
            os.close(self.read_fd)

    def close(self) -> None:
        if self.done.is_set():
            return
        self.done.set()
        signal.set_wakeup_fd(self.previous)
        os.close(self.write_fd)   # the reader sees the end of the pipe and stops


_STARTUP_WATCH: list = []


def _startup_over() -> None:
    while _STARTUP_WATCH:
        _STARTUP_WATCH.pop().close()


def serve(options: ServeOptions) -> None:
    """``olcli serve``: check everything, then serve until SIGTERM/SIGINT (exit 0). Until the
    server listens, SIGTERM, SIGINT and SIGHUP stop it at once (olcli/signals.py immediate)."""
    if threading.current_thread() is threading.main_thread():
        _STARTUP_WATCH.append(StartupWatch())
    try:
        _serve_checked(options, signals)
    finally:
        _startup_over()


def _serve_checked(options: ServeOptions, signals) -> None:
    with signals.immediate():
        options.check()
        log = EventLog(options.log_format)
        if options.http_port is not None:
            http_module()
        if not os.path.isfile(options.model_path):
            model_file.load(options.model_path)  # the usual message for a missing or unreadable file
    if options.host in ALL_INTERFACES:
        log("binding_all_interfaces", "warning", host=options.host or "*",
            note="every host that can reach this machine can query"
                 + (" and train" if options.learn else "") + " the model; use --host 127.0.0.1 for local clients")
    _raise_file_limit(options.max_connections + 64)
    if options.workers > 1:
        _startup_over()   # the supervisor watches its own start-up (its loop checks the signals)
        become_supervisor(options, log)   # this process becomes the small supervisor (same pid)
        return
    sockets = {}
    try:
        sockets = listening_sockets(options, reuse_port=False, listen=True)

        def ready():
            announce(options, log, sockets, os.getpid())

        asyncio.run(serve_process(options, log, sockets, ready, started=_startup_over))
    finally:
        for sock in sockets.values():
            sock.close()
        remove_written(options.port_file)
        remove_written(options.http_port_file)
        remove_written(options.pid_file)


def _raise_file_limit(wanted: int) -> None:
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    except (ImportError, ValueError, OSError):
        pass
