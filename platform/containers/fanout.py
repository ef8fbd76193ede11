"""The driver's half of the broadcast data plane: one PUSH socket per operator container.

A cluster replay sends every stream element to every container (an *all* grouping).
:class:`Fanout` buffers elements and sends them in batches, each with the dictionary
entries it introduces (the *delta*: driver ids ``lo ..`` with their N-Triples strings),
so every container can translate the driver's ids into its own.  It also keeps the
backlog a container joining mid-run needs: the retained elements of each stream
(``horizon`` ms before the last report time, everything for a stream read by count or
NOW windows) are sent with the whole dictionary so far in that container's ``sync``
message, after which it receives the same broadcast as everyone else.

Sends wait out back-pressure (high-water marks) unless the peer is known dead or stalls
longer than ``stall_timeout``; while waiting the caller's ``on_wait`` runs, so the driver
keeps reading the containers' answers and no PUSH/PULL cycle can deadlock.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence

import numpy as np

from linkstream.containers.protocol import Elements, encode
from linkstream.containers.transport import Sender
from linkstream.containers.wire import Frame
from linkstream.rdf.dictionary import Dictionary

logger = logging.getLogger(__name__)

FLUSH_TRIPLES = 16384
FLUSH_ELEMENTS = 2048
SEND_RETRY_S = 0.2
SNDHWM = 10000


class Fanout:
    """Every synced container receives every element, in order, exactly once.

    Args:
        run: Run id stamped on every message.
        streams: Stream IRIs; elements refer to them by index.
        horizons: Per stream, ms of history to retain for late joiners (``None``: all).
        dictionary: The driver's dictionary (the source of the deltas).
        is_dead: Tells whether a container is known to be gone (stop waiting for it).
        on_wait: Called while a send waits for room.
        on_drop: Called with the id of a peer dropped because it died or stalled.
        stall_timeout: Seconds a live peer may refuse messages before it is dropped.
    """

    def __init__(
        self,
        run: str,
        streams: Sequence[str],
        horizons: Sequence[int | None],
        dictionary: Dictionary,
        *,
        is_dead: Callable[[str], bool],
        on_wait: Callable[[], None],
        on_drop: Callable[[str], None],
        stall_timeout: float = 60.0,
    ) -> None:
        self.run = run
        self.streams = list(streams)
        self.horizons = list(horizons)
        self.dictionary = dictionary
        self.peers: dict[str, Sender] = {}
        self.joined: list[str] = []
        self.bytes_sent = 0
        self.messages_sent = 0
        self._is_dead = is_dead
        self._on_wait = on_wait
        self._on_drop = on_drop
        self._stall_timeout = stall_timeout
        self._dict_sent = 0  # driver ids 1.._dict_sent were shipped to every synced peer
        self._pending: list[tuple[int, int, np.ndarray]] = []
        self._pending_triples = 0
        self._backlog: list[deque[tuple[int, np.ndarray]]] = [deque() for _ in self.streams]

    # ------------------------------------------------------------------ peers

    def add(self, cid: str, address: str, tick_seq: int) -> None:
        """Connects to a container and sends its ``sync`` message (replacing an older peer)."""
        old = self.peers.pop(cid, None)
        if old is not None:
            old.close(linger_ms=0)
        sender = Sender(address, sndhwm=SNDHWM, linger_ms=0)
        n = self._dict_sent
        terms = self.dictionary.decode_many(np.arange(1, n + 1, dtype=np.int64)) if n else []
        rows = [(k, t, tr) for k, dq in enumerate(self._backlog) for t, tr in dq]
        self.peers[cid] = sender
        if cid not in self.joined:
            self.joined.append(cid)
        self._send(cid, encode(self._elements(rows, 1, terms, sync_tick=tick_seq)))
        logger.info("driver: container %s joined the run at tick %d", cid, tick_seq)

    def drop(self, cid: str) -> bool:
        """Disconnects a container; returns whether it was a peer."""
        sender = self.peers.pop(cid, None)
        if sender is None:
            return False
        sender.close(linger_ms=0)
        return True

    def close(self) -> None:
        """Closes every socket (briefly flushing what is queued)."""
        for sender in self.peers.values():
            sender.close(linger_ms=200)
        self.peers.clear()

    # ------------------------------------------------------------------ sending

    def _send(self, cid: str, frames: list[Frame]) -> None:
        sender = self.peers.get(cid)
        if sender is None:
            return
        deadline = time.monotonic() + self._stall_timeout
        while not sender.offer_frames(frames, SEND_RETRY_S):
            self._on_wait()
            dead, stalled = self._is_dead(cid), time.monotonic() > deadline
            if dead or stalled:
                self.drop(cid)
                logger.warning("driver: container %s %s; dropped", cid, "is gone" if dead else "stalled")
                self._on_drop(cid)
                return
        self.messages_sent += 1
        self.bytes_sent += sum(memoryview(f).nbytes for f in frames)

    def send(self, cid: str, frames: list[Frame]) -> None:
        """Queues ``frames`` for one peer (after everything queued for it before)."""
        self._send(cid, frames)

    def broadcast(self, frames: list[Frame]) -> None:
        """Queues ``frames`` for every peer."""
        for cid in sorted(self.peers):
            self._send(cid, frames)

    # ------------------------------------------------------------------ elements

    def _elements(
        self, rows: list[tuple[int, int, np.ndarray]], lo: int, terms: list[str], sync_tick: int | None = None
    ) -> Elements:
        meta = np.array([[k for k, _, _ in rows], [t for _, t, _ in rows], [len(tr) for _, _, tr in rows]])
        parts = [tr for _, _, tr in rows if len(tr)]
        triples = np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)
        return Elements(self.run, lo, terms, meta.reshape(3, len(rows)).astype(np.int64), triples, sync_tick)

    def ingest(self, stream: int, t: int, triples: np.ndarray) -> None:
        """Buffers one element of stream number ``stream`` for the next broadcast."""
        tr = np.ascontiguousarray(triples, dtype=np.int64).reshape(-1, 3)
        self._pending.append((stream, t, tr))
        self._pending_triples += len(tr)
        if self._pending_triples >= FLUSH_TRIPLES or len(self._pending) >= FLUSH_ELEMENTS:
            self.flush()

    def flush(self) -> None:
        """Broadcasts the buffered elements with the dictionary entries new since the last."""
        n = len(self.dictionary)
        if not self._pending and n == self._dict_sent:
            return
        lo = self._dict_sent + 1
        terms = self.dictionary.decode_many(np.arange(lo, n + 1, dtype=np.int64)) if n >= lo else []
        rows, self._pending, self._pending_triples = self._pending, [], 0
        self.broadcast(encode(self._elements(rows, lo, terms)))
        self._dict_sent = n
        for k, t, tr in rows:
            self._backlog[k].append((t, tr))

    def prune(self, c: int) -> None:
        """Forgets backlog no window opened after report time ``c`` can read."""
        for dq, h in zip(self._backlog, self.horizons):
            if h is not None:
                while dq and dq[0][0] < c - h:
                    dq.popleft()
