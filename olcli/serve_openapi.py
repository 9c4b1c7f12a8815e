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
        "/rank": {"post": {
            "summary": "A contextual-bandit model: the PMF over the request's actions, one action sampled from it "
                       "(seeded: --cb-seed) and an event id; with --learn the event waits for its reward",
            "requestBody": {"required": True, "content": _json_content({"$ref": "#/components/schemas/RankRequest"})},
            "responses": {"200": {"description": "The ranked event", "content": _json_content(
                              {"$ref": "#/components/schemas/Ranked"})},
                          "400": {"description": "Not a rank request (the error names the field)",
                                  "content": _json_content(_ERROR)},
                          "409": {"description": "The model is not a contextual-bandit model, or the event_id is "
                                                 "already waiting", "content": _json_content(_ERROR)},
                          "413": _CLIENT_ERRORS["413"]}}},
        "/reward": {"post": {
            "summary": "With --learn: learn the ranked event from the cost (or reward = -cost) of the action played",
            "requestBody": {"required": True, "content": _json_content({"$ref": "#/components/schemas/Reward"})},
            "responses": {"200": {"description": "Learned", "content": _json_content({
                              "type": "object", "required": ["event_id", "learned", "action", "probability", "cost"],
                              "properties": {"event_id": {"type": "string"}, "learned": {"type": "boolean"},
                                             "action": {"type": "integer"}, "probability": {"type": "number"},
                                             "cost": {"type": "number"}, "model": {"type": "object"}}})},
                          "400": {"description": "Not a reward (the error names the field)",
                                  "content": _json_content(_ERROR)},
                          "404": {"description": "No event waits under this id (never ranked here, rewarded "
                                                 "already, or dropped: --cb-pending)", "content": _json_content(_ERROR)},
                          "409": {"description": "The server does not learn, or the model is not a contextual-bandit "
                                                 "model", "content": _json_content(_ERROR)},
                          "413": _CLIENT_ERRORS["413"]}}},
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
        "RankRequest": {"type": "object", "required": ["actions"], "properties": {
            "shared": {"type": "string", "nullable": True, "description": "shared features, VW text from its '|'"},
            "actions": {"type": "array", "minItems": 1, "items": {"type": "string"},
                        "description": "one VW features text per action ('|ns f ...')"},
            "event_id": {"type": "string", "description": "the client's id (default: made by the server)"}}},
        "Ranked": {"type": "object", "required": ["event_id", "action", "probability", "pmf"], "properties": {
            "event_id": {"type": "string"}, "action": {"type": "integer", "description": "position of the action "
                                                                                         "to play"},
            "probability": {"type": "number", "description": "its probability in the PMF (learned with)"},
            "pmf": {"type": "array", "items": {"type": "number"}, "description": "one per action, in order"},
            "model": {"type": "object", "properties": {"generation": {"type": "integer"}}}}},
        "Reward": {"type": "object", "required": ["event_id"], "properties": {
            "event_id": {"type": "string"}, "cost": {"type": "number"},
            "reward": {"type": "number", "description": "instead of cost: cost = -reward"}}},
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
