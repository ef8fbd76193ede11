"""StaticMembership (operators/graph.py): which triples are in a static array, equal to a
set lookup whatever the ids (packed keys below 2**21, hashed row keys otherwise)."""

from __future__ import annotations

import numpy as np
import pytest

from linkstream.operators.graph import GraphOperator, StaticMembership, dedup_triples, static_index
from linkstream.operators.window import TRIPLE_VARS

LIMIT = 1 << 21


def _naive(static: np.ndarray, probe: np.ndarray) -> np.ndarray:
    s = {tuple(r) for r in static.T.tolist()}
    return np.array([tuple(r) in s for r in probe.T.tolist()], dtype=bool)


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("presorted", [True, False])
def test_contains_equals_set_lookup(big: bool, presorted: bool) -> None:
    rng = np.random.default_rng(7)
    st = rng.integers(1, 60, size=(400, 3))
    if big:  # ids beyond the packed range: the hashed path
        st[::7, 2] += LIMIT
    st = dedup_triples(st) if presorted else np.unique(st, axis=0)[::-1]
    cols = np.ascontiguousarray(st.T)
    m = StaticMembership(cols)
    assert (m.packed is None) == big
    if not big and not presorted:
        assert bool((m.packed[1:] > m.packed[:-1]).all())  # sorted on the way in
    probe = np.concatenate(
        [
            cols[:, ::3],
            rng.integers(0, 60, size=(3, 300)),
            # out of the packed range and negative: never static in packed mode
            np.array([[LIMIT + 1, 5, 5], [5, 5, 5], [5, -1, 5]]).T,
            cols[:, :5] + np.array([[0], [0], [LIMIT]]),
        ],
        axis=1,
    )
    got = m.contains(probe)
    assert got.tolist() == _naive(cols, probe).tolist()
    assert got.any() and not got.all()
    if m.packed is not None:
        inrange = ((probe >= 0) & (probe < LIMIT)).all(axis=0)
        keys = (probe[0] << 42) | (probe[1] << 21) | probe[2]
        assert m.contains_packed(keys[inrange]).tolist() == got[inrange].tolist()
    assert m.contains(probe[:, :0]).shape == (0,)


def test_empty_static_and_shared_instance() -> None:
    empty = np.empty((3, 0), dtype=np.int64)
    assert StaticMembership(empty).contains(np.array([[1], [2], [3]])).tolist() == [False]
    cols = np.ascontiguousarray(dedup_triples(np.arange(300).reshape(100, 3)).T)
    assert static_index(cols) is static_index(cols)  # one per static array


def test_graph_drops_window_triples_that_are_static() -> None:
    """A window triple that is also static enters the graph once (as static)."""
    from linkstream.operators.base import Operator
    from linkstream.operators.batch import Batch

    class Src(Operator):
        vars = TRIPLE_VARS

        def __init__(self) -> None:
            super().__init__()
            self.next = Batch.empty(TRIPLE_VARS)

        def compute(self, epoch: int) -> Batch:
            return self.next

    static = np.array([[1, 2, 3], [4, 5, 6], [7, 8, LIMIT + 9]])
    for st in (static[:2], static):  # packed and hashed static parts
        src = Src()
        g = GraphOperator("g", st, [src])
        first = g.delta(0)
        assert sorted(map(tuple, first.cols.T.tolist())) == sorted(map(tuple, st.tolist()))
        src.next = Batch(
            TRIPLE_VARS, np.array([[1, 2, 3], [1, 2, 4], [LIMIT + 1, 2, 3]]).T, np.ones(3, dtype=np.int64)
        )
        d = g.delta(1)
        assert sorted(map(tuple, d.cols.T.tolist())) == [(1, 2, 4), (LIMIT + 1, 2, 3)]
        src.next = Batch(TRIPLE_VARS, np.array([[1, 2, 3], [1, 2, 4]]).T, -np.ones(2, dtype=np.int64))
        d = g.delta(2)
        assert d.cols.T.tolist() == [[1, 2, 4]] and d.counts.tolist() == [-1]
