"""The model ``olcli serve`` holds (``Served``): loading it, reloading it (SIGHUP, ``POST /reload``)
and, with ``--learn``, learning and saving it; and answering a buffer of lines with it, for the
line protocol (``reply_lines``, olcli/serve_lines.py) and for HTTP (``answer``, olcli/serve_http.py).

Every prediction and update is a ``Learner`` call made on the event loop thread, so there is
exactly one writer and a request is answered entirely by one model: a reload builds the new
learner in a thread, then swaps one reference between two requests (in-flight ones finish on
the old model). A file that cannot be read, is damaged or does not fit is refused and logged,
and the old model keeps serving. ``--learn -f OUT``: labelled lines are learned progressively
(the reply is the prediction before learning, as VW's daemon does); the model is written
atomically (``save``, ``save_now``).
"""

import asyncio
import os
import time
from dataclasses import asdict, dataclass

import numpy as np

from olcli import model as model_file
from olcli.atomic import atomic_write
from olcli.engine.format import format_predictions
from olcli.engine.records import C_EXAMPLES, C_ROUNDS, new_tally
from olcli.errors import Diverged, ModelError, OlcliError, UsageError
from olcli.learner import Learner, apply_link, predict_only_refusal
from olcli.parsing import batch_of
from olcli.serve_log import EventLog, iso_time
from olcli.serve_options import ServeOptions

FAST_PATH_BYTES = 1 << 16   # reads up to this size take the one-call path (engine/single.py)


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
        self.saving = None
        self._saved_counters = None
        self.on_reload = None        # --workers: tells the supervisor, which reloads the other workers
        self.learner, self.loaded_at, self.file_info = self._load()
        self.cb = None               # a contextual-bandit model: its rank and reward (olcli/serve_cb.py)
        if self.learner.model.cb is not None:
            from olcli.serve_cb import CbServing

            self.cb = CbServing(self, options.cb_seed)
            log("cb_serving", reduction=self.learner.model.cb["settings"]["reduction"], seed=self.cb.seed,
                pending_limit=options.cb_pending)
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
            raise UsageError(predict_only_refusal(path, model).replace("(test, serve)", "(serve without --learn)"))
        learner = Learner.from_model(model, model.input_format or "auto")
        if check_fits:
            self._check_fits(learner)
        _warm_up(learner)
        info = {"path": os.path.abspath(path), "size": stat.st_size, "modified": iso_time(stat.st_mtime)}
        return learner, time.time(), info

    def _use(self, learner) -> None:
        model = learner.model
        if self.cb is not None:
            self.cb.use(learner)
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
        if (not self.options.learn and not (self.probabilities and model.classes) and model.cb is None
                and os.environ.get("OLCLI_SERVE_FAST_PATH", "1") != "0"):
            self.fast = learner.line_predictor(self.link, self.predict_tally)

    def _check_fits(self, new: Learner) -> None:
        """A new model must answer the same clients: same input format and the same kind of
        prediction (classes or a number)."""
        old, model = self.learner.model, new.model
        if (old.cb is None) != (model.cb is None):
            raise ReloadRefused("the new model is " + ("not " if model.cb is None else "") + "a contextual-bandit "
                                "model, the served one " + ("is" if old.cb is not None else "is not"))
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
        if self.saving is not None:
            await self.saving
        if self.diverged:
            self.log("save_skipped", "error", reason=reason, path=self.options.final_model,
                     error="the model diverged; the last good save is kept")
            return False
        if self.cb is not None:
            self.cb.store_state()   # the reduction's state into the model's cb field, as olcli vw -f writes it
        try:
            raw = self.learner.to_bytes()
        except Diverged as exc:   # a number no model file holds: the last good save is kept
            self.log("save_skipped", "error", reason=reason, path=self.options.final_model,
                     error=f"{exc}; the last good save is kept")
            return False
        counters = self.learner.model.counters.copy()
        self.saving = asyncio.ensure_future(asyncio.to_thread(atomic_write, self.options.final_model, raw,
                                                                       "model (-f)"))
        try:
            await self.saving
        except Exception as exc:
            self.log("save_failed", "error", reason=reason, path=self.options.final_model, error=str(exc))
            return False
        finally:
            self.saving = None
        self._saved(counters, reason)
        return True

    def save_now(self, reason: str) -> bool:
        """The final save, on the loop thread after serving stopped."""
        if self.diverged:
            self.log("save_skipped", "error", reason=reason, path=self.options.final_model,
                     error="the model diverged; the last good save is kept")
            return False
        if self.cb is not None:
            self.cb.store_state()
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
        if self.cb is not None:
            return self.cb.reply_lines(data)
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
            "loaded_at": iso_time(self.loaded_at),
            "generation": self.generation,
            "learn": self.options.learn,
            "final_model": self.options.final_model,
            "last_saved": iso_time(self.last_saved) if self.last_saved else None,
            "diverged": self.diverged,
            "link": self.link,
            "serving": asdict(self.stats),
            "started_at": iso_time(self.started),
            "pid": os.getpid(),
            **({"cb": self.cb.info()} if self.cb is not None else {}),
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
    if learner.model.cb is not None:   # a contextual-bandit model: its ranking's calls
        from olcli.cb_format import CbEvent
        from olcli.cb_learner import CbLearner

        CbLearner.from_learner(learner).ranking_of(CbEvent("|w", ("|w a",)))


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
