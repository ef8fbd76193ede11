"""Sans-IO tests of the global scheduler's decisions (no ZooKeeper, no threads)."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.scheduler.core import SchedulerCore
from linkstream.scheduler.events import (
    Action,
    Assign,
    ContainerDraining,
    ContainerJoined,
    ContainerLeft,
    DrainComplete,
    Event,
    LoadReport,
    Migrate,
    MigrationCompleted,
    Rebalanced,
    ReportLoss,
    TaskAdded,
    TaskPending,
    TaskRemoved,
    Tick,
    Unassign,
)
from linkstream.scheduler.state import Policy, TaskSpec


def run(core: SchedulerCore, *events: Event) -> list[Action]:
    actions: list[Action] = []
    for event in events:
        actions.extend(core.handle(event))
    return actions


def owners(core: SchedulerCore) -> Counter[str | None]:
    return Counter(core.assignment().values())


def moves(actions: list[Action]) -> list[Migrate]:
    return [a for a in actions if isinstance(a, Migrate)]


# ---------------------------------------------------------------------- placement


def test_placement_follows_capacity_and_load() -> None:
    core = SchedulerCore()
    run(core, ContainerJoined("a", 2, "tcp://a"), ContainerJoined("b", 6, "tcp://b"))
    actions = run(core, *(TaskAdded(TaskSpec(f"t{i}")) for i in range(4)))
    assert all(isinstance(a, Assign) for a in actions)
    assert owners(core) == Counter({"b": 3, "a": 1})
    # A heavy task goes where the relative load stays lowest.
    run(core, TaskAdded(TaskSpec("heavy", weight=3.0)))
    assert core.assignment()["heavy"] == "b"


def test_load_report_steers_placement() -> None:
    core = SchedulerCore()
    run(core, ContainerJoined("a", 4), ContainerJoined("b", 4))
    run(core, TaskAdded(TaskSpec("t0")), TaskAdded(TaskSpec("t1")))
    assert set(core.assignment().values()) == {"a", "b"}
    hot = core.assignment()["t0"]
    cold = "b" if hot == "a" else "a"
    assert run(core, LoadReport(hot, load=3.5, task_loads={"t0": 3.5})) == []
    run(core, TaskAdded(TaskSpec("t2")))
    assert core.assignment()["t2"] == cold


def test_capacity_exhaustion_leaves_tasks_pending_until_capacity_arrives() -> None:
    core = SchedulerCore()
    run(core, ContainerJoined("a", 2))
    actions = run(core, *(TaskAdded(TaskSpec(f"t{i}")) for i in range(3)))
    assert actions == [Assign("t0", "a"), Assign("t1", "a"), TaskPending("t2")]
    assert core.pending() == ["t2"]
    assert run(core, Tick()) == []  # nothing to place it on
    actions = run(core, ContainerJoined("b", 2))
    assert actions[0] == Assign("t2", "b")
    assert core.pending() == []
    assert max(owners(core).values()) <= 2


def test_removing_a_task_frees_its_slot_for_pending_work() -> None:
    core = SchedulerCore()
    run(core, ContainerJoined("a", 1), TaskAdded(TaskSpec("t0")), TaskAdded(TaskSpec("t1")))
    assert core.pending() == ["t1"]
    assert run(core, TaskRemoved("t0")) == [Unassign("t0", "a"), Assign("t1", "a")]


def test_colocation_groups_share_a_container_while_it_has_room() -> None:
    core = SchedulerCore()
    run(core, *(ContainerJoined(c, 3) for c in ("a", "b", "c")))
    run(core, *(TaskAdded(TaskSpec(f"j{i}", colocate_with="join-1")) for i in range(3)))
    assert len(set(core.assignment().values())) == 1
    home = core.assignment()["j0"]
    # The group's container is full now: the next member goes elsewhere ...
    run(core, TaskAdded(TaskSpec("j3", colocate_with="join-1")))
    assert core.assignment()["j3"] not in (home, None)
    # ... and its partner in a second group follows it there, ignoring load.
    run(
        core,
        TaskAdded(TaskSpec("k0", colocate_with="join-2")),
        TaskAdded(TaskSpec("k1", colocate_with="join-2")),
    )
    assert core.assignment()["k0"] == core.assignment()["k1"]


# ---------------------------------------------------------------------- rebalance


def test_join_rebalances_with_a_bounded_number_of_moves() -> None:
    core = SchedulerCore(Policy(tolerance=0.1, max_moves=2))
    run(core, ContainerJoined("a", 10), *(TaskAdded(TaskSpec(f"t{i}")) for i in range(8)))
    actions = run(core, ContainerJoined("b", 10))
    assert [(m.src, m.dst) for m in moves(actions)] == [("a", "b"), ("a", "b")]
    summary = actions[-1]
    assert isinstance(summary, Rebalanced) and (summary.trigger, summary.moves) == ("ContainerJoined", 2)
    assert (summary.spread_before, summary.spread_after) == pytest.approx((0.8, 0.4))
    # Later ticks continue within the same bound until balance is within tolerance.
    assert len(moves(run(core, Tick()))) == 2
    assert owners(core) == Counter({"a": 4, "b": 4})
    assert run(core, Tick()) == []


def test_rebalance_moves_groups_whole_and_prefers_stateless_tasks() -> None:
    core = SchedulerCore(Policy(tolerance=0.2, max_moves=4))
    run(
        core,
        ContainerJoined("a", 6),
        TaskAdded(TaskSpec("s0", stateful=True)),
        TaskAdded(TaskSpec("s1", stateful=True)),
        TaskAdded(TaskSpec("p0")),
        TaskAdded(TaskSpec("g0", colocate_with="g")),
        TaskAdded(TaskSpec("g1", colocate_with="g")),
    )
    actions = run(core, ContainerJoined("b", 6))
    moved = {m.task for m in moves(actions)}
    assert "s0" not in moved and "s1" not in moved
    assert {"g0", "g1"} <= moved or not ({"g0", "g1"} & moved)
    assert core.assignment()["g0"] == core.assignment()["g1"]
    assert all(not m.stateful for m in moves(actions))


def test_stateful_rebalance_waits_for_acknowledgement_before_moving_again() -> None:
    core = SchedulerCore(Policy(tolerance=0.0, max_moves=1))
    run(core, ContainerJoined("a", 4), *(TaskAdded(TaskSpec(f"s{i}", stateful=True)) for i in range(4)))
    first = moves(run(core, ContainerJoined("b", 4)))
    assert first == [Migrate("s0", "a", "b", stateful=True)]
    # The hand-over is in flight; the moved task is not picked again, others may go.
    second = moves(run(core, Tick()))
    assert second and second[0].task != "s0"


# ---------------------------------------------------------------------- drain


def test_graceful_drain_migrates_stateful_tasks_then_completes() -> None:
    core = SchedulerCore()
    run(
        core,
        ContainerJoined("a", 4),
        TaskAdded(TaskSpec("w", stateful=True)),
        TaskAdded(TaskSpec("f")),
        ContainerJoined("b", 4),
    )
    located = core.assignment()
    run(core, *(MigrationCompleted(t) for t in located))  # settle the join's rebalance
    victim = located["w"]
    other = "b" if victim == "a" else "a"
    actions = run(core, ContainerDraining(victim))
    assert Migrate("w", victim, other, stateful=True) in actions
    assert not any(isinstance(a, DrainComplete) for a in actions)
    assert run(core, Tick()) == []  # still waiting for the snapshot to be restored
    assert run(core, MigrationCompleted("w")) == [DrainComplete(victim)]
    assert set(core.assignment().values()) == {other}
    assert run(core, ContainerLeft(victim)) == []  # it leaves with nothing to lose


def test_stateless_drain_completes_at_once() -> None:
    core = SchedulerCore(Policy(max_moves=0))
    run(core, ContainerJoined("a", 4), TaskAdded(TaskSpec("f0")), TaskAdded(TaskSpec("f1")))
    run(core, ContainerJoined("b", 4))
    actions = run(core, ContainerDraining("a"))
    assert actions == [
        Migrate("f0", "a", "b", stateful=False),
        Migrate("f1", "a", "b", stateful=False),
        DrainComplete("a"),
    ]


def test_drain_without_capacity_elsewhere_waits_for_a_new_container() -> None:
    core = SchedulerCore()
    run(core, ContainerJoined("a", 2), TaskAdded(TaskSpec("f0")), TaskAdded(TaskSpec("f1")))
    assert run(core, ContainerDraining("a")) == []
    assert run(core, Tick()) == []
    actions = run(core, ContainerJoined("b", 1))
    assert actions == [Migrate("f0", "a", "b", stateful=False)]
    actions = run(core, ContainerJoined("c", 1))
    assert actions == [Migrate("f1", "a", "c", stateful=False), DrainComplete("a")]
    # A draining container never receives tasks again.
    assert run(core, TaskAdded(TaskSpec("f2"))) == [TaskPending("f2")]


# ---------------------------------------------------------------------- loss


def test_lost_container_tasks_are_reassigned_and_stateful_loss_reported() -> None:
    core = SchedulerCore(Policy(max_moves=0))
    run(core, ContainerJoined("a", 4), TaskAdded(TaskSpec("w", stateful=True)), TaskAdded(TaskSpec("f")))
    run(core, ContainerJoined("b", 4))
    actions = run(core, ContainerLeft("a"))
    assert actions == [
        Unassign("f", "a"),
        ReportLoss("w", "a"),
        Unassign("w", "a"),
        Assign("f", "b"),
        Assign("w", "b"),
    ]
    assert core.assignment() == {"w": "b", "f": "b"}


def test_loss_of_a_handover_destination_retries_from_the_source() -> None:
    core = SchedulerCore(Policy(max_moves=0))
    run(core, ContainerJoined("a", 4), TaskAdded(TaskSpec("w", stateful=True)))
    run(core, ContainerJoined("b", 4), ContainerJoined("c", 4), ContainerDraining("a"))
    assert core.assignment()["w"] == "b"
    actions = run(core, ContainerLeft("b"))
    assert actions == [Unassign("w", "b"), Migrate("w", "a", "c", stateful=True)]
    assert run(core, MigrationCompleted("w")) == [DrainComplete("a")]


def test_loss_of_a_handover_source_reports_the_state_lost() -> None:
    core = SchedulerCore(Policy(max_moves=0))
    run(core, ContainerJoined("a", 4), TaskAdded(TaskSpec("w", stateful=True)))
    run(core, ContainerJoined("b", 4), ContainerDraining("a"))
    assert run(core, ContainerLeft("a")) == [ReportLoss("w", "a")]
    assert core.assignment() == {"w": "b"}
    assert run(core, MigrationCompleted("w")) == []


def test_restore_hints_rebuild_state_without_actions() -> None:
    core = SchedulerCore()
    run(core, ContainerJoined("a", 2), ContainerJoined("b", 2))
    assert run(core, TaskAdded(TaskSpec("x"), container="a")) == []
    assert run(core, TaskAdded(TaskSpec("y", stateful=True), container="b", migrating_from="a")) == []
    assert core.assignment() == {"x": "a", "y": "b"}
    # An owner that is gone is treated as lost.
    actions = run(core, TaskAdded(TaskSpec("z", stateful=True), container="gone"))
    assert actions[:2] == [ReportLoss("z", "gone"), Unassign("z", "gone")]
    assert isinstance(actions[2], Assign)


def test_restore_resumes_an_interrupted_handover() -> None:
    core = SchedulerCore(Policy(max_moves=0))
    run(core, ContainerJoined("a", 1), ContainerJoined("c", 2), TaskAdded(TaskSpec("x"), container="a"))
    # The hand-over's destination died while no coordinator led: the source has the state.
    actions = run(core, TaskAdded(TaskSpec("w", stateful=True), container="gone", migrating_from="a"))
    assert actions == [Unassign("w", "gone"), Migrate("w", "a", "c", stateful=True)]
    # A pending task whose hand-over source is alive resumes the same way.
    actions = run(core, TaskAdded(TaskSpec("v", stateful=True), migrating_from="a"))
    assert actions == [Migrate("v", "a", "c", stateful=True)]
    assert run(core, MigrationCompleted("w"), MigrationCompleted("v")) == []
    assert core.assignment() == {"x": "a", "w": "c", "v": "c"}


def test_shrinking_a_container_moves_its_excess_tasks() -> None:
    core = SchedulerCore(Policy(max_moves=0))
    run(
        core,
        ContainerJoined("a", 3),
        *(TaskAdded(TaskSpec(f"t{i}")) for i in range(3)),
        ContainerJoined("b", 3),
    )
    actions = run(core, ContainerJoined("a", 1))
    assert actions == [Migrate("t2", "a", "b", stateful=False), Migrate("t1", "a", "b", stateful=False)]


def test_core_is_sans_io() -> None:
    code = (
        "import sys, linkstream.scheduler.core, linkstream.scheduler.events;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in {'kazoo', 'zmq'});"
        "print(','.join(bad))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""


def test_unknown_events_are_rejected() -> None:
    with pytest.raises(TypeError):
        SchedulerCore().handle("ContainerJoined")  # type: ignore[arg-type]


# ---------------------------------------------------------------------- determinism and invariants


def random_events(seed: int, n: int) -> list[Event]:
    rng = random.Random(seed)
    containers = [f"c{i}" for i in range(4)]
    tasks = [f"t{i}" for i in range(10)]
    events: list[Event] = []
    for _ in range(n):
        kind = rng.randrange(8)
        if kind == 0:
            events.append(ContainerJoined(rng.choice(containers), rng.randrange(0, 5)))
        elif kind == 1:
            events.append(ContainerLeft(rng.choice(containers)))
        elif kind == 2:
            events.append(ContainerDraining(rng.choice(containers)))
        elif kind in (3, 4):
            spec = TaskSpec(
                rng.choice(tasks),
                weight=rng.choice((0.5, 1.0, 2.0)),
                colocate_with=rng.choice((None, "g0", "g1")),
                stateful=rng.random() < 0.5,
            )
            events.append(TaskAdded(spec))
        elif kind == 5:
            events.append(TaskRemoved(rng.choice(tasks)))
        elif kind == 6:
            events.append(MigrationCompleted(rng.choice(tasks)))
        else:
            events.append(Tick())
    return events


def test_equal_event_sequences_give_equal_actions() -> None:
    for seed in range(20):
        events = random_events(seed, 200)
        a, b = SchedulerCore(), SchedulerCore()
        first = [a.handle(e) for e in events]
        second = [b.handle(e) for e in events]
        assert first == second
        assert a.assignment() == b.assignment()


class Mirror:
    """What the I/O layer would believe after executing the actions in order."""

    def __init__(self) -> None:
        self.owner: dict[str, str] = {}
        self.drained: set[str] = set()

    def apply(self, action: Action) -> None:
        match action:
            case Assign(task, container):
                assert task not in self.owner, action
                self.owner[task] = container
            case Unassign(task, container):
                assert self.owner.get(task) == container, action
                del self.owner[task]
            case Migrate(task, src, dst, _):
                assert self.owner.get(task) in (src, None), action
                self.owner[task] = dst
            case DrainComplete(container):
                assert container not in self.drained, action
                self.drained.add(container)


def check_invariants(core: SchedulerCore, event: Event, actions: list[Action], mirror: Mirror) -> None:
    state = core.state
    if isinstance(event, ContainerLeft):
        mirror.drained.discard(event.container)  # a later container of that name is new
    for action in actions:
        mirror.apply(action)
        if isinstance(action, ReportLoss):
            assert state.tasks.get(action.task) is None or state.tasks[action.task].spec.stateful
        if isinstance(action, DrainComplete):
            done = state.containers[action.container]
            assert done.draining and not done.tasks and not done.outgoing
    # The actions describe exactly the core's view.
    assert mirror.owner == {t: c for t, c in core.assignment().items() if c is not None}
    per_container: Counter[str] = Counter()
    for task_id, task in state.tasks.items():
        if task.container is not None:
            assert task.container in state.containers, "owner must be alive"
            assert task_id in state.containers[task.container].tasks
            per_container[task.container] += 1
    for container_id, container in state.containers.items():
        assert per_container[container_id] == len(container.tasks)
        assert container.weight == pytest.approx(sum(state.tasks[t].spec.weight for t in container.tasks))
        assert len(container.tasks) <= container.capacity, "capacity exceeded"
    if isinstance(event, Tick):
        free = [c for c in state.eligible() if state.containers[c].free > 0]
        if free:
            assert not core.pending(), "pending although a slot is free"
            for container in state.containers.values():
                if container.draining:
                    settled = [t for t in container.tasks if state.tasks[t].migrating_from is None]
                    assert not settled, "draining container kept a movable task"


event_strategy = st.one_of(
    st.builds(ContainerJoined, st.sampled_from(["c0", "c1", "c2", "c3"]), st.integers(0, 4)),
    st.builds(ContainerLeft, st.sampled_from(["c0", "c1", "c2", "c3"])),
    st.builds(ContainerDraining, st.sampled_from(["c0", "c1", "c2", "c3"])),
    st.builds(
        TaskAdded,
        st.builds(
            TaskSpec,
            st.sampled_from([f"t{i}" for i in range(8)]),
            weight=st.sampled_from([0.5, 1.0, 2.0]),
            colocate_with=st.sampled_from([None, "g0", "g1"]),
            stateful=st.booleans(),
        ),
    ),
    st.builds(TaskRemoved, st.sampled_from([f"t{i}" for i in range(8)])),
    st.builds(
        LoadReport,
        st.sampled_from(["c0", "c1", "c2", "c3"]),
        st.floats(0, 8),
        st.dictionaries(st.sampled_from([f"t{i}" for i in range(8)]), st.floats(0, 4), max_size=3),
    ),
    st.builds(MigrationCompleted, st.sampled_from([f"t{i}" for i in range(8)])),
    st.just(Tick()),
)


@settings(max_examples=300, deadline=None)
@given(
    events=st.lists(event_strategy, max_size=60),
    tolerance=st.sampled_from([0.0, 0.25, 1.0]),
    max_moves=st.integers(0, 4),
)
def test_invariants_hold_after_any_event_sequence(
    events: list[Event], tolerance: float, max_moves: int
) -> None:
    core = SchedulerCore(Policy(tolerance=tolerance, max_moves=max_moves))
    mirror = Mirror()
    for event in [*events, Tick()]:
        actions = core.handle(event)
        check_invariants(core, event, actions, mirror)
        rebalances = [a for a in actions if isinstance(a, Rebalanced)]
        if rebalances:
            assert sum(r.moves for r in rebalances) <= max_moves
    replay = SchedulerCore(Policy(tolerance=tolerance, max_moves=max_moves))
    for event in events:
        replay.handle(event)
    replay.handle(Tick())
    assert replay.assignment() == core.assignment()
