"""Route planning for shared joins: which multiway joins a shared join + router can serve.

:class:`RoutePlanner` analyses one query's multiway join (:meth:`RoutePlanner.plan`): its
leaves (pattern scans over time windows, over static graphs, stored static sub-joins), the
subject/object constants that partner a join variable (generalised to hidden variables so
that queries differing in them share one join), and the routed signature -- the join's
shape without its window ranges and steps.  :class:`~linkstream.engine.sharing.Sharing`
builds the shared join + router from the :class:`RoutePlan` (``Sharing._route_build``) and
keeps the running :class:`Instance` of each signature.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING, cast

import numpy as np

from linkstream.engine.term_key import TermKeys, decoder, term_key
from linkstream.operators.graph import GraphOperator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.router import RouterOperator
from linkstream.operators.scan import ScanOperator, Slot
from linkstream.operators.static_result import StaticResultOperator, canonical_subjoin
from linkstream.operators.timed_window import TimedWindowOperator
from linkstream.operators.window import WindowOperator
from linkstream.query.expressions import Bound, Const, Exists, Expr, Var
from linkstream.rdf.records import record

if TYPE_CHECKING:
    from linkstream.engine.embedded import Engine
    from linkstream.operators.base import Operator
    from linkstream.operators.evaluate import Evaluator

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


def mergeable(g: GraphOperator) -> bool:
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


def counted(g: GraphOperator) -> bool:
    """Whether ``g`` is one count window (``[TRIPLES n]``) alone: a shared join reads it
    through a :class:`~linkstream.operators.timed_window.CountedWindowOperator` (a triple is
    in a window of ``n`` exactly when its latest position is among the last ``n``)."""
    w = g.children[0] if len(g.children) == 1 and not len(g.static) else None
    if type(w) is not WindowOperator:
        return False
    return w.spec.kind == "count" and w.spec.count is not None


def slot_need(w: WindowOperator) -> int:
    """A routed slot's window "range": the range (ms) of a time window, the count of a
    count window."""
    return int(w.spec.count if w.spec.kind == "count" else w.spec.range_ms)  # type: ignore[arg-type]  # routed windows have one


def slot_windows(slot: Operator) -> list[WindowOperator]:
    # a routed slot is a time window or a merged graph of time windows (see ``mergeable``)
    return cast("list[WindowOperator]", list(slot.children if isinstance(slot, GraphOperator) else [slot]))


def merged_desc(g: GraphOperator) -> tuple:
    ws = cast("tuple[WindowOperator, ...]", g.children)  # a merged graph reads windows (``mergeable``)
    # (no step: a shared join serves every step its timed windows' step divides)
    return ("m", tuple(w.buffer.iri for w in ws), repr(g.static_key))


def has_const(e: Expr) -> bool:
    """Whether a constant occurs in ``e``."""
    return isinstance(e, Const) or any(has_const(c) for c in e.children())


def canon_pattern(pattern: tuple, names: dict[str, str], fmt: str = "%{}") -> tuple:
    out = []
    for k, v in pattern:
        if k == "var":
            if v not in names:
                names[v] = fmt.format(len(names))
            out.append(("var", names[v]))
        else:
            out.append((k, v))
    return tuple(out)


@record
class Leaf:
    """One input of a routed signature's shared join: a pattern scan, a static graph or a stored static sub-join."""

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


@record
class Instance:
    """The running shared join of one routed signature."""

    no: int
    #: per slot, the (range, step) its timed windows have (:func:`timed_need`) and the
    #: widest range a subscriber asked for
    needs: list[tuple[int, int]]
    widest: list[int]
    #: per slot, its timed windows (one, or every window of a merged C-SPARQL graph)
    windows: list[list[TimedWindowOperator]] = field(default_factory=list)
    router: RouterOperator | None = None
    #: what the router was last built from, and every operator below it with its signature
    #: (:meth:`~linkstream.engine.sharing.Sharing._rebuilt`)
    built: tuple[tuple, list[tuple[object, Operator]]] | None = None
    #: per slot, per timed window, the (range or count, step) it must have: an instance
    #: planned on a snapshot's plan (``Sharing.seeded``), which never grows
    pinned: list[list[tuple[int, int]]] | None = None

    @property
    def started(self) -> bool:
        return any(w.now is not None for ws in self.windows for w in ws)


@record
class RoutePlan:
    """What :meth:`~linkstream.engine.sharing.Sharing._route_build` needs to put one query's join on a shared join +
    router: its routed signature, window ranges and leaves (analysed once, built when the
    join is routed -- at once, or when a second query with the same signature arrives)."""

    key: tuple
    ranges: list[int]
    #: per slot, the window's step (the routed key leaves it out: one shared join serves
    #: every step its timed windows' step divides)
    steps: list[int]
    slots: list[WindowOperator | GraphOperator]
    leaves: list[Leaf]
    patterns: list[tuple]
    ts_vars: list[str | None]
    graphs: dict[int, Operator]
    jn: dict[str, str]
    consts: list[tuple[str, int]]
    cfilters: list[Expr]
    after: list[Expr]
    evaluator: Evaluator | None
    vars: tuple[str, ...]


class RoutePlanner:
    """Plans routed joins for one engine (the term decoder and static extents are cached)."""

    def __init__(self, engine: Engine) -> None:
        self.eng = engine
        self._extents: dict[tuple, int] = {}
        self._decode = (engine.dictionary, decoder(engine.dictionary))
        self._keys = TermKeys(self._decode[1])
        #: joins over count windows are routed too (off: they are planned per query)
        self.counts = True

    def text(self) -> Callable[[int], str]:
        """The engine dictionary's decoder (joins and leaves are ordered by terms, not ids:
        the same order in every engine, so task snapshots fit)."""
        return self.keys().text

    def keys(self) -> TermKeys:
        """:func:`term_key` over :meth:`text`, remembered (:class:`TermKeys`)."""
        if self._decode[0] is not self.eng.dictionary:
            self._decode = (self.eng.dictionary, decoder(self.eng.dictionary))
            self._keys = TermKeys(self._decode[1])
        return self._keys

    def leaves(self, op: MJoinOperator, leaves: list[Leaf], filters: list[Expr]) -> bool:
        filters.extend(f for f, _ in op.filters)
        for c in op.children:
            if type(c) is MJoinOperator:
                if not self.leaves(c, leaves, filters):
                    return False
                continue
            if type(c) is StaticResultOperator:
                leaves.append(Leaf(None, None, None, c))
                continue
            if type(c) is not ScanOperator or type(c.graph) is not GraphOperator:
                return False
            g = c.graph
            if not g.children:
                leaves.append(Leaf(c, None, g))
                continue
            w = cast(WindowOperator, g.children[0])  # checked by ``mergeable``
            single = len(g.children) == 1 and not len(g.static)
            # a merged C-SPARQL graph only when the engine asks for it (``share_merged``):
            # queries on a router are rebuilt rather than migrated when a cluster moves them
            if mergeable(g) and (single or getattr(self.eng, "share_merged", False)):
                leaves.append(Leaf(c, w, g, merged=None if single else g))
                continue
            if self.counts and counted(g):
                leaves.append(Leaf(c, w, g))
                continue
            return False
        return True

    def plan(self, op: MJoinOperator, canon: Callable[[Operator], Operator]) -> RoutePlan | None:
        """What a shared join + router for ``op`` would be (``None``: ``op`` cannot be routed)."""
        leaves: list[Leaf] = []
        filters: list[Expr] = []
        if not self.leaves(op, leaves, filters) or not any(lf.window for lf in leaves):
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
                lf.sgen = tuple(self.static_gen(lf.static, p, occurs) for p in lf.static.patterns)
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
        keys = self.keys()
        text = keys.text
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
            local = canon_pattern(
                tuple(("hid", 0) if i in lf.gen else s for i, s in enumerate(lf.pattern)), {}, "?{}"
            )
            if lf.window is None:
                lf.key = term_key(("s", graphs[id(lf.graph)].sig, local), text)
            elif lf.merged is not None:
                lf.key = term_key(("m", merged_desc(lf.merged), local), text)
            else:
                w = lf.window  # (a time and a count window on one stream differ)
                tag = ("c", w.buffer.iri, w.step) if w.spec.kind == "count" else ("w", w.buffer.iri)
                lf.key = keys.plain((*tag, local))
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
        after = [f for f in cfilters if has_const(f)]
        cfilters = [f for f in cfilters if not has_const(f)]
        # (a count slot names its step: every count window reports at the default step)
        slot_desc = tuple(
            merged_desc(w)
            if isinstance(w, GraphOperator)
            else (w.buffer.iri, "count", w.step)
            if w.spec.kind == "count"
            else (w.buffer.iri,)
            for w in slots
        )
        key = ("routed", slot_desc, tuple(shape), tuple(cfilters))
        ranges = [slot_need(slot_windows(w)[0]) for w in slots]
        steps = [slot_windows(w)[0].step for w in slots]
        return RoutePlan(
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

    def static_gen(self, sr: StaticResultOperator, p: tuple, occurs: dict[object, int]) -> tuple[int, ...]:
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
        if gen and self.extent(sr, int(p[1][1])) > STATIC_GENERALISE_MAX:
            return ()
        return gen

    def extent(self, sr: StaticResultOperator, pred: int) -> int:
        """How many static triples of ``sr``'s graphs have predicate ``pred``."""
        key = (sr.graphs, pred, sr.ctx.version())
        n = self._extents.get(key)
        if n is None:
            arr = sr.ctx.triples(sr.graphs)
            n = self._extents[key] = int(np.count_nonzero(arr[:, 1] == pred)) if len(arr) else 0
        return n
