"""Result subscriptions: a bounded, drop-oldest queue of one query's reports.

The live engine's worker offers every report of a query to each of its subscriptions
and never waits for a reader: a subscriber that falls behind loses its oldest reports
(counted), which keeps one slow HTTP client from stalling every query.  Readers may be
threads (blocking :meth:`Subscription.get`, iteration) or asyncio tasks
(:meth:`Subscription.next_report`, woken through ``call_soon_threadsafe``).

Resumable delivery: every result line has an id ``"<report time>:<k>"`` (the ``k``-th
line, 1-based, of the query's report at that time; SSE ``id:``).  A :class:`ReportRing`
keeps the reports of one query for ``retention_s`` seconds of wall-clock time (and at
most ``max_lines`` lines); :meth:`ReportRing.after` gives what follows a cursor -- exactly
the lines after it, none twice -- or raises :class:`ResultsGone` when some of them were
dropped already.  A subscription started at a cursor ignores reports at or before it, so
a report both replayed from the ring and offered live is delivered once.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence

#: ``(report time, lines of that report already delivered)``: where a reader stands
Cursor = tuple[int, int]
#: one report as queued: ``(report time, lines, id number of the first line minus one)``
#: a report's lines: a tuple, or the block they were rendered into (:class:`~linkstream.engine.render.BlockLines`),
#: or the text a container sent them in (:class:`~linkstream.engine.render.JoinedLines`)
Lines = Sequence[str]
Item = tuple[int, Lines, int]
#: lines a subscriber lost: ``(first missed id, last missed id, lines)``
Gap = tuple[str, str, int]

#: default wall-clock seconds of reports kept per query (``--results-retention``)
RESULTS_RETENTION_S = 300.0
#: most result lines kept per query, whatever their age
RESULTS_MAX_LINES = 100_000


class ResultsGone(LookupError):
    """Some report after a resume cursor is no longer kept (older than the retention)."""


def parse_cursor(text: str) -> Cursor:
    """``"<t>"`` (after the whole report at ``t``) or ``"<t>:<k>"`` (after its ``k``-th line).

    Raises:
        ValueError: Not of that form.
    """
    t, sep, k = text.strip().partition(":")
    if not t.lstrip("-").isdigit() or len(t) > 20 or (sep and (not k.isdigit() or len(k) > 12)):
        raise ValueError("a result id is <report time ms> or <report time ms>:<line>, got %r" % text[:64])
    return int(t), (int(k) if sep else 2**62)


def line_id(t: int, k: int) -> str:
    """The id of the ``k``-th line (1-based) of the report at ``t``."""
    return "%d:%d" % (t, k)


def id_before(line: str) -> str:
    """The resume cursor (``?after=``) whose next line is the line with id ``line``."""
    t, k = parse_cursor(line)
    return line_id(t, k - 1) if k > 1 else "%d" % (t - 1)


class ReportRing:
    """The recent reports of one query, for readers that resume (see the module docstring).

    Not thread-safe: its owner serialises :meth:`add` and :meth:`after`.

    Args:
        retention_s: Wall-clock seconds a report is kept.
        max_lines: Most lines kept (the oldest reports go first).
        clock: Wall clock in seconds.
    """

    def __init__(
        self,
        retention_s: float = RESULTS_RETENTION_S,
        max_lines: int = RESULTS_MAX_LINES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.retention_s = retention_s
        self.max_lines = max(1, max_lines)
        self.clock = clock
        self._reports: deque[tuple[float, int, Lines]] = deque()
        self._lines = 0
        #: the latest report time dropped from the ring (``None``: nothing dropped yet)
        self.dropped_until: int | None = None
        #: names this ring across checkpoints (a query registered again gets a new ring)
        self.token = os.urandom(8).hex()

    def add(self, t: int, lines: Lines, now: float | None = None, n: int | None = None) -> None:
        """Keeps the report at ``t`` (report times only increase; ``now``: :attr:`clock`'s
        time, when the caller read it for several rings; ``n``: ``len(lines)``, when the
        caller knows it -- a :class:`~linkstream.engine.render.JoinedLines`' length is a
        Python call)."""
        if now is None:
            now = self.clock()
        r = self._reports
        if n is None:
            n = len(lines)
        if n:
            r.append((now, t, lines))
            self._lines += n
        if r and (now - r[0][0] > self.retention_s or self._lines > self.max_lines):
            self.trim(now)

    def trim(self, now: float | None = None) -> None:
        """Drops reports older than the retention or past the line budget."""
        now = self.clock() if now is None else now
        r = self._reports
        while r and (now - r[0][0] > self.retention_s or self._lines > self.max_lines):
            _, t, lines = r.popleft()
            self._lines -= len(lines)
            self.dropped_until = t

    def export(self, after: int | None = None) -> list[tuple[float, int, Lines]]:
        """The kept reports with a report time after ``after`` (all: ``None``) as
        ``(wall-clock time.time() when kept, report time, lines)``, for a checkpoint."""
        now, wall = self.clock(), time.time()
        out = []
        for at, t, lines in reversed(self._reports):
            if after is not None and t <= after:
                break
            out.append((wall - (now - at), t, lines))
        out.reverse()
        return out

    def first(self) -> int | None:
        """The earliest report time kept (with lines)."""
        return self._reports[0][1] if self._reports else None

    def load(self, reports: list[tuple[float, int, Lines]], dropped_until: int | None) -> None:
        """Puts back what :meth:`export` gave (in report time order)."""
        now, wall = self.clock(), time.time()
        self._reports = deque((now - (wall - w), t, tuple(lines)) for w, t, lines in reports)
        self._lines = sum(len(r[2]) for r in self._reports)
        self.dropped_until = dropped_until
        self.trim(now)

    def last(self) -> int | None:
        """The latest report time kept (with lines)."""
        return self._reports[-1][1] if self._reports else None

    def after(self, cursor: Cursor) -> list[Item]:
        """The kept reports after ``cursor``, the first one possibly partial.

        Raises:
            ResultsGone: A report after ``cursor`` was dropped already.
        """
        self.trim()
        return self._after(cursor, self._reports)

    def _after(self, cursor: Cursor, reports: Sequence[tuple[float, int, Lines]]) -> list[Item]:
        first = reports[0][1] if reports else None
        return reports_after(cursor, ((t, lines) for _, t, lines in reports), self.dropped_until, first)


def reports_after(
    cursor: Cursor, reports: Iterable[tuple[int, Lines]], dropped: int | None, first: int | None
) -> list[Item]:
    """The reports ``(t, lines)`` (in report time order) after ``cursor``, the first one
    possibly partial.

    Raises:
        ResultsGone: ``dropped`` (the latest report time no longer kept) is after the cursor
            (``first``: the earliest report time kept, named in the message).
    """
    t0, k0 = cursor
    if dropped is not None and dropped > t0:
        raise ResultsGone(
            "results after %d are no longer kept (kept from %s on)"
            % (t0, first if first is not None else "the next report")
        )
    out: list[Item] = []
    for t, lines in reports:
        if t < t0:
            continue
        if t == t0:
            if k0 < len(lines):
                out.append((t, lines[k0:], k0))
            continue
        out.append((t, lines, 0))
    return out


class SubscriptionClosed(Exception):
    """The subscription ended (query unregistered, engine closed or unsubscribed) and is drained."""


class Subscription:
    """One subscriber's bounded queue of a query's reports; never blocks the engine.

    Holds up to ``maxlen`` result lines (a report without lines counts as one); when a
    new report does not fit, the oldest reports are dropped and their lines counted in
    :attr:`dropped`; the lines lost between two reports the reader took make one gap
    (:data:`Gap`), handed to the reader with the next report (:meth:`next_entry`).  Iterating yields result lines (blocking) until the subscription is
    closed and drained; :meth:`get_report` and :meth:`next_report` (asyncio) yield whole
    reports ``(t, lines)``, empty ones included.

    Attributes:
        query: The query's name.
        dropped: Lines lost because the subscriber did not keep up.
        gaps: Gaps opened (runs of lost lines the reader is told about).
        closed: No report will be added any more.
    """

    def __init__(
        self,
        query: str,
        maxlen: int,
        on_close: Callable[[Subscription], None] | None = None,
        *,
        position: Cursor | None = None,
    ) -> None:
        self.query = query
        self.maxlen = max(1, maxlen)
        self.dropped = 0
        self.gaps = 0
        self.closed = False
        #: the last report queued (``(t, lines)``): reports at or before it are ignored
        self.position = position
        self._cond = threading.Condition()
        self._reports: deque[Item] = deque()
        self._size = 0
        #: the lines lost before the queue's head, not yet handed to the reader
        self._gap: Gap | None = None
        self._lines: deque[str] = deque()
        self._wakers: list[Callable[[], None]] = []
        self._on_close = on_close

    # -- engine side

    def offer(self, t: int, lines: Lines, first: int = 0) -> int:
        """Adds one report (``first``: lines of it delivered before, for ids); returns the
        number of lines dropped to make room.  Lines at or before :attr:`position` are
        left out (they were queued already, from a ring or live)."""
        with self._cond:
            if self.closed:
                return 0
            if self.position is not None:
                at, seen = self.position
                if t < at or (t == at and first + len(lines) <= seen):
                    return 0
                if t == at and seen > first:  # the rest of a report partly delivered
                    lines, first = lines[seen - first :], seen
            self.position = (t, first + len(lines))
            self._reports.append((t, lines, first))
            self._size += max(1, len(lines))
            lost = 0
            while self._size > self.maxlen and len(self._reports) > 1:
                ot, old, ofirst = self._reports.popleft()
                self._size -= max(1, len(old))
                if old:
                    lost += len(old)
                    last = line_id(ot, ofirst + len(old))
                    if self._gap is None:
                        self._gap = (line_id(ot, ofirst + 1), last, len(old))
                        self.gaps += 1
                    else:
                        self._gap = (self._gap[0], last, self._gap[2] + len(old))
            self.dropped += lost
            self._cond.notify_all()
            wakers = list(self._wakers)
        for wake in wakers:
            wake()
        return lost

    def finish(self) -> None:
        """Marks the end of the reports (readers drain what is queued, then stop)."""
        with self._cond:
            self.closed = True
            self._cond.notify_all()
            wakers = list(self._wakers)
        for wake in wakers:
            wake()

    # -- reader side

    def close(self) -> None:
        """Unsubscribes: the engine stops feeding this subscription."""
        self.finish()
        if self._on_close is not None:
            cb, self._on_close = self._on_close, None
            cb(self)

    def _pop(self) -> tuple[Gap | None, Item]:
        item = self._reports.popleft()
        self._size -= max(1, len(item[1]))
        gap, self._gap = self._gap, None
        return gap, item

    def get_report(self, timeout: float | None = None) -> tuple[int, Lines]:
        """The next report ``(t, lines)``.

        Raises:
            queue.Empty: Nothing arrived within ``timeout`` seconds.
            SubscriptionClosed: The subscription is closed and drained.
        """
        end = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while not self._reports:
                if self.closed:
                    raise SubscriptionClosed(self.query)
                left = None if end is None else end - time.monotonic()
                if left is not None and left <= 0:
                    raise queue.Empty
                self._cond.wait(left)
            t, lines, _ = self._pop()[1]
            return t, lines

    def get(self, timeout: float | None = None) -> str:
        """The next result line (``queue.Queue.get`` style; see :meth:`get_report`)."""
        end = None if timeout is None else time.monotonic() + timeout
        while not self._lines:
            left = None if end is None else max(0.0, end - time.monotonic())
            self._lines.extend(self.get_report(left)[1])
        return self._lines.popleft()

    def __iter__(self) -> Subscription:
        return self

    def __next__(self) -> str:
        try:
            return self.get()
        except SubscriptionClosed:
            raise StopIteration from None

    async def next_report(self, timeout: float | None = None) -> tuple[int, Lines] | None:
        """The next report, awaited on the running event loop; ``None`` after ``timeout`` s.

        Raises:
            SubscriptionClosed: The subscription is closed and drained.
        """
        item = await self.next_item(timeout)
        return None if item is None else (item[0], item[1])

    async def next_item(self, timeout: float | None = None) -> Item | None:
        """As :meth:`next_report`, with the number of the report's lines delivered before
        (the id of ``lines[i]`` is ``line_id(t, first + i + 1)``)."""
        entry = await self.next_entry(timeout)
        return None if entry is None else entry[1]

    async def next_entry(self, timeout: float | None = None) -> tuple[Gap | None, Item] | None:
        """As :meth:`next_item`, with the lines lost just before that report (``None``: none)."""
        loop = asyncio.get_running_loop()
        event = asyncio.Event()

        def wake() -> None:
            try:
                loop.call_soon_threadsafe(event.set)
            except RuntimeError:  # the loop is closed: nobody waits any more
                pass

        with self._cond:
            self._wakers.append(wake)
        try:
            while True:
                with self._cond:
                    event.clear()
                    if self._reports:
                        return self._pop()
                    if self.closed:
                        raise SubscriptionClosed(self.query)
                try:
                    await asyncio.wait_for(event.wait(), timeout)
                except TimeoutError:
                    return None
        finally:
            with self._cond:
                self._wakers.remove(wake)
