"""Checkpoints of the cluster leader (``run --zk --state-dir DIR --checkpoint-interval S``).

Without them a new leader replays the *whole* shared ingest log into a new run, so the
take-over grows with the age of the run and the log is never truncated.  With them the
leader takes a barrier checkpoint every ``S`` seconds of what a new leader needs instead
of the log prefix, and deletes the log segments it covers.

**What is captured** (on the live engine's worker, between two commands: a consistent cut
of the log, as :mod:`linkstream.engine.live.checkpoint` does for embedded ``run``):

* the leader's term dictionary (the driver's ids; shared chunks as embedded);
* the fan-out's retained backlog of every stream of the run -- the elements a window
  opened at the next report can still read (largest RANGE plus STEP, at least
  ``--retention-ms``; everything for count and NOW windows) -- split at the last tick's
  per-stream cut (the elements sent before it and after it);
* per query: text, schedule (next and first report, pending), statistics, last report,
  and whether it was registered after the last tick;
* the live engine's event-time state (stream and explicit watermarks, last report time
  fired, accepted counts), the log's per-stream offsets and sequence number, and the
  idempotency keys of the latest elements accepted before the barrier (read under the
  lock pushes are logged under: the records after it are replayed, keys and all).

The checkpoint (objects, then a manifest with checksums, then the store's pointer) goes to
the same stores as embedded ones (``file://``, ``s3://``); once complete its id is written
to the ZooKeeper node ``<root>/checkpoint`` (one ``set``: atomic), then the log segments
that the oldest kept checkpoint covers are deleted.  A checkpoint is written only once the
result log has committed the reports up to its last tick (a new leader's floor then
covers them: what the checkpoint does not re-create was delivered).

**The containers' operator state** is captured as task snapshots
(:mod:`linkstream.cluster.tasksnapshots`): right after the capture each container is asked
for the state of the queries it answered at the last tick, copies it between two ticks and
writes it to the same store; the checkpoint is written only once every container has
acknowledged its objects, whose checksums go into the manifest.  A new leader starts a new
run and its containers rebuild their windows from the restored backlog -- the elements
before the last tick's cut, then each query's task snapshot restored on the container that
holds it, then one *silent* tick at that report time (every container evaluates every
query, nothing is reported: queries without a snapshot are rebuilt by it, an
IStream/DStream query's next report is again the difference to it; a restored query finds
nothing new), then the elements after the cut.  A container that dies is still recovered
by recompute from the driver's history (:mod:`linkstream.cluster.recovery`).

:func:`restore_latest` (the ``restorer`` of
:meth:`~linkstream.engine.live.runtime.LiveEngine.recover`) loads the checkpoint the
ZooKeeper node names -- a missing or corrupt one (a task snapshot included) is skipped with
one error line and the previous complete checkpoint is used; with none left, the newest
sound one without its task snapshots -- and the caller replays only the log after it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from kazoo.exceptions import KazooException, NoNodeError

from linkstream.cluster import tasksnapshots
from linkstream.cluster.checkpointbacklog import backlog_blob, fanout_backlog
from linkstream.cluster.recovery import RestorePoint
from linkstream.cluster.streamlog import oldest_references, prune
from linkstream.cluster.tasksnapshots import PREFIX, Request
from linkstream.engine.live.checkpoint import (
    Barrier,
    Capture,
    Checkpointer,
    _restore_dictionary,
    encode,
    restore_keys,
)
from linkstream.engine.live.logship import LogShipper, ship_enabled
from linkstream.engine.live.ringcheckpoint import RingLog, RingsCapture
from linkstream.engine.live.state import _Accepted, _Entry, _Stream
from linkstream.engine.live.subscription import ReportRing
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store.checkpoint_backends import BackendError
from linkstream.store.checkpoints import (
    SHARED,
    Blob,
    Checkpoint,
    CheckpointError,
    CheckpointStore,
    load_order,
    log_fallback,
    open_checkpoints,
)

if TYPE_CHECKING:
    from kazoo.client import KazooClient

    from linkstream.cluster.remote_engine import RemoteEngine
    from linkstream.cluster.results import ResultLog
    from linkstream.cluster.service import ClusterService
    from linkstream.engine.live.ingestlog import IngestLog
    from linkstream.engine.live.runtime import LiveEngine

log = logging.getLogger(__name__)

__all__ = ["ClusterCheckpointer", "pointer_path", "read_pointer", "recover_leader", "restore_latest"]

#: version of the cluster checkpoint layout (meta ``"cluster"``)
LAYOUT = 1
#: seconds after a take-over that replayed log records until the new leader's first checkpoint
TAKEOVER_CHECKPOINT_S = 1.0
#: seconds a checkpoint waits for the result log to commit its last tick before it is skipped
COMMIT_WAIT_S = 5.0


def pointer_path(root: str) -> str:
    """The ZooKeeper node naming the cluster's latest complete checkpoint."""
    return root.rstrip("/") + "/checkpoint"


def read_pointer(client: KazooClient, root: str) -> dict[str, Any] | None:
    """``{"id", "seq", "uri", "taken"}`` of the latest complete checkpoint (``None``: none)."""
    try:
        data, _ = client.get(pointer_path(root))
        doc = json.loads(data.decode("utf-8"))
        return doc if isinstance(doc, dict) else None
    except NoNodeError:
        return None
    except (ValueError, UnicodeDecodeError):
        log.error("checkpoint pointer %s is unreadable; using the store's checkpoints", pointer_path(root))
        return None


@dataclass
class ClusterCapture(Capture):
    """:class:`Capture` of the leader: the fan-out's backlog and the idempotency keys too."""

    #: per stream: (iri, elements before the last tick's cut, [(t, triples)])
    backlog: list[tuple[str, int, list[tuple[int, np.ndarray]]]] = field(default_factory=list)
    #: the result log's last entry at the barrier (written once it is committed)
    result_seq: int = 0
    #: the containers' task snapshots asked for at the barrier (:mod:`.tasksnapshots`)
    tasks: Request | None = None
    #: once they are written: per query its object's manifest entry, or why it has none
    task_objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    task_errors: dict[str, str] = field(default_factory=dict)
    #: ``--ingest direct``: the decisions the owners have not acknowledged (``saved_decisions``)
    decisions: dict[str, list[Any]] = field(default_factory=dict)


def capture(
    live: LiveEngine,
    remote: RemoteEngine,
    seq: int,
    offsets: dict[str, int],
    terms_from: int,
    barrier: Barrier,
    result_seq: Callable[[], int],
) -> ClusterCapture:
    """Copies the leader's state on the worker thread (see the module docstring); ``barrier``
    (accepted counts, idempotency keys) was read under the lock pushes are logged under: a
    push logged after it is replayed from the log, and its key here would make the next
    leader take it for a repeat and drop it."""
    backlog = fanout_backlog(remote)  # first: --ingest meta encodes the terms it reads from the logs
    terms = remote.dictionary._terms
    n = len(terms)
    c = live._fired
    ticks = remote.cluster.seq if remote.cluster is not None else 0
    queries = []
    live._settle()  # each query's counts from its cohort
    for name, e in live._entries.items():
        rq = e.rq
        queries.append(
            {
                "name": name,
                "text": e.cq.text,
                "due": e.next_due(),
                "first_report": e.first_report,
                "pending": name in live._pending,
                "last_report": rq.last_report,
                "reports": rq.stats.reports,
                "rows": rq.stats.rows,
                "dropped": e.dropped,
                "emitted": e.last_emitted(),
                # not evaluated at the last tick: registered after the silent tick at restore
                "fresh": c is None or remote.registered_tick.get(name, ticks) >= ticks,
            }
        )
    state = {
        "fired": live._fired,
        "explicit": live._explicit,
        "last_tick": c,
        # the applied count numbers a stream's elements (--ingest direct's owners know it)
        "streams": {s: [st.watermark, st.first, st.applied] for s, st in live._streams.items()},
        "accepted": barrier.accepted,
    }
    return ClusterCapture(
        seq,
        offsets,
        state,
        terms_from,
        terms[terms_from:n],
        n,
        [],
        queries,
        [None] * len(queries),
        RingsCapture(),
        backlog=backlog,
        keys=barrier.keys,
        result_seq=result_seq(),
    )


class ClusterCheckpointer(Checkpointer):
    """:class:`~linkstream.engine.live.checkpoint.Checkpointer` of the cluster leader.

    Args:
        live: The leader's live engine (its shared ingest log attached).
        remote: Its engine.
        ingest_log: The shared log (segments a checkpoint covers are deleted).
        store: Where checkpoints go.
        interval_s: Seconds between checkpoints.
        client: The coordinator's kazoo client (the pointer node).
        root: Cluster root.
        results: The coordinator's result log (a checkpoint waits until its last tick is
            committed there).
    """

    def __init__(
        self,
        live: LiveEngine,
        remote: RemoteEngine,
        ingest_log: IngestLog,
        store: CheckpointStore,
        interval_s: float,
        *,
        client: KazooClient,
        root: str,
        results: ResultLog,
    ) -> None:
        self.remote = remote
        self.client = client
        self.root = root
        self.results = results
        self.worker_seconds = 0.0  # spent by the live worker in :func:`capture`
        #: ``--ingest direct``: the state directory whose stream logs are pruned after a checkpoint
        self.streams_dir: str | None = None
        self.stream_segments_deleted = 0
        self.task_copy_seconds = 0.0  # the containers' copies (the largest per checkpoint)
        self.task_wait_seconds = 0.0  # the checkpointer's wait for the task snapshots
        self.tasks_snapshotted = 0
        #: ``--ingest direct``: the owners' unacknowledged decisions, read at the barrier
        self.decisions: Callable[[], dict[str, list[Any]]] | None = None
        super().__init__(live, ingest_log, store, interval_s)
        self.ringlog = RingLog()  # the cluster serves results from its result log: no rings

    def stop(self, timeout: float = 30.0, final: bool = False) -> None:
        """Stops the periodic checkpoints (no final one: a leader stepping down may no longer
        reach ZooKeeper or commit results; the next leader replays the log after the last)."""
        super().stop(timeout, final=False)

    def _support(self, live: LiveEngine) -> str | None:
        if not isinstance(self.remote.dictionary, MemoryDictionary):
            return "cluster checkpoints need the in-memory dictionary"
        return None

    def _capture(self, seq: int, offsets: dict[str, int], terms_from: int, barrier: Barrier) -> Capture:
        t0 = time.perf_counter()
        try:
            cap = capture(
                self.live,
                self.remote,
                seq,
                offsets,
                terms_from,
                barrier,
                lambda: self.results.last,
            )
            cap.decisions = self.decisions() if self.decisions is not None else {}
            cluster = self.remote.cluster
            if cluster is not None:  # the containers copy their tasks' state after the same tick
                evaluated = [q["name"] for q in cap.queries if not q["fresh"]]
                cap.tasks = tasksnapshots.request(cluster, self.store.uri, cap.live["last_tick"], evaluated)
                if cap.tasks is not None:  # its cut and backlog stay until the next one (restore-forward)
                    cluster.recovery.hold(cap.tasks.seq)
            return cap
        finally:
            self.worker_seconds += time.perf_counter() - t0

    def stats(self) -> dict[str, Any]:
        """:meth:`Checkpointer.stats` and the time the live worker spent copying (mean ms)."""
        out = super().stats()
        n = max(1, self.checkpoints)
        out["worker_ms_mean"] = round(1000 * self.worker_seconds / n, 3)
        if self.streams_dir is not None:
            out["stream_segments_deleted"] = self.stream_segments_deleted
        out["tasks"] = {
            "snapshotted": self.tasks_snapshotted,
            "copy_ms_mean": round(1000 * self.task_copy_seconds / n, 3),
            "wait_ms_mean": round(1000 * self.task_wait_seconds / n, 3),
        }
        return out

    def _encode(
        self, cap: Capture
    ) -> tuple[dict[str, Blob], dict[str, Any], dict[str, Any], list[list[Any]]]:
        assert isinstance(cap, ClusterCapture)
        objects, meta, shared, listed = encode(cap, self.ringlog, self.live.results_retention_s, ())
        objects["backlog"] = backlog_blob(cap.backlog)
        for entry in cap.task_objects.values():  # written by the containers: listed, with checksums
            self.store.adopt(entry["key"], entry)
            shared[entry["key"]] = _written_elsewhere
        meta["tasks"] = {name: e["key"] for name, e in cap.task_objects.items()}
        meta["task_errors"] = cap.task_errors
        meta["cluster"] = LAYOUT
        meta["result_seq"] = cap.result_seq  # a new leader's result log must hold it (_load)
        meta["decisions"] = cap.decisions
        meta["elements"] = sum(len(b[2]) for b in cap.backlog)
        return objects, meta, shared, listed

    def _ready(self, cap: Capture, timeout: float) -> None:
        assert isinstance(cap, ClusterCapture)
        deadline = time.monotonic() + min(timeout, COMMIT_WAIT_S)
        while self.results.committed < cap.result_seq:
            if time.monotonic() > deadline:
                raise CheckpointError(
                    "the result log did not commit entry %d within %gs (a follower lags); checkpoint skipped"
                    % (cap.result_seq, COMMIT_WAIT_S)
                )
            time.sleep(0.01)
        cluster = self.remote.cluster
        if cap.tasks is None or cluster is None:
            return
        t0 = time.perf_counter()
        objects, errors, copy_s = cluster.tasks.wait(
            cap.tasks, lambda: self.live.call(lambda: cluster.pump(0.0), timeout), cluster._dead
        )
        cap.task_objects, cap.task_errors = objects, errors
        self.task_copy_seconds += copy_s
        self.task_wait_seconds += time.perf_counter() - t0
        self.tasks_snapshotted += len(objects)

    def _truncated(self) -> None:
        """``--ingest direct``: the owners' stream log segments before every body the log
        still refers to go (the checkpoint holds the elements taken before its cut)."""
        if self.streams_dir is None:
            return
        try:
            self.stream_segments_deleted += prune(self.streams_dir, oldest_references(self.log.log_dir))
        except (OSError, ValueError, KeyError, TypeError) as e:  # kept: the next checkpoint tries again
            log.warning("cannot prune the stream logs in %s: %s", self.streams_dir, e)

    def _written(self, cid: str, cap: Capture) -> None:
        doc = {"id": cid, "seq": cap.seq, "uri": self.store.uri, "taken": cap.taken}
        data = json.dumps(doc).encode("utf-8")
        path = pointer_path(self.root)
        try:
            self.client.set(path, data)
        except NoNodeError:
            self.client.create(path, data, makepath=True)
        log.info("checkpoint %s of the cluster covers ingest log records through %d", cid, cap.seq)
        cluster = self.remote.cluster
        if isinstance(cap, ClusterCapture) and cap.tasks is not None and cluster is not None:
            objects = {n: dict(e) for n, e in cap.task_objects.items()}
            missing = frozenset(cap.task_errors)  # (a dead container's queries: no container answered them)
            point = RestorePoint(cap.tasks.seq, cap.tasks.c, self.store.uri, objects, missing)
            cluster.recovery.checkpointed(point)


def _written_elsewhere() -> Blob:
    raise CheckpointError("a task snapshot is written by its container")  # never: adopted first


def _result_seq(ck: Checkpoint) -> int:
    """The result log entry a checkpoint's last tick waited for (0: not recorded, before
    session 13)."""
    return int(ck.meta.get("result_seq") or 0)


def _load(store: CheckpointStore, first: str | None, held: int | None = None) -> Checkpoint | None:
    """The checkpoint ``first`` (the ZooKeeper pointer's), else the newest usable one; when
    none is complete, the newest whose own objects are sound, without its task snapshots
    (the containers then rebuild their state by the silent evaluation).

    ``held`` (the last entry of the new leader's result log; ``None``: no condition): a
    checkpoint written once a later entry was committed is passed over.  That entry was
    committed while this coordinator was out of sync (the old leader commits without a
    follower that has not polled for ``SYNC_S``) and its result log lacks it: restored, the
    report times after its last entry, up to the checkpoint's last tick, would never be
    made again.  An older checkpoint's replay makes them (the log keeps every record after
    the oldest kept checkpoint).  When none fits, the earliest, with an error line."""
    order = load_order(store.ids(), first)
    problems = []
    late: Checkpoint | None = None  # usable, but after ``held``: the earliest such
    for without in (None, SHARED + PREFIX):
        for k, cid in enumerate(order):
            try:
                ck = store.load_id(cid, without)
                if ck.meta.get("cluster") != LAYOUT:
                    raise CheckpointError(
                        "checkpoint %s is not a cluster checkpoint of layout %d" % (cid, LAYOUT)
                    )
            except CheckpointError as e:
                problems.append(str(e))
                log_fallback(
                    store.uri,
                    e,
                    order,
                    k,
                    "no other checkpoint" if without else "trying them again without their task snapshots",
                )
                continue
            r = _result_seq(ck)
            if held is not None and r > held:
                log.warning(
                    "%s: checkpoint %s waited for result log entry %d, this coordinator's log "
                    "ends at %d (it was out of sync); trying an older one",
                    store.uri,
                    cid,
                    r,
                    held,
                )
                if late is None or r < _result_seq(late):
                    if without:
                        ck.meta["tasks"] = {}
                    late = ck
                continue
            if without:
                ck.meta["tasks"] = {}
                log.error(
                    "%s: restoring checkpoint %s without its task snapshots: the containers rebuild "
                    "their operator state by evaluation at its last report time",
                    store.uri,
                    cid,
                )
            elif problems:
                log.warning("%s: restored from checkpoint %s, not the latest", store.uri, cid)
            return ck
    if late is not None:
        log.error(
            "%s: every checkpoint waited for result log entries after this coordinator's last (%d): "
            "restoring %s, the earliest; the reports up to its last tick (t=%s) that this log "
            "lacks are not made again",
            store.uri,
            held,
            late.id,
            late.meta["live"].get("last_tick"),
        )
        return late
    if problems:
        raise CheckpointError("no usable checkpoint in %s: %s" % (store.uri, "; ".join(problems)))
    return None


def _register(live: LiveEngine, remote: RemoteEngine, q: dict[str, Any], now: float) -> None:
    name = q["name"]
    with live._parse_lock:
        cq = parse_continuous(q["text"], default_name=name, base=live.base)
    if cq.name != name:
        cq = replace(cq, name=name)
    rq = remote.register(cq)
    rq.last_report = q["last_report"]
    rq.stats.reports, rq.stats.rows = int(q["reports"]), int(q["rows"])
    streams = frozenset(w.stream for w in cq.windows)
    for s in streams:
        live._guard(s, remote.buffer(s))  # type: ignore[arg-type]  # the remote engine's stand-in
        if not live._relevant.get(s):
            live._relevant_since[s] = now
        live._relevant[s] = live._relevant.get(s, 0) + 1
    e = _Entry(cq, rq, streams, due=q["due"], first_report=q["first_report"], dropped=int(q["dropped"]))  # type: ignore[arg-type]  # msgpack header values are untyped
    e.emitted = q["emitted"]
    if e.due is not None:
        live._schedule(name, e, e.due)
    if q["pending"]:
        live._pending.add(name)
    with live._lock:
        live._entries[name] = e
        if live.keep_rings:
            live._rings[name] = ReportRing(live.results_retention_s)


def restore(
    live: LiveEngine, remote: RemoteEngine, ck: Checkpoint, registered: Collection[str] | None
) -> int:
    """Puts checkpoint ``ck`` into the fresh leader ``live`` (on its worker thread); returns
    the last log record it covers.  Queries not in ``registered`` (the registry no longer
    holds them) are left out."""
    meta = ck.meta
    if live._entries or remote.cluster is not None:
        raise CheckpointError("a checkpoint is restored into a fresh leader only")
    _restore_dictionary(remote.dictionary, ck)
    st = meta["live"]
    now = live.clock()
    for s, (wm, first, *applied) in st["streams"].items():  # no applied count before session 14
        live._streams[s] = _Stream(wm, first, now, int(applied[0]) if applied else 0)
    for s, (wm, elements, triples, late, rejected) in st["accepted"].items():
        live._accepted[s] = _Accepted(wm, elements, triples, late, False, rejected)
    live._fired, live._explicit = st["fired"], st["explicit"]
    restore_keys(live, ck)
    queries = [
        q for q in ck.blob("queries").header["queries"] if registered is None or q["name"] in registered
    ]
    old = [q for q in queries if not q.get("fresh")]
    for q in old:
        _register(live, remote, q, now)
    remote.flush()
    bl = ck.blob("backlog")
    streams = []
    for iri, before, first in bl.header["streams"]:
        times, sizes, triples = bl.arrays[first : first + 3]
        ends = np.cumsum(sizes).tolist()
        rows = [(int(t), triples[e - int(z) : e]) for t, z, e in zip(times.tolist(), sizes.tolist(), ends)]
        streams.append((iri, int(before), rows))
    c = st["last_tick"]
    cluster = remote.cluster
    elements = 0
    if cluster is not None:
        for iri, before, rows in streams:
            remote.buffer(iri)  # a stream no restored query reads: retained for later ones
            if remote.owners and remote.applied is not None and iri in cluster.spec.streams:
                # --ingest owners: in applied counts, the backlog ends at the restored count
                cluster.fanout.start_at(cluster.spec.streams.index(iri), remote.applied(iri) - len(rows))
            if iri in cluster.spec.streams:
                for t, tr in rows[:before]:
                    cluster.ingest(iri, t, np.array(tr))
                elements += before
        if c is not None and old:
            # every container evaluates every query once at the last report time: windows as
            # they were, and the previous result of IStream/DStream queries; nothing reported
            try:
                cluster.wait_until_ready(remote.ready_timeout)
            except Exception as exc:  # a container late: its queries start from the buffers
                log.warning("checkpoint %s: %s; silent evaluation without them", ck.id, exc)
            if meta.get("tasks"):  # the containers' operator state; the others are evaluated
                tasksnapshots.restore(cluster, ck, int(c), remote.ready_timeout)
            cluster.tick(int(c), [])
    for q in queries:
        if q.get("fresh"):
            _register(live, remote, q, now)
    remote.flush()
    cluster = remote.cluster
    if cluster is not None:
        for iri, before, rows in streams:
            if iri in cluster.spec.streams:
                for t, tr in rows[before:]:
                    cluster.ingest(iri, t, np.array(tr))
                elements += len(rows) - before
    with live._lock:
        live._frontier = live._frontier_now()
    live._gauges()
    log.info(
        "checkpoint %s: %d queries, %d stream elements re-sent to the containers, silent tick at t=%s",
        ck.id,
        len(queries),
        elements,
        c,
    )
    return int(meta["seq"])


def restore_latest(
    live: LiveEngine,
    store: CheckpointStore,
    timeout: float | None,
    *,
    remote: RemoteEngine,
    client: KazooClient,
    root: str,
    registered: Collection[str] | None,
    held: int | None = None,
    decisions: Callable[[dict[str, list[Any]]], None] | None = None,
) -> tuple[int, Checkpoint | None]:
    """The ``restorer`` of a new leader: the checkpoint the ZooKeeper pointer names (else the
    newest usable one of ``store``) restored into ``live``; ``(-1, None)`` when there is none.
    ``held``: the last entry of the new leader's result log (a checkpoint that waited for a
    later one is passed over, see :func:`_load`; ``None``: no condition).  ``decisions``
    gets the checkpoint's unacknowledged decisions (before the log after it is replayed).

    Raises:
        CheckpointError: Checkpoints exist but none is usable, or one does not fit.
    """
    try:
        ptr = read_pointer(client, root)
    except KazooException as exc:
        log.warning("cannot read the checkpoint pointer: %s; using the store's checkpoints", exc)
        ptr = None
    first = ptr.get("id") if ptr and ptr.get("uri") == store.uri else None
    ck = _load(store, first if isinstance(first, str) else None, held)
    if ck is None:
        return -1, None
    try:
        covered = int(live.call(lambda: restore(live, remote, ck, registered), timeout))
    except CheckpointError:
        raise
    except (KeyError, ValueError, TypeError, IndexError, AttributeError) as e:
        raise CheckpointError(
            "checkpoint %s of %s cannot be restored (written by another version?): %s: %s"
            % (ck.id, store.uri, type(e).__name__, e)
        ) from None
    log.info("restored cluster checkpoint %s of %s (log records through %d)", ck.id, store.uri, covered)
    if decisions is not None:
        decisions(dict(ck.meta.get("decisions") or {}))
    return covered, ck


def recover_leader(
    service: ClusterService,
    live: LiveEngine,
    remote: RemoteEngine,
    ingest: IngestLog,
    skip: Collection[int],
    registered: Collection[str],
) -> dict[str, Any]:
    """A new leader's take-over: the latest cluster checkpoint (if ``service.checkpoints``),
    then the shared log after it; starts the periodic checkpoints.  Returns what was
    restored and replayed (``/status`` shows it as ``takeover``)."""
    store = None
    if service.checkpoints:
        try:
            store = open_checkpoints(service.checkpoints)
        except (BackendError, OSError, ValueError) as e:
            log.error(
                "cannot open the cluster checkpoints %s: %s; the whole log is replayed",
                service.checkpoints,
                e,
            )
    t0 = time.perf_counter()
    restorer = partial(
        restore_latest,
        remote=remote,
        client=service.client,
        root=service.root,
        registered=set(registered),
        # this coordinator's result log after its repair: the checkpoint restored must not
        # have waited for a later entry (see _load); a log that never held an entry (the
        # whole cluster restarted: the result log is in memory) sets no condition
        held=service.log.last or None,
        decisions=service.ingest.restore_decisions if service.ingest.stream_log is not None else None,
    )
    n = live.recover(
        ingest, timeout=max(120.0, 4 * service.ready_timeout), skip=skip, checkpoints=store, restorer=restorer
    )
    ck = live.restored_checkpoint
    info = {
        "checkpoint": ck.id if ck is not None else None,
        "covered": int(ck.meta["seq"]) if ck is not None else -1,
        "replayed": n,
        "backlog_elements": int(ck.meta.get("elements") or 0) if ck is not None else 0,
        **(remote.cluster.tasks.restore_info if ck is not None and remote.cluster is not None else {}),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    if store is not None and service.checkpoint_interval > 0:
        checkpointer = ClusterCheckpointer(
            live,
            remote,
            ingest,
            store,
            service.checkpoint_interval,
            client=service.client,
            root=service.root,
            results=service.log,
        )
        if service.ingest.stream_log is not None:
            checkpointer.streams_dir = service.state_dir
            checkpointer.decisions = service.ingest.saved_decisions
        if n:  # the next take-over (a crash loop, say) does not replay these records again
            checkpointer.first_s = TAKEOVER_CHECKPOINT_S
        if service.state_dir and service.log_ship_interval > 0 and ship_enabled(store.uri, service.state_dir):
            checkpointer.shipper = LogShipper(
                ingest, store.backend, service.log_ship_interval, live.metrics.registry
            )
            checkpointer.shipper.start()
            info["shipping"] = store.uri
        live.checkpointer = checkpointer.start()
        service.coordinator.restore_lost = True  # a dead container's tasks: restored (recovery.py)
        log.info("cluster checkpoints every %gs to %s", service.checkpoint_interval, store.uri)
    return info
