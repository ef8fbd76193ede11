"""Producer channels as scheduler tasks: the sans-IO move decisions and the ZooKeeper recipe."""

from __future__ import annotations

import threading

import pytest
from kazoo.client import KazooClient

from linkstream.scheduler.assignment import Assignment, AssignmentTable
from linkstream.scheduler.core import SchedulerCore
from linkstream.scheduler.events import (
    Assign,
    ContainerDraining,
    ContainerJoined,
    ContainerLeft,
    Migrate,
    TaskAdded,
)
from linkstream.scheduler.producers import ProducerMove, ProducerPlacement, ProducerTasks, producer_task_id
from linkstream.scheduler.state import Policy, TaskSpec

# ----------------------------------------------------------------------------- sans-IO


def test_hosts_follow_the_live_owner_zookeeper_names() -> None:
    p = ProducerPlacement({"op-1": "oc-1", "op-2": "oc-2"}, ["oc-1", "oc-2", "oc-3"])
    assert p.on_owner("op-1", "oc-1") == []  # the initial placement itself
    assert p.on_owner("op-1", "oc-3") == [ProducerMove("op-1", "oc-1", "oc-3", 2, "assigned")]
    assert p.hosts["op-1"] == "oc-3" and p.gens == {"op-1": 2, "op-2": 1}
    assert p.on_owner("op-1", "oc-3") == []  # the same news twice moves nothing
    assert p.on_owner("op-2", "oc-9") == []  # an owner that is not live: wait for a live one
    assert p.on_owner("op-2", None) == []  # pending while its host lives: it keeps serving
    assert p.on_owner("op-9", "oc-1") == []  # not a channel of the run
    assert p.hosts == {"op-1": "oc-3", "op-2": "oc-2"}


def test_a_dead_host_without_a_live_owner_falls_back_to_the_least_loaded_container() -> None:
    p = ProducerPlacement({"a": "oc-1", "b": "oc-1", "c": "oc-2", "d": "oc-3"}, ["oc-1", "oc-2", "oc-3"])
    gone, moves = p.on_members(["oc-2", "oc-3"])
    assert gone == ["oc-1"]
    # a goes to oc-2 (tie with oc-3: the smaller id), then b to oc-3 (now the lighter).
    assert moves == [
        ProducerMove("a", "oc-1", "oc-2", 2, "host lost, no live owner"),
        ProducerMove("b", "oc-1", "oc-3", 2, "host lost, no live owner"),
    ]
    # The coordinator's decision arrives later: the channel moves once more, a new generation.
    assert p.on_owner("a", "oc-3") == [ProducerMove("a", "oc-2", "oc-3", 3, "assigned")]
    assert p.load() == {"oc-2": 1, "oc-3": 3}


def test_a_dead_host_whose_owner_is_already_live_moves_there() -> None:
    p = ProducerPlacement({"a": "oc-1"}, ["oc-1", "oc-2", "oc-3"])
    assert p.on_owner("a", "oc-1") == []
    p.owners["a"] = "oc-3"  # ZooKeeper moved it while the old host still lived ...
    p.live.discard("oc-3")  # ... to a container not seen yet
    _, moves = p.on_members(["oc-2", "oc-3"])  # oc-1 dies, oc-3 shows up
    assert moves == [ProducerMove("a", "oc-1", "oc-3", 2, "assigned")]


def test_no_live_container_means_no_move_and_decisions_are_deterministic() -> None:
    def replay() -> list[ProducerMove]:
        p = ProducerPlacement({f"op-{i}": f"oc-{i % 3}" for i in range(9)}, ["oc-0", "oc-1", "oc-2"])
        out = p.on_members(["oc-1", "oc-2"])[1]
        out += p.on_owner("op-4", "oc-2")
        assert p.on_members([]) == (["oc-1", "oc-2"], [])
        return out

    assert replay() == replay() and len(replay()) == 4


def test_the_core_moves_producer_channels_like_any_stateful_task() -> None:
    """The decisions the driver follows: drain, loss and a full container, in the core."""
    core = SchedulerCore(Policy(rebalance_on_tick=False))
    for c in ("oc-1", "oc-2"):
        core.handle(ContainerJoined(c, 4))
    spec = TaskSpec(producer_task_id("run", "op-1.0"), weight=2.0, colocate_with="join-1.0", stateful=True)
    assert core.handle(TaskAdded(spec, container="oc-1")) == []  # published with its host
    out = core.handle(ContainerLeft("oc-1"))
    assert any(isinstance(a, Assign) and a.container == "oc-2" for a in out)
    core.handle(ContainerJoined("oc-3", 4))
    out = core.handle(ContainerDraining(core.assignment()[spec.id] or ""))
    assert [a for a in out if isinstance(a, Migrate) and a.task == spec.id and a.stateful]


# ----------------------------------------------------------------------------- ZooKeeper


@pytest.mark.zookeeper
def test_published_channels_are_owned_tasks_that_are_watched_and_withdrawn(kazoo_client: KazooClient) -> None:
    tasks = ProducerTasks(kazoo_client, "r1")
    table = AssignmentTable(kazoo_client)
    tid = tasks.publish(TaskSpec("op-1.1", weight=2.0, colocate_with="join-1.1", stateful=True), "oc-2")
    assert tid == "p-r1-op-1.1"
    a = table.get(tid)
    assert a is not None and a.container == "oc-2" and a.task.colocate_with == "join-1.1"
    assert tid in table.of_container("oc-2")  # the index entry came with it, atomically
    # Publishing again (a retried setup) moves the existing node instead of failing.
    assert tasks.publish(TaskSpec("op-1.1", weight=2.0, stateful=True), "oc-3") == tid
    assert table.get(tid).container == "oc-3"  # type: ignore[union-attr]

    seen: list[tuple[str, str | None]] = []
    changed = threading.Event()

    def on_change(channel: str, assignment: Assignment | None) -> None:
        seen.append((channel, None if assignment is None else assignment.container))
        if assignment is not None and assignment.container == "oc-1":
            changed.set()

    tasks.watch(on_change)
    table.set_owner(tid, "oc-1", "oc-3")
    assert changed.wait(10)
    assert seen[0] == ("op-1.1", "oc-3") and seen[-1] == ("op-1.1", "oc-1")
    tasks.complete_migration("op-1.1")
    assert table.get(tid).migrating_from is None  # type: ignore[union-attr]
    tasks.withdraw()
    assert table.get(tid) is None and table.of_container("oc-1") == {}
