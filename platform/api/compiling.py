"""Compiling query texts under the request limits of the HTTP API.

``max_query_bytes`` (413), ``compile_seconds`` (422: the parse runs in a thread of its own and
is interrupted when time is up) and ``max_compiles`` (503: parses running at once).  The
engine parses a text again when it registers or runs it; this parse can be cut short, the
engine's cannot, and it warms the parser's template cache for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

from linkstream.api.backend import LiveBackend
from linkstream.api.limits import (
    ApiLimits,
    BusyError,
    DeadlineExceeded,
    ItemFailed,
    LimitExceeded,
    call_each_with_deadline,
    call_with_deadline,
)
from linkstream.engine.oneshot.embedded import parse_one_shot
from linkstream.query.continuous import parse_continuous

_PARSE_LOCK = threading.Lock()  # for backends without a parse lock of their own


class Compiler:
    """Parses query texts for one API (its backend's parse lock and base IRI)."""

    def __init__(self, live: LiveBackend, base: str, limits: ApiLimits) -> None:
        self.live = live
        self.base = base
        self.limits = limits

    async def compile(self, text: str, *, one_shot: bool = False) -> Any:
        """Parses ``text`` under the query size and compile-time limits (errors as the engine's).

        The engine parses the text again when it registers or runs it; this parse can be cut
        short, the engine's cannot, and it warms the parser's template cache for it.
        """
        lim = self.limits
        self._check_size(text)
        try:
            return await call_with_deadline(
                self._parser(text, one_shot), lim.compile_seconds, most=lim.max_compiles
            )
        except DeadlineExceeded:
            raise self._too_slow() from None
        except BusyError:
            raise self._busy() from None

    async def compile_many(self, texts: Sequence[str]) -> list[Any]:
        """:meth:`compile` of each text in order, in one thread (one hand-over for the batch);
        a query error is raised as ``ItemFailed`` (index, error).  Returns the parsed queries
        (named by their REGISTER clause, else ``""``) for a backend that takes them."""
        lim = self.limits
        big = None
        for j, text in enumerate(texts):
            try:
                self._check_size(text)
            except LimitExceeded as e:
                big, texts = e, texts[:j]
                break
        try:
            parsed = await call_each_with_deadline(
                [self._parser(t, default_name="") for t in texts], lim.compile_seconds, most=lim.max_compiles
            )
        except ItemFailed as e:
            if isinstance(e.error, DeadlineExceeded):
                raise self._too_slow() from None
            raise
        except BusyError:
            raise self._busy() from None
        if big is not None:
            raise big
        return parsed

    def _check_size(self, text: str) -> None:
        lim = self.limits
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > lim.max_query_bytes:
            raise LimitExceeded(
                413,
                "max_query_bytes",
                lim.max_query_bytes,
                "query text of %d bytes is larger than %d bytes" % (size, lim.max_query_bytes),
                "query",
            )

    def _parser(self, text: str, one_shot: bool = False, default_name: str = "q") -> Callable[[], Any]:
        lock = getattr(self.live, "_parse_lock", None) or _PARSE_LOCK
        base = getattr(self.live, "base", self.base)

        def parse() -> Any:
            with lock:  # the SPARQL parser's error tracing patches pyparsing globally
                if one_shot:
                    return parse_one_shot(text, base)
                return parse_continuous(text, default_name=default_name, base=base)

        return parse

    def _too_slow(self) -> LimitExceeded:
        lim = self.limits
        return LimitExceeded(
            422,
            "compile_seconds",
            lim.compile_seconds,
            "the query did not compile within %g s" % lim.compile_seconds,
            "query",
        )

    def _busy(self) -> LimitExceeded:
        lim = self.limits
        return LimitExceeded(
            503,
            "max_compiles",
            lim.max_compiles,
            "%d queries are being compiled already; retry later" % lim.max_compiles,
            "server",
        )


__all__ = ["Compiler"]
