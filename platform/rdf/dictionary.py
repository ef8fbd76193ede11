"""Dictionary encoding of RDF terms to int64 ids.

Terms are encoded once, at ingest, into dense positive int64 ids (0 means *unbound* in
every LinkStream batch and is never a term).  Keys are canonical N-Triples strings (see
:mod:`linkstream.rdf.terms`).  Backends are chosen by URI, like rdflib's plugin registry:

* ``memory:``        -- in-process, the default for replays and tests;
* ``lmdb:PATH``      -- embedded persistent store, the default for persistent use;
* ``hbase://HOST:PORT/TABLE`` -- shared by a cluster through HBase's Thrift gateway.

Every backend satisfies :class:`Dictionary`; the contract test-suite in
``tests/rdf/test_dictionary_contract.py`` runs against each of them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Dictionary(Protocol):
    """Bidirectional map between N-Triples term strings and int64 ids (ids start at 1)."""

    def encode_many(self, terms: Sequence[str]) -> np.ndarray:
        """Ids of ``terms``, allocating new ids for unknown terms (int64 array)."""
        ...

    def lookup_many(self, terms: Sequence[str]) -> np.ndarray:
        """Ids of ``terms`` without allocating: 0 for an unknown term."""
        ...

    def decode_many(self, ids: np.ndarray | Sequence[int]) -> list[str]:
        """N-Triples strings of ``ids`` (``KeyError`` for an id never allocated)."""
        ...

    def __len__(self) -> int: ...

    def close(self) -> None: ...


@runtime_checkable
class BulkDictionary(Dictionary, Protocol):
    """A dictionary that bulk loaders can fill with ids they assign themselves.

    A loader reserves a block of fresh ids, numbers the new terms inside it and then
    publishes them; a term published meanwhile by another writer keeps its id (the
    reserved id stays unused, a gap that decodes to ``KeyError``).
    """

    def reserve(self, n: int) -> int:
        """Reserve ``n`` fresh ids ``first .. first + n - 1`` for this caller; returns ``first``."""
        ...

    def put_many(self, terms: Sequence[str], ids: np.ndarray | Sequence[int]) -> np.ndarray:
        """Publish distinct ``terms`` with reserved ``ids``; returns the id each term has now."""
        ...


try:  # the compiled term index (platform/rdf/_termindex.c), built by ``pip install``
    from linkstream.rdf._ntparse import TermIndex as _TermIndex
except ImportError:  # no C compiler at install time: a Python dict holds the terms
    _TermIndex = None  # type: ignore[assignment,misc]  # (the fallback is tested against it)


class MemoryDictionary:
    """In-process dictionary: a term index one way and a list the other.

    The index is the compiled :class:`~linkstream.rdf._ntparse.TermIndex` (UTF-8 text ->
    id in one open-addressing table and an arena: a lookup reads two cache lines where a
    ``dict`` of ``str`` reads three, and the N-Triples scanner adds a file's terms to it
    without making a ``str`` of a term it already holds), or a Python ``dict`` without the
    extension (or with ``compiled=False``); both give every term the same id.
    """

    def __init__(self, *, compiled: bool | None = None) -> None:
        use = _TermIndex is not None if compiled is None else compiled
        if use and _TermIndex is None:
            raise RuntimeError("the compiled term index is not built (no C compiler at install time)")
        self._index = _TermIndex() if use else None
        self._ids: dict[str, int] = {}  # (without the index)
        self._terms: list[str | None] = [""]  # id 0 is "unbound"; None marks reserved ids

    @property
    def compiled(self) -> bool:
        """Whether the compiled term index holds the terms."""
        return self._index is not None

    def encode(self, term: str) -> int:
        if self._index is not None:
            return self._index.encode(term, self._terms)
        i = self._ids.get(term)
        if i is None:
            i = len(self._terms)
            self._ids[term] = i
            self._terms.append(term)
        return i

    def encode_many(self, terms: Sequence[str]) -> np.ndarray:
        if self._index is not None:
            return np.frombuffer(self._index.encode_many(terms, self._terms), dtype=np.int64)
        ids = self._ids
        got = list(map(ids.get, terms))  # known terms without a Python-level loop
        if None in got:
            # new terms get the next ids in the order they first occur (a loop over the
            # distinct terms only)
            tl = self._terms
            new = [t for t in dict.fromkeys(terms) if t not in ids]
            ids.update(zip(new, range(len(tl), len(tl) + len(new))))
            tl.extend(new)
            got = list(map(ids.__getitem__, terms))
        return np.array(got, dtype=np.int64) if got else np.empty(0, dtype=np.int64)

    def tables(self) -> tuple[_TermIndex | None, list[str | None] | None]:
        """The term index and the id -> term list, for the compiled reader
        (:mod:`linkstream.rdf.ntfast`), which adds new terms to them in place as
        :meth:`encode` does (the next id is the list's length); ``(None, None)`` without the
        compiled index."""
        return (self._index, self._terms) if self._index is not None else (None, None)

    def lookup_many(self, terms: Sequence[str]) -> np.ndarray:
        if self._index is not None:
            return np.frombuffer(self._index.lookup_many(terms), dtype=np.int64)
        get = self._ids.get
        return np.fromiter((get(t, 0) for t in terms), dtype=np.int64, count=len(terms))

    def decode(self, i: int) -> str:
        t = self._terms[i] if i > 0 else None
        if t is None:
            raise KeyError(i)
        return t

    def decode_many(self, ids: np.ndarray | Sequence[int]) -> list[str]:
        terms = self._terms
        n = len(terms)
        lst = np.asarray(ids, dtype=np.int64).tolist()
        if lst and min(lst) > 0 and max(lst) < n:
            got = list(map(terms.__getitem__, lst))  # (no Python-level loop)
            if None not in got:
                return got  # type: ignore[return-value]  # (checked: no None in it)
        out: list[str] = []
        for i in lst:
            t = terms[i] if 0 < i < n else None
            if t is None:
                raise KeyError(i)
            out.append(t)
        return out

    def reserve(self, n: int) -> int:
        """Reserve ``n`` fresh ids (they decode to ``KeyError`` until published); returns the first."""
        first = len(self._terms)
        self._terms.extend([None] * n)
        return first

    def put_many(self, terms: Sequence[str], ids: np.ndarray | Sequence[int]) -> np.ndarray:
        """Publish ``terms`` with reserved ``ids``; a term already present keeps its id."""
        out = np.asarray(ids, dtype=np.int64).copy()
        for k, (t, i) in enumerate(zip(terms, out.tolist())):
            old = self._known(t)
            if old:
                out[k] = old
            elif 0 < i < len(self._terms) and self._terms[i] is None:
                if self._index is not None:
                    self._index.put(t, i)
                else:
                    self._ids[t] = i
                self._terms[i] = t
            else:
                raise ValueError(f"id {i} was not reserved (or is already used)")
        return out

    def _known(self, term: str) -> int:
        """The id of ``term``, or 0."""
        return self._index.get(term) if self._index is not None else self._ids.get(term, 0)

    def __len__(self) -> int:
        return len(self._index) if self._index is not None else len(self._ids)

    def close(self) -> None:
        pass


_BACKENDS: dict[str, Callable[[str], Dictionary]] = {}


def register_backend(scheme: str, factory: Callable[[str], Dictionary]) -> None:
    """Register ``factory(uri)`` for dictionary URIs ``scheme:...``."""
    _BACKENDS[scheme] = factory


def open_dictionary(uri: str = "memory:") -> Dictionary:
    """Open the dictionary named by ``uri`` (``memory:``, ``lmdb:PATH``, ``hbase://h:p/table``)."""
    scheme = uri.split(":", 1)[0].lower()
    if scheme not in _BACKENDS:
        _load_optional_backends(scheme)
    try:
        factory = _BACKENDS[scheme]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS))
        raise ValueError(f"unknown dictionary backend {uri!r} (known schemes: {known})") from None
    return factory(uri)


#: the module of each optional backend (it registers itself on import)
_BACKEND_MODULES = {"lmdb": "linkstream.rdf.lmdb_dictionary", "hbase": "linkstream.rdf.hbase_dictionary"}


def _load_optional_backends(scheme: str | None = None) -> None:
    """Imports the module of ``scheme`` (every optional backend without one).

    Only the backend asked for: opening an LMDB dictionary does not import the HBase
    client (a tenth of a second of a ``linkstream sparql`` call).
    """
    import importlib

    mods = [_BACKEND_MODULES[scheme]] if scheme in _BACKEND_MODULES else list(_BACKEND_MODULES.values())
    for mod in mods:
        try:
            importlib.import_module(mod)
        except ImportError:
            pass


register_backend("memory", lambda uri: MemoryDictionary())
