"""The continuous-query parser against the CityBench corpus, hand-written cases and the oracle.

Every valid query here is also given to the reference evaluator (``shared/tools/oracle.py``,
imported by path): its ``parse_query`` must read the same windows, and pyoxigraph must
accept its rewritten query (one-shot queries, which the oracle refuses, go to pyoxigraph
directly).  Tests that need the shared directory are skipped when it is missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from rdflib import Literal
from rdflib.paths import Path as PropertyPath

from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.query.errors import QueryError
from linkstream.query.lexer import tokenize
from linkstream.query.windows import WindowSpec, parse_duration, parse_window

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
MANIFEST = SHARED / "citybench" / "manifest.json"
BASE = "http://localhost/"
SES = "http://www.insight-centre.org/dataset/SampleEventService#"


def _shared_or_skip() -> Path:
    if not MANIFEST.exists():
        pytest.skip(f"shared corpus not found at {SHARED} (set LINKSTREAM_SHARED)")
    return SHARED


@cache
def _oracle_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("linkstream_test_oracle", SHARED / "tools" / "oracle.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def oracle() -> ModuleType:
    """The reference evaluator, imported by path (skips the test if it is missing)."""
    _shared_or_skip()
    pytest.importorskip("pyoxigraph")
    return _oracle_module()


def window_tuple(stream: str, spec: Any) -> tuple[str, str, int | None, int | None, int | None]:
    """Oracle and LinkStream windows in one comparable shape."""
    if isinstance(spec, WindowSpec):
        return stream, spec.kind, spec.range_ms, spec.step_ms, spec.count
    return stream, spec.kind, spec.range, spec.step, spec.count


def cross_check(text: str, q: ContinuousQuery, default_name: str = "query", base: str = BASE) -> None:
    """The oracle reads ``text`` as we do, and its rewritten query is valid for pyoxigraph."""
    orc = oracle()
    import pyoxigraph

    if q.dialect == "sparql":  # the oracle only runs continuous queries
        pyoxigraph.Store().query(text, base_iri=base)
        return
    pq = orc.parse_query(text, default_name, 0, base)
    assert pq.dialect == q.dialect
    assert pq.mode == q.mode
    assert pq.form == q.form
    assert pq.name == q.name
    assert [window_tuple(w.stream, w.spec) for w in pq.windows] == [
        window_tuple(w.stream, w.spec) for w in q.windows
    ]
    assert [w.name for w in pq.windows] == [w.name for w in q.windows]
    assert list(pq.static_from) == list(q.static_from)
    assert list(pq.static_named) == list(q.static_named)
    assert pq.base == q.base
    orc.finish_rewrite(pq, [])
    pyoxigraph.Store().query(pq.sparql, base_iri=pq.base)


def parse_checked(text: str, default_name: str = "query", base: str = BASE) -> ContinuousQuery:
    q = parse_continuous(text, default_name=default_name, base=base)
    cross_check(text, q, default_name, base)
    return q


# --------------------------------------------------------------------------- CityBench


def _manifest_queries() -> list[Any]:
    if not MANIFEST.exists():
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"shared corpus not found at {SHARED}"))]
    entries = json.loads(MANIFEST.read_text(encoding="utf-8"))["queries"]
    return [pytest.param(e, id=e["id"]) for e in entries]


def _query_files() -> list[Any]:
    files = sorted((SHARED / "citybench" / "queries").glob("*/*.txt"))
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"shared corpus not found at {SHARED}"))]
    return [pytest.param(f, id=f"{f.parent.name}-{f.stem}") for f in files]


def _describe_window(q: ContinuousQuery, prefix: str) -> list[str]:
    out = []
    for w in q.windows:
        local = w.stream[len(prefix) :] if w.stream.startswith(prefix) else w.stream
        out.append("<%s> %s" % (local, w.spec))
    return out


@pytest.mark.parametrize("path", _query_files())
def test_every_citybench_query_parses(path: Path) -> None:
    q = parse_checked(path.read_text(encoding="utf-8"), default_name=path.stem)
    assert q.dialect == path.parent.name
    assert q.windows
    without_iris = re.sub(r"<[^<>]*>", "", q.sparql)
    assert not re.search(r"\b(from|stream|register)\b", without_iris, re.IGNORECASE)
    assert q.algebra is not None


@pytest.mark.parametrize("entry", _manifest_queries())
def test_citybench_windows_and_statics_match_the_manifest(entry: dict[str, Any]) -> None:
    shared = _shared_or_skip()
    manifest = json.loads(MANIFEST.read_text(encoding="utf-8"))
    path = shared / entry["query"]
    q = parse_continuous(path.read_text(encoding="utf-8"), default_name=path.stem, base=manifest["base"])
    assert q.name == entry["name"]
    assert q.dialect == entry["dialect"]
    assert q.form == entry["form"]
    assert _describe_window(q, manifest["stream_iri_prefix"]) == entry["windows"]
    named_in_manifest = [s["iri"] for s in entry["statics"] if s["iri"] is not None]
    assert sorted(q.static_from + q.static_named) == sorted(named_in_manifest)
    if entry["dialect"] == "cqels":
        assert q.static_from == ()  # CQELS reads the repository as the static default graph
    if any(w.spec.step_ms is None for w in q.windows):
        assert entry.get("default_step") == 1000


# --------------------------------------------------------------------------- window forms and units

WINDOW_FORMS = [
    ("RANGE 3000ms STEP 1000ms", ("time", 3000, 1000, None)),
    ("RANGE 3s STEP 1s", ("time", 3000, 1000, None)),
    ("range 3S step 1S", ("time", 3000, 1000, None)),
    ("RANGE 2m STEP 30s", ("time", 120000, 30000, None)),
    ("RANGE 2h STEP 1h", ("time", 7200000, 3600000, None)),
    ("RANGE 1d STEP 12h", ("time", 86400000, 43200000, None)),
    ("RANGE 1.5s STEP 500ms", ("time", 1500, 500, None)),
    ("RANGE 3000 STEP 1000", ("time", 3000, 1000, None)),
    ("RANGE PT3S STEP PT1S", ("time", 3000, 1000, None)),
    ("RANGE pt1.5s STEP PT0.5S", ("time", 1500, 500, None)),
    ("RANGE PT1M30S STEP PT15S", ("time", 90000, 15000, None)),
    ("RANGE P1D STEP PT1H", ("time", 86400000, 3600000, None)),
    ("RANGE P1DT2H STEP PT30M", ("time", 93600000, 1800000, None)),
    ("RANGE 3s SLIDE 1s", ("time", 3000, 1000, None)),
    ("RANGE 10s TUMBLING", ("time", 10000, 10000, None)),
    ("RANGE 3s", ("time", 3000, None, None)),
    ("RANGE 250", ("time", 250, None, None)),
    ("TRIPLES 5", ("count", None, None, 5)),
    ("RANGE TRIPLES 10", ("count", None, None, 10)),
    ("NOW", ("now", None, None, None)),
    ("now", ("now", None, None, None)),
]


def _query_with_window(dialect: str, body: str) -> str:
    if dialect == "csparql":
        return "SELECT ?s ?o FROM STREAM <http://example.org/s> [%s] WHERE { ?s ?p ?o }" % body
    if dialect == "cqels":
        return "SELECT ?s ?o WHERE { STREAM <http://example.org/s> [%s] { ?s ?p ?o } }" % body
    return (
        "PREFIX : <http://example.org/>\nREGISTER RSTREAM :q AS\nSELECT ?s ?o\n"
        "FROM NAMED WINDOW :w ON :s [%s]\nWHERE { WINDOW :w { ?s ?p ?o } }" % body
    )


@pytest.mark.parametrize("dialect", ["csparql", "cqels", "rspql"])
@pytest.mark.parametrize(("body", "expected"), WINDOW_FORMS, ids=[b for b, _ in WINDOW_FORMS])
def test_window_forms_in_every_dialect(dialect: str, body: str, expected: tuple[Any, ...]) -> None:
    q = parse_checked(_query_with_window(dialect, body))
    assert q.dialect == dialect
    (w,) = q.windows
    assert w.stream == "http://example.org/s"
    assert (w.spec.kind, w.spec.range_ms, w.spec.step_ms, w.spec.count) == expected
    assert parse_window(body.split()) == w.spec


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("3000ms", 3000),
        ("3s", 3000),
        ("1m", 60000),
        ("2h", 7200000),
        ("1d", 86400000),
        ("PT3S", 3000),
        ("PT1.5S", 1500),
        ("P1DT2H", 93600000),
        ("P1D", 86400000),
        ("PT0.001S", 1),
        ("3000", 3000),
        ("0", 0),
        ("2.5s", 2500),
        ("10MS", 10),
    ],
)
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration(text) == ms


@pytest.mark.parametrize(
    "text", ["", "3x", "PT", "P", "P1DT", "PT0.0005S", "0.5", "-3s", "3 s", "1e3", "P1M"]
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(QueryError):
        parse_duration(text)


@pytest.mark.parametrize(
    "words",
    [
        [],
        ["RANGE"],
        ["RANGE", "0s", "TUMBLING"],
        ["RANGE", "3s", "STEP"],
        ["RANGE", "3s", "STEP", "0"],
        ["RANGE", "3s", "STEP", "1s", "extra"],
        ["RANGE", "-", "3s"],
        ["RANGE", "3s", "EVERY", "1s"],
        ["TRIPLES", "0"],
        ["TRIPLES", "x"],
        ["RANGE", "TRIPLES"],
        ["NOW", "1s"],
        ["SIZE", "3"],
    ],
)
def test_parse_window_rejects(words: list[str]) -> None:
    with pytest.raises(QueryError):
        parse_window(words)


def test_window_spec_step_and_notation() -> None:
    assert WindowSpec("time", 3000, 1000).step_or(500) == 1000
    assert WindowSpec("time", 3000).step_or(500) == 500
    assert WindowSpec("count", count=5).step_or(700) == 700
    assert WindowSpec("now").step_or(900) == 900
    assert str(WindowSpec("time", 3000)) == "[RANGE 3000ms STEP default]"
    assert str(WindowSpec("time", 3000, 1000)) == "[RANGE 3000ms STEP 1000ms]"
    assert str(WindowSpec("count", count=5)) == "[TRIPLES 5]"
    assert str(WindowSpec("now")) == "[NOW]"


# --------------------------------------------------------------------------- dialects


def test_csparql_register_query_prefixed_stream_and_statics() -> None:
    text = """REGISTER QUERY TrafficCongestion AS
PREFIX ses: <http://www.insight-centre.org/dataset/SampleEventService#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
SELECT ?obs ?v
FROM STREAM ses:AarhusTrafficData182955 [RANGE 3s STEP 1s]
FROM STREAM <http://www.insight-centre.org/dataset/SampleEventService#AarhusTrafficData158505> [RANGE 5s STEP 1s]
FROM <http://example.org/static/sensors>
FROM NAMED <http://example.org/static/events>
WHERE { ?obs sao:hasValue ?v . FILTER(?v > 10) }
"""
    q = parse_checked(text)
    assert (q.name, q.dialect, q.mode, q.form) == ("TrafficCongestion", "csparql", "RSTREAM", "SELECT")
    assert [w.stream for w in q.windows] == [SES + "AarhusTrafficData182955", SES + "AarhusTrafficData158505"]
    assert [w.spec for w in q.windows] == [WindowSpec("time", 3000, 1000), WindowSpec("time", 5000, 1000)]
    assert q.static_from == ("http://example.org/static/sensors",)
    assert q.static_named == ("http://example.org/static/events",)
    assert len({w.graph for w in q.windows}) == 2
    assert "REGISTER" not in q.sparql and "FROM" not in q.sparql.upper()


def test_csparql_register_stream_with_iri_name_and_construct() -> None:
    text = (
        "REGISTER STREAM <http://example.org/q/out> AS\n"
        "CONSTRUCT { ?s <http://example.org/p> ?o }\n"
        "FROM STREAM <http://example.org/s> [RANGE 10m TUMBLING]\n"
        "WHERE { ?s ?p ?o }"
    )
    q = parse_checked(text)
    assert (q.name, q.form, q.dialect) == ("http://example.org/q/out", "CONSTRUCT", "csparql")
    assert q.windows[0].spec == WindowSpec("time", 600000, 600000)


def test_cqels_streams_static_graphs_and_relative_iris() -> None:
    text = """SELECT ?evt ?obs
FROM NAMED <culturalevents>
WHERE {
  GRAPH <culturalevents> { ?evt a ?type }
  STREAM <http://example.org/traffic> [RANGE 3s] { ?obs ?p ?v }
  STREAM <http://example.org/location> [RANGE 20s SLIDE 1s] { ?loc ?q ?w }
  STREAM <http://example.org/parking> [NOW] { ?park ?r ?x }
  STREAM <http://example.org/weather> [TRIPLES 5] { ?wx ?t ?y }
}"""
    q = parse_checked(text, default_name="Q5")
    assert (q.name, q.dialect, q.mode) == ("Q5", "cqels", "RSTREAM")
    assert q.static_named == ("http://localhost/culturalevents",)
    assert [w.spec.kind for w in q.windows] == ["time", "time", "now", "count"]
    assert [w.spec.step_or(1000) for w in q.windows] == [1000, 1000, 1000, 1000]
    assert q.windows[1].spec.step_ms == 1000 and q.windows[0].spec.step_ms is None
    for w in q.windows:
        assert q.sparql.count("GRAPH <%s>" % w.graph) == 1
    assert "STREAM" not in q.sparql


@pytest.mark.parametrize("mode", ["RSTREAM", "ISTREAM", "DSTREAM"])
def test_rspql_modes_named_windows_and_on_stream(mode: str) -> None:
    text = f"""PREFIX : <http://example.org/>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
REGISTER {mode.lower()} :q1 AS
SELECT ?obs ?v
FROM NAMED WINDOW :w1 ON :traffic [RANGE PT10S STEP PT5S]
FROM NAMED WINDOW <http://example.org/w2> ON STREAM <http://example.org/parking> [RANGE PT1M STEP PT30S]
FROM <http://example.org/static>
WHERE {{
  WINDOW :w1 {{ ?obs sao:hasValue ?v }}
  WINDOW <http://example.org/w2> {{ ?obs ?p ?o }}
}}"""
    q = parse_checked(text)
    assert (q.name, q.dialect, q.mode) == ("http://example.org/q1", "rspql", mode)
    assert [(w.name, w.stream) for w in q.windows] == [
        ("http://example.org/w1", "http://example.org/traffic"),
        ("http://example.org/w2", "http://example.org/parking"),
    ]
    assert [w.spec for w in q.windows] == [WindowSpec("time", 10000, 5000), WindowSpec("time", 60000, 30000)]
    assert q.static_from == ("http://example.org/static",)
    assert "WINDOW" not in q.sparql
    assert all(q.sparql.count("GRAPH <%s>" % w.graph) == 1 for w in q.windows)


def test_rspql_ask_with_iri_name_and_unused_window() -> None:
    text = (
        "REGISTER DSTREAM <http://example.org/alarm> AS ASK\n"
        "FROM NAMED WINDOW <http://example.org/w> ON <http://example.org/s> [RANGE PT2S STEP PT1S]\n"
        "WHERE { ?s ?p ?o }"
    )
    q = parse_checked(text)
    assert (q.name, q.mode, q.form) == ("http://example.org/alarm", "DSTREAM", "ASK")


def test_one_shot_sparql_query() -> None:
    text = (
        "SELECT ?s (COUNT(?o) AS ?n) FROM <http://example.org/g> FROM NAMED <http://example.org/h>\n"
        "WHERE { { ?s ?p ?o } UNION { GRAPH <http://example.org/h> { ?s ?p ?o } } } GROUP BY ?s"
    )
    q = parse_checked(text, default_name="adhoc")
    assert (q.name, q.dialect, q.mode, q.windows) == ("adhoc", "sparql", "RSTREAM", ())
    assert q.static_from == ("http://example.org/g",)
    assert q.static_named == ("http://example.org/h",)
    assert "FROM" not in q.sparql


def test_base_clause_resolves_stream_and_graph_iris() -> None:
    text = (
        "BASE <http://example.org/data/>\nSELECT ?s FROM STREAM <streams/s1> [RANGE 1s STEP 1s]\n"
        "FROM <static/g> WHERE { ?s ?p ?o }"
    )
    q = parse_checked(text)
    assert q.windows[0].stream == "http://example.org/data/streams/s1"
    assert q.static_from == ("http://example.org/data/static/g",)
    assert q.base == "http://example.org/data/"
    q2 = parse_checked("SELECT ?s FROM STREAM <s1> [RANGE 1s] WHERE { ?s ?p ?o }", base="http://other.org/x/")
    assert q2.windows[0].stream == "http://other.org/x/s1"


def test_keywords_inside_iris_strings_variables_and_comments_are_not_keywords() -> None:
    text = """PREFIX ex: <http://example.org/STREAM/>
# STREAM <http://example.org/commented> [RANGE 1s] { ?x ?y ?z }
SELECT ?stream ?window ?from ?register WHERE {
  STREAM <http://example.org/FROM/STREAM> [RANGE 5s] {
    ?stream <http://example.org/WINDOW> ?window .
    ?stream ex:stream "from stream <http://x> [RANGE 1s]" .
    OPTIONAL { ?stream ex:REGISTER ?register . ?stream ex:from ?from }
    FILTER(?window != 'WINDOW :w { }')
  }
}"""
    q = parse_checked(text)
    assert [w.stream for w in q.windows] == ["http://example.org/FROM/STREAM"]
    assert '"from stream <http://x> [RANGE 1s]"' in q.sparql
    assert "commented" not in q.sparql
    text2 = (
        "SELECT ?STREAM FROM STREAM <http://example.org/WHERE/FROM> [RANGE 1s STEP 1s]\n"
        "WHERE { ?STREAM <http://example.org/p> 'REGISTER QUERY x AS' }"
    )
    q2 = parse_checked(text2)
    assert [w.stream for w in q2.windows] == ["http://example.org/WHERE/FROM"]


def test_literals_keep_their_lexical_form() -> None:
    text = (
        "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\nSELECT ?s WHERE { STREAM <http://example.org/s> [NOW]"
        ' { ?s ?p ?o FILTER(?o = "01"^^xsd:integer && ?o != 1.50) } }'
    )
    q = parse_checked(text)
    literals = {str(x) for x in _walk_terms(q.algebra) if isinstance(x, Literal)}
    assert {"01", "1.50"} <= literals
    escaped = parse_checked(
        "SELECT ?o WHERE { STREAM <http://example.org/s> [NOW] { ?s ?p ?o FILTER(?o != 'a\\u0022b\\u005Cn') } }"
    )
    assert 'a"b\\n' in {str(x) for x in _walk_terms(escaped.algebra) if isinstance(x, Literal)}


def _walk_terms(node: Any, seen: set[int] | None = None) -> list[Any]:
    seen = set() if seen is None else seen
    if id(node) in seen:
        return []
    seen.add(id(node))
    if isinstance(node, dict):
        return [t for v in node.values() for t in _walk_terms(v, seen)]
    if isinstance(node, (list, tuple, set)):
        return [t for v in node for t in _walk_terms(v, seen)]
    if hasattr(node, "algebra"):
        return _walk_terms(node.algebra, seen)
    return [node]


def _triples(q: ContinuousQuery) -> list[tuple[Any, ...]]:
    return [
        t for n in _walk_nodes(q.algebra.algebra) if getattr(n, "name", "") == "BGP" for t in n["triples"]
    ]


def _walk_nodes(node: Any) -> list[Any]:
    if isinstance(node, dict):
        return [node] + [x for v in node.values() for x in _walk_nodes(v)]
    if isinstance(node, (list, tuple)):
        return [x for v in node for x in _walk_nodes(v)]
    return []


@pytest.mark.parametrize(
    ("pattern", "predicate", "obj"),
    [
        ("?s <http://x/p>?o", "http://x/p", "?o"),  # a variable, not the '?' modifier
        ("?s <http://x/p> * ?o", "Path(http://x/p*)", "?o"),  # spaced modifiers
        ("?s <http://x/p> ??o", "Path(http://x/p?)", "?o"),
        ("?s <http://x/p> + ?o", "Path(http://x/p+)", "?o"),
        ("?s <http://x/p> +1", "http://x/p", '"+1"^^<http://www.w3.org/2001/XMLSchema#integer>'),
        ("?s (<http://x/p>) # comment\n * ?o", "Path(http://x/p*)", "?o"),
    ],
)
def test_property_path_modifiers_read_as_sparql(pattern: str, predicate: str, obj: str) -> None:
    q = parse_checked("SELECT * WHERE { STREAM <http://example.org/s> [NOW] { %s } }" % pattern)
    ((_, p, o),) = _triples(q)
    assert (repr(p) if isinstance(p, PropertyPath) else str(p)) == predicate
    assert o.n3() == obj


def test_accepted_sparql_corners() -> None:
    """Queries that look suspicious but SPARQL 1.1 (and Oxigraph) accept."""
    for text in [
        "SELECT * WHERE { ?s ?p ?o FILTER(?o<3&&?o>1) }",
        "CONSTRUCT { _:b ?p ?o } WHERE { _:b ?p ?o }",
        "SELECT * WHERE { _:b ?p ?o FILTER(true) _:b ?q ?r }",
        "SELECT ?s (COUNT(?o) AS ?n) WHERE { ?s ?p ?o } GROUP BY ?s HAVING (COUNT(?o) > 1) ORDER BY DESC(?n)",
        "SELECT (SUM(?o) AS ?s) WHERE { ?s ?p ?o }",
        "SELECT ?g WHERE { ?s ?p ?o } GROUP BY (STR(?s) AS ?g)",
        "SELECT (COUNT(*) AS ?c) ?x WHERE { ?s ?p ?o } VALUES ?x { <http://example.org/a> }",
        "SELECT * WHERE { BIND(1 AS ?x) ?s ?p ?x }",
        "SELECT * WHERE { ?s ?p ?o MINUS { ?s ?q ?z } BIND(1 AS ?z) }",
        'SELECT ?o WHERE { BIND("a\\u0022b" AS ?o) }',
        "SELECT * WHERE { ?s <http://example.org/\\u0041> ?o }",
        "ASK { ?s ?p ?o FILTER(?o = 'It\\'s') }",
        r"""ASK { ?s ?p ?o FILTER(?o = 'say \"hi\"' || ?o = "It\'s") }""",
        'SELECT * WHERE { ?s ?p "a"@en-GB-oed , "b"@zh-Hant-TW , "c"@x-private , "d"@de-419 }',
        "SELECT * FROM STREAM <http://example.org/s> [RANGE 0 STEP 1s] WHERE { ?s ?p ?o }",
        "SELECT * WHERE { ?s ?p ?o } FROM STREAM <http://example.org/s> [RANGE 1s]",
        "SELECT * FROM <http://example.org/g> FROM NAMED <http://example.org/h> { ?s ?p ?o }",
        "CONSTRUCT FROM <http://example.org/g> WHERE { ?s ?p ?o }",
    ]:
        parse_checked(text)


# --------------------------------------------------------------------------- positions


def _line_col(text: str, offset: int) -> tuple[int, int]:
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def test_position_maps_sparql_offsets_back_to_the_original_text() -> None:
    text = """PREFIX ex: <http://example.org/>   # a comment
SELECT ?s ?v WHERE {
  ?s a ex:Sensor .
  STREAM <http://example.org/traffic> [RANGE 3s SLIDE 1s]
  { ?s ex:value ?v }
  FILTER(?v > 10)
}"""
    q = parse_checked(text)
    graph = "GRAPH <%s>" % q.windows[0].graph
    at = q.sparql.index(graph)
    assert q.position(at) == (4, 3)  # the STREAM token it replaced
    assert q.position(at + len(graph) - 1) == (4, 3)
    for needle in ("FILTER", "?v > 10", "ex:Sensor", "{ ?s ex:value"):
        assert q.position(q.sparql.index(needle)) == _line_col(text, text.index(needle))
    comment = text.index("#")  # blanked, same length: maps one to one
    assert q.sparql[comment : comment + 11] == " " * 11
    assert q.position(comment + 4) == _line_col(text, comment + 4)
    assert q.position(len(q.sparql)) == _line_col(text, len(text))
    assert q.position(0) == (1, 1)


def test_position_for_rspql_window_blocks_and_removed_clauses() -> None:
    text = """PREFIX : <http://example.org/>
REGISTER ISTREAM :q AS
SELECT ?s
FROM NAMED WINDOW :w ON :s [RANGE PT4S STEP PT2S]
WHERE {
    WINDOW :w { ?s ?p ?o }
}"""
    q = parse_checked(text)
    graph_iri = "<%s>" % q.windows[0].graph
    assert q.position(q.sparql.index("GRAPH " + graph_iri)) == (6, 5)
    assert q.position(q.sparql.index(graph_iri)) == (6, 12)
    assert q.position(q.sparql.index("SELECT")) == (3, 1)
    assert q.position(q.sparql.index("?s ?p ?o")) == (6, 17)
    # every offset maps inside the text, monotonically
    positions = [q.position(i) for i in range(len(q.sparql) + 1)]
    assert positions == sorted(positions)


def test_tokens_keep_offsets() -> None:
    text = 'SELECT ?x # c\nWHERE { ?x <http://a/b> "s" . }'
    toks = tokenize(text)
    assert "".join(t.text for t in toks) == text
    assert all(text[t.start : t.end] == t.text for t in toks)
    assert [t.kind for t in toks if t.significant][:3] == ["word", "var", "word"]


def test_query_error_is_one_line() -> None:
    e = QueryError("bad\nthing", 3, 7, "q.rq")
    assert str(e) == "q.rq:3:7: bad thing"
    assert str(QueryError("x", 2)) == "2: x"
    assert str(QueryError("only message")) == "only message"
    assert isinstance(e, ValueError)
    assert (e.line, e.column, e.source) == (3, 7, "q.rq")


def test_errors_name_the_source() -> None:
    with pytest.raises(QueryError) as info:
        parse_continuous("SELECT ?s WHERE { ?s ?p ex:o }", source="Q9.rq")
    assert str(info.value) == "Q9.rq:1:25: unknown prefix 'ex:'"
