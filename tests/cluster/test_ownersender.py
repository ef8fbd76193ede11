"""The owners' sender's core (``run --zk --ingest direct``): from the bodies an owner
sequenced and the leader worker's decisions on them (a real embedded live engine's
``Decided``, late drops included), the runs it sends are exactly the elements the worker
applied, numbered by the stream's applied count; ``owned`` messages carry their terms
through the wire unchanged."""

from __future__ import annotations

from linkstream.cluster.decisions import Pending
from linkstream.cluster.ingestwire import pack_elements, split_elements
from linkstream.cluster.ownersender import OwnedTail, owned_message
from linkstream.containers.messages import Owned
from linkstream.containers.protocol import decode, encode
from linkstream.engine.live.batchpush import Decided
from linkstream.engine.live.runtime import LiveEngine
from tests.engine.test_push_decided import S1, _el, _worker_late


def _terms(elements: list) -> list[tuple[int, list[tuple[str, ...]]]]:
    return [(t, [tuple(r) for r in rows.strings()]) for t, rows in elements]


def test_the_runs_are_the_applied_elements_numbered_by_the_applied_count() -> None:
    live = LiveEngine(idle_ms=None).start()
    tail = OwnedTail()
    bodies = [
        [_el(1000, "a"), _el(1100, "b")],
        [_el(1500, "c"), _el(1800, "e"), _el(2500, "d"), _el(2600, "f")],  # 1500, 1800: late at the worker
        [_el(2700, "g"), _el(2800, "h")],
    ]
    wires, offset, pushed = [], 0, []
    try:
        for k, raw in enumerate(bodies):
            elements = split_elements(pack_elements(raw))
            tail.add(offset, elements)
            if k == 1:
                _, decided = _worker_late(live, S1, elements, 2000)
            else:
                decided = Decided()
                live.push_many(S1, elements, decided=decided)
                assert decided.wait(10)
            wire = Pending(offset, offset + len(elements), offset, decided).wire()
            assert wire is not None
            wires.append(wire)
            pushed += [(offset + j, raw[j]) for j in decided.taken]
            offset += len(elements)
        # the first decision alone, then the other two at once (an answer, then a poll)
        runs = tail.decide(wires[:1]) + tail.decide(wires[1:])
        assert len(tail) == 0 and tail.dropped == 0
    finally:
        live.close()
    assert [first for first, _ in runs] == [0, 2]  # one run per contiguous count: 0-1, then 2-5
    sent = [(first + i, el) for first, els in runs for i, el in enumerate(_terms(els))]
    applied = [(n, (t, [tuple(tr) for tr in triples])) for n, (_, (t, triples)) in enumerate(pushed)]
    assert sent == applied and tail.sent == 6
    assert [t for _, (t, _) in sent] == [1000, 1100, 2500, 2600, 2700, 2800]

    message = decode(encode(owned_message("r", S1, runs[1][0], runs[1][1])))
    assert isinstance(message, Owned) and (message.stream, message.first) == (S1, 2)
    got = [
        (int(t), [tuple(message.terms[i] for i in row) for row in message.triples[a:b].tolist()])
        for t, a, b in zip(message.meta[0], [0, *message.meta[1].cumsum()[:-1]], message.meta[1].cumsum())
    ]
    assert got == _terms(runs[1][1])


def test_bodies_whose_decisions_are_lost_are_never_sent() -> None:
    tail = OwnedTail()
    tail.add(0, split_elements(pack_elements([_el(1000, "a"), _el(1100, "b")])))
    tail.add(2, split_elements(pack_elements([_el(1200, "c")])))
    # the first body's decision is gone (another leader answered it): the next decision starts at 2
    runs = tail.decide([[2, 3, 7, [2, 3], None]])
    assert [(first, _terms(els)) for first, els in runs] == [(7, [(1200, [tuple(_el(1200, "c")[1][0])])])]
    assert tail.dropped == 2 and len(tail) == 0


def test_a_body_sequenced_again_at_an_offset_replaces_what_was_held_from_there() -> None:
    """An owner whose hand-off failed (no leader took the body: a push answered 503 during a
    take-over, which its client retries) sequences the next body at the same offset; after a
    leader took part of a body (its input queue stayed full), the next body starts after that
    part.  Each applied element is sent once, under its count (before: the retried element
    twice under one count and the element after it never -- the e2e scenario with owners)."""
    live = LiveEngine(idle_ms=None).start()
    tail = OwnedTail()
    wires = []

    def push(offset: int, elements: list, taken: int | None = None) -> None:
        decided = Decided()
        live.push_many(S1, elements[:taken], decided=decided)
        assert decided.wait(10)
        wire = Pending(offset, offset + len(elements[:taken]), offset, decided).wire()
        assert wire is not None
        wires.append(wire)

    try:
        raw = [_el(1000, "a"), _el(1100, "b")]
        tail.add(0, split_elements(pack_elements(raw)))  # its hand-off failed
        retry = split_elements(pack_elements(raw))
        tail.add(0, retry)
        push(0, retry)
        part = split_elements(pack_elements([_el(1200, "c"), _el(1300, "d"), _el(1400, "e")]))
        tail.add(2, part)
        push(2, part, taken=2)  # the leader took two of three
        after = split_elements(pack_elements([_el(1500, "f")]))
        tail.add(4, after)
        push(4, after)
        runs = tail.decide(wires)
    finally:
        live.close()
    sent = [(first + i, t) for first, els in runs for i, (t, _) in enumerate(els)]
    assert sent == [(0, 1000), (1, 1100), (2, 1200), (3, 1300), (4, 1500)]
    assert (tail.sent, tail.replaced, tail.dropped, len(tail)) == (5, 3, 0, 0)
