"""``linkstream.operators.order``: the packed sorts give exactly ``np.lexsort``'s /
the stable argsort's order (equal rows in row order) on both sides of their row
thresholds, for columns that pack into one key, into several (dense ranks), or not at
all; the sorted key is equal exactly where the rows are; a consolidation through them
equals summing the counts of equal rows one by one."""

from __future__ import annotations

import numpy as np
import pytest

from linkstream.operators import batch as B
from linkstream.operators import order as O

#: column spans: one value, a few ids, dictionary ids, milliseconds, wide, near 63 bits
SPANS = (1, 3, 40, 1 << 12, 1 << 20, 1 << 40, 1 << 62)


def _cols(rng: np.random.Generator, n: int, spans: list[int], dups: bool) -> np.ndarray:
    cols = np.array([rng.integers(-5, s, n) for s in spans], dtype=np.int64).reshape(len(spans), n)
    if dups:  # rows repeated (a delta with retractions of rows it holds)
        cols = cols[:, rng.integers(0, max(1, n // 3), n)]
    return cols


@pytest.mark.parametrize("n", [7, 1023, 1024, 5000])
@pytest.mark.parametrize("seed", range(12))
def test_sorted_key_is_lexsort_order_and_its_key_equal_where_rows_are(n, seed):
    rng = np.random.default_rng(seed * 7919 + n)
    k = 1 + seed % 6
    spans = [int(rng.choice(SPANS)) for _ in range(k)]
    cols = _cols(rng, n, spans, dups=bool(seed % 2))
    if seed % 3 == 2:  # a few presorted runs (a consolidated part with rows appended)
        cols = np.concatenate(
            [c[:, np.lexsort(c[::-1])] for c in np.array_split(cols, 1 + seed % 4, axis=1)], axis=1
        )
    order, key = O.sorted_key(cols)
    if order is None:  # (in order already)
        order = np.arange(n)
    assert np.array_equal(order, np.lexsort(cols[::-1]))
    assert np.array_equal(O.sort_order(cols), order)
    if n >= O.PACK_SORT_ROWS:
        assert key is not None  # (every span here leaves room for ranks and positions)
    if key is not None:
        s = cols.take(order, axis=1)
        same = (s[:, 1:] == s[:, :-1]).all(axis=0)
        assert np.array_equal(key[1:] == key[:-1], same)


def test_keys_wider_than_one_word_are_ranked_into_one():
    # three columns of ~40 bits: no two pack together; ranks of 3,000 rows do
    rng = np.random.default_rng(3)
    base = rng.integers(0, 1 << 40, size=(3, 50))
    cols = base[:, rng.integers(0, 50, 3000)].astype(np.int64)
    assert len(O.packed_keys(cols)) == 3
    order, key = O.sorted_key(cols)
    assert key is not None and order is not None
    assert np.array_equal(order, np.lexsort(cols[::-1]))


@pytest.mark.parametrize("n", [0, 1, 1023, 1024, 40000])
@pytest.mark.parametrize("span", SPANS + (1 << 63,))
def test_stable_argsort_is_the_stable_argsort(n, span):
    rng = np.random.default_rng(n + span % 1000)
    lo = -(span // 2)
    key = (
        rng.integers(lo, lo + span - 1, n, dtype=np.int64, endpoint=True)
        if span > 1
        else np.zeros(n, np.int64)
    )
    key[: n // 2] = key[n // 2 : 2 * (n // 2)]  # equal keys in both halves
    assert np.array_equal(O.stable_argsort(key), key.argsort(kind="stable"))
    for runs in (1, 2, 3, 4):  # presorted runs: the stable argsort's or the packed sort
        k = np.concatenate([np.sort(p, kind="stable") for p in np.array_split(key, runs)])
        assert np.array_equal(O.stable_argsort(k), k.argsort(kind="stable"))
    k32 = key.astype(np.int32)
    assert np.array_equal(O.stable_argsort(k32), k32.argsort(kind="stable"))


@pytest.mark.parametrize("seed", range(8))
def test_consolidate_sums_equal_rows(seed):
    rng = np.random.default_rng(seed)
    n = 6000
    k = 2 + seed % 5
    cols = _cols(rng, n, [int(rng.choice(SPANS[1:5])) for _ in range(k)], dups=True)
    if seed % 2:  # in order already, or in two runs
        cols = np.concatenate(
            [c[:, np.lexsort(c[::-1])] for c in np.array_split(cols, 1 + seed % 4 // 2, axis=1)], axis=1
        )
    counts = rng.integers(-2, 3, n).astype(np.int64)
    got = B.consolidate(B.Batch(tuple("abcdefg"[:k]), cols, counts))
    acc: dict[tuple[int, ...], int] = {}
    for r, c in zip(zip(*cols.tolist()), counts.tolist()):
        acc[r] = acc.get(r, 0) + c
    rows = sorted(r for r, c in acc.items() if c)
    assert [tuple(x) for x in got.cols.T.tolist()] == rows
    assert got.counts.tolist() == [acc[r] for r in rows]


def test_a_consolidated_batch_is_returned_as_it_is():
    rng = np.random.default_rng(5)
    b = B.consolidate(
        B.Batch(("a", "b"), _cols(rng, 5000, [1 << 12, 1 << 12], dups=True), np.ones(5000, np.int64))
    )
    assert len(b) >= O.PACK_SORT_ROWS
    assert B.consolidate(b) is b
