"""The operator container process: ``linkstream container --zk HOST:PORT``.

A container binds a ZeroMQ PULL endpoint (its data-plane address), registers it in
ZooKeeper membership with its capacity, and from then on follows three watches:

* the **run node** (:mod:`linkstream.scheduler.runs`): when a replay starts, the
  container builds a :class:`~linkstream.containers.replica.RunReplica` (an embedded
  engine with the run's static graphs), connects a PUSH socket to the driver and says
  *hello*; the driver answers with a *sync* message and then sends every tick and the
  stream elements: of every stream when the run broadcasts (``RunSpec.route``
  ``"broadcast"``), else only of the streams this container *subscribes* to -- the
  streams of the queries it holds or ZooKeeper assigned it.  It says so in a
  ``subscribe`` message whenever that set changes; the driver answers a new stream
  with its retained backlog (a *sync*) and from then on routes it here;
* its **assignments** (:mod:`linkstream.scheduler.assignment`): the unit of placement is
  a query (task id = hash of the query name); an assigned query is registered in the
  replica once every stream it reads is live here (subscribed and its backlog
  received), and announced to the driver as *ready* from a given tick on; a query taken
  away is announced *unready* and unregistered once the driver has named another
  answerer and released it (so no tick the driver still sends to this container goes
  unanswered);
  a query that *moves* here in a running replay (``migrating_from`` set) is not built
  from the stream buffers: the driver brings its operator state in a ``state`` message
  (snapshotted by the old owner on the driver's ``handover`` request) and the replica
  restores it (:mod:`linkstream.containers.takeover`);
* its **drain request** (:mod:`linkstream.scheduler.membership`): once the coordinator
  has moved every task away and marks the drain complete, the container exits as soon
  as it holds no query.

In a run with operator-level placement the driver also sends an ``optasks`` message
before the first tick: this container then runs the producer tasks it is given and
reads some of its queries' shared operators from other containers over its operator
edge socket (advertised in membership as ``ops``; see
:mod:`linkstream.containers.placement.tasks`).

Ticks name, for every due query, the container that answers it; every container still
updates all its queries at every tick (the engine's report-time semantics), and answers
with one ``result`` message per tick that names it.  When another container died, the
driver may send a ``recompute`` message: the reports that container owed, rebuilt here in
a scratch engine from the history the message carries and answered with ``recomputed``
(:mod:`linkstream.containers.recovery`).  All ZooKeeper callbacks only queue events; the
main loop applies them between messages, so the engine is used from one thread only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import socket
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import zmq
from kazoo.client import KazooState
from kazoo.exceptions import KazooException

from linkstream.containers.assigned import AssignedQueries
from linkstream.containers.cuts import CutGate
from linkstream.containers.forwarding import handle_forward
from linkstream.containers.messages import (
    Elements,
    Failed,
    Forward,
    Handover,
    Hello,
    Message,
    Owned,
    Recompute,
    Recomputed,
    Result,
    State,
    Tick,
)
from linkstream.containers.owned import EarlyRuns, OwnedApplier, OwnedSlice
from linkstream.containers.placement.tasks import OperatorPlane, decode_optasks, edge_endpoint, header_kind
from linkstream.containers.protocol import ProtocolError, decode, encode
from linkstream.containers.protofields import CAPS
from linkstream.containers.recovery import recompute
from linkstream.containers.rejoin import await_key, open_receiver
from linkstream.containers.remotestatic import StaticGauges
from linkstream.containers.replica import RunReplica
from linkstream.containers.security import Security, SecurityError

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer
from linkstream.containers.takeover import Slot, StateMigration
from linkstream.containers.taskcheckpoint import TaskCheckpoints
from linkstream.containers.transport import LOOPBACK_ANY, CurveKeys, Receiver, Sender
from linkstream.containers.wire import Frame, payload_bytes
from linkstream.metrics import ContainerMetrics, serve_metrics
from linkstream.scheduler.assignment import Assignment, AssignmentTable
from linkstream.scheduler.keyring import MEMBER_FIELD, KeyRing
from linkstream.scheduler.layout import DEFAULT_ROOT
from linkstream.scheduler.load import LoadReporter
from linkstream.scheduler.membership import Membership
from linkstream.scheduler.registry import QueryRegistry
from linkstream.scheduler.runs import RunNode, RunSpec, VanishedRun
from linkstream.store.remote import DEFAULT_CACHE_BYTES, RemoteStore, RemoteStoreError

logger = logging.getLogger(__name__)

POLL_S = 0.05
SEND_RETRY_S = 0.5
SHUTDOWN_S = 5.0


class ContainerRuntime(AssignedQueries, StateMigration, TaskCheckpoints):
    """One operator container: membership, assignment watch, replica, data plane.

    Args:
        hosts: ZooKeeper connection string, optionally with a chroot (``h:p/chroot``).
        container_id: Container id; ``None`` lets ZooKeeper number it.
        capacity: Task (query) slots offered to the scheduler.
        bind: ZeroMQ endpoint to bind the data-plane PULL socket to.
        session_timeout: ZooKeeper session timeout in seconds (how fast a crash is seen).
        root: Cluster root inside the chroot.
        metrics_port: Serve Prometheus ``/metrics`` on this port (0: a free one) and
            advertise it in membership as ``metrics``; ``None`` serves nothing.
        metrics_addr: Address the metrics server binds.
        security: ZooKeeper credential and CURVE keys (:mod:`linkstream.containers.security`);
            ``None``: insecure (open ACLs, plaintext sockets).  Secure: both bound sockets
            (data plane, operator edges) admit only keys published in ZooKeeper, and this
            container publishes its public key in its membership node.
        remote_store: Read static graphs from the store nodes advertised in ZooKeeper
            (:mod:`linkstream.containers.remotestatic`) instead of loading the run's files.
        cache_bytes: Capacity of the remote store's block cache.
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
        metrics_port: int | None = None,
        metrics_addr: str = "127.0.0.1",
        security: Security | None = None,
        remote_store: bool = False,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        self.hosts = hosts
        self._remote_opts = (remote_store, cache_bytes)
        self._remote: RemoteStore | None = None
        self.security = security or Security.insecure()
        self.metrics = ContainerMetrics()
        self.metrics.capacity.set(capacity)
        self._static_gauges = StaticGauges(self.metrics.registry)
        self.metrics_port = metrics_port
        self.metrics_addr = metrics_addr
        self._metrics_server: WSGIServer | None = None
        self._burst = 0  # messages taken back to back from a non-empty inbox
        # the autoscaler's figures: wall time spent applying messages, published about once a second
        self._load: LoadReporter | None = None
        self._busy_s = 0.0
        self._busy_mark = (time.monotonic(), 0.0)
        self.capacity = capacity
        self.root = root
        self.id: str = container_id or ""
        self._requested_id = container_id
        self._client = self.security.kazoo(hosts, session_timeout)
        self._keyring = KeyRing(self._client, root)
        self._bind = bind
        self._receiver = self._data_socket()
        self.address = self._receiver.endpoint
        # Operator-level placement (opt-in per run): edges between producer and consumer tasks.
        self._ops = OperatorPlane(
            edge_endpoint(bind),
            self.metrics.registry,
            on_error=self._operator_error,
            server_keys=self.security.server(self._client, root, self.metrics.on_reject("ops")),
            curve_for=self._peer_keys,
        )
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._membership: Membership | None = None
        self._table: AssignmentTable | None = None
        self._registry: QueryRegistry | None = None
        self._assigned: dict[str, Assignment] = {}
        self._run: RunSpec | None = None
        self._run_seen: str | None = None  # id of the run node as last seen by the watch
        self._spec_seen: RunSpec | None = None
        self._replica: RunReplica | None = None
        #: ticks (and the messages after them) wait here for their cuts (``--ingest direct``)
        self._applier: OwnedApplier | None = None
        self._gate: CutGate[int, Message] = self._new_gate()
        self._gated = False
        self._sender: Sender | None = None
        self._slots: dict[str, Slot] = {}
        self._firsts: dict[str, int] = {}
        self._failed: set[str] = set()
        self._texts: dict[str, str] = {}
        self._owners: dict[str, str] = {}
        self._released = 0
        self._token = 0
        self._acked: set[tuple[str, str | None, str | None]] = set()
        self._rebuild: set[str] = set()  # moved here, but its state came before its streams
        self._restore_wait: dict[str, list[float]] = {}  # taken from a dead container (assigned.py)
        self._units_in: dict[str, tuple[int, int]] = {}  # moved here with a router unit: (bytes, rows)
        self._drain: str | None = None
        self.results_sent = 0
        self._vanished = VanishedRun(self._client, root, max(10.0, 3 * session_timeout))

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> str:
        """Connects to ZooKeeper, joins membership and starts the watches; returns the id."""
        meta: dict[str, Any] = {"pid": os.getpid(), "host": socket.gethostname(), "ops": self._ops.address}
        if self.security.enabled:
            meta[MEMBER_FIELD] = self.security.public_text  # drivers and peers connect with it
        if self.metrics_port is not None:
            self._metrics_server, port = serve_metrics(
                self.metrics.registry, self.metrics_port, self.metrics_addr
            )
            self.metrics_port = port
            meta["metrics"] = f"{self.metrics_addr}:{port}"
        self._client.start(timeout=30)
        self.metrics.zookeeper_state(self._client.state)
        self._membership = Membership(self._client, self.root)
        self._table = AssignmentTable(self._client, self.root)
        self._registry = QueryRegistry(self._client, self.root)
        self.id = self._membership.join(self.capacity, self.address, self._requested_id, meta=meta)
        self.metrics.identify(self.id)
        self._load = LoadReporter(self._client, self.id, self.root)
        self._client.add_listener(self._on_state)
        self._table.watch_container(self.id, lambda tasks: self._events.put(("assign", tasks)))
        RunNode(self._client, self.root).watch(self._on_run)
        self._membership.watch_drain(self.id, lambda state: self._events.put(("drain", state)))
        logger.info("container %s listening at %s (capacity %d)", self.id, self.address, self.capacity)
        return self.id

    def _data_socket(self) -> Receiver:
        return open_receiver(
            self._bind, lambda: self.security.server(self._client, self.root, self.metrics.on_reject("data"))
        )

    def _peer_keys(self, cid: str) -> CurveKeys | None:
        """CURVE keys to connect to container ``cid``'s sockets (``None``: plaintext)."""
        if not self.security.enabled:
            return None
        return self.security.client(self._keyring.public_key(cid), f"container {cid}")

    def _on_run(self, spec: RunSpec | None) -> None:
        self._run_seen = None if spec is None else spec.id
        self._spec_seen = spec
        self._events.put(("run", spec))

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's connection thread: only queue (and count).
        self.metrics.zookeeper_state(state)
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
            # Producer channels of an operator-placement run stay until a newer host of
            # theirs runs (``ophosting``), or their consumers would starve.
            if self._drain == "complete" and not self._slots and not self._ops.producers:
                logger.info("container %s drained; leaving", self.id)
                break
            waiting = bool(cast(int, self._receiver.socket.getsockopt(zmq.EVENTS)) & zmq.POLLIN)
            if waiting:
                self._burst += 1
            else:
                self.metrics.queue_depth.set(self._burst)
                self._burst = 0
            self._ops.poll()  # operator-edge control (a producer moving here) while idle
            self._report_load()
            self._send_task_acks()
            frames = self._receiver.recv_frames(POLL_S)
            if frames is None:
                continue
            try:
                message = decode(frames)
            except ProtocolError as exc:
                if header_kind(frames) == "optasks":
                    self._configure_operators(frames)
                    continue
                if self._task_checkpoint(frames):  # a cluster checkpoint's (:mod:`.taskcheckpoint`)
                    continue
                logger.warning("%s: rejected malformed message: %s", self.id, exc)
                self.metrics.received_messages.labels("malformed").inc()
                continue
            self.metrics.received_messages.labels(_KINDS.get(type(message), "other")).inc()
            self.metrics.received_bytes.inc(payload_bytes(frames))
            t0 = time.perf_counter()
            try:
                self._handle(message)
            except ProtocolError as exc:
                logger.error("%s: cannot apply a message of run %s: %s", self.id, self._run_id, exc)
            busy = time.perf_counter() - t0
            self._busy_s += busy
            self.metrics.busy_seconds.inc(busy)
        return 0

    def _report_load(self) -> None:
        """Publishes the autoscaler's figures (:mod:`linkstream.scheduler.load`), at most once a second."""
        if self._load is None or not self._load.due():
            return
        now = time.monotonic()
        at, busy_before = self._busy_mark
        self._busy_mark = (now, self._busy_s)
        busy = min(1.0, (self._busy_s - busy_before) / (now - at)) if now > at else 0.0
        self._load.publish(
            {"role": "container", "busy": round(busy, 4), "queue": self._burst, "tasks": len(self._assigned)}
        )

    def close(self) -> None:
        """Closes the data-plane sockets, then leaves membership and closes the session."""
        self.close_sockets()
        self.leave()

    def close_sockets(self) -> None:
        """Ends the current run and closes every ZeroMQ socket (never blocks for long)."""
        self._end_run()
        self._receiver.close()
        self._ops.close()
        if self._metrics_server is not None:
            self._metrics_server.shutdown()
            self._metrics_server = None

    def leave(self) -> None:
        """Removes the membership node and closes the ZooKeeper session."""
        if self._remote is not None:
            self._remote.close()
            self._remote = None
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
                if payload is None and self._run is not None and self._vanished.hold(self._run):
                    continue  # its driver may publish it again (a ZooKeeper outage)
                self._set_run(payload)
            elif kind == "lost":
                # The coordinator took this container for dead and the driver dropped it:
                # start the run afresh (a new hello brings a new sync from the driver).
                logger.warning("%s: ZooKeeper session lost; rejoining the run", self.id)
                spec = self._spec_seen
                # Its tasks went with its session: what the index holds under the new one
                # comes next (the assignment watch reads it again once reconnected).
                self._assigned = {}
                self._end_run()
                self._receiver.close()  # what the driver sent before (in flight) must not reach the new run
                self._receiver = self._data_socket()
                if self._receiver.endpoint != self.address and self._membership is not None:
                    self.address = self._receiver.endpoint
                    with contextlib.suppress(KazooException):  # re-registration uses it either way
                        self._membership.update(address=self.address)
                self._await_key()
                self._set_run(spec)
            elif kind == "drain":
                self._drain = payload
                if payload:
                    logger.info("container %s: drain %s", self.id, payload)
        if self._vanished.over():
            self._set_run(None)  # its driver did not come back
            changed = True
        if changed:
            self._reconcile()
            self.metrics.tasks.set(len(self._assigned))
            self.metrics.queries_registered.set(len(self._slots))

    def _await_key(self, timeout: float = 10.0) -> None:
        """Waits until this container's key is published again (after a lost session)."""
        if self.security.enabled and not await_key(self._keyring, self.id, timeout):
            logger.warning("%s: key not republished within %gs; rejoining anyway", self.id, timeout)

    def _set_run(self, spec: RunSpec | None) -> None:
        self._vanished.clear()
        run = self._run  # the same run, unless another driver took it over (results go elsewhere)
        if spec is not None:
            self._texts.update(spec.texts)  # the texts the run carries (no registry read per query)
        if spec is not None and run is not None and (spec.id, spec.driver) == (run.id, run.driver):
            if spec != self._run and self._replica is not None:
                # A live service's run grows: new queries and streams (same indexes for old ones).
                try:
                    self._replica.extend(spec)
                    self._run = spec
                except ProtocolError as exc:
                    logger.error("%s: cannot follow run %s: %s", self.id, spec.id, exc)
            return
        self._end_run()  # (clears the texts)
        if spec is None:
            return
        self._texts.update(spec.texts)
        t0 = time.perf_counter()
        try:
            curve = self.security.client(spec.driver_key, f"the driver of run {spec.id}")
        except SecurityError as exc:
            logger.error("%s: cannot join run %s: %s", self.id, spec.id, exc)
            return
        self._sender = Sender(spec.driver, sndhwm=10000, linger_ms=2000, curve_keys=curve)
        try:
            if self._remote_opts[0] and self._remote is None:
                self._remote = RemoteStore(
                    client=self._client,
                    root=self.root,
                    cache_bytes=self._remote_opts[1],
                    curve_client=self.security.client,  # CURVE to store nodes' TCP servers
                )
            remote = self._remote
            replica = RunReplica(spec, log=lambda msg: logger.warning("%s: %s", self.id, msg), remote=remote)
        except (OSError, ValueError, RemoteStoreError) as exc:
            logger.error("%s: cannot set up run %s: %s", self.id, spec.id, exc)
            self._run = spec  # just long enough to tell the driver
            self._send(Failed(spec.id, self.id, "", f"cannot set up the run: {exc}"))
            self._run = None
            self._sender.close(linger_ms=1000)
            self._sender = None
            return
        self._run, self._replica = spec, replica
        self._ops.bind(self.id, spec.id, replica, spec.base)
        self.metrics.runs.inc()
        replica.preplan(self._run_texts(spec))
        self._static_gauges.update(replica.static_stats())
        logger.info("%s: run %s set up in %.2fs", self.id, spec.id, time.perf_counter() - t0)
        self._send(Hello(spec.id, self.id, self.address, CAPS))

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
        self._ops.reset()
        if self._sender is not None:
            self._sender.close(linger_ms=1000)
        self._run = self._replica = self._sender = None
        self._gate, self._gated = self._new_gate(), False
        self._slots.clear()
        self._failed.clear()
        self._rebuild.clear()
        self._restore_wait.clear()
        self._firsts.clear()
        self._texts.clear()
        self._owners = {}
        self._released = 0

    def _send(self, message: Message | list[Frame]) -> bool:
        """Sends to the driver (a message or its frames), waiting out back-pressure while the run lasts."""
        sender, run = self._sender, self._run_id
        if sender is None:
            return False
        frames = message if isinstance(message, list) else encode(message)
        while not sender.offer_frames(frames, SEND_RETRY_S):
            self.metrics.backpressure.inc()
            if self._run_seen != run:
                logger.warning("%s: run %s ended with a message undelivered", self.id, run)
                return False
        self.metrics.sent_messages.inc()
        self.metrics.sent_bytes.inc(payload_bytes(frames))
        return True

    # ------------------------------------------------------------------ data plane

    def _handle(self, message: Message) -> None:
        replica = self._replica
        if replica is None or getattr(message, "run", None) != self._run_id:
            return  # another run's message (or no run here any more)
        m = self.metrics
        if isinstance(message, Elements):
            if message.sync_tick is None and not replica.synced:
                raise ProtocolError("elements before the sync message")
            t0 = time.perf_counter()
            # --ingest direct: a stream received before this sync goes on at the count the owners'
            # runs brought it to (the sync's count may be ahead of runs still on their way)
            kept = {j: replica.counts[j] for j in replica.live} if message.owners else {}
            replica.apply(message)
            for j, n in kept.items():
                if j in replica.live:
                    replica.counts[j] = n
            m.batch_latency.observe(time.perf_counter() - t0)
            m.ingest_elements.inc(message.meta.shape[1])
            if message.meta.shape[1]:
                counts = np.bincount(message.meta[0], minlength=len(replica.spec.streams)).tolist()
                for iri, n in zip(replica.spec.streams, counts):
                    if n:
                        m.stream_elements.labels(iri).inc(n)
            m.ingest_triples.inc(len(message.triples))
            if message.sync_tick is not None:
                logger.info(
                    "%s: synced at tick %d (streams %s live)",
                    self.id,
                    message.sync_tick,
                    sorted(replica.live),
                )
                self._reconcile()
            for j in {*message.meta[0].tolist(), *message.streams}:  # ticks waiting for these go
                self._gate.reached(replica.spec.streams[j], replica.counts[j])
            if message.sync_tick is not None:  # owners' runs that came before their stream's sync
                index = {iri: j for j, iri in enumerate(replica.spec.streams)}
                self._early.release(lambda s: index[s] in replica.live, self._gate.elements)
                self._early.forget(lambda s: index[s] in replica.wanted)
        elif isinstance(message, Owned):
            self._owned(replica, message)
        elif isinstance(message, (Tick, Handover, State, Recompute)):
            cuts = self._cuts(replica, message)
            if cuts and not self._gated:
                self._gated = True  # once per run: a diagnostic (and what the cluster tests look for)
                logger.info(
                    "%s: run %s: ticks wait for their cuts (first: %s)", self.id, replica.spec.id, cuts
                )
            if cuts or self._gate.waiting:  # after every tick that waits, in order
                self._gate.tick(cuts, message)
            else:
                self._dispatch(replica, message)
        else:
            logger.debug("%s: ignoring %s", self.id, type(message).__name__)

    def _new_gate(self) -> CutGate[int, Message]:
        self._early = EarlyRuns()
        return CutGate(self._apply_owned, self._released_by_gate, bounded=True)

    def _owned(self, replica: RunReplica, message: Owned) -> None:
        """Elements from a stream's owner (``--ingest direct``): to the gate once the stream
        is live here, kept until its ``sync`` while only subscribed (:mod:`.owned`)."""
        j = replica.spec.streams.index(message.stream) if message.stream in replica.spec.streams else -1
        run = OwnedSlice(message)
        self.metrics.ingest_elements.inc(len(run))
        if j in replica.live:
            self._gate.elements(message.stream, message.first, run)
        elif j in replica.wanted:
            self._early.keep(message.stream, run)

    def _apply_owned(self, stream: str, run: Sequence[int]) -> None:
        replica = self._replica
        if replica is not None:
            if self._applier is None or self._applier.replica is not replica:
                self._applier = OwnedApplier(replica)
            self._applier(stream, run)

    def _cuts(self, replica: RunReplica, message: Message) -> dict[str, int]:
        """The cuts of a tick for the streams this container receives (live: subscribed and
        synced); the others' elements do not come here."""
        if not isinstance(message, Tick) or not message.cuts:
            return {}
        index = {iri: j for j, iri in enumerate(replica.spec.streams)}
        return {s: n for s, n in message.cuts.items() if index.get(s, -1) in replica.live}

    def _released_by_gate(self, message: Message) -> None:
        replica = self._replica
        if replica is None or getattr(message, "run", None) != self._run_id:
            return
        at = dict(zip(replica.spec.streams, replica.counts))
        beyond = {s: (n, at[s]) for s, n in self._cuts(replica, message).items() if at[s] > n}
        if beyond:  # elements after the tick were applied before it (cut, count): its order broke
            logger.error("%s: a tick was evaluated after elements beyond its cuts: %s", self.id, beyond)
        self._dispatch(replica, message)

    def _dispatch(self, replica: RunReplica, message: Message) -> None:
        """A tick, hand-over, state or recompute message, once the ticks before it went."""
        m = self.metrics
        if isinstance(message, Tick):
            self._owners = message.owners
            self._released = max(self._released, message.rel.get(self.id, 0))
            answer = [n for n in message.due if message.owners.get(n) == self.id]
            later = self._not_yet(message.seq, answer)  # (named before it read their ready)
            t0 = time.perf_counter()
            if self._ops.active:
                self._ops.before_tick(message.seq, message.c)
            try:
                done = replica.tick(message.seq, message.c, [n for n in answer if n not in later])
            except RemoteStoreError as exc:  # static data no store node serves any more
                logger.error("%s: run %s: cannot read static data: %s", self.id, message.run, exc)
                self._send(Failed(message.run, self.id, "", f"cannot read static data: {exc}"))
                return
            if self._ops.active:
                self._ops.after_tick()
            if done.moved:
                self._units_restored(done.moved)
            m.report_latency.observe(time.perf_counter() - t0)
            self._static_gauges.update(replica.static_stats())
            m.watermark.set(message.c)
            m.reports.inc(len(done.lines))
            m.result_lines.inc(sum(len(v) for v in done.lines.values()))
            if answer:
                missing = [*done.missing, *later]  # (those the driver has recomputed)
                self._send(Result(message.run, self.id, message.seq, message.c, done.lines, missing, later))
                self.results_sent += 1
            if self._restore_wait or any(s.unready is not None for s in self._slots.values()):
                self._reconcile()
                m.queries_registered.set(len(self._slots))
        elif isinstance(message, Handover):
            self._hand_over(replica, message)
        elif isinstance(message, State):
            self._take_over(replica, message)
        elif isinstance(message, Forward):  # restored from the last checkpoint (:mod:`.forwarding`)
            self._send(self._forward(replica, message))
        elif isinstance(message, Recompute):
            # Reports a dead container owed (:mod:`linkstream.containers.recovery`).
            tasks = {n: t for t, n in replica.spec.queries.items()}
            texts = {n: x for n in message.queries if n in tasks and (x := self._text(tasks[n])) is not None}
            self._send(recompute(replica, texts, message, self.id))
            self._restore_refused(message.rebuild, forwarded=False)  # (if one waits: rebuild it)

    def _forward(self, replica: RunReplica, message: Forward) -> Recomputed:
        """A dead container's queries restored here from the last checkpoint (``forward``)."""
        tasks = {n: t for t, n in replica.spec.queries.items()}
        texts = {n: x for n in message.queries if n in tasks and (x := self._text(tasks[n])) is not None}

        def owned(name: str) -> str | None:
            return tasks[name] if tasks.get(name) in self._assigned else None

        stores = self.__dict__.setdefault("_forward_stores", {})
        before = set(self._slots)
        answer = handle_forward(self.id, replica, message, texts, owned, self._slots, stores)
        kept = set(self._slots) - before  # restored without a rebuild from the stream buffers
        self.metrics.task_moves.labels("restored").inc(len(kept))
        self._restore_refused([n for n in message.queries if n not in self._slots], forwarded=True)
        self._reconcile()  # a query adopted before its assignment registered it: announced ready
        return answer

    def _operator_error(self, message: str) -> None:
        if self._run is not None:
            self._send(Failed(self._run.id, self.id, "", f"operator placement: {message}"))

    def _configure_operators(self, frames: list[Any]) -> None:
        """Applies an ``optasks`` message: producers hosted here, remote inputs of queries here."""
        replica, run = self._replica, self._run
        if replica is None or run is None:
            return
        try:
            m = decode_optasks(frames)
            if m.run != run.id:
                return
            self._ops.configure(self.id, run.id, replica.engine, run.base, m)
        except Exception as exc:  # a plan that does not fit must fail the run, not the container
            logger.error("%s: cannot set up operator placement: %s", self.id, exc)
            self._send(Failed(run.id, self.id, "", f"operator placement: {exc}"))


_KINDS: dict[type, str] = {Elements: "elements", Owned: "owned", Tick: "tick"}


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
