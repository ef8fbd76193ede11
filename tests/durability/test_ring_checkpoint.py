"""Result rings go into checkpoints incrementally: each one writes only the reports kept
since the previous one (a shared object), and a restore puts every kept report back, in
order, without the reports of an earlier query of the same name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from linkstream.engine.live.checkpoint import Checkpointer
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from linkstream.store.checkpoints import open_checkpoints

EX = "http://example.org/"
S = EX + "s"
Q = f"SELECT ?x WHERE {{ STREAM <{S}> [RANGE 2s SLIDE 1s] {{ ?x <{EX}p> ?v }} }}"


def _push(live: LiveEngine, a: int, b: int) -> None:
    for i in range(a, b):
        live.push(S, 1000 * i, [(f"<{EX}x{i}>", f"<{EX}p>", f"<{EX}o>")])
    live.sync()
    live.flush()


def _kept(live: LiveEngine, name: str) -> list[tuple[int, tuple[str, ...]]]:
    return [(t, lines) for t, lines, _ in live._rings[name].after((-1, 0))]


def _started(d: Path) -> tuple[LiveEngine, Any, Checkpointer]:
    """A live engine with an ingest log and checkpoints in ``d``, and its checkpointer."""
    lg = IngestLog(str(d))
    store = open_checkpoints(str(d / "ck"))
    live = LiveEngine(idle_ms=None)
    live.recover(lg, checkpoints=store)
    return live, store, Checkpointer(live, lg, store, 0)


def test_rings_are_written_incrementally_and_restored_whole(tmp_path: Path) -> None:
    d = tmp_path / "state"
    live, store, ck = _started(d)
    live.register(Q, "q")
    live.register(Q, "gone")
    _push(live, 1, 20)
    first = ck.checkpoint()
    live.unregister("gone")
    _push(live, 20, 30)
    live.register(Q, "gone")  # the same name again: a new ring
    _push(live, 30, 40)
    second = ck.checkpoint()
    want_q, want_gone = _kept(live, "q"), _kept(live, "gone")
    assert len(want_q) == 38 and [t for t, _ in want_gone] == [30000 + 1000 * k for k in range(10)]
    live.close()

    m1, m2 = store.meta(first), store.meta(second)
    assert len(m1["rings"]) == 1 and len(m2["rings"]) == 2 and m2["rings"][0] == m1["rings"][0]
    c2 = store.load_id(second)
    newer = c2.blob("shared/" + m2["rings"][1][0])
    entries = {e[0]: e[3] for e in newer.header["entries"]}
    assert entries == {"q": 20, "gone": 10}  # only what came after the first checkpoint
    assert newer.arrays[1][0] == 20000  # report times 20 s..39 s of q first

    lg = IngestLog(str(d))
    again = LiveEngine(idle_ms=None)
    assert again.recover(lg, checkpoints=store) == 0
    assert _kept(again, "q") == want_q
    assert _kept(again, "gone") == want_gone  # not the first "gone"'s reports
    # checkpoints after the restart go on from there: only new reports, the old objects listed
    ck = Checkpointer(again, lg, store, 0)
    _push(again, 40, 43)
    third = ck.checkpoint()
    m3 = store.meta(third)
    assert [r[0] for r in m3["rings"][:2]] == [r[0] for r in m2["rings"]] and len(m3["rings"]) == 3
    newest = store.load_id(third).blob("shared/" + m3["rings"][2][0])
    assert {e[0]: e[3] for e in newest.header["entries"]} == {"q": 3, "gone": 3}
    again.close()


def test_dictionary_chunks_across_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Full dictionary chunks are shared objects written once and listed by every later
    checkpoint: a restore from the newest one gets every term back at its id."""
    import linkstream.engine.live.checkpoint as checkpoint

    monkeypatch.setattr(checkpoint, "CHUNK", 16)
    d = tmp_path / "state"
    live, store, ck = _started(d)
    live.register(Q, "q")
    ids = []
    for a, b in ((1, 30), (30, 45), (45, 80)):
        _push(live, a, b)
        ids.append(ck.checkpoint())
    terms = list(live.engine.dictionary._terms)
    want = _kept(live, "q")
    live.close()
    chunks = [sorted(k for k in store.load_id(i).objects if k.startswith("shared/terms-")) for i in ids]
    assert len(terms) > 80
    assert chunks[0] == chunks[1][: len(chunks[0])] and chunks[1] == chunks[2][: len(chunks[1])]
    assert len(chunks[2]) == len(terms) // 16
    lg = IngestLog(str(d))
    again = LiveEngine(idle_ms=None)
    assert again.recover(lg, checkpoints=store) == 0
    assert list(again.engine.dictionary._terms) == terms
    assert _kept(again, "q") == want
    again.close()


KEYED = "SELECT ?p ?v WHERE {{ STREAM <%s> [RANGE 2s SLIDE 1s] {{ <%sx{k}> ?p ?v }} }}" % (S, EX)


def _push_keyed(live: LiveEngine, a: int, b: int) -> None:
    for i in range(a, b):
        live.push(
            S,
            1000 * i,
            [(f"<{EX}x{i % 7}>", f"<{EX}p>", f'"{i}"'), (f"<{EX}x{i % 3}>", f"<{EX}p>", f'"{i}"')],
        )
    live.sync()
    live.flush()


def test_rings_of_a_keyed_groups_members_checkpoint_and_restore_as_plain_rings(tmp_path: Path) -> None:
    """Pattern queries differing in a constant keep their reports in their group's log
    (``MemberRing``): checkpoints write each member's reports incrementally, a restore puts
    them back, and the members' rings read on across the restart as before it."""
    from linkstream.engine.live.grouprings import MemberRing

    d = tmp_path / "state"
    live, store, ck = _started(d)
    names = [f"k{k}" for k in range(30)]
    live.register_many([(KEYED.format(k=k % 9), n, None) for k, n in enumerate(names)])
    _push_keyed(live, 1, 20)
    ck.checkpoint()
    _push_keyed(live, 20, 35)
    ck.checkpoint()
    assert all(isinstance(live._rings[n], MemberRing) for n in names)
    want = {n: _kept(live, n) for n in names}
    assert sum(len(w) for w in want.values()) > 100 and all(want[f"k{k}"] for k in range(7))
    live.close()

    lg = IngestLog(str(d))
    again = LiveEngine(idle_ms=None)
    assert again.recover(lg, checkpoints=store) == 0
    assert {n: _kept(again, n) for n in names} == want
    _push_keyed(again, 35, 40)  # the restored rings become the members' bases
    assert all(isinstance(again._rings[n], MemberRing) for n in names)
    later = {n: _kept(again, n) for n in names}
    for n in names:
        assert later[n][: len(want[n])] == want[n]
        assert all(t >= 35000 for t, _ in later[n][len(want[n]) :])
    assert sum(len(later[n]) - len(want[n]) for n in names) > 0
    again.close()
