"""Where ZooKeeper places each task, as the driver of a run sees it: one watch per container
index and one on the hand-over markers, not one per task.

:class:`OwnerView` follows ``<root>/assignments/<container>`` (the children of each container's
index name the tasks it owns) and ``<root>/migrations/<task>`` (an unacknowledged stateful
hand-over: ``{"src", "dst"}``).  The coordinator writes a task's owner, its index entries and
its marker in one transaction (:class:`~linkstream.scheduler.assignment.AssignmentTable`), so
these nodes tell what the task nodes tell.  (A data watch per task node cost the leader of a
live service a read and a watch per query, and a read again per placement: ~3-5 ZooKeeper
requests per registered query; a batch of 1,000 now costs a few children reads.)

Consistency: the index of each container is read whole after each change, on the driver's one
ZooKeeper session, so the reads come back in the order ZooKeeper applied the writes.  A task
is owned by the container whose latest read named it; while a move is being observed (the new
index read, the old one not yet), the newer read wins.  A hand-over is reported only once the
marker's destination is the owner seen, so a move is never acted on half seen.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import ConnectionLoss, KazooException, NoNodeError, SessionExpiredError
from kazoo.recipe.watchers import ChildrenWatch

from linkstream.scheduler.assignment import IndexWatch
from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode

logger = logging.getLogger(__name__)


class OwnerView:
    """The owner and hand-over source of every task, kept up to date from ZooKeeper watches.

    Args:
        client: A started kazoo client.
        root: Cluster root inside the chroot.
    """

    def __init__(self, client: KazooClient, root: str = DEFAULT_ROOT) -> None:
        self.client = client
        self.layout = ClusterLayout(root)
        self._lock = threading.Lock()
        self._owner: dict[str, str] = {}  # task id -> container whose index names it
        self._held: dict[str, set[str]] = {}  # container -> task ids of its index (last read)
        self._indexes: dict[str, IndexWatch | None] = {}
        self._markers: dict[str, tuple[str | None, str | None]] = {}  # task id -> (src, dst)
        self._marker_gen: dict[str, int] = {}  # task id -> generation of its data watch
        self._gen = 0
        #: counts the changes of the owners and markers (a reader may skip work while it stands)
        self.version = 0
        self._stopped = False
        self._lost = False
        client.ensure_path(self.layout.assignments_root)
        client.ensure_path(self.layout.migrations)
        client.add_listener(self._on_state)
        self._root_watch = ChildrenWatch(client, self.layout.assignments_root, self._on_indexes)
        self._marker_watch = ChildrenWatch(client, self.layout.migrations, self._on_markers)

    # ------------------------------------------------------------------ reads

    def owner(self, task: str) -> str | None:
        """The container ZooKeeper assigns ``task`` to (``None``: pending or unknown)."""
        with self._lock:
            return self._owner.get(task)

    def migrating(self) -> bool:
        """Whether some task has a hand-over marker (a move in flight or not acknowledged)."""
        with self._lock:
            return bool(self._markers)

    def placed(self, task: str) -> tuple[str | None, str | None]:
        """``(owner, migrating_from)`` of ``task``: the source of a hand-over to its owner not
        yet acknowledged, else ``None``."""
        with self._lock:
            owner = self._owner.get(task)
            marker = self._markers.get(task)
        src = marker[0] if marker is not None and owner is not None and marker[1] == owner else None
        return owner, src

    def stop(self) -> None:
        """Ends the watches (the children watches at their next event)."""
        self._stopped = True
        self.client.remove_listener(self._on_state)
        with self._lock:
            watches = [w for w in self._indexes.values() if w is not None]
        for w in watches:
            w.stop()

    # ------------------------------------------------------------------ container indexes

    def _on_indexes(self, containers: list[str]) -> bool | None:
        if self._stopped:
            return False
        for cid in containers:
            with self._lock:
                if cid in self._indexes:
                    continue
                self._indexes[cid] = None
            path = self.layout.assignments(cid)
            watch = IndexWatch(self.client, path, functools.partial(self._on_index, cid))
            with self._lock:
                self._indexes[cid] = watch
        return None

    def _on_index(self, cid: str, tasks: list[str]) -> bool | None:
        """The index of ``cid`` names ``tasks`` now (an index deleted reads as empty)."""
        if self._stopped:
            return False
        now = set(tasks)
        owner = self._owner
        with self._lock:
            for t in self._held.get(cid, set()) - now:
                if owner.get(t) == cid:
                    del owner[t]
            for t in now:
                if owner.get(t) != cid:
                    owner[t] = cid
            self._held[cid] = now
            self.version += 1
        return None

    # ------------------------------------------------------------------ hand-over markers

    def _on_markers(self, tasks: list[str]) -> bool | None:
        if self._stopped:
            return False
        now = set(tasks)
        with self._lock:
            gone = [t for t in self._marker_gen if t not in now]
            for t in gone:
                del self._marker_gen[t]
                self._markers.pop(t, None)
            self.version += 1
            new = [t for t in now if t not in self._marker_gen]
            gens = {}
            for t in new:
                self._gen += 1
                gens[t] = self._marker_gen[t] = self._gen
        for t in new:
            self._follow_marker(t, gens[t])
        return None

    def _follow_marker(self, task: str, gen: int) -> None:
        """Reads the marker of ``task`` now and whenever it changes (a data watch that re-arms
        itself), while its generation is current."""
        path = self.layout.migration(task)

        def live() -> bool:
            return not self._stopped and self._marker_gen.get(task) == gen

        def watcher(_event: object) -> None:
            if live():
                arm()

        def got(res: Any) -> None:
            try:
                data, _ = res.get()
            except NoNodeError:  # deleted (and maybe created again): woken when it exists
                with self._lock:
                    if live():
                        self._markers.pop(task, None)
                        self.version += 1
                self.client.exists_async(path, watch=watcher)
                return
            except (ConnectionLoss, SessionExpiredError):
                return  # read again once connected (_on_state)
            except KazooException as exc:
                logger.warning("cannot read the hand-over marker of %s: %s", task, exc)
                return
            try:
                body = decode(data)
            except ValueError:
                logger.warning("malformed hand-over marker of %s", task)
                return
            with self._lock:
                if live():
                    self._markers[task] = (body.get("src"), body.get("dst"))
                    self.version += 1

        def arm() -> None:
            if live():
                self.client.get_async(path, watch=watcher).rawlink(got)

        arm()

    def _on_state(self, state: str) -> None:  # kazoo's connection thread: never block
        if state in (KazooState.LOST, KazooState.SUSPENDED):
            self._lost = True
        elif state == KazooState.CONNECTED and self._lost and not self._stopped:
            self._lost = False
            # A data watch may have died with the session, or a read failed meanwhile: every
            # marker is followed again (the indexes and children watches re-read themselves).
            with self._lock:
                gens = {}
                for t in self._marker_gen:
                    self._gen += 1
                    gens[t] = self._marker_gen[t] = self._gen
            for t, g in gens.items():
                self.client.handler.spawn(self._follow_marker, t, g)


__all__ = ["OwnerView"]
