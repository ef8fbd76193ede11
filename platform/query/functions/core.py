"""Core of the SPARQL expression library: term classification, equality, order, casts.

Semantics follow SPARQL 1.1 §17 as implemented by the project's reference evaluator
(Oxigraph 0.5); the points where that evaluator departs from the letter of the
specification, and which this module follows, are marked ``oxigraph:`` in comments.
"""

from __future__ import annotations

import math
import struct
from functools import lru_cache

from linkstream.query.functions.base import (
    K_BNODE,
    K_BOOL,
    K_DEC,
    K_DOUBLE,
    K_DURATION,
    K_FLOAT,
    K_INT,
    K_IRI,
    K_LANG,
    K_OTHER,
    K_STR,
    K_TEMPORAL,
    NUMERIC_KINDS,
    XSD_DATETIMESTAMP,
    ExprError,
    Val,
    bool_literal,
)
from linkstream.query.functions.dates import (
    DURATION_TYPES,
    TEMPORAL_TYPES,
    as_datetime,
    duration_arith,
    duration_cmp,
    format_duration,
    format_temporal,
    parse_duration,
    parse_temporal,
    plus_duration,
    temporal_cmp,
    temporal_equal,
    temporal_sub,
)
from linkstream.query.functions.numeric import (
    SCALE,
    check_i64,
    check_i128,
    dec_div,
    dec_mul,
    dec_to_f32,
    dec_to_f64,
    dec_to_int,
    dec_value,
    f64_div,
    f64_to_dec,
    f64_to_int,
    format_float32,
    int_to_f32,
    parse_boolean,
    parse_decimal,
    parse_double,
    parse_float,
    parse_integer,
    rust_display,
    to_f32,
)
from linkstream.rdf.terms import (
    INTEGER_TYPES,
    IRI,
    RDF_LANGSTRING,
    XSD_BOOLEAN,
    XSD_DATETIME,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    XSD_INTEGER,
    XSD_STRING,
    BNode,
    Literal,
    Term,
    format_decimal,
    format_double,
)

_NUM_RANK = {K_INT: 0, K_DEC: 1, K_FLOAT: 2, K_DOUBLE: 3}
_NUM_DATATYPE = {K_INT: XSD_INTEGER, K_DEC: XSD_DECIMAL, K_FLOAT: XSD_FLOAT, K_DOUBLE: XSD_DOUBLE}
_TEMPORAL_CASTS = TEMPORAL_TYPES | DURATION_TYPES


# ------------------------------------------------------------------ classification


def _parse_typed(lex: str, datatype: str) -> Val | None:
    if datatype in INTEGER_TYPES:
        # oxigraph: every type derived from xsd:integer is an xsd:integer value (no
        # range check of the derived type), and DATATYPE() reports xsd:integer.
        i = parse_integer(lex)
        return None if i is None else Val(K_INT, i)
    if datatype == XSD_DECIMAL:
        d = parse_decimal(lex)
        return None if d is None else Val(K_DEC, d)
    if datatype == XSD_DOUBLE:
        x = parse_double(lex)
        return None if x is None else Val(K_DOUBLE, x)
    if datatype == XSD_FLOAT:
        x = parse_float(lex)
        return None if x is None else Val(K_FLOAT, x)
    if datatype == XSD_BOOLEAN:
        b = parse_boolean(lex)
        return None if b is None else Val(K_BOOL, b)
    if datatype == XSD_DATETIMESTAMP:
        datatype = XSD_DATETIME
    if datatype in TEMPORAL_TYPES:
        t = parse_temporal(lex, datatype)
        return None if t is None else Val(K_TEMPORAL, t)
    if datatype in DURATION_TYPES:
        du = parse_duration(lex, datatype)
        return None if du is None else Val(K_DURATION, du)
    return None


@lru_cache(maxsize=1 << 16)
def classify(term: Term) -> Val:
    """Classify an RDF term: its kind and value (see :mod:`linkstream.query.functions.base`)."""
    if isinstance(term, Literal):
        if term.lang:
            return Val(K_LANG, (term.lex, term.lang.lower()))
        if term.datatype == XSD_STRING:
            return Val(K_STR, term.lex)
        v = _parse_typed(term.lex, term.datatype)
        return v if v is not None else Val(K_OTHER, (term.lex, term.datatype))
    if isinstance(term, IRI):
        return Val(K_IRI, term.value)
    if isinstance(term, BNode):
        return Val(K_BNODE, term.value)
    raise ExprError("not an RDF term: %r" % (term,))


def val_of(term: Term | None) -> Val:
    """:func:`classify`, with an unbound argument (``None``) being an error."""
    if term is None:
        raise ExprError("unbound variable")
    return classify(term)


# ------------------------------------------------------------------ back to terms


def numeric_term(kind: str, value: int | float) -> Literal:
    """The canonical literal of a numeric value of ``kind``."""
    if kind == K_INT:
        return Literal(str(value), XSD_INTEGER)
    if kind == K_DEC:
        return Literal(format_decimal(dec_value(int(value))), XSD_DECIMAL)
    x = float(value)
    if x == 0.0 and math.copysign(1.0, x) < 0:
        return Literal("-0", _NUM_DATATYPE[kind])  # format_double loses the sign of -0
    if kind == K_FLOAT:
        return Literal(format_float32(x), XSD_FLOAT)
    return Literal(format_double(x), XSD_DOUBLE)


def to_term(v: Val) -> Term:
    """The term of a classified value, in canonical form (as the reference evaluator outputs it)."""
    k = v.kind
    if k == K_STR:
        return Literal(v.value)
    if k == K_LANG:
        return Literal(v.value[0], RDF_LANGSTRING, v.value[1])
    if k in NUMERIC_KINDS:
        return numeric_term(k, v.value)
    if k == K_BOOL:
        return bool_literal(v.value)
    if k == K_TEMPORAL:
        return Literal(format_temporal(v.value), v.value.datatype)
    if k == K_DURATION:
        return Literal(format_duration(v.value), v.value.datatype)
    if k == K_IRI:
        return IRI(v.value)
    if k == K_BNODE:
        return BNode(v.value)
    return Literal(v.value[0], v.value[1])


def lexical(v: Val) -> str:
    """The string of STR(): an IRI, a literal's lexical form (numbers etc. as oxigraph writes them)."""
    k = v.kind
    if k in (K_STR, K_IRI):
        return v.value
    if k in (K_LANG, K_OTHER):
        return v.value[0]
    if k == K_BNODE:
        raise ExprError("STR of a blank node")
    if k == K_FLOAT:
        # oxigraph: floats and doubles are written with Rust's Display (no exponent).
        return rust_display(v.value, single=True)
    if k == K_DOUBLE:
        return rust_display(v.value)
    return to_term(v).lex  # type: ignore[union-attr]  # a numeric Val is a Literal


def datatype_of(v: Val) -> str:
    """The datatype IRI of DATATYPE()."""
    k = v.kind
    if k in _NUM_DATATYPE:
        return _NUM_DATATYPE[k]
    if k == K_STR:
        return XSD_STRING
    if k == K_LANG:
        return RDF_LANGSTRING
    if k == K_BOOL:
        return XSD_BOOLEAN
    if k in (K_TEMPORAL, K_DURATION):
        return v.value.datatype
    if k == K_OTHER:
        return v.value[1]
    raise ExprError("DATATYPE of a non-literal")


# ------------------------------------------------------------------ numerics


def _to_kind(v: Val, kind: str) -> int | float:
    k, x = v.kind, v.value
    if kind == K_INT or k == kind:
        return x
    if kind == K_DEC:
        return x * SCALE
    if kind == K_FLOAT:
        return int_to_f32(x) if k == K_INT else dec_to_f32(x)
    if k == K_INT:
        return float(x)
    return dec_to_f64(x) if k == K_DEC else x


def promote(a: Val, b: Val) -> tuple[str, int | float, int | float] | None:
    """Numeric type promotion of two operands; ``None`` if one is not numeric."""
    if a.kind not in NUMERIC_KINDS or b.kind not in NUMERIC_KINDS:
        return None
    kind = a.kind if _NUM_RANK[a.kind] >= _NUM_RANK[b.kind] else b.kind
    return kind, _to_kind(a, kind), _to_kind(b, kind)


def binary_numeric(op: str, a: Val, b: Val) -> Val:
    """``a op b`` for op in ``+ - * /`` on numeric values."""
    p = promote(a, b)
    if p is None:
        return _temporal_arith(op, a, b)
    kind, x, y = p
    if kind == K_INT:
        if op == "/":
            return Val(K_DEC, dec_div(int(x) * SCALE, int(y) * SCALE))
        r = x + y if op == "+" else x - y if op == "-" else x * y if op == "*" else None
        if r is None:
            raise ExprError("unknown operator %r" % op)
        return Val(K_INT, check_i64(int(r)))
    if kind == K_DEC:
        if op == "+":
            return Val(K_DEC, check_i128(int(x) + int(y)))
        if op == "-":
            return Val(K_DEC, check_i128(int(x) - int(y)))
        if op == "*":
            return Val(K_DEC, dec_mul(int(x), int(y)))
        if op == "/":
            return Val(K_DEC, dec_div(int(x), int(y)))
        raise ExprError("unknown operator %r" % op)
    fx, fy = float(x), float(y)
    if op == "+":
        r = fx + fy
    elif op == "-":
        r = fx - fy
    elif op == "*":
        r = fx * fy
    elif op == "/":
        r = f64_div(fx, fy)
    else:
        raise ExprError("unknown operator %r" % op)
    return Val(kind, to_f32(r) if kind == K_FLOAT else r)


def _temporal_arith(op: str, a: Val, b: Val) -> Val:
    """Date/time and duration arithmetic (SEP-0002, supported by oxigraph)."""
    if op in ("+", "-"):
        if a.kind == K_DURATION and b.kind == K_DURATION:
            return Val(K_DURATION, duration_arith(op, a.value, b.value))
        if a.kind == K_TEMPORAL and b.kind == K_DURATION:
            return Val(K_TEMPORAL, plus_duration(a.value, b.value, 1 if op == "+" else -1))
        if op == "-" and a.kind == K_TEMPORAL and b.kind == K_TEMPORAL:
            return Val(K_DURATION, temporal_sub(a.value, b.value))
    raise ExprError("arithmetic on non-numeric operands")


def _cmp(x: object, y: object) -> int | None:
    if x < y:  # type: ignore[operator]  # values of one comparable kind
        return -1
    if x > y:  # type: ignore[operator]  # values of one comparable kind
        return 1
    if x == y:
        return 0
    return None  # NaN


# ------------------------------------------------------------------ equality and order


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


def same_value(a: Val, b: Val) -> bool:
    """Identity of two classified terms (oxigraph's ``ExpressionTerm`` equality)."""
    if a.kind != b.kind:
        return False
    k = a.kind
    if k in (K_FLOAT, K_DOUBLE):
        return _bits(a.value) == _bits(b.value)
    if k == K_TEMPORAL:
        return a.value.datatype == b.value.datatype and temporal_equal(a.value, b.value)
    return a.value == b.value


def equals(a: Val, b: Val) -> bool | None:
    """SPARQL ``=``: ``True``/``False``, or ``None`` when it is an error."""
    ka, kb = a.kind, b.kind
    if ka in (K_IRI, K_BNODE, K_LANG):
        return same_value(a, b)
    if ka == K_OTHER:
        if kb == K_OTHER and a.value == b.value:
            return True
        return False if kb in (K_IRI, K_BNODE, K_LANG) else None
    if kb == K_OTHER:
        return None
    if ka in NUMERIC_KINDS:
        p = promote(a, b)
        return False if p is None else p[1] == p[2]
    if ka == K_TEMPORAL:
        if kb != K_TEMPORAL or a.value.datatype != b.value.datatype:
            return False
        # one value with a timezone, one without: equal or not depending on the implicit
        # timezone, i.e. within 14 hours of each other, is an error (W3C open-world/date-2)
        r = temporal_cmp(a.value, b.value)
        return None if r is None else r == 0
    if ka == K_DURATION:
        if kb != K_DURATION:
            return False
        return (a.value.months, a.value.seconds) == (b.value.months, b.value.seconds)
    return ka == kb and a.value == b.value  # strings, booleans


def partial_cmp(a: Val, b: Val) -> int | None:
    """Order of ``<`` ``>`` ``<=`` ``>=``: -1/0/1, ``None`` when the operands are not comparable.

    oxigraph: identical terms of any kind compare equal (so ``<a> <= <a>`` is true), and
    xsd:boolean values are not ordered.
    """
    if same_value(a, b):
        return 0
    ka, kb = a.kind, b.kind
    if ka == K_STR:
        return _cmp(a.value, b.value) if kb == K_STR else None
    if ka == K_LANG:
        if kb == K_LANG and a.value[1] == b.value[1]:
            return _cmp(a.value[0], b.value[0])
        return None
    if ka in NUMERIC_KINDS:
        p = promote(a, b)
        return None if p is None else _cmp(p[1], p[2])
    if ka == K_TEMPORAL:
        if kb == K_TEMPORAL and a.value.datatype == b.value.datatype:
            return temporal_cmp(a.value, b.value)
        return None
    if ka == K_DURATION and kb == K_DURATION:
        return duration_cmp(a.value, b.value)
    return None


def effective_boolean_value(v: Val) -> bool:
    """The EBV of a classified term (oxigraph: an error for language-tagged strings)."""
    k = v.kind
    if k == K_BOOL:
        return bool(v.value)
    if k == K_STR:
        return v.value != ""
    if k in (K_INT, K_DEC):
        return v.value != 0
    if k in (K_FLOAT, K_DOUBLE):
        return not (v.value == 0.0 or math.isnan(v.value))
    raise ExprError("no effective boolean value for a %s" % k)


# ------------------------------------------------------------------ casts


def cast_value(datatype: str, v: Val) -> Val:
    """The XSD constructor function ``datatype(v)`` (SPARQL 1.1 §17.5, oxigraph's cases)."""
    k, x = v.kind, v.value
    if datatype == XSD_STRING:
        if k == K_BNODE:
            raise ExprError("cannot cast a blank node")
        return Val(K_STR, lexical(v))
    r: object = None
    if datatype == XSD_BOOLEAN:
        if k == K_BOOL:
            r = x
        elif k in NUMERIC_KINDS:
            r = effective_boolean_value(v)
        elif k == K_STR:
            r = parse_boolean(x)
        return _cast_result(K_BOOL, r)
    if datatype == XSD_DOUBLE:
        if k in NUMERIC_KINDS:
            r = _to_kind(v, K_DOUBLE)
        elif k == K_BOOL:
            r = 1.0 if x else 0.0
        elif k == K_STR:
            r = parse_double(x)
        return _cast_result(K_DOUBLE, r)
    if datatype == XSD_FLOAT:
        if k in NUMERIC_KINDS:
            r = to_f32(x) if k == K_DOUBLE else _to_kind(v, K_FLOAT)
        elif k == K_BOOL:
            r = 1.0 if x else 0.0
        elif k == K_STR:
            r = parse_float(x)
        return _cast_result(K_FLOAT, r)
    if datatype == XSD_INTEGER:
        if k == K_INT:
            r = x
        elif k == K_DEC:
            r = dec_to_int(x)
        elif k in (K_FLOAT, K_DOUBLE):
            r = f64_to_int(x)
        elif k == K_BOOL:
            r = int(x)
        elif k == K_STR:
            r = parse_integer(x)
        return _cast_result(K_INT, r)
    if datatype == XSD_DECIMAL:
        if k == K_INT:
            r = x * SCALE
        elif k == K_DEC:
            r = x
        elif k in (K_FLOAT, K_DOUBLE):
            r = f64_to_dec(x)
        elif k == K_BOOL:
            r = SCALE if x else 0
        elif k == K_STR:
            r = parse_decimal(x)
        return _cast_result(K_DEC, r)
    if datatype in _TEMPORAL_CASTS:
        return _cast_temporal(datatype, v)
    raise ExprError("unsupported cast to <%s>" % datatype)


def _cast_result(kind: str, r: object) -> Val:
    if r is None:
        raise ExprError("invalid value for the cast to %s" % kind)
    return Val(kind, r)


def _cast_temporal(datatype: str, v: Val) -> Val:
    k, x = v.kind, v.value
    if k == K_STR:
        parsed = _parse_typed(x, datatype)
        if parsed is None:
            raise ExprError("invalid lexical form for <%s>" % datatype)
        return parsed
    if k == K_TEMPORAL and x.datatype == datatype:
        return v
    if k == K_TEMPORAL and datatype == XSD_DATETIME:
        return Val(K_TEMPORAL, as_datetime(x))
    raise ExprError("unsupported cast to <%s>" % datatype)
