"""The small-batch fast paths of ``batch.consolidate`` and ``Relation.join``/``key_counts``
give exactly (same rows, same order) what the general numpy paths give."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import batch as B
from linkstream.operators import relation as R
from linkstream.operators.batch import Batch

VARS = ("a", "b", "c", "d")


def _general_consolidate(b: Batch) -> Batch:
    old = B.SMALL_CONSOLIDATE
    B.SMALL_CONSOLIDATE = 0
    was_native = B.use_native(False)
    try:
        return B.consolidate(b)
    finally:
        B.SMALL_CONSOLIDATE = old
        B.use_native(was_native)


def _same(x: Batch, y: Batch) -> None:
    assert x.vars == y.vars
    assert x.cols.shape == y.cols.shape and x.cols.dtype == y.cols.dtype == np.int64
    assert np.array_equal(x.cols, y.cols)
    assert np.array_equal(x.counts, y.counts)


def _batch(vars_, rows, counts) -> Batch:
    cols = np.array(rows, dtype=np.int64).T.reshape(len(vars_), len(rows))
    return Batch(tuple(vars_), cols, np.array(counts, dtype=np.int64).reshape(len(rows)))


rows_st = st.integers(1, 4).flatmap(
    lambda k: st.lists(
        st.tuples(st.tuples(*[st.integers(0, 3)] * k), st.integers(-2, 2)), min_size=0, max_size=14
    ).map(lambda rc: (VARS[:k], [r for r, _ in rc], [c for _, c in rc]))
)


@settings(max_examples=300, deadline=None)
@given(rows_st)
def test_small_consolidate_equals_general(data):
    vars_, rows, counts = data
    b = _batch(vars_, rows, counts)
    _same(B.consolidate(b), _general_consolidate(b))


def test_consolidated_input_is_returned_as_is():
    b = _batch(("a", "b"), [(1, 2), (1, 3), (2, 1)], [1, -1, 2])
    assert B.consolidate(b) is b


def _relation(vars_, deltas) -> R.Relation:
    rel = R.Relation(vars_)
    for d in deltas:
        rel.apply(d)
    return rel


@pytest.mark.parametrize("seed", range(4))
def test_small_join_and_key_counts_equal_the_indexed_path(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    for trial in range(300):
        rv = tuple(rng.choice(VARS, size=int(rng.integers(1, 4)), replace=False))
        pv = tuple(rng.choice(VARS, size=int(rng.integers(0, 4)), replace=False))
        low = 0 if trial % 4 == 0 else 1  # some unbound (0) values: the general path decides
        deltas = []
        for _ in range(int(rng.integers(1, 4))):
            n = int(rng.integers(0, 30))
            deltas.append(
                Batch(
                    rv, rng.integers(low, 4, size=(len(rv), n)), rng.integers(-2, 3, size=n).astype(np.int64)
                )
            )
        n = int(rng.integers(0, 20))
        probe = Batch(
            pv, rng.integers(low, 4, size=(len(pv), n)), rng.integers(-2, 3, size=n).astype(np.int64)
        )
        shared = tuple(v for v in pv if v in rv)
        fast = _relation(rv, deltas)
        slow = _relation(rv, deltas)
        monkeypatch.setattr(R, "BOUND_FAST", False)  # every probe through the general path
        want = slow.join(probe)
        want_kc = slow.key_counts(probe, shared)
        monkeypatch.setattr(R, "BOUND_FAST", True)
        was = B.native()
        # the compiled join (where built), the equality matrix, then the sorted key index
        for native, small_pairs in ((True, R.SMALL_PAIRS), (False, R.SMALL_PAIRS), (False, -1)):
            B.use_native(native and was)
            monkeypatch.setattr(R, "SMALL_PAIRS", small_pairs)
            try:
                _same(fast.join(probe), want)
                assert np.array_equal(fast.key_counts(probe, shared), want_kc)
            finally:
                B.use_native(was)
        assert len(fast) == len(slow) == len(fast._base.rows) + len(fast._recent.rows)


def test_bound_join_with_duplicate_keys_and_multi_variable_keys():
    rel = _relation(
        ("a", "b", "c"),
        [_batch(("a", "b", "c"), [(1, 2, 3), (1, 2, 4), (1, 3, 3), (2, 2, 3)], [1, 2, 1, -1])],
    )
    probe = _batch(("a", "b", "d"), [(1, 2, 9), (2, 2, 8), (1, 2, 7), (5, 5, 5)], [1, 3, -1, 1])
    for small_pairs in (2048, -1):
        R.SMALL_PAIRS, old = small_pairs, R.SMALL_PAIRS
        try:
            out = rel.join(probe)
        finally:
            R.SMALL_PAIRS = old
        assert out.vars == ("a", "b", "d", "c")
        got = sorted(zip(map(tuple, out.cols.T.tolist()), out.counts.tolist()))
        assert got == [
            ((1, 2, 7, 3), -1),
            ((1, 2, 7, 4), -2),
            ((1, 2, 9, 3), 1),
            ((1, 2, 9, 4), 2),
            ((2, 2, 8, 3), -3),
        ]


def test_take_and_mask_equal_fancy_indexing():
    b = _batch(("a", "b"), [(1, 2), (3, 4), (5, 6)], [1, -2, 3])
    m = np.array([True, False, True])
    for idx in (np.array([2, 0, 2]), [1], [], np.array([], dtype=np.int64), m):
        want_cols, want_counts = b.cols[:, idx], b.counts[idx]
        got = b.take(idx) if not isinstance(idx, np.ndarray) or idx.dtype != bool else b.mask(idx)
        assert got.cols.shape == want_cols.shape
        assert np.array_equal(got.cols, want_cols) and np.array_equal(got.counts, want_counts)
    _same(b.mask(m), b.take(np.array([0, 2])))
    _same(b.mask(np.array([0, 2])), b.take(m))  # an index array passed as a mask, and back
