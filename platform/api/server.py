"""Serving the API with uvicorn: in the foreground (``linkstream run``) or in a thread.

:func:`build_live` makes the engine a server runs (dictionary, static graphs, timing
options); :func:`serve` runs uvicorn until interrupted; :class:`BackgroundServer` runs a
real uvicorn server on a free 127.0.0.1 port in a thread, for tests and embedding.

Both run uvicorn's h11 protocol wrapped by :class:`GuardedH11Protocol`, which keeps
``/healthz`` answering under connection floods (slowloris): a request head must arrive
within ``header_seconds`` of a connection opening or going back to idle, heads are at most
``max_header_bytes``, and past ``max_connections`` the oldest idle connection is closed
(:class:`ConnectionGuard`).  uvicorn's own ``limit_concurrency`` is not used: it answers
503 to every request once the connections reach it, ``/healthz`` included.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import resource
import socket
import threading
import time
from collections.abc import Callable, Sequence
from http import HTTPStatus
from typing import Any

import h11
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from linkstream.api.limits import ApiLimits
from linkstream.engine.embedded import Engine
from linkstream.engine.live.runtime import LiveEngine
from linkstream.metrics import LiveMetrics, with_process_collectors
from linkstream.rdf.dictionary import open_dictionary
from linkstream.rdf.static import load_graph

log = logging.getLogger(__name__)

#: seconds open result streams get to finish when the server stops
GRACEFUL_SHUTDOWN_S = 3


def build_live(
    statics: Sequence[tuple[str | None, str]] = (),
    *,
    dictionary: str = "memory:",
    default_step: int = 1000,
    idle_ms: int | None = 5000,
    retention_ms: int = 60_000,
    base: str = "http://localhost/",
    process_metrics: bool = False,
    store: str | None = None,
    absorb: Sequence[str] = (),
) -> LiveEngine:
    """A live engine with its static graphs loaded (not started).

    Args:
        statics: ``(graph IRI or None for the default graph, file path)`` pairs.
        dictionary: Dictionary URI (``memory:``, ``lmdb:PATH``, ``hbase://...``).
        default_step: Report step of windows without STEP (ms).
        idle_ms: Wall-clock ms after which a silent stream stops holding back reports.
        retention_ms: Event time (ms) of stream history kept for late-registered queries.
        base: Base IRI for relative IRIs.
        process_metrics: Also export the process/platform/GC collectors.
        store: A store directory (``linkstream load --store``): its graphs become the
            static graphs, its dictionary the engine's, and one-shot ``/sparql`` queries run
            on its consistent snapshots.
        absorb: Stream IRIs whose elements are also absorbed into the store (needs ``store``).

    Raises:
        ValueError, OSError: A bad dictionary URI or an unreadable static file.
    """
    if absorb and store is None:
        raise ValueError("--absorb needs --store DIR")
    opened = None
    if store is not None:
        if dictionary != "memory:":
            raise ValueError("--store uses the store's own dictionary; do not also give --dictionary")
        from linkstream.store.hybrid import HybridStore

        t0 = time.perf_counter()
        opened = HybridStore.open(store)  # one store: graphs for /sparql, transient ring for windows
        engine = Engine(
            opened.dictionary, default_step=default_step, log_fn=log.warning, transient=opened.transient
        )
        engine.store = opened  # type: ignore[attr-defined]  # the live engine reads engine.store
        snap = opened.snapshot()
        for g in snap.graphs():
            engine.add_static(g, snap.triples(g))
        log.info("store %s: %d graphs (%.2fs)", store, len(snap.graphs()), time.perf_counter() - t0)
    else:
        engine = Engine(open_dictionary(dictionary), default_step=default_step, log_fn=log.warning)
    for k, (iri, path) in enumerate(statics):
        t0 = time.perf_counter()
        triples = load_graph(path, engine.dictionary, bnode_prefix=f"s{k}_", log=log.warning)
        engine.add_static(iri, triples)
        log.info(
            "static %s: %d triples from %s (%.2fs)",
            "<%s>" % iri if iri else "default graph",
            len(triples),
            path,
            time.perf_counter() - t0,
        )
    metrics = LiveMetrics()
    if process_metrics:
        with_process_collectors(metrics.registry)
    return LiveEngine(
        engine, idle_ms=idle_ms, retention_ms=retention_ms, base=base, metrics=metrics, absorb=absorb
    )


class ConnectionGuard:
    """Connection bookkeeping shared by the protocols of one server (event-loop thread only).

    Attributes:
        limits: The limits applied.
        open: Connections open now.
        idle: Connections waiting for a request head, oldest first.
        evicted: Idle connections closed to make room, since start.
        timed_out: Connections closed because no request head came in time.
    """

    def __init__(self, limits: ApiLimits) -> None:
        self.limits = limits
        self.open = 0
        self.idle: dict[GuardedH11Protocol, None] = {}
        self.evicted = 0
        self.timed_out = 0

    def make_idle(self, proto: GuardedH11Protocol) -> None:
        self.idle.pop(proto, None)
        self.idle[proto] = None

    def make_busy(self, proto: GuardedH11Protocol) -> None:
        self.idle.pop(proto, None)

    def admit(self, proto: GuardedH11Protocol) -> bool:
        """Counts a new connection; ``False`` if it is over the cap with nothing to evict."""
        self.open += 1
        while self.open > self.limits.max_connections and self.idle:
            oldest = next(iter(self.idle))
            self.idle.pop(oldest)
            self.evicted += 1
            oldest.close_idle()
        return self.open <= self.limits.max_connections

    def release(self, proto: GuardedH11Protocol) -> None:
        self.open -= 1
        self.idle.pop(proto, None)


class _Conn(h11.Connection):
    """h11's connection, remembering the protocol error it raised (for a JSON 400/431)."""

    last_error: h11.RemoteProtocolError | None = None

    def next_event(self) -> Any:
        try:
            return super().next_event()
        except h11.RemoteProtocolError as e:
            self.last_error = e
            raise


def _error_bytes(error: str, where: str, **extra: Any) -> bytes:
    return json.dumps({"error": error, "where": where, **extra}).encode("utf-8")


async def _overloaded(scope: Scope, receive: Receive, send: Send, app: ASGIApp, cap: int) -> None:
    """The app of a connection over the cap: ``/healthz`` still answers, the rest is 503."""
    if scope["type"] == "http" and scope["path"] == "/healthz":
        await app(scope, receive, send)
        return
    body = _error_bytes(
        "too many open connections (limit max_connections=%d, flag --max-connections); retry later" % cap,
        "connection",
        limit="max_connections",
    )
    await send(
        {
            "type": "http.response.start",
            "status": 503,
            "headers": [
                (b"content-type", b"application/json"),
                (b"retry-after", b"1"),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a request-head timeout and a connection cap.

    A subclass per server binds :attr:`guard` (see :func:`guarded_protocol`).  Protocol
    errors (malformed requests, heads over ``max_header_bytes``) are answered with the
    API's JSON error body instead of uvicorn's plain text.
    """

    guard: ConnectionGuard

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.conn = _Conn(h11.SERVER, self.guard.limits.max_header_bytes)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn passes a Transport
        super().connection_made(transport)
        if not self.guard.admit(self):
            cap, app = self.guard.limits.max_connections, self.app
            self.app = lambda scope, receive, send: _overloaded(scope, receive, send, app, cap)
        self._wait_for_head()

    def _wait_for_head(self) -> None:
        self.guard.make_idle(self)
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.guard.limits.header_seconds, self._head_timeout)

    def _head_arrived(self) -> None:
        self.guard.make_busy(self)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timeout(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        self.guard.timed_out += 1
        if self.conn.our_state is h11.IDLE and self.conn.their_state is h11.IDLE:
            secs = self.guard.limits.header_seconds
            self._send_error(
                408,
                "no complete request head within %g s (limit header_seconds=%g, flag --header-seconds)"
                % (secs, secs),
                "connection",
            )
        self.transport.close()

    def close_idle(self) -> None:
        """Closes this connection to make room (it has no request in progress)."""
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self.conn.their_state is h11.IDLE and self._head_timer is None:
            self._wait_for_head()  # a kept-alive connection starts its next head
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE and self.cycle is not None:
            self._head_arrived()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self.guard.make_idle(self)  # keep-alive: uvicorn's timeout_keep_alive applies

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        self.guard.release(self)
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        err = self.conn.last_error  # type: ignore[attr-defined]  # h11 Connection attribute missing from its stubs
        status = getattr(err, "error_status_hint", 400) or 400
        if status == 431:
            n = self.guard.limits.max_header_bytes
            text = (
                "request head larger than %d bytes (limit max_header_bytes=%d, flag --max-header-bytes)"
                % (
                    n,
                    n,
                )
            )
        else:
            text = "malformed HTTP request: %s" % (err if err is not None else msg)
        self._send_error(status, text, "request head")
        self.transport.close()

    def _send_error(self, status: int, error: str, where: str) -> None:
        body = _error_bytes(error, where)
        head = b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode("ascii"))
        head += b"content-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n" % len(
            body
        )
        self.transport.write(head + body)


def guarded_protocol(limits: ApiLimits) -> tuple[type[GuardedH11Protocol], ConnectionGuard]:
    """A :class:`GuardedH11Protocol` class bound to a fresh guard, and the guard."""
    guard = ConnectionGuard(limits)
    return type("GuardedH11Protocol", (GuardedH11Protocol,), {"guard": guard}), guard


def raise_fd_limit(limits: ApiLimits) -> ApiLimits:
    """Raises the soft open-files limit so ``max_connections`` fit; lowers the cap if they cannot.

    Each connection is one descriptor; 256 are kept for files, the engine and stores.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = limits.max_connections + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
        except (ValueError, OSError):
            pass
    if soft != resource.RLIM_INFINITY and soft < want:
        cap = max(16, soft - 256)
        log.warning(
            "open-files limit %d: --max-connections lowered from %d to %d", soft, limits.max_connections, cap
        )
        return dataclasses.replace(limits, max_connections=cap)
    return limits


def uvicorn_config(
    app: ASGIApp,
    limits: ApiLimits,
    *,
    log_level: str = "info",
    tls_cert: str | None = None,
    tls_key: str | None = None,
    **kw: Any,
) -> tuple[uvicorn.Config, ConnectionGuard]:
    """The uvicorn configuration serving ``app`` under ``limits`` (optionally over TLS)."""
    protocol, guard = guarded_protocol(limits)
    config = uvicorn.Config(
        app,
        http=protocol,
        log_level=log_level,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
        timeout_keep_alive=max(1, round(limits.keepalive_seconds)),
        h11_max_incomplete_event_size=limits.max_header_bytes,
        ssl_certfile=tls_cert,
        ssl_keyfile=tls_key,
        **kw,
    )
    return config, guard


class _Server(uvicorn.Server):
    """uvicorn, calling ``on_shutdown`` before it waits for open connections.

    Result streams never end on their own; ending the subscriptions first (closing the
    live engine) lets them finish cleanly instead of being cancelled at the timeout.
    """

    def __init__(self, config: uvicorn.Config, on_shutdown: Callable[[], None] | None) -> None:
        super().__init__(config)
        self.on_shutdown = on_shutdown

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self.on_shutdown is not None:
            self.on_shutdown()
        await super().shutdown(sockets)


def serve(
    app: ASGIApp,
    host: str = "127.0.0.1",
    port: int = 8080,
    log_level: str = "info",
    on_shutdown: Callable[[], None] | None = None,
    *,
    limits: ApiLimits | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> None:
    """Runs uvicorn in the foreground until SIGINT/SIGTERM.

    Args:
        app: The ASGI application.
        host: Interface to bind.
        port: Port.
        log_level: uvicorn's log level.
        on_shutdown: Called when shutdown starts (e.g. ``LiveEngine.close``).
        limits: Connection limits (timeouts, cap, head size); the defaults if ``None``.
        tls_cert: PEM certificate chain: serve HTTPS (with ``tls_key``).
        tls_key: PEM private key of ``tls_cert``.
    """
    limits = raise_fd_limit(limits or ApiLimits())
    config, _ = uvicorn_config(
        app, limits, log_level=log_level, tls_cert=tls_cert, tls_key=tls_key, host=host, port=port
    )
    _Server(config, on_shutdown).run()


class BackgroundServer:
    """A real uvicorn server in a daemon thread, on a port chosen by the OS.

    Args:
        app: The ASGI application.
        host: Interface to bind.
        port: Port (0: a free one).
        on_shutdown: Called when shutdown starts (e.g. ``LiveEngine.close``).
        limits: Connection limits (timeouts, cap, head size); the defaults if ``None``.
        tls_cert: PEM certificate chain: serve HTTPS (with ``tls_key``).
        tls_key: PEM private key of ``tls_cert``.

    Example::

        with BackgroundServer(create_app(live), on_shutdown=live.close) as srv:
            httpx.get(srv.url + "/healthz")
    """

    def __init__(
        self,
        app: ASGIApp,
        host: str = "127.0.0.1",
        port: int = 0,
        on_shutdown: Callable[[], None] | None = None,
        *,
        limits: ApiLimits | None = None,
        tls_cert: str | None = None,
        tls_key: str | None = None,
    ) -> None:
        self.scheme = "https" if tls_cert else "http"
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()[:2]
        config, self.guard = uvicorn_config(
            app, limits or ApiLimits(), log_level="warning", lifespan="on", tls_cert=tls_cert, tls_key=tls_key
        )
        self.server = _Server(config, on_shutdown)
        self._thread = threading.Thread(target=self._run, name="linkstream-uvicorn", daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """``http(s)://host:port`` of the server."""
        return "%s://%s:%d" % (self.scheme, self.host, self.port)

    def _run(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=[self.sock]))
        except BaseException as e:  # reported by start()
            self._error = e

    def start(self, timeout: float = 30.0) -> BackgroundServer:
        """Starts the server and waits until it accepts connections.

        Raises:
            RuntimeError: The server did not start within ``timeout`` seconds.
        """
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start: %r" % (self._error,))
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start within %.0f s" % timeout)
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Asks the server to exit and waits for its thread."""
        self.server.should_exit = True
        self._thread.join(timeout)
        self.sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
