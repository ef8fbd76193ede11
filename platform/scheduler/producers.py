"""Producer tasks of operator placement in ZooKeeper, and where their hosts follow them.

Recipe: every producer channel of a run (see :mod:`linkstream.engine.cutting`) is an
ordinary task node ``<root>/tasks/<task>`` (task id :func:`producer_task_id`) with its
owner and index entry, like a query task, so the leading coordinator places, rebalances,
drains and fails it over with the same :class:`~linkstream.scheduler.core.SchedulerCore`
decisions.  The driver publishes each channel *with* the owner it chose
(:meth:`ProducerTasks.publish`, one transaction: the coordinator sees a restore hint,
never a pending task it would place elsewhere first), then watches the nodes.

:class:`ProducerPlacement` is the sans-IO half of the driver's watch: given the owners
ZooKeeper shows and the live containers, it decides which channel must move to which
container, numbering every hosting with a new *generation* (consumers accept the
newest generation of a channel only, and take its first batch as the channel's whole
state).  A channel whose host died while ZooKeeper names no live owner (the core left
it pending: no free slot) falls back to the live container hosting the fewest channels,
so a consumer never waits for a producer nobody runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NodeExistsError
from kazoo.recipe.watchers import DataWatch

from linkstream.scheduler.assignment import Assignment, AssignmentTable
from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout, decode, encode
from linkstream.scheduler.state import TaskSpec

logger = logging.getLogger(__name__)


def producer_task_id(run: str, channel: str) -> str:
    """The scheduler task id of producer channel ``channel`` of run ``run``."""
    return f"p-{run}-{channel}"


# ----------------------------------------------------------------------------- decisions


@dataclass(frozen=True)
class ProducerMove:
    """Channel ``channel`` is hosted on ``dst`` from generation ``gen`` on (was ``src``)."""

    channel: str
    src: str | None
    dst: str
    gen: int
    reason: str


class ProducerPlacement:
    """Where each producer channel runs, following ZooKeeper; never a channel without a host.

    Guarantees, after every call: every channel's host is a live container (when any is
    live); a host changes only to the live owner ZooKeeper names, or -- when the host
    died and ZooKeeper names no live owner -- to the live container with the fewest
    channels (ties: smallest id); every change bumps the channel's generation.

    Args:
        hosts: Channel -> initial host (generation 1).
        live: The live containers.
    """

    def __init__(self, hosts: Mapping[str, str], live: Iterable[str]) -> None:
        self.hosts: dict[str, str] = dict(hosts)
        self.gens: dict[str, int] = {ch: 1 for ch in hosts}
        self.owners: dict[str, str | None] = dict(hosts)
        self.live: set[str] = set(live)

    def on_owner(self, channel: str, owner: str | None) -> list[ProducerMove]:
        """ZooKeeper shows ``owner`` (``None``: pending or withdrawn) for ``channel``."""
        if channel not in self.hosts:
            return []
        self.owners[channel] = owner
        return self._settle([channel])

    def on_members(self, live: Iterable[str]) -> tuple[list[str], list[ProducerMove]]:
        """The live containers changed.

        Returns:
            The containers that left, and the moves that follows.
        """
        now = set(live)
        gone = sorted(self.live - now)
        self.live = now
        return gone, self._settle(sorted(self.hosts))

    def load(self) -> dict[str, int]:
        """Channels hosted per live container."""
        out = {c: 0 for c in self.live}
        for host in self.hosts.values():
            if host in out:
                out[host] += 1
        return out

    def _settle(self, channels: list[str]) -> list[ProducerMove]:
        moves = []
        for ch in channels:
            host, owner = self.hosts[ch], self.owners.get(ch)
            if owner is not None and owner in self.live and owner != host:
                moves.append(self._move(ch, owner, "assigned"))
            elif host not in self.live and self.live and (owner is None or owner not in self.live):
                load = self.load()
                dst = min(sorted(load), key=lambda c: load[c])
                moves.append(self._move(ch, dst, "host lost, no live owner"))
        return moves

    def _move(self, channel: str, dst: str, reason: str) -> ProducerMove:
        src = self.hosts[channel]
        self.hosts[channel] = dst
        self.gens[channel] += 1
        return ProducerMove(channel, src, dst, self.gens[channel], reason)


# ----------------------------------------------------------------------------- ZooKeeper


class ProducerTasks:
    """A run's producer channels as assignment-table tasks (see the module docstring).

    Args:
        client: A started kazoo client; its chroot decides where ``root`` lives.
        run: The run id (task ids are per run).
        root: Cluster root inside the chroot.
    """

    def __init__(self, client: KazooClient, run: str, root: str = DEFAULT_ROOT) -> None:
        self.client = client
        self.run = run
        self.layout = ClusterLayout(root)
        self.table = AssignmentTable(client, root)
        self._watches: list[DataWatch] = []
        self.ids: dict[str, str] = {}  # task id -> channel

    def task_id(self, channel: str) -> str:
        """The task id of ``channel``."""
        return producer_task_id(self.run, channel)

    def publish(self, spec: TaskSpec, container: str) -> str:
        """Creates the task of channel ``spec.id`` already owned by ``container``.

        Returns:
            The task id.
        """
        channel = spec.id
        task = TaskSpec(self.task_id(channel), spec.weight, spec.colocate_with, spec.stateful)
        self.ids[task.id] = channel
        self.client.ensure_path(self.layout.tasks)
        self.client.ensure_path(self.layout.assignments(container))
        payload = encode(Assignment(task, container).to_json())
        tx = self.client.transaction()
        tx.create(self.layout.task(task.id), payload)
        tx.create(self.layout.assignment(container, task.id), payload)
        results = tx.commit()
        if any(isinstance(r, NodeExistsError) for r in results):
            self.table.submit(task)  # left by an earlier attempt: keep the node, move it
            self.table.set_owner(task.id, container)
        elif any(isinstance(r, Exception) for r in results):
            raise KazooException(f"cannot publish producer task {task.id}: {results!r}")
        return task.id

    def watch(self, callback: Callable[[str, Assignment | None], None]) -> None:
        """Calls ``callback(channel, assignment)`` for every published channel now and on change."""
        for task_id, channel in sorted(self.ids.items()):
            self._watches.append(
                DataWatch(self.client, self.layout.task(task_id), self._on_data(channel, callback))
            )

    @staticmethod
    def _on_data(
        channel: str, callback: Callable[[str, Assignment | None], None]
    ) -> Callable[[bytes | None, object], bool | None]:
        # Exactly two parameters: kazoo passes the event too to a function taking three.
        def on_data(data: bytes | None, _stat: object) -> bool | None:
            assignment = None
            if data is not None:
                try:
                    assignment = Assignment.from_json(decode(data))
                except (ValueError, KeyError):
                    logger.warning("malformed assignment of producer %s", channel)
            callback(channel, assignment)
            return None

        return on_data

    def complete_migration(self, channel: str) -> None:
        """Acknowledges a stateful hand-over of ``channel`` (its new host rebuilds it)."""
        self.table.complete_migration(self.task_id(channel))

    def withdraw(self) -> None:
        """Removes every published task (logs, never raises, on ZooKeeper errors)."""
        for task_id in sorted(self.ids):
            try:
                self.table.withdraw(task_id)
            except Exception as exc:  # the session may be closing with the run
                logger.debug("cannot withdraw producer task %s: %s", task_id, exc)
