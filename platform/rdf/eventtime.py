"""Event-time rules shared by every edge that accepts a timestamp (docs/semantics.md,
"Event-time rules").

* An event time is an integer number of milliseconds since the Unix epoch with
  ``EVENT_TIME_MIN <= t <= EVENT_TIME_MAX`` (``0 <= t < 2**53``: 1970-01-01T00:00:00Z up to
  about year 287396; exact in a JSON number / float64, and far enough inside int64 that
  ``t + RANGE + STEP`` never overflows).  Stream files, HTTP pushes, ``POST /watermark``
  and the live engine's ``push`` / ``advance_to`` check it before anything else sees it.
* An element more than the maximum forward jump (``--max-time-jump``, default one day)
  ahead of its stream's current time (its latest accepted element) is rejected, not
  accepted: one far-future element would otherwise make every later element late.
"""

from __future__ import annotations

from linkstream.rdf.lazyre import lazy

#: smallest accepted event time (ms): 1970-01-01T00:00:00Z
EVENT_TIME_MIN = 0
#: largest accepted event time (ms): 2**53 - 1
EVENT_TIME_MAX = 2**53 - 1
#: largest window RANGE / STEP (ms) a query may use: keeps report-time arithmetic in int64
DURATION_MAX = 2**53
#: default maximum forward jump of a stream's time (ms): one day
DEFAULT_MAX_TIME_JUMP_MS = 86_400_000

_UNITS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_DURATION = lazy(r"^\s*(\d+)\s*(ms|s|m|h|d)?\s*$")


class EventTimeError(ValueError):
    """A timestamp outside the accepted range, or too far ahead of its stream's time.

    Attributes:
        t: The offending value (an int, or the raw value when it is not one).
        reason: ``"range"`` or ``"jump"``.
    """

    def __init__(self, message: str, t: object, reason: str) -> None:
        super().__init__(message)
        self.t = t
        self.reason = reason


def show_time(t: object) -> str:
    """``t`` for a message: cut to 20 characters (and never thousands of digits)."""
    if isinstance(t, int) and not isinstance(t, bool) and t.bit_length() > 80:
        return "%s%.3e" % ("-" if t < 0 else "", float("inf") if t.bit_length() > 1000 else abs(t))
    text = repr(t)
    return text if len(text) <= 24 else text[:20] + "..."


def range_error(t: object) -> str | None:
    """Why ``t`` is not an accepted event time, or ``None`` when it is one."""
    if isinstance(t, bool) or not isinstance(t, int):
        return "event time %s is not an integer number of milliseconds" % show_time(t)
    if t < EVENT_TIME_MIN or t > EVENT_TIME_MAX:
        return (
            "event time %s ms is outside the accepted range 0 <= t < 2^53 ms (1970-01-01T00:00:00Z on)"
            % show_time(t)
        )
    return None


def check_event_time(t: object, where: str = "") -> int:
    """``t`` itself when it is an accepted event time.

    Raises:
        EventTimeError: ``t`` is not an int in the accepted range (the message starts
            with ``where``, e.g. ``file.nq:12``, when given).
    """
    problem = range_error(t)
    if problem is not None:
        raise EventTimeError(("%s: " % where if where else "") + problem, t, "range")
    return t  # type: ignore[return-value]  # range_error checked it is an int


def jump_error(t: int, current: int | None, max_jump_ms: int | None) -> str | None:
    """Why ``t`` is too far ahead of ``current`` (a stream's time), or ``None``."""
    if current is None or not max_jump_ms or t - current <= max_jump_ms:
        return None
    return (
        "event time %d ms is %d ms ahead of the stream's current time %d ms (more than the maximum jump of %d ms, --max-time-jump)"
        % (
            t,
            t - current,
            current,
            max_jump_ms,
        )
    )


def check_jump(t: int, current: int | None, max_jump_ms: int | None, where: str = "") -> int:
    """``t`` itself unless it is more than ``max_jump_ms`` ahead of ``current``.

    Raises:
        EventTimeError: ``t > current + max_jump_ms`` (``max_jump_ms`` 0 or ``None``: no limit).
    """
    problem = jump_error(t, current, max_jump_ms)
    if problem is not None:
        raise EventTimeError(("%s: " % where if where else "") + problem, t, "jump")
    return t


def parse_time_jump(text: str) -> int:
    """Milliseconds of a ``--max-time-jump`` value: ``MS``, or a number with a unit
    ``ms``/``s``/``m``/``h``/``d`` (``1d``, ``12h``); ``0`` means no limit.

    Raises:
        ValueError: Not such a duration, or more than 2^53 ms.
    """
    m = _DURATION.match(text)
    if not m:
        raise ValueError("bad duration %r (e.g. 86400000, 1d, 12h, 30m, 0 for no limit)" % text)
    ms = int(m.group(1)) * _UNITS[m.group(2) or "ms"]
    if ms > DURATION_MAX:
        raise ValueError("duration %r is more than 2^53 ms" % text)
    return ms
