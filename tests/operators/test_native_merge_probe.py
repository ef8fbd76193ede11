"""The compiled merge and probe (``rows_merge``, ``probe_sorted`` in
``platform/operators/_kernels.c``) give what the numpy paths give: ``Relation.counted_apply``
(a router's count relation: each delta row's count before, then the delta applied) the same
counts and content as ``key_counts`` and ``apply``; ``merge_sorted`` the same batch as
``consolidate`` of both; sorted-index probes the same pairs in the same order."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import batch as B
from linkstream.operators.batch import Batch, consolidate
from linkstream.operators.relation import Relation

VARS = ("%group", "a", "b", "c")

needs_native = pytest.mark.skipif(B._kernels is None, reason="compiled kernels not built")


def _rel(native: bool, k: int, steps: list[Batch]) -> tuple[list[np.ndarray], Batch]:
    """Counts before of each step's delta, and the content at the end."""
    was = B.native()
    B.use_native(native)
    try:
        rel = Relation(VARS[:k])
        befores = [rel.counted_apply(d) for d in steps]
        return befores, rel.rows
    finally:
        B.use_native(was)


def _steps(rng: np.random.Generator, k: int, n_steps: int, span: int, zero: bool) -> list[Batch]:
    out = []
    for _ in range(n_steps):
        n = int(rng.integers(0, 60))
        cols = rng.integers(1, span + 1, size=(k, n)).astype(np.int64)
        if zero and n:
            cols[rng.integers(0, k), rng.integers(0, n)] = 0  # unbound: compatibility, not equality
        out.append(consolidate(Batch(VARS[:k], cols, rng.integers(-2, 3, size=n).astype(np.int64))))
    return out


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.integers(0, 2**32 - 1), st.booleans())
def test_compiled_merge_equals_key_counts_and_apply(k, span, seed, zero):
    rng = np.random.default_rng(seed)
    steps = _steps(rng, k, 8, span, zero and seed % 3 == 0)
    fb, fr = _rel(True, k, steps)
    sb, sr = _rel(False, k, steps)
    assert len(fb) == len(sb)
    for x, y in zip(fb, sb):
        assert x.dtype == y.dtype == np.int64 and np.array_equal(x, y)
    assert fr.vars == sr.vars and np.array_equal(fr.cols, sr.cols) and np.array_equal(fr.counts, sr.counts)


@needs_native
def test_merge_refuses_unbound_values_and_rows_out_of_order():
    k = B._kernels
    rows = Batch(("x", "y"), np.array([[1, 2], [3, 4]], dtype=np.int64), np.array([1, 1], dtype=np.int64))
    delta = Batch(("x", "y"), np.array([[2, 5], [4, 1]], dtype=np.int64), np.array([-1, 2], dtype=np.int64))
    got = B.merge_sorted(rows, delta)
    assert got is not None
    new, before = got
    assert new.cols.tolist() == [[1, 5], [3, 1]] and new.counts.tolist() == [1, 2]
    assert before.tolist() == [1, 0]
    unbound = Batch(("x", "y"), np.array([[2], [0]], dtype=np.int64), np.array([1], dtype=np.int64))
    assert B.merge_sorted(rows, unbound) is None
    unsorted = Batch(("x", "y"), np.array([[5, 2], [1, 4]], dtype=np.int64), np.array([1, 1], dtype=np.int64))
    assert B.merge_sorted(rows, unsorted) is None
    with pytest.raises(ValueError):  # buffer sizes are checked
        k.rows_merge(
            rows.cols,
            rows.counts,
            2,
            delta.cols,
            delta.counts,
            2,
            2,
            np.empty(3, dtype=np.int64),
            np.empty(4, dtype=np.int64),
            np.empty(2, dtype=np.int64),
        )


@needs_native
@settings(max_examples=300, deadline=None)
@given(st.integers(1, 4), st.integers(1, 8), st.integers(0, 2**32 - 1))
def test_merge_sorted_equals_consolidate_of_both(k, span, seed):
    rng = np.random.default_rng(seed)
    a, b = _steps(rng, k, 2, span, False)
    got = B.merge_sorted(a, b)
    assert got is not None
    want = consolidate(B.concat([a, b], a.vars))
    assert np.array_equal(got[0].cols.reshape(k, -1), want.cols.reshape(k, -1))
    assert np.array_equal(got[0].counts, want.counts)
    # a relation fed the same deltas holds the same rows through apply's merge or without it
    was = B.native()
    rels = []
    for native in (True, False):
        B.use_native(native)
        rel = Relation(VARS[:k])
        for d in _steps(np.random.default_rng(seed), k, 6, span, False):
            rel.apply(d)
        rels.append(rel.rows)
    B.use_native(was)
    assert np.array_equal(rels[0].cols, rels[1].cols) and np.array_equal(rels[0].counts, rels[1].counts)


@needs_native
@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 300), st.integers(0, 200), st.integers(1, 50), st.integers(0, 2**32 - 1), st.integers(1, 3)
)
def test_compiled_probe_gives_the_numpy_pairs(m, n, span, seed, k):
    from linkstream.operators.relation import _BoundIndex

    rng = np.random.default_rng(seed)
    idx_cols = rng.integers(-span, span, size=(k, m)).astype(np.int64)
    probe = rng.integers(-span, span, size=(k, n)).astype(np.int64)
    if seed % 2:  # ascending probes (the compiled search gallops from its last answer)
        probe = np.sort(probe, axis=1)
    if seed % 4 == 0:  # the extremes of int64
        idx_cols[0, ::5] = np.iinfo(np.int64).min
        probe[0, ::3] = np.iinfo(np.int64).min
    got = []
    for native in (True, False):
        was = B.native()
        B.use_native(native)
        try:
            si = B.SortedIndex(B.row_keys(idx_cols))
            bi = _BoundIndex(idx_cols[0] if k == 1 else idx_cols)
            got.append((si.probe(B.row_keys(probe)), bi.probe(probe[0] if k == 1 else probe)))
        finally:
            B.use_native(was)
    for (a_li, a_rj), (b_li, b_rj) in zip(got[0], got[1]):
        assert a_li.dtype == b_li.dtype == np.int64 and a_rj.dtype == b_rj.dtype
        assert np.array_equal(a_li, b_li) and np.array_equal(a_rj, b_rj)
    many = B.SortedIndex(np.zeros(50, dtype=np.int64)).probe(
        np.zeros(40, dtype=np.int64)
    )  # past the first room
    assert (
        len(many[0]) == 2000 and many[0][:51].tolist() == [0] * 50 + [1] and many[1][:3].tolist() == [0, 1, 2]
    )
    # the kernel itself: pairs past the room are counted (-t) after the first ``cap`` written
    keys, order = np.array([1, 2, 2, 3], dtype=np.int64), np.array([3, 0, 2, 1], dtype=np.int64)
    probe = np.array([2, 3, 2], dtype=np.int64)
    li, rj = np.full(3, -7, dtype=np.int64), np.full(3, -7, dtype=np.int64)
    assert B._kernels.probe_sorted(keys, 4, probe, 3, order, li, rj, 3) == -5
    assert li.tolist() == [0, 0, 1] and rj.tolist() == [0, 2, 1]
    li, rj = np.empty(5, dtype=np.int64), np.empty(5, dtype=np.int64)
    assert B._kernels.probe_sorted(keys, 4, probe, 3, order, li, rj, 5) == 5
    assert li.tolist() == [0, 0, 1, 2, 2] and rj.tolist() == [0, 2, 1, 0, 2]


@needs_native
@settings(max_examples=60, deadline=None)
@given(st.integers(2, 4), st.integers(0, 2**32 - 1))
def test_counted_apply_switches_between_merge_and_recent_part(k, seed):
    # a large content, then small deltas (the recent part: key_counts + apply), then a
    # large one (a merge again once the recent part is folded in)
    rng = np.random.default_rng(seed)

    def step(n: int) -> Batch:
        cols = rng.integers(1, 40, size=(k, n)).astype(np.int64)
        return consolidate(Batch(VARS[:k], cols, rng.integers(-2, 3, size=n).astype(np.int64)))

    steps = [step(3000)] + [step(int(rng.integers(1, 40))) for _ in range(12)] + [step(2500), step(10)]
    fb, fr = _rel(True, k, steps)
    sb, sr = _rel(False, k, steps)
    for x, y in zip(fb, sb, strict=True):
        assert np.array_equal(x, y)
    assert np.array_equal(fr.cols, sr.cols) and np.array_equal(fr.counts, sr.counts)


def _py_merge(a: np.ndarray, an: np.ndarray, b: np.ndarray, bn: np.ndarray):
    """``rows_merge`` in Python: the merged rows whose count is not 0, and each delta row's
    count in the state (``None`` for a zero value or rows not strictly ascending)."""
    ra, rb = [tuple(r) for r in a.T.tolist()], [tuple(r) for r in b.T.tolist()]
    if any(0 in r for r in ra + rb) or any(x >= y for t in (ra, rb) for x, y in zip(t, t[1:])):
        return None
    acc = dict(zip(ra, an.tolist()))
    before = [acc.get(r, 0) for r in rb]
    for r, c in zip(rb, bn.tolist()):
        acc[r] = acc.get(r, 0) + c
    rows = sorted(r for r, c in acc.items() if c)
    return rows, [acc[r] for r in rows], before


@needs_native
@pytest.mark.parametrize("seed", range(40))
def test_the_merge_kernel_equals_a_python_merge(seed):
    """Zero counts in either table (left out), rows out of order or unbound (refused), one
    table empty, and tables of several columns."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        k = int(rng.integers(1, 6))
        tabs = []
        for n in (int(rng.integers(0, 40)), int(rng.integers(0, 40))):
            cols = rng.integers(1, 4, size=(k, n)).astype(np.int64)
            if rng.random() < 0.85:  # (else in any order, maybe with equal rows: refused)
                cols = np.ascontiguousarray(np.unique(cols.T, axis=0).T) if n else cols
            if n and rng.random() < 0.05:
                cols[rng.integers(0, k), rng.integers(0, cols.shape[1])] = 0
            tabs.append((cols, rng.integers(-2, 3, size=cols.shape[1]).astype(np.int64)))
        (a, an), (b, bn) = tabs
        n, m = a.shape[1], b.shape[1]
        out, out_n, before = np.empty(k * (n + m), np.int64), np.empty(n + m, np.int64), np.empty(m, np.int64)
        r = B._kernels.rows_merge(a, an, n, b, bn, m, k, out, out_n, before)
        want = _py_merge(a, an, b, bn)
        if want is None:
            assert r == -1
            continue
        rows, counts, bf = want
        assert r == len(rows)
        assert [tuple(x) for x in out[: k * r].reshape(k, r).T.tolist()] == rows
        assert out_n[:r].tolist() == counts and before.tolist() == bf


@needs_native
@pytest.mark.parametrize("k", [1, 2, 3])
def test_the_merge_kernel_refuses_every_misplaced_or_unbound_row(k):
    """The order and the unbound values are checked on the way through the merge: two
    rows swapped, or a row repeated, or one 0 value, at any place of either table (before
    the other table ends, at its end, in the tail after it) is refused; the tables as
    they are are merged."""
    rng = np.random.default_rng(k)
    rows = np.unique(rng.integers(1, 20, size=(60, k)), axis=0)[:14].T
    assert rows.shape[1] == 14
    ta, tb = np.ascontiguousarray(rows[:, ::2]), np.ascontiguousarray(rows[:, 1::2][:, :5])
    for which in (0, 1):
        for p in range(7 if which == 0 else 5):
            variants = []
            for kind in ("swap", "repeat", "zero"):
                a, b = ta.copy(), tb.copy()
                t = a if which == 0 else b
                q = min(p, t.shape[1] - 2)
                if kind == "swap":
                    t[:, [q, q + 1]] = t[:, [q + 1, q]]
                elif kind == "repeat":
                    t[:, q + 1] = t[:, q]
                else:
                    t[int(rng.integers(0, k)), p] = 0
                variants.append((a, b))
            for a, b in variants + [(ta, tb)]:
                an = rng.integers(-1, 2, size=a.shape[1]).astype(np.int64)
                bn = rng.integers(-1, 2, size=b.shape[1]).astype(np.int64)
                n, m = a.shape[1], b.shape[1]
                out, out_n, before = (
                    np.empty(k * (n + m), np.int64),
                    np.empty(n + m, np.int64),
                    np.empty(m, np.int64),
                )
                r = B._kernels.rows_merge(a, an, n, b, bn, m, k, out, out_n, before)
                want = _py_merge(a, an, b, bn)
                if want is None:
                    assert r == -1
                    continue
                assert r == len(want[0])
                assert [tuple(x) for x in out[: k * r].reshape(k, r).T.tolist()] == want[0]
                assert out_n[:r].tolist() == want[1] and before.tolist() == want[2]
