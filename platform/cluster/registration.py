"""The queries of a cluster coordinator (``run --zk``): registration in batches, removal, and
reads that the registry in ZooKeeper answers when no leader does.

:class:`QueriesMixin` is the query half of :class:`~linkstream.cluster.service.ClusterService`.
A batch (``POST /queries`` with a JSON array) costs a few ZooKeeper transactions whatever its
size: the registry records are created together
(:meth:`~linkstream.scheduler.registry.QueryRegistry.register_many`), the leader's live engine
takes the whole batch in one call of its worker, and
:meth:`~linkstream.cluster.remote_engine.RemoteEngine.flush` rewrites the run node once and
submits the tasks together; the coordinator then places them in one pass.  Query states go to
the registry from a thread of their own, coalesced.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from kazoo.exceptions import KazooException

from linkstream.api.backend import BatchFailed
from linkstream.cluster.driverstate import task_id
from linkstream.cluster.remote_engine import RemoteEngine
from linkstream.cluster.results import ResultLog
from linkstream.engine.embedded import QueryStats
from linkstream.engine.live.runtime import LiveEngine, QueryConflict, QueryView, UnknownQuery
from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.query.errors import QueryError
from linkstream.scheduler.registry import QueryExistsError, QueryNotFoundError, QueryRecord, QueryRegistry

logger = logging.getLogger(__name__)

#: the token of the request being served (set by :class:`~linkstream.cluster.proxy.LeaderProxy`),
#: recorded as the ``owner`` of what it registers
OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar("linkstream_owner", default=None)


def registration_order(rec: QueryRecord) -> tuple[int, int, str]:
    """Sort key of registry records: registration time, then place in its batch."""
    return (rec.metadata.get("registered_at") or 0, rec.metadata.get("order") or 0, rec.id)


def stale_registrations(records: Sequence[Any], registered: set[str]) -> set[int]:
    """Sequence numbers of the log's (un)registrations a new leader passes over: every one of
    a query the registry no longer holds (its containers could not load it: they read query
    texts from the registry), and all but the last registration of one it holds."""
    last: dict[str, int] = {}
    for rec in records:
        if rec.kind == "register":
            last[rec.header["name"]] = rec.seq
        elif rec.kind == "unregister":
            last.pop(rec.header["name"], None)
    return {
        rec.seq
        for rec in records
        if rec.kind in ("register", "unregister")
        and (rec.header["name"] not in registered or last.get(rec.header["name"]) != rec.seq)
    }


class QueriesMixin:
    """Registering, removing and reading queries (see the module docstring)."""

    identifier: str
    base: str
    registry: QueryRegistry
    log: ResultLog
    _parse_lock: threading.Lock
    _live: LiveEngine | None
    _remote: RemoteEngine | None
    _ready: threading.Event
    _cq_cache: dict[tuple[str, str], ContinuousQuery]
    _closed: bool
    _states_lock: threading.Lock
    _states_due: dict[str, str]
    _states_wake: threading.Event

    #: the leader's engine whose registrations the registry remembers (see :meth:`_same_term`)
    _written_term: object = None

    def _leader_live(self, wait: float = 10.0) -> LiveEngine:
        raise NotImplementedError

    def _same_term(self) -> None:
        """The registry writes the first state of a record it created without reading it
        (:meth:`~linkstream.scheduler.registry.QueryRegistry.update_states`); what it kept
        is dropped once the leader's engine changed: another leader may have written since."""
        if self._remote is not self._written_term:
            self.registry.forget_written()
            self._written_term = self._remote

    def register(self, text: str, name: str | None = None, *, default_name: str | None = None) -> str:
        """Writes the query to the registry, then registers it on the leader's live engine."""
        try:
            return self.register_many([(text, name, default_name)])[0]
        except BatchFailed as exc:
            raise exc.error from None

    def register_many(
        self,
        items: Sequence[tuple[str, str | None, str | None]],
        *,
        parsed: Sequence[ContinuousQuery] | None = None,
    ) -> list[str]:
        """Registers ``(text, name, default_name)`` queries in order; returns their names.

        ``parsed``: the texts parsed already (with ``default_name=""``), as the API's
        compile step does under its limits; else they are parsed here.

        The batch costs a few ZooKeeper transactions, not a few round trips per query:
        the registry records are created together, the leader's run node is rewritten
        once and the tasks are submitted together (the scheduler places them in one pass).

        Raises:
            BatchFailed: Item ``index`` failed (its error in ``error``: a
                :class:`~linkstream.query.errors.QueryError` or
                :class:`~linkstream.engine.live.runtime.QueryConflict`); the queries
                before it are registered (``registered``).
            NotLeading: No leader serves (nothing registered).
        """
        live = self._leader_live()
        remote = self._remote
        t0 = time.perf_counter()
        now = int(time.time() * 1000)
        owner = OWNER.get()
        # A name the registry holds already fails the batch's creation at that query
        # (QueryExistsError below): the registry's ids are listed only to name a nameless query.
        taken: set[str] | None = None
        batch: set[str] = set()
        count = 0
        rows: list[tuple[str, str, str, dict[str, Any]]] = []
        names: list[str] = []
        accepted: list[ContinuousQuery] = []
        failure: tuple[int, Exception] | None = None
        for i, (text, name, default_name) in enumerate(items):
            try:
                for n in (name, default_name):
                    if n is not None and (not n or len(n) > 512 or any(ord(ch) < 32 for ch in n)):
                        raise QueryError("a query name must be 1-512 printable characters")
                if parsed is not None:
                    cq = parsed[i]
                else:
                    with self._parse_lock:
                        cq = parse_continuous(text, default_name="", base=self.base)
                if not cq.windows:
                    raise QueryError(
                        "not a continuous query: it reads no stream window (send one-shot queries to /sparql)"
                    )
                qname = name or cq.name or default_name
                if qname and task_id(qname) in batch:
                    raise QueryConflict("a query named %r is already registered" % qname)
                while not qname:
                    if taken is None:
                        taken = set(self.registry.list())
                        count = len(taken)
                    count += 1
                    qid = task_id("q%d" % count)
                    qname = "q%d" % count if qid not in taken and qid not in batch else ""
            except (QueryError, QueryConflict) as exc:
                failure = (i, exc)
                break
            batch.add(task_id(qname))
            meta = {
                "origin": "api",
                "dialect": cq.dialect,
                "owner": owner,
                "registered_at": now,
                "order": len(rows),  # within the batch (one registered_at)
                "state": "pending",
                "name": qname,
            }
            rows.append((task_id(qname), text, cq.dialect, meta))
            names.append(qname)
            accepted.append(cq)
        t1 = time.perf_counter()
        self._same_term()
        try:
            stored = self.registry.register_many(rows)
        except QueryExistsError as exc:  # the name is taken (before, or by another coordinator meanwhile)
            stored = next(k for k, r in enumerate(rows) if r[0] == exc.args[0])
            failure = (stored, QueryConflict("a query named %r is already registered" % names[stored]))
        cqs = [replace(cq, name=n) for cq, n in zip(accepted, names, strict=True)][:stored]
        t2 = time.perf_counter()
        try:
            done, late = self._load(live, remote, cqs, [row[1] for row in rows[:stored]])
        except BaseException:
            kept = set(live.query_names())
            for (qid, *_), n in zip(rows[:stored], names, strict=False):
                if n not in kept:
                    self.registry.unregister(qid)
            raise
        if late is not None:
            failure = late
            for qid, *_ in rows[late[0] : stored]:
                self.registry.unregister(qid)
        logger.info(
            "%s: registered %d queries (%s): names %.3f s, registry %.3f s, leader (run node, tasks) %.3f s",
            self.identifier,
            len(done),
            ", ".join(done) if len(done) <= 3 else f"{done[0]}, ..., {done[-1]}",
            t1 - t0,
            t2 - t1,
            time.perf_counter() - t2,
        )
        if failure is not None:
            raise BatchFailed(failure[0], done, failure[1])
        return done

    @staticmethod
    def _load(
        live: LiveEngine,
        remote: RemoteEngine | None,
        cqs: Sequence[ContinuousQuery],
        texts: Sequence[str] = (),
    ) -> tuple[list[str], tuple[int, Exception] | None]:
        """Registers parsed queries on the leader's live engine in one call of its worker (a
        call per query would cost a thread hand-over each), then publishes them once
        (:meth:`RemoteEngine.flush`).  Returns the names registered and the first failure.

        ``texts``: the queries' texts; with a durable ingest log (``run --zk --state-dir``) the
        registrations are logged between the same elements the worker sees them (a new leader
        replays them in that order)."""

        def apply() -> tuple[list[str], tuple[int, Exception] | None]:
            done: list[str] = []
            failed = None
            try:
                for k, cq in enumerate(cqs):
                    try:
                        done.append(live._do_register(cq, quiet=True))  # one line for the batch
                    except (QueryError, QueryConflict) as exc:
                        failed = (k, exc)
                        break
            finally:
                if remote is not None:
                    remote.flush()
            return done, failed

        logged = [(cq.name, text, cq.dialect) for cq, text in zip(cqs, texts, strict=True)] if texts else []
        result: tuple[list[str], tuple[int, Exception] | None] = live.call_registering(
            apply, logged, timeout=max(60.0, 0.01 * len(cqs))
        )
        return result

    def unregister(self, name: str) -> None:
        """Removes the query from the registry and from the run."""
        live = self._leader_live()
        existed = self.registry.unregister(task_id(name))
        try:
            live.unregister(name)
        except UnknownQuery:
            if not existed:
                raise
        self.log.append(self.log.max_t or 0, {}, ended=[name])  # its subscriptions end everywhere

    def query_owner(self, name: str) -> str | None:
        """The token (name, or id of an unknown bearer) that registered ``name``, from the registry."""
        try:
            owner = self.registry.get(task_id(name)).metadata.get("owner")
        except QueryNotFoundError:
            return None
        return None if owner is None else str(owner)

    def _records(self) -> dict[str, QueryRecord]:
        """The registry's API queries by name (read pipelined)."""
        out = {}
        for rec in self.registry.get_many(self.registry.list()):
            if rec is not None and rec.metadata.get("origin") == "api" and rec.metadata.get("name"):
                out[rec.metadata["name"]] = rec
        return out

    def query_names(self) -> list[str]:
        """Registered queries: the leader's, then any the registry holds that it does not."""
        live = self._live if self._ready.is_set() else None
        names = live.query_names() if live is not None else []
        known = {task_id(n) for n in names}
        missing = [qid for qid in self.registry.list() if qid not in known]  # one read on the leader
        recs = [
            r
            for r in self.registry.get_many(missing)
            if r is not None and r.metadata.get("origin") == "api" and r.metadata.get("name")
        ]
        seen = set(names)
        extra = [r.metadata["name"] for r in sorted(recs, key=registration_order)]
        return names + [n for n in extra if n not in seen]

    def view(self, name: str) -> QueryView:
        """The leader's view of the query, else what the registry says."""
        live, remote = (self._live, self._remote) if self._ready.is_set() else (None, None)
        if live is not None and remote is not None:
            try:
                v = live.view(name)
                return replace(
                    v, state=remote.states.get(name, "pending"), subscribers=self.log.subscribers(name)
                )
            except UnknownQuery:
                pass
        try:
            rec = self.registry.get(task_id(name))
        except QueryNotFoundError:
            raise UnknownQuery(name) from None
        key = (name, rec.text)
        cq = self._cq_cache.get(key)
        if cq is None:
            with self._parse_lock:
                cq = parse_continuous(rec.text, default_name=name, base=self.base)
            cq = self._cq_cache[key] = replace(cq, name=name)
        state = str(rec.metadata.get("state") or "pending")
        return QueryView(cq, QueryStats(), None, None, None, self.log.subscribers(name), 0, state)

    def _write_states(self, states: dict[str, str]) -> None:
        """Queues query states for the registry (written by their own thread, coalesced: the
        live engine's worker must not wait for ZooKeeper)."""
        with self._states_lock:
            self._states_due.update(states)
        self._states_wake.set()

    def _state_writer(self) -> None:
        while not self._closed:
            self._states_wake.wait(0.5)
            self._states_wake.clear()
            with self._states_lock:
                due, self._states_due = self._states_due, {}
            if not due:
                continue
            try:
                self._same_term()
                self.registry.update_states({task_id(n): {"state": st} for n, st in due.items()})
            except KazooException:
                logger.warning("cannot write the states of %d queries", len(due), exc_info=True)
                with self._states_lock:
                    self._states_due = {**due, **self._states_due}
                time.sleep(0.5)


__all__ = ["OWNER", "QueriesMixin", "registration_order", "stale_registrations"]
