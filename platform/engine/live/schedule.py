"""The live worker's report schedule: which queries are due at which report time.

Thousands of registered queries share a handful of report times (their steps divide
each other), so the schedule keeps one *bucket* (a list of query names) per report time
and a heap of the distinct times.  Scheduling a query is a dict lookup and a list
append; taking a report time's queries is one ``pop`` of its bucket.  A heap of
``(time, name)`` pairs did the same in ``O(log n)`` tuple comparisons per query, which
fall through to string comparisons when thousands of entries share a time (10,000
LSBench queries in the live engine: 8% of the worker's time in popping alone).

Entries are never removed in place: a query moved to another time, or unregistered,
leaves a stale entry that the caller filters out against its own ``due`` (as with the
heap before).  A bucket gives its names sorted, each once, as the heap did.
"""

from __future__ import annotations

import heapq


class DueSchedule:
    """Report time -> query names due then (see the module docstring)."""

    __slots__ = ("_buckets", "_times")

    def __init__(self) -> None:
        self._buckets: dict[int, list[str]] = {}
        self._times: list[int] = []  # heap of the buckets' times

    def push(self, c: int, name: str) -> None:
        """Schedules ``name`` at report time ``c``."""
        bucket = self._buckets.get(c)
        if bucket is None:
            self._buckets[c] = [name]
            heapq.heappush(self._times, c)
        else:
            bucket.append(name)

    def push_many(self, c: int, names: list[str]) -> None:
        """Schedules every one of ``names`` at report time ``c``."""
        if not names:
            return
        bucket = self._buckets.get(c)
        if bucket is None:
            self._buckets[c] = list(names)
            heapq.heappush(self._times, c)
        else:
            bucket.extend(names)

    def first(self) -> int | None:
        """The earliest report time with an entry (``None``: none)."""
        return self._times[0] if self._times else None

    def take(self, c: int) -> list[str]:
        """Removes and returns the names scheduled at ``c`` (the earliest time), sorted,
        each once; stale entries included (the caller checks its ``due``)."""
        times = self._times
        if not times or times[0] != c:
            return []
        heapq.heappop(times)
        names = self._buckets.pop(c)
        return sorted(set(names)) if len(names) > 1 else names

    def __bool__(self) -> bool:
        return bool(self._times)

    def __len__(self) -> int:
        """Entries held (stale ones included)."""
        return sum(len(b) for b in self._buckets.values())
