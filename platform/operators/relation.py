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


#: a probe whose candidate pairs (probe rows x part rows) are at most this many compares
#: all pairs at once (an equality matrix) instead of hashing keys and probing the sorted
#: index: a handful of numpy calls instead of ~20 for the tiny batches of a window's churn
SMALL_PAIRS = 2048


class _Plan:
    """How probes with given variables join a relation (cached per probe variables)."""

    __slots__ = ("shared", "out", "p_idx", "r_idx", "extra", "n_probe")

    def __init__(self, probe_vars: tuple[str, ...], rel_vars: tuple[str, ...]) -> None:
        self.shared = tuple(v for v in probe_vars if v in rel_vars)
        self.out = union_vars(probe_vars, rel_vars)
        self.p_idx = [probe_vars.index(v) for v in self.shared]
        self.r_idx = [rel_vars.index(v) for v in self.shared]
        self.extra = [rel_vars.index(v) for v in self.out[len(probe_vars) :]]
        self.n_probe = len(probe_vars)


def _small_pairs(plan: _Plan, probe: Batch, rows: Batch) -> tuple[np.ndarray, np.ndarray] | None:
    """All pairs (i, j) of equal shared values, in (i, j) order, or ``None`` when a
    shared value is unbound on either side (the general path handles compatibility)."""
    n, m = len(probe), len(rows)
    k = len(plan.p_idx)
    if k == 0:
        return np.repeat(np.arange(n), m), np.tile(np.arange(m), n)
    if k == 1:
        a = probe.cols[plan.p_idx[0]]
        b = rows.cols[plan.r_idx[0]]
        if not (a.all() and b.all()):
            return None
        eq = a[:, None] == b[None, :]
    else:
        a = probe.cols[plan.p_idx]
        b = rows.cols[plan.r_idx]
        if not (a.all() and b.all()):
            return None
        eq = (a[:, :, None] == b[:, None, :]).all(axis=0)
    li, rj = np.nonzero(eq)
    return li, rj


class Relation:
    """A multiset of mappings over ``vars``: a large stable base plus a small recent part."""

    __slots__ = ("vars", "_base", "_recent", "_rows", "version", "_plans", "_n")

    #: merge the recent part into the base once it exceeds base/RATIO (+ a floor)
    RATIO = 4
    FLOOR = 256

    def __init__(self, vars: Sequence[str]) -> None:
        self.vars = tuple(vars)
        self._base = _Part(Batch.empty(self.vars))
        self._recent = _Part(Batch.empty(self.vars))
        self._rows: Batch | None = self._base.rows
        self.version = 0
        self._plans: dict[tuple[str, ...], _Plan] = {}
        self._n = 0  # rows in base + recent (kept, as joins ask for it at every probe)

    def __len__(self) -> int:
        return self._n

    @property
    def rows(self) -> Batch:
        """The consolidated content (computed on demand)."""
        if self._rows is None:
            if len(self._recent.rows):
                self._base = _Part(consolidate(concat([self._base.rows, self._recent.rows], self.vars)))
                self._recent = _Part(Batch.empty(self.vars))
                self._n = len(self._base.rows)
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
        self._n = len(self._base.rows) + len(self._recent.rows)

    def replace(self, rows: Batch) -> None:
        self._base = _Part(consolidate(rows.project(self.vars)))
        self._recent = _Part(Batch.empty(self.vars))
        self._rows = self._base.rows
        self._n = len(self._base.rows)
        self.version += 1

    def _parts(self) -> list[_Part]:
        return [p for p in (self._base, self._recent) if len(p.rows)]

    def _probe_prep(self, probe: Batch, shared: tuple[str, ...]):
        pcols = probe.project(shared).cols
        pbound, ppartial = _split_bound(pcols)
        pkeys = row_keys(pcols[:, pbound] if len(pbound) != pcols.shape[1] else pcols)
        return pcols, pbound, ppartial, pkeys

    def _plan(self, probe_vars: tuple[str, ...]) -> _Plan:
        plan = self._plans.get(probe_vars)
        if plan is None:
            plan = self._plans[probe_vars] = _Plan(probe_vars, self.vars)
        return plan

    def join(self, probe: Batch, out_vars: Sequence[str] | None = None) -> Batch:
        """Join ``probe`` with this relation (SPARQL compatibility, counts multiply)."""
        plan = self._plan(probe.vars)
        shared = plan.shared
        out = tuple(out_vars) if out_vars is not None else plan.out
        n = len(probe)
        parts = self._parts()
        if not parts or not n:
            return Batch.empty(out)
        prep = None
        results = []
        for part in parts:
            rows = part.rows
            pairs = _small_pairs(plan, probe, rows) if n * len(rows) <= SMALL_PAIRS else None
            if pairs is not None and out == plan.out:
                # every shared value is bound on both sides, hence equal: the probe's
                # columns then the relation's own ones are the merged mapping
                li, rj = pairs
                if not len(li):
                    continue
                cols = np.empty((len(out), len(li)), dtype=np.int64)
                cols[: plan.n_probe] = probe.cols[:, li]
                if plan.extra:
                    cols[plan.n_probe :] = rows.cols[plan.extra][:, rj]
            else:
                if prep is None:
                    prep = self._probe_prep(probe, shared)
                li, rj = part.pairs(probe, shared, *prep)
                if not len(li):
                    continue
                cols = merge_columns(out, probe, li, rows, rj)
            results.append(Batch(out, cols, probe.counts[li] * rows.counts[rj]))
        if not results:
            return Batch.empty(out)
        return results[0] if len(results) == 1 else concat(results, out)

    def key_counts(self, probe: Batch, shared: tuple[str, ...]) -> np.ndarray:
        """For each probe row, the total multiplicity of compatible rows here."""
        out = np.zeros(len(probe), dtype=np.int64)
        parts = self._parts()
        n = len(probe)
        if not parts or not n:
            return out
        plan = self._plan(probe.vars) if shared == tuple(v for v in probe.vars if v in self.vars) else None
        prep = None
        for part in parts:
            rows = part.rows
            pairs = None
            if plan is not None and n * len(rows) <= SMALL_PAIRS:
                pairs = _small_pairs(plan, probe, rows)
            if pairs is None:
                if prep is None:
                    prep = self._probe_prep(probe, shared)
                pairs = part.pairs(probe, shared, *prep)
            li, rj = pairs
            if len(li):
                np.add.at(out, li, rows.counts[rj])
        return out
