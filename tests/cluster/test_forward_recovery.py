"""The driver's choice between restoring a dead container's queries and recomputing them,
the ``forward`` message, and the container's read of the snapshots -- without processes.

The real-process path (kill -9 after a cluster checkpoint) is
``tests/cluster/test_restore_forward_live.py``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import numpy as np
import pytest

from linkstream.cluster.fanout import Fanout
from linkstream.cluster.recovery import KEEP_CUTS, MAX_FORWARDS, MAX_HELD_CUTS, Recovery, RestorePoint
from linkstream.containers.forwarding import read_snapshots
from linkstream.containers.messages import Elements, Forward, Recompute, Recomputed
from linkstream.containers.protocol import ProtocolError, decode, encode
from linkstream.metrics import CoordinatorMetrics
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.scheduler.assignment import Assignment
from linkstream.scheduler.coordinator import Coordinator
from linkstream.scheduler.core import SchedulerCore
from linkstream.scheduler.events import ContainerJoined, ContainerLeft, TaskAdded
from linkstream.scheduler.state import Policy, TaskSpec
from linkstream.store.checkpoints import SHARED, Blob, CheckpointStore, digest, encode_blob, open_checkpoints


def _recovery(dead: set[str]) -> Recovery:
    fanout = cast(Fanout, SimpleNamespace(peers={}))
    return Recovery("r1", fanout, MemoryDictionary(), lambda _s: None, 1.0, lambda c: c in dead)


def test_the_checkpoints_cut_is_kept_and_the_backlog_floor_follows_it() -> None:
    rec = _recovery(set())
    for seq in range(1, 8):
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    assert [x[0] for x in rec._cuts] == list(range(8 - KEEP_CUTS, 8))  # no checkpoint: the last few
    assert rec.floor(7000) == 7000
    rec.hold(7)  # a checkpoint's task snapshots follow tick 7
    for seq in range(8, 20):
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    assert rec._cuts[0][0] == 7 and rec.floor(19000) == 7000
    rec.checkpointed(RestorePoint(7, 7000, "file:///x", {"q": {"key": "k"}}))
    rec.hold(19)
    rec.record(20, 20000, np.array([20], dtype=np.int64))
    assert rec._cuts[0][0] == 7 and rec.floor(20000) == 7000  # kept until the next is complete
    rec.checkpointed(RestorePoint(19, 19000, "file:///x", {}))
    rec.record(21, 21000, np.array([21], dtype=np.int64))
    assert rec._cuts[0][0] == min(19, 21 - KEEP_CUTS + 1) and rec.floor(21000) == 19000
    for seq in range(22, 19 + MAX_HELD_CUTS + 2):  # checkpoints that keep failing: given up
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    assert rec.point is None and len(rec._cuts) == KEEP_CUTS


def test_each_query_is_restored_once_on_its_live_new_owner_else_recomputed_with_a_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rec = _recovery({"oc-1"})
    owed = {"a": "oc-1", "b": "oc-1", "c": "oc-3"}
    owner = {"a": "oc-2", "b": "oc-2", "c": "oc-2"}.get
    for seq in range(1, 6):
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    caplog.set_level(logging.INFO, "linkstream.cluster.recovery")
    assert rec._restorable(5, ["a", "b", "c"], owed, "oc-2", owner) == []
    assert "a recomputed from the history, not restored: no complete checkpoint" in caplog.text
    assert rec.refused == {"a", "b", "c"}  # their new owner is told to rebuild them
    plain, _ = _request(rec, ["a", "b"], [], point=None)
    assert type(plain) is Recompute and plain.rebuild == ["a", "b"]
    assert (plain.ticks, plain.owe) == ([4000, 5000], 0)
    batch, _ = _request(rec, ["a"], [(5, 5000), (6, 6000), (7, 7000)], point=None)  # ticks sent together
    assert (batch.ticks, batch.owe) == ([4000, 5000, 6000, 7000], 5000)  # evaluated in one pass
    rec.ahead([])
    rec.hold(3)
    rec.checkpointed(RestorePoint(3, 3000, "file:///x", {"a": {"key": "k"}, "c": {"key": "k"}}))
    assert rec._restorable(3, ["a"], owed, "oc-2", owner) == []  # the owed tick is the checkpoint's
    assert rec._restorable(5, ["a"], owed, "oc-4", owner) == []  # not its new owner
    assert "a" not in rec.refused  # (both may pass: the new owner keeps waiting)
    assert rec._restorable(5, ["a", "b", "c"], owed, "oc-2", owner) == [(rec.point, ["a"])]
    assert rec.refused == {"b", "c"}
    assert rec.not_restored == {
        "b": "checkpoint at t=3000 holds no snapshot of it",
        "c": "oc-3 did not die (stalled or restarted)",
    }
    assert (
        "a restored on oc-2 from the checkpoint at t=3000 (tick 3) and fed forward to tick 5" in caplog.text
    )
    ready: set[tuple[str, str]] = set()
    rec.is_ready = lambda name, cid: (name, cid) in ready
    assert rec._restorable(6, ["a"], owed, "oc-2", owner) == [(rec.point, ["a"])]  # not kept there yet
    ready.add(("a", "oc-2"))
    assert rec._restorable(7, ["a"], owed, "oc-2", owner) == []  # once it is ready there: no more
    ready.clear()
    rec.ahead([(7, 7000), (8, 8000)])  # one batch: nothing admitted between its ticks
    assert rec._restorable(7, ["a"], owed, "oc-2", owner) == [(rec.point, ["a"])]
    assert rec._restorable(8, ["a"], owed, "oc-2", owner) == []  # the same batch
    assert rec.forwarded["a"] == (3, MAX_FORWARDS, 7)
    assert "a" not in rec.refused
    assert rec._restorable(9, ["a"], owed, "oc-2", owner) == []  # MAX_FORWARDS at most
    assert "a" in rec.refused  # not kept by then: its new owner rebuilds it
    rec.ahead([])
    message, _ = _request(rec, ["a"], [(6, 6000)])
    assert isinstance(message, Forward)
    assert (message.ticks, message.owe, message.objects) == (
        [3000, 4000, 5000, 6000],
        5000,
        {"a": {"key": "k"}},
    )
    # a checkpoint after the death lacks the dead container's queries: the one before stays
    first = rec.point
    rec.record(6, 6000, np.array([6], dtype=np.int64))
    rec.checkpointed(RestorePoint(6, 6000, "file:///x", {"c": {"key": "k2"}}, frozenset({"a", "b"})))
    assert rec.points == [first, rec.point] and rec.floor(6000) == 3000
    assert rec._restorable(7, ["a", "d"], {"a": "oc-1", "d": "oc-1"}, "oc-2", owner) == []
    assert rec.not_restored["d"] == "checkpoint at t=6000 holds no snapshot of it"
    rec.forwarded.clear()
    assert rec._restorable(7, ["a"], owed, "oc-2", owner) == [(first, ["a"])]
    rec.checkpointed(RestorePoint(8, 8000, "file:///x", {"a": {"key": "k3"}}, frozenset()))
    assert rec.points == [rec.point] and rec.point.seq == 8


def _request(
    rec: Recovery, names: list[str], ahead: list[tuple[int, int]], point: Any = "last"
) -> tuple[Any, int]:
    rec.fanout = cast(Fanout, SimpleNamespace(history=lambda _s, cuts: ([], [0] * len(cuts))))
    rec.ahead(ahead)
    return rec._request(names, frozenset(), list(rec._cuts)[-2:], rec.point if point == "last" else point)


def test_forward_messages_round_trip_and_a_bad_one_is_refused() -> None:
    els = Elements(
        "r1", np.array([1, 2, 3]), ["<a>", "<p>", "<b>"], np.array([[0], [1500], [1]]), np.array([[1, 2, 3]])
    )
    obj = {"key": "tasks-1/t", "size": 10, "sha256": "ab"}
    m = Forward(
        "r1", 4, ["q"], [1000, 2000, 3000], [0, 1, 1], els, uri="file:///ck", objects={"q": obj}, owe=2000
    )
    got = decode([bytes(memoryview(f)) for f in encode(m)])
    assert isinstance(got, Forward)
    assert (got.ticks, got.at, got.uri, got.objects, got.owe) == (m.ticks, m.at, m.uri, m.objects, 2000)
    bad = Forward("r1", 4, ["q"], [1000, 2000], [0, 1], els, uri="file:///ck", objects={"q": obj}, owe=1000)
    with pytest.raises(ProtocolError, match="owed report time"):
        decode([bytes(memoryview(f)) for f in encode(bad)])
    with pytest.raises(ProtocolError, match="at least two"):
        encode(Forward("r1", 4, ["q"], [1000], [0], els))
    # a forward's answer carries the lines of the later report times it evaluated
    later = {3000: {"q": ['{"x": 1}', '{"x": 2}'], "p": []}}
    ans = Recomputed("r1", "oc-2", 4, 2000, {"q": ['{"x": 0}']}, later=later)
    back = decode([bytes(memoryview(f)) for f in encode(ans)])
    assert isinstance(back, Recomputed) and (back.lines, back.later) == (ans.lines, later)
    # a plain recompute names the queries their new owner is to rebuild (no restore coming)
    plain = decode(
        [bytes(memoryview(f)) for f in encode(Recompute("r1", 5, ["q", "p"], [1000], [0], els, ["p"]))]
    )
    assert isinstance(plain, Recompute) and not isinstance(plain, Forward) and plain.rebuild == ["p"]
    none = decode([bytes(memoryview(f)) for f in encode(Recompute("r1", 6, ["q"], [1000], [0], els))])
    assert isinstance(none, Recompute) and none.rebuild == []


def test_snapshots_are_read_checked_and_a_damaged_one_is_left_out(tmp_path: Path) -> None:
    uri = "file://" + str(tmp_path / "ck")
    store = open_checkpoints(uri)
    objects = {}
    for name in ("good", "bad"):
        data = encode_blob(Blob({"query": name, "c": 1000}, [np.arange(4, dtype=np.int64)]))
        store.backend.put(SHARED + f"tasks-1/{name}", data)
        objects[name] = {"key": f"tasks-1/{name}", **digest(data)}
    store.backend.put(SHARED + "tasks-1/bad", b"LSCK garbage")
    objects["missing"] = {"key": "tasks-1/nope", "size": 1, "sha256": "x"}
    stores: dict[str, CheckpointStore] = {}
    got = read_snapshots(uri, objects, stores)
    good = got["good"]
    assert good is not None and good.header["query"] == "good" and list(good.arrays[0]) == [0, 1, 2, 3]
    assert got["bad"] is None and got["missing"] is None
    assert list(stores) == [uri]


class _Table:
    """The assignment table's writes, as the coordinator makes them."""

    def __init__(self) -> None:
        self.writes: list[tuple[str, str | None, str | None]] = []

    def set_owner(
        self,
        task: str,
        container: str | None,
        migrating_from: str | None = None,
        restored_from: str | None = None,
    ) -> bool:
        self.writes.append((task, container, restored_from))
        return True

    def set_owners(self, owners: dict[str, str]) -> None:
        self.writes += [(t, c, None) for t, c in owners.items()]

    def forget_container(self, _container: str) -> None:
        pass


@pytest.mark.parametrize("restore", [True, False])
def test_a_dead_containers_tasks_are_reassigned_restored_from_it(restore: bool) -> None:
    """While the leader takes checkpoints, a stateful task lost with a dead container is
    reassigned with ``restored_from`` (its new owner waits for the driver's restore); a
    stateless one, or any without checkpoints, is assigned plainly."""
    coord = object.__new__(Coordinator)
    table = _Table()
    coord.table, coord._core, coord.restore_lost = cast(Any, table), SchedulerCore(Policy()), restore
    coord.metrics, coord.losses, coord._on_loss, coord.identifier = CoordinatorMetrics(), [], None, "c1"
    coord._apply([ContainerJoined("oc-1", 4, "tcp://a"), ContainerJoined("oc-2", 4, "tcp://b")])
    specs = [TaskSpec("t1", stateful=True), TaskSpec("t2", stateful=True), TaskSpec("t3")]
    coord._apply([TaskAdded(s, "oc-1") for s in specs])
    table.writes.clear()
    coord._apply([ContainerLeft("oc-1")])
    placed = {t: (c, r) for t, c, r in table.writes if c is not None}
    assert placed == {
        "t1": ("oc-2", "oc-1" if restore else None),
        "t2": ("oc-2", "oc-1" if restore else None),
        "t3": ("oc-2", None),
    }
    for a in (Assignment(specs[0], "oc-2", None, "oc-1"), Assignment(specs[2], "oc-2")):
        body = a.to_json()
        assert Assignment.from_json(body) == a and ("restored_from" in body) == (a.restored_from is not None)


def test_a_forwards_later_report_times_are_taken_not_recomputed() -> None:
    """The lines a ``forward`` answer gives for report times after the owed one (the batch's
    ticks the new owner evaluated before it kept the queries) answer those ticks' owed
    reports: no ``recompute`` request is sent for them."""
    rec = _recovery({"oc-1"})
    for seq in range(1, 4):
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    rec._early[("a", 3000)] = ("oc-2", ['{"a": 3}'])
    rec._early[("a", 1000)] = ("oc-2", ["stale"])  # an earlier report time: dropped
    sent: list[Any] = []
    rec.fanout = cast(Fanout, SimpleNamespace(peers={"oc-2": object()}, send=lambda *m: sent.append(m)))
    assert rec.recompute(3, {"a": "oc-1"}, {}, lambda _n: "oc-2") == {"a": ['{"a": 3}']}
    assert not sent and not rec._early and rec.done[-1].dst == "oc-2"


def test_a_dead_containers_queries_not_due_are_forwarded_at_once() -> None:
    """At the first tick the death is known, the dead container's queries that owe no
    report then (a long STEP) go to their new owner with the owed ones' forward (one
    restore there); with none owed, in a forward of their own whose answer is not awaited
    but whose later report times' lines are taken."""
    from linkstream.containers.protofields import CAPS

    rec = _recovery({"oc-1"})
    for seq in range(1, 6):
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    rec.hold(3)
    objects: dict[str, dict[str, object]] = {n: {"key": n, "size": 1, "sha256": "0"} for n in "abc"}
    point = RestorePoint(3, 3000, "file:///x", objects)
    rec.checkpointed(point)
    sent: list[Any] = []

    def send(dst: str, frames: Any) -> None:
        message = decode(frames)
        sent.append((dst, message))
        if "a" in message.queries:  # the owed query's new owner answers at once
            later = {6000: {"a": ['{"a": 6}'], "b": ['{"b": 6}']}}
            answer = Recomputed("r1", dst, message.id, 5000, {"a": ['{"a": 5}']}, later=later)
            rec.on_answer(replace(answer, caps=CAPS, kept=()))  # (not kept there: its assignment came later)

    rec.fanout = cast(
        Fanout,
        SimpleNamespace(
            peers={"oc-2": object(), "oc-3": object()},
            send=send,
            history=lambda _s, cuts: ([], [0] * len(cuts)),
        ),
    )
    owner = {"a": "oc-2", "b": "oc-2", "c": "oc-3"}.get
    rec.ahead([(5, 5000), (6, 6000)])
    got = rec.recompute(5, {"a": "oc-1"}, {}, owner, idle={"b": "oc-1", "c": "oc-1"})
    assert got == {"a": ['{"a": 5}']}  # lines of the owed query only
    assert [(d, type(m).__name__, m.queries, m.ticks, m.owe) for d, m in sent] == [
        ("oc-2", "Forward", ["a", "b"], [3000, 4000, 5000, 6000], 5000),  # one restore on oc-2
        ("oc-3", "Forward", ["c"], [3000, 4000, 5000, 6000], 5000),  # not awaited
    ]
    assert rec._early == {("a", 6000): ("oc-2", ['{"a": 6}']), ("b", 6000): ("oc-2", ['{"b": 6}'])}
    assert rec._idle == {sent[1][1].id} and {n for n, _ in rec.forwarded.items()} == {"a", "b", "c"}
    answer = Recomputed("r1", "oc-3", sent[1][1].id, 5000, {}, later={6000: {"c": ['{"c": 6}']}}, caps=CAPS)
    rec.on_answer(answer)  # taken when it comes: its later lines answer tick 6 if c owes it
    assert not rec._idle and not rec._answers and rec._early[("c", 6000)] == ("oc-3", ['{"c": 6}'])
    rec.record(6, 6000, np.array([6], dtype=np.int64))
    assert rec.recompute(6, {"b": "oc-1", "c": "oc-1"}, {}, owner) == {
        "b": ['{"b": 6}'],
        "c": ['{"c": 6}'],
    }
    assert len(sent) == 2  # nothing asked again
    # between ticks (the driver's poll): a query whose new owner is not known yet waits, one
    # forwarded this batch is not sent again, a later batch's is (until kept, MAX_FORWARDS)
    rec.ahead([])
    rec.forward_idle(6, {"b": "oc-1", "d": "oc-1"}, {}, {"b": "oc-2"}.get)
    assert len(sent) == 3 and sent[-1][1].queries == ["b"] and "d" not in rec.refused
    rec.forward_idle(6, {"b": "oc-1"}, {}, owner)
    assert len(sent) == 3  # once per batch


def _driver(rec: Recovery, answerer: dict[str, str], owner: Callable[[str], str | None]) -> Any:
    """A ``ClusterEngine`` of its recovery's parts only (no ZooKeeper, no sockets): oc-1
    died, each query was answered by ``answerer`` and was ready there."""
    import threading

    from linkstream.cluster.driver import ClusterEngine

    eng = cast(Any, object.__new__(ClusterEngine))
    eng.__dict__.update(
        recovery=rec,
        _lock=threading.Lock(),
        _departed={"oc-1"},
        _seen_dead=set(),
        _orphans={},
        _answerer=answerer,
        queries=dict.fromkeys(answerer),
        _ready={n: {c: 1} for n, c in answerer.items()},
        owner_in_zookeeper=owner,
    )
    return eng


def test_the_driver_keeps_a_dead_containers_queries_until_ready_on_their_new_owner() -> None:
    """``ClusterEngine._idle_orphans``: filled once per death from the answerers (only while
    a checkpoint can restore them), a query left once ready on a live new owner -- not while
    ZooKeeper still names the dead container, which the driver may still count ready."""
    rec = _recovery({"oc-1"})
    owners = {"a": "oc-1", "b": "oc-1", "c": "oc-2"}
    eng = _driver(rec, dict(owners), owners.get)
    assert eng._idle_orphans() == {}  # no checkpoint: nothing to restore, nothing kept
    eng._seen_dead = set()
    rec.points = [RestorePoint(3, 3000, "file:///x", {"a": {}, "b": {}})]
    assert eng._idle_orphans(["b"]) == {"a": "oc-1"}  # (b is due: the owed path sends it)
    assert eng._orphans == {"a": "oc-1", "b": "oc-1"}
    owners.update(a="oc-2", b="oc-2")  # reassigned; a ready on its new owner, b not yet
    eng._ready["a"]["oc-2"] = 5
    assert eng._idle_orphans() == {"b": "oc-1"}
    rec.refused.add("b")  # not restorable: its new owner rebuilds it
    assert eng._idle_orphans() == {} and not eng._orphans


def test_a_forward_between_ticks_not_kept_is_sent_again_after_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A forward sent between ticks may reach the new owner before it sees its assignment
    (not kept there): after ``REFORWARD_S`` without the query ready it goes again, before the
    next tick; at a tick the batch rule holds (once per batch)."""
    from linkstream.cluster import recovery

    rec = _recovery({"oc-1"})
    for seq in range(1, 5):
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    rec.checkpointed(RestorePoint(3, 3000, "file:///x", {"a": {"key": "a", "size": 1, "sha256": "0"}}))
    sent: list[Any] = []
    rec.fanout = cast(
        Fanout,
        SimpleNamespace(
            peers={"oc-2": object()},
            send=lambda dst, frames: sent.append(decode(frames)),
            history=lambda _s, cuts: ([], [0] * len(cuts)),
        ),
    )
    clock = [100.0]
    monkeypatch.setattr(recovery.time, "monotonic", lambda: clock[0])
    owner = {"a": "oc-2"}.get
    rec.forward_idle(4, {"a": "oc-1"}, {}, owner)
    rec.forward_idle(4, {"a": "oc-1"}, {}, owner)
    assert len(sent) == 1
    clock[0] += recovery.REFORWARD_S
    rec.forward_idle(4, {"a": "oc-1"}, {}, owner)
    assert len(sent) == 2 and rec.forwarded["a"] == (3, 2, 4)
    assert rec._restorable(4, ["a"], {"a": "oc-1"}, "oc-2", owner) == []  # (at a tick: once per batch)
    rec.is_ready = lambda name, cid: True  # kept: announced ready there
    clock[0] += recovery.REFORWARD_S
    rec.forward_idle(4, {"a": "oc-1"}, {}, owner)
    assert len(sent) == 2


@pytest.mark.parametrize("kept", ["kept", "not kept", "answered"])
def test_a_query_forwarded_between_ticks_is_not_forwarded_again_by_the_next_batch(kept: str) -> None:
    """A dead container's query forwarded between ticks (``forward_idle``) and then owed by
    the next batch, before its new owner's answer came: the batch recomputes it (one pass)
    and does not forward it again -- a second forward restored it there twice.  Once the
    answer says it was kept, no batch forwards it again (its ready announcement comes); one
    not kept there goes again with the next batch.  An older container (``answered``: no
    ``caps``, its answer does not say what it kept, it answers a plain request of several
    ticks with the last one) gets no second forward either: the next requests tell it to
    rebuild the query, which it does only if it did not keep it.  Every message goes
    through the wire form."""
    from linkstream.containers.protofields import CAPS

    older = kept == "answered"
    rec = _recovery({"oc-1"})
    for seq in range(1, 5):
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    rec.checkpointed(RestorePoint(3, 3000, "file:///x", {"a": {"key": "a", "size": 1, "sha256": "0"}}))
    restores: Counter[str] = Counter()  # per query, the forwards its new owner restored it from
    asked: list[tuple[str, list[int], int, list[str]]] = []
    wire: list[list[bytes]] = []  # answers on their way to the driver

    def send(dst: str, frames: Any) -> None:  # oc-2, the new owner, answers each request
        m = decode([bytes(memoryview(f)) for f in frames])
        assert isinstance(m, Recompute)
        asked.append((type(m).__name__, m.ticks, m.owe, m.rebuild))
        plain_older = older and not isinstance(m, Forward)
        owe = m.ticks[-1] if plain_older else m.owe or m.ticks[-1]
        later = (
            {}
            if plain_older
            else {c: {n: [f'{{"{n}": {c}}}'] for n in m.queries} for c in m.ticks if c > owe}
        )
        lines = {n: [f'{{"{n}": {owe}}}'] for n in m.queries}
        ans = Recomputed("r1", dst, m.id, owe, lines, later=later, caps=() if older else CAPS)
        if isinstance(m, Forward):
            restores.update(m.queries)
            if not older:
                ans = replace(ans, kept=tuple(m.queries) if kept == "kept" else ())
        wire.append([bytes(memoryview(f)) for f in encode(ans)])

    def pump(_timeout: float) -> None:
        while wire:
            got = decode(wire.pop(0))
            assert isinstance(got, Recomputed)
            rec.on_answer(got)

    rec.pump = pump
    rec.fanout = cast(
        Fanout,
        SimpleNamespace(peers={"oc-2": object()}, send=send, history=lambda _s, cuts: ([], [0] * len(cuts))),
    )
    owner = {"a": "oc-2"}.get
    rec.ahead([(4, 4000)])
    rec.forward_idle(4, {"a": "oc-1"}, {}, owner)  # between ticks, at the detection
    assert restores["a"] == 1 and wire  # (its answer not read yet)
    for seq in (5, 6):  # the next batch: two ticks sent together, a owes the first
        rec.record(seq, 1000 * seq, np.array([seq], dtype=np.int64))
    rec.ahead([(5, 5000), (6, 6000)])
    assert rec.recompute(5, {"a": "oc-1"}, {}, owner) == {"a": ['{"a": 5000}']}
    assert restores["a"] == 1  # recomputed in one pass, not restored there a second time
    # (an older container answered the batch's last tick only: asked again for the owed one)
    assert asked[-1][:3] == (
        ("Recompute", [4000, 5000], 0) if older else ("Recompute", [4000, 5000, 6000], 5000)
    )
    assert rec.recompute(6, {"a": "oc-1"}, {}, owner) == {"a": ['{"a": 6000}']}  # (its later lines)
    assert not wire and rec._sent["a"].state == kept
    rec.record(7, 7000, np.array([7], dtype=np.int64))
    rec.ahead([(7, 7000)])  # a batch after the answer, before the ready announcement is read
    assert rec.recompute(7, {"a": "oc-1"}, {}, owner) == {"a": ['{"a": 7000}']}
    assert restores["a"] == (2 if kept == "not kept" else 1)
    assert asked[-1][0] == ("Forward" if kept == "not kept" else "Recompute")
    assert asked[-1][3] == (["a"] if older else [])  # (rebuilt there unless it kept it)
    rec.forward_idle(7, {"a": "oc-1"}, {}, owner)  # between ticks: nothing while unanswered or kept
    assert restores["a"] == (2 if kept == "not kept" else 1)
    rec.fanout.peers["oc-2"] = object()  # oc-2 restarted its run (a new socket): the forward is lost
    rec.record(8, 8000, np.array([8], dtype=np.int64))
    rec.ahead([(8, 8000)])
    assert rec.recompute(8, {"a": "oc-1"}, {}, owner) == {"a": ['{"a": 8000}']}
    assert restores["a"] == (3 if kept == "not kept" else 2)
    rec.forget("a")  # unregistered: nothing kept about it
    assert "a" not in rec._sent and "a" not in rec.forwarded and "a" not in rec._forward_t


def test_a_dead_containers_queries_without_a_new_owner_are_looked_up_less_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Between ticks (``ClusterEngine.forward_orphans``, every ~50 ms from the live worker)
    the dead container's queries that no live container is assigned yet (no free slot
    anywhere) are looked up after a delay doubling up to ``ORPHAN_POLL_S[1]`` while the
    owners and peers stand, and at once when they change; once one has a live new owner it
    is forwarded at once."""
    from linkstream.cluster import recovery

    clock = [100.0]
    monkeypatch.setattr(recovery.time, "monotonic", lambda: clock[0])
    rec = _recovery({"oc-1"})
    rec.points = [RestorePoint(3, 3000, "file:///x", {"a": {}, "b": {}})]
    forwards: list[dict[str, str]] = []
    rec.forward_idle = lambda _seq, idle, *_a: forwards.append(dict(idle))  # type: ignore[method-assign]
    owners: dict[str, str] = {"a": "oc-1", "b": "oc-1"}  # ZooKeeper still names the dead one
    lookups: list[str] = []

    def owner(name: str) -> str | None:
        lookups.append(name)
        return owners.get(name)

    eng = _driver(rec, dict(owners), owner)
    eng.__dict__.update(
        _peers={"oc-2": object()},
        owners=SimpleNamespace(version=1),
        _orphan_poll=recovery.Backoff(),
        seq=4,
        reads={},
        pump=lambda _t=0.0: None,
        admit=lambda: None,
        _dead=lambda c: c == "oc-1",
    )
    polls = 0
    for _ in range(100):  # 5 s of the worker's idle calls, 50 ms apart
        before = len(lookups)
        eng.forward_orphans()
        polls += len(lookups) > before
        clock[0] += 0.05
    assert eng._orphans == {"a": "oc-1", "b": "oc-1"} and len(forwards) == polls
    assert 5 <= polls <= 10  # (0.1, 0.2, 0.4, 0.8, 1, 1, ... s apart; 100 polls before)
    owners["a"] = "oc-2"  # a slot freed: a is assigned to a live container
    eng.owners.version = 2
    eng.forward_orphans()  # at once
    assert forwards[-1] == {"a": "oc-1", "b": "oc-1"}
    before = len(lookups)
    eng.forward_orphans()  # (one of them has a live owner: not held back)
    assert len(lookups) > before


@pytest.mark.parametrize("caps", [("owe", "kept", "from"), ()])
def test_a_query_whose_answerer_left_is_named_to_its_new_owner_before_it_said_ready(
    caps: tuple[str, ...],
) -> None:
    """``ClusterEngine.choose_owners``: a query whose answerer left is named, tick by tick, to
    its live ZooKeeper owner before that owner's ready announcement is read -- if the owner
    said (``from`` in its hello's caps) that it answers a query only from the first tick it
    announced; the answerer itself switches only on the announcement.  ``_collect`` takes the
    owner's lines, and recomputes the query the owner lists as missing, for the container that
    left (the restore decisions depend on it), up to the tick the owner answers from.  An older
    owner (no caps) is not named early: its ticks are recomputed as before."""
    import threading

    from linkstream.cluster.driver import ClusterEngine
    from linkstream.containers.messages import Result

    asked: list[tuple[int, dict[str, str | None], dict[str, int] | None]] = []

    class _Recovery:
        def recompute(self, seq: int, owed: dict[str, str | None], *args: Any) -> dict[str, list[str]]:
            asked.append((seq, dict(owed), args[-1] or None))
            return {n: [f"recomputed {n} {seq}"] for n in owed}

    answerer = {"a": "oc-1", "i": "oc-1", "b": "oc-2"}  # oc-1 left; ZooKeeper gave a, i to oc-2
    eng = cast(Any, object.__new__(ClusterEngine))
    eng.__dict__.update(
        recovery=_Recovery(),
        _lock=threading.Lock(),
        _departed={"oc-1"},
        _seen_dead=set(),
        _orphans={},
        _answerer=dict(answerer),
        queries=dict.fromkeys(answerer),
        _ready={"a": {}, "i": {}, "b": {"oc-2": 1}},
        owner_in_zookeeper={"a": "oc-2", "i": "oc-2", "b": "oc-2"}.get,
        owners=SimpleNamespace(version=1),
        _owning=0,
        _chosen=None,
        _peers={"oc-2": object()},
        fanout=SimpleNamespace(caps={"oc-2": frozenset(caps)}),
        switches=[],
        _early={},
        _early_last={},
        _early_told=set(),
        _results={},
        answer_timeout=5.0,
        reads={},
        lost=[],
    )
    owners = eng.choose_owners(5)
    assert eng._answerer == answerer and not eng.switches  # (switched only on the announcement)
    if not caps:
        assert owners == answerer and eng._early == {}
        return
    assert owners == {"a": "oc-2", "i": "oc-2", "b": "oc-2"}
    # oc-2's answer: a (kept or rebuilt, RStream) answered; i (IStream, kept a tick ago) from tick 6
    eng._results[5] = {"oc-2": Result("r1", "oc-2", 5, 5000, {"a": ["a 5"], "b": ["b 5"]}, ["i"], {"i": 6})}
    eng._idle_orphans = lambda due=(): {}
    got = eng._collect(5, 5000, ["a", "b", "i"], owners)
    assert {n: list(x) for n, x in got.items()} == {"a": ["a 5"], "b": ["b 5"], "i": ["recomputed i 5"]}
    assert asked == [(5, {"i": "oc-1"}, {"i": 6})] and eng._early == {}
    eng._ready["i"]["oc-2"] = 6  # its announcement read: switched for good
    assert eng.choose_owners(6) == {"a": "oc-2", "i": "oc-2", "b": "oc-2"} and eng._answerer["i"] == "oc-2"
    assert eng._early == {6: {"a": ("oc-2", "oc-1")}}
