"""Static graphs read on demand: join inputs whose static part is looked up, not held.

A graph operator may have a *static source* instead of a static triple array
(:attr:`~linkstream.operators.graph.GraphOperator.static_source`): an immutable graph
read through an index that answers vectorised lookups (a ``--remote-store`` container's
store nodes, :mod:`linkstream.containers.remotestatic`).  Such a graph emits only its
window triples; the static part of a pattern scan over it is a :class:`StaticPart`, and
a multiway join (:class:`~linkstream.operators.mjoin.MJoinOperator`) joins a partial
result with that part by *probing*: the distinct values the partial result binds at the
pattern's subject (or object) are looked up in the index -- neighbour lists, one batch
per probe -- and only the matching triples are joined, then dropped.  Since the static
part never changes, the incremental rule needs no state for it: the join's delta is the
inputs' deltas joined with the other inputs' (dynamic state + static part).  So nothing
static is held by the operators; what is held locally is the index reader's cache.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch
from linkstream.operators.relation import Relation
from linkstream.operators.scan import ScanOperator
from linkstream.operators.window import TRIPLE_VARS

Graphs = tuple[str | None, ...]


class StaticSource(Protocol):
    """Vectorised lookups in immutable static graphs (the merge of ``graphs``: a set)."""

    def lookup(self, graphs: Graphs, pos: int | None, keys: np.ndarray | None, p: int | None) -> np.ndarray:
        """The distinct ``(n, 3)`` triples with position ``pos`` (0 subject, 2 object) in
        ``keys`` (``pos=None``: any) and predicate ``p`` (``None``: any)."""
        ...  # pragma: no cover - protocol

    def contains(self, graphs: Graphs, triples: np.ndarray) -> np.ndarray:
        """Boolean mask: which rows of an ``(n, 3)`` array are in the merge of ``graphs``."""
        ...  # pragma: no cover - protocol

    def has_predicate(self, graphs: Graphs, p: int) -> bool:
        """Whether any of ``graphs`` has a triple with predicate ``p``."""
        ...  # pragma: no cover - protocol

    def recall(self, key: tuple) -> np.ndarray | None:
        """A result remembered under ``key`` (in the source's bounded cache), or ``None``."""
        ...  # pragma: no cover - protocol

    def remember(self, key: tuple, value: np.ndarray, key_bytes: int) -> None:
        """Keeps ``value`` under ``key`` while the cache's bound allows."""
        ...  # pragma: no cover - protocol

    def materialised(self, nbytes: int) -> None:
        """Told the bytes of a join of static parts alone emitted whole (the operators
        above a join keep what it emits: static-derived rows held outside the cache)."""
        ...  # pragma: no cover - protocol


class StaticPart:
    """The static part of one pattern scan input of a join, probed on demand.

    Args:
        scan: The pattern scan (over a graph operator with a static source).
        rename: Scan variable -> the join input's variable (sharing renames scans).
        out_vars: The join input's variables, in its column order.
    """

    def __init__(
        self,
        scan: ScanOperator,
        source: tuple[StaticSource, Graphs],
        rename: dict[str, str],
        out_vars: tuple[str, ...],
    ) -> None:
        self.source: StaticSource = source[0]
        self.graphs: Graphs = source[1]
        self.scan = scan
        self.rename = rename
        self.vars = out_vars
        self.slots = [(k, rename.get(str(v), str(v)) if k == "var" else int(v)) for k, v in scan.pattern]
        self.p = int(scan.pattern[1][1]) if scan.pattern[1][0] == "const" else None
        g = scan.graph
        while isinstance(g, AttachOperator):
            g = g.shared
        #: the scan's graph has no window: the input is static only
        self.static_only = not g.children
        #: lookups done and static triples they returned (stats, tests)
        self.probes = 0
        self.triples = 0

    def empty(self) -> bool:
        """Whether no static triple can ever match (the constant predicate is in none of
        the graphs: a stream-only predicate, as most of C-SPARQL's merged patterns)."""
        return self.p is not None and not self.source.has_predicate(self.graphs, self.p)

    @property
    def constants(self) -> int:
        """How many of subject and object are constants (seed choice: most selective)."""
        return sum(1 for i in (0, 2) if self.slots[i][0] == "const")

    def _mappings(self, triples: np.ndarray) -> Batch:
        b = self.scan.match(
            Batch(TRIPLE_VARS, np.ascontiguousarray(triples.T), np.ones(len(triples), np.int64))
        )
        if self.rename:
            b = Batch(tuple(self.rename.get(v, v) for v in b.vars), b.cols, b.counts)
        return b.project(self.vars)

    def probe(self, cur: Batch) -> Batch:
        """``cur`` joined with the pattern's static matches (SPARQL compatibility)."""
        pos: int | None = None
        keys: np.ndarray | None = None
        key_var: str | None = None
        col = None
        for i in (0, 2):
            kind, v = self.slots[i]
            if kind == "const":
                pos, keys = i, np.array([v], dtype=np.int64)
                break
            if v in cur.vars:
                col = cur.col(str(v))
                if len(col) and col.all():  # (an unbound value is compatible with every node)
                    pos, keys, key_var = i, np.unique(col), str(v)
                    break
        triples = self.source.lookup(self.graphs, pos, keys, self.p)
        self.probes += 1
        self.triples += len(triples)
        if not len(triples):
            return Batch.empty(_join_vars(cur.vars, self.vars))
        found = self._mappings(triples)
        if key_var is not None and col is not None:
            return _key_join(cur, col, found, key_var)
        rel = Relation(self.vars)
        rel.apply(found)
        return rel.join(cur)


def _join_vars(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    return a + tuple(v for v in b if v not in a)


def _key_join(cur: Batch, key: np.ndarray, found: Batch, var: str) -> Batch:
    """``cur`` joined with ``found`` (distinct mappings, count 1) on ``var``, bound in every
    row of both (``key``: ``cur``'s column of it); the other shared variables must be
    compatible (equal, or unbound in ``cur``: then ``found`` binds them).  Sort-merge:
    one ``searchsorted`` per side, no index build."""
    out_vars = _join_vars(cur.vars, found.vars)
    fk = found.col(var)
    order = np.argsort(fk, kind="stable")
    fk = fk[order]
    lo = np.searchsorted(fk, key, "left")
    n = np.searchsorted(fk, key, "right") - lo
    total = int(n.sum())
    if not total:
        return Batch.empty(out_vars)
    li = np.repeat(np.arange(len(key), dtype=np.int64), n)
    rj = order[np.repeat(lo - np.cumsum(n) + n, n) + np.arange(total, dtype=np.int64)]
    cols = np.empty((len(out_vars), total), dtype=np.int64)
    keep = None
    for k, v in enumerate(out_vars):
        if v in cur.vars:
            c = cur.cols[cur.vars.index(v)][li]
            if v != var and v in found.vars:
                f = found.cols[found.vars.index(v)][rj]
                ok = (c == f) | (c == 0)
                keep = ok if keep is None else keep & ok
                c = np.where(c == 0, f, c)
            cols[k] = c
        else:
            cols[k] = found.cols[found.vars.index(v)][rj]
    counts = cur.counts[li]
    if keep is not None and not keep.all():
        return Batch(out_vars, cols[:, keep], counts[keep])
    return Batch(out_vars, cols, counts)


class StaticJoinPart:
    """A join input that is itself a join of static-only inputs (a ``GRAPH <g> { ... }``
    group of static patterns joined with windows): probed as a chain of lookups seeded
    with the partial result's distinct bindings of the shared variables, instead of
    holding the group's whole result.  The group's join operator is then never evaluated
    as an input (its only output would be that whole result).

    Args:
        join: The group's join (an ``MJoinOperator`` whose inputs all have static parts
            over window-less graphs; it offers ``probe_static``).
        rename: The group's variable -> the join input's variable.
        out_vars: The join input's variables.
    """

    constants = 0

    def __init__(self, join: Operator, rename: dict[str, str], out_vars: tuple[str, ...]) -> None:
        self.join = join
        self.parts: list[StaticPart] = list(join.static_parts)  # type: ignore[attr-defined]  # an MJoin
        self.source = self.parts[0].source
        self.rename = rename
        self.back = {v: k for k, v in rename.items()}
        self.vars = out_vars
        self.probes = 0
        #: what the group computes (patterns over graphs, filters): with a seed, the key
        #: its solutions are remembered under in the source's bounded result cache
        filters = sorted(repr(f) for f, _ in getattr(join, "filters", ()))
        self._what = repr(([(tuple(p.slots), p.graphs) for p in self.parts], filters, join.vars))

    def empty(self) -> bool:
        return any(p.empty() for p in self.parts)

    def probe(self, cur: Batch) -> Batch:
        """``cur`` joined with the group's static solutions compatible with it."""
        shared = [v for v in cur.vars if v in self.vars]
        if shared:
            keys = np.unique(cur.project(shared).cols, axis=1)
            seed = Batch(tuple(self.back.get(v, v) for v in shared), keys, np.ones(keys.shape[1], np.int64))
        else:
            seed = Batch.unit()
        self.probes += 1
        kb = np.ascontiguousarray(seed.cols).tobytes()
        key = ("group", self._what, seed.vars, kb)
        cols = self.source.recall(key) if len(kb) <= 64 * 8 else None
        if cols is None:
            got = self.join.probe_static(seed)  # type: ignore[attr-defined]  # an MJoin
            if len(kb) <= 64 * 8:
                self.source.remember(key, np.ascontiguousarray(got.cols), len(kb) + len(self._what))
        else:  # (a group's solutions are distinct: count 1 each)
            got = Batch(self.join.vars, cols, np.ones(cols.shape[1], dtype=np.int64))
        if not len(got):
            return Batch.empty(_join_vars(cur.vars, self.vars))
        got = Batch(tuple(self.rename.get(v, v) for v in got.vars), got.cols, got.counts).project(self.vars)
        rel = Relation(self.vars)
        rel.apply(got.with_counts(np.ones(len(got), dtype=np.int64)))
        return rel.join(cur)


def static_part_of(child: Operator) -> StaticPart | StaticJoinPart | None:
    """The static part of a join input: a pattern scan (possibly renamed or attached by
    operator sharing) over a graph operator with a static source, or a join of such scans
    over window-less graphs only; ``None`` otherwise."""
    rename: dict[str, str] | None = None
    c = child
    for _ in range(8):
        if isinstance(c, AttachOperator):
            c = c.shared
        elif type(c).__name__ == "RenameOperator":  # (operators.router imports this layer)
            m: dict[str, str] = c.mapping  # type: ignore[attr-defined]  # a RenameOperator
            inner = c.children[0]
            outer = rename
            rename = {v: (outer.get(m.get(v, v), m.get(v, v)) if outer else m.get(v, v)) for v in inner.vars}
            c = inner
        else:
            break
    sub = getattr(c, "static_parts", None)
    if sub and hasattr(c, "probe_static") and all(isinstance(p, StaticPart) and p.static_only for p in sub):
        return StaticJoinPart(c, rename or {v: v for v in c.vars}, child.vars)
    if type(c) is not ScanOperator:
        return None
    g = c.graph
    while isinstance(g, AttachOperator):  # a scan planned after its graph started
        g = g.shared
    source = getattr(g, "static_source", None)
    if source is None:
        return None
    return StaticPart(c, source, rename or {}, child.vars)


__all__ = ["StaticJoinPart", "StaticPart", "StaticSource", "static_part_of"]
