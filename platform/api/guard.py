"""The API's edge: an ASGI middleware checking tokens and request-body limits.

:class:`ApiGuard` runs before routing.  It answers 401 (no or unknown token) and 403 (a
token whose scope is too weak) itself, and wraps ``receive`` so that the body is limited
while it streams in: a ``Content-Length`` over the limit is refused before a byte is read,
a chunked body as soon as it passes the limit (413), a body that takes longer than
``body_seconds`` to arrive is 408, and a JSON body nested deeper than ``max_json_depth``
is 422 before any parser sees it.  Those last three are raised as
:class:`~linkstream.api.limits.LimitExceeded` from the handler's body read, so the app's
exception handler answers them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from linkstream.api.auth import ANONYMOUS, TokenTable, required_scope
from linkstream.api.limits import ApiLimits, JsonDepthScanner, JsonTooDeep, LimitExceeded

log = logging.getLogger(__name__)

#: the ASGI scope key holding the caller's :class:`~linkstream.api.auth.Token`
TOKEN_KEY = "linkstream.token"

_JSON_TYPES = ("application/json", "application/ld+json", "application/x-json")
_FORM = "application/x-www-form-urlencoded"


async def send_error(
    send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> None:
    """Answers with a JSON error body (one line)."""
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": data})


def _header(scope: Scope, name: bytes) -> bytes | None:
    for k, v in scope["headers"]:
        if k == name:
            return v
    return None


def body_limit(limits: ApiLimits, method: str, path: str, media: str) -> tuple[int, str]:
    """The body size limit of a request, and the name of the :class:`ApiLimits` field."""
    if path == "/queries" and method == "POST" and media not in _JSON_TYPES:
        return limits.max_query_bytes, "max_query_bytes"
    if path == "/sparql" and media == "application/sparql-query":
        return limits.max_query_bytes, "max_query_bytes"
    return limits.max_body_bytes, "max_body_bytes"


class ApiGuard:
    """ASGI middleware: bearer tokens with scopes, and limits on request bodies.

    Args:
        app: The application.
        tokens: The configured tokens (empty: no authentication, every caller is admin).
        limits: The limits applied to bodies.
    """

    def __init__(self, app: ASGIApp, tokens: TokenTable, limits: ApiLimits) -> None:
        self.app = app
        self.tokens = tokens
        self.limits = limits

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        need = required_scope(method, path)
        token = ANONYMOUS
        if self.tokens and need is not None:
            auth = _header(scope, b"authorization")
            found = self.tokens.lookup(auth) if auth else None
            if found is None:
                what = "missing bearer token" if not auth else "wrong bearer token"
                await send_error(
                    send,
                    401,
                    {"error": what + ": send 'Authorization: Bearer TOKEN'", "where": "header Authorization"},
                    {"WWW-Authenticate": 'Bearer realm="linkstream"'},
                )
                return
            if not found.allows(need):
                await send_error(
                    send,
                    403,
                    {
                        "error": "token %r has scope %s; %s %s needs scope %s"
                        % (found.name, found.scope, method, path, need),
                        "where": "header Authorization",
                    },
                )
                return
            token = found
        scope[TOKEN_KEY] = token
        ctype = (_header(scope, b"content-type") or b"").decode("latin-1")
        media = ctype.split(";", 1)[0].strip().lower()
        limit, limit_name = body_limit(self.limits, method, path, media)
        length = _header(scope, b"content-length")
        if length is not None and length.strip().isdigit() and int(length) > limit:
            await send_error(
                send,
                413,
                {
                    "error": "body of %d bytes is larger than %d bytes (limit %s=%d, flag %s)"
                    % (int(length), limit, limit_name, limit, ApiLimits.flag(limit_name)),
                    "where": "body",
                    "limit": limit_name,
                    "value": limit,
                },
                {"Connection": "close"},
            )
            return
        json_body = media in _JSON_TYPES or media.endswith("+json")
        sniff = not media and path in ("/queries", "/watermark")
        await self.app(scope, _BodyReader(receive, self.limits, limit, limit_name, json_body, sniff), send)


class _BodyReader:
    """``receive`` counting the body, timing it and scanning JSON nesting as it streams in."""

    def __init__(
        self, receive: Receive, limits: ApiLimits, limit: int, limit_name: str, json_body: bool, sniff: bool
    ) -> None:
        self.receive = receive
        self.limits = limits
        self.limit = limit
        self.limit_name = limit_name
        self.size = 0
        self.done = False
        self.deadline = time.monotonic() + limits.body_seconds
        self.scanner = JsonDepthScanner(limits.max_json_depth) if json_body else None
        self.sniff = sniff

    async def __call__(self) -> Message:
        if self.done:  # the body is in; later calls wait for the disconnect (result streams)
            return await self.receive()
        try:
            msg = await asyncio.wait_for(self.receive(), max(0.0, self.deadline - time.monotonic()))
        except TimeoutError:
            secs = self.limits.body_seconds
            raise LimitExceeded(
                408, "body_seconds", secs, "the body did not arrive within %g s" % secs, "body"
            ) from None
        if msg["type"] != "http.request":
            self.done = True
            return msg
        chunk = msg.get("body", b"")
        self.size += len(chunk)
        if self.size > self.limit:
            self.done = True
            raise LimitExceeded(
                413,
                self.limit_name,
                self.limit,
                "body larger than %d bytes" % self.limit,
                "body",
            )
        if self.sniff and chunk.strip():
            self.sniff = False
            if chunk.lstrip()[:1] in (b"{", b"["):
                self.scanner = JsonDepthScanner(self.limits.max_json_depth)
        if self.scanner is not None and chunk:
            try:
                self.scanner.feed(chunk)
            except JsonTooDeep as e:
                self.done = True
                raise LimitExceeded(
                    422,
                    "max_json_depth",
                    self.limits.max_json_depth,
                    "JSON body nested deeper than %d levels (at byte %d)" % (e.max_depth, e.offset),
                    "body",
                ) from None
        if not msg.get("more_body", False):
            self.done = True
        return msg


__all__ = ["TOKEN_KEY", "ApiGuard", "body_limit", "send_error"]
