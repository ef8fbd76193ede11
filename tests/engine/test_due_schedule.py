"""The live worker's report schedule (``DueSchedule``): the same queries, in the same order,
as the heap of ``(time, name)`` pairs it replaced; and a registration batch big enough to run
without the cyclic collector gives the reports of one-by-one registration and leaves the
collector on."""

from __future__ import annotations

import gc
import heapq
import queue

from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.engine.live import runtime
from linkstream.engine.live.runtime import LiveEngine
from linkstream.engine.live.schedule import DueSchedule

EX = "http://example.org/"
QUERY = (
    "PREFIX ex: <http://example.org/> SELECT ?s ?o "
    "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT{r}S STEP PT{s}S] WHERE {{ WINDOW ex:w {{ ?s ex:p{k} ?o }} }}"
)

ops = st.lists(
    st.one_of(
        st.tuples(st.just("push"), st.integers(0, 6), st.sampled_from("abcdef")),
        st.tuples(st.just("many"), st.integers(0, 6), st.lists(st.sampled_from("abcdef"), max_size=4)),
        st.tuples(st.just("take"), st.just(0), st.just("")),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(ops)
def test_buckets_take_what_the_heap_pops(steps: list[tuple]) -> None:
    due, heap = DueSchedule(), []
    for kind, c, names in steps:
        if kind == "push":
            due.push(c, names)
            heapq.heappush(heap, (c, names))
        elif kind == "many":
            due.push_many(c, list(names))
            for n in names:
                heapq.heappush(heap, (c, n))
        else:
            first = heap[0][0] if heap else None
            assert due.first() == first
            if first is None:
                assert due.take(0) == [] and not due
                continue
            popped: list[str] = []
            while heap and heap[0][0] == first:
                n = heapq.heappop(heap)[1]
                if n not in popped:
                    popped.append(n)
            assert due.take(first) == popped
        assert len(due) == len(heap) and bool(due) == bool(heap)
        assert due.take(10**9) == []  # not the earliest time: nothing taken


def _reports(live: LiveEngine, names: list[str]) -> dict[str, list[tuple[int, tuple[str, ...]]]]:
    subs = {n: live.subscribe(n) for n in names}
    for t in range(0, 9000, 700):
        for k in range(5):
            live.push(EX + "s", t, [(f"<{EX}n{t}>", f"<{EX}p{k}>", f'"{t}"')])
    live.advance_to(12000)
    out: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for n, sub in subs.items():
        got = out[n] = []
        while True:
            try:
                got.append(sub.get_report(timeout=0.2))
            except queue.Empty:
                break
    return out


def test_a_big_batch_reports_as_small_ones_and_leaves_the_collector_on(monkeypatch) -> None:
    items = [(QUERY.format(r=1 + i % 4, s=1 + i % 2, k=i % 5), f"q{i:02d}", None) for i in range(40)]
    results = []
    for limit in (10**6, 8):  # one by one (never "big"), then batches over the limit
        monkeypatch.setattr(runtime, "FREEZE_BATCH", limit)
        live = LiveEngine(idle_ms=None).start()
        try:
            if limit > 100:
                names = [live.register(text, name=name) for text, name, _ in items]
            else:
                names = live.register_many(items)
            assert gc.isenabled()
            results.append(_reports(live, names))
        finally:
            live.close()
    assert sum(len(v) for v in results[0].values()) > 40  # every query reported something
    assert results[0] == results[1]


def test_block_lines_read_as_the_tuple_of_their_lines() -> None:
    from linkstream.engine.render import TIME_MARK, BlockLines

    block = f'{{"t": {TIME_MARK}, "a": 1}}\n{{"t": {TIME_MARK}, "é": "x\\ny"}}\n'
    want = ('{"t": 42, "a": 1}', '{"t": 42, "é": "x\\ny"}')
    got = BlockLines(block, "42")
    assert len(got) == 2  # counted before any split
    assert got == want and want == got and got == list(want) and got != want[:1]
    assert got[1] == want[1] and got[1:] == want[1:] and tuple(got) == want and list(got) == list(want)
    assert got == BlockLines(block, "42") and got != BlockLines(block, "43")
    assert BlockLines("", "1") == () and len(BlockLines("", "1")) == 0
