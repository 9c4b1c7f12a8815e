"""``olcli serve --http-port N``: HTTP/JSON on Starlette, served by uvicorn on the line server's
event loop and ``Served`` (olcli/serve.py), so both protocols share one model, one writer and
one reload. Imported only with ``--http-port`` (the optional extra ``olcli[serve]``).

Endpoints (the OpenAPI description is at ``GET /openapi.json``):

- ``POST /predict``: examples as JSON (``{"examples": ["1 |a b", ...]}`` or a JSON list),
  NDJSON (one JSON string, or ``{"example": "..."}``, per line) or plain text lines; reply
  ``{"predictions": [...], "tags": [...], "errors": [...], ...}`` in the examples' order, with
  ``"probabilities"`` (n x K) for multiclass. A bad example gets ``null`` and an entry in
  ``errors``; the others are answered (status 200). Never learns.
- ``POST /learn`` (``--learn`` only): the same, learning the labelled examples (the
  predictions are those before learning each one).
- ``GET /healthz``, ``GET /model``, ``POST /reload``.
"""

import asyncio
import json
import logging
import math

import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from olcli import __version__
from olcli.serve import EventLog, Served, ServeOptions

JSON_TYPES = ("application/json",)
NDJSON_TYPES = ("application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines",
                "application/jsonlines")


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class _Json(JSONResponse):
    def render(self, content) -> bytes:
        return json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")


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
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"request body over the limit of {limit} bytes (--max-request-bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


def _examples(body: bytes, content_type: str):
    """The request's examples: (list of str, or None for plain text, buffer of lines)."""
    kind = content_type.split(";")[0].strip().lower()
    if kind in JSON_TYPES or kind.endswith("+json"):
        try:
            document = json.loads(body)
        except ValueError as exc:
            raise BadRequest(400, f"the body is not valid JSON: {exc}") from None
        examples = document.get("examples") if isinstance(document, dict) else document
        if not isinstance(examples, list):
            raise BadRequest(400, 'expected {"examples": ["label |ns feature ...", ...]} or a JSON list of lines')
        if not all(isinstance(e, str) for e in examples):
            raise BadRequest(400, "every example must be a string (one VW or libsvm line)")
        return examples
    if kind in NDJSON_TYPES:
        examples = []
        for number, line in enumerate(body.splitlines(), 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as exc:
                raise BadRequest(400, f"NDJSON line {number} is not valid JSON: {exc}") from None
            if isinstance(item, dict):
                item = item.get("example")
            if not isinstance(item, str):
                raise BadRequest(400, f'NDJSON line {number}: expected a string or {{"example": "..."}}')
            examples.append(item)
        return examples
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest(400, "plain-text examples must be UTF-8") from None
    return [line for line in text.splitlines() if line.strip()]


def _finite(values: list) -> list:
    return [v if math.isfinite(v) else None for v in values]


def _answer(served: Served, examples: list, learn: bool) -> dict:
    """Run the examples as one batch; one result per example, in order."""
    n = len(examples)
    errors = {}
    data = "\n".join(examples)
    if data.count("\n") != max(0, n - 1):  # an example with a line break would shift the others
        for i, example in enumerate(examples):
            if "\n" in example:
                errors[i] = "an example must be one line (it contains a line break)"
                examples[i] = ""
        data = "\n".join(examples)
    answer = served.answer((data + "\n").encode("utf-8") if n else b"", learn)
    model = served.learner.model
    predictions = answer.values.tolist()
    if not np.all(np.isfinite(answer.values)):
        predictions = _finite(predictions)
    tags = answer.tags
    probabilities = answer.probabilities.tolist() if answer.probabilities is not None else None
    for line, message in answer.bad:
        errors[line - 1] = message
    if answer.n_examples != n:  # some examples bad or empty: place each answer on its example
        placed, placed_tags = [None] * n, [None] * n
        placed_probabilities = [None] * n if probabilities is not None else None
        for e, line in enumerate(answer.example_line.tolist()):
            placed[line - 1] = predictions[e]
            placed_tags[line - 1] = tags[e]
            if probabilities is not None:
                placed_probabilities[line - 1] = probabilities[e]
        for i in range(n):
            if placed[i] is None and i not in errors:
                errors[i] = "empty example (no label and no features)"
        predictions, tags, probabilities = placed, placed_tags, placed_probabilities
    reply = {"predictions": predictions, "tags": tags,
             "errors": [{"index": i, "error": errors[i]} for i in sorted(errors)]}
    if model.classes:
        reply["classes"] = model.classes
        reply["probabilities"] = probabilities
    reply["model"] = {"generation": served.generation, "loaded_at": _loaded(served), "link": served.link}
    return reply


def _loaded(served: Served) -> str:
    from olcli.serve import _iso

    return _iso(served.loaded_at)


def build_app(served: Served, options: ServeOptions) -> Starlette:
    limit = options.max_request_bytes

    async def predict(request: Request) -> Response:
        return await _predict(request, learn=False)

    async def learn(request: Request) -> Response:
        if not options.learn:
            return _error(409, "this server does not learn (start it with --learn -f OUT)")
        return await _predict(request, learn=True)

    async def _predict(request: Request, learn: bool) -> Response:
        try:
            body = await _body(request, limit)
            examples = _examples(body, request.headers.get("content-type", "text/plain"))
        except BadRequest as exc:
            served.log.client_error("bad_request", path=request.url.path, status=exc.status, error=str(exc))
            return _error(exc.status, str(exc))
        try:
            return _Json(_answer(served, examples, learn))
        except Exception as exc:  # a bug, not the client's mistake: answer 500 and keep serving
            served.stats.internal_errors += 1
            served.log("internal_error", "error", path=request.url.path, error=f"{type(exc).__name__}: {exc}")
            return _error(500, f"internal error ({type(exc).__name__}); see the server log")

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
    round trip, olcli/serve.py ``Ticker``). Here it runs its tick (the Date header, the exit
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
        """Once a second, on the loop (olcli/serve.py ``Ticker``)."""
        self.server.tick.set()

    async def stop(self, task) -> None:
        """uvicorn's graceful shutdown: stop accepting, finish the requests in flight."""
        self.server.should_exit = True
        self.server.tick.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), (self.server.config.timeout_graceful_shutdown or 5) + 2)
        except (asyncio.TimeoutError, asyncio.CancelledError, Exception):
            self.server.force_exit = True


OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "olcli serve", "version": __version__,
             "description": "Predictions (and, with --learn, online learning) from an olcli model. "
                            "The same model also answers VW's daemon line protocol on --port."},
    "paths": {
        "/predict": {"post": {
            "summary": "Predict a batch of VW or libsvm lines (never learns)",
            "requestBody": {"required": True, "content": {
                "application/json": {"schema": {"oneOf": [
                    {"type": "object", "required": ["examples"],
                     "properties": {"examples": {"type": "array", "items": {"type": "string"}}}},
                    {"type": "array", "items": {"type": "string"}}]}},
                "application/x-ndjson": {"schema": {"type": "string",
                                                    "description": "one JSON string or {\"example\": ...} a line"}},
                "text/plain": {"schema": {"type": "string", "description": "one example a line"}}}},
            "responses": {
                "200": {"description": "One prediction per example, in order; null where the example was bad",
                        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Predictions"}}}},
                "400": {"description": "Unreadable body"},
                "413": {"description": "Body over --max-request-bytes"},
                "503": {"description": "Over --max-connections"}}}},
        "/learn": {"post": {
            "summary": "With --learn: predict, then learn the labelled examples (progressive)",
            "requestBody": {"$ref": "#/paths/~1predict/post/requestBody"},
            "responses": {"200": {"description": "The predictions made before learning each example",
                                  "content": {"application/json": {
                                      "schema": {"$ref": "#/components/schemas/Predictions"}}}},
                          "409": {"description": "The server was not started with --learn"}}}},
        "/healthz": {"get": {"summary": "Liveness", "responses": {
            "200": {"description": "Serving"}, "503": {"description": "The learning model diverged"}}}},
        "/model": {"get": {"summary": "The served model: header, counters, file, when loaded, serving counters",
                           "responses": {"200": {"description": "Model information"}}}},
        "/reload": {"post": {"summary": "Load the model file again and swap it in (as SIGHUP)",
                             "responses": {"200": {"description": "Reloaded"},
                                           "409": {"description": "Refused (damaged or incompatible file, or "
                                                                  "--learn); the old model keeps serving"}}}},
    },
    "components": {"schemas": {"Predictions": {"type": "object", "properties": {
        "predictions": {"type": "array", "items": {"type": "number", "nullable": True},
                        "description": "as olcli test -p: through the link; the class 1..K for multiclass"},
        "tags": {"type": "array", "items": {"type": "string", "nullable": True}},
        "errors": {"type": "array", "items": {"type": "object", "properties": {
            "index": {"type": "integer"}, "error": {"type": "string"}}}},
        "classes": {"type": "integer"},
        "probabilities": {"type": "array", "items": {"type": "array", "items": {"type": "number"}},
                          "description": "multiclass: one row of K class probabilities per example"},
        "model": {"type": "object", "properties": {"generation": {"type": "integer"},
                                                   "loaded_at": {"type": "string"},
                                                   "link": {"type": "string"}}}}}}},
}
