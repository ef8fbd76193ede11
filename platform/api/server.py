"""Serving the API with uvicorn: in the foreground (``linkstream run``) or in a thread.

:func:`build_live` makes the engine a server runs (dictionary, static graphs, timing
options); :func:`serve` runs uvicorn until interrupted; :class:`BackgroundServer` runs a
real uvicorn server on a free 127.0.0.1 port in a thread, for tests and embedding.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Sequence

import uvicorn
from starlette.types import ASGIApp

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
        engine.store = opened  # type: ignore[attr-defined]
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
) -> None:
    """Runs uvicorn in the foreground until SIGINT/SIGTERM.

    Args:
        app: The ASGI application.
        host: Interface to bind.
        port: Port.
        log_level: uvicorn's log level.
        on_shutdown: Called when shutdown starts (e.g. ``LiveEngine.close``).
    """
    config = uvicorn.Config(
        app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S
    )
    _Server(config, on_shutdown).run()


class BackgroundServer:
    """A real uvicorn server in a daemon thread, on a port chosen by the OS.

    Args:
        app: The ASGI application.
        host: Interface to bind.
        port: Port (0: a free one).
        on_shutdown: Called when shutdown starts (e.g. ``LiveEngine.close``).

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
    ) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((host, port))
        self.host, self.port = self.sock.getsockname()[:2]
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S
        )
        self.server = _Server(config, on_shutdown)
        self._thread = threading.Thread(target=self._run, name="linkstream-uvicorn", daemon=True)
        self._error: BaseException | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` of the server."""
        return "http://%s:%d" % (self.host, self.port)

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
