"""The hybrid store: persistent graphs (+ timeless absorption) and the transient stream ring.

:class:`HybridStore` is what the platform opens for a store directory: one-shot queries
take :meth:`HybridStore.snapshot` (the persistent side, consistent with the stable VTS),
timeless streams :meth:`HybridStore.absorb` into the graphs, and windowed streams keep
their batches in the transient ring (:meth:`append`, :meth:`window`, :meth:`retain`).

An engine running on a store keeps its windows in that same ring:
``Engine(store.dictionary, transient=store.transient)`` makes every stream buffer a
:class:`~linkstream.operators.window.RingBuffer` over it (``linkstream replay --store``
and ``linkstream run --store`` do so), so there is one transient store per process.
"""

from __future__ import annotations

import os

import numpy as np

from linkstream.rdf.dictionary import Dictionary
from linkstream.store.persistent import PersistentSnapshot, PersistentStore
from linkstream.store.transient import TimedBatch, TransientStore


class HybridStore:
    """Persistent + transient store behind one object (satisfies ``AbsorbingStore``).

    Args:
        persistent: the graph side.
        transient: the stream ring (a fresh one with 1 s slots if omitted).
    """

    def __init__(self, persistent: PersistentStore, transient: TransientStore | None = None) -> None:
        self.persistent = persistent
        self.transient = transient if transient is not None else TransientStore()
        self.dictionary: Dictionary = persistent.dictionary
        self.capabilities = persistent.capabilities | self.transient.capabilities

    @classmethod
    def open(
        cls,
        store_dir: str | os.PathLike[str],
        *,
        slot_ms: int = 1000,
        capacity: int | None = None,
        **kwargs: object,
    ) -> HybridStore:
        """Open a store directory (``kwargs`` go to :meth:`PersistentStore.open`)."""
        return cls(PersistentStore.open(store_dir, **kwargs), TransientStore(slot_ms, capacity))  # type: ignore[arg-type]  # kwargs as PersistentStore.open

    def snapshot(self) -> PersistentSnapshot:
        """A consistent view of the graphs (every absorbed batch up to the stable VTS)."""
        return self.persistent.snapshot()

    def absorb(self, stream: str, ts: int, triples: np.ndarray, graph: str | None = None) -> None:
        """Absorb one timeless batch into the graphs (atomically)."""
        self.persistent.absorb(stream, ts, triples, graph)

    def append(self, stream: str, ts: int, triples: np.ndarray) -> int:
        """Keep one windowed batch in the transient ring; returns its sequence number."""
        return self.transient.append(stream, ts, triples)

    def window(self, stream: str, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Triples (and their timestamps) of ``stream`` in ``[a, b)``, via the stream index."""
        return self.transient.window(stream, a, b)

    def batches(self, stream: str, a: int, b: int) -> list[TimedBatch]:
        """Batches of ``stream`` in ``[a, b)``."""
        return self.transient.batches(stream, a, b)

    def retain(self, stream: str, min_ts: int, holder: str = "default") -> int:
        """Let ``holder`` keep ``stream`` from ``min_ts`` on; collects older batches."""
        return self.transient.retain(stream, min_ts, holder)

    def release(self, stream: str, holder: str = "default") -> int:
        """Forget ``holder``'s hold on ``stream``; collects what nobody else needs."""
        return self.transient.release(stream, holder)

    def close(self) -> None:
        """Close the persistent side."""
        self.persistent.close()
