"""Task assignment: which container owns which operator task.

Recipe: ``<root>/tasks/<task>`` holds the task's spec and its owner; the index
``<root>/assignments/<container>/<task>`` lets each container watch just its own tasks;
``<root>/migrations/<task>`` marks a stateful hand-over that the new owner has not yet
acknowledged.  Every change of ownership rewrites the three in one ZooKeeper
transaction guarded by the task node's version.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.protocol.states import WatchedEvent
from kazoo.recipe.watchers import ChildrenWatch

from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode, encode
from linkstream.scheduler.registry import chunks
from linkstream.scheduler.state import TaskSpec

logger = logging.getLogger(__name__)

_MAX_CAS_TRIES = 20


class TransactionFailed(RuntimeError):
    """A ZooKeeper multi-op failed; ``errors`` holds the per-operation results."""

    def __init__(self, what: str, errors: list[Any]) -> None:
        super().__init__(f"{what}: {errors!r}")
        self.errors = errors


@dataclass(frozen=True)
class Assignment:
    """A task and where it runs.

    Attributes:
        task: The task's spec.
        container: Owner, or ``None`` while pending.
        migrating_from: Container holding the state to restore (stateful hand-over
            not yet acknowledged), else ``None``.
        restored_from: The dead container this task was taken from when its state was
            lost with it: the new owner waits a bounded time for the driver to restore it
            from the last checkpoint (a ``forward``) instead of rebuilding it at once.
            Any later change of owner drops it.
    """

    task: TaskSpec
    container: str | None = None
    migrating_from: str | None = None
    restored_from: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Returns the node payload."""
        body: dict[str, Any] = {
            "task": self.task.to_json(),
            "container": self.container,
            "migrating_from": self.migrating_from,
        }
        if self.restored_from is not None:
            body["restored_from"] = self.restored_from
        return body

    @classmethod
    def from_json(cls, body: dict[str, Any]) -> Assignment:
        """Parses a node payload written by :meth:`to_json`."""
        return cls(
            TaskSpec.from_json(body["task"]),
            body.get("container"),
            body.get("migrating_from"),
            body.get("restored_from"),
        )


AssignmentsCallback = Callable[[dict[str, Assignment]], "bool | None"]


class AssignmentTable:
    """Each task has at most one owner, and every container's index agrees with it.

    Writers (the leading coordinator, and the planner through :meth:`submit` and
    :meth:`withdraw`) change ``/tasks/<task>``, the owner's index entry and the
    migration marker atomically, so a container watching its index with
    :meth:`watch_container` never sees a task that the table gives to someone else.

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        root: Cluster root inside the chroot.
    """

    def __init__(self, client: KazooClient, root: str = DEFAULT_ROOT) -> None:
        self.client = client
        self.layout = ClusterLayout(root)
        self._ensured: set[str] = set()
        #: pending tasks read by ``get_many(..., remember=True)``, with their node versions:
        #: :meth:`set_owners` writes those without reading them again (the versions guard it)
        self._pending: dict[str, tuple[Assignment, int]] = {}

    def _ensure(self, path: str) -> None:
        if path not in self._ensured:
            self.client.ensure_path(path)
            self._ensured.add(path)

    # ------------------------------------------------------------------ reads

    def get(self, task_id: str) -> Assignment | None:
        """The task's current assignment, or ``None`` if it is not submitted."""
        try:
            data, _ = self.client.get(self.layout.task(task_id))
        except NoNodeError:
            return None
        return Assignment.from_json(decode(data))

    def get_many(self, task_ids: list[str], remember: bool = False) -> list[Assignment | None]:
        """The assignments of ``task_ids`` (``None`` for a task not submitted), read pipelined.

        ``remember``: keep the unowned ones with their versions for :meth:`set_owners`."""
        reads = [self.client.get_async(self.layout.task(t)) for t in task_ids]
        out: list[Assignment | None] = []
        for t, res in zip(task_ids, reads, strict=True):
            try:
                data, stat = res.get()
            except NoNodeError:
                out.append(None)
                continue
            a = Assignment.from_json(decode(data))
            out.append(a)
            if remember and a.container is None and a.migrating_from is None:
                self._pending[t] = (a, stat.version)
        return out

    def forget_pending(self, task_ids: list[str] | None = None) -> None:
        """Drops what ``get_many(..., remember=True)`` kept of ``task_ids`` (``None``: all)."""
        if task_ids is None:
            self._pending.clear()
        for t in task_ids or ():
            self._pending.pop(t, None)

    def all(self) -> dict[str, Assignment]:
        """Every submitted task, by id (sorted)."""
        self._ensure(self.layout.tasks)
        ids = sorted(self.client.get_children(self.layout.tasks))
        return {t: a for t, a in zip(ids, self.get_many(ids), strict=True) if a is not None}

    def of_container(self, container_id: str) -> dict[str, Assignment]:
        """The tasks indexed under ``container_id`` (sorted)."""
        path = self.layout.assignments(container_id)
        try:
            names = self.client.get_children(path)
        except NoNodeError:
            return {}
        return self._read_index(container_id, names)

    def _read_index(self, container_id: str, names: list[str]) -> dict[str, Assignment]:
        ids = sorted(names)
        reads = [self.client.get_async(self.layout.assignment(container_id, t)) for t in ids]  # pipelined
        result: dict[str, Assignment] = {}
        for task_id, res in zip(ids, reads, strict=True):
            try:
                data, _ = res.get()
            except NoNodeError:
                continue
            result[task_id] = Assignment.from_json(decode(data))
        return result

    def migrations(self) -> set[str]:
        """Ids of tasks with an unacknowledged stateful hand-over."""
        self._ensure(self.layout.migrations)
        return set(self.client.get_children(self.layout.migrations))

    # ------------------------------------------------------------------ planner side

    def submit(self, spec: TaskSpec) -> None:
        """Adds a task (pending) or updates the spec of a known one, keeping its owner."""
        self._ensure(self.layout.tasks)
        try:
            self.client.create(self.layout.task(spec.id), encode(Assignment(spec).to_json()))
            return
        except NodeExistsError:
            pass
        for _ in range(_MAX_CAS_TRIES):
            current, version = self._read(spec.id)
            if current is None:
                return self.submit(spec)
            updated = Assignment(spec, current.container, current.migrating_from, current.restored_from)
            try:
                self.client.set(self.layout.task(spec.id), encode(updated.to_json()), version=version)
                return
            except BadVersionError:
                continue
        raise TransactionFailed(f"submit {spec.id}", ["too much contention"])

    def submit_many(self, specs: list[TaskSpec]) -> None:
        """Adds many new tasks (pending) in few ZooKeeper transactions; a task that exists
        already is updated on its own, as :meth:`submit` does."""
        self._ensure(self.layout.tasks)
        by_path = {self.layout.task(spec.id): spec for spec in specs}
        payloads = [(path, encode(Assignment(spec).to_json())) for path, spec in by_path.items()]
        sent = []
        for group in chunks(payloads):  # independent transactions: sent together (pipelined)
            tx = self.client.transaction()
            for path, data in group:
                tx.create(path, data)
            sent.append((group, tx.commit_async()))
        for group, res in sent:
            if _failed(res.get()):
                for path, _ in group:
                    self.submit(by_path[path])

    def withdraw(self, task_id: str) -> bool:
        """Removes a task with its index entry and migration marker.

        Returns:
            Whether the task existed.
        """
        for _ in range(_MAX_CAS_TRIES):
            current, version = self._read(task_id)
            if current is None:
                return False
            tx = self.client.transaction()
            tx.delete(self.layout.task(task_id), version=version)
            if current.container is not None:
                tx.delete(self.layout.assignment(current.container, task_id))
            if current.migrating_from is not None:
                tx.delete(self.layout.migration(task_id))
            results = tx.commit()
            if not _failed(results):
                return True
            if not any(isinstance(r, BadVersionError) for r in results):
                raise TransactionFailed(f"withdraw {task_id}", results)
        raise TransactionFailed(f"withdraw {task_id}", ["too much contention"])

    # ------------------------------------------------------------------ coordinator side

    def set_owner(
        self,
        task_id: str,
        container: str | None,
        migrating_from: str | None = None,
        restored_from: str | None = None,
    ) -> bool:
        """Makes ``container`` (``None``: nobody) the task's owner, atomically.

        Args:
            task_id: The task.
            container: New owner or ``None``.
            migrating_from: Source of a stateful hand-over to ``container``; creates
                the migration marker the new owner deletes on completion.
            restored_from: The dead container whose lost state ``container`` is to
                restore from the last checkpoint (:attr:`Assignment.restored_from`).

        Returns:
            ``False`` if the task is not (or no longer) submitted.
        """
        if container is not None:
            self._ensure(self.layout.assignments(container))
        self._ensure(self.layout.migrations)
        for _ in range(_MAX_CAS_TRIES):
            current, version = self._read(task_id)
            if current is None:
                return False
            if (current.container, current.migrating_from, current.restored_from) == (
                container,
                migrating_from,
                restored_from,
            ):
                return True
            updated = Assignment(current.task, container, migrating_from, restored_from)
            payload = encode(updated.to_json())
            tx = self.client.transaction()
            tx.set_data(self.layout.task(task_id), payload, version=version)
            if current.container != container:
                if current.container is not None:
                    tx.delete(self.layout.assignment(current.container, task_id))
                if container is not None:
                    tx.create(self.layout.assignment(container, task_id), payload)
            elif container is not None:
                tx.set_data(self.layout.assignment(container, task_id), payload)
            marker = self.layout.migration(task_id)
            if current.migrating_from is not None and migrating_from is None:
                tx.delete(marker)
            elif current.migrating_from is None and migrating_from is not None:
                tx.create(marker, encode({"src": migrating_from, "dst": container}))
            elif migrating_from is not None:
                tx.set_data(marker, encode({"src": migrating_from, "dst": container}))
            results = tx.commit()
            if not _failed(results):
                return True
            if not any(isinstance(r, BadVersionError) for r in results):
                raise TransactionFailed(f"set owner of {task_id} to {container}", results)
        raise TransactionFailed(f"set owner of {task_id}", ["too much contention"])

    def set_owners(self, owners: dict[str, str]) -> None:
        """Assigns many pending tasks (no hand-over) in few transactions: pipelined reads,
        then one transaction per group guarded by the versions read.  A task that changed
        meanwhile (or a group that failed) goes through :meth:`set_owner` one by one."""
        for container in set(owners.values()):
            self._ensure(self.layout.assignments(container))
        known = {t: self._pending.pop(t) for t in owners if t in self._pending}
        reads = [(t, self.client.get_async(self.layout.task(t))) for t in owners if t not in known]
        ops: list[tuple[str, bytes]] = []
        plan: dict[str, tuple[str, int, Assignment]] = {}
        slow: list[str] = []
        for t, res in [*reads, *known.items()]:
            if isinstance(res, tuple):  # read when it came (unowned then): a newer version fails the write
                current, version = res
            else:
                try:
                    data, stat = res.get()
                except NoNodeError:
                    continue
                current, version = Assignment.from_json(decode(data)), stat.version
            if current.container == owners[t] and current.migrating_from is None:
                continue
            if current.container is not None or current.migrating_from is not None:
                slow.append(t)
                continue
            updated = Assignment(current.task, owners[t], None)
            ops.append((t, encode(updated.to_json())))
            plan[t] = (owners[t], version, updated)
        sent = []
        for group in chunks(ops, 128 * 1024):  # independent transactions: sent together (pipelined)
            tx = self.client.transaction()
            for t, payload in group:
                container, version, _ = plan[t]
                tx.set_data(self.layout.task(t), payload, version=version)
                tx.create(self.layout.assignment(container, t), payload)
            sent.append((group, tx.commit_async()))
        for group, res in sent:
            if _failed(res.get()):
                slow += [t for t, _ in group]
        for t in slow:
            self.set_owner(t, owners[t])

    def complete_migration(self, task_id: str) -> bool:
        """Acknowledges a stateful hand-over (called by the new owner once restored).

        Returns:
            Whether a hand-over was pending.
        """
        current = self.get(task_id)
        if current is None or current.migrating_from is None:
            return False
        return self.set_owner(task_id, current.container, None)

    def _read(self, task_id: str) -> tuple[Assignment | None, int]:
        try:
            data, stat = self.client.get(self.layout.task(task_id))
        except NoNodeError:
            return None, -1
        return Assignment.from_json(decode(data)), stat.version

    def forget_container(self, container_id: str) -> None:
        """Deletes a departed container's index node if it is empty."""
        try:
            self.client.delete(self.layout.assignments(container_id))
        except NoNodeError:
            pass
        except NotEmptyError:
            logger.debug("index of %s not removed: tasks are still indexed there", container_id)
        self._ensured.discard(self.layout.assignments(container_id))

    # ------------------------------------------------------------------ watches

    def watch_container(self, container_id: str, callback: AssignmentsCallback) -> IndexWatch:
        """Calls ``callback(tasks)`` with the container's assignments now and on change.

        The watch outlives the index node: a coordinator that took the container for dead
        deletes its emptied index (:meth:`forget_container`), and after the container's
        session expired it is created again only when a task is next given to it (see
        :class:`IndexWatch`).  A callback that returns ``False`` ends the watch.
        """
        path = self.layout.assignments(container_id)
        self._ensure(path)
        reader = _IndexReader(self, container_id)
        watch = IndexWatch(self.client, path, lambda names: callback(reader.read(names)), reader)
        return watch

    def watch_tasks(self, callback: Callable[[list[str]], bool | None]) -> ChildrenWatch:
        """Calls ``callback(task_ids)`` (sorted) now and whenever tasks are added or removed.

        A callback that returns ``False`` ends the watch.
        """
        self._ensure(self.layout.tasks)
        return ChildrenWatch(self.client, self.layout.tasks, lambda names: callback(sorted(names)))

    def watch_migrations(self, callback: Callable[[set[str]], bool | None]) -> ChildrenWatch:
        """Calls ``callback(task_ids)`` with pending hand-overs now and on change.

        A callback that returns ``False`` ends the watch.
        """
        self._ensure(self.layout.migrations)
        return ChildrenWatch(self.client, self.layout.migrations, lambda names: callback(set(names)))


class IndexWatch:
    """Calls back with the children of a container's index node now and on every change,
    until stopped (or a callback returns ``False``).

    Unlike kazoo's ``ChildrenWatch``, which stops for good once its node is missing, this
    reports a deleted index as empty and resumes when the node is created again; after a
    session loss it reads the index again and always calls back, since the assignments
    the container knew died with its session.  (A ``ChildrenWatch`` on the index of a
    container that lost its session and rejoined was dead: the coordinator had deleted
    the index meanwhile, so the container never saw a task given to it again.)
    """

    def __init__(
        self,
        client: KazooClient,
        path: str,
        callback: Callable[[list[str]], bool | None],
        reader: _IndexReader | None = None,
    ) -> None:
        self._client = client
        self._path = path
        self._callback = callback
        self._reader = reader
        self._lock = threading.Lock()
        self._stopped = False
        self._lost = False
        if reader is not None:
            reader.changed = lambda: client.handler.spawn(self._refresh)
        client.add_listener(self._on_state)
        self._refresh()

    def stop(self) -> None:
        """Stops calling back."""
        self._stopped = True
        self._client.remove_listener(self._on_state)

    def _watcher(self, event: WatchedEvent) -> None:
        if event.type != "NONE":
            self._refresh()

    def _on_state(self, state: str) -> None:  # kazoo's connection thread: never block here
        if state in (KazooState.LOST, KazooState.SUSPENDED):
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost:
            self._lost = False
            if self._reader is not None:
                self._reader.reset()  # what it knew may have changed meanwhile
            self._client.handler.spawn(self._refresh)

    def _refresh(self) -> None:
        with self._lock:
            if self._stopped:
                return
            try:
                if self._callback(self._children()) is False:
                    self.stop()
            except (ConnectionClosedError, SessionExpiredError, ConnectionLoss):
                return  # the connection listener reads again once connected
            except KazooException as exc:
                logger.warning("cannot read the assignment index %s: %s", self._path, exc)
            except Exception:
                logger.exception("assignment index callback failed")

    def _children(self) -> list[str]:
        """The index's children, watched; ``[]`` while it does not exist (its creation is watched)."""
        while True:
            try:
                return list(self._client.get_children(self._path, self._watcher))
            except NoNodeError:
                pass
            if self._client.exists(self._path, self._watcher) is None:
                return []


class _IndexReader:
    """A container's index entries, read once each: on a change of the index's children only
    the new entries are read (with a data watch), the ones gone are dropped, and an entry
    rewritten in place (a hand-over's marker set or cleared on the same owner) is read again
    when its data watch fires.  (Reading every entry on every children change made a
    registration of ``n`` queries cost O(n^2) reads on the container.)"""

    def __init__(self, table: AssignmentTable, container_id: str) -> None:
        self._table = table
        self._container = container_id
        self._known: dict[str, Assignment] = {}
        self._stale: set[str] = set()
        self.changed: Callable[[], object] = lambda: None  # set by the IndexWatch: read again

    def reset(self) -> None:
        """Forget every entry (after a connection loss): the next read reads them all."""
        self._stale.add("")  # a marker for the reading thread: clear everything

    def _data_changed(self, event: WatchedEvent) -> None:  # kazoo's event thread
        if event.type == "CHANGED":
            self._stale.add(event.path.rsplit("/", 1)[1])
            self.changed()

    def read(self, names: list[str]) -> dict[str, Assignment]:
        """The entries of ``names`` (the index's children now), sorted by task id."""
        stale, self._stale = self._stale, set()
        known = self._known
        if "" in stale:
            known.clear()
        for t in stale:
            known.pop(t, None)
        present = set(names)
        for t in [t for t in known if t not in present]:
            del known[t]
        new = sorted(t for t in present if t not in known)
        client, layout = self._table.client, self._table.layout
        reads = [client.get_async(layout.assignment(self._container, t), self._data_changed) for t in new]
        for t, res in zip(new, reads, strict=True):
            try:
                data, _ = res.get()
            except NoNodeError:
                continue
            known[t] = Assignment.from_json(decode(data))
        # kept sorted: the next sort merges the entries read since (one sorted run) into it in
        # linear time, not O(n log n) per change of a 10,000-entry index
        self._known = dict(sorted(known.items()))
        return dict(self._known)


def _failed(results: list[Any]) -> bool:
    return any(isinstance(r, Exception) for r in results)
