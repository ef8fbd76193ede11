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

from linkstream.containers.replica import RunReplica
from linkstream.operators.router import RouterOperator
from linkstream.operators.shared_state import router_units
from linkstream.operators.state import QueryState, StateError, decode_state, encode_state
from tests.api.corpus import STREAM_A, STREAM_B
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
                    routers = old.routed(n)
                    assert len(routers) == 1, (n, routers)
                    if id(routers[0]) not in units:
                        units[id(routers[0])] = _wire(old.router_state(routers))
                    names.setdefault(id(routers[0]), []).append(n)
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


def checkpoint_states(
    old: RunReplica, texts: dict[str, str]
) -> tuple[dict[str, QueryState], list[tuple[str, list[RouterOperator]]], list[tuple[list[str], QueryState]]]:
    """What a container's ``tsnap`` writes after the last tick, through the wire form: each
    query's own state, or (the routed queries, with their routers) the router units
    grouped as connected sets of routers, each with its queries."""
    snaps, routed = {}, []
    for n in texts:
        try:
            snaps[n] = _wire(old.snapshot(n))
        except StateError:
            routed.append((n, old.routed(n)))
    return snaps, routed, [(names, _wire(old.router_state(rs))) for names, rs in router_units(routed)]


_CONGESTION = """PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ct: <http://www.insight-centre.org/citytraffic#>
PREFIX : <http://linkstream.example/windows#>
REGISTER RSTREAM <{name}> AS
SELECT ?sensor (COUNT(?ob) AS ?n) (AVG(?v) AS ?avg) (MAX(?v) AS ?max)
FROM NAMED WINDOW :w1 ON <{a}> [RANGE PT{r}S STEP PT{s}S]
FROM NAMED WINDOW :w2 ON <{b}> [RANGE PT{r}S STEP PT{s}S]
WHERE {{
  ?p a ct:{prop} .
  {{ WINDOW :w1 {{ ?ob ssn:observedProperty ?p ; sao:hasValue ?v ; ssn:observedBy ?sensor . }} }}
  UNION
  {{ WINDOW :w2 {{ ?ob ssn:observedProperty ?p ; sao:hasValue ?v ; ssn:observedBy ?sensor . }} }}
}}
GROUP BY ?sensor
"""


def _congestion() -> dict[str, str]:
    """CityBench's average-congestion query (a union of two streams' routed BGPs: it reads
    two routers) in a few ranges, steps and properties."""
    out = {}
    for i, (r, s, prop) in enumerate(
        [(5, 1, "CongestionLevel"), (3, 1, "CongestionLevel"), (5, 2, "AverageSpeed"), (4, 1, "AverageSpeed")]
    ):
        name = f"cong{i}"
        out[name] = _CONGESTION.format(name=name, a=STREAM_A, b=STREAM_B, r=r, s=s, prop=prop)
    return out


@pytest.mark.parametrize("ids", ["same", "differ"])
def test_queries_reading_several_routers_are_restored_from_one_unit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ids: str
) -> None:
    """Queries reading two routers (CityBench's average congestion) and the template
    queries are grouped into units as the container's ``tsnap`` does (connected sets of
    routers: :func:`router_units`), restored through the wire form, and continue like the
    old run.  Before, a query reading two routers had no snapshot (rebuilt)."""
    corpus, texts, old, new = _two_replicas(tmp_path, monkeypatch)
    multi = _congestion()
    texts = {**dict(list(texts.items())[:60]), **multi}
    feeds = {}
    if ids == "same":
        old.preplan(texts)
    else:
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
    restored: list[str] = []
    differ, lines, multi_lines = Counter[str](), 0, 0
    for k, c in enumerate(range(c0, t_end, STEP), start=1):
        due = [n for n in texts if all(c % s == 0 for s in steps[n])]
        feed(old, c)
        want = old.tick(k, c, due).lines
        if k < CUT:
            continue
        if k == CUT:
            feed(new, c)
            snaps, routed, units = checkpoint_states(old, texts)
            assert all(len(rs) == 2 for n, rs in routed if n in multi), routed
            assert any(len(u.header["parts"]) >= 2 for _, u in units)
            for n in sorted(snaps):
                new.unregister(n)
                assert new.register_restored(n, texts[n], snaps[n])
            got = new.restore_routers(units, c)
            restored = sorted(n for n, e in got.items() if not e)
            assert restored == sorted(got), {n: e for n, e in got.items() if e}
            assert set(multi) <= set(restored)
            new.tick(k, c, [])  # the silent tick
            continue
        feed(new, c)
        got_lines = new.tick(k, c, due).lines
        for n in due:
            lines += len(want.get(n, []))
            multi_lines += len(want.get(n, [])) if n in multi else 0
            if Counter(want.get(n, [])) != Counter(got_lines.get(n, [])):
                differ[n] += 1
    assert lines > 300 and multi_lines > 20, (lines, multi_lines)
    assert not differ, f"{len(differ)} queries differ after the restore: {sorted(differ.items())[:10]}"
