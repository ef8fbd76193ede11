"""A simple in-memory :class:`~linkstream.store.protocol.Store` (reference implementation).

Every graph is one immutable ``(n, 3)`` int64 array; ``match`` filters it with boolean
masks.  It is correct and small rather than fast: tests use it as the brute-force
reference for the indexed :mod:`linkstream.store.persistent` store, and code that needs a
store before a store directory exists can use it.  Absorbing a batch builds new arrays
and swaps one immutable state object, so snapshots (a reference to that object) are O(1)
and never see half a batch.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from linkstream.rdf.dictionary import Dictionary, MemoryDictionary
from linkstream.store.layout import unique_rows

_EMPTY = np.empty((0, 3), dtype=np.int64)
_EMPTY.flags.writeable = False


def _frozen(a: np.ndarray) -> np.ndarray:
    a = unique_rows(a)
    a.flags.writeable = False
    return a


def _check_triples(triples: np.ndarray) -> np.ndarray:
    t = np.asarray(triples)
    if t.ndim != 2 or t.shape[1] != 3:
        raise ValueError(f"expected an (n, 3) array of triples, got shape {t.shape}")
    return np.ascontiguousarray(t, dtype=np.int64)


@dataclass(frozen=True)
class _State:
    graphs: Mapping[str | None, np.ndarray]
    streams: tuple[str, ...]
    vts: tuple[int, ...]
    number: int = 0


class MemorySnapshot:
    """An immutable view of a :class:`MemoryStore` (satisfies ``Snapshot``)."""

    def __init__(self, state: _State) -> None:
        self._state = state
        self.vts: tuple[int, ...] = state.vts
        self.streams: tuple[str, ...] = state.streams
        self.number: int = state.number

    def graphs(self) -> list[str | None]:
        """The graphs of the view, default graph first."""
        return sorted(self._state.graphs, key=lambda g: (g is not None, g or ""))

    def triples(self, graph: str | None) -> np.ndarray:
        """All triples of ``graph`` (read-only array)."""
        return self._state.graphs.get(graph, _EMPTY)

    def match(self, graph: str | None, s: int | None, p: int | None, o: int | None) -> np.ndarray:
        """Triples of ``graph`` matching the constants (``None`` = any)."""
        t = self.triples(graph)
        mask = np.ones(len(t), dtype=bool)
        for col, v in enumerate((s, p, o)):
            if v is not None:
                mask &= t[:, col] == v
        return t[mask]

    def cardinality(self, graph: str | None, p: int | None) -> int:
        """Number of triples of ``graph`` with predicate ``p`` (all if ``None``)."""
        t = self.triples(graph)
        return len(t) if p is None else int(np.count_nonzero(t[:, 1] == p))

    def neighbours(
        self, graph: str | None, vertices: np.ndarray, p: int | None, direction: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For each vertex, its ``(predicate, neighbour)`` pairs along ``direction``."""
        if direction not in ("out", "in"):
            raise ValueError(f"direction must be 'out' or 'in', got {direction!r}")
        t = self.triples(graph)
        if p is not None:
            t = t[t[:, 1] == p]
        key, other = (0, 2) if direction == "out" else (2, 0)
        v = np.asarray(vertices, dtype=np.int64).reshape(-1)
        order = np.argsort(t[:, key], kind="stable")
        keys = t[order, key]
        lo = np.searchsorted(keys, v, "left")
        hi = np.searchsorted(keys, v, "right")
        lens = hi - lo
        rows = np.repeat(np.arange(len(v), dtype=np.int64), lens)
        starts = np.repeat(lo - np.cumsum(lens) + lens, lens)
        pos = order[starts + np.arange(len(rows), dtype=np.int64)]
        return rows, t[pos, 1].copy(), t[pos, other].copy()


class MemoryStore:
    """In-memory store with timeless absorption and VTS snapshots.

    Args:
        dictionary: the dictionary ids belong to (a fresh ``MemoryDictionary`` if omitted).
        graphs: initial graphs, ``{iri_or_None: (n, 3) int64 array}``.
    """

    capabilities = frozenset({"persistent", "snapshots", "timeless"})

    def __init__(
        self,
        dictionary: Dictionary | None = None,
        graphs: Mapping[str | None, np.ndarray] | None = None,
    ) -> None:
        self.dictionary: Dictionary = dictionary if dictionary is not None else MemoryDictionary()
        initial = {g: _frozen(_check_triples(t)) for g, t in (graphs or {}).items()}
        self._state = _State(initial, (), ())
        self._lock = threading.Lock()

    def snapshot(self) -> MemorySnapshot:
        """An O(1) consistent view (one reference read)."""
        return MemorySnapshot(self._state)

    def absorb(self, stream: str, ts: int, triples: np.ndarray, graph: str | None = None) -> None:
        """Apply one stream batch atomically (see ``AbsorbingStore.absorb``)."""
        t = _check_triples(triples)
        with self._lock:
            st = self._state
            streams, vts = list(st.streams), list(st.vts)
            if stream in streams:
                i = streams.index(stream)
                if ts < vts[i]:
                    raise ValueError(f"stream {stream!r}: timestamp {ts} older than {vts[i]}")
            else:
                streams.append(stream)
                vts.append(-1)
                i = len(streams) - 1
            vts[i] = int(ts)
            graphs = dict(st.graphs)
            if len(t):
                graphs[graph] = _frozen(np.concatenate([graphs.get(graph, _EMPTY), t]))
            # one reference assignment publishes graphs and VTS together
            self._state = _State(graphs, tuple(streams), tuple(vts), st.number + 1)

    def close(self) -> None:
        """Nothing to release (kept for symmetry with the persistent store)."""
