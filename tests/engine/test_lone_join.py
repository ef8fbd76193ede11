"""A lone query's routable join is planned on its own, and switched to the shared join +
router when a second query of its signature arrives (:mod:`linkstream.operators.switch`).

Every report of every query must be what it is when the queries are routed from the start
(``Engine(lone_joins=False)``, the default) and when nothing is shared (``Engine.share`` off), whatever
the moment the second query comes -- before the first report, mid-stream, after its windows
emptied -- and whatever the first query's result then.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.engine.embedded import Engine
from linkstream.operators.router import RouterOperator
from linkstream.operators.switch import SwitchOperator
from linkstream.query.continuous import parse_continuous

EX = "http://linkstream.example/lone#"
S1, S2 = EX + "s1", EX + "s2"

#: join shapes over one or two streams; ``{c}`` a constant the router generalises
SHAPES = [
    "STREAM :s1 [RANGE {r}ms SLIDE 500ms] {{ ?x :p ?y . ?y :q ?z }}",
    "STREAM :s1 [RANGE {r}ms SLIDE 500ms] {{ ?x :p :{c} . ?x :q ?z }}",
    "STREAM :s1 [RANGE {r}ms SLIDE 500ms] {{ ?x :p ?y }} STREAM :s2 [RANGE {r2}ms SLIDE 500ms] {{ ?y :q ?z }}",
    "STREAM :s1 [RANGE {r}ms SLIDE 500ms] {{ ?x :p ?y . ?x :q :{c} }} "
    "STREAM :s2 [RANGE {r2}ms SLIDE 500ms] {{ ?y :p ?w }}",
]


def _text(shape: int, rng: int, rng2: int, c: str, form: str) -> str:
    where = SHAPES[shape].format(r=rng, r2=rng2, c=c)
    if form == "istream":
        # RSP-QL's ISTREAM has the same windows: its report is the result's delta, which a
        # switch must keep exact too (an RStream report is the whole result)
        return (
            f"PREFIX : <{EX}> REGISTER ISTREAM <q> AS SELECT * "
            + " ".join(
                f"FROM NAMED WINDOW :w{i} ON :s{i} [RANGE PT{r / 1000:g}S STEP PT0.5S]"
                for i, r in ((1, rng), (2, rng2))
                if f":s{i}" in where
            )
            + " WHERE { "
            + where.replace(f"STREAM :s1 [RANGE {rng}ms SLIDE 500ms]", "WINDOW :w1").replace(
                f"STREAM :s2 [RANGE {rng2}ms SLIDE 500ms]", "WINDOW :w2"
            )
            + " }"
        )
    return f"PREFIX : <{EX}> SELECT * WHERE {{ {where} }}"


@st.composite
def _case(draw):
    t, elements = 0, []
    for _ in range(draw(st.integers(1, 12))):
        t += draw(st.sampled_from([0, 250, 500, 750, 1000, 1700]))
        trs = draw(
            st.lists(
                st.tuples(st.sampled_from("abc"), st.sampled_from("pq"), st.sampled_from("abc1")),
                max_size=4,
            )
        )
        elements.append((t, draw(st.sampled_from([S1, S2])), trs))
    shape = draw(st.integers(0, len(SHAPES) - 1))
    form = draw(st.sampled_from(["select", "istream"]))
    queries = []
    for _ in range(draw(st.integers(2, 4))):
        rng, rng2 = draw(st.sampled_from([500, 1000, 2500])), draw(st.sampled_from([500, 1500]))
        c = draw(st.sampled_from("abc"))
        queries.append((_text(shape, rng, rng2, c, form), draw(st.integers(0, 14))))
    queries[0] = (queries[0][0], 0)  # the lone one is there from the start
    drop = draw(st.sampled_from([None, 1]))  # the second one may leave again
    return elements, queries, drop


def _run(case, mode: str) -> tuple[dict[str, list], Engine]:
    elements, queries, drop = case
    eng = Engine(lone_joins=mode == "lone")
    eng.share = mode != "unshared"
    enc = eng.dictionary.encode
    out: dict[str, list] = {}
    end = (elements[-1][0] // 500 + 8) * 500
    todo = list(elements)
    for step, c in enumerate(range(500, end + 1, 500)):
        for k, (text, at) in enumerate(queries):
            if at == step:
                text = text.replace("ISTREAM <q>", f"ISTREAM <q{k}>")
                eng.register(parse_continuous(text, default_name=f"q{k}"))
        if drop is not None and step == 10 and f"q{drop}" in eng.queries:
            eng.unregister(f"q{drop}")
        while todo and todo[0][0] < c:
            t, s, trs = todo.pop(0)
            rows = [[enc(f"<{EX}{a}>"), enc(f"<{EX}{p}>"), enc(f"<{EX}{o}>")] for a, p, o in trs]
            eng.ingest(s, t, np.array(rows, dtype=np.int64).reshape(-1, 3))
        res = eng.tick(c, list(eng.queries))
        for n in eng.queries:
            out.setdefault(n, []).append((c, sorted(res[n])))
    return out, eng


@settings(max_examples=80, deadline=None)
@given(_case())
def test_lone_join_switched_to_a_router_reports_as_routed_from_the_start(case):
    got, eng = _run(case, "lone")
    assert got == _run(case, "routed")[0]
    assert got == _run(case, "unshared")[0]


TRIPLES = [
    ("a", "p", "b"),
    ("b", "q", "c"),
    ("a", "q", "a"),
    ("c", "p", "a"),
    ("c", "q", "b"),
    ("b", "p", "c"),
]


def _case_of(shape: int, late: int, form: str = "select") -> tuple:
    elements = [
        (t, S1, TRIPLES[: 2 + k % 5]) if k % 3 else (t, S2, TRIPLES)
        for k, t in enumerate(range(0, 6000, 350))
    ]
    queries = [(_text(shape, 2500, 1500, "a", form), 0), (_text(shape, 1000, 500, "b", form), late)]
    return elements, queries, None


def test_a_lone_query_runs_without_a_router_until_a_second_one_comes() -> None:
    case = _case_of(2, 6)
    elements, queries, _ = case
    eng = Engine(lone_joins=True)
    rq = eng.register(parse_continuous(queries[0][0], default_name="q0"))
    assert not any(isinstance(op, RouterOperator) for op in eng.operators.values())
    (sw,) = [op for op in rq.ops if isinstance(op, SwitchOperator)]
    assert not sw.switched
    eng.register(parse_continuous(queries[1][0], default_name="q1"))
    routers = [op for op in eng.operators.values() if isinstance(op, RouterOperator)]
    assert len(routers) == 1 and len(routers[0].groups) == 2  # both queries on one router
    assert sw.switched and any(isinstance(op, RouterOperator) for op in eng.queries["q0"].ops)
    # the direct join's windows are gone: only the shared join's timed windows are left
    assert all(type(w).__name__ == "TimedWindowOperator" for w in eng.live_windows())


def test_switch_mid_stream_keeps_every_report_exact() -> None:
    for shape in range(len(SHAPES)):
        for form in ("select", "istream"):
            case = _case_of(shape, 6, form)
            got, eng = _run(case, "lone")
            # not vacuous: the first query reports rows before and after the switch
            assert sum(len(lines) for c, lines in got["q0"] if c < 3500) > 0, (shape, form)
            if form == "select":  # (the stream repeats itself: IStream reports nothing new)
                assert sum(len(lines) for c, lines in got["q0"] if c >= 3500) > 0, (shape, form)
            assert got == _run(case, "routed")[0], (shape, form)
            assert got == _run(case, "unshared")[0], (shape, form)
            assert any(isinstance(op, SwitchOperator) and op.switched for op in eng.queries["q0"].ops)
