"""The leader's side of the containers' operator state in cluster checkpoints.

At a cluster checkpoint's cut -- the last tick ``seq`` the leader completed, at report time
``c`` -- :func:`request` (on the live worker, right after :func:`~linkstream.cluster.checkpoints.capture`)
asks every container for the operator state of the queries it answered at that tick
(:mod:`linkstream.containers.taskcheckpoint`: the container copies between two ticks and
writes the objects to the checkpoint store from another thread).  The checkpointer's thread
then :meth:`TaskSnapshots.wait`\\ s for every container's acknowledgement; the objects'
checksums go into the checkpoint's manifest as shared objects, so a load verifies them.  A
container that dies or does not answer within :data:`ACK_WAIT_S`, or fails to write, makes
the checkpoint incomplete: it is not written, and the previous one stays current.

Queries on a shared join's router map to their router's unit (one object per router and
container, :mod:`linkstream.operators.shared_state`).  Queries registered after the last
tick (not evaluated at ``c`` anywhere yet) and queries whose state cannot be snapshotted
are listed without an object: a new leader rebuilds them by the silent evaluation at ``c``.

A new leader (:func:`restore`, in :func:`~linkstream.cluster.checkpoints.restore`) sends
each checkpointed state to the container that answers the query in the new run, after the
elements before the checkpoint's cut and before the silent tick at ``c``: a restored
query's windows and operators are then at ``c`` already (the silent tick changes nothing
in it), the others are evaluated as before.  The router units follow, one ``trrouters``
message per container with the units of the routed queries it answers in the new run.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from linkstream.containers.taskcheckpoint import (
    RestoreRouters,
    RestoreTask,
    SnapshotTasks,
    TaskRestored,
    TasksSnapped,
    decode_task,
    encode_task,
    task_kind,
)
from linkstream.containers.wire import Frame
from linkstream.operators.shared_state import UNIT
from linkstream.operators.state import QueryState, encode_state
from linkstream.store.checkpoints import SHARED, Checkpoint, CheckpointError

if TYPE_CHECKING:
    from linkstream.cluster.driver import ClusterEngine

log = logging.getLogger(__name__)

#: seconds a checkpoint waits for the containers' task snapshots before it is skipped
ACK_WAIT_S = 10.0
#: name prefix of the task objects among a checkpoint's shared objects
PREFIX = "tasks-"


@dataclass
class Request:
    """The task snapshots one checkpoint asked for.

    Attributes:
        token: Unique per request (the objects' names start with ``tasks-<token>/``).
        seq: The tick the snapshots follow.
        c: Its report time.
        expect: Per container, the queries it was asked for.
        errors: Queries no container was asked for, with the reason.
    """

    token: str
    seq: int
    c: int
    expect: dict[str, list[str]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


class TaskSnapshots:
    """Collects the containers' task-checkpoint answers (thread-safe: the driver's pump
    runs on the live worker, :meth:`wait` on the checkpointer's thread).

    Args:
        run: The run whose containers answer.
    """

    def __init__(self, run: str) -> None:
        self.run = run
        self._cond = threading.Condition()
        self._snapped: dict[tuple[str, str], TasksSnapped] = {}
        #: per query, a new run's answer to its restore
        self.restored: dict[str, TaskRestored] = {}
        #: what :func:`restore` did (``/status`` of a new leader shows it under ``takeover``)
        self.restore_info: dict[str, Any] = {}

    def on_frames(self, frames: list[Frame]) -> bool:
        """Takes a task-checkpoint answer from the driver's inbox (``False``: not one)."""
        if task_kind(frames) is None:
            return False
        try:
            m = decode_task(frames)
        except ValueError as exc:
            log.warning("driver: rejected malformed message: %s", exc)
            return True
        if m.run != self.run:
            return True
        with self._cond:
            if isinstance(m, TasksSnapped):
                self._snapped[(m.container, m.token)] = m
            elif isinstance(m, TaskRestored):
                self.restored[m.query] = m
            self._cond.notify_all()
        return True

    def wait(
        self,
        req: Request,
        pump: Callable[[], None],
        dead: Callable[[str], bool],
        timeout: float = ACK_WAIT_S,
    ) -> tuple[dict[str, dict[str, Any]], dict[str, str], float]:
        """Waits for every container of ``req``; returns the objects per query, the queries
        without one (with the reason) and the containers' largest copy time.

        ``timeout`` counts from the first :func:`pump` that returned: a pump waits behind
        the pushes queued on the live worker, and the containers' answers are read only there.

        Raises:
            CheckpointError: A container failed, died or did not answer in time.
        """
        deadline = float("inf")
        while True:
            with self._cond:
                acks = {cid: self._snapped.get((cid, req.token)) for cid in req.expect}
            missing = [cid for cid, a in acks.items() if a is None]
            if not missing:
                break
            gone = [cid for cid in missing if dead(cid)]
            if gone or time.monotonic() > deadline:
                why = "left the run" if gone else "did not answer within %gs" % timeout
                raise CheckpointError(
                    "container %s %s before its task snapshots after tick %d were written; "
                    "checkpoint incomplete" % (", ".join(sorted(gone or missing)), why, req.seq)
                )
            pump()
            deadline = min(deadline, time.monotonic() + timeout)
            with self._cond:
                self._cond.wait(0.02)
        objects: dict[str, dict[str, Any]] = {}
        errors = dict(req.errors)
        copy_s = 0.0
        with self._cond:
            for cid in req.expect:
                self._snapped.pop((cid, req.token), None)
        for cid, names in req.expect.items():
            a = acks[cid]
            assert a is not None
            if a.failed:
                raise CheckpointError("container %s: %s; checkpoint incomplete" % (cid, a.failed))
            copy_s = max(copy_s, a.copy_s)
            for name in names:
                if name in a.objects:
                    objects[name] = a.objects[name]
                else:
                    errors[name] = a.errors.get(name, "no snapshot from %s" % cid)
        return objects, errors, copy_s


def request(cluster: ClusterEngine, uri: str, c: int | None, evaluated: Collection[str]) -> Request | None:
    """Asks each container for the state of the ``evaluated`` queries it answered at the last
    tick (on the live worker, between two ticks); ``None`` when no tick was sent yet."""
    seq = cluster.seq
    if c is None or seq == 0:
        return None
    req = Request("%08d-%s" % (seq, secrets.token_hex(4)), seq, int(c))
    answerers = cluster.answerers()
    for name in evaluated:
        if name not in cluster.queries:
            continue
        cid = answerers.get(name)
        if cid is None or cid not in cluster.fanout.peers or cluster._dead(cid):
            req.errors[name] = "no container answers it"
        else:
            req.expect.setdefault(cid, []).append(name)
    for cid, names in req.expect.items():
        keys = {n: "%s%s/%s" % (PREFIX, req.token, cluster._tid(n)) for n in names}
        cluster.fanout.send(
            cid, encode_task(SnapshotTasks(cluster.spec.id, req.token, seq, req.c, uri, keys))
        )
    return req


def restore(cluster: ClusterEngine, ck: Checkpoint, c: int, timeout: float) -> dict[str, Any]:
    """Sends each query's checkpointed state to its answerer in the new run (before the
    silent tick at ``c``) and waits for their answers; returns counts for ``/status``."""
    tasks: dict[str, str] = ck.meta.get("tasks") or {}
    answerers = cluster.answerers()
    sent: dict[str, str] = {}
    #: per container, per router unit (object key): the queries it serves there
    units: dict[str, dict[str, list[str]]] = {}
    for name, key in sorted(tasks.items()):
        cid = answerers.get(name)
        blob = ck.objects.get(SHARED + key)
        if cid is None or blob is None or name not in cluster.queries:
            continue
        if (
            blob.header.get("unit") == UNIT
            and blob.header.get("c") == c
            and name in blob.header.get("queries", ())
        ):
            units.setdefault(cid, {}).setdefault(key, []).append(name)  # sent after the queries'
            sent[name] = cid
            continue
        if blob.header.get("c") != c or blob.header.get("query") != name:
            log.error(
                "checkpoint %s: the task snapshot of %s is not of t=%d; it is evaluated instead",
                ck.id,
                name,
                c,
            )
            continue
        frames = encode_state(QueryState(blob.header, list(blob.arrays)))
        cluster.fanout.send(cid, encode_task(RestoreTask(cluster.spec.id, name, c, list(frames))))
        sent[name] = cid
    for cid, by_key in units.items():  # once its queries are planned (and the others restored)
        parts = []
        for key, names in sorted(by_key.items()):
            blob = ck.objects[SHARED + key]
            parts.append((names, list(encode_state(QueryState(blob.header, list(blob.arrays))))))
        cluster.fanout.send(cid, encode_task(RestoreRouters(cluster.spec.id, int(c), parts)))
    deadline = time.monotonic() + timeout
    ts = cluster.tasks
    while sent and time.monotonic() < deadline:
        with ts._cond:
            if all(n in ts.restored for n in sent):
                break
        cluster.pump(0.02)
    restored = sorted(n for n in sent if ts.restored.get(n) is not None and ts.restored[n].restored)
    info = {
        "tasks_in_checkpoint": len(tasks),
        "tasks_restored": len(restored),
        "tasks_rebuilt": len(sent) - len(restored),
        "tasks_without_snapshot": len([n for n in cluster.queries if n not in sent]),
    }
    missed = sorted(set(sent) - set(restored))
    if missed:  # one line: a new run may plan some queries differently (sharing), that is all
        first = ts.restored.get(missed[0])
        log.warning(
            "checkpoint %s: %d task snapshots not restored (%s%s: %s); the silent evaluation rebuilds them",
            ck.id,
            len(missed),
            ", ".join(missed[:5]),
            ", ..." if len(missed) > 5 else "",
            first.error if first is not None else "no answer within %gs" % timeout,
        )
    ts.restore_info = info
    log.info(
        "checkpoint %s: %d tasks restored from their snapshots, %d rebuilt, %d evaluated (no snapshot)",
        ck.id,
        info["tasks_restored"],
        info["tasks_rebuilt"],
        info["tasks_without_snapshot"],
    )
    return info
