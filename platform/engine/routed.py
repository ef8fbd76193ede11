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
from linkstream.engine.routed_filter import Slots, parametrise
from linkstream.engine.routed_members import RoutedMembers
from linkstream.engine.routed_plain import PlainRoute, PlainSource, plain_ok
from linkstream.operators.aggregate import AggregateOperator, _group_rows
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch, concat, consolidate, merge_sorted
from linkstream.operators.extend import ExtendOperator
from linkstream.operators.filter import FilterOperator
from linkstream.operators.project import ProjectOperator
from linkstream.operators.router import RenameOperator, RouteOperator, RouterOperator
from linkstream.query.expressions import Var

if TYPE_CHECKING:
    from linkstream.engine.output import ResultView
    from linkstream.operators.evaluate import Evaluator
    from linkstream.rdf.dictionary import Dictionary

GROUP = "%group"
#: the operators a block's chain may hold above its source
_CHAIN_OPS = (ProjectOperator, RenameOperator, FilterOperator, ExtendOperator)
#: an ASK view's body (:meth:`ResultView.bodies <linkstream.engine.output.ResultView.bodies>`)
ASK_TRUE, ASK_FALSE = '"ask": true}', '"ask": false}'


def _chain(
    view: ResultView,
) -> tuple[tuple, Any, RouteOperator, tuple[str, ...], list[tuple], tuple[int, ...]] | None:
    """``(key, source, route, source vars, steps, params)`` when ``view`` can be served by
    a :class:`RoutedBlock`, ``None`` otherwise.  ``steps`` are applied bottom-up to the
    source's tagged delta; ``source`` is the router or the shared aggregate; ``params``:
    the ids of the constants its filters compare with (:mod:`.routed_filter`)."""
    shape = view.shape
    if view.mode != "RSTREAM" or shape.order or shape.template:
        return None
    if shape.form != "SELECT" and (shape.form != "ASK" or view.vars):
        return None
    if shape.distinct or view.sliced:
        return None
    steps: list[tuple] = []
    params: list[int] = []
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
        elif t is FilterOperator:
            assert isinstance(op, FilterOperator)
            at = len(params)
            exprs = tuple(parametrise(e, params) for e in op.exprs)
            steps.append(("f", exprs, tuple(f"%param{j}" for j in range(at, len(params)))))
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
                return _plain(op, steps, params, view)
            shared, route = r
            # the shared aggregate's columns are the query's, positionally
            src_vars = (GROUP, *op.vars)
            steps.append(("agg", op.vars))
            key = ("agg", id(shared), tuple(steps), view.vars)
            return key, shared, route, src_vars, steps, tuple(params)
        elif t is RouteOperator:
            assert isinstance(op, RouteOperator)
            key = ("route", id(op.router), tuple(steps), view.vars)
            return key, op.router, op, (GROUP, *op.router.out_vars), steps, tuple(params)
        else:
            return _plain(op, steps, params, view)


def _plain(
    op: Operator, steps: list[tuple], params: list[int], view: ResultView
) -> tuple[tuple, Any, Any, tuple[str, ...], list[tuple], tuple[int, ...]] | None:
    """A filtered chain over a shared operator that is not a route (:mod:`.routed_plain`)."""
    if not any(st[0] == "f" for st in steps) or not plain_ok(op):
        return None
    key = ("plain", id(op), tuple(steps), view.vars)
    return key, op, None, (GROUP, *op.vars), steps, tuple(params)


def _attach_chain(view: ResultView) -> None:
    """Marks the attachments in ``view``'s chain attached when the block starts it (gives
    it the source's rows): the chain's operators are then as if they had run, so whoever
    pulls them later (the view when it leaves the block, or another query reading them
    through an attachment of its own, e.g. one restored with its state: a moved query)
    gets only their deltas from there, not the shared operators' whole output again."""
    op: Operator = view.root
    while True:
        t = type(op)
        if t is AttachOperator:
            assert isinstance(op, AttachOperator)
            op._attached = True
            op = op.shared
        elif t in _CHAIN_OPS:
            op = op.children[0]
        else:
            break


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
        evaluator: Evaluator | None = None,
        nparams: int = 0,
    ) -> None:
        self.key = key
        self.source = source
        self.router = router
        self.is_agg = key[0] == "agg"
        #: ASK views (no variables): a group's body is true when it has a row
        self.ask = not vars
        self.steps = steps[::-1]  # bottom-up
        self.vars = vars
        self.gvars = (GROUP, *vars)
        self.dictionary = dictionary
        self.evaluator = evaluator
        #: with filters: a block's group ids (column 0 of its rows, the keys of
        #: :attr:`by_gid`) are slots, (router group, constants) pairs
        self.slots = Slots(nparams) if any(st[0] == "f" for st in steps) else None
        self.state = Batch.empty(self.gvars)
        self.by_gid: dict[int, list[ResultView]] = {}
        self.routes: dict[int, RouteOperator] = {}
        self.gid_of: dict[int, int] = {}  # id(view) -> its group
        self._gids: np.ndarray | None = None  # the keys of by_gid, sorted (None: stale)
        self.fresh: list[ResultView] = []
        #: ids of the views in :attr:`fresh` that ran on their own before (a plain block's
        #: first member, :meth:`RoutedBlocks.join`): rendered anew, but their delta is
        #: their group's change, not their whole result
        self._joined: set[int] = set()
        self.epoch = -1
        #: (view, bodies) of every view :meth:`advance` set at :attr:`touched_epoch`
        self.touched: list[tuple[ResultView, list[str]]] = []
        self.touched_epoch = -1
        #: the queries reading the block's views, reported in one pass
        self.members = RoutedMembers(self)
        #: group -> the last epoch its rows changed; id(view) -> the epoch of the rows its
        #: result holds (:meth:`materialize` builds a view's result when they differ)
        self._ver: dict[int, int] = {}
        self._mat: dict[int, int] = {}
        #: (epoch, consolidated delta, changed groups' ranges in it, ids of new views)
        self._last: tuple[int, Batch, dict[int, tuple[int, int] | None], set[int]] | None = None
        self._names = [json.dumps(v, ensure_ascii=False) + ": " for v in vars]
        if not self.is_agg:
            router.taggers += 1

    def __len__(self) -> int:
        return len(self.by_gid)

    # ------------------------------------------------------------ members

    def add(self, view: ResultView, route: RouteOperator, params: tuple[int, ...] = ()) -> None:
        rgid = self.router.groups[route.key].gid
        gid = rgid if self.slots is None else self.slots.slot(rgid, params)
        views = self.by_gid.get(gid)
        if views is None:
            views = self.by_gid[gid] = []
            self._gids = None
            self.routes[gid] = route
            cur = self._transform(self._current(route, rgid), gid)
            if len(cur):
                self.state = consolidate(concat([self.state, cur], self.gvars))
        views.append(view)
        self.gid_of[id(view)] = gid
        view.block = self
        view._by_row = {}
        self.fresh.append(view)
        if view._started:  # (a lone view that ran on its own: its result is current)
            self._joined.add(id(view))

    def remove(self, view: ResultView) -> None:
        """Takes ``view`` out (it goes on through its own operators from its result)."""
        self.materialize(view)
        self._mat.pop(id(view), None)
        view.block = None
        self.fresh = [v for v in self.fresh if v is not view]
        self._joined.discard(id(view))
        gid = self.gid_of.pop(id(view), None)
        views = self.by_gid.get(gid) if gid is not None else None
        if gid is not None and views is not None:
            views[:] = [v for v in views if v is not view]
            if not views:
                del self.by_gid[gid]
                self._gids = None
                del self.routes[gid]
                if self.slots is not None:
                    self.slots.drop(gid)
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
        if self.slots is not None:
            self.slots.clear()
        self.gid_of.clear()
        self.fresh = []
        self._joined.clear()
        self._ver.clear()
        self._mat.clear()
        self.touched = []
        self._last = None

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

    def _transform(self, d: Batch, only: int | None = None) -> Batch:
        """The source's tagged rows through the chain, over ``("%group", *vars)`` (with
        filters: tagged with the slot ids; ``only``: that slot's rows alone)."""
        if not len(d):
            return Batch.empty(self.gvars)
        slots = self.slots
        expanded = False
        for st in self.steps:
            kind = st[0]
            if kind == "f":
                assert slots is not None and self.evaluator is not None
                if not expanded:
                    d = slots.expand(d, only)
                    expanded = True
                d = slots.filter(self.evaluator, st[1], st[2], d)
                if not len(d):
                    return Batch.empty(self.gvars)
            elif kind == "agg":
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
            have = self.by_gid if self.slots is None else self.slots.gids()
            gids = self._gids = np.sort(np.fromiter(have, dtype=np.int64, count=len(have)))
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
                got = merge_sorted(self.state, d)
                self.state = got[0] if got is not None else consolidate(concat([self.state, d], self.gvars))
        st = self.state
        sg = st.cols[0]
        # changed group -> its rows in ``d`` (``None``: a new view's group, unchanged)
        changed: dict[int, tuple[int, int] | None] = {}
        if len(d):
            dg = d.cols[0]
            starts = np.flatnonzero(np.concatenate(([True], dg[1:] != dg[:-1])))
            ends = np.append(starts[1:], len(dg))
            changed = dict(zip(dg.take(starts).tolist(), zip(starts.tolist(), ends.tolist())))
        joined = self._joined
        fresh_ids = {id(v) for v in fresh if id(v) not in joined}
        for v in fresh:
            changed.setdefault(self.gid_of[id(v)], None)
            _attach_chain(v)
        self.fresh = []
        self._joined = set()
        if not changed:
            return
        touched: list[tuple[ResultView, list[str]]] = []
        self.touched = touched
        self.touched_epoch = epoch
        self._last = (epoch, d, changed, fresh_ids)
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
        rendered = self._render(sub_cols) if total else np.empty(0, dtype=object)
        if self.ask:  # (every view's result is set, as ResultView.bodies reads it)
            rendered = None
        self._ver.update(dict.fromkeys(changed, epoch))
        members = self.members
        if rendered is not None and len(members.by_view) == len(self.gid_of):
            # every view has member queries, which read only their own blocks: the
            # views' results are built when read (:meth:`materialize`)
            for v in fresh:
                v._started = True
            members.rebuild(gids, starts, ends, sub_counts, rendered)
            return
        if rendered is not None:
            texts = rendered.tolist()
            # per group: its rows with a count other than 1 (bodies repeated by count)
            odd = np.concatenate(([0], np.cumsum(sub_counts != 1)))
            n_odd = (odd.take(ends) - odd.take(starts)).tolist()
        else:
            n_odd = [0] * len(changed)
        vars = self.vars
        by_gid = self.by_gid
        lazy = members.by_view  # views whose result is built when read (:meth:`materialize`)
        mat = self._mat
        for gid, a, b, k in zip(changed, starts.tolist(), ends.tolist(), n_odd):
            part = changed[gid]
            bodies: list[str] | None
            if self.ask:
                bodies = [ASK_TRUE if a < b else ASK_FALSE]
            elif rendered is None:
                bodies = [] if a == b else None
            elif not k:
                bodies = texts[a:b]
            else:
                bodies = np.repeat(rendered[a:b], sub_counts[a:b]).tolist()
            rows = None
            for view in by_gid[gid]:
                new = fresh_ids and id(view) in fresh_ids
                if part is None and not new and id(view) not in joined:
                    continue
                view._started = True
                if bodies is not None and id(view) in lazy:
                    b_ = bodies
                else:
                    if rows is None:
                        # (copies: a view's result must not keep this epoch's arrays alive)
                        rows = Batch(vars, sub_cols[:, a:b].copy(), sub_counts[a:b].copy())
                    mat[id(view)] = epoch
                    view.result.set_consolidated(rows)
                    if new:
                        vd = rows
                    elif part is None:  # (a view that ran on its own: no change now)
                        vd = Batch.empty(vars)
                    else:
                        vd = Batch(vars, d.cols[1:, part[0] : part[1]], d.counts[part[0] : part[1]])
                    view.memo = (epoch, True, vd)
                    b_ = bodies if bodies is not None else view._rstream_bodies(rows)
                view._bodies = b_
                view.rendered = (epoch, b_)
                touched.append((view, b_))

    def view_delta(self, view: ResultView, epoch: int) -> Batch | None:
        """The delta of ``view``'s result at ``epoch`` (the block's last epoch), when
        :meth:`advance` left it out of the view's memo; ``None`` when it did not change."""
        last = self._last
        if last is None or last[0] != epoch or id(view) not in self.gid_of:
            return None
        _, d, changed, fresh_ids = last
        if id(view) in fresh_ids:
            self.materialize(view)
            return view.result.rows
        part = changed.get(self.gid_of[id(view)])
        if part is None:
            return None
        return Batch(self.vars, d.cols[1:, part[0] : part[1]], d.counts[part[0] : part[1]])

    def materialize(self, view: ResultView) -> None:
        """Puts its group's current rows in ``view``'s result when :meth:`advance` left
        them out (the view's queries report through :attr:`members`, which read only
        the rendered rows): what the view's own update would have left."""
        vid = id(view)
        gid = self.gid_of.get(vid)
        if gid is None:
            return
        ver = self._ver.get(gid, -1)
        if self._mat.get(vid, -1) >= ver:
            return
        self._mat[vid] = ver
        st = self.state
        sg = st.cols[0]
        lo, hi = int(sg.searchsorted(gid, "left")), int(sg.searchsorted(gid, "right"))
        rows = Batch(self.vars, st.cols[1:, lo:hi].copy(), st.counts[lo:hi].copy())
        view.result.set_consolidated(rows)
        r = self._render(rows.cols) if len(rows) else None
        if self.ask:
            view._bodies = [ASK_TRUE if len(rows) else ASK_FALSE]
        elif r is None:
            view._bodies = view._rstream_bodies(rows)
        else:
            view._bodies = np.repeat(r, rows.counts).tolist()
        view.rendered = None

    def unbuilt(self) -> int:
        """How many views' results :meth:`materialize` has yet to build."""
        ver, mat = self._ver, self._mat
        return sum(1 for vid, gid in self.gid_of.items() if mat.get(vid, -1) < ver.get(gid, -1))

    def _render(self, cols: np.ndarray) -> np.ndarray | None:
        """The body of each row (an object array), or ``None`` when a row has an unbound
        column (the view's own renderer then handles it)."""
        if not cols.shape[0] or (cols == 0).any():
            return None
        # (each column's distinct ids: the terms to look up, and its pieces below)
        uniq = [np.unique(col, return_inverse=True) for col in cols]
        texts = json_terms(self.dictionary, set(np.concatenate([u for u, _ in uniq]).tolist()))
        last = len(self._names) - 1
        out: np.ndarray | None = None
        for j, (name, (u, inv)) in enumerate(zip(self._names, uniq)):
            # each distinct term's piece with its separators, so one concatenation per column
            pre = ('"binding": {' if j == 0 else ", ") + name
            post = "}}" if j == last else ""
            strs = np.array([pre + texts[x] + post for x in u.tolist()], dtype=object)[inv.reshape(-1)]
            out = strs if out is None else out + strs
        return out


def _may_enter(view: ResultView, source: Operator) -> bool:
    """Whether a lone view can enter a plain block over ``source``: never evaluated yet,
    or evaluated at the source's last epoch (its result is then the source's current
    rows through its chain, which the block takes as its group's rows; a view restored
    with its operators' state and not evaluated since may hold rows its source gives
    no more)."""
    if view.block is not None:
        return False
    if not view._started:
        return True
    memo = view.memo
    return memo is not None and memo[0] == source._epoch != -1


class RoutedBlocks:
    """The engine's routed blocks, by chain shape and source."""

    def __init__(self, dictionary: Dictionary) -> None:
        self.dictionary = dictionary
        self.blocks: dict[tuple, RoutedBlock] = {}
        #: id(operator) -> the shared operator read as a one-group router by plain blocks
        self.plain: dict[int, PlainSource] = {}
        #: plain block key -> the one view of that chain so far and the names of the
        #: queries reading it (it runs through its own operators until a second comes)
        self.lone: dict[tuple, tuple[ResultView, list[str]]] = {}
        self._lone_key: dict[int, tuple] = {}  # id(lone view) -> its key in :attr:`lone`

    def member_groups(self) -> list[RoutedMembers]:
        """The blocks' members (non-empty), which report together."""
        return [b.members for b in self.blocks.values() if len(b.members)]

    def join(self, view: ResultView, plain: bool = True, name: str = "") -> tuple[bool, list[str]]:
        """Puts a new (never evaluated) view in the block of its chain, if it has one
        (``plain``: also on a shared operator that is not a route; its queries must be
        the block's members, which bring it to every epoch).

        A plain block starts with its second view: the first one (read by query ``name``)
        goes on through its own operators until then (one view costs less through them
        than in a block of its own).  Returns whether ``view`` is in a block now, and the
        names of the queries reading the lone view that entered the block with it."""
        if view.block is not None or view._started:
            return False, []
        found = _chain(view)
        if found is None or (found[2] is None and not plain):
            return False, []
        key = found[0]
        if found[2] is not None or key in self.blocks:
            self._add(view, found)
            return True, []
        lone = self.lone.get(key)
        if lone is not None and lone[0] is not view and _may_enter(lone[0], found[1]):
            again = _chain(lone[0])
            if again is not None and again[0] == key:  # (still the same chain)
                del self.lone[key]
                self._lone_key.pop(id(lone[0]), None)
                self._add(lone[0], again)
                self._add(view, found)
                return True, lone[1]
        names = lone[1] if lone is not None and lone[0] is view else []
        if lone is not None and lone[0] is not view:
            self._lone_key.pop(id(lone[0]), None)
        self.lone[key] = (view, [*names, name])
        self._lone_key[id(view)] = key
        return False, []

    def _add(self, view: ResultView, found: tuple) -> None:
        key, source, route, _, steps, params = found
        if route is None:  # (a plain block: the operator is its source and its router)
            ps = self.plain.get(id(source))
            if ps is None:
                ps = self.plain[id(source)] = PlainSource(source)
            source, route = ps, PlainRoute(ps)
        b = self.blocks.get(key)
        if b is None:
            b = self.blocks[key] = RoutedBlock(
                key, source, route.router, steps, view.vars, self.dictionary, view.ev, len(params)
            )
            route.router.blocks.append(b)
        b.add(view, route, params)

    def forget(self, view: ResultView) -> None:
        """Drops ``view`` when it is a lone view waiting for a second one of its chain."""
        key = self._lone_key.pop(id(view), None)
        if key is not None and self.lone.get(key, (None,))[0] is view:
            del self.lone[key]

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
            if isinstance(b.router, PlainSource) and not b.router.blocks:
                self.plain.pop(id(b.router.op), None)
