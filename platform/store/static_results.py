"""Stored results of static sub-joins (the static part of continuous queries).

The static part of a continuous query -- the patterns that read only static graphs -- is
evaluated once and its result kept here, encoded, under a key derived from its
*signature*: the canonical static sub-join plus a fingerprint of the content of the
static graphs it reads.  Every query (and every engine using the same store) with that
signature loads the result instead of evaluating it again; when a static graph changes
its fingerprint changes, so a result of an older graph content is never served.

Backends are chosen by URI, like dictionaries:

* ``memory:``                 -- in-process (the default of an engine without a path);
* ``lmdb:PATH``               -- an LMDB environment (the default next to an LMDB dictionary);
* ``hbase://HOST:PORT/TABLE`` -- an HBase table through the Thrift 1 gateway (happybase),
  shared by a cluster.

Encoding of one result: a msgpack header (format, variables, row count, chunk layout and
the full signature text, compared on every read so a digest collision is never served)
followed by chunks, each the raw little-endian int64 buffer of a ``(k + 1, m)`` array --
the ``k`` variable columns and the count column of ``m`` consecutive rows.  Chunks keep
every stored value (an HBase cell) below a bounded size for large results.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable
from urllib.parse import parse_qs, unquote, urlsplit

import msgpack
import numpy as np

from linkstream.rdf.records import record

log = logging.getLogger(__name__)

FORMAT = "linkstream-static-result"
FORMAT_VERSION = 1
#: bytes of column data per chunk (HBase's default cell size limit is 10 MiB)
CHUNK_BYTES = 2 << 20
_I64 = np.dtype("<i8")


@record(frozen=True)
class StaticResult:
    """A static sub-join's result: variable columns and signed multiplicities.

    Attributes:
        vars: variable names, one per row of ``cols``.
        cols: ``(len(vars), n)`` int64 dictionary ids (0 = unbound).
        counts: ``(n,)`` int64 multiplicities.
    """

    vars: tuple[str, ...]
    cols: np.ndarray
    counts: np.ndarray

    def __len__(self) -> int:
        return int(self.counts.shape[0])


def signature_key(signature: str) -> bytes:
    """The 32-byte store key of a signature text."""
    return hashlib.blake2b(signature.encode("utf-8"), digest_size=32).digest()


def encode_result(
    signature: str, result: StaticResult, chunk_bytes: int = CHUNK_BYTES
) -> tuple[bytes, list[bytes]]:
    """Encode ``result`` as a msgpack header and raw int64 chunks.

    Args:
        signature: the full signature text (stored to detect key collisions).
        result: what to encode.
        chunk_bytes: at most this many bytes of column data per chunk.

    Returns:
        ``(header, chunks)``.
    """
    k = len(result.vars)
    n = len(result)
    data = np.empty((k + 1, n), dtype=_I64)
    data[:k] = result.cols
    data[k] = result.counts
    per = max(1, chunk_bytes // (8 * (k + 1)))
    chunks = [np.ascontiguousarray(data[:, a : a + per]).tobytes() for a in range(0, n, per)]
    header = msgpack.packb(
        {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "signature": signature,
            "vars": list(result.vars),
            "rows": n,
            "chunk_rows": per,
            "chunks": len(chunks),
        }
    )
    return header, chunks


def decode_header(signature: str, header: bytes) -> dict[str, Any] | None:
    """The header's fields, or ``None`` when it is of another format or signature."""
    try:
        h = msgpack.unpackb(header)
    except (ValueError, msgpack.UnpackException):
        return None
    if not isinstance(h, dict) or h.get("format") != FORMAT or h.get("version") != FORMAT_VERSION:
        return None
    if h.get("signature") != signature:
        log.warning("static result key collision for %r: entry ignored", signature[:80])
        return None
    return h


def decode_chunks(h: dict[str, Any], chunks: Sequence[bytes]) -> StaticResult | None:
    """Rebuild a result from its header fields and chunks (``None`` if they do not fit)."""
    vars_ = tuple(h["vars"])
    k = len(vars_)
    n = int(h["rows"])
    if len(chunks) != int(h["chunks"]):
        return None
    parts = []
    for raw in chunks:
        if len(raw) % (8 * (k + 1)):
            return None
        parts.append(np.frombuffer(raw, dtype=_I64).reshape(k + 1, -1))
    data = np.concatenate(parts, axis=1) if parts else np.empty((k + 1, 0), dtype=_I64)
    if data.shape[1] != n:
        return None
    data = data.astype(np.int64, copy=True)  # writable, native order
    return StaticResult(vars_, data[:k], data[k])


@runtime_checkable
class StaticResultStore(Protocol):
    """Encoded static sub-join results keyed by signature."""

    def get(self, signature: str) -> StaticResult | None:
        """The result stored for ``signature``, or ``None`` (never another signature's)."""
        ...

    def put(self, signature: str, result: StaticResult) -> None:
        """Store ``result`` under ``signature`` (idempotent: equal signatures, equal results)."""
        ...

    def close(self) -> None: ...


class MemoryStaticResultStore:
    """In-process store, bounded to the ``max_entries`` most recently stored results."""

    uri = "memory:"

    def __init__(self, max_entries: int = 1024) -> None:
        self._data: dict[str, StaticResult] = {}
        self._max = max(1, max_entries)
        self._lock = threading.Lock()

    def get(self, signature: str) -> StaticResult | None:
        with self._lock:
            return self._data.get(signature)

    def put(self, signature: str, result: StaticResult) -> None:
        with self._lock:
            self._data.pop(signature, None)
            self._data[signature] = result
            while len(self._data) > self._max:
                del self._data[next(iter(self._data))]  # oldest first (insertion order)

    def __len__(self) -> int:
        return len(self._data)

    def close(self) -> None:
        self._data.clear()


class LmdbStaticResultStore:
    """Results in an LMDB environment (one write transaction per result).

    Keys: the 32-byte signature digest + ``b"h"`` for the header, + ``b"c"`` and the
    4-byte big-endian chunk number for each chunk.  Several processes may share the
    directory; a result appears atomically (its write transaction commits whole).
    """

    #: bytes of column data per chunk
    chunk_bytes = CHUNK_BYTES

    def __init__(self, path: str, *, map_size: int = 1 << 30) -> None:
        import lmdb

        if not path:
            raise ValueError("LMDB static result store needs a directory path")
        os.makedirs(path, exist_ok=True)
        self.path = path
        self.uri = f"lmdb:{path}"
        self._lmdb = lmdb
        self._env = lmdb.open(path, map_size=map_size, max_dbs=2, subdir=True)
        self._db = self._env.open_db(b"static_results")

    def get(self, signature: str) -> StaticResult | None:
        key = signature_key(signature)
        with self._env.begin(db=self._db, buffers=False) as txn:
            raw = txn.get(key + b"h")
            if raw is None:
                return None
            h = decode_header(signature, raw)
            if h is None:
                return None
            chunks = []
            for i in range(int(h["chunks"])):
                c = txn.get(key + b"c" + i.to_bytes(4, "big"))
                if c is None:
                    return None
                chunks.append(c)
        return decode_chunks(h, chunks)

    def put(self, signature: str, result: StaticResult) -> None:
        key = signature_key(signature)
        header, chunks = encode_result(signature, result, self.chunk_bytes)
        need = len(header) + sum(len(c) for c in chunks)
        while True:
            try:
                with self._env.begin(db=self._db, write=True) as txn:
                    for i, c in enumerate(chunks):
                        txn.put(key + b"c" + i.to_bytes(4, "big"), c)
                    txn.put(key + b"h", header)
                return
            except self._lmdb.MapFullError:
                # grow the (sparse) map and retry the whole transaction
                self._env.set_mapsize(max(self._env.info()["map_size"] * 2, need * 2))

    def close(self) -> None:
        self._env.close()


class HBaseStaticResultStore:
    """Results in an HBase table through the Thrift 1 gateway (happybase).

    Layout: column family ``r``; row ``digest`` holds the header in ``r:h``; rows
    ``digest + b"/" + 8-digit chunk number`` hold the chunks in ``r:d``.  Chunks are
    written first and the header last, so a reader that finds the header finds every
    chunk (writers of one signature write identical bytes, so races are harmless).

    Args:
        host: Thrift gateway host.
        port: its port.
        table: table name (created when missing).
        table_prefix: happybase table prefix.
        timeout_ms: socket timeout.
        transport: ``"buffered"`` or ``"framed"``.
        protocol: ``"binary"`` or ``"compact"``.
    """

    FAMILY = b"r"
    #: bytes of column data per chunk (one HBase cell)
    chunk_bytes = CHUNK_BYTES
    HEADER = b"r:h"
    DATA = b"r:d"

    def __init__(
        self,
        host: str,
        port: int = 9090,
        table: str = "linkstream_static_results",
        *,
        table_prefix: str | None = None,
        timeout_ms: int | None = None,
        transport: str = "buffered",
        protocol: str = "binary",
    ) -> None:
        from thriftpy2.thrift import TException

        from linkstream.rdf.hbase_dictionary import connect

        self.uri = f"hbase://{host}:{port}/{table}"
        self._lock = threading.RLock()
        self._conn = connect(host, port, timeout_ms, table_prefix, transport, protocol)
        try:
            if table.encode() not in self._conn.tables():
                try:
                    self._conn.create_table(table, {"r": {"max_versions": 1}})
                except TException:
                    if table.encode() not in self._conn.tables():
                        raise
            self._table = self._conn.table(table)
            if self.FAMILY not in set(self._table.families()):
                raise ValueError(f"HBase table {table!r} lacks the column family r")
        except BaseException:
            self._conn.close()
            raise

    @staticmethod
    def _chunk_row(key: bytes, i: int) -> bytes:
        return key + b"/" + b"%08d" % i

    def get(self, signature: str) -> StaticResult | None:
        key = signature_key(signature)
        with self._lock:
            cells = self._table.row(key, columns=[self.HEADER])
            raw = cells.get(self.HEADER)
            if raw is None:
                return None
            h = decode_header(signature, raw)
            if h is None:
                return None
            wanted = [self._chunk_row(key, i) for i in range(int(h["chunks"]))]
            found: dict[bytes, bytes] = {}
            for a in range(0, len(wanted), 64):
                for row, c in self._table.rows(wanted[a : a + 64], columns=[self.DATA]):
                    found[row] = c[self.DATA]
        if len(found) != len(wanted):
            return None
        return decode_chunks(h, [found[r] for r in wanted])

    def put(self, signature: str, result: StaticResult) -> None:
        key = signature_key(signature)
        header, chunks = encode_result(signature, result, self.chunk_bytes)
        with self._lock:
            with self._table.batch(batch_size=8) as b:
                for i, c in enumerate(chunks):
                    b.put(self._chunk_row(key, i), {self.DATA: c})
            self._table.put(key, {self.HEADER: header})

    def close(self) -> None:
        with self._lock:
            self._conn.close()


_BACKENDS: dict[str, Callable[[str], StaticResultStore]] = {}


def register_backend(scheme: str, factory: Callable[[str], StaticResultStore]) -> None:
    """Register ``factory(uri)`` for static result store URIs ``scheme:...``."""
    _BACKENDS[scheme] = factory


def open_static_results(uri: str = "memory:") -> StaticResultStore:
    """Open the static result store named by ``uri``.

    Args:
        uri: ``memory:``, ``lmdb:PATH`` or ``hbase://HOST[:PORT]/TABLE`` (query parameters
            ``prefix``, ``timeout`` (ms), ``transport``, ``protocol``).

    Raises:
        ValueError: unknown scheme or malformed URI.
    """
    scheme = uri.split(":", 1)[0].lower()
    try:
        factory = _BACKENDS[scheme]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS))
        raise ValueError(f"unknown static result store {uri!r} (known schemes: {known})") from None
    return factory(uri)


def _lmdb_from_uri(uri: str) -> StaticResultStore:
    path = uri.split(":", 1)[1]
    if not path:
        raise ValueError(f"LMDB static result store URI needs a path: {uri!r} (use lmdb:PATH)")
    return LmdbStaticResultStore(path)


def _hbase_from_uri(uri: str) -> StaticResultStore:
    parts = urlsplit(uri)
    table = unquote(parts.path.strip("/"))
    if not parts.hostname or not table or "/" in table:
        raise ValueError(
            f"static result store URI needs a host and one table: {uri!r} (use hbase://HOST:PORT/TABLE)"
        )
    try:
        port = parts.port or 9090
    except ValueError as e:
        raise ValueError(f"bad port in {uri!r}") from e
    q = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    unknown = set(q) - {"prefix", "timeout", "transport", "protocol"}
    if unknown:
        raise ValueError(f"unknown parameter(s) {sorted(unknown)} in {uri!r}")
    return HBaseStaticResultStore(
        parts.hostname,
        port,
        table,
        table_prefix=q.get("prefix") or None,
        timeout_ms=int(q["timeout"]) if q.get("timeout") else None,
        transport=q.get("transport", "buffered"),
        protocol=q.get("protocol", "binary"),
    )


register_backend("memory", lambda uri: MemoryStaticResultStore())
register_backend("lmdb", _lmdb_from_uri)
register_backend("hbase", _hbase_from_uri)


def default_static_results_uri(dictionary: object) -> str:
    """The store an engine uses by default, next to its dictionary.

    An LMDB dictionary gets an LMDB store in a ``static-results`` directory inside its
    own directory (results hold that dictionary's ids, so they live and die with it); an
    HBase dictionary gets the table ``<its table>_static``; anything else ``memory:``.
    """
    path = getattr(dictionary, "path", None)
    if type(dictionary).__name__ == "LmdbDictionary" and isinstance(path, str) and path:
        return "lmdb:" + os.path.join(path, "static-results")
    if type(dictionary).__name__ == "HBaseDictionary":
        d: Any = dictionary
        return f"hbase://{d.host}:{d.port}/{d.table_name}_static"
    return "memory:"


def engine_static_results(
    spec: str | StaticResultStore | bool | None, dictionary: object
) -> StaticResultStore:
    """The store an engine configured with ``spec`` uses.

    Args:
        spec: a store, a store URI, or ``None``/``True`` for the default next to
            ``dictionary`` (see :func:`default_static_results_uri`).
        dictionary: the engine's dictionary.

    Raises:
        ValueError, ConnectionError, OSError: an explicitly named store cannot be opened.
            The default store falls back to ``memory:`` with a warning instead: results
            are then only shared within the process.
    """
    if not (spec is None or spec is True or spec is False):
        return open_static_results(spec) if isinstance(spec, str) else spec
    uri = default_static_results_uri(dictionary)
    try:
        return open_static_results(uri)
    except Exception as e:  # noqa: BLE001 - any failure of the optional default store
        log.warning("static results: cannot open %s (%s); keeping them in memory", uri, e)
        return MemoryStaticResultStore()
