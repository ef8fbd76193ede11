"""A corpus of bad HTTP requests over every route and header of the API.

Each case asserts the exact status, that the JSON error body is one line naming the
problem (and where it is), that no traceback leaks, and that the server still answers
``/healthz`` afterwards.  The server runs with the tight limits of ``conftest.LIMITS`` and
the tokens of ``conftest.TOKENS``.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from linkstream.api.server import BackgroundServer
from linkstream.rdf.streams import PROV_GENERATED_AT
from tests.robustness.conftest import LIMITS, auth

TIMEOUT = 15.0
OK_QUERY = "SELECT ?x WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?x ?p ?o } }"
TRIPLE = b'<http://ex.org/a> <http://ex.org/p> "1" .\n'
XSD_DT = "http://www.w3.org/2001/XMLSchema#dateTime"


def stamped(n: int) -> bytes:
    """A timestamped N-Quads body of ``n`` elements."""
    out = []
    for i in range(n):
        out.append(f'<http://ex.org/g{i}> <{PROV_GENERATED_AT}> "2024-01-01T00:00:0{i}Z"^^<{XSD_DT}> .\n')
        out.append(f'<http://ex.org/a> <http://ex.org/p> "{i}" <http://ex.org/g{i}> .\n')
    return "".join(out).encode()


def in_list_query(n: int) -> str:
    """A query with an ``IN`` list of ``n`` values (about 1 ms of parsing per value)."""
    values = ", ".join(str(i) for i in range(n))
    return "SELECT ?x WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?x ?p ?o } FILTER(?o IN (%s)) }" % values


@dataclass
class Case:
    """One bad request and what the answer must be."""

    id: str
    method: str
    path: str
    status: int
    says: str  # the error text must contain this (case-insensitive)
    token: str | None = "admin"
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    params: dict[str, str] | None = None
    chunks: list[bytes] | None = None  # send the body chunked, in these pieces
    raw: bytes | None = None  # send these bytes over a socket instead
    pause: float = 0.0  # with raw: seconds to wait before reading
    where: str | None = None  # "where" must contain this


def _cases() -> list[Case]:
    deep = b"[" * 100_000
    c: list[Case] = []
    add = c.append
    # ------------------------------------------------------------ tokens and scopes
    for method, path in [
        ("GET", "/queries"),
        ("POST", "/queries"),
        ("GET", "/queries/q1"),
        ("DELETE", "/queries/q1"),
        ("GET", "/queries/q1/results"),
        ("GET", "/queries/q1/results.jsonl"),
        ("POST", "/streams"),
        ("POST", "/streams/http%3A%2F%2Fex.org%2Fs"),
        ("POST", "/watermark"),
        ("GET", "/sparql"),
        ("POST", "/sparql"),
        ("GET", "/status"),
        ("GET", "/metrics"),
        ("GET", "/openapi.json"),
        ("GET", "/no-such-route"),
    ]:
        add(Case(f"no-token {method} {path}", method, path, 401, "missing bearer token", token=None))
    add(
        Case(
            "wrong token",
            "GET",
            "/queries",
            401,
            "wrong bearer token",
            token=None,
            headers={"Authorization": "Bearer not-a-token"},
            where="Authorization",
        )
    )
    add(
        Case(
            "basic scheme",
            "GET",
            "/queries",
            401,
            "bearer",
            token=None,
            headers={"Authorization": "Basic YWRtaW46YWRtaW4="},
        )
    )
    add(
        Case(
            "empty bearer", "GET", "/queries", 401, "bearer", token=None, headers={"Authorization": "Bearer"}
        )
    )
    add(
        Case(
            "token prefix only",
            "GET",
            "/queries",
            401,
            "wrong bearer token",
            token=None,
            headers={"Authorization": "Bearer admin-secret"},
        )
    )
    add(
        Case(
            "read token registers",
            "POST",
            "/queries",
            403,
            "needs scope write",
            token="reader",
            body=OK_QUERY.encode(),
        )
    )
    add(
        Case(
            "read token pushes",
            "POST",
            "/streams",
            403,
            "needs scope write",
            token="reader",
            params={"iri": "http://ex.org/s"},
            body=TRIPLE,
        )
    )
    add(
        Case(
            "read token watermark", "POST", "/watermark", 403, "scope read", token="reader", params={"t": "5"}
        )
    )
    add(Case("read token deletes", "DELETE", "/queries/q1", 403, "needs scope write", token="reader"))
    add(
        Case(
            "write token deletes another's query",
            "DELETE",
            "/queries/owned",
            403,
            "registered with token 'other'",
            token="writer",
        )
    )
    add(
        Case(
            "quota token over its queries",
            "POST",
            "/queries",
            429,
            "max_queries_per_token",
            token="quota",
            body=OK_QUERY.encode(),
            where="Authorization",
        )
    )
    # ------------------------------------------------------------ routes and methods
    add(Case("unknown route", "GET", "/no-such-route", 404, "no endpoint", where="path"))
    add(Case("PUT /queries", "PUT", "/queries", 405, "not allowed", where="method"))
    add(Case("PATCH /streams", "PATCH", "/streams", 405, "not allowed"))
    add(Case("DELETE /sparql", "DELETE", "/sparql", 405, "not allowed"))
    add(Case("POST /healthz", "POST", "/healthz", 405, "not allowed"))
    add(Case("GET /watermark", "GET", "/watermark", 405, "not allowed"))
    add(Case("GET /streams", "GET", "/streams", 405, "not allowed"))
    add(Case("made-up method", "BREW", "/queries", 405, "not allowed"))
    # ------------------------------------------------------------ queries
    add(Case("unknown query", "GET", "/queries/nope", 404, "nope", where="path"))
    add(Case("delete unknown query", "DELETE", "/queries/nope", 404, "nope"))
    add(Case("results of unknown query", "GET", "/queries/nope/results", 404, "nope"))
    add(Case("jsonl of unknown query", "GET", "/queries/nope/results.jsonl", 404, "nope"))
    add(Case("empty query", "POST", "/queries", 400, "empty query", body=b"  \n"))
    add(
        Case(
            "query syntax error",
            "POST",
            "/queries",
            400,
            "3:",
            where="query line 3",
            body=b"PREFIX ex: <http://ex.org/>\nSELECT ?x WHERE {\n  STREAM ex:s [RANGE 3s] { ?x ex:p }\n}\n",
        )
    )
    add(
        Case(
            "bad window unit",
            "POST",
            "/queries",
            400,
            "parsecs",
            body=b"SELECT ?x WHERE { STREAM <http://ex.org/s> [RANGE 3 parsecs] { ?x ?p ?o } }",
        )
    )
    add(Case("query not UTF-8", "POST", "/queries", 400, "not UTF-8", body=b"SELECT \xff\xfe"))
    add(
        Case(
            "JSON not JSON",
            "POST",
            "/queries",
            400,
            "invalid JSON",
            headers={"Content-Type": "application/json"},
            body=b'{"query": ',
        )
    )
    add(
        Case(
            "JSON a number",
            "POST",
            "/queries",
            400,
            "query",
            headers={"Content-Type": "application/json"},
            body=b"42",
        )
    )
    add(
        Case(
            "JSON query not a string",
            "POST",
            "/queries",
            400,
            '"query"',
            headers={"Content-Type": "application/json"},
            body=b'{"query": 7}',
        )
    )
    add(
        Case(
            "JSON name not a string",
            "POST",
            "/queries",
            400,
            '"name"',
            headers={"Content-Type": "application/json"},
            body=json.dumps({"query": OK_QUERY, "name": 5}).encode(),
        )
    )
    add(
        Case(
            "one-shot query registered",
            "POST",
            "/queries",
            400,
            "not a continuous query",
            body=b"SELECT * WHERE { ?s ?p ?o }",
        )
    )
    add(
        Case(
            "name with control character",
            "POST",
            "/queries",
            400,
            "name",
            params={"name": "a\x01b"},
            body=OK_QUERY.encode(),
        )
    )
    add(
        Case(
            "duplicate name",
            "POST",
            "/queries",
            409,
            "already registered",
            params={"name": "q1"},
            body=OK_QUERY.encode(),
        )
    )
    add(
        Case(
            "query over max_query_bytes",
            "POST",
            "/queries",
            413,
            "max_query_bytes",
            body=b"#" * (LIMITS.max_query_bytes + 1),
            where="body",
        )
    )
    add(
        Case(
            "chunked query over max_query_bytes",
            "POST",
            "/queries",
            413,
            "max_query_bytes",
            chunks=[b"#" * 10_000, b"#" * 10_000],
        )
    )
    add(
        Case(
            "JSON query over max_query_bytes",
            "POST",
            "/queries",
            413,
            "max_query_bytes",
            headers={"Content-Type": "application/json"},
            body=json.dumps({"query": "#" * (LIMITS.max_query_bytes + 1)}).encode(),
            where="query",
        )
    )
    add(
        Case(
            "query compiling too long",
            "POST",
            "/queries",
            422,
            "compile_seconds",
            body=in_list_query(2500).encode(),
        )
    )
    add(
        Case(
            "100,000 [ as JSON",
            "POST",
            "/queries",
            422,
            "max_json_depth",
            headers={"Content-Type": "application/json"},
            body=deep,
            where="body",
        )
    )
    add(
        Case(
            "deep JSON without content type",
            "POST",
            "/queries",
            422,
            "max_json_depth",
            body=b'{"query": ' + b'{"a": ' * 40 + b"1" + b"}" * 41,
        )
    )
    add(
        Case(
            "deep JSON in chunks",
            "POST",
            "/queries",
            422,
            "max_json_depth",
            headers={"Content-Type": "application/json"},
            chunks=[b"[" * 10, b"[" * 10],
        )
    )
    # ------------------------------------------------------------ result streams
    add(
        Case(
            "until not an integer",
            "GET",
            "/queries/q1/results",
            400,
            "'until'",
            params={"until": "soon"},
            where="query parameter until",
        )
    )
    add(Case("limit negative", "GET", "/queries/q1/results.jsonl", 400, "'limit'", params={"limit": "-1"}))
    add(Case("queue zero", "GET", "/queries/q1/results", 400, "'queue'", params={"queue": "0"}))
    add(Case("queue huge", "GET", "/queries/q1/results", 400, "'queue'", params={"queue": "99999999"}))
    add(Case("limit a float", "GET", "/queries/q1/results", 400, "'limit'", params={"limit": "1.5"}))
    add(
        Case(
            "Last-Event-ID not a time",
            "GET",
            "/queries/q1/results",
            400,
            "Last-Event-ID",
            headers={"Last-Event-ID": "abc"},
            where="header Last-Event-ID",
        )
    )
    add(
        Case(
            "Last-Event-ID a float",
            "GET",
            "/queries/q1/results",
            400,
            "Last-Event-ID",
            headers={"Last-Event-ID": "1e9"},
        )
    )
    add(
        Case(
            "Last-Event-ID on unknown query",
            "GET",
            "/queries/nope/results",
            400,
            "Last-Event-ID",
            headers={"Last-Event-ID": "x" * 100},
        )
    )
    # ------------------------------------------------------------ stream elements
    add(Case("no stream IRI", "POST", "/streams", 400, "name the stream", body=TRIPLE))
    add(
        Case(
            "IRI with a space",
            "POST",
            "/streams",
            400,
            "invalid stream IRI",
            params={"iri": "http://ex.org/a b"},
            body=TRIPLE,
        )
    )
    add(
        Case(
            "IRI with angle brackets inside",
            "POST",
            "/streams",
            400,
            "invalid stream IRI",
            params={"iri": "http://ex.org/<x>"},
            body=TRIPLE,
        )
    )
    add(
        Case(
            "path IRI with a quote",
            "POST",
            "/streams/http%3A%2F%2Fex.org%2F%22x",
            400,
            "invalid stream IRI",
            body=TRIPLE,
        )
    )
    add(
        Case(
            "t not a time",
            "POST",
            "/streams",
            400,
            "event time",
            params={"iri": "http://ex.org/s", "t": "noon"},
            body=TRIPLE,
        )
    )
    add(
        Case(
            "X-Event-Time month 13",
            "POST",
            "/streams",
            400,
            "event time",
            params={"iri": "http://ex.org/s"},
            headers={"X-Event-Time": "2024-13-45T00:00:00Z"},
            body=TRIPLE,
        )
    )
    add(
        Case(
            "t in scientific notation",
            "POST",
            "/streams",
            400,
            "event time",
            params={"iri": "http://ex.org/s", "t": "1e99"},
            body=TRIPLE,
        )
    )
    add(
        Case(
            "t with 40 digits",
            "POST",
            "/streams",
            422,
            "event time",
            params={"iri": "http://ex.org/s", "t": "9" * 40},
            body=TRIPLE,
        )
    )
    add(
        Case(
            "image/png body",
            "POST",
            "/streams",
            415,
            "unsupported media type",
            params={"iri": "http://ex.org/s"},
            headers={"Content-Type": "image/png"},
            body=b"\x89PNG",
            where="Content-Type",
        )
    )
    add(
        Case(
            "application/xml body",
            "POST",
            "/streams",
            415,
            "unsupported media type",
            params={"iri": "http://ex.org/s"},
            headers={"Content-Type": "application/xml"},
            body=b"<a/>",
        )
    )
    add(
        Case(
            "malformed N-Triples",
            "POST",
            "/streams",
            400,
            "line 2",
            params={"iri": "http://ex.org/s", "t": "1000"},
            body=TRIPLE + b"<http://ex.org/a> <http://ex.org/p> .\n",
            where="body line 2",
        )
    )
    add(
        Case(
            "graph term in N-Triples",
            "POST",
            "/streams",
            400,
            "graph term",
            params={"iri": "http://ex.org/s", "t": "1000"},
            body=b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g> .\n",
        )
    )
    add(
        Case(
            "body not UTF-8",
            "POST",
            "/streams",
            400,
            "not UTF-8",
            params={"iri": "http://ex.org/s", "t": "1000"},
            body=b'<http://ex.org/a> <http://ex.org/p> "\xff" .\n',
        )
    )
    add(
        Case(
            "malformed Turtle",
            "POST",
            "/streams",
            400,
            "turtle",
            params={"iri": "http://ex.org/s", "t": "1000"},
            headers={"Content-Type": "text/turtle"},
            body=b"@prefix ex: <http://ex.org/> .\nex:a ex:p .",
        )
    )
    add(
        Case(
            "JSON-LD not JSON",
            "POST",
            "/streams",
            400,
            "invalid JSON",
            params={"iri": "http://ex.org/s", "t": "1000"},
            headers={"Content-Type": "application/ld+json"},
            body=b'{"@id": ',
        )
    )
    add(
        Case(
            "JSON-LD remote context",
            "POST",
            "/streams",
            400,
            "remote JSON-LD contexts",
            params={"iri": "http://ex.org/s", "t": "1000"},
            headers={"Content-Type": "application/ld+json"},
            body=b'{"@context": "http://schema.org/", "@id": "http://ex.org/a"}',
        )
    )
    add(
        Case(
            "JSON-LD of 100,000 [",
            "POST",
            "/streams",
            422,
            "max_json_depth",
            params={"iri": "http://ex.org/s", "t": "1000"},
            headers={"Content-Type": "application/ld+json"},
            body=deep,
        )
    )
    add(
        Case(
            "deep JSON-LD in chunks",
            "POST",
            "/streams",
            422,
            "max_json_depth",
            params={"iri": "http://ex.org/s", "t": "1000"},
            headers={"Content-Type": "application/ld+json"},
            chunks=[b'{"a": ' * 9, b'{"b": ' * 9],
        )
    )
    add(
        Case(
            "body over max_body_bytes",
            "POST",
            "/streams",
            413,
            "max_body_bytes",
            params={"iri": "http://ex.org/s", "t": "1000"},
            body=TRIPLE * (LIMITS.max_body_bytes // len(TRIPLE) + 1),
        )
    )
    add(
        Case(
            "chunked body over max_body_bytes",
            "POST",
            "/streams",
            413,
            "max_body_bytes",
            params={"iri": "http://ex.org/s", "t": "1000"},
            chunks=[TRIPLE * 4000] * 2,
        )
    )
    add(
        Case(
            "too many elements",
            "POST",
            "/streams",
            413,
            "max_push_elements",
            params={"iri": "http://ex.org/s"},
            headers={"Content-Type": "application/n-quads"},
            body=stamped(LIMITS.max_push_elements + 1),
        )
    )
    add(
        Case(
            "too many triples",
            "POST",
            "/streams",
            413,
            "max_push_triples",
            params={"iri": "http://ex.org/s", "t": "1000"},
            body=b"".join(b'<http://ex.org/a> <http://ex.org/p> "%d" .\n' % i for i in range(21)),
        )
    )
    add(
        Case(
            "timestamps twice",
            "POST",
            "/streams",
            400,
            "carries its own timestamps",
            params={"iri": "http://ex.org/s", "t": "1000"},
            headers={"Content-Type": "application/n-quads"},
            body=stamped(1),
        )
    )
    add(
        Case(
            "quad before its timestamp",
            "POST",
            "/streams",
            400,
            "before its timestamp",
            params={"iri": "http://ex.org/s"},
            headers={"Content-Type": "application/n-quads"},
            body=b'<http://ex.org/a> <http://ex.org/p> "1" <http://ex.org/g9> .\n' + stamped(1),
        )
    )
    add(
        Case(
            "timestamp not a dateTime",
            "POST",
            "/streams",
            400,
            "xsd:dateTime",
            params={"iri": "http://ex.org/s"},
            headers={"Content-Type": "application/n-quads"},
            body=f'<http://ex.org/g> <{PROV_GENERATED_AT}> "yesterday" .\n'.encode(),
        )
    )
    # ------------------------------------------------------------ watermark
    add(Case("watermark without t", "POST", "/watermark", 400, "give the watermark"))
    add(Case("watermark t not a number", "POST", "/watermark", 400, "'t'", params={"t": "later"}))
    add(
        Case(
            "watermark JSON t a string",
            "POST",
            "/watermark",
            400,
            "give the watermark",
            headers={"Content-Type": "application/json"},
            body=b'{"t": "x"}',
        )
    )
    add(
        Case(
            "watermark JSON invalid",
            "POST",
            "/watermark",
            400,
            "give the watermark",
            headers={"Content-Type": "application/json"},
            body=b'{"t": ',
        )
    )
    add(
        Case("watermark deep JSON", "POST", "/watermark", 422, "max_json_depth", body=b'{"t": ' + b"[" * 5000)
    )
    # ------------------------------------------------------------ one-shot SPARQL
    add(Case("sparql without query", "GET", "/sparql", 400, "exactly one query"))
    add(
        Case("sparql two queries", "GET", "/sparql?query=ASK%7B%7D&query=ASK%7B%7D", 400, "exactly one query")
    )
    add(
        Case(
            "sparql syntax error",
            "GET",
            "/sparql",
            400,
            "1:",
            params={"query": "SELECT * WHERE { ?s ?p }"},
            where="query line 1",
        )
    )
    add(
        Case(
            "sparql update",
            "POST",
            "/sparql",
            400,
            "Update is not supported",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            body=b"update=CLEAR+ALL",
        )
    )
    add(
        Case(
            "sparql text/plain",
            "POST",
            "/sparql",
            415,
            "application/sparql-query",
            headers={"Content-Type": "text/plain"},
            body=b"ASK {}",
        )
    )
    add(
        Case(
            "sparql form not UTF-8",
            "POST",
            "/sparql",
            400,
            "not UTF-8",
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            body=b"query=\xff",
        )
    )
    add(Case("sparql with a window", "GET", "/sparql", 400, "stream windows", params={"query": OK_QUERY}))
    add(
        Case(
            "sparql DESCRIBE",
            "GET",
            "/sparql",
            400,
            "DESCRIBE",
            params={"query": "DESCRIBE <http://ex.org/s1>"},
        )
    )
    add(
        Case(
            "sparql result over sparql_max_rows",
            "GET",
            "/sparql",
            413,
            "sparql_max_rows",
            params={"query": "SELECT * WHERE { ?s ?p ?o }"},
            where="query",
        )
    )
    add(
        Case(
            "sparql query over max_query_bytes",
            "POST",
            "/sparql",
            413,
            "max_query_bytes",
            headers={"Content-Type": "application/sparql-query"},
            body=b"#" * (LIMITS.max_query_bytes + 1),
        )
    )
    add(
        Case(
            "sparql GET query over max_query_bytes",
            "GET",
            "/sparql",
            413,
            "max_query_bytes",
            params={"query": "#" * (LIMITS.max_query_bytes + 1)},
        )
    )
    # ------------------------------------------------------------ the HTTP layer itself
    add(
        Case(
            "garbage request line",
            "",
            "",
            400,
            "malformed HTTP request",
            raw=b"HELLO\r\n\r\n",
            where="request head",
        )
    )
    add(Case("no Host header", "", "", 400, "Host", raw=b"GET /healthz HTTP/1.1\r\n\r\n"))
    add(
        Case(
            "bad Content-Length",
            "",
            "",
            400,
            "malformed HTTP request",
            raw=b"POST /queries HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
        )
    )
    add(
        Case(
            "header over max_header_bytes",
            "",
            "",
            431,
            "max_header_bytes",
            raw=b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (LIMITS.max_header_bytes + 10),
        )
    )
    add(
        Case(
            "head never finished",
            "",
            "",
            408,
            "header_seconds",
            raw=b"GET /healthz HTTP/1.1\r\nHost: x\r\n",
            pause=LIMITS.header_seconds + 0.5,
            where="connection",
        )
    )
    add(
        Case(
            "body never finished",
            "",
            "",
            408,
            "body_seconds",
            raw=b"POST /streams?iri=http://ex.org/s&t=1000 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer admin-secret-0001"
            b"\r\nContent-Length: 100\r\n\r\n<http://ex.org/a>",
            pause=LIMITS.body_seconds + 0.5,
            where="body",
        )
    )
    return c


CASES = _cases()


@pytest.fixture(scope="module")
def server(make_server: Any) -> Iterator[BackgroundServer]:
    """The corpus server with the queries the cases expect: ``q1`` (admin), ``owned``
    (token ``other``) and ``max_queries_per_token`` queries of token ``quota``."""
    srv = make_server()
    with httpx.Client(base_url=srv.url, timeout=TIMEOUT) as c:
        for name, token in [("q1", "admin"), ("owned", "other")]:
            r = c.post("/queries", params={"name": name}, content=OK_QUERY.encode(), headers=auth(token))
            assert r.status_code == 201, r.text
        for i in range(LIMITS.max_queries_per_token):
            r = c.post(
                "/queries", params={"name": f"quota{i}"}, content=OK_QUERY.encode(), headers=auth("quota")
            )
            assert r.status_code == 201, r.text
    yield srv


def _raw(srv: BackgroundServer, case: Case) -> tuple[int, bytes]:
    with socket.create_connection((srv.host, srv.port), timeout=TIMEOUT) as s:
        s.sendall(case.raw or b"")
        if case.pause:
            time.sleep(case.pause)
        data = b""
        while True:
            try:
                got = s.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not got:
                break
            data += got
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), body


def send(srv: BackgroundServer, case: Case) -> tuple[int, bytes]:
    """The status and body of the answer to ``case``."""
    if case.raw is not None:
        return _raw(srv, case)
    headers = dict(case.headers)
    if case.token is not None:
        headers.update(auth(case.token))
    content: Any = iter(case.chunks) if case.chunks is not None else case.body
    try:
        r = httpx.request(
            case.method,
            srv.url + case.path,
            params=case.params,
            headers=headers,
            content=content,
            timeout=TIMEOUT,
        )
    except httpx.WriteError:  # refused mid-body: read the answer the server wrote
        pytest.fail("the server closed the connection before answering")
    return r.status_code, r.content


def test_corpus_is_large_enough() -> None:
    assert len(CASES) >= 80
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_request(server: BackgroundServer, case: Case) -> None:
    status, body = send(server, case)
    text = body.decode("utf-8", "replace")
    assert status == case.status, (status, text)
    assert "Traceback" not in text and "\n" not in text.strip(), text
    doc = json.loads(text)
    assert isinstance(doc, dict) and isinstance(doc.get("error"), str), doc
    assert case.says.lower() in doc["error"].lower(), doc
    assert isinstance(doc.get("where"), str) and doc["where"], doc
    if case.where is not None:
        assert case.where in doc["where"], doc
    health = httpx.get(server.url + "/healthz", timeout=TIMEOUT)
    assert health.status_code == 200 and health.json() == {"status": "ok"}


def test_healthz_says_only_ok_and_status_needs_read(server: BackgroundServer) -> None:
    r = httpx.get(server.url + "/healthz", timeout=TIMEOUT)
    assert r.json() == {"status": "ok"}
    assert httpx.get(server.url + "/status", timeout=TIMEOUT).status_code == 401
    st = httpx.get(server.url + "/status", headers=auth("reader"), timeout=TIMEOUT).json()
    assert st["queries"] >= 2 and st["limits"]["max_json_depth"] == LIMITS.max_json_depth


def test_scopes_allow_what_they_name(server: BackgroundServer) -> None:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as c:
        assert c.get("/queries", headers=auth("reader")).status_code == 200
        assert c.get("/sparql", params={"query": "ASK { ?s ?p ?o }"}, headers=auth("reader")).json()[
            "boolean"
        ]
        r = c.post("/queries", params={"name": "mine"}, content=OK_QUERY.encode(), headers=auth("writer"))
        assert r.status_code == 201, r.text
        r = c.post(
            "/streams", params={"iri": "http://ex.org/s", "t": "1000"}, content=TRIPLE, headers=auth("writer")
        )
        assert r.status_code == 202, r.text
        assert c.delete("/queries/mine", headers=auth("writer")).status_code == 204
        r = c.post("/queries", params={"name": "theirs"}, content=OK_QUERY.encode(), headers=auth("other"))
        assert r.status_code == 201
        assert c.delete("/queries/theirs", headers=auth("admin")).status_code == 204  # admin may


def test_subscriber_limit(server: BackgroundServer) -> None:
    """``max_subscribers`` result streams are served; one more is 429 naming the limit."""
    socks = []
    try:
        for _ in range(LIMITS.max_subscribers):
            s = socket.create_connection((server.host, server.port), timeout=TIMEOUT)
            token = auth("reader")["Authorization"].encode()
            s.sendall(b"GET /queries/q1/results HTTP/1.1\r\nHost: x\r\nAuthorization: " + token + b"\r\n\r\n")
            got = b""
            while b"subscribed" not in got:
                more = s.recv(4096)
                assert more, got
                got += more
            socks.append(s)
        r = httpx.get(server.url + "/queries/q1/results", headers=auth("reader"), timeout=TIMEOUT)
        assert r.status_code == 429 and r.json()["limit"] == "max_subscribers", r.text
    finally:
        for s in socks:
            s.close()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:  # closed streams give their places back
        with httpx.stream(
            "GET", server.url + "/queries/q1/results", headers=auth("reader"), timeout=TIMEOUT
        ) as r:
            if r.status_code == 200:
                return
        time.sleep(0.1)
    raise AssertionError("closed result streams were not counted out")


def test_openapi_documents_scopes_and_limits(server: BackgroundServer) -> None:
    spec = httpx.get(server.url + "/openapi.json", headers=auth("reader"), timeout=TIMEOUT).json()
    assert "admin" in spec["components"]["securitySchemes"]["bearer"]["description"]
    assert spec["paths"]["/queries"]["post"]["security"] == [{"bearer": ["write"]}]
    assert spec["paths"]["/queries"]["get"]["security"] == [{"bearer": ["read"]}]
    assert spec["paths"]["/healthz"]["get"]["security"] == []
    assert "429" in spec["paths"]["/queries"]["post"]["responses"]
    assert "/status" in spec["paths"]
