"""A cluster checkpoint holds the idempotency keys of the records it covers, no later ones.

The leader's checkpoint barrier is queued on the live worker under the engine lock, where a
push is logged and its idempotency key remembered; the worker copies the state when it gets
there, which can be after later pushes were logged (a tick in flight holds it).  The keys
of those later pushes must not be in the checkpoint: a new leader restores the keys, then
replays the log records after the checkpoint, and a replayed push whose key it already
holds is taken as a repeat and dropped -- the element is lost for good (issue 17: the live
e2e test lost lines of hundreds of queries at a take-over that way, one element of each
stream).  In-process: a live engine on a real ingest log and checkpoint store, the worker
held by a call while the checkpoint's barrier and a keyed push queue behind it.
"""

from __future__ import annotations

import threading
import time
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from linkstream.cluster.checkpoints import ClusterCheckpointer, restore_latest
from linkstream.cluster.results import ResultLog
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from linkstream.store.checkpoints import open_checkpoints, strings_of_blob

EX = "http://example.org/"
S = EX + "s"


class _Client:
    """The pointer node's stand-in (the kazoo calls the checkpointer makes)."""

    def __init__(self) -> None:
        self.nodes: dict[str, bytes] = {}

    def set(self, path: str, data: bytes) -> None:
        self.nodes[path] = data

    def get(self, path: str) -> tuple[bytes, Any]:
        return self.nodes[path], None


def _leader(live: LiveEngine) -> SimpleNamespace:
    """The remote engine's stand-in: no containers (what a checkpoint and its restore use)."""
    return SimpleNamespace(
        dictionary=live.engine.dictionary, cluster=None, registered_tick={}, flush=lambda: None
    )


def _checkpointer(
    live: LiveEngine, leader: SimpleNamespace, uri: str, client: _Client, results: ResultLog
) -> ClusterCheckpointer:
    """The leader's checkpointer over stand-ins: ``leader`` for the remote engine, ``client``
    for the pointer node, every interval 0 (a checkpoint is taken when the test asks)."""
    return ClusterCheckpointer(
        live,
        leader,  # type: ignore[arg-type]  # the stand-in has what the checkpoint reads
        live._log,  # type: ignore[arg-type]  # attached by the caller's recover()
        open_checkpoints(uri),
        0.0,
        client=client,  # type: ignore[arg-type]  # the pointer node's stand-in
        root="/r",
        results=results,
    )


def _el(t: int, o: str) -> tuple[int, list[tuple[str, str, str]]]:
    return t, [(f"<{EX}a>", f"<{EX}p>", f'"{o}"')]


def test_a_push_logged_after_the_barrier_is_replayed_by_the_next_leader(tmp_path: Path) -> None:
    state, uri = tmp_path / "state", (tmp_path / "ck").as_uri()
    client = _Client()
    live = LiveEngine(idle_ms=None).start()
    try:
        live.recover(IngestLog(str(state)))  # attaches the log: pushes are logged from here
        assert live.push_many(S, [_el(1000, "a")], keys=["before"]) == ([True], None)
        live.flush()
        cp = _checkpointer(live, _leader(live), uri, client, ResultLog())
        hold, held = threading.Event(), threading.Event()

        def block() -> None:  # a tick in flight
            held.set()
            hold.wait(10)

        blocker = threading.Thread(target=live.call, args=(block,))
        blocker.start()
        assert held.wait(10)
        cids: list[str | None] = []
        taker = threading.Thread(target=lambda: cids.append(cp.checkpoint(force=True)))
        taker.start()
        deadline = time.monotonic() + 10
        while live._queue.qsize() < 1 and time.monotonic() < deadline:  # the barrier is queued
            time.sleep(0.01)
        assert live._queue.qsize() == 1
        # logged after the barrier, before the worker copies the state
        assert live.push_many(S, [_el(2000, "b")], keys=["after"]) == ([True], None)
        hold.set()
        blocker.join(10)
        taker.join(30)
        assert cids and cids[0] is not None
        ck = open_checkpoints(uri).load_id(cids[0], None)
        keys = [k for k in strings_of_blob(ck.blob("keys")) if k is not None]
        assert keys == ["before"], keys  # "after" is in the log after what the checkpoint covers
        assert ck.meta["live"]["accepted"][S][1] == 1
        live.flush()
    finally:
        live.close()

    # a new leader: the checkpoint, then the log after it -- the push after the barrier included
    nxt = LiveEngine(idle_ms=None).start()
    try:
        restorer = partial(restore_latest, remote=_leader(nxt), client=client, root="/r", registered=None)
        replayed = nxt.recover(IngestLog(str(state)), checkpoints=open_checkpoints(uri), restorer=restorer)  # type: ignore[arg-type]  # the stand-ins
        assert replayed == 1
        assert nxt._accepted[S].elements == 2  # the replayed push was taken, not a "repeat"
        assert nxt.push_many(S, [_el(2000, "b")], keys=["after"]) == ([True], None)  # a client's retry
        nxt.flush()
        assert nxt._accepted[S].elements == 2  # ... is still recognised as a repeat
    finally:
        nxt.close()
