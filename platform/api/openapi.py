"""The OpenAPI 3.1 description of the HTTP API (served at ``/openapi.json``).

Written by hand rather than generated: most bodies are RDF or query text, not JSON
models, and the document is the contract clients are written against.
"""

from __future__ import annotations

from typing import Any

_ERROR = {"$ref": "#/components/schemas/Error"}


_PUSH_DURABILITY = (
    "With `linkstream run --state-dir DIR` a push is acknowledged (202) only when durable: its "
    "elements are in the ingest log under DIR and fsynced (one fsync per batch of concurrent "
    "requests); after a crash the restarted server replays the log before it serves. Without "
    "--state-dir, 202 means queued in memory: a crash loses acknowledged elements."
)


def _resp(desc: str, schema: dict[str, Any] | None = None, media: str = "application/json") -> dict[str, Any]:
    out: dict[str, Any] = {"description": desc}
    if schema is not None:
        out["content"] = {media: {"schema": schema}}
    return out


def _err(desc: str) -> dict[str, Any]:
    return _resp(desc, _ERROR)


_NAME = {
    "name": "name",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
    "description": "query name (URL-encoded)",
}
_STREAM_PARAMS = [
    {
        "name": "t",
        "in": "query",
        "schema": {"type": "integer"},
        "description": "event time (ms since the epoch)",
    },
    {
        "name": "X-Event-Time",
        "in": "header",
        "schema": {"type": "string"},
        "description": "event time: integer ms or an xsd:dateTime",
    },
]
_RDF_BODY = {
    "required": True,
    "content": {
        m: {"schema": {"type": "string"}}
        for m in ("application/n-triples", "application/n-quads", "text/turtle", "application/ld+json")
    },
}
_RESULTS_PARAMS = [
    _NAME,
    {
        "name": "until",
        "in": "query",
        "schema": {"type": "integer"},
        "description": "end after the report at or after this time",
    },
    {
        "name": "limit",
        "in": "query",
        "schema": {"type": "integer"},
        "description": "end after this many lines",
    },
    {
        "name": "queue",
        "in": "query",
        "schema": {"type": "integer"},
        "description": "lines buffered before the oldest are dropped",
    },
    {
        "name": "after",
        "in": "query",
        "schema": {"type": "string", "pattern": "^-?[0-9]+(:[0-9]+)?$"},
        "description": "resume after this result id (<report time>:<line>, as SSE id:; a bare report "
        "time: after that whole report); the same as the Last-Event-ID header",
    },
    {
        "name": "Last-Event-ID",
        "in": "header",
        "schema": {"type": "string"},
        "description": "resume after this result id: the kept reports first, none twice",
    },
]
_SPARQL_PARAMS = [
    {"name": "query", "in": "query", "schema": {"type": "string"}},
    {"name": "default-graph-uri", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
    {"name": "named-graph-uri", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}},
]
_SPARQL_OK = {
    "description": "results",
    "content": {
        "application/sparql-results+json": {"schema": {"type": "object"}},
        "application/n-triples": {"schema": {"type": "string"}},
    },
}


_SCOPE_DOC = (
    "Bearer tokens have a scope, each including the ones before it: `read` (GET of queries, "
    "results, /status, /metrics, /openapi.json; one-shot /sparql), `write` (also registering and "
    "removing its own queries, pushing stream elements, advancing the watermark), `admin` (also "
    "removing queries registered with other tokens).  /healthz needs no token.  401: no or an "
    "unknown token; 403: a token whose scope is too weak."
)

#: statuses every authenticated operation may answer, beyond its own
_COMMON = {
    "401": "no or an unknown bearer token",
    "403": "the token's scope does not allow this",
    "408": "the request body did not arrive within body_seconds",
    "413": "the body is larger than max_body_bytes (or max_query_bytes for query text)",
    "422": "a JSON body nested deeper than max_json_depth",
}


def _scope(method: str, path: str) -> str:
    if method == "get" or path == "/sparql":
        return "read"
    return "write"


def _with_auth(doc: dict[str, Any]) -> dict[str, Any]:
    """Adds each operation's scope and the common error answers."""
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if path == "/healthz":
                continue
            scope = _scope(method, path)
            op["security"] = [{"bearer": [scope]}]
            op["x-required-scope"] = scope
            for status, desc in _COMMON.items():
                op["responses"].setdefault(status, _err(desc))
    return doc


def openapi_schema() -> dict[str, Any]:
    """The OpenAPI document of the API."""
    return _with_auth(_document())


def _document() -> dict[str, Any]:
    query_summary = {"$ref": "#/components/schemas/QuerySummary"}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "LinkStream",
            "version": "0.1.0",
            "description": "Continuous queries (C-SPARQL, CQELS-QL, RSP-QL) over RDF streams.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": _SCOPE_DOC}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error", "where"],
                    "properties": {
                        "error": {"type": "string", "description": "one line naming the problem"},
                        "where": {
                            "type": "string",
                            "description": "the part of the request at fault: body, body line N, query line "
                            "L, column C, header NAME, query parameter NAME, path, method, connection, server",
                        },
                        "limit": {
                            "type": "string",
                            "description": "the limit reached (a linkstream run flag)",
                        },
                        "value": {"type": "number", "description": "that limit's value"},
                        "line": {"type": "integer"},
                        "column": {"type": "integer"},
                        "errors": {"type": "array", "items": {"type": "object"}},
                    },
                },
                "Window": {
                    "type": "object",
                    "properties": {
                        "stream": {"type": "string"},
                        "window": {"type": "string"},
                        "name": {"type": ["string", "null"]},
                        "step_ms": {"type": "integer"},
                    },
                },
                "QuerySummary": {
                    "type": "object",
                    "required": ["name", "dialect", "form", "windows"],
                    "properties": {
                        "name": {"type": "string"},
                        "dialect": {"type": "string", "enum": ["csparql", "cqels", "rspql"]},
                        "form": {"type": "string", "enum": ["SELECT", "ASK", "CONSTRUCT"]},
                        "mode": {"type": "string", "enum": ["RSTREAM", "ISTREAM", "DSTREAM"]},
                        "windows": {"type": "array", "items": {"$ref": "#/components/schemas/Window"}},
                        "first_report": {"type": ["integer", "null"]},
                        "next_report": {"type": ["integer", "null"]},
                        "last_report": {"type": ["integer", "null"]},
                    },
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/queries": {
                "post": {
                    "summary": "Register a continuous query",
                    "parameters": [{"name": "name", "in": "query", "schema": {"type": "string"}}],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/sparql-query": {"schema": {"type": "string"}},
                            "text/plain": {"schema": {"type": "string"}},
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["query"],
                                    "properties": {"query": {"type": "string"}, "name": {"type": "string"}},
                                }
                            },
                        },
                    },
                    "responses": {
                        "201": _resp("registered", query_summary),
                        "400": _err("the query does not parse (line and column given)"),
                        "409": _err("a query of that name exists"),
                        "413": _err("query text larger than max_query_bytes"),
                        "422": _err("the query did not compile within compile_seconds"),
                        "429": _err("the token has max_queries_per_token queries"),
                        "503": _err("max_compiles queries are compiling; retry later"),
                    },
                },
                "get": {
                    "summary": "List registered queries",
                    "responses": {
                        "200": _resp(
                            "the queries",
                            {
                                "type": "object",
                                "properties": {"queries": {"type": "array", "items": query_summary}},
                            },
                        )
                    },
                },
            },
            "/queries/{name}": {
                "get": {
                    "summary": "A query's text, windows, schedule and statistics",
                    "parameters": [_NAME],
                    "responses": {
                        "200": _resp("the query", {"type": "object"}),
                        "404": _err("unknown query"),
                    },
                },
                "delete": {
                    "summary": "Unregister a query",
                    "parameters": [_NAME],
                    "responses": {
                        "204": _resp("unregistered"),
                        "403": _err("registered with another token: needs that token or scope admin"),
                        "404": _err("unknown query"),
                    },
                },
            },
            "/queries/{name}/results": {
                "get": {
                    "summary": "Subscribe to results as Server-Sent Events (one event per result line, "
                    "id <report time>:<line>)",
                    "parameters": _RESULTS_PARAMS,
                    "responses": {
                        "200": _resp("event stream", {"type": "string"}, "text/event-stream"),
                        "400": _err("bad until/limit/queue or Last-Event-ID"),
                        "404": _err("unknown query"),
                        "410": _err("results after Last-Event-ID / after are no longer kept"),
                        "429": _err("max_subscribers result streams are open"),
                    },
                }
            },
            "/queries/{name}/results.jsonl": {
                "get": {
                    "summary": "Subscribe to results as a chunked JSON Lines stream",
                    "parameters": _RESULTS_PARAMS,
                    "responses": {
                        "200": _resp("JSON Lines", {"type": "string"}, "application/x-ndjson"),
                        "404": _err("unknown query"),
                        "410": _err("results after `after` are no longer kept"),
                    },
                }
            },
            "/streams": {
                "post": {
                    "summary": "Push stream elements (stream IRI in ?iri=)",
                    "description": _PUSH_DURABILITY,
                    "parameters": [
                        {"name": "iri", "in": "query", "required": True, "schema": {"type": "string"}},
                        *_STREAM_PARAMS,
                    ],
                    "requestBody": _RDF_BODY,
                    "responses": {
                        "202": _resp("accepted", {"type": "object"}),
                        "400": _err("malformed body (line and reason given)"),
                        "415": _err("unsupported media type"),
                    },
                }
            },
            "/streams/{iri}": {
                "post": {
                    "summary": "Push stream elements to the stream named by the URL-encoded IRI",
                    "description": _PUSH_DURABILITY,
                    "parameters": [
                        {"name": "iri", "in": "path", "required": True, "schema": {"type": "string"}},
                        *_STREAM_PARAMS,
                    ],
                    "requestBody": _RDF_BODY,
                    "responses": {
                        "202": _resp("accepted", {"type": "object"}),
                        "400": _err("malformed body (line and reason given)"),
                        "415": _err("unsupported media type"),
                    },
                }
            },
            "/watermark": {
                "post": {
                    "summary": "Declare that every stream has passed t; fire the report times <= t",
                    "parameters": [{"name": "t", "in": "query", "schema": {"type": "integer"}}],
                    "responses": {"200": _resp("fired", {"type": "object"}), "400": _err("no t")},
                }
            },
            "/sparql": {
                "get": {
                    "summary": "SPARQL 1.1 Protocol query over the static graphs",
                    "parameters": _SPARQL_PARAMS,
                    "responses": {
                        "200": _SPARQL_OK,
                        "400": _err("bad query"),
                        "413": _err("query over max_query_bytes, or result over sparql_max_rows"),
                        "503": _err("the query ran longer than sparql_seconds"),
                    },
                },
                "post": {
                    "summary": "SPARQL 1.1 Protocol query (form or application/sparql-query body)",
                    "parameters": _SPARQL_PARAMS[1:],
                    "requestBody": {
                        "content": {
                            "application/x-www-form-urlencoded": {"schema": {"type": "object"}},
                            "application/sparql-query": {"schema": {"type": "string"}},
                        }
                    },
                    "responses": {"200": _SPARQL_OK, "400": _err("bad query"), "415": _err("bad media type")},
                },
            },
            "/healthz": {
                "get": {
                    "summary": 'Liveness: {"status": "ok"} and nothing else (no token needed)',
                    "security": [],
                    "responses": {"200": _resp("ok", {"type": "object"})},
                }
            },
            "/status": {
                "get": {
                    "summary": "Engine figures (queries, operators, streams, subscribers) and the limits in force",
                    "responses": {"200": _resp("status", {"type": "object"})},
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics",
                    "responses": {"200": _resp("metrics", {"type": "string"}, "text/plain")},
                }
            },
            "/openapi.json": {"get": {"summary": "This document", "responses": {"200": _resp("OpenAPI")}}},
        },
    }
