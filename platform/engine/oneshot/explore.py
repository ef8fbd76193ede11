"""Basic graph patterns evaluated by graph exploration over a store snapshot.

Continuous queries match triple patterns by scanning graph deltas and hash-joining the
pattern relations.  A one-shot query over a large store must not touch whole predicate
slices: as Wukong does, :class:`ExploreOperator` starts from the most selective pattern
(a constant subject or object, found through the store's indexes) and grows the partial
bindings one pattern at a time by vectorised one-hop exploration
(:meth:`~linkstream.store.protocol.Snapshot.neighbours`) from the vertices already bound.
A pattern whose ends are both bound only filters; filters whose variables are bound are
applied as soon as possible, so the bindings stay small.

Both operators are private to one query over one snapshot and produce their whole
result at the first epoch pulled (the one-shot evaluation contract of
:mod:`linkstream.engine.oneshot.embedded`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, consolidate
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.window import TRIPLE_VARS
from linkstream.query.expressions import Expr
from linkstream.store.protocol import Snapshot

#: a pattern position: ("var", name) or ("const", id)
Slot = tuple[str, Any]
Pattern = tuple[Slot, Slot, Slot]

_EMPTY = np.empty(0, dtype=np.int64)
_MIN_CHUNK = 64  # smallest chunk of a LIMITed exploration (numpy overhead dominates below)


def _dedup_rows(*cols: np.ndarray) -> tuple[np.ndarray, ...]:
    """Distinct rows of the columns, sorted lexicographically (first column first)."""
    if len(cols[0]) == 0:
        return cols
    order = np.lexsort(cols[::-1])
    s = [c[order] for c in cols]
    keep = np.ones(len(order), dtype=bool)
    diff = np.zeros(len(order) - 1, dtype=bool)
    for c in s:
        diff |= c[1:] != c[:-1]
    keep[1:] = diff
    return tuple(c[keep] for c in s)


class SnapshotGraph(Operator):
    """One graph of a query's dataset: the RDF merge of store graphs ``keys`` in a snapshot.

    Reading the whole graph (:meth:`compute`) is possible but only a fallback; pattern
    evaluation goes through :meth:`match` and :meth:`neighbours`, which use the indexes.
    """

    vars = TRIPLE_VARS
    certain = frozenset(TRIPLE_VARS)

    def __init__(
        self,
        snapshot: Snapshot | None,
        keys: Sequence[str | None],
        name: str,
    ) -> None:
        super().__init__()
        self.snap = snapshot  # (not ``snapshot``: Operator.snapshot() saves operator state)
        self.keys = tuple(dict.fromkeys(keys)) if snapshot is not None else ()
        self.name = name
        self._sent = False

    @property
    def _store(self) -> Snapshot:
        """The store snapshot (read only for graphs in ``keys``, which need one)."""
        assert self.snap is not None
        return self.snap

    def describe(self) -> str:
        return f"SnapshotGraph {self.name} graphs={list(self.keys)}"

    def match(self, s: int | None, p: int | None, o: int | None) -> np.ndarray:
        """``(n, 3)`` triples of the merged graph matching the constants."""
        assert self.snap is not None or not self.keys
        parts = [self._store.match(g, s, p, o) for g in self.keys]
        parts = [np.asarray(x, dtype=np.int64).reshape(-1, 3) for x in parts if len(x)]
        if not parts:
            return np.empty((0, 3), dtype=np.int64)
        t = parts[0] if len(parts) == 1 else np.concatenate(parts)
        if len(parts) == 1:
            return t
        return np.stack(_dedup_rows(t[:, 0], t[:, 1], t[:, 2]), axis=1)

    def cardinality(self, p: int | None) -> int:
        """Triples with predicate ``p`` (an upper bound when several graphs are merged)."""
        return sum(int(self._store.cardinality(g, p)) for g in self.keys)

    def neighbours(
        self, vertices: np.ndarray, p: int | None, direction: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """One-hop exploration (see :meth:`Snapshot.neighbours`), deduplicated across graphs.

        Rows come grouped by vertex index, ascending.
        """
        if not self.keys or len(vertices) == 0:
            return _EMPTY, _EMPTY, _EMPTY
        parts = [self._store.neighbours(g, vertices, p, direction) for g in self.keys]
        parts = [x for x in parts if len(x[0])]
        if not parts:
            return _EMPTY, _EMPTY, _EMPTY
        if len(parts) == 1:
            r, q, n = (np.asarray(x, np.int64) for x in parts[0])
        else:
            r, q, n = (np.concatenate([x[k] for x in parts]).astype(np.int64) for k in range(3))
        if len(parts) > 1:
            return _dedup_rows(r, q, n)  # type: ignore[return-value]  # _dedup_rows returns three columns
        return r, q, n

    def compute(self, epoch: int) -> Batch:
        if self._sent:
            return Batch.empty(TRIPLE_VARS)
        self._sent = True
        t = self.match(None, None, None)
        return Batch(TRIPLE_VARS, np.ascontiguousarray(t.T), np.ones(len(t), dtype=np.int64))


class ExploreOperator(Operator):
    """A basic graph pattern (plus pushed-down filters) over a :class:`SnapshotGraph`.

    Args:
        graph: The graph the patterns are matched in.
        patterns: The triple patterns (blank nodes are variables named ``_:label``).
        filters: Expressions whose variables the patterns (or the seed) certainly bind.
        evaluator: Evaluates the filters.
        seed: An operator whose rows (every variable bound) start the exploration, e.g.
            a VALUES block: the patterns are then explored from its bindings.
    """

    def __init__(
        self,
        graph: SnapshotGraph,
        patterns: Sequence[Pattern],
        filters: Sequence[Expr] = (),
        evaluator: Evaluator | None = None,
        seed: Operator | None = None,
    ) -> None:
        super().__init__()
        self.graph = graph
        self.patterns = list(patterns)
        self.filters = list(filters)
        self.evaluator = evaluator
        self.seed = seed
        vs: list[str] = list(seed.vars) if seed is not None else []
        for pat in self.patterns:
            for k, v in pat:
                if k == "var" and v not in vs:
                    vs.append(v)
        self.vars = tuple(vs)
        self.certain = frozenset(vs)
        self.children = (graph,) if seed is None else (graph, seed)
        self.explored = 0  # candidate triples looked at (stats, tests)
        # stop once this many solutions exist (a LIMIT the caller applies anyway)
        self.limit: int | None = None
        self._sent = False

    def describe(self) -> str:
        f = f" filters={len(self.filters)}" if self.filters else ""
        s = " seeded" if self.seed is not None else ""
        lim = f" limit={self.limit}" if self.limit is not None else ""
        return f"Explore n={len(self.patterns)}{f}{s}{lim} on {self.graph.name} explored={self.explored}"

    def compute(self, epoch: int) -> Batch:
        if self._sent:
            return Batch.empty(self.vars)
        self._sent = True
        return _Exploration(self, epoch).run()


class _Exploration:
    """The state of one BGP evaluation: columns of partial bindings with multiplicities."""

    def __init__(self, op: ExploreOperator, epoch: int) -> None:
        self.op = op
        self.g = op.graph
        self.cols: dict[str, np.ndarray] = {}
        self.counts = np.ones(1, dtype=np.int64)
        if op.seed is not None:
            d = consolidate(op.seed.delta(epoch))
            d = d.mask(d.counts > 0)
            self.cols = {v: d.cols[j] for j, v in enumerate(d.vars)}
            self.counts = d.counts
        self.pending_filters = list(op.filters)
        self._sizes: dict[int, int] = {}
        self._matched: dict[int, np.ndarray] = {}
        self._cards: dict[int | None, int] = {}

    @property
    def n(self) -> int:
        return len(self.counts)

    def run(self) -> Batch:
        pending = list(range(len(self.op.patterns)))
        self._filter()
        if self.op.limit is not None and pending and self.n:
            return self._run_limited(pending, self.op.limit)
        self._finish(pending)
        return self._batch()

    def _finish(self, pending: list[int]) -> None:
        """Applies the pending patterns, cheapest first, to all current rows."""
        while pending and self.n:
            k = min(pending, key=self._cost)
            pending.remove(k)
            self._apply(self.op.patterns[k], k)
            self._filter()

    def _batch(self) -> Batch:
        vs = self.op.vars
        if not self.n:
            return Batch.empty(vs)
        cols = np.empty((len(vs), self.n), dtype=np.int64)
        for j, v in enumerate(vs):
            cols[j] = self.cols[v]
        return Batch(vs, cols, self.counts)

    def _run_limited(self, pending: list[int], limit: int) -> Batch:
        """At least ``limit`` solutions (all if fewer exist), exploring as little as possible.

        The first pattern's candidate triples are read from the index at once (a slice),
        then unified and explored further in chunks of geometrically growing size until
        enough solutions exist, so the work done follows ``limit``, not the data.
        """
        k = min(pending, key=self._cost)
        pending.remove(k)
        pat = self.op.patterns[k]
        rows, tcols = self._candidates(pat, k)
        parts: list[Batch] = []
        got, start, size = 0, 0, max(_MIN_CHUNK, 2 * limit)
        while start < len(rows) and got < limit:
            stop = min(start + size, len(rows))
            sub = self._fork()
            self.op.explored += stop - start
            sub._unify(pat, rows[start:stop], tuple(c[start:stop] for c in tcols))
            sub._filter()
            sub._finish(list(pending))
            b = sub._batch()
            if len(b):
                parts.append(b)
                got += int(b.counts.sum())
            start, size = stop, size * 4
        if not parts:
            return Batch.empty(self.op.vars)
        if len(parts) == 1:
            return parts[0]
        return Batch(
            self.op.vars,
            np.concatenate([b.cols for b in parts], axis=1),
            np.concatenate([b.counts for b in parts]),
        )

    def _fork(self) -> _Exploration:
        """A copy of the current state that shares the statistics caches."""
        sub = object.__new__(_Exploration)
        sub.op, sub.g = self.op, self.g
        sub.cols, sub.counts = dict(self.cols), self.counts
        sub.pending_filters = list(self.pending_filters)
        sub._sizes, sub._matched, sub._cards = self._sizes, self._matched, self._cards
        return sub

    # ------------------------------------------------------------ planning one step

    def _known(self, slot: Slot) -> bool:
        return slot[0] == "const" or slot[1] in self.cols

    def _size(self, k: int) -> int:
        """Triples matching pattern ``k``'s constants alone (exact when s or o is constant)."""
        if k not in self._sizes:
            s, p, o = self.op.patterns[k]
            pc = int(p[1]) if p[0] == "const" else None
            if s[0] == "const" or o[0] == "const":
                m = self.g.match(
                    int(s[1]) if s[0] == "const" else None,
                    pc,
                    int(o[1]) if o[0] == "const" else None,
                )
                self._matched[k] = m
                self._sizes[k] = len(m)
            else:
                self._sizes[k] = self._card(p)
        return self._sizes[k]

    def _card(self, p: Slot) -> int:
        """Triples with predicate ``p`` (all triples for a variable), from the statistics."""
        key = int(p[1]) if p[0] == "const" else None
        if key not in self._cards:
            self._cards[key] = self.g.cardinality(key)
        return self._cards[key]

    def _cost(self, k: int) -> float:
        """Estimated candidate triples pattern ``k`` produces from the current bindings.

        Both ends bound: a membership check (cheapest).  One end bound: a one-hop
        exploration; outgoing edges (subject bound) fan out less than incoming ones in
        typical data (many subjects share a class or a literal), a variable predicate
        reads every predicate of the vertex.  Nothing bound: the pattern's own matches,
        crossed with the current rows.
        """
        s, p, o = self.op.patterns[k]
        ks, ko = self._known(s), self._known(o)
        n = self.n
        if ks and ko:
            return 0.0
        if ks or ko:
            f = 2.0 if ks else 8.0
            if p[0] == "var" and p[1] not in self.cols:
                f *= 16.0
            # a tie-break on the predicate's size keeps rare predicates first
            return n * f + self._card(p) * 1e-9
        return float(n) * max(self._size(k), 1) * 4.0

    # ------------------------------------------------------------ one step

    def _value(self, slot: Slot) -> np.ndarray | int | None:
        if slot[0] == "const":
            return int(slot[1])
        return self.cols.get(slot[1])

    def _apply(self, pat: Pattern, k: int) -> None:
        rows, tcols = self._candidates(pat, k)
        self.op.explored += len(rows)
        self._unify(pat, rows, tcols)

    def _candidates(self, pat: Pattern, k: int) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
        """(row, s, p, o) of every triple that may extend a current row along ``pat``."""
        s, p, o = pat
        sv, pv, ov = self._value(s), self._value(p), self._value(o)
        pc = pv if isinstance(pv, int) else None
        n = self.n
        if sv is None and ov is None:
            m = self._matched.get(k)
            if m is None:
                m = self.g.match(None, pc, None)
            rows = np.repeat(np.arange(n), len(m))
            return rows, tuple(np.tile(m[:, j], n) for j in range(3))
        out = sv is not None and (ov is None or not isinstance(sv, int) or isinstance(ov, int))
        vert = sv if out else ov
        assert vert is not None  # ``sv`` and ``ov`` are not both unbound here
        rows, P, N = self._expand(vert, pc, "out" if out else "in")
        V = np.full(len(rows), vert, dtype=np.int64) if isinstance(vert, int) else vert[rows]
        return rows, ((V, P, N) if out else (N, P, V))

    def _expand(self, vert: np.ndarray | int, p: int | None, direction: str):
        """(row, predicate, neighbour) for every current row's vertex ``vert``."""
        n = self.n
        if isinstance(vert, int):
            _, P, N = self.g.neighbours(np.array([vert], dtype=np.int64), p, direction)
            return np.repeat(np.arange(n), len(N)), np.tile(P, n), np.tile(N, n)
        # explore each distinct vertex once, then fan the result out to the rows
        uniq, inv = np.unique(vert, return_inverse=True)
        inv = inv.reshape(-1)
        ri, P, N = self.g.neighbours(uniq, p, direction)
        if len(ri) == 0:
            return _EMPTY, _EMPTY, _EMPTY
        cnt = np.bincount(ri, minlength=len(uniq))
        start = np.cumsum(cnt) - cnt
        per_row = cnt[inv]
        total = int(per_row.sum())
        rows = np.repeat(np.arange(n), per_row)
        first = np.cumsum(per_row) - per_row
        off = np.repeat(start[inv] - first, per_row) + np.arange(total)
        return rows, P[off], N[off]

    def _unify(self, pat: Pattern, rows: np.ndarray, tcols: tuple[np.ndarray, ...]) -> None:
        """Keep the candidate (row, triple) pairs agreeing with the pattern; bind new variables."""
        mask = np.ones(len(rows), dtype=bool)
        new: dict[str, np.ndarray] = {}
        for (kind, v), col in zip(pat, tcols):
            if kind == "const":
                mask &= col == v
            elif v in self.cols:
                mask &= col == self.cols[v][rows]
            elif v in new:
                mask &= col == new[v]
            else:
                new[v] = col
        if not mask.all():
            rows = rows[mask]
            new = {v: c[mask] for v, c in new.items()}
        self.cols = {v: c[rows] for v, c in self.cols.items()}
        self.cols.update(new)
        self.counts = self.counts[rows]

    def _filter(self) -> None:
        if not self.pending_filters or not self.n:
            return
        ready = [f for f in self.pending_filters if f.vars() <= self.cols.keys()]
        if not ready:
            return
        assert self.op.evaluator is not None
        vs = tuple(self.cols)
        b = Batch(
            vs, np.stack([self.cols[v] for v in vs]) if vs else np.empty((0, self.n), np.int64), self.counts
        )
        keep = np.ones(self.n, dtype=bool)
        for f in ready:
            self.pending_filters.remove(f)
            keep &= self.op.evaluator.filter_mask(f, b)
        if not keep.all():
            self.cols = {v: c[keep] for v, c in self.cols.items()}
            self.counts = self.counts[keep]
