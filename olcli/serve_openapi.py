"""The OpenAPI 3 description of ``olcli serve``'s HTTP endpoints (olcli/serve_http.py), answered
at ``GET /openapi.json`` and checked against the server by benchmarks/serve_fuzz.py."""

from olcli import __version__


def _json_content(schema: dict) -> dict:
    return {"application/json": {"schema": schema}}


_ERROR = {"$ref": "#/components/schemas/Error"}
_CLIENT_ERRORS = {
    "400": {"description": "Unreadable body: not JSON (or nested too deeply), not UTF-8, or not a list of "
                           "strings", "content": _json_content(_ERROR)},
    "413": {"description": "Body over --max-request-bytes", "content": _json_content(_ERROR)},
}
_EXAMPLES_BODY = {
    "required": False,   # no body: no examples, an empty answer
    "content": {
        "application/json": {"schema": {"oneOf": [
            {"type": "object", "required": ["examples"],
             "properties": {"examples": {"type": "array", "items": {"type": "string"}}}},
            {"type": "array", "items": {"type": "string"}}]}},
        "application/x-ndjson": {"schema": {"type": "string",
                                            "description": "one JSON string or {\"example\": ...} a line"}},
        "text/plain": {"schema": {"type": "string", "description": "one example a line (UTF-8)"}}}}

OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "olcli serve", "version": __version__,
             "description": "Predictions (and, with --learn, online learning) from an olcli model. "
                            "The same model also answers VW's daemon line protocol on --port. Any media type "
                            "other than JSON and NDJSON is read as plain text lines. Over --max-connections "
                            "a request gets 503 from the HTTP server (text)."},
    "paths": {
        "/predict": {"post": {
            "summary": "Predict a batch of VW or libsvm lines (never learns)",
            "requestBody": _EXAMPLES_BODY,
            "responses": {
                "200": {"description": "One prediction per example, in order; null (and an entry in errors) where "
                                       "the example was bad or empty",
                        "content": _json_content({"$ref": "#/components/schemas/Predictions"})},
                **_CLIENT_ERRORS}}},
        "/learn": {"post": {
            "summary": "With --learn: predict, then learn the labelled examples (progressive)",
            "requestBody": _EXAMPLES_BODY,
            "responses": {"200": {"description": "The predictions made before learning each example",
                                  "content": _json_content({"$ref": "#/components/schemas/Predictions"})},
                          **_CLIENT_ERRORS,
                          "409": {"description": "The server was not started with --learn",
                                  "content": _json_content(_ERROR)}}}},
        "/healthz": {"get": {"summary": "Liveness", "responses": {
            "200": {"description": "Serving", "content": _json_content({
                "type": "object", "required": ["status", "generation", "loaded_at"],
                "properties": {"status": {"type": "string", "enum": ["ok"]}, "generation": {"type": "integer"},
                               "loaded_at": {"type": "string"}}})},
            "503": {"description": "The learning model diverged", "content": _json_content({
                "type": "object", "required": ["status", "generation"],
                "properties": {"status": {"type": "string", "enum": ["diverged"]},
                               "generation": {"type": "integer"}}})}}}},
        "/model": {"get": {"summary": "The served model: header, counters, file, when loaded, serving counters",
                           "responses": {"200": {"description": "Model information", "content": _json_content({
                               "type": "object",
                               "required": ["model", "counters", "generation", "learn", "serving", "pid"],
                               "properties": {"model": {"type": "object"}, "counters": {"type": "object"},
                                              "file": {"type": "object"}, "generation": {"type": "integer"},
                                              "learn": {"type": "boolean"}, "serving": {"type": "object"},
                                              "pid": {"type": "integer"}}})}}}},
        "/reload": {"post": {"summary": "Load the model file again and swap it in (as SIGHUP); the answer is "
                                        "for a load that started after the request",
                             "responses": {
                                 "200": {"description": "Reloaded", "content": _json_content(
                                     {"$ref": "#/components/schemas/Reload"})},
                                 "409": {"description": "Refused (damaged or incompatible file, or --learn); the "
                                                        "old model keeps serving",
                                         "content": _json_content({"$ref": "#/components/schemas/Reload"})}}}},
        "/openapi.json": {"get": {"summary": "This document", "responses": {
            "200": {"description": "OpenAPI 3.0 description of the HTTP endpoints",
                    "content": _json_content({"type": "object"})}}}},
    },
    "components": {"schemas": {
        "Error": {"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}},
        "Reload": {"type": "object", "required": ["reloaded", "generation", "loaded_at"],
                   "properties": {"reloaded": {"type": "boolean"}, "generation": {"type": "integer"},
                                  "loaded_at": {"type": "string"}, "error": {"type": "string"}}},
        "Predictions": {"type": "object", "required": ["predictions", "tags", "errors", "model"], "properties": {
            "predictions": {"type": "array", "items": {"type": "number", "nullable": True},
                            "description": "as olcli test -p: through the link; the class 1..K for multiclass"},
            "tags": {"type": "array", "items": {"type": "string", "nullable": True}},
            "errors": {"type": "array", "items": {"type": "object", "required": ["index", "error"], "properties": {
                "index": {"type": "integer"}, "error": {"type": "string"}}}},
            "classes": {"type": "integer"},
            "probabilities": {"type": "array", "items": {"type": "array", "nullable": True,
                                                         "items": {"type": "number"}},
                              "description": "multiclass: one row of K class probabilities per example"},
            "model": {"type": "object", "properties": {"generation": {"type": "integer"},
                                                       "loaded_at": {"type": "string"},
                                                       "link": {"type": "string", "nullable": True}}}}}}},
}
