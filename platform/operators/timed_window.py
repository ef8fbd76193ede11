"""The timed window a shared join reads (:mod:`linkstream.operators.router`): a time
window whose triples carry their element's timestamp, sized and stepped to serve every
subscriber of the routers above it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from linkstream.operators.batch import Batch, concat
from linkstream.operators.state import StateReader, StateWriter
from linkstream.operators.window import WindowBuffer, WindowOperator
from linkstream.query.windows import WindowSpec

TIMED_VARS = ("_s", "_p", "_o", "_t")

#: how much longer than the widest range its readers ask for a timed window may grow to
#: serve their steps (``r + s - gcd``: ranges 1 s at steps 1 s and 10 s would need 10 s);
#: past it, the reader whose step widens it gets a window and a shared join of its own
STEP_WIDEN_MAX = 2.0


class TimedWindowOperator(WindowOperator):
    """A time window whose triples carry their element's timestamp as a fourth column.

    Its signature leaves out the range and the step: a shared join's windows may *grow*
    (to cover every subscriber's range) and *refine* their step (to one dividing every
    subscriber's step) as long as they have not started sliding.  A subscriber of range
    ``r`` and step ``s`` reads the instance ``[c_s - r, c_s)`` with ``c_s`` the last
    multiple of ``s`` up to the window's close ``c``; ``c - c_s <= s - step``, so the
    window covers it when ``range >= r + s - step`` (:func:`timed_need`).
    """

    vars = TIMED_VARS
    certain = frozenset(TIMED_VARS)
    event_driven = True
    #: shared-join state serves every query of the join: a query using it is rebuilt, not
    #: migrated (:mod:`linkstream.operators.state`); task checkpoints snapshot it once per
    #: router (:mod:`linkstream.operators.shared_state`)
    migratable = False

    def __init__(self, buffer: WindowBuffer, spec: WindowSpec, default_step: int, key: object) -> None:
        super().__init__(buffer, spec, default_step)
        self.key = key
        #: the widest range a reader asked for (the range may be longer: ``r + s - step``)
        self.widest = spec.range_ms or 0
        #: the last report time this window advanced to (None: never advanced)
        self.now: int | None = None

    def describe(self) -> str:
        return "Timed" + super().describe()

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The report time it advanced to last (its content is in the stream buffer)."""
        return {"now": self.now}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        """Moves to the snapshot's last advance without emitting anything (the readers
        above hold that content already: a router unit is restored as a whole)."""
        r.expect(self, entries, ("now",))
        now = entries["now"]
        self._pending = []
        if now is None:
            return
        self.now = r.value(now, int)
        lo, hi = self.bounds(self.now)
        self.lo, self.hi = max(lo, self.buffer.base), max(hi, self.buffer.base)

    def fits(self, range_ms: int, step: int) -> bool:
        """Whether a subscriber of ``range_ms`` and ``step`` can read this window."""
        r = self.spec.range_ms
        return step % self.step == 0 and r is not None and range_ms + step - self.step <= r

    def grows_well(self, range_ms: int, step: int) -> bool:
        """Whether :meth:`grow` may serve a reader of ``range_ms`` and ``step``: the window
        has not started, and its range stays within :data:`STEP_WIDEN_MAX` times the widest
        range asked for."""
        grown = timed_need((self.spec.range_ms or 0, self.step), (range_ms, step))
        return self.now is None and widens_well(grown[0], max(self.widest, range_ms))

    def grow(self, range_ms: int, step: int | None = None) -> None:
        """Widen the range and refine the step to serve a subscriber of ``range_ms`` and
        ``step`` as well (only before the first advance: nothing has been emitted yet)."""
        assert self.now is None, "a started window cannot grow"
        r, g = timed_need((self.spec.range_ms or 0, self.step), (range_ms, step or self.step))
        self.step = g
        self.spec = WindowSpec("time", r, g)
        self.widest = max(self.widest, range_ms)

    def _rows(self, lo: int, hi: int, sign: int) -> Batch:
        tr, ts = self.buffer.slice_timed(lo, hi)
        cols = np.empty((4, tr.shape[1]), dtype=np.int64)
        cols[:3] = tr
        cols[3] = ts
        return Batch(TIMED_VARS, cols, np.full(tr.shape[1], sign, dtype=np.int64))

    def advance(self, c: int) -> None:
        self.now = c
        lo, hi = self.bounds(c)
        lo, hi = max(lo, self.lo), max(hi, self.hi)
        if hi > self.hi and hi > max(self.hi, lo):
            self._pending.append(self._rows(max(self.hi, lo), hi, 1))
        if lo > self.lo and min(self.hi, lo) > self.lo:
            self._pending.append(self._rows(self.lo, min(self.hi, lo), -1))
        self.lo, self.hi = lo, hi

    def compute(self, epoch: int) -> Batch:
        if not self._pending:
            return Batch.empty(TIMED_VARS)
        out = concat(self._pending, TIMED_VARS)
        self._pending = []
        return out

    def current(self) -> Batch:
        return self._rows(self.lo, self.hi, 1)

    def config_key(self) -> object:
        return (self.buffer.iri, "timed", self.key)


class CountedWindowOperator(TimedWindowOperator):
    """A count window (``[TRIPLES n]``) whose triples carry their absolute position in the
    stream buffer as the fourth column, for a shared join over count windows.

    At report time ``c`` a count window of ``n`` holds the positions ``[hi - n, hi)``
    with ``hi`` the number of triples with time ``< c`` (``buffer.search(c)``; ties by
    input order: SEMANTICS.md §3), so a subscriber of ``n`` reads the rows whose least
    position is ``>= hi - n`` (:class:`~linkstream.operators.router.RouterOperator`).
    The window holds the largest ``n`` asked for; it grows before it starts only, and
    every count window reports at the default step (one step per engine).  Positions are
    the local buffer's: a router unit's snapshot holds them relative to the window's end,
    and the restoring engine rebases them to its own buffer's end at the same report time
    (:mod:`~linkstream.operators.shared_state`; the window's length is shipped to check it).
    """

    def __init__(self, buffer: WindowBuffer, spec: WindowSpec, default_step: int, key: object) -> None:
        super().__init__(buffer, spec, default_step, key)
        self.widest = spec.count or 0

    def describe(self) -> str:
        return "Counted" + WindowOperator.describe(self)

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The report time it advanced to last and how many triples it held then."""
        return {"now": self.now, "span": self.hi - self.lo}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        """As a timed window's (the span was checked before: ``shared_state``)."""
        r.expect(self, entries, ("now", "span"))
        super().restore(r, {"now": entries["now"]})

    def fits(self, range_ms: int, step: int) -> bool:
        """Whether a subscriber of ``range_ms`` triples at ``step`` can read this window."""
        return step == self.step and range_ms <= (self.spec.count or 0)

    def grows_well(self, range_ms: int, step: int) -> bool:
        return self.now is None and step == self.step

    def grow(self, range_ms: int, step: int | None = None) -> None:
        assert self.now is None, "a started window cannot grow"
        n = max(self.spec.count or 0, range_ms)
        self.spec = WindowSpec("count", count=n)
        self.widest = n

    def _rows(self, lo: int, hi: int, sign: int) -> Batch:
        tr = self.buffer.slice(lo, hi)
        cols = np.empty((4, tr.shape[1]), dtype=np.int64)
        cols[:3] = tr
        cols[3] = np.arange(lo, lo + tr.shape[1], dtype=np.int64)
        return Batch(TIMED_VARS, cols, np.full(tr.shape[1], sign, dtype=np.int64))

    def config_key(self) -> object:
        return (self.buffer.iri, "counted", self.step, self.key)


def widens_well(range_ms: int, widest: int) -> bool:
    """Whether a timed window of ``range_ms`` is worth sharing when the widest range its
    readers ask for is ``widest`` (see :data:`STEP_WIDEN_MAX`)."""
    return range_ms <= STEP_WIDEN_MAX * widest


def timed_need(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """The (range, step) of a timed window that serves what ``a`` and ``b`` (each a
    (range, step) a window must serve) do: the steps' greatest common divisor, and the
    range that covers each at that step (see :class:`TimedWindowOperator`)."""
    g = math.gcd(a[1], b[1])
    return max(a[0] + a[1] - g, b[0] + b[1] - g), g


def serves(have: list[tuple[int, int]], asked: list[tuple[int, int]]) -> bool:
    """Whether timed windows of (range, step) ``have`` serve readers of (range, step)
    ``asked`` (one per window) as they are."""
    return all(s % g == 0 and r + s - g <= R for (R, g), (r, s) in zip(have, asked))


def widened(
    have: list[tuple[int, int]], widest: list[int], asked: list[tuple[int, int]]
) -> tuple[list[tuple[int, int]], list[int]] | None:
    """The (range, step) and widest asked range of timed windows ``have`` (whose readers
    asked for ranges up to ``widest``) grown to serve ``asked`` as well, or ``None`` when
    that would widen one of them past :func:`widens_well`."""
    grown = [timed_need(h, a) for h, a in zip(have, asked)]
    wide = [max(w, a[0]) for w, a in zip(widest, asked)]
    return (grown, wide) if all(widens_well(g[0], w) for g, w in zip(grown, wide)) else None
