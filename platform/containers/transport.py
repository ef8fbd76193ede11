"""ZeroMQ PUSH/PULL channels carrying wire messages between operator containers.

One :class:`Sender` feeds one downstream partition; one :class:`Receiver` is the inbox of
a task partition and fair-queues every upstream sender connected to it.  By default the
receiver binds (``tcp://127.0.0.1:*`` picks a free port, see :attr:`Receiver.endpoint`)
and senders connect, so a receiver's address can be published in ZooKeeper before any
upstream exists.

Back-pressure.  Each side queues at most ``sndhwm`` / ``rcvhwm`` messages (plus what the
kernel's TCP buffers hold).  When the queues are full a send does not drop anything: it
waits up to its timeout for room and then reports back-pressure, by returning ``False``
from :meth:`Sender.offer` or raising :class:`BackPressure` from :meth:`Sender.send`; the
message was not queued and the caller still owns it.

Encryption.  With ``curve_keys=`` both ends speak CURVE (``zmq.auth`` keys); the binding
end is the CURVE server.  A server given ``authorized_clients`` runs a ZAP authenticator
(on a private context) and admits only those client public keys (any container with
``in``: a cluster's :class:`~linkstream.scheduler.keyring.KeyRing` reads ZooKeeper);
without it any client that knows the server's public key may connect.  Plaintext peers
never get through to a CURVE socket.  A server given ``on_reject`` also watches its
socket's handshakes and calls ``on_reject(reason)`` for each one refused:
``"unknown_key"`` (ZAP said no), ``"not_curve"`` (a plaintext or other-mechanism peer, or
one that hung up during the handshake: whichever side sees the mismatch first closes),
``"bad_handshake"`` (e.g. a client holding the wrong server key).  A refused CURVE client
is not retried by ZeroMQ; plaintext and wrong-key peers retry and are counted each time.

Sockets are not thread-safe: use each Sender/Receiver from one thread.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import zmq
import zmq.auth
from zmq.auth.thread import ThreadAuthenticator

from linkstream.containers.wire import Frame, Message, WireError, decode, encode, payload_bytes
from linkstream.rdma.curve import AllowList, watch_handshakes

logger = logging.getLogger(__name__)

DEFAULT_HWM = 1000
LOOPBACK_ANY = "tcp://127.0.0.1:*"


class BackPressure(TimeoutError):
    """The downstream queues stayed full for the whole send timeout; nothing was queued."""


@dataclass(frozen=True)
class CurveKeys:
    """CURVE key material of one socket (Z85-encoded, as ``zmq.curve_keypair`` returns).

    Attributes:
        public: This socket's public key.
        secret: This socket's secret key.
        server_public: Client side: the public key of the server it connects to.
        authorized_clients: Server side: public keys allowed in (``None``: any client
            completing the CURVE handshake, i.e. knowing the server's public key); any
            container answering ``key in authorized_clients`` (asked once per handshake).
        on_reject: Server side: called with the reason of every refused handshake (from a
            monitor thread); ``None`` watches nothing.
    """

    public: bytes
    secret: bytes = field(repr=False)
    server_public: bytes | None = None
    authorized_clients: Container[bytes] | None = None
    on_reject: Callable[[str], None] | None = field(default=None, compare=False)

    @staticmethod
    def keypair() -> tuple[bytes, bytes]:
        """A fresh ``(public, secret)`` pair."""
        return zmq.curve_keypair()

    @classmethod
    def from_files(
        cls,
        secret_file: str | Path,
        *,
        server_public_file: str | Path | None = None,
        authorized_client_files: Iterable[str | Path] | None = None,
    ) -> CurveKeys:
        """Loads keys from ``zmq.auth.create_certificates`` files.

        Args:
            secret_file: This socket's ``.key_secret`` certificate.
            server_public_file: Client side: the server's ``.key`` certificate.
            authorized_client_files: Server side: certificates of admitted clients.
        """
        public, secret = zmq.auth.load_certificate(secret_file)
        if secret is None:
            raise ValueError(f"{secret_file} holds no secret key")
        server_public = None
        if server_public_file is not None:
            server_public, _ = zmq.auth.load_certificate(server_public_file)
        authorized = None
        if authorized_client_files is not None:
            authorized = frozenset(zmq.auth.load_certificate(f)[0] for f in authorized_client_files)
        return cls(public, secret, server_public, authorized)


class _Endpoint:
    """A socket plus the context it lives on and, for a CURVE server, its authenticator."""

    def __init__(
        self,
        kind: int,
        endpoint: str,
        *,
        bind: bool,
        linger_ms: int,
        curve_keys: CurveKeys | None,
        context: zmq.Context | None,
        options: dict[int, int],
    ) -> None:
        self._own_context = False
        self._auth: ThreadAuthenticator | None = None
        if curve_keys is not None and bind and curve_keys.authorized_clients is not None:
            # A ZAP handler serves a whole context; a private one keeps it to this socket.
            context = zmq.Context()
            self._own_context = True
            self._auth = ThreadAuthenticator(context, log=logger.getChild("zap"))
            self._auth.start()
            self._auth.configure_curve_callback("*", AllowList(curve_keys.authorized_clients, endpoint))
        self.context = context if context is not None else zmq.Context.instance()
        self.socket = self.context.socket(kind)
        try:
            self.socket.setsockopt(zmq.LINGER, linger_ms)
            for opt, value in options.items():
                self.socket.setsockopt(opt, value)
            if curve_keys is not None:
                self._apply_curve(curve_keys, server=bind)
            if curve_keys is not None and bind and curve_keys.on_reject is not None:
                self._watch_handshakes(curve_keys.on_reject, f"CURVE server {endpoint}")
            if bind:
                self.socket.bind(endpoint)
                self.endpoint = self.socket.getsockopt_string(zmq.LAST_ENDPOINT)
            else:
                self.socket.connect(endpoint)
                self.endpoint = endpoint
        except BaseException:
            self.close(0)
            raise
        self.poller = zmq.Poller()

    def _apply_curve(self, keys: CurveKeys, *, server: bool) -> None:
        self.socket.curve_secretkey = keys.secret
        self.socket.curve_publickey = keys.public
        if server:
            self.socket.curve_server = True
        else:
            if keys.server_public is None:
                raise ValueError("a connecting CURVE socket needs the server's public key")
            self.socket.curve_serverkey = keys.server_public

    def _watch_handshakes(self, on_reject: Callable[[str], None], where: str) -> None:
        """Starts a thread calling ``on_reject(reason)`` for every refused handshake."""
        events = zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
        events |= zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
        monitor = self.socket.get_monitor_socket(events)
        self._monitor_stop = threading.Event()
        self._monitor = threading.Thread(
            target=watch_handshakes,
            args=(monitor, on_reject, self._monitor_stop, where),
            name="zmq-handshakes",
            daemon=True,
        )
        self._monitor.start()

    def close(self, linger_ms: int | None) -> None:
        if self.socket.closed:
            return
        monitor = getattr(self, "_monitor", None)
        if monitor is not None:
            try:
                self.socket.disable_monitor()
            except zmq.ZMQError:
                pass
            self._monitor_stop.set()
            monitor.join(5)
        self.socket.close(linger=linger_ms)
        if self._auth is not None:
            self._auth.stop()
        if self._own_context:
            self.context.term()


def _timeout_ms(deadline: float | None) -> int | None:
    if deadline is None:
        return None
    return max(0, int((deadline - time.monotonic()) * 1000))


class _Channel:
    """What both channel ends share: one :class:`_Endpoint`, polled for ``poll_flag``."""

    def __init__(
        self,
        kind: int,
        endpoint: str,
        *,
        bind: bool,
        linger_ms: int,
        curve_keys: CurveKeys | None,
        context: zmq.Context | None,
        options: dict[int, int],
        poll_flag: int,
        copy: bool,
    ) -> None:
        self._ep = _Endpoint(
            kind,
            endpoint,
            bind=bind,
            linger_ms=linger_ms,
            curve_keys=curve_keys,
            context=context,
            options=options,
        )
        self._ep.poller.register(self._ep.socket, poll_flag)
        self.copy = copy

    @property
    def endpoint(self) -> str:
        """The endpoint connected to, or bound with its port resolved."""
        return self._ep.endpoint

    @property
    def socket(self) -> zmq.Socket:
        """The underlying socket (for monitoring; do not send or receive on it directly)."""
        return self._ep.socket

    def close(self, linger_ms: int | None = None) -> None:
        """Closes the socket; a sender flushes queued messages for up to ``linger_ms``
        (default: the constructor's), a receiver discards unreceived ones."""
        self._ep.close(linger_ms)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class SenderStats:
    """Counters of one sender."""

    messages: int = 0
    bytes: int = 0
    backpressure: int = 0


class Sender(_Channel):
    """PUSH end of a channel: queues wire messages for one downstream partition.

    Args:
        endpoint: Where to connect (or bind, with ``bind=True``).
        bind: Bind instead of connect (then this end is the CURVE server).
        sndhwm: Messages queued at most on this side before sends wait.
        linger_ms: How long :meth:`close` may keep flushing queued messages.
        curve_keys: CURVE keys; ``None`` for a plaintext channel.
        context: ZeroMQ context (default: the process-wide instance).
        copy: ``False`` hands array buffers to ZeroMQ without copying them.
        sndbuf: Kernel send buffer size in bytes (``None``: the OS default).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        bind: bool = False,
        sndhwm: int = DEFAULT_HWM,
        linger_ms: int = 1000,
        curve_keys: CurveKeys | None = None,
        context: zmq.Context | None = None,
        copy: bool = False,
        sndbuf: int | None = None,
    ) -> None:
        options: dict[int, int] = {zmq.SNDHWM: sndhwm}
        if sndbuf is not None:
            options[zmq.SNDBUF] = sndbuf
        super().__init__(
            zmq.PUSH,
            endpoint,
            bind=bind,
            linger_ms=linger_ms,
            curve_keys=curve_keys,
            context=context,
            options=options,
            poll_flag=zmq.POLLOUT,
            copy=copy,
        )
        self.stats = SenderStats()

    def offer_frames(self, frames: Sequence[Frame], timeout: float | None = 0.0) -> bool:
        """Queues one multipart message if there is room within ``timeout`` seconds.

        Args:
            frames: The message's frames.
            timeout: Seconds to wait for room; ``None`` waits as long as it takes.

        Returns:
            ``True`` once queued; ``False`` on back-pressure (nothing was queued).
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        sock = self._ep.socket
        while True:
            try:
                sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=self.copy)
            except zmq.Again:
                remaining = _timeout_ms(deadline)
                if remaining == 0:
                    self.stats.backpressure += 1
                    return False
                self._ep.poller.poll(remaining)
                continue
            self.stats.messages += 1
            self.stats.bytes += payload_bytes(frames)
            return True

    def offer(self, message: Message, timeout: float | None = 0.0) -> bool:
        """Encodes and queues ``message``; ``False`` reports back-pressure (see :meth:`offer_frames`)."""
        return self.offer_frames(encode(message), timeout)

    def send(self, message: Message, timeout: float | None = None) -> None:
        """Encodes and queues ``message``, waiting up to ``timeout`` seconds for room.

        Raises:
            BackPressure: The queues stayed full for ``timeout`` seconds.
            WireError: ``message`` cannot be encoded.
        """
        if not self.offer(message, timeout):
            raise BackPressure(f"{self.endpoint}: no room for {timeout} s (HWM reached)")


@dataclass
class ReceiverStats:
    """Counters of one receiver."""

    messages: int = 0
    bytes: int = 0
    rejected: int = 0
    last_error: str | None = field(default=None, repr=False)


class Receiver(_Channel):
    """PULL end of a channel: the inbox of one task partition.

    Malformed messages are logged, counted in ``stats.rejected`` and skipped; they never
    raise out of :meth:`recv`.

    Args:
        endpoint: Where to bind (default: a free loopback port), or connect with
            ``bind=False``.
        bind: Bind (the default; then this end is the CURVE server) or connect.
        rcvhwm: Messages queued at most on this side before senders wait.
        linger_ms: Linger of the socket at close.
        curve_keys: CURVE keys; ``None`` for a plaintext channel.
        context: ZeroMQ context (default: the process-wide instance).
        copy: ``False`` receives frames without copying them out of ZeroMQ.
        rcvbuf: Kernel receive buffer size in bytes (``None``: the OS default).
    """

    def __init__(
        self,
        endpoint: str = LOOPBACK_ANY,
        *,
        bind: bool = True,
        rcvhwm: int = DEFAULT_HWM,
        linger_ms: int = 0,
        curve_keys: CurveKeys | None = None,
        context: zmq.Context | None = None,
        copy: bool = False,
        rcvbuf: int | None = None,
    ) -> None:
        options: dict[int, int] = {zmq.RCVHWM: rcvhwm}
        if rcvbuf is not None:
            options[zmq.RCVBUF] = rcvbuf
        super().__init__(
            zmq.PULL,
            endpoint,
            bind=bind,
            linger_ms=linger_ms,
            curve_keys=curve_keys,
            context=context,
            options=options,
            poll_flag=zmq.POLLIN,
            copy=copy,
        )
        self.stats = ReceiverStats()

    def recv_frames(self, timeout: float | None = None) -> list[Frame] | None:
        """The next raw multipart message, or ``None`` if none arrived within ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        sock = self._ep.socket
        while True:
            try:
                return sock.recv_multipart(flags=zmq.NOBLOCK, copy=self.copy)
            except zmq.Again:
                remaining = _timeout_ms(deadline)
                if remaining == 0:
                    return None
                self._ep.poller.poll(remaining)

    def recv(self, timeout: float | None = None) -> Message | None:
        """The next well-formed message, or ``None`` if none arrived within ``timeout`` s.

        Args:
            timeout: Seconds to wait; ``None`` waits as long as it takes.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            frames = self.recv_frames(remaining)
            if frames is None:
                return None
            try:
                message = decode(frames)
            except WireError as exc:
                self.stats.rejected += 1
                self.stats.last_error = str(exc)
                logger.warning("%s: rejected malformed message: %s", self.endpoint, exc)
                continue
            self.stats.messages += 1
            self.stats.bytes += payload_bytes(frames)
            return message

    def run(
        self,
        handler: Callable[[Message], bool | None],
        *,
        stop: threading.Event | None = None,
        idle_timeout: float | None = None,
        poll_interval: float = 0.1,
    ) -> int:
        """Feeds messages to ``handler`` until it returns ``True``, ``stop`` is set, or no
        message arrives for ``idle_timeout`` seconds.

        Args:
            handler: Called with each message; a ``True`` result ends the loop.
            stop: Set from another thread to end the loop within ``poll_interval``.
            idle_timeout: Seconds of silence after which the loop ends (``None``: never).
            poll_interval: Granularity of the ``stop`` checks.

        Returns:
            The number of messages handled.
        """
        handled = 0
        idle_since = time.monotonic()
        while stop is None or not stop.is_set():
            message = self.recv(poll_interval)
            if message is None:
                if idle_timeout is not None and time.monotonic() - idle_since >= idle_timeout:
                    break
                continue
            idle_since = time.monotonic()
            handled += 1
            if handler(message):
                break
        return handled
