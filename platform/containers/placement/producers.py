"""The producer side of operator placement: producer engines over the replicated buffers.

A container hosts each producer channel it is given in a *producer engine*: an
embedded :class:`~linkstream.engine.embedded.Engine` that shares the container's
dictionary, static graphs and stream buffers (every container holds every stream
element, see :mod:`linkstream.containers.replica`) but none of its operators.  So a
producer can be built at any moment -- when the run starts, when it moves here from a
drained or dead container -- and its first delta is its whole state at the tick it
catches up to, computed from the buffers alone; the queries of the container are never
disturbed by it.  Hosted producers of one engine share operators by signature, as in
any engine (routes of one join run the join once).

Instances of a partitioned producer live in one engine per partition index, where every
partitioned join's inputs are wrapped in
:class:`~linkstream.containers.placement.partitions.PartitionOperator` (a join shared by two
routes must be wrapped once, the same way).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from linkstream.containers.placement.channels import RemoteInput
from linkstream.containers.placement.messages import HostedProducer, OperatorPlaneError
from linkstream.containers.placement.partitions import (
    PartitionError,
    PartitionOperator,
    TermHashes,
    partition_producer,
)
from linkstream.engine.cutting import cut_fingerprint, cut_points
from linkstream.engine.embedded import Engine
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch
from linkstream.query.continuous import parse_continuous

logger = logging.getLogger(__name__)


def release_ops(engine: Engine, ops: list[Operator]) -> None:
    """Drops one reference to each of ``ops`` in ``engine`` (as ``Engine.unregister`` does);
    attach wrappers and remote inputs hold no engine reference and are skipped."""
    engine.release([op for op in ops if not isinstance(op, (AttachOperator, RemoteInput))])


@dataclass
class Hosted:
    """One producer channel hosted here.

    Attributes:
        spec: What the driver (or the hand-over) asked for.
        op: The cut operator, in its producer engine.
        ops: The engine operators the channel holds a reference to.
        fingerprint: :func:`~linkstream.engine.cutting.cut_fingerprint` of ``op``.
        key: Its producer engine (partition index, ``None``: unpartitioned).
        sent_seq: Last tick whose delta was sent.
        built_at: Tick the engine was at when the channel was built (its first delta is
            computed at a fresh epoch).
        partitions: The partition operators of its join (partitioned instances).
    """

    spec: HostedProducer
    op: Operator
    ops: list[Operator]
    fingerprint: str
    key: int | None
    sent_seq: int = 0
    built_at: int = -1
    partitions: list[PartitionOperator] | None = None
    reported: tuple[int, int] = (0, 0)  # partition rows (in, kept) already counted

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def gen(self) -> int:
        return self.spec.gen


class ProducerEngines:
    """The producer engines of one container, and the channels they host.

    Args:
        main: The container's engine (its dictionary, statics and buffers are shared).
        base: Base IRI of the run's queries.
    """

    def __init__(self, main: Engine, base: str) -> None:
        self.main = main
        self.base = base
        self.engines: dict[int | None, Engine] = {}
        self.at: dict[int | None, int] = {}  # tick each engine's windows were advanced to
        self.hosted: dict[str, Hosted] = {}
        self.hashes = TermHashes(main.dictionary)

    def _engine(self, key: int | None) -> Engine:
        pe = self.engines.get(key)
        if pe is None:
            m = self.main
            pe = Engine(m.dictionary, default_step=m.default_step, log_fn=m.log, static_results=False)
            pe.statics = m.statics
            pe._static_version = m._static_version
            pe._static_results = m.static_results
            if m.static_source is not None:  # --remote-store: static parts looked up, as in main
                pe.use_static_source(m.static_source)
            pe.buffers = m.buffers
            pe._streams_declared = getattr(m, "_streams_declared", set())
            self.engines[key] = pe
            self.at[key] = -1
        return pe

    def host(self, spec: HostedProducer) -> Hosted:
        """Builds channel ``spec.id`` (replacing an older generation of it).

        Raises:
            OperatorPlaneError: The query has no such cut here, or cannot be partitioned so.
        """
        self.release(spec.id)
        key = spec.part if spec.parts > 1 else None
        pe = self._engine(key)
        cq = parse_continuous(spec.text, default_name=spec.query, base=self.base)
        hidden = replace(cq, name=f"__op__/{spec.id}/{spec.gen}")
        rq = pe.register(hidden)
        del pe.queries[hidden.name]  # never evaluated as a query: only its cut is pulled
        cuts = cut_points(rq.root)
        if spec.cut >= len(cuts):
            release_ops(pe, rq.ops)
            raise OperatorPlaneError(f"{spec.query} has {len(cuts)} cuts here, not {spec.cut + 1}")
        op = cuts[spec.cut]
        keep = {id(o) for o in op.walk()}
        release_ops(pe, [o for o in rq.ops if id(o) not in keep])
        ops = [o for o in rq.ops if id(o) in keep]
        fingerprint = cut_fingerprint(op)
        partitions = None
        if spec.parts > 1:
            try:
                partitions = partition_producer(op, spec.var, spec.part, spec.parts, self.hashes)
            except PartitionError as exc:
                release_ops(pe, ops)
                raise OperatorPlaneError(f"producer {spec.id}: {exc}") from exc
        h = Hosted(spec, op, ops, fingerprint, key, built_at=self.at[key], partitions=partitions)
        self.hosted[spec.id] = h
        logger.info("hosts producer %s gen %d (%s)", spec.id, spec.gen, op.describe())
        return h

    def release(self, channel: str) -> Hosted | None:
        """Stops hosting ``channel`` (its operators go unless another channel holds them)."""
        h = self.hosted.pop(channel, None)
        if h is not None:
            release_ops(self.engines[h.key], h.ops)
        return h

    def deltas(self, seq: int, c: int) -> list[tuple[Hosted, Batch]]:
        """The delta of every channel not sent for tick ``seq`` yet, at report time ``c``.

        A channel built after its engine advanced to ``seq`` makes the engine advance
        again at a fresh epoch (its windows are new: already advanced ones move by
        nothing), so its first delta is its whole state at ``c``.
        """
        out: list[tuple[Hosted, Batch]] = []
        for key, pe in self.engines.items():
            due = [h for h in self.hosted.values() if h.key == key and h.sent_seq < seq]
            if not due:
                continue
            if self.at[key] != seq or any(h.built_at == seq for h in due):
                pe.epoch += 1
                for w in pe.live_windows():
                    w.advance(c)
                self.at[key] = seq
                for h in due:
                    h.built_at = -1
            for h in due:
                out.append((h, h.op.delta(pe.epoch)))
                h.sent_seq = seq
        return out

    def close(self) -> None:
        """Releases every channel."""
        for ch in list(self.hosted):
            self.release(ch)
        self.engines.clear()
