"""Operator-level placement in a cluster replay: producer tasks, remote inputs, edge data plane.

Opt-in mode (``linkstream replay ... --cluster N --placement operators``).  Queries are
still placed whole by the coordinator (the *consumer* tasks), and every container still
receives every stream element; what changes is the shared stream part of each plan (see
:mod:`linkstream.engine.cutting`): every *producer* channel (a shared join, route or
window scan signature, or one hash-partitioned instance of a join) runs on exactly one
container at a time, in a producer engine of its own
(:mod:`linkstream.containers.placement.producers`), and sends its delta of every tick to
the containers of its consumers over ZeroMQ (to its own container without a socket).
There the query's plan reads a :class:`RemoteInput` instead of its own copy of the
subplan (which is released); :mod:`linkstream.containers.placement.channels` says how
generations make a channel's deltas exact while its producer moves.

Producer channels are ZooKeeper tasks (:mod:`linkstream.scheduler.producers`) and move
when the coordinator moves them (drain, rebalance, a dead host): the driver sends the
new host ``ophost``; it builds the producer from its buffers, sends its whole state as
the first batch of the new generation, and tells the other containers ``ophosting``,
upon which the old host (if alive) stops.  Consumers never re-subscribe by hand: a
channel's batches carry the generation, whoever sends them.

Messages (never pickled):

``optasks`` (driver to container, on the driver's data-plane socket, before tick 1)
    msgpack header ``{"v": 1, "kind": "optasks", "run", "container", "host": [{"id",
    "query", "cut", "text", "to": [[container, address], ...], "gen", "part", "parts",
    "var", "peers"}], "remote": [{"query", "cut", "id", "channels", "var"}]}``: the
    producer channels this container hosts (planned from ``query``'s text, cut number
    ``cut``; instance ``part`` of ``parts`` partitioned on ``var``) with the edge
    addresses of their consumers, and the cuts of its own queries, each read through
    its producer's channels (also a producer hosted here: then without a socket).
``ophost`` / ``opdrop`` (driver to container, on the edge socket, any time)
    host a channel from a generation on (the ``optasks`` producer fields), or forget a
    container that left the run (no more batches to it).
``ophosting`` (new host to every other container, after its first batch)
    ``{"src", "id", "gen"}``: a container hosting an older generation of ``id`` stops.
``ophello`` (container to container, before the first batch of a producer on an edge)
    header ``{"v": 1, "kind": "ophello", "run", "src", "id", "fp"}``: the producer's
    :func:`~linkstream.engine.cutting.cut_fingerprint`.  The consumer compares it with
    its own cut's; a mismatch (the two plans numbered the shared join's variables
    differently) fails the run with a ``failed`` message instead of wrong results.
``opterms`` (container to container, before a batch that uses new ids)
    header ``{"v": 1, "kind": "opterms", "run", "src", "n"}``, then ``n`` int64 ids (the
    sender's dictionary) and a msgpack list of their N-Triples terms.  Every container
    has its own dictionary (computed terms make ids diverge), so the receiver encodes the
    terms and keeps a sender id -> local id table, as the replica does for the driver.
``batch`` (container to container)
    :mod:`linkstream.containers.wire`'s batch message: ``stream`` = channel id,
    ``task`` = ``run/sender``, ``epoch`` = generation, ``seq`` = tick sequence number,
    the delta's columns as raw int64 frames.  One per channel, consumer container and
    tick (empty included), so a consumer knows when a tick's input is complete.

A container sends its producers' deltas of a tick before it evaluates its own queries
(they read only the buffers), and while it waits for a batch it keeps handling edge
messages (an ``ophost`` among them), so containers waiting for each other progress.
Message formats live in :mod:`linkstream.containers.placement.messages` (re-exported here).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import msgpack

from linkstream.containers.placement.channels import Channel, RemoteInput
from linkstream.containers.placement.edges import EdgeCounters, EdgeLinks, EdgeMetrics
from linkstream.containers.placement.messages import (
    VERSION,
    HostedProducer,
    OperatorPlaneError,
    OpTasks,
    RemoteCut,
    decode_control,
    decode_optasks,
    encode_hosting,
    encode_optasks,
    header_kind,
)
from linkstream.containers.placement.partitions import TermHashes, foreign_rows
from linkstream.containers.placement.producers import Hosted, ProducerEngines, release_ops
from linkstream.containers.transport import LOOPBACK_ANY, CurveKeys, Receiver
from linkstream.containers.wire import BatchMessage, Frame, WireError
from linkstream.containers.wire import decode as wire_decode
from linkstream.engine.cutting import cut_fingerprint, cut_points, is_cut
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch

__all__ = [
    "EdgeCounters",
    "HostedProducer",
    "OpTasks",
    "OperatorPlane",
    "OperatorPlaneError",
    "RemoteCut",
    "RemoteInput",
    "decode_optasks",
    "edge_endpoint",
    "encode_optasks",
    "header_kind",
]

logger = logging.getLogger(__name__)

WAIT_TIMEOUT_S = 60.0


def edge_endpoint(bind: str) -> str:
    """The operator-edge endpoint next to a container's data-plane ``bind``: same host, any port.

    ``tcp://10.0.0.5:5601`` gives ``tcp://10.0.0.5:*``; other transports get a ``-ops``
    suffix (``ipc:///run/oc1`` gives ``ipc:///run/oc1-ops``).
    """
    if bind.startswith("tcp://"):
        host = bind[len("tcp://") :].rsplit(":", 1)[0]
        return f"tcp://{host}:*"
    return bind + "-ops"


def _above_cuts(root: Operator) -> list[Operator]:
    """The operators of a query above its cuts (the ones whose children may be cuts)."""
    out: list[Operator] = []
    seen: set[int] = set()
    stack = [root]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        out.append(op)
        for c in op.children:
            inner = c
            while isinstance(inner, AttachOperator):
                inner = inner.shared
            if not is_cut(inner) and not isinstance(c, RemoteInput):
                stack.append(c)
    return out


# ----------------------------------------------------------------------------- the plane


class OperatorPlane:
    """A container's side of operator placement: its edge socket, producers and inputs.

    Args:
        bind: Endpoint of the edge PULL socket (advertised in membership as ``ops``).
        registry: Prometheus registry to add the edge counters to (on first use).
        wait_timeout: Seconds a remote input waits for its producer before giving up.
        on_error: Receives a message when the run cannot be computed correctly here
            (the container reports it to the driver, which fails the run).
        server_keys: CURVE keys of the edge socket (``None``: plaintext).
        curve_for: CURVE keys to connect to a peer container's edge socket, by its id
            (``None``: plaintext).
    """

    def __init__(
        self,
        bind: str = LOOPBACK_ANY,
        registry: Any = None,
        wait_timeout: float = WAIT_TIMEOUT_S,
        on_error: Callable[[str], None] | None = None,
        server_keys: CurveKeys | None = None,
        curve_for: Callable[[str], CurveKeys | None] | None = None,
    ) -> None:
        self.receiver = Receiver(bind, rcvhwm=100000, curve_keys=server_keys)
        self.curve_for = curve_for
        self.address = self.receiver.endpoint
        self.wait_timeout = wait_timeout
        self.counters = EdgeCounters()
        self.on_error = on_error
        self.errors: list[str] = []
        self._registry = registry
        self._prom: EdgeMetrics | None = None
        self._reset_state()

    def _reset_state(self) -> None:
        self.run: str | None = None
        self.cid = ""
        self.engine: Any = None
        self.replica: Any = None
        self.base = ""
        self.engines: ProducerEngines | None = None
        self.channels: dict[str, Channel] = {}
        self.inputs: dict[str, RemoteInput] = {}
        self._fingerprints: dict[str, str] = {}
        self._greeted: dict[str, set[str]] = {}
        self._announced: set[tuple[str, int]] = set()
        self._waiting: list[HostedProducer] = []
        self.links: EdgeLinks | None = None
        self._queries_seen = -1
        self._live: set[str] = set()
        self._hashes: TermHashes | None = None
        self.seq = 0
        self.c: int | None = None

    @property
    def active(self) -> bool:
        """Whether a run is bound to the plane."""
        return self.run is not None

    @property
    def producers(self) -> dict[str, Hosted]:
        """The producer channels hosted here, by id."""
        return {} if self.engines is None else self.engines.hosted

    def _metrics(self) -> EdgeMetrics | None:
        if self._prom is None and self._registry is not None:
            self._prom = EdgeMetrics.create(self._registry)
        return self._prom

    # ------------------------------------------------------------------ set-up

    def bind(self, cid: str, run: str, replica: Any, base: str) -> None:
        """Binds a run's replica (its engine and buffers) to the plane; resets an older run."""
        if self.run == run and self.replica is replica:
            return
        if self.run is not None:
            self.reset()
        self._bind(cid, run, replica.engine, base, replica)

    def _bind(self, cid: str, run: str, engine: Any, base: str, replica: Any) -> None:
        self.run, self.cid, self.engine, self.replica, self.base = run, cid, engine, replica, base
        self.engines = ProducerEngines(engine, base)
        self._hashes = self.engines.hashes
        self.links = EdgeLinks(
            run,
            cid,
            engine.dictionary,
            self.counters,
            self._metrics(),
            lambda: self._receive(0.0),
            curve_for=self.curve_for,
        )

    def configure(self, cid: str, run: str, engine: Any, base: str, m: OpTasks) -> None:
        """Sets up the producers this container hosts and rewires its remote cuts.

        Raises:
            OperatorPlaneError: The message does not fit the registered queries.
        """
        if self.run != run or self.engine is not engine:
            if self.run is not None:
                self.reset()
            self._bind(cid, run, engine, base, None)
        for h in m.host:
            self.host(h, "placed")
        # Every query's cuts are found before any rewiring: rewiring one query changes the
        # operators it shares with the next.
        found: dict[str, list[Operator]] = {}
        for r in m.remote:
            if r.query not in found:
                rq = engine.queries.get(r.query)
                if rq is None:
                    raise OperatorPlaneError(f"{r.query} is not registered on {cid}")
                found[r.query] = cut_points(rq.root)
        targets: dict[str, dict[int, RemoteInput]] = {}
        for r in m.remote:
            cuts = found[r.query]
            if r.cut >= len(cuts):
                raise OperatorPlaneError(f"{r.query} has {len(cuts)} cuts here, not {r.cut + 1}")
            op = cuts[r.cut]
            channels = list(r.channels) or [r.id]
            remote = self.inputs.get(r.id)
            if remote is None:
                remote = self.inputs[r.id] = RemoteInput(self, r.id, channels, op.vars, op.certain)
                for i, ch in enumerate(channels):
                    part = (r.var, i, len(channels)) if len(channels) > 1 else None
                    self.channels.setdefault(ch, Channel(ch, op.vars, part))
            fp = cut_fingerprint(op)
            for ch in channels:
                self._fingerprints[ch] = fp
            targets.setdefault(r.query, {})[id(op)] = remote
        for name, mapping in targets.items():
            self._rewire(engine, name, mapping)

    def _rewire(self, engine: Any, name: str, mapping: dict[int, RemoteInput]) -> None:
        rq = engine.queries[name]
        for op in _above_cuts(rq.root):
            sub: dict[int, Operator] = {}
            for c in op.children:
                inner = c
                while isinstance(inner, AttachOperator):
                    inner = inner.shared
                if id(inner) in mapping:
                    sub[id(c)] = mapping[id(inner)]
            if sub:
                op.rebind(sub)
        reach = {id(o) for o in rq.root.walk()}
        release_ops(engine, [o for o in rq.ops if id(o) not in reach])
        remotes = [o for o in rq.root.walk() if isinstance(o, RemoteInput)]
        rq.ops = [o for o in rq.ops if id(o) in reach] + remotes
        rq.windows = [w for w in rq.windows if id(w) in reach]
        engine.replanned(rq)  # a remote input changes without a local window moving
        logger.info(
            "%s: %s reads %s remotely", self.cid, name, ", ".join(sorted({r.producer for r in remotes}))
        )

    # ------------------------------------------------------------------ hosting

    def host(self, spec: HostedProducer, reason: str = "moved") -> None:
        """Hosts channel ``spec.id`` from generation ``spec.gen`` on (now, or once synced).

        A container that joined the run mid-way builds nothing before its buffers are
        synced and it has seen a tick: the old host serves until then.
        """
        assert self.engines is not None
        current = self.engines.hosted.get(spec.id)
        if current is not None and current.gen >= spec.gen:
            return
        if not self._can_build():
            self._waiting = [w for w in self._waiting if w.id != spec.id] + [spec]
            return
        self.engines.host(spec)
        self._greeted[spec.id] = set()
        self.counters.hosted += 1
        prom = self._metrics()
        if prom is not None:
            prom.hostings.labels(reason).inc()
        if self.c is not None:
            self.flush()  # catch up at once: a consumer may be waiting for this tick

    def _can_build(self) -> bool:
        # Mid-run, a producer built now must catch up to a tick this container has seen.
        r = self.replica
        return r is None or (r.synced and (self.c is not None or r.last_seq == 0))

    def _host_waiting(self) -> None:
        if self._waiting and self._can_build():
            waiting, self._waiting = self._waiting, []
            for spec in waiting:
                self.host(spec)

    def _apply_control(self, frames: list[Frame]) -> None:
        kind, run, body = decode_control(frames)
        if run != self.run:
            return
        if kind == "ophost":
            try:
                self.host(body)
            except Exception as exc:  # a plan that does not fit fails the run, not the container
                self._fail(f"cannot host {body.id}: {exc}")
        elif kind == "ophosting":
            src, channel, gen = body
            # A deferred hosting that a newer generation overtook is moot.
            self._waiting = [w for w in self._waiting if w.id != channel or w.gen >= gen]
            h = self.producers.get(channel)
            if src != self.cid and h is not None and h.gen < gen:
                assert self.engines is not None
                self.engines.release(channel)
                self.counters.released += 1
                logger.info(
                    "%s: stops producer %s gen %d: gen %d runs on %s", self.cid, channel, h.gen, gen, src
                )
        elif kind == "opdrop":
            assert self.links is not None
            self.links.dropped.add(body)  # every send to it is skipped from now on

    # ------------------------------------------------------------------ per tick

    def before_tick(self, seq: int, c: int | None = None) -> None:
        """Called before the engine evaluates tick ``seq`` (report time ``c``).

        Sends the hosted producers' deltas of the tick first: they read only the buffers.
        """
        self.seq = seq
        if c is not None:
            self.c = c
            self._host_waiting()
            self.flush()

    def after_tick(self) -> None:
        """Sends what is still unsent of the tick and drops batches nobody here reads.

        Batches for remote inputs that no registered query reads any more (the query
        moved to another container) are dropped, so they do not pile up.
        """
        self.flush()
        if len(self.engine.queries) != self._queries_seen:
            self._queries_seen = len(self.engine.queries)
            self._live = {
                ch
                for rq in self.engine.queries.values()
                for o in rq.ops
                if isinstance(o, RemoteInput)
                for ch in o.channels
            }
        for ch, channel in self.channels.items():
            if ch not in self._live:
                channel.clear()

    def poll(self) -> None:
        """Handles every edge message already queued (the container's idle loop calls this)."""
        if self.run is None:
            return
        while self._receive(0.0):
            pass
        self._host_waiting()

    def flush(self) -> None:
        """Computes and sends every hosted channel's delta of the current tick (once)."""
        if self.engines is None or self.links is None or self.c is None or self.seq <= 0:
            return
        links = self.links
        for h, d in self.engines.deltas(self.seq, self.c):
            self._count_partition(h)
            for cid, address in list(h.spec.to):
                if cid == self.cid:
                    self._deliver(h.id, h.gen, self.seq, d, self.cid)
                    continue
                greeted = self._greeted.setdefault(h.id, set())
                if cid not in greeted:
                    hello = {"v": VERSION, "kind": "ophello", "run": self.run, "src": self.cid}
                    hello.update(id=h.id, fp=h.fingerprint)
                    if not links.offer(cid, address, [msgpack.packb(hello, use_bin_type=True)]):
                        continue
                    greeted.add(cid)
                links.send_batch(h.id, h.gen, self.seq, cid, address, d)
            key = (h.id, h.gen)
            if key not in self._announced:
                # The new generation's first batch is out: older hosts may stop.
                self._announced.add(key)
                for cid, address in h.spec.peers:
                    if cid != self.cid:
                        links.offer(cid, address, encode_hosting(self.run or "", self.cid, h.id, h.gen))

    def _count_partition(self, h: Hosted) -> None:
        prom = self._metrics()
        if h.partitions is None or prom is None:
            return
        rows_in = sum(p.rows_in for p in h.partitions)
        kept = sum(p.rows_kept for p in h.partitions)
        prom.partition_input_rows.labels(h.id, "in").inc(rows_in - h.reported[0])
        prom.partition_input_rows.labels(h.id, "kept").inc(kept - h.reported[1])
        h.reported = (rows_in, kept)

    # ------------------------------------------------------------------ receiving

    def _receive(self, timeout: float) -> bool:
        frames = self.receiver.recv_frames(timeout)
        if frames is None:
            return False
        if self.links is None:
            return True
        kind = header_kind(frames)
        try:
            if kind == "ophello":
                self._check_hello(frames)
                return True
            if kind in ("ophost", "ophosting", "opdrop"):
                self._apply_control(frames)
                return True
            if kind == "opterms":
                self.links.learn_terms(frames)
                return True
            message = wire_decode(frames)
        except (WireError, OperatorPlaneError) as exc:
            logger.warning("%s: rejected an operator-edge message: %s", self.cid, exc)
            return True
        if not isinstance(message, BatchMessage):
            return True
        run, _, src = message.task.partition("/")
        if run != self.run or message.stream not in self.channels:
            return True
        self.links.received(frames)
        try:
            batch = self.links.translate(src, message.batch)
        except OperatorPlaneError as exc:
            self._fail(str(exc))
            return True
        self._deliver(message.stream, message.epoch, message.seq, batch, src)
        return True

    def _deliver(self, ch: str, gen: int, seq: int, batch: Batch, src: str) -> None:
        channel = self.channels.get(ch)
        if channel is None:
            return
        if src == self.cid and ch in self._fingerprints:
            h = self.producers.get(ch)
            if h is not None and h.fingerprint != self._fingerprints[ch]:
                self.counters.mismatches += 1
                self._fail(f"producer {ch} here computes another plan than its consumers here")
        before = channel.gen
        if not channel.offer(gen, seq, batch):
            self.counters.stale += 1
            return
        if channel.gen != before and before:
            self.counters.resets += 1
            prom = self._metrics()
            if prom is not None:
                prom.takeovers.inc()
        if channel.partition is not None and len(batch) and self._hashes is not None:
            var, index, parts = channel.partition
            foreign = foreign_rows(batch, var, index, parts, self._hashes)
            self.counters.partition_rows += len(batch)
            self.counters.foreign_rows += foreign
            prom = self._metrics()
            if prom is not None:
                prom.partition_rows.labels(ch, "own").inc(len(batch) - foreign)
                if foreign:
                    prom.partition_rows.labels(ch, "foreign").inc(foreign)

    def _check_hello(self, frames: list[Frame]) -> None:
        try:
            h = msgpack.unpackb(memoryview(frames[0]), raw=False)
            run, src, pid, fp = str(h["run"]), str(h["src"]), str(h["id"]), str(h["fp"])
        except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
            raise OperatorPlaneError(f"ophello: malformed: {exc}") from exc
        if run != self.run or pid not in self._fingerprints:
            return
        if fp != self._fingerprints[pid]:
            self.counters.mismatches += 1
            self._fail(f"producer {pid} on {src} computes another plan than its consumer on {self.cid}")

    def _fail(self, message: str) -> None:
        logger.error("%s: %s", self.cid, message)
        self.errors.append(message)
        if self.on_error is not None:
            self.on_error(message)

    def take(self, ch: str) -> Batch:
        """The delta of channel ``ch`` for the tick being evaluated (waits for it)."""
        channel = self.channels[ch]
        deadline = time.monotonic() + self.wait_timeout
        while not channel.ready(self.seq):
            if self._receive(0.0):
                continue
            self._host_waiting()
            self.flush()  # our own producers first: the peer we wait for may wait for us
            if time.monotonic() > deadline:
                self.counters.waits_timed_out += 1
                self._fail(f"no delta of {ch} for tick {self.seq} within {self.wait_timeout:g}s")
                break
            self._receive(0.02)
        return channel.take(self.seq)

    def channel_state(self, ch: str) -> Batch:
        """Everything taken of channel ``ch`` so far."""
        return self.channels[ch].state()

    # ------------------------------------------------------------------ end

    def reset(self, log: Callable[[str], None] | None = None) -> None:
        """Ends the run's operator placement (sockets to peers closed, tables dropped)."""
        if self.run is not None:
            c = self.counters
            logger.info(
                "%s: operator edges of run %s: %d batches (%d bytes) sent, %d received, %d wait timeouts, "
                "%d hostings, %d released, %d resets",
                self.cid,
                self.run,
                c.batches_sent,
                c.bytes_sent,
                c.batches_received,
                c.waits_timed_out,
                c.hosted,
                c.released,
                c.resets,
            )
        if self.engines is not None:
            self.engines.close()
        if self.links is not None:
            self.links.close()
        self._reset_state()

    def close(self) -> None:
        """Closes every socket."""
        self.reset()
        self.receiver.close()
