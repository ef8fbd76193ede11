"""SPARQL 1.1 scalar operators and functions over LinkStream terms (§17 of the spec).

Every function takes terms of :mod:`linkstream.rdf.terms` (``None`` standing for an
unbound variable) and returns a term, or raises :class:`ExprError` — a SPARQL expression
error, which the caller turns into an unbound value, a filtered-out solution, etc.

The semantics are those of the project's reference evaluator, Oxigraph 0.5, including
where it departs from the letter of the specification (marked ``oxigraph:`` in the
sibling modules in ``query/functions/``).  The main such points:

* ``xsd:integer`` is 64-bit and ``xsd:decimal`` has 18 fractional digits; overflow (and,
  for decimal products, precision loss) is an error; integer division truncates its
  decimal result to 18 digits.
* Types derived from ``xsd:integer`` are integers: ``DATATYPE("1"^^xsd:int)`` is
  ``xsd:integer`` and ``sameTerm("1"^^xsd:int, 1)`` is true.
* xsd:boolean values are not ordered (``true < false`` is an error), language-tagged
  strings have no effective boolean value, and ``=`` between a dateTime with and one
  without a timezone is false rather than an error.
* Regular expressions use Rust ``regex`` syntax (see :mod:`linkstream.query.functions.strings`).
* Besides xsd:dateTime, the other XSD date/time types and the durations are values
  (comparison, accessors, casts from strings), with the arithmetic of SPARQL 1.2 /
  oxigraph: ``dateTime - dateTime`` is a dayTimeDuration, ``dateTime + duration`` a
  dateTime, durations add up.
* STR() and the cast to xsd:string write doubles and floats without exponent
  (``STR(1e20)`` is ``"100000000000000000000"``).

Numeric results are canonical literals: integers as ``str(int)``, decimals with
:func:`~linkstream.rdf.terms.format_decimal`, doubles with
:func:`~linkstream.rdf.terms.format_double` and floats with their shortest binary32
digits in the same style.
"""

from __future__ import annotations

from decimal import Decimal

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
    K_STR,
    K_TEMPORAL,
    NUMERIC_KINDS,
    ExprError,
    Val,
)
from linkstream.query.functions.core import (
    binary_numeric,
    cast_value,
    classify,
    effective_boolean_value,
    equals,
    numeric_term,
    partial_cmp,
    to_term,
    val_of,
)
from linkstream.query.functions.dates import duration_neg, duration_sort_position, timeline
from linkstream.query.functions.numeric import (
    check_i64,
    check_i128,
    dec_value,
    decimal_to_scaled,
    to_f32,
)
from linkstream.rdf.terms import (
    INTEGER_TYPES,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    Literal,
    Term,
)

__all__ = [
    "ExprError",
    "arithmetic",
    "call",
    "cast",
    "compare",
    "ebv",
    "in_list",
    "is_numeric",
    "make_numeric",
    "numeric_value",
    "order_key",
    "unary",
]


def ebv(term: Term | None) -> bool:
    """The effective boolean value of ``term`` (§17.2.2).

    Args:
        term: The term; ``None`` (unbound) is an error.

    Returns:
        ``False`` for ``false``, ``""``, numeric zero and NaN; ``True`` for other booleans,
        strings and numbers.

    Raises:
        ExprError: For any other term (IRIs, blank nodes, ill-typed literals, literals of
            other datatypes, and — as in oxigraph — language-tagged strings).
    """
    return effective_boolean_value(val_of(term))


def arithmetic(op: str, a: Term | None, b: Term | None) -> Literal:
    """Binary arithmetic ``a op b`` on numeric literals.

    Args:
        op: One of ``+ - * /``.
        a: Left operand.
        b: Right operand.

    Returns:
        The canonical numeric literal of the result, of the promoted type (integer <
        decimal < float < double; integer division gives a decimal).

    Raises:
        ExprError: Non-numeric or unbound operand, integer/decimal overflow, decimal
            division by zero.
    """
    return to_term(binary_numeric(op, val_of(a), val_of(b)))  # type: ignore[return-value]  # a Val always converts to a term


def unary(op: str, a: Term | None) -> Literal:
    """Unary ``+``/``-`` on a numeric literal (``!`` is accepted too: logical negation of the EBV).

    Args:
        op: ``-``, ``+`` or ``!``.
        a: The operand.

    Returns:
        The canonical literal of the result.

    Raises:
        ExprError: Non-numeric operand (for ``!``: no EBV), overflow of ``-``.
    """
    v = val_of(a)
    if op == "!":
        return to_term(Val(K_BOOL, not effective_boolean_value(v)))  # type: ignore[return-value]  # a Val always converts to a term
    if v.kind == K_DURATION and op in ("+", "-"):
        return to_term(Val(K_DURATION, v.value if op == "+" else duration_neg(v.value)))  # type: ignore[return-value]  # a Val always converts to a term
    if v.kind not in NUMERIC_KINDS or op not in ("+", "-"):
        raise ExprError("unary %s on a non-numeric operand" % op)
    if op == "+":
        return numeric_term(v.kind, v.value)
    if v.kind == K_INT:
        return numeric_term(K_INT, check_i64(-v.value))
    if v.kind == K_DEC:
        return numeric_term(K_DEC, check_i128(-v.value))
    return numeric_term(v.kind, -v.value)


def compare(op: str, a: Term | None, b: Term | None) -> bool:
    """A comparison operator (``= != < > <= >=``) per the SPARQL operator mapping.

    Args:
        op: The operator.
        a: Left operand.
        b: Right operand.

    Returns:
        The outcome.

    Raises:
        ExprError: Unbound operand; ``=``/``!=`` between literals whose equality is
            unknown (e.g. two different literals of an unsupported datatype); ordering of
            incomparable operands.
    """
    va, vb = val_of(a), val_of(b)
    if op in ("=", "!="):
        r = equals(va, vb)
        if r is None:
            raise ExprError("cannot compare for equality")
        return r if op == "=" else not r
    c = partial_cmp(va, vb)
    if c is None:
        raise ExprError("incomparable operands")
    if op == "<":
        return c < 0
    if op == ">":
        return c > 0
    if op == "<=":
        return c <= 0
    if op == ">=":
        return c >= 0
    raise ExprError("unknown operator %r" % op)


def in_list(a: Term | None, items: list[Term | None]) -> bool:
    """``a IN (items...)``: true if some item ``=`` ``a``; an error if none does and one errs.

    Args:
        a: The tested term.
        items: The list members (evaluated).

    Returns:
        Whether ``a`` is in the list.

    Raises:
        ExprError: No member is equal and at least one comparison was an error.
    """
    failed = False
    for item in items:
        try:
            if compare("=", a, item):
                return True
        except ExprError:
            failed = True
    if failed:
        raise ExprError("IN: error comparing with a member")
    return False


def call(name: str, args: list[Term | None]) -> Term:
    """Evaluate a SPARQL built-in function on evaluated arguments.

    Args:
        name: The function name in upper case (``STRLEN``, ``REGEX``...).  BOUND,
            COALESCE, IF and EXISTS are the caller's.
        args: The argument values; ``None`` (unbound) makes the call an error.

    Returns:
        The result term.

    Raises:
        ExprError: Unknown function, wrong arity, or an error of the function.
    """
    # the library of built-ins (and the string, hash and regex modules it needs) is imported
    # by the first query that calls one, not by every process that evaluates an expression
    from linkstream.query.functions.builtins import call_builtin

    return call_builtin(name, args)


def cast(datatype_iri: str, a: Term | None) -> Literal:
    """An XSD constructor function, e.g. ``xsd:integer(a)`` (§17.5).

    Args:
        datatype_iri: Full IRI of xsd:string, boolean, integer, decimal, float, double or
            dateTime (xsd:date, time, the g* types and durations are accepted from strings).
        a: The argument.

    Returns:
        The canonical literal of the cast value.

    Raises:
        ExprError: Cast not allowed or value not representable.
    """
    return to_term(cast_value(datatype_iri, val_of(a)))  # type: ignore[return-value]  # a Val always converts to a term


_LITERAL_GROUP = {K_TEMPORAL: 1, K_DURATION: 2, K_STR: 3, K_LANG: 4, K_BOOL: 5}
_NUMERIC_ORDER = {K_INT: 0, K_DEC: 1, K_FLOAT: 2, K_DOUBLE: 3}


def order_key(term: Term | None) -> tuple:
    """Sort key of ``ORDER BY``: unbound < blank nodes < IRIs < literals.

    Literals of comparable types are ordered as ``<`` orders them (numbers by value, NaN
    last; strings by code point; language-tagged strings by text then tag; dates and
    times on the time line).  Literals of different kinds are grouped (numbers,
    dates/times, durations, strings, language-tagged strings, booleans, others), an
    arbitrary but fixed choice: the spec leaves it open and oxigraph's own order of such
    mixes depends on the input order.  Ties are broken by datatype and lexical form, so
    the order is total and deterministic.

    Args:
        term: The term (``None`` for unbound).

    Returns:
        A tuple; keys of any two terms are comparable.
    """
    if term is None:
        return (0,)
    v = classify(term)
    if v.kind == K_BNODE:
        return (1, v.value)
    if v.kind == K_IRI:
        return (2, v.value)
    lex = term.lex  # type: ignore[union-attr]  # not an IRI here: a Literal
    dt = term.datatype  # type: ignore[union-attr]  # not an IRI here: a Literal
    if v.kind in NUMERIC_KINDS:
        x = numeric_value(term)
        position = (1, 0) if x != x else (0, x)  # NaN after every number
        return (3, 0, position, _NUMERIC_ORDER[v.kind], lex)
    group = _LITERAL_GROUP.get(v.kind)
    if group is None:
        return (3, 6, lex, dt)
    if v.kind == K_TEMPORAL:
        t = v.value
        return (3, 1, t.datatype, timeline(t), t.tz is not None, lex)
    if v.kind == K_DURATION:
        return (3, 2, duration_sort_position(v.value), v.value.months, lex, dt)
    if v.kind == K_LANG:
        return (3, 4, lex, v.value[1])
    if v.kind == K_BOOL:
        return (3, 5, v.value, lex)
    return (3, 3, lex)


def is_numeric(term: Term | None) -> bool:
    """Whether ``term`` is a valid literal of a numeric datatype (the ``isNumeric`` test)."""
    return term is not None and classify(term).kind in NUMERIC_KINDS


def numeric_value(term: Term | None) -> int | Decimal | float | None:
    """The Python value of a numeric literal.

    Args:
        term: Any term.

    Returns:
        An ``int`` for xsd:integer and its derived types, a :class:`~decimal.Decimal` for
        xsd:decimal, a ``float`` for xsd:float/xsd:double; ``None`` if ``term`` is not a
        numeric literal or is ill-typed.
    """
    if term is None:
        return None
    v = classify(term)
    if v.kind == K_DEC:
        return dec_value(v.value)
    if v.kind in NUMERIC_KINDS:
        return v.value
    return None


def make_numeric(value: int | Decimal | float, datatype: str) -> Literal:
    """Build the canonical literal of a number.

    Args:
        value: The number.
        datatype: xsd:integer (or a derived type, which is kept), xsd:decimal, xsd:float or
            xsd:double.

    Returns:
        The literal, e.g. ``make_numeric(Decimal("1.50"), XSD_DECIMAL)`` is ``"1.5"``.

    Raises:
        ExprError: Unknown datatype or a value the datatype cannot hold.
    """
    if datatype in INTEGER_TYPES:
        if isinstance(value, float) and not value.is_integer():
            raise ExprError("not an integer")
        return Literal(str(int(value)), datatype)
    if datatype == XSD_DECIMAL:
        d = (
            value
            if isinstance(value, Decimal)
            else Decimal(repr(value) if isinstance(value, float) else value)
        )
        return numeric_term(K_DEC, decimal_to_scaled(d))
    if datatype == XSD_DOUBLE:
        return numeric_term(K_DOUBLE, float(value))
    if datatype == XSD_FLOAT:
        return numeric_term(K_FLOAT, to_f32(float(value)))
    raise ExprError("not a numeric datatype: %s" % datatype)
