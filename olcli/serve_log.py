"""``olcli serve``'s event log: one line per event on stderr, ``time level event key=value ...``
or JSON (``--log-format json``), with a rate limit for clients' mistakes."""

import json
import sys
import threading
import time

class EventLog:
    """One line per event on stderr: text (``time level event key=value ...``) or JSON."""

    def __init__(self, fmt: str = "text", stream=None, **context):
        self.json = fmt == "json"
        self.stream = stream if stream is not None else sys.stderr
        self.context = context
        self._lock = threading.Lock()
        self._window = 0.0
        self._in_window = 0
        self._suppressed = 0

    def __call__(self, event: str, level: str = "info", **fields) -> None:
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
        fields = {**self.context, **fields}
        if self.json:
            line = json.dumps({"time": stamp, "level": level, "event": event, **fields}, default=str)
        else:
            line = f"{stamp} {level} {event}" + "".join(f" {k}={_field(v)}" for k, v in fields.items())
        with self._lock:
            try:
                self.stream.write(line + "\n")
                self.stream.flush()
            except (OSError, ValueError):
                pass

    def client_error(self, event: str, **fields) -> None:
        """A client's mistake: logged, but at most 20 lines a second (a flood of bad lines
        must not flood the log); the next logged one says how many were left out."""
        now = time.monotonic()
        if now - self._window >= 1.0:
            self._window, self._in_window = now, 0
        self._in_window += 1
        if self._in_window > 20:
            self._suppressed += 1
            return
        if self._suppressed:
            fields["suppressed_before"] = self._suppressed
            self._suppressed = 0
        self(event, "warning", **fields)


def _field(value) -> str:
    text = str(value)
    if not text or any(c in text for c in " \"=\n\t"):
        return json.dumps(text)
    return text



def iso_time(seconds: float) -> str:
    """A Unix time as ISO 8601 UTC to the second (the model and health answers' times)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
