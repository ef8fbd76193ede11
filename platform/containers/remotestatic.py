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
  the remote store's bounded LRU block cache (:meth:`RemoteStatics.lookup`); a lookup
  of a few keys is also remembered by request in the store's result cache (an eighth of
  the same bound: windows slide, the same keys come back); window triples already in the
  static graph are found the same way (:meth:`RemoteStatics.contains`).  The static bytes
  a container holds are then the cache only, within its bound (``--cache-mb``).
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
remote store's caches (blocks and lookup results).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import numpy as np
from prometheus_client import CollectorRegistry, Gauge

from linkstream.engine.oneshot.store import QueryDictionary
from linkstream.query.algebra_json import is_node
from linkstream.query.aterms import BNode as RBNode
from linkstream.query.aterms import MulPath, NegatedPath, Path, URIRef, Variable, ZeroOrMore, ZeroOrOne
from linkstream.query.continuous import ContinuousQuery
from linkstream.query.expressions import from_rdflib
from linkstream.rdf.dictionary import Dictionary
from linkstream.store.persistent import PersistentSnapshot
from linkstream.store.remote import RemoteStore

log = logging.getLogger(__name__)


#: lookups of at most this many keys are remembered (by request) in the result cache
MEMO_KEYS = 64

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
    if is_node(node):
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
    if is_node(node):
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
        #: subject-hash partitions of the served graphs (``linkstream load``: ``s % P``)
        self._nparts = max(1, int(store.advertisement.partitions_total))
        #: (graph, predicate) -> whether the graph has the predicate at all (a few ints:
        #: patterns of stream-only predicates then skip the graph without a read)
        self._has_pred: dict[tuple[str | None, int], bool] = {}
        self._fetched: set[TermPattern] = set()
        #: triples read from the store (pattern matches, before deduplication)
        self.fetched_triples = 0
        #: lookups answered for the engine's joins, and the static triples they returned
        self.lookups = 0
        self.looked_up = 0
        #: bytes of joins of static parts alone emitted whole (held by the operators above)
        self.materialised_bytes = 0

    # ------------------------------------------------------------ lookups (static source)

    def covers(self, cq: ContinuousQuery) -> bool:
        """Whether ``cq``'s static parts are looked up on demand (no property path)."""
        return not has_paths(cq.algebra.algebra)

    def lookup(
        self, graphs: tuple[str | None, ...], pos: int | None, keys: np.ndarray | None, p: int | None
    ) -> np.ndarray:
        """The distinct triples of the merge of ``graphs`` whose subject (``pos=0``) or
        object (``pos=2``) is in ``keys`` (``pos=None``: any), with predicate ``p``
        (``None``: any): neighbour lists of the keys, batched, through the block cache
        (and the result cache for lookups of at most ``MEMO_KEYS`` keys)."""
        self.lookups += 1
        memo: tuple | None = None
        if keys is None or len(keys) <= MEMO_KEYS:
            kb = b"" if keys is None else np.ascontiguousarray(keys, dtype=np.int64).tobytes()
            memo = (graphs, pos, p, kb)
            got = self.store.results.get(memo)
            if got is not None:
                self.looked_up += len(got)
                return got
        snap = self.store.snapshot()
        parts: list[np.ndarray] = []
        hit = 0  # graphs that gave triples (the merge of several is deduplicated)
        for g in graphs:
            n = len(parts)
            if g not in self._held or (p is not None and not self._graph_has(snap, g, p)):
                continue
            if pos is None or keys is None:
                t = snap.match(g, None, p, None)
                if len(t):
                    parts.append(t)
                continue
            indexes = snap.partitions(g)
            # a subject lives in partition s % P: an out-lookup reads only the keys' partitions
            route = pos == 0 and len(indexes) == self._nparts > 1
            home = keys % self._nparts if route else None
            for k, ix in enumerate(indexes):
                kk = keys if home is None else keys[home == k]
                if not len(kk) or not ix.size:
                    continue
                rows, preds, nbrs = ix.neighbours(kk, p, "out" if pos == 0 else "in")
                if len(rows):
                    t = np.empty((len(rows), 3), dtype=np.int64)
                    t[:, pos] = kk[rows]
                    t[:, 1] = preds
                    t[:, 2 - pos] = nbrs
                    parts.append(t)
            hit += len(parts) > n
        if not parts:
            out = np.empty((0, 3), dtype=np.int64)
        else:
            out = parts[0] if len(parts) == 1 else np.concatenate(parts)
            if hit > 1:
                out = np.unique(out, axis=0)
        if memo is not None:
            self.store.results.put(memo, out, len(memo[3]))
        self.looked_up += len(out)
        return out

    def recall(self, key: tuple) -> np.ndarray | None:
        """A result remembered in the store's result cache (see ``StaticSource``)."""
        return self.store.results.get(key)

    def remember(self, key: tuple, value: np.ndarray, key_bytes: int) -> None:
        """Keeps ``value`` in the store's result cache, within its bound."""
        self.store.results.put(key, value, key_bytes)

    def materialised(self, nbytes: int) -> None:
        """Counts a join of static parts alone emitted whole (see ``StaticSource``)."""
        self.materialised_bytes += nbytes

    def has_predicate(self, graphs: tuple[str | None, ...], p: int) -> bool:
        """Whether any of ``graphs`` has a triple with predicate ``p``."""
        snap = self.store.snapshot()
        return any(g in self._held and self._graph_has(snap, g, p) for g in graphs)

    def _graph_has(self, snap: PersistentSnapshot, g: str | None, p: int) -> bool:
        got = self._has_pred.get((g, p))
        if got is None:
            got = self._has_pred[(g, p)] = snap.cardinality(g, p) > 0
        return got

    def contains(self, graphs: tuple[str | None, ...], triples: np.ndarray) -> np.ndarray:
        """Boolean mask: which rows of an ``(n, 3)`` array are in the merge of ``graphs``."""
        snap = self.store.snapshot()
        found = np.zeros(len(triples), dtype=bool)
        if not len(triples):
            return found
        home = triples[:, 0] % self._nparts
        for g in graphs:
            if g not in self._held:
                continue
            indexes = snap.partitions(g)
            if len(indexes) != self._nparts:
                found |= snap.contains(g, triples)
                continue
            for k, ix in enumerate(indexes):  # a triple lives in its subject's partition
                rows = np.flatnonzero(home == k)
                if len(rows) and ix.size:
                    found[rows] |= ix.contains(triples[rows])
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
        r = self.store.results
        return {
            # the blocks of the store's indexes and the lookup results: one bound
            "cache_bytes": c["bytes"] + r.bytes,
            "cache_capacity": c["capacity"] + r.capacity,
            "read_bytes": c["read_bytes"],
            "cache_evictions": c["evictions"] + r.evictions,
            "result_hits": r.hits,
            "private_terms": self.dictionary.private_terms,
            "failovers": self.store.failovers,
            "lookups": self.lookups,
            "looked_up_triples": self.looked_up,
            "materialised_bytes": self.materialised_bytes,
        }


class StaticGauges:
    """Container metrics of the static data a replica holds (see :meth:`RunReplica.static_stats`).

    * ``linkstream_static_engine_bytes``: bytes of static triples the engine holds (whole
      graphs when loaded from files; with ``--remote-store`` none, or the pattern-relevant
      triples of queries with property paths);
    * ``linkstream_static_cache_bytes``: bytes in the remote store's caches (at most
      ``linkstream_static_cache_capacity_bytes``);
    * ``linkstream_static_remote_read_bytes``: bytes read from store nodes so far;
    * ``linkstream_static_cache_evictions`` and ``linkstream_static_lookups``: blocks
      evicted from the cache, and lookups the joins made, so far;
    * ``linkstream_static_materialised_bytes``: bytes of joins of static parts alone that
      joins emitted whole (a query part matching static triples only, e.g. C-SPARQL
      patterns all matched by the static graph): the operators above keep those rows.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.engine = Gauge(
            "linkstream_static_engine_bytes",
            "Bytes of static triples the container's engine holds",
            registry=registry,
        )
        self.cache = Gauge(
            "linkstream_static_cache_bytes",
            "Bytes of remote store blocks and lookup results cached by the container",
            registry=registry,
        )
        self.read = Gauge(
            "linkstream_static_remote_read_bytes",
            "Bytes the container read from store nodes",
            registry=registry,
        )
        self.capacity = Gauge(
            "linkstream_static_cache_capacity_bytes",
            "Bound of the container's cache of remote store blocks and lookup results",
            registry=registry,
        )
        self.evictions = Gauge(
            "linkstream_static_cache_evictions",
            "Remote store blocks evicted from the container's cache so far",
            registry=registry,
        )
        self.lookups = Gauge(
            "linkstream_static_lookups",
            "Static lookups (neighbour lists of a delta's keys) the container's joins made so far",
            registry=registry,
        )
        self.materialised = Gauge(
            "linkstream_static_materialised_bytes",
            "Bytes of joins of static parts alone the container's joins emitted whole",
            registry=registry,
        )

    def update(self, stats: dict[str, int | str]) -> None:
        self.engine.set(int(stats.get("engine_static_bytes", 0)))
        self.cache.set(int(stats.get("cache_bytes", 0)))
        self.read.set(int(stats.get("read_bytes", 0)))
        self.capacity.set(int(stats.get("cache_capacity", 0)))
        self.evictions.set(int(stats.get("cache_evictions", 0)))
        self.lookups.set(int(stats.get("lookups", 0)))
        self.materialised.set(int(stats.get("materialised_bytes", 0)))


__all__ = ["OverlayDictionary", "RemoteStatics", "StaticGauges", "has_paths", "query_patterns"]
