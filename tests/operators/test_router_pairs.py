"""A router matches rows to subscriber groups by their hidden constants: with a few groups
by comparing every (row, group) pair, with many by a hash probe.  Both give the same pairs
(the router consolidates what it derives from them, so their order does not matter)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import router_groups as R
from linkstream.operators.router_groups import Group, GroupTable


def _table(consts: list[tuple[int, ...]]) -> GroupTable:
    groups = [
        Group((1000,), tuple((f"%h{i}", c) for i, c in enumerate(cs)), gid=k + 1)
        for k, cs in enumerate(consts)
    ]
    return GroupTable(groups, 1, len(consts[0]))


def _pairs(t: GroupTable, hcols: np.ndarray, direct: int) -> set[tuple[int, int]]:
    old = R.DIRECT_GROUPS
    R.DIRECT_GROUPS = direct
    try:
        ri, gi = t.pairs(hcols)
    finally:
        R.DIRECT_GROUPS = old
    assert ri.dtype.kind == gi.dtype.kind == "i"
    return set(zip(ri.tolist(), gi.tolist()))


@settings(max_examples=80, deadline=None)
@given(
    st.integers(1, 3).flatmap(
        lambda k: st.tuples(
            st.lists(st.tuples(*[st.integers(1, 4)] * k), min_size=1, max_size=12, unique=True),
            st.lists(st.tuples(*[st.integers(1, 4)] * k), min_size=0, max_size=30),
        )
    )
)
def test_direct_pairs_equal_hash_probe(case):
    consts, rows = case
    k = len(consts[0])
    t = _table(consts)
    hcols = np.array(rows, dtype=np.int64).T.reshape(k, len(rows))
    direct = _pairs(t, hcols, 10**6)
    probed = _pairs(t, hcols, 0)
    assert direct == probed
    assert direct == {(i, g) for i, r in enumerate(rows) for g, c in enumerate(consts) if r == c}


@pytest.mark.parametrize("direct", [0, 10**6])
def test_no_match_gives_empty_pairs(direct):
    t = _table([(1, 2), (3, 4)])
    assert _pairs(t, np.array([[1, 3], [4, 2]], dtype=np.int64), direct) == set()
