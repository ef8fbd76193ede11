"""Shared joins whose queries differ in a constant of a *static* pattern.

``<u> foaf:knows ?f`` joined with stream windows: the constant becomes a hidden variable
of the shared join (one join for every user), and a constant that occurs in a window
pattern too becomes the same hidden variable (a join between them).  The router splits
the rows per (window ranges, constant) group in one vectorised pass.  Every query's
output must equal its evaluation on its own operators.
"""

from __future__ import annotations

import io
import sys
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.router import RouterOperator
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.engine.test_router import _XSD, _iso

_EX = "http://linkstream.example/s#"
_REPO = Path(__file__).resolve().parents[2]


def _run_texts(texts: dict[str, str], static: str, streams: list[tuple[str, str]], share: bool):
    eng = Engine()
    eng.share = share
    eng.add_static(None, load_graph(static, eng.dictionary))
    rqs = [eng.register(parse_continuous(t, default_name=n)) for n, t in texts.items()]
    buf = io.StringIO()
    replay(eng, rqs, streams, buf)
    return eng, buf.getvalue()


@st.composite
def _case(draw):
    t, elements = 0, []
    for _ in range(draw(st.integers(1, 12))):
        t += draw(st.sampled_from([0, 300, 500, 1000, 1700]))
        trs = draw(
            st.lists(
                st.tuples(st.sampled_from("abcd"), st.sampled_from("pq"), st.sampled_from("abcd")), max_size=4
            )
        )
        elements.append((t, trs))
    static = draw(
        st.lists(st.tuples(st.sampled_from("abcd"), st.sampled_from("abcd")), min_size=1, max_size=8)
    )
    shapes = [
        ":{c} :k ?y . ?x :p ?y",  # a static constant partnering a window variable
        ":{c} :p ?y . ?y :q ?z . :{c} :k ?z",  # the same constant in a window and a static pattern
        ":{c} :p ?y . ?y :q ?z . :{d} :k ?z",  # two constants
        "?x :p ?y . ?y :q ?z . :{c} :k ?x",  # a Q10 shape
    ]
    queries = []
    for _ in range(draw(st.integers(1, 7))):
        shape = draw(st.sampled_from(shapes)).format(
            c=draw(st.sampled_from("abcd")), d=draw(st.sampled_from("abcd"))
        )
        queries.append((shape, draw(st.sampled_from([500, 1000, 2000])), draw(st.booleans())))
    return elements, static, queries


@settings(max_examples=40, deadline=None)
@given(_case())
def test_static_constants_shared_join_equals_unshared_evaluation(case):
    elements, static, queries = case
    lines = []
    for k, (t, trs) in enumerate(elements):
        g = f"<{_EX}el{k}>"
        lines.append(f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "{_iso(t)}"^^<{_XSD}dateTime> .')
        lines += [f"<{_EX}{s}> <{_EX}{p}> <{_EX}{o}> {g} ." for s, p, o in trs]
    texts = {}
    for k, (shape, rng, count) in enumerate(queries):
        sel = "SELECT ?y (COUNT(?z) AS ?n)" if count and "?z" in shape else "SELECT *"
        group = " GROUP BY ?y" if count and "?z" in shape else ""
        texts[f"q{k}"] = (
            f"PREFIX : <{_EX}> {sel} WHERE {{ STREAM :s [RANGE {rng}ms SLIDE 500ms] {{ {shape} }} }}{group}"
        )
    with tempfile.TemporaryDirectory() as tmp:
        sp, st_path = Path(tmp) / "s.nq", Path(tmp) / "static.nt"
        sp.write_text("\n".join(lines) + "\n")
        st_path.write_text("".join(f"<{_EX}{a}> <{_EX}k> <{_EX}{b}> .\n" for a, b in static))
        streams = [(_EX + "s", str(sp))]
        _, shared = _run_texts(texts, str(st_path), streams, True)
        _, alone = _run_texts(texts, str(st_path), streams, False)
    assert sorted(shared.splitlines()) == sorted(alone.splitlines())


def test_lsbench_users_share_one_join_per_shape(tmp_path):
    """LSBench Q5 / Q10 queries of many users and window ranges: one join per shape (the
    user constant of ``<u> foaf:knows ?f`` is a hidden variable), output equal to every
    query on its own operators."""
    sys.path.insert(0, str(_REPO))
    from bench import lsbench

    ds = lsbench.generate(tmp_path, 150, 8, 0.5, 12, 3)
    texts = lsbench.workload("mixed", 48, 150, "time", 3)
    streams = [(lsbench.STREAMS[s], str(p)) for s, p in ds.streams.items()]
    eng, shared = _run_texts(texts, str(ds.static), streams, True)
    _, alone = _run_texts(texts, str(ds.static), streams, False)
    assert shared.count("\n") > 100  # not vacuous
    assert shared == alone
    routers = [op for op in eng.operators.values() if isinstance(op, RouterOperator)]
    joins = [op for op in eng.operators.values() if isinstance(op, MJoinOperator)]
    assert len(routers) == len(joins) == 3, [j.describe() for j in joins]  # Q4, Q5, Q10
    assert sum(g.refs for r in routers for g in r.groups.values()) == 36  # every Q4 / Q5 / Q10 query
    for name in list(texts):
        eng.unregister(name)
    assert eng.operator_count() == 0


def _dynamic(
    texts: dict[str, str], static: str, streams, share: bool, late: set[str], gone: set[str]
) -> list[str]:
    """Ticks every second over ``streams``; ``late`` queries register at the 4th report
    time, ``gone`` ones unregister at the 7th.  The lines of every report, in order."""
    from linkstream.rdf.streams import StreamReader

    eng = Engine()
    eng.share = share
    eng.add_static(None, load_graph(static, eng.dictionary))
    for n, t in texts.items():
        if n not in late:
            eng.register(parse_continuous(t, default_name=n))
    els = sorted(
        (el.t, k, el.triples)
        for k, (iri, path) in enumerate(streams)
        for el in StreamReader(path, eng.dictionary, bnode_prefix=f"st{k}_")
    )
    out: list[str] = []
    c = (els[0][0] // 1000 + 1) * 1000
    i = n_tick = ticks = 0
    while i < len(els) or n_tick < 3:
        while i < len(els) and els[i][0] < c:
            eng.ingest(streams[els[i][1]][0], els[i][0], els[i][2])
            i += 1
        res = eng.tick(c, set(eng.queries))
        out += [line for name in sorted(eng.queries) for line in res[name]]
        n_tick = n_tick + 1 if i >= len(els) else 0
        ticks += 1
        if ticks == 4:
            for n in sorted(late):
                eng.register(parse_continuous(texts[n], default_name=n))
        if ticks == 7:
            for n in sorted(gone):
                eng.unregister(n)
        c += 1000
    return out


def test_routed_aggregates_with_queries_coming_and_going(tmp_path):
    """COUNT ... GROUP BY over a shared join's routes (one aggregate for all groups): late
    registrations (a new group, an existing group, a new aggregate) and unregistrations
    give every query the lines of its evaluation on its own operators."""
    sys.path.insert(0, str(_REPO))
    from bench import lsbench

    ds = lsbench.generate(tmp_path, 120, 14, 0.6, 15, 5)
    texts = {k: v for k, v in lsbench.workload("mixed", 60, 120, "time", 5).items() if k.startswith("q10")}
    names = sorted(texts)
    texts["twin"] = texts[names[0]].replace("?likes", "?n")  # same group, other variable names
    late = {names[1], names[2], "twin"}
    gone = {names[0], names[3], names[4]}
    streams = [(lsbench.STREAMS[s], str(p)) for s, p in ds.streams.items()]
    shared = _dynamic(texts, str(ds.static), streams, True, late, gone)
    alone = _dynamic(texts, str(ds.static), streams, False, late, gone)
    assert sum('"query": "twin"' in line for line in shared) > 3  # not vacuous
    assert shared == alone
    # the router ran without any aggregate until the counting queries came
    plain = texts[names[5]].replace("(COUNT(?liker) AS ?likes)", "?liker").replace("GROUP BY ?creator", "")
    texts2 = {"a_plain": plain, **{n: texts[n] for n in names[5:9]}}
    late2 = set(names[5:9])
    shared = _dynamic(texts2, str(ds.static), streams, True, late2, {names[6]})
    alone = _dynamic(texts2, str(ds.static), streams, False, late2, {names[6]})
    assert sum(f'"query": "{names[5]}"' in line for line in shared) > 3
    assert shared == alone


def test_routed_queries_whose_group_did_not_change_are_not_evaluated(tmp_path):
    """A report evaluates the router once for all of its groups; the queries whose group's
    result did not change are not looked at (their lines come from the repeated rows)."""
    sys.path.insert(0, str(_REPO))
    from bench import lsbench
    from linkstream.rdf.streams import StreamReader

    ds = lsbench.generate(tmp_path, 150, 10, 0.5, 12, 4)
    texts = {
        k: v for k, v in lsbench.workload("mixed", 80, 150, "time", 4).items() if not k.startswith("q1_")
    }
    eng = Engine()
    eng.add_static(None, load_graph(str(ds.static), eng.dictionary))
    for n, t in texts.items():
        eng.register(parse_continuous(t, default_name=n))
    streams = [(lsbench.STREAMS[s], str(p)) for s, p in ds.streams.items()]
    els = sorted(
        (el.t, k, el.triples)
        for k, (iri, path) in enumerate(streams)
        for el in StreamReader(path, eng.dictionary, bnode_prefix=f"st{k}_")
    )
    c, i, skipped, written = (els[0][0] // 1000 + 1) * 1000, 0, 0, 0
    while i < len(els):
        while i < len(els) and els[i][0] < c:
            eng.ingest(streams[els[i][1]][0], els[i][0], els[i][2])
            i += 1
        res = eng.tick(c, set(texts))
        written += sum(len(res[n]) for n in texts)
        skipped += sum(eng.queries[n].output.view._epoch_seen() != eng.epoch for n in texts)
        c += 1000
    assert written > 50 and skipped > len(texts)  # idle routed queries were left alone
