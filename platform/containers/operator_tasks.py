"""Operator-level placement in a cluster replay: producer tasks, remote inputs, edge data plane.

Opt-in mode (``linkstream replay ... --cluster N --placement operators``).  Queries are
still placed whole by the coordinator (the *consumer* tasks), and every container still
receives every stream element; what changes is the shared stream part of each plan (see
:mod:`linkstream.scheduler.tasks`): every *producer* task (a shared join, route or
window scan signature) runs on exactly one container, which sends the operator's delta
of every tick to the containers of its consumers over ZeroMQ.  There the query's plan
reads a :class:`RemoteInput` instead of its own copy of the subplan (which is released).

Messages (never pickled):

``optasks`` (driver to container, on the driver's data-plane socket, before tick 1)
    msgpack header ``{"v": 1, "kind": "optasks", "run", "container", "host": [{"id",
    "query", "cut", "text", "to": [[container, address], ...]}], "remote": [{"query",
    "cut", "id"}]}``: the producers this container hosts (planned from ``query``'s text,
    cut number ``cut``) with the edge addresses of their consumers, and the cuts of its
    own queries that it must read remotely.
``ophello`` (container to container, before the first batch of a producer on an edge)
    header ``{"v": 1, "kind": "ophello", "run", "src", "id", "fp"}``: the producer's
    :func:`~linkstream.scheduler.tasks.cut_fingerprint`.  The consumer compares it with
    its own cut's; a mismatch (the two plans numbered the shared join's variables
    differently) fails the run with a ``failed`` message instead of wrong results.
``opterms`` (container to container, before a batch that uses new ids)
    header ``{"v": 1, "kind": "opterms", "run", "src", "n"}``, then ``n`` int64 ids (the
    sender's dictionary) and a msgpack list of their N-Triples terms.  Every container
    has its own dictionary (computed terms make ids diverge), so the receiver encodes the
    terms and keeps a sender id -> local id table, as the replica does for the driver.
``batch`` (container to container)
    :mod:`linkstream.containers.wire`'s batch message: ``stream`` = producer task id,
    ``task`` = ``run/sender``, ``seq`` = tick sequence number, the delta's columns as
    raw int64 frames.  One per producer, consumer container and tick (empty included),
    so a consumer knows when a tick's input is complete.

A consumer waits for the batch of the tick it evaluates.  While waiting it computes and
sends its own producers' deltas for that tick first (they read only local windows), so
two containers waiting for each other always make progress.
Message formats live in :mod:`linkstream.containers.operator_messages` (re-exported here).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack
import numpy as np

from linkstream.containers.groupings import AllGrouping
from linkstream.containers.operator_messages import (
    VERSION,
    HostedProducer,
    OperatorPlaneError,
    OpTasks,
    RemoteCut,
    decode_optasks,
    decode_terms,
    encode_optasks,
    encode_terms,
    header_kind,
)
from linkstream.containers.transport import LOOPBACK_ANY, Receiver, Sender
from linkstream.containers.wire import BatchMessage, Frame, WireError, encode_batch, payload_bytes
from linkstream.containers.wire import decode as wire_decode
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch, concat, consolidate
from linkstream.query.continuous import parse_continuous
from linkstream.scheduler.tasks import cut_fingerprint, cut_points, is_cut

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
_ALL = AllGrouping()

WAIT_TIMEOUT_S = 60.0
SEND_TIMEOUT_S = 30.0


def _id_vars(vars_: tuple[str, ...]) -> list[int]:
    """Columns holding dictionary ids (timestamp columns of timed scans do not)."""
    return [i for i, v in enumerate(vars_) if not v.startswith("%t")]


def edge_endpoint(bind: str) -> str:
    """The operator-edge endpoint next to a container's data-plane ``bind``: same host, any port.

    ``tcp://10.0.0.5:5601`` gives ``tcp://10.0.0.5:*``; other transports get a ``-ops``
    suffix (``ipc:///run/oc1`` gives ``ipc:///run/oc1-ops``).
    """
    if bind.startswith("tcp://"):
        host = bind[len("tcp://") :].rsplit(":", 1)[0]
        return f"tcp://{host}:*"
    return bind + "-ops"


# ----------------------------------------------------------------------------- operators


class RemoteInput(Operator):
    """Stands in a consumer's plan for a producer that runs on another container.

    Its delta at an epoch is what the producer sent for the tick being evaluated (and for
    any earlier tick nobody pulled), translated into this container's dictionary ids.
    """

    #: its output changes whenever the producer's does: the engine must pull it every epoch
    event_driven = False

    def __init__(
        self, plane: OperatorPlane, producer: str, vars_: tuple[str, ...], certain: frozenset[str]
    ) -> None:
        super().__init__()
        self.plane = plane
        self.producer = producer
        self.vars = vars_
        self.certain = certain
        self._seen: list[Batch] = []

    def describe(self) -> str:
        return f"RemoteInput {self.producer}"

    def compute(self, epoch: int) -> Batch:
        d = self.plane.take(self.producer, self.vars)
        if len(d):
            self._seen.append(d)
            if len(self._seen) > 64:
                self._seen = [consolidate(concat(self._seen, self.vars))]
        return d

    def current(self) -> Batch:
        if not self._seen:
            return Batch.empty(self.vars)
        self._seen = [consolidate(concat(self._seen, self.vars))]
        return self._seen[0]


def _release(engine: Any, ops: list[Operator]) -> None:
    """Drops one reference to each of ``ops`` in ``engine`` (as ``Engine.unregister`` does)."""
    refs: dict[int, int] = engine._refs
    dead = []
    for op in ops:
        if isinstance(op, (AttachOperator, RemoteInput)):
            continue
        n = refs.get(id(op), 0) - 1
        if n <= 0:
            refs.pop(id(op), None)
            dead.append(op)
        else:
            refs[id(op)] = n
    for op in dead:
        sig = getattr(op, "sig", None)
        if sig is not None and engine.operators.get(sig) is op:
            del engine.operators[sig]
    for op in dead:
        op.discard()
    engine._sharing.forget(dead)


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


@dataclass
class _Producer:
    op: Operator
    to: list[tuple[str, str]]
    fingerprint: str = ""
    sent_seq: int = 0
    greeted: set[str] = field(default_factory=set)


@dataclass
class _Peer:
    sender: Sender
    known: np.ndarray = field(default_factory=lambda: np.zeros(1024, dtype=bool))


@dataclass
class EdgeCounters:
    """Operator-edge traffic of one container (also exported as Prometheus counters)."""

    batches_sent: int = 0
    batches_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    rows_sent: int = 0
    terms_sent: int = 0
    waits_timed_out: int = 0
    mismatches: int = 0


class OperatorPlane:
    """A container's side of operator placement: its edge socket, producers and inputs.

    Args:
        bind: Endpoint of the edge PULL socket (advertised in membership as ``ops``).
        registry: Prometheus registry to add the edge counters to (on first use).
        wait_timeout: Seconds a remote input waits for its producer before giving up.
        on_error: Receives a message when the run cannot be computed correctly here
            (the container reports it to the driver, which fails the run).
    """

    def __init__(
        self,
        bind: str = LOOPBACK_ANY,
        registry: Any = None,
        wait_timeout: float = WAIT_TIMEOUT_S,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.receiver = Receiver(bind, rcvhwm=100000)
        self.address = self.receiver.endpoint
        self.wait_timeout = wait_timeout
        self.counters = EdgeCounters()
        self.on_error = on_error
        self.errors: list[str] = []
        self._registry = registry
        self._prom: tuple[Any, Any] | None = None
        self._reset_state()

    def _reset_state(self) -> None:
        self.run: str | None = None
        self.cid = ""
        self.engine: Any = None
        self.producers: dict[str, _Producer] = {}
        self.inputs: dict[str, RemoteInput] = {}
        self._fingerprints: dict[str, str] = {}
        self._queries_seen = -1
        self._live: set[str] = set()
        self._peers: dict[str, _Peer] = {}
        self._inbox: dict[str, dict[int, Batch]] = {}
        self._xlate: dict[str, np.ndarray] = {}
        self.seq = 0
        self._epoch = -1

    @property
    def active(self) -> bool:
        """Whether the current run uses operator placement on this container."""
        return self.run is not None

    def _metrics(self) -> tuple[Any, Any] | None:
        if self._prom is None and self._registry is not None:
            from prometheus_client import Counter

            self._prom = (
                Counter(
                    "linkstream_operator_edge_batches",
                    "Operator-edge batches between containers",
                    ["direction"],
                    registry=self._registry,
                ),
                Counter(
                    "linkstream_operator_edge_bytes",
                    "Operator-edge bytes between containers",
                    ["direction"],
                    registry=self._registry,
                ),
            )
        return self._prom

    # ------------------------------------------------------------------ set-up

    def configure(self, cid: str, run: str, engine: Any, base: str, m: OpTasks) -> None:
        """Sets up the producers this container hosts and rewires its remote cuts.

        Raises:
            OperatorPlaneError: The message does not fit the registered queries.
        """
        self.run, self.cid, self.engine = run, cid, engine
        self._metrics()
        # Producers first: a cut hosted here stays local for the queries here.
        for h in m.host:
            if h.id in self.producers:
                continue
            cq = parse_continuous(h.text, default_name=h.query, base=base)
            hidden = replace(cq, name=f"__op__/{h.id}")
            rq = engine.register(hidden)
            del engine.queries[hidden.name]  # never evaluated as a query: only its cut is pulled
            cuts = cut_points(rq.root)
            if h.cut >= len(cuts):
                raise OperatorPlaneError(f"{h.query} has {len(cuts)} cuts here, not {h.cut + 1}")
            op = cuts[h.cut]
            keep = {id(o) for o in op.walk()}
            _release(engine, [o for o in rq.ops if id(o) not in keep])
            self.producers[h.id] = _Producer(op, list(h.to), cut_fingerprint(op))
            logger.info("%s: hosts producer %s (%s) for %d container(s)", cid, h.id, op.describe(), len(h.to))
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
            remote = self.inputs.get(r.id)
            if remote is None:
                remote = self.inputs[r.id] = RemoteInput(self, r.id, op.vars, op.certain)
                self._inbox.setdefault(r.id, {})
            self._fingerprints[r.id] = cut_fingerprint(op)
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
        _release(engine, [o for o in rq.ops if id(o) not in reach])
        remotes = [o for o in rq.root.walk() if isinstance(o, RemoteInput)]
        rq.ops = [o for o in rq.ops if id(o) in reach] + remotes
        rq.windows = [w for w in rq.windows if id(w) in reach]
        rq._quiet = False  # a remote input changes without a local window moving
        logger.info(
            "%s: %s reads %s remotely", self.cid, name, ", ".join(sorted({r.producer for r in remotes}))
        )

    # ------------------------------------------------------------------ per tick

    def before_tick(self, seq: int) -> None:
        """Called before the engine evaluates tick ``seq``."""
        self.seq = seq
        self._epoch = self.engine.epoch + 1

    def after_tick(self) -> None:
        """Sends the producers' deltas of the tick nobody here pulled yet.

        Batches for remote inputs that no registered query reads any more (the query
        moved to another container) are dropped, so they do not pile up.
        """
        self.flush()
        if len(self.engine.queries) != self._queries_seen:
            self._queries_seen = len(self.engine.queries)
            self._live = {
                o.producer
                for rq in self.engine.queries.values()
                for o in rq.ops
                if isinstance(o, RemoteInput)
            }
        for pid, box in self._inbox.items():
            if pid not in self._live and box:
                box.clear()

    def flush(self) -> None:
        """Computes and sends every hosted producer's delta of the current tick (once)."""
        if self.engine is None or self.engine.epoch != self._epoch:
            return  # the engine has not started this tick's epoch yet
        for pid, p in self.producers.items():
            if p.sent_seq >= self.seq:
                continue
            d = p.op.delta(self._epoch)
            # Every consumer is a whole query and needs the whole delta: the all grouping.
            # (A fields grouping on the join keys needs producers partitioned across
            # containers, which this mode does not do yet.)
            parts = _ALL.split(d, len(p.to)) if p.to else []
            for (cid, address), part in zip(p.to, parts):
                if cid not in p.greeted:
                    hello = {"v": VERSION, "kind": "ophello", "run": self.run, "src": self.cid}
                    hello.update(id=pid, fp=p.fingerprint)
                    self._offer(self._peer(address), [msgpack.packb(hello, use_bin_type=True)], "hello")
                    p.greeted.add(cid)
                self._send(pid, cid, address, part)
            p.sent_seq = self.seq

    def _peer(self, address: str) -> _Peer:
        peer = self._peers.get(address)
        if peer is None:
            peer = self._peers[address] = _Peer(Sender(address, sndhwm=10000, linger_ms=1000))
        return peer

    def _offer(self, peer: _Peer, frames: list[Frame], what: str) -> None:
        deadline = time.monotonic() + SEND_TIMEOUT_S
        while not peer.sender.offer_frames(frames, 0.5):
            if time.monotonic() > deadline:
                raise OperatorPlaneError(f"{self.cid}: cannot send {what}: the consumer does not take it")
        self.counters.bytes_sent += payload_bytes(frames)

    def _send(self, pid: str, cid: str, address: str, d: Batch) -> None:
        peer = self._peer(address)
        cols = np.asarray(d.cols)
        idc = _id_vars(d.vars)
        if len(d) and idc:
            ids = np.unique(cols[idc] if len(idc) != cols.shape[0] else cols)
            ids = ids[ids > 0]
            if len(ids):
                top = int(ids[-1])
                if top >= len(peer.known):
                    grown = np.zeros(max(top + 1, 2 * len(peer.known)), dtype=bool)
                    grown[: len(peer.known)] = peer.known
                    peer.known = grown
                new = ids[~peer.known[ids]]
                if len(new):
                    terms = self.engine.dictionary.decode_many(new)
                    self._offer(peer, encode_terms(self.run or "", self.cid, new, list(terms)), "terms")
                    peer.known[new] = True
                    self.counters.terms_sent += len(new)
        frames = encode_batch(d, stream=pid, task=f"{self.run}/{self.cid}", epoch=0, seq=self.seq)
        self._offer(peer, frames, f"{pid} to {cid}")
        self.counters.batches_sent += 1
        self.counters.rows_sent += len(d)
        prom = self._metrics()
        if prom is not None:
            prom[0].labels("sent").inc()
            prom[1].labels("sent").inc(payload_bytes(frames))

    # ------------------------------------------------------------------ receiving

    def _receive(self, timeout: float) -> bool:
        frames = self.receiver.recv_frames(timeout)
        if frames is None:
            return False
        kind = header_kind(frames)
        try:
            if kind == "ophello":
                self._check_hello(frames)
                return True
            if kind == "opterms":
                run, src, ids, terms = decode_terms(frames)
                if run != self.run:
                    return True
                local = np.asarray(self.engine.dictionary.encode_many(terms), dtype=np.int64)
                xl = self._xlate.get(src)
                top = int(ids.max()) if len(ids) else 0
                if xl is None or top >= len(xl):
                    grown = np.zeros(max(top + 1, 1024, 0 if xl is None else 2 * len(xl)), dtype=np.int64)
                    if xl is not None:
                        grown[: len(xl)] = xl
                    xl = self._xlate[src] = grown
                xl[ids] = local
                return True
            message = wire_decode(frames)
        except (WireError, OperatorPlaneError) as exc:
            logger.warning("%s: rejected an operator-edge message: %s", self.cid, exc)
            return True
        if not isinstance(message, BatchMessage):
            return True
        run, _, src = message.task.partition("/")
        if run != self.run or message.stream not in self._inbox:
            return True
        self.counters.batches_received += 1
        nbytes = payload_bytes(frames)
        self.counters.bytes_received += nbytes
        prom = self._metrics()
        if prom is not None:
            prom[0].labels("received").inc()
            prom[1].labels("received").inc(nbytes)
        self._inbox[message.stream][message.seq] = self._translate(src, message.batch)
        return True

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

    def _translate(self, src: str, b: Batch) -> Batch:
        cols = np.array(b.cols, dtype=np.int64)  # own the memory: ZeroMQ's frame goes away
        idc = _id_vars(b.vars)
        if len(b) and idc:
            xl = self._xlate.get(src, np.zeros(1, dtype=np.int64))
            sub = cols[idc]
            if int(sub.max()) >= len(xl):
                raise OperatorPlaneError(f"batch from {src} uses ids it never sent terms for")
            cols[idc] = xl[sub]
        return Batch(b.vars, cols, np.array(b.counts, dtype=np.int64))

    def take(self, pid: str, vars_: tuple[str, ...]) -> Batch:
        """The delta of producer ``pid`` for the tick being evaluated (waits for it)."""
        box = self._inbox[pid]
        deadline = time.monotonic() + self.wait_timeout
        while self.seq not in box:
            if self._receive(0.0):
                continue
            self.flush()  # our own producers first: the peer we wait for may wait for us
            if time.monotonic() > deadline:
                self.counters.waits_timed_out += 1
                self._fail(f"no delta of {pid} for tick {self.seq} within {self.wait_timeout:g}s")
                break
            self._receive(0.02)
        due = sorted(s for s in box if s <= self.seq)
        parts = [box.pop(s) for s in due]
        parts = [p if p.vars == vars_ else p.project(vars_) for p in parts if len(p)]
        if not parts:
            return Batch.empty(vars_)
        return parts[0] if len(parts) == 1 else concat(parts, vars_)

    # ------------------------------------------------------------------ end

    def reset(self, log: Callable[[str], None] | None = None) -> None:
        """Ends the run's operator placement (sockets to peers closed, tables dropped)."""
        if self.run is not None:
            c = self.counters
            logger.info(
                "%s: operator edges of run %s: %d batches (%d bytes) sent, %d received, %d wait timeouts",
                self.cid,
                self.run,
                c.batches_sent,
                c.bytes_sent,
                c.batches_received,
                c.waits_timed_out,
            )
        for peer in self._peers.values():
            peer.sender.close(linger_ms=500)
        self._reset_state()

    def close(self) -> None:
        """Closes every socket."""
        self.reset()
        self.receiver.close()
