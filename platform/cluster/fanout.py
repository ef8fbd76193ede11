"""The driver's half of the element data plane: one PUSH socket per operator container.

:class:`Fanout` buffers stream elements and sends them in batches.  Which container
gets which element depends on the run's route (``RunSpec.route``):

``streams`` (default)
    Each container receives only the elements of the streams it *subscribed* to (the
    streams of the queries it holds or ZooKeeper assigned it; it says so in
    ``subscribe`` messages, see :mod:`linkstream.containers.runtime`).  Every
    subscription version is answered with a ``sync`` message holding the retained
    backlog of the newly subscribed streams, exactly from the element after the last one
    this container was sent of each (so a stream dropped and taken up again is neither
    duplicated nor, within what any window can still read, missing), and naming every
    stream of the subscription: the container counts streams live only on the answer to
    its latest version, which may have overtaken the answer that brought some of them.
``broadcast``
    Every container subscribes to every stream when it joins (an *all* grouping).

Each message carries the dictionary entries of its triples that its container was not
sent before (driver ids with their N-Triples strings), so every container can translate
the driver's ids into its own and holds no terms it never sees.  The backlog a joining
or subscribing container needs -- the retained elements of each stream, ``horizon`` ms
before the last report time, everything for a stream read by count or NOW windows -- is
kept here; the first message of a container is its ``sync`` (the backlog of its initial
subscription: every stream when broadcasting, none when routing by stream).

Sends wait out back-pressure (high-water marks) unless the peer is known dead or stalls
longer than ``stall_timeout``; while waiting the caller's ``on_wait`` runs, so the driver
keeps reading the containers' answers and no PUSH/PULL cycle can deadlock.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from linkstream.containers.messages import Elements
from linkstream.containers.protocol import encode
from linkstream.containers.transport import CurveKeys, Sender
from linkstream.containers.wire import Frame
from linkstream.rdf.dictionary import Dictionary

logger = logging.getLogger(__name__)

FLUSH_TRIPLES = 16384
FLUSH_ELEMENTS = 2048
SEND_RETRY_S = 0.2
SNDHWM = 10000

_Row = tuple[int, int, int, np.ndarray]  # stream index, element seq in its stream, time, triples


class Deferred:
    """``run --zk --ingest meta``: the triples of an element the leader holds by reference
    only (``ref`` = ``(epoch, record, element)`` in its owner's stream log, ``n`` triples);
    :meth:`Fanout.materialize` reads them (``ids``, the leader's dictionary ids) once a
    ``sync``, a recomputation or a checkpoint needs them."""

    __slots__ = ("ids", "n", "ref")

    def __init__(self, n: int, ref: tuple[int, int, int]) -> None:
        self.n, self.ref = n, ref
        self.ids: np.ndarray | None = None

    def __len__(self) -> int:
        return self.n if self.ids is None else len(self.ids)


def triples_of(tr: np.ndarray | Deferred) -> np.ndarray:
    """A row's triples (a :class:`Deferred` one materialized before)."""
    if isinstance(tr, Deferred):
        assert tr.ids is not None, "a deferred element read before Fanout.materialize"
        return tr.ids
    return tr


@dataclass
class _Route:
    """What one container subscribed to and what it was sent."""

    streams: set[int]
    version: int
    sent: np.ndarray  # per stream: seq one past the last element sent to this container
    seen: np.ndarray  # per driver id: whether its term was sent to this container


class Fanout:
    """Every synced container receives every element of its streams, in order, exactly once.

    Args:
        run: Run id stamped on every message.
        streams: Stream IRIs; elements refer to them by index.
        horizons: Per stream, ms of history to retain for late subscribers (``None``: all).
        dictionary: The driver's dictionary (the source of the terms shipped).
        is_dead: Tells whether a container is known to be gone (stop waiting for it).
        on_wait: Called while a send waits for room.
        on_drop: Called with the id of a peer dropped because it died or stalled.
        stall_timeout: Seconds a live peer may refuse messages before it is dropped.
        route: ``"streams"`` (by subscription) or ``"broadcast"`` (every stream to every peer).
        curve_for: CURVE keys to connect to a container, by its id (``None``: plaintext).
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
        route: str = "streams",
        curve_for: Callable[[str], CurveKeys | None] | None = None,
    ) -> None:
        self.curve_for = curve_for
        if route not in ("streams", "broadcast"):
            raise ValueError(f"unknown route {route!r} (streams or broadcast)")
        self.run = run
        self.streams = list(streams)
        self.horizons = list(horizons)
        self.dictionary = dictionary
        self.route = route
        self.peers: dict[str, Sender] = {}
        #: what each peer's ``hello`` said it does (``caps``; empty: an older container)
        self.caps: dict[str, frozenset[str]] = {}
        self.routes: dict[str, _Route] = {}
        self.joined: list[str] = []
        self.bytes_sent = 0
        self.messages_sent = 0
        #: bytes of ``els`` and ``sync`` messages (stream elements and their terms)
        self.element_bytes = 0
        #: elements sent, summed over containers (of them in ``els`` messages, not ``sync``)
        self.elements_sent = 0
        self.live_elements = 0
        self._is_dead = is_dead
        self._on_wait = on_wait
        self._on_drop = on_drop
        self._stall_timeout = stall_timeout
        self._elements: dict[str, int] = {}
        self._pending: list[tuple[int, int, np.ndarray]] = []
        self._pending_triples = 0
        self._count = [0] * len(self.streams)  # elements of each stream flushed so far
        #: ``run --zk --ingest direct``: the streams' owners send the elements to the
        #: containers; this fan-out numbers them by the leader's applied counts (``ingest``'s
        #: ``count``), keeps the backlog (``sync``, recomputations) and sends no ``els``
        self.owners_send = False
        self._numbered: list[int | None] = []  # per pending element, its applied count
        self._backlog: list[deque[_Row]] = [deque() for _ in self.streams]
        #: ``--ingest meta``: fills the ``ids`` of a stream's :class:`Deferred` triples
        self.resolver: Callable[[str, list[Deferred]], None] | None = None
        self.read_back = 0  # deferred elements read from the stream logs

    # ------------------------------------------------------------------ streams

    def add_stream(self, iri: str, horizon: int | None) -> int:
        """Adds a stream to a running fan-out (live service); returns its index.

        Indexes of known streams never change; peers get the new one only once they
        subscribe to it (routing by stream) -- a live run never broadcasts.
        """
        if self.route == "broadcast":
            raise ValueError("streams cannot be added to a broadcasting run")
        self.flush()
        self.streams.append(iri)
        self.horizons.append(horizon)
        self._count.append(0)
        self._backlog.append(deque())
        for route in self.routes.values():
            route.sent = np.concatenate([route.sent, np.zeros(1, dtype=np.int64)])
        return len(self.streams) - 1

    def set_horizon(self, stream: int, horizon: int | None) -> None:
        """Changes how much backlog of stream number ``stream`` is kept from now on."""
        self.horizons[stream] = horizon

    # ------------------------------------------------------------------ peers

    def add(self, cid: str, address: str, tick_seq: int, caps: Iterable[str] = ()) -> None:
        """Connects to a container and sends its ``sync`` message (replacing an older peer).

        The container starts with every stream when broadcasting, with none when routing
        by stream (it subscribes next).  ``caps``: what its ``hello`` said it does
        (:data:`~linkstream.containers.protofields.CAPS`), kept in :attr:`caps`.
        """
        self.flush()
        old = self.peers.pop(cid, None)
        if old is not None:
            old.close(linger_ms=0)
        streams = set(range(len(self.streams))) if self.route == "broadcast" else set()
        self.routes[cid] = _Route(
            set(), 0, np.zeros(len(self.streams), dtype=np.int64), np.zeros(1024, dtype=bool)
        )
        curve = None if self.curve_for is None else self.curve_for(cid)
        self.peers[cid] = Sender(address, sndhwm=SNDHWM, linger_ms=0, curve_keys=curve)
        self.caps[cid] = frozenset(caps)
        if cid not in self.joined:
            self.joined.append(cid)
        self._sync(cid, 0, streams, tick_seq)
        logger.info("driver: container %s joined the run at tick %d", cid, tick_seq)

    def subscribe(self, cid: str, version: int, streams: Iterable[int], tick_seq: int) -> None:
        """Applies subscription ``version`` of ``cid``: backlog of new streams, then their elements.

        Ignored for an unknown peer, an outdated version, or when broadcasting.
        """
        route = self.routes.get(cid)
        if route is None or self.route == "broadcast" or version <= route.version:
            return
        wanted = {k for k in streams if 0 <= k < len(self.streams)}
        route.streams &= wanted
        route.version = version
        if wanted - route.streams:
            self.flush()  # the backlog of a new stream must hold everything ingested so far
        # Every version is answered, one that only drops streams too, and the answer names
        # all of ``wanted``: the container counts a stream live only on the answer to its
        # latest request, so a request that overtook an earlier one (two assignment changes
        # in quick succession) would otherwise never see the streams the earlier answer
        # brought become live, and the queries reading them would never be registered.
        self._sync(cid, version, wanted, tick_seq)

    def subscribed(self, cid: str) -> set[int]:
        """Streams whose elements ``cid`` receives (empty for an unknown peer)."""
        route = self.routes.get(cid)
        return set() if route is None else set(route.streams)

    def elements_by_container(self) -> dict[str, int]:
        """Stream elements sent to each container that took part (dropped ones included)."""
        return {cid: self._elements.get(cid, 0) for cid in self.joined}

    def drop(self, cid: str) -> bool:
        """Disconnects a container; returns whether it was a peer."""
        self.routes.pop(cid, None)
        self.caps.pop(cid, None)
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
        self.routes.clear()

    # ------------------------------------------------------------------ sending

    def _send(self, cid: str, frames: list[Frame]) -> bool:
        sender = self.peers.get(cid)
        if sender is None:
            return False
        deadline = time.monotonic() + self._stall_timeout
        while not sender.offer_frames(frames, SEND_RETRY_S):
            self._on_wait()
            dead, stalled = self._is_dead(cid), time.monotonic() > deadline
            if dead or stalled:
                self.drop(cid)
                logger.warning("driver: container %s %s; dropped", cid, "is gone" if dead else "stalled")
                self._on_drop(cid)
                return False
        self.messages_sent += 1
        self.bytes_sent += sum(memoryview(f).nbytes for f in frames)
        return True

    def send(self, cid: str, frames: list[Frame]) -> None:
        """Queues ``frames`` for one peer (after everything queued for it before)."""
        self._send(cid, frames)

    def broadcast(self, frames: list[Frame]) -> None:
        """Queues ``frames`` for every peer."""
        for cid in sorted(self.peers):
            self._send(cid, frames)

    # ------------------------------------------------------------------ elements

    def start_at(self, stream: int, count: int) -> None:
        """``owners_send``: stream number ``stream``'s next element is applied count ``count``
        (a run opened, or a stream added, after the leader applied ``count`` of them)."""
        if not self._backlog[stream] and not any(k == stream for k, _, _ in self._pending):
            self._count[stream] = count

    def ingest(self, stream: int, t: int, triples: np.ndarray | Deferred, count: int | None = None) -> None:
        """Buffers one element of stream number ``stream`` for the next flush (``count``:
        its applied count, when the owners send the elements)."""
        tr: Any = (
            triples
            if isinstance(triples, Deferred)
            else np.ascontiguousarray(triples, dtype=np.int64).reshape(-1, 3)
        )
        self._pending.append((stream, t, tr))
        if self.owners_send:
            self._numbered.append(count)
        self._pending_triples += len(tr)
        if self._pending_triples >= FLUSH_TRIPLES or len(self._pending) >= FLUSH_ELEMENTS:
            self.flush()

    def flush(self) -> None:
        """Sends the buffered elements to the containers subscribed to their streams."""
        if not self._pending:
            return
        pending, self._pending, self._pending_triples = self._pending, [], 0
        rows: list[_Row] = []
        numbered, self._numbered = self._numbered, []
        for i, (k, t, tr) in enumerate(pending):
            n = numbered[i] if numbered else None
            if n is not None and n != self._count[k]:
                logger.warning(
                    "fan-out: stream %s jumps from count %d to %d", self.streams[k], self._count[k], n
                )
                self._count[k] = n
            row = (k, self._count[k], t, tr)
            self._count[k] += 1
            self._backlog[k].append(row)
            rows.append(row)
        if self.owners_send:  # the owners send the counted ones (the backlog serves syncs and
            # recomputations); the others -- a checkpoint's backlog a new leader restores -- no
            # owner sends: they go out here
            rows = [row for i, row in enumerate(rows) if numbered[i] is None]
            for route in self.routes.values():  # a stream taken up again resumes after them
                for k in route.streams:
                    route.sent[k] = self._count[k]
            if not rows:
                return
        self.materialize((r[0], r[3]) for r in rows)
        # Containers with the same streams get the same elements: select and join them once.
        by_streams: dict[frozenset[int], list[str]] = {}
        for cid, route in self.routes.items():
            by_streams.setdefault(frozenset(route.streams), []).append(cid)
        parts: dict[str, tuple[list[_Row], np.ndarray, np.ndarray]] = {}
        for streams, cids in by_streams.items():
            mine = [r for r in rows if r[0] in streams]
            if not mine:
                continue
            meta, triples = table(mine)
            for cid in cids:
                parts[cid] = (mine, meta, triples)
        self._deliver(parts, {})

    def materialize(self, rows: Iterable[tuple[int, Any]]) -> None:
        """Reads the :class:`Deferred` triples of ``(stream index, triples)`` pairs not read
        yet, per stream in one :attr:`resolver` call."""
        todo: dict[int, list[Deferred]] = {}
        for k, tr in rows:
            if isinstance(tr, Deferred) and tr.ids is None:
                todo.setdefault(k, []).append(tr)
        if todo and self.resolver is None:
            raise RuntimeError("deferred elements but no resolver (--ingest meta)")
        for k, lazy in todo.items():
            assert self.resolver is not None
            self.resolver(self.streams[k], lazy)
            self.read_back += len(lazy)

    def _sync(self, cid: str, version: int, wanted: set[int], tick_seq: int) -> None:
        """Sends ``cid`` the ``sync`` answering subscription ``version``: the backlog of the
        streams of ``wanted`` it does not get yet, naming every stream of ``wanted`` (each
        arrives without a gap from here on: the others since their own backlog)."""
        route = self.routes.get(cid)
        if route is None:
            return  # dropped while a flush waited for it
        new = sorted(wanted - route.streams)
        rows = [r for k in new for r in self._backlog[k] if r[1] >= route.sent[k]]
        self.materialize((r[0], r[3]) for r in rows)
        route.streams |= wanted
        route.version = version
        meta, triples = table(rows)
        named = tuple(sorted(wanted))  # every element flushed of these was sent to cid: counts are exact
        counts = tuple(self._count[k] for k in named)
        self._deliver({cid: (rows, meta, triples)}, {cid: (tick_seq, version, named, counts)})
        if new:
            logger.info(
                "driver: %s subscribed to %s (version %d, %d backlog elements)",
                cid,
                ", ".join(self.streams[k] for k in new),
                version,
                len(rows),
            )

    def _deliver(
        self,
        parts: dict[str, tuple[list[_Row], np.ndarray, np.ndarray]],
        syncs: dict[str, tuple[int, int, tuple[int, ...], tuple[int, ...]]],
    ) -> None:
        """Sends each container its rows with the terms it lacks (``syncs``: as ``sync``)."""
        uniq: dict[int, np.ndarray] = {}
        new: dict[str, np.ndarray] = {}
        for cid, (_rows, _meta, triples) in parts.items():
            u = uniq.get(id(triples))
            if u is None:
                u = uniq[id(triples)] = np.unique(triples)
            route = self.routes[cid]
            if len(u) and int(u[-1]) >= len(route.seen):
                grown = np.zeros(max(int(u[-1]) + 1, 2 * len(route.seen)), dtype=bool)
                grown[: len(route.seen)] = route.seen
                route.seen = grown
            fresh = u[~route.seen[u]]
            route.seen[fresh] = True
            new[cid] = fresh
        # Decode every term once, however many containers it goes to.
        every = np.unique(np.concatenate(list(new.values()))) if new else np.empty(0, dtype=np.int64)
        decoded = self.dictionary.decode_many(every) if len(every) else []
        for cid in sorted(parts):
            rows, meta, triples = parts[cid]
            ids = new[cid]
            terms = [decoded[i] for i in np.searchsorted(every, ids).tolist()] if len(ids) else []
            tick, version, streams, counts = syncs.get(cid, (None, 0, (), ()))
            els = Elements(
                self.run, ids, terms, meta, triples, tick, streams, version, counts, self.owners_send
            )
            frames = encode(els)
            dest = self.routes.get(cid)
            if dest is None or not self._send(cid, frames):
                continue
            self.element_bytes += sum(memoryview(f).nbytes for f in frames)
            self.elements_sent += len(rows)
            if tick is None:
                self.live_elements += len(rows)
            self._elements[cid] = self._elements.get(cid, 0) + len(rows)
            for k, seq, _t, _tr in rows:
                if seq >= dest.sent[k]:
                    dest.sent[k] = seq + 1

    def counts(self) -> np.ndarray:
        """Per stream, the elements flushed so far (the cut of the next tick, after a flush)."""
        return np.array(self._count, dtype=np.int64)

    def history(self, streams: Iterable[int], cuts: Sequence[np.ndarray]) -> tuple[list[_Row], list[int]]:
        """The retained elements of ``streams`` up to the last of ``cuts``, in segments.

        Args:
            streams: Stream indexes.
            cuts: Increasing :meth:`counts` taken at successive ticks.

        Returns:
            The rows (per segment, stream by stream in their order) and, per cut, how many
            rows come before it: the elements ingested before that tick.
        """
        ks = sorted(set(streams))
        lo = {k: 0 for k in ks}
        rows: list[_Row] = []
        at: list[int] = []
        for cut in cuts:
            for k in ks:
                end = int(cut[k]) if k < len(cut) else 0
                rows += [r for r in self._backlog[k] if lo[k] <= r[1] < end]
                lo[k] = max(lo[k], end)
            at.append(len(rows))
        self.materialize((r[0], r[3]) for r in rows)
        return rows, at

    def prune(self, c: int) -> None:
        """Forgets backlog no window opened after report time ``c`` can read."""
        for dq, h in zip(self._backlog, self.horizons):
            if h is not None:
                while dq and dq[0][2] < c - h:
                    dq.popleft()


def table(rows: list[_Row]) -> tuple[np.ndarray, np.ndarray]:
    """The element table ``(3, k)`` and the joined triples ``(n, 3)`` of ``rows``."""
    meta = np.array([[r[0] for r in rows], [r[2] for r in rows], [len(r[3]) for r in rows]], dtype=np.int64)
    parts = [triples_of(r[3]) for r in rows if len(r[3])]
    triples = np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)
    return meta.reshape(3, len(rows)), triples
