"""A ``forward`` message on the container: a dead container's queries restored from the
last complete cluster checkpoint, fed forward and kept (the runtime's handler).

The driver (:mod:`linkstream.cluster.recovery`) sends it to the dead container's queries'
new owner in place of a ``recompute`` request: the history from the checkpoint's cut on
and, per query, the key of its task snapshot in the checkpoint store.  The handler

1. reads each snapshot from the store (checked against the size and sha256 the manifest
   holds; a missing or damaged one leaves its query rebuilt from the history, which
   :func:`~linkstream.containers.restoreforward.forward` says in its log line);
2. restores and feeds them forward in a scratch replica and answers ``recomputed`` with the
   owed report's lines, as a recompute would;
3. hands each query it is assigned here over to the live replica
   (:func:`~linkstream.containers.restoreforward.adopt`), replacing a query its assignment
   registered meanwhile (rebuilt from the stream buffers: the same content, so its *ready*
   announcement stays right); a query adopted before its assignment registered it gets its
   slot here and is announced ready from the next tick by the assignment's reconcile.  A
   query not assigned here yet (the coordinator has not moved it), or whose streams are not
   live here, is not kept: its owner rebuilds it as before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from linkstream.containers.messages import Forward, Recomputed
from linkstream.containers.protofields import CAPS
from linkstream.containers.replica import RunReplica
from linkstream.containers.restoreforward import adopt, forward
from linkstream.containers.takeover import Slot
from linkstream.operators.state import QueryState
from linkstream.store.checkpoint_backends import BackendError
from linkstream.store.checkpoints import (
    SHARED,
    CheckpointError,
    CheckpointStore,
    decode_blob,
    digest,
    open_checkpoints,
)

logger = logging.getLogger(__name__)


def read_snapshots(
    uri: str, objects: Mapping[str, Mapping[str, object]], stores: dict[str, CheckpointStore]
) -> dict[str, QueryState | None]:
    """Each query's task snapshot from store ``uri`` (``None``: missing or damaged, logged)."""
    out: dict[str, QueryState | None] = {}
    blobs: dict[str, QueryState] = {}  # a router unit serves several queries: read once
    for name, entry in objects.items():
        key = str(entry["key"])
        try:
            if key not in blobs:
                store = stores.get(uri)
                if store is None:
                    store = stores[uri] = open_checkpoints(uri)
                data = store.backend.get(SHARED + key)
                got = digest(data)
                if got["size"] != entry.get("size") or got["sha256"] != entry.get("sha256"):
                    raise CheckpointError(f"object {key} does not match the checkpoint's manifest")
                blob = decode_blob(data, f"object {key}")
                blobs[key] = QueryState(blob.header, list(blob.arrays))
            out[name] = blobs[key]
        except (KeyError, BackendError, CheckpointError, OSError, ValueError) as exc:
            logger.warning("cannot read the task snapshot of %s from %s: %s", name, uri, exc)
            out[name] = None
    return out


def handle_forward(
    container: str,
    replica: RunReplica,
    message: Forward,
    texts: Mapping[str, str],
    owned: Callable[[str], str | None],
    slots: dict[str, Slot],
    stores: dict[str, CheckpointStore],
) -> Recomputed:
    """Answers ``message`` and keeps the queries this container owns (see the module docstring).

    Args:
        container: This container's id.
        replica: The run's live replica (evaluated the message's last report time).
        message: The driver's request.
        texts: Text of each of its queries this container can read.
        owned: The task id of a query assigned to this container (``None``: not assigned here).
        slots: The runtime's registered queries (a query adopted here gets one).
        stores: Checkpoint stores opened so far, by URI.
    """
    c = message.owe or message.ticks[-1]
    missing = [n for n in message.queries if n not in texts]
    if missing:
        error = f"unknown queries {', '.join(missing)}"
        return Recomputed(message.run, container, message.id, c, {}, error, caps=CAPS, kept=())
    try:
        snapshots = read_snapshots(message.uri, message.objects, stores)
        fwd = forward(
            replica, texts, snapshots, message.ticks[0], message.elements, message.ticks[1:], message.at, c
        )
    except Exception as exc:  # the driver asks another container (a plain recompute)
        logger.error(
            "%s: cannot restore %s and feed it forward: %s", container, ", ".join(message.queries), exc
        )
        error = f"{type(exc).__name__}: {exc}"
        return Recomputed(message.run, container, message.id, c, {}, error, caps=CAPS, kept=())
    keep: dict[str, str] = {}
    skipped: dict[str, str] = {}
    for name in message.queries:
        task = owned(name)
        if task is None:
            skipped[name] = "not assigned here (yet)"
        elif not replica.synced or not replica.live >= replica.reads(name, texts[name]):
            skipped[name] = "its streams are not live here"
        elif replica.last_c != fwd.c:
            skipped[name] = f"this replica is at t={replica.last_c}, not {fwd.c}"
        else:
            keep[name] = task
    kept = adopt(replica, {n: texts[n] for n in keep}, fwd) if keep else {}
    for name, why in kept.items():
        if name not in slots:  # announced ready by the assignment's next reconcile
            slots[name] = Slot(keep[name], replica.last_seq)
        if why:
            skipped[name] = f"rebuilt: {why}"
    logger.info(
        "%s: restored-forward path: %d of %d queries kept from the checkpoint at t=%d "
        "(restored %d, rebuilt %d in the scratch replica)%s",
        container,
        len([n for n, why in kept.items() if not why]),
        len(message.queries),
        message.ticks[0],
        len(fwd.restored),
        len(fwd.rebuilt),
        "".join(f"; {n} not kept: {why}" for n, why in sorted(skipped.items()))[:2000],
    )
    kept_names = tuple(sorted(kept))  # (the driver forwards them again only if not kept)
    return Recomputed(
        message.run, container, message.id, c, fwd.lines, later=fwd.later, caps=CAPS, kept=kept_names
    )
