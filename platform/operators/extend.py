"""BIND / projection expressions: a stateless new column per delta."""

from __future__ import annotations

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch
from linkstream.operators.evaluate import Evaluator
from linkstream.query.expressions import Expr


class ExtendOperator(Operator):
    """Adds ``var`` = value of ``expr`` (unbound where the expression errs)."""

    def __init__(self, child: Operator, var: str, expr: Expr, evaluator: Evaluator) -> None:
        super().__init__()
        self.child = child
        self.children = (child,)
        self.var = var
        self.expr = expr
        self.evaluator = evaluator
        if var in child.vars:
            raise ValueError(f"BIND of ?{var}, which is already in scope")
        self.vars = child.vars + (var,)
        self.certain = child.certain

    def describe(self) -> str:
        return f"Extend ?{self.var}"

    def config_key(self) -> object:
        return (self.var, self.expr)

    def current(self) -> Batch:
        return self._extend(self.child.current())

    def compute(self, epoch: int) -> Batch:
        return self._extend(self.child.delta(epoch))

    def _extend(self, d: Batch) -> Batch:
        if not len(d):
            return Batch.empty(self.vars)
        v = self.evaluator.values(self.expr, d)
        return Batch(self.vars, np.vstack([d.cols, v[None, :]]), d.counts)
