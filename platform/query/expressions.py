"""Typed SPARQL expression trees, compiled from rdflib's parse of a query.

The operators never see rdflib objects: :func:`compile_expr` turns rdflib's ``CompValue``
expressions into these frozen dataclasses once, at planning time, with every constant
already dictionary-encoded.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import field
from typing import Any

from linkstream.query.algebra_json import is_node
from linkstream.query.aterms import BNode as RBNode
from linkstream.query.aterms import Literal as RLiteral
from linkstream.query.aterms import URIRef, Variable
from linkstream.query.errors import QueryError
from linkstream.rdf.records import record
from linkstream.rdf.terms import IRI, RDF_LANGSTRING, XSD_STRING, BNode, Literal, Term


class Expr:
    """Base of expression nodes."""

    def vars(self) -> frozenset[str]:
        out: set[str] = set()
        for c in self.children():
            out |= c.vars()
        return frozenset(out)

    def children(self) -> tuple[Expr, ...]:
        return ()


@record(frozen=True)
class Var(Expr):
    """A variable, by name."""

    name: str

    def vars(self) -> frozenset[str]:
        return frozenset((self.name,))


@record(frozen=True)
class Const(Expr):
    """A constant term and its dictionary id."""

    term: Term
    id: int


@record(frozen=True)
class Arith(Expr):
    """``a op b`` for op in ``+ - * /``."""

    op: str  # + - * /
    a: Expr
    b: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)


@record(frozen=True)
class Unary(Expr):
    """``op a`` for op in ``- +``."""

    op: str  # - +
    a: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)


@record(frozen=True)
class Cmp(Expr):
    """``a op b`` for op in ``= != < > <= >=``."""

    op: str  # = != < > <= >=
    a: Expr
    b: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)


@record(frozen=True)
class And(Expr):
    """``a && b``."""

    a: Expr
    b: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)


@record(frozen=True)
class Or(Expr):
    """``a || b``."""

    a: Expr
    b: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)


@record(frozen=True)
class Not(Expr):
    """``!a``."""

    a: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)


@record(frozen=True)
class Bound(Expr):
    """``BOUND(?var)``."""

    var: str

    def vars(self) -> frozenset[str]:
        return frozenset((self.var,))


@record(frozen=True)
class If(Expr):
    """``IF(cond, a, b)``."""

    cond: Expr
    a: Expr
    b: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.a, self.b)


@record(frozen=True)
class Coalesce(Expr):
    """``COALESCE(args...)``."""

    args: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.args


@record(frozen=True)
class In(Expr):
    """``a IN (items)`` / ``a NOT IN (items)``."""

    a: Expr
    items: tuple[Expr, ...]
    negated: bool

    def children(self) -> tuple[Expr, ...]:
        return (self.a, *self.items)


@record(frozen=True)
class Call(Expr):
    """A builtin function by its upper-case SPARQL name (STRLEN, REGEX, ...)."""

    name: str
    args: tuple[Expr, ...]

    def children(self) -> tuple[Expr, ...]:
        return self.args


@record(frozen=True)
class Cast(Expr):
    """A cast to an XSD datatype (``xsd:integer(a)``...)."""

    datatype: str
    a: Expr

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)


@record(frozen=True)
class Exists(Expr):
    """``EXISTS { pattern }`` / ``NOT EXISTS``; the planner turns it into a semi/anti-join."""

    pattern: Any = field(compare=False, hash=False)  # an algebra node (see algebra_json)
    negated: bool = False
    key: int = 0


CAST_TYPES = {
    "http://www.w3.org/2001/XMLSchema#" + n
    for n in ("string", "boolean", "integer", "decimal", "float", "double", "dateTime")
}

#: builtins handled by the generic scalar path, with their rdflib parameter names
_ARGS = {
    "REGEX": ("text", "pattern", "flags"),
    "SUBSTR": ("arg", "start", "length"),
    "REPLACE": ("arg", "pattern", "replacement", "flags"),
    "IRI": ("arg", "base"),  # base: the query's base IRI, when the parser gave one
}
_NAME_FIX = {"SAMETERM": "SAMETERM", "ISIRI": "ISIRI", "ISURI": "ISIRI", "URI": "IRI"}


def from_rdflib(t: object) -> Term:
    """An rdflib term as a LinkStream term (literals keep their lexical form)."""
    if isinstance(t, URIRef):
        return IRI(str(t))
    if isinstance(t, RBNode):
        return BNode(str(t))
    if isinstance(t, RLiteral):
        if t.language:
            return Literal(str(t), RDF_LANGSTRING, t.language.lower())
        dt = str(t.datatype) if t.datatype is not None else XSD_STRING
        return Literal(str(t), dt)
    raise QueryError(f"unsupported term {t!r}")


Encoder = Callable[[Term], int]


def compile_expr(e: object, encode: Encoder) -> Expr:
    """Compile one rdflib expression; ``encode`` gives the dictionary id of a constant."""
    if isinstance(e, Variable):
        return Var(str(e))
    if isinstance(e, (URIRef, RLiteral, RBNode)):
        t = from_rdflib(e)
        return Const(t, encode(t))
    if isinstance(e, list) and len(e) == 1:
        return compile_expr(e[0], encode)
    if not is_node(e):
        raise QueryError(f"unsupported expression {e!r}")

    def c(x: object) -> Expr:
        return compile_expr(x, encode)

    n = e.name
    if n == "RelationalExpression":
        if e.op in ("IN", "NOT IN"):
            return In(c(e.expr), tuple(c(x) for x in _arg_list(e, "other")), e.op == "NOT IN")
        return Cmp(str(e.op), c(e.expr), c(e.other))
    if n in ("AdditiveExpression", "MultiplicativeExpression"):
        out = c(e.expr)
        for op, other in zip(e.op or [], e.other or []):
            out = Arith(str(op), out, c(other))
        return out
    if n == "ConditionalAndExpression":
        out = c(e.expr)
        for other in e.other or []:
            out = And(out, c(other))
        return out
    if n == "ConditionalOrExpression":
        out = c(e.expr)
        for other in e.other or []:
            out = Or(out, c(other))
        return out
    if n == "UnaryNot":
        return Not(c(e.expr))
    if n == "UnaryMinus":
        return Unary("-", c(e.expr))
    if n == "UnaryPlus":
        return Unary("+", c(e.expr))
    if n == "Builtin_BOUND":
        return Bound(str(e.arg))
    if n == "Builtin_IF":
        return If(c(e.arg1), c(e.arg2), c(e.arg3))
    if n == "Builtin_COALESCE":
        return Coalesce(tuple(c(x) for x in _arg_list(e, "arg")))
    if n in ("Builtin_EXISTS", "Builtin_NOTEXISTS"):
        return Exists(e.graph, n == "Builtin_NOTEXISTS", id(e))
    if n == "Function":
        iri = str(e.iri)
        args = tuple(c(x) for x in (e.expr or []))
        if iri in CAST_TYPES and len(args) == 1:
            return Cast(iri, args[0])
        raise QueryError(f"unknown function <{iri}>")
    if n.startswith("Builtin_"):
        name = n[len("Builtin_") :].upper()
        name = _NAME_FIX.get(name, name)
        if name == "CONCAT":
            return Call(name, tuple(c(x) for x in _arg_list(e, "arg")))
        params = _ARGS.get(name)
        if params is None:
            params = ("arg", "arg1", "arg2", "arg3")
        call_args: list[Expr] = []
        for p in params:
            v = e[p] if p in e else None  # CompValue.get() defaults to the key itself
            if v is not None:
                call_args.append(c(v))
        return Call(name, tuple(call_args))
    raise QueryError(f"unsupported expression {n}")


_NIL = "http://www.w3.org/1999/02/22-rdf-syntax-ns#nil"


def _arg_list(e: Any, key: str) -> list[object]:
    """An argument list of ``e``: rdflib parses ``()`` as ``rdf:nil``, a missing one is empty."""
    v = e[key] if key in e else None
    if v is None or (isinstance(v, URIRef) and str(v) == _NIL):
        return []
    return v if isinstance(v, list) else [v]


def conjuncts(e: Expr) -> list[Expr]:
    """Split a filter into its top-level ``&&`` operands."""
    if isinstance(e, And):
        return conjuncts(e.a) + conjuncts(e.b)
    return [e]


def contains_exists(e: Expr) -> bool:
    if isinstance(e, Exists):
        return True
    return any(contains_exists(c) for c in e.children())
