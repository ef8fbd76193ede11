"""How the live worker hands a report's lines to the result rings and the subscribers
(a mixin of :class:`~linkstream.engine.live.worker.LiveWorker`).

On the embedded engine a report costs one step per cohort of queries due
(:mod:`linkstream.engine.live.cohorts`) and one per query that wrote lines or has
subscribers; a cluster leader's engine answers with a dict of lines per query and counts
its reports itself, so its reports are delivered query by query
(:meth:`LiveDelivery._deliver_each`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Collection, Sequence
from itertools import compress
from typing import Any

import numpy as np

from linkstream.engine.embedded import ReportLines
from linkstream.engine.live.cohorts import Cohort
from linkstream.engine.live.grouprings import GroupLog, MemberRing, RingMap
from linkstream.engine.live.state import _Entry
from linkstream.engine.members import MemberReports
from linkstream.engine.render import BlockLines
from linkstream.metrics import LiveMetrics

_LATENCY_KEEP = 512  # latencies kept per query (the engine appends one per report)
_TRIM_EVERY = 256  # report times between two trims of the kept latencies


class LiveDelivery:
    """Report delivery of the live worker (see the module docstring)."""

    # state set by ``LiveEngine.__init__`` (declared here for the type checker only)
    metrics: LiveMetrics
    _lock: threading.Lock
    _entries: dict[str, _Entry]
    _rings: RingMap
    _glogs: dict[int, GroupLog]
    results_retention_s: float
    _ahead: dict[str, int]
    _delivered_n: int
    _subbed: set[str]
    _fired: int | None
    _frontier: int | None

    def _frontier_now(self) -> int | None:
        raise NotImplementedError

    def _deliver(self, c: int, cohorts: list[Cohort], names: frozenset[str], out: ReportLines) -> None:
        """Hands the lines of report time ``c`` (``cohorts``' reports, ``names`` their
        members) to the rings and subscribers: one step per cohort, then one per query with
        lines or subscribers (the others' reports are empty and read by nobody)."""
        skip = self._begin(c, names)
        for k in cohorts:
            k.reported(c)
            k.emitted = c
        n_lines = 0
        rings = self._rings
        now = time.monotonic()  # (every ring's clock)
        with self._lock:  # before the subscribers are read: see LiveEngine.subscribe
            if skip:  # (after a restart only): query by query
                got = out.with_lines()
            else:
                got = out.plain_lines()
                for g in out.groups or ():
                    n_lines += self._keep_group(g, c, out.t_text, now)
            for name, lines in got:
                if name in skip:
                    continue
                n_lines += len(lines)
                ring = rings.get(name)
                if ring is not None:
                    if isinstance(ring, MemberRing):  # (a member reported outside its group)
                        ring = rings[name] = ring.detach()
                    ring.add(c, lines, now if ring.clock is time.monotonic else None)
            targets = self._subbed & names if self._subbed else ()
        if targets:
            of = dict(got)
            entries = self._entries
            for name in targets:
                if name not in skip:
                    self._offer(entries[name], c, of[name] if name in of else out.kept(name))
        self._delivered_n += 1
        if self._delivered_n % _TRIM_EVERY == 0:
            self._trim_latencies()
            self._drop_group_logs()
        m = self.metrics
        m.reports.inc(len(names) - len(skip))
        if n_lines:
            m.result_lines.inc(n_lines)

    def _begin(self, c: int, names: Collection[str]) -> set[str]:
        """Report time ``c`` is delivered (fired, the frontier moved); returns the queries of
        ``names`` whose report at ``c`` was delivered before a restart (not again)."""
        self._fired = c if self._fired is None else max(self._fired, c)  # (a quiet gap may be ahead)
        with self._lock:
            self._frontier = self._frontier_now()
        skip: set[str] = set()
        if self._ahead:  # restored queries whose report at c was delivered before the restart
            for n, em in list(self._ahead.items()):
                if n in names:
                    if c <= em:
                        skip.add(n)
                    else:
                        del self._ahead[n]
        return skip

    def _keep_group(self, g: MemberReports, c: int, t_text: str, now: float) -> int:
        """Keeps group ``g``'s report at ``c`` once in its log (its members' rings read
        it: :mod:`linkstream.engine.live.grouprings`); returns its lines."""
        log = self._glogs.get(id(g))
        if log is None or log.group is not g:
            log = self._glogs[id(g)] = GroupLog(g, self.results_retention_s)
        log.sync(self._rings)
        cur = g.cur
        mids = np.flatnonzero(cur)
        ns = cur[mids]
        log.add(now, c, t_text, mids, g.blocks[mids], ns)
        if log.unlinked:
            rings = self._rings
            for name, mid in log.unlinked:
                n = int(cur[mid])
                ring = rings.get(name)
                if n and ring is not None:
                    ring.add(c, BlockLines(g.blocks[mid], t_text, n))
        return int(ns.sum())

    def _drop_group_logs(self) -> None:
        """Forgets the logs of groups without members."""
        for k, log in list(self._glogs.items()):
            if not log.group.by_name:
                del self._glogs[k]

    def _offer(self, e: _Entry, c: int, lines: Sequence[str]) -> None:
        m = self.metrics
        for sub in e.subscribers:
            gaps = sub.gaps
            lost = sub.offer(c, lines)
            if lost:
                e.dropped += lost
                m.subscriber_dropped.inc(lost)
                m.subscriber_gaps.inc(sub.gaps - gaps)

    def _trim_latencies(self) -> None:
        """Keeps the latest ``_LATENCY_KEEP`` latencies of every query (the engine appends
        one per evaluated report); every ``_TRIM_EVERY`` report times, not at each."""
        for e in self._entries.values():
            lat = e.rq.stats.latencies
            if len(lat) > 2 * _LATENCY_KEEP:
                del lat[:-_LATENCY_KEEP]

    def _deliver_each(
        self, c: int, stamp: list[tuple[Cohort, frozenset[str]]], names: Collection[str], out: Any
    ) -> None:
        """:meth:`_deliver` for a cluster leader's engine (its lines per query in a dict;
        it counts the reports itself).  ``stamp``: the cohorts of ``names`` with their
        members when the report time was planned.  A cohort whose members did not change
        since is marked delivered at once; a step per query only for those with lines or
        subscribers (and per query after a cohort changed meanwhile)."""
        skip = self._begin(c, names)
        entries = self._entries
        if all(k.frozen() is members for k, members in stamp):
            for k, _ in stamp:
                k.reported(c)
                k.emitted = c
        else:  # (a cohort's members changed since the plan: query by query)
            for name in names:
                e = entries.get(name)
                if e is not None and name not in skip:
                    e.emitted = c
        got = [(n, out[n]) for n in compress(out, out.values())]  # (the reports with lines)
        n_lines = 0
        rings = self._rings
        with self._lock:  # before the subscribers are read: see LiveEngine.subscribe
            for name, lines in got:
                if name in skip:
                    continue
                if type(lines) is list:  # (a JoinedLines is not split: nothing here reads its lines)
                    lines = tuple(lines)
                size = len(lines)
                n_lines += size
                ring = rings.get(name)
                if ring is not None:
                    ring.add(c, lines, None, size)
            targets = self._subbed & set(names) if self._subbed else ()
        for name in targets:
            e = entries.get(name)
            if e is not None and e.subscribers and name not in skip:
                lines = out.get(name, ())
                self._offer(e, c, tuple(lines) if type(lines) is list else lines)
        self._delivered_n += 1
        if self._delivered_n % _TRIM_EVERY == 0:
            self._trim_latencies()
        reports = len(names) - len(skip)
        if reports:  # once per report time: a metric's lock per query costs as much as the rest
            self.metrics.reports.inc(reports)
            self.metrics.result_lines.inc(n_lines)
