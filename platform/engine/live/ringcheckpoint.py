"""Incremental checkpoints of the live engine's result rings (what ``Last-Event-ID`` resumes from).

A query's ring keeps ``--results-retention`` seconds of its reports, which can outweigh
the rest of the engine state (an RSTREAM query repeats its whole result every report).
Reports never change once kept, so each checkpoint writes only the reports added since the
previous one, as one *shared* checkpoint object ``rings-<seq>-<n>`` (see
:mod:`linkstream.store.checkpoints`), and lists in its metadata every such object that may
still hold kept reports.  An object drops out of the list once its newest report is older
than the retention; the store deletes it when no kept checkpoint lists it any more.

Each ring carries a random token: a query registered again under the same name gets a new
ring, and reports of its earlier incarnation are not mixed in at restore.  A ring's header
in the checkpoint (``token``, ``kept_from``: its oldest kept report time, ``dropped_until``)
says which of the listed reports it still holds.

Object layout: header ``{"entries": [[query, token, first report, reports]]}``; arrays:
kept-at wall-clock times (float64), report times, line counts (int64), the UTF-8 lines
concatenated (uint8) and their end offsets (int64).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.live.grouprings import GroupLog, MemberRing
from linkstream.engine.live.subscription import Lines, ReportRing
from linkstream.store.checkpoints import Blob, Checkpoint, CheckpointError

if TYPE_CHECKING:
    from linkstream.engine.live.runtime import LiveEngine

__all__ = ["RingLog", "RingsCapture", "load_rings"]

#: (wall-clock time kept, report time, lines)
Report = tuple[float, int, Lines]
#: a listed ring object stays listed this long past the retention (clock differences)
SLACK_S = 60.0


@dataclass
class RingsCapture:
    """New reports of every ring since the last checkpoint (copied on the worker)."""

    #: per query, in registration order: (name, token, new reports, kept_from, dropped_until)
    rings: list[tuple[str, str, list[Report], int | None, int | None]] = field(default_factory=list)
    _index: dict[str, int] = field(default_factory=dict, repr=False)
    #: per ring: the newest report time the checkpoint holds (earlier objects included)
    last: list[int | None] = field(default_factory=list)

    def header(self, name: str) -> dict[str, Any]:
        """The ``ring`` entry of query ``name`` in the checkpoint."""
        if len(self._index) != len(self.rings):
            self._index = {r[0]: k for k, r in enumerate(self.rings)}
        k = self._index.get(name)
        if k is None:
            return {"token": None, "kept_from": None, "dropped_until": None}
        _, token, reports, kept_from, dropped = self.rings[k]
        return {"token": token, "kept_from": kept_from, "dropped_until": dropped, "last": self.last[k]}

    def blob(self) -> Blob | None:
        """The shared object holding the new reports (``None``: there are none)."""
        entries: list[list[Any]] = []
        walls: list[float] = []
        times: list[int] = []
        counts: list[int] = []
        lines: list[bytes] = []
        for name, token, reports, _, _ in self.rings:
            if not reports:
                continue
            entries.append([name, token, len(times), len(reports)])
            for w, t, ls in reports:
                walls.append(w)
                times.append(t)
                counts.append(len(ls))
                lines += [x.encode("utf-8") for x in ls]
        if not entries:
            return None
        ends = np.cumsum([len(b) for b in lines], dtype=np.int64) if lines else np.empty(0, np.int64)
        return Blob(
            {"entries": entries},
            [
                np.asarray(walls, dtype=np.float64),
                np.asarray(times, dtype=np.int64),
                np.asarray(counts, dtype=np.int64),
                np.frombuffer(b"".join(lines), dtype=np.uint8),
                ends,
            ],
        )

    def newest(self) -> float:
        """The newest wall-clock time of a new report (0: none)."""
        return max((r[-1][0] for _, _, r, _, _ in self.rings if r), default=0.0)


class RingLog:
    """Which ring reports earlier checkpoints hold: the listed objects and, per query, the
    ring token and last report time already written.

    Args:
        segments: ``[object name, newest wall-clock time]`` of the listed objects.
        marks: ``query -> (ring token, last report time written)``.
    """

    def __init__(
        self, segments: list[list[Any]] | None = None, marks: dict[str, tuple[str, int]] | None = None
    ) -> None:
        self.segments: list[list[Any]] = [list(s) for s in segments or []]
        self.marks: dict[str, tuple[str, int]] = dict(marks or {})

    @classmethod
    def resume(cls, ck: Checkpoint | None) -> RingLog:
        """The ring log of the checkpoint ``ck`` a restart restored (``None``: nothing
        written yet).  Reports kept after it (recomputed by the log replay) are not in it."""
        if ck is None:
            return cls()
        marks = {}
        for q in ck.blob("queries").header.get("queries", []):
            r = q.get("ring") or {}
            if r.get("token") and r.get("last") is not None:
                marks[q["name"]] = (str(r["token"]), int(r["last"]))
        return cls(ck.meta.get("rings") or [], marks)

    def capture(self, live: LiveEngine) -> RingsCapture:
        """The reports added to each ring since the marks (on the worker thread)."""
        cap = RingsCapture()
        with live._lock:  # subscribers trim rings under the lock
            todo: list[tuple[str, ReportRing, int | None]] = []
            logs: dict[int, tuple[GroupLog, dict[int, int | None]]] = {}
            for name in live._entries:
                ring = live._rings.get(name)
                if ring is None:
                    continue
                mark = self.marks.get(name)
                after = mark[1] if mark is not None and mark[0] == ring.token else None
                todo.append((name, ring, after))
                if isinstance(ring, MemberRing) and ring.log is not None:
                    logs.setdefault(id(ring.log), (ring.log, {}))[1][ring.mid] = after
            for log, afters in logs.values():  # (one pass over each group's log)
                log.prepare_export(afters)
            try:
                for name, ring, after in todo:
                    new = ring.export(after)
                    cap.rings.append((name, ring.token, new, ring.first(), ring.dropped_until))
                    cap.last.append(new[-1][1] if new else after)
            finally:
                for log, _ in logs.values():
                    log.prepare_export(None)
        return cap

    def name(self, seq: int) -> str:
        """A fresh object name for the reports captured at log record ``seq``."""
        return "rings-%012d-%d" % (seq, time.time_ns() % 10**9)

    def listed(self, new: str | None, cap: RingsCapture, retention_s: float) -> list[list[Any]]:
        """The objects the next checkpoint lists: the still useful ones, then ``new``."""
        horizon = time.time() - retention_s - SLACK_S
        keep = [s for s in self.segments if s[1] >= horizon]
        if new is not None:
            keep.append([new, cap.newest()])
        return keep

    def commit(self, listed: list[list[Any]], cap: RingsCapture) -> None:
        """Records that a checkpoint with ``listed`` and ``cap`` was written."""
        self.segments = listed
        self.marks = {r[0]: (r[1], last) for r, last in zip(cap.rings, cap.last) if last is not None}


def load_rings(ck: Checkpoint, retention_s: float) -> dict[tuple[str, str], list[Report]]:
    """The reports of the ring objects ``ck`` lists, by ``(query, token)``, in order.

    Raises:
        CheckpointError: A listed object is malformed.
    """
    out: dict[tuple[str, str], list[Report]] = {}
    for name, _newest in ck.meta.get("rings") or []:
        blob = ck.blob("shared/" + name)
        try:
            walls, times, counts, data, ends = blob.arrays
            raw = data.tobytes()
            ends_l = ends.tolist()
            counts_l = counts.tolist()
            line_at = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).tolist()
            for query, token, first, n in blob.header["entries"]:
                got = out.setdefault((query, token), [])
                for k in range(int(first), int(first) + int(n)):
                    a, b = line_at[k], line_at[k] + counts_l[k]
                    lines = tuple(
                        raw[(ends_l[j - 1] if j else 0) : ends_l[j]].decode("utf-8") for j in range(a, b)
                    )
                    got.append((float(walls[k]), int(times[k]), lines))
        except (ValueError, KeyError, IndexError, TypeError, UnicodeDecodeError) as e:
            raise CheckpointError(
                "checkpoint %s: result ring object %s is malformed: %s" % (ck.id, name, e)
            ) from None
    return out


def restore_ring(
    reports: dict[tuple[str, str], list[Report]], name: str, header: dict[str, Any], retention_s: float
) -> ReportRing:
    """The ring of query ``name`` as its checkpoint header describes it."""
    ring = ReportRing(retention_s)
    token = header.get("token")
    if token:
        ring.token = str(token)
    kept_from = header.get("kept_from")
    got = reports.get((name, ring.token), []) if kept_from is not None else []
    seen: set[int] = set()
    keep = []
    for r in got:
        if kept_from is not None and r[1] >= kept_from and r[1] not in seen:
            seen.add(r[1])
            keep.append(r)
    keep.sort(key=lambda r: r[1])
    ring.load(keep, header.get("dropped_until"))
    return ring
