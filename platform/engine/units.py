"""The registered queries by report steps, kept at registration.

A replay of every registered query schedules them in units of equal steps
(:mod:`linkstream.engine.replay`).  With 10,000 queries, finding those units, their names
and, when the replay ends, counting every query's reports cost as much as the replay of a
short stream: each is a pass over 10,000 query objects scattered in memory.  The engine
keeps them here instead, updated by :meth:`Engine.register` / :meth:`Engine.unregister`:
a replay checks that it was given exactly the registered queries (one identity
comparison of two lists) and takes the units as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from linkstream.engine.embedded import RegisteredQuery
    from linkstream.engine.keyed import KeyedGroup


class StepsIndex:
    """Registered queries in registration order, and by their steps."""

    __slots__ = ("_all", "_list", "_by_steps", "_names", "_odd")

    def __init__(self) -> None:
        self._all: dict[str, RegisteredQuery] = {}
        self._list: list[RegisteredQuery] | None = None
        self._by_steps: dict[tuple[int, ...], dict[str, RegisteredQuery]] = {}
        self._names: dict[tuple[int, ...], frozenset[str]] = {}
        #: queries whose type schedules its own reports (no units for them)
        self._odd = 0

    def add(self, rq: RegisteredQuery, plain: bool) -> None:
        """Indexes ``rq`` (``plain``: its type keeps the default report schedule)."""
        self._all[rq.name] = rq
        self._list = None
        self._by_steps.setdefault(rq.steps, {})[rq.name] = rq
        self._names.pop(rq.steps, None)
        self._odd += not plain

    def remove(self, rq: RegisteredQuery, plain: bool) -> None:
        if self._all.get(rq.name) is not rq:
            return
        del self._all[rq.name]
        self._list = None
        same = self._by_steps[rq.steps]
        del same[rq.name]
        if not same:
            del self._by_steps[rq.steps]
        self._names.pop(rq.steps, None)
        self._odd -= not plain

    def units(
        self, queries: Sequence[RegisteredQuery]
    ) -> list[tuple[list[RegisteredQuery], frozenset[str]]] | None:
        """``(queries, names)`` per distinct steps when ``queries`` are exactly the indexed
        ones in registration order and all keep the default schedule; ``None`` otherwise."""
        if self._odd or len(queries) != len(self._all):
            return None
        every = self._list
        if every is None:
            every = self._list = list(self._all.values())
        if (queries if type(queries) is list else list(queries)) != every:  # identity per item
            return None
        out = []
        for steps, same in self._by_steps.items():
            names = self._names.get(steps)
            if names is None:
                names = self._names[steps] = frozenset(same)
            out.append((list(same.values()), names))
        return out

    def count_reports(
        self,
        queries: list[RegisteredQuery],
        names: frozenset[str],
        groups: dict[tuple, KeyedGroup],
        grouped: dict[str, KeyedGroup],
        n: int,
        last: int | None,
    ) -> None:
        """Counts ``n`` reports, the last at ``last``, in every query of a unit from
        :meth:`units` (every registered query with some steps): members of keyed groups
        with those steps count in their group (:attr:`KeyedGroup.nrep`), the others one by
        one."""
        steps = queries[0].steps
        for key, g in groups.items():
            if key[4] == steps:
                g.nrep += n
        every = self._all
        for name in names.difference(grouped):
            every[name].stats.reports += n
        if last is not None:
            for q in queries:
                q.last_report = last
