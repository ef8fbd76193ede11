"""From rdflib's SPARQL algebra to a LinkStream operator graph.

The planner walks the algebra of a (rewritten) continuous query and builds operators:
BGPs and joins become one multiway join over pattern scans (property paths are expanded
by :mod:`linkstream.engine.paths`), filters are pushed into the
join where every variable they use is certainly bound, OPTIONAL is a join plus an
anti-join on the left row, MINUS and (NOT) EXISTS are keyed anti/semi-joins, and what
has no exact incremental form (keys that may be unbound, LIMIT in a subquery) is wrapped
in a recompute operator.  Top-level ORDER BY / LIMIT / OFFSET / DISTINCT / projection
are returned in :class:`QueryShape` for the output operator.

The algebra's nodes are rdflib ``CompValue`` objects, or ``Node`` objects read from the parse
cache (:mod:`linkstream.query.algebra_json`): the planner tests them with ``is_node`` and
reads them by name and attribute only, so either kind plans alike.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable
from dataclasses import field
from typing import Any, cast

import numpy as np

from linkstream.engine.paths import PathTranslator, is_path
from linkstream.operators.aggregate import AggregateOperator, AggSpec
from linkstream.operators.base import Operator
from linkstream.operators.distinct import DistinctOperator
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.extend import ExtendOperator
from linkstream.operators.filter import FilterOperator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.negation import KeyedNegationOperator
from linkstream.operators.project import ProjectOperator, UnionOperator
from linkstream.operators.recompute import RecomputeOperator, exists_batch, left_join_batch, minus_batch
from linkstream.operators.scan import ScanOperator, Slot
from linkstream.operators.static_probe import static_part_of
from linkstream.operators.static_result import StaticResults
from linkstream.operators.values import ConstantOperator
from linkstream.query.algebra_json import Node, is_node
from linkstream.query.aterms import BNode as RBNode
from linkstream.query.aterms import Literal as RLiteral
from linkstream.query.aterms import URIRef, Variable
from linkstream.query.errors import QueryError
from linkstream.query.expressions import (
    Bound,
    Call,
    Const,
    Exists,
    Expr,
    Not,
    Var,
    compile_expr,
    conjuncts,
    from_rdflib,
)
from linkstream.rdf.records import record
from linkstream.rdf.terms import IRI, XSD_BOOLEAN, Literal, Term

#: ``_at(n, "p")`` is ``n.p`` without CompValue's attribute hooks (several Python calls per
#: access, a good part of planning time when thousands of queries register).
_at: Callable[[Any, str], Any] = dict.get

_AGG = {
    "Aggregate_Count": "COUNT",
    "Aggregate_Sum": "SUM",
    "Aggregate_Avg": "AVG",
    "Aggregate_Min": "MIN",
    "Aggregate_Max": "MAX",
    "Aggregate_Sample": "SAMPLE",
    "Aggregate_GroupConcat": "GROUP_CONCAT",
}


@record
class Dataset:
    """The graphs a query sees: a default graph and named graphs (IRI -> graph operator)."""

    default: Operator
    named: dict[str, Operator]
    empty: Operator
    #: groups the static scans of each join into stored static sub-joins (engine only)
    static: StaticResults | None = None


@record
class QueryShape:
    """What the output operator applies per evaluation, on top of the plan's root."""

    form: str
    project: tuple[str, ...] | None
    distinct: bool = False
    order: list[tuple[Expr, bool]] = field(default_factory=list)  # (expr, descending)
    offset: int = 0
    limit: int | None = None
    template: list[tuple] = field(default_factory=list)


class _Memo:
    """What planning derives from the (read-only) algebra alone, per dictionary.

    An id never changes meaning within one dictionary, and thousands of queries name the
    same few predicates and classes and share algebra nodes (see the parse caches of
    :mod:`.continuous`); compiled expressions are immutable.
    """

    SIZE = 65536

    def __init__(self) -> None:
        self.slots: dict[object, tuple[str, object]] = {}
        #: ``id(CompValue) -> (the CompValue, its compiled Expr)``; the node is kept so
        #: that its id is not reused while the entry lives
        self.exprs: dict[int, tuple[object, Expr]] = {}


_MEMOS: weakref.WeakKeyDictionary[Any, _Memo] = weakref.WeakKeyDictionary()


def _memo(dictionary: object) -> _Memo:
    try:
        memo = _MEMOS.get(dictionary)
        if memo is None:
            memo = _MEMOS[dictionary] = _Memo()
        return memo
    except TypeError:  # not weakly referenceable: a memo for this planner only
        return _Memo()


class Planner:
    """Builds the operator graph of one query over a :class:`Dataset`."""

    #: ``BNODE(str)`` gives one blank node per string and solution (one-shot queries); a
    #: continuous query keeps one per string, so that a retraction finds the same term
    scoped_bnodes = False

    def __init__(self, dataset: Dataset, evaluator: Evaluator) -> None:
        self.ds = dataset
        self.ev = evaluator
        self.terms = evaluator.terms
        self._hidden = 0
        memo = _memo(self.terms.dictionary)
        self._slots, self._exprs = memo.slots, memo.exprs

    # ------------------------------------------------------------ helpers

    def encode(self, t: Term) -> int:
        return self.terms.encode_one(t)

    def expr(self, e: object) -> Expr:
        if not is_node(e):
            return compile_expr(e, self.encode)
        hit = self._exprs.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        out = compile_expr(e, self.encode)
        if len(self._exprs) >= _Memo.SIZE:
            self._exprs.clear()
        self._exprs[id(e)] = (e, out)
        return out

    def hidden(self, prefix: str) -> str:
        self._hidden += 1
        return f"_{prefix}{self._hidden}"

    def slot(self, t: object) -> Slot:
        s = self._slots.get(t)
        if s is None:
            if isinstance(t, Variable):
                s = ("var", str(t))
            elif isinstance(t, RBNode):
                s = ("var", "_:" + str(t))  # blank nodes in patterns are variables
            else:
                s = ("const", self.encode(from_rdflib(t)))
            if len(self._slots) >= _Memo.SIZE:
                self._slots.clear()
            self._slots[t] = s
        return s

    # ------------------------------------------------------------ top level

    def plan_query(self, q: Any) -> tuple[Operator, QueryShape]:
        form = {"SelectQuery": "SELECT", "AskQuery": "ASK", "ConstructQuery": "CONSTRUCT"}.get(q.name)
        if form is None:
            raise QueryError(f"{q.name} is not supported in continuous queries")
        node = _at(q, "p")
        shape = QueryShape(form=form, project=None)
        if node.name == "Slice":
            shape.offset = int(_at(node, "start") or 0)
            shape.limit = None if _at(node, "length") is None else int(_at(node, "length"))
            node = _at(node, "p")
        if node.name in ("Distinct", "Reduced"):
            shape.distinct = True
            node = _at(node, "p")
        if node.name == "Project":
            shape.project = tuple(str(v) for v in _at(node, "PV"))
            node = _at(node, "p")
        if node.name == "OrderBy":
            if shape.limit is not None or shape.offset:
                shape.order = [(self.expr(c.expr), c.order == "DESC") for c in _at(node, "expr")]
            node = _at(node, "p")
        if form == "CONSTRUCT":
            shape.template = [tuple(self._template_slot(x) for x in tr) for tr in q.template]
            shape.project = None
        root = self.plan(node, self.ds.default)
        if shape.order:
            extra: list[tuple[int, Var]] = []
            for k, (e, _desc) in enumerate(shape.order):
                if isinstance(e, Var):
                    continue
                v = self.hidden("ord")
                root = ExtendOperator(root, v, e, self.ev)
                extra.append((k, Var(v)))
            for k, var in extra:
                shape.order[k] = (var, shape.order[k][1])
        return root, shape

    def _template_slot(self, t: object) -> tuple[str, object]:
        if isinstance(t, Variable):
            return ("var", str(t))
        if isinstance(t, RBNode):
            return ("bnode", str(t))
        return ("const", self.encode(from_rdflib(t)))

    # ------------------------------------------------------------ graph patterns

    def plan(self, n: Any, graph: Operator) -> Operator:
        name = n.name
        if name in ("BGP", "Join"):
            return self._join(self._join_leaves(n, graph), [])
        if name == "Filter":
            return self._filter(n, graph)
        if name == "LeftJoin":
            return self._left_join(n, graph)
        if name == "Union":
            return UnionOperator([self.plan(_at(n, "p1"), graph), self.plan(_at(n, "p2"), graph)])
        if name == "Minus":
            return self._minus(self.plan(_at(n, "p1"), graph), self.plan(_at(n, "p2"), graph))
        if name == "Extend":
            child = self.plan(_at(n, "p"), graph)
            if str(_at(n, "var")) in child.vars:
                # rdflib re-binds each GROUP BY variable to a SAMPLE of itself above the
                # aggregation: the value is the group key already in scope.
                return child
            e = self.expr(_at(n, "expr"))
            if self.scoped_bnodes and _has_bnode_call(e):
                # BNODE(str): one blank node per string *and solution*: a hidden fresh blank
                # node per row (BNODE()) scopes the label, shared by the row's BNODE calls
                if _BNODE_SCOPE not in child.vars:
                    child = ExtendOperator(child, _BNODE_SCOPE, Call("BNODE", ()), self.ev)
                e = _scope_bnodes(e)
            return ExtendOperator(child, str(_at(n, "var")), e, self.ev)
        if name == "Project":
            return ProjectOperator(self.plan(_at(n, "p"), graph), [str(v) for v in _at(n, "PV")])
        if name in ("Distinct", "Reduced"):
            return DistinctOperator(self.plan(_at(n, "p"), graph))
        if name == "OrderBy":
            return self.plan(_at(n, "p"), graph)  # order is irrelevant inside a multiset
        if name == "Slice":
            return self._sub_slice(n, graph)
        if name == "ToMultiSet":
            return self.plan(_at(n, "p"), graph)
        if name == "values":
            return self._values(n)
        if name == "Graph":
            return self._graph(n)
        if name == "AggregateJoin":
            return self._aggregate(n, graph)
        if name == "Group":
            return self._aggregate(Node("AggregateJoin", A=[], p=n), graph)
        if name in ("SelectQuery",):
            op, shape = self.plan_query(n)
            return op
        raise QueryError(f"SPARQL feature {name} is not supported")

    def _join_leaves(self, n: Any, graph: Operator) -> list[Operator]:
        if n.name == "BGP":
            if not _at(n, "triples"):
                return [ConstantOperator((), np.zeros((0, 1), dtype=np.int64))]
            slot = self.slot
            triples = _at(n, "triples")
            if not any(is_path(p) for _, p, _ in triples):
                return self._pattern_leaves([(slot(s), slot(p), slot(o)) for s, p, o in triples], graph)
            patterns: list[tuple[Slot, Slot, Slot]] = []
            paths: list[Operator] = []
            tr = PathTranslator(self, graph)
            for s, p, o in triples:
                if is_path(p):
                    tr.expand(slot(s), p, slot(o), patterns, paths)
                else:
                    patterns.append((slot(s), slot(p), slot(o)))
            return self._pattern_leaves(patterns, graph) + paths
        if n.name == "Join":
            return self._join_leaves(_at(n, "p1"), graph) + self._join_leaves(_at(n, "p2"), graph)
        return [self.plan(n, graph)]

    def _pattern_leaves(self, patterns: list[tuple[Slot, Slot, Slot]], graph: Operator) -> list[Operator]:
        """The operators matching plain triple patterns in ``graph`` (one scan each)."""
        return [ScanOperator(graph, pat) for pat in patterns]

    def _join(self, leaves: list[Operator], filters: list[Expr]) -> Operator:
        # the empty group {} is the join identity: drop it when other inputs exist
        real = [
            x for x in leaves if not (isinstance(x, ConstantOperator) and not x.vars and x.rows.shape[1] == 1)
        ]
        if real:
            leaves = real
        if self.ds.static is not None:
            leaves, filters = self.ds.static.group(leaves, filters)
        if len(leaves) == 1 and not filters and static_part_of(leaves[0]) is None:
            return leaves[0]  # (a scan with a static part read on demand: a join probes it)
        return MJoinOperator(leaves, filters, self.ev)

    def _filter(self, n: Any, graph: Operator) -> Operator:
        exprs = conjuncts(self.expr(_at(n, "expr")))
        exists = [e for e in exprs if isinstance(e, Exists)]
        nested = [e for e in exprs if not isinstance(e, Exists) and _has_exists(e)]
        plain = [e for e in exprs if not isinstance(e, Exists) and not _has_exists(e)]
        inner = _at(n, "p")
        if inner.name in ("BGP", "Join"):
            leaves = self._join_leaves(inner, graph)
            cert: set[str] = set()
            for x in leaves:
                cert |= x.certain
            push = [e for e in plain if e.vars() <= cert]
            rest = [e for e in plain if not e.vars() <= cert]
            op = self._join(leaves, push)
        else:
            op = self.plan(inner, graph)
            rest = plain
        if any(isinstance(e, Not) and isinstance(e.a, Bound) and e.a.var in op.certain for e in plain):
            # FILTER(!BOUND(?v)) of a variable every row binds: no row ever passes
            return ConstantOperator(op.vars, np.zeros((len(op.vars), 0), dtype=np.int64))
        if rest:
            op = FilterOperator(op, rest, self.ev)
        for e in exists:
            right = self._exists_pattern(e, graph)
            op = self._negation(op, right, "anti" if e.negated else "semi", exists_batch(e.negated))
        if nested:
            keep = op.vars
            flags: dict[int, Expr] = {}
            for nx in nested:
                for ex in _nested_exists(nx):
                    if id(ex) not in flags:
                        op, flags[id(ex)] = self._exists_flag(op, ex, graph)
            op = FilterOperator(op, [_swap_exists(nx, flags) for nx in nested], self.ev)
            op = ProjectOperator(op, keep)
        return op

    def _exists_pattern(self, e: Exists, graph: Operator) -> Operator:
        pattern = e.pattern
        if is_node(pattern) and pattern.name in ("GroupGraphPatternSub", "TriplesBlock"):
            from linkstream.query.sparql_parser import algebra as ralg  # (a pattern rdflib left as parsed)

            pattern = ralg.translateGroupGraphPattern(pattern)
        return self.plan(pattern, graph)

    def _exists_flag(self, op: Operator, e: Exists, graph: Operator) -> tuple[Operator, Expr]:
        """``op`` with a hidden variable bound to the value of ``e`` (an EXISTS inside an
        expression): the semi-join rows with ``true``, the anti-join rows with ``false``."""
        right = self._exists_pattern(e, graph)
        v = self.hidden("ex")
        parts = []
        for mode, holds in (("semi", True), ("anti", False)):
            side = self._negation(op, right, mode, exists_batch(mode == "anti"))
            lit = Literal("true" if holds != e.negated else "false", XSD_BOOLEAN)
            parts.append(ExtendOperator(side, v, Const(lit, self.encode(lit)), self.ev))
        out = UnionOperator(parts)
        return out, Var(v)

    def _negation(self, left: Operator, right: Operator, mode: str, fallback) -> Operator:
        shared = tuple(v for v in left.vars if v in right.vars)
        if all(v in left.certain and v in right.certain for v in shared):
            return KeyedNegationOperator(left, right, shared, mode)
        return RecomputeOperator([left, right], fallback, left.vars, left.certain, mode + "-join")

    def _minus(self, left: Operator, right: Operator) -> Operator:
        shared = tuple(v for v in left.vars if v in right.vars)
        if not shared:
            return left
        if all(v in left.certain and v in right.certain for v in shared):
            return KeyedNegationOperator(left, right, shared, "anti")
        return RecomputeOperator([left, right], minus_batch, left.vars, left.certain, "minus")

    def _left_join(self, n: Any, graph: Operator) -> Operator:
        left = self.plan(n.p1, graph)
        right = self.plan(n.p2, graph)
        expr = None
        if n.expr is not None and not (is_node(n.expr) and n.expr.name == "TrueFilter"):
            expr = self.expr(n.expr)
        if expr is not None and _has_exists(expr):
            raise QueryError("EXISTS inside an OPTIONAL filter is not supported")
        if set(left.vars) <= left.certain:
            joined: Operator = MJoinOperator([left, right], [], self.ev)
            if expr is not None:
                joined = FilterOperator(joined, [expr], self.ev)
            matched = ProjectOperator(joined, left.vars)
            unmatched = KeyedNegationOperator(left, matched, left.vars, "anti")
            return UnionOperator([joined, unmatched])
        out_vars = left.vars + tuple(v for v in right.vars if v not in left.vars)
        return RecomputeOperator(
            [left, right], left_join_batch(self.ev, expr), out_vars, left.certain, "optional"
        )

    def _sub_slice(self, n: Any, graph: Operator) -> Operator:
        from linkstream.engine.output import order_rows

        start = int(n.start or 0)
        length = None if n.length is None else int(n.length)
        inner = n.p
        order: list[tuple[Expr, bool]] = []
        distinct = False
        pv = None
        if inner.name in ("Distinct", "Reduced"):
            distinct, inner = True, inner.p
        if inner.name == "Project":
            pv, inner = [str(v) for v in inner.PV], inner.p
        if inner.name == "OrderBy":
            order = [(self.expr(c.expr), c.order == "DESC") for c in inner.expr]
            inner = inner.p
        child = self.plan(inner, graph)
        out_vars = tuple(pv) if pv is not None else child.vars
        ev = self.ev

        def fn(inputs):
            rows = inputs[0]
            rows = rows.take(rows.expand())
            if order:
                rows = rows.take(order_rows(ev, rows, order))
            rows = rows.project(out_vars)
            if distinct:
                _, first = np.unique(rows.cols, axis=1, return_index=True)
                rows = rows.take(np.sort(first))
            end = None if length is None else start + length
            idx = np.arange(len(rows))[start:end]
            return rows.take(idx).with_counts(np.ones(len(idx), dtype=np.int64))

        return RecomputeOperator([child], fn, out_vars, set(out_vars) & child.certain, "slice")

    def _values(self, n: Any) -> Operator:
        rows = n.res or []
        vs: list[str] = []
        for r in rows:
            for k in r:
                if str(k) not in vs:
                    vs.append(str(k))
        cols = np.zeros((len(vs), len(rows)), dtype=np.int64)
        for j, r in enumerate(rows):
            for k, v in r.items():
                if v is not None and not (isinstance(v, str) and v == "UNDEF") and not is_node(v):
                    cols[vs.index(str(k)), j] = self.encode(from_rdflib(v))
        return ConstantOperator(vs, cols)

    def _graph(self, n: Any) -> Operator:
        term = _at(n, "term")
        if isinstance(term, URIRef):
            g = self.ds.named.get(str(term))
            if g is None:
                # not a named graph of the dataset: no solution, even for ``GRAPH <g> {}``
                inner = self.plan(_at(n, "p"), self.ds.empty)
                return ConstantOperator(inner.vars, np.zeros((len(inner.vars), 0), dtype=np.int64))
            return self.plan(_at(n, "p"), g)
        if not isinstance(term, Variable):
            raise QueryError(f"GRAPH {term!r} is not supported")
        var = str(term)
        branches = []
        for iri, g in self.ds.named.items():
            op = self.plan(_at(n, "p"), g)
            gid = self.encode(IRI(iri))
            if var in op.vars and var in op.certain:
                op = FilterOperator(op, [_eq(var, IRI(iri), gid)], self.ev)
            elif var in op.vars:
                # the pattern may leave the graph variable unbound (VALUES with UNDEF,
                # OPTIONAL): compatible rows, i.e. unbound or this graph, binding it
                one = ConstantOperator([var], np.array([[gid]], dtype=np.int64))
                op = MJoinOperator([op, one], [], self.ev)
            else:
                op = ExtendOperator(op, var, Const(IRI(iri), gid), self.ev)
                op.certain = op.certain | {var}
            branches.append(op)
        if not branches:
            empty = self.plan(n.p, self.ds.empty)
            return ProjectOperator(empty, empty.vars + (var,))
        return branches[0] if len(branches) == 1 else UnionOperator(branches)

    def _aggregate(self, n: Any, graph: Operator) -> Operator:
        group = n.p
        child = self.plan(group.p, graph)
        gvars: list[str] = []
        for e in group.expr or []:
            if isinstance(e, Variable):
                gvars.append(str(e))
            else:
                v = self.hidden("grp")
                child = ExtendOperator(child, v, self.expr(e), self.ev)
                gvars.append(v)
        specs = []
        for a in n.A or []:
            kind = _AGG.get(a.name)
            if kind is None:
                raise QueryError(f"aggregate {a.name} is not supported")
            arg = None
            if not (kind == "COUNT" and (a.vars == "*" or a.vars is None)):
                e = self.expr(a.vars)
                if isinstance(e, Var):
                    arg = e.name
                else:
                    arg = self.hidden("agg")
                    child = ExtendOperator(child, arg, e, self.ev)
            sep = a["separator"] if "separator" in a and a["separator"] is not None else " "
            specs.append(AggSpec(kind, arg, bool(a.distinct), str(a.res), str(sep)))
        return AggregateOperator(child, gvars, specs, self.ev)


def _nested_exists(e: Expr) -> list[Exists]:
    if isinstance(e, Exists):
        return [e]
    return [x for c in e.children() for x in _nested_exists(c)]


def _swap_exists(e: Expr, flags: dict[int, Expr]) -> Expr:
    """``e`` with each EXISTS replaced by the variable holding its value."""
    if isinstance(e, Exists):
        return flags[id(e)]
    if not dataclasses.is_dataclass(e):
        return e
    changes: dict[str, object] = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            nv: object = _swap_exists(v, flags)
        elif isinstance(v, tuple) and any(isinstance(x, Expr) for x in v):
            nv = tuple(_swap_exists(x, flags) if isinstance(x, Expr) else x for x in v)
        else:
            continue
        if nv is not v:
            changes[f.name] = nv
    return dataclasses.replace(cast(Any, e), **changes) if changes else e


_BNODE_SCOPE = "_bnode_solution"


def _has_bnode_call(e: Expr) -> bool:
    if isinstance(e, Call) and e.name == "BNODE" and len(e.args) == 1:
        return True
    return any(_has_bnode_call(c) for c in e.children())


def _scope_bnodes(e: Expr) -> Expr:
    """``e`` with every ``BNODE(x)`` given the row's scope variable as second argument."""
    if isinstance(e, Call) and e.name == "BNODE" and len(e.args) == 1:
        return Call("BNODE", (_scope_bnodes(e.args[0]), Var(_BNODE_SCOPE)))
    if not dataclasses.is_dataclass(e):
        return e
    changes: dict[str, object] = {}
    for f in dataclasses.fields(e):
        v = getattr(e, f.name)
        if isinstance(v, Expr):
            nv: object = _scope_bnodes(v)
        elif isinstance(v, tuple) and any(isinstance(x, Expr) for x in v):
            nv = tuple(_scope_bnodes(x) if isinstance(x, Expr) else x for x in v)
        else:
            continue
        if nv is not v:
            changes[f.name] = nv
    return dataclasses.replace(cast(Any, e), **changes) if changes else e


def _has_exists(e: Expr) -> bool:
    if isinstance(e, Exists):
        return True
    return any(_has_exists(c) for c in e.children())


def _eq(var: str, t: Term, tid: int) -> Expr:
    from linkstream.query.expressions import Cmp

    return Cmp("=", Var(var), Const(t, tid))


__all__ = ["Planner", "Dataset", "QueryShape", "RLiteral"]
