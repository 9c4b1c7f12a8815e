"""``olcli serve --http-port N``: HTTP/JSON on Starlette, served by uvicorn on the line server's
event loop and ``Served`` (olcli/served.py), so both protocols share one model, one writer and
one reload. Imported only with ``--http-port`` (the optional extra ``olcli[serve]``).

Endpoints (the OpenAPI description is at ``GET /openapi.json``):

- ``POST /predict``: examples as JSON (``{"examples": ["1 |a b", ...]}`` or a JSON list),
  NDJSON (one JSON string, or ``{"example": "..."}``, per line) or plain text lines; reply
  ``{"predictions": [...], "tags": [...], "errors": [...], ...}`` in the examples' order, with
  ``"probabilities"`` (n x K) for multiclass. A bad example gets ``null`` and an entry in
  ``errors``; the others are answered (status 200). Never learns.
- ``POST /learn`` (``--learn`` only): the same, learning the labelled examples (the
  predictions are those before learning each one).
- ``POST /rank``, ``POST /reward`` (a contextual-bandit model, olcli/serve_cb.py): rank the actions of
  one event (the PMF, the sampled action, an event id), then learn from that event's reward.
- ``GET /healthz``, ``GET /model``, ``POST /reload``.
"""

import asyncio
import json
import logging
import math
import re

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from olcli.serve_log import EventLog, iso_time
from olcli.serve_openapi import OPENAPI
from olcli.serve_options import ServeOptions
from olcli.served import Served

JSON_TYPES = ("application/json",)
NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines",
                "application/jsonlines")


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class _Json(JSONResponse):
    def render(self, content) -> bytes:
        if isinstance(content, bytes):   # already rendered (_render)
            return content
        try:
            return _dumps(content).encode("utf-8")
        except UnicodeEncodeError:   # a lone surrogate in a message: JSON's \\u escapes carry it
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def _error(status: int, message: str) -> Response:
    return _Json({"error": message}, status_code=status)


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                raise BadRequest(413, f"request body of {int(declared)} bytes is over the limit of {limit} "
                                      "(--max-request-bytes)")
        except ValueError:
            raise BadRequest(400, "Content-Length is not a number") from None
    body = bytearray()   # grown as the chunks arrive: no copy of the whole body in one step at the end
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise BadRequest(413, f"request body over the limit of {limit} bytes (--max-request-bytes)")
        body += chunk
    return body


SLICE_BYTES = 1 << 14      # a large request is decoded, answered and encoded in slices of about this size
SLICE_ITEMS = 1024         # (or this many examples), the event loop serving other clients between two
_CUT = re.compile(rb'"[ \t\r\n]*,[ \t\r\n]*"')
_OPEN = re.compile(rb'[ \t\r\n]*(\{[ \t\r\n]*"examples"[ \t\r\n]*:[ \t\r\n]*)?\[')
_SPACE = b" \t\r\n"


def _loads(text, where: str = "the body"):
    """json.loads; a document nested too deeply for Python's parser is the client's 400 too."""
    try:
        return json.loads(text)
    except RecursionError:
        raise BadRequest(400, f"{where} is JSON nested too deeply to read (keep it under a few hundred "
                              "levels; an example is a string)") from None
    except ValueError as exc:
        raise BadRequest(400, f"{where} is not valid JSON: {exc}") from None


async def _json_examples(body: bytes) -> list:
    """The examples of a JSON body. A large ``[...]`` or ``{"examples": [...]}`` of strings is
    read in slices cut between two strings (``"`` , ``"``): each slice is parsed as a JSON list
    of its own, the event loop serving other clients between two. If every slice parses as a
    list of strings, their concatenation is exactly what the whole document parses to (the
    slices and the commas between them are the document's array); otherwise (another shape, a
    cut inside a string, not JSON) the whole body is parsed at once, as for a small body."""
    if len(body) > SLICE_BYTES:
        sliced = await _sliced_list(body)
        if sliced is not None:
            return sliced
    document = _loads(body)
    examples = document.get("examples") if isinstance(document, dict) else document
    if not isinstance(examples, list):
        raise BadRequest(400, 'expected {"examples": ["label |ns feature ...", ...]} or a JSON list of lines')
    if not all(isinstance(e, str) for e in examples):
        raise BadRequest(400, "every example must be a string (one VW or libsvm line)")
    return examples


async def _sliced_list(body: bytes):
    opened = _OPEN.match(body)
    if opened is None:
        return None
    end = _end(body, len(body))   # the closing ']' (and '}'), found from the end (no scan or copy of the body)
    if opened.group(1):
        if body[end - 1:end] != b"}":
            return None
        end = _end(body, end - 1)
    if body[end - 1:end] != b"]" or end - 1 < opened.end():
        return None
    position, end, examples = opened.end(), end - 1, []
    while position < end:
        cut = _CUT.search(body, position + SLICE_BYTES, end) if position + SLICE_BYTES < end else None
        stop = cut.start() + 1 if cut else end
        try:
            items = json.loads(b"[" + body[position:stop] + b"]")
        except RecursionError:
            raise BadRequest(400, "the body is JSON nested too deeply to read (keep it under a few hundred "
                                  "levels; an example is a string)") from None
        except ValueError:
            return None
        if not all(isinstance(e, str) for e in items):
            return None
        examples += items
        position = cut.end() - 1 if cut else end
        await asyncio.sleep(0)
    return examples


def _end(body, end: int) -> int:
    """``end`` moved back over JSON white space."""
    while end and body[end - 1] in _SPACE:
        end -= 1
    return end


async def _examples(body: bytes, content_type: str):
    """The request's examples (a list of str)."""
    kind = content_type.split(";")[0].strip().lower()
    if kind in JSON_TYPES or kind.endswith("+json"):
        return await _json_examples(body)
    if kind in NDJSON_TYPES:
        examples, number = [], 0
        async for part in _line_slices(body):
            for line in part.splitlines():
                number += 1
                if not line.strip():
                    continue
                item = _loads(line, f"NDJSON line {number}")
                if isinstance(item, dict):
                    item = item.get("example")
                if not isinstance(item, str):
                    raise BadRequest(400, f'NDJSON line {number}: expected a string or {{"example": "..."}}')
                examples.append(item)
        return examples
    examples = []
    async for part in _line_slices(body):   # plain text, in slices cut after a '\n' (never inside a UTF-8 character)
        try:
            text = part.decode("utf-8")
        except UnicodeDecodeError:
            raise BadRequest(400, "plain-text examples must be UTF-8") from None
        examples += [line for line in text.splitlines() if line.strip()]
    return examples


async def _line_slices(body):
    """The body in parts of about SLICE_BYTES, each cut after a line break (the last part: the
    rest), the event loop serving other clients between two."""
    position = 0
    while position < len(body):
        cut = body.find(b"\n", position + SLICE_BYTES)
        stop = len(body) if cut < 0 else cut + 1
        yield body[position:stop]
        position = stop
        if position < len(body):
            await asyncio.sleep(0)


def _finite(values: list) -> list:
    return [v if math.isfinite(v) else None for v in values]


async def _answer(served: Served, examples: list, learn: bool) -> dict:
    """The examples, in slices of about SLICE_BYTES (one parse and kernel call each, the event
    loop serving other clients between two), all by the model being served when the request
    started; one result per example, in order. The list's items are let go (None) as they
    are answered."""
    view = served.view()
    model = view[0].model
    n = len(examples)
    errors = {}
    predictions, tags = [None] * n, [None] * n
    probabilities = [None] * n if model.classes else None
    answered = bytearray(n)
    first = 0
    while first < n:
        last, size = first, 0
        while last < n and size < SLICE_BYTES and last - first < SLICE_ITEMS:
            size += len(examples[last]) + 1
            last += 1
        _answer_slice(served, examples, first, last, learn, view, errors, predictions, tags, probabilities,
                      answered)
        examples[first:last] = [None] * (last - first)   # let go slice by slice, not 1M strings in one step
        first = last
        if first < n:
            await asyncio.sleep(0)
    if answered.count(1) + len(errors) != n:
        for i in range(n):
            if not answered[i] and i not in errors:
                errors[i] = "empty example (no label and no features)"
    reply = {"predictions": predictions, "tags": tags,
             "errors": [{"index": i, "error": errors[i]} for i in sorted(errors)]}
    if model.classes:
        reply["classes"] = model.classes
        reply["probabilities"] = probabilities
    reply["model"] = {"generation": view[3], "loaded_at": iso_time(view[4]), "link": view[1]}
    return reply


def _answer_slice(served, examples, first, last, learn, view, errors, predictions, tags, probabilities,
                  answered) -> None:
    chunk = examples[first:last]
    data = "\n".join(chunk)
    if data.count("\n") != len(chunk) - 1:  # an example with a line break would shift the others
        for k, example in enumerate(chunk):
            if "\n" in example:
                errors[first + k] = "an example must be one line (it contains a line break)"
                chunk[k] = ""
        data = "\n".join(chunk)
    try:
        raw = (data + "\n").encode("utf-8")
    except UnicodeEncodeError:   # valid JSON ("\ud800") that is not Unicode text: that example's error
        for k, example in enumerate(chunk):
            try:
                example.encode("utf-8")
            except UnicodeEncodeError as exc:
                bad = example[exc.start:exc.end]
                errors[first + k] = (f"not valid Unicode text: a lone surrogate {ascii(bad)[1:-1]} at character "
                                     f"{exc.start} (JSON \\u escapes must pair high and low surrogates)")
                chunk[k] = ""
        raw = ("\n".join(chunk) + "\n").encode("utf-8")
    answer = served.answer(raw, learn, view)
    values = answer.values.tolist()
    if not np.all(np.isfinite(answer.values)):
        values = _finite(values)
    rows = answer.probabilities.tolist() if answer.probabilities is not None else None
    for line, message in answer.bad:
        errors[first + line - 1] = message
    for e, line in enumerate(answer.example_line.tolist()):
        i = first + line - 1
        predictions[i] = values[e]
        answered[i] = 1
        tags[i] = answer.tags[e]
        if rows is not None:
            probabilities[i] = rows[e]


async def _render(reply: dict) -> list:
    """The reply's JSON as a list of UTF-8 parts; its long lists encoded in slices of
    SLICE_ITEMS (the event loop serving other clients between two: 1M predictions take ~1.5 s to
    encode). The parts are sent one by one (``_reply``), never joined into one string."""
    parts = [b"{"]
    for number, (key, value) in enumerate(reply.items()):
        parts.append(f"{',' if number else ''}{json.dumps(key)}:".encode("ascii"))
        if isinstance(value, list) and len(value) > SLICE_ITEMS:
            for k in range(0, len(value), SLICE_ITEMS):
                part = _encode(value[k:k + SLICE_ITEMS])
                parts.append((b"[" if k == 0 else b",") + part[1:-1])
                value[k:k + SLICE_ITEMS] = [None] * min(SLICE_ITEMS, len(value) - k)   # let go slice by slice
                await asyncio.sleep(0)
            parts.append(b"]")
        else:
            parts.append(_encode(value))
    parts.append(b"}")
    return parts


def _encode(value) -> bytes:
    try:
        return _dumps(value).encode("utf-8")
    except UnicodeEncodeError:   # a lone surrogate in a message: JSON's \\u escapes carry it
        return json.dumps(value, allow_nan=False, separators=(",", ":")).encode("ascii")


def _reply(parts: list) -> Response:
    """A small reply in one piece; a large one sent part by part."""
    if len(parts) < 16:
        return _Json(b"".join(parts))
    return _Parts(parts)


class _Parts(Response):
    """A JSON reply sent part by part, its length known (no chunked encoding), the event loop
    serving other clients between two parts; each part is let go once sent."""

    media_type = "application/json"

    def __init__(self, parts: list):
        self.parts = parts
        super().__init__(None, headers={"content-length": str(sum(map(len, parts)))})

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        parts, self.parts = self.parts, None
        for k in range(len(parts)):
            part, parts[k] = parts[k], None
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0)
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def _dumps(content) -> str:
    return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))


def _loaded(served: Served) -> str:
    return iso_time(served.loaded_at)


def build_app(served: Served, options: ServeOptions) -> Starlette:
    limit = options.max_request_bytes

    async def predict(request: Request) -> Response:
        return await _predict(request, learn=False)

    async def learn(request: Request) -> Response:
        if not options.learn:
            return _error(409, "this server does not learn (start it with --learn -f OUT)")
        return await _predict(request, learn=True)

    async def _predict(request: Request, learn: bool) -> Response:
        if served.cb is not None:
            return _error(409, "the served model is a contextual-bandit model: POST /rank, then POST /reward")
        try:
            body = await _body(request, limit)
            examples = await _examples(body, request.headers.get("content-type", "text/plain"))
        except BadRequest as exc:
            served.log.client_error("bad_request", path=request.url.path, status=exc.status, error=str(exc))
            return _error(exc.status, str(exc))
        try:
            return _reply(await _render(await _answer(served, examples, learn)))
        except Exception as exc:  # a bug, not the client's mistake: answer 500 and keep serving
            served.stats.internal_errors += 1
            served.log("internal_error", "error", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
            return _error(500, f"internal error ({type(exc).__name__}); see the server log")

    async def rank(request: Request) -> Response:
        return await _cb(request, "rank")

    async def reward(request: Request) -> Response:
        return await _cb(request, "reward")

    async def _cb(request: Request, kind: str) -> Response:
        """Contextual bandits (olcli/serve_cb.py): one JSON request, one JSON reply."""
        if served.cb is None:
            return _error(409, f"/{kind} is for a contextual-bandit model; this one predicts (POST /predict)")
        try:
            doc = _loads(await _body(request, limit))
        except BadRequest as exc:
            served.log.client_error("bad_request", path=request.url.path, status=exc.status, error=str(exc))
            return _error(exc.status, str(exc))
        try:
            status, reply = served.cb.handle(kind, doc)
        except Exception as exc:  # a bug, not the client's mistake: answer 500 and keep serving
            served.stats.internal_errors += 1
            served.log("internal_error", "error", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
            return _error(500, f"internal error ({type(exc).__name__}); see the server log")
        return _Json(reply, status_code=status)

    async def healthz(request: Request) -> Response:
        if served.diverged:
            return _Json({"status": "diverged", "generation": served.generation}, status_code=503)
        return _Json({"status": "ok", "generation": served.generation, "loaded_at": _loaded(served)})

    async def model_info(request: Request) -> Response:
        return _Json(served.model_info())

    async def reload(request: Request) -> Response:
        ok, message = await served.reload("POST /reload")
        info = {"reloaded": ok, "generation": served.generation, "loaded_at": _loaded(served)}
        if not ok:
            info["error"] = message
        return _Json(info, status_code=200 if ok else 409)

    async def openapi(request: Request) -> Response:
        return _Json(OPENAPI)

    routes = [
        Route("/predict", predict, methods=["POST"]),
        Route("/learn", learn, methods=["POST"]),
        Route("/rank", rank, methods=["POST"]),
        Route("/reward", reward, methods=["POST"]),
        Route("/healthz", healthz, methods=["GET"]),
        Route("/model", model_info, methods=["GET"]),
        Route("/reload", reload, methods=["POST"]),
        Route("/openapi.json", openapi, methods=["GET"]),
    ]
    return Starlette(routes=routes)


class _Server(uvicorn.Server):
    """uvicorn on our loop: olcli serve owns the signals (SIGHUP reloads, SIGTERM saves), and
    the clock: uvicorn's own main loop wakes every 0.1 s (``asyncio.sleep``), a timer that
    makes every wait of the shared event loop a timed one (~0.7 µs more per line-protocol
    round trip, olcli/serve_process.py ``Ticker``). Here it runs its tick (the Date header, the exit
    check) when olcli's ticker says a second went by, or at once when told to stop."""

    def __init__(self, config):
        super().__init__(config)
        self.tick = asyncio.Event()

    async def main_loop(self) -> None:
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            await self.tick.wait()
            self.tick.clear()
            counter = (counter + 10) % 864000   # a multiple of 10: on_tick refreshes the Date header
            should_exit = await self.on_tick(counter)

    def install_signal_handlers(self) -> None:  # uvicorn < 0.29
        pass

    def capture_signals(self):  # uvicorn >= 0.29
        import contextlib

        return contextlib.nullcontext()


class _ToEventLog(logging.Handler):
    def __init__(self, log: EventLog):
        super().__init__(logging.WARNING)
        self.log = log

    def emit(self, record) -> None:
        try:
            self.log("http_server", record.levelname.lower(), message=record.getMessage())
        except Exception:
            pass


class HttpServer:
    def __init__(self, served: Served, options: ServeOptions, log: EventLog, sock):
        self.sock = sock
        logger = logging.getLogger("uvicorn")
        logger.handlers[:] = [_ToEventLog(log)]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
        config = uvicorn.Config(
            build_app(served, options), lifespan="off", log_config=None, access_log=False,
            http="h11", ws="none", server_header=False,
            limit_concurrency=options.max_connections,
            timeout_keep_alive=max(1, int(options.idle_timeout)) if options.idle_timeout else 10 ** 6,
            timeout_graceful_shutdown=options.shutdown_timeout,
            h11_max_incomplete_event_size=max(options.max_line_bytes, 16 * 1024),
        )
        self.server = _Server(config)

    async def serve(self) -> None:
        await self.server.serve(sockets=[self.sock])

    async def started(self) -> None:
        while not self.server.started:
            await asyncio.sleep(0.005)

    def tick(self) -> None:
        """Once a second, on the loop (olcli/serve_process.py ``Ticker``)."""
        self.server.tick.set()

    async def stop(self, task) -> None:
        """uvicorn's graceful shutdown: stop accepting, finish the requests in flight."""
        self.server.should_exit = True
        self.server.tick.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), (self.server.config.timeout_graceful_shutdown or 5) + 2)
        except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
            self.server.force_exit = True

