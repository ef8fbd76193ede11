"""Static sub-join results: the static part of a continuous query, evaluated once and stored.

In a join, the triple patterns that read a purely static graph (no window feeds it) give
the same mappings at every report time until that graph changes.  The planner groups
them -- one group per connected component of shared variables, so no cross product is
ever materialised -- together with the pushed-down filters that use only their
variables, into one :class:`StaticResultOperator`; the rest of the join sees it as one
leaf.

The operator's *signature* is the canonical static sub-join (patterns sorted and their
variables renamed in order of appearance, filters likewise) plus a fingerprint of the
content of the static graphs it reads.  The result is looked up under that signature in
the engine's :class:`~linkstream.store.static_results.StaticResultStore` first; only on
a miss is the sub-join evaluated (once, with the ordinary scan and join operators) and
stored.  Queries whose static parts are equal share one operator instance (the engine's
hash-consing); queries whose static parts are equal up to variable names, and later
engines on the same store, share the stored result.

When a static graph changes, the operator loads or evaluates the result of the new
content at the next epoch and emits the difference (old rows -1, new rows +1), so every
incremental operator above it stays exact.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, concat, consolidate
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.graph import GraphOperator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.relation import union_vars
from linkstream.operators.scan import ScanOperator, Slot
from linkstream.query.expressions import Bound, Call, Exists, Expr, Var
from linkstream.store.static_results import StaticResult, StaticResultStore

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter

log = logging.getLogger(__name__)

#: bump when the evaluation of a static sub-join could change for the same signature
SIGNATURE_VERSION = "linkstream-static-subjoin/1"
#: functions whose value is not fixed by their arguments: such filters stay in the join
_VOLATILE = frozenset({"RAND", "NOW", "UUID", "STRUUID", "BNODE"})

Pattern = tuple[Slot, Slot, Slot]


class StaticResults:
    """One engine's static sub-join results: grouping at planning time, loading at run time.

    Args:
        store: where encoded results are kept.
        triples: ``graphs -> (n, 3)`` deduplicated triples of the merge of ``graphs`` (a
            tuple of graph IRIs, ``None`` the default graph), sorted so that equal content
            gives equal bytes.
        version: the engine's static version (bumped by every change of a static graph).
        evaluator: the engine's expression evaluator (filters).
    """

    def __init__(
        self,
        store: StaticResultStore,
        triples: Callable[[tuple[str | None, ...]], np.ndarray],
        version: Callable[[], int],
        evaluator: Evaluator,
    ) -> None:
        self.store = store
        self.triples = triples
        self.version = version
        self.evaluator = evaluator
        #: static sub-joins evaluated (store misses)
        self.evaluations = 0
        #: results loaded from the store instead
        self.loads = 0
        #: results replaced after a static graph changed
        self.refreshes = 0
        self._fps: dict[tuple[str | None, ...], str] = {}
        self._fps_version = -1

    # ------------------------------------------------------------ planning

    @staticmethod
    def graphs_of(graph: Operator) -> tuple[str | None, ...] | None:
        """The static graphs a graph operator holds, or ``None`` if windows feed it."""
        key = getattr(graph, "static_key", None)
        if not isinstance(graph, GraphOperator) or graph.children:
            return None
        if isinstance(key, tuple) and len(key) >= 2 and key[0] == "static":
            return tuple(key[1])
        return None

    def group(self, leaves: Sequence[Operator], filters: Sequence[Expr]) -> tuple[list[Operator], list[Expr]]:
        """Replace the static scans among a join's ``leaves`` by static sub-join operators.

        Returns:
            The new leaves (each group takes the place of its first scan) and the filters
            left to the join (those not moved into a group).
        """
        comps: list[tuple[tuple[str | None, ...], list[int], set[str]]] = []
        for i, leaf in enumerate(leaves):
            if type(leaf) is not ScanOperator:
                continue
            graphs = self.graphs_of(leaf.graph)
            if graphs is None:
                continue
            vs = set(leaf.vars)
            linked = [c for c in comps if c[0] == graphs and c[2] & vs]
            members, merged = [i], set(vs)
            for c in linked:
                members += c[1]
                merged |= c[2]
                comps.remove(c)
            comps.append((graphs, sorted(members), merged))
        if not comps:
            return list(leaves), list(filters)
        rest = list(filters)
        replace: dict[int, Operator] = {}
        dropped: set[int] = set()
        for graphs, members, vs in comps:
            # a filter goes with the group that binds all its variables (a variable-free
            # filter stays in the join, where it is evaluated once per probe anyway)
            own = [f for f in rest if f.vars() and f.vars() <= vs and _stable(f)]
            rest = [f for f in rest if not any(f is g for g in own)]
            patterns = [leaves[i].pattern for i in members]  # type: ignore[attr-defined]  # static leaves are scans
            replace[members[0]] = StaticResultOperator(self, graphs, patterns, own)
            dropped.update(members[1:])
        out = [replace.get(i, leaf) for i, leaf in enumerate(leaves) if i not in dropped]
        return out, rest

    # ------------------------------------------------------------ run time

    def fingerprint(self, graphs: tuple[str | None, ...]) -> str:
        """Digest of the content of the merge of ``graphs`` (cached per static version)."""
        v = self.version()
        if v != self._fps_version:
            self._fps.clear()
            self._fps_version = v
        fp = self._fps.get(graphs)
        if fp is None:
            arr = np.ascontiguousarray(self.triples(graphs), dtype="<i8")
            h = hashlib.blake2b(digest_size=20)
            h.update(str(arr.shape).encode())
            if arr.size:  # (an empty view cannot be cast; its shape, hashed above, says it all)
                h.update(arr.data.cast("B"))  # ``memoryview(arr)`` (numpy types buffers only on 3.12+)
            fp = self._fps[graphs] = h.hexdigest()
        return fp

    def result(self, op: StaticResultOperator, fingerprint: str) -> Batch:
        """``op``'s result for the graph content ``fingerprint``: loaded, or evaluated and stored."""
        signature = f"{SIGNATURE_VERSION}|{op.canonical}|{fingerprint}"
        got = self.store.get(signature)
        if got is not None:
            self.loads += 1
        else:
            self.evaluations += 1
            b = op.evaluate(self.triples(op.graphs), self.evaluator)
            got = StaticResult(op.canonical_vars, b.project(op.canonical_order).cols, b.counts)
            self.store.put(signature, got)
        return Batch(op.canonical_order, got.cols, got.counts).project(op.vars)


class StaticResultOperator(Operator):
    """A static sub-join whose result is loaded from (or evaluated into) the result store.

    It has no children: its input is the static graph content, which changes only when
    the engine's static version does.  Its first delta is its whole result; afterwards
    it is empty unless a static graph it reads changed, and then it is the difference.
    """

    def __init__(
        self,
        ctx: StaticResults,
        graphs: tuple[str | None, ...],
        patterns: Sequence[Pattern],
        filters: Sequence[Expr] = (),
    ) -> None:
        super().__init__()
        self.ctx = ctx
        self.graphs = graphs
        self.patterns = tuple(patterns)
        self.filters = tuple(filters)
        vs: tuple[str, ...] = ()
        for p in self.patterns:
            vs = union_vars(vs, tuple(dict.fromkeys(str(v) for k, v in p if k == "var")))
        self.vars = vs
        self.certain = frozenset(vs)
        self.children = ()
        self.canonical, rename = canonical_subjoin(self.patterns, self.filters)
        #: the operator's variables in canonical order, and their canonical names
        self.canonical_order = tuple(sorted(vs, key=lambda v: int(rename[v][1:])))
        self.canonical_vars = tuple(rename[v] for v in self.canonical_order)
        self._rows: Batch | None = None
        self._fp: str | None = None
        self._seen_version: int | None = None

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The result rows, the static graphs' fingerprint and version they are of
        (``None`` before the first delta)."""
        return {
            "_rows": None if self._rows is None else w.batch(self._rows),
            "_fp": self._fp,
            "_seen_version": self._seen_version,
        }

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("_rows", "_fp", "_seen_version"))
        rows = entries["_rows"]
        self._rows = None if rows is None else r.batch(rows, self.vars)
        self._fp = None if entries["_fp"] is None else r.value(entries["_fp"], str)
        v = entries["_seen_version"]
        self._seen_version = None if v is None else r.value(v, int)

    def describe(self) -> str:
        f = f" filters={len(self.filters)}" if self.filters else ""
        rows = "?" if self._rows is None else str(len(self._rows))
        names = ",".join("default" if g is None else g for g in self.graphs)
        return f"StaticResult patterns={len(self.patterns)}{f} rows={rows} on {names}"

    def config_key(self) -> object:
        return ("static-result", self.graphs, self.patterns, self.filters)

    def evaluate(self, triples: np.ndarray, evaluator: Evaluator) -> Batch:
        """Evaluate the sub-join over ``triples`` with the ordinary operators (one epoch)."""
        graph = GraphOperator("static", triples, deduplicated=True)
        scans: list[Operator] = [ScanOperator(graph, p) for p in self.patterns]
        root = (
            scans[0]
            if len(scans) == 1 and not self.filters
            else MJoinOperator(scans, self.filters, evaluator)
        )
        return consolidate(root.delta(1)).project(self.vars)

    def compute(self, epoch: int) -> Batch:
        v = self.ctx.version()
        if self._rows is not None and v == self._seen_version:
            return Batch.empty(self.vars)
        self._seen_version = v
        fp = self.ctx.fingerprint(self.graphs)
        if self._rows is not None and fp == self._fp:
            return Batch.empty(self.vars)
        new = self.ctx.result(self, fp)
        old, self._rows, self._fp = self._rows, new, fp
        if old is None:
            return new
        self.ctx.refreshes += 1
        return consolidate(concat([new, old.negate()], self.vars))

    def current(self) -> Batch:
        if self._rows is None:
            return Batch.empty(self.vars)
        return self._rows


def canonical_subjoin(patterns: Sequence[Pattern], filters: Sequence[Expr]) -> tuple[str, dict[str, str]]:
    """A text equal for sub-joins equal up to variable names, and the renaming it used.

    Patterns are ordered by their shape (constants and variable positions, names
    ignored), variables renamed ``v0, v1, ...`` in order of appearance, and filters
    written with the new names and sorted.
    """

    def shape(p: Pattern) -> tuple:
        return tuple(("c", int(v)) if k == "const" else ("v", "") for k, v in p)

    ordered = sorted(patterns, key=shape)
    rename: dict[str, str] = {}
    for p in ordered:
        for k, v in p:
            if k == "var" and str(v) not in rename:
                rename[str(v)] = f"v{len(rename)}"
    pats = [" ".join(rename[str(v)] if k == "var" else f"#{int(v)}" for k, v in p) for p in ordered]
    fs = sorted(repr(_rename_expr(f, rename)) for f in filters)
    return "patterns=[" + " . ".join(pats) + "] filters=[" + " && ".join(fs) + "]", rename


def _rename_expr(e: Expr, rename: dict[str, str]) -> Expr:
    if isinstance(e, Var):
        return Var(rename.get(e.name, e.name))
    if isinstance(e, Bound):
        return Bound(rename.get(e.var, e.var))
    if not dataclasses.is_dataclass(e):
        return e
    changes = {}
    for f in dataclasses.fields(e):
        val = getattr(e, f.name)
        if isinstance(val, Expr):
            changes[f.name] = _rename_expr(val, rename)
        elif isinstance(val, tuple) and any(isinstance(x, Expr) for x in val):
            changes[f.name] = tuple(_rename_expr(x, rename) if isinstance(x, Expr) else x for x in val)
    return dataclasses.replace(e, **changes) if changes else e


def _stable(e: Expr) -> bool:
    """True when ``e`` has the same value whenever it is evaluated on the same row."""
    if isinstance(e, Exists):
        return False
    if isinstance(e, Call) and e.name.upper() in _VOLATILE:
        return False
    return all(_stable(c) for c in e.children())
