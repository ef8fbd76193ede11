"""The container's half of stateful task moves (:class:`StateMigration`, a part of the runtime).

When a drain or rebalance moves a query, the driver (:mod:`linkstream.cluster.handover`)
asks the query's old container for a snapshot of its operator state (a ``handover``
message) and forwards the ``state`` it gets back to the new owner, which registers the
query with that state instead of rebuilding it from its stream buffers
(:mod:`linkstream.operators.state`).  The new owner holds the query's streams by then:
the driver starts a move only once the new owner subscribed to them, so their backlog
arrives first; should a changed subscription overtake it anyway, the query is rebuilt
once its streams are live.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from kazoo.exceptions import KazooException

from linkstream.containers.messages import Failed, Handover, Message, Ready, State
from linkstream.containers.replica import RunReplica
from linkstream.metrics import ContainerMetrics
from linkstream.operators.shared_state import UNIT
from linkstream.operators.state import decode_state, encode_state
from linkstream.scheduler.assignment import Assignment, AssignmentTable
from linkstream.scheduler.registry import QueryNotFoundError, QueryRegistry
from linkstream.scheduler.runs import RunSpec

logger = logging.getLogger(__name__)


@dataclass
class Slot:
    """A query registered in the replica and what the driver was told about it."""

    task: str
    reg_seq: int | None  # last tick processed before registration (None: before sync)
    announced: bool = False
    unready: int | None = None  # token of the pending unready announcement


class StateMigration:
    """Snapshots queries that move away and restores those that move here.

    A mixin of :class:`~linkstream.containers.runtime.ContainerRuntime`, whose state
    (declared below) and methods ``_send``, ``_text`` and ``_reconcile`` it uses.
    """

    id: str
    metrics: ContainerMetrics
    _run: RunSpec | None
    _table: AssignmentTable | None
    _registry: QueryRegistry | None
    _assigned: dict[str, Assignment]
    _acked: set[tuple[str, str | None, str | None]]
    _slots: dict[str, Slot]
    _failed: set[str]
    _texts: dict[str, str]
    _rebuild: set[str]
    _units_in: dict[str, tuple[int, int]]
    _firsts: dict[str, int]  # (:class:`~linkstream.containers.assigned.AssignedQueries`)

    def _send(self, message: Message) -> bool:  # pragma: no cover - the runtime's
        raise NotImplementedError

    def _text(self, task: str) -> str | None:  # pragma: no cover - the runtime's
        raise NotImplementedError

    def _reconcile(self) -> None:  # pragma: no cover - the runtime's
        raise NotImplementedError

    def _ack_idle_handovers(self) -> None:
        # Without a replay there is no state to hand over: acknowledge moves at once.
        assert self._table is not None
        for task, a in self._assigned.items():
            key = (task, a.container, a.migrating_from)
            if a.migrating_from is not None and key not in self._acked:
                self._acked.add(key)
                try:
                    self._table.complete_migration(task)
                except KazooException as exc:
                    logger.warning("%s: cannot acknowledge hand-over of %s: %s", self.id, task, exc)

    def _hand_over(self, replica: RunReplica, message: Handover) -> None:
        """Snapshots a query that moves away and sends its state to the driver."""
        assert self._run is not None
        frames: list[Any] = []
        error = ""
        if replica.last_seq != message.seq:
            error = f"at tick {replica.last_seq}, not {message.seq}"
        else:
            try:
                t0 = time.perf_counter()
                state = replica.snapshot_moving(
                    message.query, message.dst
                )  # a routed query: its routers' unit
                frames = encode_state(state)
                m = self.metrics
                m.migrations.labels("out").inc()
                m.migrated_bytes.labels("out").inc(state.nbytes)
                m.migrated_rows.labels("out").inc(state.rows)
                logger.info(
                    "%s: snapshot of %s%s for %s: %d rows, %d bytes in %.3fs",
                    self.id,
                    message.query,
                    " (its router unit)" if state.header.get("unit") == UNIT else "",
                    message.dst,
                    state.rows,
                    state.nbytes,
                    time.perf_counter() - t0,
                )
            except Exception as exc:  # StateError, or encoding: the new owner rebuilds
                error = str(exc)
        if error:
            logger.warning("%s: no state of %s to hand over: %s", self.id, message.query, error)
        self._send(State(self._run.id, self.id, message.query, message.dst, message.seq, frames, error))

    def _take_over(self, replica: RunReplica, message: State) -> None:
        """Registers a query that moved here, restoring the state its source sent."""
        assert self._run is not None and self._table is not None
        name = message.query
        task = next((t for t, n in self._run.queries.items() if n == name), None)
        if task is None or message.dst != self.id or name in self._slots:
            return
        try:
            # The driver saw the move in ZooKeeper: make sure this container sees it too,
            # or the next reconcile would give the query straight back.
            assignment = self._table.get(task)
        except KazooException:
            assignment = None
        if assignment is None or assignment.container != self.id:
            logger.warning("%s: state of %s arrived, but the task is not assigned here", self.id, name)
            return
        self._assigned[task] = assignment
        text = self._text(task)
        if text is not None and not replica.live >= replica.reads(name, text):
            # The driver sends the state after the streams' backlog; a subscription that
            # changed meanwhile can still overtake it: rebuild once the streams are here.
            logger.warning("%s: state of %s came before its streams; rebuilding it", self.id, name)
            self._rebuild.add(name)
            self._reconcile()
            return
        state = None
        if message.frames and not message.error and message.seq == replica.last_seq:
            try:
                state = decode_state(message.frames)
            except Exception as exc:  # StateError or worse: rebuild
                logger.warning("%s: malformed state of %s: %s", self.id, name, exc)
        unit = state is not None and state.header.get("unit") == UNIT  # a routed query's routers
        why = ""
        try:
            text = self._texts.get(task) or self._registry.get(task).text  # type: ignore[union-attr]  # a container in a run has a registry
            self._texts[task] = text
            if unit:  # its unit is restored by the next tick (:meth:`_units_restored`)
                assert state is not None
                why = replica.register_routed(name, text, state)
                restored = False
                if not why:
                    self._units_in[name] = (state.nbytes, state.rows)
            else:
                restored = replica.register_restored(name, text, state)
        except (QueryNotFoundError, KazooException):
            return  # the reconcile after the next assignment event retries (as a rebuild)
        except Exception as exc:
            logger.error("%s: cannot register %s: %s", self.id, name, exc)
            self._failed.add(name)
            self._send(Failed(self._run.id, self.id, name, str(exc)))
            return
        reg = replica.last_seq
        slot = self._slots[name] = Slot(task, reg)
        self.metrics.task_moves.labels("in").inc()
        if restored and state is not None:
            m = self.metrics
            m.migrations.labels("in").inc()
            m.migrated_bytes.labels("in").inc(state.nbytes)
            m.migrated_rows.labels("in").inc(state.rows)
        # A restored state is that of the last tick: the query answers the next one.  A
        # routed query's result view is built by that tick (its unit holds what is below
        # its routes): ISTREAM / DSTREAM answer one tick later, as when rebuilt.
        if (restored and not unit) or replica.mode(name) == "RSTREAM":
            first = reg + 1
        else:
            first = reg + 2
        how = "rebuilt" + (f": {why}" if why else "")
        if restored:
            how = "state restored"
        elif unit and not why:
            how = "its router unit to restore before the next tick"
        logger.info("%s: took over %s from %s (%s) after tick %d", self.id, name, message.container, how, reg)
        self._firsts[name] = first
        if self._send(Ready(self._run.id, self.id, name, first)):
            slot.announced = True
        self.metrics.queries_registered.set(len(self._slots))

    def _units_restored(self, moved: dict[str, str]) -> None:
        """Counts and logs how the units of the routed queries moved here since the last
        tick were restored (:meth:`RunReplica.register_routed`, restored by that tick)."""
        m = self.metrics
        for name, why in sorted(moved.items()):
            nbytes, rows = self._units_in.pop(name, (0, 0))
            if why:
                logger.info("%s: the router unit of %s was not restored (%s): rebuilt", self.id, name, why)
                continue
            m.migrations.labels("in").inc()
            m.migrated_bytes.labels("in").inc(nbytes)
            m.migrated_rows.labels("in").inc(rows)
        ok = sum(1 for why in moved.values() if not why)
        logger.info(
            "%s: %d of %d routed queries moved here restored from their router units", self.id, ok, len(moved)
        )
