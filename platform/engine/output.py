"""The output edge of a query: RStream / IStream / DStream, ASK, CONSTRUCT, and the
per-evaluation ORDER BY / LIMIT / OFFSET (SEMANTICS.md §6).

Without LIMIT/OFFSET the output is incremental: the plan's root delta updates the
materialised result and IStream/DStream are read straight off the delta.  With a slice,
the current result is sorted and sliced at every report.  Decoding to N-Triples happens
here and only here, once per distinct id of the report.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence

import numpy as np

from ..operators.base import Operator
from ..operators.batch import Batch, concat, consolidate
from ..operators.evaluate import Evaluator
from ..operators.relation import Relation
from ..query import functions as F
from ..query.expressions import Expr
from ..query.planner import QueryShape

_bnode_counter = itertools.count(1)


def order_rows(ev: Evaluator, rows: Batch, order: Sequence[tuple[Expr, bool]]) -> np.ndarray:
    """Row order for ORDER BY (SPARQL ordering of terms, stable)."""
    keys = []
    for e, desc in order:
        ids = ev.values(e, rows)
        uniq, inv = np.unique(ids, return_inverse=True)
        ranked = sorted(
            range(len(uniq)), key=lambda k: F.order_key(ev.terms.term(int(uniq[k])) if uniq[k] else None)
        )
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[ranked] = np.arange(len(uniq))
        r = rank[inv.reshape(-1)]
        keys.append(-r if desc else r)
    if not keys:
        return np.arange(len(rows))
    return np.lexsort(keys[::-1])


class QueryOutput:
    """Turns a plan root's deltas into the result lines of each report."""

    def __init__(self, name: str, mode: str, root: Operator, shape: QueryShape, evaluator: Evaluator) -> None:
        self.name = name
        self.mode = mode
        self.shape = shape
        self.ev = evaluator
        self.root = root
        if shape.form == "SELECT":
            self.vars = shape.project if shape.project is not None else root.vars
        elif shape.form == "CONSTRUCT":
            self.vars = tuple(dict.fromkeys(v for tr in shape.template for k, v in tr if k == "var"))
        else:
            self.vars = ()
        self.full = Relation(root.vars)
        self.sliced = bool(shape.limit is not None or shape.offset)
        self.result = Relation(self.vars)  # current result (after projection/distinct/slice)
        self._qname = json.dumps(name, ensure_ascii=False)
        self._started = False
        self._bodies: list[str] | None = None

    def _current(self) -> Batch:
        rows = self.full.rows
        rows = rows.take(rows.expand()) if len(rows) else rows
        if self.shape.order:
            rows = rows.take(order_rows(self.ev, rows, self.shape.order))
        rows = rows.project(self.vars)
        if self.shape.distinct and len(rows):
            _, first = np.unique(rows.cols, axis=1, return_index=True)
            rows = rows.take(np.sort(first))
        if self.sliced:
            end = None if self.shape.limit is None else self.shape.offset + self.shape.limit
            rows = rows.take(np.arange(len(rows))[self.shape.offset : end])
        return Batch(self.vars, rows.cols, np.ones(len(rows), dtype=np.int64))

    def update(self, epoch: int) -> Batch:
        """Apply this epoch's root delta; return the delta of the visible result."""
        d = self.root.delta(epoch)
        if self.sliced or (self.shape.distinct and self.shape.form == "SELECT"):
            if not len(d) and self._started:
                return Batch.empty(self.vars)
            self._started = True
            self.full.apply(d)
            new = consolidate(self._current())
            delta = consolidate(concat([new, self.result.rows.negate()], self.vars))
            self.result.replace(new)
            return delta
        d = d.project(self.vars)
        self.result.apply(d)
        return consolidate(d)

    def lines(self, epoch: int, t: int) -> list[str]:
        """Result lines of the report at time ``t``."""
        delta = self.update(epoch)
        form = self.shape.form
        head = '{"query": %s, "t": %d, ' % (self._qname, t)
        if form == "ASK":
            return [head + '"ask": %s}' % ("true" if len(self.result.rows) else "false")]
        if self.mode == "ISTREAM":
            rows = delta.mask(delta.counts > 0)
        elif self.mode == "DSTREAM":
            rows = delta.mask(delta.counts < 0).negate()
        else:
            # RStream repeats the whole result: when it did not change, the rendered rows
            # of the previous report are reused and only the report time differs.
            if len(delta) or self._bodies is None:
                rows = self.result.rows
                rows = rows.take(rows.expand()) if len(rows) else rows
                self._bodies = self._render(rows) if len(rows) else []
            return [head + b for b in self._bodies]
        if not len(rows):
            return []
        return [head + b for b in self._render(rows.take(rows.expand()))]

    def _render(self, rows: Batch) -> list[str]:
        """Everything of each result line after its ``{"query": .., "t": .., `` head."""
        if self.shape.form == "CONSTRUCT":
            return self._construct(rows, "")
        return self._bindings(rows, "")

    def _decoder(self, cols: np.ndarray):
        uniq = np.unique(cols)
        uniq = uniq[uniq != 0]
        texts = self.ev.terms.dictionary.decode_many(uniq)
        return uniq, [json.dumps(s, ensure_ascii=False) for s in texts]

    def _bindings(self, rows: Batch, head: str) -> list[str]:
        uniq, texts = self._decoder(rows.cols)
        if not len(rows.vars):
            return [head + '"binding": {}}'] * len(rows)
        names = [json.dumps(v, ensure_ascii=False) + ": " for v in rows.vars]
        pos = np.searchsorted(uniq, rows.cols)
        out = []
        cols = rows.cols.T.tolist()
        poss = pos.T.tolist()
        for r, p in zip(cols, poss):
            parts = [names[j] + texts[p[j]] for j in range(len(r)) if r[j]]
            out.append(head + '"binding": {' + ", ".join(parts) + "}}")
        return out

    def _construct(self, rows: Batch, head: str) -> list[str]:
        terms = self.ev.terms
        dec = terms.dictionary.decode_many
        seen: set[str] = set()
        out = []
        cols = {v: rows.col(v) for v in self.vars}
        for i in range(len(rows)):
            bnodes: dict[str, str] = {}
            for tr in self.shape.template:
                parts = []
                for pos, (k, v) in enumerate(tr):
                    if k == "var":
                        x = int(cols[v][i])  # type: ignore[index]
                        if not x:
                            break
                        s = dec([x])[0]
                    elif k == "bnode":
                        if v not in bnodes:
                            bnodes[v] = "_:c%d" % next(_bnode_counter)  # type: ignore[index]
                        s = bnodes[v]  # type: ignore[index]
                    else:
                        s = dec([int(v)])[0]  # type: ignore[arg-type]
                    if (pos == 0 and s[0] == '"') or (pos == 1 and s[0] != "<"):
                        break
                    parts.append(s)
                else:
                    triple = " ".join(parts) + " ."
                    key = triple if "_:" not in triple else triple + str(i)
                    if key not in seen:
                        seen.add(key)
                        out.append(head + '"triple": ' + json.dumps(triple, ensure_ascii=False) + "}")
        return out
