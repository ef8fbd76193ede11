"""Numeric values of the SPARQL expression library.

The value spaces follow the reference evaluator (oxigraph ``oxsdatatypes``) rather than
unbounded XSD arithmetic, so that results agree with it bit for bit:

* ``xsd:integer`` (and the types derived from it) is a signed 64-bit integer; an
  operation whose result does not fit is an error (FOAR0002), as is a lexical form that
  does not fit (the literal is then ill-typed).
* ``xsd:decimal`` is a fixed-point number with 18 fractional digits stored in a signed
  128-bit integer.  Here it is the Python ``int`` ``value * 10**18`` (a *scaled* int);
  division truncates to 18 fractional digits, a product that needs more digits is an
  error, as in oxigraph.
* ``xsd:double`` is a Python ``float``; ``xsd:float`` is a ``float`` rounded to binary32
  after every operation (computing in binary64 and rounding once is exact for
  ``+ - * /``).
"""

from __future__ import annotations

import math
import re
import struct
from decimal import Context, Decimal

from linkstream.query.functions.base import ExprError
from linkstream.rdf.lazyre import lazy

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1
I128_MIN = -(1 << 127)
I128_MAX = (1 << 127) - 1
DEC_DIGITS = 18
SCALE = 10**DEC_DIGITS

_INT_RE = lazy(r"[+-]?[0-9]+")
_DEC_RE = lazy(r"([+-]?)([0-9]*)(?:(\.)([0-9]*))?")
_FLOAT_RE = lazy(
    r"[+-]?(?:inf(?:inity)?|nan|(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:e[+-]?[0-9]+)?)", re.IGNORECASE
)
_F32_MAX_EXACT = 1 << 53
#: Enough precision for every decimal value (39 significant digits) to be exact.
_EXACT = Context(prec=60)


# ------------------------------------------------------------------ range checks


def check_i64(v: int) -> int:
    """Return ``v`` if it is a 64-bit integer, raise :class:`ExprError` (overflow) otherwise."""
    if I64_MIN <= v <= I64_MAX:
        return v
    raise ExprError("integer overflow")


def check_i128(v: int) -> int:
    """Return ``v`` if it fits the decimal representation, raise :class:`ExprError` otherwise."""
    if I128_MIN <= v <= I128_MAX:
        return v
    raise ExprError("decimal overflow")


def trunc_div(a: int, b: int) -> int:
    """Integer division truncating toward zero (Rust's ``/``)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


# ------------------------------------------------------------------ lexical forms


def parse_integer(lex: str) -> int | None:
    """Value of an xsd:integer lexical form, ``None`` if invalid or out of the 64-bit range."""
    if not _INT_RE.fullmatch(lex):
        return None
    v = int(lex)
    return v if I64_MIN <= v <= I64_MAX else None


def parse_decimal(lex: str) -> int | None:
    """Scaled value of an xsd:decimal lexical form, ``None`` if invalid or unrepresentable."""
    m = _DEC_RE.fullmatch(lex)
    if not m:
        return None
    sign, ip, dot, fp = m.groups()
    if not ip and not fp:
        return None
    fp = (fp or "").rstrip("0")
    if len(fp) > DEC_DIGITS:
        return None
    v = int((ip or "0") + fp) * 10 ** (DEC_DIGITS - len(fp))
    if sign == "-":
        v = -v
    return v if I128_MIN <= v <= I128_MAX else None


def parse_double(lex: str) -> float | None:
    """Value of an xsd:double lexical form (Rust ``f64`` syntax), ``None`` if invalid."""
    if not _FLOAT_RE.fullmatch(lex):
        return None
    return float(lex)


def parse_float(lex: str) -> float | None:
    """Value of an xsd:float lexical form, rounded to binary32, ``None`` if invalid."""
    v = parse_double(lex)
    return None if v is None else to_f32(v)


def parse_boolean(lex: str) -> bool | None:
    """Value of an xsd:boolean lexical form, ``None`` if invalid."""
    if lex in ("true", "1"):
        return True
    if lex in ("false", "0"):
        return False
    return None


# ------------------------------------------------------------------ conversions


def to_f32(x: float) -> float:
    """Round a binary64 value to the nearest binary32 value (overflowing to infinity)."""
    try:
        return struct.unpack("<f", struct.pack("<f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def int_to_f32(v: int) -> float:
    """``v as f32`` (a single correct rounding, no double rounding)."""
    n = abs(v)
    if n <= _F32_MAX_EXACT:
        return to_f32(float(v))
    shift = n.bit_length() - 24
    q, r = divmod(n, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    f = to_f32(float(q << shift))
    return -f if v < 0 else f


def dec_to_f64(v: int) -> float:
    """A decimal as a double, the way oxigraph converts it."""
    shift = SCALE
    if v != 0:
        while shift != 1 and v % 10 == 0:
            v //= 10
            shift //= 10
    return float(v) / float(shift)


def dec_to_f32(v: int) -> float:
    """A decimal as a float (through a double, as oxigraph)."""
    return to_f32(dec_to_f64(v))


def f64_to_dec(x: float) -> int | None:
    """A double as a (scaled) decimal, truncated; ``None`` for NaN, infinities and overflow."""
    shifted = x * 1e18
    if not (-(2.0**127) <= shifted <= 2.0**127):
        return None
    return max(min(int(shifted), I128_MAX), I128_MIN)


def dec_to_int(v: int) -> int | None:
    """A decimal truncated to an integer, ``None`` if out of the 64-bit range."""
    q = trunc_div(v, SCALE)
    return q if I64_MIN <= q <= I64_MAX else None


def f64_to_int(x: float) -> int | None:
    """A double truncated to an integer, ``None`` if not representable."""
    d = f64_to_dec(x)
    return None if d is None else dec_to_int(d)


def dec_value(v: int) -> Decimal:
    """The :class:`~decimal.Decimal` of a scaled decimal (exact)."""
    return Decimal(v).scaleb(-DEC_DIGITS, context=_EXACT)


def decimal_to_scaled(d: Decimal) -> int:
    """The scaled int of a :class:`~decimal.Decimal`; error if it has too many digits."""
    if not d.is_finite():
        raise ExprError("not a finite decimal")
    s = d.scaleb(DEC_DIGITS, context=_EXACT)
    if s != s.to_integral_value(context=_EXACT):
        raise ExprError("decimal has more than 18 fractional digits")
    return check_i128(int(s))


# ------------------------------------------------------------------ decimal arithmetic


def dec_mul(a: int, b: int) -> int:
    """op:numeric-multiply on decimals: an error if the product needs more than 18 digits."""
    if a == 0 or b == 0:
        return 0
    sl = sr = 0
    while a % 10 == 0:
        a //= 10
        sl += 1
    while b % 10 == 0:
        b //= 10
        sr += 1
    product = check_i128(a * b)
    shift = sl + sr - DEC_DIGITS
    if shift >= 0:
        p = 10**shift
        if p > I128_MAX:
            raise ExprError("decimal overflow")
        return check_i128(product * p)
    q, r = divmod(abs(product), 10**-shift)
    if r:
        raise ExprError("decimal product needs more than 18 fractional digits")
    return q if product > 0 else -q


def dec_div(a: int, b: int) -> int:
    """op:numeric-divide on decimals, truncated to 18 fractional digits, as oxigraph."""
    if b == 0:
        raise ExprError("division by zero")
    sl = sr = 0
    if a != 0:
        while I128_MIN <= a * 10 <= I128_MAX:
            a *= 10
            sl += 1
    while b % 10 == 0:
        b //= 10
        sr += 1
    shift = sl + sr - DEC_DIGITS
    if shift < 0:
        raise ExprError("decimal division overflow")
    p = 10**shift
    if p > I128_MAX:
        raise ExprError("decimal division overflow")
    return check_i128(trunc_div(check_i128(trunc_div(a, b)), p))


def dec_round(v: int) -> int:
    """fn:round on a decimal: the nearest integer, halves toward positive infinity."""
    return check_i128(((v + SCALE // 2) // SCALE) * SCALE)


def dec_ceil(v: int) -> int:
    """fn:ceiling on a decimal."""
    q = trunc_div(v, SCALE)
    if v > 0 and v % SCALE != 0:
        q += 1
    return check_i128(q * SCALE)


def dec_floor(v: int) -> int:
    """fn:floor on a decimal."""
    q = trunc_div(v, SCALE)
    if v < 0 and v % SCALE != 0:
        q -= 1
    return check_i128(q * SCALE)


# ------------------------------------------------------------------ IEEE helpers


def f64_div(a: float, b: float) -> float:
    """IEEE 754 division (Python raises on division by zero)."""
    if b == 0.0:
        if a == 0.0 or math.isnan(a):
            return math.nan
        sign = math.copysign(1.0, a) * math.copysign(1.0, b)
        return math.copysign(math.inf, sign)
    return a / b


def f64_floor(x: float) -> float:
    """IEEE floor keeping the sign of zero."""
    if not math.isfinite(x) or x == 0.0:
        return x
    return float(math.floor(x))


def f64_ceil(x: float) -> float:
    """IEEE ceiling keeping the sign of zero (``ceil(-0.5)`` is ``-0``)."""
    if not math.isfinite(x) or x == 0.0:
        return x
    r = float(math.ceil(x))
    return -0.0 if r == 0.0 and x < 0 else r


def f64_round(x: float) -> float:
    """fn:round on a double: halves toward positive infinity, keeping the sign of zero."""
    if not math.isfinite(x):
        return x
    f = float(math.floor(x))
    r = f + 1.0 if x - f >= 0.5 else f
    return math.copysign(0.0, x) if r == 0.0 else r


# ------------------------------------------------------------------ formatting


def shortest_f32_digits(v: float) -> str:
    """The shortest decimal string that rounds back to the binary32 value ``v``."""
    for p in range(1, 10):
        s = "%.*e" % (p - 1, v)
        if to_f32(float(s)) == v:
            return s
    return repr(v)


def format_float32(v: float) -> str:
    """Lexical form of an xsd:float value (shortest binary32 digits, `format_double` style)."""
    from linkstream.rdf.terms import format_double

    if not math.isfinite(v) or v == 0.0:
        return format_double(v)
    return format_double(float(shortest_f32_digits(v)))


def _rust_shortest(v: float, single: bool) -> str:
    """Shortest round-trip digits, a tie between two candidates going away from zero (as Rust)."""
    from fractions import Fraction  # (imported on first use: ~1 ms of every start-up)

    digits = shortest_f32_digits(v) if single else repr(v)
    d = Fraction(digits)
    diff = Fraction(v) - d
    if diff:
        exponent = Decimal(digits).as_tuple().exponent
        unit = Fraction(10) ** int(exponent)
        if abs(diff) * 2 == unit and (diff > 0) == (v > 0):
            alt = d + (unit if diff > 0 else -unit)
            x = float(alt)
            if (to_f32(x) if single else x) == v:
                return str(Decimal(alt.numerator) / Decimal(alt.denominator))
    return digits


def rust_display(v: float, single: bool = False) -> str:
    """A double (or float if ``single``) the way Rust's ``Display`` (and oxigraph) writes it.

    Shortest round-trip digits in positional notation: ``1e20`` is
    ``100000000000000000000``, ``1.5e-7`` is ``0.00000015``; infinities are ``INF``/``-INF``.
    """
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "INF" if v > 0 else "-INF"
    s = format(Decimal(_rust_shortest(v, single)), "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    if s == "0" and math.copysign(1.0, v) < 0:
        s = "-0"
    return s
