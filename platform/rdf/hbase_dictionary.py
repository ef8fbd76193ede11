"""The ``hbase://HOST:PORT/TABLE`` dictionary backend: a term <-> id map shared through HBase.

The backend talks to HBase's Thrift 1 gateway (``hbase thrift start``) through
happybase.  URI: ``hbase://HOST[:PORT]/TABLE`` (port 9090 by default) with optional
query parameters ``prefix`` (happybase's table prefix), ``block`` (ids taken from the
counter at a time), ``timeout`` (socket timeout in ms), ``transport`` (``buffered`` or
``framed``) and ``protocol`` (``binary`` or ``compact``).

Layout (one table, created when missing, column families ``t`` and ``i``):

* term -> id: row key = the term's UTF-8 bytes, cell ``t:id`` = the id as 8-byte
  big-endian.  Terms longer than ``max_key`` bytes (and the rare term whose bytes start
  with ``h:``) use row key ``h:`` + SHA-256 of the term instead; their ``t:id`` cell holds
  the id followed by the full term, which every read compares with the term it looks
  up (a mismatch, i.e. a SHA-256 collision, raises ``RuntimeError``);
* id -> term: row key = the id as 8-byte big-endian (ids sort as numbers), cell
  ``i:term`` = the term's UTF-8 bytes;
* counters: row ``~counters``, cells ``i:next_id`` (the last id handed out by the
  counter) and ``i:terms`` (the number of terms, what ``len()`` answers).

Families keep the two key spaces apart: a term row and an id row may share a key.

Id allocation with several concurrent writers (processes or hosts):

1. Ranges.  A writer takes ids in ranges of ``block`` ids (or more for a big batch)
   with one ``atomicIncrement`` of ``i:next_id``: the increment is atomic on the
   region server, so the ranges of different writers never overlap.
2. Publication.  For a batch of terms that a batched read found absent, the writer
   first writes the id -> term rows of fresh ids (one ``mutateRows``), then publishes
   each term -> id cell with ``checkAndPut`` *if the cell does not exist*.  The Thrift 1
   IDL declares ``checkAndPut`` (HBase 0.98 and later serve it; happybase just has no
   wrapper, so it is called through the happybase connection's Thrift client).  The
   check and the put are atomic on the row, so exactly one writer publishes a term; a
   loser re-reads the cell and adopts the winner's id.  Because the id -> term row is
   written before the term -> id cell, anyone who finds a term's id can decode it.

   A blind put followed by a re-read would *not* be enough: writer A puts and re-reads
   its own id, then writer B overwrites the cell and re-reads B's id, and the two now
   disagree forever.  Only an atomic conditional write (or an equivalent consensus
   primitive) decides a race between writers.
3. Losers' ids.  The id a loser had written an id -> term row for is referenced by no
   term -> id cell, and it was handed out to this writer only, so the writer reuses it
   for its next new term (overwriting that row); until then that id may decode to the
   term it lost, which is harmless as no one else holds it.  Ids still unused at :meth:`close`
   become gaps: their rows are deleted, and the unused tail of the last range is given
   back to the counter (``checkAndPut`` on ``i:next_id``) when no other writer took a
   range meanwhile.  A single writer therefore allocates dense ids 1, 2, 3, ... across
   reopenings; concurrent writers may leave gaps (never reused ids), which decode to
   ``KeyError`` like any id never allocated.
4. Count.  Each writer adds the number of terms it published to ``i:terms``.  A writer
   that dies between publishing and counting makes ``len()`` too small; ids and terms
   stay consistent.

Each new term costs one ``checkAndPut`` round trip; reads and the other writes are
batched (``table.rows`` and ``table.batch`` with ``batch_size`` rows per request).
Terms and ids never change once published, so the in-process caches are always valid.
A dictionary object is guarded by a lock; give each thread its own object for
parallelism (one Thrift connection each).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import happybase
import numpy as np
from Hbase_thrift import AlreadyExists, Mutation  # the IDL module happybase loads on import
from thriftpy2.thrift import TApplicationException, TException

from linkstream.rdf.dictionary import register_backend

FAMILIES = {"t": {"max_versions": 1}, "i": {"max_versions": 1}}
COUNTER_ROW = b"~counters"
T_ID = b"t:id"
I_TERM = b"i:term"
NEXT_ID = b"i:next_id"
N_TERMS = b"i:terms"
HASHED = b"h:"
_MAX_ID = (1 << 63) - 1


def connect(
    host: str,
    port: int,
    timeout_ms: int | None = None,
    table_prefix: str | None = None,
    transport: str = "buffered",
    protocol: str = "binary",
) -> happybase.Connection:
    """A happybase connection to an HBase Thrift 1 gateway.

    Raises:
        ConnectionError: The gateway cannot be reached.
    """
    try:
        return happybase.Connection(
            host, port, timeout=timeout_ms, table_prefix=table_prefix, transport=transport, protocol=protocol
        )
    except (TException, OSError) as e:
        raise ConnectionError(f"cannot reach the HBase Thrift gateway at {host}:{port}: {e}") from e


def _pack(i: int) -> bytes:
    return i.to_bytes(8, "big")


def _unpack(b: bytes) -> int:
    return int.from_bytes(b, "big")


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for k in range(0, len(items), size):
        yield items[k : k + size]


class HBaseDictionary:
    """A :class:`~linkstream.rdf.dictionary.Dictionary` stored in an HBase table.

    Args:
        host: host of the HBase Thrift 1 gateway.
        port: its port.
        table: table name (without happybase's ``table_prefix``); created if missing.
        table_prefix: happybase table prefix (``None`` for none).
        block: ids taken from the shared counter at a time.
        batch_size: rows per batched get or put request.
        cache_size: entries kept by each of the term->id and id->term caches.
        max_key: longest term (UTF-8 bytes) used directly as a row key; longer terms
            are keyed by their SHA-256 digest.
        timeout_ms: socket timeout in milliseconds (``None``: none).
        transport: Thrift transport, ``"buffered"`` or ``"framed"`` (as the gateway runs).
        protocol: Thrift protocol, ``"binary"`` or ``"compact"``.

    Raises:
        ConnectionError: the gateway cannot be reached.
        ValueError: the table exists without the ``t`` and ``i`` families.
    """

    def __init__(
        self,
        host: str,
        port: int = 9090,
        table: str = "linkstream_terms",
        *,
        table_prefix: str | None = None,
        block: int = 1024,
        batch_size: int = 5000,
        cache_size: int = 1 << 17,
        max_key: int = 1024,
        timeout_ms: int | None = None,
        transport: str = "buffered",
        protocol: str = "binary",
    ) -> None:
        if not table:
            raise ValueError("HBase dictionary needs a table name")
        self.host, self.port, self.table_name = host, port, table
        self._block = max(1, block)
        self._batch = max(1, batch_size)
        self._cache_size = cache_size
        self._max_key = max_key
        self._lock = threading.RLock()
        self._ids: dict[str, int] = {}
        self._terms: dict[int, str] = {}
        self._free: list[int] = []  # ids handed to this writer that hold no term (lost races)
        self._next = 1  # next id of the current range ...
        self._end = 0  # ... whose last id is this (empty range: _next > _end)
        #: Every range ``(first, last)`` this object took from the shared counter.
        self.ranges: list[tuple[int, int]] = []
        #: New terms another writer published first (``checkAndPut`` lost).
        self.lost_races = 0
        self._closed = False
        self._conn = connect(host, port, timeout_ms, table_prefix, transport, protocol)
        try:
            self._table = self._open_table(table)
        except BaseException:
            self._conn.close()
            raise
        self._tname: bytes = self._table.name

    # ------------------------------------------------------------------ Dictionary protocol

    def encode_many(self, terms: Sequence[str]) -> np.ndarray:
        """Ids of ``terms``, allocating new ids for unknown terms (int64 array)."""
        with self._lock:
            get = self._ids.get
            res = [get(t) for t in terms]
            missing = list(dict.fromkeys(t for t, i in zip(terms, res) if i is None))
            if missing:
                known: dict[str, int] = {}
                for chunk in _chunks(missing, self._batch):
                    known.update(self._encode_chunk(chunk))
                self._remember(known)
                res = [known[t] if i is None else i for t, i in zip(terms, res)]
            return np.array(res, dtype=np.int64)

    def lookup_many(self, terms: Sequence[str]) -> np.ndarray:
        """Ids of ``terms`` without allocating: 0 for an unknown term."""
        with self._lock:
            get = self._ids.get
            res = [get(t) for t in terms]
            missing = list(dict.fromkeys(t for t, i in zip(terms, res) if i is None))
            if missing:
                known: dict[str, int] = {}
                for chunk in _chunks(missing, self._batch):
                    known.update(self._read_ids(chunk))
                self._remember(known)
                res = [known.get(t, 0) if i is None else i for t, i in zip(terms, res)]
            return np.array(res, dtype=np.int64)

    def decode_many(self, ids: np.ndarray | Sequence[int]) -> list[str]:
        """N-Triples strings of ``ids`` (``KeyError`` for an id never allocated)."""
        wanted = np.asarray(ids, dtype=np.int64).reshape(-1).tolist()
        with self._lock:
            get = self._terms.get
            res = [get(i) for i in wanted]
            missing = list(dict.fromkeys(i for i, t in zip(wanted, res) if t is None))
            if missing:
                for i in missing:
                    if not 0 < i <= _MAX_ID:
                        raise KeyError(i)
                found: dict[int, str] = {}
                for chunk in _chunks(missing, self._batch):
                    rows = self._table.rows([_pack(i) for i in chunk], columns=[I_TERM])
                    for key, cells in rows:
                        found[_unpack(key)] = cells[I_TERM].decode("utf-8", "surrogatepass")
                for i in missing:
                    if i not in found:
                        raise KeyError(i)
                if len(self._terms) + len(found) > self._cache_size:
                    self._terms.clear()
                self._terms.update(found)
                res = [found[i] if t is None else t for i, t in zip(wanted, res)]
            return res  # type: ignore[return-value]  # every None was filled from found

    def reserve(self, n: int) -> int:
        """Reserve ``n`` fresh ids with one atomic counter increment; returns the first.

        See :class:`~linkstream.rdf.dictionary.BulkDictionary`.
        """
        if n < 0:
            raise ValueError("cannot reserve a negative number of ids")
        with self._lock:
            last = self._table.counter_inc(COUNTER_ROW, NEXT_ID, n)
            return last - n + 1

    def put_many(self, terms: Sequence[str], ids: np.ndarray | Sequence[int]) -> np.ndarray:
        """Publish distinct ``terms`` with ids from :meth:`reserve`; returns the ids they have now.

        Publication is the same ``checkAndPut`` protocol as for new terms of
        :meth:`encode_many`: a term published meanwhile keeps its id, and the reserved
        id it lost goes to this writer's free list (reused, or deleted at :meth:`close`).
        """
        wanted = np.asarray(ids, dtype=np.int64).reshape(-1).tolist()
        if len(wanted) != len(terms):
            raise ValueError("put_many needs one id per term")
        with self._lock:
            known: dict[str, int] = {}
            pairs = list(zip(terms, wanted))
            for chunk in _chunks(pairs, self._batch):
                given = dict(chunk)
                known.update(self._encode_chunk(list(given), given))
            self._remember(known)
            return np.array([known[t] for t in terms], dtype=np.int64)

    def __len__(self) -> int:
        with self._lock:
            cells = self._table.row(COUNTER_ROW, columns=[N_TERMS])
            raw = cells.get(N_TERMS)
            return 0 if raw is None else _unpack(raw)

    def close(self) -> None:
        """Give unused ids back when possible and close the connection (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._release_ids()
            except (TException, OSError):
                pass  # best effort: unused ids merely become gaps
            finally:
                self._conn.close()

    def __enter__(self) -> HBaseDictionary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HBaseDictionary('hbase://{self.host}:{self.port}/{self.table_name}')"

    # ------------------------------------------------------------------ table and keys

    def _open_table(self, name: str) -> happybase.Table:
        if name.encode() not in self._conn.tables():
            try:
                self._conn.create_table(name, FAMILIES)
            except AlreadyExists:
                pass  # created meanwhile by another writer
        table = self._conn.table(name)
        families = set(table.families())
        if not {b"t", b"i"} <= families:
            found = ", ".join(sorted(f.decode(errors="replace") for f in families))
            raise ValueError(f"HBase table {name!r} lacks the column families t and i (has: {found})")
        return table

    def _key(self, term: str) -> tuple[bytes, bytes, bool]:
        """``(row key, UTF-8 term, hashed?)`` of ``term``."""
        b = term.encode("utf-8", "surrogatepass")
        if len(b) <= self._max_key and not b.startswith(HASHED):
            return b, b, False
        return HASHED + hashlib.sha256(b).digest(), b, True

    def _id_of(self, cell: bytes, b: bytes, hashed: bool) -> int:
        """The id in a ``t:id`` cell, checking the stored term of a hashed row."""
        if hashed and cell[8:] != b:
            raise RuntimeError(
                f"{self.table_name}: SHA-256 collision between long terms (id {_unpack(cell[:8])})"
            )
        return _unpack(cell[:8])

    def _read_ids(self, terms: list[str]) -> dict[str, int]:
        """Ids of the published ``terms`` (absent terms are left out); one batched get."""
        keys = {}
        for t in terms:
            key, b, hashed = self._key(t)
            keys[key] = (t, b, hashed)
        out = {}
        for row, cells in self._table.rows(list(keys), columns=[T_ID]):
            t, b, hashed = keys[row]
            out[t] = self._id_of(cells[T_ID], b, hashed)
        return out

    # ------------------------------------------------------------------ allocation

    def _encode_chunk(self, terms: list[str], reserved: dict[str, int] | None = None) -> dict[str, int]:
        known = self._read_ids(terms)
        absent = [t for t in terms if t not in known]
        if not absent:
            return known
        # ids reserved by the caller (put_many), else from this writer's ranges
        ids = [reserved[t] for t in absent] if reserved is not None else self._take_ids(len(absent))
        keyed = [self._key(t) for t in absent]
        with self._table.batch() as batch:  # id -> term first: a published id always decodes
            for i, (_, b, _) in zip(ids, keyed):
                batch.put(_pack(i), {I_TERM: b})
        lost: list[str] = []
        won = 0
        try:
            for t, i, (key, b, hashed) in zip(absent, ids, keyed):
                value = _pack(i) + b if hashed else _pack(i)
                if self._check_and_put(key, T_ID, None, value):
                    known[t] = i
                    won += 1
                else:
                    lost.append(t)
                    self._free.append(i)
                    self.lost_races += 1
        finally:
            if won:
                self._table.counter_inc(COUNTER_ROW, N_TERMS, won)
        if lost:
            winners = self._read_ids(lost)
            if len(winners) != len(lost):
                raise RuntimeError(f"{self.table_name}: a term row vanished after a lost checkAndPut")
            known.update(winners)
        return known

    def _take_ids(self, n: int) -> list[int]:
        """``n`` ids owned by this writer: recycled ones first, then the current range."""
        out: list[int] = []
        if self._free:
            self._free.sort(reverse=True)
            while self._free and len(out) < n:
                out.append(self._free.pop())
        while len(out) < n:
            if self._next > self._end:
                size = max(self._block, n - len(out))
                last = self._table.counter_inc(COUNTER_ROW, NEXT_ID, size)
                self.ranges.append((last - size + 1, last))
                self._next, self._end = last - size + 1, last
            k = min(n - len(out), self._end - self._next + 1)
            out.extend(range(self._next, self._next + k))
            self._next += k
        return out

    def _release_ids(self) -> None:
        """Delete rows of recycled-but-unused ids; give the unused range tail back."""
        if self._free:
            with self._table.batch() as batch:
                for i in self._free:
                    batch.delete(_pack(i), columns=[I_TERM])
            self._free.clear()
        if self._next <= self._end:  # only if the counter still ends at our range
            if self._check_and_put(COUNTER_ROW, NEXT_ID, _pack(self._end), _pack(self._next - 1)):
                self._end = self._next - 1

    def _check_and_put(self, row: bytes, column: bytes, expected: bytes | None, value: bytes) -> bool:
        """Thrift 1 ``checkAndPut``: put ``value`` in ``column`` if it holds ``expected``.

        ``expected=None`` checks that the cell does not exist.
        """
        try:
            return bool(
                self._conn.client.checkAndPut(
                    self._tname, row, column, expected, Mutation(column=column, value=value), {}
                )
            )
        except TApplicationException as e:
            if e.type == TApplicationException.UNKNOWN_METHOD:
                raise RuntimeError(
                    f"the HBase Thrift gateway at {self.host}:{self.port} has no checkAndPut "
                    "(HBase 0.98 or later is needed)"
                ) from e
            raise

    def _remember(self, known: dict[str, int]) -> None:
        ids = self._ids
        if len(ids) + len(known) > self._cache_size:
            ids.clear()
        ids.update(known)


_PARAMS = {"prefix", "block", "timeout", "transport", "protocol"}


def parse_hbase_uri(uri: str) -> dict[str, Any]:
    """Keyword arguments of :class:`HBaseDictionary` for ``hbase://HOST[:PORT]/TABLE[?k=v...]``.

    Args:
        uri: the dictionary URI.

    Returns:
        ``host``, ``port``, ``table`` and the optional keyword arguments given.

    Raises:
        ValueError: malformed URI, missing host or table, unknown parameter.
    """
    parts = urlsplit(uri)
    if parts.scheme.lower() != "hbase" or not parts.hostname:
        raise ValueError(f"HBase dictionary URI needs a host: {uri!r} (use hbase://HOST:PORT/TABLE)")
    table = unquote(parts.path.strip("/"))
    if not table or "/" in table:
        raise ValueError(f"HBase dictionary URI needs one table name: {uri!r} (use hbase://HOST:PORT/TABLE)")
    try:
        port = parts.port or 9090
    except ValueError as e:
        raise ValueError(f"bad port in HBase dictionary URI {uri!r}") from e
    query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
    unknown = set(query) - _PARAMS
    if unknown:
        raise ValueError(f"unknown HBase dictionary URI parameter(s) {sorted(unknown)} in {uri!r}")
    opts: dict[str, Any] = {"host": parts.hostname, "port": port, "table": table}
    one = {k: v[-1] for k, v in query.items()}
    if "prefix" in one:
        opts["table_prefix"] = one["prefix"] or None
    try:
        if "block" in one:
            opts["block"] = int(one["block"])
        if "timeout" in one:
            opts["timeout_ms"] = int(one["timeout"])
    except ValueError as e:
        raise ValueError(f"bad number in HBase dictionary URI {uri!r}") from e
    for k in ("transport", "protocol"):
        if k in one:
            opts[k] = one[k]
    return opts


def _from_uri(uri: str) -> HBaseDictionary:
    """``hbase://HOST:PORT/TABLE`` -> :class:`HBaseDictionary`."""
    return HBaseDictionary(**parse_hbase_uri(uri))


register_backend("hbase", _from_uri)
