"""The project's own comparison of continuous-query results (SEMANTICS.md section 6).

Two results are equal when, for every ``(query, t)``, their multisets of rows are equal, a
``(query, t)`` missing from one side counting as empty.  Terms compare as the shared
``tools/compare_results.py`` compares them, so that tests give the same verdict with or
without ``../shared`` (``tests/test_result_compare.py`` checks the two agree):

* numeric literals (``xsd:integer``, ``decimal``, ``float``, ``double`` and the types
  derived from ``xsd:integer``) compare by value: ``"54"^^xsd:integer`` equals
  ``"54.0"^^xsd:double``; integral values exactly, others rounded to :data:`DIGITS`
  significant digits, and rows still unequal are paired when all their numbers agree
  within a relative :data:`REL_TOL`;
* a simple literal equals the same ``xsd:string`` literal; language tags compare
  case-insensitively; ``xsd:boolean`` ``"1"``/``"0"`` equal ``"true"``/``"false"``;
* blank-node labels are not compared (every blank node equals every other);
* ASK lines compare their boolean, CONSTRUCT lines their triple.

Terms and statements are read with the platform's parsers
(:func:`linkstream.rdf.terms.parse_term`, :func:`linkstream.rdf.ntriples.parse_line`); only
text they reject (not RDF: a broken escape, a relative IRI, a stray token) goes through
the lenient tokenizer below, which reads it as ``compare_results.py`` does.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path

from linkstream.rdf.ntriples import parse_line
from linkstream.rdf.terms import IRI, BNode, parse_term
from linkstream.rdf.terms import Term as RdfTerm

XSD = "http://www.w3.org/2001/XMLSchema#"
NUMERIC = frozenset(
    XSD + n
    for n in (
        "integer",
        "decimal",
        "float",
        "double",
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
DIGITS = 12
REL_TOL = 1e-9

_TERM = re.compile(
    r"""\s*(?:
        <(?P<iri>[^>]*)>
      | _:(?P<bnode>\S+?)(?=\s|$|\.)
      | "(?P<lex>(?:[^"\\]|\\.)*)"(?:@(?P<lang>[A-Za-z0-9\-]+)|\^\^<(?P<dt>[^>]*)>)?
      | (?P<bare>\S+)
    )""",
    re.X | re.S,
)
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "b": "\b", "f": "\f"}

Term = tuple
Row = tuple
Results = dict[tuple[str, int], Counter]


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out, i = [], 0
    while i < len(s):
        if s[i] == "\\" and i + 1 < len(s):
            n = s[i + 1]
            width = {"u": 4, "U": 8}.get(n)
            if width:
                out.append(chr(int(s[i + 2 : i + 2 + width], 16)))
                i += 2 + width
            else:
                out.append(_ESCAPES.get(n, n))
                i += 2
            continue
        out.append(s[i])
        i += 1
    return "".join(out)


def canon_number(lex: str) -> str | None:
    """A numeric lexical form as a canonical string (integral values exact), or None if invalid."""
    try:
        v = Decimal(lex.strip())
    except InvalidOperation:
        return None
    if v.is_nan():
        return "NaN"
    if v.is_infinite():
        return "INF" if v > 0 else "-INF"
    if v == v.to_integral_value():
        return str(int(v))
    return format(float(v), f".{DIGITS}g") if abs(v) < Decimal("1e300") else str(v.normalize())


def comparable(t: RdfTerm) -> Term:
    """The compared form of a term read by the platform's parser."""
    if isinstance(t, IRI):
        return ("I", t.value)
    if isinstance(t, BNode):
        return ("B",)
    if t.lang:
        return ("L", t.lex, "@" + t.lang.lower())
    return _literal(t.lex, t.datatype)


def _literal(lex: str, dt: str) -> Term:
    if dt in NUMERIC and (n := canon_number(lex)) is not None:
        return ("N", n)
    if dt == XSD + "boolean":
        b = lex.strip()
        return ("L", {"1": "true", "0": "false"}.get(b, b), dt)
    return ("L", lex, dt)


def _term(m: re.Match) -> Term:
    if m.group("iri") is not None:
        return ("I", m.group("iri"))
    if m.group("bnode") is not None:
        return ("B",)
    if m.group("lex") is None:
        return ("X", m.group("bare"))
    lex = _unescape(m.group("lex"))
    if m.group("lang"):
        return ("L", lex, "@" + m.group("lang").lower())
    return _literal(lex, m.group("dt") or XSD + "string")


def parse_terms(text: str) -> list[Term]:
    """The comparable terms of an N-Triples fragment (``"<s> <p> <o> ."`` or one term)."""
    return list(_parse_terms(text.strip()))


@lru_cache(maxsize=1 << 16)
def _parse_terms(text: str) -> tuple[Term, ...]:
    try:
        return (comparable(parse_term(text)),)
    except ValueError:
        pass
    try:
        # a statement ending " ." (or with no final dot); "<o>." is read as the tokenizer does
        stmt = text if text.endswith(" .") else None if text.endswith(".") else text + " ."
        q = parse_line(stmt) if stmt is not None else None
        if q is not None and q[3] is None:
            return tuple(comparable(parse_term(x)) for x in q[:3])
    except ValueError:  # NTriplesError, or a term parse_term does not model (triple terms)
        pass
    return tuple(_lenient_terms(text))


def _lenient_terms(text: str) -> list[Term]:
    """Text the platform's parsers reject, read token by token as ``compare_results.py`` does."""
    if text.endswith(" ."):
        text = text[:-2]
    terms, pos = [], 0
    while pos < len(text):
        m = _TERM.match(text, pos)
        if not m or m.end() == pos:
            break
        terms.append(_term(m))
        pos = m.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return terms


def one_term(text: str) -> Term:
    terms = parse_terms(text)
    return terms[0] if len(terms) == 1 else ("X", text)


def row_of(obj: dict) -> Row:
    """The comparable row of one result line (``binding``, ``ask`` or ``triple``)."""
    if "binding" in obj:
        return ("b", tuple(sorted((k, one_term(v)) for k, v in obj["binding"].items())))
    if "ask" in obj:
        return ("ask", bool(obj["ask"]))
    if "triple" in obj:
        return ("triple", tuple(parse_terms(obj["triple"])))
    raise ValueError(f"result line has no binding, ask or triple: {obj!r}")


def load(path: str | Path, times: set[int] | None = None) -> Results:
    """``(query, t) -> Counter(row)`` of a JSON Lines result file (only ``times`` if given)."""
    data: Results = defaultdict(Counter)
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            obj = json.loads(line)
            t = int(obj["t"])
            if times is None or t in times:
                data[(obj["query"], t)][row_of(obj)] += 1
    return data


def _close_term(x: Term, y: Term) -> bool:
    if x == y:
        return True
    if x[0] != "N" or y[0] != "N":
        return False
    try:
        a, b = float(x[1]), float(y[1])
    except ValueError:
        return False
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b)) or abs(a - b) <= 1e-300


def close_rows(r1: Row, r2: Row) -> bool:
    """Rows equal but for numbers that agree within :data:`REL_TOL`."""
    if r1[0] != r2[0]:
        return False
    if r1[0] == "b":
        if [k for k, _ in r1[1]] != [k for k, _ in r2[1]]:
            return False
        return all(_close_term(v1, v2) for (_, v1), (_, v2) in zip(r1[1], r2[1], strict=True))
    if r1[0] == "triple":
        return len(r1[1]) == len(r2[1]) and all(_close_term(x, y) for x, y in zip(r1[1], r2[1], strict=True))
    return r1 == r2


def equal_multisets(a: Counter, b: Counter) -> bool:
    """Counter equality, then a tolerant pairing of the rows left over on each side."""
    if a == b:
        return True
    only_a, only_b = list((a - b).elements()), list((b - a).elements())
    if len(only_a) != len(only_b):
        return False
    for ra in only_a:
        for i, rb in enumerate(only_b):
            if close_rows(ra, rb):
                del only_b[i]
                break
        else:
            return False
    return True


def differences(a: Results, b: Results, limit: int = 5) -> list[str]:
    """Human-readable ``(query, t)`` mismatches between two results (empty when equal)."""
    out = []
    for key in sorted(set(a) | set(b)):
        ca, cb = a.get(key, Counter()), b.get(key, Counter())
        if equal_multisets(ca, cb):
            continue
        if len(out) < limit:
            extra = list((ca - cb).items())[:2], list((cb - ca).items())[:2]
            out.append(
                f"query={key[0]} t={key[1]}: {sum(ca.values())} vs {sum(cb.values())} rows; "
                f"only in first: {extra[0]}; only in second: {extra[1]}"
            )
        else:
            out.append(f"query={key[0]} t={key[1]}")
    return out
