"""A thread-safe live runtime around the embedded engine, for servers.

:class:`LiveEngine` owns one :class:`~linkstream.engine.embedded.Engine` and one worker
thread, the only one that touches the engine; other threads send it commands through a
FIFO.  :meth:`~LiveEngine.push` enqueues an element and returns at once; registering,
unregistering, one-shot queries and :meth:`~LiveEngine.advance_to` wait for the worker.

Report times are driven by event time (SEMANTICS.md §1, §4).  A stream's watermark is
the largest timestamp the worker has ingested from it; the engine's watermark is the
smallest watermark of the streams registered queries read, leaving out streams silent
for ``idle_ms`` of wall-clock time, and never below an explicit ``advance_to``.  Report
time ``c`` fires, as one engine tick, once the watermark reaches ``c`` (a window closing
at ``c`` holds elements with ``t < c``), in order, exactly as a replay fires them.  An
element older than its stream's largest timestamp or than a report time already fired
is late: dropped, counted, logged once per stream.

A query registered while streams run reports from its first close strictly after the
current event time (its streams' watermarks, the last report fired, the explicit
watermark); one registered before its streams have data reports from the first close
after their earliest element, as in a replay.  Its windows hold every retained element
in range: a :class:`RetentionGuard` per stream keeps ``retention_ms`` of event time in
the buffers.  (Count and NOW windows registered late see only what time retention kept.)
"""

from __future__ import annotations

import collections
import gc
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.embedded import Engine, QueryStats
from linkstream.engine.live.batchpush import BatchPush
from linkstream.engine.live.cohorts import CohortSchedule
from linkstream.engine.live.grouprings import GroupLog, RingMap
from linkstream.engine.live.state import (
    BatchFailed,
    EngineClosed,
    QueryConflict,
    QueryView,
    RetentionGuard,
    UnknownQuery,
    _Accepted,
    _Entry,
    _Stream,
)
from linkstream.engine.live.subscription import RESULTS_RETENTION_S, Cursor, Subscription
from linkstream.engine.live.worker import _STREAM_FIGURES, LiveWorker, Triples
from linkstream.engine.oneshot.embedded import evaluate_one_shot, parse_one_shot
from linkstream.metrics import LiveMetrics
from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.query.errors import QueryError
from linkstream.rdf.dictionary import Dictionary
from linkstream.rdf.static import dedup_triples

if TYPE_CHECKING:
    from linkstream.engine.live.checkpoint import Checkpointer
    from linkstream.engine.live.ingestlog import IngestLog
    from linkstream.store.checkpoints import Checkpoint, CheckpointStore

log = logging.getLogger(__name__)


#: a registration batch of at least this many queries runs with the cyclic collector off and
#: freezes what it built (see :meth:`LiveEngine.register_many`)
FREEZE_BATCH = 256

__all__ = ["EngineClosed", "LiveEngine", "QueryConflict", "QueryView", "RetentionGuard", "UnknownQuery"]


class LiveEngine(LiveWorker, BatchPush):
    """A continuous query engine fed and queried while it runs (thread-safe).

    Args:
        engine: The engine to run (a fresh one on ``dictionary`` when ``None``); it must
            not be used by anything else once the live engine has started.
        dictionary: Term dictionary of a fresh engine.
        default_step: Report step (ms) of windows without STEP, count and NOW windows.
        idle_ms: Wall-clock ms after which a stream that ingested nothing stops holding
            back the watermark; ``None`` or ``<= 0``: streams never go idle.
        retention_ms: Event time (ms) of stream history kept for late-registered queries.
        subscriber_queue: Lines a subscriber may have pending before it loses the oldest.
        results_retention_s: Wall-clock seconds of each query's reports kept for
            subscribers that resume after a result id (:class:`ReportRing`).
        max_pending: Elements queued for the worker before :meth:`push` blocks.
        base: Base IRI for relative IRIs in queries.
        metrics: Where to count; a private :class:`~linkstream.metrics.LiveMetrics` if ``None``.
        clock: Wall clock in seconds (monotonic), for idleness.
    """

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        dictionary: Dictionary | None = None,
        default_step: int = 1000,
        idle_ms: int | None = 5000,
        retention_ms: int = 60_000,
        subscriber_queue: int = 10_000,
        results_retention_s: float = RESULTS_RETENTION_S,
        max_pending: int = 100_000,
        base: str = "http://localhost/",
        metrics: LiveMetrics | None = None,
        clock: Callable[[], float] = time.monotonic,
        absorb: Collection[str] = (),
    ) -> None:
        self.engine = engine if engine is not None else Engine(dictionary, default_step=default_step)
        #: streams whose elements are also absorbed into ``engine.store`` (timeless data that
        #: one-shot queries see on consistent snapshots)
        self.absorb = frozenset(absorb)
        if self.absorb and not callable(getattr(getattr(self.engine, "store", None), "absorb", None)):
            raise ValueError("absorbing streams needs an engine with a store (engine.store)")
        self.idle_s = idle_ms / 1000.0 if idle_ms and idle_ms > 0 else None
        self.retention_ms = retention_ms
        self.subscriber_queue = subscriber_queue
        self.results_retention_s = results_retention_s
        self._rings = RingMap()  # query -> its recent reports (under _lock)
        self._glogs: dict[int, GroupLog] = {}  # id(group) -> its members' reports (worker thread)
        self.base = base
        self.metrics = metrics if metrics is not None else LiveMetrics()
        self.clock = clock
        self._lock = threading.Lock()
        self._parse_lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple] = queue.SimpleQueue()
        self._space = threading.BoundedSemaphore(max(1, max_pending))
        self._entries: dict[str, _Entry] = {}
        self._accepted: dict[str, _Accepted] = {}
        self._frontier: int | None = None  # push side: elements older than this are late
        self._names = itertools.count(1)
        #: idempotency keys of the latest accepted elements (a retried push is not taken twice)
        self._keys: set[str] = set()
        self._key_order: collections.deque[str] = collections.deque()
        self._closed = False
        self._thread: threading.Thread | None = None
        #: durable ingest log (``run --state-dir``): inputs appended in worker order, see :meth:`recover`
        self._log: IngestLog | None = None
        #: periodic checkpoints (``run --checkpoint-interval``), stopped by :meth:`close`
        self.checkpointer: Checkpointer | None = None
        #: the checkpoint :meth:`recover` restored (its metadata continues in new ones)
        self.restored_checkpoint: Checkpoint | None = None
        # worker-only state
        self._streams: dict[str, _Stream] = {}
        self._guards: dict[str, RetentionGuard] = {}
        self._relevant: dict[str, int] = {}
        self._relevant_since: dict[str, float] = {}
        #: report time -> the cohorts of queries due then; the embedded engine is told not
        #: to count reports (the cohorts do), a cluster leader's engine counts them itself
        self._due = CohortSchedule(counting=isinstance(self.engine, Engine))
        #: restored queries delivered up to a time past their next report (see ``_deliver``)
        self._ahead: dict[str, int] = {}
        #: the sorted names of the cohorts due at a report time, by their members (``_fire_many``)
        self._due_names: dict[tuple[frozenset[str], ...], list[str]] = {}
        self._delivered_n = 0  # report times delivered (latencies are trimmed every _TRIM_EVERY)
        #: queries with subscribers (under ``_lock``): a report visits these and the ones with lines
        self._subbed: set[str] = set()
        self._pending: set[str] = set()
        self._fired: int | None = None
        self._explicit: int | None = None
        self._batches = 0
        self._operators = 0

    # ------------------------------------------------------------ lifecycle

    def start(self) -> LiveEngine:
        """Starts the worker thread (idempotent)."""
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="linkstream-live", daemon=True)
                self._thread.start()
        return self

    def close(self, timeout: float = 10.0) -> None:
        """Stops the worker, ends every subscription, and releases nothing else."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            thread = self._thread
        if self.checkpointer is not None:
            self.checkpointer.stop(final=thread is not None and thread.is_alive())
        if thread is not None:
            self._queue.put(("stop",))
            thread.join(timeout)
        for e in list(self._entries.values()):
            for sub in list(e.subscribers):
                sub.finish()
        if self._log is not None:
            self._log.close()

    def __enter__(self) -> LiveEngine:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ commands

    def _submit(self, kind: str, fn: Callable[[], Any], timeout: float | None) -> Any:
        if self._closed:
            raise EngineClosed("the live engine is closed")
        if self._thread is None:
            self.start()
        fut: Future[Any] = Future()
        self._queue.put((kind, fn, fut))
        return fut.result(timeout)

    def push(
        self, stream: str, t: int, triples: Triples, *, timeout: float | None = None, key: str | None = None
    ) -> bool:
        """Enqueues one element of ``stream`` at event time ``t`` (ms); ``False`` if it was late.

        An element whose idempotency ``key`` was accepted before (one of the latest
        :data:`IDEMPOTENCY_KEYS`, kept in the ingest log too) is not taken again: ``True``,
        nothing enqueued -- a client that retries a push whose answer it did not get
        (the server or the connection died) does not push it twice.

        Args:
            stream: The stream's IRI (its elements come in non-decreasing time).
            t: Event time in ms.
            triples: ``(n, 3)`` int64 ids, or ``(s, p, o)`` canonical N-Triples strings.
            timeout: Seconds to wait for room in the worker's queue (``None``: forever).

        Raises:
            ValueError: ``triples`` is not a sequence of triples.
            EventTimeError: ``t`` is outside ``0 <= t < 2^53`` ms or more than
                ``max_time_jump_ms`` ahead of the stream's time (a ``ValueError``).
            TimeoutError: The worker's queue stayed full for ``timeout`` seconds.
        """
        # one path for every push: the decisions of push_many for a body of one element
        flags, error = self.push_many(
            stream, [(t, triples)], keys=None if key is None else [key], timeout=timeout
        )
        if error is not None:
            raise error
        return flags[0]

    def _count_late(self, stream: str, acc: _Accepted, t: int, floor: int) -> None:
        acc.late += 1
        self.metrics.late_elements.inc()
        if not acc.late_logged:
            acc.late_logged = True
            log.warning(
                "stream <%s>: late element dropped (t=%d < watermark %d); further late elements of "
                "this stream are only counted",
                stream,
                t,
                floor,
            )

    def add_static(self, iri: str | None, triples: Triples, *, timeout: float | None = 60.0) -> None:
        """Adds triples to a static graph at runtime (``iri=None``: the default graph).

        Running queries see them from their next report on: their static sub-join results
        are refreshed and the difference flows through their operators.
        """

        def add() -> None:
            ids = triples
            if not isinstance(ids, np.ndarray):
                terms = [term for tr in ids for term in tr]
                ids = np.asarray(self.engine.dictionary.encode_many(terms), dtype=np.int64)
            self.engine.add_static(iri, dedup_triples(np.asarray(ids, dtype=np.int64).reshape(-1, 3)))

        self._submit("call", add, timeout)

    def advance_to(self, t: int, *, timeout: float | None = 60.0) -> int | None:
        """Declares that every stream has passed ``t`` and fires the report times ``<= t``.

        Returns:
            The last report time fired (``None`` if none ever fired).
        """
        if self._log is not None:
            return self._logged(
                "barrier", lambda: self._do_advance(int(t)), timeout, self._log.append_advance, int(t)
            )
        return self._submit("barrier", lambda: self._do_advance(int(t)), timeout)

    def _logged(
        self, kind: str, fn: Callable[[], Any], timeout: float | None, append: Any, *args: Any
    ) -> Any:
        """``_submit`` for a logged command: appended and enqueued together (under the lock, as
        pushes are), so the log holds the worker's order; answered once the record is durable."""
        if self._closed:
            raise EngineClosed("the live engine is closed")
        if self._thread is None:
            self.start()
        fut: Future[Any] = Future()
        with self._lock:
            seq = append(*args)
            self._queue.put((kind, fn, fut))
        result = fut.result(timeout)
        assert self._log is not None
        self._log.wait(seq, timeout)
        return result

    def sync(self, timeout: float | None = 60.0) -> None:
        """Waits until every element pushed so far is durable in the ingest log (group commit:
        concurrent callers share one fsync); returns at once without a log.

        Raises:
            OSError: The log could not be written.
            TimeoutError: Not durable within ``timeout`` seconds.
        """
        if self._log is not None:
            self._log.sync(timeout)

    def recover(
        self,
        ingest_log: IngestLog,
        timeout: float | None = None,
        checkpoints: CheckpointStore | None = None,
        skip: Collection[int] = (),
        restorer: Callable[[LiveEngine, CheckpointStore, float | None], tuple[int, Checkpoint | None]]
        | None = None,
    ) -> int:
        """Restores the latest checkpoint, replays the rest of ``ingest_log`` through the
        engine, in order, then logs every input to it.

        Queries are registered, elements pushed and watermarks advanced as they were logged,
        so windows and results continue where the logged run stopped; a report delivered
        before the restart (up to the checkpoint's record of it) is not delivered again.
        Call it before the engine serves anything.  Returns the number of records replayed.
        ``restorer`` restores the checkpoint instead of
        :func:`~linkstream.engine.live.recovery.restore_latest` (the cluster leader's).

        Raises:
            CheckpointError: Checkpoints exist but none is usable, or the log starts after
                what the checkpoint covers (records would be missing).
        """
        if self._log is not None:
            raise RuntimeError("an ingest log is attached already")
        from linkstream.engine.live.recovery import dropped_pushes, replay_records, restore_latest
        from linkstream.store.checkpoints import CheckpointError

        covered = -1
        if checkpoints is not None:
            covered, ck = (restorer or restore_latest)(self, checkpoints, timeout)
            self.restored_checkpoint = ck
            if ck is not None:
                ingest_log.resume_after(covered, dict(ck.meta.get("offsets") or {}))
        records = list(ingest_log.records())  # in memory already: what the log found at open
        n, _ = replay_records(
            self,
            records,
            covered,
            ingest_log.directory,
            timeout,
            skip,
            ingest_log.resolve,
            dropped_pushes(records),
            ingest_log.decide,
        )
        if n == 0 and ingest_log.last_seq() > covered:
            raise CheckpointError(
                "the ingest log in %s was numbered through record %d but holds none after %d: "
                "records are missing" % (ingest_log.directory, ingest_log.last_seq(), covered)
            )
        self.flush(timeout)
        self._log = ingest_log
        return n

    def call(self, fn: Callable[[], Any], timeout: float | None = 60.0) -> Any:
        """Runs ``fn`` on the worker thread (between commands) and returns its result.

        For engines whose own upkeep must happen on the thread that drives them (the
        cluster service polls its containers this way).
        """
        return self._submit("call", fn, timeout)

    def call_registering(
        self, fn: Callable[[], Any], queries: Sequence[tuple[str, str, str]], timeout: float | None = 60.0
    ) -> Any:
        """:meth:`call` for a function that registers ``queries`` (``(name, text, dialect)``) on the
        worker itself (the cluster service's batches).  With an ingest log their records are
        appended in the worker's order, as :meth:`register` does, and the answer waits until
        they are durable (a replay of the log registers them between the same elements)."""
        log_ = self._log
        if log_ is None or not queries:
            return self._submit("call", fn, timeout)

        def append() -> int:
            seq = -1
            for name, text, dialect in queries:
                seq = log_.append_register(name, text, dialect)
            return seq

        return self._logged("call", fn, timeout, append)

    def flush(self, timeout: float | None = 60.0) -> int | None:
        """Waits until everything enqueued so far is ingested and what is due has fired.

        Returns:
            The last report time fired.
        """
        return self._submit("barrier", lambda: None, timeout)

    def register(
        self,
        text: str,
        name: str | None = None,
        *,
        default_name: str | None = None,
        timeout: float | None = 60.0,
        parsed: ContinuousQuery | None = None,
    ) -> str:
        """Parses and registers a continuous query; returns its name.

        Args:
            text: C-SPARQL, CQELS-QL or RSP-QL text.
            name: The query's name (overrides a REGISTER clause).
            default_name: The name of a query without REGISTER clause (default ``q<N>``).
            parsed: ``text`` parsed already (``parse_continuous(text, default_name="",
                base=self.base)``, as the HTTP API does to validate it): not parsed again.

        Raises:
            QueryError: The query does not parse or cannot be planned (``.line``/``.column``).
            QueryConflict: A query of that name is already registered.
        """
        cq = self._prepare(text, name, default_name, parsed)
        if self._log is not None:
            name = self._register_logged(cq, text, timeout)
            self._log.save_query(name, text, cq.dialect)
            return name
        return self._submit("call", lambda: self._do_register(cq), timeout)

    def _register_logged(self, cq: ContinuousQuery, text: str, timeout: float | None) -> str:
        assert self._log is not None
        return self._logged(
            "call",
            lambda: self._do_register(cq),
            timeout,
            self._log.append_register,
            cq.name,
            text,
            cq.dialect,
        )

    def register_many(
        self,
        items: Sequence[tuple[str, str | None, str | None]],
        *,
        parsed: Sequence[ContinuousQuery] | None = None,
        timeout: float | None = 60.0,
    ) -> list[str]:
        """:meth:`register` of each ``(text, name, default_name)`` in order, in one worker
        command (a log-less engine; with an ingest log, one by one); returns their names.

        Raises:
            BatchFailed: Item ``index`` failed (a ``QueryError`` or ``QueryConflict``); the
                items before it are registered.
        """
        cqs: list[ContinuousQuery] = []
        failed: tuple[int, Exception] | None = None
        taken: set[str] = set()  # names of the batch's earlier items (not registered yet)
        for i, (text, name, default_name) in enumerate(items):
            try:
                cqs.append(self._prepare(text, name, default_name, parsed[i] if parsed else None, taken))
            except QueryError as e:
                failed = (i, e)
                break
            taken.add(cqs[-1].name)
        done: list[str] = []
        if self._log is not None:  # each logged as one register does; queries.json once
            log_ = self._log
            try:
                for i, cq in enumerate(cqs):
                    try:
                        done.append(self._register_logged(cq, items[i][0], timeout))
                    except QueryError as e:
                        raise BatchFailed(i, done, e) from None
            finally:
                log_.save_queries(
                    [(cq.name, items[i][0], cq.dialect) for i, cq in enumerate(cqs[: len(done)])]
                )
        elif cqs:

            def batch() -> tuple[list[str], Exception | None]:
                # thousands of queries are hundreds of thousands of long-lived objects: the
                # cyclic collector would rescan them over and over while they are built
                # (10,000 LSBench queries: 1,600 collections), and later at every report
                # (8% of the worker's CPU).  A big batch runs with it off, then collects
                # once and freezes what is left (registering leaves no reference cycles,
                # tests/engine/test_unregister_memory.py; an unregistered query is freed by
                # reference counts, frozen or not)
                big = len(cqs) >= FREEZE_BATCH and gc.isenabled()
                if big:
                    gc.disable()
                out: list[str] = []
                try:
                    for cq in cqs:
                        try:
                            out.append(self._do_register(cq))
                        except QueryError as e:  # QueryConflict included
                            return out, e
                    return out, None
                finally:
                    if big:
                        gc.enable()
                        gc.collect()
                        gc.freeze()

            wait = None if timeout is None else max(timeout, 0.01 * len(cqs))
            done, error = self._submit("call", batch, wait)
            if error is not None:
                raise BatchFailed(len(done), done, error)
        if failed is not None:
            raise BatchFailed(failed[0], done, failed[1])
        return done

    def _prepare(
        self,
        text: str,
        name: str | None,
        default_name: str | None,
        parsed: ContinuousQuery | None,
        taken: Collection[str] = (),
    ) -> ContinuousQuery:
        """The parsed, named query ``register`` hands to the worker (checks but the name's)."""
        for n in (name, default_name):
            if n is not None and (not n or len(n) > 512 or any(ord(ch) < 32 for ch in n)):
                raise QueryError("a query name must be 1-512 printable characters")
        if parsed is None:
            with self._parse_lock:  # the SPARQL parser's error tracing patches pyparsing globally
                cq = parse_continuous(text, default_name=name or default_name or "", base=self.base)
        else:  # parsed with default_name "": the name of its REGISTER clause, else ""
            cq = parsed
            if name is None and not cq.name and default_name:
                cq = replace(cq, name=default_name)
        if name is not None and cq.name != name:
            cq = replace(cq, name=name)
        while not cq.name:
            with self._lock:
                n = "q%d" % next(self._names)
                cq = cq if n in self._entries or n in taken else replace(cq, name=n)
        if not cq.windows:
            raise QueryError(
                "not a continuous query: it reads no stream window (send one-shot queries to /sparql)"
            )
        with self._lock:
            if cq.name in self._entries or cq.name in taken:
                raise QueryConflict("a query named %r is already registered" % cq.name)
        return cq

    def unregister(self, name: str, *, timeout: float | None = 60.0) -> None:
        """Removes a query; its subscriptions end and operators no other query uses go.

        Raises:
            UnknownQuery: No such query.
        """
        with self._lock:
            if name not in self._entries:
                raise UnknownQuery(name)
        if self._log is not None:
            self._logged(
                "call", lambda: self._do_unregister(name), timeout, self._log.append_unregister, name
            )
            self._log.save_query(name, None)
            return
        self._submit("call", lambda: self._do_unregister(name), timeout)

    def subscribe(self, name: str, maxlen: int | None = None, after: Cursor | None = None) -> Subscription:
        """A new subscription to the reports of ``name`` from the next report on, or from the
        line after result id ``after`` (the kept reports first, then live ones, none twice).

        Raises:
            UnknownQuery: No such query.
            ResultsGone: Some report after ``after`` is no longer kept.
        """
        with self._lock:
            e = self._entries.get(name)
            if e is None:
                raise UnknownQuery(name)
            ring = self._rings.get(name)
            kept = ring.after(after) if ring is not None and after is not None else []
            sub = Subscription(name, maxlen or self.subscriber_queue, self._unsubscribe, position=after)
            for t, lines, first in kept:
                sub.offer(t, lines, first)
            emitted = e.last_emitted()
            if after is not None and emitted is not None:
                # the latest report delivered, even without lines (the ring keeps only reports
                # with lines): a reader resuming with ``?until=`` at or before it ends now
                sub.offer(emitted, ())
            if sub.dropped:  # a replay longer than the queue
                self.metrics.subscriber_dropped.inc(sub.dropped)
                self.metrics.subscriber_gaps.inc(sub.gaps)
            e.subscribers = [*e.subscribers, sub]
            self._subbed.add(name)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._lock:
            e = self._entries.get(sub.query)
            if e is not None and sub in e.subscribers:
                e.subscribers = [s for s in e.subscribers if s is not sub]
                if not e.subscribers:
                    self._subbed.discard(sub.query)

    def one_shot(
        self,
        sparql: str,
        *,
        default_graphs: Sequence[str] | None = None,
        named_graphs: Sequence[str] | None = None,
        timeout: float | None = 60.0,
    ) -> dict[str, Any]:
        """Evaluates a plain SPARQL 1.1 query once over the static graphs.

        Args:
            sparql: A SELECT, ASK or CONSTRUCT query without stream windows.
            default_graphs: Protocol ``default-graph-uri``: overrides the default graph.
            named_graphs: Protocol ``named-graph-uri``: overrides the named graphs.

        Returns:
            SPARQL 1.1 Query Results JSON (``{"head", "results"}`` or ``{"head", "boolean"}``);
            for CONSTRUCT ``{"triples": [N-Triples statements]}``.

        Raises:
            QueryError: The query does not parse, reads a stream window, or is a DESCRIBE.
        """
        with self._parse_lock:
            cq = parse_one_shot(sparql, self.base)
        dflt = tuple(default_graphs) if default_graphs else None
        named = tuple(named_graphs) if named_graphs else None
        return self._submit("call", lambda: evaluate_one_shot(self.engine, cq, dflt, named), timeout)

    # ------------------------------------------------------------ reading state

    def query_names(self) -> list[str]:
        """Names of the registered queries, in registration order."""
        with self._lock:
            return list(self._entries)

    def view(self, name: str) -> QueryView:
        """A snapshot of one query: its parsed form, schedule and statistics.

        Raises:
            UnknownQuery: No such query.
        """
        with self._lock:
            e = self._entries.get(name)
            if e is None:
                raise UnknownQuery(name)
            subs = list(e.subscribers)
            # (read while the worker may count: a cohort's counts are one attribute each)
            stats, reports = e.rq.stats, e.reports()
            if reports != stats.reports:  # counted by its cohort, not yet in its stats
                stats = QueryStats(reports, stats.rows, stats.eval_seconds, list(stats.latencies))
            due, last = e.next_due(), e.last_report()
        return QueryView(e.cq, stats, e.first_report, due, last, len(subs), e.dropped)

    @property
    def ingest_log(self) -> IngestLog | None:
        """The ingest log every input is written to (``None``: not durable)."""
        return self._log

    def backlog(self) -> int:
        """Commands (mostly pushed elements) waiting for the worker, approximately."""
        return self._queue.qsize()

    def status(self) -> dict[str, Any]:
        """Engine-wide figures: queries, operators, last report time, per-stream counts."""
        with self._lock:
            streams = {s: {k: getattr(a, k) for k in _STREAM_FIGURES} for s, a in self._accepted.items()}
            n = len(self._entries)
        last, explicit = self._fired, self._explicit
        return {
            "queries": n,
            "operators": self._operators,
            "last_report": last,
            "explicit_watermark": explicit,
            "streams": streams,
            **({"ingest_log": self._log.stats()} if self._log is not None else {}),
            **({"checkpoints": self.checkpointer.stats()} if self.checkpointer is not None else {}),
        }
