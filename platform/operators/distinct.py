"""DISTINCT: a reference count per row; a row is emitted when its count leaves or returns to 0."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, consolidate
from linkstream.operators.relation import Relation

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter


class DistinctOperator(Operator):
    """Set semantics over the child's bag: +1 when a row appears, -1 when its last copy goes."""

    def __init__(self, child: Operator) -> None:
        super().__init__()
        self.child = child
        self.children = (child,)
        self.vars = child.vars
        self.certain = child.certain
        self.state = Relation(self.vars)

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The count of every row."""
        return {"state": w.relation(self.state)}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("state",))
        self.state = r.relation(entries["state"], self.state)

    def config_key(self) -> object:
        return ()

    def current(self) -> Batch:
        r = self.state.rows
        r = r.mask(r.counts > 0)
        return r.with_counts(np.ones(len(r), dtype=np.int64))

    def compute(self, epoch: int) -> Batch:
        d = consolidate(self.child.delta(epoch))
        if not len(d):
            return Batch.empty(self.vars)
        old = self.state.key_counts(d, self.vars) if len(self.state) else np.zeros(len(d), dtype=np.int64)
        new = old + d.counts
        self.state.apply(d)
        enter = (old <= 0) & (new > 0)
        leave = (old > 0) & (new <= 0)
        ch = enter | leave
        return Batch(self.vars, d.cols[:, ch], np.where(enter[ch], 1, -1).astype(np.int64))
