"""Shared pieces of the SPARQL expression library: the error type and value kinds.

The expression library (:mod:`linkstream.query.functions.scalar` and its sibling modules)
works on *classified* terms: :func:`linkstream.query.functions.scalar.classify` maps an RDF term
to a :class:`Val`, a ``(kind, value)`` pair in the style of the reference evaluator's
``ExpressionTerm`` (oxigraph's ``spareval``).  A literal whose lexical form is not valid
for its (supported) datatype is of kind :data:`K_OTHER`, like a literal of an unknown
datatype.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from linkstream.rdf.terms import XSD, XSD_BOOLEAN, Literal


class ExprError(Exception):
    """A SPARQL expression error (type error, unbound variable...)."""


#: Kinds of classified terms.
K_IRI = "iri"
K_BNODE = "bnode"
K_STR = "string"  # simple literal / xsd:string; value: str
K_LANG = "lang"  # language-tagged string; value: (lexical form, lowercase tag)
K_BOOL = "boolean"  # value: bool
K_INT = "integer"  # xsd:integer and derived types; value: int (64-bit range)
K_DEC = "decimal"  # value: int, the decimal scaled by 10**18 (see numeric.py)
K_FLOAT = "float"  # value: float holding a binary32 value
K_DOUBLE = "double"  # value: float
K_TEMPORAL = "temporal"  # dateTime, date, time, gYear...; value: dates.Temporal
K_DURATION = "duration"  # duration, yearMonthDuration, dayTimeDuration; value: dates.Duration
K_OTHER = "other"  # unknown datatype or ill-typed literal; value: (lexical form, datatype)

NUMERIC_KINDS = frozenset((K_INT, K_DEC, K_FLOAT, K_DOUBLE))

XSD_DATE = XSD + "date"
XSD_TIME = XSD + "time"
XSD_DATETIMESTAMP = XSD + "dateTimeStamp"
XSD_GYEAR = XSD + "gYear"
XSD_GYEARMONTH = XSD + "gYearMonth"
XSD_GMONTH = XSD + "gMonth"
XSD_GMONTHDAY = XSD + "gMonthDay"
XSD_GDAY = XSD + "gDay"
XSD_DURATION = XSD + "duration"
XSD_YEARMONTHDURATION = XSD + "yearMonthDuration"
XSD_DAYTIMEDURATION = XSD + "dayTimeDuration"


class Val(NamedTuple):
    """A classified term: its kind (one of the ``K_*`` constants) and its value."""

    kind: str
    value: Any


TRUE = Literal("true", XSD_BOOLEAN)
FALSE = Literal("false", XSD_BOOLEAN)


def bool_literal(value: bool) -> Literal:
    """The xsd:boolean literal for ``value``."""
    return TRUE if value else FALSE
