"""Graphs of the dataset a query is evaluated on (SEMANTICS.md §5).

A :class:`GraphOperator` is one RDF graph (a *set* of triples) fed by a static part and any
number of windows.  A triple present in several window elements, several windows, or in
both a window and the static part is one triple of the graph: the operator keeps a
reference count per dynamic triple and emits a +1 only when a triple enters the set and a
-1 only when its last source leaves -- exactly the RDF merge the spec asks for (the
C-SPARQL default graph is one such operator over every window and every ``FROM`` graph).

The reference counts are kept as one sorted array of *packed* triples (three ids below
2^21 in one int64, whose order is the triples' lexicographic order) with the counts
beside it: an epoch's delta costs a sort of the delta, one binary search and one merge.
A triple with a larger id moves the counts into a :class:`Relation` for good (the
general path, equal results).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators import batch as _batch
from linkstream.operators.base import Operator
from linkstream.operators.batch import (
    EMPTY_I64,
    Batch,
    SortedIndex,
    concat,
    consolidate,
    insert_sorted,
    row_keys,
    sum_by_key,
)
from linkstream.operators.order import stable_argsort
from linkstream.operators.relation import Relation
from linkstream.operators.window import TRIPLE_VARS

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter


#: bits of one id in a packed triple (three of them in a non-negative int64)
_BITS = 21
_LIMIT = 1 << _BITS
_MASK = _LIMIT - 1

#: a graph whose packed counts and delta hold at most this many entries applies the delta
#: by one merge (:meth:`GraphOperator._count_merged`); above, by binary search and
#: insertion (fewer passes over a large state).  ``MERGE_COUNTS`` off: always the latter
#: (kept switchable so tests can compare the two)
MERGE_COUNTS = True
MERGE_COUNTS_MAX = 512

_any = np.logical_or.reduce
_all = np.logical_and.reduce


def _pack(cols: np.ndarray) -> np.ndarray:
    """One int64 per (s, p, o) column triple of ids below ``2**21``, ordered as the triples."""
    return (cols[0] << (2 * _BITS)) | (cols[1] << _BITS) | cols[2]


def _unpack(keys: np.ndarray) -> np.ndarray:
    return np.stack([keys >> (2 * _BITS), (keys >> _BITS) & _MASK, keys & _MASK])


def _packable(cols: np.ndarray) -> bool:
    return not cols.size or (int(cols.min()) >= 0 and int(cols.max()) < _LIMIT)


def dedup_triples(triples: np.ndarray) -> np.ndarray:
    """Unique rows of an (n, 3) triple array, sorted (the order of the input is not kept)."""
    if len(triples) == 0:
        return triples.reshape(0, 3).astype(np.int64)
    arr = np.asarray(triples, dtype=np.int64)
    cols = arr.T
    if _packable(cols):
        # the same sorted rows as ``np.unique(axis=0)`` (packing keeps the order): 1 M rows
        # in 0.03 s, against 1.1 s (and 0.8 s for np.unique of the packed keys, numpy 2.4)
        keys = np.sort(_pack(cols))
        if len(keys) > 1:
            keep = np.empty(len(keys), dtype=bool)
            keep[0] = True
            np.not_equal(keys[1:], keys[:-1], out=keep[1:])
            keys = keys[keep]
        return np.ascontiguousarray(_unpack(keys).T)
    return np.unique(arr, axis=0)


#: static triple arrays already laid out as columns: thousands of queries over the same
#: static graphs get one (3, n) copy, not one each (keyed by the array's identity, which
#: the entry keeps alive)
_STATIC_COLUMNS: dict[int, tuple[np.ndarray, Batch]] = {}


def _static_batch(st: np.ndarray) -> Batch:
    hit = _STATIC_COLUMNS.get(id(st))
    if hit is not None and hit[0] is st:
        return hit[1]
    b = Batch(TRIPLE_VARS, np.ascontiguousarray(st.T), np.ones(len(st), dtype=np.int64))
    if len(st) > 64:
        if len(_STATIC_COLUMNS) >= 32:
            _STATIC_COLUMNS.pop(next(iter(_STATIC_COLUMNS)))
        _STATIC_COLUMNS[id(st)] = (st, b)
    return b


class StaticMembership:
    """Which rows of triple columns are triples of a static array ``cols`` (3, n).

    When every static id is below ``2**21`` the static triples are kept as sorted packed
    keys (a static part comes deduplicated and sorted, so the pack is usually sorted
    already: no sort at all) and a probe is one ``searchsorted``; a row with an id out of
    that range is no static triple.  Otherwise: a :class:`SortedIndex` of hashed row keys,
    with the columns of candidate pairs compared.
    """

    __slots__ = ("cols", "packed", "index")

    def __init__(self, cols: np.ndarray) -> None:
        self.cols = cols
        self.packed: np.ndarray | None = None
        self.index: SortedIndex | None = None
        if _packable(cols):
            pk = _pack(cols)
            if len(pk) > 1 and not bool((pk[1:] >= pk[:-1]).all()):
                pk = np.sort(pk)
            self.packed = pk
        else:
            self.index = SortedIndex(row_keys(cols))

    def contains(self, cols: np.ndarray) -> np.ndarray:
        """Mask of the rows (columns of ``cols``, (3, m)) that are static triples."""
        m = cols.shape[1]
        pk = self.packed
        if pk is not None:
            if not len(pk) or not m:
                return np.zeros(m, dtype=bool)
            if _packable(cols):
                return self.contains_packed(_pack(cols))
            inside = (cols >= 0) & (cols < _LIMIT)
            hit = np.zeros(m, dtype=bool)
            sub = np.flatnonzero(np.logical_and.reduce(inside, axis=0))
            if len(sub):
                hit[sub] = self.contains_packed(_pack(cols.take(sub, axis=1)))
            return hit
        assert self.index is not None
        li, rj = self.index.probe(row_keys(cols))
        hit = np.zeros(m, dtype=bool)
        if len(li):
            ok = np.all(cols.take(li, axis=1) == self.cols.take(rj, axis=1), axis=0)
            hit[li[ok]] = True
        return hit

    def contains_packed(self, keys: np.ndarray) -> np.ndarray:
        """Mask of packed triple ``keys`` that are static triples (packed mode only)."""
        pk = self.packed
        assert pk is not None
        if not len(pk):
            return np.zeros(len(keys), dtype=bool)
        pos = pk.searchsorted(keys)
        np.minimum(pos, len(pk) - 1, out=pos)
        return pk.take(pos) == keys


#: the membership tests of static triple columns, shared by the graphs (and latest graphs)
#: over the same static array: one, not one per graph operator (keyed by identity, as
#: :data:`_STATIC_COLUMNS`; the entry keeps the columns alive)
_STATIC_INDEXES: dict[int, tuple[np.ndarray, StaticMembership]] = {}


def static_index(cols: np.ndarray) -> StaticMembership:
    """The :class:`StaticMembership` of static triple columns ``cols`` (3, n)."""
    hit = _STATIC_INDEXES.get(id(cols))
    if hit is not None and hit[0] is cols:
        return hit[1]
    index = StaticMembership(cols)
    if cols.shape[1] > 64:
        if len(_STATIC_INDEXES) >= 32:
            _STATIC_INDEXES.pop(next(iter(_STATIC_INDEXES)))
        _STATIC_INDEXES[id(cols)] = (cols, index)
    return index


class GraphOperator(Operator):
    """The set of triples of ``static`` (fixed) plus the contents of ``windows``."""

    vars = TRIPLE_VARS
    certain = frozenset(TRIPLE_VARS)
    #: ``(source, graphs)`` when the static part is read on demand instead of held
    #: (:mod:`linkstream.operators.static_probe`): the graph then emits only its window
    #: triples, and scans' static matches are probed by the joins above them
    static_source: tuple[Any, tuple[str | None, ...]] | None = None

    def __init__(
        self,
        name: str,
        static: np.ndarray | None,
        windows: Sequence[Operator] = (),
        *,
        deduplicated: bool = False,
    ) -> None:
        super().__init__()
        self.name = name
        #: identifies the static part for sharing (set by the engine; unique by default)
        self.static_key: object = ("anon", id(self))
        if static is None:
            st = np.empty((0, 3), dtype=np.int64)
        else:
            st = static if deduplicated else dedup_triples(static)
        self.static = _static_batch(st)
        self._static_index: StaticMembership | None = None
        self.children = tuple(windows)
        self._dynamic = Relation(TRIPLE_VARS)
        #: packed mode (see the module docstring): the window triples' sorted packed keys
        #: and their counts (``None``: the counts are in ``_dynamic``)
        self._pk: np.ndarray | None = None
        self._pn = EMPTY_I64
        self._pack_ok = True  # False once a large id was seen
        self._dyn_version = 0
        self._dyn_memo: tuple[int, Relation] | None = None
        self._initialised = False

    @property
    def dynamic(self) -> Relation:
        """The reference counts of the window triples as a relation (built from the packed
        keys in packed mode: a copy that changes with the graph's next delta)."""
        pk = self._pk
        if pk is None:
            return self._dynamic
        memo = self._dyn_memo
        if memo is None or memo[0] != self._dyn_version:
            rel = Relation(TRIPLE_VARS)
            if len(pk):
                rel.set_consolidated(Batch(TRIPLE_VARS, _unpack(pk), self._pn.copy()))
            memo = self._dyn_memo = (self._dyn_version, rel)
        return memo[1]

    @dynamic.setter
    def dynamic(self, rel: Relation) -> None:
        self._dynamic = rel
        self._pk = None
        self._pn = EMPTY_I64
        self._dyn_memo = None
        self._dyn_version += 1

    def _packed(self, cols: np.ndarray) -> bool:
        """Whether the counts are (or can be put) in packed mode for a delta of ``cols``."""
        if not self._pack_ok:
            return False
        if self._pk is None:
            rows = self._dynamic.rows
            if not _packable(rows.cols):
                self._pack_ok = False
                return False
            self._pk, self._pn = _pack(rows.cols), rows.counts.copy()
        if _packable(cols):
            return True
        self._dynamic = self.dynamic  # back to a relation, for good
        self._pk, self._pn, self._pack_ok = None, EMPTY_I64, False
        return False

    def _count_packed(self, d: Batch) -> tuple[np.ndarray, np.ndarray]:
        """Applies delta ``d`` to the packed counts; returns the triples that entered or
        left the set (packed, ascending) and their signs."""
        pk, pn = self._pk, self._pn
        assert pk is not None
        kernels = _batch._native
        if kernels is not None and MERGE_COUNTS:  # (one linear merge in C at any size)
            return self._count_native(kernels, _pack(d.cols), d.counts)
        if MERGE_COUNTS and len(pk) + len(d.counts) <= MERGE_COUNTS_MAX:
            return self._count_merged(_pack(d.cols), d.counts)
        k, c = sum_by_key(_pack(d.cols), d.counts)
        if not len(k):
            return k, c
        pos = pk.searchsorted(k)
        found = pos < len(pk)
        found[found] = pk.take(pos[found]) == k[found]
        fp = pos[found]
        old = np.zeros(len(k), dtype=np.int64)
        old[found] = pn.take(fp)
        new = old + c
        pn = pn.copy()
        pn[fp] = new[found]
        ins = ~found
        if ins.any():
            new_at, old_at = insert_sorted(pos[ins], len(pk))
            pk2 = np.empty(len(new_at) + len(pk), dtype=np.int64)
            pk2[new_at], pk2[old_at] = k[ins], pk
            pn2 = np.empty(len(pk2), dtype=np.int64)
            pn2[new_at], pn2[old_at] = c[ins], pn
            pk, pn = pk2, pn2
        keep = pn != 0
        if not keep.all():
            pk, pn = pk[keep], pn[keep]
        self._pk, self._pn = pk, pn
        self._dyn_version += 1
        enter = (old <= 0) & (new > 0)
        changed = enter | ((old > 0) & (new <= 0))
        return k[changed], np.where(enter[changed], 1, -1).astype(np.int64)

    def _count_native(self, kernels: Any, dk: np.ndarray, dn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_count_merged` in one compiled call (``count_merge``)."""
        pk, pn = self._pk, self._pn
        assert pk is not None
        n, nd = len(pk), len(dk)
        if not dn.flags.c_contiguous or dn.dtype is not EMPTY_I64.dtype:
            dn = np.ascontiguousarray(dn, dtype=np.int64)
        keys = np.empty(n + nd, dtype=np.int64)
        counts = np.empty(n + nd, dtype=np.int64)
        ch_k = np.empty(nd, dtype=np.int64)
        ch_s = np.empty(nd, dtype=np.int64)
        done = kernels.count_merge(pk, pn, n, dk, dn, nd, keys, counts, ch_k, ch_s)
        if done is None:  # the delta cancels out: nothing changes
            return EMPTY_I64, EMPTY_I64
        m, c = done
        self._pk, self._pn = _batch.fitted(keys, counts, 1, m, n + nd)
        self._pk = self._pk.reshape(m)
        self._dyn_version += 1
        return ch_k[:c], ch_s[:c]

    def _count_merged(self, dk: np.ndarray, dn: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`_count_packed` for a small state: the counts and the delta's packed
        triples sorted together (a stable sort merges the sorted counts with the delta)
        and summed per triple, old and new sums in two ``reduceat``; about 35 numpy calls
        where the binary search and insertion take about 60 (a window whose triples all
        change at each step, a few dozen of them, is most of CityBench's)."""
        pk, pn = self._pk, self._pn
        assert pk is not None
        n = len(pk)
        keys = np.concatenate((pk, dk))
        counts = np.concatenate((pn, dn))
        order = stable_argsort(keys)
        keys = keys.take(order)
        counts = counts.take(order)
        starts = np.empty(len(keys), dtype=bool)
        starts[0] = True
        np.not_equal(keys[1:], keys[:-1], out=starts[1:])
        at = starts.nonzero()[0]
        new = np.add.reduceat(counts, at)
        old = np.add.reduceat(np.where(order < n, counts, 0), at)  # (one old entry at most)
        changed = new != old
        if not _any(changed):  # the delta cancels out: nothing changes
            return EMPTY_I64, EMPTY_I64
        keys = keys.take(at)
        keep = new != 0
        if _all(keep):
            self._pk, self._pn = keys, new
        else:
            self._pk, self._pn = keys[keep], new[keep]
        self._dyn_version += 1
        enter = (old <= 0) & (new > 0)
        changed = enter | ((old > 0) & (new <= 0))
        sign = enter[changed].astype(np.int64)
        sign += sign
        sign -= 1
        return keys[changed], sign

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The windows' triples and whether the static part was emitted (the static part
        itself is not shipped: every container loaded the same static graphs)."""
        return {"dynamic": w.relation(self.dynamic), "_initialised": self._initialised}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("dynamic", "_initialised"))
        self.dynamic = r.relation(entries["dynamic"], self.dynamic)
        self._initialised = r.value(entries["_initialised"], bool)

    def describe(self) -> str:
        return f"Graph {self.name} static={len(self.static)} windows={len(self.children)}"

    def _in_static(self, cols: np.ndarray, packed: np.ndarray | None = None) -> np.ndarray:
        """Mask of the triples (columns of ``cols``) in the static part (``packed``: the
        same triples' packed keys, when the caller has them)."""
        if self.static_source is not None:
            source, graphs = self.static_source
            return source.contains(graphs, np.ascontiguousarray(cols.T))
        if not len(self.static):
            return np.zeros(cols.shape[1], dtype=bool)
        if self._static_index is None:
            self._static_index = static_index(self.static.cols)
        if packed is not None and self._static_index.packed is not None:
            return self._static_index.contains_packed(packed)
        return self._static_index.contains(cols)

    def compute(self, epoch: int) -> Batch:
        parts = []
        if not self._initialised:
            self._initialised = True
            if len(self.static):
                parts.append(self.static)
        deltas = [c.delta(epoch) for c in self.children]
        deltas = [d for d in deltas if len(d)]
        if deltas:
            d = concat(deltas, TRIPLE_VARS)
            if self._packed(d.cols):
                ks, sign = self._count_packed(d)
                if len(ks):
                    cols = _unpack(ks)
                    keep = ~self._in_static(cols, ks)
                    if keep.all():
                        parts.append(Batch(TRIPLE_VARS, cols, sign))
                    elif keep.any():
                        parts.append(Batch(TRIPLE_VARS, cols[:, keep], sign[keep]))
                d = Batch.empty(TRIPLE_VARS)
            else:
                d = consolidate(d)
                self._dyn_version += 1
            if len(d):
                old = self.dynamic.key_counts(d, TRIPLE_VARS)
                new = old + d.counts
                enter = (old <= 0) & (new > 0)
                leave = (old > 0) & (new <= 0)
                self.dynamic.apply(d)
                changed = enter | leave
                if changed.any():
                    ch = d.mask(changed)
                    sign = np.where(enter[changed], 1, -1).astype(np.int64)
                    keep = ~self._in_static(ch.cols)
                    if keep.any():
                        parts.append(Batch(TRIPLE_VARS, ch.cols[:, keep], sign[keep]))
        if not parts:
            return Batch.empty(TRIPLE_VARS)
        return concat(parts, TRIPLE_VARS)

    def config_key(self) -> object:
        return (self.static_key,)

    def current(self) -> Batch:
        """The graph's current content (static part plus present dynamic triples).

        Memoised until the next epoch's compute: the queries that attach to a running graph
        in one epoch (thousands registered at once) share one copy."""
        memo = self.__dict__.get("_current_memo")
        if memo is not None and memo[0] == self._epoch and memo[1] == self._dyn_version:
            return memo[2]
        out = self._current()
        self._current_memo = (self._epoch, self._dyn_version, out)
        return out

    def forget_current(self) -> None:
        """Drops the memo of :meth:`current` (a full copy of the graph, kept for the queries
        that attach in one epoch): called when a query leaves, so that nothing outlives it."""
        self.__dict__.pop("_current_memo", None)

    def _current(self) -> Batch:
        dyn = self.dynamic.rows
        dyn = dyn.mask(dyn.counts > 0)
        dyn = dyn.mask(~self._in_static(dyn.cols))
        dyn = Batch(TRIPLE_VARS, dyn.cols, np.ones(dyn.cols.shape[1], dtype=np.int64))
        return concat([self.static, dyn], TRIPLE_VARS)
