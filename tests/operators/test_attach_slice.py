"""A scan over an attachment (a query registered late, reading a running graph) takes its
predicate's slice of the attachment's delta: at the attaching epoch the graph's whole
current content, afterwards the graph's own slice (sorted once per epoch for every
attachment), equal to slicing the attachment's delta itself."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch, consolidate
from linkstream.operators.scan import ScanOperator

VARS = ("_s", "_p", "_o")


class Graph(Operator):
    """A test graph: the delta of each epoch is pushed by the test; current = the sum."""

    vars = VARS

    def __init__(self) -> None:
        super().__init__()
        self.pending = Batch.empty(VARS)
        self.content: Counter = Counter()

    def push(self, rows, sign):
        self.pending = Batch(VARS, np.array(rows, dtype=np.int64).T.reshape(3, -1), np.full(len(rows), sign))
        for r in rows:
            self.content[tuple(r)] += sign

    def compute(self, epoch):
        out, self.pending = self.pending, Batch.empty(VARS)
        return out

    def current(self):
        rows = [r for r, n in self.content.items() for _ in range(n) if n > 0]
        return Batch(
            VARS, np.array(rows, dtype=np.int64).T.reshape(3, -1), np.ones(len(rows), dtype=np.int64)
        )


def _rows(b: Batch) -> Counter:
    b = consolidate(b)
    return Counter({tuple(r): n for r, n in zip(b.cols.T.tolist(), b.counts.tolist())})


triple = st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(triple, max_size=6), min_size=1, max_size=6), st.integers(0, 5))
def test_attached_scan_equals_scan_of_attachment_delta(epochs, attach_at):
    g = Graph()
    attach = None
    scans: list[ScanOperator] = []
    for epoch, rows in enumerate(epochs, 1):
        if epoch - 1 == attach_at:
            attach = AttachOperator(g)
            scans = [ScanOperator(attach, (("var", "s"), ("const", p), ("var", "o"))) for p in (1, 2, 3)]
        if rows:
            g.push(rows, +1)
        g.delta(epoch)
        if attach is None:
            continue
        whole = attach.delta(epoch)
        for p, scan in zip((1, 2, 3), scans):
            expected = Counter()
            for (s, pp, o), n in _rows(whole).items():
                if pp == p:
                    expected[(s, o)] += n
            assert _rows(scan.delta(epoch)) == +expected, (epoch, p)
            sl = attach.predicate_slice(epoch, p)
            assert (sl.cols[1] == p).all()
            assert _rows(sl) == +Counter({r: n for r, n in _rows(whole).items() if r[1] == p})
