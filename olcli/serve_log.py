"""``olcli serve``'s event log: one line per event on stderr, ``time level event key=value ...``
or JSON (``--log-format json``), with a rate limit for clients' mistakes.

A thin layer over the standard ``logging`` module: every event is a ``LogRecord`` of the
logger ``"olcli.serve"`` (level word as ``levelname`` lower-cased, the event as the message,
its fields in ``record.fields``), so a program embedding the server can add its own handler
to that logger. The logger does not propagate to the root logger: a user's
``logging.basicConfig`` would otherwise print every event a second time beside the line the
server already writes.
"""

import json
import logging
import sys
import time

LOGGER_NAME = "olcli.serve"
_logger = logging.getLogger(LOGGER_NAME)
_logger.propagate = False
if _logger.level == logging.NOTSET:  # not the root's WARNING: info events are the log's body
    _logger.setLevel(logging.DEBUG)


class EventFormatter(logging.Formatter):
    """A record as one line: text ``time level event key=value ...`` (values with a space,
    quote, ``=``, tab or newline, and empty ones, JSON-quoted) or one JSON object; the time is
    ISO 8601 UTC to the millisecond."""

    def __init__(self, fmt: str = "text"):
        super().__init__()
        self.json = fmt == "json"

    def format(self, record: logging.LogRecord) -> str:
        now = record.created
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int(now * 1000) % 1000:03d}Z"
        level = getattr(record, "level_word", record.levelname.lower())
        fields = getattr(record, "fields", {})
        event = record.getMessage()
        if self.json:
            return json.dumps({"time": stamp, "level": level, "event": event, **fields}, default=str)
        return f"{stamp} {level} {event}" + "".join(f" {k}={_field(v)}" for k, v in fields.items())


class _StreamHandler(logging.Handler):
    """Writes one line and flushes; a closed or broken stream loses the line, silently (the
    server goes on: its log is not worth a crash)."""

    def __init__(self, stream, formatter: EventFormatter, owner):
        super().__init__(logging.NOTSET)
        self.stream = stream
        self.setFormatter(formatter)
        self.addFilter(lambda record: getattr(record, "event_log", None) is owner)

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        try:
            self.stream.write(line + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def handleError(self, record) -> None:  # pragma: no cover - emit catches what it expects
        pass


class EventLog:
    """One line per event on ``stream`` (stderr by default): text or JSON, through the logger
    ``"olcli.serve"``. Each EventLog adds one handler there that writes only its own events
    (so two logs in one process do not write each other's lines); ``close`` removes it."""

    def __init__(self, fmt: str = "text", stream=None, **context):
        self.json = fmt == "json"
        self.stream = stream if stream is not None else sys.stderr
        self.context = context
        self.logger = _logger
        self.handler = _StreamHandler(self.stream, EventFormatter(fmt), self)
        self.logger.addHandler(self.handler)
        self._window = 0.0
        self._in_window = 0
        self._suppressed = 0

    def __call__(self, event: str, level: str = "info", **fields) -> None:
        number = logging.getLevelName(level.upper())
        if not isinstance(number, int):
            number = logging.INFO
        self.logger.log(number, event, extra={
            "fields": {**self.context, **fields}, "level_word": level, "event_log": self})

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

    def close(self) -> None:
        """Stop writing: the handler leaves the logger."""
        self.logger.removeHandler(self.handler)
        self.handler.close()


def _field(value) -> str:
    text = str(value)
    if not text or any(c in text for c in " \"=\n\t"):
        return json.dumps(text)
    return text


def iso_time(seconds: float) -> str:
    """A Unix time as ISO 8601 UTC to the second (the model and health answers' times)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))
