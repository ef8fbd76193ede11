"""Barrier checkpoints of the embedded live engine (``run --state-dir DIR --checkpoint-interval S``).

The live engine's worker is the only thread that touches the engine and it applies
commands in the order of the ingest log, so a snapshot taken *between two commands* is a
consistent cut (a barrier): it covers exactly the log records appended before the
snapshot command was enqueued (sequence numbers ``<= seq``, read under the same lock that
orders appends and enqueues).  :func:`capture` runs on the worker and only copies:

* the term dictionary (an in-memory dictionary is append-only: full chunks of
  :data:`CHUNK` terms are shared objects written once, the tail goes with each checkpoint);
* every stream buffer's retained elements (what windows and late registrations read);
* per query: its text, schedule (next report, first report, pending), statistics, the
  last report time delivered (results are deduplicated by ``(query, report time)`` after a
  restart), its recent reports (the result ring that ``Last-Event-ID`` resumes from; only
  the reports kept since the previous checkpoint are written,
  :mod:`~linkstream.engine.live.ringcheckpoint`) and
  the state of its operators (:func:`~linkstream.operators.state.snapshot_query`);
* the live engine's event-time state (stream and explicit watermarks, last report fired,
  accepted counts, retention guards) and the log's per-stream offsets;
* the idempotency keys of the latest elements accepted before the barrier (read under the
  lock pushes are logged under, with the accepted counts): a client's retry after a restart
  of a push whose log record the checkpoint covers (and truncated) is known as a repeat,
  while the records after the barrier are replayed with their keys.

:class:`Checkpointer` then encodes and writes the copy in its own thread, after waiting
until records ``<= seq`` are durable (a checkpoint never covers a record the log could
lose), and deletes the log segments the new checkpoint covers wholly.

:func:`restore` is the inverse, on a fresh engine whose static graphs are loaded: the
dictionary, buffers and live state are put back, each query is planned again and its
operator state restored; a query whose plan cannot be migrated (a shared join's router)
is rebuilt from the restored buffers by one silent evaluation at the checkpoint's last
report time.  The caller then replays the log records after ``seq``.  Queries on shared
joins' routers are checkpointed as router units, as in the cluster's task snapshots
(:mod:`~linkstream.engine.live.routercheckpoint`): their joins are restored, and the
silent evaluation only derives the groups' results from the restored rows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.live.ringcheckpoint import RingLog, RingsCapture, load_rings, restore_ring
from linkstream.engine.live.routercheckpoint import OBJECT as ROUTERS
from linkstream.engine.live.routercheckpoint import capture_units, encode_units, restore_units
from linkstream.engine.live.state import _Accepted, _Entry, _Stream
from linkstream.metrics import CheckpointMetrics
from linkstream.operators.state import QueryState, StateError, restore_query, snapshot_query
from linkstream.operators.window import StreamBuffer
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store.checkpoints import (
    Blob,
    Checkpoint,
    CheckpointError,
    CheckpointStore,
    blob_of_strings,
    strings_of_blob,
)

if TYPE_CHECKING:
    from linkstream.engine.live.ingestlog import IngestLog
    from linkstream.engine.live.logship import LogShipper
    from linkstream.engine.live.runtime import LiveEngine

log = logging.getLogger(__name__)

__all__ = [
    "CHUNK",
    "Barrier",
    "Capture",
    "Checkpointer",
    "capture",
    "checkpoint_support",
    "restore",
    "restore_keys",
    "write_checkpoint",
]

#: terms per shared dictionary chunk
CHUNK = 1 << 16
#: version of the engine checkpoint layout (meta ``"engine"``)
LAYOUT = 1
_I8 = np.int64


def checkpoint_support(live: LiveEngine) -> str | None:
    """Why ``live`` cannot be checkpointed (``None``: it can)."""
    if not isinstance(live.engine.dictionary, MemoryDictionary):
        return "checkpoints need the in-memory dictionary (not --dictionary lmdb:/hbase:)"
    if live.engine.transient is not None or live.absorb:
        return "checkpoints are not supported with --store yet"
    return None


def _terms(d: MemoryDictionary) -> list[str | None]:
    # the in-memory dictionary is append-only: id i is _terms[i] (None: reserved, unpublished)
    return d._terms


@dataclass
class Capture:
    """What :func:`capture` copied on the worker (encoded later by :func:`encode`)."""

    seq: int
    offsets: dict[str, int]
    live: dict[str, Any]
    terms_from: int
    terms: list[str | None]
    terms_n: int
    buffers: list[tuple[str, dict[str, Any], list[np.ndarray]]]
    queries: list[dict[str, Any]]
    states: list[QueryState | None]
    rings: RingsCapture
    taken: float = field(default_factory=time.time)
    #: the idempotency keys remembered at the barrier, oldest first
    keys: list[str] = field(default_factory=list)
    #: router units of the routed queries (:mod:`~linkstream.engine.live.routercheckpoint`)
    units: list[tuple[list[str], QueryState]] = field(default_factory=list)


def accepted_state(live: LiveEngine) -> dict[str, list[Any]]:
    """The push side's per-stream figures (call it under ``live._lock``, where pushes are
    counted as they are logged: at the barrier, not when the worker gets there)."""
    return {s: [a.watermark, a.elements, a.triples, a.late, a.rejected] for s, a in live._accepted.items()}


@dataclass
class Barrier:
    """What the push side holds at a barrier (read under ``live._lock``, where pushes are
    logged): a push logged after it is replayed from the log, keys and all, so its key must
    not be in the checkpoint (the next run would take the replayed record for a repeat)."""

    accepted: dict[str, list[Any]]
    keys: list[str]

    @classmethod
    def read(cls, live: LiveEngine) -> Barrier:
        """The barrier's state of ``live`` (call it under ``live._lock``)."""
        return cls(accepted_state(live), list(live._key_order))


def restore_keys(live: LiveEngine, ck: Checkpoint) -> None:
    """Puts the idempotency keys of ``ck`` back (none in a checkpoint of session 12 or
    before: embedded ones did not hold them)."""
    if "keys" not in ck.objects:
        return
    keys = [k for k in strings_of_blob(ck.blob("keys")) if k is not None]
    with live._lock:
        for k in keys:
            live._remember_key(k)


def capture(
    live: LiveEngine,
    seq: int,
    offsets: dict[str, int],
    terms_from: int,
    ringlog: RingLog,
    barrier: Barrier | None = None,
) -> Capture:
    """Copies the engine's state on the worker thread (see the module docstring).

    Args:
        seq: The last log record the worker has applied.
        offsets: The log's per-stream offsets at ``seq``.
        terms_from: First dictionary id not in a shared chunk written already (a multiple
            of :data:`CHUNK`).
        ringlog: What earlier checkpoints hold of the result rings (only newer reports are
            copied).
        barrier: The push side's state at the barrier (``None``: read now, when nothing
            else feeds the engine).
    """
    eng = live.engine
    if barrier is None:
        with live._lock:
            barrier = Barrier.read(live)
    terms = _terms(eng.dictionary)  # type: ignore[arg-type]  # checked by checkpoint_support
    n = len(terms)
    buffers = []
    for iri, buf in eng.buffers.items():
        if not isinstance(buf, StreamBuffer):
            raise CheckpointError("stream <%s> is not held in a plain stream buffer" % iri)
        h, arrays = buf.export_state()
        buffers.append((iri, h, arrays))
    c = eng.last_tick
    queries: list[dict[str, Any]] = []
    states: list[QueryState | None] = []
    live._settle()  # each query's counts from its cohort
    for name, e in live._entries.items():
        st = None
        # registered after the last evaluation: its windows have not moved yet (planned afresh)
        fresh = not e.rq.output.view._started
        if c is not None and not fresh:
            try:
                st = snapshot_query(eng, name, c)
                st = QueryState(st.header, [a.copy() for a in st.arrays])
            except StateError as exc:
                log.debug("checkpoint: %s is rebuilt at restore (%s)", name, exc)
            except Exception as exc:  # an operator this version cannot walk: rebuild it
                log.warning("checkpoint: cannot snapshot %s (%s); it is rebuilt at restore", name, exc)
        queries.append(
            {
                "name": name,
                "text": e.cq.text,
                "due": e.next_due(),
                "first_report": e.first_report,
                "pending": name in live._pending,
                "last_report": e.rq.last_report,
                "registered_at": e.rq.registered_at,
                "reports": e.rq.stats.reports,
                "rows": e.rq.stats.rows,
                "dropped": e.dropped,
                "emitted": e.last_emitted(),
                "fresh": fresh,
            }
        )
        states.append(st)
    routed = [q["name"] for q, st in zip(queries, states) if st is None and not q["fresh"]]
    units = capture_units(eng, routed, c) if c is not None and routed else []
    rings = ringlog.capture(live)
    state = {
        "fired": live._fired,
        "explicit": live._explicit,
        "last_tick": c,
        "epoch": eng.epoch,
        # the applied count numbers a stream's ingested elements (--ingest direct's owners know it)
        "streams": {s: [st.watermark, st.first, st.applied] for s, st in live._streams.items()},
        "accepted": barrier.accepted,
        "guards": {s: int(g.lo) for s, g in live._guards.items()},
    }
    return Capture(
        seq,
        offsets,
        state,
        terms_from,
        terms[terms_from:n],
        n,
        buffers,
        queries,
        states,
        rings,
        keys=barrier.keys,
        units=units,
    )


def encode(
    cap: Capture, ringlog: RingLog, retention_s: float, known: Collection[str] = ()
) -> tuple[dict[str, Blob], dict[str, Any], dict[str, Any], list[list[Any]]]:
    """The objects, metadata and shared objects of a checkpoint of ``cap``, and the ring
    objects it lists (for :meth:`RingLog.commit` once written)."""
    full = (cap.terms_n // CHUNK) * CHUNK
    shared: dict[str, Any] = {}
    for start in range(0, cap.terms_from, CHUNK):  # written by earlier checkpoints: listed again
        shared["terms-%012d" % start] = partial(_unknown, "terms-%012d" % start)
    for start in range(cap.terms_from, full, CHUNK):
        part = cap.terms[start - cap.terms_from : start - cap.terms_from + CHUNK]
        shared["terms-%012d" % start] = lambda part=part, start=start: blob_of_strings(part, {"start": start})
    objects: dict[str, Blob] = {
        "terms-tail": blob_of_strings(cap.terms[full - cap.terms_from :], {"start": full}),
        "keys": blob_of_strings(cap.keys),
    }
    arrays: list[np.ndarray] = []
    bufs = []
    for iri, h, arrs in cap.buffers:
        bufs.append([iri, h, len(arrays)])
        arrays += arrs
    objects["buffers"] = Blob({"buffers": bufs}, arrays)
    qarrays: list[np.ndarray] = []
    qheaders = []
    for q, st in zip(cap.queries, cap.states):
        entry = dict(q)
        if st is not None:
            entry["state"] = {"header": st.header, "first": len(qarrays), "n": len(st.arrays)}
            qarrays += st.arrays
        entry["ring"] = cap.rings.header(q["name"])
        qheaders.append(entry)
    objects["queries"] = Blob({"queries": qheaders}, qarrays)
    if cap.units:
        objects[ROUTERS] = encode_units(cap.units)
    new_rings = cap.rings.blob()
    ring_name = ringlog.name(cap.seq) if new_rings is not None else None
    if ring_name is not None:
        shared[ring_name] = lambda: new_rings
    listed = []
    for seg in ringlog.listed(ring_name, cap.rings, retention_s):
        if seg[0] == ring_name:
            listed.append(seg)
        elif "shared/" + seg[0] in known:  # written by an earlier checkpoint: listed again, not rewritten
            listed.append(seg)
            shared[seg[0]] = partial(_unknown, seg[0])
    meta = {
        "engine": LAYOUT,
        "seq": cap.seq,
        "offsets": cap.offsets,
        "live": cap.live,
        "terms": cap.terms_n,
        "rings": listed,
        "taken": cap.taken,
    }
    return objects, meta, shared, listed


def _unknown(name: str) -> Blob:
    raise CheckpointError("shared checkpoint object %s is not on the store any more" % name)


def _restore_dictionary(d: MemoryDictionary, ck: Checkpoint) -> None:
    n = int(ck.meta["terms"])
    terms: list[str | None] = []
    for key in sorted(k for k in ck.objects if k.startswith("shared/terms-")):
        terms += strings_of_blob(ck.objects[key])
    terms += strings_of_blob(ck.blob("terms-tail"))
    if len(terms) != n:
        raise CheckpointError("checkpoint %s: %d dictionary terms, expected %d" % (ck.id, len(terms), n))
    cur = _terms(d)
    k = len(cur)
    if k > n or cur[1:k] != terms[1:k]:
        raise CheckpointError(
            "checkpoint %s: the dictionary it was taken with does not start with this run's "
            "(were other static graphs loaded?)" % ck.id
        )
    if n > k:
        first = d.reserve(n - k)
        ids = [i for i in range(first, n) if terms[i] is not None]
        if ids:
            d.put_many([terms[i] for i in ids], ids)  # type: ignore[misc]  # None filtered above


def restore(live: LiveEngine, ck: Checkpoint) -> int:
    """Puts checkpoint ``ck`` into ``live`` (on its worker thread, before anything else ran
    there but the static graphs); returns the last log sequence number it covers.

    Raises:
        CheckpointError: The checkpoint does not fit this engine.
    """
    meta = ck.meta
    if meta.get("engine") != LAYOUT:
        raise CheckpointError("checkpoint %s is not an engine checkpoint of layout %d" % (ck.id, LAYOUT))
    eng = live.engine
    if eng.queries or eng.buffers:
        raise CheckpointError("a checkpoint is restored into a fresh engine only")
    _restore_dictionary(eng.dictionary, ck)  # type: ignore[arg-type]  # checked by checkpoint_support
    st = meta["live"]
    bufs = ck.blob("buffers")
    for iri, h, first in bufs.header["buffers"]:
        buf = eng.buffer(iri)
        assert isinstance(buf, StreamBuffer)
        buf.import_state(h, [np.array(a) for a in bufs.arrays[first : first + 3]])
    now = live.clock()
    for s, (wm, first, *applied) in st["streams"].items():  # no applied count before session 12
        live._streams[s] = _Stream(wm, first, now, int(applied[0]) if applied else 0)
    for s, (wm, elements, triples, late, rejected) in st["accepted"].items():
        live._accepted[s] = _Accepted(wm, elements, triples, late, False, rejected)
    live._fired, live._explicit = st["fired"], st["explicit"]
    restore_keys(live, ck)
    c = st["last_tick"]
    eng.last_tick = c
    eng.epoch = int(st["epoch"])
    for s, lo in st["guards"].items():
        live._guard(s, eng.buffer(s))
        live._guards[s].lo = int(lo)
    qs = ck.blob("queries")
    reports = load_rings(ck, live.results_retention_s)
    queries = qs.header["queries"]
    rebuild = [
        q["name"] for q in queries if not q.get("fresh") and _restore_query(live, ck, q, qs, reports, now)
    ]
    if rebuild and c is not None:
        # routed queries: their shared joins' routers come from the router units; then
        # one silent evaluation at the last report time fills the queries' operators that
        # could not be restored from the restored buffers (nothing is reported or counted)
        routed, n = restore_units(eng, ck, c)
        if routed:
            log.info("checkpoint %s: %d routed queries restored from %d router units", ck.id, len(routed), n)
        eng.tick(c, (), count_reports=False)
        rebuilt = sorted(set(rebuild) - set(routed))
        if rebuilt:
            log.info("checkpoint %s: rebuilt %s from the stream buffers", ck.id, ", ".join(rebuilt))
    # registered after the last evaluation: planned afresh, they start from the buffers as
    # they would have (the last ones registered, so the registration order is kept)
    for q in queries:
        if q.get("fresh"):
            _restore_query(live, ck, q, qs, reports, now)
    with live._lock:
        live._frontier = live._frontier_now()
    live._gauges()
    return int(meta["seq"])


def _restore_query(
    live: LiveEngine,
    ck: Checkpoint,
    q: dict[str, Any],
    qs: Blob,
    reports: dict[tuple[str, str], list[Any]],
    now: float,
) -> bool:
    """Registers one checkpointed query (with its operator state unless ``q["fresh"]``),
    schedule and result ring; ``True`` if its operators still need the silent evaluation."""
    eng = live.engine
    c = eng.last_tick
    name = q["name"]
    with live._parse_lock:
        cq = parse_continuous(q["text"], default_name=name, base=live.base)
    if cq.name != name:
        cq = replace(cq, name=name)
    rq = eng.register(cq)
    state = q.get("state")
    rebuild = False
    if c is not None and not q.get("fresh"):
        restored = False
        if state is not None:
            k = int(state["first"])
            qstate = QueryState(state["header"], [np.array(a) for a in qs.arrays[k : k + int(state["n"])]])
            try:
                restore_query(eng, name, qstate, c)
                restored = True
            except Exception as exc:  # StateError, or an operator this version cannot fill
                log.warning(
                    "checkpoint %s: cannot restore the state of %s (%s); rebuilding it", ck.id, name, exc
                )
                eng.unregister(name)
                rq = eng.register(cq)
        rebuild = not restored
    rq.last_report = q["last_report"]
    rq.registered_at = q["registered_at"]
    rq.stats.reports, rq.stats.rows = int(q["reports"]), int(q["rows"])
    streams = frozenset(w.stream for w in cq.windows)
    for s in streams:
        live._guard(s, eng.buffer(s))
        if not live._relevant.get(s):
            live._relevant_since[s] = now
        live._relevant[s] = live._relevant.get(s, 0) + 1
    e = _Entry(cq, rq, streams, due=q["due"], first_report=q["first_report"], dropped=int(q["dropped"]))
    e.emitted = q["emitted"]
    if e.due is not None:
        live._schedule(name, e, e.due)
    if q["pending"]:
        live._pending.add(name)
    ring = restore_ring(reports, name, q["ring"], live.results_retention_s)
    with live._lock:
        live._entries[name] = e
        live._rings[name] = ring
    return rebuild


def write_checkpoint(
    live: LiveEngine,
    store: CheckpointStore,
    seq: int,
    offsets: dict[str, int],
    extra: dict[str, Any] | None = None,
    timeout: float | None = 600.0,
) -> str:
    """Takes a checkpoint of ``live`` covering log records through ``seq`` (nothing may
    feed the engine meanwhile: ``linkstream restore`` after its replay); returns its id."""
    terms_from = 0
    while ("shared/terms-%012d" % terms_from) in store.shared():
        terms_from += CHUNK
    ringlog = RingLog()
    cap = live.call(lambda: capture(live, seq, offsets, terms_from, ringlog), timeout)
    objects, meta, shared, _ = encode(cap, ringlog, live.results_retention_s, store.shared())
    meta.update(extra or {})
    return store.write(objects, meta, shared)


class Checkpointer:
    """Takes a checkpoint of ``live`` every ``interval_s`` seconds in a thread of its own.

    Args:
        live: The engine (its ingest log attached: :meth:`LiveEngine.recover` done).
        ingest_log: That log (records a checkpoint covers are truncated).
        store: Where checkpoints go.
        interval_s: Seconds between checkpoints (``<= 0``: only :meth:`checkpoint` calls).
    """

    def __init__(
        self, live: LiveEngine, ingest_log: IngestLog, store: CheckpointStore, interval_s: float
    ) -> None:
        why = self._support(live)
        if why is not None:
            raise ValueError(why)
        self.live = live
        self.log = ingest_log
        self.store = store
        self.interval_s = interval_s
        #: seconds before the first periodic checkpoint (``None``: ``interval_s``)
        self.first_s: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last: tuple[int, int | None] | None = None
        self._seqs: dict[str, int] = {}  # checkpoint id -> last log record it covers
        #: what the checkpoints hold of the result rings (continued from the one restored)
        self.ringlog = RingLog.resume(live.restored_checkpoint)
        self.checkpoints = 0
        self.last_id: str | None = None
        self.last_seq: int | None = None
        self.capture_seconds = 0.0
        self.write_seconds = 0.0
        self.failures = 0
        #: when the state was last covered by a complete checkpoint (or found unchanged)
        self._covered_at = time.monotonic()
        try:
            self.metrics = CheckpointMetrics(live.metrics.registry, self.age, interval_s)
        except ValueError:  # another checkpointer still on that registry: count on a private one
            self.metrics = CheckpointMetrics(None, self.age, interval_s)
        #: ships the log to ``store`` (:mod:`~linkstream.engine.live.logship`), stopped with this
        self.shipper: LogShipper | None = None

    def age(self) -> float:
        """Seconds since the state was last covered by a complete checkpoint (a checkpoint
        written, or a periodic one skipped because nothing changed since the last)."""
        return time.monotonic() - self._covered_at

    def _failed(self, e: Exception) -> None:
        self.failures += 1
        self.metrics.failures.inc()
        log.error("checkpoint to %s failed: %s", self.store.uri, e)

    def _support(self, live: LiveEngine) -> str | None:
        """Why ``live`` cannot be checkpointed by this class (``None``: it can)."""
        return checkpoint_support(live)

    def _capture(self, seq: int, offsets: dict[str, int], terms_from: int, barrier: Barrier) -> Capture:
        """The copy taken on the worker at the barrier (:func:`capture`)."""
        return capture(self.live, seq, offsets, terms_from, self.ringlog, barrier)

    def _encode(
        self, cap: Capture
    ) -> tuple[dict[str, Blob], dict[str, Any], dict[str, Any], list[list[Any]]]:
        """What :meth:`checkpoint` writes of ``cap`` (:func:`encode`)."""
        return encode(cap, self.ringlog, self.live.results_retention_s, self.store.shared())

    def _ready(self, cap: Capture, timeout: float) -> None:
        """Waits until ``cap`` may be written (here: nothing to wait for; raises to skip it)."""

    def _written(self, cid: str, cap: Capture) -> None:
        """Called once checkpoint ``cid`` is complete, before the log is truncated (raises: the
        log is kept)."""

    def _truncated(self) -> None:
        """Called once the log segments the kept checkpoints cover are deleted."""

    def start(self) -> Checkpointer:
        if self.interval_s > 0 and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="linkstream-checkpoint", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 30.0, final: bool = False) -> None:
        """Stops the periodic checkpoints; ``final``: takes one last checkpoint first (a clean
        shutdown, so that the next start replays nothing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if final:
            try:
                self.checkpoint(timeout=timeout)
            except Exception as e:  # the log still holds everything
                log.error("final checkpoint to %s failed: %s", self.store.uri, e)
        if self.shipper is not None:  # a last ship on a clean shutdown only
            self.shipper.stop(timeout, final=final)
        self.metrics.unregister()  # the next checkpointer (a new leadership) registers its own

    def _run(self) -> None:
        wait = self.interval_s if self.first_s is None else min(self.first_s, self.interval_s)
        while not self._stop.wait(wait):
            wait = self.interval_s
            try:
                self.checkpoint()
            except Exception as e:  # the log keeps everything: the next one may succeed
                self._failed(e)

    def _oldest_kept_seq(self) -> int:
        """What the oldest complete checkpoint kept covers: the log keeps everything after it,
        so that a load falling back from a damaged newer checkpoint finds its records."""
        kept = self.store.ids()
        for cid in kept:
            if cid not in self._seqs:
                try:
                    self._seqs[cid] = int(self.store.meta(cid).get("seq", -1))
                except (CheckpointError, OSError, ValueError, TypeError):
                    self._seqs[cid] = -1  # unreadable: keep the whole log
        for cid in [c for c in self._seqs if c not in kept]:
            del self._seqs[cid]
        return min((self._seqs[c] for c in kept), default=-1)

    def _terms_from(self) -> int:
        k = 0
        while ("shared/terms-%012d" % k) in self.store.shared():
            k += CHUNK
        return k

    def checkpoint(self, force: bool = False, timeout: float = 120.0) -> str | None:
        """Takes one checkpoint now; returns its id (``None``: nothing changed since the last)."""
        with self._lock:
            live = self.live
            t0 = time.perf_counter()
            terms_from = self._terms_from()
            fut: Future[Capture] = Future()
            with live._lock:  # orders this barrier with log appends and their enqueues
                seq = self.log.last_seq()
                offsets = self.log.offsets()
                if not force and self._last == (seq, live._fired):
                    self._covered_at = time.monotonic()
                    return None
                self.log.rotate()
                barrier = Barrier.read(live)
                live._queue.put(("call", lambda: self._capture(seq, offsets, terms_from, barrier), fut))
            cap = fut.result(timeout)
            t1 = time.perf_counter()
            self.log.wait(seq, timeout)  # never cover a record the log could still lose
            self._ready(cap, timeout)
            objects, meta, shared, listed = self._encode(cap)
            cid = self.store.write(objects, meta, shared)
            self._written(cid, cap)
            self.ringlog.commit(listed, cap.rings)
            self._seqs[cid] = seq
            kept = self._oldest_kept_seq()
            self.log.truncate_through(kept)
            self._truncated()
            if self.shipper is not None:  # the store's pieces it covers go, the tail is shipped
                self.shipper.checkpointed(kept)
            self.capture_seconds += t1 - t0
            self.write_seconds += time.perf_counter() - t1
            self.checkpoints += 1
            self.metrics.taken.inc()
            self._covered_at = time.monotonic()
            self.last_id, self.last_seq = cid, seq
            self._last = (seq, cap.live["fired"])
            log.debug("checkpoint %s covers log records through %d", cid, seq)
            return cid

    def stats(self) -> dict[str, Any]:
        """Figures for /status."""
        n = max(1, self.checkpoints)
        return {
            "uri": self.store.uri,
            "interval_s": self.interval_s,
            "checkpoints": self.checkpoints,
            "failures": self.failures,
            "age_s": round(self.age(), 3),
            "last_id": self.last_id,
            "last_seq": self.last_seq,
            "capture_ms_mean": round(1000 * self.capture_seconds / n, 3),
            "write_ms_mean": round(1000 * self.write_seconds / n, 3),
            **({"shipping": self.shipper.stats()} if self.shipper is not None else {}),
        }
