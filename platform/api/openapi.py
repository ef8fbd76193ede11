"""The OpenAPI 3.1 description of the HTTP API (served at ``/openapi.json``).

Written by hand rather than generated: most bodies are RDF or query text, not JSON
models, and the document is the contract clients are written against.
"""

from __future__ import annotations

from typing import Any

_ERROR = {"$ref": "#/components/schemas/Error"}


#: why a push is answered 503 (the client retries it, with the same Idempotency-Key)
_PUSH_503 = (
    "not taken now: the engine's input queue is full, or (run --zk) the stream's owner or the leader "
    "is changing or ZooKeeper is unreachable; retry, with the same Idempotency-Key"
)
_PUSH_DURABILITY = (
    "With `linkstream run --state-dir DIR` a push is acknowledged (202) only when durable: its "
    "elements are in the ingest log under DIR and fsynced (one fsync per batch of concurrent "
    "requests); after a crash the restarted server restores its latest checkpoint and replays the "
    "log after it before it serves, and a report delivered before the crash is not delivered "
    "again. Without "
    "--state-dir, 202 means queued in memory: a crash loses acknowledged elements. On a cluster "
    "(`run --zk --state-dir DIR`, DIR shared by the coordinators) the same holds across the death "
    "of the leader. A push that carries an Idempotency-Key header is taken once: a retry with the "
    "same key (after a lost answer) is answered 202 again and pushes nothing twice."
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
    {
        "name": "Idempotency-Key",
        "in": "header",
        "schema": {"type": "string"},
        "description": "1-200 printable ASCII characters: a retry with the same key is not pushed twice",
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
        "description": "lines buffered for a reader that falls behind; past it the oldest are "
        "dropped and the reader gets a gap (see the operation) where they were",
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
_GAP_NOTE = (
    "A reader that falls more than `queue` lines behind loses the oldest lines it holds and, "
    "in their place, gets {}: `from` and `to` are the ids of the first and last line lost, "
    "`lines` how many, and `?after=<after>&limit=<lines>` re-reads exactly them while the "
    "server keeps them (--results-retention; 410 after). A reader that keeps up never gets one."
)
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


_REGISTER_DOC = (
    "Body: the query text (application/sparql-query, text/plain), a JSON object "
    '{"query", "name"?, "default_name"?}, or a JSON array of those: a batch, registered in order; '
    "the first failure stops it (its `index`, and the names `registered` before it, in the error). "
    "Every text of a batch is parsed first, under the same limits as one query: a text that does "
    "not parse registers nothing. On a cluster (`run --zk`) the answer comes once the queries are "
    "durable in ZooKeeper (any coordinator takes it; a standby forwards it to the leader); their "
    "`state` is `pending` until an operator container holds them, then `running` (or "
    "`failed: <reason>`). A batch costs a few ZooKeeper transactions, so register many queries "
    "as arrays (hundreds to thousands each)."
)

_CLUSTER_LOG_DOC = (
    "Served by every coordinator of `linkstream run --zk` (not by embedded run), scope read. "
    "The leader appends one entry per report time (the result lines of the queries due then) and "
    "one per removed query; standbys follow it with `?after=<their last>&wait=10&follower=<id>`, "
    "so any coordinator serves /queries/{name}/results from its own copy and a reader resumes "
    "there with Last-Event-ID. A new leader first takes the entries after its own from the other "
    "coordinators. With `Accept: application/x-msgpack` the same map comes as msgpack (the leader "
    "encodes each entry once, not every line at every poll); with "
    "`Accept: application/vnd.linkstream.log-blocks+msgpack` each query's lines in an entry are "
    "one string, joined by newlines (an empty string: no lines); with "
    "`Accept: application/vnd.linkstream.log-frames+msgpack` (what coordinators ask for first) "
    "each entry is one row `[seq, t, names, at, sizes, counts, text, ended]`: every due query's "
    "name, then only the reports with lines -- their positions in names, text sizes in "
    "characters and line counts -- and their texts joined in one string. "
    "For coordinators, not for clients: read results from /queries/{name}/results."
)

_CLUSTER_INGEST_DOC = (
    "Served by every coordinator of `linkstream run --zk` (not by embedded run), scope write; applied "
    "only by the leader (503 elsewhere). The owner coordinator of a stream sends here each pushed "
    "body it sequenced, in msgpack: `{stream, owner, epoch, offset, key, t: [...], n: [...], terms: "
    "[...], idx: bytes}` -- per element its time and number of triples, the body's distinct N-Triples "
    "terms once, and the triples as little-endian int32 indexes into `terms` (three per triple, raw "
    "bytes); `elements: [[t, [[s, p, o], ...]], ...]` instead of `t, n, terms, idx` (msgpack or JSON) "
    "is taken too. The leader applies a stream's bodies in offset order, answers an offset it "
    "applied already as taken (a retry), and refuses an epoch older than one it saw (409: a stale "
    "owner). The answer lists per element whether it was taken (`false`: late) and the error that "
    "stopped the body. With `--ingest direct` (the body names its `record` in the owner's stream "
    "log) the answer also carries `decided`: `[floor, [[start, end, first, runs, error], ...]]`, "
    "the worker's completed decisions on the stream's bodies from the offset the owner names in "
    "the `x-linkstream-decided` header (offsets `start .. end-1` decided; the applied ones as flat "
    "half-open offset ranges `runs`, numbered from `first`; `floor`: the lowest offset the leader "
    'can still answer). `{"poll": [[stream, epoch, after], ...]}` asks for them without a body: '
    '`{"decided": {stream: [floor, decisions]}}`. For coordinators, not for clients: push to '
    "/streams/{iri}."
)

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
                        "state": {
                            "type": "string",
                            "pattern": "^(pending|running|failed: .+)$",
                            "description": "`pending`: registered (durable), no operator container holds "
                            "it yet; `running`: a container evaluates it (embedded run: always); "
                            "`failed: <reason>`: a container could not plan it (the reason names the "
                            "container and the error)",
                        },
                    },
                },
                "QueryItem": {
                    "type": "object",
                    "required": ["query"],
                    "properties": {
                        "query": {"type": "string", "description": "C-SPARQL, CQELS-QL or RSP-QL text"},
                        "name": {"type": "string", "description": "overrides a REGISTER name"},
                        "default_name": {"type": "string", "description": "name if the text has none"},
                    },
                },
                "BatchError": {
                    "description": "Error of a batch registration: the item that failed and the "
                    "queries registered before it (the rest are not registered)",
                    "allOf": [
                        {"$ref": "#/components/schemas/Error"},
                        {
                            "type": "object",
                            "properties": {
                                "index": {"type": "integer", "description": "0-based item that failed"},
                                "registered": {
                                    "type": "array",
                                    "items": {"type": "string"},
                                    "description": "names registered before it (absent: none)",
                                },
                            },
                        },
                    ],
                },
                "ResultLog": {
                    "type": "object",
                    "required": ["leading", "last", "committed", "entries"],
                    "properties": {
                        "leading": {
                            "type": "boolean",
                            "description": "whether the answering coordinator leads",
                        },
                        "last": {"type": "integer", "description": "sequence number of its newest entry"},
                        "committed": {
                            "type": "integer",
                            "description": "newest entry every in-sync follower has",
                        },
                        "entries": {
                            "type": "array",
                            "description": "up to 512 entries after `after`: [seq, report time, {query: "
                            "[result line, ...]}, [queries that ended]]",
                            "items": {"type": "array"},
                        },
                        "gone": {
                            "type": "object",
                            "description": "per query, the report time up to which its results are no longer "
                            "kept (present when entries after `after` were dropped)",
                        },
                    },
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/queries": {
                "post": {
                    "summary": "Register a continuous query, or a batch of them (a JSON array)",
                    "description": _REGISTER_DOC,
                    "parameters": [
                        {"name": "name", "in": "query", "schema": {"type": "string"}},
                        {"name": "default_name", "in": "query", "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/sparql-query": {"schema": {"type": "string"}},
                            "text/plain": {"schema": {"type": "string"}},
                            "application/json": {
                                "schema": {
                                    "oneOf": [
                                        {"$ref": "#/components/schemas/QueryItem"},
                                        {
                                            "type": "array",
                                            "items": {"$ref": "#/components/schemas/QueryItem"},
                                            "description": "a batch, registered in order",
                                        },
                                    ]
                                }
                            },
                        },
                    },
                    "responses": {
                        "201": _resp(
                            "registered: the query (header Location names it), or for a batch "
                            '{"queries": [...]} in order',
                            {
                                "oneOf": [
                                    query_summary,
                                    {
                                        "type": "object",
                                        "properties": {"queries": {"type": "array", "items": query_summary}},
                                    },
                                ]
                            },
                        ),
                        "400": _resp(
                            "the query does not parse (line and column given); in a batch, `index` names "
                            "the item",
                            {"$ref": "#/components/schemas/BatchError"},
                        ),
                        "409": _resp(
                            "a query of that name exists (a batch: `index`, and `registered` before it)",
                            {"$ref": "#/components/schemas/BatchError"},
                        ),
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
                    "description": _GAP_NOTE.format(
                        'an `event: gap` (no id) whose data is {"query", "from", "to", "lines", "after"}'
                    ),
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
                    "description": _GAP_NOTE.format(
                        'one line {"gap": {"query", "from", "to", "lines", "after"}}'
                    ),
                    "parameters": _RESULTS_PARAMS,
                    "responses": {
                        "200": _resp("JSON Lines", {"type": "string"}, "application/x-ndjson"),
                        "400": _err("bad until/limit/queue or after"),
                        "404": _err("unknown query"),
                        "410": _err("results after `after` are no longer kept"),
                        "429": _err("max_subscribers result streams are open"),
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
                        "503": _err(_PUSH_503),
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
                        "503": _err(_PUSH_503),
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
            "/_cluster/ingest": {
                "post": {
                    "summary": "An owner's sequenced body of one stream (run --zk only): applied by the leader",
                    "description": _CLUSTER_INGEST_DOC,
                    "requestBody": {
                        "content": {
                            "application/x-msgpack": {"schema": {"type": "object"}},
                            "application/json": {"schema": {"type": "object"}},
                        }
                    },
                    "responses": {
                        "200": _resp(
                            "per element taken or late, and the error that stopped the body",
                            {"type": "object"},
                        ),
                        "409": _err("an epoch older than the stream's newest: not its owner any more"),
                        "503": _err("this coordinator does not lead"),
                    },
                }
            },
            "/_cluster/results": {
                "get": {
                    "summary": "A coordinator's result log (run --zk only): standbys long-poll the leader's",
                    "description": _CLUSTER_LOG_DOC,
                    "parameters": [
                        {"name": p, "in": "query", "schema": {"type": t}, "description": d}
                        for p, t, d in (
                            ("after", "integer", "entries after this sequence number"),
                            ("committed", "integer", "the asker's commit point (a long poll wakes past it)"),
                            ("wait", "number", "seconds to wait for news (at most 30; 0: answer now)"),
                            ("follower", "string", "the asking coordinator: acknowledges `after`"),
                        )
                    ],
                    "responses": {"200": _resp("the entries", {"$ref": "#/components/schemas/ResultLog"})},
                }
            },
        },
    }
