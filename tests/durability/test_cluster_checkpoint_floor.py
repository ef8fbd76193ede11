"""A new leader whose result log lacks entries a checkpoint waited for restores an older one.

The leader writes a checkpoint once the result log has committed the entry of its last
tick, and it commits without a follower that has not polled for ``SYNC_S`` (out of sync).
If that follower is then elected, its result log ends before the checkpoint's last tick:
restoring that checkpoint would skip the log records before it, and the report times
between the follower's last entry and the checkpoint's last tick would never be made
again -- lost for every subscriber.  The new leader must restore a checkpoint its result
log covers and replay the log after it, which makes those reports again.  In-process: a
live engine on a real ingest log and checkpoint store, the old leader's result log
committing without followers, the new leader's holding only its first entry.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from linkstream.cluster.checkpoints import recover_leader
from linkstream.cluster.results import Entry, ResultLog
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from tests.durability.test_cluster_checkpoint_keys import _checkpointer, _Client

EX = "http://example.org/"
S = EX + "s"
QUERY = f"SELECT ?o WHERE {{ STREAM <{S}> [RANGE 1s SLIDE 1s] {{ ?a ?p ?o }} }}"


def _leader(live: LiveEngine) -> SimpleNamespace:
    """The remote engine's stand-in: the live engine's own engine, no containers."""
    eng = live.engine
    return SimpleNamespace(
        dictionary=eng.dictionary,
        cluster=None,
        registered_tick={},
        flush=lambda: None,
        register=eng.register,
        buffer=eng.buffer,
    )


def _push(live: LiveEngine, t: int, o: str) -> None:
    assert live.push_many(S, [(t, [(f"<{EX}a>", f"<{EX}p>", f'"{o}"')])]) == ([True], None)
    live.flush()


def _old_leader(state: Path, uri: str, client: _Client) -> tuple[list[str], list[Entry]]:
    """Records: 0 registration, 1..4 pushes at 500, 1500, 2500, 3500; a result log entry per
    report time (1000, 2000, 3000) and a checkpoint after each of the first two."""

    live = LiveEngine(idle_ms=None).start()
    results = ResultLog()
    results.lead(())  # no follower in sync: every entry is committed at once
    cids: list[str] = []
    try:
        live.recover(IngestLog(str(state)))
        live.register(QUERY, "q")
        cp = _checkpointer(live, _leader(live), uri, client, results)
        for k, (t, o) in enumerate(((500, "a"), (1500, "b"), (2500, "c"), (3500, "d"))):
            _push(live, t, o)
            if k:  # the report before t fired: its entry, then (twice) a checkpoint
                results.append(1000 * k, {"q": ('{"o": "%s"}' % "abc"[k - 1],)})
                assert live._fired == 1000 * k
                if k < 3:
                    cid = cp.checkpoint(force=True)
                    assert cid is not None
                    cids.append(cid)
        return cids, list(results.entries)
    finally:
        live.close()


def _service(uri: str, client: _Client, log: ResultLog) -> Any:
    """What :func:`recover_leader` reads of the coordinator."""
    return SimpleNamespace(
        checkpoints=uri,
        client=client,
        root="/r",
        ready_timeout=5.0,
        checkpoint_interval=0.0,
        log=log,
        ingest=SimpleNamespace(stream_log=None),
        state_dir=None,
        log_ship_interval=0.0,
    )


@pytest.mark.parametrize("held", [0, 1, 2, 3])
def test_a_new_leader_restores_a_checkpoint_its_result_log_covers(tmp_path: Path, held: int) -> None:
    state, uri = tmp_path / "state", (tmp_path / "ck").as_uri()
    client = _Client()
    (first, second), entries = _old_leader(state, uri, client)

    # the new leader followed the old one up to entry ``held`` (then fell out of sync)
    log = ResultLog()
    floor = log.lead(entries[:held])
    assert floor == (1000 * held or None)
    nxt = LiveEngine(idle_ms=None).start()
    made: list[int] = []  # the report times the new leader evaluates
    tick = nxt.engine.tick

    def recorded(c: int, *args: Any, **kw: Any) -> Any:
        made.append(c)
        return tick(c, *args, **kw)

    nxt.engine.tick = recorded  # type: ignore[method-assign]  # records, then evaluates
    try:
        take = recover_leader(
            _service(uri, client, log),
            nxt,
            _leader(nxt),  # type: ignore[arg-type]  # the stand-in
            IngestLog(str(state)),
            skip=(),
            registered={"q"},
        )
        nxt.flush()
    finally:
        nxt.close()
    # every report time its result log lacks is made again (the real service then appends
    # those after its floor to the log, and subscribers get them)
    lacks = [e.t for e in entries[held:]] if held else []  # 0: a restarted cluster, no log
    assert set(lacks) <= set(made), (lacks, made)
    # entry 2 (report time 2000) was committed before the second checkpoint: a log that
    # ends at entry 1 needs the first checkpoint and the replay of records 3 and 4
    # (a coordinator whose log never held an entry -- every coordinator restarted, the
    # result log is in memory -- knows nothing of what was delivered: the latest, as before)
    want = first if held == 1 else second
    assert take["checkpoint"] == want, (take, held)
    assert take["covered"] == (2 if held == 1 else 3), take
    assert take["replayed"] == 4 - take["covered"], take
