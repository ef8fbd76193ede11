"""The HTTP side of ``run --zk``: :class:`LeaderProxy` (a standby forwards to the leader) and
:func:`create_service_app` (the API application of a coordinator).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from urllib.parse import quote

import httpx
import msgpack
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from linkstream.api.auth import ANONYMOUS, Token, TokenTable, parse_token
from linkstream.api.guard import TOKEN_KEY, ApiGuard, send_error
from linkstream.api.limits import ApiLimits, LimitExceeded
from linkstream.cluster.decisions import DECIDED_HEADER
from linkstream.cluster.ingest import INGEST_PATH, MSGPACK, NotOwner
from linkstream.cluster.registration import OWNER
from linkstream.cluster.results import LOG_BLOCKS, LOG_FRAMES, LOG_MSGPACK, LOG_PATH, serve_log
from linkstream.cluster.service import ClusterService

logger = logging.getLogger(__name__)

#: header a forwarded request carries (a coordinator never forwards it again)
FORWARDED = "x-linkstream-forwarded-by"
#: how long a standby waits for a leader to take a write (an election, a leader starting up)
ELECTION_WAIT_S = 10.0
RETRY_S = 0.2
LOCAL_PATHS = frozenset({"/healthz", "/status", "/metrics", "/openapi.json"})
_HOP = frozenset({b"host", b"content-length", b"connection", b"transfer-encoding", b"keep-alive"})


def token_id(authorization: str | None) -> str | None:
    """A short, non-reversible id of a bearer token (the ``owner`` of what it registers)."""
    if not authorization:
        return None
    return "tok-" + hashlib.sha256(authorization.encode("utf-8")).hexdigest()[:12]


class LeaderProxy:
    """ASGI middleware: a standby forwards requests to the leader's API, streaming answers.

    Requests for ``/healthz``, ``/metrics`` and ``/openapi.json``, requests already
    forwarded once, and every request on the leader go to the wrapped application.  When
    no leader can be reached the wrapped application answers: reads of ``/queries``
    from the registry, anything else with 503.  It also sets :data:`OWNER` from the
    ``Authorization`` header.
    """

    def __init__(self, app: ASGIApp, service: ClusterService) -> None:
        self.app = app
        self.service = service
        self._http: httpx.AsyncClient | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        auth = headers.get(b"authorization")
        tok = scope.get(TOKEN_KEY)  # the caller's token, as the guard in front checked it
        if isinstance(tok, Token) and tok is not ANONYMOUS:
            OWNER.set(tok.name)
        else:
            OWNER.set(token_id(auth.decode("latin-1") if auth else None))
        path = scope["path"]
        if path == LOG_PATH and scope["method"] == "GET":
            await self._serve_log(scope, send)
            return
        if path == INGEST_PATH and scope["method"] == "POST":
            await self._serve_ingest(scope, receive, send)
            return
        results = (
            scope["method"] == "GET"
            and path.startswith("/queries/")
            and path.endswith(("/results", "/results.jsonl"))
        )
        forwarded = FORWARDED.encode() in headers
        if scope["method"] == "POST" and path.startswith("/streams") and not forwarded:
            # a push goes to its stream's owner (the leader's pushes too: one process sequences
            # each stream); the owner's app parses it and hands it to the leader
            iri = stream_of(scope, self.service.base)
            try:
                url = None if iri is None else await asyncio.to_thread(self.service.ingest.route, iri)
            except NotOwner as exc:  # ZooKeeper away: whose stream it is cannot be known now
                await send_error(send, 503, {"error": str(exc)}, {"Retry-After": "1"})
                return
            if url is None:
                await self.app(scope, receive, send)
                return
        elif path in LOCAL_PATHS or results or forwarded or self.service.leading():
            await self.app(scope, receive, send)
            return
        else:  # a write waits out an election (a read is answered here from the registry)
            wait = 0.0 if scope["method"] in ("GET", "HEAD") else ELECTION_WAIT_S
            ident, url = await self._find_leader(wait)
            if not url or ident == self.service.identifier:
                await self.app(scope, receive, send)
                return
        body = bytearray()
        try:
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                body += msg.get("body", b"")
                if not msg.get("more_body", False):
                    break
        except LimitExceeded as exc:  # the guard's body limits, as the app would answer them
            headers_out = {"Connection": "close"} if exc.status in (408, 413) else {"Retry-After": "1"}
            err = {"error": exc.message, "where": exc.where, "limit": exc.limit, "value": exc.value}
            await send_error(send, exc.status, err, headers_out)
            return
        deadline = time.monotonic() + ELECTION_WAIT_S
        while True:
            outcome = await self._forward(scope, receive, send, url, bytes(body))
            if outcome == "answered":
                return
            self.service.forget_leader()
            if outcome == "lost" or time.monotonic() >= deadline:
                break
            # not delivered (the leader is gone or not listening yet): the next leader may take it
            await asyncio.sleep(RETRY_S)
            ident, url = await self._find_leader(max(0.0, deadline - time.monotonic()))
            if not url or ident == self.service.identifier:
                break
        replayed = False

        async def again() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, again, send)

    async def _serve_ingest(self, scope: Scope, receive: Receive, send: Send) -> None:
        """``POST /_cluster/ingest``: an owner's sequenced body, applied while leading."""
        body = bytearray()
        try:
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                body += msg.get("body", b"")
                if not msg.get("more_body", False):
                    break
        except LimitExceeded as exc:
            await send_error(
                send, exc.status, {"error": exc.message, "where": exc.where}, {"Retry-After": "1"}
            )
            return
        headers = dict(scope["headers"])
        ctype = headers.get(b"content-type", b"").split(b";")[0].strip().lower()
        acked = headers.get(DECIDED_HEADER.encode())  # --ingest direct: the owner has the decisions below

        def decode_and_apply() -> tuple[int, dict]:  # off the event loop: bodies are large
            try:
                if ctype == MSGPACK.encode():
                    doc = msgpack.unpackb(bytes(body), raw=False)
                else:
                    doc = json.loads(bytes(body))
                if not isinstance(doc, dict):
                    raise ValueError("not a map")
            except (ValueError, msgpack.UnpackException) as exc:
                return 400, {"error": f"ingest body: {exc}"}
            try:
                after = None if acked is None else int(acked)
            except ValueError:
                return 400, {"error": f"{DECIDED_HEADER}: not an offset"}
            return self.service.ingest.serve(doc, after)

        status, answer = await asyncio.to_thread(decode_and_apply)
        await send_json(send, status, answer)

    async def _serve_log(self, scope: Scope, send: Send) -> None:
        from urllib.parse import parse_qsl

        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        accept = dict(scope["headers"]).get(b"accept", b"").decode("latin-1")
        if LOG_MSGPACK in accept or LOG_BLOCKS in accept or LOG_FRAMES in accept:  # a follower
            # (entries' bytes made once; older followers: each report one text, or arrays of lines)
            form = next(f for f in (LOG_FRAMES, LOG_BLOCKS, LOG_MSGPACK) if f in accept)
            log = self.service.log
            body = await serve_log(
                log, query, packed=True, blocks=form == LOG_BLOCKS, frames=form == LOG_FRAMES
            )
            assert isinstance(body, bytes)
            await send_body(send, 200, body, form)
            return
        await send_json(send, 200, await serve_log(self.service.log, query))

    async def _find_leader(self, wait: float) -> tuple[str | None, str | None]:
        """``(identifier, API URL)`` of the leader, polled for up to ``wait`` seconds while
        none is known (an election under way, or a leader not serving its API yet)."""
        deadline = time.monotonic() + wait
        while True:
            ident, url = await asyncio.to_thread(self.service.leader)
            if url or self.service.leading() or time.monotonic() >= deadline:
                return ident, url
            await asyncio.sleep(RETRY_S)

    async def _forward(self, scope: Scope, receive: Receive, send: Send, url: str, body: bytes) -> str:
        """Forwards one request.  Returns ``"answered"`` (the leader's answer, or a 502, was
        relayed), ``"unreached"`` (no connection: nothing was sent, it may be sent again) or
        ``"lost"`` (the connection failed once the request was on its way: nothing answered)."""
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(10.0, read=None),
                follow_redirects=False,
                verify=self.service.peer_verify,
            )
        path = scope.get("raw_path") or quote(scope["path"]).encode()
        target = url.rstrip("/") + path.decode("latin-1")
        if scope.get("query_string"):
            target += "?" + scope["query_string"].decode("latin-1")
        fwd = [
            (k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"] if k.lower() not in _HOP
        ]
        fwd.append((FORWARDED, self.service.identifier))
        request = self._http.build_request(scope["method"], target, headers=fwd, content=body)
        try:
            response = await self._http.send(request, stream=True)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            logger.info("cannot reach the leader at %s: %s", url, exc)
            return "unreached"
        except httpx.TransportError as exc:
            logger.warning("forwarding %s %s to %s failed: %s", scope["method"], scope["path"], url, exc)
            return "lost"
        started = False

        async def relay() -> None:
            nonlocal started
            out = [
                (k.lower().encode("latin-1"), v.encode("latin-1"))
                for k, v in response.headers.multi_items()
                if k.lower().encode("latin-1") not in _HOP
            ]
            await send({"type": "http.response.start", "status": response.status_code, "headers": out})
            started = True
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})

        async def disconnected() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        relay_task = asyncio.ensure_future(relay())
        watch_task = asyncio.ensure_future(disconnected())
        try:
            await asyncio.wait({relay_task, watch_task}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (relay_task, watch_task):
                t.cancel()
            await response.aclose()
        if relay_task.done() and not relay_task.cancelled() and relay_task.exception() is not None:
            if not started:
                await send({"type": "http.response.start", "status": 502, "headers": []})
                await send({"type": "http.response.body", "body": b'{"error": "leader connection failed"}'})
            logger.info("forwarding to %s ended: %s", url, relay_task.exception())
        return "answered"


async def send_json(send: Send, status: int, answer: object) -> None:
    await send_body(send, status, json.dumps(answer, separators=(",", ":")).encode("utf-8"))


async def send_body(send: Send, status: int, body: bytes, ctype: str = "application/json") -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", ctype.encode()), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def stream_of(scope: Scope, base: str) -> str | None:
    """The stream IRI of ``POST /streams/{iri}`` or ``/streams?iri=`` as the API reads it
    (``None``: none, or not an IRI: the application answers the error)."""
    from urllib.parse import parse_qsl, urljoin

    from linkstream.api.app import _SCHEME

    path = scope["path"]
    if path.startswith("/streams/"):
        iri = path[len("/streams/") :]
    elif path == "/streams":
        iri = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"))).get("iri", "")
    else:
        return None
    iri = iri.strip()  # the server decoded the path already, as the application's route reads it
    if iri.startswith("<") and iri.endswith(">"):
        iri = iri[1:-1]
    if not iri:
        return None
    return iri if _SCHEME.match(iri) else urljoin(base, iri)


def create_service_app(
    service: ClusterService,
    *,
    token: str | None = None,
    tokens: Sequence[Token] = (),
    limits: ApiLimits | None = None,
) -> ASGIApp:
    """The HTTP API of ``run --zk``: the same application as ``run``, behind :class:`LeaderProxy`.

    The tokens (scopes ``read``/``write``/``admin``) and the request limits are checked by
    :class:`~linkstream.api.guard.ApiGuard` in front of the proxy, on whichever coordinator a
    request reaches (a standby refuses what the token does not allow before forwarding; the
    leader checks the forwarded request again, so every coordinator needs the same tokens).
    Coordinators call each other with the first ``admin`` token (else the first token).

    Raises:
        ValueError: An empty token, or two tokens with the same name or secret.
    """
    from linkstream.api.app import create_app

    limits = limits or ApiLimits()
    table = TokenTable([*tokens, *([parse_token(token)] if token is not None else [])])
    known = table.tokens
    if known:
        peer = next((t for t in known if t.scope == "admin"), known[0])
        service.peer_token = peer.secret
    inner = create_app(service, limits=limits, base=service.base, guard=False)
    return ApiGuard(LeaderProxy(inner, service), table, limits)


__all__ = ["FORWARDED", "LeaderProxy", "create_service_app", "token_id"]
