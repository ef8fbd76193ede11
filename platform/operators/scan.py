"""Triple-pattern matching: graph deltas in, mapping deltas out."""

from __future__ import annotations

from typing import Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch

#: a pattern position: ("var", name) or ("const", id) (the value's type follows the tag)
Slot = tuple[str, Any]


class ScanOperator(Operator):
    """Matches one triple pattern against the deltas of one graph.

    Constant positions become equality masks, a variable repeated inside the pattern
    becomes an equality between columns; all of it vectorised over the delta.
    """

    def __init__(self, graph: Operator, pattern: tuple[Slot, Slot, Slot]) -> None:
        super().__init__()
        self.graph = graph
        self.children = (graph,)
        self.pattern = pattern
        self.consts = [(i, int(v)) for i, (k, v) in enumerate(pattern) if k == "const"]
        first: dict[str, int] = {}
        self.repeats: list[tuple[int, int]] = []
        for i, (k, v) in enumerate(pattern):
            if k == "var":
                if v in first:
                    self.repeats.append((first[v], i))
                else:
                    first[v] = i
        self.positions = list(first.values())
        self.vars = tuple(first.keys())
        self.certain = frozenset(self.vars)
        kind, val = pattern[1]
        #: constant predicate: read only the graph delta's slice for it
        self.predicate = int(val) if kind == "const" else None
        #: the constants left to test on that slice (its rows all have the predicate)
        self.slice_consts = (
            [(i, c) for i, c in self.consts if i != 1] if self.predicate is not None else self.consts
        )
        self.examined = 0  # graph-delta rows this scan looked at (sharing tests, stats)

    def describe(self) -> str:
        parts = [("?" + str(v)) if k == "var" else f"#{v}" for k, v in self.pattern]
        return "Scan (" + " ".join(parts) + ") on " + getattr(self.graph, "name", "?")

    def match(self, d: Batch, consts: list[tuple[int, int]] | None = None) -> Batch:
        """The mappings of the triples of ``d`` that match the pattern (``consts``: the
        constant positions to test, default all of them)."""
        if not len(d):
            return Batch.empty(self.vars)
        cols = d.cols
        m = None
        for i, c in self.consts if consts is None else consts:
            x = cols[i] == c
            m = x if m is None else (m & x)
        for i, j in self.repeats:
            x = cols[i] == cols[j]
            m = x if m is None else (m & x)
        if m is None:
            return Batch(self.vars, cols.take(self.positions, axis=0), d.counts)
        idx = m.nonzero()[0]
        if len(idx) == 0:
            return Batch.empty(self.vars)
        # (two takes: ``np.ix_`` checks its arguments' dtypes at every call)
        return Batch(
            self.vars,
            cols.take(idx, axis=1).take(self.positions, axis=0)
            if self.positions
            else np.empty((0, len(idx)), dtype=np.int64),
            d.counts.take(idx),
        )

    def config_key(self) -> object:
        return self.pattern

    def current(self) -> Batch:
        return self.match(self.graph.current())

    def compute(self, epoch: int) -> Batch:
        if self.predicate is not None:
            d = self.graph.predicate_slice(epoch, self.predicate)
            self.examined += len(d)
            return self.match(d, self.slice_consts)
        d = self.graph.delta(epoch)
        self.examined += len(d)
        return self.match(d)
