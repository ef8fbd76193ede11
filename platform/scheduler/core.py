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
* **Stream affinity** (``Policy.affinity``, on by default).  A task outside a placed
  colocation group that names the streams it reads (``TaskSpec.streams``) goes, among
  the containers whose utilisation with it stays within ``Policy.affinity_slack`` of the
  least utilised other one (and within ``Policy.affinity_tasks`` of its own weight, or
  ``Policy.affinity_share`` of the mean load if that is more), to the one where the
  largest share of tasks reads exactly its streams (they share windows and joins
  there), then to the one that needs the fewest new ``(container, stream)``
  subscriptions -- the one already receiving most of its streams -- so routing by
  stream sends each element to fewer containers.  Drains and loss recovery place
  through the same rule.  Opt-in ``Policy.consolidate``: on ``Tick`` (with
  ``rebalance_on_tick``), units whose readers greedy placement split while the load was
  tight move to where their streams arrive, if that removes subscriptions and keeps the
  gap within ``Policy.tolerance`` (off by default: it migrates running tasks).
* **Rebalance.** When a container joins (and on ``Tick``), whole colocation groups or
  single tasks move from the most to the least utilised container while that gap
  exceeds ``Policy.tolerance`` and a move narrows it, at most ``Policy.max_moves``
  tasks per event, stateless tasks first.  With affinity, groups of units that read a
  common stream are candidates too, and the move adding the fewest subscriptions
  (streams that leave the source with the group) wins before the closest balance.
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
                    moved = self._rebalance("Tick", out)
                    if self.policy.affinity and self.policy.consolidate:
                        self._consolidate(self.policy.max_moves - moved, out)
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
        after = {c: state.utilisation(c, spec.weight) for c in candidates}
        best = min(candidates, key=lambda c: (after[c], -state.containers[c].free, c))
        if not (self.policy.affinity and spec.streams) or len(candidates) < 2:
            return best
        return self._choose_by_affinity(spec, candidates, after, best)

    def _choose_by_affinity(
        self, spec: TaskSpec, candidates: list[str], after: dict[str, float], best: str
    ) -> str:
        """Among containers the load allows, the one needing the fewest new subscriptions.

        A container is allowed when, with ``spec`` on it, its utilisation exceeds the
        least utilised *other* candidate's by at most ``Policy.affinity_slack`` (so no
        rebalance would undo the choice) and by at most ``Policy.affinity_tasks`` times
        the task's own share of it (with equal capacities: it holds at most that many
        tasks more); the least loaded choice ``best`` always is.

        With many tasks per container the bound is ``Policy.affinity_share`` of the mean
        load when that allows more.  Among the allowed containers the *purest* one wins
        first -- the largest share of its tasks reading exactly the task's streams (an
        empty container counts as pure) -- then the fewest new subscriptions: tasks over
        the same streams share a container's windows and joins, so gathering them makes a
        split over containers cost less CPU in all.  (When every task reads two of three
        streams, fewest subscriptions alone cannot tell the containers apart once each
        receives all three, and a two-task bound spread every pair over every container.)
        Tasks over equal streams are pure everywhere: they still spread by load.
        """
        state = self.state
        slack = self.policy.affinity_slack + _EPS
        mean = (sum(state.containers[c].weight for c in state.eligible()) + spec.weight) / max(
            1, len(state.eligible())
        )
        tasks = max(self.policy.affinity_tasks * spec.weight, self.policy.affinity_share * mean)
        now = {c: state.utilisation(c) for c in candidates}
        ordered = sorted(candidates, key=lambda c: (now[c], c))
        lowest, second = ordered[0], ordered[1]

        def allowed(c: str) -> bool:
            floor = now[second] if c == lowest else now[lowest]
            gap = after[c] - floor
            return c == best or (gap <= slack and gap <= tasks / state.containers[c].capacity + _EPS)

        return min(
            (c for c in candidates if allowed(c)),
            key=lambda c: (
                -state.purity(c, spec.streams),
                state.new_subscriptions(c, spec.streams),
                after[c],
                -state.containers[c].free,
                c,
            ),
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

    def _stream_groups(self, units: list[list[str]]) -> list[list[str]]:
        """Unions of ``units`` that read a common stream (connected components), if merged.

        Moving such a group whole lets its source drop the streams only it read, where
        moving one of its units would subscribe the destination without relieving the
        source.  Only groups of two or more units are returned; members keep sorted order.
        """
        state = self.state
        parent = list(range(len(units)))

        def find(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        first: dict[str, int] = {}
        for i, unit in enumerate(units):
            for task_id in unit:
                for stream in state.tasks[task_id].spec.streams:
                    j = first.setdefault(stream, i)
                    ri, rj = find(i), find(j)
                    if ri != rj:
                        parent[max(ri, rj)] = min(ri, rj)
        merged: dict[int, list[str]] = {}
        sizes: dict[int, int] = {}
        for i, unit in enumerate(units):
            root = find(i)
            merged.setdefault(root, []).extend(unit)
            sizes[root] = sizes.get(root, 0) + 1
        return [sorted(merged[r]) for r in sorted(merged) if sizes[r] > 1]

    def _subscription_delta(self, unit: list[str], src: str, dst: str) -> int:
        """Change of the total ``(container, stream)`` subscriptions if ``unit`` moves src -> dst."""
        state = self.state
        reads: dict[str, int] = {}
        for task_id in unit:
            for stream in state.tasks[task_id].spec.streams:
                reads[stream] = reads.get(stream, 0) + 1
        held_src, held_dst = state.containers[src].streams, state.containers[dst].streams
        gained = sum(1 for s in reads if s not in held_dst)
        freed = sum(1 for s, n in reads.items() if held_src.get(s, 0) <= n)
        return gained - freed

    def _rebalance(self, trigger: str, out: list[Action]) -> int:
        """Moves units from the most to the least utilised container; returns the tasks moved."""
        state = self.state
        affinity = self.policy.affinity
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
            units = self._movable_units(src)
            if affinity:
                units += self._stream_groups(units)
            best: tuple[tuple[bool, int, float, int, str], list[str]] | None = None
            for unit in units:
                if len(unit) > dst_state.free or moves + len(unit) > self.policy.max_moves:
                    continue
                weight = sum(state.tasks[t].spec.weight for t in unit)
                new_gap = abs(
                    (src_load - weight) / src_state.capacity - (dst_load + weight) / dst_state.capacity
                )
                if new_gap >= gap - _EPS:
                    continue
                stateful = any(state.tasks[t].spec.stateful for t in unit)
                # With affinity, a move that adds the fewest subscriptions (a group whose
                # streams leave the source with it) beats a closer balance.
                delta = self._subscription_delta(unit, src, dst) if affinity else 0
                key = (stateful, delta, round(new_gap, 9), len(unit), unit[0])
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
        return moves

    def _gap_after(self, unit: list[str], src: str, dst: str) -> float:
        """The rebalance gap (most utilised vs least utilised with a free slot) if ``unit`` moved."""
        state = self.state
        weight = sum(state.tasks[t].spec.weight for t in unit)
        util, free = {}, {}
        for c in state.eligible():
            container = state.containers[c]
            shift = weight if c == dst else -weight if c == src else 0.0
            slots = -len(unit) if c == dst else len(unit) if c == src else 0
            util[c] = state.utilisation(c, shift)
            free[c] = container.capacity - len(container.tasks) + slots
        receivers = [util[c] for c in util if free[c] > 0]
        return max(util.values()) - min(receivers) if len(util) > 1 and receivers else 0.0

    def _consolidate(self, budget: int, out: list[Action]) -> None:
        """Moves stream-coherent units to where their streams already arrive (on ``Tick``).

        Greedy placement can split the readers of a stream when the load tolerance was
        tight at the time; once load allows, a unit moves if that removes subscriptions
        and leaves the rebalance gap within ``Policy.tolerance`` (so no rebalance undoes
        it).  Every move strictly lowers the total subscriptions, so this settles; at
        most ``budget`` tasks move per event.
        """
        state = self.state
        before = state.spread()
        moves = 0
        while moves < budget:
            eligible = state.eligible()
            if len(eligible) < 2:
                break
            bound = self.policy.tolerance + _EPS
            best: tuple[tuple[int, bool, float, int, str, str], list[str], str] | None = None
            for src in eligible:
                units = self._movable_units(src)
                for unit in units + self._stream_groups(units):
                    if moves + len(unit) > budget:
                        continue
                    for dst in eligible:
                        if dst == src or state.containers[dst].free < len(unit):
                            continue
                        delta = self._subscription_delta(unit, src, dst)
                        if delta >= 0:
                            continue
                        gap = self._gap_after(unit, src, dst)
                        if gap > bound:
                            continue
                        stateful = any(state.tasks[t].spec.stateful for t in unit)
                        key = (delta, stateful, round(gap, 9), len(unit), unit[0], dst)
                        if best is None or key < best[0]:
                            best = (key, unit, dst)
            if best is None:
                break
            for task_id in best[1]:
                self._move(task_id, best[2], out)
            moves += len(best[1])
        if moves:
            after = state.spread()
            out.append(Rebalanced("Tick", moves, before, after))
            logger.info("affinity moved %d task(s) to where their streams arrive", moves)
