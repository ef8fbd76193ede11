"""Operator edges between containers: sockets to peers, dictionary ids across them, counters.

Every container has its own dictionary, so a batch crossing an edge carries the
*sender's* ids: before a batch that uses ids a peer has not seen, the sender ships
them with their terms (``opterms``), and the receiver keeps a sender id -> local id
table per peer (:meth:`EdgeLinks.learn_terms`, :meth:`EdgeLinks.translate`).  A peer
that takes nothing for ``SEND_TIMEOUT_S`` (a dead container whose ``opdrop`` has not
arrived yet) is dropped instead of blocking the producer forever.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from linkstream.containers.placement.messages import OperatorPlaneError, decode_terms, encode_terms
from linkstream.containers.transport import CurveKeys, Sender
from linkstream.containers.wire import Frame, encode_batch, payload_bytes
from linkstream.operators.batch import Batch

logger = logging.getLogger(__name__)

SEND_TIMEOUT_S = 30.0


def id_columns(vars_: tuple[str, ...]) -> list[int]:
    """Columns holding dictionary ids (timestamp columns of timed scans do not)."""
    return [i for i, v in enumerate(vars_) if not v.startswith("%t")]


@dataclass
class EdgeCounters:
    """Operator-edge traffic of one container (also exported as Prometheus counters)."""

    batches_sent: int = 0
    batches_received: int = 0
    bytes_sent: int = 0
    bytes_received: int = 0
    rows_sent: int = 0
    terms_sent: int = 0
    waits_timed_out: int = 0
    mismatches: int = 0
    hosted: int = 0  # hostings started here (initial and moves)
    released: int = 0  # hostings ended here because a newer generation runs elsewhere
    resets: int = 0  # newer generations taken over by this container's channels
    stale: int = 0  # batches of an older generation dropped
    partition_rows: int = 0  # rows received from partitioned instances
    foreign_rows: int = 0  # ... of them outside the sender instance's partition


@dataclass(frozen=True)
class EdgeMetrics:
    """The Prometheus counters of a container's operator edges (declared once per registry)."""

    batches: Any
    bytes: Any
    hostings: Any
    partition_rows: Any
    partition_input_rows: Any
    takeovers: Any

    @classmethod
    def create(cls, registry: Any) -> EdgeMetrics:
        """Declares the counters in ``registry``."""
        from prometheus_client import Counter

        def counter(name: str, doc: str, labels: list[str]) -> Any:
            return Counter(name, doc, labels, registry=registry)

        return cls(
            counter(
                "linkstream_operator_edge_batches", "Operator-edge batches between containers", ["direction"]
            ),
            counter(
                "linkstream_operator_edge_bytes", "Operator-edge bytes between containers", ["direction"]
            ),
            counter(
                "linkstream_operator_hostings",
                "Producer channel hostings started here (initial placement and moves)",
                ["reason"],
            ),
            counter(
                "linkstream_operator_partition_rows",
                "Rows received from partitioned producer instances, by instance and check",
                ["channel", "check"],
            ),
            counter(
                "linkstream_operator_partition_input_rows",
                "Join input rows a partitioned instance hosted here saw (in) and joined (kept)",
                ["channel", "rows"],
            ),
            counter(
                "linkstream_operator_channel_takeovers",
                "Producer channels read here whose newer generation (a new host) replaced an older one",
                [],
            ),
        )


@dataclass
class _Peer:
    sender: Sender
    known: np.ndarray = field(default_factory=lambda: np.zeros(1024, dtype=bool))


class EdgeLinks:
    """One run's edges of one container: PUSH sockets to peers and id translation tables.

    Args:
        run: The run id.
        cid: This container's id.
        dictionary: This container's dictionary.
        counters: Where traffic is counted.
        metrics: Prometheus counters, or ``None``.
        on_wait: Called while a send waits for room (to keep receiving meanwhile).
        curve_for: CURVE keys to connect to a peer container, by its id (``None``: plaintext).
    """

    def __init__(
        self,
        run: str,
        cid: str,
        dictionary: Any,
        counters: EdgeCounters,
        metrics: EdgeMetrics | None,
        on_wait: Callable[[], object],
        curve_for: Callable[[str], CurveKeys | None] | None = None,
    ) -> None:
        self.curve_for = curve_for
        self.run = run
        self.cid = cid
        self.dictionary = dictionary
        self.counters = counters
        self.metrics = metrics
        self.on_wait = on_wait
        self.dropped: set[str] = set()
        self._peers: dict[str, _Peer] = {}
        self._xlate: dict[str, np.ndarray] = {}

    def _peer(self, cid: str, address: str) -> _Peer:
        peer = self._peers.get(address)
        if peer is None:
            curve = None if self.curve_for is None else self.curve_for(cid)
            sender = Sender(address, sndhwm=10000, linger_ms=1000, curve_keys=curve)
            peer = self._peers[address] = _Peer(sender)
        return peer

    def offer(self, cid: str, address: str, frames: list[Frame]) -> bool:
        """Sends to ``cid``; a container that takes nothing for long is dropped, not waited for."""
        if cid in self.dropped:
            return False
        peer = self._peer(cid, address)
        deadline = time.monotonic() + SEND_TIMEOUT_S
        while not peer.sender.offer_frames(frames, 0.5):
            if time.monotonic() > deadline:
                logger.warning("%s: %s takes no operator-edge batch; sending it nothing more", self.cid, cid)
                self.dropped.add(cid)
                return False
            self.on_wait()
        self.counters.bytes_sent += payload_bytes(frames)
        return True

    def send_batch(self, channel: str, gen: int, seq: int, cid: str, address: str, d: Batch) -> None:
        """Sends one channel's delta of tick ``seq`` to ``cid`` (its new ids' terms first)."""
        peer = self._peer(cid, address)
        cols = np.asarray(d.cols)
        idc = id_columns(d.vars)
        if len(d) and idc:
            ids = np.unique(cols[idc] if len(idc) != cols.shape[0] else cols)
            ids = ids[ids > 0]
            if len(ids):
                top = int(ids[-1])
                if top >= len(peer.known):
                    grown = np.zeros(max(top + 1, 2 * len(peer.known)), dtype=bool)
                    grown[: len(peer.known)] = peer.known
                    peer.known = grown
                new = ids[~peer.known[ids]]
                if len(new):
                    terms = self.dictionary.decode_many(new)
                    if not self.offer(cid, address, encode_terms(self.run, self.cid, new, list(terms))):
                        return
                    peer.known[new] = True
                    self.counters.terms_sent += len(new)
        frames = encode_batch(d, stream=channel, task=f"{self.run}/{self.cid}", epoch=gen, seq=seq)
        if not self.offer(cid, address, frames):
            return
        self.counters.batches_sent += 1
        self.counters.rows_sent += len(d)
        if self.metrics is not None:
            self.metrics.batches.labels("sent").inc()
            self.metrics.bytes.labels("sent").inc(payload_bytes(frames))

    def received(self, frames: list[Frame]) -> None:
        """Counts a received batch message."""
        nbytes = payload_bytes(frames)
        self.counters.batches_received += 1
        self.counters.bytes_received += nbytes
        if self.metrics is not None:
            self.metrics.batches.labels("received").inc()
            self.metrics.bytes.labels("received").inc(nbytes)

    def learn_terms(self, frames: list[Frame]) -> None:
        """Applies an ``opterms`` message (raises :class:`OperatorPlaneError`)."""
        run, src, ids, terms = decode_terms(frames)
        if run != self.run:
            return
        local = np.asarray(self.dictionary.encode_many(terms), dtype=np.int64)
        xl = self._xlate.get(src)
        top = int(ids.max()) if len(ids) else 0
        if xl is None or top >= len(xl):
            grown = np.zeros(max(top + 1, 1024, 0 if xl is None else 2 * len(xl)), dtype=np.int64)
            if xl is not None:
                grown[: len(xl)] = xl
            xl = self._xlate[src] = grown
        xl[ids] = local

    def translate(self, src: str, b: Batch) -> Batch:
        """``b`` (in ``src``'s ids) in this container's ids, in memory of its own.

        Raises:
            OperatorPlaneError: ``b`` uses an id ``src`` never sent the term of.
        """
        cols = np.array(b.cols, dtype=np.int64)  # own the memory: ZeroMQ's frame goes away
        idc = id_columns(b.vars)
        if len(b) and idc:
            xl = self._xlate.get(src, np.zeros(1, dtype=np.int64))
            sub = cols[idc]
            if int(sub.max()) >= len(xl):
                raise OperatorPlaneError(f"batch from {src} uses ids it never sent terms for")
            cols[idc] = xl[sub]
        return Batch(b.vars, cols, np.array(b.counts, dtype=np.int64))

    def close(self) -> None:
        """Closes the sockets to the peers."""
        for peer in self._peers.values():
            peer.sender.close(linger_ms=500)
        self._peers.clear()
