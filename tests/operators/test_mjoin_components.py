"""MJoin over inputs that form independent components (a cross product of star
patterns): the per-component recompute-and-diff path and the input-by-input probing
path both equal a join recomputed from scratch, epoch after epoch."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import mjoin as M
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.relation import Relation
from tests.operators.test_incremental_properties import Feed, as_counter, naive_join

#: two stars and a lone input: {a-b, b-c}, {x, x-y}, {z}
VARS = [("a", "b"), ("b", "c"), ("x",), ("x", "y"), ("z",)]

small = st.integers(min_value=1, max_value=3)
#: per epoch, for every input: (insert?, rows)
epoch_st = st.lists(
    st.tuples(st.booleans(), st.lists(st.tuples(small, small), min_size=0, max_size=3)),
    min_size=len(VARS),
    max_size=len(VARS),
)


def _push(feed: Feed, insert: bool, rows: list[tuple[int, int]]) -> None:
    if insert or not feed.content:
        feed.push([r[: len(feed.vars)] for r in rows], +1)
    else:
        existing = list(feed.content.elements())
        feed.push(existing[: max(1, len(existing) // 2)], -1)


def _run(epochs, component_max: int) -> tuple[Counter, Counter, MJoinOperator]:
    feeds = [Feed(v) for v in VARS]
    j = MJoinOperator(feeds)
    acc = Relation(j.vars)
    old = M.COMPONENT_MAX
    M.COMPONENT_MAX = component_max
    try:
        for epoch, ops in enumerate(epochs, 1):
            for f, (insert, rows) in zip(feeds, ops):
                _push(f, insert, rows)
            acc.apply(j.delta(epoch))
            expected, vs = naive_join([f.content for f in feeds], [f.vars for f in feeds])
            assert as_counter(acc.rows, vs) == +expected, f"epoch {epoch}"
    finally:
        M.COMPONENT_MAX = old
    return as_counter(acc.rows, j.vars), +expected, j


@settings(max_examples=60, deadline=None)
@given(st.lists(epoch_st, min_size=1, max_size=8))
def test_component_join_equals_recompute(epochs):
    by_comp, want, _ = _run(epochs, 4096)
    by_probe, _, _ = _run(epochs, -1)  # every epoch probed input by input
    assert by_comp == by_probe == want


def test_components_are_found_and_cached_per_version():
    epochs = [
        [(True, [(1, 2), (2, 2)]), (True, [(2, 5)]), (True, [(7, 7)]), (True, [(7, 8)]), (True, [(9, 9)])]
    ]
    epochs.append([(True, [(3, 2)]), (True, []), (True, []), (True, []), (True, [])])
    got, want, j = _run(epochs, 4096)
    assert got == want and len(want) == 3  # (1|3|2, 2, 5) x (7, 8) x (9)
    assert sorted(j._all_components()) == [(0, 1), (2, 3), (4,)]
    # the unchanged components' joins were reused: their cache entries are still current
    for comp in [(2, 3), (4,)]:
        rels, versions, _ = j._comp_cache[comp]
        assert versions == tuple(r.version for r in rels)


def test_current_and_empty_component():
    feeds = [Feed(v) for v in VARS]
    j = MJoinOperator(feeds)
    feeds[0].push([(1, 2)], +1)
    feeds[1].push([(2, 3)], +1)
    feeds[2].push([(4,)], +1)  # (x, y) stays empty: the whole join is empty
    feeds[4].push([(5,)], +1)
    assert len(j.delta(1)) == 0
    feeds[3].push([(4, 6)], +1)
    for f in (feeds[0], feeds[1], feeds[2], feeds[4]):
        f.push([], +1)
    d = j.delta(2)
    assert as_counter(d, j.vars) == Counter({(1, 2, 3, 4, 6, 5): 1})
    assert as_counter(j.current(), j.vars) == Counter({(1, 2, 3, 4, 6, 5): 1})


@pytest.mark.parametrize("component_max", [4096, -1])
def test_deletions_cancel_across_components(component_max):
    # insert, then delete (half of each input's rows per epoch) until nothing is left
    ins = [(True, [(1, 1), (2, 1)]), (True, [(1, 1)]), (True, [(1, 1)]), (True, [(1, 2)]), (True, [(3, 3)])]
    dels = [(False, [])] * len(VARS)
    got, want, j = _run([ins, dels, dels, dels], component_max)
    assert got == want == Counter()
    assert all(s.cardinality() == 0 for s in j.state)
