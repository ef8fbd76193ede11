"""Materialised multisets of mappings with join indexes (the state of stateful operators)."""

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
    bound = np.all(cols != 0, axis=0)
    return np.flatnonzero(bound), np.flatnonzero(~bound)


class Relation:
    """A consolidated multiset of mappings over ``vars`` with cached key indexes."""

    __slots__ = ("vars", "rows", "_indexes", "version")

    def __init__(self, vars: Sequence[str]) -> None:
        self.vars = tuple(vars)
        self.rows = Batch.empty(self.vars)
        self._indexes: dict[tuple[str, ...], tuple[SortedIndex, np.ndarray, np.ndarray]] = {}
        self.version = 0

    def __len__(self) -> int:
        return len(self.rows)

    def cardinality(self) -> int:
        return int(self.rows.counts.sum()) if len(self.rows) else 0

    def apply(self, delta: Batch) -> None:
        if not len(delta):
            return
        self.rows = consolidate(concat([self.rows, delta.project(self.vars)], self.vars))
        self._indexes.clear()
        self.version += 1

    def replace(self, rows: Batch) -> None:
        self.rows = consolidate(rows.project(self.vars))
        self._indexes.clear()
        self.version += 1

    def _index(self, keyvars: tuple[str, ...]) -> tuple[SortedIndex, np.ndarray, np.ndarray]:
        ix = self._indexes.get(keyvars)
        if ix is None:
            cols = self.rows.project(keyvars).cols
            bound, partial = _split_bound(cols)
            ix = (SortedIndex(row_keys(cols[:, bound])), bound, partial)
            self._indexes[keyvars] = ix
        return ix

    def pairs(self, probe: Batch, shared: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Compatible pairs (i in probe, j in self.rows) on the shared variables."""
        n, m = len(probe), len(self.rows)
        if n == 0 or m == 0:
            return EMPTY_I64, EMPTY_I64
        if not shared:
            return np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
        index, rbound, rpartial = self._index(shared)
        pcols = probe.project(shared).cols
        pbound, ppartial = _split_bound(pcols)
        li, rj = index.probe(row_keys(pcols[:, pbound]))
        li = pbound[li]
        rj = rbound[rj]
        if len(shared) > 1 and len(li):
            ok = equal_on(pcols, li, self.rows.project(shared).cols, rj)
            li, rj = li[ok], rj[ok]
        if len(ppartial) or len(rpartial):
            rcols = self.rows.project(shared).cols
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

    def join(self, probe: Batch, out_vars: Sequence[str] | None = None) -> Batch:
        """Join ``probe`` with this relation (SPARQL compatibility, counts multiply)."""
        shared = tuple(v for v in probe.vars if v in self.vars)
        out = tuple(out_vars) if out_vars is not None else union_vars(probe.vars, self.vars)
        li, rj = self.pairs(probe, shared)
        if len(li) == 0:
            return Batch.empty(out)
        cols = merge_columns(out, probe, li, self.rows, rj)
        return Batch(out, cols, probe.counts[li] * self.rows.counts[rj])

    def key_counts(self, probe: Batch, shared: tuple[str, ...]) -> np.ndarray:
        """For each probe row, the total multiplicity of compatible rows here."""
        li, rj = self.pairs(probe, shared)
        out = np.zeros(len(probe), dtype=np.int64)
        if len(li):
            np.add.at(out, li, self.rows.counts[rj])
        return out
