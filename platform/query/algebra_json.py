"""rdflib's SPARQL algebra as JSON, and the node type it is read back into.

The planner reads a query's algebra: a tree of rdflib ``CompValue`` nodes (ordered dicts
with a ``name``) holding rdflib terms, property paths, lists, tuples, sets and dicts.  This
module writes such a tree as JSON (:func:`dumps`) and reads it back (:func:`loads`) into
:class:`Node` objects, which behave as ``CompValue`` does for every reader of the algebra
(item and attribute access, ``get``, ``clone``), without importing
``rdflib.plugins.sparql`` (building its pyparsing grammar is most of a short command's
start-up).  Code that walks an algebra tests for a node with :func:`is_node`, true for both.

The round trip is exact: node names, key order, attributes (rdflib keeps results in some,
such as ``_vars`` and the translated pattern of ``EXISTS``), term types and literals'
lexical forms, and which containers are shared.  :func:`dumps` refuses (``ValueError``)
anything it does not know, and :func:`same` compares two trees by those rules, so a caller
can check a round trip before relying on it.  No pickle: only JSON data is read.
"""

from __future__ import annotations

import json
import math
import sys
from collections import OrderedDict
from types import MethodType
from typing import Any, TypeGuard

from linkstream.query.aterms import PATHS as _PATHS
from linkstream.query.aterms import BNode, Literal, URIRef, Variable

#: version of the JSON layout and of what the translation puts in it (part of the key of
#: every stored entry; 2: ``SELECT *`` lists its variables in text order)
FORMAT = 2
#: the JSON tag of each term class (this module reads terms back as :mod:`.aterms` objects)
_TAGS: dict[str, str] = {"URIRef": "u", "Variable": "v", "BNode": "b", "Literal": "l"}


def _term_tag(x: object) -> str | None:
    """``x``'s tag in :data:`_TAGS` if it is exactly a term class of :mod:`.aterms` or of
    rdflib (a tree parsed by rdflib, or read back), else None."""
    t = type(x)
    tag = _TAGS.get(t.__name__)
    if tag is None:
        return None
    if t.__module__ == URIRef.__module__:
        return tag
    m = sys.modules.get("rdflib.term")
    return tag if m is not None and t is getattr(m, t.__name__) else None


def _path_name(x: object) -> str | None:
    """The class name of a property path of :mod:`.aterms` or rdflib, else None."""
    t = type(x)
    if t.__name__ not in _PATHS:
        return None
    if t is _PATHS[t.__name__]:
        return t.__name__
    m = sys.modules.get("rdflib.paths")
    return t.__name__ if m is not None and t is getattr(m, t.__name__) else None


class Node(OrderedDict[Any, Any]):
    """An algebra node read back from JSON: rdflib's ``CompValue`` without its parser.

    ``node.x`` is ``node["x"]`` (``None`` when missing) unless ``x`` is an attribute, and
    ``node.get(k)`` returns ``k`` itself when missing, as ``CompValue`` does.
    """

    def __init__(self, name: str, **values: Any) -> None:
        OrderedDict.__init__(self)
        self.name = name
        self.update(values)

    def clone(self) -> Node:
        return type(self)(self.name, **self)

    def get(self, a: Any, variables: bool = False, errors: bool = False) -> Any:  # type: ignore[override]  # (CompValue's signature)
        return OrderedDict.get(self, a, a)

    def __getattr__(self, a: str) -> Any:
        if a.startswith("_OrderedDict__"):
            raise AttributeError(a)
        try:
            return self[a]
        except KeyError:
            return None

    def __repr__(self) -> str:
        return "%s_%s" % (self.name, dict(self))


class ExprNode(Node):
    """A :class:`Node` that was an rdflib ``Expr`` (an expression; evaluated by the planner)."""


def is_node(x: object) -> TypeGuard[Any]:
    """Whether ``x`` is an algebra node: a :class:`Node` or an rdflib ``CompValue`` (the same
    interface to their readers; typed ``Any`` as rdflib's is untyped)."""
    if isinstance(x, Node):
        return True
    pu = sys.modules.get("rdflib.plugins.sparql.parserutils")  # loaded if any exist
    return pu is not None and isinstance(x, pu.CompValue)


def needs_parser(tree: Any) -> bool:
    """Whether a reader of ``tree`` may still need rdflib's algebra functions: an ``EXISTS``
    whose pattern rdflib left as parsed (in a projection, HAVING or ORDER BY; the planner
    translates it with rdflib, which works on ``CompValue`` trees only)."""
    stack, seen = [tree], set()
    while stack:
        x = stack.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if is_node(x):
            if x.name in ("Builtin_EXISTS", "Builtin_NOTEXISTS") and "graph" not in x.__dict__:
                return True
            stack.extend(dict.values(x))
            stack.extend(v for _, v in _attributes(x))
        elif isinstance(x, (list, tuple, set, frozenset)):
            stack.extend(x)
        elif type(x) is dict:
            stack.extend(x.values())
    return False


def _is_expr(x: object) -> bool:
    if isinstance(x, Node):
        return isinstance(x, ExprNode)
    pu = sys.modules.get("rdflib.plugins.sparql.parserutils")
    return pu is not None and isinstance(x, pu.Expr)


def _attributes(x: Any) -> list[tuple[str, Any]]:
    """A node's attributes but its name and the methods bound to it (``Expr._evalfn``)."""
    return [
        (k, v)
        for k, v in x.__dict__.items()
        if k not in ("name", "_evalfn")
        and not (k == "ctx" and v is None)  # (left by Expr.eval)
        and not (isinstance(v, MethodType) and v.__self__ is x)
    ]


class _Writer:
    def __init__(self) -> None:
        self.shared: dict[int, int] = {}  # id of a mutable container -> its index

    def enter(self, x: object) -> list[Any] | None:
        """A back reference if ``x`` was written before; else ``x`` gets the next index."""
        k = self.shared.get(id(x))
        if k is not None:
            return ["R", k]
        self.shared[id(x)] = len(self.shared)
        return None

    def write(self, x: Any) -> Any:
        if x is None or type(x) in (bool, int, str):
            return x
        if type(x) is float:
            if not math.isfinite(x):
                raise ValueError("a non-finite float")
            return x
        tag = _term_tag(x)
        if tag == "l":
            dt = x.datatype
            return ["l", str(x), x.language, None if dt is None else str(dt)]
        if tag is not None:
            return [tag, str(x)]
        if type(x) is tuple:
            return ["T", *(self.write(v) for v in x)]
        path = _path_name(x)
        if path is not None:
            return ["P", path, [[k, self.write(v)] for k, v in x.__dict__.items()]]
        if is_node(x):
            ref = self.enter(x)
            if ref is not None:
                return ref
            items = [[self.write(k), self.write(v)] for k, v in dict.items(x)]
            attrs = [[k, self.write(v)] for k, v in _attributes(x)]
            return ["N", x.name, "e" if _is_expr(x) else "c", items, attrs]
        if type(x) in (list, dict, set, frozenset):
            ref = self.enter(x)
            if ref is not None:
                return ref
            if type(x) is dict:
                return ["D", *([self.write(k), self.write(v)] for k, v in x.items())]
            tag = "L" if type(x) is list else "S" if type(x) is set else "F"
            return [tag, *(self.write(v) for v in x)]
        raise ValueError("cannot store an algebra object of type %s" % type(x).__name__)


class _Reader:
    def __init__(self) -> None:
        self.shared: list[Any] = []

    def read(self, x: Any) -> Any:
        if not isinstance(x, list):
            if x is None or type(x) in (bool, int, float, str):
                return x
            raise ValueError("unexpected JSON value")
        tag = x[0]
        if tag == "u":
            return URIRef(x[1])
        if tag == "v":
            return Variable(x[1])
        if tag == "b":
            return BNode(x[1])
        if tag == "l":
            return Literal(x[1], lang=x[2], datatype=None if x[3] is None else URIRef(x[3]))
        if tag == "T":
            return tuple(self.read(v) for v in x[1:])
        if tag == "R":
            return self.shared[x[1]]
        if tag == "P":
            cls = _PATHS[x[1]]
            p = cls.__new__(cls)
            p.__dict__.update((k, self.read(v)) for k, v in x[2])
            return p
        k = len(self.shared)
        self.shared.append(None)
        if tag == "N":
            node = (ExprNode if x[2] == "e" else Node)(x[1])
            self.shared[k] = node
            for key, value in x[3]:
                OrderedDict.__setitem__(node, self.read(key), self.read(value))
            for attr, value in x[4]:
                node.__dict__[attr] = self.read(value)
            return node
        if tag == "L":
            out: list[Any] = []
            self.shared[k] = out
            out.extend(self.read(v) for v in x[1:])
            return out
        if tag == "D":
            d: dict[Any, Any] = {}
            self.shared[k] = d
            for key, value in x[1:]:
                d[self.read(key)] = self.read(value)
            return d
        if tag in ("S", "F"):
            s = (set if tag == "S" else frozenset)(self.read(v) for v in x[1:])
            self.shared[k] = s
            return s
        raise ValueError("unknown tag %r" % tag)


class StoredQuery:
    """A translated query read back from JSON: what the planner reads of rdflib's ``Query``.

    Attributes:
        prologue: Holds ``base``, the query's base IRI (or ``None``).
        algebra: The algebra tree (of :class:`Node` objects).
    """

    def __init__(self, base: str | None, algebra: Any) -> None:
        self.prologue = _Prologue(base)
        self.algebra = algebra


class _Prologue:
    def __init__(self, base: str | None) -> None:
        self.base = base


def dumps(query: Any) -> str:
    """A translated query (rdflib's ``Query`` or a :class:`StoredQuery`) as JSON text.

    Raises:
        ValueError: If the algebra holds an object this module does not know.
    """
    base = getattr(query.prologue, "base", None)
    body = {"base": None if base is None else str(base), "algebra": _Writer().write(query.algebra)}
    return json.dumps(body, separators=(",", ":"), allow_nan=False)


def loads(text: str) -> StoredQuery:
    """The query written by :func:`dumps`.

    Raises:
        ValueError: If ``text`` is not what :func:`dumps` writes (``json`` errors included).
    """
    body = json.loads(text)
    if not isinstance(body, dict) or set(body) != {"base", "algebra"}:
        raise ValueError("not a stored algebra")
    base = body["base"]
    if base is not None and not isinstance(base, str):
        raise ValueError("bad base")
    try:
        return StoredQuery(base, _Reader().read(body["algebra"]))
    except (IndexError, KeyError, TypeError) as e:
        raise ValueError("malformed stored algebra: %s" % e) from None


def same(a: Any, b: Any) -> bool:
    """Whether two algebra trees are equal by the rules of the module docstring.

    A node equals a node of the same name and kind (``Expr`` or not) with equal items in
    the same order and equal attributes; terms are equal when of the same type and equal
    (literals: lexical form, datatype and language); containers shared in one tree are
    shared the same way in the other.
    """
    return _Same().eq(a, b)


class _Same:
    def __init__(self) -> None:
        self.pairs: dict[int, int] = {}
        self.back: dict[int, int] = {}

    def paired(self, a: object, b: object) -> bool | None:
        """For mutable containers: the sharing must match; None: compare the contents."""
        pa, pb = self.pairs.get(id(a)), self.back.get(id(b))
        if pa is not None or pb is not None:
            return pa == id(b) and pb == id(a)
        self.pairs[id(a)], self.back[id(b)] = id(b), id(a)
        return None

    def eq(self, a: Any, b: Any) -> bool:
        if is_node(a) or is_node(b):
            if not (is_node(a) and is_node(b)) or a.name != b.name or _is_expr(a) != _is_expr(b):
                return False
            known = self.paired(a, b)
            if known is not None:
                return known
            ia, ib = list(dict.items(a)), list(dict.items(b))
            aa, ab = _attributes(a), _attributes(b)
            return (
                self.seq([k for k, _ in ia], [k for k, _ in ib])
                and self.seq([v for _, v in ia] + [v for _, v in aa], [v for _, v in ib] + [v for _, v in ab])
                and [k for k, _ in aa] == [k for k, _ in ab]
            )
        ta, tb = _term_tag(a), _term_tag(b)
        if ta is not None or tb is not None:  # (rdflib's or read back: the same if equal)
            if ta != tb or str(a) != str(b):
                return False
            return ta != "l" or (a.language == b.language and self.eq(a.datatype, b.datatype))
        pa, pb = _path_name(a), _path_name(b)
        if pa is not None or pb is not None:
            return (
                pa == pb
                and self.seq(list(a.__dict__), list(b.__dict__))
                and self.seq(list(a.__dict__.values()), list(b.__dict__.values()))
            )
        if type(a) is not type(b):
            return False
        if type(a) is tuple:
            return self.seq(list(a), list(b))
        if type(a) in (list, dict, set, frozenset):
            known = self.paired(a, b)
            if known is not None:
                return known
            if type(a) is list:
                return self.seq(a, b)
            if type(a) is dict:
                return self.seq(list(a), list(b)) and self.seq(list(a.values()), list(b.values()))
            # sets hold hashable terms only (of either kind: compared in one order)
            return self.seq(sorted(a, key=_order), sorted(b, key=_order))
        if type(a) is float and math.isnan(a):
            return math.isnan(b)
        return bool(a == b)

    def seq(self, xs: list[Any], ys: list[Any]) -> bool:
        return len(xs) == len(ys) and all(self.eq(x, y) for x, y in zip(xs, ys, strict=True))


def _order(x: object) -> tuple[str, str]:
    """A set member's place in an order both kinds of term share."""
    tag = _term_tag(x)
    return (tag, str(x)) if tag is not None else ("~" + type(x).__name__, repr(x))
