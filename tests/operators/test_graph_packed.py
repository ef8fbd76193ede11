"""The window graph's packed reference counts (three ids in one int64) give exactly the
deltas of the general path (a :class:`Relation` of counts), also when a large id moves a
running graph from one to the other, and a snapshot of either holds the same counts."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import graph as graph_mod
from linkstream.operators.graph import GraphOperator
from linkstream.operators.window import StreamBuffer, WindowOperator
from linkstream.query.windows import WindowSpec

BIG = 1 << graph_mod._BITS  # the first id the packed keys cannot hold

small = st.integers(1, 5)
elements_st = st.lists(
    st.tuples(st.integers(0, 700), st.lists(st.tuples(small, small, small), max_size=4)),
    min_size=1,
    max_size=25,
)
spec_st = st.one_of(
    st.builds(
        lambda r, s: WindowSpec("time", r, s),
        st.sampled_from([300, 500, 1000, 1500]),
        st.sampled_from([100, 250, 500]),
    ),
    st.builds(lambda n: WindowSpec("count", count=n), st.integers(1, 6)),
)


def _run(raw, spec, static, big_at):
    """Deltas of a packed graph and of one held on the general path, epoch by epoch."""
    elements, t = [], 0
    for i, (dt, trs) in enumerate(raw):
        t += dt
        if big_at is not None and i >= big_at:  # from here on some ids are large
            trs = [(s + BIG, p, o) if (s + i) % 2 else (s, p, o + BIG) for s, p, o in trs]
        elements.append((t, trs))
    buf = StreamBuffer("urn:s")
    w = WindowOperator(buf, spec, 250)
    st_arr = np.array(static, dtype=np.int64).reshape(-1, 3)
    packed, general = GraphOperator("a", st_arr, [w]), GraphOperator("b", st_arr, [w])
    general._pack_ok = False
    k, saw = 0, False
    for epoch, c in enumerate(range(w.step, t + 2 * w.step, w.step), 1):
        while k < len(elements) and elements[k][0] < c:
            et, trs = elements[k]
            buf.append(et, np.array(trs, dtype=np.int64).reshape(-1, 3))
            k += 1
        w.advance(c)
        a, b = packed.delta(epoch), general.delta(epoch)
        saw = saw or len(w.delta(epoch)) > 0
        assert a.vars == b.vars
        assert np.array_equal(a.cols, b.cols) and np.array_equal(a.counts, b.counts), epoch
        ra, rb = packed.dynamic.rows, general.dynamic.rows  # what a snapshot ships
        assert np.array_equal(ra.cols, rb.cols) and np.array_equal(ra.counts, rb.counts)
        ca, cb = packed.current(), general.current()
        assert np.array_equal(ca.cols, cb.cols) and np.array_equal(ca.counts, cb.counts)
        buf.gc()
    return packed._pk is not None or not saw


@settings(max_examples=80, deadline=None)
@given(elements_st, spec_st, st.lists(st.tuples(small, small, small), max_size=4))
def test_packed_counts_equal_the_general_path(raw, spec, static):
    packed = _run(raw, spec, static, None)
    assert packed  # small ids: the packed path ran once a window delta came


@settings(max_examples=60, deadline=None)
@given(elements_st, spec_st, st.lists(st.tuples(small, small, small), max_size=4), st.integers(0, 12))
def test_a_large_id_moves_the_counts_to_the_general_path(raw, spec, static, big_at):
    _run(raw, spec, static, big_at)


def test_large_id_leaves_packed_mode_for_good() -> None:
    buf = StreamBuffer("urn:s")
    w = WindowOperator(buf, WindowSpec("time", 1000, 1000), 1000)
    g = GraphOperator("g", None, [w])
    buf.append(10, np.array([[1, 2, 3]], dtype=np.int64))
    w.advance(1000)
    assert len(g.delta(1)) == 1 and g._pk is not None
    buf.append(1010, np.array([[BIG, 2, 3]], dtype=np.int64))
    w.advance(2000)
    d = g.delta(2)
    assert g._pk is None and not g._pack_ok
    assert sorted(zip(d.cols.T.tolist(), d.counts.tolist())) == [([1, 2, 3], -1), ([BIG, 2, 3], 1)]
    assert g.dynamic.rows.cols.T.tolist() == [[BIG, 2, 3]]


@settings(max_examples=60, deadline=None)
@given(elements_st, spec_st, st.lists(st.tuples(small, small, small), max_size=4), st.sampled_from([0, 8]))
def test_counts_by_binary_search_or_by_merge_equal_the_general_path(raw, spec, static, merge_max):
    """Both packed paths (merge for a small state, binary search and insertion above
    ``MERGE_COUNTS_MAX``; 0 and 8 put every state or most on the second) give the
    general path's deltas."""
    old = graph_mod.MERGE_COUNTS_MAX
    graph_mod.MERGE_COUNTS_MAX = merge_max
    try:
        _run(raw, spec, static, None)
    finally:
        graph_mod.MERGE_COUNTS_MAX = old


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(small, small, small), max_size=12, unique=True),
    st.lists(st.integers(1, 3), min_size=12, max_size=12),
    st.lists(st.tuples(st.tuples(small, small, small), st.integers(-3, 3)), min_size=1, max_size=16),
)
def test_merged_counts_equal_binary_search_and_insertion(state, refs, delta):
    """``_count_merged`` (a small state) and the binary-search path give the same entered
    and left triples, signs and new counts, for any signed delta (repeated triples,
    counts that cancel, go to zero or below)."""
    pk0 = graph_mod._pack(np.array(state, dtype=np.int64).reshape(-1, 3).T)
    order = pk0.argsort()
    pn0 = np.array(refs[: len(state)], dtype=np.int64)[order]
    pk0 = pk0[order]
    cols = np.array([t for t, _ in delta], dtype=np.int64).T
    counts = np.array([c for _, c in delta], dtype=np.int64)
    from linkstream.operators import batch as batch_mod
    from linkstream.operators.batch import Batch
    from linkstream.operators.window import TRIPLE_VARS

    got, merged = [], []
    was_native = batch_mod.native()
    # the compiled merge (where built), numpy's merge, numpy's binary search and insertion
    modes = [(True, True), (False, True), (False, False)] if was_native else [(False, True), (False, False)]
    for native, merge in modes:
        g = GraphOperator("g", None)
        g._pk, g._pn = pk0.copy(), pn0.copy()
        real = g._count_merged
        g._count_merged = lambda dk, dn, real=real, m=merge: (merged.append(m), real(dk, dn))[1]  # type: ignore[method-assign]  # (a spy on this instance)
        graph_mod.MERGE_COUNTS = merge
        batch_mod.use_native(native)
        try:
            ks, sign = g._count_packed(Batch(TRIPLE_VARS, cols, counts))
        finally:
            graph_mod.MERGE_COUNTS = True
            batch_mod.use_native(was_native)
        got.append((ks, sign, g._pk, g._pn, g._dyn_version))
    assert merged == [True]  # (numpy merges a state this small when the merge is on)
    a = got[0]
    for b in got[1:]:
        for x, y in zip(a[:4], b[:4]):
            assert x.dtype == y.dtype == np.int64 and np.array_equal(x, y)
        assert a[4] == b[4]
