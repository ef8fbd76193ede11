"""Router units of routed windows planned after the windows had started (issue 17).

A shared join's timed windows grow to serve every query that subscribes before they start
sliding; a query that arrives later (a live move into a running container, a container
added to the cluster) and needs a finer step or a wider range gets windows of its own.  So
a container's routed plan depends on the order its queries came: one that ran the step-2 s
queries first and received the step-1 s ones later holds a 3000/2000 window *and* a second
window, where a fresh plan of the same queries grows one 4000/1000 window.  A new leader's
containers planned every query afresh, so the units of those routers did not fit and their
queries were rebuilt by the silent evaluation (``tests/cluster/test_live_service_e2e.py``:
up to 38 of 1,000).  Now the snapshot of a unit carries its routers' plan (routed
signature, instance needs, window specs: ``Sharing.plan_of``) and the restoring replica
plans the unit's queries on those windows (``Sharing.seeded``): every unit fits.

The lines after the cut equal those of a replica that held every query from the start
(the embedded engine: embedded mode's lines) and those of the old replica.

The same holds for live moves: a drain that spreads one router's queries over two
containers gave each a router planned for its share only (a coarser step, a narrower
window), which the unit did not fit (32 of 60 rebuilt); planned on the unit's plan, both
restore it.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from linkstream.containers.replica import RunReplica
from linkstream.engine.sharing import PlanSeed
from linkstream.operators.router import RouterOperator
from linkstream.operators.shared_state import router_units, routers_of
from linkstream.operators.state import StateError, decode_state, encode_state
from linkstream.operators.timed_window import TimedWindowOperator
from tests.containers.test_moved_routers import _router_counts
from tests.containers.test_restored_first import CUT, STEP, _elements, _feeder, _two_replicas
from tests.containers.test_restored_routers import checkpoint_states

LATE = 6  # the step-1 s queries arrive in the old replica after this tick


def _wire(st):  # through the wire form, as the checkpoint store and the driver ship it
    return decode_state([bytes(memoryview(f)) for f in encode_state(st)])


def _step2(text: str) -> bool:
    return re.search(r"(STEP|SLIDE) (PT2S|2000ms)\]", text) is not None


def _windows(r: RunReplica) -> list[str]:
    """The specs of the replica's timed windows (shared joins' windows), sorted."""
    seen = {id(op): op for rq in r.engine.queries.values() for op in rq.root.walk()}
    return sorted(repr(op.spec) for op in seen.values() if isinstance(op, TimedWindowOperator))


@pytest.mark.parametrize(("per_query", "plans"), [(True, True), (False, True), (True, False)])
def test_units_of_windows_planned_after_they_started_fit_a_fresh_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_query: bool, plans: bool
) -> None:
    """``plans`` off: units as written before session 18 (no plans): the fresh plan does not
    fit them, their queries are rebuilt by the silent tick, and the lines are equal all
    the same."""
    corpus, texts, old, new = _two_replicas(tmp_path, monkeypatch)
    ref = RunReplica(new.spec)  # every query from the start: embedded mode's lines
    early = {n for n, t in texts.items() if _step2(t)}
    assert 40 < len(early) < len(texts) - 40
    for r in (old, new, ref):
        r.preplan(texts)
    for name in sorted(early):
        old.register(name, texts[name])
    for r in (new, ref):
        for name, text in texts.items():
            r.register(name, text)
    feed = _feeder({id(r): _elements(r, corpus) for r in (old, new, ref)})
    steps = {n: ref.engine.queries[n].steps for n in texts}
    t_end = max(el.t for el in corpus.elements) + 2 * STEP
    c0 = (min(el.t for el in corpus.elements) // STEP + 1) * STEP
    restored: dict[str, str] = {}
    differ, lines = Counter[str](), 0
    for k, c in enumerate(range(c0, t_end, STEP), start=1):
        due = [n for n in texts if all(c % s == 0 for s in steps[n])]
        for r in (old, ref):
            feed(r, c)
        want = ref.tick(k, c, due).lines
        got_old = old.tick(k, c, [n for n in due if old.holds(n)]).lines
        if k == LATE:  # the step-1 s queries move in after the windows started
            for name in sorted(set(texts) - early):
                old.register(name, texts[name])
        if k < CUT:
            continue
        if k == CUT:  # the checkpoint, as the container's tsnap / trestore / trrouters do
            assert _windows(old) != _windows(ref), "the old replica's routed plan is the fresh one"
            feed(new, c)
            snaps, routed, units = checkpoint_states(old, texts)
            assert all("plan" in p for _, u in units for p in u.header["parts"])
            if not plans:
                for _, u in units:
                    for p in u.header["parts"]:
                        del p["plan"]
            assert len(routed) > 50 and len(units) >= 4, (len(routed), len(units))
            if per_query:  # the restored queries first: the others are set aside until the tick
                for n in sorted(snaps):
                    new.unregister(n)
                    assert new.register_restored(n, texts[n], snaps[n])
            restored = new.restore_routers(units, c)
            rows = [
                len(op.state)
                for n, e in restored.items()
                if not e
                for op in new.engine.queries[n].root.walk()
                if isinstance(op, RouterOperator)
            ]
            misfit = {n: e for n, e in restored.items() if e}
            if not plans:  # (every unit of the old replica's started windows: none fits)
                assert misfit and all("plan differs" in e for e in misfit.values()), misfit
            else:
                assert not misfit, f"{len(misfit)} of {len(restored)} rebuilt: {sorted(misfit.items())[:2]}"
                assert rows and all(rows), "restored routers hold the old join's rows before any tick"
            new.tick(k, c, [])  # the silent tick
            continue
        feed(new, c)
        got = new.tick(k, c, due).lines
        for n in due:
            lines += len(want.get(n, []))
            for other in (got, got_old):
                if Counter(want.get(n, [])) != Counter(other.get(n, [])):
                    differ[n] += 1
    assert lines > 1000
    assert not differ, f"{len(differ)} queries differ from embedded mode: {sorted(differ.items())[:10]}"
    assert sorted(restored) == sorted(n for n, _ in routed)


def test_queries_of_one_router_spread_over_two_containers_are_restored_in_both(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A drain spreads the queries of one router over several containers: each gets the
    router's unit with the first of them (``snapshot_moving``), but planned its router for
    its share of the queries only -- a narrower window, or a coarser step, than the old
    container's -- so the unit did not fit and the router was built again from the stream
    buffers.  Planned on the unit's plan, each new container restores it."""
    corpus, texts, old, new1 = _two_replicas(tmp_path, monkeypatch)
    new2 = RunReplica(new1.spec)
    for name, text in texts.items():
        old.register(name, text)
    routed: list[tuple[str, list[RouterOperator]]] = []
    for name in texts:
        try:
            routed.append((name, routers_of(old.engine.queries[name].root)))
        except StateError:
            continue
    units = router_units(routed)
    stay = {n for names, _ in units[1::2] for n in names}  # new1 runs these all along
    for name in sorted(stay):
        new1.register(name, texts[name])
    # every other unit's queries: those of step 2 s to one new container, the others to the
    # other (a router's windows serve the finest step and the widest range of its queries)
    dest = {n: new1 if _step2(texts[n]) else new2 for names, _ in units[::2] for n in names}
    assert len(dest) > 40, len(dest)
    feed = _feeder({id(r): _elements(r, corpus) for r in (old, new1, new2)})
    steps = {n: old.engine.queries[n].steps for n in texts}
    t_end = max(el.t for el in corpus.elements) + 2 * STEP
    c0 = (min(el.t for el in corpus.elements) // STEP + 1) * STEP
    moved: dict[str, str] = {}
    differ, rows_differ, lines = Counter[str](), Counter[str](), 0
    for k, c in enumerate(range(c0, t_end, STEP), start=1):
        due = [n for n in texts if all(c % s == 0 for s in steps[n])]
        for r in (old, new1, new2):
            feed(r, c)
        want = old.tick(k, c, due).lines
        if k <= CUT:
            new1.tick(k, c, [n for n in due if n in stay])
            new2.tick(k, c, [])
            if k == CUT:  # the drain, between this tick and the next
                for n in sorted(dest):
                    to = "new1" if dest[n] is new1 else "new2"
                    st = _wire(old.snapshot_moving(n, to))
                    assert dest[n].register_routed(n, texts[n], st) == "", n
            continue
        got = {}
        for r in (new1, new2):
            ticked = r.tick(k, c, [n for n in due if r.holds(n)])
            got.update(ticked.lines)
            if k == CUT + 1:
                moved.update(ticked.moved)
        for n in dest:  # the shared joins' rows too (results hide a row counted twice)
            if sorted(_router_counts(old, n)) != sorted(_router_counts(dest[n], n)):
                rows_differ[n] += 1
        for n in due:
            if k == CUT + 1 and n in dest and dest[n].mode(n) != "RSTREAM":
                continue  # its result view is built by this tick: answered from the next one
            if n in dest or n in stay:
                lines += len(want.get(n, []))
                if Counter(want.get(n, [])) != Counter(got.get(n, [])):
                    differ[n] += 1
    assert lines > 1000
    assert not differ, f"{len(differ)} queries differ from embedded mode: {sorted(differ.items())[:10]}"
    assert not rows_differ, f"{len(rows_differ)} routers' rows differ: {sorted(rows_differ.items())[:10]}"
    assert sorted(moved) == sorted(dest)
    misfit = {n: e for n, e in moved.items() if e}
    assert not misfit, f"{len(misfit)} of {len(moved)} rebuilt: {sorted(misfit.items())[:2]}"


@pytest.mark.parametrize(
    "plan",
    [
        None,
        [],
        {"key": 3, "needs": [[1, 1]], "widest": [1], "windows": [[[1, 1]]]},
        {"key": "k", "needs": [[1, 1]], "widest": [1, 2], "windows": [[[1, 1]]]},
        {"key": "k", "needs": [[1, 1, 1]], "widest": [1], "windows": [[[1, 1]]]},
        {"key": "k", "needs": [[1, 1]], "widest": [1], "windows": [[]]},
        {"key": "k", "needs": [["a", 1]], "widest": [1], "windows": [[[1, 1]]]},
        {"key": "k", "needs": [[1, 1]], "widest": [1]},
    ],
)
def test_a_malformed_plan_is_ignored(plan: object) -> None:
    """A unit's plan comes off the wire: one that is not a plan plans the query afresh."""
    assert PlanSeed.parse(plan) is None
    good = {"key": "k", "needs": [[3000, 1000]], "widest": [3000], "windows": [[[4000, 1000]]]}
    seed = PlanSeed.parse(good)
    assert seed is not None and PlanSeed.parse(seed.wire()) == seed
