"""The timed window a shared join reads (:mod:`linkstream.operators.router`): a time
window whose triples carry their element's timestamp, sized and stepped to serve every
subscriber of the routers above it."""

from __future__ import annotations

import math

import numpy as np

from linkstream.operators.batch import Batch, concat
from linkstream.operators.window import WindowBuffer, WindowOperator
from linkstream.query.windows import WindowSpec

TIMED_VARS = ("_s", "_p", "_o", "_t")


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
    #: shared-join state numbers subscriber groups per engine and mixes timestamps into
    #: rows: a query using it is rebuilt, not migrated (:mod:`linkstream.operators.state`)
    migratable = False

    def __init__(self, buffer: WindowBuffer, spec: WindowSpec, default_step: int, key: object) -> None:
        super().__init__(buffer, spec, default_step)
        self.key = key
        #: the last report time this window advanced to (None: never advanced)
        self.now: int | None = None

    def describe(self) -> str:
        return "Timed" + super().describe()

    def fits(self, range_ms: int, step: int) -> bool:
        """Whether a subscriber of ``range_ms`` and ``step`` can read this window."""
        r = self.spec.range_ms
        return step % self.step == 0 and r is not None and range_ms + step - self.step <= r

    def grow(self, range_ms: int, step: int | None = None) -> None:
        """Widen the range and refine the step to serve a subscriber of ``range_ms`` and
        ``step`` as well (only before the first advance: nothing has been emitted yet)."""
        assert self.now is None, "a started window cannot grow"
        r, g = timed_need((self.spec.range_ms or 0, self.step), (range_ms, step or self.step))
        self.step = g
        self.spec = WindowSpec("time", r, g)

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


def timed_need(a: tuple[int, int], b: tuple[int, int]) -> tuple[int, int]:
    """The (range, step) of a timed window that serves what ``a`` and ``b`` (each a
    (range, step) a window must serve) do: the steps' greatest common divisor, and the
    range that covers each at that step (see :class:`TimedWindowOperator`)."""
    g = math.gcd(a[1], b[1])
    return max(a[0] + a[1] - g, b[0] + b[1] - g), g
