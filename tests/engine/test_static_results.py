"""Static sub-join results in the engine: oracle-equal, evaluated once, persisted, refreshed.

The static part of CityBench's CQELS queries (the sensor-repository patterns outside the
STREAM blocks, the ``GRAPH <culturalevents>`` block) becomes stored static sub-joins.
These tests check that results still equal the oracle's expected files, that N queries
sharing a static part evaluate it once, that a second engine on the same store loads
instead of evaluating, and that static triples added mid-stream give, from the next
report on, what an engine that had them from the start gives.
"""

from __future__ import annotations

import io
import json
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.scan import ScanOperator
from linkstream.operators.static_result import StaticResultOperator
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.dictionary import open_dictionary
from linkstream.rdf.static import load_graph
from linkstream.store.static_results import LmdbStaticResultStore
from tests.rdf.hbase_support import drop_table, fresh_table
from tests.shared_paths import load_tool, shared_or_skip

SES = "http://www.insight-centre.org/dataset/SampleEventService#"
PFX = """PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ct: <http://www.insight-centre.org/citytraffic#>
PREFIX ses: <http://www.insight-centre.org/dataset/SampleEventService#>
PREFIX rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#>
"""
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"
REPO = "http://127.0.0.1:9000/WebGlCity/RDF/SensorRepository.rdf"


def _manifest() -> tuple[Path, dict]:
    shared = shared_or_skip()
    return shared, json.loads((shared / "citybench" / "manifest.json").read_text())


def _entry(man: dict, qid: str) -> dict:
    return next(q for q in man["queries"] if q["id"] == qid)


def _engine(shared: Path, entries: list[dict], dictionary: str = "memory:", **kw) -> Engine:
    """An engine with the statics of ``entries`` loaded as ``linkstream replay`` loads them."""
    eng = Engine(open_dictionary(dictionary), **kw)
    seen: list[tuple] = []
    for q in entries:
        for s in q["statics"]:
            if (s["iri"], s["path"]) not in seen:
                seen.append((s["iri"], s["path"]))
    for k, (iri, path) in enumerate(seen):
        eng.add_static(iri, load_graph(str(shared / path), eng.dictionary, bnode_prefix=f"s{k}_"))
    return eng


def _streams(shared: Path, entries: list[dict]) -> list[tuple[str, str]]:
    out: dict[str, str] = {}
    for q in entries:
        for s in q["streams"]:
            out[s["iri"]] = str(shared / s["path"])
    return list(out.items())


def _close(eng: Engine) -> None:
    sr = eng.static_results
    if sr is not None:
        sr.store.close()
    eng.dictionary.close()


def _run(eng: Engine, texts: dict[str, str], streams, base: str, max_reports: int, sink=None) -> str:
    rqs = [eng.register(parse_continuous(t, default_name=n, base=base)) for n, t in texts.items()]
    buf = io.StringIO()
    replay(eng, rqs, streams, buf, max_reports=max_reports, sink=sink)
    return buf.getvalue()


@pytest.mark.conformance
@pytest.mark.parametrize("qid", ["cqels-Q1", "cqels-Q5", "cqels-Q4"])
def test_citybench_static_joins_equal_the_oracle_with_results_in_lmdb(qid, tmp_path, capsys):
    shared, man = _manifest()
    q = _entry(man, qid)
    eng = _engine(shared, [q], f"lmdb:{tmp_path / 'dict'}")
    text = (shared / q["query"]).read_text()
    got = _run(eng, {q["name"]: text}, _streams(shared, [q]), man["base"], q["max_reports"])
    ops = [op for op in eng.operators.values() if isinstance(op, StaticResultOperator)]
    sr = eng.static_results
    assert ops and sr is not None and sr.evaluations >= 1
    # no pattern scan reads a static graph any more: they all went into static sub-joins
    assert not [
        op
        for op in eng.operators.values()
        if isinstance(op, ScanOperator) and sr.graphs_of(op.graph) is not None
    ]
    _close(eng)
    store = LmdbStaticResultStore(str(tmp_path / "dict" / "static-results"))
    with store._env.begin(db=store._db) as txn:
        headers = [k for k, _ in txn.cursor() if k.endswith(b"h")]
    store.close()
    assert len(headers) == sr.evaluations
    (tmp_path / "got.jsonl").write_text(got)
    expected = shared / q["expected"]
    argv = [str(expected), str(tmp_path / "got.jsonl")]
    times = expected.with_name(expected.name + ".times")
    if times.exists():
        argv += ["--times", str(times)]
    assert load_tool("compare_results").main(argv) == 0, capsys.readouterr().out


def test_n_queries_sharing_a_static_part_evaluate_it_once():
    shared, man = _manifest()
    q5, q1 = _entry(man, "cqels-Q5"), _entry(man, "cqels-Q1")
    texts = {f"q5_{i}": (shared / q5["query"]).read_text() for i in range(6)}
    texts.update({f"q1_{i}": (shared / q1["query"]).read_text() for i in range(3)})
    eng = _engine(shared, [q5, q1])
    out = _run(eng, texts, _streams(shared, [q5, q1]), man["base"], 3)
    sr = eng.static_results
    assert sr is not None
    ops = [op for op in eng.operators.values() if isinstance(op, StaticResultOperator)]
    # Q5 has two static components (sensor repository, cultural events), shared by its six
    # copies; Q1 has two components equal up to variable names (?p1 / ?p2 a CongestionLevel):
    # two operators, one evaluation, one load of the stored result
    assert len(ops) == 4
    assert (sr.evaluations, sr.loads) == (3, 1)
    rows: dict[str, list[str]] = defaultdict(list)
    for line in out.splitlines():
        d = json.loads(line)
        rows[d["query"]].append(json.dumps([d["t"], sorted(d["binding"].items())]))
    for first in ("q5_0", "q1_0"):
        assert rows[first], f"vacuous: {first} produced no rows"
    for name in texts:
        assert sorted(rows[name]) == sorted(rows[name[:3] + "0"]), name
    _close(eng)


@pytest.mark.parametrize("backend", ["lmdb", "hbase-emulator"])
def test_second_engine_on_the_same_store_loads_instead_of_evaluating(backend, tmp_path, request):
    shared, man = _manifest()
    q = _entry(man, "cqels-Q5")
    text = (shared / q["query"]).read_text()
    dict_uri = f"lmdb:{tmp_path / 'dict'}"
    table = None
    if backend == "lmdb":
        results = None  # the default: next to the LMDB dictionary
    else:
        address = request.getfixturevalue("hbase_emulator_address")
        table = fresh_table()
        results = f"hbase://{address}/{table}"
    outs = []
    stats = []
    try:
        for _ in range(2):
            eng = _engine(shared, [q], dict_uri, static_results=results)
            outs.append(_run(eng, {"Q5": text}, _streams(shared, [q]), man["base"], 3))
            sr = eng.static_results
            assert sr is not None
            stats.append((sr.evaluations, sr.loads))
            _close(eng)
    finally:
        if table is not None:
            drop_table(request.getfixturevalue("hbase_emulator_address"), table)
    assert stats == [(2, 0), (0, 2)]
    assert outs[0] and outs[0] == outs[1]


def _split_static(shared: Path, eng: Engine) -> tuple[np.ndarray, np.ndarray]:
    """The sensor repository as (kept, withheld).

    Withheld: the rdf:type triples of two of the five properties the traffic stream
    observes (rows of the other three join both before and after the change, so a
    refresh that failed to retract old rows would show), and every other rdf:type
    triple of the properties the stream does not observe.
    """
    tr = load_graph(
        str(shared / "citybench" / "static" / "SensorRepository.nt"), eng.dictionary, bnode_prefix="s0_"
    )
    tid = int(eng.dictionary.encode_many([RDF_TYPE])[0])
    props = eng.dictionary.lookup_many([f"<{SES}Property-{p}>" for p in OBSERVED_PROPERTIES])
    assert props.all()
    typed = tr[:, 1] == tid
    held = typed & np.isin(tr[:, 0], props[:2])
    others = np.flatnonzero(typed & ~np.isin(tr[:, 0], props))
    held[others[::2]] = True
    return tr[~held], tr[held]


#: the properties AarhusTrafficData182955 observes
OBSERVED_PROPERTIES = (
    "11d60592-7d15-4934-9e23-f1b38df90fd5",
    "8421b8b3-72c0-4517-87af-f1cc22d29895",
    "a6cd03be-ae1f-47d0-b24f-83f82ef93c4d",
    "78652e9a-9ef7-49c6-858d-e3f0eb4f142d",
    "c9f858eb-4a62-404d-be7c-0626219ec324",
)


REFRESH_QUERIES = {
    "rows": PFX
    + """SELECT ?o1 ?type ?v1 WHERE {
  ?p1 a ?type . ?p1 ssn:isPropertyOf ?foi . FILTER(?type != ct:EstimatedTime)
  STREAM ses:AarhusTrafficData182955 [RANGE 3000ms SLIDE 1000ms] { ?o1 ssn:observedProperty ?p1 . ?o1 sao:hasValue ?v1 }
}""",
    "counts": PFX
    + """SELECT ?type (COUNT(?o1) AS ?n) (MAX(?v1) AS ?m) WHERE {
  ?p1 a ?type .
  STREAM ses:AarhusTrafficData182955 [RANGE 3000ms SLIDE 1000ms] { ?o1 ssn:observedProperty ?p1 . ?o1 sao:hasValue ?v1 }
} GROUP BY ?type""",
    "optional": PFX
    + """SELECT ?o1 ?p1 ?type WHERE {
  STREAM ses:AarhusTrafficData182955 [RANGE 2000ms SLIDE 1000ms] { ?o1 ssn:observedProperty ?p1 }
  OPTIONAL { ?p1 a ?type }
}""",
    "rsp": PFX
    + """REGISTER RSTREAM <rsp> AS SELECT ?o1 ?type FROM NAMED WINDOW <w> ON ses:AarhusTrafficData182955 [RANGE PT3S STEP PT1S]
WHERE { ?p1 a ?type . FILTER NOT EXISTS { ?p1 a ct:CongestionLevel } WINDOW <w> { ?o1 ssn:observedProperty ?p1 } }""",
    "cs": PFX
    + f"""REGISTER QUERY cs AS SELECT ?o1 ?type FROM STREAM ses:AarhusTrafficData182955 [RANGE 3s STEP 1s]
FROM NAMED <{REPO}> WHERE {{ ?o1 ssn:observedProperty ?p1 . GRAPH <{REPO}> {{ ?p1 a ?type }} }}""",
}


def _by_time(text: str) -> dict[tuple[str, int], list[str]]:
    out: dict[tuple[str, int], list[str]] = defaultdict(list)
    for line in text.splitlines():
        d = json.loads(line)
        out[(d["query"], d["t"])].append(line)
    return {k: sorted(v) for k, v in out.items()}


@pytest.mark.parametrize("share", [True, False], ids=["shared", "unshared"])
def test_static_triples_added_mid_stream_refresh_the_results(share, tmp_path):
    """From the report after the change on, results equal a fresh engine's.

    Unshared, every query runs on its own operators (no router deduplicating a shared
    join's rows), so a refresh that did not retract the old rows exactly would show.
    """
    shared, man = _manifest()
    stream = [(SES + "AarhusTrafficData182955", str(shared / "citybench/streams/AarhusTrafficData182955.nq"))]
    # trimmed stream: the first 40 elements
    lines, els = [], 0
    for line in open(stream[0][1]):
        if "generatedAtTime" in line:
            els += 1
            if els > 40:
                break
        lines.append(line)
    (tmp_path / "s.nq").write_text("".join(lines))
    stream = [(stream[0][0], str(tmp_path / "s.nq"))]
    base = man["base"]

    late = Engine()
    late.share = share
    kept, withheld = _split_static(shared, late)
    assert len(withheld) > 10
    late.add_static(None, kept)
    late.add_static(REPO, kept)  # C-SPARQL: a FROM NAMED static graph
    state = {"added": None}

    def sink(q, c, rows):
        if state["added"] is None and q.stats.reports == 4:
            late.add_static(None, withheld)  # the same ids: one dictionary
            late.add_static(REPO, withheld)
            state["added"] = c

    got = _by_time(_run(late, REFRESH_QUERIES, stream, base, 12, sink))
    sr = late.static_results
    assert sr is not None and sr.refreshes >= 3 and state["added"] is not None

    fresh = Engine(late.dictionary)  # same ids, everything static from the start
    fresh.share = share
    fresh.add_static(None, kept)
    fresh.add_static(None, withheld)
    fresh.add_static(REPO, kept)
    fresh.add_static(REPO, withheld)
    want = _by_time(_run(fresh, REFRESH_QUERIES, stream, base, 12))

    t_add = state["added"]
    after = {k for k in want if k[1] > t_add} | {k for k in got if k[1] > t_add}
    before = {k for k in want if k[1] <= t_add}
    assert {q for q, _ in after} == set(REFRESH_QUERIES), "vacuous: some query has no rows after the change"
    for k in sorted(after):
        assert got.get(k) == want.get(k), k
    # and before the change the withheld triples made a difference (the test is not vacuous)
    assert any(got.get(k) != want.get(k) for k in before)


def test_live_engine_adds_static_triples_at_runtime():
    from linkstream.engine.live.runtime import LiveEngine

    ex = "http://ex.org/"
    q = f"""PREFIX ex: <{ex}>
SELECT ?x ?t WHERE {{ ?x ex:type ?t . STREAM ex:s [RANGE 2s SLIDE 1s] {{ ?x ex:p ?v }} }}"""
    n = f"""PREFIX ex: <{ex}>
SELECT (COUNT(*) AS ?n) WHERE {{ ?x ex:type ?t . STREAM ex:s [RANGE 2s SLIDE 1s] {{ ?x ex:p ?v }} }}"""
    with LiveEngine(idle_ms=None) as live:
        live.add_static(None, [(f"<{ex}a>", f"<{ex}type>", f"<{ex}T1>")])
        live.register(q, "rows")
        live.register(n, "count")
        subs = {k: live.subscribe(k) for k in ("rows", "count")}
        live.push(ex + "s", 1000, [(f"<{ex}a>", f"<{ex}p>", '"1"'), (f"<{ex}b>", f"<{ex}p>", '"2"')])
        assert live.advance_to(2000) == 2000
        live.add_static(None, [(f"<{ex}b>", f"<{ex}type>", f"<{ex}T2>")])
        assert live.advance_to(3000) == 3000
        got = {
            k: [(c, sorted(lines)) for c, lines in iter(lambda s=s: _next(s), None)] for k, s in subs.items()
        }
    rows = {
        c: sorted((json.loads(x)["binding"]["x"], json.loads(x)["binding"]["t"]) for x in lines)
        for c, lines in got["rows"]
    }
    assert rows == {
        2000: [(f"<{ex}a>", f"<{ex}T1>")],
        3000: [(f"<{ex}a>", f"<{ex}T1>"), (f"<{ex}b>", f"<{ex}T2>")],
    }
    counts = {c: [json.loads(x)["binding"]["n"].split('"')[1] for x in lines] for c, lines in got["count"]}
    assert counts == {2000: ["1"], 3000: ["2"]}


def _next(sub):
    import queue

    try:
        return sub.get_report(timeout=0)
    except queue.Empty:
        return None
