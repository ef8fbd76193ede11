"""FILTER: a stateless mask over each delta (inserts and expiries alike)."""

from __future__ import annotations

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch
from linkstream.operators.evaluate import Evaluator
from linkstream.query.expressions import Expr


class FilterOperator(Operator):
    """Keeps the rows whose filter expression has effective boolean value true."""

    def __init__(self, child: Operator, exprs: list[Expr], evaluator: Evaluator) -> None:
        super().__init__()
        self.child = child
        self.children = (child,)
        self.exprs = exprs
        self.evaluator = evaluator
        self.vars = child.vars
        self.certain = child.certain

    def describe(self) -> str:
        return f"Filter x{len(self.exprs)}"

    def apply(self, d: Batch) -> Batch:
        for e in self.exprs:
            if not len(d):
                break
            d = d.mask(self.evaluator.filter_mask(e, d))
        return d

    def config_key(self) -> object:
        return tuple(self.exprs)

    def current(self) -> Batch:
        return self.apply(self.child.current())

    def compute(self, epoch: int) -> Batch:
        return self.apply(self.child.delta(epoch))
