"""Date, time and duration values of the SPARQL expression library.

The model is XSD 1.1's seven-property model as implemented by the reference evaluator
(oxigraph ``oxsdatatypes``): a value is its (normalised, local) fields plus an optional
timezone offset in minutes; comparisons use the position on the time line
(``timeOnTimeline``), and a value with a timezone compared with one without is ordered
only when the ±14 hours of possible implicit timezone cannot change the outcome.  As in
oxigraph, ``=`` between a value with and one without a timezone is ``false`` (not an
error).  Seconds are decimals with at most 18 fractional digits, held as scaled ints (see
:mod:`linkstream.query.functions.numeric`).
"""

from __future__ import annotations

from dataclasses import replace

from linkstream.query.functions.base import (
    XSD_DATE,
    XSD_DAYTIMEDURATION,
    XSD_DURATION,
    XSD_GDAY,
    XSD_GMONTH,
    XSD_GMONTHDAY,
    XSD_GYEAR,
    XSD_GYEARMONTH,
    XSD_TIME,
    XSD_YEARMONTHDURATION,
    ExprError,
)
from linkstream.query.functions.numeric import (
    I64_MAX,
    I64_MIN,
    I128_MAX,
    I128_MIN,
    SCALE,
    dec_value,
    parse_decimal,
    trunc_div,
)
from linkstream.rdf.lazyre import lazy
from linkstream.rdf.records import record
from linkstream.rdf.terms import XSD_DATETIME, format_decimal

_YEAR = r"(?P<y>-?[0-9]{4,})"
_MONTH = r"(?P<mo>[0-9]{2})"
_DAY = r"(?P<d>[0-9]{2})"
_TIME = r"(?P<h>[0-9]{2}):(?P<mi>[0-9]{2}):(?P<s>[0-9]{2}(?:\.[0-9]+)?)"
_TZ = r"(?P<tz>Z|[+-][0-9]{2}:[0-9]{2})?"

#: Lexical patterns of the date/time datatypes.
_TEMPORAL_RE = {
    XSD_DATETIME: lazy(_YEAR + "-" + _MONTH + "-" + _DAY + "T" + _TIME + _TZ),
    XSD_DATE: lazy(_YEAR + "-" + _MONTH + "-" + _DAY + _TZ),
    XSD_TIME: lazy(_TIME + _TZ),
    XSD_GYEARMONTH: lazy(_YEAR + "-" + _MONTH + _TZ),
    XSD_GYEAR: lazy(_YEAR + _TZ),
    XSD_GMONTHDAY: lazy("--" + _MONTH + "-" + _DAY + _TZ),
    XSD_GDAY: lazy("---" + _DAY + _TZ),
    XSD_GMONTH: lazy("--" + _MONTH + _TZ),
}
TEMPORAL_TYPES = frozenset(_TEMPORAL_RE)

_DURATION_RE = lazy(
    r"(-)?P(?:([0-9]+)Y)?(?:([0-9]+)M)?(?:([0-9]+)D)?"
    r"(T(?:([0-9]+)H)?(?:([0-9]+)M)?(?:([0-9]+(?:\.[0-9]+)?)S)?)?"
)
DURATION_TYPES = frozenset((XSD_DURATION, XSD_YEARMONTHDURATION, XSD_DAYTIMEDURATION))

_FOURTEEN_HOURS = 14 * 3600 * SCALE


@record(frozen=True, slots=True)
class Temporal:
    """A value of one of the XSD date/time types (``datatype``), fields in local time.

    ``second`` is a scaled decimal (``seconds * 10**18``); ``tz`` the timezone offset in
    minutes, ``None`` when the value has no timezone.
    """

    datatype: str
    year: int | None = None
    month: int | None = None
    day: int | None = None
    hour: int | None = None
    minute: int | None = None
    second: int | None = None
    tz: int | None = None

    # (values made and compared per row: the methods written out, as the generated ones)
    def __init__(
        self,
        datatype: str,
        year: int | None = None,
        month: int | None = None,
        day: int | None = None,
        hour: int | None = None,
        minute: int | None = None,
        second: int | None = None,
        tz: int | None = None,
    ) -> None:
        set_ = object.__setattr__
        set_(self, "datatype", datatype)
        set_(self, "year", year)
        set_(self, "month", month)
        set_(self, "day", day)
        set_(self, "hour", hour)
        set_(self, "minute", minute)
        set_(self, "second", second)
        set_(self, "tz", tz)

    def _key(self) -> tuple:
        return (self.datatype, self.year, self.month, self.day, self.hour, self.minute, self.second, self.tz)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return self._key() == other._key()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._key())


@record(frozen=True, slots=True)
class Duration:
    """A value of xsd:duration or one of its two totally ordered subtypes.

    ``months`` and ``seconds`` (a scaled decimal) have the same sign.
    """

    datatype: str
    months: int = 0
    seconds: int = 0

    def __init__(self, datatype: str, months: int = 0, seconds: int = 0) -> None:
        object.__setattr__(self, "datatype", datatype)
        object.__setattr__(self, "months", months)
        object.__setattr__(self, "seconds", seconds)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is self.__class__:
            return (self.datatype, self.months, self.seconds) == (other.datatype, other.months, other.seconds)
        return NotImplemented

    def __hash__(self) -> int:
        return hash((self.datatype, self.months, self.seconds))


# ------------------------------------------------------------------ calendar helpers


def days_in_month(year: int | None, month: int) -> int:
    """XSD ``daysInMonth`` (February has 28 days when the year is unknown)."""
    if month == 2:
        if year is None:
            return 28
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _normalize_month(yr: int, mo: int) -> tuple[int, int]:
    return yr + (mo - 1) // 12, (mo - 1) % 12 + 1


def _normalize_day(yr: int, mo: int, da: int) -> tuple[int, int, int]:
    yr, mo = _normalize_month(yr, mo)
    while True:
        if da <= 0:
            yr, mo = _normalize_month(yr, mo - 1)
            da += days_in_month(yr, mo)
        elif da > days_in_month(yr, mo):
            da -= days_in_month(yr, mo)
            yr, mo = _normalize_month(yr, mo + 1)
        else:
            return yr, mo, da


def timeline(t: Temporal) -> int:
    """XSD ``timeOnTimeline``: the scaled number of seconds of ``t`` (UTC if it has a timezone)."""
    yr = t.year - 1 if t.year is not None else 1971
    mo = t.month if t.month is not None else 12
    da = t.day - 1 if t.day is not None else days_in_month(yr + 1, mo) - 1
    hr = t.hour or 0
    mi = (t.minute or 0) - (t.tz or 0)
    days = yr * 365 + yr // 400 - yr // 100 + yr // 4
    days += sum(days_in_month(yr + 1, m) for m in range(1, mo)) + da
    total = (days * 86400 + hr * 3600 + mi * 60) * SCALE + (t.second or 0)
    if not I128_MIN <= total <= I128_MAX:
        raise ExprError("date/time overflow")
    return total


# ------------------------------------------------------------------ parsing


def _parse_tz(text: str | None) -> int | None:
    if text is None:
        return None
    if text == "Z":
        return 0
    hh, mm = int(text[1:3]), int(text[4:6])
    if mm > 59 or hh * 60 + mm > 14 * 60:
        raise ValueError("bad timezone")
    return -(hh * 60 + mm) if text[0] == "-" else hh * 60 + mm


def parse_temporal(lex: str, datatype: str) -> Temporal | None:
    """Parse a date/time lexical form of ``datatype``; ``None`` if it is not valid."""
    m = _TEMPORAL_RE[datatype].fullmatch(lex)
    if not m:
        return None
    g = m.groupdict()
    try:
        tz = _parse_tz(g.get("tz"))
    except ValueError:
        return None
    year = month = day = hour = minute = second = None
    if g.get("y") is not None:
        digits = g["y"].lstrip("-")
        if len(digits) > 4 and digits[0] == "0":
            return None
        year = int(g["y"])
        if not I64_MIN <= year <= I64_MAX:
            return None
    if g.get("mo") is not None:
        month = int(g["mo"])
        if not 1 <= month <= 12:
            return None
    if g.get("d") is not None:
        day = int(g["d"])
        if not 1 <= day <= (days_in_month(year, month) if month is not None else 31):
            return None
    if g.get("h") is not None:
        hour, minute = int(g["h"]), int(g["mi"])
        second = parse_decimal(g["s"])
        if second is None or hour > 24 or minute > 59 or second >= 60 * SCALE:
            return None
        if hour == 24:
            if minute or second:
                return None
            hour = 0
            if day is not None:
                year, month, day = _normalize_day(year or 0, month or 1, day + 1)
    t = Temporal(datatype, year, month, day, hour, minute, second, tz)
    try:
        timeline(t)
    except ExprError:
        return None
    return t


def parse_duration(lex: str, datatype: str) -> Duration | None:
    """Parse a duration lexical form of ``datatype``; ``None`` if it is not valid."""
    m = _DURATION_RE.fullmatch(lex)
    if not m:
        return None
    neg, y, mo, d, t, h, mi, s = m.groups()
    if not any((y, mo, d, h, mi, s)) or (t is not None and not any((h, mi, s))):
        return None
    if datatype == XSD_YEARMONTHDURATION and any((d, t)):
        return None
    if datatype == XSD_DAYTIMEDURATION and any((y, mo)):
        return None
    months = int(y or 0) * 12 + int(mo or 0)
    sec = parse_decimal(s) if s else 0
    if sec is None:
        return None
    seconds = (int(d or 0) * 86400 + int(h or 0) * 3600 + int(mi or 0) * 60) * SCALE + sec
    if neg:
        months, seconds = -months, -seconds
    if not (I64_MIN <= months <= I64_MAX and I128_MIN <= seconds <= I128_MAX):
        return None
    return Duration(datatype, months, seconds)


# ------------------------------------------------------------------ formatting


def format_tz(tz: int) -> str:
    """Timezone offset in lexical form (``Z``, ``+01:00``, ``-05:30``)."""
    if tz == 0:
        return "Z"
    sign = "-" if tz < 0 else "+"
    return "%s%02d:%02d" % (sign, abs(tz) // 60, abs(tz) % 60)


def _format_year(year: int) -> str:
    return ("-" if year < 0 else "") + "%04d" % abs(year)


def _format_time(t: Temporal) -> str:
    sec = format_decimal(dec_value(t.second or 0))
    if (t.second or 0) < 10 * SCALE:
        sec = "0" + sec
    return "%02d:%02d:%s" % (t.hour or 0, t.minute or 0, sec)


def format_temporal(t: Temporal) -> str:
    """Canonical lexical form of a date/time value (as oxigraph writes it)."""
    dt = t.datatype
    if dt == XSD_DATETIME:
        s = "%s-%02d-%02dT%s" % (_format_year(t.year or 0), t.month or 1, t.day or 1, _format_time(t))
    elif dt == XSD_DATE:
        s = "%s-%02d-%02d" % (_format_year(t.year or 0), t.month or 1, t.day or 1)
    elif dt == XSD_TIME:
        s = _format_time(t)
    elif dt == XSD_GYEARMONTH:
        s = "%s-%02d" % (_format_year(t.year or 0), t.month or 1)
    elif dt == XSD_GYEAR:
        s = _format_year(t.year or 0)
    elif dt == XSD_GMONTHDAY:
        s = "--%02d-%02d" % (t.month or 1, t.day or 1)
    elif dt == XSD_GDAY:
        s = "---%02d" % (t.day or 1)
    else:
        s = "--%02d" % (t.month or 1)
    return s if t.tz is None else s + format_tz(t.tz)


def format_duration(d: Duration) -> str:
    """Canonical lexical form of a duration (as oxigraph writes it)."""
    ym, ss = d.months, d.seconds
    if ym == 0 and ss == 0:
        return "P0M" if d.datatype == XSD_YEARMONTHDURATION else "PT0S"
    out = ["-" if ym < 0 or ss < 0 else "", "P"]
    y, m = abs(ym) // 12, abs(ym) % 12
    if y:
        out.append("%dY" % y if m == 0 else "%dY%dM" % (y, m))
    elif m or ss == 0:
        out.append("%dM" % m)
    whole = abs(trunc_div(ss, SCALE))
    days, hours, mins = whole // 86400, whole % 86400 // 3600, whole % 3600 // 60
    secs = abs(ss) - (days * 86400 + hours * 3600 + mins * 60) * SCALE
    if days:
        out.append("%dD" % days)
    if hours or mins or secs:
        out.append("T")
        if hours:
            out.append("%dH" % hours)
        if mins:
            out.append("%dM" % mins)
        if secs:
            out.append(format_decimal(dec_value(secs)) + "S")
    return "".join(out)


def tz_duration(tz: int) -> Duration:
    """The xsd:dayTimeDuration of a timezone offset (fn:timezone-from-dateTime)."""
    return Duration(XSD_DAYTIMEDURATION, 0, tz * 60 * SCALE)


# ------------------------------------------------------------------ comparison


def temporal_equal(a: Temporal, b: Temporal) -> bool:
    """``=`` on two values of the same date/time type (false when only one has a timezone)."""
    if (a.tz is None) != (b.tz is None):
        return False
    return timeline(a) == timeline(b)


def temporal_cmp(a: Temporal, b: Temporal) -> int | None:
    """-1/0/1 ordering of two values of the same date/time type, ``None`` if indeterminate."""
    va, vb = timeline(a), timeline(b)
    if (a.tz is None) == (b.tz is None):
        return (va > vb) - (va < vb)
    if a.tz is not None:
        lo, hi = vb - _FOURTEEN_HOURS, vb + _FOURTEEN_HOURS
        r1, r2 = (va > hi) - (va < hi), (va > lo) - (va < lo)
    else:
        lo, hi = va - _FOURTEEN_HOURS, va + _FOURTEEN_HOURS
        r1, r2 = (hi > vb) - (hi < vb), (lo > vb) - (lo < vb)
    return r1 if r1 == r2 else None


_DURATION_REFERENCES = ((1969, 9), (1697, 2), (1903, 3), (1903, 7))


def _reference_position(year: int, month: int, d: Duration) -> int:
    yr, mo = _normalize_month(year, month + d.months)
    return timeline(Temporal(XSD_DATETIME, yr, mo, 1, 0, 0, 0, None)) + d.seconds


def duration_cmp(a: Duration, b: Duration) -> int | None:
    """XSD duration order: the same outcome from four reference dates, else ``None``."""
    if a.months == b.months:
        return (a.seconds > b.seconds) - (a.seconds < b.seconds)
    results = set()
    for year, month in _DURATION_REFERENCES:
        pa, pb = _reference_position(year, month, a), _reference_position(year, month, b)
        results.add((pa > pb) - (pa < pb))
    return results.pop() if len(results) == 1 else None


def duration_sort_position(d: Duration) -> int:
    """A position for sorting durations (the first reference date plus the duration)."""
    return _reference_position(1969, 9, d)


def as_datetime(t: Temporal) -> Temporal:
    """Cast an xsd:date (or xsd:dateTime) to xsd:dateTime (midnight, same timezone)."""
    if t.datatype == XSD_DATETIME:
        return t
    if t.datatype != XSD_DATE:
        raise ExprError("cannot cast to xsd:dateTime")
    return replace(t, datatype=XSD_DATETIME, hour=0, minute=0, second=0)


# ------------------------------------------------------------------ arithmetic (SEP-0002, as oxigraph)


def _duration_kind(a: str, b: str) -> str:
    return a if a == b else XSD_DURATION


def duration_arith(op: str, a: Duration, b: Duration) -> Duration:
    """``a + b`` or ``a - b`` on durations (xsd:duration unless both have the same subtype)."""
    sign = 1 if op == "+" else -1
    months, seconds = a.months + sign * b.months, a.seconds + sign * b.seconds
    if not (I64_MIN <= months <= I64_MAX and I128_MIN <= seconds <= I128_MAX):
        raise ExprError("duration overflow")
    if (months < 0 < seconds) or (seconds < 0 < months):
        raise ExprError("a duration cannot mix signs")
    return Duration(_duration_kind(a.datatype, b.datatype), months, seconds)


def duration_neg(d: Duration) -> Duration:
    """Unary minus on a duration."""
    return Duration(d.datatype, -d.months, -d.seconds)


def temporal_sub(a: Temporal, b: Temporal) -> Duration:
    """``a - b`` on two values of the same type: an xsd:dayTimeDuration."""
    if a.datatype != b.datatype or a.datatype not in (XSD_DATETIME, XSD_DATE, XSD_TIME):
        raise ExprError("cannot subtract these values")
    if (a.tz is None) != (b.tz is None):
        raise ExprError("cannot subtract a value with a timezone from one without")
    seconds = timeline(a) - timeline(b)
    if not I128_MIN <= seconds <= I128_MAX:
        raise ExprError("duration overflow")
    return Duration(XSD_DAYTIMEDURATION, 0, seconds)


def plus_duration(t: Temporal, d: Duration, sign: int) -> Temporal:
    """XSD ``dateTimePlusDuration`` for dateTime, date and time (``sign`` -1 subtracts)."""
    if t.datatype not in (XSD_DATETIME, XSD_DATE, XSD_TIME):
        raise ExprError("cannot add a duration to this value")
    if t.datatype == XSD_TIME and d.datatype == XSD_YEARMONTHDURATION:
        raise ExprError("cannot add a yearMonthDuration to a time")
    months, seconds = sign * d.months, sign * d.seconds
    yr, mo = _normalize_month(t.year if t.year is not None else 1, (t.month or 1) + months)
    da = min(t.day or 1, days_in_month(yr, mo))
    whole, second = divmod((t.second or 0) + seconds, 60 * SCALE)
    hours, minute = divmod((t.minute or 0) + whole, 60)
    days, hour = divmod((t.hour or 0) + hours, 24)
    yr, mo, da = _normalize_day(yr, mo, da + days)
    if t.datatype == XSD_TIME:
        out = Temporal(XSD_TIME, hour=hour, minute=minute, second=second, tz=t.tz)
    elif t.datatype == XSD_DATE:
        out = Temporal(XSD_DATE, yr, mo, da, tz=t.tz)
    else:
        out = Temporal(XSD_DATETIME, yr, mo, da, hour, minute, second, t.tz)
    if not I64_MIN <= yr <= I64_MAX:
        raise ExprError("date/time overflow")
    timeline(out)
    return out
