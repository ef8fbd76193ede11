"""Rows cut out of sorted tables by key (binary search on packed keys), against a
plain set lookup: ``rows_of_keys``, ``Relation.prefix_rows`` (vs ``Relation.join``), the
aggregate's dirty-group cut, and LatestGraph's window delta with and without it."""

from __future__ import annotations

import numpy as np
import pytest

from linkstream.operators import aggregate as agg
from linkstream.operators import relation as rel_mod
from linkstream.operators.batch import Batch, consolidate, rows_of_keys
from linkstream.operators.relation import Relation


def _sorted_table(rng: np.random.Generator, k: int, n: int, hi: int) -> np.ndarray:
    b = Batch(tuple(f"v{i}" for i in range(k)), rng.integers(0, hi, (k, n)), np.ones(n, dtype=np.int64))
    return consolidate(b).cols


def _expected(cols: np.ndarray, keys: np.ndarray) -> np.ndarray:
    want = set(zip(*keys.tolist()))
    return np.array([i for i, r in enumerate(zip(*cols.tolist())) if r in want], dtype=np.int64)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("seed", range(6))
def test_rows_of_keys_matches_a_set_lookup(k: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    table = _sorted_table(rng, k + 1, 400, 9)  # duplicate prefixes: runs of several rows
    cols = table[:k]
    keys = _sorted_table(rng, k, 30, 10)  # some absent, some beyond the table's range
    got = rows_of_keys(cols, keys)
    assert got is not None
    assert got.tolist() == _expected(cols, keys).tolist()
    assert rows_of_keys(cols, keys[:, :0]).tolist() == []
    assert rows_of_keys(cols, cols[:, :1]).tolist() == _expected(cols, cols[:, :1]).tolist()


def test_rows_of_keys_one_value_and_wide_columns() -> None:
    same = np.full((2, 5), 7, dtype=np.int64)
    assert rows_of_keys(same, same[:, :1]).tolist() == [0, 1, 2, 3, 4]
    # columns spanning more than 63 bits together do not pack into one key: the caller's way
    wide = np.array([[0, 1, 2], [0, 1 << 60, 1 << 61]], dtype=np.int64)
    assert rows_of_keys(wide, wide[:, 1:2]) is None
    assert agg._rows_of_keys(wide, wide[:, 1:2]).tolist() == [1]


def test_aggregate_cut_matches_in_keys() -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        table = _sorted_table(rng, 3, 300, 12)
        keys = _sorted_table(rng, 2, 15, 14)
        want = agg._in_keys(table[:2], keys).nonzero()[0]
        assert agg._rows_of_keys(table[:2], keys).tolist() == want.tolist()


@pytest.mark.parametrize("seed", range(5))
def test_prefix_rows_equals_the_join_on_the_leading_columns(seed: int) -> None:
    rng = np.random.default_rng(seed)
    vs = ("s", "p", "o", "t")
    r = Relation(vs)
    rel_mod.forget_applied(record=False)
    try:
        for _ in range(6):  # base and recent parts, rows retracted in between
            cols = rng.integers(1, 8, (4, 300))
            counts = rng.choice([-1, 1, 1, 2], 300)
            r.apply(consolidate(Batch(vs, cols, counts.astype(np.int64))))
            keys = _sorted_table(rng, 3, 40, 9) + 1  # (bound: 0 joins with every value)
            probe = Batch(vs[:3], keys, np.ones(keys.shape[1], dtype=np.int64))
            got = r.prefix_rows(probe)
            assert got is not None
            want = consolidate(r.join(probe, vs))
            got = consolidate(got)
            assert got.cols.tolist() == want.cols.tolist()
            assert got.counts.tolist() == want.counts.tolist()
            unbound = Batch(vs[:3], np.array([[0], [1], [1]], dtype=np.int64), np.ones(1, dtype=np.int64))
            assert r.prefix_rows(unbound) is None
    finally:
        rel_mod.forget_applied(record=True)
