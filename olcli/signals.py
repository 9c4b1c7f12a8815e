"""SIGINT, SIGTERM and SIGHUP: stop cleanly at any moment, never lose what was learned.

One process-wide controller decides what a signal does, by the phase olcli is in:

- ``record`` (importing, reading the options): the signal is only recorded; the
  command notices it as soon as it starts (at most ~0.5 s later) and stops there,
  so even a signal during imports ends with a message and a report, never with a
  ``KeyboardInterrupt`` traceback;
- ``immediate`` (loading a model, compiling kernels, waiting for input): nothing
  is half-done, so the handler raises ``RunStopped`` at once;
- ``deferred`` (learning a chunk, writing outputs): the handler records the
  signal and the pass loop stops at the next check, after the kernel call in
  progress (each call is bounded, see olcli/run.py), so a stop request is
  honoured within a second; a *second* signal while deferred raises at once
  (an escape when, say, an output pipe's reader stopped reading);
- ``finishing`` (saving the model and the report): recorded only, however many
  arrive; the run then ends as stopped (exit 128 + signal, report
  ``complete: false``);
- after ``commit()`` (everything written, the report says complete) a late
  signal is ignored: the run is over and exits 0.

A handler never raises inside a ``critical()`` section (a file being renamed
into place, a temporary file being removed). A handler that raised inside a
Numba kernel's callback into Python would turn into a SystemError; kernels are
compiled before the run (in the immediate phase) and run without callbacks, so
raising happens only between kernel calls.

``RunStopped`` is a ``BaseException`` so that no library's ``except Exception``
(click, numba) swallows it on its way to olcli's handlers.
"""

import signal
from contextlib import contextmanager

NAMES = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP"}


class RunStopped(BaseException):
    """The run was stopped by a signal; exit code 128 + signal number (129, 130, 143)."""

    def __init__(self, signum: int, message: str | None = None):
        super().__init__(message or f"interrupted by {NAMES.get(signum, signum)}")
        self.signum = signum
        self.exit_code = 128 + signum


class _Controller:
    def __init__(self):
        self.installed = False
        self.previous = {}
        self.clear()

    def clear(self):
        """A command's state (not the installed handlers)."""
        self.received = None      # the first signal, until the process ends
        self.count = 0
        self.mode = "record"
        self.critical = 0
        self.committed = False
        self.redelivering = False
        self.raised = False       # a RunStopped is on its way: later signals are only recorded

    def handle(self, signum, frame):
        if self.redelivering:
            self.redelivering = False  # our own copy of a signal already counted
        else:
            self.count += 1
        if self.received is None:
            self.received = signum
        if self.committed or self.critical or self.raised:
            return  # after the work, in a rename, or already stopping: only recorded
        if self.mode == "immediate" or (self.mode == "deferred" and self.count > 1):
            if _in_finalizer(frame):
                # An exception raised in a __del__, a weakref callback or a callback from
                # C (numba's and llvmlite's objects have them) is printed as "Exception
                # ignored" and lost: deliver the signal again a moment later, outside it.
                import threading  # here, not at the top: nothing may delay installing the handlers

                self.redelivering = True
                timer = threading.Timer(0.02, signal.raise_signal, (signum,))
                timer.daemon = True
                timer.start()
                return
            self.raised = True
            raise RunStopped(self.received)


_UNRAISABLE_FILES = ("weakref.py", "_weakrefset.py")
_UNRAISABLE_PACKAGES = ("/llvmlite/", "/ctypes/")


def _in_finalizer(frame) -> bool:
    """Whether Python code runs where an exception cannot propagate: a finalizer
    (__del__, a weakref callback) or a callback from C (llvmlite calls Python back
    through ctypes while numba compiles), where Python prints "Exception ignored"
    and drops it."""
    depth = 0
    while frame is not None and depth < 200:
        code = frame.f_code
        name = code.co_filename
        if code.co_name == "__del__" or name.endswith(_UNRAISABLE_FILES) or any(
                package in name for package in _UNRAISABLE_PACKAGES):
            return True
        frame = frame.f_back
        depth += 1
    return False


controller = _Controller()


def install() -> bool:
    """Route SIGINT, SIGTERM and SIGHUP to the controller (main thread only).
    Returns whether this call installed them (False: already installed, or not
    the main thread)."""
    if controller.installed:
        return False
    for signum in NAMES:
        try:
            controller.previous[signum] = signal.signal(signum, controller.handle)
        except ValueError:  # not the main thread
            for installed, handler in controller.previous.items():
                signal.signal(installed, handler)
            controller.previous.clear()
            return False
        except OSError:
            pass
    controller.installed = True
    return True


def uninstall() -> None:
    """Give the signals back to the handlers that were there before ``install``."""
    if not controller.installed:
        return
    for signum, handler in controller.previous.items():
        signal.signal(signum, handler)
    controller.previous.clear()
    controller.installed = False


def reset() -> None:
    """Forget a previous command's state (in-process use: one process, many commands)."""
    controller.clear()


def pending() -> int | None:
    """The signal received and not yet acted on by a commit, or None."""
    return None if controller.committed else controller.received


def check() -> None:
    """Raise RunStopped if a signal arrived (and the run is not committed)."""
    if controller.received is not None and not controller.committed and not controller.critical:
        controller.raised = True
        raise RunStopped(controller.received)


@contextmanager
def phase(mode: str):
    """Run the block in ``mode`` (immediate, deferred, finishing); a signal that
    arrived before an immediate phase stops it at once."""
    previous = controller.mode
    controller.mode = mode
    try:
        if mode == "immediate":
            check()
        yield
    finally:
        controller.mode = previous


def immediate():
    return phase("immediate")


def deferred():
    return phase("deferred")


def finishing():
    return phase("finishing")


@contextmanager
def critical():
    """No handler raises inside: a rename into place, removing a temporary file."""
    controller.critical += 1
    try:
        yield
    finally:
        controller.critical -= 1


def commit() -> None:
    """Everything is written and the report says complete: later signals are ignored."""
    controller.committed = True


class StopSignals:
    """The pass loop's view: ``check()`` between kernel calls, ``waiting_for_input()``
    around blocking waits. Installs the handlers for the run when nobody did
    (library use), and restores them after."""

    def __init__(self):
        self._installed_here = False

    def __enter__(self):
        self._installed_here = install()
        if self._installed_here:
            reset()
        self._phase = deferred()
        self._phase.__enter__()
        return self

    def __exit__(self, *exc):
        self._phase.__exit__(*exc)
        if self._installed_here:
            uninstall()
        return False

    @property
    def received(self):
        return pending()

    def waiting_for_input(self):
        """Blocked on input (a quiet pipe) nothing is half-learned: stop at once."""
        return immediate()

    def check(self) -> None:
        check()
