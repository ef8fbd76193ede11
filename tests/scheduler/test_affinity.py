"""Sans-IO tests of stream-affinity placement (``Policy.affinity``): no ZooKeeper, no threads."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.scheduler.core import SchedulerCore
from linkstream.scheduler.events import (
    Action,
    ContainerDraining,
    ContainerJoined,
    ContainerLeft,
    DrainComplete,
    Event,
    LoadReport,
    Migrate,
    MigrationCompleted,
    Rebalanced,
    TaskAdded,
    TaskRemoved,
    Tick,
)
from linkstream.scheduler.state import Policy, SchedulerState, TaskSpec

OFF = Policy(affinity=False)


def run(core: SchedulerCore, *events: Event) -> list[Action]:
    actions: list[Action] = []
    for event in events:
        actions.extend(core.handle(event))
    return actions


def task(name: str, *streams: str, **kw: object) -> TaskAdded:
    return TaskAdded(TaskSpec(name, streams=streams, stateful=True, **kw))  # type: ignore[arg-type]


def holders(state: SchedulerState) -> dict[str, set[str]]:
    """Stream -> containers receiving it."""
    out: dict[str, set[str]] = {}
    for cid, container in state.containers.items():
        for s in container.streams:
            out.setdefault(s, set()).add(cid)
    return out


def recount(state: SchedulerState) -> dict[str, Counter[str]]:
    """The subscription counts recomputed from scratch (what the bookkeeping must equal)."""
    out: dict[str, Counter[str]] = {cid: Counter() for cid in state.containers}
    for t in state.tasks.values():
        if t.container is not None:
            out[t.container].update(t.spec.streams)
    return out


# ---------------------------------------------------------------------- specs


def test_task_spec_streams_are_canonical_and_round_trip_through_json() -> None:
    spec = TaskSpec("q-1", streams=("s2", "s1", "s2"), colocate_with="p", stateful=True)
    assert spec.streams == ("s1", "s2")
    assert spec == TaskSpec("q-1", streams=("s1", "s2"), colocate_with="p", stateful=True)
    body = spec.to_json()
    assert body["streams"] == ["s1", "s2"]
    assert TaskSpec.from_json(body) == spec
    # Specs written before streams existed still parse, with no streams.
    assert TaskSpec.from_json({"id": "q-2", "weight": 2.0}).streams == ()
    with pytest.raises(ValueError):
        TaskSpec.from_json({"id": "q-3", "streams": "s1"})


# ---------------------------------------------------------------------- placement


def test_affinity_chooses_the_container_already_receiving_the_streams() -> None:
    events = [
        *(ContainerJoined(c, 10) for c in "abc"),
        task("t1", "s1"),
        task("t2", "s2"),
        task("t3", "s3"),
        task("t4", "s2"),  # every container holds one task: load alone says "a"
        task("t5", "s3", "s1"),  # a and c each lack one of them: load, then id decide
    ]
    on, off = SchedulerCore(), SchedulerCore(OFF)
    run(on, *events)
    run(off, *events)
    assert on.assignment() == {"t1": "a", "t2": "b", "t3": "c", "t4": "b", "t5": "a"}
    assert off.assignment()["t4"] == "a"
    assert on.state.containers["a"].streams == {"s1": 2, "s3": 1}
    assert on.state.containers["b"].streams == {"s2": 2}
    assert on.state.subscriptions() == 4 < off.state.subscriptions() == 6
    assert on.state.spread() <= on.policy.tolerance


def test_ties_on_subscriptions_fall_back_to_load() -> None:
    core = SchedulerCore()
    run(core, *(ContainerJoined(c, 4) for c in "ab"), task("t1", "s1"), task("t2", "s2"))
    # Neither container receives s3: the less loaded (then the smaller id) wins.
    run(core, task("t3", "s3"))
    assert core.assignment()["t3"] == "a"
    run(core, TaskAdded(TaskSpec("t4")))  # no streams: plain load placement
    assert core.assignment()["t4"] == "b"


def test_load_tolerance_bounds_the_imbalance_affinity_may_cause() -> None:
    core = SchedulerCore(Policy(tolerance=0.25))
    run(core, *(ContainerJoined(c, 10) for c in "abc"))
    for i in range(15):
        run(core, task(f"t{i:02}", "hot"))
        # Never past the rebalance tolerance, so no later rebalance undoes the placement.
        assert core.state.spread() <= 0.25 + 1e-9
    per = Counter(core.assignment().values())
    assert sum(per.values()) == 15 and set(per) == {"a", "b", "c"}
    assert max(per.values()) - min(per.values()) <= 2
    assert not [a for a in run(core, Tick()) if isinstance(a, Migrate)]
    # With no slack at all the placement is the plain least-loaded one.
    strict = SchedulerCore(Policy(tolerance=0.25, affinity_tolerance=0.0))
    plain = SchedulerCore(OFF)
    events = [*(ContainerJoined(c, 10) for c in "abc"), *(task(f"t{i:02}", f"s{i % 2}") for i in range(9))]
    run(strict, *events)
    run(plain, *events)
    assert Counter(strict.assignment().values()) == Counter(plain.assignment().values())
    assert strict.state.subscriptions() <= plain.state.subscriptions()


def test_affinity_keeps_within_two_tasks_of_the_least_loaded_container_by_default() -> None:
    # Capacity 32 and tolerance 0.25 would allow eight tasks of imbalance: the default
    # bound of two tasks keeps every container busy (CityBench's heavy queries).
    core = SchedulerCore(Policy(tolerance=0.25))
    run(core, *(ContainerJoined(c, 32) for c in "abc"))
    run(core, *(task(f"t{i}", "p1", "p2") for i in range(6)))
    assert Counter(core.assignment().values()) == Counter({"a": 2, "b": 2, "c": 2})
    loose = SchedulerCore(Policy(tolerance=0.25, affinity_tasks=8.0))
    run(loose, *(ContainerJoined(c, 32) for c in "abc"))
    run(loose, *(task(f"t{i}", "p1", "p2") for i in range(6)))
    assert set(loose.assignment().values()) == {"a"}
    assert loose.state.subscriptions() == 2 < core.state.subscriptions() == 6


def test_many_tasks_over_few_stream_pairs_gather_by_pair_within_a_quarter_of_the_mean() -> None:
    # CityBench's templates: every task reads two of three streams.  Once every container
    # receives all three, fewest subscriptions cannot tell them apart; tasks over the same
    # pair share windows and joins, so they gather (each container mostly one pair).
    pairs = [("s1", "s2"), ("s1", "s3"), ("s2", "s3")]
    rnd = random.Random(3)
    events = [task(f"t{i:03}", *rnd.choice(pairs)) for i in range(120)]
    core = SchedulerCore()
    run(core, *(ContainerJoined(c, 200) for c in "abc"), *events)
    per = Counter(core.assignment().values())
    mean = 120 / 3
    assert max(per.values()) - min(per.values()) <= 0.25 * mean + 1
    spec = {e.task.id: e.task.streams for e in events}
    for c in "abc":
        mix = Counter(spec[t] for t in core.state.containers[c].tasks)
        assert mix.most_common(1)[0][1] >= 0.8 * per[c], (c, mix)
    # within the two-task bound alone (no share of the mean) the pairs stay mixed
    old = SchedulerCore(Policy(affinity_share=0.0))
    run(old, *(ContainerJoined(c, 200) for c in "abc"), *events)
    purest = [
        Counter(spec[t] for t in old.state.containers[c].tasks).most_common(1)[0][1]
        / len(old.state.containers[c].tasks)
        for c in "abc"
    ]
    assert min(purest) < 0.8


def test_affinity_never_oversubscribes_a_full_container() -> None:
    core = SchedulerCore(Policy(tolerance=1.0))
    run(core, ContainerJoined("a", 2), ContainerJoined("b", 8))
    run(core, *(task(f"t{i}", "s1") for i in range(5)))
    assert len(core.state.containers["a"].tasks) <= 2
    assert not core.pending()


def test_colocation_still_wins_over_affinity() -> None:
    core = SchedulerCore()
    run(
        core,
        *(ContainerJoined(c, 10) for c in "ab"),
        task("x", "s1"),  # -> a
        task("g1", "s2", colocate_with="g"),  # -> b
    )
    assert core.assignment() == {"x": "a", "g1": "b"}
    # g2 reads only s1, which a receives, but its colocation group lives on b.
    run(core, task("g2", "s1", colocate_with="g"))
    assert core.assignment()["g2"] == "b"


# ---------------------------------------------------------------------- rebalance


def loaded_container(policy: Policy) -> SchedulerCore:
    """Container a full with two pairs of tasks, one pair per stream; then b joins."""
    core = SchedulerCore(policy)
    run(core, ContainerJoined("a", 4))
    # Ids interleave the streams, so the plain rebalance (ties by id) splits both pairs.
    run(core, task("a-s1", "s1"), task("b-s2", "s2"), task("c-s1", "s1"), task("d-s2", "s2"))
    return core


def test_rebalance_on_join_moves_a_stream_coherent_group() -> None:
    core = loaded_container(Policy(tolerance=0.25))
    actions = run(core, ContainerJoined("b", 4))
    moved = {m.task for m in actions if isinstance(m, Migrate)}
    assert moved == {"a-s1", "c-s1"}
    assert all(m.dst == "b" and m.stateful for m in actions if isinstance(m, Migrate))
    assert [a.moves for a in actions if isinstance(a, Rebalanced)] == [2]
    assert holders(core.state) == {"s1": {"b"}, "s2": {"a"}}
    assert core.state.subscriptions() == 2

    plain = loaded_container(OFF)
    run(plain, ContainerJoined("b", 4))
    assert Counter(plain.assignment().values()) == Counter(core.assignment().values())
    assert plain.state.subscriptions() == 4


def test_rebalance_respects_max_moves_for_groups() -> None:
    core = loaded_container(Policy(tolerance=0.25, max_moves=1))
    actions = run(core, ContainerJoined("b", 4))
    # A pair does not fit in one move: a single task moves, balance still narrows.
    assert len([a for a in actions if isinstance(a, Migrate)]) == 1


def test_rebalance_still_bounds_the_gap_when_streams_are_shared_by_all() -> None:
    core = SchedulerCore(Policy(tolerance=0.25, max_moves=10))
    run(core, ContainerJoined("a", 6))
    run(core, *(task(f"t{i}", "hot", f"own{i}") for i in range(6)))
    run(core, ContainerJoined("b", 6))
    per = Counter(core.assignment().values())
    assert per == Counter({"a": 3, "b": 3})
    assert core.state.spread() <= 0.25


def test_tick_consolidates_readers_split_by_a_tight_tolerance() -> None:
    events = [
        *(ContainerJoined(c, 4) for c in "abc"),
        task("x1", "s1"),
        task("y1", "s2"),
        task("z1", "s3"),
        task("x2", "s1"),
        task("y2", "s2"),
        task("x3", "s1"),  # a would be 0.5 ahead of c: too far, so c takes it (and s1)
        task("z2", "s3"),
    ]
    core = SchedulerCore(Policy(tolerance=0.25, consolidate=True))
    run(core, *events)
    assert core.assignment()["x3"] == "c" and core.state.subscriptions() == 4
    # Once z2 evened the load, x3 can join the other readers of s1 within the tolerance.
    actions = run(core, Tick())
    assert moves_of(actions) == [("x3", "c", "a")]
    assert [a.moves for a in actions if isinstance(a, Rebalanced)] == [1]
    assert holders(core.state) == {"s1": {"a"}, "s2": {"b"}, "s3": {"c"}}
    assert core.state.spread() <= 0.25 + 1e-9
    run(core, MigrationCompleted("x3"))
    assert run(core, Tick()) == []  # settled: nothing left to gain
    # By default, without affinity, or without tick rebalancing, nothing moves.
    for policy in (
        Policy(tolerance=0.25),
        Policy(tolerance=0.25, consolidate=True, affinity=False),
        Policy(tolerance=0.25, consolidate=True, rebalance_on_tick=False),
    ):
        other = SchedulerCore(policy)
        run(other, *events)
        assert not moves_of(run(other, Tick()))


def moves_of(actions: list[Action]) -> list[tuple[str, str, str]]:
    return [(m.task, m.src, m.dst) for m in actions if isinstance(m, Migrate)]


# ---------------------------------------------------------------------- failover and drain


def three_containers() -> SchedulerCore:
    # Only the utilisation tolerance bounds affinity here (not the default two tasks).
    core = SchedulerCore(Policy(tolerance=0.5, affinity_tasks=10.0))
    run(core, *(ContainerJoined(c, 10) for c in "abc"))
    run(core, task("t1", "s1"), task("t2", "s2"), task("t3", "s3"), task("t4", "s1"), task("t5", "s2"))
    assert core.assignment() == {"t1": "a", "t2": "b", "t3": "c", "t4": "a", "t5": "b"}
    run(core, task("t6", "s1", "s2"))  # a (s1) and b (s2) tie on subscriptions; a by id
    return core


def test_failover_reassigns_with_affinity() -> None:
    core = three_containers()
    run(core, task("t7", "s3", "s1"))  # c: already receives s3, least loaded
    assert core.assignment()["t7"] == "c"
    actions = run(core, ContainerLeft("a"))
    # a's tasks read s1 (and s2): they follow s1 to c (which t7 made receive it); t6,
    # which lacks one stream on b and on c, goes to the less loaded of the two.
    placed = {a.task: a.container for a in actions if type(a).__name__ == "Assign"}
    assert placed == {"t1": "c", "t4": "c", "t6": "b"}
    assert holders(core.state) == {"s1": {"b", "c"}, "s2": {"b"}, "s3": {"c"}}
    assert core.state.subscriptions() == 4


def test_drain_moves_tasks_to_the_containers_receiving_their_streams() -> None:
    core = three_containers()
    actions = run(core, ContainerDraining("b"))
    moved = {m.task: m.dst for m in actions if isinstance(m, Migrate)}
    # a receives s2 for t6 and has room within the tolerance; c is less loaded.
    assert moved == {"t2": "a", "t5": "a"}

    done = run(core, *(MigrationCompleted(t) for t in sorted(moved)))
    assert done == [DrainComplete("b")]
    assert holders(core.state) == {"s1": {"a"}, "s2": {"a"}, "s3": {"c"}}


# ---------------------------------------------------------------------- properties


def test_affinity_off_decides_as_if_tasks_named_no_streams() -> None:
    for seed in range(20):
        rng = random.Random(seed)
        events: list[Event] = []
        for _ in range(150):
            kind = rng.randrange(6)
            if kind == 0:
                events.append(ContainerJoined(rng.choice("abcd"), rng.randrange(0, 5)))
            elif kind == 1:
                events.append(rng.choice((ContainerLeft, ContainerDraining))(rng.choice("abcd")))
            elif kind in (2, 3):
                streams = tuple(rng.sample(["s0", "s1", "s2", "s3"], rng.randrange(0, 3)))
                events.append(task(f"t{rng.randrange(10)}", *streams, colocate_with=rng.choice((None, "g"))))
            elif kind == 4:
                events.append(rng.choice((TaskRemoved, MigrationCompleted))(f"t{rng.randrange(10)}"))
            else:
                events.append(Tick())
        bare = [
            TaskAdded(TaskSpec(e.task.id, e.task.weight, e.task.colocate_with, e.task.stateful))
            if isinstance(e, TaskAdded)
            else e
            for e in events
        ]
        off, stripped = SchedulerCore(OFF), SchedulerCore()
        assert [off.handle(e) for e in events] == [stripped.handle(e) for e in bare]


stream_sets = st.lists(st.sampled_from(["s0", "s1", "s2"]), max_size=2).map(tuple)
events = st.one_of(
    st.builds(ContainerJoined, st.sampled_from(["c0", "c1", "c2"]), st.integers(0, 4)),
    st.builds(ContainerLeft, st.sampled_from(["c0", "c1", "c2"])),
    st.builds(ContainerDraining, st.sampled_from(["c0", "c1", "c2"])),
    st.builds(
        TaskAdded,
        st.builds(
            TaskSpec,
            st.sampled_from([f"t{i}" for i in range(8)]),
            weight=st.sampled_from([0.5, 1.0, 2.0]),
            colocate_with=st.sampled_from([None, "g0"]),
            stateful=st.booleans(),
            streams=stream_sets,
        ),
    ),
    st.builds(TaskRemoved, st.sampled_from([f"t{i}" for i in range(8)])),
    st.builds(
        LoadReport,
        st.sampled_from(["c0", "c1", "c2"]),
        st.floats(0, 8),
        st.dictionaries(st.sampled_from([f"t{i}" for i in range(8)]), st.floats(0, 4), max_size=3),
    ),
    st.builds(MigrationCompleted, st.sampled_from([f"t{i}" for i in range(8)])),
    st.just(Tick()),
)


@settings(max_examples=200, deadline=None)
@given(
    seq=st.lists(events, max_size=50),
    tolerance=st.sampled_from([0.0, 0.25, 1.0]),
    consolidate=st.booleans(),
)
def test_subscription_bookkeeping_and_determinism_hold_for_any_events(
    seq: list[Event], tolerance: float, consolidate: bool
) -> None:
    core = SchedulerCore(Policy(tolerance=tolerance, consolidate=consolidate))
    twin = SchedulerCore(Policy(tolerance=tolerance, consolidate=consolidate))
    for event in [*seq, Tick()]:
        actions = core.handle(event)
        assert actions == twin.handle(event)
        assert sum(a.moves for a in actions if isinstance(a, Rebalanced)) <= core.policy.max_moves
        state = core.state
        assert {c: dict(n) for c, n in recount(state).items()} == {
            c: x.streams for c, x in state.containers.items()
        }
        for container in state.containers.values():
            assert len(container.tasks) <= container.capacity
        if isinstance(event, Tick) and any(state.containers[c].free for c in state.eligible()):
            assert not core.pending()
