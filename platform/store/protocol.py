"""The store protocols every consumer of LinkStream's hybrid store codes against.

A :class:`Store` hands out :class:`Snapshot` views.  A snapshot is immutable: it reflects
exactly the stream batches up to its stable vector timestamp (``vts``, one entry per
stream, in the order of :attr:`Snapshot.streams` where an implementation exposes it) and
never a half-applied batch, however long it is kept and whatever the store absorbs
meanwhile.  All ids are dictionary ids (positive int64); triples are ``(n, 3)`` int64
arrays of ``(s, p, o)`` in unspecified row order, without duplicates within a graph.

The snapshots of this package's stores also carry ``streams`` (the stream names, in VTS
order) and ``number`` (the scalarised snapshot: batches applied so far), beyond the
protocol.

Graphs are named by their IRI *without* angle brackets (``"http://example.org/g"``);
``None`` is the default graph.  Asking for a graph the store does not hold yields empty
results, never an error.

Capability flags (:attr:`Store.capabilities`) say what else a store does:

* ``"persistent"``   -- static / timeless graphs (``match``, ``neighbours`` ...);
* ``"snapshots"``    -- :meth:`Store.snapshot` gives consistent VTS snapshots;
* ``"timeless"``     -- :meth:`AbsorbingStore.absorb` takes stream batches into the graphs;
* ``"transient"``    -- a per-stream ring of timestamped batches (see ``transient.py``);
* ``"stream-index"`` -- window ranges are read through a (stream, time slot) index.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from linkstream.rdf.dictionary import Dictionary

#: ``neighbours`` directions: "out" = vertex is the subject (returns objects),
#: "in" = vertex is the object (returns subjects).
DIRECTIONS = ("out", "in")

#: The canonical N-Triples form of rdf:type (the type index is keyed by its objects).
RDF_TYPE = "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>"


@runtime_checkable
class Snapshot(Protocol):
    """An immutable, consistent view of a store's graphs.

    Attributes:
        vts: the stable vector timestamp the view reflects: one local timestamp per
            stream; every batch of stream ``i`` with timestamp ``<= vts[i]`` is visible,
            nothing newer is (``-1`` / empty tuple when nothing was absorbed).
    """

    vts: tuple[int, ...]

    def graphs(self) -> list[str | None]:
        """The graphs of the view (``None`` = the default graph), default graph first."""
        ...

    def match(self, graph: str | None, s: int | None, p: int | None, o: int | None) -> np.ndarray:
        """Triples of ``graph`` matching the constants (``None`` = any position).

        Returns:
            ``(n, 3)`` int64 array of ``(s, p, o)``; found through the indexes (binary
            search), never by scanning the graph when any position is bound.
        """
        ...

    def cardinality(self, graph: str | None, p: int | None) -> int:
        """Number of triples of ``graph`` with predicate ``p`` (all triples if ``None``)."""
        ...

    def neighbours(
        self, graph: str | None, vertices: np.ndarray, p: int | None, direction: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Vectorised one-hop exploration from ``vertices``.

        Args:
            graph: the graph.
            vertices: int64 ids (repeats allowed).
            p: restrict to this predicate, or ``None`` for every predicate.
            direction: ``"out"`` (vertex is the subject, neighbours are objects) or
                ``"in"`` (vertex is the object, neighbours are subjects).

        Returns:
            ``(row, predicate, neighbour)`` int64 arrays of equal length: ``row`` indexes
            ``vertices`` (non-decreasing), one entry per matching triple.
        """
        ...

    def triples(self, graph: str | None) -> np.ndarray:
        """All ``(n, 3)`` int64 triples of ``graph``."""
        ...


@runtime_checkable
class Store(Protocol):
    """A graph store handing out consistent snapshots.

    Attributes:
        capabilities: capability flags (see the module docstring).
        dictionary: the dictionary the store's ids belong to.
    """

    capabilities: frozenset[str]
    dictionary: Dictionary

    def snapshot(self) -> Snapshot:
        """A consistent view: every batch up to the stable VTS, nothing newer (cheap)."""
        ...


@runtime_checkable
class AbsorbingStore(Store, Protocol):
    """A store that absorbs "timeless" stream data into its graphs (capability ``timeless``)."""

    def absorb(self, stream: str, ts: int, triples: np.ndarray, graph: str | None = None) -> None:
        """Apply one stream batch atomically and advance the stream's local timestamp.

        Args:
            stream: the stream's name (a new name adds an entry to the vector timestamp).
            ts: the batch's local timestamp; non-decreasing per stream.
            triples: ``(n, 3)`` int64 ids; triples already stored are ignored.
            graph: the graph receiving the batch (default graph if ``None``).

        The batch becomes visible to new snapshots only once wholly applied, together with
        the stream's new stable timestamp ``ts``.

        Raises:
            ValueError: ``ts`` is older than the stream's last batch, or bad array shape.
        """
        ...
