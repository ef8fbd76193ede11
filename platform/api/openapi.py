"""The OpenAPI 3.1 description of the HTTP API (served at ``/openapi.json``).

Written by hand rather than generated: most bodies are RDF or query text, not JSON
models, and the document is the contract clients are written against.
"""

from __future__ import annotations

from typing import Any

_ERROR = {"$ref": "#/components/schemas/Error"}


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


def openapi_schema() -> dict[str, Any]:
    """The OpenAPI document of the API."""
    query_summary = {"$ref": "#/components/schemas/QuerySummary"}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "LinkStream",
            "version": "0.1.0",
            "description": "Continuous queries (C-SPARQL, CQELS-QL, RSP-QL) over RDF streams.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {"type": "string"},
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
                    "responses": {"204": _resp("unregistered"), "404": _err("unknown query")},
                },
            },
            "/queries/{name}/results": {
                "get": {
                    "summary": "Subscribe to results as Server-Sent Events (one event per result line)",
                    "parameters": _RESULTS_PARAMS,
                    "responses": {
                        "200": _resp("event stream", {"type": "string"}, "text/event-stream"),
                        "404": _err("unknown query"),
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
                    },
                }
            },
            "/streams": {
                "post": {
                    "summary": "Push stream elements (stream IRI in ?iri=)",
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
                    "responses": {"200": _SPARQL_OK, "400": _err("bad query")},
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
                    "summary": "Liveness and engine figures",
                    "security": [],
                    "responses": {"200": _resp("ok")},
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
