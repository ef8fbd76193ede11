"""Operator.predicate_slice: the rows of an epoch's delta with one predicate, in the delta's
order, whether the delta is sorted by predicate (small) or masked per predicate asked (large,
until more than PSLICE_MASKED predicates are asked)."""

from __future__ import annotations

import numpy as np
import pytest

from linkstream.operators import base
from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch
from linkstream.operators.window import TRIPLE_VARS


class Fixed(Operator):
    vars = TRIPLE_VARS

    def __init__(self) -> None:
        super().__init__()
        self.deltas: dict[int, Batch] = {}

    def compute(self, epoch: int) -> Batch:
        return self.deltas[epoch]


def _naive(d: Batch, p: int) -> list[tuple[int, ...]]:
    return [(*r, c) for r, c in zip(d.cols.T.tolist(), d.counts.tolist()) if r[1] == p]


def _rows(b: Batch) -> list[tuple[int, ...]]:
    return [(*r, c) for r, c in zip(b.cols.T.tolist(), b.counts.tolist())]


@pytest.mark.parametrize("n", [0, 5, base.PSLICE_SORT_MAX, base.PSLICE_SORT_MAX + 1, 9000])
def test_slices_equal_the_rows_in_order(n: int) -> None:
    rng = np.random.default_rng(n)
    op = Fixed()
    preds = list(range(1, base.PSLICE_MASKED + 6))
    for epoch in (1, 2):
        cols = rng.integers(1, 50, size=(3, n))
        cols[1] = rng.choice(preds[:-2], size=n)
        d = Batch(TRIPLE_VARS, cols, rng.choice([-1, 1, 2], size=n))
        op.deltas[epoch] = d
        # every predicate (more than PSLICE_MASKED: a large delta switches to sorting),
        # each asked twice, and one absent from the delta
        for p in preds + preds[::-1] + [99]:
            got = op.predicate_slice(epoch, p)
            assert got.vars == TRIPLE_VARS
            assert _rows(got) == _naive(d, p), (n, epoch, p)
    cache = op.__dict__["_pslice"]
    assert cache.epoch == 2 and cache.ranges is not None


def test_large_delta_is_not_sorted_for_a_few_predicates() -> None:
    op = Fixed()
    n = base.PSLICE_SORT_MAX * 2
    cols = np.stack([np.arange(n), np.arange(n) % 5 + 1, np.arange(n)])
    op.deltas[1] = d = Batch(TRIPLE_VARS, cols, np.ones(n, dtype=np.int64))
    for p in (1, 3, 3, 7):
        assert _rows(op.predicate_slice(1, p)) == _naive(d, p)
    cache = op.__dict__["_pslice"]
    assert cache.ranges is None and sorted(cache.masked) == [1, 3, 7]
