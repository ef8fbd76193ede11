"""One replay's state inside an operator container: an embedded engine fed by the driver.

A container receives the elements of the streams it *subscribes* to (``RunSpec.route``
``"streams"``, the default: the streams its queries read) or of every stream
(``"broadcast"``, an *all* grouping), and evaluates only the queries assigned to it.
A query that arrives on a container mid-stream (a move, a drain, a failover) is
registered there once the container holds every stream the query reads: either it
already subscribed to them, or the driver answered its subscription with the retained
backlog of those streams (a ``sync`` message).  The engine then attaches the query to
the running operators and its windows hold every retained element in range, so its
report lines equal those of a query that ran there all along
(``tests/engine/test_sharing.py`` checks this for the embedded engine).

Three things make the replicas exact:

* **Dictionary.** The driver encodes stream terms with its own dictionary and ships,
  with each message, the id -> term entries of its triples that this container was not
  sent before.  The replica encodes those terms into its *own* dictionary (which also
  holds the static graphs and whatever terms query planning and expression evaluation
  allocate) and keeps a translation table driver id -> local id, so equal terms get
  equal ids even when the container allocated one before the driver shipped it.
  Results are decoded here.
* **Retention.** The engine collects a stream's prefix once no *local* window needs it;
  a query moved here later may need more.  A retention guard per stream keeps
  ``horizon`` ms of history (the largest range plus step of any window of the run on
  that stream), or everything for streams read by count or NOW windows.
* **Subscriptions.** :attr:`RunReplica.live` is the set of streams whose elements the
  driver is known to send here without a gap since their backlog: a subscription
  version is live only once the ``sync`` answering *that* version arrived (an answer
  to an older version, overtaken by a newer request, is applied but proves nothing).
  A stream the container stops needing may keep arriving for a while; its elements are
  appended all the same, so the buffer stays a gap-free suffix of what the driver sent
  (the driver resumes a later subscription right after the last element it sent).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from linkstream.containers.messages import Elements
from linkstream.containers.protocol import ProtocolError
from linkstream.containers.remotestatic import RemoteStatics
from linkstream.containers.staticcache import keep_only, load_static
from linkstream.engine.embedded import Engine, RegisteredQuery
from linkstream.engine.sharing import sharing_of
from linkstream.operators.router import RouterOperator
from linkstream.operators.shared_state import (
    restore_query_units,
    routers_of,
    snapshot_routers,
)
from linkstream.operators.state import QueryState, StateError, restore_query, snapshot_query
from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.scheduler.runs import RunSpec
from linkstream.store.remote import RemoteStore, RemoteStoreError

logger = logging.getLogger(__name__)

GC_EVERY_TICKS = 16


def retention_horizons(
    queries: Sequence[ContinuousQuery], streams: Sequence[str], default_step: int
) -> list[int | None]:
    """Per stream, the history (ms) a window of ``queries`` opened at the next report may read.

    ``None`` for a stream some count or NOW window reads: nothing of it may be collected.
    """
    out: list[int | None] = []
    for iri in streams:
        h: int | None = 0
        for cq in queries:
            for w in cq.windows:
                if w.stream != iri:
                    continue
                if w.spec.kind != "time" or w.spec.range_ms is None or h is None:
                    h = None
                else:
                    h = max(h, w.spec.range_ms + w.spec.step_or(default_step))
        out.append(h)
    return out


class RetentionGuard:
    """Stands in a stream buffer's window list so that collection keeps ``horizon`` ms.

    ``StreamBuffer.gc`` keeps everything from the smallest ``lo`` of its windows on; this
    guard's ``lo`` is moved to the first triple a window opened at the next report time
    could still need.

    Args:
        horizon: Milliseconds of history to keep, or ``None`` to keep everything.
    """

    def __init__(self, horizon: int | None) -> None:
        self.horizon = horizon
        self.lo = 0

    def advance(self, buffer: object, c: int) -> None:
        """Moves the guard after report time ``c`` of ``buffer`` (a ``StreamBuffer``)."""
        if self.horizon is None:
            self.lo = buffer.base  # type: ignore[attr-defined]  # buffer: a StreamBuffer
        else:
            self.lo = buffer.search(c - self.horizon)  # type: ignore[attr-defined]  # buffer: a StreamBuffer


@dataclass
class Ticked:
    """What one tick produced on this replica.

    Attributes:
        lines: Result lines of the due queries this container answers.
        missing: Due queries assigned to this container that it does not hold.
        moved: Per query moved here since the last tick with its routers' unit, why the
            unit was not restored ("": restored).
    """

    lines: dict[str, list[str]]
    missing: list[str]
    moved: dict[str, str] = field(default_factory=dict)


class RunReplica:
    """The engine of one run on one container.

    Args:
        spec: The run.
        log: Receives warnings about the run's inputs (bad static lines and the like).
    """

    def __init__(
        self, spec: RunSpec, log: Callable[[str], None] | None = None, remote: RemoteStore | None = None
    ) -> None:
        self.spec = spec
        #: static graphs read from store nodes (``None``: loaded from the run's files)
        self.remote: RemoteStatics | None = None
        if remote is not None:
            self.remote = RemoteStatics(remote, [iri for iri, _ in spec.statics])
            self.engine = Engine(
                self.remote.dictionary, default_step=spec.default_step, log_fn=log or logger.warning
            )
            self.engine.use_static_source(self.remote)  # queries without paths: lookups
            for iri in self.remote.graphs:  # declared (empty) until queries' patterns are read
                self.engine.add_static(iri, np.empty((0, 3), dtype=np.int64))
        else:
            self.engine = Engine(default_step=spec.default_step, log_fn=log or logger.warning)
            files = [(path, f"s{k}_") for k, (_iri, path) in enumerate(spec.statics)]
            keep_only(files)  # parsed once per process: a later run over the same files re-encodes them
            for (iri, _), (path, prefix) in zip(spec.statics, files, strict=True):
                self.engine.add_static(iri, load_static(path, self.engine.dictionary, prefix, log))
        self.engine.declare_streams(set(spec.streams))
        self._guards: list[RetentionGuard] = []
        for iri, horizon in zip(spec.streams, spec.horizons):
            guard = RetentionGuard(horizon)
            self.engine.buffer(iri).windows.append(guard)
            self._guards.append(guard)
        self._xlate = np.zeros(1024, dtype=np.int64)  # driver id -> local id; 0: not shipped
        self._reads: dict[str, frozenset[int]] = {}
        #: name -> (text, parsed query) that ``reads`` parsed and ``register`` has not taken yet
        self._parsed: dict[str, tuple[str, ContinuousQuery]] = {}
        #: streams received without a gap since their backlog (see the module docstring)
        self.live: set[int] = set()
        #: the last subscription requested (version, streams); version 0 is the hello's
        self.version = 0
        self.wanted: frozenset[int] = frozenset()
        #: elements received per stream (index as in ``spec.streams``)
        self.stream_elements = [0] * len(spec.streams)
        #: per stream, the run's count of its elements applied here (``sync`` ``counts`` set it,
        #: each element adds one): what a tick's ``cuts`` are compared with
        self.counts = [0] * len(spec.streams)
        self.synced = False
        self.last_seq = 0
        self.last_c: int | None = None  # report time of the last tick
        #: queries held but not planned until the first tick (see :meth:`register_restored`)
        self._deferred: dict[str, ContinuousQuery] | None = None
        #: queries planned since the last tick and not restored: their operators are fresh
        self._unticked: set[str] = set()
        #: queries moved here since the last tick with their routers' units, to restore
        self._moving: list[tuple[str, QueryState]] = []
        #: (destination, routers' ids) -> the query whose move carried their unit since the
        #: last tick (:meth:`snapshot_moving`; the routers are held by the queries still here)
        self._units_sent: dict[tuple[str, tuple[int, ...]], str] = {}
        #: per query moved here since the last tick with a router unit, its routers' plans
        #: (a unit of no router's query is planned on its carrier's: :meth:`register_routed`)
        self._moved_plans: dict[str, list[object]] = {}
        self.ticks = 0
        self.triples = 0
        self.apply_seconds = 0.0
        self.tick_seconds = 0.0
        self.cpu_seconds = 0.0  # process CPU time spent in apply and tick

    def extend(self, spec: RunSpec) -> None:
        """Takes a newer description of the same run (a live service adds queries and streams).

        Streams are only ever appended, so known indexes keep their meaning; a changed
        horizon applies to the retention guard from the next tick on.

        Raises:
            ProtocolError: ``spec`` is another run, or drops or reorders streams.
        """
        old = self.spec.streams
        if spec.id != self.spec.id or spec.streams[: len(old)] != old:
            raise ProtocolError("a run description may only append streams")
        for iri, horizon in zip(spec.streams[len(old) :], spec.horizons[len(old) :]):
            guard = RetentionGuard(horizon)
            self.engine.buffer(iri).windows.append(guard)
            self._guards.append(guard)
            self.stream_elements.append(0)
            self.counts.append(0)
        for guard, horizon in zip(self._guards, spec.horizons):
            guard.horizon = horizon
        self.engine.declare_streams(set(spec.streams))
        self.spec = spec
        if len(spec.streams) != len(old):  # a query's streams may have been unknown before
            self._reads.clear()  # (not on every update: re-parsing every held query is O(queries))

    # ------------------------------------------------------------------ data

    def apply(self, message: Elements) -> None:
        """Extends the dictionary translation and appends the elements to the buffers.

        Raises:
            ProtocolError: A triple uses an id the driver never shipped here, or an
                element names an unknown stream.
        """
        t0, cpu0 = time.perf_counter(), time.process_time()
        if message.terms:
            ids = np.asarray(message.ids, dtype=np.int64)
            if len(ids) != len(message.terms) or int(ids.min()) <= 0:
                raise ProtocolError("dictionary delta ids do not match its terms")
            need = int(ids.max()) + 1
            if need > len(self._xlate):
                grown = np.zeros(max(need, 2 * len(self._xlate)), dtype=np.int64)
                grown[: len(self._xlate)] = self._xlate
                self._xlate = grown
            self._xlate[ids] = np.asarray(self.engine.dictionary.encode_many(message.terms), dtype=np.int64)
        triples = message.triples
        if len(triples):
            lo, hi = int(triples.min()), int(triples.max())
            if lo <= 0 or hi >= len(self._xlate):
                raise ProtocolError(f"triple ids outside the shipped dictionary ({lo}..{hi})")
            triples = self._xlate[triples]
            if not triples.all():
                raise ProtocolError("triple ids the driver never shipped to this container")
        meta = message.meta
        k = meta.shape[1]
        if k and (int(meta[0].min()) < 0 or int(meta[0].max()) >= len(self.spec.streams)):
            raise ProtocolError("element of an unknown stream")
        offsets = np.concatenate([[0], np.cumsum(meta[2])]).tolist()
        streams, times = meta[0].tolist(), meta[1].tolist()
        for i in range(k):
            self.engine.ingest(self.spec.streams[streams[i]], times[i], triples[offsets[i] : offsets[i + 1]])
        if k:
            for j, n in enumerate(np.bincount(meta[0], minlength=len(self.spec.streams)).tolist()):
                self.stream_elements[j] += n
                self.counts[j] += n
        self.triples += len(triples)
        self.apply_seconds += time.perf_counter() - t0
        self.cpu_seconds += time.process_time() - cpu0
        if message.sync_tick is not None:
            if any(not 0 <= j < len(self.spec.streams) for j in message.streams):
                raise ProtocolError("sync of an unknown stream")
            self.synced = True
            self.last_seq = message.sync_tick
            for j, n in zip(message.streams, message.counts):  # the backlog may start after a gap
                self.counts[j] = n
            if message.version == self.version:
                self.live |= set(message.streams)

    # ------------------------------------------------------------------ subscriptions

    def reads(self, name: str, text: str) -> frozenset[int]:
        """Indexes of the run's streams that query ``name`` (of ``text``) reads."""
        got = self._reads.get(name)
        if got is None:
            index = {iri: j for j, iri in enumerate(self.spec.streams)}
            try:
                cq = parse_continuous(text, default_name=name, base=self.spec.base)
            except Exception:  # reported when the query is registered
                return frozenset()
            self._parsed[name] = (text, cq)  # for ``register``: a text is parsed once
            got = self._reads[name] = frozenset(index[w.stream] for w in cq.windows if w.stream in index)
        return got

    def request(self, streams: frozenset[int]) -> int | None:
        """Records a new subscription; returns its version, or ``None`` if nothing changed.

        Streams dropped from the subscription stop being live at once; new ones become
        live when the driver's ``sync`` for the returned version arrives.
        """
        if streams == self.wanted:
            return None
        self.version += 1
        self.wanted = streams
        self.live &= streams
        return self.version

    # ------------------------------------------------------------------ queries

    def register(self, name: str, text: str) -> RegisteredQuery:
        """Parses and registers one query of the run (raises ``QueryError``).

        While restored queries are being registered first (:meth:`register_restored`), the
        query is planned once (so an error is raised now) and set aside until the first tick.
        """
        seen = self._parsed.pop(name, None)
        if seen is not None and seen[0] == text:
            cq = seen[1]
        else:
            cq = parse_continuous(text, default_name=name, base=self.spec.base)
        if cq.name != name:
            # the HTTP API lets a name override the text's REGISTER clause
            cq = replace(cq, name=name)
        self._read_static([cq])
        rq = self.engine.register(cq)
        if self._deferred is not None:
            self.engine.unregister(name)
            self._deferred[name] = cq
        else:
            self._unticked.add(name)
        return rq

    def hold(self, name: str, text: str) -> None:
        """Registers ``name`` unplanned while restored queries are registered first (planned
        by :meth:`restore_routers` or the first tick: once); else as :meth:`register`."""
        if self._deferred is None:
            self.register(name, text)
            return
        cq = parse_continuous(text, default_name=name, base=self.spec.base)
        self._read_static([cq])
        self._deferred[name] = cq if cq.name == name else replace(cq, name=name)

    def _read_static(self, cqs: Sequence[ContinuousQuery]) -> None:
        """Remote mode: adds the static triples the queries' new patterns match."""
        if self.remote is None:
            return
        cqs = [cq for cq in cqs if not self.remote.covers(cq)]  # the others look triples up
        if not cqs:
            return
        for iri, triples in self.remote.ensure(cqs).items():
            self.engine.add_static(iri, triples)

    def static_stats(self) -> dict[str, int | str]:
        """Bytes of static data this replica holds: the engine's static triples (whole
        graphs when loaded from files; in remote mode only the pattern-relevant triples of
        queries with property paths, the others look static triples up) and, in remote
        mode, the block cache of the remote store."""
        held = sum(int(a.nbytes) for parts in self.engine.statics.values() for a in parts)
        out: dict[str, int | str] = {
            "mode": "remote" if self.remote is not None else "local",
            "engine_static_bytes": held,
            "engine_static_triples": sum(len(a) for parts in self.engine.statics.values() for a in parts),
        }
        if self.remote is not None:
            out.update(self.remote.stats())
        return out

    def preplan(self, texts: dict[str, str]) -> int:
        """Plans every query of the run once, in name order, and drops them again.

        Planning encodes the queries' constants; doing it for all of them, in the same
        order, before any stream term arrives gives every container of the run the same
        ids for them, hence the same canonical plans -- which operator-state migration
        (:mod:`linkstream.operators.state`) needs to match operators between containers.

        Returns:
            How many queries were planned (ones that fail to plan are skipped here).
        """
        done = 0
        if self.remote is not None:  # one read of the static triples for the whole run
            cqs = []
            for name in sorted(texts):
                try:
                    cqs.append(parse_continuous(texts[name], default_name=name, base=self.spec.base))
                except Exception:  # noqa: BLE001 - reported when the query is really registered
                    continue
            try:
                self._read_static(cqs)
            except RemoteStoreError as exc:  # each query's registration says it again
                logger.error("cannot read the run's static triples from the store nodes: %s", exc)
        for name in sorted(texts):
            self.reads(name, texts[name])
            try:
                self.register(name, texts[name])
            except Exception as exc:  # reported when the query is really registered
                logger.debug("preplan of %s failed: %s", name, exc)
                continue
            self.unregister(name)
            done += 1
        return done

    def snapshot(self, name: str) -> QueryState:
        """The operator state of ``name`` after the last tick (raises ``StateError``)."""
        if self.last_c is None or name not in self.engine.queries:
            raise StateError(f"{name} has no state here")
        try:
            return snapshot_query(self.engine, name, self.last_c)
        except StateError:
            raise
        except Exception as exc:  # an operator this version cannot walk: rebuild there
            raise StateError(f"cannot snapshot {name}: {type(exc).__name__}: {exc}") from exc

    def register_restored(self, name: str, text: str, state: QueryState | None) -> bool:
        """Registers ``name`` with the migrated ``state``; rebuilds it if that does not fit.

        A restored query takes the operators it shares with queries already registered
        here as they are (:func:`~linkstream.operators.state.restore_query`): right for
        operators evaluated at the snapshot's report time, wrong for the fresh ones of a
        replica that has not ticked yet (a new leader's run, a container that joined by
        sync) -- the first tick would feed their whole content into the restored
        operators a second time (duplicated rows, doubled counts).  So before the first
        tick every query that is not restored is unregistered and registered again only
        when that tick comes, after the restored ones: it attaches to their operators
        (and gets their content) or plans operators of its own, built from the buffers.
        The same holds in a replica that has ticked for the queries planned since its last
        tick (a live migration: tasks rebuilt and restored between two ticks): those are
        set aside the same way.

        Returns:
            Whether the state was restored (``False``: rebuilt from the stream buffers).
        """
        if state is None:
            self.register(name, text)
            return False
        self._register_first(name, text)
        # A container that joined by sync has not ticked yet: the sync's tick is the
        # snapshot's (the caller checked), so the snapshot's report time is this one's.
        c = self.last_c if self.last_c is not None else state.header.get("c")
        try:
            restore_query(self.engine, name, state, c)  # type: ignore[arg-type]  # a snapshot header carries its c
            self._unticked.discard(name)  # its operators hold the cut's state
            return True
        except Exception as exc:  # StateError, or an operator this version cannot fill
            logger.warning("cannot restore the state of %s (%s); rebuilding it", name, exc)
            self.unregister(name)
            self.register(name, text)
            return False

    def _register_first(self, name: str, text: str) -> None:
        """Registers ``name`` (to be restored) after setting the queries with fresh operators
        aside until the next tick (see :meth:`register_restored`)."""
        if self._deferred is None:
            # a replica that ticked already: only the queries planned since its last tick
            # hold fresh operators (a task rebuilt just before this one moved in)
            fresh = list(self.engine.queries) if self.last_c is None else sorted(self._unticked)
            if self.last_c is None or fresh:
                self._set_aside(fresh)
        deferred, self._deferred = self._deferred, None
        if deferred is not None:
            deferred.pop(name, None)
        try:
            self.register(name, text)
        finally:
            self._deferred = deferred

    def _set_aside(self, fresh: Sequence[str]) -> None:
        """Unregisters the queries ``fresh`` (planned, not restored) until the next tick."""
        aside: dict[str, ContinuousQuery] = {}
        for held in fresh:
            if held in self.engine.queries:
                aside[held] = self.engine.queries[held].cq
                self.engine.unregister(held)
        self._deferred = aside
        self._unticked.clear()

    def snapshot_moving(self, name: str, to: str = "") -> QueryState:
        """The state ``name`` moves with to container ``to`` (a live migration): its own
        snapshot, or for a query on shared joins' routers the unit of those routers (copied;
        raises ``StateError``).

        The unit goes once per destination and tick: another query that reads the same
        routers and moves to the same container after the same tick gets a unit of no
        router (header ``with``: the query that carried it), since its new container restored
        those routers for the first one (the driver forwards the states in the order it
        asked for them); should that restore have failed, the query is built there as before."""
        try:
            return self.snapshot(name)
        except StateError as exc:
            try:
                routers = self.routed(name)
            except StateError:
                raise exc from None
        assert self.last_c is not None
        key = (to, tuple(sorted(id(r) for r in routers)))
        first = self._units_sent.get(key)
        if first is not None:
            st = snapshot_routers(self.engine, [], self.last_c)
            st.header["with"] = first
        else:
            st = self.router_state(routers)
            self._units_sent[key] = name
        st.header["queries"] = [name]
        return st

    def register_routed(self, name: str, text: str, state: QueryState) -> str:
        """Registers ``name``, moved here live with the router unit ``state`` of the routers it
        reads (snapshotted after this replica's last tick); the unit is restored at the start
        of the next tick (:meth:`_restore_moved`), once every query moved here meanwhile is
        planned.  It is planned on the unit's plans (``Sharing.seeded``: the source's windows,
        whatever else moved here; a unit of no router: its carrier's), unless a router running
        here serves it.  Returns why it will not be restored ("": the next tick's ``moved``
        tells)."""
        plans = unit_plans(state) or self._moved_plans.get(str(state.header.get("with")), [])
        self._moved_plans[name] = plans
        with sharing_of(self.engine).seeded(plans):
            self._register_first(name, text)  # the operators it shares with the queries here are at c
        try:
            routers_of(self.engine.queries[name].root)
        except StateError as exc:
            return f"not routed here: {exc}"
        # its fresh operators take the unit before anything evaluates them (no restored
        # query can share those above its routes: they read a route)
        self._unticked.discard(name)
        self._moving.append((name, state))
        return ""

    def _restore_moved(self) -> dict[str, str]:
        """Restores the units of the queries moved here since the last tick (before it);
        returns per query why it was not (""; its router is then built by this tick).

        Only routers planned since the last tick take a unit (a router running here already
        serves its new queries as new subscribers, from its own rows); the operators they
        share with the queries running here are taken as they are
        (:func:`~linkstream.operators.shared_state.restore_routers` with ``live``)."""
        moving, self._moving = self._moving, []
        held = [(n, st) for n, st in moving if n in self.engine.queries]
        out = {n: "the query is not held here" for n, _ in moving if n not in self.engine.queries}
        if not held:
            return out
        c = self.last_c if self.last_c is not None else held[0][1].header.get("c")
        if not isinstance(c, int):
            return {**out, **dict.fromkeys((n for n, _ in held), "the unit names no report time")}
        # a unit of no router (its routers' unit came with another query) after the others
        held.sort(key=lambda p: "with" in p[1].header)
        units = [([n], st) for n, st in held]
        try:
            out.update(restore_query_units(self.engine, units, c, live=self.last_c is not None))
        except Exception as exc:  # noqa: BLE001 - partly restored: plan them again
            logger.error("restoring moved router units failed: %s: %s", type(exc).__name__, exc)
            cqs = [self.engine.queries[n].cq for n, _ in held]
            for cq in cqs:
                self.engine.unregister(cq.name)
            for cq in cqs:
                self.engine.register(cq)
            out.update({n: f"{type(exc).__name__}: {exc}" for n, _ in held})
        return out

    def routed(self, name: str) -> list[RouterOperator]:
        """The routers a routed query reads (raises ``StateError``: none, or not only routed)."""
        if self.last_c is None or name not in self.engine.queries:
            raise StateError(f"{name} has no state here")
        return routers_of(self.engine.queries[name].root)

    def router_state(self, routers: Sequence[RouterOperator]) -> QueryState:
        """The state of the units of ``routers`` after the last tick (copied: later ticks do
        not change it; :mod:`linkstream.operators.shared_state`; raises ``StateError``)."""
        assert self.last_c is not None
        try:
            st = snapshot_routers(self.engine, routers, self.last_c)
        except StateError:
            raise
        except Exception as exc:  # an operator this version cannot walk: rebuild there
            raise StateError(f"cannot snapshot a router: {type(exc).__name__}: {exc}") from exc
        # each router's plan: a restoring engine plans the unit's queries on it (the plan
        # depends on the order queries came here: a started window does not grow)
        for part, plan in zip(st.header["parts"], sharing_of(self.engine).plans_of(routers)):
            if plan is not None:
                part["plan"] = plan
        return QueryState(st.header, [a.copy() for a in st.arrays])

    def restore_routers(self, units: Sequence[tuple[Sequence[str], QueryState]], c: int) -> dict[str, str]:
        """Restores router units (each with the queries it serves) before the first tick, at
        the snapshots' report time ``c``; returns per query why it was not restored ("":
        restored; the others are rebuilt by the first tick as before).

        The queries are planned now if :meth:`register_restored` set them aside: their
        operators then hold the cut's state, and the queries still set aside attach to them.
        Each is planned on its unit's plans (``Sharing.seeded``: the old container's windows,
        which depend on the order queries came there); queries planned afresh already are
        set aside and planned so when those windows are not the snapshots' (every unit fits)."""
        if self.last_c is not None:
            return {n: f"this run evaluated t={self.last_c} already" for names, _ in units for n in names}
        plans = {n: unit_plans(st) for names, st in units for n in names}
        sharing = sharing_of(self.engine)
        every = [p for ps in plans.values() for p in ps]
        if every and self._deferred is None and not sharing.planned_on(every):
            self._set_aside(list(self.engine.queries))  # none restored yet: all fresh

        def plan(name: str) -> str:  # a query set aside is planned now
            cq = self._deferred.pop(name, None) if self._deferred is not None else None
            if cq is not None:
                try:
                    with sharing.seeded(plans.get(name, [])):
                        self.engine.register(cq)
                except Exception as exc:  # noqa: BLE001 - planned before: it waits for the tick
                    assert self._deferred is not None
                    self._deferred[name] = cq
                    return f"cannot be planned before the tick: {exc}"
            return ""

        try:
            return restore_query_units(self.engine, units, c, plan)
        except Exception as exc:  # noqa: BLE001 - partly restored: the log says so loudly
            logger.error("restoring router units failed: %s: %s", type(exc).__name__, exc)
            return {n: f"{type(exc).__name__}: {exc}" for names, _ in units for n in names}
        finally:
            sharing.unpin()

    def unregister(self, name: str) -> None:
        """Removes a query (its operators go unless another query uses them)."""
        self._parsed.pop(name, None)
        self._unticked.discard(name)
        if self._deferred is not None:
            self._deferred.pop(name, None)
        if name in self.engine.queries:
            self.engine.unregister(name)

    def holds(self, name: str) -> bool:
        """Whether ``name`` is registered here."""
        return name in self.engine.queries or (self._deferred is not None and name in self._deferred)

    def mode(self, name: str) -> str:
        """RSTREAM, ISTREAM or DSTREAM of a registered query."""
        if name not in self.engine.queries and self._deferred is not None and name in self._deferred:
            return self._deferred[name].mode
        return self.engine.queries[name].cq.mode

    def _register_deferred(self) -> None:
        """Plans the queries set aside while restored ones were registered (before a tick)."""
        deferred, self._deferred = self._deferred, None
        for name, cq in (deferred or {}).items():
            try:
                self.engine.register(cq)
            except Exception as exc:  # noqa: BLE001 - it was planned before; not again here
                logger.error("cannot register %s again after the restored queries: %s", name, exc)

    # ------------------------------------------------------------------ evaluation

    def tick(self, seq: int, c: int, answer: Sequence[str]) -> Ticked:
        """Evaluates report time ``c``: every local query is updated, ``answer`` report.

        Args:
            seq: The tick's sequence number.
            c: Report time.
            answer: Due queries this container was named to answer.
        """
        t0, cpu0 = time.perf_counter(), time.process_time()
        moved = self._restore_moved() if self._moving else {}
        if self._moved_plans:
            self._moved_plans.clear()
            sharing_of(self.engine).unpin()
        if self._deferred is not None:
            self._register_deferred()
        names = [n for n in answer if n in self.engine.queries]
        missing = [n for n in answer if n not in self.engine.queries]
        lines = self.engine.tick(c, names)
        self._unticked.clear()
        self._units_sent.clear()
        self.last_seq = seq
        self.last_c = c
        self.ticks += 1
        for guard, iri in zip(self._guards, self.spec.streams):
            guard.advance(self.engine.buffers[iri], c)
        if self.ticks % GC_EVERY_TICKS == 0:
            self.engine.gc()
        self.tick_seconds += time.perf_counter() - t0
        self.cpu_seconds += time.process_time() - cpu0
        return Ticked({n: lines[n] for n in names}, missing, moved)

    def close(self) -> None:
        """Releases the engine."""
        for name in list(self.engine.queries):
            self.engine.unregister(name)
        self.engine.dictionary.close()


def unit_plans(state: QueryState) -> list[object]:
    """The plans of a router unit's routers (``RunReplica.router_state``; none: a unit of no
    router, or one written before plans were)."""
    parts = state.header.get("parts")
    return (
        [p["plan"] for p in parts if isinstance(p, dict) and "plan" in p] if isinstance(parts, list) else []
    )
