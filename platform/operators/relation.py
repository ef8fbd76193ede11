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

from linkstream.operators import batch as _batch
from linkstream.operators.batch import (
    EMPTY_I64,
    Batch,
    SortedIndex,
    compatible_pairs_broadcast,
    concat,
    consolidate,
    equal_on,
    merge_columns,
    row_keys,
    rows_of_keys,
)
from linkstream.operators.order import stable_argsort

#: ``np.logical_and.reduce``: ``ndarray.all`` adds a Python frame per call (axis=None: all)
_all = np.logical_and.reduce


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
    return bound.nonzero()[0], (~bound).nonzero()[0]


class _BoundIndex:
    """Key columns of a part whose key values are all bound, with a lazily sorted index.

    Single-variable keys are the column itself; multi-variable keys are hashed by
    :func:`row_keys` and candidate pairs are verified column by column.
    """

    __slots__ = ("kcols", "_keys", "_order")

    def __init__(self, kcols: np.ndarray) -> None:
        self.kcols = kcols  # (m,) for one key variable, (k, m) for several
        self._keys: np.ndarray | None = None
        self._order = EMPTY_I64

    def sorted(self) -> tuple[np.ndarray, np.ndarray]:
        """The keys ascending and their rows (a stable sort: equal keys in row order)."""
        keys = self._keys
        if keys is None:
            kc = self.kcols
            keys = kc if kc.ndim == 1 else row_keys(kc)
            self._order = stable_argsort(keys)
            keys = self._keys = keys[self._order]
        return keys, self._order

    def probe(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Pairs (i, j) of equal keys, ``i`` ascending then ``j`` ascending."""
        kc = self.kcols
        keys, _ = self.sorted()
        pk = a if a.ndim == 1 else row_keys(a)
        got = _batch.probe_sorted(keys, self._order, pk)
        if got is not None:
            li, rj = got
            if kc.ndim == 2 and len(li):  # hash keys: rule out collisions
                ok = (a.take(li, axis=1) == kc.take(rj, axis=1)).all(axis=0)
                if not ok.all():
                    li, rj = li[ok], rj[ok]
            return li, rj
        lo = keys.searchsorted(pk, "left")
        cnt = keys.searchsorted(pk, "right")
        cnt -= lo
        total = int(cnt.sum())
        if total == 0:
            return EMPTY_I64, EMPTY_I64
        n = len(pk)
        if total == n and cnt.all():  # one match per probe row (e.g. unique keys)
            li = np.arange(n)
            rj = self._order[lo]
        else:
            li = np.arange(n).repeat(cnt)
            # position of each pair in the sorted keys: its probe row's first match plus
            # its rank among that row's matches
            off = lo - cnt.cumsum()
            off += cnt
            pos = np.arange(total)
            pos += off.repeat(cnt)
            rj = self._order[pos]
        if kc.ndim == 2:  # hash keys: rule out collisions
            ok = (a.take(li, axis=1) == kc.take(rj, axis=1)).all(axis=0)
            if not ok.all():
                li, rj = li[ok], rj[ok]
        return li, rj


class _Part:
    """One consolidated multiset with lazily built key indexes."""

    __slots__ = ("rows", "_indexes", "_bound", "_extra")

    def __init__(self, rows: Batch) -> None:
        self.rows = rows
        self._indexes: dict[tuple[str, ...], tuple[SortedIndex, np.ndarray, np.ndarray, np.ndarray]] = {}
        self._bound: dict[tuple[int, ...], _BoundIndex | None] = {}
        self._extra: dict[tuple[int, ...], np.ndarray] = {}

    def bound_index(self, r_idx: tuple[int, ...]) -> _BoundIndex | None:
        """The key index on columns ``r_idx``, or ``None`` if some key value is unbound."""
        try:
            return self._bound[r_idx]
        except KeyError:
            pass
        cols = self.rows.cols
        kc = cols[r_idx[0]] if len(r_idx) == 1 else cols.take(r_idx, axis=0)
        ix = self._bound[r_idx] = _BoundIndex(kc) if _all(kc, axis=None) else None
        return ix

    def extra_cols(self, extra: tuple[int, ...]) -> np.ndarray:
        """Columns ``extra`` as one contiguous array (cached: probed once per probe batch)."""
        e = self._extra.get(extra)
        if e is None:
            e = self._extra[extra] = self.rows.cols.take(extra, axis=0)
        return e

    def index(self, keyvars: tuple[str, ...]):
        ix = self._indexes.get(keyvars)
        if ix is None:
            cols = self.rows.project(keyvars).cols
            bound, partial = _split_bound(cols)
            ix = (SortedIndex(row_keys(cols.take(bound, axis=1))), bound, partial, cols)
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
                a, b = compatible_pairs_broadcast(pcols.take(ppartial, axis=1), rcols)
                extra_i.append(ppartial[a])
                extra_j.append(b)
            if len(rpartial) and len(pbound):
                a, b = compatible_pairs_broadcast(pcols.take(pbound, axis=1), rcols.take(rpartial, axis=1))
                extra_i.append(pbound[a])
                extra_j.append(rpartial[b])
            li, rj = np.concatenate(extra_i), np.concatenate(extra_j)
        return li, rj


#: a probe whose candidate pairs (probe rows x part rows) are at most this many compares
#: all pairs at once (an equality matrix) instead of probing the sorted key index: a
#: handful of numpy calls for the small batches of a window's churn
SMALL_PAIRS = 4096

#: joins whose shared values are all bound on both sides take the direct path
#: (:func:`_bound_pairs` and column takes); off, every join takes the general path that
#: handles unbound values (kept switchable so tests can compare the two)
BOUND_FAST = True


class _Plan:
    """How probes with given variables join a relation (cached per probe variables)."""

    __slots__ = ("shared", "out", "p_idx", "r_idx", "extra", "n_probe", "p_key", "r_key", "p_arr")

    def __init__(self, probe_vars: tuple[str, ...], rel_vars: tuple[str, ...]) -> None:
        self.shared = tuple(v for v in probe_vars if v in rel_vars)
        self.out = union_vars(probe_vars, rel_vars)
        self.p_idx = [probe_vars.index(v) for v in self.shared]
        self.r_idx = [rel_vars.index(v) for v in self.shared]
        self.extra = tuple(rel_vars.index(v) for v in self.out[len(probe_vars) :])
        self.n_probe = len(probe_vars)
        self.p_key = self.p_idx[0] if len(self.p_idx) == 1 else self.p_idx
        self.r_key = tuple(self.r_idx)
        self.p_arr = np.array(self.p_idx, dtype=np.int64)  # (the compiled join's argument)


def _bound_pairs(plan: _Plan, probe: Batch, part: _Part) -> tuple[np.ndarray, np.ndarray] | None:
    """All pairs (i, j) of equal shared values, ``i`` ascending then ``j`` ascending, or
    ``None`` when a shared value is unbound on either side (the general path handles
    compatibility with unbound values)."""
    n, m = len(probe), len(part.rows)
    if not plan.p_idx:
        return np.divmod(np.arange(n * m), m)
    a = probe.cols[plan.p_key] if len(plan.p_idx) == 1 else probe.cols.take(plan.p_idx, axis=0)
    if not _all(a, axis=None):
        return None
    ix = part.bound_index(plan.r_key)
    if ix is None:
        return None
    if n * m > SMALL_PAIRS:
        return ix.probe(a)
    b = ix.kcols
    eq = (a[:, None] == b) if a.ndim == 1 else _all(a[:, :, None] == b[:, None, :], axis=0)
    return eq.nonzero()  # (row-major: i ascending, then j)


def _c(a: np.ndarray) -> np.ndarray:
    return a if a.flags.c_contiguous else np.ascontiguousarray(a)


def _join_small(kernels, plan: _Plan, probe: Batch, part: _Part) -> Batch | None:
    """:meth:`Relation.join`'s direct path (every shared value bound on both sides) in one
    compiled call, for at most :data:`SMALL_PAIRS` candidate pairs: the same rows in the
    same order as :func:`_bound_pairs` and the column takes; ``None`` when a shared value
    is unbound on either side (the general path decides)."""
    ix = part.bound_index(plan.r_key)
    if ix is None:
        return None
    rows = part.rows
    n, m = probe.counts.shape[0], rows.counts.shape[0]
    kp, ke = plan.n_probe, len(plan.extra)
    extra = part.extra_cols(plan.extra) if ke else EMPTY_I64
    ko = kp + ke
    out = np.empty(ko * n * m, dtype=np.int64)
    counts = np.empty(n * m, dtype=np.int64)
    t = kernels.join_small(
        _c(probe.cols), kp, n, plan.p_arr, _c(ix.kcols), m, _c(extra), ke,
        _c(probe.counts), _c(rows.counts), out, counts,
    )  # fmt: skip
    if t < 0:
        return None
    return Batch(plan.out, *_batch.fitted(out, counts, ko, t, n * m))


#: (see :meth:`Relation.apply`) by ``id`` of a delta: the delta, and by the variables and
#: parts (``id``; 0 for an empty part) of each relation it was applied to, the parts before
#: and after; cleared at each epoch and when it holds :data:`APPLIED_MAX` deltas (an entry
#: keeps its delta and parts alive, so no ``id`` in it is reused while it is there)
_APPLIED: dict[int, tuple[Batch, dict[tuple[tuple[str, ...], int, int], tuple]]] = {}
APPLIED_MAX = 512
#: whether :meth:`Relation.apply` records in (and reads) the memo; see :func:`forget_applied`
_memo_on = True


def forget_applied(record: bool = True) -> None:
    """Empties the memo of :meth:`Relation.apply` (the engine calls it at each epoch: the
    deltas of the last one are not applied again, and the memo would keep them alive).

    ``record=False`` turns the memo off until the next call: an engine in which no
    operator is read by two queries passes it (one delta then reaches one relation, so the
    memo never hits, and a lone query would pay its bookkeeping at every apply)."""
    global _memo_on
    _APPLIED.clear()
    _memo_on = record


class Relation:
    """A multiset of mappings over ``vars``: a large stable base plus a small recent part."""

    __slots__ = ("vars", "_base", "_recent", "_rows", "version", "_plans", "_n", "_images")

    #: merge the recent part into the base once it exceeds base/RATIO (+ a floor)
    RATIO = 4
    FLOOR = 256
    #: a relation of at most this many rows stays one part: joins then probe one part,
    #: and re-sorting it all costs no more than sorting the recent part (numpy's per-call
    #: overhead dominates at this size)
    SMALL = 512

    def __init__(self, vars: Sequence[str]) -> None:
        self.vars = tuple(vars)
        self._base = _Part(Batch.empty(self.vars))
        self._recent = _Part(Batch.empty(self.vars))
        self._rows: Batch | None = self._base.rows
        self.version = 0
        self._plans: dict[tuple[str, ...], _Plan] = {}
        self._n = 0  # rows in base + recent (kept, as joins ask for it at every probe)
        #: (see :meth:`mirror`) the parts of the relation mirrored last and their images here
        self._images: tuple[_Part, Batch, _Part, _Part, Batch, _Part] | None = None

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

    def contents(self) -> Batch:
        """The content as a batch that may hold equal rows twice (base and recent part,
        whose counts may cancel): cheaper than :attr:`rows` for a bilinear use."""
        if self._rows is not None:
            return self._rows
        if not len(self._recent.rows):
            return self._base.rows
        if not len(self._base.rows):
            return self._recent.rows
        return concat([self._base.rows, self._recent.rows], self.vars)

    def cardinality(self) -> int:
        r = self.rows
        return int(r.counts.sum()) if len(r) else 0

    def apply(self, delta: Batch) -> None:
        nd = delta.counts.shape[0]
        if not nd:
            return
        self.version += 1
        vs = self.vars
        bpart, rpart = self._base, self._recent
        base, recent = bpart.rows, rpart.rows
        nb, nr = base.counts.shape[0], recent.counts.shape[0]
        # the same delta applied to an equal relation (the same scan's matches kept by
        # the joins of several queries): take that relation's new parts, indexes and all
        memo = None
        if _memo_on:
            key = (vs, id(bpart) if nb else 0, id(rpart) if nr else 0)
            memo = _APPLIED.get(id(delta))
            if memo is not None and memo[0] is delta:
                hit = memo[1].get(key)
                if hit is not None:
                    self._base, self._recent, self._rows, self._n = hit[2], hit[3], hit[4], hit[5]
                    return
            else:
                if len(_APPLIED) >= APPLIED_MAX:
                    _APPLIED.clear()
                memo = _APPLIED[id(delta)] = (delta, {})
        if delta.vars != vs:
            delta = delta.project(vs)
        if nb + nr + nd <= self.SMALL or nr + nd > nb // self.RATIO + self.FLOOR:
            if nr:
                # (base, recent part and delta in two linear merges when compiled: the
                # parts are consolidated, the delta a few rows once consolidated itself)
                got = None
                if vs and _batch._native is not None:
                    got = _batch.merge_sorted(recent, consolidate(delta))
                    if got is not None:
                        got = _batch.merge_sorted(base, got[0])
                rows = got[0] if got is not None else consolidate(concat([base, recent, delta], vs))
            elif nb:  # (the common case: one merge when the delta is consolidated)
                got = _batch.merge_sorted(base, delta) if vs else None
                if got is None and vs and nd > 1 and _batch._native is not None:
                    # (a delta in any order -- a join's input changes, applied as they
                    # came: consolidated on its own, a few rows, then merged)
                    cd = consolidate(delta)
                    got = _batch.merge_sorted(base, cd) if len(cd) else (base, EMPTY_I64)
                if got is not None:
                    rows = got[0]
                else:
                    rows = consolidate(
                        Batch(
                            vs,
                            np.concatenate((base.cols, delta.cols), axis=1),
                            np.concatenate((base.counts, delta.counts)),
                        )
                    )
            else:
                rows = consolidate(delta)
            self._base = _Part(rows)
            if nr:
                self._recent = _Part(Batch.empty(vs))
            self._rows = rows
            self._n = rows.counts.shape[0]
        else:
            self._rows = None
            recent = consolidate(concat([recent, delta], vs) if nr else delta)
            self._recent = _Part(recent)
            self._n = nb + recent.counts.shape[0]
        if memo is not None:
            # (the parts before are kept with their ids: an id is not reused while in the memo)
            memo[1][key] = (bpart, rpart, self._base, self._recent, self._rows, self._n)

    def prefix_rows(self, keys: Batch) -> Batch | None:
        """The rows whose leading columns equal a row of ``keys`` (consolidated, over this
        relation's first ``len(keys.vars)`` variables), part by part -- a row may be in
        both parts, with counts that cancel, as in :meth:`join` -- found by binary search
        in each part's sorted rows (:func:`~.batch.rows_of_keys`); ``None`` when a key
        value is unbound (0: :meth:`join` takes it as compatible with every value) or the
        columns do not pack into one key (then :meth:`join` does it)."""
        k = keys.cols.shape[0]
        assert keys.vars == self.vars[:k]
        if not _all(keys.cols, axis=None):
            return None
        out = []
        for p in self._parts():
            pos = rows_of_keys(p.rows.cols[:k], keys.cols)
            if pos is None:
                return None
            if len(pos):
                out.append(p.rows.take(pos))
        if not out:
            return Batch.empty(self.vars)
        return out[0] if len(out) == 1 else concat(out, self.vars)

    def mirror(self, src: Relation) -> None:
        """Takes the content of ``src``, a relation over as many variables whose content
        equals this one's column for column (the same deltas were applied to both, e.g.
        two renamings of one pattern's matches), after ``src`` changed: ``src``'s parts
        under this relation's variable names, nothing consolidated again.  A part that
        is the image of the part ``src`` still holds is kept, with its key indexes."""
        vs = self.vars
        sb, sr = src._base, src._recent
        im = self._images
        if im is not None and im[0] is sb and im[1] is sb.rows and im[2] is self._base:
            base = self._base
        else:
            base = self._base = _Part(Batch(vs, sb.rows.cols, sb.rows.counts))
        if im is not None and im[3] is sr and im[4] is sr.rows and im[5] is self._recent:
            recent = self._recent
        else:
            recent = self._recent = _Part(Batch(vs, sr.rows.cols, sr.rows.counts))
        self._images = (sb, sb.rows, base, sr, sr.rows, recent)
        self._rows = None if src._rows is None else base.rows
        self._n = src._n
        self.version += 1

    def replace(self, rows: Batch) -> None:
        self._base = _Part(consolidate(rows.project(self.vars)))
        self._recent = _Part(Batch.empty(self.vars))
        self._rows = self._base.rows
        self._n = len(self._base.rows)
        self.version += 1

    def set_consolidated(self, rows: Batch) -> None:
        """:meth:`replace` by rows already consolidated over :attr:`vars` (not checked)."""
        # (a new part: parts are never changed in place, as :meth:`apply` may have
        # handed this one to another relation)
        self._base = _Part(rows)
        if len(self._recent.rows):
            self._recent = _Part(Batch.empty(self.vars))
        self._rows = rows
        self._n = len(rows)
        self.version += 1

    def _parts(self) -> list[_Part]:
        return [p for p in (self._base, self._recent) if len(p.rows)]

    def _probe_prep(self, probe: Batch, shared: tuple[str, ...]):
        pcols = probe.project(shared).cols
        pbound, ppartial = _split_bound(pcols)
        pkeys = row_keys(pcols.take(pbound, axis=1) if len(pbound) != pcols.shape[1] else pcols)
        return pcols, pbound, ppartial, pkeys

    def _plan(self, probe_vars: tuple[str, ...]) -> _Plan:
        plan = self._plans.get(probe_vars)
        if plan is None:
            plan = self._plans[probe_vars] = _Plan(probe_vars, self.vars)
        return plan

    def join(self, probe: Batch, out_vars: Sequence[str] | None = None) -> Batch:
        """Join ``probe`` with this relation (SPARQL compatibility, counts multiply)."""
        plan = self._plan(probe.vars)
        out = tuple(out_vars) if out_vars is not None else plan.out
        n = len(probe)
        if not n or not self._n:
            return Batch.empty(out)
        direct = BOUND_FAST and out == plan.out and probe.cols.dtype == np.int64
        prep = None
        results = []
        kernels = _batch._native if direct and plan.p_idx else None
        for part in (self._base, self._recent):
            rows = part.rows
            if not len(rows):
                continue
            if kernels is not None and n * len(rows) <= SMALL_PAIRS:
                joined = _join_small(kernels, plan, probe, part)
                if joined is not None:
                    if len(joined.counts):
                        results.append(joined)
                    continue
            pairs = _bound_pairs(plan, probe, part) if direct else None
            if pairs is not None:
                # every shared value is bound on both sides, hence equal: the probe's
                # columns then the relation's own ones are the merged mapping
                li, rj = pairs
                t = len(li)
                if not t:
                    continue
                cols = np.empty((len(out), t), dtype=np.int64)
                k = plan.n_probe
                if k:
                    probe.cols.take(li, axis=1, out=cols[:k])
                if plan.extra:
                    part.extra_cols(plan.extra).take(rj, axis=1, out=cols[k:])
            else:
                if prep is None:
                    prep = self._probe_prep(probe, plan.shared)
                li, rj = part.pairs(probe, plan.shared, *prep)
                if not len(li):
                    continue
                cols = merge_columns(out, probe, li, rows, rj)
            counts = probe.counts.take(li)
            counts *= rows.counts.take(rj)
            results.append(Batch(out, cols, counts))
        if not results:
            return Batch.empty(out)
        return results[0] if len(results) == 1 else concat(results, out)

    def counted_apply(self, delta: Batch) -> np.ndarray:
        """:meth:`key_counts` of ``delta`` on every variable, then :meth:`apply` of it: each
        delta row's multiplicity here before.  ``delta`` is consolidated, over :attr:`vars`.

        With the compiled kernels, one linear merge of the consolidated content with the
        delta (``rows_merge``) gives both the new content and the counts before (a router's
        count relation: tens of thousands of rows changed by thousands each epoch, where a
        hash probe and a re-sort of the whole content cost ``O(n log n)``); without them, or
        when a value is unbound (compatible with every value), or when the delta is small
        next to the content (:meth:`apply` would put it in the recent part, the probe reads
        the base's cached index: less than a pass over the content), the same through
        :meth:`key_counts` and :meth:`apply`."""
        nb, nr, nd = len(self._base.rows), len(self._recent.rows), len(delta)
        if (
            nd
            and not nr
            and (nb + nd <= self.SMALL or nd > nb // self.RATIO + self.FLOOR)
            and delta.vars == self.vars
            and self.vars
        ):
            got = _batch.merge_sorted(self._base.rows, delta)
            if got is not None:
                rows, before = got
                self.set_consolidated(rows)
                return before
        before = self.key_counts(delta, self.vars)
        self.apply(delta)
        return before

    def key_counts(self, probe: Batch, shared: tuple[str, ...]) -> np.ndarray:
        """For each probe row, the total multiplicity of compatible rows here."""
        out = np.zeros(len(probe), dtype=np.int64)
        n = len(probe)
        if not n or not self._n:
            return out
        plan = self._plan(probe.vars)
        direct = BOUND_FAST and shared == plan.shared
        prep = None
        for part in (self._base, self._recent):
            rows = part.rows
            if not len(rows):
                continue
            pairs = _bound_pairs(plan, probe, part) if direct else None
            if pairs is None:
                if prep is None:
                    prep = self._probe_prep(probe, shared)
                pairs = part.pairs(probe, shared, *prep)
            li, rj = pairs
            if len(li):
                np.add.at(out, li, rows.counts[rj])
        return out
