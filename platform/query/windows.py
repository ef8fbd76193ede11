"""Stream windows: ``[RANGE a STEP b]``, ``[TRIPLES n]``, ``[NOW]`` and friends.

The accepted forms and their meaning are those of ``docs/semantics.md`` §3
and of the reference evaluator's ``parse_window_body``: durations in ``ms``/``s``/``m``/
``h``/``d``, ISO-8601 (``PT3S``, ``PT1.5S``, ``P1DT2H``) or bare milliseconds; ``STEP``
and ``SLIDE`` are synonyms; ``RANGE a TUMBLING`` steps by ``a``.  Stricter than the
reference: a zero ``STEP`` or ``TRIPLES`` and negative numbers are errors.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from linkstream.query.errors import QueryError
from linkstream.query.lexer import Token, TokenStream, quote
from linkstream.rdf.lazyre import lazy
from linkstream.rdf.records import record

if TYPE_CHECKING:
    from fractions import Fraction

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60000, "h": 3600000, "d": 86400000}
_SIMPLE_DUR = lazy(r"^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$", re.I)
_ISO_DUR = lazy(
    r"^P(?:(\d+(?:\.\d+)?)D)?(?:T(?:(\d+(?:\.\d+)?)H)?(?:(\d+(?:\.\d+)?)M)?(?:(\d+(?:\.\d+)?)S)?)?$", re.I
)

TIME = "time"
COUNT = "count"
NOW = "now"


@record(frozen=True)
class WindowSpec:
    """What one window holds and how often it reports.

    Attributes:
        kind: ``"time"``, ``"count"`` or ``"now"``.
        range_ms: Width of a time window in milliseconds.
        step_ms: Step of a time window in milliseconds; ``None`` when the query gives
            no STEP/SLIDE (a replay then uses its ``--default-step``).
        count: Number of triples of a count window.
    """

    kind: str
    range_ms: int | None = None
    step_ms: int | None = None
    count: int | None = None

    def step_or(self, default_step: int) -> int:
        """Returns the report step: ``step_ms`` of a time window that has one, else ``default_step``.

        Args:
            default_step: The step (ms) of windows without STEP/SLIDE, count and NOW windows.
        """
        if self.kind == TIME and self.step_ms is not None:
            return self.step_ms
        return default_step

    def __str__(self) -> str:
        """The reference evaluator's notation, e.g. ``[RANGE 3000ms STEP default]``."""
        if self.kind == TIME:
            step = "%dms" % self.step_ms if self.step_ms else "default"
            return "[RANGE %dms STEP %s]" % (self.range_ms or 0, step)
        if self.kind == COUNT:
            return "[TRIPLES %d]" % (self.count or 0)
        return "[NOW]"


class WindowWordError(QueryError):
    """A window error that knows which word of the window body is wrong.

    Attributes:
        index: Index into the ``words`` given to :func:`parse_window`, or ``None`` when
            the body as a whole is wrong.
    """

    def __init__(self, message: str, index: int | None) -> None:
        super().__init__(message)
        self.index = index


def _number(digits: str) -> int | Fraction:
    if "." not in digits:
        return int(digits)
    from fractions import Fraction

    return Fraction(digits)


def parse_duration(text: str) -> int:
    """Parses a window duration into whole milliseconds.

    Args:
        text: ``'3000ms'``, ``'3s'``, ``'1m'``, ``'2h'``, ``'1d'``, ``'PT3S'``, ``'PT1.5S'``,
            ``'P1DT2H'`` or a bare number of milliseconds (``'3000'``); case-insensitive.

    Returns:
        The duration in milliseconds.

    Raises:
        QueryError: If the text is not a duration or not a whole number of milliseconds.
    """
    # whole numbers as ints, the others as fractions (imported then: ~1 ms of a start-up)
    m = _SIMPLE_DUR.match(text)
    if m:
        unit = (m.group(2) or "ms").lower()
        value = _number(m.group(1)) * _UNIT_MS[unit]
    else:
        m = _ISO_DUR.match(text)
        if not m or text.upper() in ("P", "PT") or text.upper().endswith("T"):
            raise QueryError("bad duration %r" % text)
        d, h, mi, s = (_number(g) if g else 0 for g in m.groups())
        value = d * 86400000 + h * 3600000 + mi * 60000 + s * 1000
    if value.denominator != 1:
        raise QueryError("duration %r is not a whole number of milliseconds" % text)
    return int(value)


def _duration(words: list[str], i: int, what: str, zero_ok: bool = False) -> int:
    if i >= len(words):
        raise WindowWordError("missing %s duration" % what, i - 1)
    try:
        value = parse_duration(words[i])
    except QueryError as e:
        raise WindowWordError(e.message, i) from None
    if value <= 0 and not (zero_ok and value == 0):
        raise WindowWordError("%s must be positive, got %r" % (what, words[i]), i)
    return value


def _count(words: list[str], i: int) -> int:
    if i >= len(words):
        raise WindowWordError("missing number of triples", i - 1)
    try:
        n = int(words[i])
    except ValueError:
        raise WindowWordError("bad number of triples %r" % words[i], i) from None
    if n <= 0:
        raise WindowWordError("TRIPLES must be positive, got %r" % words[i], i)
    return n


def _no_more(words: list[str], i: int, after: str) -> None:
    if len(words) > i:
        raise WindowWordError("unexpected %r after %s" % (words[i], after), i)


def parse_window(words: list[str]) -> WindowSpec:
    """Parses the body of a window (the words between ``[`` and ``]``).

    Accepted (keywords case-insensitive): ``RANGE a``, ``RANGE a STEP b``,
    ``RANGE a SLIDE b``, ``RANGE a TUMBLING``, ``TRIPLES n``, ``RANGE TRIPLES n``, ``NOW``.

    Args:
        words: The tokens of the body, e.g. ``["RANGE", "3s", "STEP", "1s"]``.

    Returns:
        The window.

    Raises:
        WindowWordError: A :class:`QueryError` whose ``index`` names the offending word.
    """
    upper = [w.upper() for w in words]
    if not words:
        raise WindowWordError("empty window []", None)
    for i, w in enumerate(words):
        if w == "-":
            raise WindowWordError("negative numbers are not allowed in a window", i)
    if upper[0] == "NOW":
        _no_more(words, 1, "NOW")
        return WindowSpec(NOW)
    if upper[0] == "TRIPLES":
        n = _count(words, 1)
        _no_more(words, 2, "TRIPLES %s" % words[1])
        return WindowSpec(COUNT, count=n)
    if upper[0] != "RANGE":
        raise WindowWordError("unknown window form %r, expected RANGE, TRIPLES or NOW" % words[0], 0)
    if len(upper) > 1 and upper[1] == "TRIPLES":
        n = _count(words, 2)
        _no_more(words, 3, "RANGE TRIPLES %s" % words[2])
        return WindowSpec(COUNT, count=n)
    rng = _duration(words, 1, "RANGE", zero_ok=True)  # an always empty window, as in the reference
    if len(words) == 2:
        return WindowSpec(TIME, range_ms=rng)
    if upper[2] == "TUMBLING":
        if rng == 0:
            raise WindowWordError("a TUMBLING window needs a positive RANGE", 1)
        _no_more(words, 3, "TUMBLING")
        return WindowSpec(TIME, range_ms=rng, step_ms=rng)
    if upper[2] not in ("STEP", "SLIDE"):
        raise WindowWordError("expected STEP, SLIDE or TUMBLING, got %r" % words[2], 2)
    step = _duration(words, 3, upper[2])
    _no_more(words, 4, "%s %s" % (upper[2], words[3]))
    return WindowSpec(TIME, range_ms=rng, step_ms=step)


#: Windows by the words of their body: registering thousands of queries reads the same
#: few windows over and over.  Only successes are kept (errors need the token position).
_WINDOWS: dict[tuple[str, ...], WindowSpec] = {}


def read_window(stream: TokenStream, j: int) -> tuple[WindowSpec, int]:
    """Reads the window ``[...]`` that starts at significant token ``j`` of a query.

    Args:
        stream: The query's tokens.
        j: Index of the ``[`` among the significant tokens.

    Returns:
        The window and the index of its ``]``.

    Raises:
        QueryError: At the offending token (the ``[`` when the window is unterminated).
    """
    opening = stream.need(j, "a window '['")
    if not opening.is_punct("["):
        stream.fail("expected a window '[' after the stream IRI, found %s" % quote(opening.text), opening)
    k = j + 1
    words: list[Token] = []
    while (t := stream.tok(k)) is not None and not t.is_punct("]"):
        if t.kind == "punct" and t.text in "[{}":
            break
        words.append(t)
        k += 1
    if t is None or not t.is_punct("]"):
        stream.fail("unterminated window '['", opening)
    texts = tuple(w.text for w in words)
    spec = _WINDOWS.get(texts)
    if spec is not None:
        return spec, k
    try:
        spec = parse_window(list(texts))
    except WindowWordError as e:
        stream.fail(e.message, opening if e.index is None else words[e.index])
    if len(_WINDOWS) >= 4096:
        _WINDOWS.clear()  # crude bound; queries use few distinct windows
    _WINDOWS[texts] = spec
    return spec, k


def window_of(words: tuple[str, ...]) -> WindowSpec | None:
    """The window whose body is ``words`` (as :func:`read_window` reads it), or ``None``
    when :func:`parse_window` rejects it (a full parse then reports where)."""
    spec = _WINDOWS.get(words)
    if spec is None:
        try:
            spec = parse_window(list(words))
        except WindowWordError:
            return None
        if len(_WINDOWS) >= 4096:
            _WINDOWS.clear()
        _WINDOWS[words] = spec
    return spec
