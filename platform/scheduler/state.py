"""The global scheduler's state: containers, tasks, who owns what, and the policy knobs.

Plain data with bookkeeping helpers; all decisions live in
:mod:`linkstream.scheduler.core`.  Iteration orders are fixed (sorted ids, or
insertion order of events) so that equal event sequences give equal decisions.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class TaskSpec:
    """A schedulable unit: one operator-signature instance.

    Attributes:
        id: Task id (the operator signature's id); a valid ZooKeeper node name.
        weight: Estimated load in arbitrary units; refined by load reports.
        colocate_with: Group key; tasks with the same key (e.g. the inputs of one join)
            are placed on the same container when capacity allows.
        stateful: Whether the task holds state (window contents, join or aggregate
            state) that must be migrated rather than restarted.
        streams: Keys (names or short hashes) of the streams the task reads, sorted and
            unique; its container must receive every element of them.  Empty: unknown,
            and stream affinity has nothing to go on for this task.
    """

    id: str
    weight: float = 1.0
    colocate_with: str | None = None
    stateful: bool = False
    streams: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Canonical form, so that equal stream sets compare (and serialise) equal.
        canonical = tuple(sorted(set(self.streams)))
        if canonical != self.streams:
            object.__setattr__(self, "streams", canonical)

    def to_json(self) -> dict[str, object]:
        """Returns the spec as a JSON-ready dict."""
        return {
            "id": self.id,
            "weight": self.weight,
            "colocate_with": self.colocate_with,
            "stateful": self.stateful,
            "streams": list(self.streams),
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> TaskSpec:
        """Builds a spec from :meth:`to_json` output (unknown keys are ignored)."""
        colocate = data.get("colocate_with")
        streams = data.get("streams") or ()
        if not isinstance(streams, (list, tuple)):
            raise ValueError(f"task streams must be a list, got {streams!r}")
        return cls(
            id=str(data["id"]),
            weight=float(data.get("weight", 1.0)),  # type: ignore[arg-type]  # JSON number, checked by float()
            colocate_with=None if colocate is None else str(colocate),
            stateful=bool(data.get("stateful", False)),
            streams=tuple(str(s) for s in streams),
        )


@dataclass(frozen=True)
class Policy:
    """Knobs of the placement and rebalance policy.

    Attributes:
        tolerance: Largest accepted difference between the most and the least utilised
            eligible container (utilisation = load / capacity) before rebalancing.
        max_moves: Most tasks moved by one rebalance round (one event); draining and
            loss recovery are not bounded by it.
        rebalance_on_tick: Whether :class:`~linkstream.scheduler.events.Tick` rebalances
            (container joins always do).
        affinity: Stream affinity: place a task where its streams already arrive (fewest
            new ``(container, stream)`` subscriptions) among the containers that keep the
            load within ``affinity_tolerance``, and let rebalances move stream-coherent
            groups.  Off: placement by load and colocation only.
        affinity_tolerance: Largest utilisation gap affinity may open between the chosen
            container and the least utilised other one with a free slot (``None``: the
            rebalance ``tolerance``).  Never above ``tolerance``, or a rebalance would undo
            what placement chose.
        affinity_tasks: Also bounds that gap by this many times the task's own weight
            over the chosen container's capacity: with equal capacities, affinity never
            puts a task where it makes the container hold more than this many tasks
            (weights) above the least loaded other one.  A utilisation tolerance alone
            would allow a third of a large container's slots of imbalance, enough to
            leave a container idle.
        affinity_share: Once this fraction of the mean load of the eligible containers
            (with the task) allows more than ``affinity_tasks``, it is the bound instead:
            with many tasks, those over exactly the same streams can gather on one
            container (they share its windows and joins: CityBench's templates read two
            of three streams, and the two-task bound spread every stream pair over every
            container).  Few (heavy) tasks per container keep the two-task bound.
        consolidate: With affinity, ``Tick`` also moves settled tasks (whole stream
            groups) to containers that already receive their streams when that removes
            subscriptions within the tolerance -- repairing splits that greedy placement
            made while the load was tight.  Off by default: it migrates running tasks.
    """

    tolerance: float = 0.25
    max_moves: int = 4
    rebalance_on_tick: bool = True
    affinity: bool = True
    affinity_tolerance: float | None = None
    affinity_tasks: float = 2.0
    affinity_share: float = 0.25
    consolidate: bool = False

    @property
    def affinity_slack(self) -> float:
        """The utilisation gap affinity may open (see ``affinity_tolerance``)."""
        if self.affinity_tolerance is None:
            return self.tolerance
        return max(0.0, min(self.affinity_tolerance, self.tolerance))


@dataclass
class ContainerState:
    """One live container as the scheduler sees it.

    Attributes:
        id: Container id.
        capacity: Task slots.
        address: Data-plane address.
        draining: A graceful remove is in progress.
        reported_load: Last measured load, or ``None`` once tasks changed since.
        tasks: Ids of the tasks it owns (including hand-overs still in flight to it).
        weight: Sum of those tasks' weights (kept up to date by ``SchedulerState``).
        outgoing: Ids of stateful tasks whose hand-over from it is not acknowledged yet.
        drain_acknowledged: ``DrainComplete`` was already emitted.
        streams: Stream key -> how many of its tasks read that stream: the streams it
            subscribes to (kept up to date by ``SchedulerState``).
        stream_sets: Stream keys of a task (its whole ``TaskSpec.streams``) -> how many of
            its tasks read exactly those: tasks over the same streams share windows and
            joins on a container (kept up to date by ``SchedulerState``).
    """

    id: str
    capacity: int
    address: str = ""
    draining: bool = False
    reported_load: float | None = None
    tasks: set[str] = field(default_factory=set)
    weight: float = 0.0
    outgoing: set[str] = field(default_factory=set)
    drain_acknowledged: bool = False
    streams: dict[str, int] = field(default_factory=dict)
    stream_sets: dict[tuple[str, ...], int] = field(default_factory=dict)

    def subscribe(self, streams: tuple[str, ...], sign: int) -> None:
        """Counts (``sign`` +1) or uncounts (-1) one task reading ``streams``."""
        for s in streams:
            n = self.streams.get(s, 0) + sign
            if n > 0:
                self.streams[s] = n
            else:
                self.streams.pop(s, None)
        if streams:
            n = self.stream_sets.get(streams, 0) + sign
            if n > 0:
                self.stream_sets[streams] = n
            else:
                self.stream_sets.pop(streams, None)

    @property
    def free(self) -> int:
        """Free task slots (never negative)."""
        return max(0, self.capacity - len(self.tasks))


@dataclass
class TaskState:
    """One task as the scheduler sees it.

    Attributes:
        spec: The task's spec (its weight may be updated by load reports).
        container: Owner, or ``None`` while pending.
        migrating_from: Source of a stateful hand-over not yet acknowledged.
    """

    spec: TaskSpec
    container: str | None = None
    migrating_from: str | None = None


@dataclass
class SchedulerState:
    """Containers and tasks, with consistent ownership bookkeeping.

    ``containers`` holds only live containers.  ``tasks`` keeps submission order, which
    is also the order in which pending tasks are placed.
    """

    containers: dict[str, ContainerState] = field(default_factory=dict)
    tasks: dict[str, TaskState] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)

    # ------------------------------------------------------------------ membership of tasks

    def add_task(self, spec: TaskSpec) -> TaskState:
        """Registers a new pending task."""
        task = TaskState(spec)
        self.tasks[spec.id] = task
        if spec.colocate_with is not None:
            self.groups.setdefault(spec.colocate_with, []).append(spec.id)
        return task

    def update_spec(self, spec: TaskSpec) -> None:
        """Replaces a known task's spec (weight, group, statefulness), keeping its owner."""
        task = self.tasks[spec.id]
        if task.container is not None and task.container in self.containers:
            owner = self.containers[task.container]
            owner.weight += spec.weight - task.spec.weight
            if spec.streams != task.spec.streams:
                owner.subscribe(task.spec.streams, -1)
                owner.subscribe(spec.streams, +1)
        old_group, new_group = task.spec.colocate_with, spec.colocate_with
        if old_group != new_group:
            if old_group is not None:
                self._leave_group(old_group, spec.id)
            if new_group is not None:
                self.groups.setdefault(new_group, []).append(spec.id)
        task.spec = spec

    def _leave_group(self, group: str, task_id: str) -> None:
        members = self.groups[group]
        members.remove(task_id)
        if not members:
            del self.groups[group]

    def remove_task(self, task_id: str) -> None:
        """Forgets a task, releasing its slot and any hand-over bookkeeping."""
        task = self.tasks[task_id]
        self.set_owner(task_id, None)
        self.set_migrating(task_id, None)
        if task.spec.colocate_with is not None:
            self._leave_group(task.spec.colocate_with, task_id)
        del self.tasks[task_id]

    # ------------------------------------------------------------------ ownership

    def set_owner(self, task_id: str, container_id: str | None) -> None:
        """Moves ``task_id`` to ``container_id`` (``None``: pending), keeping sets in sync."""
        task = self.tasks[task_id]
        if task.container is not None and task.container in self.containers:
            old = self.containers[task.container]
            old.tasks.discard(task_id)
            # Recomputed when emptied so that float drift never accumulates.
            old.weight = old.weight - task.spec.weight if old.tasks else 0.0
            old.subscribe(task.spec.streams, -1)
            old.reported_load = None
        task.container = container_id
        if container_id is not None:
            new = self.containers[container_id]
            new.tasks.add(task_id)
            new.weight += task.spec.weight
            new.subscribe(task.spec.streams, +1)
            new.reported_load = None

    def set_migrating(self, task_id: str, source: str | None) -> None:
        """Records (or clears, with ``None``) an unacknowledged hand-over's source."""
        task = self.tasks[task_id]
        if task.migrating_from is not None and task.migrating_from in self.containers:
            self.containers[task.migrating_from].outgoing.discard(task_id)
        task.migrating_from = source
        if source is not None and source in self.containers:
            self.containers[source].outgoing.add(task_id)

    # ------------------------------------------------------------------ queries

    def load(self, container_id: str) -> float:
        """Measured load if current, else the sum of its tasks' weights."""
        container = self.containers[container_id]
        if container.reported_load is not None:
            return container.reported_load
        return container.weight

    def utilisation(self, container_id: str, extra: float = 0.0) -> float:
        """``(load + extra) / capacity``; infinite for a container without slots."""
        container = self.containers[container_id]
        if container.capacity <= 0:
            return float("inf")
        return (self.load(container_id) + extra) / container.capacity

    def eligible(self) -> list[str]:
        """Ids of containers that may receive tasks (live, not draining), sorted."""
        return sorted(c.id for c in self.containers.values() if not c.draining and c.capacity > 0)

    def pending(self) -> list[str]:
        """Ids of tasks without an owner, in submission order."""
        return [t.spec.id for t in self.tasks.values() if t.container is None]

    def group_members(self, group: str) -> list[str]:
        """Ids of tasks in colocation group ``group``, in submission order."""
        return list(self.groups.get(group, ()))

    def spread(self) -> float:
        """Max minus min utilisation over eligible containers (0 with fewer than two)."""
        utils = [self.utilisation(c) for c in self.eligible()]
        if len(utils) < 2:
            return 0.0
        return max(utils) - min(utils)

    def purity(self, container_id: str, streams: tuple[str, ...]) -> float:
        """The share of ``container_id``'s tasks that read exactly ``streams`` (1 when it
        holds none: a task there shares nothing, but mixes nothing either)."""
        c = self.containers[container_id]
        return c.stream_sets.get(streams, 0) / len(c.tasks) if c.tasks else 1.0

    def new_subscriptions(self, container_id: str, streams: tuple[str, ...]) -> int:
        """How many of ``streams`` ``container_id`` does not receive yet."""
        held = self.containers[container_id].streams
        return sum(1 for s in streams if s not in held)

    def subscriptions(self) -> int:
        """Total ``(container, stream)`` subscriptions: what routing by stream sends."""
        return sum(len(c.streams) for c in self.containers.values())

    def assignment(self) -> dict[str, str | None]:
        """Task id to owner (``None`` when pending), in submission order."""
        return {task_id: task.container for task_id, task in self.tasks.items()}
