"""``Relation.apply`` of one delta to equal relations (the same scan's matches kept by the
joins of several queries) computes the new parts once: the other relations take them,
indexes and all.  Content, order and counts stay exactly those of a relation that
consolidated the delta itself; a relation that differs, or has other variables, does not
take them; shared parts are never changed in place.  Also: ``sort_order`` is
``np.lexsort``'s order on both sides of ``PACK_SORT_ROWS``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import batch as B
from linkstream.operators import order as O
from linkstream.operators import relation as R
from linkstream.operators.batch import Batch

VARS = ("a", "b", "c")


def _batch(rows, counts, vars_=VARS) -> Batch:
    cols = np.array(rows, dtype=np.int64).T.reshape(len(vars_), len(rows))
    return Batch(tuple(vars_), cols, np.array(counts, dtype=np.int64).reshape(len(rows)))


def _same(x: Batch, y: Batch) -> None:
    assert x.vars == y.vars
    assert np.array_equal(x.cols, y.cols)
    assert np.array_equal(x.counts, y.counts)


@pytest.fixture(autouse=True)
def _empty_memo():
    R.forget_applied()
    yield
    R.forget_applied()


def test_equal_relations_share_the_parts_of_one_apply():
    d1 = _batch([(1, 2, 3), (1, 2, 4), (2, 2, 3)], [1, 1, 2])
    d2 = _batch([(1, 2, 3), (5, 5, 5)], [-1, 1])
    r1, r2 = R.Relation(VARS), R.Relation(VARS)
    for d in (d1, d2):
        r1.apply(d)
        r2.apply(d)
        assert r2._base is r1._base and r2._recent is r1._recent
    _same(r2.rows, _batch([(1, 2, 4), (2, 2, 3), (5, 5, 5)], [1, 2, 1]))
    assert r1.version == r2.version == 2
    # a probe reads the shared part's index, built once
    probe = _batch([(2,), (1,)], [1, 1], ("a",))
    _same(r1.join(probe), r2.join(probe))


def test_a_relation_with_other_content_or_variables_computes_its_own():
    d = _batch([(1, 2, 3)], [1])
    r1 = R.Relation(VARS)
    r1.apply(d)
    r2 = R.Relation(VARS)
    r2.apply(_batch([(7, 7, 7)], [1]))
    r2.apply(d)
    assert r2._base is not r1._base
    _same(r2.rows, _batch([(1, 2, 3), (7, 7, 7)], [1, 1]))
    r3 = R.Relation(("c", "b", "a"))  # the delta is projected onto its own order
    r3.apply(d)
    assert r3._base is not r1._base
    _same(r3.rows, _batch([(3, 2, 1)], [1], ("c", "b", "a")))


def test_shared_parts_are_not_changed_in_place():
    d = _batch([(1, 2, 3)], [1])
    r1, r2 = R.Relation(VARS), R.Relation(VARS)
    r1.apply(d)
    r2.apply(d)
    r1.set_consolidated(_batch([(9, 9, 9)], [1]))
    _same(r2.rows, _batch([(1, 2, 3)], [1]))
    _same(r1.rows, _batch([(9, 9, 9)], [1]))


def test_the_memo_is_emptied_and_bounded(monkeypatch):
    monkeypatch.setattr(R, "APPLIED_MAX", 3)
    rel = R.Relation(VARS)
    for i in range(10):
        rel.apply(_batch([(i, 1, 1)], [1]))
        assert len(R._APPLIED) <= 3
    R.forget_applied()
    assert not R._APPLIED
    assert len(rel) == 10


ops_st = st.lists(
    st.tuples(
        st.integers(0, 2),  # which delta of the epoch
        st.lists(st.tuples(st.tuples(*[st.integers(0, 3)] * 3), st.integers(-2, 2)), max_size=9),
    ),
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(ops_st, st.integers(0, 2))
def test_relations_fed_the_same_deltas_equal_one_without_the_memo(epochs, small):
    """Three relations fed the same delta objects (and one its own copies) hold what a
    relation that consolidates every delta itself holds, part by part."""
    smalls = (0, 2, 512)
    old = R.Relation.SMALL
    R.Relation.SMALL = smalls[small]  # (both parts in play when small)
    try:
        shared = [R.Relation(VARS) for _ in range(3)]
        own = R.Relation(VARS)
        for k, rc in epochs:
            R.forget_applied()
            d = _batch([r for r, _ in rc], [c for _, c in rc])
            for rel in shared[k:]:  # relations joining late differ, then converge
                rel.apply(d)
            own.apply(Batch(d.vars, d.cols.copy(), d.counts.copy()))
            R.forget_applied()
            for rel in shared[:k]:
                rel.apply(Batch(d.vars, d.cols.copy(), d.counts.copy()))
        for rel in shared:
            _same(rel.rows, B.consolidate(own.rows))
    finally:
        R.Relation.SMALL = old


@pytest.mark.parametrize("n", [2, 63, 64, 255, 256, 257, 700])
@pytest.mark.parametrize("k", [2, 3, 6])
def test_sort_order_is_lexsort_order(n, k):
    rng = np.random.default_rng(n * 10 + k)
    cols = rng.integers(0, 40, size=(k, n)).astype(np.int64)
    assert np.array_equal(O.sort_order(cols), np.lexsort(cols[::-1]))
