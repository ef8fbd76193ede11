"""RDF terms and their N-Triples form.

LinkStream's dictionary keys are the N-Triples serialisation of a term (``<iri>``,
``_:label``, ``"lex"``, ``"lex"@lang``, ``"lex"^^<datatype>``).  A term keeps its lexical
form and datatype exactly as written, from the reader through the dictionary to the
results: ``"01"^^xsd:integer``, ``"1"^^xsd:integer`` and ``"1"^^xsd:int`` are three
terms (DISTINCT, GROUP BY, joins and ``sameTerm`` tell them apart), equal in value
(``=``, ``<``, ORDER BY and the numeric functions compare them by value, through the
per-id value arrays of :class:`~linkstream.rdf.terminfo.TermInfo`).  Only the spelling
of escapes and language tags is normalised (one N-Triples string per term).
:func:`canonical` gives a literal's canonical form for callers that want to compare by
value (tests, result comparison); nothing on the data path rewrites a term with it.
"""

from __future__ import annotations

import functools
import math
import re
from decimal import Decimal, InvalidOperation
from typing import Any

from linkstream.rdf.lazyre import lazy
from linkstream.rdf.records import record

XSD = "http://www.w3.org/2001/XMLSchema#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
XSD_STRING = XSD + "string"
XSD_BOOLEAN = XSD + "boolean"
XSD_INTEGER = XSD + "integer"
XSD_DECIMAL = XSD + "decimal"
XSD_FLOAT = XSD + "float"
XSD_DOUBLE = XSD + "double"
XSD_DATETIME = XSD + "dateTime"
RDF_LANGSTRING = RDF + "langString"

#: XSD types derived from xsd:integer (all of them are numeric and compare as integers).
INTEGER_TYPES = frozenset(
    XSD + n
    for n in (
        "integer",
        "int",
        "long",
        "short",
        "byte",
        "nonNegativeInteger",
        "positiveInteger",
        "negativeInteger",
        "nonPositiveInteger",
        "unsignedLong",
        "unsignedInt",
        "unsignedShort",
        "unsignedByte",
    )
)
NUMERIC_TYPES = INTEGER_TYPES | {XSD_DECIMAL, XSD_FLOAT, XSD_DOUBLE}

KIND_IRI = 1
KIND_BNODE = 2
KIND_LITERAL = 3


# (terms are made, compared and hashed in bulk: their methods are written out, as the
# generated ones would be; tests/rdf/test_records.py compares them)


def _value_eq(self: Any, other: object) -> bool:
    if other.__class__ is self.__class__:
        return (self.value,) == (other.value,)  # type: ignore[attr-defined]  # other is of self's class (checked above)
    return NotImplemented


def _value_hash(self: Any) -> int:
    return hash((self.value,))


@record(frozen=True, slots=True)
class IRI:
    """An IRI (``value``: the IRI itself, no angle brackets)."""

    value: str

    def __init__(self, value: str) -> None:
        object.__setattr__(self, "value", value)

    __eq__ = _value_eq
    __hash__ = _value_hash

    def n3(self) -> str:
        return "<" + self.value + ">"


@record(frozen=True, slots=True)
class BNode:
    """A blank node (``value``: its label)."""

    value: str

    def __init__(self, value: str) -> None:
        object.__setattr__(self, "value", value)

    __eq__ = _value_eq
    __hash__ = _value_hash

    def n3(self) -> str:
        return "_:" + self.value


@record(frozen=True, slots=True)
class Literal:
    """An RDF literal; ``datatype`` is always set (simple literals are xsd:string)."""

    lex: str
    datatype: str = XSD_STRING
    lang: str | None = None

    def __init__(self, lex: str, datatype: str = XSD_STRING, lang: str | None = None) -> None:
        object.__setattr__(self, "lex", lex)
        object.__setattr__(self, "datatype", datatype)
        object.__setattr__(self, "lang", lang)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return (self.lex, self.datatype, self.lang) == (other.lex, other.datatype, other.lang)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.lex, self.datatype, self.lang))

    def n3(self) -> str:
        body = '"' + escape_string(self.lex) + '"'
        if self.lang:
            return body + "@" + self.lang
        if self.datatype == XSD_STRING:
            return body
        return body + "^^<" + self.datatype + ">"


Term = IRI | BNode | Literal

_ESC = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r"}
_ESC_RE = lazy(r'[\\"\n\r]')
_UNESC_RE = lazy(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.S)
_UNESC_SIMPLE = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def escape_string(s: str) -> str:
    """Escape a literal's lexical form for N-Triples."""
    return _ESC_RE.sub(lambda m: _ESC[m.group()], s)


def unescape_string(s: str) -> str:
    """Undo N-Triples / SPARQL string escapes (``\\n``, ``\\u00E9``, ``\\U0001F600``)."""
    if "\\" not in s:
        return s

    def repl(m: re.Match[str]) -> str:
        if m.group(1):
            return chr(int(m.group(1), 16))
        if m.group(2):
            return chr(int(m.group(2), 16))
        c = m.group(3)
        if c in _UNESC_SIMPLE:
            return _UNESC_SIMPLE[c]
        raise ValueError("bad escape \\" + c)

    return _UNESC_RE.sub(repl, s)


@functools.cache
def _term_re() -> re.Pattern[str]:
    """The N-Triples term grammar, compiled on first use (its Unicode classes cost 7 ms of
    every process's start-up otherwise)."""
    return re.compile(_TERM_PATTERN, re.X | re.S)


_TERM_PATTERN = r"""^(?:<(?P<iri>[^<>"{}|^`\\\x00-\x20]*)>
    |_:(?P<bnode>[A-Za-z0-9_\u00C0-\uFFFF](?:[A-Za-z0-9_.\-\u00B7\u00C0-\uFFFF]*[A-Za-z0-9_\-\u00B7\u00C0-\uFFFF])?)
    |"(?P<lex>(?:[^"\\\n\r]|\\.)*)"(?:@(?P<lang>[A-Za-z]+(?:-[A-Za-z0-9]+)*)|\^\^<(?P<dt>[^<>"{}|^`\\\x00-\x20]*)>)?
    )$"""


def parse_term(text: str) -> Term:
    """Parse one N-Triples term (``<iri>``, ``_:b``, ``"lex"``, ``"lex"@en``, ``"lex"^^<dt>``)."""
    m = _term_re().match(text)
    if not m:
        raise ValueError("not an N-Triples term: %r" % text)
    if m.group("iri") is not None:
        return IRI(m.group("iri"))
    if m.group("bnode") is not None:
        return BNode(m.group("bnode"))
    lex = unescape_string(m.group("lex"))
    if m.group("lang"):
        return Literal(lex, RDF_LANGSTRING, m.group("lang").lower())
    return Literal(lex, m.group("dt") or XSD_STRING)


def term_from_json(t: dict[str, str]) -> Term:
    """A term of SPARQL 1.1 Query Results JSON (``{"type": "uri" | "bnode" | "literal", ...}``).

    Raises:
        ValueError: not such a term.
    """
    kind = t.get("type")
    if kind == "uri":
        return IRI(t["value"])
    if kind == "bnode":
        return BNode(t["value"])
    if kind in ("literal", "typed-literal"):
        lang = t.get("xml:lang")
        if lang:
            return Literal(t["value"], RDF_LANGSTRING, lang.lower())
        return Literal(t["value"], t.get("datatype") or XSD_STRING)
    raise ValueError("not a SPARQL JSON term: %r" % (t,))


# ----------------------------------------------------------------- canonical literals

_INT_RE = lazy(r"^[+-]?\d+$")
_DEC_RE = lazy(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_DBL_RE = lazy(r"^(?:[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|[+-]?INF|NaN)$")


def format_decimal(v: Decimal) -> str:
    """Canonical xsd:decimal lexical form (no exponent, no trailing zeros, at least 'N.0'? no: 'N')."""
    if v == v.to_integral_value():
        return str(int(v))
    s = format(v, "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return s


def format_double(v: float) -> str:
    """Lexical form of an xsd:double/xsd:float value in the style of oxigraph."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "INF" if v > 0 else "-INF"
    if v == int(v) and abs(v) < 1e16:
        return str(int(v))
    r = repr(v)
    return r.replace("e+", "E").replace("e", "E")


def canonical_literal(lex: str, datatype: str) -> str:
    """Return the canonical lexical form of a typed literal, or ``lex`` if it has none/is invalid."""
    s = lex.strip()
    try:
        if datatype in INTEGER_TYPES:
            if _INT_RE.match(s):
                return str(int(s))
        elif datatype == XSD_DECIMAL:
            if _DEC_RE.match(s):
                return format_decimal(Decimal(s))
        elif datatype == XSD_DOUBLE or datatype == XSD_FLOAT:
            if _DBL_RE.match(s):
                return format_double(float(s))
        elif datatype == XSD_BOOLEAN:
            if s in ("true", "1"):
                return "true"
            if s in ("false", "0"):
                return "false"
    except (ValueError, InvalidOperation, OverflowError):
        pass
    return lex


def canonical(term: Term) -> Term:
    """Canonical form of a term (numeric and boolean literals by value)."""
    if isinstance(term, Literal) and term.lang is None and term.datatype != XSD_STRING:
        lex = canonical_literal(term.lex, term.datatype)
        if lex != term.lex:
            return Literal(lex, term.datatype)
    return term


def numeric_value(term: Term) -> float | None:
    """The numeric value of a numeric literal, ``None`` otherwise (or if ill-typed)."""
    if isinstance(term, Literal) and term.datatype in NUMERIC_TYPES:
        try:
            return float(term.lex)
        except ValueError:
            return None
    return None
