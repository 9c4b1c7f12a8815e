"""SIGINT and SIGTERM during a run: finish the current chunk, then stop cleanly.

A Python signal handler that raises can fire inside a numba kernel's callbacks
into Python, where the exception turns into a SystemError and the model is lost.
So while a run is active the handler only records the signal; the chunk loop
calls ``check`` between chunks. While the loop is blocked waiting for input
(e.g. a quiet pipe) nothing is half-learned, so the handler stops it at once.
"""

import signal
import threading
from contextlib import contextmanager

from olcli.errors import OlcliError

_NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


class RunStopped(OlcliError):
    """The run was stopped by a signal; exit code 128 + signal number (130, 143)."""

    def __init__(self, signum: int):
        super().__init__(f"interrupted by {_NAMES.get(signum, signum)}")
        self.exit_code = 128 + signum


class StopSignals:
    def __init__(self):
        self.received = None
        self._waiting = False
        self._previous = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for signum in _NAMES:
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        return False

    def _handle(self, signum, frame):
        self.received = signum
        if self._waiting:
            raise RunStopped(signum)

    @contextmanager
    def waiting_for_input(self):
        self.check()
        self._waiting = True
        try:
            yield
        finally:
            self._waiting = False

    def check(self) -> None:
        if self.received is not None:
            raise RunStopped(self.received)
