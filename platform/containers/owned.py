"""A container's side of the owners' sender (``run --zk --ingest direct``, step 2 of
``docs/architecture.md``, "Direct ingest"): applying the elements an owner coordinator
sends (:class:`~linkstream.containers.messages.Owned`) through the container's
:class:`~linkstream.containers.cuts.CutGate`.

An ``owned`` message names the leader's applied count of its first element, so the gate
applies it only as far as the cut of the first waiting tick that names its stream,
passes over counts applied already (the owner's resend, or the part a ``sync`` backlog
brought) and holds it after a gap.  A stream's runs are given to the gate only once the
stream is *live* here (subscribed and synced: the ``sync`` sets its count, so nothing the
backlog carries is applied twice); runs of a stream the container subscribed to but
whose ``sync`` has not come are kept (:class:`EarlyRuns`) and handed over then; runs of
other streams are dropped.

Each message carries the terms of its triples: the container encodes them in its own
dictionary (once per message, however many slices of it the gate applies) and
deduplicates each element's triples as the leader's worker does before it routes them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, overload

import numpy as np

from linkstream.containers.messages import Owned
from linkstream.rdf.static import dedup_triples

if TYPE_CHECKING:
    from linkstream.containers.replica import RunReplica


class OwnedSlice(Sequence[int]):
    """Elements ``lo .. hi - 1`` of one ``owned`` message, as the gate slices them (its items
    are the elements' indexes in the message)."""

    __slots__ = ("hi", "lo", "message", "offsets")

    def __init__(self, message: Owned, lo: int = 0, hi: int | None = None, offsets: list[int] | None = None):
        self.message = message
        self.lo = lo
        self.hi = message.meta.shape[1] if hi is None else hi
        self.offsets = (
            offsets if offsets is not None else np.concatenate([[0], np.cumsum(message.meta[1])]).tolist()
        )

    def __len__(self) -> int:
        return max(0, self.hi - self.lo)

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> OwnedSlice: ...
    def __getitem__(self, i: int | slice) -> int | OwnedSlice:
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step != 1:
                raise ValueError("an owned run is sliced in order only")
            return OwnedSlice(self.message, self.lo + a, self.lo + max(a, b), self.offsets)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return self.lo + i

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.lo, self.hi))


class OwnedApplier:
    """Applies the gate's slices of ``owned`` messages to a run's replica."""

    def __init__(self, replica: RunReplica) -> None:
        self.replica = replica
        self._coded: tuple[Owned, np.ndarray] | None = None  # (the message, its terms' ids)
        #: elements applied from owners (all streams)
        self.elements = 0

    def __call__(self, stream: str, run: Sequence[int]) -> None:
        assert isinstance(run, OwnedSlice)
        replica, message = self.replica, run.message
        j = replica.spec.streams.index(stream)
        if self._coded is None or self._coded[0] is not message:  # held: its id is not reused
            ids = np.asarray(replica.engine.dictionary.encode_many(message.terms), dtype=np.int64)
            self._coded = (message, ids)
        ids = self._coded[1]
        times, at = message.meta[0].tolist(), run.offsets
        for i in range(run.lo, run.hi):
            triples = dedup_triples(ids[message.triples[at[i] : at[i + 1]]])
            replica.engine.ingest(stream, times[i], triples)
            replica.triples += len(triples)
        n = len(run)
        replica.counts[j] += n
        replica.stream_elements[j] += n
        self.elements += n


class EarlyRuns:
    """Runs of streams subscribed to but not synced yet, until their ``sync`` comes."""

    def __init__(self) -> None:
        self._runs: dict[str, list[OwnedSlice]] = {}

    def keep(self, stream: str, run: OwnedSlice) -> None:
        self._runs.setdefault(stream, []).append(run)

    def release(self, live: Callable[[str], bool], give: Callable[[str, int, OwnedSlice], None]) -> None:
        """Hands the kept runs of the streams now ``live`` to ``give(stream, first, run)``."""
        for stream in [s for s in self._runs if live(s)]:
            for run in self._runs.pop(stream):
                give(stream, run.message.first, run)

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drops the kept runs of the streams no longer wanted."""
        for stream in [s for s in self._runs if not keep(s)]:
            del self._runs[stream]


__all__ = ["EarlyRuns", "OwnedApplier", "OwnedSlice"]
