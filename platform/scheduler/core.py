"""Sans-IO global scheduler: ``SchedulerCore.handle(event) -> list[Action]``.

The core decides where operator tasks run; it never touches ZooKeeper, sockets or
clocks (``Tick`` carries the time if a policy ever needs it).  The coordinator feeds it
events observed in ZooKeeper and writes the actions back, the way dask/distributed's
scheduler state machine is separate from its comms.

Policies:

* **Placement.** A task goes to an eligible container (live, not draining) with a free
  slot: the one already hosting most of its colocation group, else the one whose
  utilisation ``(load + weight) / capacity`` stays lowest (ties: more free slots, then
  id).  Without a free slot anywhere the task is pending until capacity arrives.
* **Rebalance.** When a container joins (and on ``Tick``), whole colocation groups or
  single tasks move from the most to the least utilised container while that gap
  exceeds ``Policy.tolerance`` and a move narrows it, at most ``Policy.max_moves``
  tasks per event, stateless tasks first.
* **Graceful drain.** Every task on a draining container migrates off (stateful ones by
  snapshot/restore); ``DrainComplete`` follows once it owns nothing and every stateful
  hand-over from it was acknowledged.
* **Loss.** A vanished container's tasks are reassigned at once; the state of its
  stateful tasks is reported lost.  A stateful hand-over *to* the dead container is
  retried from its source, which still holds the snapshot.

Equal event sequences give equal action sequences: every choice is ordered by ids or
by submission order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import replace

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
from linkstream.scheduler.state import ContainerState, Policy, SchedulerState, TaskSpec

logger = logging.getLogger(__name__)

_EPS = 1e-9


class SchedulerCore:
    """Deterministic placement, rebalance, drain and failover decisions.

    Guarantees, after every :meth:`handle`: each task has at most one owner and that
    owner is a live container; no container owns more tasks than it has slots; a task
    is pending only if no eligible container had a free slot when it was last tried.

    Args:
        policy: Placement and rebalance knobs.
    """

    def __init__(self, policy: Policy | None = None) -> None:
        self.policy = policy or Policy()
        self.state = SchedulerState()

    # ------------------------------------------------------------------ public API

    def handle(self, event: Event) -> list[Action]:
        """Applies one event and returns the actions it calls for, in order.

        Args:
            event: Something the I/O layer observed.

        Returns:
            Actions to carry out in order (possibly none).

        Raises:
            TypeError: If ``event`` is not a scheduler event.
        """
        out: list[Action] = []
        match event:
            case ContainerJoined():
                self._on_joined(event, out)
            case ContainerLeft():
                self._on_left(event.container, out)
            case ContainerDraining():
                self._on_draining(event.container, out)
            case TaskAdded():
                self._on_task_added(event, out)
            case TaskRemoved():
                self._on_task_removed(event.task, out)
            case LoadReport():
                self._on_load(event)
            case MigrationCompleted():
                self._on_migration_completed(event.task, out)
            case Tick():
                self._place_pending(out)
                self._progress_drains(out)
                if self.policy.rebalance_on_tick:
                    self._rebalance("Tick", out)
                self._check_drains(out)
            case _:
                raise TypeError(f"not a scheduler event: {event!r}")
        if out:
            logger.debug("%s -> %s", event, out)
        return out

    def assignment(self) -> dict[str, str | None]:
        """Task id to owner (``None`` while pending), in submission order."""
        return self.state.assignment()

    def pending(self) -> list[str]:
        """Ids of tasks without an owner, in submission order."""
        return self.state.pending()

    # ------------------------------------------------------------------ containers

    def _on_joined(self, event: ContainerJoined, out: list[Action]) -> None:
        state = self.state
        known = state.containers.get(event.container)
        if known is None:
            state.containers[event.container] = ContainerState(
                id=event.container, capacity=max(0, event.capacity), address=event.address
            )
        else:
            known.address = event.address
            known.capacity = max(0, event.capacity)
            # A shrunk container gives up its most recently named tasks.
            for task_id in sorted(known.tasks, reverse=True)[: len(known.tasks) - known.capacity]:
                self._evict(task_id, out)
        self._place_pending(out)
        self._progress_drains(out)
        self._rebalance("ContainerJoined", out)
        self._check_drains(out)

    def _on_left(self, container_id: str, out: list[Action]) -> None:
        state = self.state
        container = state.containers.get(container_id)
        if container is None:
            return
        orphans = sorted(container.tasks)
        for task_id in orphans:
            task = state.tasks[task_id]
            source = task.migrating_from
            if source is not None and source != container_id and source in state.containers:
                # A hand-over to the dead container: its source still has the snapshot.
                out.append(Unassign(task_id, container_id))
                state.set_owner(task_id, None)
                continue
            if task.spec.stateful:
                out.append(ReportLoss(task_id, container_id))
            out.append(Unassign(task_id, container_id))
            state.set_owner(task_id, None)
            state.set_migrating(task_id, None)
        for task_id in sorted(container.outgoing):
            # Hand-overs from the dead container that were not acknowledged.
            if state.tasks[task_id].spec.stateful:
                out.append(ReportLoss(task_id, container_id))
            state.set_migrating(task_id, None)
        del state.containers[container_id]
        for task_id in orphans:
            self._place(task_id, out, announce=True)
        self._place_pending(out)
        self._progress_drains(out)
        self._check_drains(out)

    def _on_draining(self, container_id: str, out: list[Action]) -> None:
        container = self.state.containers.get(container_id)
        if container is None or container.draining:
            return
        container.draining = True
        self._progress_drains(out)
        self._check_drains(out)

    def _on_load(self, event: LoadReport) -> None:
        state = self.state
        container = state.containers.get(event.container)
        if container is None:
            return
        for task_id in sorted(event.task_loads):
            if task_id in container.tasks:
                weight = max(0.0, float(event.task_loads[task_id]))
                state.update_spec(replace(state.tasks[task_id].spec, weight=weight))
        container.reported_load = max(0.0, float(event.load))

    # ------------------------------------------------------------------ tasks

    def _on_task_added(self, event: TaskAdded, out: list[Action]) -> None:
        state = self.state
        spec = event.task
        existing = state.tasks.get(spec.id)
        if existing is not None:
            state.update_spec(spec)
            return
        state.add_task(spec)
        hint = event.container
        source = event.migrating_from if event.migrating_from in state.containers else None
        container = state.containers.get(hint) if hint is not None else None
        if container is not None:
            # Restoring what the world already has: no action unless it overflows.
            state.set_owner(spec.id, hint)
            if source is not None and source != hint:
                state.set_migrating(spec.id, source)
            if len(container.tasks) > container.capacity:
                self._evict(spec.id, out)
            return
        if hint is not None:
            # Owned by a container that is gone: lost, unless a hand-over's source
            # still holds the snapshot.
            if spec.stateful and source is None:
                out.append(ReportLoss(spec.id, hint))
            out.append(Unassign(spec.id, hint))
        if source is not None:
            state.set_migrating(spec.id, source)
        self._place(spec.id, out, announce=True)

    def _on_task_removed(self, task_id: str, out: list[Action]) -> None:
        state = self.state
        task = state.tasks.get(task_id)
        if task is None:
            return
        if task.container is not None:
            out.append(Unassign(task_id, task.container))
        state.remove_task(task_id)
        self._place_pending(out)
        self._progress_drains(out)
        self._check_drains(out)

    def _on_migration_completed(self, task_id: str, out: list[Action]) -> None:
        task = self.state.tasks.get(task_id)
        if task is None or task.migrating_from is None:
            return
        self.state.set_migrating(task_id, None)
        self._progress_drains(out)
        self._check_drains(out)

    # ------------------------------------------------------------------ placement

    def _choose(self, spec: TaskSpec, exclude: Iterable[str] = ()) -> str | None:
        """Best eligible container with a free slot for ``spec``, or ``None``."""
        state = self.state
        skip = set(exclude)
        candidates = [c for c in state.eligible() if c not in skip and state.containers[c].free > 0]
        if not candidates:
            return None
        if spec.colocate_with is not None:
            allowed = set(candidates)
            counts: dict[str, int] = {}
            for member in state.group_members(spec.colocate_with):
                owner = state.tasks[member].container
                if member != spec.id and owner in allowed:
                    counts[owner] = counts.get(owner, 0) + 1
            if counts:
                return min(counts, key=lambda c: (-counts[c], state.utilisation(c), c))
        return min(
            candidates,
            key=lambda c: (state.utilisation(c, spec.weight), -state.containers[c].free, c),
        )

    def _place(self, task_id: str, out: list[Action], announce: bool) -> bool:
        """Gives a pending task an owner if one has room; returns whether it did."""
        state = self.state
        task = state.tasks[task_id]
        dst = self._choose(task.spec)
        if dst is None:
            if announce:
                out.append(TaskPending(task_id))
            return False
        source = task.migrating_from
        if source is not None and source in state.containers and source != dst:
            out.append(Migrate(task_id, source, dst, stateful=True))
        else:
            # Either a fresh start, or the hand-over's source takes its task back.
            out.append(Assign(task_id, dst))
            state.set_migrating(task_id, None)
        state.set_owner(task_id, dst)
        return True

    def _place_pending(self, out: list[Action]) -> None:
        for task_id in self.state.pending():
            self._place(task_id, out, announce=False)

    def _move(self, task_id: str, dst: str, out: list[Action]) -> None:
        """Migrates an owned, settled task to ``dst``."""
        state = self.state
        task = state.tasks[task_id]
        src = task.container
        assert src is not None and task.migrating_from is None
        out.append(Migrate(task_id, src, dst, stateful=task.spec.stateful))
        state.set_owner(task_id, dst)
        if task.spec.stateful:
            state.set_migrating(task_id, src)

    def _evict(self, task_id: str, out: list[Action]) -> None:
        """Takes a task off its (live) owner: elsewhere if possible, else pending."""
        state = self.state
        task = state.tasks[task_id]
        src = task.container
        assert src is not None
        if task.migrating_from is not None:
            # Still arriving from its source, which keeps the snapshot: redirect it.
            out.append(Unassign(task_id, src))
            state.set_owner(task_id, None)
            self._place(task_id, out, announce=True)
            return
        dst = self._choose(task.spec, exclude=(src,))
        if dst is not None:
            self._move(task_id, dst, out)
            return
        if task.spec.stateful:
            out.append(ReportLoss(task_id, src))
        out.append(Unassign(task_id, src))
        state.set_owner(task_id, None)
        self._place(task_id, out, announce=True)

    # ------------------------------------------------------------------ drains

    def _progress_drains(self, out: list[Action]) -> None:
        state = self.state
        for container_id in sorted(state.containers):
            container = state.containers[container_id]
            if not container.draining:
                continue
            for task_id in sorted(container.tasks):
                task = state.tasks[task_id]
                if task.migrating_from is not None:
                    continue  # a hand-over into it is still in flight; move it once settled
                dst = self._choose(task.spec, exclude=(container_id,))
                if dst is not None:
                    self._move(task_id, dst, out)

    def _check_drains(self, out: list[Action]) -> None:
        for container_id in sorted(self.state.containers):
            container = self.state.containers[container_id]
            if (
                container.draining
                and not container.drain_acknowledged
                and not container.tasks
                and not container.outgoing
            ):
                container.drain_acknowledged = True
                out.append(DrainComplete(container_id))

    # ------------------------------------------------------------------ rebalance

    def _movable_units(self, container_id: str) -> list[list[str]]:
        """Settled tasks of a container, grouped so colocation groups move whole."""
        state = self.state
        units: dict[str, list[str]] = {}
        for task_id in sorted(state.containers[container_id].tasks):
            task = state.tasks[task_id]
            if task.migrating_from is not None:
                continue
            key = f"g:{task.spec.colocate_with}" if task.spec.colocate_with is not None else f"t:{task_id}"
            units.setdefault(key, []).append(task_id)
        return [units[key] for key in sorted(units)]

    def _rebalance(self, trigger: str, out: list[Action]) -> None:
        state = self.state
        before = state.spread()
        moves = 0
        while moves < self.policy.max_moves:
            eligible = state.eligible()
            if len(eligible) < 2:
                break
            util = {c: state.utilisation(c) for c in eligible}
            src = min(eligible, key=lambda c: (-util[c], c))
            receivers = [c for c in eligible if c != src and state.containers[c].free > 0]
            if not receivers:
                break
            dst = min(receivers, key=lambda c: (util[c], c))
            gap = util[src] - util[dst]
            if gap <= self.policy.tolerance + _EPS:
                break
            src_state, dst_state = state.containers[src], state.containers[dst]
            src_load, dst_load = state.load(src), state.load(dst)
            best: tuple[tuple[bool, float, int, str], list[str]] | None = None
            for unit in self._movable_units(src):
                if len(unit) > dst_state.free or moves + len(unit) > self.policy.max_moves:
                    continue
                weight = sum(state.tasks[t].spec.weight for t in unit)
                new_gap = abs(
                    (src_load - weight) / src_state.capacity - (dst_load + weight) / dst_state.capacity
                )
                if new_gap >= gap - _EPS:
                    continue
                stateful = any(state.tasks[t].spec.stateful for t in unit)
                key = (stateful, round(new_gap, 9), len(unit), unit[0])
                if best is None or key < best[0]:
                    best = (key, unit)
            if best is None:
                break
            for task_id in best[1]:
                self._move(task_id, dst, out)
            moves += len(best[1])
        if moves:
            after = state.spread()
            out.append(Rebalanced(trigger, moves, before, after))
            logger.info(
                "rebalance on %s moved %d task(s): spread %.3f -> %.3f", trigger, moves, before, after
            )
