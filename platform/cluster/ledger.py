"""The driver's per-query report figures, computed when read: :class:`ReportLedger`.

At every tick the driver hands out one report of each due query.  Counting it query by
query -- reports, rows, evaluation time, latency, last report, the last report time
written (the result edge's duplicate guard) -- cost a Python step per due query and
report time on a cluster leader, most of them for reports without lines.  The ledger
records each tick once instead (its due list, report time and duration, and the line
counts of the queries that wrote lines) and folds the records into the queries'
figures when they are read (:attr:`RemoteQuery.stats`, :attr:`RemoteQuery.last_report`,
:meth:`written_at`), or every :data:`FOLD_EVERY` ticks to bound its memory.  A fold
groups the ticks by due list -- thousands of queries share a handful of report
schedules -- so it costs a step per query and distinct due list, not per report.

The figures equal the ones counted query by query (a test compares both), except that
a query's evaluation seconds are summed per fold before they are added (float rounding).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from itertools import chain

from linkstream.engine.embedded import QueryStats, ReportSchedule
from linkstream.query.continuous import ContinuousQuery

#: ticks recorded before they are folded (bounds the records' memory)
FOLD_EVERY = 256


class RemoteQuery(ReportSchedule):
    """What :func:`~linkstream.engine.replay.replay` needs of a query evaluated elsewhere.

    While it is in a run, its figures (``stats``, ``last_report``) are the run's
    :class:`ReportLedger`'s: settled when read."""

    __slots__ = ("cq", "steps", "ledger", "_stats", "_last")

    def __init__(
        self,
        cq: ContinuousQuery,
        steps: tuple[int, ...],
        stats: QueryStats | None = None,
        last_report: int | None = None,
    ) -> None:
        self.cq = cq
        self.steps = steps
        #: the ledger of the run the query is in (``None``: in none)
        self.ledger: ReportLedger | None = None
        self._stats = stats if stats is not None else QueryStats()
        self._last = last_report

    @property
    def name(self) -> str:
        return self.cq.name

    @property
    def stats(self) -> QueryStats:
        if self.ledger is not None:
            self.ledger.settle()
        return self._stats

    @stats.setter
    def stats(self, value: QueryStats) -> None:
        if self.ledger is not None:
            self.ledger.settle()
        self._stats = value

    @property
    def last_report(self) -> int | None:
        if self.ledger is not None:
            self.ledger.settle()
        return self._last

    @last_report.setter
    def last_report(self, value: int | None) -> None:
        if self.ledger is not None:
            self.ledger.settle()
        self._last = value

    def __repr__(self) -> str:
        return f"RemoteQuery({self.cq.name!r}, steps={self.steps})"


class ReportLedger:
    """Per-tick records of the reports a driver handed out (see the module docstring).

    Args:
        queries: The run's queries by name (the driver's dict: the ledger reads it as it
            changes; the driver settles before a query comes or goes).
    """

    def __init__(self, queries: dict[str, RemoteQuery]) -> None:
        self.queries = queries
        #: per query, the last report time written (settled part; :meth:`written_at`)
        self.written: dict[str, int] = {}
        #: the latest report time recorded or written: every query's is at or before it
        self.high: int | None = None
        self._ticks: list[tuple[Sequence[str], int, float, list[tuple[str, int]]]] = []
        self._lock = threading.Lock()

    def fresh(self, c: int) -> bool:
        """Whether report time ``c`` is after every report written (no query's can be a
        duplicate, and :meth:`record` may take it)."""
        return self.high is None or c > self.high

    def record(self, c: int, due: Sequence[str], rows: list[tuple[str, int]], dt: float) -> None:
        """One report of each of ``due`` at ``c`` (:meth:`fresh`), ``dt`` seconds after the
        tick went out; ``rows``: the line counts of those that wrote lines."""
        with self._lock:
            self._ticks.append((due, c, dt, rows))
            self.high = c
            if len(self._ticks) >= FOLD_EVERY:
                self._fold()

    def wrote(self, name: str, c: int) -> None:
        """Report ``c`` of ``name`` written outside :meth:`record` (settled first)."""
        self.written[name] = c
        if self.high is None or c > self.high:
            self.high = c

    def written_at(self, name: str) -> int | None:
        """The last report time of ``name`` written (the result edge)."""
        self.settle()
        return self.written.get(name)

    def settle(self) -> None:
        """Folds the records into the queries' figures (before they are read)."""
        if self._ticks:
            with self._lock:
                self._fold()

    def _fold(self) -> None:
        ticks, self._ticks = self._ticks, []
        if not ticks:
            return
        # the ticks by due list: (reports, seconds, last time, [(tick, dt)])
        groups: dict[tuple[str, ...], tuple[list[int], list[float], list[int], list[tuple[int, float]]]] = {}
        for i, (due, c, dt, _) in enumerate(ticks):
            key = tuple(due)
            g = groups.get(key)
            if g is None:
                g = groups[key] = ([0], [0.0], [c], [])
            g[0][0] += 1
            g[1][0] += dt
            g[2][0] = c
            g[3].append((i, dt))
        # per query, the groups it is in; queries in the same groups share their figures
        member: dict[str, list[int]] = {}
        glist = list(groups.values())
        for gi, key in enumerate(groups):
            for name in key:
                got = member.get(name)
                if got is None:
                    member[name] = [gi]
                else:
                    got.append(gi)
        shared: dict[tuple[int, ...], tuple[int, float, int, list[float]]] = {}
        queries, written = self.queries, self.written
        for name, gids in member.items():
            sig = tuple(gids)
            fig = shared.get(sig)
            if fig is None:
                gs = [glist[k] for k in sig]
                if len(gs) == 1:
                    lat = [dt for _, dt in gs[0][3]]
                else:  # (in several due lists: its ticks in order)
                    lat = [dt for _, dt in sorted(chain.from_iterable(g[3] for g in gs))]
                fig = shared[sig] = (
                    sum(g[0][0] for g in gs),
                    sum(g[1][0] for g in gs),
                    max(g[2][0] for g in gs),
                    lat,
                )
            written[name] = fig[2]
            q = queries.get(name)
            if q is None:
                continue
            st = q._stats
            st.reports += fig[0]
            st.eval_seconds += fig[1]
            st.latencies.extend(fig[3])
            q._last = fig[2]
        for _, _, _, rows in ticks:
            for name, n in rows:
                q = queries.get(name)
                if q is not None:
                    q._stats.rows += n


__all__ = ["FOLD_EVERY", "RemoteQuery", "ReportLedger"]
