"""Operator sharing between queries, runtime (un)registration, and correctness of many
queries evaluated together against the oracle evaluating each alone."""

from __future__ import annotations

import io
import itertools
import json
import os
import random
from collections import defaultdict

import pytest

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.scan import ScanOperator
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.shared_paths import load_tool, run_oracle, shared_or_skip, trim_citybench_streams

SES = "http://www.insight-centre.org/dataset/SampleEventService#"
REPO = "http://127.0.0.1:9000/WebGlCity/RDF/SensorRepository.rdf"
TRAFFIC = ["AarhusTrafficData182955", "AarhusTrafficData158505", "AarhusTrafficData192707"]
PFX = """PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ct: <http://www.insight-centre.org/citytraffic#>
PREFIX ses: <http://www.insight-centre.org/dataset/SampleEventService#>
PREFIX : <http://linkstream.example/w#>
"""


def template_query(
    kind: int, a: str, b: str, rng: int, step: int, const: float, dialect: str, name: str
) -> str:
    """CityBench-shaped queries: Q1 (two-stream join), Q7 (filter), Q12 (aggregate), Q11 (ASK)."""
    if dialect == "csparql":
        frm = f"FROM STREAM ses:{a} [RANGE {rng}ms STEP {step}ms] FROM STREAM ses:{b} [RANGE {rng}ms STEP {step}ms] FROM <{REPO}>"
        w1 = w2 = "{%s}"
    elif dialect == "cqels":
        frm = ""
        w1 = f"STREAM ses:{a} [RANGE {rng}ms SLIDE {step}ms] {{%s}}"
        w2 = f"STREAM ses:{b} [RANGE {rng}ms SLIDE {step}ms] {{%s}}"
    else:
        frm = f"FROM NAMED WINDOW :w1 ON ses:{a} [RANGE PT{rng / 1000:g}S STEP PT{step / 1000:g}S] FROM NAMED WINDOW :w2 ON ses:{b} [RANGE PT{rng / 1000:g}S STEP PT{step / 1000:g}S]"
        w1, w2 = "WINDOW :w1 {%s}", "WINDOW :w2 {%s}"
    head = (
        f"REGISTER QUERY {name} AS "
        if dialect == "csparql"
        else (f"REGISTER RSTREAM <{name}> AS " if dialect == "rspql" else "")
    )
    ob1 = f"?o1 ssn:observedProperty ?p1 . ?o1 sao:hasValue ?v1 . ?o1 ssn:observedBy ses:{a} ."
    ob2 = f"?o2 ssn:observedProperty ?p2 . ?o2 sao:hasValue ?v2 . ?o2 ssn:observedBy ses:{b} ."
    if kind == 0:
        body = f"?p1 a ct:CongestionLevel . ?p2 a ct:CongestionLevel . {w1 % ob1} {w2 % ob2}"
        return f"{PFX}{head}SELECT ?o1 ?o2 ?v1 ?v2 {frm} WHERE {{ {body} }}"
    if kind == 1:
        body = f"?p1 a ct:CongestionLevel . {w1 % ob1} {w2 % ob2} FILTER(?v1 > {const} || ?v2 > {const})"
        return f"{PFX}{head}SELECT ?o1 ?v1 ?v2 {frm} WHERE {{ {body} }}"
    if kind == 2:
        body = f"{w1 % ob1} {w2 % ob2}"
        return f"{PFX}{head}SELECT ?p1 (COUNT(?o2) AS ?n) (MAX(?v2) AS ?m) {frm} WHERE {{ {body} }} GROUP BY ?p1 HAVING (COUNT(?o2) > {int(const * 100)})"
    body = f"{w1 % ob1} {w2 % ob2} FILTER(?v1 + ?v2 > {const})"
    return f"{PFX}{head}ASK {frm} WHERE {{ {body} }}"


def generate(n: int, seed: int = 7) -> dict[str, str]:
    rnd = random.Random(seed)
    out = {}
    for i in range(n):
        a, b = rnd.sample(TRAFFIC, 2)
        out[f"g{i}"] = template_query(
            rnd.randrange(4),
            a,
            b,
            rnd.choice([2000, 3000]),
            rnd.choice([1000, 2000]),
            rnd.choice([0.001, 0.01, 0.02]),
            rnd.choice(["csparql", "cqels", "rspql"]),
            f"g{i}",
        )
    return out


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory):
    """The first 25 elements of three traffic streams (keeps the oracle run short)."""
    shared = shared_or_skip()
    d = tmp_path_factory.mktemp("trimmed")
    trim_citybench_streams(d, TRAFFIC, 25)
    return d, shared / "citybench" / "static" / "SensorRepository.nt"


def run_linkstream(queries: dict[str, str], streams, static) -> tuple[Engine, dict]:
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    rqs = [eng.register(parse_continuous(text, default_name=name)) for name, text in queries.items()]
    buf = io.StringIO()
    replay(eng, rqs, streams, buf)
    return eng, buf


def by_query(text: str) -> dict[str, list[str]]:
    out = defaultdict(list)
    for line in text.splitlines():
        out[json.loads(line)["query"]].append(line)
    return out


#: the issue's acceptance run uses 500 (about 8 minutes on 2 cores, mostly the oracle);
#: ``make test`` uses fewer to stay within its time budget.
MANY = int(os.environ.get("LINKSTREAM_MANY_QUERIES", "80"))


def test_many_queries_together_equal_the_oracle_per_query(trimmed, tmp_path, capsys):
    d, static = trimmed
    queries = generate(MANY)
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    eng, buf = run_linkstream(queries, streams, static)
    got = tmp_path / "got.jsonl"
    got.write_text(buf.getvalue())
    # the oracle evaluates every query on its own (its own graphs and windows)
    want = run_oracle(queries, streams, [str(static), f"{REPO}={static}"], tmp_path)
    rc = load_tool("compare_results").main([str(want), str(got)])
    assert rc == 0, capsys.readouterr().out
    assert len(by_query(want.read_text())) > MANY // 2  # most queries produce rows: not vacuous
    # and they did share: fewer joins than separate plans would have
    joins = [op for op in eng.operators.values() if isinstance(op, MJoinOperator)]
    assert len(joins) < MANY


def test_thousand_queries_from_five_templates_share_joins_and_scans(trimmed):
    d, static = trimmed
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    base_before = eng.operator_count()
    templates = [
        template_query(0, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.01, "cqels", "t"),
        template_query(1, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.01, "cqels", "t"),
        template_query(2, TRAFFIC[1], TRAFFIC[2], 3000, 1000, 0.01, "cqels", "t"),
        template_query(3, TRAFFIC[0], TRAFFIC[2], 2000, 1000, 0.02, "cqels", "t"),
        template_query(0, TRAFFIC[1], TRAFFIC[2], 2000, 1000, 0.01, "csparql", "t"),
    ]
    for i in range(1000):
        text = templates[i % 5].replace("REGISTER QUERY t AS", f"REGISTER QUERY t{i} AS")
        eng.register(parse_continuous(text, default_name=f"t{i}"))
    joins = [op for op in eng.operators.values() if isinstance(op, MJoinOperator)]
    scans = [op for op in eng.operators.values() if isinstance(op, ScanOperator)]
    assert len(joins) <= 3 * 5, len(joins)
    assert len(scans) <= 40, len(scans)
    # unregistering every query frees every operator again
    for i in range(1000):
        eng.unregister(f"t{i}")
    assert eng.operator_count() == base_before == 0
    assert all(not b.windows for b in eng.buffers.values())


def test_thousand_queries_five_templates_five_ranges_two_dialects_one_join_each(trimmed):
    """Window ranges and dialects (CQELS-QL, RSP-QL) vary too: the shared join + router
    rewrite keeps one join (and one router) per template."""
    from linkstream.operators.router import RouterOperator

    d, static = trimmed
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    shapes = [(0, 0, 1), (1, 0, 1), (2, 1, 2), (3, 0, 2), (0, 1, 2)]
    for i in range(1000):
        kind, a, b = shapes[i % 5]
        rng = (1000, 2000, 3000, 4000, 5000)[(i // 5) % 5]
        dialect = ("cqels", "rspql")[(i // 25) % 2]
        text = template_query(kind, TRAFFIC[a], TRAFFIC[b], rng, 1000, 0.01, dialect, f"t{i}")
        eng.register(parse_continuous(text, default_name=f"t{i}"))
    ops = list(eng.operators.values())
    assert sum(isinstance(op, MJoinOperator) for op in ops) == 5
    assert sum(isinstance(op, RouterOperator) for op in ops) == 5
    assert sum(isinstance(op, ScanOperator) for op in ops) <= 40
    for i in range(1000):
        eng.unregister(f"t{i}")
    assert eng.operator_count() == 0
    assert all(not b.windows for b in eng.buffers.values())


def test_register_mid_stream_reports_from_next_close_with_retained_elements(trimmed, tmp_path, capsys):
    """A query registered while streams run equals the oracle's rows for the report times
    after its registration (its windows hold every retained element in range)."""
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    early = template_query(0, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.01, "cqels", "early")
    late_text = template_query(1, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.005, "cqels", "late")
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    rq = eng.register(parse_continuous(early, default_name="early"))
    late_rows: list[str] = []
    state = {"late": None, "registered_after": None}

    def sink(q, c, lines):
        if q.name == "late":
            late_rows.extend(lines)
        if q.name == "early" and state["late"] is None and q.stats.reports == 8:
            # registered between report times: shares the early query's windows and scans
            state["late"] = eng.register(parse_continuous(late_text, default_name="late"))
            state["registered_after"] = c
            queries.append(state["late"])

    queries = [rq]
    _replay_with_dynamic(eng, queries, streams, sink)
    assert state["late"] is not None and late_rows
    # oracle: the late query alone over the whole streams, restricted to its report times
    (tmp_path / "late.rq").write_text(late_text)
    args = ["--query", str(tmp_path / "late.rq"), "--static", str(static)]
    for iri, path in streams:
        args += ["--stream", f"{iri}={path}"]
    want = tmp_path / "want.jsonl"
    assert load_tool("oracle").main([*args, "--out", str(want), "--quiet"]) == 0
    first = state["registered_after"]
    wanted = [ln for ln in want.read_text().splitlines() if json.loads(ln)["t"] > first]
    (tmp_path / "w.jsonl").write_text("\n".join(wanted) + "\n")
    (tmp_path / "g.jsonl").write_text("\n".join(late_rows) + "\n")
    assert min(json.loads(x)["t"] for x in late_rows) > first
    rc = load_tool("compare_results").main([str(tmp_path / "w.jsonl"), str(tmp_path / "g.jsonl")])
    assert rc == 0, capsys.readouterr().out
    # unregistering the late query leaves the early one's operators in place
    n = eng.operator_count()
    eng.unregister("late")
    assert 0 < eng.operator_count() < n


def _replay_with_dynamic(eng, queries, streams, sink):
    """A replay loop that lets the sink register queries while streams run."""
    import heapq

    from linkstream.rdf.streams import StreamReader

    its = []
    heap = []
    for k, (iri, path) in enumerate(streams):
        eng.buffer(iri)
        it = iter(StreamReader(path, eng.dictionary, bnode_prefix=f"st{k}_"))
        its.append((iri, it))
        el = next(it, None)
        if el is not None:
            heap.append((el.t, k, el))
    heapq.heapify(heap)
    t_min = min(h[0] for h in heap)
    t_max = t_min
    counter = itertools.count()
    nexts = {q.name: q.first_report_after(t_min) for q in queries}

    def fire(limit):
        while True:
            c = min(nexts.values())
            if c > limit:
                return
            names = [n for n, v in nexts.items() if v == c]
            res = eng.tick(c, names)
            for n in names:
                q = eng.queries[n]
                nexts[n] = q.next_report(c)
                sink(q, c, res[n])
            for q in queries:  # registered during this tick: first close after now
                nexts.setdefault(q.name, q.first_report_after(c))
            next(counter)

    while heap:
        t, k, el = heapq.heappop(heap)
        fire(t)
        iri, it = its[k]
        eng.ingest(iri, el.t, el.triples)
        t_max = max(t_max, t)
        nx = next(it, None)
        if nx is not None:
            heapq.heappush(heap, (nx.t, k, nx))
    last = min((t_max // s + 1) * s for s in (1000,))
    fire(last)


def test_matching_cost_does_not_grow_with_queries_that_cannot_match(trimmed):
    """Scans read only their predicate's slice of a graph delta: adding 200 queries whose
    patterns match nothing in the stream leaves the rows examined unchanged."""
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    base_q = template_query(0, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.01, "cqels", "base")

    def examined(extra: int) -> tuple[int, int, list[str]]:
        queries = {"base": base_q}
        for i in range(extra):
            queries[f"x{i}"] = (
                PFX + f"SELECT ?o ?v WHERE {{ STREAM ses:{TRAFFIC[i % 3]} [RANGE 3s SLIDE 1s] "
                f"{{ ?o <http://example.org/never/{i}> ?v }} }}"
            )
        eng, buf = run_linkstream(queries, streams, static)
        scans = [op for op in eng.operators.values() if isinstance(op, ScanOperator)]
        total = sum(s.examined for s in scans)
        never = sum(
            s.examined
            for s in scans
            if s.predicate and "never" in eng.dictionary.decode_many([s.predicate])[0]
        )
        return total, never, by_query(buf.getvalue())["base"]

    t0, n0, rows0 = examined(0)
    t1, n1, rows1 = examined(200)
    assert rows0 == rows1 and rows0
    assert n1 == 0
    assert t1 == t0
