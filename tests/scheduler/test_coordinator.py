"""The coordinator wired to a real ZooKeeper: membership in, assignments out."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator

import pytest
from kazoo.client import KazooClient

from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.coordinator import Coordinator
from linkstream.scheduler.events import ReportLoss
from linkstream.scheduler.membership import Membership
from linkstream.scheduler.state import Policy, TaskSpec

pytestmark = pytest.mark.zookeeper

Factory = Callable[..., KazooClient]


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def owners(table: AssignmentTable) -> dict[str, str | None]:
    return {task_id: a.container for task_id, a in table.all().items()}


@pytest.fixture
def start_coordinator(kazoo_factory: Factory) -> Iterator[Callable[[str], Coordinator]]:
    started: list[Coordinator] = []

    def start(identifier: str) -> Coordinator:
        coordinator = Coordinator(
            kazoo_factory(), identifier, policy=Policy(tolerance=0.25, max_moves=4), tick_interval=0.1
        )
        coordinator.start()
        started.append(coordinator)
        return coordinator

    yield start
    for coordinator in started:
        coordinator.stop()


def test_tasks_are_assigned_and_reassigned_when_a_container_session_closes(
    kazoo_factory: Factory, start_coordinator: Callable[[str], Coordinator]
) -> None:
    coordinator = start_coordinator("coord-1")
    wait_until(lambda: coordinator.is_leader, what="leadership")
    clients = {"oc-a": kazoo_factory(), "oc-b": kazoo_factory()}
    for port, (container_id, client) in enumerate(sorted(clients.items()), start=5701):
        Membership(client).join(4, f"tcp://127.0.0.1:{port}", member_id=container_id)

    planner = AssignmentTable(kazoo_factory())
    stateful = {"sig-0", "sig-1", "sig-2"}
    for i in range(4):
        planner.submit(TaskSpec(f"sig-{i}", stateful=f"sig-{i}" in stateful))
    wait_until(lambda: None not in owners(planner).values(), what="all tasks assigned")
    wait_until(lambda: Counter(owners(planner).values()) == {"oc-a": 2, "oc-b": 2}, what="balance")

    victim = owners(planner)["sig-0"]
    assert victim is not None
    survivor = "oc-b" if victim == "oc-a" else "oc-a"
    on_victim = set(planner.of_container(victim))
    assert on_victim == {t for t, c in owners(planner).items() if c == victim}
    clients[victim].stop()  # its session ends: the ephemeral node goes, its tasks move
    wait_until(lambda: set(owners(planner).values()) == {survivor}, what="reassigned to the survivor")
    assert planner.of_container(victim) == {}
    wait_until(
        lambda: {loss.task for loss in coordinator.losses} == on_victim & stateful, what="losses reported"
    )
    assert all(isinstance(loss, ReportLoss) and loss.container == victim for loss in coordinator.losses)


def test_graceful_drain_migrates_and_signals_completion(
    kazoo_factory: Factory, start_coordinator: Callable[[str], Coordinator]
) -> None:
    coordinator = start_coordinator("coord-1")
    a, b = Membership(kazoo_factory()), Membership(kazoo_factory())
    a.join(4, "tcp://127.0.0.1:5711", member_id="oc-a")
    planner = AssignmentTable(kazoo_factory())
    planner.submit(TaskSpec("sig-window", stateful=True))
    planner.submit(TaskSpec("sig-filter"))
    wait_until(lambda: set(owners(planner).values()) == {"oc-a"}, what="placed on oc-a")
    b.join(4, "tcp://127.0.0.1:5712", member_id="oc-b")
    wait_until(
        lambda: coordinator.core is not None and "oc-b" in coordinator.core.state.containers, what="b seen"
    )

    Membership(kazoo_factory()).request_drain("oc-a")
    wait_until(lambda: set(owners(planner).values()) == {"oc-b"}, what="moved to oc-b")
    moved = planner.get("sig-window")
    assert moved is not None and moved.migrating_from == "oc-a"
    time.sleep(0.3)
    assert a.drain_state("oc-a") == "requested"  # waits for the snapshot hand-over

    # oc-b restored the window's state and acknowledges.
    assert AssignmentTable(kazoo_factory()).complete_migration("sig-window")
    wait_until(lambda: a.drain_state("oc-a") == "complete", what="drain complete")
    assert coordinator.losses == []
    # The moves are counted on the coordinator's /metrics registry.
    reg = coordinator.metrics.registry
    assert reg.get_sample_value("linkstream_scheduler_task_moves_total") >= 2
    assert reg.get_sample_value("linkstream_scheduler_containers") == 2
    assert reg.get_sample_value("linkstream_scheduler_tasks", {"state": "assigned"}) == 2


def test_standby_coordinator_takes_over_and_keeps_assigning(
    kazoo_factory: Factory, start_coordinator: Callable[[str], Coordinator]
) -> None:
    first = start_coordinator("coord-1")
    wait_until(lambda: first.is_leader, what="first leads")
    second = start_coordinator("coord-2")
    Membership(kazoo_factory()).join(8, "tcp://127.0.0.1:5721", member_id="oc-a")
    planner = AssignmentTable(kazoo_factory())
    planner.submit(TaskSpec("sig-0"))
    wait_until(lambda: owners(planner) == {"sig-0": "oc-a"}, what="first assignment")
    assert not second.is_leader

    first.client.stop()  # the leader's session ends
    wait_until(lambda: second.is_leader, what="standby leads")
    planner.submit(TaskSpec("sig-1"))
    wait_until(lambda: owners(planner) == {"sig-0": "oc-a", "sig-1": "oc-a"}, what="new leader assigns")
    assert second.core is not None and second.core.assignment() == {"sig-0": "oc-a", "sig-1": "oc-a"}
    assert second.metrics.registry.get_sample_value("linkstream_scheduler_leader") == 1
    assert second.metrics.registry.get_sample_value("linkstream_scheduler_elections_total") == 1
    assert first.metrics.registry.get_sample_value("linkstream_scheduler_leader") == 0


def test_task_streams_survive_zookeeper_and_steer_placement(
    kazoo_factory: Factory, start_coordinator: Callable[[str], Coordinator]
) -> None:
    coordinator = start_coordinator("coord-1")
    wait_until(lambda: coordinator.is_leader, what="leadership")
    members = {"oc-a": kazoo_factory(), "oc-b": kazoo_factory()}
    for port, (container_id, client) in enumerate(sorted(members.items()), start=5711):
        Membership(client).join(8, f"tcp://127.0.0.1:{port}", member_id=container_id)
    wait_until(lambda: coordinator.core is not None and len(coordinator.core.state.containers) == 2)
    planner = AssignmentTable(kazoo_factory())
    reads = {"q-1": ("s1",), "q-2": ("s2",), "q-3": ("s1",), "q-4": ("s2",)}
    for task_id, streams in reads.items():
        planner.submit(TaskSpec(task_id, stateful=True, streams=streams))
    wait_until(lambda: None not in owners(planner).values(), what="all tasks assigned")
    table = planner.all()
    assert {t: a.task.streams for t, a in table.items()} == reads
    # Each stream reaches one container, and the load stays balanced.
    by_stream: dict[str, set[str | None]] = {}
    for task_id, a in table.items():
        by_stream.setdefault(reads[task_id][0], set()).add(a.container)
    assert all(len(holders) == 1 for holders in by_stream.values()), by_stream
    assert Counter(owners(planner).values()) == {"oc-a": 2, "oc-b": 2}
    core = coordinator.core
    assert core is not None and core.state.subscriptions() == 2
