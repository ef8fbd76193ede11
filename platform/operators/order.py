"""Sort orders of int64 rows: ``np.lexsort``'s order, computed with fewer, cheaper sorts.

A stable argsort of an int64 key (numpy's timsort) costs ~10x a plain sort of distinct
int64 values (numpy's SIMD quicksort).  When the key spans few enough bits, each row's
position fits below it: sorting ``key << b | position`` then masking the position out is
the stable order, with no stable sort.  Several columns are packed into few keys first
(:func:`packed_keys`); keys that together span more than 63 bits are replaced by their
dense ranks (order-preserving, at most the row count distinct values) until they pack
into one.  Every function here returns exactly the order ``np.lexsort`` (or a stable
``argsort``) returns: equal rows keep their order.
"""

from __future__ import annotations

import numpy as np

#: from this many rows on, :func:`sort_order` packs columns into fewer sort keys (below
#: it packing costs more than it saves: on the inputs of a 300-query replay, ``np.lexsort``
#: alone sorts 64-255 rows 2.3-3.4x and 256-1023 rows 1.4-1.5x faster)
PACK_SORT_ROWS = 1024
#: from this many rows on, :func:`stable_argsort` sorts the key with the positions in its
#: low bits (1,024 rows: 12.5 vs 17 us; 35,000: 0.24 vs 2.8 ms; below, the stable argsort
#: is faster)
PACK_INDEX_ROWS = 1024
#: a key with fewer descents than this (places where it is below its predecessor: its
#: ascending runs less one) is ordered by the stable argsort (a timsort, which merges
#: presorted runs in linear time: a consolidated part with a few rows appended) or, with
#: none, is in order already: 35,000 rows in 1 / 2 / 4 / 16 runs, timsort 0.03 / 0.23 /
#: 0.44 / 0.91 ms, the packed sort ~0.4 ms whatever the runs (counting them: 0.015 ms)
FEW_RUNS = 3


def _descents(key: np.ndarray) -> int:
    """The places where ``key`` is below its predecessor (its ascending runs less one)."""
    return int(np.count_nonzero(key[1:] < key[:-1]))


def packed_bits(cols: np.ndarray) -> list[tuple[np.ndarray, int]] | None:
    """:func:`packed_keys` with each key's width in bits."""
    lo = cols.min(axis=1).tolist()
    hi = cols.max(axis=1).tolist()
    keys: list[tuple[np.ndarray, int]] = []
    key: np.ndarray | None = None
    used = 0
    for j, (a, b) in enumerate(zip(lo, hi)):
        bits = (b - a).bit_length()
        if bits > 63:
            return None
        if not bits:  # one value: it orders nothing
            continue
        c = cols[j] - a if a else cols[j]
        if key is None or used + bits > 63:
            if key is not None:
                keys.append((key, used))
            key, used = c, bits
        else:
            key = (key << bits) | c
            used += bits
    if key is not None:
        keys.append((key, used))
    return keys


def packed_keys(cols: np.ndarray) -> list[np.ndarray] | None:
    """The rows of ``cols`` (int64) as few non-negative int64 keys in the same
    lexicographic order: each column shifted to start at 0 and packed, most significant
    first, into keys of at most 63 bits (column values span a few thousand dictionary
    ids or milliseconds, so a handful of columns make one key).  ``None`` when a column
    spans more than 63 bits."""
    keys = packed_bits(cols)
    return None if keys is None else [k for k, _ in keys]


def _index_sorted(key: np.ndarray, bits: int) -> np.ndarray | None:
    """``key`` (non-negative int64 below ``2**bits``) shifted left with each row's
    position in the low bits, sorted; ``None`` when they do not fit in 63 bits."""
    n = len(key)
    ib = (n - 1).bit_length()
    if bits + ib > 63:
        return None
    s = key << ib if ib else key.copy()
    s |= np.arange(n)
    s.sort()
    return s


def stable_argsort(key: np.ndarray) -> np.ndarray:
    """``key.argsort(kind="stable")`` of an int64 key, by one plain sort when its span
    leaves room for the row positions (:data:`PACK_INDEX_ROWS` rows and more) and it is
    not in a few presorted runs."""
    n = len(key)
    if n < PACK_INDEX_ROWS or key.dtype != np.int64:
        return key.argsort(kind="stable")
    d = _descents(key)
    if d < FEW_RUNS:
        return key.argsort(kind="stable") if d else np.arange(n)
    lo = int(key.min())
    bits = (int(key.max()) - lo).bit_length()
    if bits > 62:
        return key.argsort(kind="stable")
    s = _index_sorted(key - lo if lo else key, bits)
    if s is None:
        return key.argsort(kind="stable")
    s &= (1 << ((n - 1).bit_length())) - 1
    return s


def dense_ranks(key: np.ndarray) -> tuple[np.ndarray, int]:
    """Each value's rank among the distinct values of ``key`` (0-based, same order), and
    the width in bits of the largest rank."""
    o = key.argsort()  # (any order of equal values gives the same ranks)
    s = key.take(o)
    n = len(key)
    sr = np.empty(n, dtype=np.int64)
    sr[0] = 0
    np.cumsum(s[1:] != s[:-1], out=sr[1:])
    r = np.empty(n, dtype=np.int64)
    r[o] = sr
    return r, int(sr[-1]).bit_length()


def one_key(keys: list[tuple[np.ndarray, int]], room: int) -> tuple[np.ndarray, int]:
    """Packed keys (most significant first, with their widths) as one non-negative key of
    at most ``room`` bits in the same order, keys replaced by their dense ranks where they
    do not fit (``room`` must leave the ranks of the row count room: 63 - its bits)."""
    cur, cb = keys[0]
    for key, b in keys[1:]:
        if cb + b > room:
            cur, cb = dense_ranks(cur)
        if cb + b > room:
            key, b = dense_ranks(key)
        if cb + b > room:
            cur, cb = dense_ranks(cur)
        cur = (cur << b) | key if b else cur
        cb += b
    if cb > room:
        cur, cb = dense_ranks(cur)
    return cur, cb


def sorted_key(cols: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """``np.lexsort(cols[::-1])`` (the rows' lexicographic order, first column most
    significant, equal rows in row order; ``None`` when the rows are in that order already)
    and, when the rows were packed into one key, that key in sorted order (equal keys
    exactly where the rows are equal), else ``None``.  Packed from :data:`PACK_SORT_ROWS`
    rows on: one plain sort of the key with the row positions in its low bits instead of
    a sort pass per column (a key in a few presorted runs: the stable argsort)."""
    k, n = cols.shape
    if k == 0:
        return None, None
    if n >= PACK_SORT_ROWS and cols.dtype == np.int64:
        keys = packed_bits(cols)
        if keys is not None:
            if not keys:  # every row equal
                return None, np.zeros(n, dtype=np.int64)
            ib = (n - 1).bit_length()
            if ib <= 21:  # (ranks of the rows and their positions: 2 x 21 bits at most)
                key, bits = one_key(keys, 63 - ib)
                d = _descents(key)
                if d < FEW_RUNS:
                    if not d:
                        return None, key
                    o = key.argsort(kind="stable")
                    return o, key.take(o)
                s = _index_sorted(key, bits)
                assert s is not None  # (one_key leaves room for the positions)
                order = s & ((1 << ib) - 1)
                s >>= ib
                return order, s
            return np.lexsort([kk for kk, _ in keys[::-1]]), None
    if k == 1:
        return cols[0].argsort(kind="stable"), None
    return np.lexsort(cols[::-1]), None


def sort_order(cols: np.ndarray) -> np.ndarray:
    """Row order sorting ``cols`` lexicographically (first column most significant).

    Equal rows keep their order (stable), so the order is exactly ``np.lexsort``'s
    (see :func:`sorted_key`)."""
    order = sorted_key(cols)[0]
    return np.arange(cols.shape[1]) if order is None else order
