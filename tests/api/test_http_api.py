"""The HTTP API through a real uvicorn server, with the Python client and with plain HTTP.

Continuous results received over Server-Sent Events and JSON Lines must equal what
``linkstream replay`` writes for the same queries over the same stream elements.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from linkstream.api.client import ApiError, Client
from linkstream.cli import main as cli_main
from tests.api.corpus import STREAM_A, STREAM_B, Corpus, Element

TIMEOUT = 30.0

LATE_QUERY = f"""PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ct: <http://www.insight-centre.org/citytraffic#>
SELECT ?ob ?v
WHERE {{
  ?p a ct:CongestionLevel .
  STREAM <{STREAM_B}> [RANGE 10s SLIDE 1s] {{ ?ob ssn:observedProperty ?p ; sao:hasValue ?v . }}
}}
"""


def canon(row: str | dict[str, Any]) -> str:
    """A result line in a form that compares equal when the rows are equal."""
    obj = json.loads(row) if isinstance(row, str) else row
    return json.dumps(obj, sort_keys=True)


def replay(corpus: Corpus, queries: Iterable[Path], out: Path) -> dict[str, Counter[str]]:
    """``linkstream replay`` of ``queries`` over the slice: query name -> multiset of lines."""
    args = ["replay"]
    for q in queries:
        args += ["--query", str(q)]
    assert cli_main([*args, *corpus.replay_args(), "--out", str(out), "--quiet"]) == 0
    got: dict[str, Counter[str]] = {}
    for line in out.read_text().splitlines():
        got.setdefault(json.loads(line)["query"], Counter())[canon(line)] += 1
    return got


def wait_for(pred: Callable[[], bool], what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


class Reader(threading.Thread):
    """Collects the rows of a result stream in a thread."""

    def __init__(self, rows: Callable[[], Iterator[Any]]) -> None:
        super().__init__(daemon=True)
        self.make = rows
        self.rows: list[Any] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            for row in self.make():
                self.rows.append(row)
        except BaseException as e:  # reported by finish()
            self.error = e

    def finish(self) -> Counter[str]:
        self.join(TIMEOUT)
        assert not self.is_alive(), "result stream did not end"
        assert self.error is None, repr(self.error)
        return Counter(canon(r) for r in self.rows)


def raw_sse(url: str, name: str, **params: Any) -> Iterator[str]:
    """Result lines from the SSE endpoint with plain httpx (``data:`` fields)."""
    with httpx.stream("GET", f"{url}/queries/{name}/results", params=params, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for line in r.iter_lines():
            if line == "event: end":
                return
            if line.startswith("data: "):
                yield line[6:]


def raw_jsonl(url: str, name: str, **params: Any) -> Iterator[str]:
    """Result lines from the JSON Lines endpoint with plain httpx."""
    with httpx.stream("GET", f"{url}/queries/{name}/results.jsonl", params=params, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.strip():
                yield line


def subscribers(url: str, name: str) -> int:
    return httpx.get(f"{url}/queries/{name}", timeout=TIMEOUT).json()["subscribers"]


def push(client: Client, url: str, el: Element) -> None:
    """Stream A goes through the client as N-Triples with ``t``; B as timestamped N-Quads over plain HTTP."""
    if el.stream == STREAM_A:
        res = client.push(el.stream, el.ntriples, t=el.t)
    else:
        r = httpx.post(
            url + "/streams",
            params={"iri": el.stream},
            content=el.nquads.encode(),
            headers={"Content-Type": "application/n-quads"},
            timeout=TIMEOUT,
        )
        assert r.status_code == 202, r.text
        res = r.json()
    assert res["elements"] == 1 and res["late"] == 0, res


def test_results_over_sse_and_jsonl_equal_replay(corpus: Corpus, make_server, tmp_path: Path) -> None:
    srv = make_server()
    url = srv.url
    cqels, rspql = corpus.queries / "cqels-Q1.rq", corpus.queries / "rspql-avg-congestion.rq"
    with Client(url) as client:
        q1 = client.register(cqels.read_text(), default_name="cqels-Q1")
        assert (q1["name"], q1["dialect"], q1["form"]) == ("cqels-Q1", "cqels", "SELECT")
        assert {w["stream"] for w in q1["windows"]} == {STREAM_A, STREAM_B}
        r = httpx.post(
            url + "/queries", content=rspql.read_bytes(), headers={"Content-Type": "application/sparql-query"}
        )
        assert r.status_code == 201, r.text
        assert (r.json()["name"], r.json()["dialect"]) == ("avg-congestion", "rspql")
        assert r.headers["location"] == "/queries/avg-congestion"
        last = corpus.last_report()
        readers = {
            "client-sse": Reader(lambda: Client(url).results("cqels-Q1", sse=True, until=last)),
            "http-jsonl": Reader(lambda: raw_jsonl(url, "cqels-Q1", until=last)),
            "client-jsonl": Reader(lambda: Client(url).results("avg-congestion", until=last)),
            "http-sse": Reader(lambda: raw_sse(url, "avg-congestion", until=last)),
        }
        for rd in readers.values():
            rd.start()
        wait_for(
            lambda: subscribers(url, "cqels-Q1") == 2 and subscribers(url, "avg-congestion") == 2,
            "subscribers",
        )
        for el in corpus.elements:
            push(client, url, el)
        r = httpx.post(url + "/watermark", params={"t": last}, timeout=TIMEOUT)
        assert r.status_code == 200 and r.json()["last_report"] == last
        got = {k: rd.finish() for k, rd in readers.items()}
    want = replay(corpus, [cqels, rspql], tmp_path / "replay.jsonl")
    assert sum(want["cqels-Q1"].values()) > 50 and sum(want["avg-congestion"].values()) > 20  # not vacuous
    assert got["client-sse"] == want["cqels-Q1"]
    assert got["http-jsonl"] == want["cqels-Q1"]
    assert got["client-jsonl"] == want["avg-congestion"]
    assert got["http-sse"] == want["avg-congestion"]


def test_unregister_and_register_mid_stream(corpus: Corpus, make_server, tmp_path: Path) -> None:
    srv = make_server()
    url = srv.url
    cqels, rspql = corpus.queries / "cqels-Q1.rq", corpus.queries / "rspql-avg-congestion.rq"
    late_file = tmp_path / "late10s.rq"
    late_file.write_text(LATE_QUERY)
    last = corpus.last_report()
    half = len(corpus.elements) // 2
    with Client(url) as client:
        client.register(cqels.read_text(), default_name="cqels-Q1")
        client.register(rspql.read_text())
        keep = Reader(lambda: Client(url).results("cqels-Q1", sse=True, until=last))
        gone = Reader(lambda: raw_jsonl(url, "avg-congestion"))  # no until: ends when unregistered
        keep.start()
        gone.start()
        wait_for(
            lambda: subscribers(url, "cqels-Q1") == 1 and subscribers(url, "avg-congestion") == 1,
            "subscribers",
        )
        for el in corpus.elements[:half]:
            push(client, url, el)
        before = client.status()["operators"]
        r = httpx.delete(url + "/queries/avg-congestion", timeout=TIMEOUT)
        assert r.status_code == 204
        assert client.status()["operators"] < before  # its aggregate, union and windows are freed
        assert httpx.get(url + "/queries/avg-congestion").status_code == 404
        gone_rows = gone.finish()  # its stream ended with the query
        # registered mid-stream: reports from the first close after the current event time
        r = httpx.post(url + "/queries", params={"default_name": "late10s"}, content=LATE_QUERY.encode())
        assert r.status_code == 201, r.text
        event_time = max(el.t for el in corpus.elements[:half] if el.stream == STREAM_B)
        first = r.json()["first_report"]
        assert first == (event_time // 1000 + 1) * 1000
        assert client.status()["operators"] > 0
        late = Reader(lambda: raw_sse(url, "late10s", until=last))
        late.start()
        wait_for(lambda: subscribers(url, "late10s") == 1, "late subscriber")
        for el in corpus.elements[half:]:
            push(client, url, el)
        assert client.advance(last)["last_report"] == last
        keep_rows, late_rows = keep.finish(), late.finish()
        assert [q["name"] for q in client.queries()] == ["cqels-Q1", "late10s"]
    want = replay(corpus, [cqels, rspql, late_file], tmp_path / "replay.jsonl")
    assert keep_rows == want["cqels-Q1"]
    assert not gone_rows - want["avg-congestion"]  # what it sent before going is right
    late_want = Counter({k: n for k, n in want["late10s"].items() if json.loads(k)["t"] >= first})
    assert sum(late_want.values()) > 20
    # its 10 s windows hold every element in range, pushed before it was registered included
    assert late_rows == late_want


def test_bad_input_gets_clear_4xx_never_500(corpus: Corpus, make_server) -> None:
    srv = make_server()
    url = srv.url
    bad_query = "PREFIX ex: <http://ex.org/>\nSELECT ?x WHERE {\n  STREAM ex:s [RANGE 3s] { ?x ex:p }\n}\n"
    r = httpx.post(url + "/queries", content=bad_query.encode())
    assert r.status_code == 400
    body = r.json()
    assert body["line"] == 3 and body["column"] > 1 and "3:" in body["error"]
    with Client(url) as client:
        with pytest.raises(ApiError) as ei:
            client.register("SELECT ?x WHERE { STREAM <http://ex.org/s> [RANGE 3 parsecs] { ?x ?p ?o } }")
        assert ei.value.status == 400 and ei.value.line == 1 and ei.value.column is not None
        ok = "SELECT ?x WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?x ?p ?o } }"
        client.register(ok, "dup")
        with pytest.raises(ApiError) as ei:
            client.register(ok, "dup")
        assert ei.value.status == 409
        with pytest.raises(ApiError) as ei:
            client.unregister("no-such-query")
        assert ei.value.status == 404
    # a one-shot query is not a continuous query
    r = httpx.post(url + "/queries", json={"query": "SELECT * WHERE { ?s ?p ?o }"})
    assert r.status_code == 400 and "window" in r.json()["error"]
    r = httpx.post(url + "/queries", content=b'{"query": 7}', headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    # unknown queries
    for method, path in [
        ("GET", "/queries/nope"),
        ("DELETE", "/queries/nope"),
        ("GET", "/queries/nope/results"),
        ("GET", "/queries/nope/results.jsonl"),
    ]:
        r = httpx.request(method, url + path)
        assert r.status_code == 404 and "nope" in r.json()["error"], (method, path)
    # malformed stream bodies: 400 naming the line and the reason; nothing ingested
    s = "http://ex.org/s"
    body = b'<urn:a> <urn:p> <urn:b> .\n<urn:a> <urn:p> "unterminated .\n<urn:c> <urn:p> <urn:d> .\n'
    r = httpx.post(url + "/streams", params={"iri": s, "t": "1000"}, content=body)
    assert r.status_code == 400
    assert r.json()["line"] == 2 and "line 2" in r.json()["error"]
    r = httpx.post(
        url + "/streams/" + s, params={"t": "1000"}, content=b"<urn:a> <urn:p> <urn:b> <urn:g> .\n"
    )
    assert r.status_code == 400 and "N-Quads" in r.json()["error"]
    bad_bodies = [
        ("text/turtle", b"@prefix ex: <http://ex.org/> .\nex:a ex:p ."),
        ("application/ld+json", b'{"@id": "http://ex.org/a", '),
        ("application/ld+json", b'{"@context": "http://schema.org/", "@id": "http://ex.org/a"}'),
        ("application/n-quads", b'<urn:g> <http://www.w3.org/ns/prov#generatedAtTime> "yesterday" .\n'),
        ("application/n-triples", b"\xff\xfe<urn:a> <urn:p> <urn:b> .\n"),
    ]
    for ctype, data in bad_bodies:
        r = httpx.post(url + "/streams", params={"iri": s}, content=data, headers={"Content-Type": ctype})
        assert r.status_code == 400 and r.json()["error"], (ctype, r.text)
    r = httpx.post(url + "/streams", params={"iri": s}, content=b"x", headers={"Content-Type": "image/png"})
    assert r.status_code == 415
    assert httpx.post(url + "/streams", content=b"").status_code == 400  # no stream named
    r = httpx.post(url + "/streams", params={"iri": s}, content=b"", headers={"X-Event-Time": "soon"})
    assert r.status_code == 400
    assert httpx.get(url + "/status").json()["streams"] == {}  # none of it was accepted
    # good bodies of every format, and a late element
    good = [
        ("application/n-triples", b"<urn:a> <urn:p> <urn:b> .\n<urn:a> <urn:p> <urn:b> .\n", 1),
        ("text/turtle", b'@prefix ex: <http://ex.org/> .\nex:a ex:p 1, 2 ; ex:q "x"@en .', 3),
        (
            "application/ld+json",
            b'{"@context": {"ex": "http://ex.org/"}, "@id": "ex:a", "ex:p": {"@id": "ex:b"}}',
            1,
        ),
    ]
    for k, (ctype, data, n) in enumerate(good):
        r = httpx.post(
            url + "/streams",
            params={"iri": s, "t": str(2000 + k)},
            content=data,
            headers={"Content-Type": ctype},
        )
        assert r.status_code == 202, r.text
        assert (r.json()["triples"], r.json()["late"]) == (n, 0)
    r = httpx.post(url + "/streams", params={"iri": s, "t": "2500"}, content=b"")  # a heartbeat
    assert r.status_code == 202 and (r.json()["elements"], r.json()["triples"]) == (1, 0)
    r = httpx.post(
        url + "/streams",
        params={"iri": s},
        content=b"<urn:a> <urn:p> <urn:z> .\n",
        headers={"X-Event-Time": "1500"},
    )
    assert r.status_code == 202 and r.json()["late"] == 1
    # one-shot SPARQL errors
    r = httpx.get(url + "/sparql", params={"query": "SELECT ?s WHERE {\n ?s ?p \n}"})
    assert r.status_code == 400 and r.json()["line"] == 3
    assert httpx.get(url + "/sparql").status_code == 400
    r = httpx.post(url + "/sparql", content=b"x", headers={"Content-Type": "text/csv"})
    assert r.status_code == 415
    r = httpx.get(
        url + "/sparql", params={"query": "SELECT * WHERE { STREAM <urn:s> [RANGE 1s] { ?s ?p ?o } }"}
    )
    assert r.status_code == 400
    assert httpx.get(url + "/no/such/endpoint").status_code == 404
    metrics = httpx.get(url + "/metrics").text
    assert "linkstream_rejected_lines_total" in metrics and "linkstream_late_elements_total 1.0" in metrics


SPARQL_QUERIES = [
    "SELECT ?p ?t WHERE { ?p a ?t . ?p <http://purl.oclc.org/NET/ssnx/ssn#isPropertyOf> ?foi } ORDER BY ?p LIMIT 40",
    "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
    "SELECT ?t (COUNT(?p) AS ?n) WHERE { ?p a ?t } GROUP BY ?t HAVING (COUNT(?p) > 10)",
    """PREFIX ct: <http://www.insight-centre.org/citytraffic#>
       SELECT ?s ?lat ?lon WHERE { ?s ct:hasStartLatitude ?lat OPTIONAL { ?s ct:hasEndLongitude ?lon }
       FILTER (?lat > 56.16) }""",
    """PREFIX ct: <http://www.insight-centre.org/citytraffic#>
       SELECT DISTINCT ?t WHERE { { ?p a ct:CongestionLevel . BIND(ct:CongestionLevel AS ?t) }
       UNION { ?p a ct:AvgSpeed . BIND(ct:AvgSpeed AS ?t) } }""",
    "ASK { ?p a <http://www.insight-centre.org/citytraffic#CongestionLevel> }",
    "ASK { ?p a <http://example.org/Nothing> }",
]


def _ours(binding: dict[str, dict[str, str]]) -> tuple[tuple[str, str], ...]:
    from linkstream.rdf.terms import IRI, RDF_LANGSTRING, XSD_STRING, BNode, Literal, canonical

    out = []
    for k, v in binding.items():
        if v["type"] == "uri":
            term: Any = IRI(v["value"])
        elif v["type"] == "bnode":
            term = BNode("b")
        elif "xml:lang" in v:
            term = Literal(v["value"], RDF_LANGSTRING, v["xml:lang"])
        else:
            term = Literal(v["value"], v.get("datatype", XSD_STRING))
        out.append((k, canonical(term).n3()))
    return tuple(sorted(out))


def _oxigraph(solution: Any, names: list[str]) -> tuple[tuple[str, str], ...]:
    from linkstream.rdf.terms import canonical, parse_term

    out = []
    for k in names:
        v = solution[k]
        if v is not None:
            out.append((k, canonical(parse_term(str(v))).n3()))
    return tuple(sorted(out))


def test_sparql_one_shot_equals_pyoxigraph(corpus: Corpus, make_server) -> None:
    pyoxigraph = pytest.importorskip("pyoxigraph")
    store = pyoxigraph.Store()
    with open(corpus.static, "rb") as f:
        store.load(f, format=pyoxigraph.RdfFormat.N_TRIPLES)
    srv = make_server()
    nonempty = 0
    with Client(srv.url) as client:
        for k, q in enumerate(SPARQL_QUERIES):
            # GET through the client, POST form and POST sparql-query through plain HTTP
            if k % 3 == 0:
                got = client.sparql(q)
            elif k % 3 == 1:
                r = httpx.post(srv.url + "/sparql", data={"query": q}, timeout=TIMEOUT)
                assert r.status_code == 200 and r.headers["content-type"] == "application/sparql-results+json"
                got = r.json()
            else:
                r = httpx.post(
                    srv.url + "/sparql",
                    content=q.encode(),
                    headers={"Content-Type": "application/sparql-query"},
                    timeout=TIMEOUT,
                )
                assert r.status_code == 200, r.text
                got = r.json()
            res = store.query(q)  # turned into plain values here: pyoxigraph objects are thread-bound
            if isinstance(res, pyoxigraph.QueryBoolean):
                want_bool, names, want_rows = bool(res), [], []
            else:
                want_bool, names = None, [v.value for v in res.variables]
                want_rows = [_oxigraph(sol, names) for sol in res]
            del res
            if want_bool is not None:
                assert got["boolean"] is want_bool, q
                continue
            assert got["head"]["vars"] == names, q
            got_rows = [_ours(b) for b in got["results"]["bindings"]]
            nonempty += bool(want_rows)
            if "ORDER BY" in q:
                assert got_rows == want_rows, q
            else:
                assert Counter(got_rows) == Counter(want_rows), q
        assert nonempty >= 3  # not vacuous
        # CONSTRUCT answers N-Triples
        r = httpx.get(
            srv.url + "/sparql",
            params={
                "query": "CONSTRUCT { ?p a <urn:Congestion> } WHERE { ?p a <http://www.insight-centre.org/citytraffic#CongestionLevel> }"
            },
        )
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/n-triples")
        n = len(
            list(
                store.query(
                    "SELECT ?p WHERE { ?p a <http://www.insight-centre.org/citytraffic#CongestionLevel> }"
                )
            )
        )
        assert len(r.text.splitlines()) == n > 0


def test_health_metrics_and_openapi(corpus: Corpus, make_server) -> None:
    srv = make_server()
    with Client(srv.url) as client:
        assert client.health()["status"] == "ok"
        client.register((corpus.queries / "cqels-Q1.rq").read_text(), default_name="cqels-Q1")
        for el in corpus.elements[:10]:
            push(client, srv.url, el)
        client.advance(corpus.elements[9].t)
        text = client.metrics()
    for metric in [
        "linkstream_ingest_triples_total",
        "linkstream_late_elements_total",
        "linkstream_rejected_lines_total",
        "linkstream_queries_registered",
        "linkstream_report_latency_seconds_bucket",
        "linkstream_operators",
    ]:
        assert metric in text, metric
    assert "linkstream_queries_registered 1.0" in text
    triples = sum(el.ntriples.count("\n") for el in corpus.elements[:10])
    assert f"linkstream_ingest_triples_total {float(triples)}" in text
    spec = httpx.get(srv.url + "/openapi.json").json()
    assert spec["openapi"].startswith("3.")
    for path in ["/queries", "/queries/{name}", "/queries/{name}/results", "/streams", "/sparql", "/metrics"]:
        assert path in spec["paths"], path


def test_bearer_token_is_required_when_configured(corpus: Corpus, make_server) -> None:
    srv = make_server(token="s3cret")
    url = srv.url
    assert httpx.get(url + "/healthz").status_code == 200  # open, for liveness probes
    for method, path in [
        ("GET", "/queries"),
        ("POST", "/queries"),
        ("GET", "/metrics"),
        ("GET", "/sparql"),
        ("POST", "/streams"),
    ]:
        r = httpx.request(method, url + path)
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer"), (method, path)
    assert httpx.get(url + "/queries", headers={"Authorization": "Bearer wrong"}).status_code == 401
    with pytest.raises(ApiError) as ei:
        Client(url).queries()
    assert ei.value.status == 401
    with Client(url, token="s3cret") as client:
        assert client.queries() == []
        assert (
            client.register("SELECT ?x WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?x ?p ?o } }", "q")[
                "name"
            ]
            == "q"
        )


def test_cli_queries_add_ls_rm(corpus: Corpus, make_server, capsys, monkeypatch) -> None:
    srv = make_server(token="tok")
    monkeypatch.setenv("LINKSTREAM_API_TOKEN", "tok")
    qfile = corpus.queries / "cqels-Q1.rq"
    assert cli_main(["queries", "add", str(qfile), "--url", srv.url]) == 0
    assert (
        cli_main(["queries", "add", str(corpus.queries / "rspql-avg-congestion.rq"), "--url", srv.url]) == 0
    )
    assert cli_main(["queries", "ls", "--url", srv.url]) == 0
    out = capsys.readouterr().out
    assert "cqels-Q1\tcqels\tSELECT" in out and "avg-congestion\trspql\tSELECT" in out
    assert cli_main(["queries", "rm", "cqels-Q1", "--url", srv.url]) == 0
    assert cli_main(["queries", "rm", "cqels-Q1", "--url", srv.url]) == 2
    assert "404" in capsys.readouterr().err
    bad = corpus.queries.parent / "README.md"
    assert cli_main(["queries", "add", str(bad), "--url", srv.url]) == 2
    assert "400:" in capsys.readouterr().err
    assert [q["name"] for q in Client(srv.url, token="tok").queries()] == ["avg-congestion"]
    assert cli_main(["queries", "ls", "--url", srv.url, "--token", "wrong"]) == 2


@pytest.mark.parametrize("argv", [["run", "--help"], ["queries", "--help"], ["queries", "add", "--help"]])
def test_cli_help(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as ei:
        cli_main(argv)
    assert ei.value.code == 0
    assert "usage: linkstream" in capsys.readouterr().out
