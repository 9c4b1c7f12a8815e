"""``olcli serve``: a model behind VW's daemon line protocol, and HTTP/JSON with ``--http-port``.

One process, one asyncio event loop, one model in memory (``Served``):

- The line protocol (``LineConnection``): each VW or libsvm line gets one reply line,
  ``prediction[ tag]`` (the text ``olcli test -p`` writes) or ``error: <message>`` for a bad
  line, in order; empty lines get no reply, as in VW's daemon. All the complete lines one read
  from the socket delivers (pipelined lines) go through one parse and one kernel call.
- HTTP (``olcli/serve_http.py``, Starlette on uvicorn, imported only with ``--http-port``) runs
  on the same event loop and the same ``Served``.
- Every prediction and update is a ``Learner`` call made on the event loop thread, so there
  is exactly one writer and a request is answered entirely by one model: a reload builds the
  new learner in a thread, then swaps one reference between two requests (in-flight ones finish
  on the old model). A file that cannot be read, is damaged or does not fit is refused and
  logged, and the old model keeps serving.
- ``--learn -f OUT``: labelled lines of the line protocol (and ``POST /learn``) are learned
  progressively (the reply is the prediction before learning, as VW's daemon does); the model is
  written atomically every ``--save-every`` seconds when it changed, and on SIGTERM/SIGINT.
- ``--workers N``: N processes (``multiprocessing`` spawn) with their own sockets on the same
  ports (SO_REUSEPORT: the kernel spreads connections), under a supervisor that forwards
  SIGHUP/SIGTERM, restarts a worker that died and writes the port and pid files.

Logs: one line per event on stderr, ``time level event key=value ...`` or JSON
(``--log-format json``).
"""

import asyncio
import gc
import json
import os
import signal
import socket
import stat
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from olcli import model as model_file
from olcli.atomic import atomic_write
from olcli.engine.format import format_predictions
from olcli.engine.records import C_EXAMPLES, C_ROUNDS, new_tally
from olcli.errors import MissingExtra, ModelError, OlcliError, UsageError
from olcli.learner import Learner, apply_link
from olcli.parsing import batch_of
from olcli.paths import check_output

DEFAULT_PORT = 26542
FAST_PATH_BYTES = 1 << 16   # reads up to this size take the one-call path (engine/single.py)
ALL_INTERFACES = ("0.0.0.0", "::", "")


@dataclass
class ServeOptions:
    model_path: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    port_file: str | None = None
    pid_file: str | None = None
    http_port: int | None = None
    http_port_file: str | None = None
    learn: bool = False
    final_model: str | None = None
    save_every: float = 60.0
    link: str | None = None
    probabilities: bool = False
    max_line_bytes: int = 1 << 20
    max_request_bytes: int = 16 << 20
    max_connections: int = 1000
    idle_timeout: float = 300.0
    workers: int = 1
    log_format: str = "text"
    shutdown_timeout: float = 5.0

    def check(self) -> None:
        if not 0 <= self.port <= 65535:
            raise UsageError(f"--port must be 0 to 65535 (got {self.port})")
        if self.http_port is not None and not 0 <= self.http_port <= 65535:
            raise UsageError(f"--http-port must be 0 to 65535 (got {self.http_port})")
        if self.learn and not self.final_model:
            raise UsageError("--learn needs -f/--final-model: where the learned model is saved")
        if self.final_model and not self.learn:
            raise UsageError("-f/--final-model is only for --learn (a prediction server never changes its model)")
        if self.learn and self.workers > 1:
            raise UsageError("--workers is for prediction-only serving: --learn needs one process (one writer)")
        if self.workers < 1:
            raise UsageError(f"--workers must be at least 1 (got {self.workers})")
        if self.save_every < 0:
            raise UsageError(f"--save-every must be >= 0 seconds (0: only on stop; got {self.save_every:g})")
        for flag, value in (("--max-line-bytes", self.max_line_bytes), ("--max-request-bytes", self.max_request_bytes),
                            ("--max-connections", self.max_connections)):
            if value < 1:
                raise UsageError(f"{flag} must be at least 1 (got {value})")
        if self.idle_timeout < 0:
            raise UsageError(f"--idle-timeout must be >= 0 seconds (0: none; got {self.idle_timeout:g})")
        if self.log_format not in ("text", "json"):
            raise UsageError(f"--log-format must be text or json (got {self.log_format!r})")
        for what, path in (("-f/--final-model", self.final_model), ("--port-file", self.port_file),
                           ("--pid-file", self.pid_file), ("--http-port-file", self.http_port_file)):
            if path:
                check_output(path, what)   # a device, FIFO or socket is written in place, never replaced
        if self.http_port_file and self.http_port is None:
            raise UsageError("--http-port-file needs --http-port")


# --- logging ---

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


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


# --- the model being served ---

class ReloadRefused(OlcliError):
    pass


@dataclass(slots=True)   # slots: the counters are incremented on every request
class Stats:
    connections_total: int = 0
    connections_refused: int = 0
    requests: int = 0
    fast_path: int = 0           # requests answered by the one-call path (engine/single.py)
    examples: int = 0
    learned: int = 0
    bad_lines: int = 0
    internal_errors: int = 0
    reloads: int = 0
    reloads_refused: int = 0
    saves: int = 0


@dataclass
class Answer:
    """One batch of examples through the model: what HTTP's JSON is made of."""
    n_examples: int
    values: np.ndarray           # per example: the prediction as -p writes it (link applied; class for multiclass)
    probabilities: np.ndarray | None   # multiclass: (n, K)
    example_line: np.ndarray     # per example, its line in the batch (1-based)
    tags: list                   # per example: str or None
    bad: list                    # (line, message) of the bad lines


class Served:
    """The model being served, its counters, reload and save. Used on the event loop thread only
    (reload's file reading runs in a thread, the swap on the loop)."""

    def __init__(self, options: ServeOptions, log: EventLog):
        self.options = options
        self.log = log
        self.stats = Stats()
        self.generation = 0
        self.diverged = False
        self.last_saved = None
        self.started = time.time()
        self._reloading = None       # the load in progress (a task), and the last request it answers for
        self._reloading_covers = 0
        self._reload_requests = 0    # reload requests so far (SIGHUP, POST /reload)
        self._saving = None
        self._saved_counters = None
        self.on_reload = None        # --workers: tells the supervisor, which reloads the other workers
        self.learner, self.loaded_at, self.file_info = self._load()
        self._use(self.learner)
        if options.learn:
            self._saved_counters = self.learner.model.counters.copy()

    # -- loading --

    def _load(self, check_fits: bool = False):
        """(learner ready to serve, load time, file facts); runs in a thread on reload, where a
        model that does not fit is refused before its kernels are loaded."""
        path = self.options.model_path
        try:
            stat = os.stat(path)
        except OSError as exc:
            raise ModelError(f"cannot read model {path}: {exc.strerror or exc}") from exc
        # --workers: one read-only table for every worker (olcli/shared_table.py), named by the supervisor
        model = model_file.load(path, shared_by=os.getppid() if self.options.workers > 1 else None)
        if model.predict_only and self.options.learn:
            from olcli.learner import predict_only_refusal

            raise UsageError(predict_only_refusal(path, model).replace("(test, serve)", "(serve without --learn)"))
        learner = Learner.from_model(model, model.input_format or "auto")
        if check_fits:
            self._check_fits(learner)
        _warm_up(learner)
        info = {"path": os.path.abspath(path), "size": stat.st_size, "modified": _iso(stat.st_mtime)}
        return learner, time.time(), info

    def _use(self, learner) -> None:
        model = learner.model
        self.link = self.options.link or model.link
        self.probabilities = self.options.probabilities
        if self.probabilities and not model.classes:
            self.link = "logistic"  # as test: binary --probabilities is --link logistic
        self.predict_tally = new_tally()
        # The single-example path (engine/single.py): one kernel call per read of a few lines.
        # Not with --learn (labelled lines are learned by the batch path, the one writer) nor
        # for multiclass probabilities (written by the batch path).
        # OLCLI_SERVE_FAST_PATH=0: the batch path for every read (benchmarks/serve_vs_vw.py compares).
        self.fast = None
        if (not self.options.learn and not (self.probabilities and model.classes)
                and os.environ.get("OLCLI_SERVE_FAST_PATH", "1") != "0"):
            self.fast = learner.line_predictor(self.link, self.predict_tally)

    def _check_fits(self, new: Learner) -> None:
        """A new model must answer the same clients: same input format and the same kind of
        prediction (classes or a number)."""
        old, model = self.learner.model, new.model
        if old.input_format and model.input_format and old.input_format != model.input_format:
            raise ReloadRefused(f"the new model reads {model.input_format} input, the served one "
                                f"{old.input_format}: clients' lines would hash differently")
        if (old.classes, old.multiclass) != (model.classes, model.multiclass):
            kind = (lambda m: f"--{m.multiclass} {m.classes}" if m.classes else "one output")
            raise ReloadRefused(f"the new model predicts {kind(model)}, the served one {kind(old)}")

    async def reload(self, reason: str) -> tuple[bool, str]:
        """Load the model file again and swap it in; (ok, message).

        A request is answered by a load that *started after it* (so it read the file as it was
        when the request came): one load at a time; requests that arrive while a load runs share
        the next one, which starts when the running one ends. The last request therefore always
        ends on the file on disk at its time, and a reply ``reloaded`` is never for an older file."""
        if self.options.learn:
            message = ("reload is not available with --learn: the server's own model is the one learning "
                       f"(it is saved to {self.options.final_model}); restart to serve another file")
            self.stats.reloads_refused += 1
            self.log("reload_refused", "warning", reason=reason, error=message)
            return False, message
        self._reload_requests += 1
        ticket = self._reload_requests
        while True:
            if self._reloading is None:
                self._reloading_covers = self._reload_requests
                self._reloading = asyncio.ensure_future(self._reload(reason))
            task, covers = self._reloading, self._reloading_covers
            result = await asyncio.shield(task)
            if covers >= ticket:
                return result

    async def _reload(self, reason: str) -> tuple[bool, str]:
        try:
            return await self._reload_once(reason)
        finally:
            self._reloading = None   # before any waiter resumes: the next request starts a new load

    async def _reload_once(self, reason: str) -> tuple[bool, str]:
        started = time.perf_counter()
        try:
            learner, loaded_at, info = await asyncio.to_thread(self._load, True)
        except Exception as exc:  # damaged, missing, incompatible, out of memory: the old model stays
            self.stats.reloads_refused += 1
            message = str(exc) if isinstance(exc, OlcliError) else f"{type(exc).__name__}: {exc}"
            self.log("reload_refused", "error", reason=reason, path=self.options.model_path, error=message,
                     serving_generation=self.generation)
            return False, message
        # The swap: between two requests on the loop thread; in-flight ones hold the old learner.
        self.learner, self.loaded_at, self.file_info = learner, loaded_at, info
        self._use(learner)
        self.generation += 1
        self.stats.reloads += 1
        self.log("reloaded", reason=reason, path=self.options.model_path, generation=self.generation,
                 examples=int(learner.model.counters[C_EXAMPLES]),
                 milliseconds=round((time.perf_counter() - started) * 1000, 1))
        if self.on_reload is not None and reason != "SIGHUP":
            self.on_reload()
        return True, "reloaded"

    # -- saving (--learn) --

    def changed_since_save(self) -> bool:
        return self._saved_counters is None or not np.array_equal(self._saved_counters, self.learner.model.counters)

    async def save(self, reason: str) -> bool:
        """Write the model atomically (bytes taken on the loop: a consistent snapshot; the
        writing in a thread). One save at a time."""
        if self._saving is not None:
            await self._saving
        if self.diverged:
            self.log("save_skipped", "error", reason=reason, path=self.options.final_model,
                     error="the model diverged; the last good save is kept")
            return False
        raw, counters = self.learner.to_bytes(), self.learner.model.counters.copy()
        self._saving = asyncio.ensure_future(asyncio.to_thread(atomic_write, self.options.final_model, raw,
                                                                       "model (-f)"))
        try:
            await self._saving
        except Exception as exc:
            self.log("save_failed", "error", reason=reason, path=self.options.final_model, error=str(exc))
            return False
        finally:
            self._saving = None
        self._saved(counters, reason)
        return True

    def save_now(self, reason: str) -> bool:
        """The final save, on the loop thread after serving stopped."""
        if self.diverged:
            self.log("save_skipped", "error", reason=reason, path=self.options.final_model,
                     error="the model diverged; the last good save is kept")
            return False
        try:
            atomic_write(self.options.final_model, self.learner.to_bytes(), role="model (-f)")
        except Exception as exc:
            self.log("save_failed", "error", reason=reason, path=self.options.final_model, error=str(exc))
            return False
        self._saved(self.learner.model.counters.copy(), reason)
        return True

    def _saved(self, counters, reason) -> None:
        self._saved_counters = counters
        self.last_saved = time.time()
        self.stats.saves += 1
        self.log("saved", reason=reason, path=self.options.final_model, examples=int(counters[C_EXAMPLES]),
                 rounds=int(counters[C_ROUNDS]))

    # -- answering --

    def view(self) -> tuple:
        """(learner, link, prediction tally, generation, loaded at): what answers a request. A
        request answered in slices (HTTP, olcli/serve_http.py) keeps the one it started with, so
        a reload between two slices does not mix two models in one answer."""
        return self.learner, self.link, self.predict_tally, self.generation, self.loaded_at

    def _run(self, data: bytes, learn: bool, view: tuple | None = None):
        """Parse and predict (learning the labelled examples when ``learn``) one buffer of lines:
        (learner, buffer, parsed chunk, Processed or None)."""
        learner, _, predict_tally = (view or self.view())[:3]
        buf = np.frombuffer(data, np.uint8)
        parsed = learner.parse(buf, "<request>")
        done = None
        if parsed.n_examples:
            learning = learn and self.options.learn
            done = learner.process(batch_of(parsed), learning,
                                   learner.tally if learning else predict_tally)
            if learning:
                self.stats.learned += parsed.n_examples
                if done.diverged_at >= 0 and not self.diverged:
                    self.diverged = True
                    self.log("diverged", "error", error="a prediction is not a finite number: the model "
                             "diverged; it is no longer saved (the last good save is kept); "
                             + learner.divergence_advice())
        self.stats.requests += 1
        self.stats.examples += parsed.n_examples
        if parsed.bad_lines:
            self.stats.bad_lines += len(parsed.bad_lines)
            self.log.client_error("bad_lines", count=len(parsed.bad_lines), first=_bad_text(parsed.bad_lines[0]))
        return learner, buf, parsed, done

    def _values(self, learner, done, link=None):
        if learner.model.classes:
            return done.predictions
        return apply_link(link or self.link, done.predictions)

    def reply_lines(self, data: bytes, learn: bool = True) -> bytes:
        """The line protocol: one reply line per non-empty line of ``data`` (whole lines)."""
        fast = self.fast
        if fast is not None and len(data) <= FAST_PATH_BYTES:
            reply = fast.reply(data)
            if reply is not None:   # else a bad line or a divergence: the batch path says what
                stats = self.stats
                stats.requests += 1
                stats.fast_path += 1
                stats.examples += reply.count(b"\n")
                return reply
        learner, buf, parsed, done = self._run(data, learn)
        n = parsed.n_examples
        text = b""
        if n:
            classes = learner.model.classes
            if classes and self.probabilities:
                text = _probability_lines(done.scores, parsed.tags, buf, learner.model.multiclass == "softmax",
                                          done.label_base)
            else:
                text = format_predictions(self._values(learner, done), n, parsed.tags, buf,
                                          bool(classes)).tobytes()
        if not parsed.bad_lines:
            return text
        lines = text.split(b"\n")
        out, e = [], 0
        for bad in parsed.bad_lines:
            while e < n and parsed.example_line[e] < bad.line:
                out.append(lines[e])
                e += 1
            out.append(error_line(_bad_text(bad)))
        out.extend(lines[e:n])
        return b"\n".join(out) + b"\n"

    def answer(self, data: bytes, learn: bool, view: tuple | None = None) -> Answer:
        """HTTP: the structured answer for a buffer of lines (by ``view``'s model, default the
        one being served)."""
        view = view or self.view()
        learner, buf, parsed, done = self._run(data, learn, view)
        n = parsed.n_examples
        if n:
            values = self._values(learner, done, view[1])
            probabilities = learner_probabilities(learner, done.scores) if learner.model.classes else None
            spans = parsed.tags[:n]
            if np.any(spans[:, 1] > spans[:, 0]):
                tags = [bytes(buf[s:t]).decode("utf-8", "replace") if t > s else None for s, t in spans.tolist()]
            else:
                tags = [None] * n
        else:
            values, probabilities, tags = np.empty(0), None, []
        return Answer(n, values, probabilities, parsed.example_line[:n],
                      tags, [(bad.line, _bad_text(bad)) for bad in parsed.bad_lines])

    def model_info(self) -> dict:
        model = self.learner.model
        header = model.header()
        header.pop("state", None)
        return {
            "model": header,
            "counters": self.learner.counters,
            "file": self.file_info,
            "loaded_at": _iso(self.loaded_at),
            "generation": self.generation,
            "learn": self.options.learn,
            "final_model": self.options.final_model,
            "last_saved": _iso(self.last_saved) if self.last_saved else None,
            "diverged": self.diverged,
            "link": self.link,
            "serving": asdict(self.stats),
            "started_at": _iso(self.started),
            "pid": os.getpid(),
        }


def _warm_up(learner: Learner) -> None:
    """Load the kernels a request needs (Numba's cache, or a compile for a new algorithm)
    before the model serves, so that no request pays for it. The buffers are read-only, as
    a request's (``np.frombuffer`` of bytes): Numba compiles per argument type."""
    empty = np.frombuffer(b"", np.uint8)
    parsed = learner.parse(empty, "<warm-up>")
    learner.process(batch_of(parsed), False, new_tally())
    format_predictions(np.zeros(0), 0, parsed.tags, empty, False)
    learner.line_predictor()  # the one-call path's kernel: loaded (or compiled) by its constructor


def _bad_text(bad) -> str:
    return f"{bad.message}: {bad.token!r}"


def error_line(message: str) -> bytes:
    return b"error: " + message.replace("\n", " ").encode("utf-8", "replace")


def learner_probabilities(learner, scores) -> np.ndarray:
    from olcli.engine.multiclass import log_probabilities

    out = np.empty_like(scores)
    softmax = learner.model.multiclass == "softmax"
    for e in range(len(scores)):
        log_probabilities(scores[e], softmax, out[e])
    return np.exp(out)


def _probability_lines(scores, tags, data, softmax: bool, label_base=None) -> bytes:
    """VW's ``1:p1 2:p2 ... K:pK[ tag]`` lines (as test --probabilities writes them; ``0:p1 ...``
    per example where ``label_base`` is 0: VW's 0-indexed labels)."""
    from olcli.engine.multiclass import log_probabilities

    lines = []
    log_probs = np.empty(scores.shape[1])
    for e in range(len(scores)):
        log_probabilities(scores[e], softmax, log_probs)
        first = 1 if label_base is None else int(label_base[e])
        text = " ".join(f"{k + first}:{p:.6f}" for k, p in enumerate(np.exp(log_probs)))
        start, end = tags[e]
        tag = b" " + data[start:end].tobytes() if end > start else b""
        lines.append(text.encode() + tag + b"\n")
    return b"".join(lines)


# --- the line protocol ---

class LineConnection(asyncio.Protocol):
    """One client of the line protocol. All complete lines of a read are answered at once;
    a line longer than ``--max-line-bytes`` is answered with an error (and dropped); replies a
    client does not read stop reading from it (the others go on)."""

    __slots__ = ("server", "served", "max_line_bytes", "transport", "buffer", "discarding", "fast_limit", "reads",
                 "seen_reads", "last_active", "errors", "peer", "accepted")

    def __init__(self, server: "LineServer"):
        self.server = server
        self.served = server.served
        self.max_line_bytes = server.options.max_line_bytes
        self.transport = None
        self.buffer = b""
        self.discarding = 0          # bytes of an over-long line dropped so far
        # The longest read data_received answers at once as whole lines on the one-call path:
        # min(--max-line-bytes, FAST_PATH_BYTES) while nothing is pending (no partial line kept,
        # no over-long line being dropped), else -1. One comparison per read says all of that.
        self.fast_limit = -1
        self.reads = 0               # reads so far; the idle sweep compares it with what it saw last
        self.seen_reads = 0
        self.last_active = time.monotonic()   # when the sweep first saw the latest read (or the connection was made)
        self.errors = 0
        self.peer = None
        self.accepted = False

    def connection_made(self, transport) -> None:
        self.transport = transport
        self.peer = _peer(transport)
        server = self.server
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle delay on replies
        if len(server.connections) >= server.options.max_connections or server.stopping:
            server.served.stats.connections_refused += 1
            server.log.client_error("connection_refused", peer=self.peer,
                                    error=f"too many connections (--max-connections {server.options.max_connections})"
                                    if not server.stopping else "shutting down")
            transport.write(error_line(f"too many connections (limit {server.options.max_connections}); try later"
                                       if not server.stopping else "server shutting down") + b"\n")
            transport.close()
            return
        self.accepted = True
        self._pending_changed()
        server.connections.add(self)
        server.served.stats.connections_total += 1
        transport.set_write_buffer_limits(high=server.write_buffer_limit)

    def data_received(self, data: bytes) -> None:
        self.reads += 1
        if len(data) <= self.fast_limit and data[-1:] == b"\n":
            # The usual read (a single example, or a few): whole lines, none too long, nothing
            # pending, answered by one kernel call. As few Python steps as possible: each costs
            # the round trip a little (benchmarks/serve_vs_vw.py).
            served = self.served
            fast = served.fast
            if fast is not None:
                try:
                    reply = fast.reply(data)
                except Exception:  # a bug: _reply below says so (and logs it)
                    reply = None
                if reply is not None:
                    stats = served.stats
                    stats.requests += 1
                    stats.fast_path += 1
                    stats.examples += reply.count(b"\n")
                    self.transport.write(reply)
                    return
            self._reply(data)   # a bad line or a divergence: the batch path says what
            return
        if not self.accepted:
            return
        if data[-1:] == b"\n" and not self.buffer and not self.discarding and len(data) <= self.max_line_bytes:
            self._reply(data)   # whole lines, none of them too long, more than the one-call path takes
            return
        if self.discarding:
            newline = data.find(b"\n")
            if newline < 0:
                self.discarding += len(data)
                self._pending_changed()
                return
            self._too_long(self.discarding + newline)
            data = data[newline + 1:]
        if self.buffer:
            data = self.buffer + data
            self.buffer = b""
        end = data.rfind(b"\n") + 1
        if end < len(data):
            rest = data[end:]
            if len(rest) > self.server.options.max_line_bytes:
                self.discarding = len(rest)
            else:
                self.buffer = rest
            data = data[:end]
        self._pending_changed()
        if data:
            self._answer(data)

    def _pending_changed(self) -> None:
        """``fast_limit`` after ``buffer`` or ``discarding`` changed."""
        pending = self.buffer or self.discarding or not self.accepted
        self.fast_limit = -1 if pending else min(self.max_line_bytes, FAST_PATH_BYTES)

    def _answer(self, data: bytes) -> None:
        limit = self.server.options.max_line_bytes
        if len(data) > limit + 1:
            ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)
            starts = np.concatenate(([0], ends[:-1] + 1))
            long = np.flatnonzero(ends - starts > limit)
            if long.size:
                position = 0
                for k in long.tolist():
                    if starts[k] > position:
                        self._reply(data[position:int(starts[k])])
                    self._too_long(int(ends[k] - starts[k]))
                    position = int(ends[k]) + 1
                if position < len(data):
                    self._reply(data[position:])
                return
        self._reply(data)

    def _reply(self, data: bytes) -> None:
        try:
            reply = self.served.reply_lines(data)
        except Exception as exc:  # a bug, not the client's mistake: say so for each line, keep serving
            server = self.server
            server.served.stats.internal_errors += 1
            server.log("internal_error", "error", peer=self.peer, error=f"{type(exc).__name__}: {exc}")
            count = sum(1 for line in data.split(b"\n") if line.strip(b" \t\r"))
            reply = (error_line(f"internal error ({type(exc).__name__}); see the server log") + b"\n") * count
        if reply:
            self.transport.write(reply)

    def _too_long(self, length: int) -> None:
        self.discarding = 0
        self._pending_changed()
        self.errors += 1
        limit = self.server.options.max_line_bytes
        self.server.served.stats.bad_lines += 1
        self.server.log.client_error("line_too_long", peer=self.peer, bytes=length, limit=limit)
        self.transport.write(error_line(f"line longer than {limit} bytes (--max-line-bytes); dropped") + b"\n")

    def eof_received(self):
        if self.accepted:
            if self.discarding:
                self._too_long(self.discarding)
            elif self.buffer:  # a last line without '\n'
                data, self.buffer = self.buffer, b""
                self._pending_changed()
                self._unterminated(data, "the client closed the connection")
        return False  # close once the replies are written

    def _unterminated(self, data: bytes, why: str) -> None:
        """A last line without its '\n'. A client that writes a last line and closes its side
        (``printf '1 |a b' | nc``) and a client killed in the middle of a line (its kernel sends
        the same FIN) cannot be told apart: the line may be a fragment ("11 " of "11 |a b c").
        It is predicted (never learned) when the server only predicts; with --learn it is
        answered with an error and not learned, so no fragment is ever learned."""
        if not self.served.options.learn:
            self._answer(data + b"\n")
            return
        self.server.served.stats.bad_lines += 1
        self.server.log.client_error("unterminated_line", peer=self.peer, bytes=len(data), why=why)
        self.transport.write(error_line(f"{why} in the middle of a line (no end of line after "
                                        f"{len(data)} bytes): not learned") + b"\n")

    def pause_writing(self) -> None:
        # The client does not read its replies: stop reading its lines until it does.
        self.transport.pause_reading()

    def resume_writing(self) -> None:
        if not self.transport.is_closing():
            self.transport.resume_reading()

    def connection_lost(self, exc) -> None:
        if self.accepted:
            self.server.connections.discard(self)


def _peer(transport) -> str:
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return f"{peer[0]}:{peer[1]}"
    return str(peer)


class LineServer:
    def __init__(self, served: Served, options: ServeOptions, log: EventLog):
        self.served = served
        self.options = options
        self.log = log
        self.connections = set()
        self.stopping = False
        self.server = None
        self.write_buffer_limit = 1 << 20

    async def start(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self.server = await loop.create_server(lambda: LineConnection(self), sock=sock,
                                               backlog=min(4096, self.options.max_connections))

    def sweep_interval(self) -> float | None:
        timeout = self.options.idle_timeout
        return min(1.0, timeout / 4) if timeout else None

    def sweep_idle(self) -> None:
        """Close connections idle longer than --idle-timeout (a dead client holds nothing for long).
        Called every ``sweep_interval()`` seconds (``Ticker``). A connection's activity is its count
        of reads, compared with the previous sweep's (a read costs no clock reading): it is closed
        between ``timeout`` and ``timeout`` + one interval after its last read."""
        timeout = self.options.idle_timeout
        now = time.monotonic()
        for connection in list(self.connections):
            if connection.reads != connection.seen_reads:
                connection.seen_reads = connection.reads
                connection.last_active = now
            elif now - connection.last_active > timeout:
                self.log("idle_closed", peer=connection.peer, idle_seconds=round(now - connection.last_active, 1))
                transport = connection.transport
                if transport.get_write_buffer_size():
                    transport.abort()   # a client that stopped reading: its replies cannot be delivered
                else:
                    transport.close()

    async def stop(self, timeout: float) -> None:
        """Stop listening; every line already received has been answered; close the connections
        once their replies are written (at most ``timeout`` seconds)."""
        self.stopping = True
        if self.server is not None:
            self.server.close()
        for connection in list(self.connections):
            if connection.buffer:  # the start of a line whose end was not received: not a line
                data, connection.buffer = connection.buffer, b""
                connection._pending_changed()
                connection.transport.write(error_line(f"server shutting down: the line being received "
                                                      f"({len(data)} bytes, no end of line yet) was not read")
                                           + b"\n")
            connection.transport.close()
        deadline = time.monotonic() + timeout
        while self.connections and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        for connection in list(self.connections):
            connection.transport.abort()


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


# --- sockets ---

def bind_socket(host: str, port: int, reuse_port: bool, listen: bool = True, backlog: int = 1024) -> socket.socket:
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host!r}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(address)
        if listen:
            sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise OlcliError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


_WRITTEN: dict = {}   # path -> the bytes this process wrote there (--port-file, --pid-file, --http-port-file)


def _write_small_file(path: str | None, text: str, role: str) -> None:
    """Write a port or pid file: a regular file atomically, a device, FIFO or socket in place
    (olcli/atomic.py); a failure (``/dev/full``: ENOSPC) is an error naming the option."""
    if path:
        data = text.encode()
        atomic_write(path, data, role=role)
        _WRITTEN[path] = data


def _remove(path: str | None) -> None:
    """Remove, on stop, a port or pid file this process wrote: only a regular file that still
    holds what it wrote (never a device, FIFO or socket it was given, nor a file another
    process has written since)."""
    data = _WRITTEN.pop(path, None) if path else None
    if data is None:
        return
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):
            return
        with open(path, "rb") as f:
            if f.read(len(data) + 1) != data:
                return
        os.unlink(path)
    except OSError:
        pass


def _raise_file_limit(wanted: int) -> None:
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY and soft < wanted:
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(wanted, hard), hard))
    except (ImportError, ValueError, OSError):
        pass


def _http_module():
    """olcli.serve_http, or the message that names the extra."""
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise MissingExtra("--http-port (serving HTTP)", "serve") from None
    from olcli import serve_http

    return serve_http


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


# --- one serving process ---

async def _serve_process(options: ServeOptions, log: EventLog, sockets: dict, ready=None,
                         stop_signals=(signal.SIGTERM, signal.SIGINT), on_reload=None) -> int:
    """Serve on the given listening sockets until SIGTERM/SIGINT; the exit code.

    Start-up (loading the model, loading or compiling its kernels) runs in olcli's immediate
    signal phase (olcli/signals.py): SIGTERM, SIGINT or SIGHUP stops it at once (``RunStopped``,
    exit 128 + signal, nothing announced). Once the loop's own handlers are installed, a signal
    received in between is acted on as if it came after."""
    from olcli import signals

    loop = asyncio.get_running_loop()
    with signals.immediate():
        log("loading", model=options.model_path)
        served = Served(options, log)
        served.on_reload = on_reload
        lines = LineServer(served, options, log)
        await lines.start(sockets["line"])
        http = http_task = None
        if "http" in sockets:
            http = _http_module().HttpServer(served, options, log, sockets["http"])
            http_task = asyncio.ensure_future(http.serve())
            await http.started()
    _startup_over()
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
            if served.changed_since_save() and served._saving is None:
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
        if served._saving is not None:
            await asyncio.gather(served._saving, return_exceptions=True)
        if options.learn:
            served.save_now(f"stop ({signal.Signals(stop_signal[0]).name})" if stop_signal else "stop")
        log("stopped", requests=served.stats.requests, examples=served.stats.examples,
            learned=served.stats.learned)
    return 0


def _listening_sockets(options: ServeOptions, reuse_port: bool, listen: bool) -> dict:
    sockets = {"line": bind_socket(options.host, options.port, reuse_port, listen, options.max_connections)}
    if options.http_port is not None:
        try:
            sockets["http"] = bind_socket(options.host, options.http_port, reuse_port, listen,
                                          options.max_connections)
        except OlcliError:
            sockets["line"].close()
            raise
    return sockets


def _announce(options: ServeOptions, log: EventLog, sockets: dict, pid: int) -> None:
    ports = {name: sock.getsockname()[1] for name, sock in sockets.items()}
    _write_small_file(options.port_file, f"{ports['line']}\n", "--port-file")
    if "http" in ports:
        _write_small_file(options.http_port_file, f"{ports['http']}\n", "--http-port-file")
    _write_small_file(options.pid_file, f"{pid}\n", "--pid-file")
    log("listening", host=options.host, port=ports["line"],
        **({"http_port": ports["http"]} if "http" in ports else {}),
        model=options.model_path, workers=options.workers, learn=options.learn)


def serve(options: ServeOptions) -> None:
    """``olcli serve``: check everything, then serve until SIGTERM/SIGINT (exit 0). Until the
    server listens, SIGTERM, SIGINT and SIGHUP stop it at once (olcli/signals.py immediate)."""
    from olcli import signals

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
            _http_module()
        if not os.path.isfile(options.model_path):
            model_file.load(options.model_path)  # the usual message for a missing or unreadable file
    if options.host in ALL_INTERFACES:
        log("binding_all_interfaces", "warning", host=options.host or "*",
            note="every host that can reach this machine can query"
                 + (" and train" if options.learn else "") + " the model; use --host 127.0.0.1 for local clients")
    _raise_file_limit(options.max_connections + 64)
    if options.workers > 1:
        _startup_over()   # the supervisor watches its own start-up (its loop checks the signals)
        _supervise(options, log)
        return
    sockets = {}
    try:
        sockets = _listening_sockets(options, reuse_port=False, listen=True)

        def ready():
            _announce(options, log, sockets, os.getpid())

        asyncio.run(_serve_process(options, log, sockets, ready))
    finally:
        for sock in sockets.values():
            sock.close()
        _remove(options.port_file)
        _remove(options.http_port_file)
        _remove(options.pid_file)


# --- several processes (--workers) ---

def _worker_main(options: ServeOptions, index: int, ports: dict, queue) -> None:
    """A worker process: its own sockets on the supervisor's ports (SO_REUSEPORT)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the supervisor decides when to stop
    _stop_with_parent()
    log = EventLog(options.log_format, worker=index)
    try:
        worker_options = ServeOptions(**{**asdict(options), "port": ports["line"],
                                         "http_port": ports.get("http")})
        sockets = _listening_sockets(worker_options, reuse_port=True, listen=True)
        asyncio.run(_serve_process(worker_options, log, sockets,
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


def _supervise(options: ServeOptions, log: EventLog) -> None:
    """Start the workers, forward SIGHUP and SIGTERM/SIGINT to them, restart one that dies."""
    import multiprocessing
    import queue as queues

    context = multiprocessing.get_context("spawn")
    messages = context.Queue()
    # Reserve the ports (bound, not listening: only the workers' sockets get connections).
    reserved = _listening_sockets(options, reuse_port=True, listen=False)
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
        _announce(options, log, reserved, os.getpid())
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
        _remove(options.port_file)
        _remove(options.http_port_file)
        _remove(options.pid_file)
        messages.close()
        from olcli.shared_table import remove_folder

        remove_folder(os.getpid())
        log("stopped", workers=options.workers)
