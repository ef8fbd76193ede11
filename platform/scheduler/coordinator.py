"""The coordinator process's adapter: ZooKeeper observations in, scheduler actions out.

It contends for leadership; while it leads, a single worker thread turns membership,
task and migration changes into :mod:`~linkstream.scheduler.events`, feeds them to a
:class:`~linkstream.scheduler.core.SchedulerCore` and writes the resulting actions to
the assignment table.  Every decision stays in the core; this module only does I/O.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError

from linkstream.metrics import CoordinatorMetrics
from linkstream.scheduler.assignment import AssignmentTable, TransactionFailed
from linkstream.scheduler.core import SchedulerCore
from linkstream.scheduler.election import LeaderElection
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
from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, encode
from linkstream.scheduler.membership import Member, Membership
from linkstream.scheduler.state import Policy

logger = logging.getLogger(__name__)


class Coordinator:
    """While it leads, the assignment table follows the scheduler core's decisions.

    On election it rebuilds the core from ZooKeeper (members, tasks with their owners,
    unacknowledged hand-overs), so a standby that takes over continues where the old
    leader stopped.  After a failed write it rebuilds again rather than guess.

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        identifier: This coordinator's name in the election.
        root: Cluster root inside the chroot.
        policy: Scheduler policy.
        tick_interval: Seconds between ``Tick`` events while leading.
        on_loss: Called with each ``ReportLoss`` (replay from checkpoint goes here).
        metrics: Where to count elections, moves and rebalances (a private set if ``None``).
        meta: JSON fields advertised in the ephemeral node ``<root>/coordinators/<id>``
            while this coordinator runs (its metrics endpoint, API URL, pid ...).
        on_leading: Called with ``True`` when this coordinator is elected and ``False``
            when it stops leading (on the election's thread: hand the work off quickly).
    """

    def __init__(
        self,
        client: KazooClient,
        identifier: str,
        root: str = DEFAULT_ROOT,
        policy: Policy | None = None,
        tick_interval: float = 1.0,
        on_loss: Callable[[ReportLoss], None] | None = None,
        metrics: CoordinatorMetrics | None = None,
        meta: dict[str, Any] | None = None,
        on_leading: Callable[[bool], None] | None = None,
    ) -> None:
        self.client = client
        self._on_leading = on_leading
        self.identifier = identifier
        self.policy = policy or Policy()
        self.tick_interval = tick_interval
        self.membership = Membership(client, root)
        self.table = AssignmentTable(client, root)
        self.losses: list[ReportLoss] = []
        self.metrics = metrics if metrics is not None else CoordinatorMetrics()
        self.metrics.identify(identifier)
        self.meta = dict(meta or {})
        self._layout = ClusterLayout(root)
        self._on_loss = on_loss
        #: a task lost with a dead container is reassigned with ``restored_from`` (its new
        #: owner waits for its restore from a checkpoint): set while checkpoints are taken
        self.restore_lost = False
        self._election = LeaderElection(client, identifier, self._elected, self._revoked, root)
        self._queue: queue.Queue[tuple[str, int, Any]] = queue.Queue()
        self._term = 0  # bumped on every election and revocation; stale work is dropped
        self._epoch = 0  # bumped on every rebuild; watches of older epochs end
        self._leading = False
        self._core: SchedulerCore | None = None
        self._members: dict[str, Member] = {}
        self._tasks: set[str] = set()
        self._migrations: set[str] = set()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._session_lost = False  # the session expired: advertise again once connected

    # ------------------------------------------------------------------ lifecycle

    @property
    def is_leader(self) -> bool:
        """Whether this coordinator currently leads."""
        return self._election.is_leader

    @property
    def core(self) -> SchedulerCore | None:
        """The leader's scheduler core (``None`` on a standby); read-only use."""
        return self._core

    def start(self) -> None:
        """Starts the worker and joins the election."""
        self._worker = threading.Thread(target=self._work, name=f"coordinator-{self.identifier}", daemon=True)
        self._worker.start()
        self._advertise()
        self.client.add_listener(self._on_state)
        self._election.start()

    def _advertise(self) -> bool:
        path = self._layout.coordinator(self.identifier)
        try:
            self.client.create(path, encode(self.meta), ephemeral=True, makepath=True)
        except NodeExistsError:
            self.client.set(path, encode(self.meta))
        except KazooException as exc:
            logger.warning("%s: cannot advertise itself: %s", self.identifier, exc)
            return False
        return True

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: never block here.  The advertisement (the API URL other
        # coordinators forward to, the live coordinators a stream is placed on) is ephemeral:
        # a session that expired (a ZooKeeper outage longer than it) took it away, while the
        # election goes on under the new session -- a leader nobody could find.
        if state == KazooState.LOST:
            self._session_lost = True
        elif state == KazooState.CONNECTED and self._session_lost and not self._stop.is_set():
            self._session_lost = False
            self.client.handler.spawn(self._advertise_again)

    def _advertise_again(self) -> None:
        if self._advertise():
            logger.warning("%s: session expired; advertised again", self.identifier)

    def stop(self) -> None:
        """Leaves the election and stops the worker."""
        self.client.remove_listener(self._on_state)
        self._election.stop()
        self._stop.set()
        self._queue.put(("stop", -1, None))
        if self._worker is not None:
            self._worker.join(10)
            self._worker = None

    def report_load(self, container: str, load: float, task_loads: dict[str, float] | None = None) -> None:
        """Feeds a container's measured load to the core (ignored on a standby)."""
        self._queue.put(("event", self._term, LoadReport(container, load, dict(task_loads or {}))))

    # ------------------------------------------------------------------ election callbacks

    def _elected(self) -> None:
        self._term += 1
        self._leading = True
        self.metrics.elections.inc()
        self.metrics.leader.set(1)
        self._queue.put(("rebuild", self._term, None))
        if self._on_leading is not None:
            self._on_leading(True)

    def _revoked(self) -> None:
        self._term += 1
        self._epoch += 1
        self._leading = False
        self.metrics.leader.set(0)
        self._queue.put(("drop", self._term, None))
        if self._on_leading is not None:
            self._on_leading(False)

    def leader(self, timeout: float | None = None) -> str | None:
        """Identifier of the coordinator that leads now (``None`` when none does); see
        :meth:`LeaderElection.leader` for ``timeout``."""
        return self._election.leader(timeout)

    # ------------------------------------------------------------------ worker

    def _work(self) -> None:
        while not self._stop.is_set():
            try:
                kind, term, payload = self._queue.get(timeout=self.tick_interval)
            except queue.Empty:
                kind, term, payload = "event", self._term, Tick()
            if kind == "stop":
                break
            if term != self._term:
                continue  # queued under an earlier leadership
            try:
                if kind == "drop":
                    self._core = None
                elif not self._leading:
                    continue
                elif kind == "rebuild":
                    self._rebuild(term)
                elif self._core is None:
                    continue
                elif kind == "members":
                    self._apply(self._member_events(payload))
                elif kind == "tasks":
                    self._apply(self._task_events(payload))
                elif kind == "migrations":
                    self._apply(self._migration_events(payload))
                elif kind == "event":
                    self._apply([payload])
            except (KazooException, TransactionFailed) as exc:
                logger.warning("%s: ZooKeeper write failed (%s); rebuilding", self.identifier, exc)
                self._stop.wait(0.5)
                self._queue.put(("rebuild", self._term, None))
            except Exception:
                logger.exception("%s: coordinator step failed; rebuilding", self.identifier)
                self._stop.wait(0.5)
                self._queue.put(("rebuild", self._term, None))

    def _rebuild(self, term: int) -> None:
        """Makes a fresh core from what ZooKeeper holds, then watches for changes."""
        self._epoch += 1
        epoch = self._epoch
        self._advertise()  # again: a new session (after an expiry) lost the ephemeral node
        self._core = SchedulerCore(self.policy)
        self.table.forget_pending()
        members = self.membership.members()
        table = self.table.all()
        events: list[Event] = [ContainerJoined(m.id, m.capacity, m.address) for m in members.values()]
        events += [TaskAdded(a.task, a.container, a.migrating_from) for a in table.values()]
        events += [ContainerDraining(m.id) for m in members.values() if m.draining]
        events.append(Tick())
        self._members = members
        self._tasks = set(table)
        self._migrations = {t for t, a in table.items() if a.migrating_from is not None}
        logger.info(
            "%s: leading with %d container(s) and %d task(s)", self.identifier, len(members), len(table)
        )
        self._apply(events)

        def forward(kind: str) -> Callable[[Any], bool | None]:
            def callback(payload: Any) -> bool | None:
                if self._epoch != epoch:
                    return False  # leadership changed or state rebuilt: end this watch
                self._queue.put((kind, term, payload))
                return None

            return callback

        self.membership.watch(forward("members"))
        self.table.watch_tasks(forward("tasks"))
        self.table.watch_migrations(forward("migrations"))

    def _member_events(self, members: dict[str, Member]) -> list[Event]:
        known = self._members
        events: list[Event] = []
        # Same id under a new session: the old process (and its task state) is gone.
        restarted = [m for m in members if m in known and known[m].session != members[m].session]
        events += [ContainerLeft(member_id) for member_id in restarted]
        for member_id, member in members.items():
            old = None if member_id in restarted else known.get(member_id)
            if old is None or (old.capacity, old.address) != (member.capacity, member.address):
                events.append(ContainerJoined(member_id, member.capacity, member.address))
            if member.draining and (old is None or not old.draining):
                events.append(ContainerDraining(member_id))
        gone = sorted(set(known) - set(members))
        events += [ContainerLeft(member_id) for member_id in gone]
        self._members = dict(members)
        for member_id in gone:
            self.membership.clear_drain(member_id)
        return events

    def _task_events(self, task_ids: list[str]) -> list[Event]:
        events: list[Event] = []
        current = set(task_ids)
        new = [task_id for task_id in task_ids if task_id not in self._tasks]
        for assignment in self.table.get_many(new, remember=True):  # pipelined: many come at once
            if assignment is not None:
                events.append(TaskAdded(assignment.task, assignment.container, assignment.migrating_from))
        removed = sorted(self._tasks - current)
        self.table.forget_pending(removed)  # (one submitted again gets a new node version 0)
        events += [TaskRemoved(task_id) for task_id in removed]
        self._tasks = current
        return events

    def _migration_events(self, task_ids: set[str]) -> list[Event]:
        events: list[Event] = []
        for task_id in sorted(self._migrations - task_ids):
            # The listing may predate a marker we created since: trust only a re-read.
            assignment = self.table.get(task_id)
            if assignment is None or assignment.migrating_from is None:
                events.append(MigrationCompleted(task_id))
                self._migrations.discard(task_id)
        return events

    # ------------------------------------------------------------------ actions

    def _apply(self, events: list[Event]) -> None:
        core = self._core
        assert core is not None
        assigns: dict[str, str] = {}  # placements of new tasks: written together (few transactions)
        for event in events:
            lost: dict[str, str] = {}  # task -> the dead container its state was lost with
            for action in core.handle(event):
                if isinstance(action, ReportLoss) and self.restore_lost:
                    lost[action.task] = action.container
                elif isinstance(action, Assign) and action.task in lost:
                    # The driver restores it from the last checkpoint: the owner waits for it.
                    self.table.set_owner(action.task, action.container, restored_from=lost[action.task])
                    continue
                if isinstance(action, Assign):
                    assigns[action.task] = action.container
                    continue
                if assigns:
                    self.table.set_owners(assigns)
                    assigns = {}
                self._execute(action)
            if isinstance(event, ContainerLeft):
                if assigns:
                    self.table.set_owners(assigns)
                    assigns = {}
                self.table.forget_container(event.container)
        if assigns:
            self.table.set_owners(assigns)
        self._observe(core)

    def _observe(self, core: SchedulerCore) -> None:
        state = core.state
        m = self.metrics
        m.containers.set(len(state.containers))
        tasks = state.tasks.values()
        m.tasks.labels("assigned").set(sum(1 for t in tasks if t.container is not None))
        m.tasks.labels("pending").set(sum(1 for t in tasks if t.container is None))
        m.tasks.labels("migrating").set(sum(1 for t in tasks if t.migrating_from is not None))

    def _execute(self, action: Action) -> None:
        match action:
            case Assign(task, container):
                self.table.set_owner(task, container)
            case Unassign(task, _):
                # Keep an unfinished hand-over's source so that a rebuild can resume it.
                state = self._core.state.tasks.get(task) if self._core is not None else None
                self.table.set_owner(task, None, state.migrating_from if state is not None else None)
            case Migrate(task, src, dst, stateful):
                self.metrics.moves.inc()
                self.table.set_owner(task, dst, src if stateful else None)
                if stateful:
                    self._migrations.add(task)
            case ReportLoss(task, container):
                logger.warning(
                    "%s: state of task %s lost with container %s", self.identifier, task, container
                )
                self.losses.append(action)
                self.metrics.lost.inc()
                if self._on_loss is not None:
                    self._on_loss(action)
            case DrainComplete(container):
                self.membership.mark_drained(container)
                logger.info("%s: container %s drained", self.identifier, container)
            case TaskPending(task):
                logger.warning("%s: task %s pending: no free slot", self.identifier, task)
            case Rebalanced(_, moves):
                if moves:
                    self.metrics.rebalances.inc()
                logger.info("%s: %s", self.identifier, action)
