"""Routed queries moved live between containers carry their routers' units (issue 17).

A drain or a rebalance moves a query between two ticks of a running replay
(:mod:`linkstream.cluster.handover`): its old container snapshots it and the new one
registers it with that state.  A query on shared joins' routers has no state of its own
(the router's rows are every subscriber's); before, it moved without state and the new
container built its shared join again from the stream buffers.  Now it moves with the
*unit* of the routers it reads (:meth:`RunReplica.snapshot_moving`, the unit cluster
checkpoints write; once per destination and tick: the next query of the same routers moves
with a unit of no router), and the new container restores it into the routers it planned for the
query (:meth:`RunReplica.register_routed`; at the start of the next tick, once every query
moved meanwhile is planned: their routers' windows then cover them all, as the old ones did), time and count windows alike (count windows'
positions rebased into this buffer).  Here a replica that ticked every report time takes
over every other router's queries from one that ran them all (the old one is the embedded
engine: its lines are embedded mode's), together with non-routed queries moved with their
own state; every router is restored (none rebuilt) and every query's lines after the move
equal the old replica's.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

import tests.api.corpus as corpus_mod
from linkstream.containers.replica import RunReplica
from linkstream.operators.router import RouterOperator
from linkstream.operators.shared_state import UNIT, router_units, routers_of
from linkstream.operators.state import StateError, decode_state, encode_state
from linkstream.operators.timed_window import CountedWindowOperator
from linkstream.scheduler.runs import RunSpec
from tests.api.corpus import REPO_GRAPH, STREAM_A, STREAM_B, corpus_or_skip
from tests.containers.test_restored_first import STEP, _queries, lockstep
from tests.containers.test_restored_routers import _congestion

CUT = 25  # the move: after this tick


def _wire(st):  # through the wire form, as the driver forwards it
    return decode_state([bytes(memoryview(f)) for f in encode_state(st)])


def _texts() -> dict[str, str]:
    """CityBench template queries, count-window variants of the CQELS ones, and the
    average-congestion query (two routers)."""
    out = _queries(160)
    for name, text in list(out.items())[:80]:
        counted, n = re.subn(
            r"\[RANGE (\d)000ms SLIDE \d000ms\]", lambda m: f"[TRIPLES {12 * int(m[1])}]", text
        )
        if n:
            out[f"n{name}"] = counted
    return {**out, **_congestion()}


def _router_counts(replica: RunReplica, name: str) -> list[int]:
    """The counts of the rows of the routers ``name`` reads (ids differ between replicas)."""
    return [
        int(x)
        for op in replica.engine.queries[name].root.walk()
        if isinstance(op, RouterOperator)
        for x in op.rows().counts
    ]


@pytest.mark.parametrize("order", ["sorted", "reversed"])
def test_routed_queries_moved_with_their_router_units_continue_like_the_old_replica(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, order: str
) -> None:
    monkeypatch.setattr(corpus_mod, "ELEMENTS", 90)
    corpus = corpus_or_skip(tmp_path)
    texts = _texts()
    statics = ((None, str(corpus.static)), (REPO_GRAPH, str(corpus.static)))
    spec = RunSpec(
        "r1", "tcp://127.0.0.1:1", "http://localhost/", STEP, statics, (STREAM_A, STREAM_B),
        (None, None), {f"t-{n}": n for n in texts},
    )  # fmt: skip
    old, new = RunReplica(spec), RunReplica(spec)
    for name, text in texts.items():
        old.register(name, text)
    routed: list[tuple[str, list[RouterOperator]]] = []
    plain = []
    for name in texts:
        try:
            routed.append((name, routers_of(old.engine.queries[name].root)))
        except StateError:
            plain.append(name)
    units = router_units(routed)
    # every other router unit's queries move (the new replica holds none of them before),
    # and every other query that is not routed
    moved_routed = sorted(n for names, _ in units[::2] for n in names)
    moved = set(moved_routed) | set(plain[::2])
    counted = [
        n
        for n in moved_routed
        if any(
            isinstance(w, CountedWindowOperator)
            for r in routers_of(old.engine.queries[n].root)
            for w in r.windows
        )
    ]
    assert len(moved_routed) > 40 and counted and len(plain) > 10, (len(moved_routed), counted, len(plain))
    for name in texts:
        if name not in moved:
            new.register(name, texts[name])
    restored: dict[str, str] = {}
    unit_bytes = light = 0
    differ, rows_differ, lines = Counter[str](), Counter[str](), 0
    for k, c, due, want in lockstep(corpus, texts, old, new, moved, CUT):
        if k <= CUT:
            if k < CUT:
                continue
            # the move, between this tick and the next: each query's state from the old
            # replica (the driver's handover), registered with it by the new one
            for n in sorted(moved, reverse=order == "reversed"):
                st = _wire(old.snapshot_moving(n))
                if st.header.get("unit") == UNIT:
                    assert n in moved_routed
                    unit_bytes += st.nbytes
                    light += "with" in st.header  # its routers' unit came with another query
                    assert new.register_routed(n, texts[n], st) == "", n  # restored by the next tick
                else:
                    assert new.register_restored(n, texts[n], st), n
            continue
        ticked = new.tick(k, c, due)
        got = ticked.lines
        if k == CUT + 1:  # its units were restored first (once every moved query was planned)
            restored = ticked.moved
            assert not {n: e for n, e in restored.items() if e}, "routed queries rebuilt, not restored"
        for n in moved_routed:  # the shared joins' rows too (results hide a row counted twice)
            if sorted(_router_counts(old, n)) != sorted(_router_counts(new, n)):
                rows_differ[n] += 1
        for n in due:
            if k == CUT + 1 and n in moved_routed and new.mode(n) != "RSTREAM":
                continue  # its result view is built by this tick: answered from the next one
            lines += len(want.get(n, []))
            if Counter(want.get(n, [])) != Counter(got.get(n, [])):
                differ[n] += 1
    assert sorted(restored) == moved_routed
    assert not {n: e for n, e in restored.items() if e}, "routed queries rebuilt, not restored"
    assert lines > 1000 and unit_bytes > 0 and 0 < light < len(moved_routed), (lines, light)
    assert not differ, f"{len(differ)} queries differ after the move: {sorted(differ.items())[:10]}"
    assert not rows_differ, f"{len(rows_differ)} routers' rows differ: {sorted(rows_differ.items())[:10]}"
