"""``--ingest direct``: a cluster checkpoint keeps the decisions the owners have not
acknowledged and each stream's applied count (issue 15 req 3).

A new leader that restores a checkpoint replays only the log records after it: the
bodies the checkpoint covers are not replayed, so their decisions cannot be rebuilt from
the replay -- an owner whose old leader died before telling it would count them lost --
and the applied count (the worker's numbering of a stream's elements, which the owners
number by) would restart from what the replay applies.  In-process: the old leader's
live engine on a real ingest log and checkpoint store, its bodies applied through
``StreamIngest._apply`` (the decision books the hand-off fills), a real
:class:`ClusterCheckpointer` covering every record, and :func:`recover_leader` of a new
leader on the same log and store.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

from linkstream.cluster.checkpoints import recover_leader
from linkstream.cluster.decisions import OwnerDecisions
from linkstream.cluster.ingest import StreamIngest, _Applied, restore_decisions, saved_decisions
from linkstream.cluster.results import ResultLog
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from tests.durability.test_cluster_checkpoint_floor import QUERY, S, _leader, _service
from tests.durability.test_cluster_checkpoint_keys import _checkpointer, _Client

EX = "http://example.org/"
EPOCH = 41  # idempotency keys "~epoch.offset" are global: a test stream has an epoch of its own


def _el(t: int, o: str) -> tuple[int, list[tuple[str, str, str]]]:
    return t, [(f"<{EX}a>", f"<{EX}p>", f'"{o}"')]


def test_a_new_leader_restores_the_decisions_and_applied_counts_its_checkpoint_covers(tmp_path: Path) -> None:
    state, uri = tmp_path / "state", (tmp_path / "ck").as_uri()
    client = _Client()
    applied, lock = {S: _Applied()}, threading.Lock()
    st, owner = applied[S], OwnerDecisions()
    live = LiveEngine(idle_ms=None).start()
    try:
        live.recover(IngestLog(str(state)))
        live.register(QUERY, "q")
        results = ResultLog()
        results.lead(())
        cp = _checkpointer(live, _leader(live), uri, client, results)
        cp.decisions = lambda: saved_decisions(applied, lock)
        for offset, body in enumerate([[_el(500, "a"), _el(600, "b")], [_el(1500, "c")]]):
            flags, error = StreamIngest._apply(live, st, S, EPOCH, 2 * offset, body, None, "o", True)
            assert error is None and all(flags)
        live.flush()
        owner.learn(*st.book.take(EPOCH, 0), 3)  # the owner has the first two bodies' decisions ...
        assert st.book.take(EPOCH, owner.decided) == (3, [])  # ... and acknowledged them
        flags, error = StreamIngest._apply(
            live, st, S, EPOCH, 3, [_el(1600, "d"), _el(2500, "e")], None, "o", True
        )
        assert error is None and flags == [True, True]
        live.flush()
        want = st.book.take(EPOCH, owner.decided)  # what the old leader owed the owner
        assert want == (3, [[3, 5, 3, [3, 5], None]])
        old_count = live.applied_count(S)
        assert old_count == 5
        assert cp.checkpoint(force=True) is not None  # covers every record: nothing is replayed
        old_status = live.status()["streams"][S]
    finally:
        live.close()

    again: dict[str, _Applied] = {}
    service = _service(uri, client, ResultLog())
    service.ingest = SimpleNamespace(
        stream_log=object(),  # --ingest direct
        restore_decisions=lambda saved: restore_decisions(again, lock, saved),
    )
    nxt = LiveEngine(idle_ms=None).start()
    try:
        take = recover_leader(
            service,
            nxt,
            _leader(nxt),  # type: ignore[arg-type]  # the stand-in
            IngestLog(str(state)),
            skip=(),
            registered={"q"},
        )
        nxt.flush()
        assert take["checkpoint"] is not None and take["replayed"] == 0, take
        assert nxt.applied_count(S) == old_count  # the owners' numbering goes on
        assert nxt.status()["streams"][S] == old_status
    finally:
        nxt.close()
    new = again[S]
    assert (new.epoch, new.next) == (EPOCH, 5)
    assert new.book.take(EPOCH, owner.decided) == want
    owner.learn(*new.book.take(EPOCH, owner.decided), 5)
    assert (owner.decided, owner.applied, owner.lost) == (5, 5, 0)
