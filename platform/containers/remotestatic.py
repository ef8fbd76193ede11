"""Static graphs read from store nodes instead of loaded into the container (``--remote-store``).

In this mode a container's engine does not load any static graph file and keeps no
dictionary of its own for static terms:

* **Dictionary.** :class:`OverlayDictionary` is the store's LMDB dictionary, opened
  read-only in spirit (nothing is ever written to it) from the path the store node
  advertises (same host), plus private ids above the store's ids for the terms only the
  container sees (stream terms absent from the store, query constants, computed values).
  Static triples therefore arrive as store ids, untranslated.
* **Lookups.** A query without property paths (:meth:`RemoteStatics.covers`) holds no
  static triple at all: the engine's graphs get this object as their *static source*
  (:mod:`linkstream.operators.static_probe`) and its joins look up, per delta, the
  distinct join keys in the store's indexes -- neighbour lists read by blocks through
  the remote store's bounded LRU block cache (:meth:`RemoteStatics.lookup`); window
  triples already in the static graph are found the same way (:meth:`RemoteStatics.contains`).
  The static bytes a container holds are then the block cache only.
* **Triples.** For the other queries (property paths explore the graph with operators that
  read graph contents), when a query is registered, :meth:`RemoteStatics.ensure` collects every
  triple pattern of its algebra (BGPs, EXISTS / MINUS / OPTIONAL parts, the IRIs of
  property paths; a variable predicate or a negated property set means "any") and reads,
  through the remote store's indexes, the triples of each static graph of the run
  matching each pattern.  The union of those matches -- the *pattern-relevant subgraph*
  -- is what the engine's static graph holds: every triple that can match a pattern of
  a registered query, so every query's results are those over the whole graph (a
  solution only ever uses triples matching its patterns).  Patterns already fetched are
  not read again; a new query adds only what its new patterns match.

The bytes involved are reported by :meth:`RemoteStatics.stats`: the engine's static
arrays (the pattern-relevant subgraph of the queries with paths, else none) and the
remote store's block cache.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Gauge
from rdflib import BNode as RBNode
from rdflib import URIRef, Variable
from rdflib.paths import MulPath, NegatedPath, Path, ZeroOrMore, ZeroOrOne
from rdflib.plugins.sparql.parserutils import CompValue

from linkstream.engine.oneshot.store import QueryDictionary
from linkstream.query.continuous import ContinuousQuery
from linkstream.query.expressions import from_rdflib
from linkstream.rdf.dictionary import Dictionary
from linkstream.store.remote import RemoteStore

log = logging.getLogger(__name__)


#: a triple pattern over term strings (``None`` = variable)
TermPattern = tuple[str | None, str | None, str | None]


class OverlayDictionary(QueryDictionary):
    """The store's dictionary for lookups, private ids for terms it does not hold (the
    one-shot :class:`~linkstream.engine.oneshot.store.QueryDictionary`, with the id space
    a container's engine needs on top).

    Args:
        base: The store's dictionary (only ``lookup_many`` / ``decode_many`` are called).
        start: The first private id (default: one above the store dictionary's size; the
            served store is immutable, so every container of a run starts at the same id).
    """

    def __init__(self, base: Dictionary, start: int | None = None) -> None:
        super().__init__(base, len(base) + 1 if start is None else start)

    def reserve(self, n: int) -> int:
        first = self.start + len(self._terms)
        self._terms.extend([""] * n)
        return first

    @property
    def private_terms(self) -> int:
        return len(self._terms)

    def close(self) -> None:
        """Nothing to release: the remote store owns the base dictionary."""


def _term(t: object) -> str | None:
    if isinstance(t, (Variable, RBNode)):
        return None
    return from_rdflib(t).n3()


def _path_patterns(p: Path, out: list[TermPattern]) -> bool:
    """Adds a pattern per IRI of path ``p``; returns whether it can be zero-length."""
    if isinstance(p, NegatedPath):
        out.append((None, None, None))  # any predicate but some: read every triple
        return False
    zero = isinstance(p, MulPath) and p.mod in (ZeroOrMore, ZeroOrOne)
    for attr in ("args", "arg", "path"):
        sub = getattr(p, attr, None)
        for x in sub if isinstance(sub, (list, tuple)) else [sub]:
            if isinstance(x, Path):
                zero = _path_patterns(x, out) or zero
            elif isinstance(x, URIRef):
                out.append((None, _term(x), None))
    return zero


def has_paths(node: object, seen: set[int] | None = None) -> bool:
    """Whether a query's algebra has a property path (other than a plain IRI)."""
    seen = set() if seen is None else seen
    if id(node) in seen:
        return False
    seen.add(id(node))
    if isinstance(node, CompValue):
        triples = node.get("triples")
        if isinstance(triples, list) and any(
            isinstance(tr, (list, tuple)) and len(tr) == 3 and isinstance(tr[1], Path) for tr in triples
        ):
            return True
        return any(has_paths(v, seen) for v in node.values())
    if isinstance(node, (list, tuple)):
        return any(has_paths(v, seen) for v in node)
    return False


def query_patterns(
    node: object, out: list[TermPattern] | None = None, seen: set[int] | None = None
) -> list[TermPattern]:
    """Every triple pattern in a query's algebra (see the module docstring)."""
    out = [] if out is None else out
    seen = set() if seen is None else seen
    if id(node) in seen:
        return out
    seen.add(id(node))
    if isinstance(node, CompValue):
        triples = node.get("triples")
        if isinstance(triples, list):
            for tr in triples:
                if isinstance(tr, (list, tuple)) and len(tr) == 3:
                    s, p, o = tr
                    if isinstance(p, Path):
                        if _path_patterns(p, out) and _term(s) is None and _term(o) is None:
                            out.append((None, None, None))  # zero-length: every node of the graph
                    else:
                        out.append((_term(s), _term(p), _term(o)))
        for v in node.values():
            query_patterns(v, out, seen)
    elif isinstance(node, (list, tuple)):
        for v in node:
            query_patterns(v, out, seen)
    elif hasattr(node, "__dict__") and hasattr(node, "algebra"):
        query_patterns(node.algebra, out, seen)
    return out


class RemoteStatics:
    """The static graphs of one run, read from a :class:`RemoteStore` (module docstring).

    Args:
        store: The remote store.
        graphs: The run's static graphs (``None`` = default graph): each is read from the
            store graph of the same IRI.
    """

    def __init__(self, store: RemoteStore, graphs: Iterable[str | None]) -> None:
        self.store = store
        self.graphs = list(dict.fromkeys(graphs))
        self.dictionary = OverlayDictionary(store.dictionary)
        held = set(store.snapshot().graphs())
        missing = [g for g in self.graphs if g not in held]
        if missing:
            log.warning("static graphs %s are not in the remote store; treated as empty", missing)
        self._held = held
        self._fetched: set[TermPattern] = set()
        #: triples read from the store (pattern matches, before deduplication)
        self.fetched_triples = 0
        #: lookups answered for the engine's joins, and the static triples they returned
        self.lookups = 0
        self.looked_up = 0

    # ------------------------------------------------------------ lookups (static source)

    def covers(self, cq: ContinuousQuery) -> bool:
        """Whether ``cq``'s static parts are looked up on demand (no property path)."""
        return not has_paths(cq.algebra.algebra)

    def lookup(
        self, graphs: tuple[str | None, ...], pos: int | None, keys: np.ndarray | None, p: int | None
    ) -> np.ndarray:
        """The distinct triples of the merge of ``graphs`` whose subject (``pos=0``) or
        object (``pos=2``) is in ``keys`` (``pos=None``: any), with predicate ``p``
        (``None``: any): neighbour lists of the keys, batched, through the block cache."""
        snap = self.store.snapshot()
        parts = []
        for g in graphs:
            if g not in self._held:
                continue
            if pos is None or keys is None:
                t = snap.match(g, None, p, None)
            else:
                rows, preds, nbrs = snap.neighbours(g, keys, p, "out" if pos == 0 else "in")
                t = np.empty((len(rows), 3), dtype=np.int64)
                t[:, pos] = keys[rows]
                t[:, 1] = preds
                t[:, 2 - pos] = nbrs
            if len(t):
                parts.append(t)
        self.lookups += 1
        if not parts:
            return np.empty((0, 3), dtype=np.int64)
        out = parts[0] if len(parts) == 1 else np.unique(np.concatenate(parts), axis=0)
        self.looked_up += len(out)
        return out

    def contains(self, graphs: tuple[str | None, ...], triples: np.ndarray) -> np.ndarray:
        """Boolean mask: which rows of an ``(n, 3)`` array are in the merge of ``graphs``."""
        snap = self.store.snapshot()
        found = np.zeros(len(triples), dtype=bool)
        for g in graphs:
            if g in self._held and len(triples):
                found |= snap.contains(g, triples)
        return found

    def ensure(self, cqs: Sequence[ContinuousQuery]) -> dict[str | None, np.ndarray]:
        """The triples of each static graph the queries' new patterns match (not yet fetched)."""
        pats: list[TermPattern] = []
        for cq in cqs:
            query_patterns(cq.algebra.algebra, pats)
        new = list(dict.fromkeys(p for p in pats if p not in self._fetched))
        if not new:
            return {}
        if (None, None, None) in new:
            new = [(None, None, None)]
        consts = [t for p in new for t in p if t is not None]
        ids = dict(zip(consts, self.store.dictionary.lookup_many(consts).tolist())) if consts else {}
        snap = self.store.snapshot()
        out: dict[str | None, np.ndarray] = {}
        for g in self.graphs:
            parts = []
            for pat in new:
                if any(t is not None and not ids.get(t) for t in pat):
                    continue  # a constant the store does not hold: nothing matches
                s, p, o = (None if t is None else int(ids[t]) for t in pat)
                parts.append(snap.match(g, s, p, o))
            parts = [x for x in parts if len(x)]
            if parts:
                arr = np.concatenate(parts)
                self.fetched_triples += len(arr)
                out[g] = np.unique(arr, axis=0)
        self._fetched.update(new)
        if (None, None, None) in new:
            self._fetched.add((None, None, None))
        return out

    def covers_all(self) -> bool:
        return (None, None, None) in self._fetched

    def stats(self) -> dict[str, int]:
        c = self.store.cache.stats()
        return {
            "cache_bytes": c["bytes"],
            "cache_capacity": c["capacity"],
            "read_bytes": c["read_bytes"],
            "cache_evictions": c["evictions"],
            "private_terms": self.dictionary.private_terms,
            "failovers": self.store.failovers,
            "lookups": self.lookups,
            "looked_up_triples": self.looked_up,
        }


class StaticGauges:
    """Container metrics of the static data a replica holds (see :meth:`RunReplica.static_stats`).

    * ``linkstream_static_engine_bytes``: bytes of static triples the engine holds (whole
      graphs when loaded from files; the pattern-relevant triples with ``--remote-store``);
    * ``linkstream_static_cache_bytes``: bytes in the remote store's block cache;
    * ``linkstream_static_remote_read_bytes``: bytes read from store nodes so far.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.engine = Gauge(
            "linkstream_static_engine_bytes",
            "Bytes of static triples the container's engine holds",
            registry=registry,
        )
        self.cache = Gauge(
            "linkstream_static_cache_bytes",
            "Bytes of remote store blocks cached by the container",
            registry=registry,
        )
        self.read = Gauge(
            "linkstream_static_remote_read_bytes",
            "Bytes the container read from store nodes",
            registry=registry,
        )

    def update(self, stats: dict[str, int | str]) -> None:
        self.engine.set(int(stats.get("engine_static_bytes", 0)))
        self.cache.set(int(stats.get("cache_bytes", 0)))
        self.read.set(int(stats.get("read_bytes", 0)))


__all__ = ["OverlayDictionary", "RemoteStatics", "StaticGauges", "has_paths", "query_patterns"]
