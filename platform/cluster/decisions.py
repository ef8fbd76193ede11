"""``run --zk --ingest direct``: the leader worker's decisions, delivered to the stream
owners out of band.

The leader answers an owner's body as soon as it is durable and accepted
(``push_many``'s per-element flags), as with ``--ingest leader``.  Which of the taken
elements its worker really applied (a report time can still pass an element between
the push and the worker's ingestion), and how they are numbered (the stream's *applied
count*), is known only a worker cycle later: waiting for it in the hand-off cost ~40x in
accepted push rate (``docs/architecture.md``, "Direct ingest").  So the decisions travel
on their own:

* the leader keeps, per stream, one :class:`Pending` per body it pushed with a
  :class:`~linkstream.engine.live.batchpush.Decided` (:class:`DecisionBook`, in offset
  order), until the owner acknowledges it;
* every hand-off answer carries the stream's completed decisions after the offset the
  owner acknowledged in the :data:`DECIDED_HEADER` request header (the body, logged in
  the owner's stream log, is not changed), and an owner whose answered bodies are not all
  decided asks for them in a batch (``POST /_cluster/ingest`` with ``{"poll": ...}``, see
  :class:`DecisionPoller`) -- a stream that stops still gets its last decisions;
* the owner keeps per stream (:class:`OwnerDecisions`) the offset up to which it knows
  the decisions, the stream's applied count after them, and how many offsets' decisions
  it will never get (``lost``: e.g. decisions the leader dropped unacknowledged, over
  :data:`KEEP`; a new leader rebuilds the decisions on the bodies it replays,
  :func:`~linkstream.cluster.ingest.rebuild_decision`, and restores those its checkpoint
  kept, :meth:`DecisionBook.saved`, a body it covered in part among them; see the notes
  in ``docs/architecture.md``).

A decision on the wire is ``[start, end, first, runs, error]``: it covers the offsets
``start .. end - 1`` (a body, less the elements applied by an earlier answer of the same
body); ``runs`` is the flat list ``[a0, b0, a1, b1, ...]`` of the half-open offset ranges
of the elements the worker applied, in order, numbered ``first, first + 1, ...``
(``first`` is ``None`` when none was); ``error`` names a worker failure (nothing more is
known of those elements then).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from linkstream.engine.live.batchpush import Decided

logger = logging.getLogger(__name__)

#: request header of a hand-off: the offset below which the owner holds every decision
DECIDED_HEADER = "x-linkstream-decided"
#: completed decisions the leader keeps per stream for its owner (older unacknowledged
#: ones are dropped: the owner counts them as lost)
KEEP = 4096
#: seconds between an owner's polls for the decisions of answered bodies
POLL_S = 0.1


def runs_of(offsets: Iterable[int]) -> list[int]:
    """``[a0, b0, a1, b1, ...]``: the half-open ranges of ascending ``offsets``."""
    out: list[int] = []
    for x in offsets:
        if out and out[-1] == x:
            out[-1] = x + 1
        else:
            out += [x, x + 1]
    return out


def count_runs(runs: list[int]) -> int:
    """How many offsets ``runs`` (:func:`runs_of`' form) holds."""
    return sum(runs[k + 1] - runs[k] for k in range(0, len(runs), 2))


@dataclass
class Pending:
    """The leader's decision on one body: offsets ``start .. end - 1``, the elements handed
    to ``push_many`` having body offsets ``offset + decided.base ...``."""

    start: int
    end: int
    offset: int
    decided: Decided
    #: restored from a checkpoint that covered the body in part: a new leader's replay of
    #: the body's other elements goes on with this decision (:meth:`DecisionBook.resume`)
    resumable: bool = False
    #: restored from a checkpoint (its ``end`` may stop at its last applied element)
    restored: bool = False

    def wire(self, durable: int | None = None) -> list[Any] | None:
        """The decision on the wire, ``None`` while the worker has not decided (or its record
        of late drops is not on disk yet: ``durable`` is the last record that is)."""
        d = self.decided
        if not d.done() or (durable is not None and d.logged is not None and d.logged > durable):
            return None
        runs = runs_of(self.offset + j for j in d.taken)
        return [self.start, self.end, d.first if runs else None, runs, d.error]


@dataclass
class DecisionBook:
    """The leader's decisions on one stream's bodies not yet acknowledged by its owner."""

    epoch: int = -1
    entries: collections.deque[Pending] = field(default_factory=collections.deque)
    #: the end of the last entry dropped (acknowledged or over :data:`KEEP`)
    end: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, epoch: int, pending: Pending) -> None:
        """Records the decision on a body (called in offset order, after ``push_many``)."""
        with self.lock:
            if epoch != self.epoch:  # a new owner: the old one's decisions are for nobody
                self.epoch, self.end = epoch, None
                self.entries.clear()
            last = self.entries[-1] if self.entries else None
            if last is not None and last.restored and last.end < pending.start:
                # a decision restored as far as its last applied element: the offsets up to
                # this body were its elements the old leader did not apply (late, refused)
                last.end = pending.start
            self.entries.append(pending)
            while len(self.entries) > KEEP:
                self.end = self.entries.popleft().end

    def saved(self) -> tuple[int, int | None, list[list[Any]]]:
        """``(epoch, end, decisions)`` for a cluster checkpoint, read on the worker at its
        barrier: the completed decisions not acknowledged yet, in offset order, then the
        first one the worker has not completed *as far as the barrier*, if it applied any
        of its elements before it (a body the checkpoint covers in part): ``[start, end,
        first, runs, error, offset]``, ``end`` after its last element applied so far and
        ``offset`` the body's -- the replay of the log after the checkpoint goes on with it
        (:meth:`resume`); the rest of the body, and the bodies after it, are rebuilt by it."""
        with self.lock:
            out = []
            for p in self.entries:
                w = p.wire()
                if w is not None:
                    out.append(w)
                    continue
                taken, first, error = p.decided.so_far()
                if taken and first is not None:
                    runs = runs_of(p.offset + j for j in taken)
                    out.append([p.start, runs[-1], first, runs, error, p.offset])
                break
            return self.epoch, self.end, out

    def restore(self, epoch: int, end: int | None, decisions: list[list[Any]]) -> None:
        """Puts back what :meth:`saved` gave (a new leader restoring a cluster checkpoint,
        before its replay adds the decisions on the bodies after it)."""
        with self.lock:
            self.epoch, self.end = epoch, end
            self.entries.clear()
            for start, stop, first, runs, error, *partial in decisions:
                offset = int(partial[0]) if partial else start
                d = Decided()
                d.taken = [
                    x - offset for a, b in zip(runs[::2], runs[1::2], strict=True) for x in range(a, b)
                ]
                d.first, d.error = first, error
                self.entries.append(Pending(start, stop, offset, d, resumable=bool(partial), restored=True))

    def resume(self, epoch: int, offset: int) -> Pending | None:
        """The restored decision on the body at ``offset`` that a checkpoint covered in part
        (:meth:`saved`), for a new leader's replay of its other elements; ``None``: none."""
        with self.lock:
            p = self.entries[-1] if self.entries and epoch == self.epoch else None
            if p is None or not p.resumable or p.offset != offset:
                return None
            p.resumable = False
            return p

    def discard(self, pending: Pending) -> None:
        """Takes back the decision on a body of which nothing was handled (added before
        ``push_many``, which refused its first element for want of room)."""
        with self.lock:
            if self.entries and self.entries[-1] is pending:
                self.entries.pop()

    def take(self, epoch: int, after: int, durable: int | None = None) -> tuple[int | None, list[list[Any]]]:
        """Drops the decisions wholly below ``after`` (the owner has them) and returns
        ``(floor, decisions)``: the completed decisions from there, in offset order up to
        the first one still undecided, and ``floor``, the lowest offset this leader can
        still answer for ``epoch`` (``None``: it took no body of that epoch)."""
        with self.lock:
            if epoch != self.epoch:
                return None, []
            while self.entries and self.entries[0].end <= after:
                self.end = self.entries.popleft().end
            out = []
            for p in self.entries:
                w = p.wire(durable)
                if w is None:
                    break
                out.append(w)
            floor = self.entries[0].start if self.entries else self.end
            return floor, out


@dataclass
class OwnerDecisions:
    """What an owner knows of the leader's decisions on one stream (one epoch)."""

    #: every offset below it is decided (or lost)
    decided: int = 0
    #: the stream's applied count after the last decision that applied an element
    applied: int | None = None
    #: offsets whose decision will never come
    lost: int = 0
    #: the worker failed on some elements (their numbering is not known)
    failed: int = 0
    #: bodies decided
    bodies: int = 0
    #: monotonic time of the last decisions received (polls wait a little after it)
    heard: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: gets the decisions learnt (new ones only, in offset order) and the id of the leader's
    #: run they were made in: the owners' sender
    sink: Callable[[list[list[Any]], str | None], None] | None = None

    def learn(self, floor: int | None, decisions: list[list[Any]], upto: int, run: str | None = None) -> None:
        """Takes a leader's answer: ``floor`` and ``decisions`` of :meth:`DecisionBook.take`;
        ``upto`` is the offset below which every body had been answered when it was asked
        (the leader's floor above the known offsets, or no floor, means the decisions of
        those bodies are gone: another leader answered them)."""
        with self.lock:
            self.heard = time.monotonic()
            bound = upto if floor is None else min(floor, upto)
            if bound > self.decided:
                self.lost += bound - self.decided
                self.decided = bound
            new = []
            for start, end, first, runs, error in decisions:
                if end <= self.decided:
                    continue  # had it (a retried body, or an answer and a poll crossing)
                new.append([start, end, first, runs, error])
                if start > self.decided:
                    self.lost += start - self.decided
                self.decided = end
                self.bodies += 1
                if error:
                    self.failed += 1
                if first is not None and runs:
                    self.applied = int(first) + count_runs(runs)
            if new and self.sink is not None:
                self.sink(new, run)

    def status(self) -> dict[str, Any]:
        with self.lock:
            out: dict[str, Any] = {"decided": self.decided, "lost": self.lost}
            if self.applied is not None:
                out["applied"] = self.applied
            if self.failed:
                out["failed"] = self.failed
            return out


class DecisionPoller:
    """An owner's thread that asks the leader for the decisions of its answered bodies
    (those no hand-off answer brought yet), every :data:`POLL_S` seconds, in one request
    for all its streams.

    ``wanted()`` lists ``(stream, epoch, after, upto, decisions)`` of the streams with
    answered bodies undecided; ``ask(polls)`` sends ``[[stream, epoch, after], ...]`` to
    the leader and returns ``{stream: (floor, decisions)}`` (``None``: no leader now).
    """

    def __init__(
        self,
        wanted: Callable[[], list[tuple[str, int, int, int, OwnerDecisions]]],
        ask: Callable[[list[list[Any]]], dict[str, tuple[Any, ...]] | None],
    ) -> None:
        self._wanted = wanted
        self._ask = ask
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="decision-poller", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            try:
                self.poll_once()
            except Exception:  # never let the poller die: the next round asks again
                logger.debug("asking the leader for decisions failed", exc_info=True)

    def poll_once(self) -> int:
        """One round; returns how many streams were asked about."""
        now = time.monotonic()
        want = [w for w in self._wanted() if now - w[4].heard >= POLL_S]
        if not want:
            return 0
        got = self._ask([[iri, epoch, after] for iri, epoch, after, _, _ in want])
        if got is None:
            return 0
        for iri, _, _, upto, book in want:
            if iri in got:
                floor, decisions, *run = got[iri]  # the leader's run id (--ingest direct, since session 19)
                book.learn(floor, decisions, upto, run[0] if run else None)
        return len(want)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)


__all__ = [
    "DECIDED_HEADER",
    "KEEP",
    "POLL_S",
    "DecisionBook",
    "DecisionPoller",
    "OwnerDecisions",
    "Pending",
    "count_runs",
    "runs_of",
]
