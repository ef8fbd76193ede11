"""The fan-out's backlog in a cluster checkpoint (:mod:`linkstream.cluster.checkpoints`):
the retained elements of every stream, copied on the leader's worker at the barrier and
encoded as arrays off it."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from linkstream.cluster.fanout import triples_of
from linkstream.store.checkpoints import Blob

if TYPE_CHECKING:
    from linkstream.cluster.remote_engine import RemoteEngine


def fanout_backlog(remote: RemoteEngine) -> list[tuple[str, int, list[tuple[int, np.ndarray]]]]:
    """The fan-out's retained elements per stream ``(t, triples)``, with the count before the
    last tick's cut (references only: the fan-out never changes an element's array)."""
    cluster = remote.cluster
    if cluster is None:
        return []
    fan = cluster.fanout
    cuts = cluster.recovery._cuts
    cut = cuts[-1][2] if cuts and cuts[-1][0] == cluster.seq else None
    # --ingest meta: elements held by reference are read from the owners' stream logs
    fan.materialize(
        [(k, tr) for k, _, tr in fan._pending] + [(r[0], r[3]) for dq in fan._backlog for r in dq]
    )
    pending: dict[int, list[tuple[int, np.ndarray]]] = {}
    for k, t, tr in fan._pending:  # not flushed yet: after the cut
        pending.setdefault(k, []).append((t, triples_of(tr)))
    out = []
    for k, iri in enumerate(fan.streams):
        rows = list(fan._backlog[k])
        end = int(cut[k]) if cut is not None and k < len(cut) else 0
        before = sum(1 for r in rows if r[1] < end)
        out.append((iri, before, [(r[2], triples_of(r[3])) for r in rows] + pending.get(k, [])))
    return out


def backlog_blob(backlog: list[tuple[str, int, list[tuple[int, np.ndarray]]]]) -> Blob:
    """Per stream: times, sizes and the joined triples of its elements (off the worker)."""
    arrays: list[np.ndarray] = []
    streams = []
    for iri, before, items in backlog:
        streams.append([iri, before, len(arrays)])
        parts = [tr for _, tr in items if len(tr)]
        arrays += [
            np.array([t for t, _ in items], dtype=np.int64),
            np.array([len(tr) for _, tr in items], dtype=np.int64),
            np.concatenate(parts).astype(np.int64) if parts else np.empty((0, 3), np.int64),
        ]
    return Blob({"streams": streams}, arrays)


__all__ = ["backlog_blob", "fanout_backlog"]
