"""The leader's engine of ``run --zk``: :class:`RemoteEngine` carries the live engine's calls to
the operator containers.

:class:`~linkstream.cluster.service.ClusterService` (the coordinator serving the API) runs a
:class:`~linkstream.engine.live.runtime.LiveEngine` while it leads; that live engine's engine is
a :class:`RemoteEngine`, which keeps no windows itself (:class:`_NoBuffer`) and drives the
machinery of ``replay --zk`` (:class:`~linkstream.cluster.driver.ClusterEngine`): the run node
grows and shrinks with the registered queries, elements are routed to the containers whose
queries read their stream, every report time is one tick on every container.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from itertools import chain
from typing import TYPE_CHECKING, Any

import numpy as np
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from linkstream.cluster.driver import ClusterEngine
from linkstream.cluster.driverstate import plan_key, task_id
from linkstream.cluster.fanout import Deferred
from linkstream.cluster.ledger import RemoteQuery
from linkstream.containers.messages import Tick
from linkstream.containers.protocol import encode as encode_message
from linkstream.containers.security import Security
from linkstream.containers.transport import LOOPBACK_ANY, Receiver
from linkstream.engine.live.batchpush import RefRows
from linkstream.engine.live.runtime import QueryConflict
from linkstream.query.continuous import ContinuousQuery
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.static import dedup_triples
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.layout import DEFAULT_ROOT
from linkstream.scheduler.runs import RunActiveError, RunNode, RunSpec
from linkstream.scheduler.state import TaskSpec

if TYPE_CHECKING:
    from linkstream.cluster.streamlog import BodyStore

logger = logging.getLogger(__name__)


class ClusterBusy(QueryConflict):
    """Another driver (a ``replay --zk``) holds the cluster's run."""


class _NoBuffer:
    """Stands in for a stream buffer on the leader: the windows live on the containers."""

    base = 0
    watermark = None

    def __init__(self) -> None:
        self.windows: list[object] = []

    def search(self, t: int) -> int:
        return 0


class _LiveClusterEngine(ClusterEngine):
    """A :class:`ClusterEngine` whose failed queries are marked, not fatal, and which sends
    a run of report times at once (:meth:`tick_many`)."""

    failed: dict[str, str]
    #: ticks carry ``cuts`` (``--ingest direct``): per stream, the elements routed before them
    cuts: bool = False

    def tick_many(
        self,
        plan: Sequence[tuple[int, Sequence[str]]],
        on_done: Callable[[int, int, dict[str, Sequence[str]]], None],
    ) -> None:
        """Report times ``plan`` (``(c, reporting queries)``, in order) on every container.

        All the ticks are sent before the first answer is awaited: each container evaluates
        them back to back, at its own pace, instead of waiting at every report time for
        the slowest container and the round trip through this process.  The answers are
        then collected tick by tick, in order, exactly as :meth:`ClusterEngine.tick` does
        (recomputed elsewhere for a container that died, deduplicated at the result edge);
        ``on_done(i, c, lines)`` gets each tick's lines as soon as they are in.

        Between the ticks of one call nothing is ingested and no container is admitted,
        moved or switched to: answerers are named per tick from what was known when the
        call began (they change on a tick boundary only, to containers ready then).
        """
        self.fanout.flush()
        self.pump(0.0)
        self._check_failures()
        for cid in [c_ for c_ in self._peers if self._dead(c_)]:
            self.fanout.drop(cid)
            self._forget(cid)
        self.admit()
        self.migrate()
        counts = self.fanout.counts()  # every tick of the call comes after the same elements
        cuts = dict(zip(self.fanout.streams, counts.tolist())) if self.cuts else {}
        sent = []
        for c, reporting in plan:
            self.seq += 1
            seq = self.seq
            owners = self.choose_owners(seq)
            due = sorted(reporting)
            self.fanout.broadcast(
                encode_message(Tick(self.spec.id, seq, c, due, owners, dict(self._released), cuts))
            )
            self._ack_handovers(owners)
            sent.append((seq, c, due, owners, time.perf_counter()))
        self.recovery.ahead([(x[0], x[1]) for x in sent])  # a restore-forward feeds up to the last
        for i, (seq, c, due, owners, t0) in enumerate(sent):
            # recorded as its answers are awaited: the recovery keeps the last few cuts only
            self.recovery.record(seq, c, counts)
            out = self._collect(seq, c, due, owners)
            # pruned once answered: a recompute of this tick needs the backlog up to it
            self.fanout.prune(self.recovery.floor(c))  # a checkpoint's windows stay (restore-forward)
            self._delivered(seq, c, due, out, time.perf_counter() - t0)
            on_done(i, c, out)

    def _check_failures(self) -> None:
        failures, self._failures = self._failures, []
        for f in failures:
            if f.query:
                self.failed[f.query] = f"{f.container}: {f.error}"
                logger.error("query %s failed on %s: %s", f.query, f.container, f.error)
            else:
                logger.error("container %s cannot take part: %s", f.container, f.error)


class RemoteEngine:
    """The engine interface :class:`LiveEngine`'s worker drives, backed by operator containers.

    Only the live engine's worker thread calls it.  The run (receiver socket, run node,
    :class:`ClusterEngine`) exists while at least one query is registered.

    Args:
        client: The coordinator's started kazoo client.
        base: Base IRI of the queries.
        default_step: Report step of windows without STEP.
        statics: ``(iri or None, path)`` static graph files every container loads.
        retention_ms: Stream history kept for queries registered later (the fan-out's backlog).
        root: Cluster root inside the chroot.
        answer_timeout: Seconds to wait for a tick's answers.
        ready_timeout: Seconds a query's first report waits for a container to hold it.
        on_states: Called with ``{name: state}`` of the queries whose state changed (once per
            registration batch, poll or tick: the coordinator writes them in few transactions).
        on_report: Called with ``(c, lines by query)`` after each tick (the result log).
        bind: Endpoint of the result socket.
        security: The coordinator's credential and CURVE keys (``None``: insecure).
        on_reject: Counts refused handshakes on the result socket.
        cuts: ``run --zk --ingest direct``: name in every tick, per stream, how many of its
            elements the run routed before it: containers evaluate a tick only once they
            applied them (:class:`~linkstream.containers.cuts.CutGate`).
        owners: ``--ingest owners``: the cuts count the leader's applied counts (as the
            owners number the elements they send) and the streams' owners send the
            elements (the fan-out keeps the backlog only).
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        base: str,
        default_step: int,
        statics: Sequence[tuple[str | None, str]] = (),
        retention_ms: int = 60_000,
        root: str = DEFAULT_ROOT,
        answer_timeout: float = 30.0,
        ready_timeout: float = 30.0,
        on_states: Callable[[dict[str, str]], None] | None = None,
        on_report: Callable[[int, dict[str, Sequence[str]]], None] | None = None,
        bind: str = LOOPBACK_ANY,
        security: Security | None = None,
        on_reject: Callable[[str], None] | None = None,
        cuts: bool = False,
        owners: bool = False,
    ) -> None:
        self.client = client
        self.cuts = cuts
        self.owners = owners
        #: the live engine's applied count of a stream (``LiveEngine.applied_count``), set by
        #: the coordinator: with ``cuts`` the run numbers elements by it, as the owners do
        self.applied: Callable[[str], int] | None = None
        #: a new leader replays its ingest log: those elements' owners sent them to the old
        #: leader's run (or never), so this run's fan-out sends them (``--ingest owners``)
        self.replaying = False
        #: ``--ingest meta``: the owners' stream logs, where the elements the leader holds by
        #: reference (:class:`~linkstream.engine.live.batchpush.RefRows`) are read when needed
        self.bodies: BodyStore | None = None
        self.security = security or Security.insecure()
        self.on_reject = on_reject
        self.base = base
        self.default_step = default_step
        self.statics = tuple(statics)
        self.retention_ms = retention_ms
        self.root = root
        self.answer_timeout = answer_timeout
        self.ready_timeout = ready_timeout
        self.on_states = on_states
        self.on_report = on_report
        self.bind = bind
        self.dictionary = MemoryDictionary()
        self.buffers: dict[str, _NoBuffer] = {}
        self.states: dict[str, str] = {}
        #: the queries whose state is not ``running`` (:meth:`_observe` looks at them only)
        self._starting: set[str] = set()
        self.table = AssignmentTable(client, root)
        self.run_node = RunNode(client, root)
        self.cluster: _LiveClusterEngine | None = None
        self._receiver: Receiver | None = None
        self._waited: set[str] = set()
        #: registered since the last :meth:`flush`: in the live engine, not yet in ZooKeeper
        self._unflushed: dict[str, RemoteQuery] = {}
        self._changed: dict[str, str] = {}  # states not yet handed to on_states
        #: per query, the run's tick count when it was registered (a checkpoint tells the queries
        #: registered after the last tick: :mod:`~linkstream.cluster.checkpoints`)
        self.registered_tick: dict[str, int] = {}

    # ------------------------------------------------------------------ the run

    def _open_run(self) -> _LiveClusterEngine:
        if self.cluster is not None:
            return self.cluster
        server = self.security.server(self.client, self.root, self.on_reject)
        receiver = Receiver(self.bind, rcvhwm=100000, curve_keys=server)
        spec = RunSpec(
            id="live-" + uuid.uuid4().hex[:10],
            driver=receiver.endpoint,
            base=self.base,
            default_step=self.default_step,
            statics=self.statics,
            route="streams",
            driver_key=self.security.public_text,
        )
        try:
            self.run_node.claim(spec)
        except RunActiveError as exc:
            receiver.close()
            raise ClusterBusy(f"the cluster is busy: {exc}") from None
        cluster = _LiveClusterEngine(
            self.client,
            spec,
            {},
            receiver,
            self.dictionary,
            answer_timeout=self.answer_timeout,
            root=self.root,
            security=self.security,
        )
        cluster.failed = {}
        cluster.cuts = self.cuts
        cluster.fanout.owners_send = self.owners  # --ingest owners: the owners send the elements
        self.cluster, self._receiver = cluster, receiver
        for iri in self.buffers:  # streams pushed before: known to the run from the start
            self._add_stream(cluster, iri)
        self.run_node.update(cluster.spec)
        logger.info("live run %s opened (results at %s)", spec.id, receiver.endpoint)
        return cluster

    def _close_run(self) -> None:
        cluster, receiver = self.cluster, self._receiver
        self.cluster = self._receiver = None
        if cluster is None:
            return
        cluster.close()
        try:
            node = self.run_node.get(queries=False)  # it may name the last query still: compare the run's id
            if node is not None and node.id == cluster.spec.id:
                self.run_node.release()
        except KazooException:
            logger.warning("cannot release the live run node", exc_info=True)
        if receiver is not None:
            receiver.close()
        logger.info("live run %s closed", cluster.spec.id)

    def _add_stream(self, cluster: _LiveClusterEngine, iri: str) -> None:
        """Adds ``iri`` to the run; with ``cuts`` its elements are numbered from the worker's
        applied count on (the owners number the elements they send so)."""
        k = cluster.add_stream(iri, self.retention_ms)
        if self.owners and self.applied is not None:
            cluster.fanout.start_at(k, self.applied(iri))

    def _publish(self) -> None:
        assert self.cluster is not None
        self.run_node.update(self.cluster.spec)

    def _horizons(self, streams: Iterable[str]) -> dict[str, int | None]:
        """Per stream, the history a query registered later may need: the largest range plus
        step of the run's windows on it (``None`` when a count or NOW window reads it)."""
        assert self.cluster is not None
        out: dict[str, int | None] = {iri: self.retention_ms for iri in streams}
        for q in self.cluster.queries.values():
            for w in q.cq.windows:
                if w.stream not in out:
                    continue
                h = out[w.stream]
                if h is None:
                    continue
                if w.spec.kind != "time" or w.spec.range_ms is None:
                    out[w.stream] = None
                else:
                    out[w.stream] = max(h, w.spec.range_ms + w.spec.step_or(self.default_step))
        return out

    def _set_state(self, name: str, state: str, *, written: bool = False) -> None:
        if self.states.get(name) == state:
            return
        self.states[name] = state
        if state == "running":
            self._starting.discard(name)
        else:
            self._starting.add(name)
        if not written:
            self._changed[name] = state

    def _report_states(self) -> None:
        changed, self._changed = self._changed, {}
        if changed and self.on_states is not None:
            self.on_states(changed)

    # ------------------------------------------------------------------ engine interface

    def register(self, cq: ContinuousQuery) -> RemoteQuery:
        """Adds ``cq`` to the run (opening it); placement is asynchronous.

        What other processes must see (the run node naming the query, its task) is written
        by :meth:`flush`, once for all the queries registered since the last one: the
        coordinator calls it after a batch, and every other call of the worker flushes first.
        """
        cluster = self._open_run()  # ClusterBusy now, not at the flush
        steps = tuple(sorted({w.spec.step_or(self.default_step) for w in cq.windows}))
        rq = RemoteQuery(cq, steps)
        for iri in dict.fromkeys(w.stream for w in cq.windows):
            self._add_stream(cluster, iri)
            self.buffers.setdefault(iri, _NoBuffer())
        self._unflushed[cq.name] = rq
        self.registered_tick[cq.name] = cluster.seq
        cluster.failed.pop(cq.name, None)
        self._waited.discard(cq.name)
        self._set_state(cq.name, "pending", written=True)  # the registry record says so already
        return rq

    def flush(self) -> None:
        """Publishes the queries registered since the last flush: the run node (once), their
        tasks (few ZooKeeper transactions), their states."""
        batch, self._unflushed = self._unflushed, {}
        cluster = self.cluster
        if batch and cluster is not None:
            rqs = [rq for name, rq in batch.items() if self.states.get(name) is not None]
            cluster.add_queries(rqs)
            streams = dict.fromkeys(w.stream for rq in rqs for w in rq.cq.windows)
            for iri, h in self._horizons(streams).items():
                cluster.set_horizon(iri, h)
            # The run names the queries before their tasks exist: ZooKeeper applies one session's
            # requests in order, so the tasks may be sent before the run node's write returns.
            texts = {task_id(rq.name): rq.cq.text for rq in rqs}  # containers need not read the registry
            published = self.run_node.update_async(replace(cluster.spec, texts=texts))
            self.table.submit_many(
                [
                    TaskSpec(
                        task_id(rq.name),
                        colocate_with=plan_key(rq.cq),
                        stateful=True,
                        streams=tuple(dict.fromkeys(w.stream for w in rq.cq.windows)),
                    )
                    for rq in rqs
                ]
            )
            for result in published:
                result.get()
        self._report_states()

    def unregister(self, name: str) -> None:
        """Withdraws the query's task and takes it out of the run (closing it after the last)."""
        self.flush()
        cluster = self.cluster
        try:
            self.table.withdraw(task_id(name))
        except KazooException:
            logger.warning("cannot withdraw the task of %s", name, exc_info=True)
        self.states.pop(name, None)
        self._starting.discard(name)
        self._changed.pop(name, None)
        self.registered_tick.pop(name, None)
        if cluster is None:
            return
        cluster.remove_query(name)
        if not cluster.queries:
            self._close_run()
        else:
            self._publish()

    def buffer(self, iri: str) -> _NoBuffer:
        """The (empty) stand-in buffer of ``iri``; adds the stream to the run."""
        buf = self.buffers.get(iri)
        if buf is None:
            buf = self.buffers[iri] = _NoBuffer()
            if self.cluster is not None:
                self._add_stream(self.cluster, iri)
                self._publish()
        return buf

    def ingest(self, stream: str, t: int, ids: np.ndarray) -> None:
        """Routes one element to the containers subscribed to ``stream``."""
        if self._unflushed:
            self.flush()
        cluster = self.cluster
        if cluster is not None:
            # --ingest owners: this element's applied count (the worker counts it once this returns)
            if self.owners and self.applied is not None and not self.replaying:
                fan = cluster.fanout
                triples: np.ndarray | Deferred = ids
                if isinstance(ids, RefRows):  # --ingest meta: held by reference, read if needed
                    triples = Deferred(len(ids), ids.ref)  # type: ignore[arg-type]  # a RefRows always has its ref
                    fan.resolver = self._resolve
                fan.ingest(cluster._stream_index[stream], t, triples, self.applied(stream))
            else:
                cluster.ingest(stream, t, ids)

    def _resolve(self, iri: str, lazy: list[Deferred]) -> None:
        """``--ingest meta``: the triples of elements held by reference, from the owners'
        stream logs (each body decoded and its terms encoded once per call), deduplicated
        as the worker does an element's."""
        assert self.bodies is not None, "--ingest meta without the stream logs"
        tables: dict[tuple[int, int], tuple[Any, np.ndarray]] = {}
        for d in lazy:
            epoch, record, j = d.ref
            got = tables.get((epoch, record))
            if got is None:
                body = self.bodies.body(iri, epoch, record)
                terms = body[0][1].terms if body else []
                got = tables[(epoch, record)] = (
                    body,
                    np.asarray(self.dictionary.encode_many(list(terms)), dtype=np.int64),
                )
            rows = got[0][j][1]
            d.ids = dedup_triples(got[1][rows.idx]) if len(rows) else np.empty((0, 3), dtype=np.int64)

    def poll(self) -> None:
        """Reads the containers' messages, admits new ones, updates the queries' states."""
        self.flush()
        cluster = self.cluster
        if cluster is None:
            return
        cluster.pump(0.0)
        cluster._check_failures()
        cluster.admit()
        cluster.forward_orphans()  # a dead container's queries restored now, not at their next report
        self._observe(cluster)
        self._report_states()

    def _observe(self, cluster: _LiveClusterEngine) -> None:
        failed = cluster.failed
        if not failed and not self._starting:  # (every query running: no step per query)
            return
        for name in cluster.queries:
            if name in failed:
                self._set_state(name, "failed: " + failed[name])
            elif self.states.get(name) != "running" and cluster.ready_on(name):
                self._set_state(name, "running")

    def tick(self, c: int, names: Sequence[str]) -> dict[str, Sequence[str]]:
        """Report time ``c`` on every container; the lines of ``names``.

        Waits (once per query, at most ``ready_timeout``) until a container holds each
        due query, so that a query's first report is not lost to its placement.
        """
        return self.tick_many([(c, names)])[0]

    def tick_many(self, plan: Sequence[tuple[int, Sequence[str]]]) -> list[dict[str, Sequence[str]]]:
        """Report times ``plan`` (``(c, due queries)``, in order); the lines of each.

        The live engine's worker calls this with every report time the watermark passed
        (:meth:`~linkstream.engine.live.worker.LiveWorker._fire_many`): they go to the
        containers together (:meth:`_LiveClusterEngine.tick_many`), and each tick's lines
        reach ``on_report`` (the result log) as soon as they are in, in order.
        """
        self.flush()
        cluster = self.cluster
        if cluster is None:
            return [dict.fromkeys(names, ()) for _, names in plan]
        outs: list[dict[str, Sequence[str]]] = [{} for _ in plan]  # each tick's, once in (done)
        self._await_ready(cluster, list(dict.fromkeys(chain.from_iterable(names for _, names in plan))))
        failed, queries = cluster.failed, cluster.queries
        lives = [
            (c, names)
            if not failed and all(map(queries.__contains__, names))  # (the usual case: at C speed)
            else (c, [n for n in names if n not in failed and n in queries])
            for c, names in plan
        ]

        def done(i: int, c: int, lines: dict[str, Sequence[str]]) -> None:
            names = plan[i][1]
            if len(lines) != len(names):  # failed or unknown queries: no lines, in plan order
                lines = {n: lines.get(n, ()) for n in names}
            outs[i] = lines  # (the cluster's answer, not a copy: in the order of the plan)
            if self.on_report is not None:
                self.on_report(c, lines)  # replicated before any subscriber sees it

        cluster.tick_many(lives, done)
        self._observe(cluster)
        self._report_states()
        return outs

    def _await_ready(self, cluster: _LiveClusterEngine, names: Sequence[str]) -> None:
        """Waits (once per query, at most ``ready_timeout``) until a container holds each of
        ``names``."""
        new = set(names).difference(self._waited, cluster.failed)
        if not new:  # (the usual case: every one held already; no step per query)
            return
        names = [n for n in names if n in new]
        deadline = time.monotonic() + self.ready_timeout
        while True:
            cluster.pump(0.0)
            cluster._check_failures()
            cluster.admit()
            waiting = [
                n
                for n in names
                if n not in cluster.failed and n not in self._waited and not cluster.ready_on(n)
            ]
            if not waiting:
                break
            if time.monotonic() > deadline:
                logger.warning("no container holds %s yet; their lines are lost", ", ".join(waiting))
                self._waited.update(waiting)
                break
            cluster.pump(0.02)
        for n in names:
            if cluster.ready_on(n):
                self._waited.add(n)

    def gc(self) -> None:
        """Handles what the containers sent meanwhile."""
        self.poll()

    def idle(self) -> None:
        """Called by the live worker while it waits for work (every 50 ms at most): a dead
        container's queries go to their new owners to be restored now, not at the next tick
        (:meth:`ClusterEngine.forward_orphans`); cheap while nothing died."""
        if self.cluster is not None:
            self.cluster.forward_orphans()

    def operator_count(self) -> int:
        """Queries of the run (their operators live on the containers)."""
        return 0 if self.cluster is None else len(self.cluster.queries)

    def close(self) -> None:
        """Ends the run (the containers drop it) and closes the sockets."""
        self._unflushed.clear()
        self._close_run()


__all__ = ["ClusterBusy", "RemoteEngine"]
