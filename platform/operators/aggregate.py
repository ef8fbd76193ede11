"""GROUP BY + aggregates, maintained per group.

The operator keeps its input multiset (only the group and argument columns).  A delta
marks the groups it touches as dirty; for those groups alone it retracts the previous
aggregate row and emits the new one, computed with numpy group reductions (COUNT, SUM,
AVG, MIN, MAX over numerics) or, for the rest (GROUP_CONCAT, MIN/MAX over non-numeric
terms), with the scalar library once per group.  A group-less aggregate always has its
one row (COUNT = 0 over an empty window, SEMANTICS.md §5).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import (
    Batch,
    SortedIndex,
    concat,
    consolidate,
    group_starts,
    merge_sorted,
    row_keys,
    rows_of_keys,
)
from linkstream.operators.evaluate import Evaluator, Num
from linkstream.operators.order import packed_keys, sort_order
from linkstream.operators.relation import Relation
from linkstream.operators.router import RenameOperator, RouteOperator, TaggedDeltaOperator
from linkstream.query.functions import scalar as F
from linkstream.rdf.records import record
from linkstream.rdf.terminfo import NUM_DECIMAL, NUM_INTEGER
from linkstream.rdf.terms import XSD_INTEGER, XSD_STRING, Literal

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter


@record(frozen=True)
class AggSpec:
    """One aggregate of a group: ``kind(DISTINCT? arg) AS res``."""

    kind: str  # COUNT SUM AVG MIN MAX SAMPLE GROUP_CONCAT
    arg: str | None  # input variable (None: COUNT(*))
    distinct: bool
    res: str
    separator: str = " "


class AggregateOperator(Operator):
    """Groups the child's rows by ``group_vars`` and computes ``aggs`` per group."""

    def __init__(
        self, child: Operator, group_vars: Sequence[str], aggs: Sequence[AggSpec], evaluator: Evaluator
    ) -> None:
        super().__init__()
        self.child = child
        self.children = (child,)
        self.group_vars = tuple(group_vars)
        self.aggs = tuple(aggs)
        self.evaluator = evaluator
        need = list(self.group_vars)
        star_distinct = any(a.arg is None and a.distinct for a in self.aggs)
        for a in self.aggs:
            if a.arg is not None and a.arg not in need:
                need.append(a.arg)
        if star_distinct:
            need += [v for v in child.vars if v not in need]
        self.input_vars = tuple(need)
        self.state = Relation(self.input_vars)
        self.vars = self.group_vars + tuple(a.res for a in self.aggs)
        self.certain = frozenset(v for v in self.group_vars if v in child.certain)
        self.results = Relation(self.vars)
        self._first = True
        #: over a shared join's route: (the aggregate of all the router's groups, the
        #: route); False when the child is anything else (see :meth:`_routed`)
        self.routed_via: tuple[_Shared, RouteOperator] | bool | None = None
        self.shared_key: object = None

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """Input rows, the groups' result rows and the first-epoch flag."""
        return {"state": w.relation(self.state), "results": w.relation(self.results), "_first": self._first}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("state", "results", "_first"))
        self.state = r.relation(entries["state"], self.state)
        self.results = r.relation(entries["results"], self.results)
        self._first = r.value(entries["_first"], bool)

    def describe(self) -> str:
        aggs = ", ".join(f"{a.kind}({'DISTINCT ' if a.distinct else ''}{a.arg or '*'})" for a in self.aggs)
        return f"Aggregate by {','.join(self.group_vars) or '()'}: {aggs}"

    def config_key(self) -> object:
        return (self.group_vars, self.aggs)

    def current(self) -> Batch:
        r = self._routed()
        if isinstance(r, tuple):
            shared, route = r
            return self._own(_group_rows(shared, route))
        return self.results.rows

    def _routed(self) -> tuple[_Shared, RouteOperator] | bool:
        """The aggregate of all groups of the router this one reads a route of (when the
        query's aggregate only differs from the others' in its group's window ranges and
        constants): computed once per epoch for every group, each query takes its group's
        rows.  ``False`` unless the child is a shared join's route (renamed)."""
        r = self.routed_via
        if r is None:
            r = self.routed_via = self._find_route()
        return r

    def _below(self) -> tuple[Operator, dict[str, str]]:
        """The operator under the child (attachments and one renaming passed), and that
        renaming's mapping."""
        c = self.child
        while isinstance(c, AttachOperator):
            c = c.shared
        mapping: dict[str, str] = {}
        if type(c) is RenameOperator:
            mapping = c.mapping
            c = c.child
            while isinstance(c, AttachOperator):
                c = c.shared
        return c, mapping

    def _find_route(self) -> tuple[_Shared, RouteOperator] | bool:
        c, mapping = self._below()
        if type(c) is not RouteOperator or not self.group_vars:
            return False
        inv = {q: k for k, q in mapping.items()}
        canon = {v: inv.get(v, v) for v in self.child.vars}
        if any(canon[v] not in c.vars for v in self.child.vars):
            return False
        if any(v not in canon for v in self.group_vars) or any(
            a.arg is not None and a.arg not in canon for a in self.aggs
        ):  # a group key or an argument the pattern never binds (always unbound): not shared
            return False
        gv = tuple(canon[v] for v in self.group_vars)
        aggs = tuple(
            AggSpec(a.kind, None if a.arg is None else canon[a.arg], a.distinct, f"%r{i}", a.separator)
            for i, a in enumerate(self.aggs)
        )
        router = c.router
        key = (gv, aggs)
        shared = router.aggregates.get(key)
        if shared is None:
            tagged = TaggedDeltaOperator(router)
            agg = AggregateOperator(tagged, ("%group", *gv), aggs, self.evaluator)
            shared = router.aggregates[key] = _Shared(agg)
        assert isinstance(shared, _Shared)
        shared.users += 1
        self.shared_key = key
        self._first = True
        return shared, c

    def reroute(self) -> None:
        """Lets go of the route found over the current children: it is looked for anew at the
        next evaluation (a container replaced the input below a cut by a remote one, and the
        old route, released, may have left its router)."""
        r = self.routed_via
        if isinstance(r, tuple) and self._below()[0] is r[1]:
            return  # the same route: its shared aggregate and this one's first report stand
        if r is not None:
            self.discard()
            self.routed_via = None

    def discard(self) -> None:
        r = self.routed_via
        if isinstance(r, tuple):
            shared, route = r
            shared.users -= 1
            if shared.users <= 0:  # unused: it would miss the router's changes from now on
                route.router.aggregates.pop(self.shared_key, None)
            self.routed_via = False

    def _own(self, rows: Batch) -> Batch:
        """``rows`` of the shared aggregate (one group's) as this operator's mappings."""
        return Batch(self.vars, rows.cols[1:], rows.counts)

    def compute(self, epoch: int) -> Batch:
        r = self._routed()
        if isinstance(r, tuple):
            shared, route = r
            self.child.delta(epoch)  # (the route: the router evaluates this epoch)
            shared.agg.delta(epoch)
            if self._first:  # the group's whole result (a query attached late included)
                self._first = False
                return self._own(_group_rows(shared, route))
            part = shared.split(epoch).get(route.router.groups[route.key].gid)
            return Batch.empty(self.vars) if part is None else self._own(part)
        d = self.child.delta(epoch).project(self.input_vars)
        first, self._first = self._first, False
        if not len(d) and not (first and not self.group_vars):
            return Batch.empty(self.vars)
        self.state.apply(d)
        g = len(self.group_vars)
        if g:
            dirty = consolidate(Batch(self.group_vars, d.cols[:g], np.ones(len(d), dtype=np.int64)))
            dirty_keys = dirty.cols
        else:
            dirty_keys = np.empty((0, 1), dtype=np.int64)
        # retract old rows of dirty groups
        # (the state's and the results' rows are consolidated, so sorted with the group
        # columns first: a dirty group's rows are one run in each, cut out by key)
        old = self.results.rows
        if g and len(old):
            old = old.take(_rows_of_keys(old.cols[:g], dirty_keys))
        # rows of dirty groups
        rows = self.state.rows
        if g and len(rows):
            rows = rows.take(_rows_of_keys(rows.cols[:g], dirty_keys))
        new = self._aggregate(rows, grouped=True)
        delta = _merged_delta(new, old.negate(), self.vars)
        self.results.apply(delta)
        return delta

    def _aggregate(self, rows: Batch, grouped: bool = False) -> Batch:
        """The aggregate row of each group of ``rows`` (``grouped``: the rows are sorted
        by the group columns already, e.g. a consolidated relation's rows)."""
        g = len(self.group_vars)
        rows = rows.mask(rows.counts > 0)
        if g:
            if not len(rows):
                return Batch.empty(self.vars)
            if not grouped:
                rows = rows.take(sort_order(rows.cols[:g]))
            starts = group_starts(rows.cols[:g])
            gid = np.cumsum(starts) - 1
            ngroups = int(gid[-1]) + 1
            keys = rows.cols[:g, starts]
        else:
            gid = np.zeros(len(rows), dtype=np.int64)
            ngroups = 1
            keys = np.empty((0, 1), dtype=np.int64)
        cols = [keys]
        for a in self.aggs:
            cols.append(self._one(a, rows, gid, ngroups)[None, :])
        return Batch(self.vars, np.vstack(cols), np.ones(ngroups, dtype=np.int64))

    def _one(self, a: AggSpec, rows: Batch, gid: np.ndarray, ng: int) -> np.ndarray:
        ev = self.evaluator
        terms = ev.terms
        counts = rows.counts
        x = rows.col(a.arg) if a.arg is not None else None
        if a.kind == "COUNT":
            if x is None:
                if a.distinct:
                    c = np.bincount(gid, minlength=ng)
                else:
                    c = np.bincount(gid, weights=counts, minlength=ng)
            else:
                bound = x != 0
                if a.distinct:
                    gg, _ = _distinct_pairs(gid[bound], x[bound])
                    c = np.bincount(gg, minlength=ng)
                else:
                    c = np.bincount(gid[bound], weights=counts[bound], minlength=ng)
            return ev.as_ids(
                Num(c.astype(np.float64), np.full(ng, NUM_INTEGER, np.int8), np.ones(ng, bool)), ng
            )
        assert x is not None
        w = counts
        gx, xx = gid, x
        if a.distinct:
            gx, xx = _distinct_pairs(gid, x)
            w = np.ones(len(xx), dtype=np.int64)
        if a.kind == "SAMPLE":
            out = np.zeros(ng, dtype=np.int64)
            nz = xx != 0
            out[gx[nz][::-1]] = xx[nz][::-1]
            return out
        terms.ensure(xx)
        typ = terms.num_type[xx]
        val = terms.num_val[xx]
        bad = np.bincount(gx, weights=(typ == 0).astype(np.float64), minlength=ng) > 0
        n_in = np.bincount(gx, weights=w, minlength=ng)
        if a.kind in ("SUM", "AVG"):
            s = np.bincount(gx, weights=val * w, minlength=ng)
            t = np.zeros(ng, dtype=np.int8)
            if len(gx):
                np.maximum.at(t, gx, typ)
            t = np.where(n_in == 0, NUM_INTEGER, t).astype(np.int8)
            if a.kind == "AVG":
                with np.errstate(all="ignore"):
                    s = np.where(n_in > 0, s / np.where(n_in > 0, n_in, 1), 0.0)
                t = np.where((t == NUM_INTEGER) & (n_in > 0), NUM_DECIMAL, t).astype(np.int8)
            return ev.as_ids(Num(s, t, ~bad), ng)
        if a.kind in ("MIN", "MAX"):
            return self._minmax(a.kind, gx, xx, ng, bad, n_in)
        if a.kind == "GROUP_CONCAT":
            out = np.zeros(ng, dtype=np.int64)
            parts: list[list[str]] = [[] for _ in range(ng)]
            ok = np.ones(ng, dtype=bool)
            for gi, xi, wi in zip(gx.tolist(), xx.tolist(), w.tolist()):
                if xi == 0:
                    ok[gi] = False
                    continue
                t_ = terms.term(xi)
                if not isinstance(t_, Literal):
                    ok[gi] = False
                    continue
                parts[gi].extend([t_.lex] * int(wi))
            lits = [Literal(a.separator.join(p), XSD_STRING) for p in parts]
            ids = terms.encode(lits)
            out[ok] = ids[ok]
            return out
        raise ValueError(f"unknown aggregate {a.kind}")

    def _minmax(self, kind, gx, xx, ng, bad, n_in) -> np.ndarray:
        terms = self.evaluator.terms
        out = np.zeros(ng, dtype=np.int64)
        if not len(xx):
            return out
        unbound = np.bincount(gx, weights=(xx == 0).astype(np.float64), minlength=ng) > 0
        numeric = ~bad & ~unbound & (n_in > 0)
        if numeric.any():
            m = numeric[gx]
            v = terms.num_val[xx[m]]
            order = np.lexsort((v if kind == "MIN" else -v, gx[m]))
            gs, xs = gx[m][order], xx[m][order]
            first = np.ones(len(gs), dtype=bool)
            first[1:] = gs[1:] != gs[:-1]
            out[gs[first]] = xs[first]
        rest = np.flatnonzero(~numeric & ~unbound & (n_in > 0))
        for gi in rest.tolist():
            vals = [terms.term(int(i)) for i in xx[gx == gi].tolist()]
            best = min(vals, key=F.order_key) if kind == "MIN" else max(vals, key=F.order_key)
            out[gi] = terms.encode_one(best)
        return out


def _group_rows(shared: _Shared, route: RouteOperator) -> Batch:
    """The current rows of ``route``'s group in the aggregate of all of its router's groups."""
    rows = shared.agg.results.rows
    gid = route.router.groups[route.key].gid
    return rows.mask(rows.cols[0] == gid) if len(rows) else rows


class _Shared:
    """An aggregate of all groups of a router, the queries reading it, its split by group."""

    __slots__ = ("agg", "users", "_split")

    def __init__(self, agg: AggregateOperator) -> None:
        self.agg = agg
        self.users = 0
        self._split: tuple[int, dict[int, Batch]] = (-1, {})

    def split(self, epoch: int) -> dict[int, Batch]:
        """This epoch's delta of the aggregate, split by group id (once per epoch)."""
        if self._split[0] == epoch:
            return self._split[1]
        d = self.agg.delta(epoch)  # consolidated: sorted by group id first
        out: dict[int, Batch] = {}
        if len(d):
            g = d.cols[0]
            starts = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
            ends = np.append(starts[1:], len(g))
            for lo, hi, gid in zip(starts.tolist(), ends.tolist(), g.take(starts).tolist()):
                out[gid] = Batch(d.vars, d.cols[:, lo:hi], d.counts[lo:hi])
        self._split = (epoch, out)
        return out


def _distinct_pairs(gid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if not len(gid):
        return gid, x
    u = np.unique(np.stack([gid, x]), axis=1)
    return u[0], u[1]


def _merged_delta(new: Batch, old: Batch, vs: tuple[str, ...]) -> Batch:
    """``consolidate(concat([old, new]))`` of two consolidated batches: one linear merge
    when compiled (and no value is unbound)."""
    if not len(old) or not len(new):
        return new if len(new) else old
    got = merge_sorted(new, old)
    return got[0] if got is not None else consolidate(concat([old, new], vs))


def _rows_of_keys(cols: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """:func:`~.batch.rows_of_keys` (both sorted), or by :func:`_in_keys` when the columns
    do not pack into one key."""
    got = rows_of_keys(cols, keys)
    return got if got is not None else _in_keys(cols, keys).nonzero()[0]


def _in_keys(cols: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Exact mask of the rows of ``cols`` that are among the rows of ``keys`` (same
    columns).  Several columns that pack into one int64 key together (their values span
    few bits: dictionary ids) are compared by that key; otherwise by hash, verified."""
    if cols.shape[0] > 1:
        both = (
            packed_keys(np.concatenate([keys, cols], axis=1))
            if cols.dtype == keys.dtype == np.int64
            else None
        )
        if both is not None and len(both) <= 1:
            if not both:  # every row equal (and there is a key)
                return np.full(cols.shape[1], keys.shape[1] > 0, dtype=bool)
            k = keys.shape[1]
            return SortedIndex(both[0][:k]).contains(both[0][k:])
    m = SortedIndex(row_keys(keys)).contains(row_keys(cols))
    m &= _verify(cols, keys, m)
    return m


def _verify(cols: np.ndarray, keys: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Exact check of hash hits for multi-column keys (single columns are exact already)."""
    if cols.shape[0] <= 1 or not m.any():
        return m
    b = Batch(tuple(f"k{i}" for i in range(cols.shape[0])), keys, np.ones(keys.shape[1], np.int64))
    r = Relation(b.vars)
    r.apply(b)
    probe = Batch(b.vars, cols, np.ones(cols.shape[1], np.int64))
    return r.key_counts(probe, b.vars) > 0


__all__ = ["AggSpec", "AggregateOperator", "XSD_INTEGER"]
