"""The owners' sender of ``run --zk --ingest direct`` (step 2 of ``docs/architecture.md``,
"Direct ingest"): what an owner coordinator sends the containers of one stream.

The owner keeps each body it sequenced (:meth:`OwnedTail.add`, in offset order) until
the leader's decision on it arrives (:class:`~linkstream.cluster.decisions.OwnerDecisions`
learns it); :meth:`OwnedTail.decide` turns the decisions into runs of the elements the
leader's worker applied, numbered by the worker's *applied count* (``first`` of the
decision) -- the counts the containers' :class:`~linkstream.containers.cuts.CutGate`
compares with the ticks' cuts.  An element the leader did not take is never sent; a body
whose decision will not come (``lost``) is dropped unsent.  :func:`owned_message` packs
a run into one :class:`~linkstream.containers.messages.Owned` message (the terms of its
bodies once, the triples as indexes into them), and :class:`OwnerSender` sends the
messages of every stream this coordinator owns to every container of the cluster (its
own thread, one PUSH socket per container, CURVE as the leader's fan-out).

Why every container, not the subscribed ones only: a container keeps the runs of the
streams it subscribed to (held until their ``sync`` while the leader's answer is on its
way) and drops the others, and a decision exists only once the leader's worker applied
the element -- so a container that subscribes after dropping a run gets that element in
the ``sync`` backlog of the leader's fan-out (which numbers it alike).  Sending to the
subscribers only would need the owner to learn every subscription before its ``sync``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError

from linkstream.containers.messages import Owned
from linkstream.containers.protocol import encode
from linkstream.containers.security import Security, SecurityError
from linkstream.containers.transport import Sender
from linkstream.engine.live.batchpush import TermRows
from linkstream.scheduler.keyring import MEMBER_FIELD
from linkstream.scheduler.layout import ClusterLayout, decode

logger = logging.getLogger(__name__)

#: seconds between reads of the containers' membership
REFRESH_S = 0.5
#: seconds a send waits for a container that takes nothing (then the message is dropped for it)
STALL_S = 30.0

_Element = tuple[int, TermRows]


class OwnedTail:
    """One owned stream's bodies (one epoch) waiting for the leader's decisions."""

    def __init__(self) -> None:
        self._bodies: deque[tuple[int, Sequence[_Element]]] = deque()
        self.lock = threading.Lock()
        #: elements handed out in runs, elements dropped undecided (lost), and elements of
        #: bodies whose offsets a later body took (their hand-off failed: :meth:`add`)
        self.sent = 0
        self.dropped = 0
        self.replaced = 0

    def __len__(self) -> int:
        return len(self._bodies)

    def add(self, offset: int, elements: Sequence[_Element]) -> None:
        """A body sequenced at ``offset`` (bodies come in offset order).

        The owner sequences a body at an offset it gave before when that body's hand-off
        left the offset unused (no leader took it: ``NotLeading``, answered 503 and retried
        by the client; or the leader's input queue stayed full after part of it): the
        elements held from ``offset`` on are replaced, as the leader's offsets are (it
        decides the new body there -- or, had the old leader taken the first, counts the
        retry as that body: the same client push, by its idempotency key).  Keeping both
        sent an element twice under one count and left out the one after it."""
        with self.lock:
            bodies = self._bodies
            while bodies and bodies[-1][0] + len(bodies[-1][1]) > offset:
                at, held = bodies.pop()
                self.replaced += min(len(held), at + len(held) - offset)
                if at < offset:
                    bodies.append((at, held[: offset - at]))
            if elements:
                bodies.append((offset, elements))

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


class OwnerSender:
    """Sends the decided elements of this coordinator's streams to the containers.

    :meth:`add` keeps a body (the owner calls it before the hand-off), :meth:`decided`
    takes the leader's decisions on a stream (``OwnerDecisions.sink``; in offset order)
    and queues the runs; the sender's thread packs each run once and sends it to every
    container, stamped with the run of the leader that decided them (a container of another
    run drops them: its ``sync`` brought what its own leader decided).
    """

    def __init__(self, client: KazooClient, root: str, security: Security) -> None:
        self.client = client
        self.layout = ClusterLayout(root)
        self.security = security
        self._tails: dict[tuple[str, int], OwnedTail] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[tuple[str, str, int, list[_Element]] | None] = queue.Queue()
        self._senders: dict[str, tuple[str, Sender]] = {}  # container -> (address, socket)
        self._read = 0.0
        #: elements sent (per container summed), messages sent, runs sent to no run
        self.elements_sent = 0
        self.messages_sent = 0
        self.unsent = 0
        self._thread = threading.Thread(target=self._work, name="owner-sender", daemon=True)
        self._thread.start()

    def _tail(self, iri: str, epoch: int) -> OwnedTail:
        with self._lock:
            tail = self._tails.get((iri, epoch))
            if tail is None:
                for key in [k for k in self._tails if k[0] == iri and k[1] < epoch]:
                    del self._tails[key]  # an older epoch's bodies: a new owner sequenced on
                tail = self._tails[(iri, epoch)] = OwnedTail()
            return tail

    def add(self, iri: str, epoch: int, offset: int, elements: Sequence[_Element]) -> None:
        """A body of ``iri`` sequenced at ``offset`` (before it is handed to the leader)."""
        self._tail(iri, epoch).add(offset, elements)

    def decided(self, iri: str, epoch: int, decisions: list[list[Any]], run: str | None) -> None:
        """The leader's decisions on ``iri``'s bodies (in offset order), made in its run
        ``run``: their elements are sent to that run (none open: to nobody)."""
        got = self._tail(iri, epoch).decide(decisions)
        for first, elements in got:
            if run is None:
                self.unsent += len(elements)  # no run: the next run's sync starts after them
            else:
                self._queue.put((run, iri, first, elements))

    def status(self) -> dict[str, Any]:
        with self._lock:
            tails = list(self._tails.values())
        return {
            "elements_sent": self.elements_sent,
            "messages_sent": self.messages_sent,
            "unsent": self.unsent,
            "waiting_bodies": sum(len(t) for t in tails),
            "dropped": sum(t.dropped for t in tails),
            "replaced": sum(t.replaced for t in tails),
        }

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(5.0)
        for _, sender in self._senders.values():
            sender.close(linger_ms=200)
        self._senders.clear()

    # ------------------------------------------------------------------ the thread

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            batch = [item]
            while item is not None:  # what was queued meanwhile: one message per stream
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                batch.append(item)
            runs: dict[tuple[str, str], list[tuple[int, list[_Element]]]] = {}
            for got in batch:
                if got is None:
                    continue
                run, iri, first, elements = got
                mine = runs.setdefault((run, iri), [])
                if mine and mine[-1][0] + len(mine[-1][1]) == first:
                    mine[-1][1].extend(elements)
                else:
                    mine.append((first, list(elements)))
            for (run, iri), parts in runs.items():
                for first, elements in parts:
                    try:
                        self._send(run, iri, first, elements)
                    except Exception:  # noqa: BLE001 - the thread must go on for the next runs
                        logger.exception("owner sender: a run of <%s> could not be sent", iri)
            if batch[-1] is None:
                return

    def _refresh(self) -> None:
        try:
            members = self.client.get_children(self.layout.containers)
        except (NoNodeError, KazooException):
            members = list(self._senders)
        for cid in [c for c in self._senders if c not in members]:
            self._senders.pop(cid)[1].close(linger_ms=0)
        for cid in members:
            try:
                doc = decode(self.client.get(self.layout.container(cid))[0])
                address, key = str(doc.get("address") or ""), doc.get(MEMBER_FIELD)
                known = self._senders.get(cid)
                if known is not None and known[0] == address:
                    continue
                if known is not None:
                    known[1].close(linger_ms=0)
                if address:
                    curve = self.security.client(key, f"container {cid}")
                    self._senders[cid] = (
                        address,
                        Sender(address, sndhwm=10000, linger_ms=0, curve_keys=curve),
                    )
            except (NoNodeError, KazooException, ValueError, SecurityError) as exc:
                logger.debug("owner sender: container %s: %s", cid, exc)
        self._read = time.monotonic()

    def _send(self, run: str, iri: str, first: int, elements: list[_Element]) -> None:
        if time.monotonic() - self._read > REFRESH_S:
            self._refresh()
        frames = encode(owned_message(run, iri, first, elements))
        for cid, (_, sender) in sorted(self._senders.items()):
            if sender.offer_frames(frames, STALL_S):
                self.elements_sent += len(elements)
                self.messages_sent += 1
            else:
                logger.warning(
                    "owner sender: container %s took no elements of <%s> for %.0f s", cid, iri, STALL_S
                )


__all__ = ["OwnedTail", "OwnerSender", "owned_message"]
