"""Projection and UNION: stateless reshaping of deltas."""

from __future__ import annotations

from collections.abc import Sequence

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, concat


class ProjectOperator(Operator):
    """Keeps ``vars`` (a variable the child never binds stays unbound)."""

    def __init__(self, child: Operator, vars: Sequence[str]) -> None:
        super().__init__()
        self.child = child
        self.children = (child,)
        self.vars = tuple(vars)
        self.certain = frozenset(v for v in self.vars if v in child.certain)

    def describe(self) -> str:
        return "Project " + " ".join("?" + v for v in self.vars)

    def config_key(self) -> object:
        return self.vars

    def current(self) -> Batch:
        return self.child.current().project(self.vars)

    def compute(self, epoch: int) -> Batch:
        return self.child.delta(epoch).project(self.vars)


class UnionOperator(Operator):
    """Bag union of its children (variables of one side are unbound in the other's rows)."""

    def __init__(self, children: Sequence[Operator]) -> None:
        super().__init__()
        self.children = tuple(children)
        vs: list[str] = []
        for c in self.children:
            vs.extend(v for v in c.vars if v not in vs)
        self.vars = tuple(vs)
        cert = set(self.children[0].certain)
        for c in self.children[1:]:
            cert &= c.certain
        self.certain = frozenset(cert)

    def config_key(self) -> object:
        return self.vars

    def current(self) -> Batch:
        return concat([c.current() for c in self.children], self.vars)

    def compute(self, epoch: int) -> Batch:
        return concat([c.delta(epoch) for c in self.children], self.vars)
