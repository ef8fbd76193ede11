"""A dead container's tasks restored from the checkpoint's task units and fed forward.

Two replicas of one run over the corpus slice's 240 template queries (``tests/engine/
test_sharing``'s: shared windows, scans, joins, routers): ``old`` holds every query all
along (what embedded mode answers), ``live`` (the new owner) holds half of them.  The
other half lived on a container that is checkpointed at tick ``CUT`` (each query's own
snapshot or its router unit, through the wire form) and dies ``LATE`` ticks later.  The
new owner restores them from the checkpoint in a scratch replica, feeds them the history
since (the recomputation's: elements as the driver ships them, in its ids with terms)
and hands them over (:mod:`linkstream.containers.restoreforward`).  The owed report
equals ``old``'s, and so does every later line of every query.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import numpy as np
import pytest

from linkstream.containers import assigned
from linkstream.containers.messages import Elements
from linkstream.containers.replica import RunReplica
from linkstream.containers.restoreforward import adopt, forward
from linkstream.containers.takeover import Slot
from linkstream.operators.shared_state import UNIT
from linkstream.operators.state import QueryState, StateError
from linkstream.scheduler.assignment import Assignment
from linkstream.scheduler.state import TaskSpec
from tests.containers.test_restored_first import CUT, STEP, _elements, _feeder, _two_replicas
from tests.containers.test_restored_routers import _wire

LATE = 5  # ticks between the checkpoint and the container's death
RUNNING = "the router evaluated here already"


def _history(
    old: RunReplica, els: list[tuple[str, int, np.ndarray]], cs: list[int]
) -> tuple[Elements, list[int]]:
    """The elements before ``cs[-1]`` as the driver ships them (its ids: ``old``'s, with their
    terms), and per report time of ``cs`` how many come before it."""
    els = [e for e in els if e[1] < cs[-1]]
    streams = list(old.spec.streams)
    meta = np.array(
        [[streams.index(s) for s, _, _ in els], [t for _, t, _ in els], [len(x) for *_, x in els]]
    )
    triples = np.concatenate([x for *_, x in els]).astype(np.int64)
    ids = np.unique(triples)
    terms = old.engine.dictionary.decode_many(ids)
    at = [sum(1 for e in els if e[1] < c) for c in cs]
    return Elements(old.spec.id, ids, list(terms), meta.astype(np.int64), triples), at


def _checkpoint(old: RunReplica, dead: dict[str, str]) -> dict[str, QueryState]:
    """What the dead container's ``tsnap`` wrote: each query's own state, or the unit of the
    routers it reads (one object per set of routers, named under each of its queries)."""
    out: dict[str, QueryState] = {}
    units: dict[tuple[int, ...], list[str]] = {}
    for n in dead:
        try:
            out[n] = _wire(old.snapshot(n))
        except StateError:
            units.setdefault(tuple(sorted(id(r) for r in old.routed(n))), []).append(n)
    for names in units.values():
        st = _wire(old.router_state(old.routed(names[0])))
        st.header["queries"] = names
        out.update(dict.fromkeys(names, st))
    return out


@pytest.mark.parametrize("damage", ["none", "missing"])
def test_dead_containers_tasks_restored_from_the_checkpoint_and_fed_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    corpus, texts, old, live = _two_replicas(tmp_path, monkeypatch)
    names = sorted(texts)
    dead = {n: texts[n] for n in names[::2]}
    for r, held in ((old, names), (live, names[1::2])):
        r.preplan({n: texts[n] for n in held})
        for n in held:
            r.register(n, texts[n])
    old_els = _elements(old, corpus)
    feed = _feeder({id(old): old_els, id(live): _elements(live, corpus)})
    steps = {n: old.engine.queries[n].steps for n in texts}
    c0 = (min(el.t for el in corpus.elements) // STEP + 1) * STEP
    t_end = max(el.t for el in corpus.elements) + 2 * STEP
    cs: list[int] = []
    snaps: dict[str, QueryState] = {}
    first: dict[str, int] = {}  # per adopted query, the first tick it answers
    differ, lines, owed, changed = Counter[str](), 0, 0, 0
    at_cut: dict[str, list[str]] = {}
    rebuilt: dict[str, str] = {}
    restored: list[str] = []
    joined: list[str] = []
    wants: dict[int, dict[str, list[str]]] = {}  # the dead container's queries' reports
    for k, c in enumerate(range(c0, t_end, STEP), start=1):
        due = [n for n in texts if all(c % s == 0 for s in steps[n])]
        feed(old, c)
        want = old.tick(k, c, due).lines
        wants[c] = {n: want.get(n, []) for n in due if n in dead}
        feed(live, c)
        ticked = live.tick(k, c, [n for n in due if live.holds(n)])
        got = ticked.lines
        if k == CUT:
            at_cut = {n: want.get(n, []) for n in dead}
            snaps = _checkpoint(old, dead)
            assert sum(1 for st in snaps.values() if st.header.get("unit") == UNIT) > 30
            if damage == "missing":  # a query's object is gone, a unit is of another time
                gone = [n for n in dead if snaps[n].header.get("unit") != UNIT][:3]
                unit = next(n for n in dead if snaps[n].header.get("unit") == UNIT)
                for n in gone:
                    del snaps[n]
                snaps[unit] = QueryState({**snaps[unit].header, "c": c - STEP}, snaps[unit].arrays)
        if k >= CUT:
            cs.append(c)
        if k == CUT + LATE:  # the container died: its tasks come here
            elements, at = _history(old, old_els, cs)
            fwd = forward(live, dead, snaps, cs[0], elements, cs[1:], at)
            restored, rebuilt = fwd.restored, fwd.rebuilt
            if damage == "none":  # owed two ticks back: the later ones are answered too
                early = forward(live, dead, snaps, cs[0], elements, cs[1:], at, owe=cs[-3])
                assert sorted(early.later) == cs[-2:] and any(early.later.values())
                for lc, ls in [(cs[-3], early.lines), *early.later.items()]:
                    assert {n: Counter(x) for n, x in ls.items()} == {
                        n: Counter(x) for n, x in wants[lc].items()
                    }
            for n in due:
                if n in dead:  # the owed report
                    owed += 1
                    if Counter(want.get(n, [])) != Counter(fwd.lines.get(n, [])):
                        differ[n] += 1
                    changed += Counter(want.get(n, [])) != Counter(
                        x.replace(str(cs[0]), str(c)) for x in at_cut.get(n, [])
                    )
            why = adopt(live, dead, fwd)
            assert not any(why.values()), {n: e for n, e in why.items() if e}
            for n in dead:
                unit = fwd.states[n].header.get("unit") == UNIT
                first[n] = k + (2 if unit and live.mode(n) != "RSTREAM" else 1)
            continue
        if k > CUT + LATE + 1:
            assert not any(ticked.moved.values())
        elif k == CUT + LATE + 1:  # the routed queries' units are restored by this tick, or
            # their routers run here already (the other half's): those serve them from their rows
            joined = [n for n, e in ticked.moved.items() if e == RUNNING]
            assert ticked.moved and all(e in ("", RUNNING) for e in ticked.moved.values()), ticked.moved
        for n in due:
            if n in dead and k < first.get(n, t_end):
                continue
            lines += len(want.get(n, []))
            if Counter(want.get(n, [])) != Counter(got.get(n, [])):
                differ[n] += 1
    # the owed report is not the checkpoint's: feeding forward changed most of it
    assert owed > 50 and changed > owed // 2 and lines > 1000
    assert not differ, f"{len(differ)} queries differ: {sorted(differ.items())[:10]}"
    assert 0 < len(joined) < len(dead)
    if damage == "none":
        assert restored == sorted(dead) and not rebuilt
    else:  # 3 without a snapshot, the unit of another time's queries: rebuilt, lines equal
        assert len(rebuilt) > 3 and all(rebuilt.values())
        assert len(restored) + len(rebuilt) == len(dead) and len(restored) > len(dead) // 2


def test_a_query_lost_with_a_dead_container_waits_for_its_restore_within_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The new owner does not rebuild a query reassigned ``restored_from`` a dead container
    in a running replay: it waits for the driver's ``forward`` -- until the driver names it
    in a recompute's ``rebuild`` list, ``MAX_UNKEPT`` forwards could not be kept, or
    ``RESTORE_WAIT`` seconds passed -- and then rebuilds it as before."""
    q = object.__new__(assigned.AssignedQueries)
    q.id, q._rebuild, q._restore_wait, q._slots = "oc-2", set(), {}, {}
    running = cast(RunReplica, SimpleNamespace(last_seq=7, synced=True))
    lost, plain = Assignment(TaskSpec("t"), "oc-2", None, "oc-1"), Assignment(TaskSpec("t"), "oc-2")
    assert not q._awaits_restore("p", plain, running)  # a fresh or stateless move: built at once
    assert not q._awaits_restore("s", lost, cast(RunReplica, SimpleNamespace(last_seq=0, synced=True)))
    assert q._awaits_restore("a", lost, running) and q._awaits_restore("b", lost, running)
    for _ in range(assigned.MAX_UNKEPT - 1):  # forwards that came before its streams were live
        q._restore_refused(["a"], forwarded=True)
    assert q._awaits_restore("a", lost, running)
    q._restore_refused(["a"], forwarded=True)
    q._restore_refused(["b"], forwarded=False)  # the driver: no checkpoint holds it
    assert not q._awaits_restore("a", lost, running) and not q._awaits_restore("b", lost, running)
    assert q._rebuild == {"a", "b"}
    # kept from a forward (it has its slot): the driver's word (sent when the answer did not say
    # what was kept, an older container's) leaves it as it is -- restored once, not rebuilt
    assert q._awaits_restore("k", lost, running)
    q._slots["k"] = Slot("t", 7)
    q._restore_refused(["k"], forwarded=False)
    assert "k" not in q._rebuild
    monkeypatch.setattr(assigned, "RESTORE_WAIT", 0.0)  # no word from the driver in time
    assert not q._awaits_restore("c", lost, running) and "c" in q._rebuild


def test_a_query_named_before_its_ready_announcement_is_answered_from_its_first_tick() -> None:
    """The driver may name the new owner of a query kept from its ``forward`` before it read
    the *ready* announcement (:meth:`Recovery.early`): the container answers the query only
    from the first tick it announced (an IStream / DStream query one tick later than an
    RStream one) and lists it as missing before, with that tick; once every announced first
    tick has passed, nothing is looked up per tick."""
    q = object.__new__(assigned.AssignedQueries)
    q._slots = {n: Slot("t-" + n, 7) for n in ("r", "i", "old")}
    q._firsts = {"r": 8, "i": 9, "gone": 9}  # announced at tick 7 (gone: released since)
    assert q._not_yet(8, ["r", "i", "old", "gone", "x"]) == {"i": 9}
    assert q._firsts == {"i": 9, "gone": 9}
    assert q._not_yet(9, ["i"]) == {} and q._firsts == {}
