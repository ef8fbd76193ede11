"""Filters in routed blocks: members that differ in a FILTER / HAVING constant.

Thousands of template queries on one router's groups often differ after the route only
in the constant of a comparison (``FILTER(?v > 0.01)``, ``HAVING (COUNT(?o) > 2)``:
the CityBench Q7 / Q12 templates).  Through their own operators each costs a filter,
a rename and a projection per epoch.  A :class:`~linkstream.engine.routed.RoutedBlock`
serves them together instead:

* :func:`parametrise` turns a filter expression into a *template* (every constant
  operand of a comparison replaced by a parameter variable ``%param<j>``) and the ids of
  those constants; views whose chains have equal templates share a block;
* a block's *slot* is a (router group, parameter values) pair (:class:`Slots`): the
  members with equal groups and equal constants share one slot and one result;
* at each epoch the group-tagged change goes through the chain once: at the first filter
  the rows of each group are repeated once per slot of that group (re-tagged with the
  slot id), and every filter is evaluated once over all those rows with the parameter
  columns looked up by slot id -- one vectorised evaluation for all members, no
  operator chain per member.

A parameter column holds exactly the constant's id, and the evaluator reads a variable's
ids as it reads a constant's (:meth:`~linkstream.operators.evaluate.Evaluator.evaluate`),
so the comparison semantics (numeric promotion, errors on terms that do not compare,
unbound values) are the filter's own: a row passes for a slot exactly when the member's
own :class:`~linkstream.operators.filter.FilterOperator` would keep it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from linkstream.operators.batch import Batch
from linkstream.operators.evaluate import Evaluator
from linkstream.query.expressions import And, Cmp, Const, Expr, Not, Or, Var

PARAM = "%param"


def parametrise(e: Expr, params: list[int]) -> Expr:
    """``e`` with each constant operand of a comparison (under AND / OR / NOT) replaced by
    ``Var("%param<j>")``; appends the constants' ids to ``params`` (``j``: their index)."""
    if isinstance(e, Cmp):
        a, b = e.a, e.b
        if isinstance(a, Const):
            params.append(a.id)
            a = Var(f"{PARAM}{len(params) - 1}")
        if isinstance(b, Const):
            params.append(b.id)
            b = Var(f"{PARAM}{len(params) - 1}")
        return e if a is e.a and b is e.b else replace(e, a=a, b=b)
    if isinstance(e, (And, Or)):
        return replace(e, a=parametrise(e.a, params), b=parametrise(e.b, params))
    if isinstance(e, Not):
        return replace(e, a=parametrise(e.a, params))
    return e


class Slots:
    """A block's slots: (router group id, parameter ids) -> slot id, and back."""

    def __init__(self, nparams: int) -> None:
        self.nparams = nparams
        self.by_key: dict[tuple[int, tuple[int, ...]], int] = {}
        self.gid: dict[int, int] = {}  # slot -> its router group
        self._next = 0
        #: parameter ids by slot (row ``sid``; rows of freed slots are left as they were)
        self.params = np.zeros((0, nparams), dtype=np.int64)
        self._index: tuple[np.ndarray, np.ndarray] | None = None  # (gids, sids) by gid

    def slot(self, gid: int, params: tuple[int, ...]) -> int:
        """The slot of ``(gid, params)`` (made when new)."""
        key = (gid, params)
        sid = self.by_key.get(key)
        if sid is None:
            sid = self.by_key[key] = self._next
            self._next += 1
            self.gid[sid] = gid
            if sid >= len(self.params):
                more = np.zeros((max(16, len(self.params)), self.nparams), dtype=np.int64)
                self.params = np.concatenate([self.params, more])
            self.params[sid] = params
            self._index = None
        return sid

    def drop(self, sid: int) -> None:
        gid = self.gid.pop(sid)
        del self.by_key[(gid, tuple(self.params[sid].tolist()))]
        self._index = None

    def gids(self) -> set[int]:
        return set(self.gid.values())

    def clear(self) -> None:
        self.by_key.clear()
        self.gid.clear()
        self._index = None

    def expand(self, d: Batch, only: int | None = None) -> Batch:
        """The rows of ``d`` (column 0: router group) once per slot of their group,
        column 0 the slot id (``only``: that slot's rows alone)."""
        g = d.cols[0]
        if only is not None:
            keep = g == self.gid[only]
            cols = d.cols[:, keep]
            cols[0] = only
            return Batch(d.vars, cols, d.counts[keep])
        idx = self._index
        if idx is None:
            sids = np.fromiter(self.gid, dtype=np.int64, count=len(self.gid))
            gids = np.fromiter(self.gid.values(), dtype=np.int64, count=len(self.gid))
            order = np.argsort(gids, kind="stable")
            idx = self._index = (gids[order], sids[order])
        sg, ss = idx
        lo = sg.searchsorted(g, "left")
        n = sg.searchsorted(g, "right") - lo
        total = int(n.sum())
        rows = np.repeat(np.arange(len(g), dtype=np.int64), n)
        # each repeated row's rank among its copies, plus its group's first slot
        first = np.cumsum(n) - n
        at = np.arange(total, dtype=np.int64) - np.repeat(first - lo, n)
        cols = d.cols.take(rows, axis=1)
        cols[0] = ss.take(at)
        return Batch(d.vars, cols, d.counts.take(rows))

    def filter(self, ev: Evaluator, exprs: tuple[Expr, ...], names: tuple[str, ...], d: Batch) -> Batch:
        """The rows of ``d`` (column 0: slot id) that pass every one of ``exprs`` with
        the parameter variables ``names`` bound to their slot's constants."""
        if not len(d):
            return d
        if names:
            pcols = self.params[:, [int(x[len(PARAM) :]) for x in names]].T.take(d.cols[0], axis=1)
            b = Batch((*d.vars, *names), np.vstack([d.cols, pcols]), d.counts)
        else:
            b = d
        for e in exprs:  # (one after the other, as FilterOperator.apply)
            if not len(b):
                break
            b = b.mask(ev.filter_mask(e, b))
        return b.project(d.vars) if names else b
