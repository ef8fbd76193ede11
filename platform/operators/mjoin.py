"""Multiway join (MJoin) with an adaptive probing order.

The join keeps one :class:`~.relation.Relation` per input.  A delta of input *i* is joined
with the current state of every other input, one input at a time, in an order chosen at
that moment from live cardinalities: next is always the smallest input that shares a
variable with what has been joined so far (cross products only when nothing connects),
and the probe stops as soon as the intermediate result is empty.  Deltas of several
inputs in one epoch are applied one after the other, which is the standard incremental
rule  d(R1..Rn) = sum_i R1'..R(i-1)' dRi R(i+1)..Rn  (primed = already updated).

Filters whose variables are all certainly bound by a set of inputs are evaluated as soon
as the intermediate result binds them (filter push-down into the join).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..query.expressions import Expr
from .base import Operator
from .batch import Batch, concat, consolidate
from .evaluate import Evaluator
from .relation import Relation, union_vars


class MJoinOperator(Operator):
    """n-ary natural join (SPARQL compatibility) of its children."""

    def __init__(
        self,
        children: Sequence[Operator],
        filters: Sequence[Expr] = (),
        evaluator: Evaluator | None = None,
    ) -> None:
        super().__init__()
        self.children = tuple(children)
        vs: tuple[str, ...] = ()
        cert: set[str] = set()
        for c in self.children:
            vs = union_vars(vs, c.vars)
            cert |= c.certain
        self.vars = vs
        self.certain = frozenset(cert)
        self.state = [Relation(c.vars) for c in self.children]
        self.filters = [(f, f.vars()) for f in filters]
        self.evaluator = evaluator
        self.probes = 0  # number of relation probes done (for stats / tests)

    def describe(self) -> str:
        f = f" filters={len(self.filters)}" if self.filters else ""
        return f"MJoin n={len(self.children)}{f}"

    def _apply_filters(self, b: Batch, done: set[int], bound: set[str]) -> Batch:
        for k, (f, fv) in enumerate(self.filters):
            if k in done or not fv <= bound:
                continue
            done.add(k)
            if len(b):
                assert self.evaluator is not None
                b = b.mask(self.evaluator.filter_mask(f, b))
        return b

    def _child_vars(self) -> list[frozenset[str]]:
        cache = self.__dict__.get("_cvars")
        if cache is None or cache[0] is not self.children:
            cache = self._cvars = (self.children, [frozenset(c.vars) for c in self.children])
        return cache[1]

    def _probe(self, i: int, d: Batch) -> Batch:
        state = self.state
        remaining = [j for j in range(len(self.children)) if j != i]
        for j in remaining:  # (checked first: it makes the whole probe empty)
            if not len(state[j]):
                return Batch.empty(self.vars)
        cur = d
        bound = set(d.vars) & self.children[i].certain
        done: set[int] = set()
        filters = bool(self.filters)
        if filters:
            cur = self._apply_filters(cur, done, bound)
        cvars = self._child_vars()
        while remaining and len(cur):
            cv = cur.vars
            connected = [j for j in remaining if not cvars[j].isdisjoint(cv)]
            pool = connected or remaining
            j = pool[0] if len(pool) == 1 else min(pool, key=lambda k: len(state[k]))
            remaining.remove(j)
            cur = state[j].join(cur)
            self.probes += 1
            if filters:
                bound |= self.children[j].certain
                cur = self._apply_filters(cur, done, bound)
        if not len(cur):
            return Batch.empty(self.vars)
        return self._apply_filters(cur, done, set(self.vars)).project(self.vars)

    def config_key(self) -> object:
        return tuple(f for f, _ in self.filters)

    def current(self) -> Batch:
        if not self.state or any(len(s) == 0 for s in self.state):
            return Batch.empty(self.vars)
        i = min(range(len(self.state)), key=lambda k: len(self.state[k]))
        return consolidate(self._probe(i, self.state[i].rows))

    def compute(self, epoch: int) -> Batch:
        deltas = [c.delta(epoch) for c in self.children]
        out = []
        for i, d in enumerate(deltas):
            if not len(d):
                continue
            d = consolidate(d)
            if not len(d):
                continue
            r = self._probe(i, d)
            if len(r):
                out.append(r)
            self.state[i].apply(d)
        if not out:
            return Batch.empty(self.vars)
        return concat(out, self.vars)
