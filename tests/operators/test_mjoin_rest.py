"""MJoin whose partial result reaches the rest of its inputs only through a high-fanout
input (a star pattern, a static relation on a generalised constant, another star): joining
the rest as one cached component equals probing input by input and a join recomputed
from scratch, epoch after epoch; and the path is taken (fewer intermediate rows)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import mjoin as M
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.relation import Relation
from tests.operators.test_incremental_properties import Feed, as_counter, naive_join

#: star 1 {o1-p1, o1-v1}, static {p1-h} and {p2-h} (h: the shared class), star 2 {o2-p2, o2-v2}
VARS = [("o1", "p1"), ("o1", "v1"), ("p1", "h"), ("p2", "h"), ("o2", "p2"), ("o2", "v2")]
STATIC = {2, 3}
#: every property of 1..40 has class 1 or 2: about 20 rows per class value
PROPS = [(p, 1 + p % 2) for p in range(1, 41)]

small = st.integers(min_value=1, max_value=4)
prop = st.integers(min_value=1, max_value=40)
#: per epoch, for each stream input: (insert?, rows)
epoch_st = st.lists(
    st.tuples(st.booleans(), st.lists(st.tuples(small, prop), min_size=0, max_size=3)),
    min_size=4,
    max_size=4,
)


def _run(epochs, fanout: int) -> tuple[Counter, MJoinOperator]:
    feeds = [Feed(v) for v in VARS]
    j = MJoinOperator(feeds)
    acc = Relation(j.vars)
    old = M.REST_FANOUT
    M.REST_FANOUT = fanout
    try:
        for k in STATIC:
            feeds[k].push(PROPS, +1)
        streams = [f for i, f in enumerate(feeds) if i not in STATIC]
        for epoch, ops in enumerate(epochs, 1):
            for f, (insert, rows) in zip(streams, ops):
                rows = [r if f.vars[1] in ("p1", "p2") else (r[0], r[1] % 5) for r in rows]
                if insert or not f.content:
                    f.push(rows, +1)
                else:
                    existing = list(f.content.elements())
                    f.push(existing[: max(1, len(existing) // 2)], -1)
            acc.apply(j.delta(epoch))
            expected, vs = naive_join([f.content for f in feeds], [f.vars for f in feeds])
            assert as_counter(acc.rows, vs) == +expected, f"epoch {epoch}"
            for f in feeds:
                f.push([], +1)
    finally:
        M.REST_FANOUT = old
    return as_counter(acc.rows, j.vars), j


@settings(max_examples=40, deadline=None)
@given(st.lists(epoch_st, min_size=1, max_size=6))
def test_rest_component_equals_probing(epochs):
    by_rest, _ = _run(epochs, 2)
    by_probe, _ = _run(epochs, 10**9)  # never: input by input
    assert by_rest == by_probe


def test_rest_component_cuts_intermediate_rows(monkeypatch):
    rows = {"n": 0}
    join = Relation.join

    def counting(self, probe, out_vars=None):
        out = join(self, probe, out_vars)
        rows["n"] += len(out)
        return out

    monkeypatch.setattr(Relation, "join", counting)
    epochs = [[(True, [(1, 3), (2, 4)]), (True, [(1, 7), (2, 8)]), (True, [(3, 5)]), (True, [(3, 9)])]] * 2
    got = {}
    for fanout in (2, 10**9):
        rows["n"] = 0
        got[fanout] = (_run(epochs, fanout)[0], rows["n"])
    assert got[2][0] == got[10**9][0] and sum(got[2][0].values()) > 0
    assert got[2][1] < got[10**9][1]


def test_fanout_is_counted_again_only_when_the_input_size_drifts():
    """The fan-out estimate (a sort of the whole input) is kept while the input's size stays
    within 1 / FANOUT_DRIFT of the size it was counted at, and counted again beyond."""
    feeds = [Feed(("a", "b")), Feed(("b", "c"))]
    j = MJoinOperator(feeds)
    feeds[0].push([(k, k % 4) for k in range(40)], +1)
    feeds[1].push([(0, 1)], +1)
    j.delta(1)
    assert j._fanout(0, ("b",)) == 10.0  # 40 rows, 4 values of b
    feeds[0].push([(100, 0), (101, 0)], +1)  # 42 rows: 5% more
    j.delta(2)
    assert len(j.state[0]) == 42
    assert j._fanout(0, ("b",)) == 10.0  # kept (counted now: 10.5)
    feeds[0].push([(200 + k, 4 + k % 4) for k in range(40)], +1)  # 82 rows, 8 values
    j.delta(3)
    assert j._fanout(0, ("b",)) == 82 / 8
