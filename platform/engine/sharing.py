"""Operator sharing between registered queries: hash-consing on canonical signatures.

:class:`Sharing` turns one query's freshly planned operator tree into operators shared
with every other registered query.  Three rewrites, bottom-up:

* **Exact.** An operator whose signature (type, variables, configuration, children's
  signatures) equals a running one's is replaced by the running instance.
* **Alpha-renaming.** Pattern scans and multiway joins are signed with their variables
  renamed canonically (``%0``, ``%1``, ... by first appearance, join inputs in a
  canonical order), so ``?s :p ?o`` and ``?x :p ?y`` share one scan; a
  :class:`~linkstream.operators.router.RenameOperator` relabels the shared instance's
  columns for each query.
* **Shared join + router.**  A multiway join whose inputs are pattern scans over
  time-based windows (one stream window per named graph: CQELS-QL / RSP-QL) and over
  static graphs is signed *without* its window ranges and with subject/object constants
  that partner a join variable generalised to hidden variables.  All queries with that
  signature share one join over timed windows of the largest range; a router splits its
  rows by window containment and constant (see ``operators/router.py``).

Growing: a query whose ranges exceed the shared join's widens it in place while it has
not started sliding; once it has, a new instance with the larger ranges is created and
later queries join that one (the old instance keeps serving its subscribers, exactly).
Count windows (``[TRIPLES n]``) are routed like time windows, by buffer position
(:class:`~linkstream.operators.timed_window.CountedWindowOperator`).  C-SPARQL's merged
default graph (unless ``Engine.share_merged``) and NOW windows stay on the exact path.

So a routed plan depends on the order queries came in: a container that received queries
after its windows started may hold a 3000/2000 window and a second one where a fresh plan of
the same queries grows one 4000/1000 window.  A router unit's snapshot therefore carries its
router's plan (:meth:`Sharing.plans_of`: the routed signature by terms, the instance's
needs, every timed window's range and step), and an engine restoring the unit plans the
unit's queries on it (:meth:`Sharing.seeded`): the same windows, pinned (never grown), so
the snapshot fits whatever order the queries came in here (issue 17).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar, cast

from linkstream.engine.routeplan import (
    Instance,
    RoutePlan,
    RoutePlanner,
    canon_pattern,
    has_const,
    rename_expr,
    slot_windows,
)
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.filter import FilterOperator
from linkstream.operators.graph import GraphOperator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.router import (
    LatestGraphOperator,
    RenameOperator,
    RouteOperator,
    RouterOperator,
    TimedScanOperator,
)
from linkstream.operators.scan import ScanOperator
from linkstream.operators.static_result import StaticResultOperator
from linkstream.operators.switch import SwitchOperator
from linkstream.operators.timed_window import CountedWindowOperator, TimedWindowOperator, serves, widened
from linkstream.operators.window import WindowOperator
from linkstream.query.windows import WindowSpec
from linkstream.rdf.records import record

if TYPE_CHECKING:
    from linkstream.engine.embedded import Engine

_Op = TypeVar("_Op", bound=Operator)


@record(frozen=True)
class PlanSeed:
    """A router's plan in another engine (:meth:`Sharing.plans_of`), to plan a query of its
    routed signature on here (:meth:`Sharing.seeded`).  Wire form: a msgpack-able dict."""

    key: str  #: the routed signature with terms for ids (the same in every engine)
    needs: tuple[tuple[int, int], ...]  #: per slot, the instance's (range or count, step)
    widest: tuple[int, ...]  #: per slot, the widest range a subscriber asked for
    #: per slot, per timed window, its (range or count, step)
    windows: tuple[tuple[tuple[int, int], ...], ...]

    def wire(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "needs": [list(n) for n in self.needs],
            "widest": list(self.widest),
            "windows": [[list(w) for w in ws] for ws in self.windows],
        }

    @staticmethod
    def parse(d: object) -> PlanSeed | None:
        """The seed of wire form ``d`` (``None``: absent or malformed: planned afresh)."""
        if not isinstance(d, dict) or not isinstance(d.get("key"), str):
            return None
        try:
            needs = tuple(_pair(n) for n in d["needs"])
            windows = tuple(tuple(_pair(w) for w in ws) for ws in d["windows"])
            widest = tuple(int(w) for w in d["widest"])
        except (KeyError, TypeError, ValueError):
            return None
        if not len(needs) == len(windows) == len(widest) or not all(windows):
            return None
        return PlanSeed(d["key"], needs, widest, windows)


def _pair(x: Sequence[object]) -> tuple[int, int]:
    """Two ints of wire form ``x`` (raises ``ValueError``)."""
    if len(x) != 2:
        raise ValueError("not a (range, step) pair")
    return int(x[0]), int(x[1])  # type: ignore[call-overload]  # ints on the wire, else ValueError / TypeError


def _spec(w: TimedWindowOperator) -> tuple[int, int]:
    """A timed window's (range or count, step)."""
    n = w.spec.count if isinstance(w, CountedWindowOperator) else w.spec.range_ms
    return int(n or 0), int(w.step)


@record
class _Lone:
    """A query's join planned on its own (see :mod:`linkstream.operators.switch`)."""

    switch: SwitchOperator
    plan: RoutePlan


class Sharing:
    """Hash-conses operator trees of queries into the engine's running operators."""

    def __init__(self, engine: Engine) -> None:
        self.eng = engine
        self._generation = 0
        #: per routed signature, its running shared joins (:meth:`_instance`)
        self._instances: dict[object, list[Instance]] = {}
        self._next_instance = 0
        self.routing = True  # shared joins + routers (off: per-range joins)
        self.renaming = True  # alpha-renaming of scans and joins
        #: a shared join + router found again without building it (off: built and hash-consed
        #: for every query; the same operators either way, see :meth:`_rebuilt`)
        self.memo = True
        self.memo_hits = 0  # routers found again by :meth:`_rebuilt`
        #: a join that could be routed is planned on its own while no other query has its
        #: routed signature (off, the default: every such join goes through a router at
        #: once, so a query's plan depends on the query alone; ``Engine(lone_joins=True)``)
        self.lone_direct = False
        self._lone: dict[object, _Lone] = {}
        #: switches pointed at a router since the engine last asked (:meth:`take_switched`)
        self._switched: list[SwitchOperator] = []
        self._direct = 0  # > 0 while a lone join's direct plan is built
        self._planner = RoutePlanner(engine)  # (routeplan.py: which joins can be routed)
        #: the plans the query being registered had in another engine (:meth:`seeded`)
        self._seeds: list[PlanSeed] = []
        #: signatures of the timed windows planned on seeds: never grown (until :meth:`unpin`)
        self._pinned: set[object] = set()

    # ------------------------------------------------------------ core

    def _sig(self, op: Operator, kids: Sequence[Operator]) -> object:
        sig: object = (type(op).__name__, op.vars, op.config_key(), tuple(k.sig for k in kids))
        if not self.eng.share:
            sig = (sig, id(op))  # every query on its own operators (benchmark baseline)
        return sig

    def _intern(self, op: _Op, kids: Sequence[Operator]) -> _Op:
        """The running instance equal to ``op`` over ``kids``; ``op`` itself if none is."""
        sig = self._sig(op, kids)
        existing = self.eng.operators.get(sig) if self.eng.share else None
        if existing is not None:
            self._fresh.append(op)
            return cast(_Op, existing)  # an equal signature starts with the type's name
        gen = self._generation
        attach = getattr(op, "attach_children", True)
        mapping: dict[int, Operator] = {}
        for old, new in zip(op.children, kids):
            if attach and getattr(new, "generation", gen) < gen:
                new = AttachOperator(new)
            mapping[id(old)] = new
        op.rebind(mapping)
        op.sig = sig
        op.generation = gen
        self.eng.operators[sig] = op
        self._new.append(op)
        return op

    def _rename(self, shared: Operator, mapping: dict[str, str], order: tuple[str, ...]) -> Operator:
        if all(mapping.get(v, v) == v for v in shared.vars) and shared.vars == order:
            return shared
        return self._intern(RenameOperator(shared, mapping, order), [shared])

    def share(self, root: Operator) -> Operator:
        """Replace ``root``'s subplans by running instances; returns the query's root."""
        self._generation += 1
        gen = self._generation
        self._fresh: list[Operator] = []
        self._new: list[Operator] = []
        memo: dict[int, Operator] = {}
        original = root.walk()
        out = self._canon(root, memo)
        if getattr(out, "generation", gen) < gen:
            out = AttachOperator(out)
        # operators interned on the way but not used by the final plan (e.g. the renamed
        # scans a canonical join re-labelled) are dropped again
        used = {id(o) for o in out.walk()}
        for sw in self._switched:  # (another query's route, built by this registration)
            used.update(id(o) for o in sw.walk())
        for o in self._new:
            if id(o) not in used:
                self._fresh.append(self.eng.operators.pop(o.sig))
        self._new = []
        ops = self.eng.operators
        done: set[int] = set()
        for op in [*self._fresh, *original]:
            kept = ops.get(getattr(op, "sig", None)) is op
            if not kept and id(op) not in done:
                done.add(id(op))
                op.discard()
        self._fresh = []
        return out

    def _canon(self, op: Operator, memo: dict[int, Operator]) -> Operator:
        """The running instance of ``op``'s subplan (``memo``: done ones by id, per query).

        A method, not a closure of :meth:`share` that calls itself: such a closure is a
        reference cycle (function -> cell -> function) holding ``memo``, so every operator of
        the query with its state, until the cyclic collector runs.  A replay's ``gc.freeze()``
        at that moment made the cycle, and the operators, outlive their unregistration.
        """
        got = memo.get(id(op))
        if got is not None:
            return got
        out: Operator | None = None
        if self.eng.share and self.routing and not self._direct and type(op) is MJoinOperator:
            plan = self._planner.plan(op, functools.partial(self._canon, memo=memo))
            if plan is not None:
                lone = self._lone.get(plan.key)
                if lone is not None or (self.lone_direct and plan.key not in self._instances):
                    self._direct += 1  # (its nested joins are planned directly with it)
                    try:
                        direct = self._plain(op, memo)
                    finally:
                        self._direct -= 1
                    sw = self._intern(SwitchOperator(direct), [direct])
                    if lone is None:
                        self._lone[plan.key] = _Lone(sw, plan)
                        out = sw
                    elif sw is lone.switch:  # the same join (a copy of the query): shared as it is
                        out = sw
                if out is None:
                    lone = self._lone.pop(plan.key, None)
                    if lone is not None:  # the first query of the signature joins the router first
                        self._switch(lone)
                    out = self._route_build(plan)
        if out is None:
            out = self._plain(op, memo)
        memo[id(op)] = out
        return out

    def _plain(self, op: Operator, memo: dict[int, Operator]) -> Operator:
        """``op``'s subplan shared by exact signature and alpha-renaming only."""
        kids = [self._canon(c, memo) for c in op.children]
        out = None
        if self.eng.share and self.renaming and type(op) is ScanOperator:
            out = self._renamed_scan(op, kids[0])
        elif self.eng.share and self.renaming and type(op) is MJoinOperator:
            out = self._renamed_join(op, kids)
        if out is None:
            out = self._intern(op, kids)
        return out

    def _switch(self, lone: _Lone) -> None:
        """Points a lone query's switch at its route on the shared join of its signature."""
        routed = self._route_build(lone.plan)
        sw = lone.switch
        sw.switch(routed)
        # (no later copy of the query may find the switch by its direct join's signature)
        if self.eng.operators.get(sw.sig) is sw:
            del self.eng.operators[sw.sig]
            sw.sig = ("switched", id(sw))
            self.eng.operators[sw.sig] = sw
        self._switched.append(sw)

    def take_switched(self) -> list[SwitchOperator]:
        """The switches pointed at a router since the last call (their queries' operators
        changed: the engine counts the new ones and releases the replaced ones)."""
        out, self._switched = self._switched, []
        return out

    def forget(self, dead: list[Operator]) -> None:
        """Drop the shared-join instances whose router was freed by an unregistration (and
        the lone joins of unregistered queries)."""
        lone = {id(o) for o in dead if isinstance(o, SwitchOperator)}
        if lone:
            for k in [k for k, v in self._lone.items() if id(v.switch) in lone]:
                del self._lone[k]
        ids = {id(o) for o in dead if isinstance(o, RouterOperator)}
        if ids:
            for k, insts in list(self._instances.items()):
                insts[:] = [inst for inst in insts if id(inst.router) not in ids]
                if not insts:
                    del self._instances[k]

    # ------------------------------------------------------------ alpha-renaming

    def _renamed_scan(self, op: ScanOperator, graph: Operator) -> Operator:
        names: dict[str, str] = {}
        pattern = canon_pattern(op.pattern, names)
        shared = self._intern(ScanOperator(graph, pattern), [graph])
        return self._rename(shared, {c: q for q, c in names.items()}, op.vars)

    def _renamed_join(self, op: MJoinOperator, kids: list[Operator]) -> Operator | None:
        if not kids or not all(isinstance(k, RenameOperator) for k in kids):
            return None
        renames = cast("list[RenameOperator]", kids)  # checked just above
        inner = [k.child for k in renames]
        inner = [i.shared if isinstance(i, AttachOperator) else i for i in inner]
        # by terms, not ids: the same order in every engine (so task snapshots fit)
        keys = self._planner.keys()
        order = sorted(range(len(kids)), key=lambda i: keys.of_op(inner[i]))
        jn: dict[str, str] = {}
        children = []
        for i in order:
            m = renames[i].mapping
            for v in inner[i].vars:
                q = m.get(v, v)
                if q not in jn:
                    jn[q] = f"%{len(jn)}"
            local = {v: jn[m.get(v, v)] for v in inner[i].vars}
            children.append(self._rename(inner[i], local, tuple(local[v] for v in inner[i].vars)))
        renamed = [rename_expr(f, jn) for f, _ in op.filters]
        if any(f is None for f in renamed):
            return None
        filters = [f for f in renamed if f is not None]
        # as for routed joins: queries that differ in a filter constant share the join
        after = [f for f in filters if has_const(f)]
        filters = [f for f in filters if not has_const(f)]
        join = MJoinOperator(children, filters, op.evaluator)
        shared: Operator = self._intern(join, children)
        if after:
            shared = self._intern(FilterOperator(shared, after, op.evaluator), [shared])  # type: ignore[arg-type]  # filtered joins have one
        return self._rename(shared, {c: q for q, c in jn.items()}, op.vars)

    # ------------------------------------------------------------ shared join + router

    def _route_build(self, plan: RoutePlan) -> Operator:
        """The shared join + router of ``plan`` (joined, grown or created) and the query's
        route on it, with the query's variable names."""
        key, ranges, slots, leaves = plan.key, plan.ranges, plan.slots, plan.leaves
        jn = plan.jn
        inst = self._instance(key, list(zip(ranges, plan.steps)))
        out_vars = tuple(jn.values())
        slot_ts = [
            [tv for lf, tv in zip(leaves, plan.ts_vars) if (lf.merged or lf.window) is w] for w in slots
        ]
        built = (key, tuple(inst.needs), out_vars, tuple(map(tuple, slot_ts)))
        router = self._rebuilt(inst, built)
        if router is None:
            router = self._shared_build(plan, inst, out_vars, slot_ts)
            inst.built = (built, [(o.sig, o) for o in router.walk() if not isinstance(o, AttachOperator)])
        rkey = (tuple(ranges), tuple(plan.consts), tuple(plan.steps))
        route: Operator = self._intern(RouteOperator(router, rkey, frozenset(out_vars)), [router])
        if plan.after:
            route = self._intern(FilterOperator(route, plan.after, plan.evaluator), [route])  # type: ignore[arg-type]  # filtered joins have one
        return self._rename(route, {c: q for q, c in jn.items()}, plan.vars)

    def _rebuilt(self, inst: Instance, built: tuple) -> RouterOperator | None:
        """The router :meth:`_shared_build` would find for ``inst`` again: every operator it
        built or found last time for the same routed key, instance needs, output variables and
        time variables is still the running one of its signature (then building the shared
        join again only makes operators that hash-consing finds and drops, ~20% of a
        registration; a window, latest graph or join freed or replaced since: built again)."""
        memo = inst.built
        if not self.memo or memo is None or memo[0] != built or inst.router is None:
            return None
        ops = self.eng.operators
        if not all(ops.get(sig) is op for sig, op in memo[1]):
            return None
        # :meth:`_timed_window` takes the first window of its stream (by key) that fits or
        # grows well: one of a lower key that has grown to fit since would be taken now
        for ws, (r, s) in zip(inst.windows, inst.needs):
            for tw in ws:
                name, vars_, cfg, kids = cast("tuple[str, tuple, tuple, tuple]", tw.sig)
                for j in range(cfg[-1][1]):  # (its configuration ends with its key, ("timed", k))
                    low = ops.get((name, vars_, (*cfg[:-1], ("timed", j)), kids))
                    if not isinstance(low, TimedWindowOperator) or low.fits(r, s) or low.grows_well(r, s):
                        return None
        self.memo_hits += 1
        return inst.router

    def _shared_build(
        self, plan: RoutePlan, inst: Instance, out_vars: tuple[str, ...], slot_ts: list[list[str | None]]
    ) -> RouterOperator:
        """The shared join + router of ``plan`` on instance ``inst`` (operators that already
        run are found by signature)."""
        slots, leaves = plan.slots, plan.leaves
        patterns, ts_vars, graphs = plan.patterns, plan.ts_vars, plan.graphs
        # build the shared instance (operators that already run are found by signature)
        windows: list[Operator] = []
        for si, sl in enumerate(slots):
            tws_k = []
            pin = inst.pinned[si] if inst.pinned is not None else None
            for j, w in enumerate(slot_windows(sl)):
                if pin is not None and len(pin) == len(slot_windows(sl)):
                    tws_k.append(self._pinned_window(w, *pin[j]))
                else:
                    tws_k.append(self._timed_window(w, *inst.needs[si]))
            static = sl.static if isinstance(sl, GraphOperator) else None
            latest = LatestGraphOperator(tws_k, static, getattr(sl, "static_key", None))
            windows.append(self._intern(latest, tws_k))
        children: list[Operator] = []
        for lf, lpat, tv in zip(leaves, patterns, ts_vars):
            if lf.static is not None:
                sr = StaticResultOperator(lf.static.ctx, lf.static.graphs, lpat[0], lpat[1])
                children.append(self._intern(sr, []))
            elif tv is None:
                g = graphs[id(lf.graph)]
                children.append(self._intern(ScanOperator(g, lpat), [g]))
            else:
                tw = windows[slots.index(lf.merged or lf.window)]  # type: ignore[arg-type]  # a window leaf has a slot
                children.append(self._intern(TimedScanOperator(tw, lpat, tv), [tw]))
        join = self._intern(MJoinOperator(children, plan.cfilters, plan.evaluator), children)
        per_slot = [[c.shared if isinstance(c, AttachOperator) else c for c in w.children] for w in windows]
        # every window of a slot has the slot's step and advances at the same report times
        tws = [ws[0] for ws in per_slot]
        # a slot's windows are the timed windows built above; its leaves' time variables are set
        slots_ts = cast("list[tuple[TimedWindowOperator, list[str]]]", list(zip(tws, slot_ts)))
        router = self._intern(RouterOperator(join, slots_ts, out_vars), [join])
        inst.windows = cast("list[list[TimedWindowOperator]]", per_slot)  # the timed windows built above
        inst.router = router
        return router

    def _timed_window(self, w: WindowOperator, range_ms: int, step: int) -> TimedWindowOperator:
        """The timed window of ``w``'s stream that serves ``range_ms`` at ``step``.

        The shared joins of every signature over one stream read one timed window (and
        one latest graph): a wider window, or one of a finer step, only adds rows and
        report times that the routers leave out.  A window that has not started sliding
        grows to serve what is asked (the larger range, the common divisor of the steps)
        unless that makes it much longer than any range asked (:data:`STEP_WIDEN_MAX`);
        what it cannot serve gets a window of its own (the next key).
        """
        k = 0
        while True:
            timed = self._window(w, range_ms, step, k)
            running = self.eng.operators.get(self._sig(timed, [])) if self.eng.share else None
            if not isinstance(running, TimedWindowOperator) or running.fits(range_ms, step):
                break
            if running.grows_well(range_ms, step) and running.sig not in self._pinned:
                running.grow(range_ms, step)
                break
            timed.discard()  # (a window registers with its buffer when made)
            k += 1
        return self._intern(timed, [])

    def _window(self, w: WindowOperator, range_ms: int, step: int, k: int) -> TimedWindowOperator:
        """A new timed window of ``w``'s stream, of key ``k``."""
        if w.spec.kind == "count":  # (``range_ms`` is the count: ``routeplan.slot_need``)
            return CountedWindowOperator(w.buffer, WindowSpec("count", count=range_ms), step, ("timed", k))
        return TimedWindowOperator(w.buffer, WindowSpec("time", range_ms, step), step, ("timed", k))

    def _pinned_window(self, w: WindowOperator, range_ms: int, step: int) -> TimedWindowOperator:
        """The timed window of ``w``'s stream of exactly ``range_ms`` (or count) and ``step``
        (a seed's: :meth:`seeded`), running or new; pinned: never grown."""
        k = 0
        while True:
            timed = self._window(w, range_ms, step, k)
            running = self.eng.operators.get(self._sig(timed, [])) if self.eng.share else None
            if not isinstance(running, TimedWindowOperator) or _spec(running) == (range_ms, step):
                break
            timed.discard()
            k += 1
        got = self._intern(timed, [])
        self._pinned.add(got.sig)
        return got

    def _instance(self, key: object, needs: list[tuple[int, int]]) -> Instance:
        """The shared-join instance for ``key`` that serves ``needs`` (per slot, a range and
        a step): one that serves them as it is, one grown to (before it started, and only as
        far as :func:`~linkstream.operators.timed_window.widened` allows), or a new one."""
        insts = self._instances.setdefault(key, [])
        if self._seeds:
            # a running instance serves a moved query as it is; else the query's plan elsewhere
            for inst in insts:
                if inst.started and serves(inst.needs, needs):
                    return inst
            got = self._seeded(key, insts, needs)
            if got is not None:
                return got
        for inst in insts:
            if serves(inst.needs, needs):
                return inst
        for inst in insts:
            grown = (
                None if inst.started or inst.pinned is not None else widened(inst.needs, inst.widest, needs)
            )
            if grown is not None:
                inst.needs, inst.widest = grown
                for ws, (r, s) in zip(inst.windows, needs):
                    for w in ws:
                        w.grow(r, s)
                return inst
        self._next_instance += 1
        inst = Instance(self._next_instance, list(needs), [r for r, _s in needs])
        insts.append(inst)
        return inst

    def _seeded(self, key: object, insts: list[Instance], needs: list[tuple[int, int]]) -> Instance | None:
        """The instance of ``key`` planned on a seed of the query being registered that
        serves ``needs`` (found, or made: pinned), or ``None``."""
        tk = self._planner.keys().plain(cast(tuple, key))
        for seed in self._seeds:
            if seed.key != tk or len(seed.needs) != len(needs) or not serves(list(seed.needs), needs):
                continue
            pinned = [list(ws) for ws in seed.windows]
            for inst in insts:
                if inst.pinned == pinned and inst.needs == list(seed.needs):
                    return inst
            self._next_instance += 1
            inst = Instance(self._next_instance, list(seed.needs), list(seed.widest), pinned=pinned)
            insts.append(inst)
            return inst
        return None

    # ------------------------------------------------------------ plans of other engines

    def plans_of(self, routers: Sequence[RouterOperator]) -> list[dict[str, Any] | None]:
        """Per router, its plan (:class:`PlanSeed`'s wire form; ``None``: not a router this
        sharing built), for a snapshot of its unit: an engine restoring the unit plans the
        unit's queries on it (:meth:`seeded`)."""
        found = {id(inst.router): (k, inst) for k, insts in self._instances.items() for inst in insts}
        keys = self._planner.keys()
        out: list[dict[str, Any] | None] = []
        for r in routers:
            got = found.get(id(r))
            if got is None or not got[1].windows:
                out.append(None)
                continue
            key, inst = got
            windows = tuple(tuple(_spec(w) for w in ws) for ws in inst.windows)
            seed = PlanSeed(keys.plain(cast(tuple, key)), tuple(inst.needs), tuple(inst.widest), windows)
            out.append(seed.wire())
        return out

    @contextlib.contextmanager
    def seeded(self, plans: Sequence[object]) -> Iterator[None]:
        """Within: a query registered is planned on ``plans`` (wire forms of
        :class:`PlanSeed`, its routers' plans in another engine) where they serve it -- the
        instance and timed windows of each, pinned -- unless a running instance here serves
        it as it is; the other joins are planned as usual."""
        self._seeds = [s for s in map(PlanSeed.parse, plans) if s is not None]
        try:
            yield
        finally:
            self._seeds = []

    def unpin(self) -> None:
        """Lets the windows planned on seeds grow again (once their units were restored:
        a restored window has started, and one that was not may serve others)."""
        self._pinned.clear()

    def planned_on(self, plans: Sequence[object]) -> bool:
        """Whether every plan of ``plans`` (wire forms of :class:`PlanSeed`) is an instance
        here already, with the same timed windows (then its router fits the snapshot's)."""
        keys = self._planner.keys()
        have = {
            (keys.plain(cast(tuple, k)), tuple(tuple(_spec(w) for w in ws) for ws in inst.windows))
            for k, insts in self._instances.items()
            for inst in insts
        }
        return all((s.key, s.windows) in have for s in map(PlanSeed.parse, plans) if s is not None)


def sharing_of(engine: Engine) -> Sharing:
    """The engine's :class:`Sharing` (plans of router units: :meth:`Sharing.plans_of`)."""
    return engine._sharing
