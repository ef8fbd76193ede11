"""SPARQL 1.1 property paths in basic graph patterns: rdflib path objects -> operators.

A triple pattern whose predicate is a path is translated as the SPARQL 1.1 algebra
translates it (section 18.2.2.4), as far as plain triple patterns go, so that those
join with the rest of the basic graph pattern (and, over a store, are explored with it):

* ``p`` is the pattern itself, ``^p`` the pattern with subject and object swapped;
* ``a/b`` is ``a`` then ``b`` through a fresh hidden variable (a multiset: one solution
  per intermediate node, as the spec's translation gives);
* ``a|b`` is the union of both branches, each pair once (as Oxigraph, the reference
  evaluator, gives it; the spec's algebra would keep a pair matched by both branches twice);
* ``!(p1|...|^q1|...)`` is a pattern with a hidden predicate variable filtered against
  the forward members, united with the inverse pattern filtered against the inverse
  members (either part alone when only one kind is given: one solution per matching
  triple; with both kinds each pair once, like ``|``);
* ``e*``, ``e+``, ``e?`` are the distinct node pairs of the inner path's relation
  (:func:`~linkstream.operators.path.closure_operator`, recomputed when that relation
  changes: over a window, once per report in which its content changed).

Hidden variables start with ``_`` and never reach a result.

rdflib's SPARQL grammar drops the IRI of an inverse member of a negated property set
(``!^p`` parses as an empty ``InversePath``); ``linkstream.query.sparql_parser`` repairs it
before any parse, so the member keeps its IRI as ``part``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from linkstream.operators.base import Operator
from linkstream.operators.distinct import DistinctOperator
from linkstream.operators.filter import FilterOperator
from linkstream.operators.path import closure_operator
from linkstream.operators.project import ProjectOperator, UnionOperator
from linkstream.operators.scan import Slot
from linkstream.query.algebra_json import is_node
from linkstream.query.aterms import AlternativePath, InvPath, MulPath, NegatedPath, Path, SequencePath, URIRef
from linkstream.query.errors import QueryError
from linkstream.query.expressions import Cmp, Const, Expr, Var
from linkstream.rdf.terms import IRI

if TYPE_CHECKING:
    from linkstream.engine.planner import Planner

Pattern = tuple[Slot, Slot, Slot]


def is_path(p: object) -> bool:
    """Whether a BGP predicate is a property path (not a plain IRI or variable)."""
    return isinstance(p, Path)


class PathTranslator:
    """Translates the path triples of one basic graph pattern for ``planner``.

    Args:
        planner: Supplies hidden variables, constant slots, the evaluator and the
            operators of plain triple patterns (``_pattern_leaves``) and joins.
        graph: The graph operator the basic graph pattern is matched in.
    """

    def __init__(self, planner: Planner, graph: Operator) -> None:
        self.pl = planner
        self.graph = graph

    def expand(self, s: Slot, p: Any, o: Slot, patterns: list[Pattern], ops: list[Operator]) -> None:
        """Adds what ``s p o`` becomes: plain patterns to ``patterns``, the rest to ``ops``."""
        if isinstance(p, URIRef):
            patterns.append((s, self.pl.slot(p), o))
        elif isinstance(p, InvPath):
            self.expand(o, p.arg, s, patterns, ops)
        elif isinstance(p, SequencePath):
            cur = s
            for k, part in enumerate(p.args):
                nxt = o if k == len(p.args) - 1 else ("var", self.pl.hidden("pp"))
                self.expand(cur, part, nxt, patterns, ops)
                cur = nxt
        elif isinstance(p, AlternativePath):
            # distinct pairs, as the reference evaluator (Oxigraph) gives them
            ops.append(DistinctOperator(UnionOperator([self.sub(s, part, o) for part in p.args])))
        elif isinstance(p, NegatedPath):
            ops.append(self._negated(s, p, o))
        elif isinstance(p, MulPath):
            a, b = self.pl.hidden("ppa"), self.pl.hidden("ppb")
            inner = self.sub(("var", a), p.path, ("var", b))
            ops.append(closure_operator(inner, a, b, s, o, p.mod, self.graph))
        else:
            raise QueryError(f"property path {p!r} is not supported")

    def sub(self, s: Slot, p: Any, o: Slot) -> Operator:
        """One path on its own, projected on the variables among ``s`` and ``o``."""
        patterns: list[Pattern] = []
        ops: list[Operator] = []
        self.expand(s, p, o, patterns, ops)
        op = self.pl._join(self.pl._pattern_leaves(patterns, self.graph) + ops, [])
        return ProjectOperator(op, _ends(s, o))

    def _negated(self, s: Slot, p: NegatedPath, o: Slot) -> Operator:
        fwd: list[str] = []
        inv: list[str] = []
        for m in p.args:
            if isinstance(m, URIRef):
                fwd.append(str(m))
            elif isinstance(m, InvPath) and isinstance(m.arg, URIRef):
                inv.append(str(m.arg))
            elif is_node(m) and m.name == "InversePath" and isinstance(m.get("part"), URIRef):
                inv.append(str(m["part"]))
            else:
                raise QueryError(f"negated property set member {m!r} is not supported")
        parts = []
        if fwd or not inv:
            parts.append(self._excluding(s, fwd, o))
        if inv:
            parts.append(self._excluding(o, inv, s))
        # both kinds: an alternative of the two parts, each pair once (as for ``|``)
        return parts[0] if len(parts) == 1 else DistinctOperator(UnionOperator(parts))

    def _excluding(self, s: Slot, excluded: list[str], o: Slot) -> Operator:
        """``s ?h o`` with ``?h`` none of ``excluded``, projected on ``s`` and ``o``."""
        h = self.pl.hidden("nps")
        op = self.pl._join(self.pl._pattern_leaves([(s, ("var", h), o)], self.graph), [])
        if excluded:
            exprs: list[Expr] = [Cmp("!=", Var(h), Const(IRI(x), self.pl.encode(IRI(x)))) for x in excluded]
            op = FilterOperator(op, exprs, self.pl.ev)
        return ProjectOperator(op, _ends(s, o))


def _ends(s: Slot, o: Slot) -> list[str]:
    out: list[str] = []
    for kind, v in (s, o):
        if kind == "var" and str(v) not in out:
            out.append(str(v))
    return out


__all__ = ["PathTranslator", "is_path"]
