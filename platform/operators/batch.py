"""Batches of signed mappings and the vectorised relational kernels on them.

A :class:`Batch` is a multiset delta over named variables: one int64 column per variable
(dictionary ids, ``0`` = unbound) stored as the rows of a ``(k, n)`` array so that every
column is contiguous, plus a ``counts`` column of signed multiplicities (``+m`` inserts
``m`` copies of the row, ``-m`` removes them).  Every operator consumes and produces
batches; no operator holds per-row Python objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from linkstream.operators.order import packed_keys, sorted_key, stable_argsort
from linkstream.rdf.records import record

_kernels: ModuleType | None
try:  # the compiled kernels (platform/operators/_kernels.c), built by ``pip install``
    from linkstream.operators import _kernels as _built

    _kernels = _built
except ImportError:  # installed without a C compiler: the numpy kernels below do the same
    _kernels = None

EMPTY_I64 = np.empty(0, dtype=np.int64)
_I64 = EMPTY_I64.dtype

#: the compiled kernels in use, or ``None`` (see :func:`use_native`)
_native = _kernels


def native() -> bool:
    """Whether the compiled kernels are in use (``False``: built without a C compiler,
    or turned off by :func:`use_native`)."""
    return _native is not None


def use_native(on: bool) -> bool:
    """Turn the compiled kernels on or off (tests and benchmarks compare both paths; the
    results are the same); returns whether they are now in use."""
    global _native
    _native = _kernels if on else None
    return _native is not None


#: :meth:`Batch.project`'s column indexes by (variables, projected variables): the
#: list of ``index`` calls was most of a projection of a few rows (renamings do one per
#: input per report); cleared when it holds :data:`PROJECTIONS_MAX` entries
_PROJECTIONS: dict[tuple[tuple[str, ...], tuple[str, ...]], np.ndarray] = {}
PROJECTIONS_MAX = 4096


@record(slots=True)
class Batch:
    """Signed multiset of mappings over ``vars``."""

    vars: tuple[str, ...]
    cols: np.ndarray  # (len(vars), n) int64
    counts: np.ndarray  # (n,) int64, signed

    def __init__(self, vars: tuple[str, ...], cols: np.ndarray, counts: np.ndarray) -> None:
        # (written out: tens of thousands of batches per replay; the record's own __init__
        # takes any arguments and costs ~1 us more a call)
        self.vars = vars
        self.cols = cols
        self.counts = counts

    @staticmethod
    def empty(vars: Sequence[str]) -> Batch:
        return Batch(tuple(vars), np.empty((len(vars), 0), dtype=np.int64), EMPTY_I64)

    @staticmethod
    def unit() -> Batch:
        """The multiset holding one empty mapping (the identity of join)."""
        return Batch((), np.empty((0, 1), dtype=np.int64), np.ones(1, dtype=np.int64))

    def __len__(self) -> int:
        return self.counts.shape[0]

    def col(self, var: str) -> np.ndarray:
        try:
            return self.cols[self.vars.index(var)]
        except ValueError:
            return np.zeros(len(self), dtype=np.int64)

    # (``take``/``compress`` along an axis: fancy indexing of a 2-d array costs ~10x more
    # per call, which dominates on the small batches of a window's churn)
    def take(self, idx: np.ndarray) -> Batch:
        idx = np.asarray(idx)
        if idx.dtype.kind != "i":
            if idx.dtype == bool:
                return self.mask(idx)
            if not idx.size:  # an empty list
                idx = EMPTY_I64
            else:  # (indexing raises as it always did)
                return Batch(self.vars, self.cols[:, idx], self.counts[idx])
        return Batch(self.vars, self.cols.take(idx, axis=1), self.counts.take(idx))

    def mask(self, m: np.ndarray) -> Batch:
        m = np.asarray(m)
        if m.dtype != bool or m.ndim != 1:
            return Batch(self.vars, self.cols[:, m], self.counts[m])
        return Batch(self.vars, self.cols.compress(m, axis=1), self.counts.compress(m))

    def negate(self) -> Batch:
        return Batch(self.vars, self.cols, -self.counts)

    def with_counts(self, counts: np.ndarray) -> Batch:
        return Batch(self.vars, self.cols, counts)

    def project(self, vars: Sequence[str]) -> Batch:
        """Columns ``vars`` in that order (a missing variable becomes an unbound column)."""
        if vars == self.vars:
            return self
        vars = tuple(vars)
        sv = self.vars
        if vars == sv:
            return self
        key = (sv, vars)
        idx = _PROJECTIONS.get(key)
        if idx is None:
            if not all(v in sv for v in vars):
                return self._project_unbound(vars)
            if len(_PROJECTIONS) >= PROJECTIONS_MAX:
                _PROJECTIONS.clear()
            idx = _PROJECTIONS[key] = np.array([sv.index(v) for v in vars], dtype=np.intp)
        return Batch(vars, self.cols.take(idx, axis=0), self.counts)

    def _project_unbound(self, vars: tuple[str, ...]) -> Batch:
        n = len(self)
        cols = np.empty((len(vars), n), dtype=np.int64)
        for j, v in enumerate(vars):
            try:
                cols[j] = self.cols[self.vars.index(v)]
            except ValueError:
                cols[j] = 0
        return Batch(vars, cols, self.counts)

    def positive(self) -> Batch:
        return self.mask(self.counts > 0)

    def expand(self) -> np.ndarray:
        """Row indices repeated by multiplicity (positive counts only)."""
        c = np.maximum(self.counts, 0)
        return np.repeat(np.arange(len(self)), c)


def concat(batches: Sequence[Batch], vars: Sequence[str] | None = None) -> Batch:
    """Concatenate batches (aligned on ``vars``, default: the first batch's)."""
    if vars is None:
        vars = batches[0].vars
    vars = tuple(vars)
    parts = [b if b.vars == vars else b.project(vars) for b in batches if b.counts.shape[0]]
    if not parts:
        return Batch.empty(vars)
    if len(parts) == 1:
        return parts[0]
    return Batch(
        vars,
        np.concatenate([p.cols for p in parts], axis=1),
        np.concatenate([p.counts for p in parts]),
    )


def rows_of_keys(cols: np.ndarray, keys: np.ndarray) -> np.ndarray | None:
    """The positions (ascending) of the rows of ``cols`` that equal a row of ``keys``, both
    ``(k, n)`` int64 tables sorted lexicographically (``keys`` distinct), e.g. the leading
    columns of a consolidated batch: the columns packed into one int64 key per row and
    each key's run found by binary search (no sort, no hash); ``None`` when the columns
    do not pack into one key (the caller joins or hashes instead)."""
    n, m = cols.shape[1], keys.shape[1]
    if not m or not n:
        return EMPTY_I64
    if cols.dtype != np.int64 or keys.dtype != np.int64:
        return None
    both = packed_keys(np.concatenate([keys, cols], axis=1))
    if both is None or len(both) > 1:
        return None
    if not both:  # every row equal to the one key
        return np.arange(n)
    kk, ck = both[0][:m], both[0][m:]
    lo = ck.searchsorted(kk, "left")
    runs = ck.searchsorted(kk, "right") - lo
    total = int(runs.sum())
    if total == n:
        return np.arange(n)
    # key j's rows: lo[j] .. lo[j] + runs[j] - 1 (runs ascending and disjoint)
    starts = np.cumsum(runs) - runs
    return np.arange(total) + np.repeat(lo - starts, runs)


#: ``np.logical_or.reduce``: ``ndarray.any`` adds a Python frame per call
_any0 = np.logical_or.reduce


def group_starts(sorted_cols: np.ndarray) -> np.ndarray:
    """Boolean mask of rows that start a new group in lexicographically sorted columns."""
    k, n = sorted_cols.shape
    start = np.empty(n, dtype=bool)
    if n == 0:
        return start
    start[0] = True
    if k == 0:
        start[1:] = False
    else:
        if k == 1:
            np.not_equal(sorted_cols[0, 1:], sorted_cols[0, :-1], out=start[1:])
        else:
            _any0(sorted_cols[:, 1:] != sorted_cols[:, :-1], axis=0, out=start[1:])
    return start


#: batches of at most this many rows are consolidated with Python tuples and a dict:
#: numpy's per-call overhead dominates sorting a handful of rows
SMALL_CONSOLIDATE = 12


def consolidate(b: Batch) -> Batch:
    """Merge equal rows by summing counts and drop rows whose count is 0.

    The result is sorted lexicographically (first column most significant); a batch that
    is already consolidated may be returned as it is.
    """
    n = len(b)
    if n == 0:
        return b
    if n == 1:
        return b if b.counts[0] != 0 else Batch.empty(b.vars)
    if not b.cols.shape[0]:  # no variables: one empty mapping with the summed count
        total = int(b.counts.sum())
        if not total:
            return Batch.empty(b.vars)
        return Batch(b.vars, b.cols[:, :1], np.array([total], dtype=np.int64))
    if _native is not None and n <= NATIVE_CONSOLIDATE:
        return _consolidate_native(b, _native)
    if n <= SMALL_CONSOLIDATE:
        return _consolidate_small(b)
    return _consolidate_sorted(b)


def _consolidate_sorted(b: Batch) -> Batch:
    n = len(b)
    order, key = sorted_key(b.cols)
    if key is None:
        cols = b.cols if order is None else b.cols.take(order, axis=1)
        idx = group_starts(cols).nonzero()[0]
    else:  # (the rows packed into one key: equal rows have equal keys)
        cols = None
        start = np.empty(n, dtype=bool)
        start[0] = True
        np.not_equal(key[1:], key[:-1], out=start[1:])
        idx = start.nonzero()[0]
    counts = b.counts if order is None else b.counts.take(order)
    if len(idx) != n:
        counts = np.add.reduceat(counts, idx)
    keep = counts.nonzero()[0]
    if len(keep) != len(idx):
        idx = idx.take(keep)
        counts = counts.take(keep)
    elif len(idx) == n:  # no equal rows, no zero count: only the order changed (or none)
        if order is None:
            return b
        return Batch(b.vars, b.cols.take(order, axis=1) if cols is None else cols, counts)
    if cols is None:  # (each kept group's first row, taken from the rows as they came)
        return Batch(b.vars, b.cols.take(idx if order is None else order.take(idx), axis=1), counts)
    return Batch(b.vars, cols.take(idx, axis=1), counts)


#: up to this many rows :func:`consolidate` uses the compiled kernel when there is one
#: (above it the packed sort key is faster; below it, the kernel's check that a batch is
#: consolidated already, which returns it as it is, is: 1,024-4,096 rows of CityBench's
#: states, where the packed sort key of random rows would be 1.4-3.7x faster)
NATIVE_CONSOLIDATE = 4096


def _consolidate_native(b: Batch, kernels: Any) -> Batch:
    cols, bc = b.cols, b.counts
    if cols.dtype is not _I64 or bc.dtype is not _I64:  # (not a batch's int64 columns)
        return _consolidate_small(b) if len(bc) <= SMALL_CONSOLIDATE else _consolidate_sorted(b)
    k, n = cols.shape
    if not cols.flags.c_contiguous:
        cols = np.ascontiguousarray(cols)
    if not bc.flags.c_contiguous:
        bc = np.ascontiguousarray(bc)
    out = np.empty(k * n, dtype=np.int64)
    counts = np.empty(n, dtype=np.int64)
    m = kernels.consolidate(cols, bc, k, n, out, counts)
    if m < 0:  # already consolidated
        return b
    return Batch(b.vars, *fitted(out, counts, k, m, n))


def merge_sorted(a: Batch, b: Batch) -> tuple[Batch, np.ndarray] | None:
    """``consolidate(concat([a, b]))`` of two consolidated batches over the same variables
    (rows ascending, no zero count), and each row of ``b``'s count in ``a``, in one linear
    merge (compiled: ``rows_merge``); ``None`` without the compiled kernels, when a value is
    unbound (0) or when a batch is not in order (the caller consolidates)."""
    kernels = _native
    if kernels is None:
        return None
    k, n, m = a.cols.shape[0], len(a), len(b)
    if not k or b.cols.shape[0] != k:
        return None
    cols, counts = (
        np.ascontiguousarray(a.cols, dtype=np.int64),
        np.ascontiguousarray(a.counts, dtype=np.int64),
    )
    dcols, dcounts = (
        np.ascontiguousarray(b.cols, dtype=np.int64),
        np.ascontiguousarray(b.counts, dtype=np.int64),
    )
    out = np.empty(k * (n + m), dtype=np.int64)
    out_n = np.empty(n + m, dtype=np.int64)
    before = np.empty(m, dtype=np.int64)
    r = kernels.rows_merge(cols, counts, n, dcols, dcounts, m, k, out, out_n, before)
    if r < 0:
        return None
    return Batch(a.vars, *fitted(out, out_n, k, r, n + m, own=True)), before


#: from this many items on (``k * cap``), :func:`fitted` shrinks its caller's own arrays
#: in place rather than copying what they keep
SHRINK_ITEMS = 4096


def fitted(
    out: np.ndarray, counts: np.ndarray, k: int, m: int, cap: int, own: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """The ``(k, m)`` table and ``m`` counts a compiled kernel wrote at the front of output
    arrays sized for ``cap`` rows: views, or copies when the views would keep much more
    memory alive than they show (a relation keeps its parts for as long as they hold).
    ``own``: the caller's fresh arrays, with no view of them and no other use: shrunk in
    place instead of copied when large (``realloc``: no copy of a merge's large output;
    small ones are copied, which costs less than a ``realloc``)."""
    if 4 * m >= 3 * cap:
        return out[: k * m].reshape(k, m), counts[:m]
    if own and k * cap >= SHRINK_ITEMS and out.base is None and counts.base is None:
        out.resize(k * m, refcheck=False)
        counts.resize(m, refcheck=False)
        return out.reshape(k, m), counts
    return out[: k * m].reshape(k, m).copy(), counts[:m].copy()


def _consolidate_small(b: Batch) -> Batch:
    rows = list(zip(*b.cols.tolist()))
    acc: dict[tuple[int, ...], int] = {}
    for r, c in zip(rows, b.counts.tolist()):
        acc[r] = acc.get(r, 0) + c
    keys = sorted(r for r, c in acc.items() if c)
    if keys == rows:  # already sorted, distinct, no zero count
        return b
    if not keys:
        return Batch.empty(b.vars)
    return Batch(
        b.vars,
        np.array(list(zip(*keys)), dtype=np.int64),
        np.array([acc[r] for r in keys], dtype=np.int64),
    )


# ----------------------------------------------------------------- keys and joins

_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xBF58476D1CE4E5B9)
_M3 = np.uint64(0x94D049BB133111EB)


def _mix(x: np.ndarray) -> np.ndarray:
    z = x.astype(np.uint64) + _M1
    z = (z ^ (z >> np.uint64(30))) * _M2
    z = (z ^ (z >> np.uint64(27))) * _M3
    return z ^ (z >> np.uint64(31))


def row_keys(cols: np.ndarray) -> np.ndarray:
    """An int64 key per row: the column itself for one column, a 64-bit hash otherwise.

    Equal rows have equal keys; unequal rows collide only by hash accident, which every
    user of multi-column keys rules out by comparing the columns of candidate pairs.
    """
    k = cols.shape[0]
    if k == 1:
        return cols[0]
    n = cols.shape[1]
    if k == 0:
        return np.zeros(n, dtype=np.int64)
    with np.errstate(over="ignore"):
        h = _mix(cols[0])
        for j in range(1, k):
            h = _mix(h ^ cols[j].astype(np.uint64))
    return h.view(np.int64)


def probe_sorted(
    keys: np.ndarray, order: np.ndarray, probe: np.ndarray
) -> tuple[np.ndarray, np.ndarray] | None:
    """The pairs ``(i, order[p])`` of each probe key ``probe[i]`` (ascending ``i``) and each
    position ``p`` (ascending) of an equal key in the ascending int64 ``keys``: one compiled
    call (``probe_sorted``: a binary search and a scan per probe row) where the numpy path
    takes two ``searchsorted`` and about ten more calls; ``None`` without the compiled
    kernels (the caller's numpy code gives the same pairs)."""
    kernels = _native
    if kernels is None or keys.dtype is not _I64 or order.dtype is not _I64:
        return None
    n = len(probe)
    if not n or not len(keys):
        return EMPTY_I64, EMPTY_I64
    if probe.dtype is not _I64 or not probe.flags.c_contiguous:
        probe = np.ascontiguousarray(probe, dtype=np.int64)
    # room for the pairs of most probes (a join's probes find a few matches each); when
    # there are more, the kernel counts them all and is asked again with the exact room
    cap = min(4 * n + 64, n * len(keys))
    li, rj = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
    t = kernels.probe_sorted(keys, len(keys), probe, n, order, li, rj, cap)
    if t < 0:
        cap = -t
        li, rj = np.empty(cap, dtype=np.int64), np.empty(cap, dtype=np.int64)
        t = kernels.probe_sorted(keys, len(keys), probe, n, order, li, rj, cap)
    if not t:
        return EMPTY_I64, EMPTY_I64
    return li[:t], rj[:t]


class SortedIndex:
    """Sorted int64 keys with the permutation back to row numbers (built once, probed often)."""

    __slots__ = ("order", "keys")

    def __init__(self, keys: np.ndarray) -> None:
        self.order = stable_argsort(keys)
        self.keys = keys[self.order]

    def probe(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (i, j): probe row i has the same key as indexed row j."""
        got = probe_sorted(self.keys, self.order, keys)
        if got is not None:
            return got
        # (methods, not the np.* functions: no Python-level dispatch per call)
        lo = self.keys.searchsorted(keys, "left")
        hi = self.keys.searchsorted(keys, "right")
        cnt = hi - lo
        total = int(cnt.sum())
        if total == 0:
            return EMPTY_I64, EMPTY_I64
        li = np.arange(len(keys)).repeat(cnt)
        start = (lo - (cnt.cumsum() - cnt)).repeat(cnt)
        rj = self.order[start + np.arange(total)]
        return li, rj

    def contains(self, keys: np.ndarray) -> np.ndarray:
        pos = self.keys.searchsorted(keys, "left")
        pos = np.minimum(pos, max(len(self.keys) - 1, 0))
        if len(self.keys) == 0:
            return np.zeros(len(keys), dtype=bool)
        return self.keys[pos] == keys


def equal_on(a: np.ndarray, ai: np.ndarray, b: np.ndarray, bi: np.ndarray) -> np.ndarray:
    """Mask of pairs whose rows ``a[:, ai]`` and ``b[:, bi]`` are equal in every column."""
    if a.shape[0] == 0:
        return np.ones(len(ai), dtype=bool)
    return (a.take(ai, axis=1) == b.take(bi, axis=1)).all(axis=0)


def compatible_pairs_broadcast(
    a: np.ndarray, b: np.ndarray, chunk: int = 1 << 20
) -> tuple[np.ndarray, np.ndarray]:
    """All pairs (i, j) whose rows agree wherever both are bound (0 = unbound).

    ``a`` is ``(k, n)`` and ``b`` is ``(k, m)`` over the same shared variables.  Used for
    the rows whose join keys may be unbound; the work is chunked to bound memory.
    """
    n, m = a.shape[1], b.shape[1]
    if n == 0 or m == 0:
        return EMPTY_I64, EMPTY_I64
    out_i, out_j = [], []
    step = max(1, chunk // max(m, 1))
    for s in range(0, n, step):
        aa = a[:, s : s + step, None]
        bb = b[:, None, :]
        ok = np.all((aa == bb) | (aa == 0) | (bb == 0), axis=0)
        i, j = np.nonzero(ok)
        out_i.append(i + s)
        out_j.append(j)
    return np.concatenate(out_i).astype(np.int64), np.concatenate(out_j).astype(np.int64)


def merge_columns(
    vars: tuple[str, ...], left: Batch, li: np.ndarray, right: Batch, ri: np.ndarray
) -> np.ndarray:
    """Columns of the merged mappings for pairs (li, ri) of compatible rows."""
    out = np.empty((len(vars), len(li)), dtype=np.int64)
    lv, rv = left.vars, right.vars
    for j, v in enumerate(vars):
        if v in lv:
            x = left.cols[lv.index(v), li]
            if v in rv:
                # compatible rows agree or one side is unbound (0): ids are positive.
                x = np.maximum(x, right.cols[rv.index(v), ri])
            out[j] = x
        else:
            out[j] = right.cols[rv.index(v), ri]
    return out


def cross_product(a: Batch, b: Batch) -> Batch:
    """Every row of ``a`` with every row of ``b`` (variables disjoint), ``a``-major order."""
    n, m = len(a), len(b)
    if not n or not m:
        return Batch.empty(a.vars + b.vars)
    li, rj = np.divmod(np.arange(n * m), m)
    ka = a.cols.shape[0]
    cols = np.empty((ka + b.cols.shape[0], n * m), dtype=np.int64)
    a.cols.take(li, axis=1, out=cols[:ka])
    b.cols.take(rj, axis=1, out=cols[ka:])
    counts = a.counts.take(li)
    counts *= b.counts.take(rj)
    return Batch(a.vars + b.vars, cols, counts)


def insert_sorted(at: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Where ``len(at)`` new items go when inserted before positions ``at`` (ascending, as
    ``searchsorted`` gives them) of an array of ``n`` items, and where the old items go:
    ``out[new] = values; out[old] = array`` is ``np.insert(array, at, values)`` without its
    per-call overhead (and one pair of index arrays for several parallel arrays)."""
    m = len(at)
    new = at + np.arange(m)
    is_new = np.zeros(n + m, dtype=bool)
    is_new[new] = True
    return new, (~is_new).nonzero()[0]


def sum_by_key(keys: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``keys`` ascending with their summed ``counts``, zero sums left out (a
    signed delta of packed rows consolidated: one sort and one ``reduceat``)."""
    if len(keys) > 1:
        order = keys.argsort()
        keys, counts = keys.take(order), counts.take(order)
        starts = np.concatenate(([True], keys[1:] != keys[:-1])).nonzero()[0]
        if len(starts) != len(keys):
            counts = np.add.reduceat(counts, starts)
            keys = keys.take(starts)
    nz = counts != 0
    if not nz.all():
        keys, counts = keys[nz], counts[nz]
    return keys, counts
