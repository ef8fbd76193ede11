"""The transient ring: stream-index window reads (vs a linear scan) and garbage collection."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.store import TransientStore


def _batch(i: int, n: int = 2) -> np.ndarray:
    return np.array([[i + 1, 7, k + 1] for k in range(n)], dtype=np.int64)


def test_window_reads_exact_range_through_slots():
    ts = TransientStore(slot_ms=100)
    stamps = [0, 5, 99, 100, 100, 250, 730, 731, 999, 5000]
    for i, t in enumerate(stamps):
        assert ts.append("s", t, _batch(i)) == i
    for a, b in [
        (0, 100),
        (5, 101),
        (100, 101),
        (99, 732),
        (101, 5000),
        (0, 10**9),
        (6000, 7000),
        (50, 50),
        (40, 10),
    ]:
        got = [x.ts for x in ts.batches("s", a, b)]
        assert got == [t for t in stamps if a <= t < b], (a, b)
    triples, tcol = ts.window("s", 100, 731)
    assert tcol.tolist() == [100, 100, 100, 100, 250, 250, 730, 730]
    np.testing.assert_array_equal(triples[:, 0], [4, 4, 5, 5, 6, 6, 7, 7])
    assert ts.window("missing", 0, 10)[0].shape == (0, 3)
    assert ts.stats("s")["slots"] == 6  # slots 0, 1, 2, 7, 9, 50
    with pytest.raises(ValueError, match="older"):
        ts.append("s", 4999, _batch(0))
    with pytest.raises(ValueError):
        ts.append("s", 6000, np.array([1, 2, 3]))


def test_batches_are_copied_and_read_only():
    ts = TransientStore()
    buf = _batch(0)
    ts.append("s", 1, buf)
    buf[0, 0] = 99
    (b,) = ts.batches("s", 0, 2)
    assert b.triples[0, 0] == 1 and not b.triples.flags.writeable


def test_gc_frees_batches_no_window_needs():
    ts = TransientStore(slot_ms=10)
    for i in range(100):
        ts.append("s", i * 5, _batch(i))  # ts 0, 5, ..., 495
    assert ts.stats("s")["batches"] == 100
    # two windows registered: the oldest floor wins
    assert ts.retain("s", 200, holder="w1") == 40
    assert ts.retain("s", 300, holder="w2") == 0
    st_ = ts.stats("s")
    assert (st_["batches"], st_["freed"], st_["head"]) == (60, 40, 40)
    assert [x.ts for x in ts.batches("s", 0, 210)] == [200, 205]  # nothing older survives
    assert ts.batches("s", 200, 201)[0].seq == 40  # sequence numbers stay stable
    # w1 advances: now w2's floor (300) is the oldest needed
    assert ts.retain("s", 400, holder="w1") == 20
    assert ts.batches("s", 0, 10**6)[0].ts == 300
    # releasing w2 leaves only w1 (400)
    assert ts.release("s", "w2") == 20
    assert [x.ts for x in ts.batches("s", 0, 10**6)][:2] == [400, 405]
    assert ts.stats("s")["slots"] == 10  # slot entries of freed batches are gone
    # the last holder leaves: nothing says what is needed, nothing more is freed
    assert ts.release("s", "w1") == 0
    assert ts.stats("s")["batches"] == 20


def test_capacity_bounds_unheld_ring_and_counts_needed_drops():
    ts = TransientStore(slot_ms=1, capacity=10)
    for i in range(25):
        ts.append("s", i, _batch(i))
    assert [x.ts for x in ts.batches("s", 0, 100)] == list(range(15, 25))
    ts.retain("s", 15, holder="w")
    for i in range(25, 27):
        ts.append("s", i, _batch(i))
    assert ts.stats("s")["dropped_needed"] == 2


ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 40)),
        st.tuples(st.just("retain"), st.integers(0, 400)),
        st.tuples(st.just("read"), st.integers(0, 420)),
    ),
    max_size=60,
)


@settings(max_examples=80, deadline=None)
@given(ops=ops_st, slot=st.sampled_from([1, 7, 50, 1000]))
def test_index_and_gc_equal_linear_model(ops, slot):
    ts = TransientStore(slot_ms=slot)
    model: list[int] = []  # timestamps held, per the spec: drop < floor
    now = 0
    floor = None
    for op, x in ops:
        if op == "add":
            now += x
            ts.append("s", now, _batch(len(model)))
            model.append(now)
        elif op == "retain":
            floor = x
            ts.retain("s", x)
            model = [t for t in model if t >= floor]
        else:
            a, b = x, x + 37
            assert [b_.ts for b_ in ts.batches("s", a, b)] == [t for t in model if a <= t < b]
    assert [b_.ts for b_ in ts.batches("s", 0, 10**9)] == model
