"""The driver's side of producer moves: ZooKeeper in, ``ophost`` / ``opdrop`` out.

Once a run's producer channels are placed (:mod:`linkstream.cluster.placement.driver`),
:class:`ProducerController` publishes each as a ZooKeeper task owned by its container
(:class:`~linkstream.scheduler.producers.ProducerTasks`) and follows them on a thread of
its own: when the coordinator moves a channel (a drain, a rebalance onto a new
container, a dead host's failover), the sans-IO
:class:`~linkstream.scheduler.producers.ProducerPlacement` decides the new host and
generation, and the controller sends that container an ``ophost`` message on its
operator-edge socket (which a container reads even while it waits for a batch).  The
new host rebuilds the producer from its stream buffers and takes over on its own
(:mod:`linkstream.containers.placement.tasks`); the controller acknowledges the
stateful hand-over in ZooKeeper at once, since nothing has to be shipped.  A container
that leaves gets an ``opdrop`` sent to every other one, so no producer keeps sending
to it.  The thread ends with the run (its run node goes).

Every ZooKeeper callback only queues an event; one worker thread decides and sends, so
the edge sockets are used from that thread only.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from kazoo.client import KazooClient

from linkstream.containers.placement.messages import HostedProducer, encode_drop, encode_host
from linkstream.containers.transport import CurveKeys, Sender
from linkstream.scheduler.membership import Member, Membership
from linkstream.scheduler.producers import ProducerMove, ProducerPlacement, ProducerTasks
from linkstream.scheduler.runs import RunNode
from linkstream.scheduler.state import TaskSpec

logger = logging.getLogger(__name__)

SEND_TIMEOUT_S = 5.0


class ProducerController:
    """Keeps every producer channel of a run hosted where ZooKeeper says (see the module).

    Args:
        client: The driver's started kazoo client.
        root: Cluster root inside the chroot.
        run: The run id.
        producers: Channel -> its generation-1 hosting (consumers, query, cut ...).
        hosts: Channel -> initial host.
        members: The run's containers.
        curve_for: CURVE keys to connect to a container's edge socket, by its id
            (``None``: plaintext).
    """

    def __init__(
        self,
        client: KazooClient,
        root: str,
        run: str,
        producers: Mapping[str, HostedProducer],
        hosts: Mapping[str, str],
        members: Mapping[str, Member],
        curve_for: Callable[[str], CurveKeys | None] | None = None,
    ) -> None:
        self.curve_for = curve_for
        self.client = client
        self.root = root
        self.run = run
        self.producers = dict(producers)
        self.addresses: dict[str, str] = {c: str(m.meta.get("ops")) for c, m in members.items()}
        self.placement = ProducerPlacement(hosts, members)
        self.tasks = ProducerTasks(client, run, root)
        #: JSON-ready log of the moves (the run's placement summary shows it)
        self.moves: list[dict[str, Any]] = []
        self.gone: list[str] = []
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._senders: dict[str, Sender] = {}
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()
        self._member_watch: Any = None

    def start(self, specs: Sequence[TaskSpec]) -> None:
        """Publishes the channels' tasks with their hosts and starts following them."""
        for spec in specs:
            self.tasks.publish(spec, self.placement.hosts[spec.id])
        self._thread = threading.Thread(target=self._work, name=f"producers-{self.run}", daemon=True)
        self._thread.start()
        self.tasks.watch(lambda ch, a: self._queue.put(("owner", (ch, a))))
        self._member_watch = Membership(self.client, self.root).watch(
            lambda m: self._queue.put(("members", m))
        )
        RunNode(self.client, self.root).watch(lambda spec: self._queue.put(("run", spec)))

    def stop(self, timeout: float = 5.0) -> None:
        """Ends the worker (and closes its sockets)."""
        self._queue.put(("stop", None))
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # ------------------------------------------------------------------ worker

    def _work(self) -> None:
        try:
            while not self._stopped.is_set():
                kind, payload = self._queue.get()
                logger.debug("run %s: producer controller event %s %r", self.run, kind, payload)
                if kind == "stop":
                    break
                try:
                    if kind == "run" and (payload is None or payload.id != self.run):
                        break
                    if kind == "owner":
                        self._on_owner(*payload)
                    elif kind == "members":
                        self._on_members(payload)
                except Exception:  # a bad event must not end the run's failover
                    logger.exception("producer controller of run %s: event %s failed", self.run, kind)
        finally:
            self._stopped.set()
            if self._member_watch is not None:
                self._member_watch.stop()
            self.tasks.withdraw()
            for sender in self._senders.values():
                sender.close(linger_ms=0)
            self._senders.clear()

    def _on_owner(self, channel: str, assignment: Any) -> None:
        owner = None if assignment is None else assignment.container
        self._carry_out(self.placement.on_owner(channel, owner))
        if (
            assignment is not None
            and assignment.migrating_from is not None
            and assignment.container == self.placement.hosts.get(channel)
        ):
            # The new host rebuilds from its own buffers: nothing to wait for.
            self.tasks.complete_migration(channel)

    def _on_members(self, members: dict[str, Member]) -> None:
        for cid, m in members.items():
            ops = m.meta.get("ops")
            if isinstance(ops, str):
                self.addresses[cid] = ops
        gone, moves = self.placement.on_members(members)
        for cid in gone:
            self.gone.append(cid)
            logger.info("run %s: container %s left; producers stop sending to it", self.run, cid)
            for other in sorted(self.placement.live):
                self._send(other, encode_drop(self.run, cid))
            sender = self._senders.pop(cid, None)
            if sender is not None:
                sender.close(linger_ms=0)
        self._carry_out(moves)

    def _carry_out(self, moves: list[ProducerMove]) -> None:
        live = self.placement.live
        for mv in moves:
            base = self.producers[mv.channel]
            spec = replace(
                base,
                gen=mv.gen,
                to=[(c, a) for c, a in base.to if c in live or c == mv.dst],
                peers=[(c, self.addresses[c]) for c in sorted(live) if c != mv.dst and c in self.addresses],
            )
            sent = self._send(mv.dst, encode_host(self.run, spec))
            self.moves.append(
                {
                    "channel": mv.channel,
                    "from": mv.src,
                    "to": mv.dst,
                    "gen": mv.gen,
                    "reason": mv.reason,
                    "sent": sent,
                    "at": time.time(),
                }
            )
            logger.info(
                "run %s: producer %s moves %s -> %s (gen %d: %s)",
                self.run,
                mv.channel,
                mv.src,
                mv.dst,
                mv.gen,
                mv.reason,
            )

    def _send(self, cid: str, frames: list[Any]) -> bool:
        address = self.addresses.get(cid)
        if not address:
            logger.warning("run %s: no operator-edge address of %s", self.run, cid)
            return False
        sender = self._senders.get(cid)
        if sender is None:
            curve = None if self.curve_for is None else self.curve_for(cid)
            sender = self._senders[cid] = Sender(address, sndhwm=1000, linger_ms=1000, curve_keys=curve)
        if not sender.offer_frames(frames, SEND_TIMEOUT_S):
            logger.warning("run %s: %s takes no control message", self.run, cid)
            return False
        return True
