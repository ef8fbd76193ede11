"""WatermarkTracker: the combined watermark is the monotone minimum over upstream partitions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.containers.watermarks import FINISHED, WatermarkTracker


def test_minimum_of_partitions_and_fire_rule() -> None:
    t = WatermarkTracker.of([0, 1, 2])
    assert t.watermark is None and not t.can_fire(0)
    t.update(0, 5000)
    t.update(1, 3000)
    assert t.watermark is None, "partition 2 has not reported"
    assert t.update(2, 4000) == 3000
    assert t.can_fire(3000) and not t.can_fire(3001)
    t.update(1, 6000)
    assert t.watermark == 4000
    assert t.partition_watermark(1) == 6000


def test_regression_is_ignored() -> None:
    t = WatermarkTracker.of(["a", "b"])
    t.update("a", 10)
    t.update("b", 20)
    assert t.update("a", 5) == 10
    assert t.partition_watermark("a") == 10
    assert t.regressions == 1


def test_joining_partition_holds_back_until_it_reports() -> None:
    t = WatermarkTracker.of([0])
    t.update(0, 100)
    t.add(1)
    t.update(0, 200)
    assert t.watermark == 100, "the newcomer may still send anything from 100 on"
    t.update(1, 150)
    assert t.watermark == 150
    with pytest.raises(KeyError):
        t.add(1)


def test_joiner_behind_does_not_move_combined_back() -> None:
    t = WatermarkTracker.of([0])
    t.update(0, 100)
    t.add(1, watermark=50)
    assert t.watermark == 100
    assert t.regressions == 1
    assert not t.can_fire(101)
    t.update(1, 120)
    t.update(0, 130)
    assert t.watermark == 120


def test_leaving_partition_releases_minimum() -> None:
    t = WatermarkTracker.of([0, 1])
    t.update(0, 10)
    t.update(1, 99)
    t.remove(0)
    assert t.watermark == 99 and t.partitions == frozenset({1})
    t.remove("unknown")
    t.remove(1)
    assert t.watermark == 99, "with no inputs left the promise made so far stands"
    t.add(2)
    t.update(2, 150)
    assert t.watermark == 150


def test_finish() -> None:
    t = WatermarkTracker.of([0, 1])
    t.update(0, 10)
    t.finish(1)
    assert t.watermark == 10 and not t.finished
    t.finish(0)
    assert t.watermark == FINISHED and t.finished and t.can_fire(2**62)


def test_update_of_unknown_partition_tracks_it() -> None:
    t = WatermarkTracker()
    assert t.update("x", 7) == 7
    assert t.partitions == frozenset({"x"})


_ops = st.lists(
    st.tuples(
        st.sampled_from(["update", "add", "remove", "finish"]), st.integers(0, 3), st.integers(0, 1000)
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(ops=_ops)
def test_combined_is_monotone_and_never_ahead_of_live_partitions(ops) -> None:
    t = WatermarkTracker.of([0, 1])
    previous = None
    for op, p, w in ops:
        if op == "update":
            t.update(p, w)
        elif op == "add" and p not in t.partitions:
            t.add(p)
        elif op == "remove":
            t.remove(p)
        elif op == "finish":
            t.finish(p)
        current = t.watermark
        if previous is not None:
            assert current is not None and current >= previous
        previous = current
        marks = [t.partition_watermark(q) for q in t.partitions]
        if current is not None and marks and None not in marks and t.regressions == 0:
            assert current == min(marks)
