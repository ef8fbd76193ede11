"""``push_many(..., decided=)``: the worker's final decision on a body (``--ingest direct``).

``push_many`` answers an element taken when it passes the lateness check on the push
side; the worker can still drop it as late when a report time or an explicit watermark
passed it before the worker ingested it.  An owner that sends the taken elements to the
containers itself must know the worker's decision: :class:`Decided` holds the indexes
of the elements the worker applied and the stream's applied count before the first.
"""

from __future__ import annotations

import threading
import time

from linkstream.engine.live.batchpush import Decided
from linkstream.engine.live.runtime import LiveEngine

EX = "http://example.org/"
S1 = EX + "s1"
S2 = EX + "s2"


def _el(t: int, o: str) -> tuple[int, list[tuple[str, str, str]]]:
    return t, [(f"<{EX}a>", f"<{EX}p>", f'"{o}"')]


def _worker_late(live: LiveEngine, stream: str, elements: list, at: int) -> tuple[list[bool], Decided]:
    """Pushes ``elements`` while the worker is held, behind an explicit watermark ``at``
    queued before them: push_many takes them (its floor is the old frontier), the worker
    then drops those before ``at``."""
    hold, held = threading.Event(), threading.Event()

    def block() -> None:
        held.set()
        hold.wait(10)

    blocker = threading.Thread(target=live.call, args=(block,))
    blocker.start()
    assert held.wait(10)
    advancer = threading.Thread(target=live.advance_to, args=(at,))
    advancer.start()
    deadline = time.monotonic() + 10
    while live._queue.qsize() < 1 and time.monotonic() < deadline:  # the advance is queued
        time.sleep(0.01)
    decided = Decided()
    flags, error = live.push_many(stream, elements, decided=decided)
    assert error is None
    hold.set()
    blocker.join(10)
    advancer.join(10)
    assert decided.wait(10)
    return flags, decided


def test_the_worker_decision_leaves_out_what_it_dropped_late() -> None:
    live = LiveEngine(idle_ms=None).start()
    try:
        d0 = Decided()
        assert live.push_many(S1, [_el(1000, "a"), _el(1100, "b")], decided=d0) == ([True, True], None)
        assert d0.wait(10) and d0.taken == [0, 1] and d0.first == 0
        # 1500 and 1800 pass push_many's check but the worker has passed 2000 by then
        flags, d1 = _worker_late(
            live, S1, [_el(1500, "c"), _el(1800, "e"), _el(2500, "d"), _el(2600, "f")], 2000
        )
        assert flags == [True, True, True, True]  # push_many's answer: all taken
        assert d1.taken == [2, 3] and d1.first == 2  # the worker's: applied counts 2 and 3
        assert d1.error is None
        d2 = Decided()
        live.push_many(S1, [_el(2700, "g")], decided=d2)
        assert d2.wait(10) and (d2.taken, d2.first) == ([0], 4)
        d3 = Decided()  # another stream counts from 0
        live.push_many(S2, [_el(2700, "x")], decided=d3)
        assert d3.wait(10) and (d3.taken, d3.first) == ([0], 0)
        live.flush()
        assert live.status()["streams"][S1]["late"] == 2
    finally:
        live.close()


def test_without_decided_the_worker_command_is_unchanged() -> None:
    """The leader path (no ``decided``) enqueues the 3-part command it always did."""
    live = LiveEngine(idle_ms=None)
    seen: list[tuple] = []

    class Recorder:
        put = staticmethod(seen.append)

    live._queue = Recorder()  # type: ignore[assignment]  # records the commands instead
    live._thread = threading.current_thread()  # not started: nothing consumes the queue
    live.push_many(S1, [_el(1000, "a")])
    assert [len(cmd) for cmd in seen] == [3]
    live.push_many(S1, [_el(1100, "b")], decided=Decided())
    assert [len(cmd) for cmd in seen] == [3, 5]
