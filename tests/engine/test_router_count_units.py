"""Router units over count windows (issue 17): positions rebased into another buffer.

A count router's rows, its shared join's relations and its latest graph's occurrences
carry absolute positions in the stream buffer of the engine that built them.  A unit's
snapshot holds them relative to each count window's end; the engine that restores it
adds its own window end at the same report time.  Here a second engine, whose buffer
holds the same elements at other positions (older elements before them), restores the
unit of a running engine and reports, tick after tick, what the running engine reports.
A buffer whose window holds fewer triples, or other triples, than the snapshot's is not
restored (the first tick rebuilds the queries, as before): never a wrong restore.
"""

from __future__ import annotations

import numpy as np
import pytest

from linkstream.engine.embedded import Engine
from linkstream.operators.router import LatestGraphOperator, RouterOperator
from linkstream.operators.shared_state import restore_query_units, router_units, routers_of, snapshot_routers
from linkstream.operators.state import decode_state, encode_state
from linkstream.operators.timed_window import CountedWindowOperator
from linkstream.query.continuous import parse_continuous

EX = "http://example.org/"
S1, S2 = EX + "s1", EX + "s2"
INT = "http://www.w3.org/2001/XMLSchema#integer"
STEP = 1000
CUT = 30  # the snapshot's report time is CUT * STEP
END = 60


def _count(n: int, stream: str = S1) -> str:
    return f"SELECT ?x ?v ?w WHERE {{ STREAM <{stream}> [TRIPLES {n}] {{ ?x <{EX}p> ?v . ?x <{EX}q> ?w }} }}"


QUERIES = {
    **{f"c{n}": _count(n) for n in (6, 10, 17)},
    "agg": f"SELECT (COUNT(?w) AS ?k) WHERE {{ STREAM <{S1}> [TRIPLES 12] {{ ?x <{EX}p> ?v . ?x <{EX}q> ?w }} }}",
    # a count window and a time window on one router
    "mixed": f"SELECT ?x ?y WHERE {{ STREAM <{S1}> [TRIPLES 8] {{ ?x <{EX}p> ?v . ?x <{EX}q> ?w }} "
    f"STREAM <{S2}> [RANGE 3000ms SLIDE 1000ms] {{ ?y <{EX}p> ?x }} }}",
}


def _triples(i: int, stream: str, salt: int = 0) -> list[tuple[str, str, str]]:
    x = f"<{EX}x{i % 5}>"
    if stream == S2:
        return [(f"<{EX}y{i % 3}>", f"<{EX}p>", x)]
    return [(x, f"<{EX}p>", f'"{i % 4 + salt}"^^<{INT}>'), (x, f"<{EX}q>", f'"{i % 7}"^^<{INT}>')]


def _engine() -> Engine:
    eng = Engine()
    for name, text in QUERIES.items():
        eng.register(parse_continuous(text, default_name=name))
    return eng


def _push(eng: Engine, i: int, t: int | None = None, salt: int = 0) -> None:
    for s in (S1, S2):
        tr = _triples(i, s, salt)
        ids = eng.dictionary.encode_many([term for triple in tr for term in triple]).reshape(-1, 3)
        eng.buffer(s).append(i * STEP - 500 if t is None else t, np.asarray(ids, dtype=np.int64))


def _units(eng: Engine, c: int) -> list[tuple[list[str], object]]:
    routed = [(n, routers_of(eng.queries[n].root)) for n in QUERIES]
    out = []
    for names, routers in router_units(routed):
        st = snapshot_routers(eng, routers, c)
        out.append((names, decode_state([bytes(memoryview(f)) for f in encode_state(st)])))
    return out


def _running() -> tuple[Engine, dict[int, dict[str, list[str]]]]:
    """The engine that never stops: its lines per report time after the cut."""
    eng = _engine()
    lines: dict[int, dict[str, list[str]]] = {}
    for i in range(1, END + 1):
        _push(eng, i)
        got = eng.tick(i * STEP, list(QUERIES))
        if i > CUT:
            lines[i] = {n: list(got[n]) for n in QUERIES}
    return eng, lines


def _positions(eng: Engine) -> dict[str, np.ndarray]:
    """The count router's rows' position columns (sorted), per router description."""
    out = {}
    for op in eng.operators.values():
        if isinstance(op, RouterOperator) and any(isinstance(w, CountedWindowOperator) for w in op.windows):
            idx = [
                i for w, ix in zip(op.windows, op._ts_idx) if isinstance(w, CountedWindowOperator) for i in ix
            ]
            out[op.describe().split(" ")[0] + str(op.out_vars)] = np.sort(op.rows().cols[idx].reshape(-1))
    return out


@pytest.mark.parametrize("older", [0, 9])
def test_a_count_router_restored_into_another_buffer_reports_like_the_running_one(older: int) -> None:
    """``older`` elements before the run's first one put every triple ``2 * older``
    positions later in the restoring engine's buffer (the window's content is the same)."""
    want_eng = _engine()
    for i in range(1, CUT + 1):
        _push(want_eng, i)
        want_eng.tick(i * STEP, list(QUERIES))
    units = _units(want_eng, CUT * STEP)
    assert len(units) >= 1
    before = _positions(want_eng)
    assert before and all(len(v) for v in before.values())

    eng = _engine()
    for k in range(older):  # (outside every window at the cut: more than 17 triples older)
        _push(eng, 0, t=-(older - k) * STEP, salt=100)
    for i in range(1, CUT + 1):
        _push(eng, i)
    why = restore_query_units(eng, units, CUT * STEP)
    # every count query restored from its unit (before: "not routed here ... count windows")
    assert why == dict.fromkeys(QUERIES, ""), why
    # before any tick, the restored rows hold this buffer's positions: the old ones moved
    after = _positions(eng)
    assert after.keys() == before.keys()
    for key in before:
        assert np.array_equal(after[key], before[key] + 2 * older), key
    eng.tick(CUT * STEP, (), count_reports=False)  # the silent evaluation at the cut

    _, want = _running()
    for i in range(CUT + 1, END + 1):
        _push(eng, i)
        got = eng.tick(i * STEP, list(QUERIES))
        # (the same lines; their order follows dictionary ids, which differ between the two)
        assert {n: sorted(got[n]) for n in QUERIES} == {n: sorted(v) for n, v in want[i].items()}, i
    assert sum(len(v) for ls in want.values() for v in ls.values()) > 100  # not vacuous


@pytest.mark.parametrize("case", ["short", "other triples"])
def test_a_count_window_that_does_not_fit_the_snapshot_is_rebuilt(case: str) -> None:
    old = _engine()
    for i in range(1, CUT + 1):
        _push(old, i)
        old.tick(i * STEP, list(QUERIES))
    units = _units(old, CUT * STEP)

    eng = _engine()
    first = CUT - 3 if case == "short" else 1  # "short": 6 triples before the cut, the window holds 17
    for i in range(first, CUT + 1):
        _push(eng, i, salt=1 if case != "short" and i == CUT - 1 else 0)
    why = restore_query_units(eng, units, CUT * STEP)
    assert all(why[n] for n in QUERIES), why  # (one count window serves every query)
    text = " ".join(why.values())
    assert ("holds 17 triples in the snapshot, 8 here" if case == "short" else "triples differ") in text, why
    # nothing was restored: the first tick rebuilds the queries from this buffer
    routers = {id(r): r for n in QUERIES for r in routers_of(eng.queries[n].root)}
    assert all(not len(r.rows()) for r in routers.values())
    assert all(
        not len(op.occurrences) for op in eng.operators.values() if isinstance(op, LatestGraphOperator)
    )
