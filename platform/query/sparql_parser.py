"""rdflib's SPARQL 1.1 parser and algebra, loaded on first use, with our grammar repair.

Importing ``rdflib.plugins.sparql`` builds its pyparsing grammar (~0.1 s): modules that
may not need it (a query whose algebra is in the parse cache, see :mod:`.parse_store`)
import this module inside the functions that parse.

rdflib's grammar drops the IRI of an inverse member of a negated property set (``!^p``
parses as an empty ``InversePath``); :func:`fix_negated_inverse` repairs the grammar
element at import, before any parse, so the member keeps its IRI as ``part``.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Collection
from typing import Any, NoReturn, Protocol, cast

import pyparsing
import rdflib
from rdflib.plugins.sparql import algebra, parser
from rdflib.plugins.sparql.parserutils import Comp, CompValue, Param
from rdflib.plugins.sparql.sparql import Prologue, Query
from rdflib.term import URIRef

from linkstream.query.lexer import (
    OffsetMap,
    Token,
    TokenStream,
    decode_escapes,
    iri_problem,
    map_offset,
    quote,
    unescape_local,
)
from linkstream.query.rules import (
    PARSE_LOCK,
    check_sparql_rules,
    describe_failure,
    iter_tree,
    trace_parse_failure,
)


def fix_negated_inverse() -> None:
    """Makes rdflib keep the IRI of ``^iri`` inside ``!(...)`` (idempotent)."""
    elem = parser.PathOneInPropertySet
    for e in getattr(elem, "exprs", ()):
        if isinstance(e, Comp) and e.name == "InversePath" and not getattr(e, "_linkstream_fixed", False):
            e.expr = pyparsing.Suppress("^") + Param("part", parser.iri | parser.A)
            e._linkstream_fixed = True  # type: ignore[attr-defined]  # our marker on an rdflib parser element


fix_negated_inverse()


class Scan(Protocol):
    """What the parse reads of the dialect pass (``continuous._Scan``): tokens to locate errors."""

    text: str
    toks: list[Token]
    sig: list[int]
    repl: dict[int, str]
    form_j: int | None
    from_toks: list[int]

    def fail(self, message: str, at: Token | int | None) -> NoReturn: ...
    def tok(self, j: int | None) -> Token | None: ...
    def token_at(self, offset: int, keep: Collection[int] = ()) -> int | None: ...
    def deepest_bracket(self) -> Token | None: ...


def translate(scan: Scan, parse_text: str, base: str, parse_map: OffsetMap | None = None) -> Query:
    """rdflib's algebra of a parser text (see :mod:`.continuous`), after every check.

    Args:
        scan: The query's dialect pass (a ``continuous._Scan``): its tokens locate errors.
        parse_text: The text rdflib parses.
        base: The base IRI.
        parse_map: Offsets of ``parse_text`` in the query text; ``None``: a shape's text
            (a template's), whose failures are plain exceptions, never located.

    Raises:
        QueryError: With the line and column of the problem (``parse_map`` given).
    """
    with PARSE_LOCK:  # one parse at a time in a process (see PARSE_LOCK)
        return _translate(scan, parse_text, base, parse_map)


def _translate(scan: Scan, parse_text: str, base: str, parse_map: OffsetMap | None) -> Query:
    if parse_map is None:
        rdflib.NORMALIZE_LITERALS = False  # literal constants keep their lexical form
        tree = unescape_pnames(parser.Query.parse_string(parse_text, parse_all=True))
    else:
        tree = parse_tree(scan, parse_text, parse_map)
    check_iris(scan, tree)
    check_sparql_rules(cast(TokenStream, scan), tree, scan.form_j)  # (a _Scan is one)
    OrderedDict.pop(tree[-1], "datasetClause", None)  # the placeholder of parser_spacing()
    if parse_map is None:
        return _order_select_star(tree, algebra.translateQuery(tree, base=base, initNs={}), parse_text)
    try:
        query = algebra.translateQuery(tree, base=base, initNs={})
    except RecursionError:
        raise
    except Exception as e:  # rdflib raises bare Exceptions here
        scan.fail("cannot compile the query: %s" % e, scan.tok(scan.form_j or 0))
    return _order_select_star(tree, query, parse_text)


def _order_select_star(tree: Any, query: Query, text: str) -> Query:
    """``SELECT *`` lists its variables in the order they first appear in the query text.

    rdflib lists them from a set, in an order that changed from one process to the next
    (string hashing is randomised): the columns of results, and the key order of their
    JSON bindings, with it.  Only the query's own projection is ordered (a subquery's
    columns are not visible in results).
    """
    top = query.algebra
    if top.name != "SelectQuery" or "projection" in tree[-1]:
        return query
    node = top.p
    while node.name in ("Slice", "Distinct", "Reduced"):
        node = node.p
    first: dict[str, int] = {}
    for m in _VARIABLE.finditer(text):
        first.setdefault(m.group(1), m.start())
    order = sorted(top.PV, key=lambda v: (first.get(str(v), len(text)), str(v)))
    top.PV = order
    if node.name == "Project":
        node.PV = list(order)
    return query


#: a variable of the query text (``?x`` / ``$x``): its name
_VARIABLE = re.compile(r"[?$]([\w\u00b7\u0300-\u036f\u203f\u2040]+)")


def parse_tree(scan: Scan, parse_text: str, parse_map: OffsetMap) -> Any:
    """Parses the rewritten text with rdflib; every failure becomes a located QueryError."""
    rdflib.NORMALIZE_LITERALS = False  # literal constants keep their lexical form
    try:
        return unescape_pnames(parser.Query.parse_string(parse_text, parse_all=True))
    except RecursionError:
        scan.fail("query is nested too deeply for the SPARQL parser", scan.deepest_bracket())
    except pyparsing.ParseBaseException as e:
        failure = trace_parse_failure(parser.Query, parse_text, e.loc)
    except Exception as e:  # rdflib's parse actions raise bare Exceptions
        failure = trace_parse_failure(parser.Query, parse_text, 0)
        if failure.action_error is None:
            scan.fail("invalid query: %s" % e, scan.tok(scan.form_j or 0))
    k = scan.token_at(map_offset(parse_map, failure.offset, len(scan.text)), keep=scan.from_toks)
    tok = scan.toks[k] if k is not None else None
    if failure.action_error is None and set(failure.expected) == {":"}:
        # a bare word was read as the start of a prefixed name: the word is the mistake
        prev = next((t for t in reversed(scan.toks[: k if k is not None else None]) if t.significant), None)
        if prev is not None and prev.kind == "word":
            scan.fail("unexpected %s" % quote(prev.text), prev)
    scan.fail(describe_failure(failure, quote(tok.text) if tok is not None else None), tok)


def unescape_pnames(tree: Any) -> Any:
    """Removes the PN_LOCAL_ESC escapes of every prefixed name (rdflib keeps them)."""
    for x in iter_tree(tree):
        if isinstance(x, CompValue) and x.name == "pname" and "\\" in (x.get("localname") or ""):
            x["localname"] = unescape_local(x["localname"])
    return tree


def check_iris(scan: Scan, tree: Any) -> None:
    """IRIs of the query must be valid (RFC 3987), as Oxigraph requires; rdflib does not check."""
    uris = {str(x) for x in iter_tree(tree) if isinstance(x, URIRef)}
    for i in scan.sig:
        t = scan.toks[i]
        if t.kind == "iri" and i not in scan.repl:
            iri = decode_escapes(t)[1:-1]
            if iri in uris and (problem := iri_problem(iri)):
                scan.fail("invalid IRI <%s>: %s" % (iri, problem), t)


__all__ = ["CompValue", "Prologue", "Query", "algebra", "fix_negated_inverse", "parser", "translate"]
