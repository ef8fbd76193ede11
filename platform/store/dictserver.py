"""A store's dictionary served to other hosts by its store node (read only).

Readers on the store node's host open the LMDB dictionary directly; others ask the node.
:class:`DictionaryServer` answers two requests on a ZeroMQ ROUTER socket, each a msgpack
header (and, for ``decode``, one raw buffer of little-endian int64 ids):

* ``{"op": "lookup", "terms": [str, ...]}`` -> header ``{"ok": true, "n": k}`` + a raw
  int64 buffer of the ids (``0`` for a term the dictionary does not hold);
* ``{"op": "decode"}`` + ids buffer -> ``{"ok": true, "terms": [str, ...]}``;
* ``{"op": "len"}`` -> ``{"ok": true, "len": n}``.

Requests are checked field by field (they come from the network); a bad one gets
``{"error": "..."}``, never a crash.  Nothing is ever written to the dictionary.
:class:`RemoteDictionary` is the client: the ``lookup_many`` / ``decode_many`` / ``len``
part of the :class:`~linkstream.rdf.dictionary.Dictionary` protocol, with a memo of the
answers (a served dictionary does not change while its node runs).

With ``curve=`` (:mod:`linkstream.rdma.curve`: the cluster's keys, passed down by the
command line) the server is a CURVE server admitting only the cluster's published keys
and the client a CURVE client holding the node's advertised public key.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np
import zmq

from linkstream.rdf.dictionary import Dictionary
from linkstream.rdma.curve import CurveSpec, ServerSocket, client_socket

log = logging.getLogger(__name__)

#: most terms or ids one request may carry
MAX_ITEMS = 1 << 20
#: memo entries a client keeps before starting over
MEMO_MAX = 1 << 20


class DictionaryError(ValueError):
    """A dictionary request or answer is malformed, or the server does not answer."""


def _answer(d: Dictionary, frames: list[bytes]) -> list[bytes]:
    try:
        h = msgpack.unpackb(frames[0], raw=False, strict_map_key=True)
    except Exception as e:  # noqa: BLE001 - any undecodable input is a bad request
        raise DictionaryError(f"request is not msgpack: {e}") from None
    op = h.get("op") if isinstance(h, dict) else None
    if op == "len":
        return [msgpack.packb({"ok": True, "len": len(d)})]
    if op == "lookup":
        terms = h.get("terms")
        if (
            not isinstance(terms, list)
            or len(terms) > MAX_ITEMS
            or not all(isinstance(t, str) for t in terms)
        ):
            raise DictionaryError(f"lookup needs 'terms': a list of at most {MAX_ITEMS} strings")
        ids = np.ascontiguousarray(d.lookup_many(terms), dtype="<i8")
        return [msgpack.packb({"ok": True, "n": len(ids)}), ids.tobytes()]
    if op == "decode":
        if len(frames) != 2 or len(frames[1]) % 8 or len(frames[1]) // 8 > MAX_ITEMS:
            raise DictionaryError(f"decode needs one buffer of at most {MAX_ITEMS} int64 ids")
        ids = np.frombuffer(frames[1], dtype="<i8")
        n = len(d)
        if len(ids) and (int(ids.min()) <= 0 or int(ids.max()) > n):
            raise DictionaryError(f"ids outside the dictionary's 1..{n}")
        try:
            terms = d.decode_many(ids)
        except KeyError as e:
            raise DictionaryError(f"unknown id {e}") from None
        return [msgpack.packb({"ok": True, "terms": list(terms)})]
    raise DictionaryError("op must be 'lookup', 'decode' or 'len'")


class DictionaryServer:
    """Serves ``dictionary`` (read only) from a background thread; :attr:`endpoint` is its address."""

    def __init__(
        self, dictionary: Dictionary, bind: str = "tcp://127.0.0.1:*", curve: CurveSpec | None = None
    ) -> None:
        self._d = dictionary
        self._server = ServerSocket(zmq.ROUTER, bind, curve, "dictionary server")
        self._sock: Any = self._server.socket
        self.endpoint: str = self._server.endpoint
        self._stop = threading.Event()
        self.requests = 0
        self._thread = threading.Thread(target=self._serve, name="dictionary-server", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(100):
                continue
            try:
                frames = self._sock.recv_multipart()
            except zmq.ZMQError:
                break
            ident, body = frames[0], frames[2:] if len(frames) > 2 and frames[1] == b"" else frames[1:]
            try:
                if not body:
                    raise DictionaryError("empty request")
                reply = _answer(self._d, body)
                self.requests += 1
            except DictionaryError as e:
                log.warning("bad dictionary request: %s", e)
                reply = [msgpack.packb({"error": str(e)})]
            except Exception as e:  # noqa: BLE001 - a failing backend answers, never kills the node
                log.error("dictionary request failed: %s", e)
                reply = [msgpack.packb({"error": f"{type(e).__name__}: {e}"})]
            self._sock.send_multipart([ident, b"", *reply])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._server.close()


class RemoteDictionary:
    """A store node's dictionary read over :class:`DictionaryServer` (read only).

    Args:
        address: ``tcp://HOST:PORT`` of the server.
        timeout_s: Seconds to wait for an answer.
        curve: Client keys (with the server's public key) for a CURVE server.
    """

    def __init__(self, address: str, timeout_s: float = 10.0, curve: CurveSpec | None = None) -> None:
        if not address.startswith("tcp://"):
            raise DictionaryError(f"dictionary address must be tcp://HOST:PORT, got {address!r}")
        self.address = address
        self._curve = curve
        self._timeout_ms = int(timeout_s * 1000)
        self._lock = threading.Lock()
        self._sock: Any = None
        self._ids: dict[str, int] = {}
        self._terms: dict[int, str] = {}
        self._len: int | None = None
        self.requests = 0

    def _socket(self) -> Any:
        if self._sock is None:
            try:
                self._sock = client_socket(zmq.REQ, self.address, self._curve, self._timeout_ms)
            except ValueError as e:
                raise DictionaryError(str(e)) from None
        return self._sock

    def _ask(self, header: dict[str, Any], payload: bytes | None = None) -> list[bytes]:
        with self._lock:
            sock = self._socket()
            parts = [msgpack.packb(header)] + ([payload] if payload is not None else [])
            try:
                sock.send_multipart(parts)
                frames = sock.recv_multipart()
            except zmq.Again:
                sock.close(0)  # a REQ socket that missed its answer cannot be reused
                self._sock = None
                raise DictionaryError(
                    f"dictionary server {self.address} did not answer in time"
                    " (down, or it refused this reader's CURVE key)"
                ) from None
            self.requests += 1
        h = msgpack.unpackb(frames[0], raw=False)
        if not isinstance(h, dict) or not h.get("ok"):
            err = h.get("error", "error") if isinstance(h, dict) else "malformed answer"
            raise DictionaryError(f"dictionary server {self.address}: {err}")
        return list(frames)

    def _memo(self) -> None:
        if len(self._ids) + len(self._terms) > MEMO_MAX:
            self._ids.clear()
            self._terms.clear()

    def lookup_many(self, terms: Sequence[str]) -> np.ndarray:
        terms = list(terms)
        out = np.zeros(len(terms), dtype=np.int64)
        todo = [k for k, t in enumerate(terms) if t not in self._ids]
        if todo:
            ask = list(dict.fromkeys(terms[k] for k in todo))
            frames = self._ask({"op": "lookup", "terms": ask})
            if len(frames) != 2 or len(frames[1]) != 8 * len(ask):
                raise DictionaryError(f"dictionary server {self.address}: malformed lookup answer")
            self._memo()
            self._ids.update(zip(ask, np.frombuffer(frames[1], dtype="<i8").tolist()))
        for k, t in enumerate(terms):
            out[k] = self._ids[t]
        return out

    def decode_many(self, ids: np.ndarray | Sequence[int]) -> list[str]:
        a = np.asarray(ids, dtype=np.int64).reshape(-1)
        todo = sorted({i for i in a.tolist() if i not in self._terms})
        if todo:
            frames = self._ask({"op": "decode"}, np.asarray(todo, dtype="<i8").tobytes())
            got = msgpack.unpackb(frames[0], raw=False).get("terms")
            if not isinstance(got, list) or len(got) != len(todo):
                raise DictionaryError(f"dictionary server {self.address}: malformed decode answer")
            self._memo()
            self._terms.update(zip(todo, got))
        return [self._terms[i] for i in a.tolist()]

    def encode_many(self, terms: Sequence[str]) -> np.ndarray:
        raise DictionaryError("a store node's dictionary is read only (look terms up instead)")

    def __len__(self) -> int:
        if self._len is None:
            h = msgpack.unpackb(self._ask({"op": "len"})[0], raw=False)
            self._len = int(h["len"])
        return self._len

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close(0)
                self._sock = None


__all__ = ["DictionaryError", "DictionaryServer", "RemoteDictionary"]
