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
C-SPARQL's merged default graph, count and NOW windows stay on the exact path.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar, cast

import numpy as np

from linkstream.engine.term_key import decoder, term_key
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
from linkstream.operators.scan import ScanOperator, Slot
from linkstream.operators.static_result import StaticResultOperator, canonical_subjoin
from linkstream.operators.switch import SwitchOperator
from linkstream.operators.timed_window import TimedWindowOperator, serves, widened
from linkstream.operators.window import WindowOperator
from linkstream.query.expressions import Bound, Const, Exists, Expr, Var
from linkstream.query.windows import WindowSpec

if TYPE_CHECKING:
    from linkstream.engine.embedded import Engine
    from linkstream.operators.evaluate import Evaluator

_Op = TypeVar("_Op", bound=Operator)

#: a constant of a static pattern is generalised to a hidden variable (so that queries
#: differing in it share one join) only when the pattern's predicate has at most this
#: many static triples: the shared join holds the whole predicate
STATIC_GENERALISE_MAX = 1 << 20


def rename_expr(e: Expr, m: dict[str, str]) -> Expr | None:
    """``e`` with variables renamed by ``m`` (``None`` when a variable is not in ``m``)."""
    if isinstance(e, Var):
        return Var(m[e.name]) if e.name in m else None
    if isinstance(e, Bound):
        return Bound(m[e.var]) if e.var in m else None
    if isinstance(e, Exists) or not dataclasses.is_dataclass(e):
        return None
    changes: dict[str, object] = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            r = rename_expr(v, m)
            if r is None:
                return None
            changes[f.name] = r
        elif isinstance(v, tuple) and any(isinstance(x, Expr) for x in v):
            items = [rename_expr(x, m) if isinstance(x, Expr) else x for x in v]
            if any(x is None for x in items):
                return None
            changes[f.name] = tuple(items)
    return dataclasses.replace(e, **changes) if changes else e


def _mergeable(g: GraphOperator) -> bool:
    """Whether the shared join + router can read ``g``: one time window, or (a C-SPARQL
    default graph) static triples plus time windows of one range and step over distinct
    streams -- a triple is then in a smaller window's graph exactly when it is static or
    its latest occurrence in any of the windows lies in that window."""
    if not g.children or any(type(w) is not WindowOperator for w in g.children):
        return False
    ws = cast("tuple[WindowOperator, ...]", g.children)  # checked just above
    specs = {(w.spec.kind, w.spec.range_ms, w.step) for w in ws}
    kind, rng, _ = next(iter(specs))
    return (
        len(specs) == 1 and kind == "time" and rng is not None and len({w.buffer.iri for w in ws}) == len(ws)
    )


def _slot_windows(slot: Operator) -> list[WindowOperator]:
    # a routed slot is a time window or a merged graph of time windows (see ``_mergeable``)
    return cast("list[WindowOperator]", list(slot.children if isinstance(slot, GraphOperator) else [slot]))


def _merged_desc(g: GraphOperator) -> tuple:
    ws = cast("tuple[WindowOperator, ...]", g.children)  # a merged graph reads windows (``_mergeable``)
    # (no step: a shared join serves every step its timed windows' step divides)
    return ("m", tuple(w.buffer.iri for w in ws), repr(g.static_key))


def _has_const(e: Expr) -> bool:
    """Whether a constant occurs in ``e``."""
    return isinstance(e, Const) or any(_has_const(c) for c in e.children())


def _canon_pattern(pattern: tuple, names: dict[str, str], fmt: str = "%{}") -> tuple:
    out = []
    for k, v in pattern:
        if k == "var":
            if v not in names:
                names[v] = fmt.format(len(names))
            out.append(("var", names[v]))
        else:
            out.append((k, v))
    return tuple(out)


@dataclass
class _Leaf:
    scan: ScanOperator | None  # a pattern scan ...
    window: WindowOperator | None  # ... over this time window (None: a static graph)
    graph: Operator | None
    static: StaticResultOperator | None = None  # ... or a stored static sub-join (a set)
    gen: tuple[int, ...] = ()  # pattern positions generalised to hidden variables
    #: a static sub-join's generalised positions, per pattern
    sgen: tuple[tuple[int, ...], ...] = ()
    key: str = ""
    #: a C-SPARQL default graph merging static triples and time windows of one range and
    #: step (the leaf's slot is the whole merged graph, ``window`` its first window)
    merged: GraphOperator | None = None

    @property
    def pattern(self) -> tuple[Slot, Slot, Slot]:
        """The scan's pattern (every leaf but a static sub-join has a scan)."""
        assert self.scan is not None
        return self.scan.pattern


@dataclass
class _Instance:
    """The running shared join of one routed signature."""

    no: int
    #: per slot, the (range, step) its timed windows have (:func:`timed_need`) and the
    #: widest range a subscriber asked for
    needs: list[tuple[int, int]]
    widest: list[int]
    #: per slot, its timed windows (one, or every window of a merged C-SPARQL graph)
    windows: list[list[TimedWindowOperator]] = field(default_factory=list)
    router: RouterOperator | None = None

    @property
    def started(self) -> bool:
        return any(w.now is not None for ws in self.windows for w in ws)


@dataclass
class _RoutePlan:
    """What :meth:`Sharing._route_build` needs to put one query's join on a shared join +
    router: its routed signature, window ranges and leaves (analysed once, built when the
    join is routed -- at once, or when a second query with the same signature arrives)."""

    key: tuple
    ranges: list[int]
    #: per slot, the window's step (the routed key leaves it out: one shared join serves
    #: every step its timed windows' step divides)
    steps: list[int]
    slots: list[WindowOperator | GraphOperator]
    leaves: list[_Leaf]
    patterns: list[tuple]
    ts_vars: list[str | None]
    graphs: dict[int, Operator]
    jn: dict[str, str]
    consts: list[tuple[str, int]]
    cfilters: list[Expr]
    after: list[Expr]
    evaluator: Evaluator | None
    vars: tuple[str, ...]


@dataclass
class _Lone:
    """A query's join planned on its own (see :mod:`linkstream.operators.switch`)."""

    switch: SwitchOperator
    plan: _RoutePlan


class Sharing:
    """Hash-conses operator trees of queries into the engine's running operators."""

    def __init__(self, engine: Engine) -> None:
        self.eng = engine
        self._generation = 0
        #: per routed signature, its running shared joins (:meth:`_instance`)
        self._instances: dict[object, list[_Instance]] = {}
        self._next_instance = 0
        self.routing = True  # shared joins + routers (off: per-range joins)
        self.renaming = True  # alpha-renaming of scans and joins
        self._extents: dict[tuple, int] = {}
        #: a join that could be routed is planned on its own while no other query has its
        #: routed signature (off, the default: every such join goes through a router at
        #: once, so a query's plan depends on the query alone; ``Engine(lone_joins=True)``)
        self.lone_direct = False
        self._lone: dict[object, _Lone] = {}
        #: switches pointed at a router since the engine last asked (:meth:`take_switched`)
        self._switched: list[SwitchOperator] = []
        self._direct = 0  # > 0 while a lone join's direct plan is built
        self._decode = (engine.dictionary, decoder(engine.dictionary))

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
            plan = self._route_plan(op, functools.partial(self._canon, memo=memo))
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
        pattern = _canon_pattern(op.pattern, names)
        shared = self._intern(ScanOperator(graph, pattern), [graph])
        return self._rename(shared, {c: q for q, c in names.items()}, op.vars)

    def _renamed_join(self, op: MJoinOperator, kids: list[Operator]) -> Operator | None:
        if not kids or not all(isinstance(k, RenameOperator) for k in kids):
            return None
        renames = cast("list[RenameOperator]", kids)  # checked just above
        inner = [k.child for k in renames]
        inner = [i.shared if isinstance(i, AttachOperator) else i for i in inner]
        # by terms, not ids: the same order in every engine (so task snapshots fit)
        if self._decode[0] is not self.eng.dictionary:
            self._decode = (self.eng.dictionary, decoder(self.eng.dictionary))
        text = self._decode[1]
        order = sorted(range(len(kids)), key=lambda i: term_key(inner[i].sig, text))
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
        after = [f for f in filters if _has_const(f)]
        filters = [f for f in filters if not _has_const(f)]
        join = MJoinOperator(children, filters, op.evaluator)
        shared: Operator = self._intern(join, children)
        if after:
            shared = self._intern(FilterOperator(shared, after, op.evaluator), [shared])  # type: ignore[arg-type]  # filtered joins have one
        return self._rename(shared, {c: q for q, c in jn.items()}, op.vars)

    # ------------------------------------------------------------ shared join + router

    def _leaves(self, op: MJoinOperator, leaves: list[_Leaf], filters: list[Expr]) -> bool:
        filters.extend(f for f, _ in op.filters)
        for c in op.children:
            if type(c) is MJoinOperator:
                if not self._leaves(c, leaves, filters):
                    return False
                continue
            if type(c) is StaticResultOperator:
                leaves.append(_Leaf(None, None, None, c))
                continue
            if type(c) is not ScanOperator or type(c.graph) is not GraphOperator:
                return False
            g = c.graph
            if not g.children:
                leaves.append(_Leaf(c, None, g))
                continue
            w = cast(WindowOperator, g.children[0])  # checked by ``_mergeable``
            single = len(g.children) == 1 and not len(g.static)
            # a merged C-SPARQL graph only when the engine asks for it (``share_merged``):
            # queries on a router are rebuilt rather than migrated when a cluster moves them
            if _mergeable(g) and (single or getattr(self.eng, "share_merged", False)):
                leaves.append(_Leaf(c, w, g, merged=None if single else g))
                continue
            return False
        return True

    def _route_plan(self, op: MJoinOperator, canon: Callable[[Operator], Operator]) -> _RoutePlan | None:
        """What a shared join + router for ``op`` would be (``None``: ``op`` cannot be routed)."""
        leaves: list[_Leaf] = []
        filters: list[Expr] = []
        if not self._leaves(op, leaves, filters) or not any(lf.window for lf in leaves):
            return None
        if any(rename_expr(f, {v: v for v in f.vars()}) is None for f in filters):
            return None
        # subject/object constants partnering a join variable become hidden variables
        occurs: dict[object, int] = {}
        for lf in leaves:
            for v in lf.static.vars if lf.static else {v for k, v in lf.pattern if k == "var"}:
                occurs[v] = occurs.get(v, 0) + 1
        for lf in leaves:
            if lf.static is not None:
                lf.sgen = tuple(self._static_gen(lf.static, p, occurs) for p in lf.static.patterns)
                continue
            # (not over a merged C-SPARQL graph: there a generalised pattern would match the
            # triples of every window, and a join of such patterns multiplies them)
            if lf.scan is None or lf.merged is not None:
                continue
            p = lf.pattern
            if p[1][0] != "const":
                continue
            lf.gen = tuple(
                i for i in (0, 2) if p[i][0] == "const" and p[2 - i][0] == "var" and occurs[p[2 - i][1]] > 1
            )
        graphs: dict[int, Operator] = {}
        # leaves ordered by terms, not ids: the same join in every engine (router units'
        # snapshots fit a new leader's plan, :mod:`linkstream.operators.shared_state`)
        if self._decode[0] is not self.eng.dictionary:
            self._decode = (self.eng.dictionary, decoder(self.eng.dictionary))
        text = self._decode[1]
        for lf in leaves:
            if lf.static is not None:
                marked = [
                    cast(
                        "tuple[Slot, Slot, Slot]",
                        tuple(("const", 0) if i in g else s for i, s in enumerate(p)),
                    )
                    for p, g in zip(lf.static.patterns, lf.sgen)
                ]
                lf.key = term_key(
                    ("r", lf.static.graphs, canonical_subjoin(marked, lf.static.filters)[0]), text
                )
                continue
            if lf.window is None and id(lf.graph) not in graphs:
                assert lf.graph is not None  # a scan's leaf (static sub-joins are done above)
                graphs[id(lf.graph)] = canon(lf.graph)
            local = _canon_pattern(
                tuple(("hid", 0) if i in lf.gen else s for i, s in enumerate(lf.pattern)), {}, "?{}"
            )
            if lf.window is None:
                lf.key = term_key(("s", graphs[id(lf.graph)].sig, local), text)
            elif lf.merged is not None:
                lf.key = term_key(("m", _merged_desc(lf.merged), local), text)
            else:
                lf.key = term_key(("w", lf.window.buffer.iri, local), text)
        leaves.sort(key=lambda lf: lf.key)
        slots: list[WindowOperator | GraphOperator] = []  # a time window, or a merged C-SPARQL graph
        jn: dict[str, str] = {}
        consts: list[tuple[str, int]] = []
        hidden: dict[int, str] = {}

        def hid(value: int) -> str:
            # one hidden variable per constant value: a constant shared by several
            # patterns stays a join between them (rows of one user join that user's rows)
            h = hidden.get(value)
            if h is None:
                h = hidden[value] = f"%h{len(consts)}"
                consts.append((h, value))
            return h

        shape: list[tuple] = []
        patterns: list[tuple] = []
        ts_vars: list[str | None] = []
        for j, lf in enumerate(leaves):
            if lf.static is not None:
                for v in lf.static.canonical_order:
                    jn.setdefault(v, f"%{len(jn)}")
                pats = tuple(
                    tuple(
                        ("var", hid(int(v))) if i in g else ("var", jn[v]) if k == "var" else (k, v)
                        for i, (k, v) in enumerate(p)
                    )
                    for p, g in zip(lf.static.patterns, lf.sgen)
                )
                fs = tuple(rename_expr(f, jn) for f in lf.static.filters)
                if any(f is None for f in fs):
                    return None
                patterns.append((pats, fs))
                ts_vars.append(None)
                shape.append(("r", lf.static.graphs, pats, fs))
                continue
            pat = []
            for i, (k, v) in enumerate(lf.pattern):
                if i in lf.gen:
                    pat.append(("var", hid(int(v))))
                elif k == "var":
                    if v not in jn:
                        jn[v] = f"%{len(jn)}"
                    pat.append(("var", jn[v]))
                else:
                    pat.append((k, v))
            patterns.append(tuple(pat))
            if lf.window is None:
                ts_vars.append(None)
                shape.append(("s", graphs[id(lf.graph)].sig, tuple(pat)))
            else:
                slot = lf.merged or lf.window
                if slot not in slots:
                    slots.append(slot)
                ts_vars.append(f"%t{j}")
                shape.append(("w", slots.index(slot), tuple(pat)))
        crenamed = [rename_expr(f, jn) for f in filters]
        if any(f is None for f in crenamed):
            return None
        cfilters = [f for f in crenamed if f is not None]
        # filters with constants (FILTER(?v > 0.01) in one query, > 0.02 in the next) are
        # applied per subscriber after the router, so those queries share one join
        after = [f for f in cfilters if _has_const(f)]
        cfilters = [f for f in cfilters if not _has_const(f)]
        slot_desc = tuple(_merged_desc(w) if isinstance(w, GraphOperator) else (w.buffer.iri,) for w in slots)
        key = ("routed", slot_desc, tuple(shape), tuple(cfilters))
        ranges = [int(_slot_windows(w)[0].spec.range_ms) for w in slots]  # type: ignore[arg-type]  # time windows have a range
        steps = [_slot_windows(w)[0].step for w in slots]
        return _RoutePlan(
            key,
            ranges,
            steps,
            slots,
            leaves,
            patterns,
            ts_vars,
            graphs,
            jn,
            consts,
            cfilters,
            after,
            op.evaluator,
            op.vars,
        )

    def _route_build(self, plan: _RoutePlan) -> Operator:
        """The shared join + router of ``plan`` (joined, grown or created) and the query's
        route on it, with the query's variable names."""
        key, ranges, slots, leaves = plan.key, plan.ranges, plan.slots, plan.leaves
        patterns, ts_vars, graphs, jn = plan.patterns, plan.ts_vars, plan.graphs, plan.jn
        inst = self._instance(key, list(zip(ranges, plan.steps)))
        # build the shared instance (operators that already run are found by signature)
        windows: list[Operator] = []
        for si, sl in enumerate(slots):
            tws_k = []
            for w in _slot_windows(sl):
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
        out_vars = tuple(jn.values())
        slot_ts = [[tv for lf, tv in zip(leaves, ts_vars) if (lf.merged or lf.window) is w] for w in slots]
        per_slot = [[c.shared if isinstance(c, AttachOperator) else c for c in w.children] for w in windows]
        # every window of a slot has the slot's step and advances at the same report times
        tws = [ws[0] for ws in per_slot]
        # a slot's windows are the timed windows built above; its leaves' time variables are set
        slots_ts = cast("list[tuple[TimedWindowOperator, list[str]]]", list(zip(tws, slot_ts)))
        router = self._intern(RouterOperator(join, slots_ts, out_vars), [join])
        inst.windows = cast("list[list[TimedWindowOperator]]", per_slot)  # the timed windows built above
        inst.router = router
        rkey = (tuple(ranges), tuple(plan.consts), tuple(plan.steps))
        route: Operator = self._intern(RouteOperator(router, rkey, frozenset(out_vars)), [router])
        if plan.after:
            route = self._intern(FilterOperator(route, plan.after, plan.evaluator), [route])  # type: ignore[arg-type]  # filtered joins have one
        return self._rename(route, {c: q for q, c in jn.items()}, plan.vars)

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
            timed = TimedWindowOperator(w.buffer, WindowSpec("time", range_ms, step), step, ("timed", k))
            running = self.eng.operators.get(self._sig(timed, [])) if self.eng.share else None
            if not isinstance(running, TimedWindowOperator) or running.fits(range_ms, step):
                break
            if running.grows_well(range_ms, step):
                running.grow(range_ms, step)
                break
            timed.discard()  # (a window registers with its buffer when made)
            k += 1
        return self._intern(timed, [])

    def _static_gen(self, sr: StaticResultOperator, p: tuple, occurs: dict[object, int]) -> tuple[int, ...]:
        """Positions of static pattern ``p`` whose constant becomes a hidden variable: a
        subject/object constant whose partner variable is joined with another leaf, when
        the pattern's predicate has at most :data:`STATIC_GENERALISE_MAX` static triples
        (the shared join then reads them all, for every subscriber's constant)."""
        if p[1][0] != "const":
            return ()
        gen = tuple(
            i
            for i in (0, 2)
            if p[i][0] == "const" and p[2 - i][0] == "var" and occurs.get(p[2 - i][1], 0) > 1
        )
        if gen and self._extent(sr, int(p[1][1])) > STATIC_GENERALISE_MAX:
            return ()
        return gen

    def _extent(self, sr: StaticResultOperator, pred: int) -> int:
        """How many static triples of ``sr``'s graphs have predicate ``pred``."""
        key = (sr.graphs, pred, sr.ctx.version())
        n = self._extents.get(key)
        if n is None:
            arr = sr.ctx.triples(sr.graphs)
            n = self._extents[key] = int(np.count_nonzero(arr[:, 1] == pred)) if len(arr) else 0
        return n

    def _instance(self, key: object, needs: list[tuple[int, int]]) -> _Instance:
        """The shared-join instance for ``key`` that serves ``needs`` (per slot, a range and
        a step): one that serves them as it is, one grown to (before it started, and only as
        far as :func:`~linkstream.operators.timed_window.widened` allows), or a new one."""
        insts = self._instances.setdefault(key, [])
        for inst in insts:
            if serves(inst.needs, needs):
                return inst
        for inst in insts:
            grown = None if inst.started else widened(inst.needs, inst.widest, needs)
            if grown is not None:
                inst.needs, inst.widest = grown
                for ws, (r, s) in zip(inst.windows, needs):
                    for w in ws:
                        w.grow(r, s)
                return inst
        self._next_instance += 1
        inst = _Instance(self._next_instance, list(needs), [r for r, _s in needs])
        insts.append(inst)
        return inst
