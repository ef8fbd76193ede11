"""Immutable predicate-keyed graph indexes (Wukong's layout over sorted numpy arrays).

Wukong stores a graph as a key/value map ``[vertex|predicate|direction] -> neighbour ids``
plus *index vertices*: ``[0|p|in]`` (subjects having ``p``), ``[0|p|out]`` (objects of
``p``) and type index vertices ``[type|rdf:type|in]`` (instances of a type).  Here each
map is a CSR structure over sorted arrays, so every lookup is a binary search
(``np.searchsorted``), batched over many vertices at once:

* ``out``: keys ``(s, p)`` sorted, ``off`` offsets, ``nbr`` the objects (sorted per key);
* ``in``:  keys ``(o, p)`` sorted, ``off`` offsets, ``nbr`` the subjects (sorted per key);
* ``preds`` sorted predicate ids with ``pred_count``; ``pidx_out`` / ``pidx_in`` list the
  out/in keys of each predicate (CSR by predicate rank) -- the predicate index vertices;
* ``type_ids`` / ``type_off`` / ``type_inst``: the type index;
* ``out_ck`` / ``in_ck``: composite keys ``vertex * npred + rank(p)`` (when they fit in
  int64) so a batch of ``(vertex, p)`` lookups is a single ``searchsorted``.

A :class:`GraphIndex` never changes once built; it may be memory-mapped from ``.npy``
files (:meth:`GraphIndex.save` / :meth:`GraphIndex.load`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from linkstream.store.layout import order2, sorted_columns, tmp_suffix

_I64 = np.int64
_EMPTY3 = np.empty((0, 3), dtype=_I64)
_MAX_CK = (1 << 62) - 1


def _e() -> np.ndarray:
    return np.empty(0, dtype=_I64)


def expand_ranges(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Concatenation of ``arange(starts[i], starts[i] + lens[i])`` over ``i`` (vectorised)."""
    lens = np.asarray(lens, dtype=_I64)
    total = int(lens.sum())
    if total == 0:
        return _e()
    first = np.cumsum(lens) - lens
    return np.repeat(np.asarray(starts, dtype=_I64) - first, lens) + np.arange(total, dtype=_I64)


def unique_counts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values of an int64 array and their counts.

    Sort-based: ``np.unique`` of numpy 2.x hashes and is many times slower on big arrays.
    """
    xs = np.sort(np.asarray(x, dtype=_I64))
    if not len(xs):
        return _e(), _e()
    change = np.empty(len(xs), dtype=bool)
    change[0] = True
    np.not_equal(xs[1:], xs[:-1], out=change[1:])
    starts = np.flatnonzero(change)
    return xs[starts], np.diff(np.append(starts, len(xs))).astype(_I64)


def _by_rank(rank: np.ndarray, v: np.ndarray, npred: int) -> tuple[np.ndarray, np.ndarray]:
    """Key indices grouped by predicate rank (vertex order within a rank) and group offsets.

    Keys are already sorted by vertex, so a *stable* sort on the rank alone gives
    (rank, vertex) order; with fewer than 2**15 predicates it is numpy's O(n) radix sort.
    """
    if npred < (1 << 15):
        order = np.argsort(rank.astype(np.int16), kind="stable").astype(_I64, copy=False)
    else:
        order = order2(rank, v).astype(_I64, copy=False)
    counts = np.bincount(rank, minlength=npred) if len(rank) else np.zeros(npred, dtype=_I64)
    return order, np.concatenate([[0], np.cumsum(counts)]).astype(_I64, copy=False)


def _csr(key: np.ndarray, sub: np.ndarray, nbr: np.ndarray) -> tuple[np.ndarray, ...]:
    """Keys/offsets of rows already sorted by (key, sub, nbr)."""
    n = len(key)
    if n == 0:
        return _e(), _e(), np.zeros(1, dtype=_I64)
    change = np.empty(n, dtype=bool)
    change[0] = True
    np.logical_or(key[1:] != key[:-1], sub[1:] != sub[:-1], out=change[1:])
    starts = np.flatnonzero(change).astype(_I64)
    return key[starts], sub[starts], np.append(starts, _I64(n))


@dataclass(frozen=True, eq=False)
class GraphIndex:
    """The indexes of one graph's (distinct) triples; see the module docstring."""

    out_v: np.ndarray
    out_p: np.ndarray
    out_off: np.ndarray
    out_nbr: np.ndarray
    in_v: np.ndarray
    in_p: np.ndarray
    in_off: np.ndarray
    in_nbr: np.ndarray
    preds: np.ndarray
    pred_count: np.ndarray
    pidx_out_off: np.ndarray
    pidx_out: np.ndarray
    pidx_in_off: np.ndarray
    pidx_in: np.ndarray
    type_ids: np.ndarray
    type_off: np.ndarray
    type_inst: np.ndarray
    out_ck: np.ndarray
    in_ck: np.ndarray

    # ------------------------------------------------------------------ building

    @classmethod
    def build(cls, triples: np.ndarray, rdf_type: int = 0, *, distinct: bool = False) -> GraphIndex:
        """Index ``(n, 3)`` int64 triples (repeats removed unless ``distinct`` says none).

        Args:
            triples: the graph's triples.
            rdf_type: the dictionary id of rdf:type (0 if unknown: no type index).
            distinct: the rows are already distinct and sorted by (s, p, o).
        """
        t = np.asarray(triples, dtype=_I64).reshape(-1, 3)
        if distinct:
            s, p, o = (np.ascontiguousarray(t[:, i]) for i in range(3))
        else:
            s, p, o = sorted_columns(t[:, 0], t[:, 1], t[:, 2], distinct=True)
        out_v, out_p, out_off = _csr(s, p, o)
        out_nbr = o
        in_key, pi, in_nbr = sorted_columns(o, p, s)
        in_v, in_p, in_off = _csr(in_key, pi, in_nbr)
        preds, pred_count = unique_counts(p)
        npred = len(preds)
        out_rank = np.searchsorted(preds, out_p).astype(_I64, copy=False)
        in_rank = np.searchsorted(preds, in_p).astype(_I64, copy=False)
        pidx_out, pidx_out_off = _by_rank(out_rank, out_v, npred)
        pidx_in, pidx_in_off = _by_rank(in_rank, in_v, npred)
        # type index: in-keys (type, rdf:type) -> instances (already sorted by type)
        tk = np.flatnonzero(in_p == rdf_type) if rdf_type else _e()
        type_ids = in_v[tk]
        tlens = in_off[tk + 1] - in_off[tk]
        type_off = np.concatenate([[0], np.cumsum(tlens)]).astype(_I64, copy=False)
        type_inst = in_nbr[expand_ranges(in_off[tk], tlens)]
        top = int(max(out_v[-1] if len(out_v) else 0, in_v[-1] if len(in_v) else 0))
        if npred and top <= _MAX_CK // npred:
            out_ck, in_ck = out_v * npred + out_rank, in_v * npred + in_rank
        else:
            out_ck, in_ck = _e(), _e()  # empty = unavailable (or empty graph)
        return cls(
            out_v, out_p, out_off, out_nbr, in_v, in_p, in_off, in_nbr, preds, pred_count,
            pidx_out_off, pidx_out, pidx_in_off, pidx_in, type_ids, type_off, type_inst, out_ck, in_ck,
        )  # fmt: skip

    @classmethod
    def empty(cls) -> GraphIndex:
        return cls.build(_EMPTY3, distinct=True)

    def save(self, folder: str | os.PathLike[str]) -> None:
        """Write every array as ``folder/<name>.npy`` (atomically per file)."""
        root = Path(folder)
        root.mkdir(parents=True, exist_ok=True)
        for f in fields(self):
            tmp = root / f"{f.name}{tmp_suffix()}.npy"
            np.save(tmp, np.ascontiguousarray(getattr(self, f.name)))
            os.replace(tmp, root / f"{f.name}.npy")

    @classmethod
    def load(cls, folder: str | os.PathLike[str], *, mmap: bool = True) -> GraphIndex:
        """Open arrays written by :meth:`save`, memory-mapped (read-only) by default."""
        root = Path(folder)
        arrays = {}
        for f in fields(cls):
            path = root / f"{f.name}.npy"
            a = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
            if a.dtype != _I64 or a.ndim != 1:
                raise ValueError(f"{path}: expected a 1-d int64 array")
            # a plain ndarray view of the mapping: np.memmap's subclass hooks triple the
            # cost of every small slice taken by a lookup; ``.base`` keeps the map alive
            arrays[f.name] = a.view(np.ndarray) if isinstance(a, np.memmap) else a
        return cls(**arrays)

    # ------------------------------------------------------------------ statistics

    @property
    def size(self) -> int:
        """Number of triples."""
        return len(self.out_nbr)

    def _rank(self, p: int) -> int:
        """Rank of predicate ``p`` in ``preds``, -1 if the graph has no such predicate."""
        r = int(np.searchsorted(self.preds, p))
        return r if r < len(self.preds) and int(self.preds[r]) == p else -1

    def cardinality(self, p: int | None) -> int:
        """Triples with predicate ``p`` (all if ``None``)."""
        if p is None:
            return self.size
        r = self._rank(p)
        return int(self.pred_count[r]) if r >= 0 else 0

    # ------------------------------------------------------------------ lookups

    def _side(self, direction: str) -> tuple[np.ndarray, ...]:
        if direction == "out":
            return self.out_v, self.out_p, self.out_off, self.out_nbr, self.out_ck
        if direction == "in":
            return self.in_v, self.in_p, self.in_off, self.in_nbr, self.in_ck
        raise ValueError(f"direction must be 'out' or 'in', got {direction!r}")

    def _key_range(self, kv: np.ndarray, kp: np.ndarray, v: int, p: int | None) -> tuple[int, int]:
        """Key indices ``[lo, hi)`` of vertex ``v`` (and predicate ``p``)."""
        lo, hi = int(np.searchsorted(kv, v, "left")), int(np.searchsorted(kv, v, "right"))
        if p is not None and hi > lo:
            seg = kp[lo:hi]
            lo, hi = lo + int(np.searchsorted(seg, p, "left")), lo + int(np.searchsorted(seg, p, "right"))
        return lo, hi

    def _keys_triples(self, direction: str, keys: np.ndarray) -> np.ndarray:
        """All triples under the given key indices of one direction, as (s, p, o)."""
        kv, kp, off, nbr, _ = self._side(direction)
        keys = np.asarray(keys, dtype=_I64)
        lens = off[keys + 1] - off[keys]
        pos = expand_ranges(off[keys], lens)
        out = np.empty((len(pos), 3), dtype=_I64)
        v = np.repeat(kv[keys], lens)
        out[:, 1] = np.repeat(kp[keys], lens)
        if direction == "out":
            out[:, 0], out[:, 2] = v, nbr[pos]
        else:
            out[:, 2], out[:, 0] = v, nbr[pos]
        return out

    def _key_span(self, direction: str, lo: int, hi: int) -> np.ndarray:
        """Triples under the contiguous keys ``[lo, hi)``: slices, no gathers."""
        kv, kp, off, nbr, _ = self._side(direction)
        if hi <= lo:
            return _EMPTY3.copy()
        o = off[lo : hi + 1]
        lens = np.diff(o)
        a, b = int(o[0]), int(o[-1])
        out = np.empty((b - a, 3), dtype=_I64)
        vcol, ncol = (0, 2) if direction == "out" else (2, 0)
        out[:, vcol] = np.repeat(kv[lo:hi], lens)
        out[:, 1] = np.repeat(kp[lo:hi], lens)
        out[:, ncol] = nbr[a:b]
        return out

    def triples(self) -> np.ndarray:
        """All triples, sorted by (s, p, o)."""
        return self._key_span("out", 0, len(self.out_v))

    def match(self, s: int | None, p: int | None, o: int | None) -> np.ndarray:
        """Triples matching the constants (``None`` = any), found by binary search."""
        if s is not None:
            lo, hi = self._key_range(self.out_v, self.out_p, s, p)
            if o is None:
                return self._key_span("out", lo, hi)
            if p is not None and hi > lo:
                seg = self.out_nbr[self.out_off[lo] : self.out_off[hi]]
                i = int(np.searchsorted(seg, o))
                if i < len(seg) and int(seg[i]) == o:
                    return np.array([[s, p, o]], dtype=_I64)
                return _EMPTY3.copy()
            # s and o bound: explore from the side with fewer neighbours
            ilo, ihi = self._key_range(self.in_v, self.in_p, o, None)
            if int(self.in_off[ihi] - self.in_off[ilo]) < int(self.out_off[hi] - self.out_off[lo]):
                t = self._key_span("in", ilo, ihi)
                return t[t[:, 0] == s]
            t = self._key_span("out", lo, hi)
            return t[t[:, 2] == o]
        if o is not None:
            lo, hi = self._key_range(self.in_v, self.in_p, o, p)
            return self._key_span("in", lo, hi)
        if p is not None:
            r = self._rank(p)
            if r < 0:
                return _EMPTY3.copy()
            keys = self.pidx_out[self.pidx_out_off[r] : self.pidx_out_off[r + 1]]
            return self._keys_triples("out", keys)
        return self.triples()

    def subjects(self, p: int) -> np.ndarray:
        """Predicate index vertex ``[0|p|in]``: the distinct subjects having ``p`` (sorted)."""
        r = self._rank(p)
        if r < 0:
            return _e()
        return self.out_v[self.pidx_out[self.pidx_out_off[r] : self.pidx_out_off[r + 1]]]

    def objects(self, p: int) -> np.ndarray:
        """Predicate index vertex ``[0|p|out]``: the distinct objects of ``p`` (sorted)."""
        r = self._rank(p)
        if r < 0:
            return _e()
        return self.in_v[self.pidx_in[self.pidx_in_off[r] : self.pidx_in_off[r + 1]]]

    def instances(self, type_id: int) -> np.ndarray:
        """Type index vertex: the instances of ``type_id`` (sorted)."""
        i = int(np.searchsorted(self.type_ids, type_id))
        if i >= len(self.type_ids) or int(self.type_ids[i]) != type_id:
            return _e()
        return self.type_inst[self.type_off[i] : self.type_off[i + 1]]

    def neighbours(
        self, vertices: np.ndarray, p: int | None, direction: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(row, predicate, neighbour)`` for every vertex (see ``Snapshot.neighbours``)."""
        kv, kp, off, nbr, ck = self._side(direction)
        v = np.asarray(vertices, dtype=_I64).reshape(-1)
        if p is not None:
            r = self._rank(p)
            if r < 0 or not len(v):
                return _e(), _e(), _e()
            if len(ck):
                npred = len(self.preds)
                ok = (v >= 0) & (v <= _MAX_CK // npred)
                key = np.where(ok, v, 0) * npred + r
                k = np.minimum(np.searchsorted(ck, key), len(ck) - 1)
                hit = ok & (ck[k] == key)
                rows = np.flatnonzero(hit).astype(_I64)
                k = k[hit]
                lens = off[k + 1] - off[k]
                pos = expand_ranges(off[k], lens)
                return np.repeat(rows, lens), np.full(len(pos), p, dtype=_I64), nbr[pos]
            rows, preds, nb = self.neighbours(v, None, direction)
            keep = preds == p
            return rows[keep], preds[keep], nb[keep]
        lo, hi = np.searchsorted(kv, v, "left"), np.searchsorted(kv, v, "right")
        nkeys = hi - lo
        keys = expand_ranges(lo, nkeys)  # every (vertex, p) key of every vertex
        klens = off[keys + 1] - off[keys]
        pos = expand_ranges(off[lo], off[hi] - off[lo])  # a vertex's keys are contiguous
        rows = np.repeat(np.repeat(np.arange(len(v), dtype=_I64), nkeys), klens)
        return rows, np.repeat(kp[keys], klens), nbr[pos]

    def contains(self, triples: np.ndarray) -> np.ndarray:
        """Boolean mask: which rows of an ``(n, 3)`` array are in the graph."""
        t = np.asarray(triples, dtype=_I64).reshape(-1, 3)
        found = np.zeros(len(t), dtype=bool)
        if not len(t) or not self.size:
            return found
        npred = len(self.preds)
        r = np.minimum(np.searchsorted(self.preds, t[:, 1]), npred - 1)
        ok = self.preds[r] == t[:, 1]
        if len(self.out_ck):
            ok &= (t[:, 0] >= 0) & (t[:, 0] <= _MAX_CK // npred)
            key = np.where(ok, t[:, 0], 0) * npred + r
            k = np.minimum(np.searchsorted(self.out_ck, key), len(self.out_ck) - 1)
            ok &= self.out_ck[k] == key
            rows = np.flatnonzero(ok).astype(_I64)
            k = k[ok]
            lens = self.out_off[k + 1] - self.out_off[k]
            pos = expand_ranges(self.out_off[k], lens)
            row_of = np.repeat(rows, lens)
            hit = self.out_nbr[pos] == t[row_of, 2]
        else:
            row_of, preds, nb = self.neighbours(t[:, 0], None, "out")
            hit = (preds == t[row_of, 1]) & (nb == t[row_of, 2])
        found[row_of[hit]] = True
        return found
