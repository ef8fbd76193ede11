"""Pushing a whole body of one stream into the live engine at once (``LiveEngine.push_many``).

:meth:`BatchPush.push_many` decides, for each element of a body in order, whether it is
taken (idempotency key seen, event-time rules, lateness), takes the engine lock once per
run of elements that found room in the input queue, and hands the taken elements to the
worker as one command: the worker encodes the body's terms in one dictionary call
(:meth:`~linkstream.engine.live.worker.LiveWorker._ingest_many`) instead of one per element.
:meth:`~linkstream.engine.live.runtime.LiveEngine.push` is a body of one element: there is
one copy of these decisions.

An element's triples may also be a :class:`TermRows`: rows of indexes into a term table
shared by the body (what an owner coordinator sends the leader, see
:mod:`linkstream.cluster.ingest`): the worker encodes each distinct term once.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.live.state import EngineClosed, _Accepted

if TYPE_CHECKING:
    import queue

    from linkstream.engine.live.ingestlog import IngestLog
    from linkstream.metrics import LiveMetrics


class TermRows:
    """The triples of one element as ``(n, 3)`` indexes into ``terms`` (N-Triples strings),
    a list usually shared by every element of a body.

    ``ref``, when set, names where the body is durable already -- ``(epoch, record, element
    index)`` in its owner's stream log (``run --zk --ingest direct``) -- and the ingest log
    records that reference instead of the terms.
    """

    __slots__ = ("idx", "ref", "terms")

    def __init__(
        self, terms: Sequence[str], idx: np.ndarray, ref: tuple[int, int, int] | None = None
    ) -> None:
        self.terms = terms
        self.idx = idx
        self.ref = ref

    def __len__(self) -> int:
        return len(self.idx)

    def strings(self) -> list[list[str]]:
        """The triples as ``[s, p, o]`` strings (for the ingest log)."""
        terms = self.terms
        return [[terms[a], terms[b], terms[c]] for a, b, c in self.idx.tolist()]


class RefRows(TermRows):
    """``run --zk --ingest meta``: an element the leader knows by its reference only -- ``n``
    triples durable at ``ref`` in its owner's stream log, whose terms the owner sends to the
    containers itself; the leader decides on its event time, logs the reference and hands the
    reference to its engine (:meth:`~linkstream.engine.live.worker.LiveWorker._ingest_many`)."""

    __slots__ = ()

    def __init__(self, n: int, ref: tuple[int, int, int]) -> None:
        super().__init__((), np.empty((n, 0), dtype=np.int32), ref)


class Decided:
    """The worker's final decision on one body (``run --zk --ingest direct``).

    :meth:`BatchPush.push_many` answers per element whether it was *taken*; the worker
    may still drop a taken element as late (a report fired between the push and its
    ingestion, see :meth:`~linkstream.engine.live.worker.LiveWorker._ingest_many`).  An
    owner that sends a stream's elements to the containers itself must send exactly the
    ones the worker applied, numbered as the worker numbered them: ``taken`` (indexes into
    the body, in order) and ``first``, the stream's *applied count* before the first of
    them (the taken elements are applied counts ``first .. first + len(taken) - 1``).
    """

    __slots__ = ("_cond", "_pending", "base", "error", "first", "logged", "taken")

    def __init__(self, base: int = 0) -> None:
        #: the index in the body of the first element handed to ``push_many``
        self.base = base
        self.taken: list[int] = []
        self.first: int | None = None
        self.error: str | None = None
        #: the ingest log record of the worker's drops of this body's elements (the newest):
        #: the decision is final once it is durable (a new leader's replay skips them too)
        self.logged: int | None = None
        self._pending = 0
        self._cond = threading.Condition(threading.Lock())

    def expect(self) -> None:
        """One more worker command holds elements of the body (push side, before enqueueing)."""
        with self._cond:
            self._pending += 1

    def applied(self, positions: Sequence[int], first: int, logged: int | None = None) -> None:
        """The worker applied ``positions`` of one command, the first as applied count ``first``
        (``logged``: the log record of its drops of the command's other elements)."""
        with self._cond:
            if logged is not None:
                self.logged = logged
            if self.first is None:
                self.first = first
            self.taken.extend(p + self.base for p in positions)
            self._done()

    def so_far(self) -> tuple[list[int], int | None, str | None]:
        """``(taken, first, error)`` as they stand (a checkpoint's barrier, on the worker:
        the commands before it are applied, the ones after it not)."""
        with self._cond:
            return list(self.taken), self.first, self.error

    def handed(self) -> None:
        """The body's last command is enqueued (the pusher held one more :meth:`expect`
        while ``push_many`` ran, so that the decision is not complete before it is)."""
        with self._cond:
            self._done()

    def failed(self, why: str) -> None:
        """The worker could not apply one command (engine closed, ingestion error)."""
        with self._cond:
            self.error = self.error or why
            self._done()

    def _done(self) -> None:
        self._pending -= 1
        if self._pending <= 0:
            self._cond.notify_all()

    def done(self) -> bool:
        """Whether every command of the body was decided (the body handed to ``push_many`` whole)."""
        with self._cond:
            return self._pending <= 0

    def wait(self, timeout: float | None = 60.0) -> bool:
        """Whether every command of the body was decided within ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: self._pending <= 0, timeout)


def check_triples(triples: Any) -> Any:
    """``triples`` as the worker takes them (ids contiguous int64).

    Raises:
        ValueError: Not a sequence of triples.
    """
    if isinstance(triples, TermRows):
        return triples
    if isinstance(triples, np.ndarray):
        if triples.ndim != 2 or triples.shape[1] != 3:
            raise ValueError("triples must have shape (n, 3)")
        return np.ascontiguousarray(triples, dtype=np.int64)
    if any(len(tr) != 3 for tr in triples):
        raise ValueError("every triple must have three terms")
    return triples


class BatchPush:
    """The ``push_many`` of :class:`~linkstream.engine.live.runtime.LiveEngine` (a mixin)."""

    # state set by ``LiveEngine.__init__`` (declared here for the type checker only)
    metrics: LiveMetrics
    _lock: threading.Lock
    _queue: queue.SimpleQueue[tuple]
    _space: threading.BoundedSemaphore
    _accepted: dict[str, _Accepted]
    _frontier: int | None
    _keys: set[str]
    _key_order: collections.deque[str]
    _closed: bool
    _thread: threading.Thread | None
    _log: IngestLog | None

    start: Callable[[], object]
    _check_time: Callable[[str, _Accepted, int], None]
    _count_late: Callable[[str, _Accepted, int, int], None]

    def _remember_key(self, key: str) -> None:
        """Remembers an element's idempotency key (the newest IDEMPOTENCY_KEYS; under the lock)."""
        self._keys.add(key)
        self._key_order.append(key)
        if len(self._key_order) > IDEMPOTENCY_KEYS:
            self._keys.discard(self._key_order.popleft())

    def push_many(
        self,
        stream: str,
        elements: Sequence[tuple[int, Any]],
        *,
        keys: Sequence[str | None] | None = None,
        timeout: float | None = None,
        decided: Decided | None = None,
    ) -> tuple[list[bool], Exception | None]:
        """Pushes ``elements`` (``(t, triples)``, in order) of ``stream``, stopping at the
        first one refused (what :meth:`push` documents, per element).

        Returns:
            Per element handled, whether it was taken (``False``: late; a repeated
            idempotency key counts as taken), and the error that stopped the body:
            :class:`~linkstream.rdf.eventtime.EventTimeError` (that element refused) or
            :class:`TimeoutError` (no room in the input queue for ``timeout`` seconds).
            ``decided``, when given, gets the worker's final decision (:class:`Decided`).

        Raises:
            ValueError: An element's triples are not triples (nothing was pushed).
            EngineClosed: The engine is closed.
            OSError: The ingest log could not be written (the elements before were taken).
        """
        items = [(int(t), check_triples(tr)) for t, tr in elements]
        if self._closed:
            raise EngineClosed("the live engine is closed")
        if self._thread is None:
            self.start()
        flags: list[bool] = []
        i, n = 0, len(items)
        while i < n:
            got = 0  # room for a run of elements without waiting, else wait for one
            while i + got < n and self._space.acquire(blocking=False):
                got += 1
            if not got:
                if not self._space.acquire(timeout=timeout):
                    return flags, TimeoutError("the engine's input queue is full")
                got = 1
            error = self._take(stream, items, keys, i, got, flags, decided)
            if error is not None:
                return flags, error
            i += got
        return flags, None

    def _take(
        self,
        stream: str,
        items: list[tuple[int, Any]],
        keys: Sequence[str | None] | None,
        start: int,
        count: int,
        flags: list[bool],
        decided: Decided | None = None,
    ) -> Exception | None:
        """Elements ``start .. start+count`` (one permit each held) under the engine lock:
        repeated key, event-time check, lateness, log append; the taken ones enqueued as
        one command."""
        taken: list[tuple[int, Any]] = []
        positions: list[int] = []
        seqs: list[int] = []  # the taken elements' log records (a worker's drop names them)
        late: list[tuple[int, int]] = []  # (time, watermark) of the elements refused as late
        rejected = 0  # the element refused for its event time (it ends the body)
        triples_in = 0
        error: Exception | None = None
        with self._lock:
            acc = self._accepted.get(stream)
            if acc is None:
                acc = self._accepted[stream] = _Accepted()
            try:
                for k in range(start, start + count):
                    t, triples = items[k]
                    key = None if keys is None else keys[k]
                    if key is not None and key in self._keys:
                        self._space.release()
                        flags.append(True)
                        continue
                    try:
                        self._check_time(stream, acc, t)  # EventTimeError: out of range or too far ahead
                    except ValueError as exc:
                        acc.rejected += 1
                        rejected = 1
                        error = exc
                        self._space.release(start + count - k)  # this one and the rest
                        break
                    floor = max((x for x in (acc.watermark, self._frontier) if x is not None), default=None)
                    if floor is not None and t < floor:
                        self._space.release()
                        self._count_late(stream, acc, t, floor)
                        late.append((t, floor))
                        flags.append(False)
                        continue
                    if self._log is not None:
                        try:
                            seqs.append(self._log.append_push(stream, t, triples, key))  # durable at sync()
                        except OSError:
                            self._space.release(start + count - k)
                            raise
                    if key is not None:
                        self._remember_key(key)
                    acc.watermark = t
                    acc.elements += 1
                    acc.triples += len(triples)
                    triples_in += len(triples)
                    taken.append((t, triples))
                    positions.append(k)
                    flags.append(True)
            finally:
                if (late or rejected) and self._log is not None:  # a replay counts them again
                    self._log.append_late(stream, [t for t, _ in late], [f for _, f in late], rejected)
                if taken:
                    # enqueued under the lock: elements of one stream reach the worker in order
                    if decided is not None:
                        decided.expect()
                    if seqs:  # logged: a worker's late drop is logged too (a replay repeats it)
                        self._queue.put(("pushes", stream, taken, positions, decided, seqs))
                    elif decided is None:
                        self._queue.put(("pushes", stream, taken))
                    else:
                        self._queue.put(("pushes", stream, taken, positions, decided))
        if taken:
            self.metrics.ingest_elements.inc(len(taken))
            self.metrics.ingest_triples.inc(triples_in)
        return error

    def _replayed_push(
        self,
        stream: str,
        t: int,
        triples: Any,
        key: str | None = None,
        *,
        timeout: float | None = None,
        decided: Decided | None = None,
        position: int = 0,
    ) -> None:
        """A logged element no ``drop`` record names, met by a replay: applied as the logged
        run's worker applied it, without the lateness checks of either side.  The replay's
        report times can pass an element the logged run's had not passed yet (its worker
        batches differ, an ``--idle-ms`` report fires by the wall clock), so re-deciding
        lateness could drop what the logged run applied: its windows and the stream's
        applied count would differ.  ``decided`` gets the worker's decision (element
        ``position`` of its body; a new leader rebuilds its owners' decisions so).

        Raises:
            ValueError: ``triples`` is not a sequence of triples.
            EngineClosed: The engine is closed.
            TimeoutError: The worker's queue stayed full for ``timeout`` seconds.
        """
        triples = check_triples(triples)
        if self._closed:
            raise EngineClosed("the live engine is closed")
        if self._thread is None:
            self.start()
        if not self._space.acquire(timeout=timeout):
            raise TimeoutError("the engine's input queue is full")
        with self._lock:
            self._taken(stream, t, len(triples), key)
            if decided is not None:
                decided.expect()
            # the 7th part: ingested whatever the worker's report times (see above)
            self._queue.put(("pushes", stream, [(t, triples)], [position], decided, None, True))
        self.metrics.ingest_elements.inc()
        self.metrics.ingest_triples.inc(len(triples))

    def _replayed_drop(self, stream: str, t: int, triples: int, key: str | None) -> None:
        """A logged element the worker dropped as late (a ``drop`` record names it), met by
        a replay: counted as it was then (taken, then late), not pushed again."""
        with self._lock:
            acc = self._taken(stream, t, triples, key)
            self._count_late(stream, acc, t, t)

    def _replayed_late(
        self, stream: str, times: Sequence[int], floors: Sequence[int], rejected: int = 0
    ) -> None:
        """Elements the push side refused as late or for their event time (a ``late``
        record), met by a replay: counted late (``rejected``) again, as they were."""
        with self._lock:
            acc = self._accepted.get(stream)
            if acc is None:
                acc = self._accepted[stream] = _Accepted()
            for t, floor in zip(times, floors):
                self._count_late(stream, acc, int(t), int(floor))
            acc.rejected += int(rejected)

    def _taken(self, stream: str, t: int, triples: int, key: str | None) -> _Accepted:
        """Counts one element at time ``t`` with ``triples`` triples as taken on ``stream``
        (and remembers its key); the caller holds the lock."""
        acc = self._accepted.get(stream)
        if acc is None:
            acc = self._accepted[stream] = _Accepted()
        if key is not None:
            self._remember_key(key)
        acc.watermark = t if acc.watermark is None else max(acc.watermark, t)
        acc.elements += 1
        acc.triples += triples
        return acc


#: idempotency keys remembered (the latest accepted elements'; see ``LiveEngine.push``)
IDEMPOTENCY_KEYS = 100_000

__all__ = ["RefRows", "IDEMPOTENCY_KEYS", "BatchPush", "Decided", "TermRows", "check_triples"]
