"""TCP fallback for remote regions: a ZeroMQ ROUTER answers read requests.

Used between hosts without RDMA.  A request is one msgpack header listing
``[region, start, stop]`` reads; the reply is a msgpack header plus one raw frame per
read, sent zero-copy from the published array.  Requests are validated field by field
(they come from the network); a bad request gets an error reply, never a crash.

With ``curve=`` (:mod:`.curve`) the server is a CURVE server admitting only the client
keys its allow-list holds, and the reader a CURVE client; its descriptor's endpoint then
carries the server's public key (``curve``) for readers to check.
"""

from __future__ import annotations

import logging
import mmap
import threading
from collections.abc import Mapping

import msgpack
import numpy as np
import zmq

from linkstream.rdma.curve import CurveSpec, ServerSocket, client_socket
from linkstream.rdma.regions import (
    RegionDescriptor,
    RegionError,
    RegionInfo,
    Transport,
    as_region,
    check_range,
    register,
)

log = logging.getLogger(__name__)

#: most reads one request may carry
MAX_READS = 4096


def _parse_request(frame: bytes, regions: Mapping[str, RegionInfo]) -> list[tuple[str, int, int]]:
    try:
        h = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except Exception as e:  # noqa: BLE001 - any undecodable input is a bad request
        raise RegionError(f"request is not msgpack: {e}") from None
    reads = h.get("reads") if isinstance(h, dict) else None
    if not isinstance(reads, list) or len(reads) > MAX_READS:
        raise RegionError(f"request needs 'reads': a list of at most {MAX_READS} [region, start, stop]")
    out = []
    for r in reads:
        if not (isinstance(r, list) and len(r) == 3 and isinstance(r[0], str)):
            raise RegionError("each read is [region, start, stop]")
        name, start, stop = r
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, stop)):
            raise RegionError("start and stop must be integers")
        info = regions.get(name)
        if info is None:
            raise RegionError(f"unknown region {name!r}")
        check_range(info, name, start, stop)
        out.append((name, start, stop))
    return out


def _read_only_mapping(a: np.ndarray) -> bool:
    """Whether ``a`` views a read-only memory mapping (``np.load(..., mmap_mode="r")``):
    nothing can change its bytes, so publishing it needs no copy."""
    if a.flags.writeable:
        return False
    base = a.base
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return isinstance(base, mmap.mmap)


class TcpServer:
    """Serves published arrays to :class:`TcpReader` clients from a background thread."""

    def __init__(self, bind: str = "tcp://127.0.0.1:*", curve: CurveSpec | None = None) -> None:
        self._server = ServerSocket(zmq.ROUTER, bind, curve, "region server (tcp)")
        self._sock = self._server.socket
        self.endpoint: str = self._server.endpoint
        self.curve = curve.public.decode("ascii") if curve is not None else ""
        self._arrays: dict[str, np.ndarray] = {}
        self._infos: dict[str, RegionInfo] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests = 0
        self._thread = threading.Thread(target=self._serve, name="region-tcp-server", daemon=True)
        self._thread.start()

    def publish(self, name: str, array: np.ndarray) -> None:
        a = as_region(array)
        if not _read_only_mapping(a):  # a read-only file mapping is served in place
            a = a.copy()
        a.flags.writeable = False
        with self._lock:
            if name in self._infos:
                raise RegionError(f"region {name!r} is already published")
            self._arrays[name] = a
            self._infos[name] = RegionInfo(a.dtype.str, len(a), {})

    def descriptor(self) -> RegionDescriptor:
        with self._lock:
            endpoint = {"address": self.endpoint, **({"curve": self.curve} if self.curve else {})}
            return RegionDescriptor("tcp", endpoint, dict(self._infos))

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(100):
                continue
            try:
                frames = self._sock.recv_multipart(copy=True)
            except zmq.ZMQError:
                break
            ident, body = frames[0], frames[-1]
            with self._lock:
                infos = dict(self._infos)
                arrays = dict(self._arrays)
            try:
                reads = _parse_request(body, infos)
            except RegionError as e:
                log.warning("bad region request: %s", e)
                self._sock.send_multipart([ident, b"", msgpack.packb({"error": str(e)})])
                continue
            self.requests += 1
            # ``a.data`` is ``memoryview(a)`` (numpy types the buffer protocol only for Python >= 3.12)
            parts = [arrays[n][a:b].data for n, a, b in reads]
            header = msgpack.packb({"ok": True, "n": len(parts)})
            self._sock.send_multipart([ident, b"", header, *parts], copy=False)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()


class TcpReader:
    """Reads slices of a :class:`TcpServer`'s regions (one round trip per ``read_many``).

    Args:
        descriptor: The server's descriptor.
        timeout_s: Seconds an answer may take.
        curve: Client keys (with the server's public key) for a CURVE server.
    """

    def __init__(
        self, descriptor: RegionDescriptor, timeout_s: float = 10.0, curve: CurveSpec | None = None
    ) -> None:
        address = descriptor.endpoint.get("address")
        if not isinstance(address, str) or not address.startswith("tcp://"):
            raise RegionError("tcp descriptor needs endpoint.address = tcp://HOST:PORT")
        self.regions: Mapping[str, RegionInfo] = descriptor.regions
        if curve is None and descriptor.endpoint.get("curve"):
            raise RegionError(f"region server {address} speaks CURVE: a reader needs client keys")
        self.address = address
        try:
            self._sock = client_socket(zmq.REQ, address, curve, int(timeout_s * 1000))
        except ValueError as e:
            raise RegionError(str(e)) from None

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        return self.read_many([(name, start, stop)])[0]

    def read_many(self, requests: list[tuple[str, int, int]]) -> list[np.ndarray]:
        for n, a, b in requests:
            info = self.regions.get(n)
            if info is None:
                raise RegionError(f"unknown region {n!r}")
            check_range(info, n, a, b)
        self._sock.send(msgpack.packb({"reads": [[n, a, b] for n, a, b in requests]}))
        try:
            frames = self._sock.recv_multipart(copy=False)
        except zmq.Again:
            raise RegionError(
                f"region server {self.address} did not answer in time"
                " (down, or it refused this reader's CURVE key)"
            ) from None
        header = msgpack.unpackb(frames[0].bytes, raw=False)
        if not header.get("ok"):
            raise RegionError(f"region server: {header.get('error', 'error')}")
        bodies = frames[1:]
        if len(bodies) != len(requests):
            raise RegionError("region server answered a different number of reads")
        out = []
        for (n, a, b), f in zip(requests, bodies):
            info = self.regions[n]
            buf = f.buffer
            if len(buf) != (b - a) * info.itemsize:
                raise RegionError(
                    f"region {n!r}: reply has {len(buf)} bytes, expected {(b - a) * info.itemsize}"
                )
            out.append(np.frombuffer(buf, dtype=np.dtype(info.dtype)).copy())
        return out

    def close(self) -> None:
        self._sock.close(0)


def _available() -> tuple[bool, str]:
    return True, "ZeroMQ over TCP"


register(Transport("tcp", TcpServer, TcpReader, _available, rank=2))
