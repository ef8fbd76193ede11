"""Shared multiway join + router (CQELS Cloud), and the column relabel used by sharing.

Queries whose joins differ only in window ranges (same streams, same steps, time-based
windows) -- and, optionally, in a subject/object constant -- share one join over the
largest range.  The shared join reads *timed* windows: every triple carries the
timestamp of its stream element as a hidden column, so each join row remembers the
timestamps of the triples it was built from.  The :class:`RouterOperator` keeps the
join's current rows; at every report time ``c`` and for every subscriber group (a range
per window slot, a value per generalised constant) it derives the group's result -- the
distinct bindings of the rows whose every input timestamp lies in the group's window
instance ``[close - r, close)`` (SEMANTICS.md §3) and whose hidden constant columns hold
the group's constants -- and emits the difference to the previous result as +1 / -1
rows.  That covers rows the shared join reports as new or expired *and* rows that only
slid out of a smaller window, which the large join never reports.

Count windows (``[TRIPLES n]``) are routed the same way with buffer positions in place
of timestamps: a :class:`~linkstream.operators.timed_window.CountedWindowOperator` tags
each triple with its absolute position, and a group of ``n`` keeps the rows whose least
position is ``>= hi - n`` (``hi``: the window's end position at its last advance).

Why dropping the timestamp columns and deduplicating restores the per-query answer: a
window graph is a *set* of triples, and a triple pattern's binding (its variables plus
its constants) determines the matched triple.  So a per-query BGP solution is present
exactly when at least one combination of timestamped occurrences of its triples lies in
that query's window.

:class:`RenameOperator` relabels a shared operator's canonical variable names to one
query's names (no copy of the columns unless their order changes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, concat, consolidate, merge_sorted

# (the shared join's inputs, re-exported: their module was split from this one)
from linkstream.operators.latest_graph import STATIC_TS as STATIC_TS
from linkstream.operators.latest_graph import LatestGraphOperator as LatestGraphOperator
from linkstream.operators.latest_graph import TimedScanOperator as TimedScanOperator
from linkstream.operators.relation import Relation
from linkstream.operators.router_groups import Expiry, Group, GroupTable, pair_ends
from linkstream.operators.state import StateError, StateReader, StateWriter
from linkstream.operators.timed_window import CountedWindowOperator, TimedWindowOperator


class RenameOperator(Operator):
    """The child's mappings with variables renamed by ``mapping`` and put in ``order``."""

    #: output changes only with the child's (the engine may skip quiet epochs)
    event_driven = True

    def __init__(self, child: Operator, mapping: Mapping[str, str], order: Sequence[str]) -> None:
        super().__init__()
        self.child = child
        self.children = (child,)
        self.mapping = dict(mapping)
        self.vars = tuple(order)
        self.certain = frozenset(self.mapping.get(v, v) for v in child.certain)

    def describe(self) -> str:
        pairs = " ".join(f"{a}->{b}" for a, b in sorted(self.mapping.items()))
        return f"Rename {pairs}"

    def config_key(self) -> object:
        return (tuple(sorted(self.mapping.items())), self.vars)

    def apply(self, d: Batch) -> Batch:
        cache = self.__dict__.get("_renamed")
        if cache is None or cache[0] is not d.vars:  # (one vars tuple per child, mostly)
            m = self.mapping
            renamed = tuple(m.get(v, v) for v in d.vars)
            # the column order as an index array, once (``None``: already in order;
            # ``False``: a variable of ``order`` the child lacks, left to ``project``)
            perm: np.ndarray | bool | None = None
            if renamed != self.vars:
                perm = False
                if all(v in renamed for v in self.vars):
                    perm = np.array([renamed.index(v) for v in self.vars], dtype=np.intp)
            cache = self._renamed = (d.vars, renamed, perm)
        perm = cache[2]
        if perm is None:
            return Batch(self.vars, d.cols, d.counts)
        if perm is False:
            return Batch(cache[1], d.cols, d.counts).project(self.vars)
        return Batch(self.vars, d.cols.take(perm, axis=0), d.counts)

    def current(self) -> Batch:
        return self.apply(self.child.current())

    def compute(self, epoch: int) -> Batch:
        return self.apply(self.child.delta(epoch))


#: ``np.minimum.reduce``: ``ndarray.min`` adds a Python frame per call
_min0 = np.minimum.reduce
_max0 = np.maximum.reduce

#: a router's recent part of the join's rows is merged into its base once it holds more
#: than base / RECENT_RATIO + RECENT_FLOOR rows
RECENT_RATIO = 4
RECENT_FLOOR = 256
#: rows already joined leave their groups by their expiry (:class:`Expiry`) where it
#: applies (``False``: every such row's qualification tested at every epoch)
EXPIRY = True
#: while they do, the join's deltas are kept as they came (no consolidation or merge per
#: epoch: the rows already joined are read only to rebuild an expiry) and folded into the
#: base part once they hold more than base / LAZY_RATIO + RECENT_FLOOR rows or are more
#: than LAZY_PARTS deltas
LAZY_RATIO = 1
LAZY_PARTS = 32


def _merged(a: Batch, b: Batch) -> Batch:
    """``consolidate(concat([a, b]))`` of two consolidated batches over the same variables
    (one compiled merge when it can)."""
    if not len(b):
        return a
    if not len(a):
        return b
    got = merge_sorted(a, b)
    return got[0] if got is not None else consolidate(concat([a, b], a.vars))


class RouterOperator(Operator):
    """Splits a shared join's rows among subscriber groups by window containment.

    Per group and report time the change of its result is computed from the rows whose
    qualification changed only: with ``new = old + delta`` and ``q`` the containment
    test, ``sum(q_now * new) - sum(q_before * old) = sum((q_now - q_before) * old) +
    sum(q_now * delta)``.  A per-binding count of qualifying rows turns that into set
    semantics: a binding enters when its count becomes positive and leaves when it
    drops to zero.  The counts of all groups live in one relation keyed by (group id,
    binding), so each report time costs one consolidation and one probe for all groups.

    Args:
        join: The shared join (its vars include the timestamp and hidden constant columns).
        slots: Per window slot, the timed window and the timestamp variables of its scans.
        out_vars: The binding variables forwarded to subscribers (no hidden columns).
    """

    #: a group's result changes when its window instance slides, even without a join delta
    event_driven = False
    #: shared-join state serves every query of the join: a query using it is rebuilt, not
    #: migrated (:mod:`linkstream.operators.state`); task checkpoints snapshot it once per
    #: router (:mod:`linkstream.operators.shared_state`)
    migratable = False

    def __init__(
        self,
        join: Operator,
        slots: Sequence[tuple[TimedWindowOperator, Sequence[str]]],
        out_vars: Sequence[str],
    ) -> None:
        super().__init__()
        self.join = join
        self.children = (join,)
        self.windows = [w for w, _ in slots]
        self.slot_ts = [tuple(ts) for _, ts in slots]
        self.out_vars = tuple(out_vars)
        self.vars = ()
        self.jvars = join.vars
        #: the join's rows: a consolidated base part and a consolidated recent part that
        #: takes each epoch's delta, merged into the base once it outgrows a fraction of it
        #: (:data:`RECENT_RATIO`), so an epoch costs work in its delta, not a copy of every
        #: row.  A row may be in both parts, with counts that cancel: the containment test
        #: is linear in the counts, so a row and its retraction change no group's result
        self._base = Batch.empty(self.jvars)
        self._recent = Batch.empty(self.jvars)
        #: the deltas kept as they came while rows leave by their expiry (:data:`LAZY_RATIO`)
        self._lazy: list[Batch] = []
        self._nlazy = 0
        self.groups: dict[tuple, Group] = {}
        #: this epoch's changed groups: (their ids ascending, their rows' starts and ends in
        #: the delta, gid -> key), and the delta's (columns, moved rows, signs); per-group
        #: rows are cut out when a route asks (:meth:`emitted_rows`, :attr:`emitted`)
        self._emit: tuple[np.ndarray, np.ndarray, np.ndarray, dict[int, tuple]] | None = None
        self._emitted: dict[tuple, tuple[int, int]] | None = None
        self._emit_src: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._gvars = ("%group", *self.out_vars)
        self.counts = Relation(self._gvars)
        self._next_gid = 0
        self._out_idx = [self.jvars.index(v) for v in self.out_vars]
        self._ts_idx = [[self.jvars.index(v) for v in ts] for ts in self.slot_ts]
        #: the hidden constant variables every group has a value for (set by the first)
        self._hidden: tuple[str, ...] | None = None
        self._hid_idx: list[int] = []
        self._tab: GroupTable | None = None
        #: the qualifying pairs by when they leave, while the windows slide at one close
        #: (``None``: rebuilt from the rows when next needed)
        self._expiry: Expiry | None = None
        #: the window closes of the last evaluation (every started group's result is at them)
        self._closes: tuple[int, ...] | None = None
        #: this epoch's change of every group's result, tagged with the group id (over
        #: ``("%group", *out_vars)``), and the rows of removed groups not yet retracted
        self.tagged = Batch.empty(self._gvars)
        self._retracted: list[Batch] = []
        #: aggregates computed for all groups at once (see :func:`shared_aggregate`)
        self.aggregates: dict[object, Any] = {}
        #: readers of :attr:`tagged` other than the aggregates (the engine's routed blocks,
        #: which it also keeps in :attr:`blocks` to bring them up to date every epoch)
        self.taggers = 0
        self.blocks: list[Any] = []

    def describe(self) -> str:
        return f"Router groups={len(self.groups)} rows={len(self.rows())}"

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The shared join's rows (their ``%t`` columns are timestamps).  The groups'
        results are not shipped: they follow from the rows and each group's key, and the
        engine that restores re-derives them at its first (silent) evaluation, as for a
        group that subscribes to a running router (:mod:`linkstream.operators.shared_state`)."""
        return {"rows": w.batch(self.rows())}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("rows",))
        if self._closes is not None or len(self.counts):
            raise StateError("the router evaluated here already")
        self._base = consolidate(r.batch(entries["rows"], self.jvars))
        self._recent = Batch.empty(self.jvars)
        self._lazy, self._nlazy = [], 0
        self._expiry = None

    def rows(self) -> Batch:
        """The shared join's current rows, consolidated (the recent part merged into the base)."""
        if self._lazy:
            self._fold()
        if len(self._recent):
            self._base = _merged(self._base, self._recent)
            self._recent = Batch.empty(self.jvars)
        return self._base

    @property
    def state(self) -> Batch:
        """The shared join's current rows as held: the base part then the recent part (a
        row may be in both, with counts that cancel; :meth:`rows` consolidates)."""
        parts = [p for p in (self._base, self._recent, *self._lazy) if len(p)]
        return concat(parts, self.jvars) if parts else self._base

    def _fold(self) -> None:
        """Folds the deltas kept as they came (and the recent part) into the base part."""
        lazy = consolidate(concat(self._lazy, self.jvars))
        self._lazy, self._nlazy = [], 0
        self._base = _merged(self._base, _merged(self._recent, lazy))
        self._recent = Batch.empty(self.jvars)

    def _keep(self, d: Batch, lazy: bool) -> None:
        """Adds the join's delta ``d`` (not consolidated) to the rows: as it came while
        rows leave by their expiry (``lazy``), else consolidated into the recent part."""
        if lazy:
            if len(d):
                self._lazy.append(d)
                self._nlazy += len(d)
                if self._nlazy > len(self._base) // LAZY_RATIO + RECENT_FLOOR or len(self._lazy) > LAZY_PARTS:
                    self._fold()
            return
        if self._lazy:
            self._fold()
        d = consolidate(d)
        if len(d):
            recent = _merged(self._recent, d)
            if len(recent) > len(self._base) // RECENT_RATIO + RECENT_FLOOR:
                self._base = _merged(self._base, recent)
                recent = Batch.empty(self.jvars)
            self._recent = recent

    def config_key(self) -> object:
        return (self.out_vars, tuple(self.slot_ts))

    # -------------------------------------------------------- subscribers

    def add_group(self, key: tuple) -> Group:
        """Subscribes to group ``key``: ``(ranges, consts)`` or ``(ranges, consts, steps)``
        (a range and a step per slot, ``(hidden variable, value)`` per constant; without
        steps, the slot windows' own)."""
        ranges, consts = key[0], key[1]
        steps = key[2] if len(key) > 2 else ()
        g = self.groups.get(key)
        if g is None:
            names = tuple(v for v, _ in consts)
            if self._hidden is None:
                self._hidden = names
                self._hid_idx = [self.jvars.index(v) for v in names]
            elif names != self._hidden:
                raise ValueError(f"router groups differ in their hidden constants: {names} != {self._hidden}")
            self._next_gid += 1
            g = self.groups[key] = Group(ranges, consts, self._next_gid, steps=steps)
            self._invalidate()
        g.refs += 1
        return g

    def remove_group(self, key: tuple) -> None:
        g = self.groups.get(key)
        if g is None:
            return
        g.refs -= 1
        if g.refs <= 0:
            rows = self._rows_of(g.gid)
            if len(rows):
                self.counts.apply(rows.negate())
                if self.aggregates:
                    self._retracted.append(rows.with_counts(-np.ones(len(rows), dtype=np.int64)))
            self._invalidate()
            del self.groups[key]
            if self._emitted is not None:
                self._emitted.pop(key, None)

    def _invalidate(self) -> None:
        """Drops the group table (the groups' evaluation flags are written back first) and
        the pairs' expiry."""
        self._expiry = None
        t = self._tab
        if t is not None:
            for g, started in zip(t.groups, t.started.tolist()):
                g.started = started
            self._tab = None

    def _table(self) -> GroupTable:
        t = self._tab
        if t is None:
            t = self._tab = GroupTable(list(self.groups.values()), len(self.windows), len(self._hid_idx))
        return t

    def _rows_of(self, gid: int) -> Batch:
        rows = self.counts.rows
        return rows.mask((rows.cols[0] == gid) & (rows.counts > 0)) if len(rows) else rows

    def present(self, key: tuple) -> Batch:
        """The current result of group ``key`` (each binding once)."""
        rows = self._rows_of(self.groups[key].gid)
        return Batch(self.out_vars, rows.cols[1:], np.ones(len(rows), dtype=np.int64))

    # -------------------------------------------------------- evaluation

    def current(self) -> Batch:
        return Batch.empty(())

    def _mins(self, cols: np.ndarray) -> list[np.ndarray]:
        return [
            cols[idx[0]] if len(idx) == 1 else _min0(cols.take(idx, axis=0), axis=0) for idx in self._ts_idx
        ]

    def _maxs(self, cols: np.ndarray) -> list[np.ndarray]:
        return [
            cols[idx[0]] if len(idx) == 1 else _max0(cols.take(idx, axis=0), axis=0) for idx in self._ts_idx
        ]

    def compute(self, epoch: int) -> Batch:
        self.tagged = Batch.empty(self._gvars)
        if self._retracted:
            self.tagged = concat(self._retracted, self._gvars)
            self._retracted = []
        d = self.join.delta(epoch)
        # (not consolidated: every step below is linear in the counts, and the change of
        # the groups' results is consolidated at the end)
        d = d.project(self.jvars) if len(d) else Batch.empty(self.jvars)
        # the rows before this delta, by part (the qualification of rows already joined
        # reads each part on its own)
        old = [p for p in (self._base, self._recent, *self._lazy) if len(p)]
        self._emit = self._emitted = None
        self._emit_src = None
        if any(w.now is None for w in self.windows) or not self.groups:
            self._expiry = None  # (this delta's rows are in no expiry)
            self._keep(d, False)
            return Batch.empty(())
        wsteps = tuple(w.step for w in self.windows)
        # a time slot's close is its window's last report time (rows carry timestamps); a
        # count slot's is the position its window ends at (rows carry buffer positions, a
        # group of n keeps those >= close - n)
        closes = tuple(
            w.hi if type(w) is CountedWindowOperator else (w.now // s) * s  # type: ignore[operator]  # no None: checked above
            for w, s in zip(self.windows, wsteps)
        )
        t = self._table()
        prev = self._closes
        same = prev == closes
        if same and not len(d) and not t.any_fresh:
            return Batch.empty(())
        # (a window's step divides its groups' steps: it is only refined before it starts)
        bounds = t.bounds(closes, wsteps)
        upper = any(hi is not None for _, hi in bounds)
        cols: list[np.ndarray] = []
        counts: list[np.ndarray] = []
        gids: list[np.ndarray] = []
        hid = self._hid_idx
        # windows that slid forward (or stayed) to one close, no new group, no upper bound:
        # the rows already joined leave their groups by their expiry (:class:`Expiry`)
        fast = (
            EXPIRY
            and prev is not None
            and not upper
            and not t.any_fresh
            and len(set(closes)) == 1
            and len(set(prev)) == 1
            and closes[0] >= prev[0]
        )
        expiry = self._expiry if fast else None
        if fast:
            assert prev is not None
            if expiry is None or expiry.close != prev[0]:
                expiry = self._expiry = self._expiry_of(old, t, prev[0])
            for c_, n_, g_ in expiry.leave(closes[0]):
                cols.append(c_)
                counts.append(-n_)
                gids.append(g_)
        else:
            self._expiry = None
        self._keep(d, fast)
        if old and not fast and (not same or t.any_fresh):
            # rows already joined: their qualification changes as the windows slide (and
            # for groups never evaluated, it starts)
            pb = t.bounds(prev, wsteps) if prev is not None else None
            changed = None  # groups whose window instance moved (None: all of them)
            if pb is not None and not same:
                for (lo, hi), (plo, phi) in zip(bounds, pb):
                    x = (lo != plo) if hi is None or phi is None else (lo != plo) | (hi != phi)
                    changed = x if changed is None else (changed | x)
                if changed is not None and changed.all():
                    changed = None
            slid = (
                pb is not None
                and prev is not None
                and not t.any_fresh
                and all(c >= p for c, p in zip(closes, prev))
            )
            for part in old:
                self._old_change(part, t, bounds, pb, changed, same, slid, upper, (cols, counts, gids))
        if len(d):
            ri, gi = t.pairs(d.cols.take(hid, axis=0) if hid else d.cols[:0])
            if len(ri):
                dmax = self._maxs(d.cols) if upper else None
                dmins = self._mins(d.cols)
                sel = t.qualify(dmins, dmax, bounds, ri, gi).nonzero()[0]
                if len(sel):
                    rs, gs = ri.take(sel), gi.take(sel)
                    cols.append(d.cols.take(self._out_idx, axis=0).take(rs, axis=1))
                    counts.append(d.counts.take(rs))
                    gids.append(t.gids.take(gs))
                    if expiry is not None:
                        expiry.add(pair_ends(dmins, t.ranges, rs, gs), cols[-1], counts[-1], gids[-1])
        self._closes = closes
        if t.any_fresh:
            t.started[:] = True
            t.any_fresh = False
        if not cols:
            return Batch.empty(())
        allc = cols[0] if len(cols) == 1 else np.concatenate(cols, axis=1)
        g_col = gids[0] if len(gids) == 1 else np.concatenate(gids)
        delta = consolidate(
            Batch(
                self._gvars,
                np.vstack([g_col[None, :], allc]),
                counts[0] if len(counts) == 1 else np.concatenate(counts),
            )
        )
        if not len(delta):
            return Batch.empty(())
        before = self.counts.counted_apply(delta)
        after = before + delta.counts
        enter, leave = (before <= 0) & (after > 0), (before > 0) & (after <= 0)
        moved = (enter | leave).nonzero()[0]
        if not len(moved):
            return Batch.empty(())
        # split the moved rows per group (the delta is sorted by group id first)
        mg = delta.cols[0].take(moved)
        sign = np.where(enter.take(moved), 1, -1).astype(np.int64)
        starts = np.concatenate(([True], mg[1:] != mg[:-1])).nonzero()[0]
        ends = np.append(starts[1:], len(mg))
        # (no per-group work here: most groups' queries are kept by routed blocks, which
        # read :attr:`tagged`; a route's rows are cut out when it asks)
        self._emit_src = (delta.cols[1:], moved, sign)
        self._emit = (mg.take(starts), starts, ends, t.by_gid)
        if self.aggregates or self.taggers:
            tagged = Batch(self._gvars, delta.cols.take(moved, axis=1), sign)
            self.tagged = concat([self.tagged, tagged], self._gvars) if len(self.tagged) else tagged
        return Batch.empty(())

    def _expiry_of(self, old: list[Batch], t: GroupTable, close: int) -> Expiry:
        """The pairs of the rows already joined (parts ``old``) that qualify at ``close``
        (every group started, no upper bound), by when they leave (:class:`Expiry`)."""
        ex = Expiry(close)
        hid = self._hid_idx
        for part in old:
            ri, gi = t.pairs(part.cols.take(hid, axis=0) if hid else part.cols[:0])
            e = pair_ends(self._mins(part.cols), t.ranges, ri, gi)
            keep = (e >= close).nonzero()[0]
            if len(keep):
                rs = ri.take(keep)
                ex.add(
                    e.take(keep),
                    part.cols.take(self._out_idx, axis=0).take(rs, axis=1),
                    part.counts.take(rs),
                    t.gids.take(gi.take(keep)),
                )
        return ex

    def _old_change(
        self,
        part: Batch,
        t: GroupTable,
        bounds: list,
        pb: list | None,
        changed: np.ndarray | None,
        same: bool,
        slid: bool,
        upper: bool,
        out: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]],
    ) -> None:
        """Appends to ``out`` (columns, counts, group ids) the change of the groups'
        results from the rows of ``part`` (rows joined before this epoch) whose
        qualification changed: the windows moved from ``pb`` to ``bounds`` (``slid``:
        forward only), or a group is new."""
        cols, counts, gids = out
        hid = self._hid_idx
        ocols, ocounts = part.cols, part.counts
        mins = self._mins(ocols)
        maxs = self._maxs(ocols) if upper else None
        if slid:
            assert pb is not None
            # the windows only slid forward: a row qualifies now as before for every
            # group unless, in some slot, its earliest timestamp fell below the group's
            # lower bound or its latest one reached the group's upper bound -- and a row
            # below every group's former lower bound in some slot qualified for no
            # group then, nor now
            near = far = None
            for s, (m, (lo, hi), (plo, phi)) in enumerate(zip(mins, bounds, pb)):
                x, y = m < int(lo.max()), m >= int(plo.min())
                if hi is not None and phi is not None:
                    assert maxs is not None
                    x |= maxs[s] >= int(phi.min())
                near = x if near is None else (near | x)
                far = y if far is None else (far & y)
            assert near is not None and far is not None  # a router has a slot
            sub = (near & far).nonzero()[0]
            if len(sub) < len(ocounts):
                ocols, ocounts = ocols.take(sub, axis=1), ocounts.take(sub)
                mins = [m.take(sub) for m in mins]
                if maxs is not None:
                    maxs = [m.take(sub) for m in maxs]
        ri, gi = t.pairs(ocols.take(hid, axis=0) if hid else ocols[:0])
        if same:  # only the new groups can change
            keep = ~t.started.take(gi)
            ri, gi = ri[keep], gi[keep]
        elif changed is not None:  # and those whose window instance moved
            keep = changed.take(gi) | ~t.started.take(gi)
            ri, gi = ri[keep], gi[keep]
        if not len(ri):
            return
        change = t.qualify(mins, maxs, bounds, ri, gi).astype(np.int64)
        if pb is not None:
            before = t.qualify(mins, maxs, pb, ri, gi)
            before &= t.started.take(gi)
            change -= before
        sel = change.nonzero()[0]
        if len(sel):
            rs = ri.take(sel)
            cols.append(ocols.take(self._out_idx, axis=0).take(rs, axis=1))
            counts.append(change.take(sel) * ocounts.take(rs))
            gids.append(t.gids.take(gi.take(sel)))

    @property
    def emitted(self) -> dict[tuple, tuple[int, int]]:
        """The groups whose result changed this epoch -> their rows' range in the delta."""
        got = self._emitted
        if got is None:
            got = {}
            if self._emit is not None:
                sg, starts, ends, by_gid = self._emit
                groups = self.groups
                for g, lo, hi in zip(sg.tolist(), starts.tolist(), ends.tolist(), strict=True):
                    key = by_gid[g]
                    grp = groups.get(key)
                    if grp is not None and grp.gid == g:  # (not removed since)
                        got[key] = (lo, hi)
            self._emitted = got
        return got

    def emitted_rows(self, key: tuple) -> Batch | None:
        """This epoch's change of group ``key``'s result (``None``: none)."""
        e, grp = self._emit, self.groups.get(key)
        if e is None or grp is None or self._emit_src is None:
            return None
        sg, starts, ends, _ = e
        i = int(sg.searchsorted(grp.gid))
        if i == len(sg) or int(sg[i]) != grp.gid:
            return None
        lo, hi = int(starts[i]), int(ends[i])
        cols, moved, sign = self._emit_src
        return Batch(self.out_vars, cols.take(moved[lo:hi], axis=1), sign[lo:hi])

    def tagged_current(self) -> Batch:
        """Every group's current result, tagged with the group id (each binding once)."""
        rows = self.counts.rows
        rows = rows.mask(rows.counts > 0)
        return rows.with_counts(np.ones(len(rows), dtype=np.int64))


class TaggedDeltaOperator(Operator):
    """A router's change of every group's result per epoch, tagged with the group id: the
    input of an aggregate computed for all of the router's groups at once.  Its first delta
    also holds the groups' results from before it was created."""

    event_driven = False
    migratable = False

    def __init__(self, router: RouterOperator) -> None:
        super().__init__()
        self.router = router
        self.vars = router._gvars
        self.certain = frozenset(self.vars)
        self._start: Batch | None = router.tagged_current()
        #: (created after the router evaluated this epoch: its results hold that change)
        self._start_epoch = router._epoch

    def compute(self, epoch: int) -> Batch:
        self.router.delta(epoch)
        d = self.router.tagged
        if self._start is not None:
            start, self._start = self._start, None
            if self._start_epoch == epoch:
                return start
            if len(start):
                d = concat([start, d], self.vars)
        return d


class RouteOperator(Operator):
    """One subscriber group's view of a router: the group's result as +/- deltas."""

    #: the engine must not put an AttachOperator between a route and its router
    attach_children = False
    event_driven = False
    #: shared-join state serves every query of the join: a query using it is rebuilt, not
    #: migrated (:mod:`linkstream.operators.state`); task checkpoints snapshot it once per
    #: router (:mod:`linkstream.operators.shared_state`)
    migratable = False

    def __init__(self, router: RouterOperator, key: tuple, certain: frozenset[str]) -> None:
        super().__init__()
        self.router = router
        self.children = (router,)
        self.key = key
        self.vars = router.out_vars
        self.certain = certain
        router.add_group(key)
        self._discarded = False

    def describe(self) -> str:
        ranges, consts = self.key[0], self.key[1]
        steps = f" steps={list(self.key[2])}" if len(self.key) > 2 else ""
        return f"Route ranges={list(ranges)}{steps} consts={dict(consts)}"

    def config_key(self) -> object:
        return (self.key, tuple(sorted(self.certain)))

    def current(self) -> Batch:
        return self.router.present(self.key)

    def compute(self, epoch: int) -> Batch:
        self.router.delta(epoch)
        out = self.router.emitted_rows(self.key)
        return out if out is not None else Batch.empty(self.vars)

    def discard(self) -> None:
        if not self._discarded:
            self._discarded = True
            self.router.remove_group(self.key)
