"""Worker threads for olcli's background jobs: the parse ahead of learning (olcli/pipeline.py,
olcli/cbify_input.py) and the default's members on two threads (olcli/member_threads.py)."""

import threading
from _queue import SimpleQueue   # queue.SimpleQueue itself, without queue.py and heapq (~1 ms of a start)


class _Future:
    """A parse job's result (or its exception), set by a worker, awaited by the main thread:
    the part of ``concurrent.futures.Future`` used here (importing that package, with its
    logging, is ~3 ms of every start)."""

    __slots__ = ("_done", "_value", "_error")

    def __init__(self):
        self._done = threading.Event()
        self._value = self._error = None

    def set_result(self, value) -> None:
        self._value = value
        self._done.set()

    def set_exception(self, error: BaseException) -> None:
        self._error = error
        self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def error(self):
        """The job's exception (None while running or when it returned)."""
        return self._error

    def result(self):
        self._done.wait()
        if self._error is not None:
            raise self._error
        return self._value


class Workers:
    """A few daemon threads running jobs: parses (olcli/pipeline.py, olcli/cbify_input.py), the
    default's members (olcli/member_threads.py). Daemons, so that a process told to stop
    never waits at exit for a parse (or a first compilation) in progress."""

    def __init__(self, count: int, name: str = "olcli-parse"):
        self.jobs = SimpleQueue()
        for k in range(count):
            threading.Thread(target=self._work, name=f"{name}-{k}", daemon=True).start()
        self.count = count

    def _work(self):
        while True:
            job = self.jobs.get()
            if job is None:
                return
            future, function, args = job
            try:
                future.set_result(function(*args))
            except BaseException as exc:  # handed to the main thread, which raises it
                future.set_exception(exc)

    def submit(self, function, *args) -> "_Future":
        future = _Future()
        self.jobs.put((future, function, args))
        return future

    def close(self):
        for _ in range(self.count):
            self.jobs.put(None)
