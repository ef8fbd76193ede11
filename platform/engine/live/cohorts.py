"""The live worker's report schedule in *cohorts*: queries with the same steps that are due
at the same report time, scheduled, counted and marked delivered as one object.

Thousands of registered queries share a handful of report schedules (a query's report
times follow from its steps alone), so once two queries with equal steps are due at the
same time they stay together: one :class:`Cohort` holds them, the schedule keeps per
report time one cohort per steps, and a report costs one step per cohort, not per query
(10,000 LSBench pattern queries in the live engine: ~90% of the worker's time was Python
per due query and report before).  A cohort counts its reports (``count``) and remembers
the last one (``last``) and the last one delivered (``emitted``); each member's own
figures are brought up to date (*settled*) only when it leaves the cohort, or when a
reader asks (:meth:`Cohort.reports_of`, :meth:`Cohort.settle_all`).

A query leaves its cohort when it is unregistered, when a quiet gap moves part of the
cohort (:meth:`CohortSchedule.split`) and when two cohorts meet at one report time (the
smaller joins the larger: :meth:`CohortSchedule.move`).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from linkstream.engine.live.state import _Entry


class Cohort:
    """Queries with equal ``steps`` due at ``due`` (see the module docstring).

    ``base[name]`` is ``count`` when ``name`` joined: its reports while a member are
    ``count - base[name]``.  ``counting``: those reports go into the members' statistics
    and ``last`` into their last report (the embedded engine, which is told not to count);
    a cluster leader's engine counts them itself, and its cohorts count only to know
    which members ``emitted`` applies to (the last report delivered).
    """

    __slots__ = ("steps", "due", "names", "base", "count", "last", "emitted", "counting", "_frozen")

    def __init__(self, steps: tuple[int, ...], due: int, counting: bool) -> None:
        self.steps = steps
        self.due = due
        self.names: set[str] = set()
        self.base: dict[str, int] = {}
        self.count = 0
        self.last: int | None = None
        self.emitted: int | None = None
        self.counting = counting
        self._frozen: frozenset[str] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def frozen(self) -> frozenset[str]:
        """The members (cached until one comes or goes)."""
        f = self._frozen
        if f is None:
            f = self._frozen = frozenset(self.names)
        return f

    def add(self, name: str, e: _Entry) -> None:
        self.names.add(name)
        self.base[name] = self.count
        self._frozen = None
        e.cohort = self

    def reported(self, c: int, n: int = 1) -> None:
        """``n`` reports of every member, the last at ``c``."""
        self.count += n
        self.last = c

    def reports_of(self, name: str) -> int:
        """Reports of ``name`` counted here and not yet in its stats."""
        return self.count - self.base.get(name, self.count)

    def _settle(self, name: str, e: _Entry) -> None:
        n = self.count - self.base[name]
        if not n:  # (``last`` and ``emitted`` may be reports from before it joined)
            return
        self.base[name] = self.count
        if self.counting:
            e.rq.stats.reports += n
            if self.last is not None and (e.rq.last_report is None or e.rq.last_report < self.last):
                e.rq.last_report = self.last
        if self.emitted is not None and (e.emitted is None or e.emitted < self.emitted):
            e.emitted = self.emitted

    def remove(self, name: str, e: _Entry) -> None:
        """``name`` leaves: its figures settled, its entry's ``due`` set to the cohort's."""
        if name not in self.base:
            return
        self._settle(name, e)
        del self.base[name]
        self.names.discard(name)
        self._frozen = None
        e.cohort = None
        e.due = self.due

    def settle_all(self, entries: dict[str, _Entry]) -> None:
        """Every member's figures brought up to date (a checkpoint is about to read them)."""
        for name in self.names:
            self._settle(name, entries[name])


class CohortSchedule:
    """Report time -> the cohorts due then, one per steps; a heap of the distinct times."""

    __slots__ = ("_at", "_times", "counting")

    def __init__(self, counting: bool = True) -> None:
        self._at: dict[int, dict[tuple[int, ...], Cohort]] = {}
        self._times: list[int] = []
        self.counting = counting

    def _slot(self, c: int) -> dict[tuple[int, ...], Cohort]:
        slot = self._at.get(c)
        if slot is None:
            slot = self._at[c] = {}
            heapq.heappush(self._times, c)
        return slot

    def place(self, name: str, e: _Entry, c: int) -> Cohort:
        """Schedules ``name`` (not in a cohort) at ``c``, with the queries of its steps due then."""
        steps = e.rq.steps
        slot = self._slot(c)
        k = slot.get(steps)
        if k is None:
            k = slot[steps] = Cohort(steps, c, self.counting)
        k.add(name, e)
        e.due = c
        return k

    def move(self, k: Cohort, c: int, entries: dict[str, _Entry]) -> Cohort:
        """Schedules cohort ``k`` (taken) at ``c``; if a cohort of its steps is due then
        already, the smaller of the two joins the larger, which is returned."""
        slot = self._slot(c)
        other = slot.get(k.steps)
        k.due = c
        if other is None or other is k:
            slot[k.steps] = k
            return k
        big, small = (other, k) if len(other) >= len(k) else (k, other)
        for name in list(small.names):
            e = entries[name]
            small.remove(name, e)
            big.add(name, e)
        big.due = c
        slot[k.steps] = big
        return big

    def first(self) -> int | None:
        """The earliest report time with a cohort (``None``: none)."""
        times, at = self._times, self._at
        while times and not any(at[times[0]].values()):  # (only emptied cohorts left)
            del at[heapq.heappop(times)]
        return times[0] if times else None

    def take(self, c: int) -> list[Cohort]:
        """Removes and returns the non-empty cohorts due at ``c`` (the earliest time)."""
        times = self._times
        if not times or times[0] != c:
            return []
        heapq.heappop(times)
        return [k for k in self._at.pop(c).values() if k.names]

    def cohorts(self) -> Iterable[Cohort]:
        for slot in self._at.values():
            yield from slot.values()

    def __bool__(self) -> bool:
        return self.first() is not None

    def __len__(self) -> int:
        """Queries scheduled."""
        return sum(len(k) for k in self.cohorts())


def reporting_of(cohorts: list[Cohort]) -> frozenset[str]:
    """The names of ``cohorts`` (one frozenset: the engine's ``reporting``)."""
    if len(cohorts) == 1:
        return cohorts[0].frozen()
    return frozenset().union(*(k.names for k in cohorts))
