"""One serving process of ``olcli serve``: its listening sockets, the line server and (with
``--http-port``) the HTTP server on one asyncio event loop around one ``Served`` model, the
timer thread for periodic work (``Ticker``), the signals (SIGHUP reloads or saves, SIGTERM/SIGINT
stop), and the orderly stop (every received line answered, the last save written). The sockets
and the port and pid files are olcli/serve_ports.py's."""

import asyncio
import gc
import signal
import threading
import time

from olcli import signals
from olcli.errors import MissingExtra
from olcli.serve_lines import LineServer
from olcli.serve_log import EventLog
from olcli.serve_options import ServeOptions
from olcli.served import Served


class Ticker:
    """Periodic work (the idle sweep, HTTP's once-a-second tick, --learn's saves) run on the
    event loop, timed by a thread. The loop itself keeps no timer: one pending asyncio timer
    (an ``asyncio.sleep`` in some task) makes each of the loop's waits for the sockets a timed
    ``epoll_wait``, which cost every single-example round trip ~0.7 µs on this 2-core VM (an
    asyncio echo server with a 0.1 s or 1 s ``sleep`` loop against one without:
    benchmarks/serve_vs_vw.py's client, same CPU, 9 interleaved rounds)."""

    def __init__(self, loop):
        self.loop = loop
        self.jobs = []               # [interval, next due (monotonic), callback]
        self._stop = threading.Event()
        self._thread = None

    def every(self, seconds: float, callback) -> None:
        self.jobs.append([seconds, time.monotonic() + seconds, callback])

    def start(self) -> None:
        if self.jobs:
            self._thread = threading.Thread(target=self._run, name="olcli-serve-ticker", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            wait = min(job[1] for job in self.jobs) - time.monotonic()
            if self._stop.wait(max(0.0, wait)):
                return
            now = time.monotonic()
            due = []
            for job in self.jobs:
                if job[1] <= now:
                    due.append(job[2])
                    job[1] = max(job[1] + job[0], now)
            try:
                self.loop.call_soon_threadsafe(self._run_jobs, due)
            except RuntimeError:  # the loop is closed
                return

    def _run_jobs(self, callbacks) -> None:
        for callback in callbacks:
            callback()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def http_module():
    """olcli.serve_http, or the message that names the extra."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise MissingExtra("--http-port (serving HTTP)", "serve") from None
    from olcli import serve_http

    return serve_http


async def serve_process(options: ServeOptions, log: EventLog, sockets: dict, ready=None,
                        stop_signals=(signal.SIGTERM, signal.SIGINT), on_reload=None, started=None) -> int:
    """Serve on the given listening sockets until SIGTERM/SIGINT; the exit code.

    Start-up (loading the model, loading or compiling its kernels) runs in olcli's immediate
    signal phase (olcli/signals.py): SIGTERM, SIGINT or SIGHUP stops it at once (``RunStopped``,
    exit 128 + signal, nothing announced). Once the loop's own handlers are installed, a signal
    received in between is acted on as if it came after."""
    loop = asyncio.get_running_loop()
    with signals.immediate():
        log("loading", model=options.model_path)
        served = Served(options, log)
        served.on_reload = on_reload
        lines = LineServer(served, options, log)
        await lines.start(sockets["line"])
        http = http_task = None
        if "http" in sockets:
            http = http_module().HttpServer(served, options, log, sockets["http"])
            http_task = asyncio.ensure_future(http.serve())
            await http.started()
    if started is not None:
        started()   # olcli/serve.py: the start-up watch is closed
    ticker = Ticker(loop)
    if lines.sweep_interval():
        ticker.every(lines.sweep_interval(), lines.sweep_idle)
    if http is not None:
        ticker.every(1.0, http.tick)
    saves = set()                    # --learn: periodic saves in progress
    stop = asyncio.Event()
    stop_signal = []

    def on_stop(signum):
        if not stop_signal:
            log("stopping", signal=signal.Signals(signum).name)
        stop_signal.append(signum)
        stop.set()

    def on_hangup():
        if options.learn:
            log("sighup", note="--learn: SIGHUP saves the model (the server's own model is the one learning)")
            asyncio.ensure_future(served.save("SIGHUP"))
        else:
            asyncio.ensure_future(served.reload("SIGHUP"))

    for signum in stop_signals:
        loop.add_signal_handler(signum, on_stop, signum)
    loop.add_signal_handler(signal.SIGHUP, on_hangup)
    early = signals.pending()   # arrived after the immediate phase, before the handlers above
    if early is not None:
        signals.check()

    if options.learn and options.save_every > 0:
        def save_periodically():
            if served.changed_since_save() and served.saving is None:
                task = asyncio.ensure_future(served.save("periodic"))
                saves.add(task)
                task.add_done_callback(saves.discard)
        ticker.every(options.save_every, save_periodically)
    ticker.start()

    # Everything loaded so far lives as long as the server: keep it out of the garbage
    # collector's full passes (which would otherwise pause a request for milliseconds).
    gc.collect()
    gc.freeze()
    if ready is not None:
        ready()
    try:
        await stop.wait()
    finally:
        ticker.stop()
        for signum in (*stop_signals, signal.SIGHUP):
            loop.remove_signal_handler(signum)
        await lines.stop(options.shutdown_timeout)
        if http is not None:
            await http.stop(http_task)
        await asyncio.gather(*saves, return_exceptions=True)
        if served.saving is not None:
            await asyncio.gather(served.saving, return_exceptions=True)
        if options.learn:
            served.save_now(f"stop ({signal.Signals(stop_signal[0]).name})" if stop_signal else "stop")
        log("stopped", requests=served.stats.requests, examples=served.stats.examples,
            learned=served.stats.learned)
    return 0
