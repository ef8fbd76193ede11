"""The SPARQL 1.1 built-in functions (§17.4), dispatched by upper-case name.

:func:`call_builtin` is exposed as :func:`linkstream.query.functions.scalar.call`.  BOUND,
COALESCE, IF, EXISTS and the logical connectives are evaluated by the caller (they need
unevaluated arguments).  Argument-type rules follow the reference evaluator (oxigraph):
string functions take simple or language-tagged literals, hash functions and the
pattern/flags/replacement of REGEX and REPLACE take simple literals only, SUBSTR's
positions must be integers.
"""

from __future__ import annotations

import functools
import itertools
import math
import os
import re
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import urljoin

from linkstream.query.functions.base import (
    K_BNODE,
    K_DEC,
    K_DOUBLE,
    K_FLOAT,
    K_INT,
    K_IRI,
    K_LANG,
    K_STR,
    K_TEMPORAL,
    NUMERIC_KINDS,
    XSD_DATE,
    XSD_DAYTIMEDURATION,
    XSD_GDAY,
    XSD_GMONTH,
    XSD_GMONTHDAY,
    XSD_GYEAR,
    XSD_GYEARMONTH,
    XSD_TIME,
    ExprError,
    Val,
    bool_literal,
)
from linkstream.query.functions.core import classify, datatype_of, lexical, numeric_term, to_term, val_of
from linkstream.query.functions.dates import (
    Temporal,
    format_duration,
    format_temporal,
    format_tz,
    tz_duration,
)
from linkstream.query.functions.numeric import (
    SCALE,
    check_i64,
    check_i128,
    dec_ceil,
    dec_floor,
    dec_round,
    f64_ceil,
    f64_floor,
    f64_round,
)
from linkstream.query.functions.strings import (
    compile_regex,
    encode_for_uri,
    is_language_tag,
    lang_matches,
    regex_replace,
    substring,
)
from linkstream.rdf.terms import (
    IRI,
    RDF_LANGSTRING,
    XSD_DATETIME,
    XSD_STRING,
    BNode,
    Literal,
    Term,
)

Args = list[Val]

_IRI_FORBIDDEN = re.compile(r'[\x00-\x20<>"{}|^`\\]')
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_PN_BASE = (
    "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d"
    "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd\U00010000-\U000effff"
)


@functools.cache
def _label_patterns() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """Labels oxigraph accepts for BNODE(str), and those of them our N-Triples form
    (linkstream.rdf.terms.parse_term) can hold; compiled on first use (their Unicode
    ranges cost ~40 ms of every command's start-up otherwise)."""
    bnode = re.compile("[0-9_:" + _PN_BASE + "][-.0-9_:\u00b7\u0300-\u036f\u203f-\u2040" + _PN_BASE + "]*")
    nt = re.compile(
        "[A-Za-z0-9_\u00c0-\uffff](?:[A-Za-z0-9_.\\-\u00b7\u00c0-\uffff]*[A-Za-z0-9_\\-\u00b7\u00c0-\uffff])?"
    )
    return bnode, nt


_BNODE_PREFIX = "f" + os.urandom(6).hex() + "b"  # (random hex, as uuid4's first 12 digits)
_bnode_counter = itertools.count()


# ------------------------------------------------------------------ argument helpers


def _string_and_lang(v: Val) -> tuple[str, str | None]:
    if v.kind == K_STR:
        return v.value, None
    if v.kind == K_LANG:
        return v.value
    raise ExprError("expected a string literal")


def _simple(v: Val) -> str:
    if v.kind != K_STR:
        raise ExprError("expected a simple literal")
    return v.value


def _integer(v: Val) -> int:
    if v.kind != K_INT:
        raise ExprError("expected an integer")
    return v.value


def _plain(s: str, lang: str | None) -> Literal:
    return Literal(s, RDF_LANGSTRING, lang) if lang else Literal(s)


def _compatible(a: Val, b: Val) -> tuple[str, str, str | None]:
    """Argument-compatible strings (§17.4.3.1.3): ``b``'s tag, if any, must be ``a``'s."""
    s1, l1 = _string_and_lang(a)
    s2, l2 = _string_and_lang(b)
    if l2 is not None and l1 != l2:
        raise ExprError("incompatible string arguments")
    return s1, s2, l1


def _temporal(v: Val, allowed: tuple[str, ...]) -> Temporal:
    if v.kind != K_TEMPORAL or v.value.datatype not in allowed:
        raise ExprError("expected a date/time value")
    return v.value


# ------------------------------------------------------------------ term functions


def _str(a: Args) -> Term:
    return Literal(lexical(a[0]))


def _lang(a: Args) -> Term:
    k = a[0].kind
    if k in (K_IRI, K_BNODE):
        raise ExprError("LANG of a non-literal")
    return Literal(a[0].value[1] if k == K_LANG else "")


def _langmatches(a: Args) -> Term:
    return bool_literal(lang_matches(_simple(a[0]), _simple(a[1])))


def _datatype(a: Args) -> Term:
    return IRI(datatype_of(a[0]))


def _iri(a: Args) -> Term:
    # IRI(str [, base]): a relative IRI is resolved against the query's base IRI (the
    # second argument, which the one-shot parser adds); without one IRI("x") is <x>
    # (oxigraph without a base IRI makes that an error instead).
    v = a[0]
    if v.kind == K_IRI:
        return IRI(v.value)
    s = _simple(v)
    if _IRI_FORBIDDEN.search(s):
        raise ExprError("invalid IRI")
    if len(a) > 1 and a[1].kind == K_IRI and not _SCHEME.match(s):
        return IRI(urljoin(a[1].value, s))
    return IRI(s)


def _bnode(a: Args) -> Term:
    if not a:
        return BNode(_BNODE_PREFIX + str(next(_bnode_counter)))
    if len(a) == 2 and a[1].kind == K_BNODE:
        # BNODE(str, scope): the planner's per-solution scope (a fresh blank node per row)
        return BNode(a[1].value + "x" + _simple(a[0]).encode("utf-8").hex())
    # oxigraph: BNODE(str) is the blank node labelled str.
    label = _simple(a[0])
    bnode_label, nt_label = _label_patterns()
    if not bnode_label.fullmatch(label) or label.endswith("."):
        raise ExprError("invalid blank node label")
    if not nt_label.fullmatch(label):
        # A label with ':' or a non-BMP character: valid for oxigraph, not in N-Triples.
        label = "x" + label.encode("utf-8").hex()
    return BNode(label)


def _strlang(a: Args) -> Term:
    lex, tag = _simple(a[0]), _simple(a[1])
    if not is_language_tag(tag):
        raise ExprError("invalid language tag")
    return Literal(lex, RDF_LANGSTRING, tag.lower())


def _strdt(a: Args) -> Term:
    lex = _simple(a[0])
    if a[1].kind != K_IRI or a[1].value == RDF_LANGSTRING:
        raise ExprError("STRDT needs a datatype IRI")
    if a[1].value == XSD_STRING:
        return Literal(lex)
    return to_term(classify(Literal(lex, a[1].value)))


def _sameterm(a: Args) -> Term:
    # oxigraph compares the stored (canonical) form: "01"^^xsd:integer is 1.
    return bool_literal(to_term(a[0]) == to_term(a[1]))


def _kind_test(*kinds: str) -> Callable[[Args], Term]:
    def test(a: Args) -> Term:
        return bool_literal(a[0].kind in kinds)

    return test


def _is_literal(a: Args) -> Term:
    return bool_literal(a[0].kind not in (K_IRI, K_BNODE))


# ------------------------------------------------------------------ numeric functions


def _numeric_fn(
    int_fn: Callable[[int], int], dec_fn: Callable[[int], int], float_fn: Callable[[float], float]
) -> Callable[[Args], Term]:
    def fn(a: Args) -> Term:
        k, x = a[0].kind, a[0].value
        if k == K_INT:
            return numeric_term(k, int_fn(x))
        if k == K_DEC:
            return numeric_term(k, dec_fn(x))
        if k in (K_FLOAT, K_DOUBLE):
            return numeric_term(k, float_fn(x))
        raise ExprError("expected a numeric argument")

    return fn


def _rand(a: Args) -> Term:
    import random  # (RAND() only: not imported at every start-up)

    return numeric_term(K_DOUBLE, random.random())


# ------------------------------------------------------------------ string functions


def _strlen(a: Args) -> Term:
    return numeric_term(K_INT, len(_string_and_lang(a[0])[0]))


def _case(upper: bool) -> Callable[[Args], Term]:
    def fn(a: Args) -> Term:
        s, lang = _string_and_lang(a[0])
        return _plain(s.upper() if upper else s.lower(), lang)

    return fn


def _encode_for_uri(a: Args) -> Term:
    return Literal(encode_for_uri(_string_and_lang(a[0])[0]))


def _string_test(test: Callable[[str, str], bool]) -> Callable[[Args], Term]:
    def fn(a: Args) -> Term:
        s1, s2, _ = _compatible(a[0], a[1])
        return bool_literal(test(s1, s2))

    return fn


def _strbefore(a: Args) -> Term:
    s1, s2, lang = _compatible(a[0], a[1])
    i = s1.find(s2)
    return Literal("") if i < 0 else _plain(s1[:i], lang)


def _strafter(a: Args) -> Term:
    s1, s2, lang = _compatible(a[0], a[1])
    i = s1.find(s2)
    return Literal("") if i < 0 else _plain(s1[i + len(s2) :], lang)


def _concat(a: Args) -> Term:
    parts: list[str] = []
    lang: str | None = None
    for i, v in enumerate(a):
        s, vl = _string_and_lang(v)
        if i == 0:
            lang = vl
        elif vl != lang:
            lang = None
        parts.append(s)
    return _plain("".join(parts), lang)


def _substr(a: Args) -> Term:
    # oxigraph: the positions must be xsd:integer values (the spec rounds any numeric).
    s, lang = _string_and_lang(a[0])
    length = _integer(a[2]) if len(a) > 2 else None
    return _plain(substring(s, _integer(a[1]), length), lang)


def _regex(a: Args) -> Term:
    text = _string_and_lang(a[0])[0]
    rx = compile_regex(_simple(a[1]), _simple(a[2]) if len(a) > 2 else "")
    return bool_literal(rx.search(text) is not None)


def _replace(a: Args) -> Term:
    # oxigraph: a pattern matching the empty string is allowed (XPath's FORX0003 error).
    text, lang = _string_and_lang(a[0])
    rx = compile_regex(_simple(a[1]), _simple(a[3]) if len(a) > 3 else "")
    return _plain(regex_replace(rx, text, _simple(a[2])), lang)


def _hash(algorithm: str) -> Callable[[Args], Term]:
    def fn(a: Args) -> Term:
        import hashlib  # (~3 ms to import: only queries that hash pay it)

        return Literal(hashlib.new(algorithm, _simple(a[0]).encode("utf-8")).hexdigest())

    return fn


def _uuid(a: Args) -> Term:
    import uuid  # (UUID() / STRUUID() only)

    return IRI("urn:uuid:" + str(uuid.uuid4()))


def _struuid(a: Args) -> Term:
    import uuid

    return Literal(str(uuid.uuid4()))


# ------------------------------------------------------------------ date/time functions

_WITH_YEAR = (XSD_DATETIME, XSD_DATE, XSD_GYEARMONTH, XSD_GYEAR)
_WITH_MONTH = (XSD_DATETIME, XSD_DATE, XSD_GYEARMONTH, XSD_GMONTHDAY, XSD_GMONTH)
_WITH_DAY = (XSD_DATETIME, XSD_DATE, XSD_GMONTHDAY, XSD_GDAY)
_WITH_TIME = (XSD_DATETIME, XSD_TIME)
_WITH_TZ = (XSD_DATETIME, XSD_DATE, XSD_TIME, XSD_GYEARMONTH, XSD_GYEAR, XSD_GMONTHDAY, XSD_GDAY, XSD_GMONTH)


def _field(name: str, allowed: tuple[str, ...]) -> Callable[[Args], Term]:
    def fn(a: Args) -> Term:
        value = getattr(_temporal(a[0], allowed), name)
        return numeric_term(K_DEC if name == "second" else K_INT, value or 0)

    return fn


def _timezone(a: Args) -> Term:
    tz = _temporal(a[0], _WITH_TZ).tz
    if tz is None:
        raise ExprError("no timezone")
    return Literal(format_duration(tz_duration(tz)), XSD_DAYTIMEDURATION)


def _tz(a: Args) -> Term:
    tz = _temporal(a[0], _WITH_TZ).tz
    return Literal("" if tz is None else format_tz(tz))


def _now(a: Args) -> Term:
    n = datetime.now(UTC)
    second = (n.second * 1_000_000 + n.microsecond) * (SCALE // 1_000_000)
    t = Temporal(XSD_DATETIME, n.year, n.month, n.day, n.hour, n.minute, second, 0)
    return Literal(format_temporal(t), XSD_DATETIME)


# ------------------------------------------------------------------ dispatch

#: name -> (implementation, minimum arity, maximum arity or None for variadic)
BUILTINS: dict[str, tuple[Callable[[Args], Term], int, int | None]] = {
    "STR": (_str, 1, 1),
    "LANG": (_lang, 1, 1),
    "LANGMATCHES": (_langmatches, 2, 2),
    "DATATYPE": (_datatype, 1, 1),
    "IRI": (_iri, 1, 2),
    "URI": (_iri, 1, 2),
    "BNODE": (_bnode, 0, 2),
    "RAND": (_rand, 0, 0),
    "ABS": (_numeric_fn(lambda i: check_i64(abs(i)), lambda d: check_i128(abs(d)), math.fabs), 1, 1),
    "CEIL": (_numeric_fn(lambda i: i, dec_ceil, f64_ceil), 1, 1),
    "FLOOR": (_numeric_fn(lambda i: i, dec_floor, f64_floor), 1, 1),
    "ROUND": (_numeric_fn(lambda i: i, dec_round, f64_round), 1, 1),
    "CONCAT": (_concat, 0, None),
    "STRLEN": (_strlen, 1, 1),
    "UCASE": (_case(True), 1, 1),
    "LCASE": (_case(False), 1, 1),
    "ENCODE_FOR_URI": (_encode_for_uri, 1, 1),
    "CONTAINS": (_string_test(lambda s, t: t in s), 2, 2),
    "STRSTARTS": (_string_test(str.startswith), 2, 2),
    "STRENDS": (_string_test(str.endswith), 2, 2),
    "STRBEFORE": (_strbefore, 2, 2),
    "STRAFTER": (_strafter, 2, 2),
    "YEAR": (_field("year", _WITH_YEAR), 1, 1),
    "MONTH": (_field("month", _WITH_MONTH), 1, 1),
    "DAY": (_field("day", _WITH_DAY), 1, 1),
    "HOURS": (_field("hour", _WITH_TIME), 1, 1),
    "MINUTES": (_field("minute", _WITH_TIME), 1, 1),
    "SECONDS": (_field("second", _WITH_TIME), 1, 1),
    "TIMEZONE": (_timezone, 1, 1),
    "TZ": (_tz, 1, 1),
    "NOW": (_now, 0, 0),
    "UUID": (_uuid, 0, 0),
    "STRUUID": (_struuid, 0, 0),
    "MD5": (_hash("md5"), 1, 1),
    "SHA1": (_hash("sha1"), 1, 1),
    "SHA256": (_hash("sha256"), 1, 1),
    "SHA384": (_hash("sha384"), 1, 1),
    "SHA512": (_hash("sha512"), 1, 1),
    "STRLANG": (_strlang, 2, 2),
    "STRDT": (_strdt, 2, 2),
    "SAMETERM": (_sameterm, 2, 2),
    "ISIRI": (_kind_test(K_IRI), 1, 1),
    "ISURI": (_kind_test(K_IRI), 1, 1),
    "ISBLANK": (_kind_test(K_BNODE), 1, 1),
    "ISLITERAL": (_is_literal, 1, 1),
    "ISNUMERIC": (_kind_test(*NUMERIC_KINDS), 1, 1),
    "REGEX": (_regex, 2, 3),
    "REPLACE": (_replace, 3, 4),
    "SUBSTR": (_substr, 2, 3),
}


def call_builtin(name: str, args: list[Term | None]) -> Term:
    """Evaluate the built-in function ``name`` (upper case) on evaluated arguments."""
    entry = BUILTINS.get(name)
    if entry is None:
        raise ExprError("unknown function %s" % name)
    fn, lo, hi = entry
    if len(args) < lo or (hi is not None and len(args) > hi):
        raise ExprError("wrong number of arguments for %s" % name)
    if len(args) == 1 and isinstance(args[0], Literal) and name in ("STR", "DATATYPE"):
        # the term as written: STR("01"^^xsd:integer) is "01", DATATYPE of an xsd:int is xsd:int
        t = args[0]
        return Literal(t.lex) if name == "STR" else IRI(RDF_LANGSTRING if t.lang else t.datatype)
    return fn([val_of(t) for t in args])
