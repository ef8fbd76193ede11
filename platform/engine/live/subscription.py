"""Result subscriptions: a bounded, drop-oldest queue of one query's reports.

The live engine's worker offers every report of a query to each of its subscriptions
and never waits for a reader: a subscriber that falls behind loses its oldest reports
(counted), which keeps one slow HTTP client from stalling every query.  Readers may be
threads (blocking :meth:`Subscription.get`, iteration) or asyncio tasks
(:meth:`Subscription.next_report`, woken through ``call_soon_threadsafe``).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections import deque
from collections.abc import Callable


class SubscriptionClosed(Exception):
    """The subscription ended (query unregistered, engine closed or unsubscribed) and is drained."""


class Subscription:
    """One subscriber's bounded queue of a query's reports; never blocks the engine.

    Holds up to ``maxlen`` result lines (a report without lines counts as one); when a
    new report does not fit, the oldest reports are dropped and their lines counted in
    :attr:`dropped`.  Iterating yields result lines (blocking) until the subscription is
    closed and drained; :meth:`get_report` and :meth:`next_report` (asyncio) yield whole
    reports ``(t, lines)``, empty ones included.

    Attributes:
        query: The query's name.
        dropped: Lines lost because the subscriber did not keep up.
        closed: No report will be added any more.
    """

    def __init__(
        self, query: str, maxlen: int, on_close: Callable[[Subscription], None] | None = None
    ) -> None:
        self.query = query
        self.maxlen = max(1, maxlen)
        self.dropped = 0
        self.closed = False
        self._cond = threading.Condition()
        self._reports: deque[tuple[int, tuple[str, ...]]] = deque()
        self._size = 0
        self._lines: deque[str] = deque()
        self._wakers: list[Callable[[], None]] = []
        self._on_close = on_close

    # -- engine side

    def offer(self, t: int, lines: tuple[str, ...]) -> int:
        """Adds one report; returns the number of lines dropped to make room."""
        with self._cond:
            if self.closed:
                return 0
            self._reports.append((t, lines))
            self._size += max(1, len(lines))
            lost = 0
            while self._size > self.maxlen and len(self._reports) > 1:
                _, old = self._reports.popleft()
                self._size -= max(1, len(old))
                lost += len(old)
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

    def _pop(self) -> tuple[int, tuple[str, ...]]:
        t, lines = self._reports.popleft()
        self._size -= max(1, len(lines))
        return t, lines

    def get_report(self, timeout: float | None = None) -> tuple[int, tuple[str, ...]]:
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
            return self._pop()

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

    async def next_report(self, timeout: float | None = None) -> tuple[int, tuple[str, ...]] | None:
        """The next report, awaited on the running event loop; ``None`` after ``timeout`` s.

        Raises:
            SubscriptionClosed: The subscription is closed and drained.
        """
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
