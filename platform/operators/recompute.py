"""Operators evaluated from their inputs' full contents, for the cases with no exact
incremental form here (keys that may be unbound, per-evaluation ORDER BY + LIMIT in a
subquery).  Inputs are still maintained incrementally; only this operator recomputes, and
only in epochs where an input changed.  Its output is the difference to the previous
result, so everything downstream stays incremental.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, compatible_pairs_broadcast, concat, consolidate, merge_columns
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.relation import Relation, union_vars
from linkstream.query.expressions import Expr

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter

BatchFn = Callable[[list[Batch]], Batch]


class RecomputeOperator(Operator):
    """Applies ``fn`` to the full inputs whenever one changes; emits the difference."""

    def __init__(
        self, children: Sequence[Operator], fn: BatchFn, vars: Sequence[str], certain, label: str
    ) -> None:
        super().__init__()
        self.children = tuple(children)
        self.fn = fn
        self.vars = tuple(vars)
        self.certain = frozenset(certain)
        self.state = [Relation(c.vars) for c in self.children]
        self.result = Batch.empty(self.vars)
        self.label = label
        self._first = True

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The inputs' contents, the current result and the first-epoch flag."""
        return {"state": w.relations(self.state), "result": w.batch(self.result), "_first": self._first}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("state", "result", "_first"))
        self.state = r.relations(entries["state"], self.state)
        self.result = r.batch(entries["result"], self.vars)
        self._first = r.value(entries["_first"], bool)

    def describe(self) -> str:
        return f"Recompute {self.label}"

    def current(self) -> Batch:
        return self.result

    def compute(self, epoch: int) -> Batch:
        changed = self._first
        self._first = False
        for c, s in zip(self.children, self.state):
            d = c.delta(epoch)
            if len(d):
                s.apply(d)
                changed = True
        if not changed:
            return Batch.empty(self.vars)
        new = consolidate(self.fn([s.rows for s in self.state]).project(self.vars))
        diff = consolidate(concat([new, self.result.negate()], self.vars))
        self.result = new
        return diff


def _compat(left: Batch, right: Batch) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    shared = tuple(v for v in left.vars if v in right.vars)
    a = left.project(shared).cols
    b = right.project(shared).cols
    if not shared:
        n, m = len(left), len(right)
        return np.repeat(np.arange(n), m), np.tile(np.arange(m), n), shared
    i, j = compatible_pairs_broadcast(a, b)
    return i, j, shared


def left_join_batch(evaluator: Evaluator, expr: Expr | None) -> BatchFn:
    """OPTIONAL over full inputs: compatible pairs passing ``expr``, else the left row."""

    def fn(inputs: list[Batch]) -> Batch:
        left, right = inputs
        out_vars = union_vars(left.vars, right.vars)
        i, j, _ = _compat(left, right)
        joined = Batch(out_vars, merge_columns(out_vars, left, i, right, j), left.counts[i] * right.counts[j])
        if expr is not None and len(joined):
            m = evaluator.filter_mask(expr, joined)
            joined, i = joined.mask(m), i[m]
        matched = np.zeros(len(left), dtype=bool)
        matched[i] = True
        return concat([joined, left.mask(~matched)], out_vars)

    return fn


def minus_batch(inputs: list[Batch]) -> Batch:
    """MINUS: drop left rows compatible with a right row that shares a bound variable."""
    left, right = inputs
    i, j, shared = _compat(left, right)
    if not shared or not len(i):
        return left
    a = left.project(shared).cols[:, i]
    b = right.project(shared).cols[:, j]
    overlap = np.any((a != 0) & (b != 0), axis=0)
    drop = np.zeros(len(left), dtype=bool)
    drop[i[overlap]] = True
    return left.mask(~drop)


def exists_batch(negated: bool) -> BatchFn:
    """FILTER (NOT) EXISTS as a semi/anti-join on compatibility."""

    def fn(inputs: list[Batch]) -> Batch:
        left, right = inputs
        i, _, _ = _compat(left, right)
        hit = np.zeros(len(left), dtype=bool)
        hit[i] = True
        return left.mask(~hit if negated else hit)

    return fn
