"""Semi- and anti-joins on certainly-bound keys: FILTER EXISTS, FILTER NOT EXISTS, MINUS.

The right input is reduced to a reference count per key.  A left row passes an anti-join
while its key's count is 0 (a semi-join while it is positive).  When a key's count leaves
or returns to 0, the stored left rows with that key are retracted or re-emitted: these are
the *negative mappings* of CQELS' incremental negation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, concat, consolidate
from linkstream.operators.relation import Relation

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter


class KeyedNegationOperator(Operator):
    """``mode="anti"``: left rows with no right row sharing their key; ``"semi"``: with one."""

    def __init__(self, left: Operator, right: Operator, keys: Sequence[str], mode: str) -> None:
        super().__init__()
        if mode not in ("anti", "semi"):
            raise ValueError(mode)
        self.left, self.right = left, right
        self.children = (left, right)
        self.keys = tuple(keys)
        self.mode = mode
        self.vars = left.vars
        self.certain = left.certain
        self.lstate = Relation(left.vars)
        self.rkeys = Relation(self.keys)

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The left rows and the right keys' counts."""
        return {"lstate": w.relation(self.lstate), "rkeys": w.relation(self.rkeys)}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("lstate", "rkeys"))
        self.lstate = r.relation(entries["lstate"], self.lstate)
        self.rkeys = r.relation(entries["rkeys"], self.rkeys)

    def describe(self) -> str:
        return f"{'AntiJoin' if self.mode == 'anti' else 'SemiJoin'} on " + ",".join(self.keys)

    def config_key(self) -> object:
        return (self.keys, self.mode)

    def current(self) -> Batch:
        left = self.lstate.rows
        if not len(left):
            return left
        present = self.rkeys.key_counts(left, self.keys) > 0 if len(self.rkeys) else np.zeros(len(left), bool)
        return left.mask(~present if self.mode == "anti" else present)

    def compute(self, epoch: int) -> Batch:
        dl = self.left.delta(epoch)
        dr = self.right.delta(epoch)
        out = []
        if len(dr):
            dk = consolidate(dr.project(self.keys))
            if len(dk):
                old = self.rkeys.key_counts(dk, self.keys) if len(self.rkeys) else np.zeros(len(dk), np.int64)
                new = old + dk.counts
                appear = (old <= 0) & (new > 0)
                vanish = (old > 0) & (new <= 0)
                self.rkeys.apply(dk)
                ch = appear | vanish
                if ch.any() and len(self.lstate):
                    sign = np.where(appear[ch], 1, -1).astype(np.int64)
                    if self.mode == "anti":
                        sign = -sign
                    flips = Batch(self.keys, dk.cols[:, ch], sign)
                    out.append(self.lstate.join(flips, self.vars))
        if len(dl):
            if len(self.rkeys):
                present = self.rkeys.key_counts(dl, self.keys) > 0
            else:
                present = np.zeros(len(dl), dtype=bool)
            keep = ~present if self.mode == "anti" else present
            out.append(dl.mask(keep))
            self.lstate.apply(dl)
        if not out:
            return Batch.empty(self.vars)
        return concat(out, self.vars)
