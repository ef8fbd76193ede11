"""The worker side of :class:`~linkstream.engine.live.runtime.LiveEngine`.

Everything here runs on the live engine's one worker thread, the only thread that
touches the embedded engine: the command loop, ingestion with late-element accounting,
report scheduling by watermark and the ticks themselves.  :class:`LiveWorker` is a mixin
of :class:`~linkstream.engine.live.runtime.LiveEngine` (which holds the state these methods use
and the thread-safe API the other threads call).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.embedded import Engine as _EmbeddedEngine
from linkstream.engine.embedded import ReportLines
from linkstream.engine.live.batchpush import Decided, RefRows, TermRows
from linkstream.engine.live.cohorts import Cohort, CohortSchedule, reporting_of
from linkstream.engine.live.delivery import LiveDelivery
from linkstream.engine.live.grouprings import RingMap
from linkstream.engine.live.state import (
    EngineClosed,
    QueryConflict,
    RetentionGuard,
    UnknownQuery,
    _Accepted,
    _Entry,
    _Stream,
)
from linkstream.engine.live.subscription import ReportRing
from linkstream.operators.window import WindowBuffer
from linkstream.query.continuous import ContinuousQuery
from linkstream.rdf.eventtime import DEFAULT_MAX_TIME_JUMP_MS, check_event_time, check_jump
from linkstream.rdf.static import dedup_triples

if TYPE_CHECKING:
    from linkstream.engine.embedded import Engine
    from linkstream.engine.live.ingestlog import IngestLog
    from linkstream.metrics import LiveMetrics

log = logging.getLogger(__name__)

#: an element's triples: ``(n, 3)`` int64 dictionary ids, or ``(s, p, o)`` N-Triples strings
Triples = np.ndarray | Sequence[tuple[str, str, str]]

_GC_EVERY = 64  # command batches between stream-buffer collections
_TICKS_PER_BATCH = 256  # report times evaluated between two looks at the command queue
_STREAM_FIGURES = ("watermark", "elements", "triples", "late", "rejected")
#: look for a quiet gap only when at least this many smallest steps separate the next
#: report time from the watermark; after a look that skipped nothing, wait this many ticks
_SKIP_SPAN = 16
_SKIP_BACKOFF = 8


class LiveWorker(LiveDelivery):
    """The worker-thread methods of :class:`~linkstream.engine.live.runtime.LiveEngine`.

    Event-time rules (:mod:`linkstream.rdf.eventtime`): :meth:`_check_time` (called by
    ``push`` under the engine lock) and :meth:`_do_advance` refuse a time outside
    ``0 <= t < 2^53`` ms, or more than :attr:`max_time_jump_ms` ahead of the current time
    (a stream's latest accepted element; before its first, the last report time or
    explicit watermark), with :class:`~linkstream.rdf.eventtime.EventTimeError`.  Report
    times over a quiet gap cost the reports that write something (see :meth:`_skip_quiet`).
    """

    #: largest accepted forward jump of a stream's time / the explicit watermark (ms);
    #: ``None`` or 0: no limit (``linkstream run --max-time-jump``)
    max_time_jump_ms: int | None = DEFAULT_MAX_TIME_JUMP_MS
    _skip_backoff = 0
    #: (registered queries, their smallest step) when last counted (see :meth:`_min_step`)
    _min_step_of: tuple[int, int] | None = None

    # state set by ``LiveEngine.__init__`` (declared here for the type checker only)
    engine: Engine
    absorb: frozenset[str]
    idle_s: float | None
    retention_ms: int
    metrics: LiveMetrics
    clock: Callable[[], float]
    _lock: threading.Lock
    _queue: queue.SimpleQueue[tuple]
    _space: threading.BoundedSemaphore
    _entries: dict[str, _Entry]
    _rings: RingMap
    results_retention_s: float
    #: each query's recent reports kept in a ring here (``False``: a cluster leader, whose
    #: result log keeps them for every reader; a ring here would be a second copy nobody reads)
    keep_rings: bool = True
    _accepted: dict[str, _Accepted]
    _frontier: int | None
    _streams: dict[str, _Stream]
    _guards: dict[str, RetentionGuard]
    _relevant: dict[str, int]
    _relevant_since: dict[str, float]
    _due: CohortSchedule
    _ahead: dict[str, int]
    _due_names: dict[tuple[frozenset[str], ...], list[str]]
    _delivered_n: int
    _subbed: set[str]
    _pending: set[str]
    _fired: int | None
    _explicit: int | None
    _batches: int
    _operators: int
    _count_late: Callable[[str, _Accepted, int, int], None]
    _log: IngestLog | None

    def _run(self) -> None:
        poll = 0.05 if self.idle_s is None else min(0.05, self.idle_s / 4)
        stop = busy = False
        barriers: list[Future[Any]] = []  # resolved once nothing due is left
        while not stop:
            try:
                batch = [self._queue.get(timeout=0 if busy else poll)]
            except queue.Empty:
                batch = []
            while batch and len(batch) < 4096:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for cmd in batch:
                kind = cmd[0]
                if kind == "pushes":  # a body's elements taken at once (push_many)
                    try:
                        if len(cmd) == 3:
                            self._ingest_many(cmd[1], cmd[2])
                        else:  # decided wanted (push_many's ``decided``), drops to log, a replay's
                            self._ingest_decided(
                                cmd[1],
                                cmd[2],
                                cmd[3],
                                cmd[4],
                                cmd[5] if len(cmd) > 5 else None,
                                len(cmd) > 6 and cmd[6],
                            )
                    except Exception:  # a bad element must not stop the engine
                        log.exception("cannot ingest elements of <%s>", cmd[1])
                        if len(cmd) > 3 and cmd[4] is not None:
                            cmd[4].failed("the leader could not ingest the elements")
                    finally:
                        self._space.release(len(cmd[2]))
                elif kind == "stop":
                    stop = True
                else:
                    fn, fut = cmd[1], cmd[2]
                    if not fut.set_running_or_notify_cancel():
                        continue
                    try:
                        res = fn()
                    except BaseException as e:  # handed to the caller
                        fut.set_exception(e)
                        continue
                    if kind == "call":
                        fut.set_result(res)
                    else:
                        barriers.append(fut)
            try:
                busy = self._fire()
            except Exception:  # never let the worker die: it owns the engine
                log.exception("report scheduling failed")
                busy = False
            if not busy or stop:
                for fut in barriers:
                    fut.set_result(self._fired)
                barriers = []
            self._batches += 1
            if batch and self._batches % _GC_EVERY == 0:
                self._collect()
            elif not batch and not busy:
                idle = getattr(self.engine, "idle", None)  # (a cluster's: restores not awaiting a tick)
                if idle is not None:
                    try:
                        idle()
                    except Exception:  # never let the worker die: it owns the engine
                        log.exception("idle work failed")
        while True:  # stopped: whoever still waits gets an answer
            try:
                cmd = self._queue.get_nowait()
            except queue.Empty:
                return
            if cmd[0] == "pushes":
                self._space.release(len(cmd[2]))
                if len(cmd) > 3 and cmd[4] is not None:
                    cmd[4].failed("the live engine is closed")
            elif cmd[0] != "stop" and cmd[2].set_running_or_notify_cancel():
                cmd[2].set_exception(EngineClosed("the live engine is closed"))

    def _encode_table(self, terms: Sequence[str]) -> np.ndarray:
        return np.asarray(self.engine.dictionary.encode_many(list(terms)), dtype=np.int64)

    def _ingest_decided(
        self,
        stream: str,
        items: list[tuple[int, Triples | TermRows]],
        positions: list[int],
        decided: Decided | None,
        seqs: list[int] | None = None,
        replayed: bool = False,
    ) -> None:
        """:meth:`_ingest_many`, telling ``decided`` which of ``positions`` (the items' indexes
        in their body) were applied and the stream's applied count before the first.  The
        items it drops as late are logged (``seqs``: their push records) in one ``drop``
        record: a replay of the log skips them too, and counts the same elements applied.
        ``replayed``: logged elements no drop record names, all applied (no lateness check:
        ``BatchPush._replayed_push``)."""
        st = self._streams.get(stream)
        first = 0 if st is None else st.applied
        kept = self._ingest_many(stream, items, late=not replayed)
        logged = None
        if kept is not None and seqs is not None and self._log is not None:
            keep = set(kept)
            dropped = [seqs[j] for j in range(len(items)) if j not in keep]
            if dropped:
                logged = self._log.append_drop(stream, dropped)
        if decided is not None:
            decided.applied(positions if kept is None else [positions[j] for j in kept], first, logged)

    def _ingest_many(
        self, stream: str, items: list[tuple[int, Triples | TermRows]], late: bool = True
    ) -> list[int] | None:
        """The elements of one ``push_many`` run, in order: as :meth:`_ingest` each, with the
        terms of all of them encoded in one dictionary call (a :class:`TermRows` table once).
        ``late=False`` (a replay's logged elements): none is dropped as late.

        Returns:
            ``None`` when every element was ingested, else the indexes of those that were
            (the others were late: a report fired after they were taken).
        """
        frontier = self._frontier_now()
        keep = items
        kept: list[int] | None = None
        if late and frontier is not None and any(t < frontier for t, _ in items):
            keep, kept = [], []
            for j, (t, tr) in enumerate(items):
                if t < frontier:
                    with self._lock:
                        self._count_late(stream, self._accepted[stream], t, frontier)
                else:
                    keep.append((t, tr))
                    kept.append(j)
        tables: dict[int, np.ndarray] = {}
        strs = [tr for _, tr in keep if not isinstance(tr, (np.ndarray, TermRows))]
        flat = [term for tr in strs for triple in tr for term in triple]
        coded = (
            np.asarray(self.engine.dictionary.encode_many(flat), dtype=np.int64).reshape(-1, 3)
            if flat
            else np.empty((0, 3), dtype=np.int64)
        )
        at = 0
        for t, tr in keep:
            if isinstance(tr, np.ndarray):
                ids = tr
            elif isinstance(tr, RefRows):  # --ingest meta: the engine (the leader's) takes the reference
                self._ingest_ids(stream, t, tr)  # type: ignore[arg-type]  # the meta engine takes refs
                continue
            elif isinstance(tr, TermRows):
                table = tables.get(id(tr.terms))
                if table is None:
                    table = tables[id(tr.terms)] = self._encode_table(tr.terms)
                ids = table[tr.idx]
            else:
                ids = coded[at : at + len(tr)]
                at += len(tr)
            self._ingest_ids(stream, t, ids)
        return kept

    def _ingest_ids(self, stream: str, t: int, ids: np.ndarray) -> None:
        buf = self.engine.buffer(stream)
        self._guard(stream, buf)
        n = len(ids)
        if isinstance(ids, RefRows):
            pass  # no triples here: who needs them reads them from the owner's stream log
        elif 1 < n <= 16:  # (an element of a few triples: a set is cheaper than a sort)
            rows = ids.tolist()
            ids = (
                dedup_triples(ids)
                if len(set(map(tuple, rows))) < n
                else np.ascontiguousarray(ids, dtype=np.int64)
            )
        else:
            ids = dedup_triples(ids)
        self.engine.ingest(stream, t, ids)
        if stream in self.absorb:
            # one element = one atomic batch of the store; published with the stream's VTS entry
            self.engine.store.absorb(stream, t, ids)  # type: ignore[attr-defined]  # checked in LiveEngine.__init__
        st = self._streams.get(stream)
        if st is None:
            st = self._streams[stream] = _Stream()
        st.watermark = t if st.watermark is None else max(st.watermark, t)
        st.first = t if st.first is None else min(st.first, t)
        st.last_seen = self.clock()
        st.applied += 1

    def applied_count(self, stream: str) -> int:
        """The stream's applied count: its elements the worker ingested (``_Stream.applied``)."""
        st = self._streams.get(stream)
        return 0 if st is None else st.applied

    def _check_time(self, stream: str, acc: _Accepted, t: int) -> None:
        """Refuses ``t`` for ``stream`` (push side, under ``_lock``) by the event-time rules.

        Raises:
            EventTimeError: ``t`` is outside the accepted range or too far ahead.
        """
        check_event_time(t, "stream <%s>" % stream)
        ref = acc.watermark if acc.watermark is not None else self._frontier
        check_jump(t, ref, self.max_time_jump_ms, "stream <%s>" % stream)

    def _frontier_now(self) -> int | None:
        return max((x for x in (self._fired, self._explicit) if x is not None), default=None)

    def _guard(self, stream: str, buf: WindowBuffer) -> None:
        if stream not in self._guards:
            g = self._guards[stream] = RetentionGuard(self.retention_ms)
            g.lo = buf.base
            buf.windows.append(g)  # gc reads only ``lo``

    def _collect(self) -> None:
        frontier = self._frontier_now()
        for s, g in self._guards.items():
            buf = self.engine.buffers[s]
            now = max((x for x in (frontier, buf.watermark) if x is not None), default=None)
            if now is not None:
                g.advance(buf, now)
        self.engine.gc()

    def _do_advance(self, t: int) -> None:
        check_event_time(t, "watermark")
        marks = [st.watermark for st in self._streams.values() if st.watermark is not None]
        ref = max((x for x in (*marks, self._fired, self._explicit) if x is not None), default=None)
        check_jump(t, ref, self.max_time_jump_ms, "watermark")
        if self._explicit is None or t > self._explicit:
            self._explicit = t
            with self._lock:
                self._frontier = self._frontier_now()

    def _do_register(self, cq: ContinuousQuery, quiet: bool = False) -> str:
        """Registers ``cq`` (the worker's thread); ``quiet``: logged at DEBUG, for a batch whose
        caller logs one line for all (a line per query was ~8% of a coordinator's CPU while
        10,000 queries were registered)."""
        with self._lock:
            if cq.name in self._entries:
                raise QueryConflict("a query named %r is already registered" % cq.name)
        rq = self.engine.register(cq)
        streams = frozenset(w.stream for w in cq.windows)
        now = self.clock()
        for s in streams:
            self._guard(s, self.engine.buffer(s))
            if not self._relevant.get(s):
                self._relevant_since[s] = now
            self._relevant[s] = self._relevant.get(s, 0) + 1
        e = _Entry(cq, rq, streams)
        marks = [self._streams[s].watermark for s in streams if s in self._streams]
        ref = max((x for x in (*marks, self._fired, self._explicit) if x is not None), default=None)
        if ref is None:
            self._pending.add(cq.name)
        else:
            self._schedule(cq.name, e, rq.first_report_after(ref))
        with self._lock:
            self._entries[cq.name] = e
            if self.keep_rings:
                self._rings[cq.name] = ReportRing(self.results_retention_s)
        self._gauges()
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "registered query %s (%s, %d windows)",
            cq.name,
            cq.dialect,
            len(cq.windows),
        )
        return cq.name

    def _gauges(self) -> None:
        self._operators = self.engine.operator_count()
        self.metrics.operators.set(self._operators)
        self.metrics.queries_registered.set(len(self._entries))

    def _schedule(self, name: str, e: _Entry, c: int) -> None:
        """Schedules ``name`` (in no cohort) at report time ``c``, with the queries of its
        steps due then."""
        if e.first_report is None:
            e.first_report = c
        if e.emitted is not None and c <= e.emitted:  # restored: delivered up to e.emitted
            self._ahead[name] = e.emitted
        self._due.place(name, e, c)

    def _settle(self) -> None:
        """Every query's report count, last report and last delivered report brought up to
        date from its cohort (a checkpoint is about to read them; the worker's thread)."""
        for k in self._due.cohorts():
            k.settle_all(self._entries)

    def _do_unregister(self, name: str) -> None:
        with self._lock:
            e = self._entries.pop(name, None)
            self._rings.pop(name, None)
        if e is None:
            raise UnknownQuery(name)
        self._pending.discard(name)
        self._ahead.pop(name, None)
        if e.cohort is not None:
            e.cohort.remove(name, e)
        with self._lock:
            self._subbed.discard(name)
        self._min_step_of = None
        self.engine.unregister(name)
        for s in e.streams:
            self._relevant[s] -= 1
            if not self._relevant[s]:
                del self._relevant[s]
        for sub in e.subscribers:
            sub.finish()
        self._gauges()
        log.info("unregistered query %s", name)

    def _watermark(self) -> int | None:
        """The event time every stream read by a query has passed (see the module docstring)."""
        now = self.clock()
        marks: list[int] = []
        blocked = False
        for s in self._relevant:
            st = self._streams.get(s)
            if self.idle_s is not None:
                last = max(st.last_seen if st else 0.0, self._relevant_since.get(s, 0.0))
                if now - last >= self.idle_s:
                    continue
            if st is None or st.watermark is None:
                blocked = True
                break
            marks.append(st.watermark)
        if blocked:
            w = None
        elif marks:
            w = min(marks)
        else:  # every stream idle: nothing holds back what they ingested
            got = [self._streams[s].watermark for s in self._relevant if s in self._streams]
            w = max((x for x in got if x is not None), default=None)
        return max((x for x in (w, self._explicit) if x is not None), default=None)

    def _fire(self) -> bool:
        """Evaluates the report times the watermark has passed; ``True`` if some are left.

        At most ``_TICKS_PER_BATCH`` report times go per call, so that a large jump of the
        watermark does not keep the worker from its commands.
        """
        wm = self._watermark()
        if wm is None:
            return False
        self.metrics.watermark.set(wm)
        for name in list(self._pending):
            e = self._entries[name]
            # a stream's ``first`` is set by the ingestion that creates its entry
            firsts = [
                f for s in e.streams if s in self._streams and (f := self._streams[s].first) is not None
            ]
            if not firsts:
                continue
            c = e.rq.first_report_after(min(firsts))
            if self._fired is not None:
                c = max(c, e.rq.first_report_after(self._fired))
            self._pending.discard(name)
            self._schedule(name, e, c)
        due = self._due
        ticks = 0
        can_skip = isinstance(self.engine, _EmbeddedEngine)
        tick_many = None if can_skip else getattr(self.engine, "tick_many", None)
        if tick_many is not None:
            return self._fire_many(tick_many, wm)
        while (at := due.first()) is not None and at <= wm:
            if ticks == _TICKS_PER_BATCH:
                return True
            if can_skip and self.engine.last_tick is not None:
                if wm - at >= _SKIP_SPAN * self._min_step():
                    if self._skip_backoff > 0:
                        self._skip_backoff -= 1
                    else:
                        done = self._skip_quiet(wm)
                        if done:
                            continue
                        if done is False:
                            self._skip_backoff = _SKIP_BACKOFF
                at = due.first()
                if at is None or at > wm:
                    break
            cohorts = due.take(at)
            if cohorts:
                self._tick(at, cohorts)
                ticks += 1
        return False

    def _min_step(self) -> int:
        """The smallest step of the registered queries (1 with none), counted again only
        when the registrations changed (not once per report time over every query)."""
        n = len(self._entries)
        got = self._min_step_of
        if got is None or got[0] != n:
            step = min((s for e in self._entries.values() for s in e.rq.steps), default=1)
            got = self._min_step_of = (n, step)
        return got[1]

    def _skip_quiet(self, wm: int) -> bool | None:
        """Jumps the queries whose reports write nothing over the quiet gap before ``wm``.

        The embedded engine's :meth:`~linkstream.engine.embedded.Engine.quiet_until` gives
        the first time a window's content can change (elements already ingested, even
        ahead of the watermark, count); every query due before it that
        :meth:`~linkstream.engine.embedded.Engine.skips_quietly` moves to its first report
        time from there (or after ``wm``), its skipped reports counted.  The report times
        skipped count as fired: an element older than the last of them is late, as if
        they had been evaluated one by one.

        Returns ``True`` if some query jumped, ``None`` if a window changes before the next
        report time, ``False`` if no query due in the gap may skip it.
        """
        engine = self.engine
        assert isinstance(engine, _EmbeddedEngine)
        due = self._due
        first = due.first()
        h = engine.quiet_until(wm)
        if h is None or first is None or h <= first:
            return None
        keep: list[tuple[int, Cohort]] = []
        fired = None
        entries = self._entries
        while (c := due.first()) is not None and c < h and c <= wm:
            for k in due.take(c):
                if engine.all_skip_quietly(k.frozen()):
                    mover = k
                else:  # the members that may skip leave for a cohort of their own
                    skip = [q for q in k.names if engine.skips_quietly(entries[q].rq)]
                    keep.append((c, k))
                    if not skip:
                        continue
                    mover = Cohort(k.steps, c, k.counting)
                    for q in skip:
                        e = entries[q]
                        k.remove(q, e)
                        mover.add(q, e)
                rq = entries[next(iter(mover.names))].rq  # (the schedule is the steps')
                nxt = rq.first_report_after(h - 1 if h <= wm else wm)  # (past this loop's times)
                n = rq.reports_between(c - 1, nxt - 1)
                last = rq.last_report_before(nxt)
                mover.reported(last, n)
                self.metrics.reports.inc(n * len(mover))
                fired = last if fired is None else max(fired, last)
                due.move(mover, nxt, entries)
        for c, k in keep:
            if k.names:
                due.move(k, c, entries)
        if fired is None:
            return False
        self._fired = fired if self._fired is None else max(self._fired, fired)
        with self._lock:
            self._frontier = self._frontier_now()
        return True

    def _next_of(self, cohorts: list[Cohort], c: int) -> None:
        """Schedules each of ``cohorts`` (taken at ``c``) at its next report time."""
        entries = self._entries
        nexts: dict[tuple[int, ...], int] = {}
        for k in cohorts:
            if not k.names:  # (emptied by a merge into another of the list)
                continue
            nxt = nexts.get(k.steps)
            if nxt is None:
                nxt = nexts[k.steps] = entries[next(iter(k.names))].rq.next_report(c)
            self._due.move(k, nxt, entries)

    def _sorted_due(self, stamp: list[tuple[Cohort, frozenset[str]]]) -> list[str]:
        """The sorted names of the cohorts of ``stamp`` (with those members): sorted once
        for as long as the cohorts keep their members, not at every report time (the list
        is shared: its readers do not change it)."""
        key = tuple(members for _, members in stamp)  # (a frozenset keeps its hash)
        got = self._due_names.get(key)
        if got is None:
            if len(self._due_names) >= 64:  # (cohorts whose members changed since)
                self._due_names.clear()
            got = self._due_names[key] = sorted(frozenset().union(*key))
        return got

    def _fire_many(self, tick_many: Callable[..., Any], wm: int) -> bool:
        """:meth:`_fire` for an engine that evaluates several report times in one call (the
        cluster leader's: it sends them all to the containers before it waits for the first
        answer, so the containers go from one to the next without a round trip in between).

        The report times are the ones :meth:`_fire` would evaluate one by one (at most
        ``_TICKS_PER_BATCH``): which queries are due at each follows from the schedule alone,
        and no element or command is taken between them either way.
        """
        due = self._due
        plan: list[tuple[int, list[str]]] = []
        stamps: list[list[tuple[Cohort, frozenset[str]]]] = []  # each time's cohorts and members
        while (c := due.first()) is not None and c <= wm and len(plan) < _TICKS_PER_BATCH:
            cohorts = due.take(c)
            if cohorts:
                stamp = [(k, k.frozen()) for k in cohorts]
                plan.append((c, self._sorted_due(stamp)))
                stamps.append(stamp)
                self._next_of(cohorts, c)  # as _tick does after the evaluation
        if not plan:
            return False
        t0 = time.perf_counter()
        try:
            outs = list(tick_many(plan))
        except Exception:  # an engine bug: keep the schedule, report nothing at these times
            log.exception("evaluation of report times %d..%d failed", plan[0][0], plan[-1][0])
            outs = []
        each = (time.perf_counter() - t0) / len(plan)
        for i, (c, names) in enumerate(plan):
            self.metrics.report_latency.observe(each)
            self._deliver_each(c, stamps[i], names, outs[i] if i < len(outs) else {})
        return len(plan) == _TICKS_PER_BATCH and (c := due.first()) is not None and c <= wm

    def _tick(self, c: int, cohorts: list[Cohort]) -> None:
        names = reporting_of(cohorts)
        embedded = isinstance(self.engine, _EmbeddedEngine)
        t0 = time.perf_counter()
        out: Any
        try:
            if embedded:  # blocks: kept unsplit (BlockLines); reports counted by the cohorts
                out = self.engine.tick(c, names, count_reports=False, blocks=True)
            else:
                out = self.engine.tick(c, sorted(names))
        except Exception:  # an engine bug: keep the schedule, report nothing at c
            log.exception("evaluation of report time %d failed (queries %s)", c, ", ".join(sorted(names)))
            out = ReportLines({}, names)
        self.metrics.report_latency.observe(time.perf_counter() - t0)
        if isinstance(out, ReportLines):
            self._deliver(c, cohorts, names, out)
        else:
            self._deliver_each(c, [(k, k.frozen()) for k in cohorts], names, out)
        self._next_of(cohorts, c)
