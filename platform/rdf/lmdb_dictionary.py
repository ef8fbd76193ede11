"""The ``lmdb:PATH`` dictionary backend: an embedded, persistent term <-> id map on LMDB.

Layout of the LMDB environment (a directory):

* sub-database ``term2id``: UTF-8 term -> id as 8-byte big-endian.  Terms longer than
  LMDB's key limit (511 bytes) are keyed by ``0xFF`` + their SHA-256 digest (a byte
  no UTF-8 string starts with) and checked against ``id2term`` when read;
* sub-database ``id2term``: 8-byte big-endian id -> UTF-8 term (ids sort as numbers);
* sub-database ``meta``: ``next_id`` (8-byte big-endian), the next id to allocate.

Ids are allocated inside LMDB write transactions, so several processes may share one
directory (LMDB admits one writer at a time).  A term's id never changes, which makes
the in-process caches in front of LMDB always valid.  The map grows (doubling) when
a write transaction finds it full.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import lmdb
import numpy as np

from linkstream.rdf.dictionary import register_backend

_NEXT_ID = b"next_id"
_HASHED = b"\xff"
#: unknown terms from which one ``encode_many`` skips the read-only lookup
_BULK = 4096
_T = TypeVar("_T")


def _pack(i: int) -> bytes:
    return i.to_bytes(8, "big")


def _unpack(b: bytes) -> int:
    return int.from_bytes(b, "big")


class LmdbDictionary:
    """A :class:`~linkstream.rdf.dictionary.Dictionary` stored in an LMDB environment.

    Args:
        path: directory of the environment (created if missing).
        map_size: initial map size in bytes (the file is sparse; it doubles when full).
        cache_size: entries kept by each of the term->id and id->term caches.
        write_batch: new terms written per LMDB write transaction.
        sync: flush to disk at each commit (``False`` trades durability for speed).
    """

    def __init__(
        self,
        path: str,
        *,
        map_size: int = 1 << 30,
        cache_size: int = 1 << 17,
        write_batch: int = 50_000,
        sync: bool = True,
    ) -> None:
        if not path:
            raise ValueError("LMDB dictionary needs a directory path")
        os.makedirs(path, exist_ok=True)
        self.path = path
        try:
            self._env = lmdb.open(path, map_size=map_size, max_dbs=4, subdir=True, sync=sync)
        except lmdb.Error as e:  # e.g. a data.mdb overwritten with something else
            raise ValueError(f"{path}: not a usable LMDB dictionary ({' '.join(str(e).split())})") from e
        self._t2i = self._env.open_db(b"term2id")
        self._i2t = self._env.open_db(b"id2term")
        self._meta = self._env.open_db(b"meta")
        self._max_key = self._env.max_key_size()
        self._ids: dict[str, int] = {}
        self._terms: dict[int, str] = {}
        self._cache_size = cache_size
        self._write_batch = max(1, write_batch)
        self._closed = False

    # ------------------------------------------------------------------ Dictionary protocol

    def encode_many(self, terms: Sequence[str]) -> np.ndarray:
        """Ids of ``terms``, allocating new ids for unknown terms (int64 array)."""
        get = self._ids.get
        res = [get(t) for t in terms]
        missing: dict[str, None] = {}
        for t, i in zip(terms, res):
            if i is None:
                missing[t] = None
        if missing:
            new = list(missing)
            if len(new) < _BULK:
                known = dict(zip(new, self._lookup(new)))
                absent = [t for t in new if known[t] == 0]
            else:  # a bulk load: the write transactions look the terms up themselves
                known, absent = {}, new
            for k in range(0, len(absent), self._write_batch):
                batch = absent[k : k + self._write_batch]
                known.update(zip(batch, self._retry(functools.partial(self._allocate, batch))))
            self._remember(known)
            res = [known[t] if i is None else i for t, i in zip(terms, res)]
        return np.array(res, dtype=np.int64)

    def lookup_many(self, terms: Sequence[str]) -> np.ndarray:
        """Ids of ``terms`` without allocating: 0 for an unknown term."""
        get = self._ids.get
        res = [get(t) for t in terms]
        missing = list(dict.fromkeys(t for t, i in zip(terms, res) if i is None))
        if missing:
            known = dict(zip(missing, self._lookup(missing)))
            self._remember({t: i for t, i in known.items() if i})
            res = [known[t] if i is None else i for t, i in zip(terms, res)]
        return np.array(res, dtype=np.int64)

    def decode_many(self, ids: np.ndarray | Sequence[int]) -> list[str]:
        """N-Triples strings of ``ids`` (``KeyError`` for an id never allocated)."""
        wanted = np.asarray(ids, dtype=np.int64).reshape(-1).tolist()
        get = self._terms.get
        res = [get(i) for i in wanted]
        missing = list(dict.fromkeys(i for i, t in zip(wanted, res) if t is None))
        if missing:
            found = self._retry(lambda: self._read_terms(missing))
            if len(self._terms) + len(found) > self._cache_size:
                self._terms.clear()
            self._terms.update(found)
            res = [found[i] if t is None else t for i, t in zip(wanted, res)]
        return res  # type: ignore[return-value]  # every None was filled from found

    def reserve(self, n: int) -> int:
        """Reserve ``n`` fresh ids for this caller (see :class:`~linkstream.rdf.dictionary.BulkDictionary`).

        Returns:
            The first reserved id; the block is ``first .. first + n - 1``.
        """
        if n < 0:
            raise ValueError("cannot reserve a negative number of ids")

        def op() -> int:
            with self._env.begin(write=True) as txn:
                raw = txn.get(_NEXT_ID, db=self._meta)
                first = 1 if raw is None else _unpack(raw)
                if n:
                    txn.put(_NEXT_ID, _pack(first + n), db=self._meta)
                return first

        return self._retry(op)

    def put_many(self, terms: Sequence[str], ids: np.ndarray | Sequence[int]) -> np.ndarray:
        """Publish distinct ``terms`` with ids from :meth:`reserve`; returns the ids they have now.

        A term published meanwhile (by any writer) keeps its id; its reserved id stays unused.
        """
        wanted = np.asarray(ids, dtype=np.int64).reshape(-1)
        if len(wanted) != len(terms):
            raise ValueError("put_many needs one id per term")
        out: list[int] = []
        for k in range(0, len(terms), self._write_batch):
            batch = list(terms[k : k + self._write_batch])
            given = wanted[k : k + self._write_batch].tolist()
            out.extend(self._retry(functools.partial(self._put, batch, given)))
        self._remember(dict(zip(terms, out)))
        return np.array(out, dtype=np.int64)

    def _put(self, terms: list[str], ids: list[int]) -> list[int]:
        with self._env.begin(write=True) as txn:
            return self._write(txn, terms, ids)[0]

    def __len__(self) -> int:
        with self._env.begin() as txn:
            return int(txn.stat(self._i2t)["entries"])

    def close(self) -> None:
        """Close the environment (idempotent)."""
        if not self._closed:
            self._closed = True
            self._env.close()

    def __enter__(self) -> LmdbDictionary:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LmdbDictionary({self.path!r})"

    # ------------------------------------------------------------------ LMDB access

    def _key(self, term: str) -> tuple[bytes, bytes]:
        """``(key in term2id, UTF-8 term)``."""
        b = term.encode("utf-8", "surrogatepass")
        if len(b) <= self._max_key:
            return b, b
        return _HASHED + hashlib.sha256(b).digest(), b

    def _keys(self, terms: list[str]) -> tuple[list[bytes], list[bytes]]:
        """``(keys in term2id, UTF-8 terms)`` of ``terms`` (see :meth:`_key`)."""
        raw = [t.encode("utf-8", "surrogatepass") for t in terms]
        if not raw or max(map(len, raw)) <= self._max_key:
            return raw, raw
        return [self._key(t)[0] for t in terms], raw

    def _lookup(self, terms: list[str]) -> list[int]:
        return self._retry(lambda: self._read_ids(terms))

    def _read_ids(self, terms: list[str]) -> list[int]:
        keys, raw = self._keys(terms)
        with self._env.begin() as txn:
            found = dict(txn.cursor(db=self._t2i).getmulti(keys))
            out = []
            for key, b in zip(keys, raw):
                v = found.get(key)
                i = 0 if v is None else _unpack(v)
                if i and key is not b:
                    self._check_hashed(txn, i, b)
                out.append(i)
        return out

    def _read_terms(self, ids: list[int]) -> dict[int, str]:
        out = {}
        with self._env.begin() as txn:
            for i in ids:
                v = txn.get(_pack(i), db=self._i2t) if 0 < i < 1 << 63 else None
                if v is None:
                    raise KeyError(i)
                out[i] = v.decode("utf-8", "surrogatepass")
        return out

    def _allocate(self, terms: list[str]) -> list[int]:
        """Ids of the distinct ``terms`` in one write transaction, allocating those still
        unknown (another process may have written some since they were looked up)."""
        with self._env.begin(write=True) as txn:
            first = _unpack(txn.get(_NEXT_ID, b"\0" * 8, db=self._meta)) or 1
            out, nxt = self._write(txn, terms, first)
            if nxt != first:
                txn.put(_NEXT_ID, _pack(nxt), db=self._meta)
        return out

    def _write(self, txn: Any, terms: list[str], ids: list[int] | int) -> tuple[list[int], int]:
        """Ids of ``terms`` in the write transaction ``txn`` and the next id: a term written
        already (by another process meanwhile, or a repeat) keeps its id; the others take
        their id in ``ids`` (reserved blocks) or the next from the id ``ids`` on."""
        keys, raw = self._keys(terms)
        found = dict(txn.cursor(db=self._t2i).getmulti(keys))
        given = ids if isinstance(ids, list) else None
        nxt = ids if isinstance(ids, int) else 0
        out = []
        t2i, i2t = [], []
        for k, (key, b) in enumerate(zip(keys, raw)):
            v = found.get(key)
            if v is not None:
                i = _unpack(v)
                if key is not b:
                    self._check_hashed(txn, i, b)
            else:
                if given is None:
                    i, nxt = nxt, nxt + 1
                else:
                    i = given[k]
                packed = found[key] = _pack(i)
                t2i.append((key, packed))
                i2t.append((packed, b))
            out.append(i)
        if t2i:
            txn.cursor(db=self._t2i).putmulti(t2i)
            # ids counted here grow past every id held; reserved blocks of concurrent
            # loaders interleave, so those are not appended
            txn.cursor(db=self._i2t).putmulti(i2t, append=given is None)
        return out, nxt

    def _check_hashed(self, txn: Any, i: int, b: bytes) -> None:
        stored = txn.get(_pack(i), db=self._i2t)
        if stored != b:
            raise RuntimeError(f"{self.path}: SHA-256 collision between long terms (id {i})")

    def _retry(self, op: Callable[[], _T]) -> _T:
        """Run ``op``, growing the map when full and adopting a size grown by another process."""
        while True:
            try:
                return op()
            except lmdb.MapFullError:
                self._env.set_mapsize(self._env.info()["map_size"] * 2)
            except lmdb.MapResizedError:
                self._env.set_mapsize(0)

    def _remember(self, known: dict[str, int]) -> None:
        ids = self._ids
        if len(ids) + len(known) > self._cache_size:
            ids.clear()
        ids.update(known)


def _from_uri(uri: str) -> LmdbDictionary:
    """``lmdb:PATH`` (or ``lmdb://PATH``) -> :class:`LmdbDictionary`."""
    path = uri.split(":", 1)[1]
    if path.startswith("//"):
        path = path[2:]
    if not path:
        raise ValueError(f"LMDB dictionary URI without a path: {uri!r} (use lmdb:PATH)")
    return LmdbDictionary(path)


register_backend("lmdb", _from_uri)
