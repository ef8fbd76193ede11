"""Literals that one-shot queries treat as another term: derived integer types as xsd:integer.

The N-Triples parser already stores every numeric and boolean literal in its canonical
lexical form *within its datatype* (``"01"^^xsd:integer`` is stored as ``"1"``,
``"1.50"^^xsd:decimal`` as ``"1.5"``, ``"1"^^xsd:boolean`` as ``"true"``).  The reference
store the one-shot tests compare with goes one step further: a valid literal of a type
derived from ``xsd:integer`` (``xsd:int``, ``xsd:long``, ``xsd:short``, ``xsd:byte``,
``xsd:nonNegativeInteger``, ``xsd:unsignedByte`` ...) is stored as the ``xsd:integer`` of
the same value (range facets are not checked: ``"300"^^xsd:byte`` becomes ``300``; a
value outside the 64-bit range stays as written).  So ``"1"^^xsd:int`` and ``1`` are one
term there: they join, are one DISTINCT row and one group, ``sameTerm`` holds and
``DATATYPE`` says ``xsd:integer``.

One-shot evaluation reproduces that without rewriting the store: :class:`LiteralAliases`
finds (once per dictionary, then incrementally as it grows) the store ids of such
*alias* literals, and :class:`AliasMap` maps them, vectorised, to the id of their
canonical term while a query reads the snapshot (and widens a canonical id to its
aliases when the snapshot is searched for it).  Query constants go through
:func:`canonical_term` before they are encoded.

Finding the aliases decodes every id once (about a microsecond each with LMDB); for a
store directory the result is cached in ``DIR/index/literal-aliases.npz`` (dictionary
ids never change meaning, so it stays valid and only newer ids are looked at later).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from linkstream.rdf.dictionary import Dictionary
from linkstream.rdf.terms import INTEGER_TYPES, XSD_INTEGER

_log = logging.getLogger(__name__)
_I64 = np.int64
_EMPTY = np.empty(0, dtype=_I64)
#: the derived types, as they end an N-Triples literal
_DERIVED_SUFFIXES = tuple(f"^^<{dt}>" for dt in sorted(INTEGER_TYPES - {XSD_INTEGER}))
_INT_RE = re.compile(r"[+-]?[0-9]+")
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_SCAN_CHUNK = 1 << 18
_CACHE_MIN_GROWTH = 1 << 14  # rewrite the cache file after scanning this many more ids
ALIAS_CACHE = "literal-aliases.npz"  # file name under a store directory's index folder
_PROBES = 8  # ids whose terms the cache records, to notice a different dictionary


def canonical_term(nt: str) -> str:
    """The term the reference store keeps for the N-Triples term ``nt`` (derived integers only).

    Returns ``nt`` itself unless it is a valid literal of a type derived from
    ``xsd:integer`` whose value fits in 64 bits; then the ``xsd:integer`` literal of the
    same value.
    """
    if not nt or nt[0] != '"' or nt[-1] != ">" or not nt.endswith(_DERIVED_SUFFIXES):
        return nt
    end = nt.rfind('"^^<')
    lex = nt[1:end]
    if not _INT_RE.fullmatch(lex):
        return nt  # invalid (or escaped) lexical form: kept as written
    v = int(lex)
    if not _I64_MIN <= v <= _I64_MAX:
        return nt
    return _integer_term(v)


def _integer_term(v: int) -> str:
    return f'"{v}"^^<{XSD_INTEGER}>'


def _alias_value(nt: str) -> int | None:
    """The integer an alias literal stands for (``None``: not an alias)."""
    c = canonical_term(nt)
    if c == nt:
        return None
    return int(c[1 : c.index('"', 1)])


def canonical_terms(terms: Sequence[str]) -> list[str]:
    """:func:`canonical_term` of each term (the list itself when nothing changes)."""
    out: list[str] | None = None
    for k, t in enumerate(terms):
        if t and t[-1] == ">" and t[0] == '"':
            c = canonical_term(t)
            if c is not t and c != t:
                if out is None:
                    out = list(terms)
                out[k] = c
    return out if out is not None else list(terms)


class LiteralAliases:
    """The alias literals of one dictionary: store ids and the integer each stands for.

    Args:
        dictionary: The store's dictionary (only read).
        cache: A file remembering the result between processes (see the module docstring).
    """

    def __init__(self, dictionary: Dictionary, cache: str | os.PathLike[str] | None = None) -> None:
        self.dictionary = dictionary
        self.scanned = 1  # ids below this were looked at
        self._ids: list[np.ndarray] = []
        self._values: list[np.ndarray] = []
        self.cache: Path | None = None
        self._saved = 1
        if cache is not None:
            self.attach_cache(cache)

    @property
    def ids(self) -> np.ndarray:
        """Alias ids, ascending."""
        if len(self._ids) > 1:
            self._ids = [np.concatenate(self._ids)]
        return self._ids[0] if self._ids else _EMPTY

    @property
    def values(self) -> np.ndarray:
        """The integer each alias of :attr:`ids` stands for."""
        if len(self._values) > 1:
            self._values = [np.concatenate(self._values)]
        return self._values[0] if self._values else _EMPTY

    def attach_cache(self, path: str | os.PathLike[str]) -> None:
        """Use (and from now on keep up to date) the cache file ``path``, if it fits."""
        if self.cache is not None:
            return
        self.cache = Path(path)
        try:
            with np.load(self.cache, allow_pickle=False) as z:
                scanned = int(z["scanned"])
                ids, values = z["ids"].astype(_I64), z["values"].astype(_I64)
                probe_ids, probe_terms = z["probe_ids"].astype(_I64), [str(t) for t in z["probe_terms"]]
        except FileNotFoundError:
            return
        except (OSError, ValueError, KeyError) as e:
            _log.warning("%s: unusable literal alias cache: %s", self.cache, e)
            return
        if scanned <= self.scanned or scanned - 1 > len(self.dictionary):
            return
        if len(probe_ids) and self.dictionary.decode_many(probe_ids) != probe_terms:
            _log.warning("%s: written for another dictionary, ignored", self.cache)
            return
        self.scanned = self._saved = scanned
        self._ids, self._values = [ids], [values]

    def update(self, size: int) -> None:
        """Looks at the ids ``scanned .. size`` (decoding them once, in chunks)."""
        while self.scanned <= size:
            hi = min(size + 1, self.scanned + _SCAN_CHUNK)
            ids = np.arange(self.scanned, hi, dtype=_I64)
            found: list[int] = []
            values: list[int] = []
            for k, t in enumerate(self.dictionary.decode_many(ids)):
                # the cheap test first: most terms are IRIs or plain literals
                if t and t[-1] == ">" and t[0] == '"' and t.endswith(_DERIVED_SUFFIXES):
                    v = _alias_value(t)
                    if v is not None:
                        found.append(k)
                        values.append(v)
            if found:
                self._ids.append(ids[np.asarray(found, dtype=_I64)])
                self._values.append(np.asarray(values, dtype=_I64))
            self.scanned = hi
        if self.cache is not None and self.scanned - self._saved >= _CACHE_MIN_GROWTH:
            self._save()

    def _save(self) -> None:
        assert self.cache is not None
        probe_ids = np.unique(np.linspace(1, self.scanned - 1, _PROBES).astype(_I64))
        probe_ids = probe_ids[probe_ids > 0]
        tmp = self.cache.with_name(f"{self.cache.stem}.{os.getpid()}.tmp.npz")
        try:
            self.cache.parent.mkdir(parents=True, exist_ok=True)
            np.savez(
                tmp,
                scanned=np.int64(self.scanned),
                ids=self.ids,
                values=self.values,
                probe_ids=probe_ids,
                probe_terms=np.array(self.dictionary.decode_many(probe_ids), dtype=str),
            )
            os.replace(tmp, self.cache)
            self._saved = self.scanned
        except OSError as e:  # a read-only store directory: scan again next time
            _log.debug("%s: cannot write the literal alias cache: %s", self.cache, e)

    def bind(self, encode: Callable[[Sequence[str]], np.ndarray]) -> AliasMap:
        """The map of the aliases to the ids ``encode`` gives their canonical terms."""
        if not len(self.ids):
            return AliasMap(_EMPTY, _EMPTY)
        terms = [_integer_term(v) for v in self.values.tolist()]
        return AliasMap(self.ids, np.asarray(encode(terms), dtype=_I64))


class AliasMap:
    """Vectorised alias id -> canonical id mapping, and its inverse.

    Args:
        alias: Alias ids, ascending.
        target: The canonical id of each alias.
    """

    def __init__(self, alias: np.ndarray, target: np.ndarray) -> None:
        self.alias = alias
        self.target = target
        order = np.argsort(target, kind="stable")
        self._t_sorted = target[order]
        self._a_by_t = alias[order]

    def __bool__(self) -> bool:
        return len(self.alias) > 0

    def canon(self, col: np.ndarray) -> tuple[np.ndarray, bool]:
        """``col`` with every alias id replaced by its canonical id; whether any was."""
        if not len(self.alias) or not len(col):
            return col, False
        pos = np.searchsorted(self.alias, col)
        np.minimum(pos, len(self.alias) - 1, out=pos)
        hit = self.alias[pos] == col
        if not hit.any():
            return col, False
        out = col.copy()
        out[hit] = self.target[pos[hit]]
        return out, True

    def is_target(self, col: np.ndarray) -> np.ndarray:
        """Which ids of ``col`` are the canonical id of some alias."""
        if not len(self.alias) or not len(col):
            return np.zeros(len(col), dtype=bool)
        pos = np.searchsorted(self._t_sorted, col)
        np.minimum(pos, len(self._t_sorted) - 1, out=pos)
        return self._t_sorted[pos] == col

    def widen(self, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The vertices plus the aliases of each, and the index of the vertex each came from.

        Returns ``(vertices, None)`` when no vertex has an alias.
        """
        if not len(self.alias) or not len(vertices):
            return vertices, None
        lo = np.searchsorted(self._t_sorted, vertices, "left")
        hi = np.searchsorted(self._t_sorted, vertices, "right")
        cnt = hi - lo
        total = int(cnt.sum())
        if not total:
            return vertices, None
        origin = np.repeat(np.arange(len(vertices)), cnt)
        first = np.cumsum(cnt) - cnt
        extra = self._a_by_t[np.repeat(lo - first, cnt) + np.arange(total)]
        return (
            np.concatenate([vertices, extra]),
            np.concatenate([np.arange(len(vertices)), origin]),
        )

    def members(self, i: int) -> list[int]:
        """``i`` and its aliases."""
        lo, hi = np.searchsorted(self._t_sorted, [i, i + 1]) if len(self.alias) else (0, 0)
        return [i, *self._a_by_t[lo:hi].tolist()]


NO_ALIASES = AliasMap(_EMPTY, _EMPTY)

__all__ = ["ALIAS_CACHE", "AliasMap", "LiteralAliases", "NO_ALIASES", "canonical_term", "canonical_terms"]
