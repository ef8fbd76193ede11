"""Result streams of the HTTP API: ``GET /queries/{name}/results`` (Server-Sent Events) and
``GET /queries/{name}/results.jsonl`` (chunked JSON Lines).

One event per result line, ``id:`` ``<report time>:<line>``; ``Last-Event-ID`` (SSE) or
``?after=<id>`` resumes after that line (410 if no longer kept); ``?until=`` ends the stream
after that report time, ``?limit=`` after that many lines, ``?queue=`` bounds the lines held
for a slow reader.  Older lines are dropped then, and the reader is told, in order, with a
gap (SSE ``event: gap``, JSON Lines ``{"gap": ...}``) naming the first and last missed ids
and the ``after`` cursor that re-reads them from the result ring while they are kept.  Result streams
wait on the event loop; :class:`ResultStreams` counts them against ``max_subscribers``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from linkstream.api.backend import LiveBackend
from linkstream.api.errors import ApiError, int_param
from linkstream.api.limits import ApiLimits, LimitExceeded
from linkstream.engine.live.runtime import UnknownQuery
from linkstream.engine.live.subscription import (
    Cursor,
    Gap,
    ResultsGone,
    Subscription,
    SubscriptionClosed,
    id_before,
    line_id,
    parse_cursor,
)
from linkstream.engine.render import joined_text

KEEPALIVE_S = 15.0


def gap_json(name: str, gap: Gap) -> str:
    """The JSON of a gap: ``query``, ``from`` / ``to`` (first and last missed result ids),
    ``lines`` (how many) and ``after`` (the ``?after=`` that re-reads them)."""
    first, last, n = gap
    return json.dumps({"query": name, "from": first, "to": last, "lines": n, "after": id_before(first)})


class ResultStream(StreamingResponse):
    """A result stream that releases its subscription however the response ends."""

    def __init__(self, content: Any, *, on_end: Callable[[], None] | None, **kw: Any) -> None:
        super().__init__(content, **kw)
        self._on_end = on_end

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            end, self._on_end = self._on_end, None
            if end is not None:
                end()


def _cursor(request: Request) -> Cursor | None:
    """The resume point: ``?after=`` or else ``Last-Event-ID`` (400 if malformed)."""
    after = None
    for where, raw in (
        ("query parameter after", request.query_params.get("after")),
        ("header Last-Event-ID", request.headers.get("last-event-id")),
    ):
        if raw is None or not raw.strip() or after is not None:
            continue
        try:
            after = parse_cursor(raw)
        except ValueError:
            raise ApiError(
                400,
                "%s must be a result id <report time ms>:<line> (or a report time), got %r"
                % (where.split(" ", 1)[1], raw[:64]),
                where=where,
            ) from None
    return after


async def _lines(
    sub: Subscription, name: str, *, sse: bool, limit: int | None, until: int | None
) -> AsyncIterator[str]:
    """The text of a result stream: SSE events (with ids and keepalives) or JSON lines."""
    sent = 0
    try:
        if sse:
            yield ": subscribed to %s\n\n" % json.dumps(name)
        while limit is None or sent < limit:
            try:
                entry = await sub.next_entry(KEEPALIVE_S)
            except SubscriptionClosed:
                if sse:
                    yield "event: end\ndata: {}\n\n"
                return
            if entry is None:
                if sse:
                    yield ": keepalive\n\n"
                continue
            gap, (c, lines, first) = entry
            if gap is not None:
                data = gap_json(name, gap)
                yield ("event: gap\ndata: %s\n\n" if sse else '{"gap": %s}\n') % data
            n = len(lines)
            if limit is not None and n > limit - sent:
                lines = lines[: limit - sent]
                n = len(lines)
            sent += n
            if n:
                if sse:
                    yield "".join(
                        "id: %s\ndata: %s\n\n" % (line_id(c, first + i), ln) for i, ln in enumerate(lines, 1)
                    )
                else:  # (a report a container sent is one text already: not split into lines)
                    yield joined_text(lines) + "\n"
            if until is not None and c >= until:
                return
    finally:
        sub.close()


class ResultStreams:
    """Opens result streams of ``live`` and counts the open ones."""

    def __init__(self, live: LiveBackend, limits: ApiLimits) -> None:
        self.live = live
        self.limits = limits
        self.open_count = 0

    def open(self, request: Request, *, sse: bool) -> Response:
        """The streaming response of ``GET /queries/{name}/results[.jsonl]``."""
        name = request.path_params["name"]
        until = int_param(request, "until")
        limit = int_param(request, "limit")
        maxlen = int_param(request, "queue")
        for key, v in (("until", until), ("limit", limit), ("queue", maxlen)):
            if v is not None and (v < (1 if key != "until" else -(2**62)) or v > 2**62):
                raise ApiError(
                    400, "query parameter %r out of range: %d" % (key, v), where="query parameter " + key
                )
        if maxlen is not None and maxlen > 1_000_000:
            raise ApiError(
                400, "query parameter 'queue' must be at most 1000000", where="query parameter queue"
            )
        after = _cursor(request)
        try:
            self.live.view(name)  # 404 before the stream starts
        except UnknownQuery as e:
            raise ApiError(404, str(e), where="path") from None
        if self.open_count >= self.limits.max_subscribers:
            raise LimitExceeded(
                429,
                "max_subscribers",
                self.limits.max_subscribers,
                "%d result streams are open already" % self.open_count,
                "server",
            )

        try:  # (the response closes it: nothing awaits between here and its start)
            sub = (
                self.live.subscribe(name, maxlen, after)
                if after is not None
                else self.live.subscribe(name, maxlen)
            )
        except UnknownQuery as e:
            raise ApiError(404, str(e), where="path") from None
        except ResultsGone as e:
            raise ApiError(
                410,
                str(e),
                where="query parameter after"
                if request.query_params.get("after")
                else "header Last-Event-ID",
            ) from None
        self.open_count += 1

        def ended() -> None:
            self.open_count -= 1
            sub.close()

        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        media = "text/event-stream" if sse else "application/x-ndjson"
        body = _lines(sub, name, sse=sse, limit=limit, until=until)
        return ResultStream(body, media_type=media, headers=headers, on_end=ended)


__all__ = ["KEEPALIVE_S", "ResultStream", "ResultStreams"]
