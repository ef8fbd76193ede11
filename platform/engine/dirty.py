"""Which queries an epoch has to touch: the queries under which something moved.

An epoch (one report time) changes a query's result only if a delta reaches its root.
Every operator of an *event-driven* query (see :func:`quiet_windows`) changes its output
only when an input does, so the query's root delta is empty unless one of its sources
produced rows this epoch.  :class:`Dependencies` indexes the sources of every registered
query so that :meth:`Dependencies.dirty` finds the queries to update from what moved,
without looking at the others:

* a **window** the query reads through anything but a keyed scan: the query is dirty
  whenever the window moved (its bounds passed an element);
* a **keyed scan**: a pattern scan with constants (``<u> ?p ?o``, ``?s :p ?o``) over a
  graph fed by windows.  Its delta is the graph delta's rows that hold its constants, so
  the query is dirty only when such a row arrives or leaves.  The graph's delta is
  computed once per epoch, its distinct constant values found with one set per
  constant-position shape, and each value looked up in a hash map of the queries waiting
  for it -- the alpha network of a Rete (CQELS Cloud's shared matcher): the work per
  epoch grows with the rows that arrived, not with the number of registered queries.

* a **route** of a shared join (:class:`~linkstream.operators.router.RouteOperator`):
  the router re-filters the join's rows by window containment at every epoch, for all of
  its subscriber groups at once; the query is dirty only when its group's result changed
  (the router's ``emitted`` has its key).  The router -- and the aggregates it feeds for
  all groups -- are evaluated at every epoch whether or not a query of theirs is dirty.

Queries with another operator whose output may change without an input are dirty at every
epoch.  A change of the static graphs makes every query dirty once; the engine handles
that.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.graph import GraphOperator
from linkstream.operators.router import RouteOperator, RouterOperator
from linkstream.operators.scan import ScanOperator
from linkstream.operators.timed_window import TimedWindowOperator
from linkstream.operators.window import WindowOperator

if TYPE_CHECKING:
    from linkstream.engine.embedded import RegisteredQuery

#: modules of operators whose output changes only when an input delta does (or at their
#: first epoch, which every query gets); a class may say otherwise with ``event_driven``
_EVENT_DRIVEN_MODULES = frozenset(
    "linkstream.operators." + m
    for m in (
        "base aggregate distinct extend filter graph mjoin negation project recompute scan "
        "static_result values window path"
    ).split()
)


def event_driven(op: Operator) -> bool:
    """Whether ``op``'s output changes only when an input delta does."""
    flag = getattr(type(op), "event_driven", None)
    if flag is None:
        flag = type(op).__module__ in _EVENT_DRIVEN_MODULES
    return bool(flag)


def _routes(rq: RegisteredQuery) -> list[RouteOperator] | None:
    """The routes of ``rq`` when they (with their routers) are its only operators that are
    not event-driven: the query is then dirty exactly when a route emits (see
    :class:`_Routed`); ``None`` otherwise."""
    routes = []
    for op in rq.ops:
        if event_driven(op):
            continue
        if type(op) is RouteOperator:
            routes.append(op)
        elif type(op) is not RouterOperator:
            return None
    return routes or None


class _Routed:
    """The queries reading routes of one router: group key -> names."""

    __slots__ = ("router", "users", "by_key")

    def __init__(self, router: RouterOperator) -> None:
        self.router = router
        self.users: set[str] = set()
        self.by_key: dict[tuple, set[str]] = {}

    def touched(self, epoch: int, out: set[str]) -> None:
        """Evaluates the router (and its shared aggregates) at ``epoch``; adds to ``out``
        the queries whose group's result changed."""
        router = self.router
        router.delta(epoch)
        for shared in list(router.aggregates.values()):
            shared.agg.delta(epoch)  # they read every epoch's change of the groups
        for block in list(router.blocks):
            block.advance(epoch)  # (:mod:`linkstream.engine.routed`: they read it too)
        by_key = self.by_key
        if not by_key:  # (every reader reports through a routed block's members)
            return
        for key in router.emitted:
            names = by_key.get(key)
            if names:
                out |= names


def quiet_windows(rq: RegisteredQuery) -> frozenset[int] | bool:
    """The ids of ``rq``'s windows if it may skip epochs in which none of them moved.

    ``False`` when an operator of the query can change its output without an input delta
    (e.g. a router that re-filters by report time): such a query is updated every epoch.
    """
    for op in rq.ops:
        if not event_driven(op):
            return False
    return frozenset(id(op) for op in rq.ops if isinstance(op, WindowOperator))


#: a keyed graph read by at most this many queries stops looking at the delta's values
#: as soon as all of them are dirty (a subset test per constant shape: cheap for a few)
FEW_USERS = 8


class _KeyedGraph:
    """The keyed scans over one graph: constant positions -> constant values -> queries."""

    __slots__ = ("graph", "windows", "shapes", "users")

    def __init__(self, graph: GraphOperator) -> None:
        self.graph = graph
        #: queries with a keyed scan here (the entry goes with the last of them)
        self.users: set[str] = set()
        self.windows = frozenset(id(w) for w in graph.children)
        #: positions tuple -> key (the value, or a tuple of values) -> names
        self.shapes: dict[tuple[int, ...], dict[object, set[str]]] = {}

    def touched(self, epoch: int, out: set[str]) -> None:
        """Adds to ``out`` the queries whose constants are in this epoch's graph delta."""
        d = self.graph.delta(epoch)
        if not len(d):
            return
        cols = d.cols
        # few users (a query alone, say): none left to find once all are dirty
        few = self.users if len(self.users) <= FEW_USERS else None
        for positions, waiting in self.shapes.items():
            if few is not None and few <= out:
                return
            # a set of the delta's values (np.unique: 6 us on a few rows, numpy 2.4)
            values: set[object]
            if len(positions) == 1:
                values = set(cols[positions[0]].tolist())
            else:
                values = set(zip(*cols[list(positions)].tolist()))
            if len(waiting) < 8:  # few keys: test each against the delta instead
                for key, names in waiting.items():
                    if key in values:
                        out |= names
                continue
            for v in values:
                found = waiting.get(v)
                if found:
                    out |= found


def _keyed_scans(
    w: WindowOperator, parents: dict[int, list[Operator]]
) -> list[tuple[GraphOperator, ScanOperator]] | None:
    """The (graph, scan) pairs through which a query reads ``w``, if every path from the
    query to ``w`` goes window -> graph -> scan with a constant; ``None`` otherwise.

    An :class:`~linkstream.operators.base.AttachOperator` between the graph and a scan (a
    query registered after the graph started) is transparent: its first delta is the
    graph's whole content, which the query gets at its first evaluation anyway (a query
    never evaluated is always looked at), and after that it passes the graph's deltas on.
    """
    pairs: list[tuple[GraphOperator, ScanOperator]] = []
    for g in parents.get(id(w), ()):
        if type(g) is not GraphOperator:
            return None
        readers = parents.get(id(g), ())
        if not readers:
            return None
        for r in readers:
            scans: list[tuple[Operator, Operator]] = [(r, g)]
            if type(r) is AttachOperator:
                above = parents.get(id(r), ())
                if not above:
                    return None
                scans = [(s, r) for s in above]
            for s, below in scans:
                if type(s) is not ScanOperator or not s.consts or s.graph is not below:
                    return None
                pairs.append((g, s))
    return pairs or None


class Dependencies:
    """The sources of every registered query, for :meth:`dirty`."""

    def __init__(self) -> None:
        self.always: set[str] = set()
        self.by_window: dict[int, set[str]] = {}
        self.keyed: dict[int, _KeyedGraph] = {}
        #: routers with the queries reading their routes (see :class:`_Routed`)
        self.routed: dict[int, _Routed] = {}
        #: queries that may never skip a quiet gap (:meth:`Engine.skips_quietly`): the
        #: always-dirty ones and those on routes (a route's result changes as its group's
        #: smaller windows slide, which the shared windows' bounds do not show)
        self.never_quiet: set[str] = set()
        #: name -> the sets it was added to (for :meth:`remove`)
        self._entries: dict[str, list[set[str]]] = {}
        #: name -> the keyed graphs it reads
        self._graphs: dict[str, list[int]] = {}
        #: name -> the routers it reads
        self._routers: dict[str, list[int]] = {}
        #: queries to evaluate at the next epoch whatever moved (:meth:`touch`)
        self._once: set[str] = set()

    def __contains__(self, name: str) -> bool:
        return name in self._entries

    def add(self, rq: RegisteredQuery, routed_member: bool = False) -> None:
        """Indexes ``rq``'s sources (once; a second add replaces the first).

        Args:
            rq: The query.
            routed_member: ``rq`` reports through its routed block's members
                (:mod:`linkstream.engine.routed_members`): its routers are pulled every
                epoch, but a change of its route's group does not make it dirty.
        """
        name = rq.name
        if name in self._entries:
            self.remove(name)
        sets: list[set[str]] = []
        self._entries[name] = sets
        quiet = quiet_windows(rq)
        routes = _routes(rq) if quiet is False else None
        if quiet is False and routes is None:
            self.always.add(name)
            sets.append(self.always)
            self.never_quiet.add(name)
            sets.append(self.never_quiet)
            return
        routed_windows: set[int] = set()
        if routes is not None:
            self.never_quiet.add(name)
            sets.append(self.never_quiet)
            for route in routes:
                router = route.router
                r = self.routed.get(id(router))
                if r is None:
                    r = self.routed[id(router)] = _Routed(router)
                if name not in r.users:
                    r.users.add(name)
                    self._routers.setdefault(name, []).append(id(router))
                if not routed_member:
                    s = r.by_key.setdefault(route.key, set())
                    s.add(name)
                    sets.append(s)
            # the shared joins' windows reach the query through its routes only
            routed_windows = {id(op) for op in rq.ops if isinstance(op, TimedWindowOperator)}
        parents: dict[int, list[Operator]] = {}
        for op in rq.root.walk():
            for c in op.children:
                lst = parents.setdefault(id(c), [])
                if not any(p is op for p in lst):
                    lst.append(op)
        for w in rq.ops:
            if not isinstance(w, WindowOperator) or id(w) in routed_windows:
                continue
            pairs = _keyed_scans(w, parents)
            if pairs is None:
                s = self.by_window.setdefault(id(w), set())
                s.add(name)
                sets.append(s)
                continue
            for g, scan in pairs:
                kg = self.keyed.get(id(g))
                if kg is None:
                    kg = self.keyed[id(g)] = _KeyedGraph(g)
                if name not in kg.users:
                    kg.users.add(name)
                    self._graphs.setdefault(name, []).append(id(g))
                positions = tuple(i for i, _ in scan.consts)
                values = tuple(v for _, v in scan.consts)
                key: object = values[0] if len(values) == 1 else values
                waiting = kg.shapes.setdefault(positions, {})
                s = waiting.setdefault(key, set())
                s.add(name)
                sets.append(s)

    def remove(self, name: str) -> None:
        """Forgets ``name`` (empty entries are dropped lazily: they cost a lookup, no more)."""
        for s in self._entries.pop(name, ()):
            s.discard(name)
        for gid in self._graphs.pop(name, ()):
            kg = self.keyed.get(gid)
            if kg is not None:
                kg.users.discard(name)
                if not kg.users:  # the graph may be freed: never pull it again
                    del self.keyed[gid]
        for rid in self._routers.pop(name, ()):
            r = self.routed.get(rid)
            if r is not None:
                r.users.discard(name)
                if not r.users:  # the router may be freed: never pull it again
                    del self.routed[rid]

    def touch(self, name: str) -> None:
        """Makes ``name`` dirty at the next epoch (its plan changed under its view)."""
        self._once.add(name)

    def dirty(self, epoch: int, moved: set[int]) -> set[str]:
        """The queries whose sources produced rows at ``epoch``, given the ``moved`` windows.

        Computes the delta of every keyed graph over a moved window (once; the scans that
        pull it later read the memo).
        """
        out = set(self.always)
        if self._once:
            out |= self._once & self._entries.keys()
            self._once = set()
        for r in list(self.routed.values()):
            r.touched(epoch, out)
        if not moved:
            return out
        by_window = self.by_window
        for wid in moved:
            names = by_window.get(wid)
            if names:
                out |= names
        for kg in self.keyed.values():
            if not kg.windows.isdisjoint(moved) and kg.shapes:
                kg.touched(epoch, out)
        return out


def first_window_change(windows: Iterable[WindowOperator], c: int, limit: int) -> int:
    """The first time ``h`` in ``(c, limit]`` at which the content of one of ``windows``
    may differ from its content at ``c`` (the last report time), ``limit + 1`` if none can
    (:meth:`Engine.quiet_until <linkstream.engine.embedded.Engine.quiet_until>`).  A
    window's bounds are monotone in the report time, so each window is found by galloping
    from its step and bisecting (``O(log gap)`` buffer searches, pruned by the best time
    so far)."""
    best = limit + 1
    for w in windows:
        cur = (w.lo, w.hi)
        if best - 1 <= c or w.bounds(best - 1) == cur:
            continue  # unchanged up to the best time found so far
        # the first x in (c, best - 1] with bounds(x) != cur: gallop, then bisect
        lo, d = c, max(1, min(w.step, best - 1 - c))
        while True:
            x = min(c + d, best - 1)
            if w.bounds(x) != cur:
                hi = x
                break
            lo = x
            d *= 2
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if w.bounds(mid) != cur:
                hi = mid
            else:
                lo = mid
        best = hi
    return best
