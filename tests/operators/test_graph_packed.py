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
