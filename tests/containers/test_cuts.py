"""A tick waits for its cut (``run --zk --ingest direct``, :class:`CutGate`).

Elements and ticks come from different senders (the streams' owners, the leader): a tick
is evaluated only once every stream it names reached the applied count of its cut,
elements beyond a waiting tick's cut are held until the tick has been evaluated, resent
elements are passed over and a gap is named by ``missing``.  The ``cuts`` of a tick are
on the wire only when there are some (a ``--ingest leader`` tick is the bytes it was).
"""

from __future__ import annotations

from linkstream.containers.cuts import CutGate
from linkstream.containers.messages import Tick
from linkstream.containers.protocol import decode, encode

A, B = "http://example.org/a", "http://example.org/b"


def _gate() -> tuple[CutGate[str, str], list[tuple[str, object]]]:
    log: list[tuple[str, object]] = []
    gate: CutGate[str, str] = CutGate(
        lambda stream, els: log.append(("els", (stream, list(els)))),
        lambda tick: log.append(("tick", tick)),
    )
    return gate, log


def test_a_tick_waits_until_every_stream_reached_its_cut() -> None:
    gate, log = _gate()
    gate.tick({A: 2, B: 1}, "t1")  # the leader's tick overtook the owners' elements
    assert log == [] and gate.waiting == 1
    assert gate.missing() == {A: (0, 2), B: (0, 1)}
    gate.elements(A, 0, ["a0", "a1"])
    assert log == [("els", (A, ["a0", "a1"]))] and gate.waiting == 1  # B still lacks one
    assert gate.missing() == {B: (0, 1)}
    gate.elements(B, 0, ["b0"])
    assert log[-2:] == [("els", (B, ["b0"])), ("tick", "t1")]
    assert gate.waiting == 0 and gate.missing() == {}


def test_elements_beyond_a_waiting_cut_wait_for_the_tick() -> None:
    gate, log = _gate()
    gate.tick({A: 2, B: 1}, "t1")
    gate.tick({A: 4, B: 1}, "t2")
    gate.elements(A, 0, ["a0", "a1", "a2", "a3", "a4"])  # a2.. are after t1, a4 after t2
    assert log == [("els", (A, ["a0", "a1"]))]
    assert gate.applied[A] == 2
    gate.elements(B, 0, ["b0"])
    assert log[1:] == [
        ("els", (B, ["b0"])),
        ("tick", "t1"),
        ("els", (A, ["a2", "a3"])),
        ("tick", "t2"),
        ("els", (A, ["a4"])),  # no tick waits: applied at once
    ]
    gate.elements(A, 5, ["a5"])
    assert log[-1] == ("els", (A, ["a5"])) and gate.applied == {A: 6, B: 1}


def test_resends_are_passed_over_and_gaps_wait() -> None:
    gate, log = _gate()
    gate.elements(A, 0, ["a0", "a1"])
    gate.elements(A, 0, ["a0", "a1"])  # an owner's resend
    gate.elements(A, 3, ["a3"])  # after a gap (a2 is missing)
    gate.tick({A: 4}, "t1")
    assert log == [("els", (A, ["a0", "a1"]))]
    assert gate.missing() == {A: (2, 3)}
    gate.elements(A, 1, ["a1", "a2"])  # overlaps what was applied: only a2 is new
    assert log[1:] == [("els", (A, ["a2"])), ("els", (A, ["a3"])), ("tick", "t1")]


def test_a_joining_container_starts_at_its_backlog() -> None:
    gate, log = _gate()
    gate.start(A, 10)  # its first element of A is applied count 10
    gate.tick({A: 11}, "t1")
    gate.elements(A, 9, ["a9", "a10"])  # a9 is before its start
    assert log == [("els", (A, ["a10"])), ("tick", "t1")]


def test_ticks_without_cuts_are_the_bytes_they_were() -> None:
    plain = Tick("r", 3, 1000, ["q"], {"q": "c1"}, {"c1": 2})
    cut = Tick("r", 3, 1000, ["q"], {"q": "c1"}, {"c1": 2}, {A: 7})
    assert b"cuts" not in b"".join(bytes(f) for f in encode(plain))
    assert decode(encode(plain)) == plain and decode(encode(cut)) == cut
    assert decode(encode(cut)).cuts == {A: 7}


def test_a_bounded_gate_holds_elements_until_a_tick_names_them() -> None:
    # an owner's elements overtook the tick before them: nothing says yet where they belong
    log: list[tuple[str, object]] = []
    gate: CutGate[str, str] = CutGate(
        lambda stream, els: log.append(("els", (stream, list(els)))),
        lambda tick: log.append(("tick", tick)),
        bounded=True,
    )
    gate.elements(A, 0, ["a0", "a1", "a2"])
    assert log == []  # no tick named A yet
    gate.tick({A: 1}, "t1")
    assert log == [("els", (A, ["a0"])), ("tick", "t1")]  # a1, a2 are after t1: held
    gate.tick({A: 3}, "t2")
    assert log[-2:] == [("els", (A, ["a1", "a2"])), ("tick", "t2")]
    gate.elements(A, 3, ["a3"])
    assert log[-1] == ("tick", "t2") and gate.applied[A] == 3
