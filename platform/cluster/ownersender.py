"""The owners' sender of ``run --zk --ingest direct`` (step 2 of ``docs/architecture.md``,
"Direct ingest"): what an owner coordinator sends the containers of one stream.

The owner keeps each body it sequenced (:meth:`OwnedTail.add`, in offset order) until
the leader's decision on it arrives (:class:`~linkstream.cluster.decisions.OwnerDecisions`
learns it); :meth:`OwnedTail.decide` turns the decisions into runs of the elements the
leader's worker applied, numbered by the worker's *applied count* (``first`` of the
decision) -- the counts the containers' :class:`~linkstream.containers.cuts.CutGate`
compares with the ticks' cuts.  An element the leader did not take is never sent; a body
whose decision will not come (``lost``) is dropped unsent.  :func:`owned_message` packs
a run into one :class:`~linkstream.containers.protocol.Owned` message (the terms of its
bodies once, the triples as indexes into them).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np

from linkstream.containers.protocol import Owned
from linkstream.engine.live.batchpush import TermRows

_Element = tuple[int, TermRows]


class OwnedTail:
    """One owned stream's bodies (one epoch) waiting for the leader's decisions."""

    def __init__(self) -> None:
        self._bodies: deque[tuple[int, Sequence[_Element]]] = deque()
        self.lock = threading.Lock()
        #: elements handed out in runs, and elements dropped undecided (lost)
        self.sent = 0
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._bodies)

    def add(self, offset: int, elements: Sequence[_Element]) -> None:
        """A body sequenced at ``offset`` (bodies come in offset order)."""
        if elements:
            with self.lock:
                self._bodies.append((offset, elements))

    def decide(self, decisions: list[list[Any]]) -> list[tuple[int, list[_Element]]]:
        """The runs ``(first applied count, elements)`` of ``decisions`` (the wire form of
        :meth:`~linkstream.cluster.decisions.Pending.wire`, in offset order); the bodies up
        to each decision's end are forgotten (those before its start: lost, unsent)."""
        out: list[tuple[int, list[_Element]]] = []
        with self.lock:
            for start, end, first, runs, error in decisions:
                self._forget(start, lost=True)
                if first is not None and runs and not error:
                    got = self._take(runs)
                    if out and out[-1][0] + len(out[-1][1]) == first:
                        out[-1][1].extend(got)
                    else:
                        out.append((int(first), got))
                    self.sent += len(got)
                self._forget(end, lost=False)
        return out

    def _take(self, runs: list[int]) -> list[_Element]:
        got: list[_Element] = []
        bodies = self._bodies
        for a, b in zip(runs[::2], runs[1::2]):
            for offset, elements in bodies:
                if offset >= b:
                    break
                lo, hi = max(a, offset), min(b, offset + len(elements))
                if lo < hi:
                    got.extend(elements[lo - offset : hi - offset])
        return got

    def _forget(self, below: int, *, lost: bool) -> None:
        """Drops the elements at offsets below ``below``."""
        bodies = self._bodies
        while bodies and bodies[0][0] < below:
            offset, elements = bodies[0]
            gone = min(len(elements), below - offset)
            if lost:
                self.dropped += gone
            if gone == len(elements):
                bodies.popleft()
            else:
                bodies[0] = (below, elements[gone:])


def owned_message(run: str, stream: str, first: int, elements: Sequence[_Element]) -> Owned:
    """One ``owned`` message: ``elements`` of ``stream``, the first at applied count ``first``."""
    terms: list[str] = []
    base: dict[int, int] = {}
    parts = []
    for _, rows in elements:
        b = base.get(id(rows.terms))
        if b is None:
            b = base[id(rows.terms)] = len(terms)
            terms.extend(rows.terms)
        parts.append(np.asarray(rows.idx, dtype=np.int64).reshape(-1, 3) + b)
    meta = np.array([[t for t, _ in elements], [len(rows) for _, rows in elements]], dtype=np.int64)
    triples = np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)
    return Owned(run, stream, first, terms, meta.reshape(2, len(elements)), triples)


__all__ = ["OwnedTail", "owned_message"]
