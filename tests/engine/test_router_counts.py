"""Count windows (``[TRIPLES n]``) on shared joins + routers: queries that differ in a
constant or in ``n`` share one join over one count window holding the largest ``n``
(rows carry the least buffer position of their triples), and each query's results equal
the oracle's and the unshared evaluation's."""

from __future__ import annotations

from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.router import RouterOperator
from linkstream.operators.shared_state import router_of
from linkstream.operators.timed_window import CountedWindowOperator
from tests.engine import test_sharing
from tests.engine.test_router import oracle_compare, properties
from tests.engine.test_sharing import PFX, SES, TRAFFIC, run_linkstream

trimmed = test_sharing.trimmed  # the fixture: the first 25 elements of three streams
COUNTS = [8, 20, 50, 120]


def count_query(stream: str, prop: str, n: int) -> str:
    """A count window, a constant observed property (the router splits on it)."""
    pats = f"?o ssn:observedProperty {prop} . ?o sao:hasValue ?v . ?o ssn:observedBy ?s ."
    return f"{PFX}SELECT ?o ?v ?s WHERE {{ STREAM ses:{stream} [TRIPLES {n}] {{ {pats} }} }}"


def mixed_query(n: int, rng: int) -> str:
    """Two streams, one read through a count window and one through a time window."""
    return (
        f"{PFX}SELECT ?o1 ?o2 ?s WHERE {{ "
        f"STREAM ses:{TRAFFIC[0]} [TRIPLES {n}] {{ ?o1 ssn:observedBy ?s . ?o1 sao:hasValue ?v1 . }} "
        f"STREAM ses:{TRAFFIC[1]} [RANGE {rng}ms SLIDE 1000ms] {{ ?o2 sao:hasValue ?v2 . }} }}"
    )


def _joins(eng) -> tuple[list, list]:
    ops = eng.operators.values()
    return [o for o in ops if isinstance(o, MJoinOperator)], [o for o in ops if isinstance(o, RouterOperator)]


def test_count_queries_differing_in_constants_and_n_share_one_join(trimmed, tmp_path, capsys):
    """16 count-window queries (4 properties x 4 counts): one join, one router, one count
    window (of the largest n); before, 16 joins.  Results equal the oracle's."""
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    props = properties(d / f"{TRAFFIC[0]}.nq", 4)
    queries = {
        f"c{i}_{j}": count_query(TRAFFIC[0], p, n) for i, n in enumerate(COUNTS) for j, p in enumerate(props)
    }
    eng, buf = run_linkstream(queries, streams, static)
    want = oracle_compare(queries, buf.getvalue(), streams, static, tmp_path, capsys)
    assert sum(1 for q in queries if want.get(q)) >= 8  # not vacuous
    joins, routers = _joins(eng)
    assert len(joins) == len(routers) == 1, [j.describe() for j in joins]
    (w,) = routers[0].windows
    assert isinstance(w, CountedWindowOperator) and w.spec.count == max(COUNTS)
    # a count router is a router unit (its positions are rebased on restore:
    # tests/engine/test_router_count_units.py)
    assert router_of(eng.queries["c0_0"].root) is routers[0]


def test_queries_with_a_count_and_a_time_window_share_one_join(trimmed, tmp_path, capsys):
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    queries = {f"m{n}_{r}": mixed_query(n, r) for n in (6, 15) for r in (1000, 3000)}
    eng, buf = run_linkstream(queries, streams, static)
    want = oracle_compare(queries, buf.getvalue(), streams, static, tmp_path, capsys)
    assert sum(1 for q in queries if want.get(q)) >= 3  # not vacuous
    joins, routers = _joins(eng)
    assert len(joins) == len(routers) == 1, [j.describe() for j in joins]
    assert sorted(type(w).__name__ for w in routers[0].windows) == [
        "CountedWindowOperator",
        "TimedWindowOperator",
    ]
