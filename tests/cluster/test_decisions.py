"""``--ingest direct``: the leader worker's decisions reach the owners out of band.

The leader's side of a body (``StreamIngest._apply`` with ``decide``) answers as soon as
``push_many`` took the elements -- here while the worker is held, so it cannot have
decided -- and keeps the decision in the stream's :class:`DecisionBook`; the owner's
:class:`OwnerDecisions` learns it from a later answer or a poll, with the elements the
worker dropped as late left out and the stream's applied count equal to the worker's.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from pathlib import Path

import msgpack
import pytest

from linkstream.cluster import decisions as decisions_mod
from linkstream.cluster.decisions import DecisionBook, OwnerDecisions, Pending, count_runs, runs_of
from linkstream.cluster.ingest import (
    StreamIngest,
    _Applied,
    rebuild_decision,
    restore_decisions,
    saved_decisions,
)
from linkstream.cluster.ingestwire import pack_elements, unpack_elements, with_refs
from linkstream.cluster.streamlog import BodyStore, StreamLog
from linkstream.engine.live.batchpush import Decided
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine

EX = "http://example.org/"
S1 = EX + "s1"


def _el(t: int, o: str) -> tuple[int, list[tuple[str, str, str]]]:
    return t, [(f"<{EX}a>", f"<{EX}p>", f'"{o}"')]


class _Held:
    """The live engine's worker held in a call until :meth:`release`."""

    def __init__(self, live: LiveEngine) -> None:
        self._hold, held = threading.Event(), threading.Event()

        def block() -> None:
            held.set()
            self._hold.wait(10)

        self._thread = threading.Thread(target=live.call, args=(block,))
        self._thread.start()
        assert held.wait(10)

    def release(self) -> None:
        self._hold.set()
        self._thread.join(10)


def _apply(live: LiveEngine, st: _Applied, offset: int, elements: list, epoch: int = 7) -> list[bool]:
    flags, error = StreamIngest._apply(live, st, S1, epoch, offset, elements, None, "o", True)
    assert error is None
    return flags


def test_runs() -> None:
    assert runs_of([]) == []
    assert runs_of([3, 4, 5, 8, 10, 11]) == [3, 6, 8, 9, 10, 12]
    assert count_runs([3, 6, 8, 9, 10, 12]) == 6


def test_the_answer_does_not_wait_and_the_decision_follows() -> None:
    live = LiveEngine(idle_ms=None).start()
    st, owner = _Applied(), OwnerDecisions()
    try:
        assert _apply(live, st, 0, [_el(1000, "a"), _el(1100, "b")]) == [True, True]
        live.flush()
        owner.learn(*st.book.take(7, owner.decided), 2)
        assert (owner.decided, owner.applied, owner.lost) == (2, 2, 0)

        # the worker is held: the body is answered (taken) although nothing is decided yet
        held = _Held(live)
        advancer = threading.Thread(target=live.advance_to, args=(2000,))
        advancer.start()  # queued before the body: the worker drops 1500 and 1800 as late
        deadline = time.monotonic() + 10
        while live._queue.qsize() < 1 and time.monotonic() < deadline:
            time.sleep(0.01)
        t0 = time.monotonic()
        body = [_el(1500, "c"), _el(1800, "e"), _el(2500, "d"), _el(2600, "f")]
        assert _apply(live, st, 2, body) == [True] * 4  # push_many's answer
        assert time.monotonic() - t0 < 5
        assert _apply(live, st, 6, [_el(2700, "g")]) == [True]
        floor, got = st.book.take(7, owner.decided)
        assert (floor, got) == (2, [])  # undecided: nothing to tell yet
        owner.learn(floor, got, 7)
        assert (owner.decided, owner.applied, owner.lost) == (2, 2, 0)

        held.release()
        advancer.join(10)
        live.flush()
        floor, got = st.book.take(7, owner.decided)
        # offsets 2..5: 4 and 5 applied as counts 2, 3 (1500 and 1800 were dropped); 6 as 4
        assert got == [[2, 6, 2, [4, 6], None], [6, 7, 4, [6, 7], None]]
        owner.learn(floor, got, 7)
        assert (owner.decided, owner.applied, owner.lost, owner.bodies) == (7, 5, 0, 3)
        assert owner.applied == live.applied_count(S1) == 5
        owner.learn(floor, got, 7)  # an answer and a poll crossing: learnt once
        assert (owner.decided, owner.applied, owner.bodies) == (7, 5, 3)
        assert st.book.take(7, owner.decided) == (7, [])  # acknowledged: dropped
        assert len(st.book.entries) == 0
    finally:
        live.close()


def test_a_retried_body_is_decided_for_its_new_part_only() -> None:
    live = LiveEngine(idle_ms=None).start()
    st, owner = _Applied(), OwnerDecisions()
    try:
        _apply(live, st, 0, [_el(1000, "a"), _el(1100, "b")])
        # the owner's retry of a longer body from offset 0 (first answer lost): 0, 1 skipped
        _apply(live, st, 0, [_el(1000, "a"), _el(1100, "b"), _el(1200, "c")])
        live.flush()
        floor, got = st.book.take(7, 0)
        assert got == [[0, 2, 0, [0, 2], None], [2, 3, 2, [2, 3], None]]
        owner.learn(floor, got, 3)
        assert (owner.decided, owner.applied, owner.lost) == (3, 3, 0)
    finally:
        live.close()


def test_a_checkpoint_keeps_the_decisions_the_owner_has_not_acknowledged() -> None:
    """A cluster checkpoint (its capture runs on the worker at the barrier) keeps each
    stream's completed, unacknowledged decisions; a new leader that restores it answers
    the owner as the old one would have, although it replays none of those bodies."""
    live = LiveEngine(idle_ms=None).start()
    applied, lock = {S1: _Applied()}, threading.Lock()
    st, owner = applied[S1], OwnerDecisions()
    try:
        _apply(live, st, 0, [_el(1000, "a"), _el(1100, "b")])
        live.flush()
        owner.learn(*st.book.take(7, owner.decided), 2)
        assert st.book.take(7, owner.decided) == (2, [])  # its next request acknowledges 0, 1
        live.advance_to(2000)
        _apply(live, st, 2, [_el(1500, "c"), _el(2500, "d")])  # 1500 refused on the push side
        _apply(live, st, 4, [_el(2600, "e")])
        live.flush()
        held = _Held(live)  # the body after the barrier: not decided when the capture runs
        _apply(live, st, 5, [_el(2700, "f")])
        saved = saved_decisions(applied, lock)  # the capture, while the worker has not reached 5
        held.release()
        live.flush()
        want = st.book.take(7, owner.decided)
        assert want == (2, [[2, 4, 2, [3, 4], None], [4, 5, 3, [4, 5], None], [5, 6, 4, [5, 6], None]])
        assert saved == {S1: [7, 2, want[1][:2]]}  # the body after the barrier is the replay's

        again: dict[str, _Applied] = {}
        restore_decisions(again, lock, msgpack.unpackb(msgpack.packb(saved)))  # as a manifest holds it
        new = again[S1]
        assert (new.epoch, new.next) == (7, 5)
        assert new.book.take(7, owner.decided) == (2, want[1][:2])
        owner.learn(*new.book.take(7, owner.decided), 5)
        assert (owner.decided, owner.applied, owner.lost) == (5, 4, 0)
    finally:
        live.close()


def test_decisions_the_leader_cannot_give_are_counted_lost() -> None:
    owner = OwnerDecisions()
    owner.learn(None, [], 5)  # a leader that took no body of the epoch: bodies 0..4 are gone
    assert (owner.decided, owner.lost, owner.applied) == (5, 5, None)
    d = Decided()
    d.applied([0, 1], 40)
    book = DecisionBook()
    book.add(7, Pending(9, 11, 9, d))  # a new leader's first body of the stream
    owner.learn(*book.take(7, owner.decided), 11)
    assert (owner.decided, owner.lost, owner.applied) == (11, 9, 42)  # absolute count again


def test_the_leader_keeps_a_bounded_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(decisions_mod, "KEEP", 3)
    book = DecisionBook()
    for k in range(5):
        d = Decided()
        d.applied([0], k)
        book.add(7, Pending(k, k + 1, k, d))
    floor, got = book.take(7, 0)
    assert floor == 2 and [g[0] for g in got] == [2, 3, 4]
    owner = OwnerDecisions()
    owner.learn(floor, got, 5)
    assert (owner.decided, owner.lost, owner.applied) == (5, 2, 5)
    book.add(8, Pending(0, 1, 0, Decided()))  # a new epoch: the old one's are for nobody
    assert book.take(7, 0) == (None, [])
    assert book.take(8, 0) == (0, [[0, 1, None, [], None]])


def test_a_decision_waits_for_its_drop_record_on_disk() -> None:
    d = Decided()
    d.applied([1], 10, logged=42)  # element 0 dropped late: record 42 says so
    book = DecisionBook()
    book.add(7, Pending(0, 2, 0, d))
    assert book.take(7, 0, durable=41) == (0, [])
    assert book.take(7, 0, durable=42) == (0, [[0, 2, 10, [1, 2], None]])


def _xe(t: int, p: str) -> tuple[int, list[tuple[str, str, str]]]:
    return t, [(f"<{EX}x{t}>", f"<{EX}{p}>", f'"{t}"')]


def test_a_new_leader_rebuilds_the_decisions_its_owners_did_not_get(tmp_path: Path) -> None:
    """The old leader applied three bodies (the worker dropped one element as late) and died
    before the owner heard any decision: the new leader's replay rebuilds them (the push
    records refer to the bodies in the owner's stream log), so the owner gets every one --
    decided up to its next offset, nothing lost, the applied counts the old worker's."""
    state = str(tmp_path)
    s2 = EX + "s2"
    query = (
        f"PREFIX ex: <{EX}>\nSELECT (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s1 [RANGE 1s SLIDE 1s] {{ ?x ex:p ?v }} "
        f"STREAM ex:s2 [RANGE 1s SLIDE 1s] {{ ?x ex:q ?w }} }}"
    )
    owner = StreamLog(state)
    now = [0.0]
    first = LiveEngine(idle_ms=1000, clock=lambda: now[0])
    log = IngestLog(state)
    first.recover(log)
    first.register(query, "q")
    applied = {S1: _Applied(), s2: _Applied()}
    nexts = {S1: 0, s2: 0}
    epochs = {S1: 9, s2: 11}  # zxids of the owners' nodes (an element's default key holds it)

    def hand(stream: str, elements: list) -> list[bool]:
        q = owner.reserve(stream, epochs[stream])
        body = {
            "stream": stream,
            "epoch": epochs[stream],
            "offset": nexts[stream],
            "record": q,
            **pack_elements(elements),
        }
        owner.append(stream, epochs[stream], nexts[stream], msgpack.packb(body), q)
        flags, error = StreamIngest._apply(
            first,
            applied[stream],
            stream,
            epochs[stream],
            nexts[stream],
            with_refs(unpack_elements(body), epochs[stream], q),
            None,
            "o",
            True,
        )
        assert error is None
        nexts[stream] += len(flags)
        return flags

    assert hand(S1, [_xe(1000, "p"), _xe(5000, "p")]) == [True, True]
    assert hand(s2, [_xe(1000, "q")]) == [True]
    first.flush()

    def idle_then_push() -> None:
        # in the worker, between two batches: both streams go idle (the next reports pass
        # 5000) and a body of s2 is taken on the push side: 1500 the worker drops as late
        now[0] += 10.0
        assert hand(s2, [_xe(1500, "q"), _xe(6000, "q")]) == [True, True]

    first.call(idle_then_push)
    first.flush()
    first.sync()
    assert first.status()["streams"][s2]["late"] == 1, first.status()
    counts = {s: first.applied_count(s) for s in (S1, s2)}
    assert counts == {S1: 2, s2: 2}
    first.close()  # the leader dies: no decision reached the owner
    log.close()
    owner.close()

    second = LiveEngine()
    again = IngestLog(state)
    bodies = BodyStore(state)
    again.resolve = bodies.resolve
    rebuilt: dict[str, _Applied] = {}
    again.decide = partial(rebuild_decision, rebuilt, threading.Lock(), bodies)
    try:
        second.recover(again)
        second.flush()
        assert {s: second.applied_count(s) for s in (S1, s2)} == counts
        for stream in (S1, s2):
            book = OwnerDecisions()
            st = rebuilt.get(stream, _Applied())
            book.learn(*st.book.take(epochs[stream], 0, again.durable_seq()), nexts[stream])
            assert (book.decided, book.lost, book.applied) == (nexts[stream], 0, counts[stream]), stream
        assert rebuilt[s2].next == nexts[s2] and rebuilt[s2].epoch == epochs[s2]
    finally:
        second.close()
        again.close()
