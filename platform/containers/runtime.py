"""The operator container process: ``linkstream container --zk HOST:PORT``.

A container binds a ZeroMQ PULL endpoint (its data-plane address), registers it in
ZooKeeper membership with its capacity, and from then on follows three watches:

* the **run node** (:mod:`linkstream.scheduler.runs`): when a replay starts, the
  container builds a :class:`~linkstream.containers.replica.RunReplica` (an embedded
  engine with the run's static graphs), connects a PUSH socket to the driver and says
  *hello*; the driver answers with a *sync* message (dictionary and retained backlog)
  and then broadcasts every stream element and every tick;
* its **assignments** (:mod:`linkstream.scheduler.assignment`): the unit of placement is
  a query (task id = hash of the query name); an assigned query is registered in the
  replica and announced to the driver as *ready* from a given tick on; a query taken
  away is announced *unready* and unregistered once the driver has named another
  answerer and released it (so no tick the driver still sends to this container goes
  unanswered);
* its **drain request** (:mod:`linkstream.scheduler.membership`): once the coordinator
  has moved every task away and marks the drain complete, the container exits as soon
  as it holds no query.

Ticks name, for every due query, the container that answers it; every container still
updates all its queries at every tick (the engine's report-time semantics), and answers
with one ``result`` message per tick that names it.  All ZooKeeper callbacks only queue
events; the main loop applies them between messages, so the engine is used from one
thread only.
"""

from __future__ import annotations

import logging
import os
import queue
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException

from linkstream.containers.protocol import (
    Elements,
    Failed,
    Hello,
    Message,
    ProtocolError,
    Ready,
    Result,
    Tick,
    Unready,
    decode,
    encode,
)
from linkstream.containers.replica import RunReplica
from linkstream.containers.transport import LOOPBACK_ANY, Receiver, Sender
from linkstream.scheduler.assignment import Assignment, AssignmentTable
from linkstream.scheduler.layout import DEFAULT_ROOT
from linkstream.scheduler.membership import Membership
from linkstream.scheduler.registry import QueryNotFoundError, QueryRegistry
from linkstream.scheduler.runs import RunNode, RunSpec

logger = logging.getLogger(__name__)

POLL_S = 0.05
SEND_RETRY_S = 0.5
SHUTDOWN_S = 5.0


@dataclass
class _Slot:
    """A query registered in the replica and what the driver was told about it."""

    task: str
    reg_seq: int | None  # last tick processed before registration (None: before sync)
    announced: bool = False
    unready: int | None = None  # token of the pending unready announcement


class ContainerRuntime:
    """One operator container: membership, assignment watch, replica, data plane.

    Args:
        hosts: ZooKeeper connection string, optionally with a chroot (``h:p/chroot``).
        container_id: Container id; ``None`` lets ZooKeeper number it.
        capacity: Task (query) slots offered to the scheduler.
        bind: ZeroMQ endpoint to bind the data-plane PULL socket to.
        session_timeout: ZooKeeper session timeout in seconds (how fast a crash is seen).
        root: Cluster root inside the chroot.
    """

    def __init__(
        self,
        hosts: str,
        *,
        container_id: str | None = None,
        capacity: int = 16,
        bind: str = LOOPBACK_ANY,
        session_timeout: float = 10.0,
        root: str = DEFAULT_ROOT,
    ) -> None:
        self.hosts = hosts
        self.capacity = capacity
        self.root = root
        self.id: str = container_id or ""
        self._requested_id = container_id
        self._client = KazooClient(hosts=hosts, timeout=session_timeout)
        self._receiver = Receiver(bind, rcvhwm=10000)
        self.address = self._receiver.endpoint
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._membership: Membership | None = None
        self._table: AssignmentTable | None = None
        self._registry: QueryRegistry | None = None
        self._assigned: dict[str, Assignment] = {}
        self._run: RunSpec | None = None
        self._run_seen: str | None = None  # id of the run node as last seen by the watch
        self._spec_seen: RunSpec | None = None
        self._replica: RunReplica | None = None
        self._sender: Sender | None = None
        self._slots: dict[str, _Slot] = {}
        self._failed: set[str] = set()
        self._texts: dict[str, str] = {}
        self._owners: dict[str, str] = {}
        self._released = 0
        self._token = 0
        self._acked: set[tuple[str, str | None, str | None]] = set()
        self._drain: str | None = None
        self.results_sent = 0

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> str:
        """Connects to ZooKeeper, joins membership and starts the watches; returns the id."""
        self._client.start(timeout=30)
        self._membership = Membership(self._client, self.root)
        self._table = AssignmentTable(self._client, self.root)
        self._registry = QueryRegistry(self._client, self.root)
        meta = {"pid": os.getpid(), "host": socket.gethostname()}
        self.id = self._membership.join(self.capacity, self.address, self._requested_id, meta=meta)
        self._client.add_listener(self._on_state)
        self._table.watch_container(self.id, lambda tasks: self._events.put(("assign", tasks)))
        RunNode(self._client, self.root).watch(self._on_run)
        self._membership.watch_drain(self.id, lambda state: self._events.put(("drain", state)))
        logger.info("container %s listening at %s (capacity %d)", self.id, self.address, self.capacity)
        return self.id

    def _on_run(self, spec: RunSpec | None) -> None:
        self._run_seen = None if spec is None else spec.id
        self._spec_seen = spec
        self._events.put(("run", spec))

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: only queue.
        if state == KazooState.LOST:
            self._events.put(("lost", None))

    def run(self, stop: threading.Event | None = None) -> int:
        """Serves until ``stop`` is set or a completed drain lets this container go.

        Returns:
            The process exit status (0).
        """
        stop = stop or threading.Event()
        while not stop.is_set():
            self._handle_events()
            if self._drain == "complete" and not self._slots:
                logger.info("container %s drained; leaving", self.id)
                break
            frames = self._receiver.recv_frames(POLL_S)
            if frames is None:
                continue
            try:
                message = decode(frames)
            except ProtocolError as exc:
                logger.warning("%s: rejected malformed message: %s", self.id, exc)
                continue
            try:
                self._handle(message)
            except ProtocolError as exc:
                logger.error("%s: cannot apply a message of run %s: %s", self.id, self._run_id, exc)
        return 0

    def close(self) -> None:
        """Closes the data-plane sockets, then leaves membership and closes the session."""
        self.close_sockets()
        self.leave()

    def close_sockets(self) -> None:
        """Ends the current run and closes every ZeroMQ socket (never blocks for long)."""
        self._end_run()
        self._receiver.close()

    def leave(self) -> None:
        """Removes the membership node and closes the ZooKeeper session."""
        try:
            if self._membership is not None:
                self._membership.leave()
            self._client.stop()
            self._client.close()
        except KazooException:
            logger.debug("ZooKeeper already gone at close", exc_info=True)

    @property
    def _run_id(self) -> str | None:
        return None if self._run is None else self._run.id

    # ------------------------------------------------------------------ events

    def _handle_events(self) -> None:
        changed = False
        while True:
            try:
                kind, payload = self._events.get_nowait()
            except queue.Empty:
                break
            changed = True
            if kind == "assign":
                self._assigned = dict(payload)
            elif kind == "run":
                self._set_run(payload)
            elif kind == "lost":
                # The coordinator took this container for dead and the driver dropped it:
                # start the run afresh (a new hello brings a new sync from the driver).
                logger.warning("%s: ZooKeeper session lost; rejoining the run", self.id)
                spec = self._spec_seen
                self._end_run()
                self._set_run(spec)
            elif kind == "drain":
                self._drain = payload
                if payload:
                    logger.info("container %s: drain %s", self.id, payload)
        if changed:
            self._reconcile()

    def _set_run(self, spec: RunSpec | None) -> None:
        if spec is not None and spec.id == self._run_id:
            return
        self._end_run()
        if spec is None:
            return
        t0 = time.perf_counter()
        self._sender = Sender(spec.driver, sndhwm=10000, linger_ms=2000)
        try:
            replica = RunReplica(spec, log=lambda msg: logger.warning("%s: %s", self.id, msg))
        except (OSError, ValueError) as exc:
            logger.error("%s: cannot set up run %s: %s", self.id, spec.id, exc)
            self._run = spec  # just long enough to tell the driver
            self._send(Failed(spec.id, self.id, "", f"cannot set up the run: {exc}"))
            self._run = None
            self._sender.close(linger_ms=1000)
            self._sender = None
            return
        self._run, self._replica = spec, replica
        logger.info("%s: run %s set up in %.2fs", self.id, spec.id, time.perf_counter() - t0)
        self._send(Hello(spec.id, self.id, self.address))

    def _end_run(self) -> None:
        if self._replica is not None:
            r = self._replica
            logger.info(
                "%s: run %s ended after %d ticks (%d triples; %.2fs ingesting, %.2fs evaluating %d queries, "
                "%.2fs CPU)",
                self.id,
                self._run_id,
                r.ticks,
                r.triples,
                r.apply_seconds,
                r.tick_seconds,
                len(r.engine.queries),
                r.cpu_seconds,
            )
            self._replica.close()
        if self._sender is not None:
            self._sender.close(linger_ms=1000)
        self._run = self._replica = self._sender = None
        self._slots.clear()
        self._failed.clear()
        self._texts.clear()
        self._owners = {}
        self._released = 0

    def _send(self, message: Message) -> bool:
        """Sends to the driver, waiting out back-pressure while the run lasts."""
        sender, run = self._sender, self._run_id
        if sender is None:
            return False
        frames = encode(message)
        while not sender.offer_frames(frames, SEND_RETRY_S):
            if self._run_seen != run:
                logger.warning("%s: run %s ended with a message undelivered", self.id, run)
                return False
        return True

    # ------------------------------------------------------------------ assignments

    def _reconcile(self) -> None:
        """Brings the replica's queries in line with the assignment and the driver's ticks."""
        run, replica = self._run, self._replica
        if run is None or replica is None:
            self._ack_idle_handovers()
            return
        desired = {run.queries[t]: t for t in self._assigned if t in run.queries}
        for name, task in desired.items():
            slot = self._slots.get(name)
            if slot is None:
                if name in self._failed or not self._register(replica, name, task):
                    continue
                slot = self._slots[name] = _Slot(task, replica.last_seq if replica.synced else None)
            if slot.unready is not None:  # assigned back before it was released
                slot.unready, slot.announced = None, False
            if replica.synced and not slot.announced:
                reg = replica.last_seq if slot.reg_seq is None else slot.reg_seq
                slot.reg_seq = reg
                # A fresh RSTREAM query reports like an old one at once; ISTREAM/DSTREAM
                # need one update first so their deltas are relative to the last tick.
                first = reg + 1 if reg == 0 or replica.mode(name) == "RSTREAM" else reg + 2
                if self._send(Ready(run.id, self.id, name, first)):
                    slot.announced = True
        for name, slot in list(self._slots.items()):
            if name in desired:
                continue
            if slot.unready is None:
                self._token += 1
                slot.unready = self._token
                self._send(Unready(run.id, self.id, name, slot.unready))
            if self._owners.get(name) != self.id and self._released >= slot.unready:
                replica.unregister(name)
                del self._slots[name]
                logger.info("%s: released %s", self.id, name)

    def _register(self, replica: RunReplica, name: str, task: str) -> bool:
        assert self._registry is not None and self._run is not None
        try:
            text = self._texts.get(task) or self._registry.get(task).text
            self._texts[task] = text
            replica.register(name, text)
        except (QueryNotFoundError, KazooException):
            return False  # not readable yet (or ZooKeeper unreachable): the next event retries
        except Exception as exc:  # a query that cannot be planned must not stop the container
            logger.error("%s: cannot register %s: %s", self.id, name, exc)
            self._failed.add(name)
            self._send(Failed(self._run.id, self.id, name, str(exc)))
            return False
        logger.info("%s: registered %s (after tick %d)", self.id, name, replica.last_seq)
        return True

    def _ack_idle_handovers(self) -> None:
        # Without a replay there is no state to hand over: acknowledge moves at once.
        assert self._table is not None
        for task, a in self._assigned.items():
            key = (task, a.container, a.migrating_from)
            if a.migrating_from is not None and key not in self._acked:
                self._acked.add(key)
                try:
                    self._table.complete_migration(task)
                except KazooException as exc:
                    logger.warning("%s: cannot acknowledge hand-over of %s: %s", self.id, task, exc)

    # ------------------------------------------------------------------ data plane

    def _handle(self, message: Message) -> None:
        replica = self._replica
        if replica is None or getattr(message, "run", None) != self._run_id:
            return  # another run's message (or no run here any more)
        if isinstance(message, Elements):
            if message.sync_tick is None and not replica.synced:
                raise ProtocolError("elements before the sync message")
            replica.apply(message)
            if message.sync_tick is not None:
                logger.info("%s: synced at tick %d", self.id, message.sync_tick)
                self._reconcile()
        elif isinstance(message, Tick):
            self._owners = message.owners
            self._released = max(self._released, message.rel.get(self.id, 0))
            answer = [n for n in message.due if message.owners.get(n) == self.id]
            done = replica.tick(message.seq, message.c, answer)
            if answer:
                self._send(Result(message.run, self.id, message.seq, message.c, done.lines, done.missing))
                self.results_sent += 1
            if any(s.unready is not None for s in self._slots.values()):
                self._reconcile()
        else:
            logger.debug("%s: ignoring %s", self.id, type(message).__name__)


def serve(runtime: ContainerRuntime, stop: threading.Event) -> int:
    """Starts ``runtime``, runs it until ``stop`` or a completed drain, and closes it.

    Returns:
        The exit status; ``-1`` when leaving ZooKeeper did not finish within
        ``SHUTDOWN_S`` (ZooKeeper unreachable): kazoo's threads would then keep the
        interpreter from exiting, so the caller should end the process at once.
    """
    runtime.start()
    try:
        status = runtime.run(stop)
    finally:
        runtime.close_sockets()
        bounded = threading.Thread(target=runtime.leave, name="shutdown", daemon=True)
        bounded.start()
        bounded.join(SHUTDOWN_S)
    return -1 if bounded.is_alive() else status
