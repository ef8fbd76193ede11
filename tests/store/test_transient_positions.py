"""Reads of the transient ring by triple position (what ring-backed windows use) vs a model."""

from __future__ import annotations

from bisect import bisect_left

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.store import TransientStore

ops_st = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(0, 900), st.integers(0, 4)),  # gap, triples
        st.tuples(st.just("hold"), st.integers(0, 3), st.integers(0, 60)),  # holder, position
        st.tuples(st.just("drop"), st.integers(0, 3), st.just(0)),  # holder leaves
        st.tuples(st.just("read"), st.integers(0, 60), st.integers(0, 30)),  # position, length
    ),
    max_size=60,
)


@settings(max_examples=120, deadline=None)
@given(ops=ops_st, slot=st.sampled_from([1, 250, 1000, 7000]))
def test_position_reads_and_holder_gc_equal_a_linear_model(ops, slot):
    ts = TransientStore(slot_ms=slot)
    rows: list[tuple[int, int]] = []  # (ts, first column) of every triple ever appended
    elements: list[int] = []  # ts of every element, empty ones too
    holders: dict[str, int] = {}
    gone_before: int | None = None  # collection is final: the highest floor ever applied
    now = 0
    for op, x, y in ops:
        if op == "add":
            now += x
            tr = np.array([[len(rows) + i, 5, 6] for i in range(y)], dtype=np.int64).reshape(-1, 3)
            ts.append("s", now, tr)
            rows += [(now, len(rows) + i) for i in range(y)]
            elements.append(now)
        elif op == "hold":
            f = ts.floor("s", x)
            if f is not None:
                holders[f"p:{x % 4}:{y}"] = f
            ts.retain_many("s", dict(holders), prefix="p:")
        elif op == "drop" and holders:
            holders.pop(sorted(holders)[x % len(holders)])
            ts.retain_many("s", dict(holders), prefix="p:")
        if op in ("hold", "drop") and holders:
            f = min(holders.values())
            gone_before = f if gone_before is None else max(gone_before, f)
        base, end = ts.extent("s")
        assert end == len(rows)
        # what the ring keeps: every element from the highest floor applied on
        floor = gone_before
        kept_from = 0 if floor is None else bisect_left([t for t, _ in rows], floor)
        assert base == kept_from  # nothing a holder needs is gone, everything older is
        if op == "read":
            lo, hi = max(x, base), max(x, base) + y
            got, stamps = ts.slice("s", lo, hi, times=True)
            want = rows[lo:hi]
            assert got[:, 0].tolist() == [r for _, r in want]
            assert stamps is not None and stamps.tolist() == [t for t, _ in want]
        # time -> position through the stream index, and "the latest element before t"
        for t in (now - 1000, now - 1, now, now + 1, 0):
            p = ts.position("s", t)
            first = next((i for i, (rt, _) in enumerate(rows) if rt >= t), len(rows))
            assert p == max(first, base) or (p == base and first < base)
            held = [e for e in elements if e < t and (floor is None or e >= floor)]
            if held:
                assert ts.last_before("s", t) == max(held)
    # holders of another reader are left alone by a prefix-scoped update
    ts.retain("s", 0, holder="other")
    ts.retain_many("s", {}, prefix="p:")
    assert ts.stats("s")["holders"] == 1
