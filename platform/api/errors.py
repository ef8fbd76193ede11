"""Error answers of the HTTP API: :class:`ApiError` and the application's exception handlers.

Every error body is one JSON line ``{"error", "where", ...}`` (parse errors add ``line`` and
``column``; limits add ``limit`` and ``value``); bad input is a 4xx, never a 500.  Also the
small request helpers every handler module shares (body, integer parameters, JSON answers).
"""

from __future__ import annotations

import logging
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from linkstream.api.limits import LimitExceeded
from linkstream.engine.live.runtime import EngineClosed
from linkstream.query.errors import QueryError

log = logging.getLogger(__name__)


class ApiError(Exception):
    """An error answered as ``{"error": message, **extra}`` with ``status``."""

    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers=headers)


def query_error(e: QueryError) -> ApiError:
    """A parse or compile error of a query text as a 400 naming its line and column."""
    where = "query line %d, column %d" % (e.line, e.column) if e.line is not None else "query"  # type: ignore[str-format]  # a line comes with its column
    return ApiError(400, str(e), where=where, reason=e.message, line=e.line, column=e.column)


async def read_body(request: Request) -> bytes:
    """The request body (:class:`~linkstream.api.guard.ApiGuard` limits it as it streams in)."""
    return b"".join([chunk async for chunk in request.stream()])


def int_param(request: Request, key: str) -> int | None:
    """The integer query parameter ``key`` (``None`` if absent or empty; 400 if not an integer)."""
    v = request.query_params.get(key)
    if v is None or v == "":
        return None
    try:
        return int(v)
    except ValueError:
        raise ApiError(
            400, "query parameter %r must be an integer, got %r" % (key, v), where="query parameter " + key
        ) from None


#: where an error without a more precise place points, by status
_WHERE = {401: "header Authorization", 403: "header Authorization", 404: "path", 405: "method", 409: "path"}
_WHERE[410] = "header Last-Event-ID"
_WHERE.update({415: "header Content-Type", 503: "server"})


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    body: dict[str, Any] = {"error": exc.message, "where": _WHERE.get(exc.status, "request")}
    body.update({k: v for k, v in exc.extra.items() if v is not None and v != []})
    # a full pipeline or a busy server: the client retries after a second (nothing it sent was
    # dropped once accepted; the answer says how much of a push body was)
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    return json_response(body, exc.status, headers)


async def _limit_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, LimitExceeded)
    body = {"error": exc.message, "where": exc.where, "limit": exc.limit, "value": exc.value}
    headers = {"Retry-After": "1"} if exc.status in (429, 503) else None
    if exc.status in (408, 413):  # the rest of the body is not read: do not reuse the connection
        headers = {"Connection": "close"}
    return json_response(body, exc.status, headers)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        message = "no endpoint %s (see /openapi.json)" % request.url.path
    elif exc.status_code == 405:
        message = "method %s is not allowed on %s (allowed: %s)" % (
            request.method,
            request.url.path,
            headers.get("Allow", headers.get("allow", "?")),
        )
    else:
        message = str(exc.detail)
    return json_response(
        {"error": message, "where": _WHERE.get(exc.status_code, "request")}, exc.status_code, headers
    )


async def _unavailable(request: Request, exc: Exception) -> Response:
    if isinstance(exc, EngineClosed):
        return json_response({"error": "the engine is shutting down", "where": "server"}, 503)
    # a bare TimeoutError is a worker that did not answer; others say what is unavailable
    message = str(exc) or "the engine did not answer in time; retry later"
    return json_response({"error": message, "where": "server"}, 503, {"Retry-After": "5"})


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error in %s %s", request.method, request.url.path, exc_info=exc)
    return json_response({"error": "internal error: %s" % type(exc).__name__, "where": "server"}, 500)


#: the application's exception handlers (Starlette's ``exception_handlers``)
EXCEPTION_HANDLERS: dict[Any, Any] = {
    ApiError: _api_error,
    LimitExceeded: _limit_error,
    HTTPException: _http_error,
    EngineClosed: _unavailable,
    TimeoutError: _unavailable,
    Exception: _unexpected,
}

__all__ = ["EXCEPTION_HANDLERS", "ApiError", "int_param", "json_response", "query_error", "read_body"]
