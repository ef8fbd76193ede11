"""CURVE for the ZeroMQ sockets of this layer (the TCP region server, the dictionary server).

The key material comes from above as a plain object with the attributes of
:class:`CurveSpec` -- the cluster layer's ``CurveKeys`` (``Security.server()`` /
``Security.client()``) has exactly them -- so this layer never learns where keys come
from (ZooKeeper, files).  ``None`` means plaintext (``--insecure``).

A server socket with ``authorized_clients`` gets a private context with a ZAP handler
admitting only the client public keys the container holds (asked once per handshake);
with ``on_reject`` a monitor thread reports every refused handshake by reason:
``"unknown_key"`` (ZAP said no), ``"not_curve"`` (a plaintext or other-mechanism peer),
``"bad_handshake"`` (e.g. a client holding the wrong server key).  Plaintext peers never
get through to a CURVE socket.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Container
from typing import Any, Protocol

import zmq
from zmq.auth.thread import ThreadAuthenticator
from zmq.utils.monitor import recv_monitor_message

log = logging.getLogger(__name__)


class CurveSpec(Protocol):
    """CURVE keys of one socket (Z85 bytes), as the cluster's ``CurveKeys`` holds them."""

    @property
    def public(self) -> bytes: ...
    @property
    def secret(self) -> bytes: ...
    @property
    def server_public(self) -> bytes | None: ...
    @property
    def authorized_clients(self) -> Container[bytes] | None: ...
    @property
    def on_reject(self) -> Callable[[str], None] | None: ...


class AllowList:
    """ZAP credentials provider admitting the client keys ``keys`` contains."""

    def __init__(self, keys: Container[bytes], where: str) -> None:
        self._keys, self._where = keys, where

    def callback(self, domain: str, key: bytes) -> bool:
        ok = key in self._keys
        if not ok:
            log.warning(
                "%s: CURVE client %s refused (not a cluster key)", self._where, key.decode("ascii", "replace")
            )
        return ok


def handshake_reason(event: int, value: int) -> str:
    """Why a CURVE server refused a handshake, from its monitor event: ``unknown_key``,
    ``not_curve`` (a plaintext peer) or ``bad_handshake``."""
    if event == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
        return "unknown_key"
    if event == zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        return "not_curve"  # the peer hung up mid-handshake: a plaintext peer
    if event == zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL and value in (
        zmq.PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH,
        zmq.PROTOCOL_ERROR_ZMTP_UNEXPECTED_COMMAND,
        zmq.PROTOCOL_ERROR_ZMTP_INVALID_SEQUENCE,
    ):
        return "not_curve"
    return "bad_handshake"


def watch_handshakes(
    monitor: Any, on_reject: Callable[[str], None] | None, stop: threading.Event, where: str
) -> None:
    """The monitor thread of one CURVE server socket (owns ``monitor`` from here on): counts
    each refused handshake through ``on_reject`` and logs one now and then."""
    said = 0.0
    try:
        while not stop.is_set():
            if not monitor.poll(100):
                continue
            try:
                msg = recv_monitor_message(monitor)
            except zmq.ZMQError:
                return
            reason = handshake_reason(int(msg["event"]), int(msg["value"]))
            if on_reject is not None:
                try:
                    on_reject(reason)
                except Exception:  # noqa: BLE001 - counting must never end the watch
                    log.debug("on_reject failed", exc_info=True)
            now = time.monotonic()
            if now - said > 10.0:  # plaintext peers retry ten times a second: say it now and then
                said = now
                log.warning("%s: handshake refused: %s", where, reason)
    finally:
        monitor.close(linger=0)


class ServerSocket:
    """A bound socket, a CURVE server when ``keys`` is given (see the module).

    Args:
        kind: ZeroMQ socket type (``zmq.ROUTER``).
        bind: Endpoint to bind.
        keys: Server keys (``public``, ``secret``, optional ``authorized_clients`` and
            ``on_reject``), or ``None`` for plaintext.
        where: Names the socket in log lines (``"store node tcp"``).

    Attributes:
        socket: The socket (use from one thread).
        endpoint: The bound endpoint.
    """

    def __init__(self, kind: int, bind: str, keys: CurveSpec | None, where: str) -> None:
        self._own = False
        self._auth: ThreadAuthenticator | None = None
        self._monitor: threading.Thread | None = None
        self._stop = threading.Event()
        ctx: Any = zmq.Context.instance()
        if keys is not None and keys.authorized_clients is not None:
            ctx = zmq.Context()  # a ZAP handler serves a whole context: keep it to this socket
            self._own = True
            self._auth = ThreadAuthenticator(ctx, log=log.getChild("zap"))
            self._auth.start()
            self._auth.configure_curve_callback("*", AllowList(keys.authorized_clients, where))
        self._ctx = ctx
        self.socket: Any = ctx.socket(kind)
        try:
            self.socket.setsockopt(zmq.LINGER, 0)
            if keys is not None:
                self.socket.curve_secretkey = keys.secret
                self.socket.curve_publickey = keys.public
                self.socket.curve_server = True
                events = zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                events |= zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                monitor = self.socket.get_monitor_socket(events)
                self._monitor = threading.Thread(
                    target=watch_handshakes,
                    args=(monitor, keys.on_reject, self._stop, where),
                    name="zmq-handshakes",
                    daemon=True,
                )
                self._monitor.start()
            self.socket.bind(bind)
            self.endpoint: str = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if not self.socket.closed:
            if self._monitor is not None:
                try:
                    self.socket.disable_monitor()
                except zmq.ZMQError:
                    pass
                self._stop.set()
                self._monitor.join(5)
            self.socket.close(0)
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
        if self._own:
            self._own = False
            self._ctx.term()


def client_socket(kind: int, address: str, keys: CurveSpec | None, timeout_ms: int) -> Any:
    """A socket connected to ``address``: a CURVE client when ``keys`` is given.

    Raises:
        ValueError: ``keys`` lacks the server's public key.
    """
    s: Any = zmq.Context.instance().socket(kind)
    s.linger = 0
    s.rcvtimeo = s.sndtimeo = timeout_ms
    if keys is not None:
        if not keys.server_public:
            s.close(0)
            raise ValueError(f"{address}: a CURVE client needs the server's public key")
        s.curve_secretkey = keys.secret
        s.curve_publickey = keys.public
        s.curve_serverkey = keys.server_public
    s.connect(address)
    return s


__all__ = ["CurveSpec", "ServerSocket", "client_socket"]
