"""``--ingest direct``: a body a cluster checkpoint covers only in part (issue 15 req 3).

The leader's ``push_many`` hands a body to its worker in several commands when the input
queue has no room for all of it, and a checkpoint barrier can come between two of them:
the checkpoint then holds the first ``k`` elements of the body and the log after it the
rest.  A new leader that restores it must apply only the rest, once, and tell the owner
the old leader's decision on the whole body: every element applied, numbered from the
body's first (the owners number a stream's elements by it, and an owner sending to the
containers sends exactly the elements a decision names).  Without the checkpoint's part
of the decision the new leader knew only the elements it replayed, numbered from ``k``.

In-process: the old leader's live engine on a real ingest log, a real owner's stream log
(bodies referred to, ``f="ref"``), its bodies applied through ``StreamIngest._apply``, a
real :class:`ClusterCheckpointer` whose barrier falls between the two commands of a body
(``push_many`` wrapped: the body's first ``k`` elements, the checkpoint, the rest), and
:func:`recover_leader` of a new leader on the same logs and checkpoint store.
"""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgpack
import pytest

from linkstream.cluster.checkpoints import recover_leader
from linkstream.cluster.decisions import OwnerDecisions
from linkstream.cluster.ingest import (
    StreamIngest,
    _Applied,
    rebuild_decision,
    restore_decisions,
    saved_decisions,
)
from linkstream.cluster.ingestwire import pack_elements, split_elements, with_refs
from linkstream.cluster.results import ResultLog
from linkstream.cluster.streamlog import BodyStore, StreamLog
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from tests.durability.test_cluster_checkpoint_floor import QUERY, S, _leader, _service
from tests.durability.test_cluster_checkpoint_keys import _checkpointer, _Client

EX = "http://example.org/"
EPOCH = 43  # idempotency keys "~epoch.offset" are global: a test stream has an epoch of its own
N, K = 5, 2  # a body of N elements; the checkpoint covers its first K


def _body(log: StreamLog, offset: int, times: list[int]) -> list[tuple[int, Any]]:
    """A body logged in the owner's stream log, its elements referring to it."""
    elements = [(t, [(f"<{EX}a{t}>", f"<{EX}p>", f'"{t}"')]) for t in times]
    doc = {
        "stream": S,
        "owner": "o",
        "epoch": EPOCH,
        "offset": offset,
        "key": None,
        **pack_elements(elements),
    }
    record = log.reserve(S, EPOCH)
    doc["record"] = record
    log.append(S, EPOCH, offset, msgpack.packb(doc, use_bin_type=True), record)
    return with_refs(split_elements(doc), EPOCH, record)


@pytest.mark.parametrize("rest", ["logged", "retried"])
def test_a_new_leader_goes_on_with_the_decision_on_a_body_its_checkpoint_covers_in_part(
    tmp_path: Path, rest: str
) -> None:
    """``logged``: the old leader took the whole body, then died (the replay applies the
    rest); ``retried``: it died right after the checkpoint, before the rest was taken, and
    the owner hands the body again (the new leader skips the part it restored)."""
    state, uri = tmp_path / "state", (tmp_path / "ck").as_uri()
    client = _Client()
    applied, lock = {S: _Applied()}, threading.Lock()
    st, owner = applied[S], OwnerDecisions()
    streams = StreamLog(str(state))
    live = LiveEngine(idle_ms=None).start()
    real = live.push_many
    body = _body(streams, 1, [1000 + 100 * i for i in range(N)])
    try:
        live.recover(IngestLog(str(state)))
        live.register(QUERY, "q")
        results = ResultLog()
        results.lead(())
        cp = _checkpointer(live, _leader(live), uri, client, results)
        cp.decisions = lambda: saved_decisions(applied, lock)
        flags, error = StreamIngest._apply(live, st, S, EPOCH, 0, _body(streams, 0, [500]), None, "o", True)
        assert error is None and flags == [True]

        def split(stream: str, items: Any, *, keys: Any, timeout: Any, decided: Any) -> Any:
            """The body in two commands with the checkpoint's barrier between them."""
            got, error = real(stream, items[:K], keys=keys[:K], timeout=timeout, decided=decided)
            assert error is None
            live.flush()
            assert cp.checkpoint(force=True) is not None  # covers the first K elements
            if rest == "retried":
                raise ConnectionError("the old leader dies here")
            decided.base += K  # the second command's positions (its first was applied: flushed)
            more, error = real(stream, items[K:], keys=keys[K:], timeout=timeout, decided=decided)
            return got + more, error

        live.push_many = split  # type: ignore[method-assign]  # the test's wrapper (see above)
        if rest == "logged":
            flags, error = StreamIngest._apply(live, st, S, EPOCH, 1, body, None, "o", True)
            assert error is None and flags == [True] * N
        else:
            with pytest.raises(ConnectionError):
                StreamIngest._apply(live, st, S, EPOCH, 1, body, None, "o", True)
        live.push_many = real  # type: ignore[method-assign]
        live.flush()
        if rest == "logged":  # what the old leader owed the owner: the whole body, from count 1
            assert st.book.take(EPOCH, 0) == (0, [[0, 1, 0, [0, 1], None], [1, 1 + N, 1, [1, 1 + N], None]])
            assert live.applied_count(S) == 1 + N
        old_status = live.status()["streams"][S]
    finally:
        live.close()

    again: dict[str, _Applied] = {}
    service = _service(uri, client, ResultLog())
    service.ingest = SimpleNamespace(
        stream_log=object(),  # --ingest direct
        restore_decisions=lambda saved: restore_decisions(again, lock, saved),
    )
    ingest = IngestLog(str(state))
    bodies = BodyStore(str(state))
    ingest.resolve = bodies.resolve
    ingest.decide = partial(rebuild_decision, again, lock, bodies)
    nxt = LiveEngine(idle_ms=None).start()
    try:
        take = recover_leader(
            service,
            nxt,
            _leader(nxt),  # type: ignore[arg-type]  # the stand-in
            ingest,
            skip=(),
            registered={"q"},
        )
        nxt.flush()
        assert take["checkpoint"] is not None, take
        new = again[S]
        if rest == "logged":
            assert take["replayed"] == N - K, take  # the rest of the body, once
            assert nxt.status()["streams"][S] == old_status
        else:  # the owner hands the body again: the part the checkpoint holds is skipped
            assert take["replayed"] == 0, take
            assert new.next == 1 + K
            flags, error = StreamIngest._apply(nxt, new, S, EPOCH, 1, body, None, "o", True)
            assert error is None and flags == [True] * N
            nxt.flush()
        assert nxt.applied_count(S) == 1 + N  # every element applied once
        assert nxt.status()["streams"][S]["elements"] == 1 + N
        floor, decisions = new.book.take(EPOCH, 0)
    finally:
        nxt.close()
    # the decisions name every element of the body, numbered from its first (count 1)
    runs = [
        x
        for d in decisions
        if d[1] > 1
        for x in range(d[0], d[1])
        if any(a <= x < b for a, b in zip(d[3][::2], d[3][1::2]))
    ]
    assert runs == list(range(1, 1 + N)), decisions
    assert [d[2] for d in decisions if d[1] > 1][0] == 1, decisions
    owner.learn(floor, decisions, 1 + N)
    assert (owner.decided, owner.applied, owner.lost) == (1 + N, 1 + N, 0)


def test_a_body_whose_barrier_came_before_the_answer_is_decided_whole(tmp_path: Path) -> None:
    """The barrier comes after every command of a body but before ``push_many`` returned
    (the decision is not complete: the pusher still holds it); the body's last element was
    late (not applied).  The checkpoint keeps the decision as far as its last applied
    element; the owner got its answer and hands the next body to the new leader: the
    restored decision reaches up to that body (the late element is decided, not lost)."""
    state, uri = tmp_path / "state", (tmp_path / "ck").as_uri()
    client = _Client()
    applied, lock = {S: _Applied()}, threading.Lock()
    st, owner = applied[S], OwnerDecisions()
    streams = StreamLog(str(state))
    live = LiveEngine(idle_ms=None).start()
    real = live.push_many
    times = [1000, 1100, 1200, 900]  # the last behind the stream's 1200: late
    try:
        live.recover(IngestLog(str(state)))
        live.register(QUERY, "q")
        results = ResultLog()
        results.lead(())
        cp = _checkpointer(live, _leader(live), uri, client, results)
        cp.decisions = lambda: saved_decisions(applied, lock)

        def barrier_after(stream: str, items: Any, *, keys: Any, timeout: Any, decided: Any) -> Any:
            got = real(stream, items, keys=keys, timeout=timeout, decided=decided)
            live.flush()
            assert cp.checkpoint(force=True) is not None  # before push_many returns
            return got

        live.push_many = barrier_after  # type: ignore[method-assign]  # the test's wrapper
        flags, error = StreamIngest._apply(
            live, st, S, EPOCH + 1, 0, _body(streams, 0, times), None, "o", True
        )
        live.push_many = real  # type: ignore[method-assign]
        assert error is None and flags == [True, True, True, False]
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
        assert take["checkpoint"] is not None and take["replayed"] == 0, take
        new = again[S]
        # the owner's next body (offset 4) goes to the new leader
        nb = _body(streams, 4, [1300])
        flags, error = StreamIngest._apply(nxt, new, S, EPOCH + 1, 4, nb, None, "o", True)
        assert error is None and flags == [True]
        nxt.flush()
        assert nxt.applied_count(S) == 4
        floor, decisions = new.book.take(EPOCH + 1, 0)
    finally:
        nxt.close()
    owner.learn(floor, decisions, 5)
    assert (owner.decided, owner.applied, owner.lost) == (5, 4, 0), decisions
