"""Replay of timestamped N-Quads stream files through the embedded engine.

Streams are read lazily and merged by event time; before an element with timestamp ``t``
is ingested, every report time ``c <= t`` is evaluated (a window closing at ``c`` holds
only elements with ``t' < c``).  Report times follow SEMANTICS.md §4: from the first
close strictly after the earliest event of all replayed streams to the first close
strictly after the latest event.

Gaps in event time cost the reports that write something, not the length of the gap:
when the next element is many report times away, :meth:`Engine.quiet_until` finds the
first time a window's content can change, and every query whose reports until then
write nothing (:meth:`Engine.skips_quietly`) jumps to its first report time from there;
the skipped reports still count (``stats.reports``, ``max_reports``).  Queries that
write a line at every report (ASK, ``COUNT`` = 0 over empty windows, a non-empty
result) are evaluated at each of their report times, as the semantics require.
"""

from __future__ import annotations

import functools
import gc
import heapq
import time
from collections.abc import Callable, Iterator, Sequence
from operator import attrgetter
from typing import ParamSpec, TextIO, TypeVar

import numpy as np

from linkstream.engine.embedded import Engine, RegisteredQuery, ReportSchedule
from linkstream.rdf.eventtime import DEFAULT_MAX_TIME_JUMP_MS
from linkstream.rdf.streams import ElementBatch, StreamReader, StreamStats, in_time_order

_P = ParamSpec("_P")
_R = TypeVar("_R")

_NAME = attrgetter("name")
_STEPS = attrgetter("steps")
_HEAD = attrgetter("head")

#: look for a quiet gap only when at least this many smallest steps separate the last
#: report time from the next element
_SKIP_SPAN = 16
#: report times evaluated after a look that skipped nothing before the next look
_SKIP_BACKOFF = 8
#: young-generation threshold of the cyclic collector during a replay
REPLAY_GC_YOUNG = 50_000


class ReplayResult:
    """What a replay did: per-stream and per-query counts and timings."""

    def __init__(
        self,
        streams: dict[str, StreamStats] | None = None,
        queries: dict[str, RegisteredQuery] | Sequence[RegisteredQuery] | None = None,
        triples: int = 0,
        elements: int = 0,
        seconds: float = 0.0,
        rows: int = 0,
    ) -> None:
        self.streams = {} if streams is None else streams
        self._queries = queries
        self.triples = triples
        self.elements = elements
        self.seconds = seconds
        self.rows = rows

    @property
    def queries(self) -> dict[str, RegisteredQuery]:
        """The replayed queries by name (a sequence given is made a dict when first asked)."""
        got = self._queries
        if not isinstance(got, dict):
            qs = got or ()
            got = self._queries = dict(zip(map(_NAME, qs), qs))
        return got

    @property
    def rejected(self) -> int:
        return sum(s.rejected for s in self.streams.values())

    @property
    def rejected_elements(self) -> int:
        return sum(s.rejected_elements for s in self.streams.values())


class _Unit:
    """Queries scheduled together: one query, or (on the embedded engine) every query with
    the same steps, which report at the same times (a group costs one heap entry and one
    count per report time, whatever its size)."""

    __slots__ = ("names", "queries", "count", "last_c", "_order")

    def __init__(self, queries: list[RegisteredQuery], names: frozenset[str] | None = None) -> None:
        self.queries = queries
        self.names = frozenset(map(_NAME, queries)) if names is None else names
        self.count = 0  # reports so far (evaluated or skipped)
        self.last_c: int | None = None
        self._order: tuple[str, ...] | None = None

    def order(self) -> tuple[str, ...]:
        """The names, sorted (the order of a report's lines)."""
        if self._order is None:
            self._order = tuple(sorted(self.names))
        return self._order

    @property
    def first(self) -> RegisteredQuery:
        return self.queries[0]


def _units(engine: object, queries: Sequence[RegisteredQuery], per_query: bool) -> tuple[list[_Unit], bool]:
    """Group ``queries`` by their steps, unless ``per_query`` (each its own unit); ``True``
    with them when they are every query registered on the embedded engine (units as the
    engine keeps them, :mod:`linkstream.engine.units`)."""
    if not per_query and isinstance(engine, Engine):
        got = engine.steps_index.units(queries)
        if got is not None:
            return [_Unit(qs, names) for qs, names in got], True
    return _units_of(engine, queries, per_query), False


def _units_of(engine: object, queries: Sequence[RegisteredQuery], per_query: bool) -> list[_Unit]:
    types: set[type[RegisteredQuery]] = set(map(type, queries))
    plain = all(t.next_report is ReportSchedule.next_report for t in types)
    if per_query or not plain or not isinstance(engine, Engine):
        return [_Unit([q]) for q in queries]
    steps = list(map(_STEPS, queries))
    if len(set(steps)) == 1:  # the common case: one unit, without a loop over the queries
        return [_Unit(list(queries))]
    by_steps: dict[tuple[int, ...], list[RegisteredQuery]] = {}
    for q, st in zip(queries, steps):
        by_steps.setdefault(st, []).append(q)
    return [_Unit(qs) for qs in by_steps.values()]


class _Cursor:
    """The elements of one stream not yet ingested: its batches, read one at a time."""

    __slots__ = ("batches", "t", "ids", "ends", "i", "in_order", "head")

    def __init__(self, batches: Iterator[ElementBatch]) -> None:
        self.batches = batches
        self.t = self.ids = self.ends = np.empty(0, dtype=np.int64)
        self.i = 0
        self.in_order = True
        self.head: int | None = None  # the time of the next element, None at the end
        self._load()

    def _load(self) -> None:
        for b in self.batches:
            if len(b.t):
                self.t, self.ids, self.i = b.t, b.ids, 0
                self.ends = np.zeros(len(b.t) + 1, dtype=np.int64)
                np.cumsum(b.counts, out=self.ends[1:])
                self.in_order = len(b.t) < 2 or bool((b.t[1:] >= b.t[:-1]).all())
                self.head = int(b.t[0])
                return
        self.head = None

    def take(self, upto: int | None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """The elements before the first one at or after ``upto`` (``None``: all of them), as
        (times, triples, triple counts) runs."""
        while self.head is not None and (upto is None or self.head < upto):
            t, i = self.t, self.i
            if upto is None:
                j = len(t)
            elif self.in_order:
                j = i + int(np.searchsorted(t[i:], upto, "left"))
            else:
                at = np.flatnonzero(t[i:] >= upto)
                j = i + int(at[0]) if len(at) else len(t)
            ends = self.ends
            yield t[i:j], self.ids[ends[i] : ends[j]], np.diff(ends[i : j + 1])
            if j < len(t):
                self.i, self.head = j, int(t[j])
            else:
                self._load()


def _replay_collector(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn`` run with the cyclic collector set up for a replay (restored afterwards)."""

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        # thousands of registered queries are hundreds of thousands of long-lived objects: the
        # cyclic collector would rescan them all over and over while the replay allocates its
        # small batches (a third of the CPU time with 10,000 queries).  They live as long as the
        # engine; freezing them keeps them out of every later collection.  (Garbage not yet
        # collected is frozen too and never freed: registering must leave no reference cycles,
        # see tests/engine/test_unregister_memory.py.)
        gc.freeze()
        # the young generation is collected every REPLAY_GC_YOUNG (not 700) allocations: an
        # epoch keeps large short-lived containers alive (dirty sets, report dicts, rendered
        # rows), and every young collection walked them all again (10k mixed LSBench queries:
        # 229 young collections, 0.6 s of 5 s of CPU; with this, one)
        before = gc.get_threshold()
        gc.set_threshold(max(before[0], REPLAY_GC_YOUNG), *before[1:])
        try:
            return fn(*args, **kwargs)
        finally:
            gc.set_threshold(*before)

    return run


@_replay_collector
def replay(
    engine: Engine,
    queries: Sequence[RegisteredQuery],
    streams: Sequence[tuple[str, str]],
    out: TextIO | None,
    *,
    lateness_ms: int = 0,
    max_reports: int | None = None,
    log: Callable[[str], None] | None = None,
    progress: Callable[[int, int], None] | None = None,
    sink: Callable[[RegisteredQuery, int, list[str]], None] | None = None,
    max_time_jump_ms: int | None = DEFAULT_MAX_TIME_JUMP_MS,
) -> ReplayResult:
    """Replay ``streams`` ((iri, path) pairs) and write every query's result lines to ``out``.

    ``max_time_jump_ms``: an element more than this ahead of its stream's time is
    rejected (``None`` / 0: no limit; see :class:`StreamReader`).  ``sink`` is called
    for every evaluated report (not for the skipped empty ones of a quiet gap); with a
    sink every query is scheduled on its own, and its ``stats.reports`` is current when
    the sink sees it.  Without one, the queries of the embedded engine that share their
    steps are scheduled as one group: a report time costs work in the queries the engine
    evaluates (:meth:`Engine.tick`), not in every registered one, and ``stats.reports``
    is brought up to date when the replay ends.
    """
    res = ReplayResult(queries=tuple(queries))
    t0 = time.perf_counter()
    readers: list[tuple[str, StreamReader]] = []
    cursors: list[_Cursor] = []
    seen = set()
    for k, (iri, path) in enumerate(streams):
        if iri in seen:
            raise ValueError(f"stream <{iri}> given twice")
        seen.add(iri)
        engine.buffer(iri)
        r = StreamReader(
            path,
            engine.dictionary,
            bnode_prefix=f"st{k}_",
            lateness_ms=lateness_ms,
            log=log,
            max_time_jump_ms=max_time_jump_ms,
        )
        readers.append((iri, r))
        # (with lateness, elements are held until nothing earlier can come: time order)
        cursors.append(_Cursor(in_time_order(r.batches(), lateness_ms)))
    t_min = min((c.head for c in cursors if c.head is not None), default=None)

    units, units_whole = _units(engine, queries, per_query=sink is not None)
    grouped = isinstance(engine, Engine) and sink is None  # units counted here, not by the engine
    # report times -> units due then; a heap of the distinct times (thousands of queries
    # share a handful of report times: one heap entry per time, not per query)
    due_at: dict[int, list[_Unit]] = {}
    times: list[int] = []

    def schedule(c: int, unit: _Unit) -> None:
        due = due_at.get(c)
        if due is None:
            due_at[c] = [unit]
            heapq.heappush(times, c)
        else:
            due.append(unit)

    # quiet gaps (see the module docstring): only on the embedded engine, and only when
    # each stream's elements come in time order (window bounds are then monotone)
    can_skip = isinstance(engine, Engine) and lateness_ms <= 0
    min_step = min((min(u.first.steps) for u in units if u.first.steps), default=1)
    backoff = 0

    def skip_quiet(limit: int, last: dict[int, int] | None) -> bool | None:
        """Jump the units that would write nothing over the quiet gap before ``limit``.

        Returns ``True`` if some unit jumped, ``None`` if a window changes before the next
        report time (nothing to skip), ``False`` if no unit due in the gap may skip it.
        """
        assert isinstance(engine, Engine)
        h = engine.quiet_until(limit)
        if h is None or not times or h <= times[0]:
            return None
        skipped = False
        keep: list[tuple[int, _Unit]] = []
        while times and times[0] < h and times[0] <= limit:
            c = heapq.heappop(times)
            for unit in due_at.pop(c):
                if not engine.all_skip_quietly(unit.names):
                    keep.append((c, unit))
                    continue
                q = unit.first
                nxt = q.first_report_after(h - 1 if h <= limit else limit)
                end = nxt - 1 if last is None else min(nxt - 1, last[id(unit)])
                n = q.reports_between(c - 1, end)
                if max_reports is not None:
                    n = min(n, max_reports - unit.count)
                unit.count += n
                if n:
                    unit.last_c = q.last_report_before(end + 1)
                if not grouped:
                    q.stats.reports += n
                skipped = True
                if max_reports is None or unit.count < max_reports:
                    schedule(nxt, unit)
        for c, unit in keep:
            schedule(c, unit)
        return skipped

    def fire(limit: int, last: dict[int, int] | None = None) -> None:
        nonlocal backoff
        while times and times[0] <= limit:
            if can_skip and engine.last_tick is not None and limit - times[0] >= _SKIP_SPAN * min_step:
                if backoff > 0:
                    backoff -= 1
                else:
                    done = skip_quiet(limit, last)
                    if done:
                        continue
                    if done is False:
                        backoff = _SKIP_BACKOFF
            if not times or times[0] > limit:
                break
            c = heapq.heappop(times)
            due = due_at.pop(c)
            if last is not None:
                due = [u for u in due if c <= last[id(u)]]
            if not due:
                continue
            reporting = due[0].names if len(due) == 1 else frozenset().union(*(u.names for u in due))
            if grouped:
                results = engine.tick(c, reporting, count_reports=False, blocks=True)
                n_lines, text = results.text(due[0].order if len(due) == 1 else None)
                if n_lines:
                    res.rows += n_lines
                    if out is not None:
                        out.write(text)
            else:
                results = engine.tick(c, reporting)
                for name in sorted(reporting):
                    lines = results[name]
                    res.rows += len(lines)
                    if out is not None and lines:
                        out.write("\n".join(lines))
                        out.write("\n")
                    if sink is not None:
                        sink(res.queries[name], c, lines)
            nexts: dict[tuple[int, ...], int] = {}  # units with the same steps report next together
            for unit in due:
                unit.count += 1
                unit.last_c = c
                if max_reports is None or unit.count < max_reports:
                    q = unit.first
                    nxt = nexts.get(q.steps)
                    if nxt is None:
                        nxt = nexts[q.steps] = q.next_report(c)
                    schedule(nxt, unit)

    if t_min is not None:
        for unit in units:
            schedule(unit.first.first_report_after(t_min), unit)
    t_max = t_min
    n_el = gc_at = 0
    # the elements of each stream that arrive before the next report time go into its
    # buffer together (one copy, no object per element), also when the streams' elements
    # interleave: nothing reads the buffers until a report time is evaluated or the buffers
    # are collected, and each stream has its own buffer.  Merged by event time, the elements
    # of every stream with a time before the next report time come before the first element
    # at or after it (whatever the order within a stream), so each stream's run up to there
    # is ingested whole; then the report times up to the earliest next element are evaluated.
    batch = type(engine).ingest is Engine.ingest
    while True:
        live = [h for h in map(_HEAD, cursors) if h is not None]
        if not live:
            break
        t = min(live)
        if times and times[0] <= t:
            fire(t)
        upto = times[0] if times else None
        for (iri, _), cur in zip(readers, cursors, strict=True):
            h = cur.head
            if h is None or (upto is not None and h >= upto):
                continue
            for ts, ids, counts in cur.take(upto):
                if batch:
                    assert isinstance(engine, Engine)
                    engine.ingest_many(iri, ts, ids, counts)
                else:
                    ends = np.cumsum(counts).tolist()
                    for el_t, a, b in zip(ts.tolist(), [0, *ends[:-1]], ends, strict=True):
                        engine.ingest(iri, el_t, ids[a:b])
                res.triples += len(ids)
                n_el += len(ts)
                top = int(ts.max())
                t_max = top if t_max is None or top > t_max else t_max
        if n_el // 256 > gc_at:  # (the buffers' garbage: as often as with one element at a time)
            gc_at = n_el // 256
            engine.gc()
            if progress is not None:
                progress(n_el, res.triples)
    if t_max is not None:
        last = {id(u): u.first.first_report_after(t_max) for u in units}
        fire(max(last.values(), default=0), last)
    if grouped:  # the engine counted nothing: every query of a unit reported unit.count times
        for unit in units:
            if units_whole:
                assert isinstance(engine, Engine)
                engine.steps_index.count_reports(
                    unit.queries, unit.names, engine._groups, engine._grouped, unit.count, unit.last_c
                )
                continue
            for q in unit.queries:
                q.stats.reports += unit.count
                if unit.last_c is not None:
                    q.last_report = unit.last_c
    res.elements = n_el
    for iri, r in readers:
        res.streams[iri] = r.stats
    res.seconds = time.perf_counter() - t0
    return res
