"""Router units restored from task snapshots in a replica that has not ticked yet (issue 17).

A new leader's containers register every query, get the elements before the checkpoint's
cut, the snapshotted queries' states, then each shared join's *router unit* (router, shared
join, latest graph, timed windows: :mod:`linkstream.operators.shared_state`, one snapshot
per router, not per query) and one silent tick at the cut.  Before, every routed query had
no snapshot and was rebuilt by that tick from the windows.  Here the new replica restores
the units, its routers hold the old join rows before any tick (the state came from the
snapshot, through the wire form), and every query's lines after the cut equal those of the
replica that held the queries all along.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from linkstream.operators.router import RouterOperator
from linkstream.operators.state import StateError, decode_state, encode_state
from tests.containers.test_restored_first import CUT, STEP, _elements, _feeder, _two_replicas


def _wire(st):  # through the wire form, as the checkpoint store and the driver ship it
    return decode_state([bytes(memoryview(f)) for f in encode_state(st)])


@pytest.mark.parametrize(("per_query", "ids"), [(True, "same"), (False, "same"), (True, "differ")])
def test_routed_queries_restored_from_their_router_units_continue_like_the_old_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_query: bool, ids: str
) -> None:
    corpus, texts, old, new = _two_replicas(tmp_path, monkeypatch)
    feeds = {}
    if ids == "same":
        old.preplan(texts)
    else:  # the old replica numbered the elements' terms before the queries came (a live
        # run); the new one plans them all at once first (a new leader's run)
        feeds[id(old)] = _elements(old, corpus)
    new.preplan(texts)
    for r in (old, new):
        for name, text in texts.items():
            r.register(name, text)
        if id(r) not in feeds:
            feeds[id(r)] = _elements(r, corpus)
    feed = _feeder(feeds)
    steps = {n: old.engine.queries[n].steps for n in texts}
    t_end = max(el.t for el in corpus.elements) + 2 * STEP
    c0 = (min(el.t for el in corpus.elements) // STEP + 1) * STEP
    routed: dict[str, str] = {}
    restored: list[str] = []
    differ, lines = Counter[str](), 0
    for k, c in enumerate(range(c0, t_end, STEP), start=1):
        due = [n for n in texts if all(c % s == 0 for s in steps[n])]
        feed(old, c)
        want = old.tick(k, c, due).lines
        if k < CUT:
            continue
        if k == CUT:  # the checkpoint, as the container's tsnap / trestore / trrouters do
            feed(new, c)
            snaps, units, names = {}, {}, {}
            for n in texts:
                try:
                    snaps[n] = _wire(old.snapshot(n))
                except StateError:
                    router = old.routed(n)
                    if id(router) not in units:
                        units[id(router)] = _wire(old.router_state(router))
                    names.setdefault(id(router), []).append(n)
            assert len(units) >= 3 and sum(map(len, names.values())) > 50, (len(units), names)
            if per_query:  # the restored queries first: the others are set aside until the tick
                for n in sorted(snaps):
                    new.unregister(n)
                    assert new.register_restored(n, texts[n], snaps[n])
            got = new.restore_routers([(names[r], units[r]) for r in units], c)
            restored = sorted(n for n, e in got.items() if not e)
            assert restored == sorted(got), {n: e for n, e in got.items() if e}
            rows = [
                len(op.state)
                for n in restored
                for op in new.engine.queries[n].root.walk()
                if isinstance(op, RouterOperator)
            ]
            assert rows and all(rows), "restored routers hold the old join's rows before any tick"
            routed = {n: n for ns in names.values() for n in ns}
            new.tick(k, c, [])  # the silent tick
            continue
        feed(new, c)
        got_lines = new.tick(k, c, due).lines
        for n in due:
            lines += len(want.get(n, []))
            if Counter(want.get(n, [])) != Counter(got_lines.get(n, [])):
                differ[n] += 1
    assert lines > 1000
    assert len(restored) == len(routed) > 50
    assert not differ, f"{len(differ)} queries differ after the restore: {sorted(differ.items())[:10]}"
