"""Router units in the embedded engine's checkpoints (``run --state-dir``, issue 17).

Queries on a shared join's router (two-pattern joins over one stream in several ranges
or counts) and queries reading two routers (a union of two streams' joins, as CityBench's average
congestion) have no state of their own: before, a restart rebuilt every one of them from
the stream buffers.  Now the checkpoint holds their router units (the format of the
cluster's task snapshots) and the restart restores them; the results after the crash
equal those of an engine that never stopped.
"""

from __future__ import annotations

import json
import logging
import queue
from pathlib import Path
from typing import Any

import pytest

from linkstream.engine.live.runtime import LiveEngine

EX = "http://example.org/"
STREAMS = [EX + "s1", EX + "s2"]
INT = "http://www.w3.org/2001/XMLSchema#integer"
N = 80
CUT = 50
END = (N + 10) * 1000


def _join(s: str, r: int) -> str:
    return (
        f"SELECT (COUNT(?w) AS ?n) (SUM(?v) AS ?sum) WHERE {{ STREAM <{s}> [RANGE {r}s SLIDE 1s] "
        f"{{ ?x <{EX}p> ?v . ?x <{EX}q> ?w }} }}"
    )


def _union(r: int) -> str:
    w = "{ ?x <%sp> ?v . ?x <%sq> ?w }" % (EX, EX)
    return f"""PREFIX : <{EX}w#>
REGISTER RSTREAM <u{r}> AS SELECT ?x (COUNT(?w) AS ?n) (SUM(?v) AS ?sum)
FROM NAMED WINDOW :w1 ON <{STREAMS[0]}> [RANGE PT{r}S STEP PT1S]
FROM NAMED WINDOW :w2 ON <{STREAMS[1]}> [RANGE PT{r}S STEP PT1S]
WHERE {{ {{ WINDOW :w1 {w} }} UNION {{ WINDOW :w2 {w} }} }}
GROUP BY ?x"""


def _count(s: str, n: int) -> str:
    return (
        f"SELECT (COUNT(?w) AS ?n) (SUM(?v) AS ?sum) WHERE {{ STREAM <{s}> [TRIPLES {n}] "
        f"{{ ?x <{EX}p> ?v . ?x <{EX}q> ?w }} }}"
    )


QUERIES = {
    **{f"j{k}_{r}": _join(s, r) for r in (3, 5, 8) for k, s in enumerate(STREAMS)},
    **{f"u{r}": _union(r) for r in (4, 6)},
    # count windows: a router whose rows carry buffer positions (rebased on restore)
    **{f"c{k}_{n}": _count(s, n) for n in (7, 16) for k, s in enumerate(STREAMS)},
}
MULTI = ["u4", "u6"]


def _triples(stream: str, i: int) -> list[tuple[str, str, str]]:
    x = f"<{stream}/x{i % 9}>"
    return [(x, f"<{EX}p>", f'"{i}"^^<{INT}>'), (x, f"<{EX}q>", f'"{i % 7}"^^<{INT}>')]


def _run(crash_dir: Path | None) -> dict[str, list[Any]]:
    """Every query's reports; with ``crash_dir``: a checkpoint after element ``CUT``, a
    crash two elements later, a restart from the checkpoint and the log, more pushes."""
    from linkstream.engine.live.checkpoint import Checkpointer
    from linkstream.engine.live.ingestlog import IngestLog
    from linkstream.store.checkpoints import open_checkpoints

    live = LiveEngine(idle_ms=None)
    lg = store = ck = None
    if crash_dir is not None:
        lg = IngestLog(str(crash_dir))
        store = open_checkpoints(str(crash_dir / "checkpoints"))
        live.recover(lg, checkpoints=store)
        ck = Checkpointer(live, lg, store, 0)
    for name, text in QUERIES.items():
        live.register(text, name)
    got: dict[str, list[Any]] = {n: [] for n in QUERIES}
    subs = {n: live.subscribe(n) for n in QUERIES}

    def drain() -> None:
        for n, sub in subs.items():
            while True:
                try:
                    got[n].append(json.loads(sub.get(timeout=0.2)))
                except queue.Empty:
                    break

    def push(first: int, last: int) -> None:
        for i in range(first, last + 1):
            for s in STREAMS:
                live.push(s, 1000 * i, _triples(s, i))

    push(1, CUT)
    if crash_dir is not None:
        assert lg is not None and ck is not None
        live.flush()
        live.sync()
        assert ck.checkpoint() is not None
        push(CUT + 1, CUT + 2)  # replayed from the log after the restart
        live.flush()
        live.sync()
        drain()
        live._closed = True  # a crash
        live._queue.put(("stop",))
        lg.close()
        lg = IngestLog(str(crash_dir))
        live = LiveEngine(idle_ms=None)
        live.recover(lg, checkpoints=store)
        subs = {n: live.subscribe(n) for n in QUERIES}
        push(CUT + 3, N)  # the windows of the next reports still hold elements before the cut
    else:
        push(CUT + 1, N)
    live.flush()
    live.advance_to(END)
    live.flush()
    drain()
    live.close()
    if lg is not None:
        lg.close()
    return got


def test_a_restart_restores_routed_queries_from_their_router_units(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    want = _run(None)
    assert all(len(want[n]) > 40 for n in QUERIES), {n: len(v) for n, v in want.items()}
    with caplog.at_level(logging.INFO, logger="linkstream.engine.live.checkpoint"):
        got = _run(tmp_path / "state")
    for n in QUERIES:
        assert got[n] == want[n], n
    text = caplog.text
    # every query reads routers (the unions two; count windows too): all restored from
    # router units, none rebuilt
    assert f"{len(QUERIES)} routed queries restored from " in text, text[-3000:]
    assert "from the stream buffers" not in text, text[-3000:]
