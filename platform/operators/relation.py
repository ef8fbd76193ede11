"""Materialised multisets of mappings with join indexes (the state of stateful operators).

A :class:`Relation` is a *base* part (consolidated, with cached sorted key indexes) plus a
small *recent* part that absorbs the deltas of the last epochs.  Probing joins both
parts (join is bilinear in the multiplicities, so a recent -1 cancels a base +1 in the
output counts); the recent part is merged into the base only once it has grown to a
fraction of it.  A window's churn therefore costs work proportional to the delta, not
to a large static relation it sits next to.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .batch import (
    EMPTY_I64,
    Batch,
    SortedIndex,
    compatible_pairs_broadcast,
    concat,
    consolidate,
    equal_on,
    merge_columns,
    row_keys,
)


def union_vars(a: Sequence[str], b: Sequence[str]) -> tuple[str, ...]:
    return tuple(a) + tuple(v for v in b if v not in a)


def _split_bound(cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Row indices whose columns are all bound, and the others."""
    if cols.shape[0] == 0:
        n = cols.shape[1]
        return np.arange(n), EMPTY_I64
    bound = (cols[0] != 0) if cols.shape[0] == 1 else (cols != 0).all(axis=0)
    if bound.all():
        return np.arange(cols.shape[1]), EMPTY_I64
    return np.flatnonzero(bound), np.flatnonzero(~bound)


class _Part:
    """One consolidated multiset with lazily built key indexes."""

    __slots__ = ("rows", "_indexes")

    def __init__(self, rows: Batch) -> None:
        self.rows = rows
        self._indexes: dict[tuple[str, ...], tuple[SortedIndex, np.ndarray, np.ndarray, np.ndarray]] = {}

    def index(self, keyvars: tuple[str, ...]):
        ix = self._indexes.get(keyvars)
        if ix is None:
            cols = self.rows.project(keyvars).cols
            bound, partial = _split_bound(cols)
            ix = (SortedIndex(row_keys(cols[:, bound])), bound, partial, cols)
            self._indexes[keyvars] = ix
        return ix

    def pairs(self, probe: Batch, shared: tuple[str, ...], pcols, pbound, ppartial, pkeys):
        n, m = len(probe), len(self.rows)
        if n == 0 or m == 0:
            return EMPTY_I64, EMPTY_I64
        if not shared:
            return np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
        index, rbound, rpartial, rcols = self.index(shared)
        li, rj = index.probe(pkeys)
        if len(pbound) != n:
            li = pbound[li]
        if len(rbound) != m:
            rj = rbound[rj]
        if len(shared) > 1 and len(li):
            ok = equal_on(pcols, li, rcols, rj)
            li, rj = li[ok], rj[ok]
        if len(ppartial) or len(rpartial):
            extra_i, extra_j = [li], [rj]
            if len(ppartial):
                a, b = compatible_pairs_broadcast(pcols[:, ppartial], rcols)
                extra_i.append(ppartial[a])
                extra_j.append(b)
            if len(rpartial) and len(pbound):
                a, b = compatible_pairs_broadcast(pcols[:, pbound], rcols[:, rpartial])
                extra_i.append(pbound[a])
                extra_j.append(rpartial[b])
            li, rj = np.concatenate(extra_i), np.concatenate(extra_j)
        return li, rj


class Relation:
    """A multiset of mappings over ``vars``: a large stable base plus a small recent part."""

    __slots__ = ("vars", "_base", "_recent", "_rows", "version")

    #: merge the recent part into the base once it exceeds base/RATIO (+ a floor)
    RATIO = 4
    FLOOR = 256

    def __init__(self, vars: Sequence[str]) -> None:
        self.vars = tuple(vars)
        self._base = _Part(Batch.empty(self.vars))
        self._recent = _Part(Batch.empty(self.vars))
        self._rows: Batch | None = self._base.rows
        self.version = 0

    def __len__(self) -> int:
        return len(self._base.rows) + len(self._recent.rows)

    @property
    def rows(self) -> Batch:
        """The consolidated content (computed on demand)."""
        if self._rows is None:
            if len(self._recent.rows):
                self._base = _Part(consolidate(concat([self._base.rows, self._recent.rows], self.vars)))
                self._recent = _Part(Batch.empty(self.vars))
            self._rows = self._base.rows
        return self._rows

    def cardinality(self) -> int:
        r = self.rows
        return int(r.counts.sum()) if len(r) else 0

    def apply(self, delta: Batch) -> None:
        if not len(delta):
            return
        delta = delta.project(self.vars)
        self.version += 1
        self._rows = None
        nb, nr = len(self._base.rows), len(self._recent.rows)
        if nr + len(delta) > nb // self.RATIO + self.FLOOR:
            self._base = _Part(consolidate(concat([self._base.rows, self._recent.rows, delta], self.vars)))
            self._recent = _Part(Batch.empty(self.vars))
            self._rows = self._base.rows
        else:
            self._recent = _Part(consolidate(concat([self._recent.rows, delta], self.vars)))

    def replace(self, rows: Batch) -> None:
        self._base = _Part(consolidate(rows.project(self.vars)))
        self._recent = _Part(Batch.empty(self.vars))
        self._rows = self._base.rows
        self.version += 1

    def _parts(self) -> list[_Part]:
        return [p for p in (self._base, self._recent) if len(p.rows)]

    def _probe_prep(self, probe: Batch, shared: tuple[str, ...]):
        pcols = probe.project(shared).cols
        pbound, ppartial = _split_bound(pcols)
        pkeys = row_keys(pcols[:, pbound] if len(pbound) != pcols.shape[1] else pcols)
        return pcols, pbound, ppartial, pkeys

    def join(self, probe: Batch, out_vars: Sequence[str] | None = None) -> Batch:
        """Join ``probe`` with this relation (SPARQL compatibility, counts multiply)."""
        shared = tuple(v for v in probe.vars if v in self.vars)
        out = tuple(out_vars) if out_vars is not None else union_vars(probe.vars, self.vars)
        parts = self._parts()
        if not parts or not len(probe):
            return Batch.empty(out)
        prep = self._probe_prep(probe, shared)
        results = []
        for part in parts:
            li, rj = part.pairs(probe, shared, *prep)
            if len(li):
                cols = merge_columns(out, probe, li, part.rows, rj)
                results.append(Batch(out, cols, probe.counts[li] * part.rows.counts[rj]))
        if not results:
            return Batch.empty(out)
        return results[0] if len(results) == 1 else concat(results, out)

    def key_counts(self, probe: Batch, shared: tuple[str, ...]) -> np.ndarray:
        """For each probe row, the total multiplicity of compatible rows here."""
        out = np.zeros(len(probe), dtype=np.int64)
        parts = self._parts()
        if not parts or not len(probe):
            return out
        prep = self._probe_prep(probe, shared)
        for part in parts:
            li, rj = part.pairs(probe, shared, *prep)
            if len(li):
                np.add.at(out, li, part.rows.counts[rj])
        return out
