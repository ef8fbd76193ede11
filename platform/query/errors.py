"""The query error type.

Every problem found in a query (lexical, window, dialect, SPARQL syntax or SPARQL
semantics) is reported as a :class:`QueryError` that names the place in the original
query text, so that a CLI or an API can print ``Q1.rq:3:17: unknown prefix 'ex:'``.
Finding those problems where rdflib misses or misplaces them is
:mod:`linkstream.query.rules`'s work; this module imports neither rdflib nor pyparsing,
so every layer can name the error type cheaply.
"""

from __future__ import annotations


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
