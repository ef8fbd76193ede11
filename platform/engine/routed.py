"""Routed blocks: the result views of queries on one router's groups, kept in one pass.

Thousands of queries that share a join behind a :class:`~linkstream.operators.router.RouterOperator`
differ only in their group (window ranges, generalised constants): LSBench Q4 / Q5
``Project(Rename(Route))``, Q10 ``Project(Extend(Aggregate(Rename(Route))))`` whose
aggregate is computed once for all groups (:func:`~linkstream.operators.aggregate`'s
shared aggregate).  Through their own operators each of them costs a chain of small
deltas per epoch (rename, split, extend, project, the view's relation, the rendering of
its rows); a :class:`RoutedBlock` serves every view of one chain shape over one source
instead:

* the source's change of *all* groups, tagged with the group id (the router's
  ``tagged`` delta, or the shared aggregate's delta), goes through the chain once, as
  one batch over ``("%group", *view vars)``;
* the block keeps the current result of its groups as one consolidated array sorted by
  (group, row); a group's rows are a slice of it, already in the order of the view's
  own consolidated result;
* for the groups that changed (and the views not evaluated yet) it sets each view's
  result, delta memo and rendered rows, the rows rendered for all groups at once from
  the cached term strings with vectorised string joins.

A view in a block is exactly what its own operators would have built (result, delta,
rendered bodies, started flag): every other reader of the view (quiet-gap skipping,
reports, checkpoints) sees no difference, and a view can leave the block (unregister,
replanning) and go on through its own operators.  Output is byte-for-byte that of the
per-query path.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.output import json_terms
from linkstream.operators.aggregate import AggregateOperator, _group_rows
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch, concat, consolidate
from linkstream.operators.extend import ExtendOperator
from linkstream.operators.project import ProjectOperator
from linkstream.operators.router import RenameOperator, RouteOperator, RouterOperator
from linkstream.query.expressions import Var

if TYPE_CHECKING:
    from linkstream.engine.output import ResultView
    from linkstream.rdf.dictionary import Dictionary

GROUP = "%group"


def _chain(view: ResultView) -> tuple[tuple, Any, RouteOperator, tuple[str, ...], list[tuple]] | None:
    """``(key, source, route, source vars, steps)`` when ``view`` can be served by a
    :class:`RoutedBlock`, ``None`` otherwise.  ``steps`` are applied bottom-up to the
    source's tagged delta; ``source`` is the router or the shared aggregate."""
    shape = view.shape
    if view.mode != "RSTREAM" or shape.form != "SELECT" or shape.order or shape.template:
        return None
    if shape.distinct or view.sliced:
        return None
    steps: list[tuple] = []
    op: Operator = view.root
    while True:
        while type(op) is AttachOperator:
            op = op.shared
        t = type(op)
        if t is ProjectOperator:
            steps.append(("p", op.vars))
            op = op.children[0]
        elif t is RenameOperator:
            assert isinstance(op, RenameOperator)
            steps.append(("r", tuple(sorted(op.mapping.items())), op.vars))
            op = op.child
        elif t is ExtendOperator:
            assert isinstance(op, ExtendOperator)
            if type(op.expr) is not Var:
                return None
            steps.append(("e", op.var, op.expr.name))
            op = op.child
        elif t is AggregateOperator:
            assert isinstance(op, AggregateOperator)
            r = op._routed()
            if not isinstance(r, tuple):
                return None
            shared, route = r
            # the shared aggregate's columns are the query's, positionally
            src_vars = (GROUP, *op.vars)
            steps.append(("agg", op.vars))
            key = ("agg", id(shared), tuple(steps), view.vars)
            return key, shared, route, src_vars, steps
        elif t is RouteOperator:
            assert isinstance(op, RouteOperator)
            key = ("route", id(op.router), tuple(steps), view.vars)
            return key, op.router, op, (GROUP, *op.router.out_vars), steps
        else:
            return None


class RoutedBlock:
    """The views of one chain shape over one router (or shared aggregate), kept in one pass."""

    def __init__(
        self,
        key: tuple,
        source: Any,
        router: RouterOperator,
        steps: list[tuple],
        vars: tuple[str, ...],
        dictionary: Dictionary,
    ) -> None:
        self.key = key
        self.source = source
        self.router = router
        self.is_agg = key[0] == "agg"
        self.steps = steps[::-1]  # bottom-up
        self.vars = vars
        self.gvars = (GROUP, *vars)
        self.dictionary = dictionary
        self.state = Batch.empty(self.gvars)
        self.by_gid: dict[int, list[ResultView]] = {}
        self.routes: dict[int, RouteOperator] = {}
        self.gid_of: dict[int, int] = {}  # id(view) -> its group
        self._gids: np.ndarray | None = None  # the keys of by_gid, sorted (None: stale)
        self.fresh: list[ResultView] = []
        self.epoch = -1
        self._names = [json.dumps(v, ensure_ascii=False) + ": " for v in vars]
        if not self.is_agg:
            router.taggers += 1

    def __len__(self) -> int:
        return len(self.by_gid)

    # ------------------------------------------------------------ members

    def add(self, view: ResultView, route: RouteOperator) -> None:
        gid = self.router.groups[route.key].gid
        views = self.by_gid.get(gid)
        if views is None:
            views = self.by_gid[gid] = []
            self._gids = None
            self.routes[gid] = route
            cur = self._transform(self._current(route, gid))
            if len(cur):
                self.state = consolidate(concat([self.state, cur], self.gvars))
        views.append(view)
        self.gid_of[id(view)] = gid
        view.block = self
        view._by_row = {}
        self.fresh.append(view)

    def remove(self, view: ResultView) -> None:
        """Takes ``view`` out (it goes on through its own operators from its result)."""
        view.block = None
        self.fresh = [v for v in self.fresh if v is not view]
        gid = self.gid_of.pop(id(view), None)
        views = self.by_gid.get(gid) if gid is not None else None
        if gid is not None and views is not None:
            views[:] = [v for v in views if v is not view]
            if not views:
                del self.by_gid[gid]
                self._gids = None
                del self.routes[gid]
                st = self.state
                if len(st):
                    self.state = st.mask(st.cols[0] != gid)
        if view._started:
            # its own routed aggregates have not been pulled while it was here: they must
            # not give it the group's whole result again
            for op in view.root.walk():
                if isinstance(op, AggregateOperator):
                    op._first = False

    def close(self) -> None:
        if not self.is_agg:
            self.router.taggers -= 1
        self.state = Batch.empty(self.gvars)
        self.by_gid.clear()
        self._gids = None
        self.routes.clear()
        self.gid_of.clear()
        self.fresh = []

    def _current(self, route: RouteOperator, gid: int) -> Batch:
        """The current rows of group ``gid`` in the source (tagged)."""
        if self.is_agg:
            rows = _group_rows(self.source, route)
            return Batch(self._src_vars(), rows.cols, rows.counts)
        rows = self.router.present(route.key)
        cols = np.vstack([np.full((1, len(rows)), gid, dtype=np.int64), rows.cols])
        return Batch((GROUP, *self.router.out_vars), cols, rows.counts)

    def _src_vars(self) -> tuple[str, ...]:
        return (GROUP, *self.steps[0][1]) if self.is_agg else (GROUP, *self.router.out_vars)

    # ------------------------------------------------------------ evaluation

    def _transform(self, d: Batch) -> Batch:
        """The source's tagged rows through the chain, over ``("%group", *vars)``."""
        if not len(d):
            return Batch.empty(self.gvars)
        for st in self.steps:
            kind = st[0]
            if kind == "agg":
                d = Batch((GROUP, *st[1]), d.cols, d.counts)
            elif kind == "r":
                m = dict(st[1])
                d = Batch(tuple(m.get(v, v) for v in d.vars), d.cols, d.counts).project((GROUP, *st[2]))
            elif kind == "e":
                d = Batch((*d.vars, st[1]), np.vstack([d.cols, d.col(st[2])[None, :]]), d.counts)
            else:
                d = d.project((GROUP, *st[1]))
        return d.project(self.gvars)

    def _source_delta(self, epoch: int) -> Batch:
        if self.is_agg:
            d = self.source.agg.delta(epoch)
            d = Batch(self._src_vars(), d.cols, d.counts)
        else:
            self.router.delta(epoch)
            d = self.router.tagged
        if not len(d):
            return d
        g = d.cols[0]
        gids = self._gids
        if gids is None:  # (sorted ids of the groups here, kept until a group comes or goes)
            gids = self._gids = np.sort(np.fromiter(self.by_gid, dtype=np.int64, count=len(self.by_gid)))
        if not len(gids):
            return d.mask(np.zeros(len(d), dtype=bool))
        at = gids.searchsorted(g)
        at[at == len(gids)] = 0
        keep = gids.take(at) == g
        return d if keep.all() else d.mask(keep)

    def advance(self, epoch: int) -> None:
        """Brings every view of a changed group (and every new view) to ``epoch``."""
        if epoch == self.epoch:
            return
        self.epoch = epoch
        d = self._source_delta(epoch)
        fresh = self.fresh
        if not len(d) and not fresh:
            return
        if len(d):
            d = consolidate(self._transform(d))
            if len(d):
                self.state = consolidate(concat([self.state, d], self.gvars))
        st = self.state
        sg = st.cols[0]
        changed: dict[int, Batch | None] = {}
        if len(d):
            dg = d.cols[0]
            starts = np.flatnonzero(np.concatenate(([True], dg[1:] != dg[:-1])))
            ends = np.append(starts[1:], len(dg))
            for lo, hi, gid in zip(starts.tolist(), ends.tolist(), dg.take(starts).tolist()):
                changed[gid] = Batch(self.vars, d.cols[1:, lo:hi], d.counts[lo:hi])
        fresh_ids = {id(v) for v in fresh}
        for v in fresh:
            changed.setdefault(self.gid_of[id(v)], None)
        self.fresh = []
        if not changed:
            return
        gids = np.fromiter(changed, dtype=np.int64, count=len(changed))
        lo_a = np.searchsorted(sg, gids, "left")
        lens = np.searchsorted(sg, gids, "right") - lo_a
        ends = np.cumsum(lens)
        starts = ends - lens
        total = int(ends[-1])
        # the rows of every changed group, in ``changed`` order, as one compact copy (no
        # arange, slice copy or count check per group)
        sel = np.arange(total, dtype=np.int64) + np.repeat(lo_a - starts, lens)
        sub_cols = st.cols[1:].take(sel, axis=1)
        sub_counts = st.counts.take(sel)
        # render the rows of every changed group at once
        rendered = self._render(sub_cols) if total else None
        if rendered is not None:
            texts = rendered.tolist()
            # per group: its rows with a count other than 1 (bodies repeated by count)
            odd = np.concatenate(([0], np.cumsum(sub_counts != 1)))
            n_odd = (odd.take(ends) - odd.take(starts)).tolist()
        else:
            n_odd = [0] * len(changed)
        vars = self.vars
        by_gid = self.by_gid
        for gid, a, b, k in zip(changed, starts.tolist(), ends.tolist(), n_odd):
            # (copies: a view's result must not keep this epoch's arrays alive)
            rows = Batch(vars, sub_cols[:, a:b].copy(), sub_counts[a:b].copy())
            part = changed[gid]
            bodies: list[str] | None
            if rendered is None:
                bodies = [] if a == b else None
            elif not k:
                bodies = texts[a:b]
            else:
                bodies = np.repeat(rendered[a:b], rows.counts).tolist()
            for view in by_gid[gid]:
                if fresh_ids and id(view) in fresh_ids:
                    vd = rows
                elif part is None:
                    continue
                else:
                    vd = part
                view._started = True
                view.result.set_consolidated(rows)
                view.memo = (epoch, True, vd)
                b_ = bodies if bodies is not None else view._rstream_bodies(rows)
                view._bodies = b_
                view.rendered = (epoch, b_)

    def _render(self, cols: np.ndarray) -> np.ndarray | None:
        """The body of each row (an object array), or ``None`` when a row has an unbound
        column (the view's own renderer then handles it)."""
        if not cols.shape[0] or (cols == 0).any():
            return None
        texts = json_terms(self.dictionary, set(cols.ravel().tolist()))
        last = len(self._names) - 1
        out: np.ndarray | None = None
        for j, (name, col) in enumerate(zip(self._names, cols)):
            # each distinct term's piece with its separators, so one concatenation per column
            pre = ('"binding": {' if j == 0 else ", ") + name
            post = "}}" if j == last else ""
            u, inv = np.unique(col, return_inverse=True)
            strs = np.array([pre + texts[x] + post for x in u.tolist()], dtype=object)[inv.reshape(-1)]
            out = strs if out is None else out + strs
        return out


class RoutedBlocks:
    """The engine's routed blocks, by chain shape and source."""

    def __init__(self, dictionary: Dictionary) -> None:
        self.dictionary = dictionary
        self.blocks: dict[tuple, RoutedBlock] = {}

    def join(self, view: ResultView) -> bool:
        """Puts a new (never evaluated) view in the block of its chain, if it has one."""
        if view.block is not None or view._started:
            return False
        found = _chain(view)
        if found is None:
            return False
        key, source, route, _, steps = found
        b = self.blocks.get(key)
        if b is None:
            b = self.blocks[key] = RoutedBlock(key, source, route.router, steps, view.vars, self.dictionary)
            route.router.blocks.append(b)
        b.add(view, route)
        return True

    def leave(self, view: ResultView) -> None:
        b: RoutedBlock | None = view.block
        if b is None:
            return
        b.remove(view)
        if not len(b):
            b.close()
            if self.blocks.get(b.key) is b:
                del self.blocks[b.key]
            try:
                b.router.blocks.remove(b)
            except ValueError:
                pass
