"""The error type of the continuous-query parser, and SPARQL syntax-error positions.

Every problem found in a query (lexical, window, dialect, SPARQL syntax or SPARQL
semantics) is reported as a :class:`QueryError` that names the place in the original
query text, so that a CLI or an API can print ``Q1.rq:3:17: unknown prefix 'ex:'``.
:func:`trace_parse_failure` finds where rdflib's pyparsing grammar really got stuck.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import pyparsing


def _one_line(text: str) -> str:
    """Collapses every run of whitespace (line breaks included) into one space."""
    return " ".join(str(text).split())


class QueryError(ValueError):
    """A query that cannot be accepted, with the position of the offending token.

    ``str(error)`` is always a single line ``<source>:<line>:<column>: <message>``;
    the parts that are ``None`` are left out.

    Attributes:
        message: What is wrong, one line.
        line: 1-based line in the original query text, or ``None``.
        column: 1-based column (in characters) in that line, or ``None``.
        source: Name of the query's origin (usually a file name), or ``None``.
    """

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        source: str | None = None,
    ) -> None:
        message = _one_line(message) or "invalid query"
        source = _one_line(source) if source is not None else None
        super().__init__(message, line, column, source)
        self.message = message
        self.line = line
        self.column = column
        self.source = source

    def located(self, line: int | None, column: int | None, source: str | None = None) -> QueryError:
        """Returns a copy of this error placed at ``line``/``column`` (and ``source``).

        Args:
            line: 1-based line, or ``None``.
            column: 1-based column, or ``None``.
            source: Source name; the current one is kept when ``None``.

        Returns:
            A new :class:`QueryError` with the same message.
        """
        return QueryError(self.message, line, column, source if source is not None else self.source)

    def __str__(self) -> str:
        parts = [str(p) for p in (self.source, self.line, self.column) if p is not None]
        if not parts:
            return self.message
        return ":".join(parts) + ": " + self.message


# --------------------------------------------------------------------------- SPARQL syntax errors


@dataclass(frozen=True)
class ParseFailure:
    """Where a pyparsing grammar got furthest before failing.

    Attributes:
        offset: Offset in the parsed string of the furthest failure.
        expected: The literal tokens that were expected there (sorted).
        action_error: Message of a non-syntax exception raised by a parse action, if
            that is what stopped the parse (``offset`` is then where its element started).
    """

    offset: int
    expected: tuple[str, ...] = ()
    action_error: str | None = None


class _Tracking(threading.local):
    active = False
    far = -1
    expected: set[str] = set()  # replaced at every run
    action_offset: int | None = None
    action_error: str | None = None


_TRACK = _Tracking()
_TRACK_LOCK = threading.Lock()
_ORIGINAL_PARSE = pyparsing.ParserElement._parseNoCache


def _tracking_parse(
    self: pyparsing.ParserElement, instring: str, loc: int, do_actions: bool = True, callPreParse: bool = True
) -> Any:
    try:
        return _ORIGINAL_PARSE(self, instring, loc, do_actions, callPreParse)
    except pyparsing.ParseBaseException as e:
        tr = _TRACK
        literal = getattr(self, "match", None)
        if tr.active and isinstance(self, pyparsing.Token) and literal != "#":
            if e.loc > tr.far:
                tr.far, tr.expected = e.loc, set()
            if e.loc == tr.far and isinstance(literal, str) and literal:
                tr.expected.add(literal)
        raise
    except RecursionError:
        raise
    except Exception as e:
        tr = _TRACK
        if tr.active and tr.action_error is None:
            while loc < len(instring) and instring[loc].isspace():
                loc += 1
            tr.action_offset, tr.action_error = loc, str(e)
        raise


def trace_parse_failure(grammar: pyparsing.ParserElement, text: str, fallback: int) -> ParseFailure:
    """Parses ``text`` again, recording the furthest position any grammar token failed at.

    pyparsing reports the start of the outermost alternative that failed, which is often
    far before the real mistake; like a PEG parser's error report (and Oxigraph's), the
    furthest failure is usually the offending token.  pyparsing's element class is
    patched for the duration of this call only, under a lock.

    Args:
        grammar: The grammar that rejected ``text``.
        text: The rejected text.
        fallback: pyparsing's own error offset, used if the trace finds nothing better.

    Returns:
        The failure.
    """
    with _TRACK_LOCK:
        tr = _TRACK
        tr.active, tr.far, tr.expected, tr.action_offset, tr.action_error = True, -1, set(), None, None
        patched_parse = pyparsing.ParserElement._parse is _ORIGINAL_PARSE
        pyparsing.ParserElement._parseNoCache = _tracking_parse  # type: ignore[method-assign]
        if patched_parse:
            pyparsing.ParserElement._parse = _tracking_parse  # type: ignore[method-assign]
        try:
            grammar.parse_string(text, parse_all=True)
        except RecursionError:
            pass
        except Exception:  # the trace is what we want, not the exception
            pass
        finally:
            pyparsing.ParserElement._parseNoCache = _ORIGINAL_PARSE  # type: ignore[method-assign]
            if patched_parse:
                pyparsing.ParserElement._parse = _ORIGINAL_PARSE  # type: ignore[method-assign]
            tr.active = False
    if tr.action_error is not None and tr.action_offset is not None:
        return ParseFailure(tr.action_offset, (), tr.action_error)
    if tr.far < 0:
        return ParseFailure(fallback)
    return ParseFailure(tr.far, tuple(sorted(tr.expected)))


def describe_failure(failure: ParseFailure, near: str | None) -> str:
    """The one-line message for a SPARQL parse failure.

    Args:
        failure: Where and why the parse failed.
        near: The quoted token found at ``failure.offset``, or ``None`` at the end of the text.

    Returns:
        E.g. ``syntax error near ')', expected one of '!', '$', '(', ...``.
    """
    if failure.action_error is not None:
        return failure.action_error
    expected = [x for x in failure.expected if x != ":"]
    hint = ""
    if expected:
        shown = ", ".join("'%s'" % x for x in expected[:8]) + (", ..." if len(expected) > 8 else "")
        hint = ", expected %s%s" % ("one of " if len(expected) > 1 else "", shown)
    if near is None:
        return "unexpected end of query" + hint
    return "syntax error near %s%s" % (near, hint)
