"""One shared join + router serves every report step of its subscribers.

Queries of one join shape that differ in their window steps (1 s and 2 s, or 1 s and
1.5 s) read one shared join over timed windows of the steps' common divisor; the router
gives each group the window instance of its own step (``[c_s - r, c_s)``, ``c_s`` the last
multiple of its step).  Before, the routed signature held the step: one join and one
router per step.  Results must equal the unshared evaluation of every query.
"""

from __future__ import annotations

import io
import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.router import RouterOperator
from linkstream.operators.timed_window import TimedWindowOperator
from linkstream.query.continuous import parse_continuous
from tests.engine.test_router import _EX, _XSD, _iso

SHAPES = [
    "?x :p ?y . ?y :q ?z",
    "?x :p :{c} . ?x :q ?z",
    "?x :p ?y . ?x :q :{c}",
]


def _file(elements: list[tuple[int, list[tuple[str, str, str]]]]) -> str:
    lines = []
    for k, (t, trs) in enumerate(elements):
        g = f"<{_EX}el{k}>"
        lines.append(f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "{_iso(t)}"^^<{_XSD}dateTime> .')
        for s, p, o in trs:
            obj = f'"{o}"^^<{_XSD}integer>' if o.isdigit() else f"<{_EX}{o}>"
            lines.append(f"<{_EX}{s}> <{_EX}{p}> {obj} {g} .")
    with tempfile.NamedTemporaryFile("w", suffix=".nq", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    return f.name


def _engine(queries: list[tuple[str, int, int]], share: bool) -> tuple[Engine, list]:
    eng = Engine()
    eng.share = share
    rqs = []
    for k, (shape, rng, step) in enumerate(queries):
        text = f"PREFIX : <{_EX}> SELECT * WHERE {{ STREAM :s [RANGE {rng}ms SLIDE {step}ms] {{ {shape} }} }}"
        rqs.append(eng.register(parse_continuous(text, default_name=f"q{k}")))
    return eng, rqs


def _run(queries: list[tuple[str, int, int]], share: bool, path: str) -> tuple[Engine, list[str]]:
    eng, rqs = _engine(queries, share)
    buf = io.StringIO()
    replay(eng, rqs, [(_EX + "s", path)], buf)
    return eng, sorted(buf.getvalue().splitlines())


@st.composite
def _stream_and_queries(draw):
    t, elements = 0, []
    for _ in range(draw(st.integers(1, 14))):
        t += draw(st.sampled_from([0, 250, 500, 750, 1000, 1500, 1700]))
        trs = draw(
            st.lists(
                st.tuples(st.sampled_from("abc"), st.sampled_from("pq"), st.sampled_from("abc12")),
                max_size=4,
            )
        )
        elements.append((t, trs))
    queries = []
    for _ in range(draw(st.integers(1, 6))):
        shape = draw(st.sampled_from(SHAPES)).format(c=draw(st.sampled_from("abc12")))
        queries.append(
            (shape, draw(st.sampled_from([500, 1000, 2000, 3500])), draw(st.sampled_from([500, 1000, 1500])))
        )
    return elements, queries


@settings(max_examples=80, deadline=None)
@given(_stream_and_queries())
def test_router_with_several_steps_equals_unshared_evaluation(case):
    elements, queries = case
    path = _file(elements)
    try:
        assert _run(queries, True, path)[1] == _run(queries, False, path)[1]
    finally:
        os.unlink(path)


def test_steps_of_one_shape_share_one_join_and_router():
    """Ranges 1-3 s, steps 1 s, 2 s and 1.5 s of one shape: one join, one router, one timed
    window of step 0.5 s covering every group (3 s at step 2 s reads back to c - 4.5 s);
    each query's lines equal its unshared evaluation, and a 2 s query reports only at
    multiples of 2 s."""
    elements = [
        (
            300 * k,
            [(f"a{k % 3}", "p", f"b{k % 2}"), (f"b{k % 2}", "q", f"c{k % 4}"), (f"a{k % 3}", "q", "c1")],
        )
        for k in range(40)
    ]
    queries = [
        ("?x :p ?y . ?y :q ?z", 1000, 1000),
        ("?x :p ?y . ?y :q ?z", 3000, 2000),
        ("?x :p ?y . ?y :q ?z", 2000, 1500),
        ("?x :p ?y . ?y :q ?z", 2000, 2000),
    ]
    path = _file(elements)
    try:
        eng, shared = _run(queries, True, path)
        ops = list(eng.operators.values())
        assert sum(isinstance(op, MJoinOperator) for op in ops) == 1
        (router,) = [op for op in ops if isinstance(op, RouterOperator)]
        assert len(router.groups) == 4
        (timed,) = [op for op in ops if isinstance(op, TimedWindowOperator)]
        assert (timed.step, timed.spec.range_ms) == (500, 4500)
        assert shared == _run(queries, False, path)[1]
        by_query: dict[str, set[int]] = {}
        for line in shared:
            q, t = line.split('"query": "')[1].split('"')[0], int(line.split('"t": ')[1].split(",")[0])
            by_query.setdefault(q, set()).add(t)
        assert all(len(by_query.get(f"q{k}", ())) > 3 for k in range(4))
        assert all(t % 2000 == 0 for t in by_query["q1"] | by_query["q3"])
        assert any(t % 2000 for t in by_query["q0"])
    finally:
        os.unlink(path)


def test_a_step_the_started_window_cannot_serve_gets_a_join_of_its_own():
    """Once the shared windows slide their step is fixed: a later query whose step it does
    not divide (1.5 s on a 1 s window) gets a new shared join and timed window (of step
    0.5 s, which would serve the first query too); one whose step it divides (2 s) joins
    the running one.  Results equal the unshared evaluation."""
    elements = [
        (250 * k, [(f"a{k % 3}", "p", f"b{k % 2}"), (f"b{k % 2}", "q", f"c{k % 4}")]) for k in range(60)
    ]
    path = _file(elements)
    try:
        shape = "?x :p ?y . ?y :q ?z"
        eng, rqs = _engine([(shape, 2000, 1000)], True)
        for c in (1000, 2000, 3000):  # the windows start sliding
            eng.tick(c, [rqs[0].name])
        for k, step in ((1, 2000), (2, 1500)):
            text = (
                f"PREFIX : <{_EX}> SELECT * WHERE {{ STREAM :s [RANGE 2000ms SLIDE {step}ms] {{ {shape} }} }}"
            )
            eng.register(parse_continuous(text, default_name=f"q{k}"))
        routers = [op for op in eng.operators.values() if isinstance(op, RouterOperator)]
        assert sorted(len(r.groups) for r in routers) == [1, 2]
        assert sorted(w.step for w in eng.operators.values() if isinstance(w, TimedWindowOperator)) == [
            500,
            1000,
        ]
        queries = [(shape, 2000, 1000), (shape, 2000, 2000), (shape, 2000, 1500)]
        assert _run(queries, True, path)[1] == _run(queries, False, path)[1]
    finally:
        os.unlink(path)


def test_a_step_that_would_widen_the_window_too_far_gets_a_join_of_its_own():
    """Ranges of 1 s at steps 1 s and 10 s would share a timed window of 10 s at step 1 s
    (``r + s - gcd``): ten times what either asks for.  Past ``STEP_WIDEN_MAX`` each such
    step gets its own join, router and window; steps that widen little (10 s ranges at 1 s
    and 2 s: 11 s) still share one.  Results equal the unshared evaluation either way."""
    elements = [
        (400 * k, [(f"a{k % 3}", "p", f"b{k % 2}"), (f"b{k % 2}", "q", f"c{k % 4}")]) for k in range(80)
    ]
    path = _file(elements)
    shape = "?x :p ?y . ?y :q ?z"
    try:
        for queries, joins, windows in (
            (
                [(shape, 1000, 1000), (shape, 1000, 10000), (shape, 1000, 5000)],
                3,
                [(1000, 1000), (1000, 5000), (1000, 10000)],
            ),
            ([(shape, 1000, 10000), (shape, 1000, 1000)], 2, [(1000, 1000), (1000, 10000)]),
            ([(shape, 10000, 1000), (shape, 10000, 2000)], 1, [(11000, 1000)]),
        ):
            eng, shared = _run(queries, True, path)
            ops = list(eng.operators.values())
            assert sum(isinstance(op, MJoinOperator) for op in ops) == joins, queries
            assert sum(isinstance(op, RouterOperator) for op in ops) == joins, queries
            timed = sorted((w.spec.range_ms, w.step) for w in ops if isinstance(w, TimedWindowOperator))
            assert timed == windows, queries
            assert shared == _run(queries, False, path)[1], queries
    finally:
        os.unlink(path)
