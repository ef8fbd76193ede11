"""Shared multiway joins with routers, and alpha-renamed operator sharing.

Queries from CityBench templates over several window ranges and constants are evaluated
together (one shared join per shape, split by a router) and each query's results must
equal the oracle evaluating that query alone.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import re
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.router import RouterOperator
from linkstream.operators.scan import ScanOperator
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.engine import test_sharing
from tests.engine.test_sharing import (
    PFX,
    REPO,
    SES,
    TRAFFIC,
    _replay_with_dynamic,
    by_query,
    run_linkstream,
    template_query,
)
from tests.shared_paths import load_tool

trimmed = test_sharing.trimmed  # the fixture: the first 25 elements of three streams
RANGES = [1000, 2000, 3000, 4000, 5000]


def properties(path, n: int) -> list[str]:
    """The first ``n`` distinct observed properties of a stream file."""
    out: list[str] = []
    for line in open(path):
        if "observedProperty" in line:
            p = line.split()[2]
            if p not in out:
                out.append(p)
                if len(out) == n:
                    break
    return out


def prop_query(stream: str, prop: str, rng: int, dialect: str, name: str) -> str:
    """One window, a constant observed property (the router splits on it), a static join."""
    pats = f"?o ssn:observedProperty {prop} . ?o sao:hasValue ?v . ?o ssn:observedBy ?s ."
    if dialect == "cqels":
        return (
            f"{PFX}SELECT ?o ?v ?s WHERE {{ STREAM ses:{stream} [RANGE {rng}ms SLIDE 1000ms] {{ {pats} }} }}"
        )
    return (
        f"{PFX}REGISTER RSTREAM <{name}> AS SELECT ?o ?v ?s "
        f"FROM NAMED WINDOW :w ON ses:{stream} [RANGE PT{rng / 1000:g}S STEP PT1S] "
        f"WHERE {{ WINDOW :w {{ {pats} }} }}"
    )


def two_ranges(r1: int, r2: int, name: str) -> str:
    """Template Q1 (two windows, static join) with a range per window."""
    q = template_query(0, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.01, "cqels", name)
    q = q.replace("[RANGE 3000ms SLIDE 1000ms] {?o1", f"[RANGE {r1}ms SLIDE 1000ms] {{?o1", 1)
    return q.replace("[RANGE 3000ms SLIDE 1000ms] {?o2", f"[RANGE {r2}ms SLIDE 1000ms] {{?o2", 1)


def alpha(text: str) -> str:
    """The same query with every variable renamed (``?o1`` -> ``?x_o1``)."""
    return re.sub(r"\?(\w+)", r"?x_\1", text)


def oracle_compare(queries: dict[str, str], got_text: str, streams, static, tmp_path, capsys, after=None):
    qdir = tmp_path / "q"
    qdir.mkdir(exist_ok=True)
    args = []
    for name, text in queries.items():
        (qdir / f"{name}.rq").write_text(text)
        args += ["--query", str(qdir / f"{name}.rq")]
    for iri, path in streams:
        args += ["--stream", f"{iri}={path}"]
    args += ["--static", str(static), "--static", f"{REPO}={static}"]
    want = tmp_path / "want.jsonl"
    assert load_tool("oracle").main([*args, "--out", str(want), "--quiet"]) == 0
    wanted = want.read_text().splitlines()
    if after is not None:  # queries registered mid-stream: their report times after registration
        wanted = [ln for ln in wanted if json.loads(ln)["t"] > after[json.loads(ln)["query"]]]
    (tmp_path / "w.jsonl").write_text("\n".join(wanted) + "\n")
    (tmp_path / "g.jsonl").write_text(got_text)
    rc = load_tool("compare_results").main([str(tmp_path / "w.jsonl"), str(tmp_path / "g.jsonl")])
    assert rc == 0, capsys.readouterr().out
    return by_query("\n".join(wanted))


def test_ranges_and_constants_share_one_join_and_equal_the_oracle(trimmed, tmp_path, capsys):
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    props = properties(d / f"{TRAFFIC[0]}.nq", 4)
    queries: dict[str, str] = {}
    for i, rng in enumerate(RANGES):
        for j, p in enumerate(props):
            name = f"p{i}_{j}"
            queries[name] = prop_query(TRAFFIC[0], p, rng, "cqels" if (i + j) % 2 else "rspql", name)
    for r1, r2 in [(1000, 3000), (3000, 1000), (2000, 2000), (5000, 4000)]:
        queries[f"q{r1}_{r2}"] = two_ranges(r1, r2, f"q{r1}_{r2}")
    # aggregates, filters and ASK above routed joins, with several ranges
    for k in (1, 2, 3):
        for rng in (2000, 4000):
            queries[f"t{k}_{rng}"] = template_query(k, TRAFFIC[0], TRAFFIC[1], rng, 1000, 0.01, "cqels", "x")
    queries["alpha"] = alpha(two_ranges(2000, 2000, "alpha"))
    eng, buf = run_linkstream(queries, streams, static)
    want = oracle_compare(queries, buf.getvalue(), streams, static, tmp_path, capsys)
    assert sum(1 for q in queries if q.startswith("p") and want.get(q)) >= 10  # not vacuous
    routers = [op for op in eng.operators.values() if isinstance(op, RouterOperator)]
    joins = [op for op in eng.operators.values() if isinstance(op, MJoinOperator)]
    # one shared join for the 20 constant/range queries, one for the two-window shape
    # (Q1 and the renamed copy), one per filter constant/template of t1..t3
    assert len(routers) == len(joins) <= 5, [j.describe() for j in joins]


def test_fifty_queries_five_ranges_ten_constants_one_join(trimmed):
    d, static = trimmed
    eng = Engine()
    eng.add_static(None, load_graph(str(static), eng.dictionary))
    props = properties(d / f"{TRAFFIC[0]}.nq", 10)
    props += [f"ses:Extra{k}" for k in range(10 - len(props))]
    base = eng.operator_count()
    names = []
    for j, p in enumerate(props):
        for rng in RANGES[::-1] if j % 2 else RANGES:  # growing and shrinking ranges
            names.append(f"q{j}_{rng}")
            eng.register(
                parse_continuous(prop_query(TRAFFIC[0], p, rng, "cqels", names[-1]), default_name=names[-1])
            )
    ops = list(eng.operators.values())
    assert sum(isinstance(op, MJoinOperator) for op in ops) == 1
    assert sum(isinstance(op, RouterOperator) for op in ops) == 1
    assert sum(isinstance(op, ScanOperator) for op in ops) == 3
    (router,) = [op for op in ops if isinstance(op, RouterOperator)]
    assert len(router.groups) == 50
    assert max(w.spec.range_ms for w in router.windows) == 5000
    for n in names:
        eng.unregister(n)
    assert eng.operator_count() == base == 0
    assert all(not b.windows for b in eng.buffers.values())
    assert not eng._sharing._instances


def test_alpha_renamed_queries_share_scans_and_joins(trimmed):
    d, static = trimmed
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    for k, dialect in enumerate(["csparql", "cqels"]):
        q = template_query(0, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.01, dialect, f"a{k}")
        eng.register(parse_continuous(q, default_name=f"a{k}"))
        before = [type(op).__name__ for op in eng.operators.values()]
        eng.register(parse_continuous(alpha(q).replace(f"a{k} AS", f"b{k} AS"), default_name=f"b{k}"))
        after = [type(op).__name__ for op in eng.operators.values()]
        for kind in ("MJoinOperator", "ScanOperator", "TimedScanOperator", "WindowOperator", "GraphOperator"):
            assert after.count(kind) == before.count(kind), kind
        assert after.count("RenameOperator") > before.count("RenameOperator")
    # ?s :p ?o and ?x :p ?y: one scan
    eng2 = Engine()
    for k, (a, b) in enumerate([("s", "o"), ("x", "y")]):
        q = f"{PFX}SELECT * WHERE {{ STREAM ses:{TRAFFIC[0]} [TRIPLES 5] {{ ?{a} sao:hasValue ?{b} }} }}"
        eng2.register(parse_continuous(q, default_name=f"s{k}"))
    assert sum(isinstance(op, ScanOperator) for op in eng2.operators.values()) == 1


def test_mid_stream_registration_with_larger_and_smaller_ranges(trimmed, tmp_path, capsys):
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    props = properties(d / f"{TRAFFIC[0]}.nq", 3)
    early = {f"e{j}": prop_query(TRAFFIC[0], p, 2000, "cqels", f"e{j}") for j, p in enumerate(props)}
    early["eq"] = two_ranges(2000, 3000, "eq")
    late = {
        "big": prop_query(TRAFFIC[0], props[0], 5000, "cqels", "big"),  # needs a larger join
        "small": prop_query(TRAFFIC[0], props[1], 1000, "cqels", "small"),  # fits the running one
        "same": prop_query(TRAFFIC[0], props[2], 2000, "rspql", "same"),  # an existing group
        "after_big": prop_query(TRAFFIC[0], props[2], 4000, "cqels", "after_big"),
        "lq": two_ranges(1000, 1000, "lq"),
    }
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    queries = [eng.register(parse_continuous(t, default_name=n)) for n, t in early.items()]
    rows: list[str] = []
    at: dict[str, int] = {n: 0 for n in early}

    def sink(q, c, lines):
        rows.extend(lines)
        if q.name == "e0" and q.stats.reports == 8:
            for n, t in late.items():
                queries.append(eng.register(parse_continuous(t, default_name=n)))
                at[n] = c

    _replay_with_dynamic(eng, queries, streams, sink)
    assert all(at[n] for n in late)
    got = "\n".join(rows) + "\n"
    want = oracle_compare({**early, **late}, got, streams, static, tmp_path, capsys, after=at)
    assert all(want.get(n) for n in ("big", "small", "same", "after_big"))
    routers = [op for op in eng.operators.values() if isinstance(op, RouterOperator)]
    assert len(routers) == 3  # prop shape: the started 2 s join + a 5 s one; Q1 shape: one
    before = eng.operator_count()
    for n in late:
        eng.unregister(n)
    assert eng.operator_count() < before
    for n in early:
        eng.unregister(n)
    assert eng.operator_count() == 0


# ----------------------------------------------------------------- property test

_EX = "http://linkstream.example/r#"


@st.composite
def _stream_and_queries(draw):
    n = draw(st.integers(1, 14))
    t, elements = 0, []
    for _ in range(n):
        t += draw(st.sampled_from([0, 250, 500, 750, 1000, 1500, 1700]))
        trs = draw(
            st.lists(
                st.tuples(st.sampled_from("abc"), st.sampled_from("pq"), st.sampled_from("abc12")),
                max_size=4,
            )
        )
        elements.append((t, trs))
    shapes = [
        "?x :p ?y . ?y :q ?z",
        "?x :p :{c} . ?x :q ?z",
        "?x :p ?y . ?x :q :{c}",
        "?x :p ?y . ?y :p ?x",
    ]
    # time windows, count windows (``[TRIPLES n]``: routed too, by buffer position), and
    # queries whose two blocks read a time and a count window of the stream
    windows = st.one_of(
        st.sampled_from([500, 1000, 2000, 3500]).map(lambda r: f"[RANGE {r}ms SLIDE 500ms]"),
        st.sampled_from([1, 2, 3, 5, 8]).map(lambda n: f"[TRIPLES {n}]"),
    )
    queries = []
    for _ in range(draw(st.integers(1, 6))):
        shape = draw(st.sampled_from(shapes)).format(c=draw(st.sampled_from("abc12")))
        w = draw(windows)
        if draw(st.integers(0, 4)) == 0:  # two blocks, each with its own window
            a, b = shape.split(" . ")
            body = f"STREAM :s {w} {{ {a} }} STREAM :s {draw(windows)} {{ {b} }}"
        else:
            body = f"STREAM :s {w} {{ {shape} }}"
        queries.append(body)
    return elements, queries


def _run(elements, queries, share: bool, path: str) -> list[str]:
    eng = Engine()
    eng.share = share
    rqs = []
    for k, body in enumerate(queries):
        if isinstance(body, tuple):  # (shape, range): one time window
            body = f"STREAM :s [RANGE {body[1]}ms SLIDE 500ms] {{ {body[0]} }}"
        text = f"PREFIX : <{_EX}> SELECT * WHERE {{ {body} }}"
        rqs.append(eng.register(parse_continuous(text, default_name=f"q{k}")))
    buf = io.StringIO()
    replay(eng, rqs, [(_EX + "s", path)], buf)
    return sorted(buf.getvalue().splitlines())


@settings(max_examples=60, deadline=None)
@given(_stream_and_queries())
def test_router_output_equals_unshared_evaluation(case):
    elements, queries = case
    lines = []
    for k, (t, trs) in enumerate(elements):
        g = f"<{_EX}el{k}>"
        lines.append(f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "{_iso(t)}"^^<{_XSD}dateTime> .')
        for s, p, o in trs:
            obj = f'"{o}"^^<{_XSD}integer>' if o.isdigit() else f"<{_EX}{o}>"
            lines.append(f"<{_EX}{s}> <{_EX}{p}> {obj} {g} .")
    with tempfile.NamedTemporaryFile("w", suffix=".nq", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        assert _run(elements, queries, True, f.name) == _run(elements, queries, False, f.name)
    finally:
        os.unlink(f.name)


_XSD = "http://www.w3.org/2001/XMLSchema#"


def _iso(ms: int) -> str:
    base = datetime.datetime(2014, 8, 1, tzinfo=datetime.UTC)
    return (base + datetime.timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_repeated_triples_keep_one_join_row_per_binding():
    """A triple repeated in every element is one row of the shared join (its latest
    timestamp), not one row per combination of occurrences."""
    lines = []
    for k in range(40):
        g = f"<{_EX}el{k}>"
        lines.append(f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "{_iso(100 * k)}"^^<{_XSD}dateTime> .')
        lines += [f"<{_EX}a> <{_EX}p> <{_EX}b> {g} .", f"<{_EX}b> <{_EX}q> <{_EX}c> {g} ."]
    with tempfile.NamedTemporaryFile("w", suffix=".nq", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        eng = Engine()
        rqs = [
            eng.register(
                parse_continuous(
                    f"PREFIX : <{_EX}> SELECT * WHERE {{ STREAM :s [RANGE {r}ms SLIDE 500ms] {{ ?x :p ?y . ?y :q ?z }} }}",
                    default_name=f"r{r}",
                )
            )
            for r in (1000, 3000)
        ]
        buf = io.StringIO()
        replay(eng, rqs, [(_EX + "s", f.name)], buf)
    finally:
        os.unlink(f.name)
    (router,) = [op for op in eng.operators.values() if isinstance(op, RouterOperator)]
    rows = router.rows()
    assert len(rows) == 1 and rows.counts.tolist() == [1]
    got = by_query(buf.getvalue())
    assert len(got["r1000"]) == len(got["r3000"]) > 5  # one row per report time each


def test_joins_of_other_shapes_read_one_timed_window_per_stream_and_step():
    """The shared joins of different signatures over one stream and step read one timed
    window and one latest graph, grown to the largest range asked before the windows start
    (before, one per range their creator had: 1 s and 3 s here); a larger range asked once
    they slide gets a window of its own.  Results equal the unshared evaluation."""
    from linkstream.operators.router import LatestGraphOperator
    from linkstream.operators.timed_window import TimedWindowOperator

    lines = []
    for k in range(24):
        g = f"<{_EX}el{k}>"
        lines.append(f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "{_iso(400 * k)}"^^<{_XSD}dateTime> .')
        lines += [
            f"<{_EX}a{k % 3}> <{_EX}p> <{_EX}b{k % 2}> {g} .",
            f"<{_EX}b{k % 2}> <{_EX}q> <{_EX}c{k % 4}> {g} .",
        ]
        lines.append(f"<{_EX}a{k % 3}> <{_EX}q> <{_EX}c{k % 5}> {g} .")
    queries = [
        ("?x :p ?y . ?y :q ?z", 1000),
        ("?x :p ?y . ?x :q ?z", 3000),
        ("?x :p ?y . ?y :q ?z", 2000),
        ("?x :p :b1 . ?x :q ?z", 2500),
    ]
    with tempfile.NamedTemporaryFile("w", suffix=".nq", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    try:
        eng = Engine()
        for k, (shape, rng) in enumerate(queries):
            text = (
                f"PREFIX : <{_EX}> SELECT * WHERE {{ STREAM :s [RANGE {rng}ms SLIDE 500ms] {{ {shape} }} }}"
            )
            eng.register(parse_continuous(text, default_name=f"q{k}"))
        ops = list(eng.operators.values())
        timed = [op for op in ops if isinstance(op, TimedWindowOperator)]
        assert len(timed) == 1 and timed[0].spec.range_ms == 3000
        assert sum(isinstance(op, LatestGraphOperator) for op in ops) == 1
        assert sum(isinstance(op, RouterOperator) for op in ops) == 3
        shared = _run([], queries, True, f.name)
        assert shared == _run([], queries, False, f.name)
        assert len({line.split(",")[0] for line in shared}) == 4 and len(shared) > 100
    finally:
        os.unlink(f.name)
