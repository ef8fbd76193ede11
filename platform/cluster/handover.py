"""The driver's side of stateful task moves: operator state from the old owner to the new.

When ZooKeeper assigns a query to a new container with ``migrating_from`` set (a graceful
drain or a rebalance moves a stateful task), the new owner does not build the query from
its stream buffers; it waits.  Between two ticks the driver (:mod:`linkstream.cluster.replay`)
then

1. sends a ``handover`` request to the query's current answerer, which snapshots the
   query's operator state after the last tick (:mod:`linkstream.operators.state`);
2. forwards the ``state`` message it gets back to the new owner, ahead of the next tick
   on the same ZeroMQ channel, so the new owner restores the state before it evaluates
   that tick;
3. waits until the new owner announces the query *ready* from the next tick on, so the
   answerer switches at once.

If the old owner is gone, does not hold the query, or cannot snapshot it, the new owner is
sent a ``state`` message without state and rebuilds the query from its stream buffers (the
pre-migration behaviour), and the move is recorded as not restored.  Nothing waits longer
than the driver's answer timeout.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgpack

from linkstream.cluster.fanout import Fanout
from linkstream.containers.messages import Handover, State
from linkstream.containers.protocol import encode

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Migration:
    """One stateful move as the driver carried it out.

    Attributes:
        query: The query (task) moved.
        src: Its answerer before (``None``: none was alive).
        dst: Its new owner.
        seq: The last tick before the move; ``dst`` answers from ``seq + 1`` on.
        bytes: Bytes of operator state shipped (0: rebuilt from the stream buffers).
        rows: Mappings in that state.
        shipped: Whether state was shipped and the new owner announced the query ready
            (whether it restored or, on a plan mismatch, rebuilt it, its
            ``linkstream_state_migrations_total{direction="in"}`` metric tells).
        error: Why no state was shipped, if none was.
        unit: The state shipped is the router unit of the shared joins' routers the query
            reads (a routed query), not the query's own operators'.
    """

    query: str
    src: str | None
    dst: str
    seq: int
    bytes: int
    rows: int
    shipped: bool
    error: str = ""
    unit: bool = False


@dataclass
class _Pending:
    query: str
    src: str | None
    dst: str
    state: State | None = None


class Handovers:
    """Carries out the stateful moves ZooKeeper shows, between the driver's ticks.

    Args:
        run: The run id.
        fanout: The driver's sockets to the containers.
        pump: Receives and dispatches queued messages, waiting up to the given seconds
            (``State`` messages must be handed to :meth:`on_state`).
        timeout: Seconds to wait for a state or a ready announcement.
        is_dead: Tells whether a container is known to be gone (stop waiting for it).
    """

    def __init__(
        self,
        run: str,
        fanout: Fanout,
        pump: Callable[[float], None],
        timeout: float,
        is_dead: Callable[[str], bool] = lambda _cid: False,
    ) -> None:
        self.run = run
        self.fanout = fanout
        self.pump = pump
        self.timeout = timeout
        self.is_dead = is_dead
        self.done: list[Migration] = []
        self._started: set[tuple[str, str]] = set()
        self._pending: dict[tuple[str, str], _Pending] = {}

    def on_state(self, message: State) -> None:
        """Takes a ``state`` message from a move's source."""
        p = self._pending.get((message.query, message.dst))
        if p is not None and p.state is None and message.container == p.src:
            p.state = message

    def forget(self, dst: str) -> None:
        """Lets moves to ``dst`` start again (it left the run and may rejoin)."""
        self._started = {k for k in self._started if k[1] != dst}

    def run_moves(
        self,
        seq: int,
        moves: list[tuple[str, str | None, str]],
        is_ready: Callable[[str, str], bool],
    ) -> list[Migration]:
        """Moves ``(query, src, dst)`` after tick ``seq`` (``src``: the current answerer).

        Args:
            seq: The last tick sent.
            moves: Queries whose ZooKeeper owner ``dst`` waits for their state.
            is_ready: ``is_ready(query, dst)`` once ``dst`` announced the query ready.

        Returns:
            The moves carried out now.
        """
        fresh = [(q, s, d) for q, s, d in moves if (q, d) not in self._started]
        if not fresh:
            return []
        for query, src, dst in fresh:
            self._started.add((query, dst))
            p = self._pending[(query, dst)] = _Pending(query, src, dst)
            if src is not None and src in self.fanout.peers:
                self.fanout.send(src, encode(Handover(self.run, query, dst, seq)))
            else:
                p.src = None
        deadline = time.monotonic() + self.timeout
        waiting = [self._pending[(q, d)] for q, _, d in fresh]
        while time.monotonic() < deadline:
            for p in waiting:
                if p.src is not None and p.state is None and self.is_dead(p.src):
                    logger.warning("driver: %s left before handing over %s", p.src, p.query)
                    p.src = None  # died before it answered: the new owner rebuilds
            if not any(p.src is not None and p.state is None for p in waiting):
                break
            self.pump(0.02)
        out = []
        for p in waiting:
            del self._pending[(p.query, p.dst)]
            state = p.state
            if state is None:
                error = "no live source" if p.src is None else f"no state from {p.src} in {self.timeout:g}s"
                state = State(self.run, p.src or "", p.query, p.dst, seq, [], error)
            nbytes = sum(memoryview(f).nbytes for f in state.frames[1:])
            header = _header(state)
            rows = header.get("rows", 0)
            rows = rows if isinstance(rows, int) else 0
            self.fanout.send(p.dst, encode(state))
            unit = header.get("unit") == "router"
            out.append(Migration(p.query, p.src, p.dst, seq, nbytes, rows, False, state.error, unit))
        while time.monotonic() < deadline:
            if all(is_ready(m.query, m.dst) or self.is_dead(m.dst) for m in out):
                break
            self.pump(0.02)
        done = []
        for m in out:
            # (a unit of no router -- its routers' unit came with another query -- has no bytes)
            shipped = (m.bytes > 0 or m.unit) and not m.error and is_ready(m.query, m.dst)
            done.append(Migration(m.query, m.src, m.dst, m.seq, m.bytes, m.rows, shipped, m.error, m.unit))
            logger.info(
                "driver: %s moved %s -> %s after tick %d (%d rows, %d bytes of %s%s)",
                m.query,
                m.src,
                m.dst,
                seq,
                m.rows,
                m.bytes,
                "its router unit" if m.unit else "state",
                f"; {m.error}" if m.error else "",
            )
        self.done.extend(done)
        return done


def _header(state: State) -> dict[str, Any]:
    """A snapshot's header (empty when there is none)."""
    if not state.frames:
        return {}
    try:
        header = msgpack.unpackb(bytes(memoryview(state.frames[0])), raw=False)
    except (ValueError, TypeError, msgpack.UnpackException):
        return {}
    return header if isinstance(header, dict) else {}
