"""Algebra templates: one rdflib parse per query *shape*, with the constants filled in.

Thousands of registered queries are usually made from a few templates that differ in
their constants (the sensor IRI a query watches, a threshold).  rdflib's parse
(pyparsing, ~10-30 ms) and algebra translation (~4 ms) then dominate registration unless
they are paid once per shape.  :func:`constant_slots` picks the IRI, prefixed-name and
number tokens of the parser text that can be replaced by numbered placeholders without
changing how the text parses: an IRI becomes a placeholder IRI (an IRIREF and a prefixed
name are the same grammar symbol, ``iri``, wherever they may occur), a number becomes a
placeholder number of the same terminal (INTEGER, DECIMAL or DOUBLE).  The text with
placeholders is parsed and checked once into an :class:`AlgebraTemplate`, and
:meth:`AlgebraTemplate.instantiate` copies the paths of the algebra that hold
placeholders, with each placeholder replaced by the query's own term.

The result equals rdflib's algebra of the original text:

* only IRIs inside a group (``{...}``) are replaced, never the prologue's or dataset
  clauses', nor datatypes, function names or parts of property paths; the IRI must be
  valid, absolute and free of escapes (rdflib keeps it as written, and the IRI check has
  nothing to report), a prefixed name ASCII and plain (our lexer and rdflib's agree on
  where it ends); rdflib resolves the prefixed names, with the shape's own prologue;
* numbers are replaced anywhere but after a sign (rdflib folds the sign into the value)
  and after LIMIT and OFFSET (rdflib turns those into Python ints); the term is built
  the way rdflib's parser builds it, with the datatype of the placeholder's terminal;
* distinct token texts get distinct placeholders, and a query whose constants are not
  pairwise distinct terms, or equal a constant the shape keeps, does not use the
  template (equal constants stay equal, unequal ones unequal);
* rdflib orders the triples of a basic graph pattern by their terms, so every pattern
  that held a placeholder is re-ordered with rdflib's own function;
* a template holding anything the copier does not know (property paths, placeholder
  datatypes, a placeholder that vanished) is not used: such shapes are parsed per text.

Errors are never produced from a template: a shape that fails to parse or check is
recorded as unusable and the caller parses the original text, which reports the error
at its real place.
"""

from __future__ import annotations

from collections import OrderedDict
from types import MethodType
from typing import TYPE_CHECKING, Any

from linkstream.query.algebra_json import is_node
from linkstream.query.lexer import TokenStream, iri_problem
from linkstream.rdf.lazyre import lazy

if TYPE_CHECKING:
    from rdflib.plugins.sparql.sparql import Prologue, Query
    from rdflib.term import Literal, URIRef

# a template is made from rdflib's parse (so rdflib and its SPARQL modules are loaded by
# then); they are imported where used, so that importing this module does not load them
# (a query found in the parse cache never loads rdflib)

PLACEHOLDER = "urn:x-linkstream-const:"
_ABSOLUTE = lazy(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
#: ASCII prefixed names on which our lexer and rdflib's PNAME_LN agree (no escapes, no %).
_PNAME_RE = lazy(
    r"(?:[A-Za-z](?:[A-Za-z0-9_\-.]*[A-Za-z0-9_\-])?)?:(?:[A-Za-z0-9_:](?:[A-Za-z0-9_\-.:]*[A-Za-z0-9_\-:])?)?"
)
#: Numbers by SPARQL terminal (INTEGER, DECIMAL, DOUBLE), as our lexer delimits them.
_NUMBERS = (
    (lazy(r"[0-9]+"), ""),
    (lazy(r"[0-9]+\.[0-9]+"), ".0"),
    (lazy(r"[0-9]+(?:\.[0-9]*)?[eE]-?[0-9]+"), "e0"),
)
#: Number placeholders: this prefix, the placeholder's index in 5 digits, the terminal's suffix.
NUMBER_MARK = "0917305"
#: Neighbours that make an IRI a datatype, a function name or part of a property path.
_BEFORE = frozenset("^/|!")
#: Neighbours that make a number signed (rdflib folds the sign into the value) or part of
#: a longer number.
_SIGNS = frozenset("+-.")
_AFTER = frozenset("(/|*+?")
_VALID_IRIS: dict[str, bool] = {}


def _valid_iri(iri: str) -> bool:
    ok = _VALID_IRIS.get(iri)
    if ok is None:
        ok = "\\" not in iri and bool(_ABSOLUTE.match(iri)) and iri_problem(iri) is None
        if len(_VALID_IRIS) > 65536:
            _VALID_IRIS.clear()
        _VALID_IRIS[iri] = ok
    return ok


def constant_slots(stream: TokenStream, changes: dict[int, str]) -> tuple[dict[int, str], list[str]]:
    """The constant tokens of a query that a template can stand for.

    Args:
        stream: The query's tokens (with the dialect pass's rewrites in ``stream.repl``).
        changes: Further rewrites of the parser text (token index -> text); those tokens
            are left alone.

    Returns:
        Replacements (token index -> placeholder IRI) and the distinct token texts, in
        placeholder order.
    """
    toks, sig, repl = stream.toks, stream.sig, stream.repl
    out: dict[int, str] = {}
    texts: dict[str, int] = {}
    if NUMBER_MARK in stream.text or len(sig) >= 100000:  # a number could pass for a placeholder
        return out, []
    depth = 0
    last = len(sig) - 1
    for j, i in enumerate(sig):
        t = toks[i]
        kind = t.kind
        if kind == "punct":
            if t.text == "{":
                depth += 1
            elif t.text == "}":
                depth -= 1
            continue
        if i in repl or i in changes:
            continue
        if kind == "word" and t.text[0].isdigit():  # numbers anywhere but LIMIT and OFFSET
            suffix = next((sfx for rx, sfx in _NUMBERS if rx.fullmatch(t.text)), None)
            p = toks[sig[j - 1]] if j > 0 else None
            if suffix is None or (p is not None and (p.text in _SIGNS or p.key in ("LIMIT", "OFFSET"))):
                continue
            k = texts.setdefault(t.text, len(texts))
            out[i] = "%s%05d%s" % (NUMBER_MARK, k, suffix)
            continue
        if depth <= 0:  # IRIs of the prologue and of dataset clauses stay
            continue
        if kind == "iri":
            if not _valid_iri(t.text[1:-1]):
                continue
        elif kind == "word":
            if ":" not in t.text or t.text.startswith("_:") or not _PNAME_RE.fullmatch(t.text):
                continue
        else:
            continue
        if j > 0:
            p = toks[sig[j - 1]]
            if p.kind == "punct" and p.text in _BEFORE:
                continue
        if j < last:
            n = toks[sig[j + 1]]
            if n.kind == "punct" and n.text in _AFTER:
                continue
        k = texts.setdefault(t.text, len(texts))
        out[i] = "<%s%d>" % (PLACEHOLDER, k)
    return out, list(texts)


def calls_iri(node: object) -> bool:
    """True if an algebra holds an ``IRI()`` / ``URI()`` call (what
    :func:`linkstream.query.continuous.bind_base` visits, in the same walk)."""
    stack = [node]
    while stack:
        x = stack.pop()
        if is_node(x):
            if x.name in ("Builtin_IRI", "Builtin_URI"):
                return True
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return False


def _attributes(x: Any) -> dict[str, Any]:
    """The attributes of a CompValue but its name and the methods bound to it."""
    return {
        k: v
        for k, v in x.__dict__.items()
        if k != "name" and not (isinstance(v, MethodType) and v.__self__ is x)
    }


class AlgebraTemplate:
    """The algebra of a query shape, whose placeholder IRIs are filled in per query.

    Args:
        query: rdflib's translated query of the text with placeholders.
        count: The number of placeholders in that text.

    Raises:
        ValueError: If the algebra holds something the copier does not know, or not
            every placeholder.
    """

    def __init__(self, query: Query, count: int) -> None:
        from rdflib.term import BNode, Literal, URIRef, Variable

        self._uri, self._lit = URIRef, Literal  # (the classes of rdflib's algebra)
        self._leaf = (str, int, float, bool, type(None), Variable, BNode)
        self.prologue: Prologue = query.prologue
        self.algebra = query.algebra
        self._dirty: set[int] = set()
        self._pnames: dict[str, URIRef] = {}
        self._fixed: set[URIRef | Literal] = set()  # the shape's constants that are not placeholders
        self._numbers: dict[int, URIRef | None] = {}  # datatype of each number placeholder
        seen: set[int] = set()
        self._mark(self.algebra, seen)
        if len(seen) != count:
            raise ValueError("not every placeholder reached the algebra")
        self._copy(self.algebra, [URIRef(PLACEHOLDER)] * count)  # copies, or fails now
        #: whether the algebra holds an ``IRI()``/``URI()`` call (which gets the query's base):
        #: placeholders are terms, so every instance holds the calls its template holds
        self.iri_calls = calls_iri(self.algebra)

    def _mark(self, x: Any, seen: set[int]) -> bool:
        """Records the containers that hold placeholders; True if ``x`` holds one."""
        if isinstance(x, self._uri):
            if x.startswith(PLACEHOLDER):
                seen.add(int(x[len(PLACEHOLDER) :]))
                return True
            self._fixed.add(x)
            return False
        if isinstance(x, self._lit):
            if x.datatype is not None and x.datatype.startswith(PLACEHOLDER):
                raise ValueError("a placeholder datatype")
            if x.startswith(NUMBER_MARK):
                k = int(x[len(NUMBER_MARK) : len(NUMBER_MARK) + 5])
                seen.add(k)
                self._numbers[k] = x.datatype
                return True
            self._fixed.add(x)
            return False
        if isinstance(x, self._leaf):
            return False
        if is_node(x):  # rdflib also keeps results in attributes (Expr.graph)
            items: Any = [*dict.values(x), *dict.keys(x), *_attributes(x).values()]
        elif type(x) is dict:
            items = [*x.values(), *x.keys()]
        elif isinstance(x, (list, tuple, set, frozenset)):
            items = x
        else:
            raise ValueError("unknown algebra object %s" % type(x).__name__)
        found = False
        for v in items:
            found = self._mark(v, seen) or found
        if found:
            if isinstance(x, dict) and any(self._mark(k, set()) for k in dict.keys(x)):
                raise ValueError("a placeholder as a key")
            self._dirty.add(id(x))
        return found

    def values(self, texts: list[str]) -> list[URIRef | Literal] | None:
        """The IRIs named by the constant token texts, or ``None`` if two are equal.

        ``None`` too if one equals an IRI that the shape itself holds: a template only
        stands for queries whose constants are as distinct as its placeholders.

        Prefixed names are resolved by rdflib's own prologue of the shape (the prologue
        is part of the shape's text), so the IRIs are exactly those rdflib would make.
        """
        out: list[URIRef | Literal] = []
        for k, text in enumerate(texts):
            if text[0] == "<":
                out.append(self._uri(text[1:-1]))
                continue
            if text[0].isdigit():  # the terminal is the placeholder's: rdflib's datatype
                out.append(self._lit(text, datatype=self._numbers[k]))
                continue
            iri = self._pnames.get(text)
            if iri is None:
                prefix, local = text.split(":", 1)
                iri = self._pnames[text] = self.prologue.resolvePName(prefix, local)
            out.append(iri)
        distinct = set(out)
        return out if len(distinct) == len(out) and distinct.isdisjoint(self._fixed) else None

    def instantiate(self, values: list[URIRef | Literal]) -> Query:
        """A new query whose algebra is the template's with ``values`` for the placeholders.

        Only the containers that hold placeholders are copied; the rest is shared with
        the template (the algebra is read-only for its users).
        """
        from rdflib.plugins.sparql.sparql import Query

        return Query(self.prologue, self._copy(self.algebra, values))

    def _copy(self, x: Any, values: list[URIRef | Literal]) -> Any:
        if id(x) not in self._dirty:
            if isinstance(x, self._uri):
                if x.startswith(PLACEHOLDER):
                    return values[int(x[len(PLACEHOLDER) :])]
            elif isinstance(x, self._lit) and x.startswith(NUMBER_MARK):
                return values[int(x[len(NUMBER_MARK) : len(NUMBER_MARK) + 5])]
            return x
        if is_node(x):  # rdflib's Expr included: the class is kept
            c = x.__class__.__new__(x.__class__)
            OrderedDict.__init__(c)
            for attr, value in x.__dict__.items():
                if isinstance(value, MethodType) and value.__self__ is x:  # Expr's _evalfn
                    value = MethodType(value.__func__, c)
                elif attr != "name":
                    value = self._copy(value, values)
                c.__dict__[attr] = value
            for k, v in dict.items(x):
                OrderedDict.__setitem__(c, k, self._copy(v, values))
            if x.name == "BGP":  # rdflib orders a pattern's triples by their terms
                from rdflib.plugins.sparql.algebra import reorderTriples

                OrderedDict.__setitem__(c, "triples", reorderTriples(dict.__getitem__(c, "triples")))
            return c
        if isinstance(x, dict):
            return {k: self._copy(v, values) for k, v in x.items()}
        return type(x)(self._copy(v, values) for v in x)
