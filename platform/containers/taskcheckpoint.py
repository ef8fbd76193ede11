"""The container's half of cluster checkpoints: task snapshots to the checkpoint store.

The leader coordinator checkpoints the cluster (:mod:`linkstream.cluster.checkpoints`) at
a report time it completed: it asks every container, right after that tick (the request
follows the tick on the same ZeroMQ channel), for the operator state of the queries the
container answers.  The container

1. copies each query's state in its evaluation thread, between two ticks
   (:func:`~linkstream.operators.state.snapshot_query`, the serialisation stateful moves
   use; the arrays are copied, so later ticks cannot change what is written);
2. encodes each as one checkpoint object (msgpack header + raw int64 buffers,
   :func:`~linkstream.store.checkpoints.encode_blob`) and writes it to the checkpoint
   store in a thread of its own (``file://`` or ``s3://``, standard AWS configuration);
3. acknowledges with the objects' sizes and checksums (``tsnapped``), which the leader
   puts into the checkpoint's manifest.  The pipeline waits for the copy only.

A query on shared joins' routers is snapshotted with its routers' *unit*
(:mod:`linkstream.operators.shared_state`): one object per connected set of routers (two
routers read by one query are in the same object), acknowledged under each of its
queries' names.  A query whose state cannot be snapshotted (no tick evaluated here yet)
is acknowledged with the reason: a new leader rebuilds it by
evaluation instead.  A
write that fails acknowledges the failure: the leader's checkpoint is then incomplete.

A new leader sends each query's checkpointed state back (``trestore``) to the container
that holds the query in its new run, after the checkpoint's elements and before the
silent evaluation at the checkpoint's report time; the container re-registers the query
with that state (or, if it does not fit, rebuilds it: the silent evaluation then fills
it) and answers ``trestored``.

Messages (one msgpack header frame each, ``"v"``, ``"kind"`` and ``"run"`` always present):

``tsnap`` (driver to container)
    ``{"token", "seq", "c", "uri", "keys": {query: key}}``: snapshot these queries after tick
    ``seq`` (report time ``c``) and write each to ``uri`` as shared object ``key``.
``tsnapped`` (container to driver)
    ``{"container", "token", "seq", "objects": {query: {"key", "size", "crc32", "sha256",
    "rows"}}, "errors": {query: reason}, "failed": str, "copy_s", "write_s"}``.
``trestore`` (driver to container)
    ``{"query", "c"}`` then the state's frames (:func:`~linkstream.operators.state.encode_state`).
``trrouters`` (driver to container, after the ``trestore`` messages)
    ``{"c", "units": [{"queries", "n"}]}`` then each unit's ``n`` state frames: restore
    these router units (each serving ``queries`` here); answered by one ``trestored`` per query.
``trestored`` (container to driver)
    ``{"container", "query", "restored": bool, "error"}``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import msgpack

from linkstream.containers.messages import Message
from linkstream.containers.replica import RunReplica
from linkstream.containers.takeover import Slot
from linkstream.containers.wire import Frame, byte_view
from linkstream.metrics import ContainerMetrics
from linkstream.operators.router import RouterOperator
from linkstream.operators.shared_state import router_units
from linkstream.operators.state import QueryState, StateError, decode_state
from linkstream.scheduler.runs import RunSpec
from linkstream.store.checkpoint_backends import BackendError
from linkstream.store.checkpoints import SHARED, Blob, CheckpointStore, digest, encode_blob, open_checkpoints

logger = logging.getLogger(__name__)

VERSION = 1
KINDS = ("tsnap", "tsnapped", "trestore", "trestored", "trrouters")


@dataclass(frozen=True)
class SnapshotTasks:
    """Driver to container: snapshot ``keys`` after tick ``seq`` into store ``uri``."""

    run: str
    token: str
    seq: int
    c: int
    uri: str
    keys: dict[str, str]


@dataclass(frozen=True)
class TasksSnapped:
    """Container to driver: the objects written (``failed``: the write failed)."""

    run: str
    container: str
    token: str
    seq: int
    objects: dict[str, dict[str, Any]]
    errors: dict[str, str]
    failed: str = ""
    copy_s: float = 0.0
    write_s: float = 0.0


@dataclass(frozen=True)
class RestoreTask:
    """Driver to container: register ``query`` with the checkpointed state ``frames``."""

    run: str
    query: str
    c: int
    frames: list[Frame] = field(default_factory=list)


@dataclass(frozen=True)
class TaskRestored:
    """Container to driver: whether ``query`` was restored (else rebuilt, ``error`` says why)."""

    run: str
    container: str
    query: str
    restored: bool
    error: str = ""


@dataclass(frozen=True)
class RestoreRouters:
    """Driver to container: restore router units (each: the queries it serves here and its
    state's frames), after the queries' own ``trestore`` messages and before the first tick."""

    run: str
    c: int
    units: list[tuple[list[str], list[Frame]]] = field(default_factory=list)


TaskMessage = SnapshotTasks | TasksSnapped | RestoreTask | TaskRestored | RestoreRouters


def encode_task(m: TaskMessage) -> list[Frame]:
    """The frames of a task-checkpoint message."""
    h: dict[str, Any] = {"v": VERSION, "run": m.run}
    extra: list[Frame] = []
    if isinstance(m, SnapshotTasks):
        h.update(kind="tsnap", token=m.token, seq=m.seq, c=m.c, uri=m.uri, keys=m.keys)
    elif isinstance(m, TasksSnapped):
        h.update(kind="tsnapped", container=m.container, token=m.token, seq=m.seq, objects=m.objects)
        h.update(errors=m.errors, failed=m.failed, copy_s=m.copy_s, write_s=m.write_s)
    elif isinstance(m, RestoreTask):
        h.update(kind="trestore", query=m.query, c=m.c)
        extra = list(m.frames)
    elif isinstance(m, RestoreRouters):
        h.update(kind="trrouters", c=m.c, units=[{"queries": q, "n": len(f)} for q, f in m.units])
        extra = [f for _, fs in m.units for f in fs]
    else:
        h.update(kind="trestored", container=m.container, query=m.query, restored=m.restored, error=m.error)
    return [msgpack.packb(h, use_bin_type=True), *extra]


def task_kind(frames: list[Frame]) -> str | None:
    """The kind of a task-checkpoint message (``None``: another message)."""
    if not frames:
        return None
    try:
        h = msgpack.unpackb(byte_view(frames[0]), raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException):
        return None
    kind = h.get("kind") if isinstance(h, dict) and h.get("v") == VERSION else None
    return kind if kind in KINDS else None


def decode_task(frames: list[Frame]) -> TaskMessage:
    """Parses a task-checkpoint message (raises ``ValueError`` when it is malformed)."""
    h = msgpack.unpackb(byte_view(frames[0]), raw=False, strict_map_key=True)
    try:
        kind, run = h["kind"], str(h["run"])
        if kind == "tsnap":
            keys = {str(k): str(v) for k, v in dict(h["keys"]).items()}
            return SnapshotTasks(run, str(h["token"]), int(h["seq"]), int(h["c"]), str(h["uri"]), keys)
        if kind == "tsnapped":
            objects = {str(k): dict(v) for k, v in dict(h["objects"]).items()}
            errors = {str(k): str(v) for k, v in dict(h["errors"]).items()}
            return TasksSnapped(
                run,
                str(h["container"]),
                str(h["token"]),
                int(h["seq"]),
                objects,
                errors,
                str(h["failed"]),
                float(h["copy_s"]),
                float(h["write_s"]),
            )
        if kind == "trestore":
            return RestoreTask(run, str(h["query"]), int(h["c"]), list(frames[1:]))
        if kind == "trrouters":
            units, k = [], 1
            for u in h["units"]:
                n = int(u["n"])
                if n < 1 or k + n > len(frames):
                    raise ValueError("the units' frames do not add up")
                units.append(([str(q) for q in u["queries"]], list(frames[k : k + n])))
                k += n
            return RestoreRouters(run, int(h["c"]), units)
        if kind == "trestored":
            return TaskRestored(
                run, str(h["container"]), str(h["query"]), bool(h["restored"]), str(h["error"])
            )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed {h.get('kind')} message: {exc}") from exc
    raise ValueError(f"not a task-checkpoint message: {kind!r}")


class SnapshotWriter:
    """Encodes and writes copied snapshots in a thread of its own; finished acknowledgements
    wait in :attr:`done` for the container's main loop (the only one that sends)."""

    def __init__(self) -> None:
        self.done: queue.Queue[TasksSnapped] = queue.Queue()
        self._jobs: queue.Queue[
            tuple[str, str, SnapshotTasks, list[tuple[str, list[str], QueryState]], dict[str, str], float]
        ] = queue.Queue()
        self._stores: dict[str, CheckpointStore] = {}
        self._thread = threading.Thread(target=self._run, name="linkstream-task-snapshots", daemon=True)
        self._thread.start()

    def submit(
        self,
        container: str,
        m: SnapshotTasks,
        states: list[tuple[str, list[str], QueryState]],
        errors: dict[str, str],
        copy_s: float,
    ) -> None:
        """Queues the copied ``states`` of request ``m`` for writing: (object key, the
        queries it is the state of, the state) each."""
        self._jobs.put((container, m.run, m, states, errors, copy_s))

    def _run(self) -> None:
        while True:
            container, run, m, states, errors, copy_s = self._jobs.get()
            t0 = time.perf_counter()
            objects: dict[str, dict[str, Any]] = {}
            failed = ""
            try:
                store = self._stores.get(m.uri)
                if store is None:
                    store = self._stores[m.uri] = open_checkpoints(m.uri)
                for key, names, st in states:
                    data = encode_blob(Blob(st.header, st.arrays))
                    store.backend.put(SHARED + key, data)
                    for name in names:
                        objects[name] = {"key": key, **digest(data), "rows": st.rows}
            except (BackendError, OSError, ValueError) as exc:
                failed = f"cannot write task snapshots to {m.uri}: {exc}"
                logger.error("%s: %s", container, failed)
            dt = time.perf_counter() - t0
            self.done.put(TasksSnapped(run, container, m.token, m.seq, objects, errors, failed, copy_s, dt))


class TaskCheckpoints:
    """Snapshots and restores tasks for cluster checkpoints (see the module docstring).

    A mixin of :class:`~linkstream.containers.runtime.ContainerRuntime`, whose state
    (declared below) and methods ``_send`` and ``_text`` it uses.
    """

    id: str
    metrics: ContainerMetrics
    _run: RunSpec | None
    _replica: RunReplica | None
    _slots: dict[str, Slot]
    _writer: SnapshotWriter | None = None

    def _send(self, message: Message | list[Frame]) -> bool:  # pragma: no cover - the runtime's
        raise NotImplementedError

    def _text(self, task: str) -> str | None:  # pragma: no cover - the runtime's
        raise NotImplementedError

    def _task_checkpoint(self, frames: list[Frame]) -> bool:
        """Applies a task-checkpoint message; ``False``: ``frames`` is not one."""
        if task_kind(frames) is None:
            return False
        try:
            m = decode_task(frames)
        except ValueError as exc:
            logger.warning("%s: rejected malformed message: %s", self.id, exc)
            return True
        replica, run = self._replica, self._run
        if replica is None or run is None or m.run != run.id:
            return True
        if isinstance(m, SnapshotTasks):
            self._snapshot_tasks(replica, m)
        elif isinstance(m, RestoreTask):
            self._restore_task(replica, run, m)
        elif isinstance(m, RestoreRouters):
            self._restore_routers(replica, run, m)
        return True

    def _snapshot_tasks(self, replica: RunReplica, m: SnapshotTasks) -> None:
        """Copies the requested states now (between two ticks); the writer does the rest."""
        t0 = time.perf_counter()
        states: list[tuple[str, list[str], QueryState]] = []
        errors: dict[str, str] = {}
        routed: list[tuple[str, list[RouterOperator]]] = []  # queries on shared joins' routers
        for name in m.keys:
            if replica.last_seq != m.seq or replica.last_c != m.c:
                errors[name] = f"at tick {replica.last_seq} (t={replica.last_c}), not {m.seq} (t={m.c})"
                continue
            slot = self._slots.get(name)
            if slot is not None and slot.reg_seq is not None and slot.reg_seq >= m.seq:
                errors[name] = f"registered here after tick {m.seq}"
                continue
            try:
                st = replica.snapshot(name)
            except StateError as exc:
                try:
                    routed.append((name, replica.routed(name)))
                except StateError:
                    errors[name] = str(exc)
                continue
            states.append((m.keys[name], [name], QueryState(st.header, [a.copy() for a in st.arrays])))
        for names, routers in router_units(routed):
            key = "%s/router-%s-%d" % (m.keys[names[0]].rsplit("/", 1)[0], self.id, len(states))
            try:
                st = replica.router_state(routers)
            except StateError as exc:
                errors.update(dict.fromkeys(names, str(exc)))
                continue
            st.header["queries"] = sorted(names)
            states.append((key, names, st))
        if self._writer is None:
            self._writer = SnapshotWriter()
        self._writer.submit(self.id, m, states, errors, time.perf_counter() - t0)

    def _send_task_acks(self) -> None:
        """Sends the acknowledgements of the snapshots written meanwhile."""
        w = self._writer
        while w is not None and not w.done.empty():
            ack = w.done.get_nowait()
            if self._run is not None and ack.run == self._run.id:
                self._send(encode_task(ack))
                logger.info(
                    "%s: task snapshots after tick %d: %d written, %d not snapshotted (copy %.1f ms, write %.1f ms)%s",
                    self.id,
                    ack.seq,
                    len(ack.objects),
                    len(ack.errors),
                    1000 * ack.copy_s,
                    1000 * ack.write_s,
                    f"; {ack.failed}"
                    if ack.failed
                    else "".join(f"; {n}: {e}" for n, e in sorted(ack.errors.items())),
                )

    def _restore_task(self, replica: RunReplica, run: RunSpec, m: RestoreTask) -> None:
        """Registers ``m.query`` again with its checkpointed state (before any tick here)."""
        name = m.query
        task = next((t for t, n in run.queries.items() if n == name), None)
        text = self._text(task) if task is not None else None
        restored, error = False, ""
        if text is None or not replica.holds(name):
            error = "the query is not held here"
        elif replica.last_c is not None and replica.last_c != m.c:
            error = f"this run evaluated t={replica.last_c} already"
        else:
            try:
                state = decode_state(m.frames)
                replica.unregister(name)
                restored = replica.register_restored(name, text, state)
                if not restored:
                    error = "the state does not fit the query's plan here: rebuilt"
            except StateError as exc:
                error = f"malformed state: {exc}"
            except Exception as exc:  # a query that cannot be registered again: rebuild it
                error = f"{type(exc).__name__}: {exc}"
                if not replica.holds(name):
                    replica.register(name, text)
        if restored:
            logger.info("%s: %s restored from the cluster checkpoint (t=%d)", self.id, name, m.c)
        else:  # the leader sums these up in one warning
            logger.info("%s: %s not restored from the cluster checkpoint: %s", self.id, name, error)
        self._send(encode_task(TaskRestored(run.id, self.id, name, restored, error)))

    def _restore_routers(self, replica: RunReplica, run: RunSpec, m: RestoreRouters) -> None:
        """Restores router units (:meth:`RunReplica.restore_routers`), answers per query."""
        units: list[tuple[list[str], QueryState]] = []
        out: dict[str, str] = {}
        for names, frames in m.units:
            try:
                units.append((names, decode_state(frames)))
            except StateError as exc:
                out.update(dict.fromkeys(names, f"malformed state: {exc}"))
        out.update(replica.restore_routers(units, m.c))
        ok = sorted(n for n, e in out.items() if not e)
        logger.info(
            "%s: %d routed queries restored from %d router units of the cluster checkpoint (t=%d)%s",
            self.id,
            len(ok),
            len(m.units),
            m.c,
            "".join(f"; {n}: {e}" for n, e in sorted(out.items()) if e)[:2000],
        )
        for name, error in sorted(out.items()):
            self._send(encode_task(TaskRestored(run.id, self.id, name, not error, error)))
