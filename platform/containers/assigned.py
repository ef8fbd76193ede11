"""The container's queries as ZooKeeper assigns them (:class:`AssignedQueries`, a part of the runtime).

An assigned query is registered in the run's replica once every stream it reads is live
here (subscribed and its backlog received), and announced to the driver as *ready* from a
given tick on; a query taken away is announced *unready* and unregistered once the driver
has named another answerer and released it.  The streams this container subscribes to are
those of the queries it holds or is assigned (a ``subscribe`` message whenever that set
changes).  Query texts come with the run or from the registry, read pipelined.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable

from kazoo.exceptions import KazooException

from linkstream.containers.messages import Failed, Message, Ready, Subscribe, Unready
from linkstream.containers.replica import RunReplica
from linkstream.containers.takeover import Slot
from linkstream.containers.wire import Frame
from linkstream.metrics import ContainerMetrics
from linkstream.scheduler.assignment import Assignment
from linkstream.scheduler.registry import QueryNotFoundError, QueryRegistry
from linkstream.scheduler.runs import RunSpec

logger = logging.getLogger(__name__)

#: Seconds a query taken from a dead container waits for the driver's ``forward`` (its
#: restore from the last checkpoint) before it is rebuilt from the stream buffers.
RESTORE_WAIT = 5.0
#: ``forward`` messages not kept here (assignment or streams not there yet) before a rebuild.
MAX_UNKEPT = 3


class AssignedQueries:
    """Keeps the replica's queries in line with the assignment and the driver's ticks.

    A mixin of :class:`~linkstream.containers.runtime.ContainerRuntime`, whose state
    (declared below) and methods ``_send`` and ``_ack_idle_handovers`` it uses.
    """

    id: str
    metrics: ContainerMetrics
    _run: RunSpec | None
    _replica: RunReplica | None
    _registry: QueryRegistry | None
    _assigned: dict[str, Assignment]
    _slots: dict[str, Slot]
    _failed: set[str]
    _texts: dict[str, str]
    _owners: dict[str, str]
    _released: int
    _token: int
    _rebuild: set[str]
    #: per query waiting for its restore: [monotonic start (0: rebuild), forwards not kept]
    _restore_wait: dict[str, list[float]]
    #: per query announced ready, the first tick it answers (until a tick reaches it)
    _firsts: dict[str, int]
    #: :meth:`StateMigration._ack_idle_handovers <linkstream.containers.takeover.StateMigration._ack_idle_handovers>`
    #: (declared, not defined: a method here would shadow it in the runtime's MRO)
    _ack_idle_handovers: Callable[[], None]

    def _send(self, message: Message | list[Frame]) -> bool:  # pragma: no cover - the runtime's
        raise NotImplementedError

    def _run_texts(self, spec: RunSpec) -> dict[str, str]:
        """The text of every query of the run, from the registry (unreadable ones left out)."""
        self._prefetch(list(spec.queries))
        return {name: self._texts[task] for task, name in spec.queries.items() if task in self._texts}

    def _prefetch(self, tasks: list[str]) -> None:
        """Reads the texts of ``tasks`` not known yet, pipelined: one round trip in all, not
        one each (a batch of 1,000 registrations assigns 1,000 tasks at once)."""
        assert self._registry is not None
        missing = [t for t in tasks if t not in self._texts]
        with contextlib.suppress(KazooException):  # the one-by-one reads retry them
            for task, rec in zip(missing, self._registry.get_many(missing) if missing else [], strict=True):
                if rec is not None:
                    self._texts[task] = rec.text

    def _reconcile(self) -> None:
        """Brings the replica's queries in line with the assignment and the driver's ticks."""
        run, replica = self._run, self._replica
        if run is None or replica is None:
            self._ack_idle_handovers()
            return
        desired = {run.queries[t]: t for t in self._assigned if t in run.queries}
        self._prefetch([t for name, t in desired.items() if name not in self._slots])
        for name, task in desired.items():
            slot = self._slots.get(name)
            if slot is None:
                src = self._assigned[task].migrating_from
                moving = src is not None and src != self.id and name not in self._rebuild
                if moving and (not replica.synced or replica.last_seq > 0):
                    # A stateful move in a running replay: the driver brings the state (or
                    # says rebuild); before the sync it is not known yet whether one runs.
                    continue
                if self._awaits_restore(name, self._assigned[task], replica):
                    continue
                text = self._text(task)
                # Registered only on the streams' full backlog, or its windows would miss it.
                if text is None or not replica.synced or not replica.live >= replica.reads(name, text):
                    continue
                if name in self._failed or not self._register(replica, name, task):
                    continue
                slot = self._slots[name] = Slot(task, replica.last_seq)
                if replica.last_seq > 0:
                    self.metrics.task_moves.labels("in").inc()
            if slot.unready is not None:  # assigned back before it was released
                slot.unready, slot.announced = None, False
            if replica.synced and not slot.announced:
                reg = replica.last_seq if slot.reg_seq is None else slot.reg_seq
                slot.reg_seq = reg
                # A fresh RSTREAM query reports like an old one at once; ISTREAM/DSTREAM
                # need one update first so their deltas are relative to the last tick.
                first = reg + 1 if reg == 0 or replica.mode(name) == "RSTREAM" else reg + 2
                self._firsts[name] = first
                if self._send(Ready(run.id, self.id, name, first)):
                    slot.announced = True
        for name in self._restore_wait.keys() - (desired.keys() - self._slots.keys()):
            del self._restore_wait[name]  # restored, rebuilt or taken away: no more waiting
        gone = self._slots.keys() - desired.keys()  # (a Python loop over every slot per event was O(n))
        released = [(n, sl) for n, sl in self._slots.items() if n in gone] if gone else []
        for name, slot in released:
            if slot.unready is None:
                self._token += 1
                slot.unready = self._token
                self._send(Unready(run.id, self.id, name, slot.unready))
            if self._owners.get(name) != self.id and self._released >= slot.unready:
                replica.unregister(name)
                del self._slots[name]
                self._rebuild.discard(name)
                self._restore_wait.pop(name, None)
                self.metrics.task_moves.labels("out").inc()
                logger.info("%s: released %s", self.id, name)
        self._subscribe(run, replica, desired)

    def _not_yet(self, seq: int, answer: list[str]) -> dict[str, int]:
        """The queries of ``answer`` (named to answer tick ``seq`` here) held here that answer
        only from a later tick: the first one, by query.  The driver names a container only
        from the tick its *ready* gives, but a query kept from a ``forward`` before it read
        that announcement (:mod:`linkstream.cluster.recovery`): an IStream / DStream one, or
        one on a restored router unit, is answered one tick later than an RStream one."""
        firsts = self._firsts
        if not firsts:  # (the usual case: nothing registered lately)
            return {}
        for name in [n for n, first in firsts.items() if first <= seq]:
            del firsts[name]  # (once per registration: not a pass over every query per tick)
        named = set(answer) if firsts else ()
        return {n: first for n, first in firsts.items() if n in named and n in self._slots}

    def _awaits_restore(self, name: str, a: Assignment, replica: RunReplica) -> bool:
        """Whether query ``name``, taken from a dead container (``restored_from``), still
        waits for the driver's ``forward`` (restored from the last checkpoint) rather than
        being rebuilt from the stream buffers: in a running replay, for at most
        :data:`RESTORE_WAIT` seconds, until the driver says rebuild (:meth:`_restore_refused`)."""
        dead = a.restored_from
        if (
            dead is None
            or dead == self.id
            or name in self._rebuild
            or not (replica.last_seq > 0 or not replica.synced)
        ):
            return False
        since = self._restore_wait.setdefault(name, [time.monotonic(), 0])
        if since[0] == 0.0:  # a forward was not kept, or the driver said rebuild
            return False
        if time.monotonic() - since[0] < RESTORE_WAIT:
            return True
        logger.warning(
            "%s: no restore of %s (lost with %s) within %.0f s: rebuilt", self.id, name, dead, RESTORE_WAIT
        )
        self._rebuild.add(name)
        return False

    def _restore_refused(self, names: Iterable[str], forwarded: bool) -> None:
        """The driver's word on queries waiting for their restore: a ``recompute`` naming
        one in its ``rebuild`` list (``forwarded`` false: no checkpoint holds it, or it will
        not be restored) means rebuild now; a ``forward`` that was not kept here is counted,
        and after :data:`MAX_UNKEPT` of them the query is rebuilt too."""
        for name in names:
            since = self._restore_wait.get(name)
            if since is None or name in self._slots or since[0] == 0.0:
                continue
            if forwarded:
                since[1] += 1
            if not forwarded or since[1] >= MAX_UNKEPT:
                logger.info("%s: %s rebuilt from the stream buffers, not restored", self.id, name)
                since[0] = 0.0
                self._rebuild.add(name)

    def _text(self, task: str) -> str | None:
        """The text of query task ``task`` (``None`` while the registry cannot tell)."""
        assert self._registry is not None
        text = self._texts.get(task)
        if text is None:
            try:
                text = self._texts[task] = self._registry.get(task).text
            except (QueryNotFoundError, KazooException):
                return None
        return text

    def _subscribe(self, run: RunSpec, replica: RunReplica, desired: dict[str, str]) -> None:
        """Asks the driver for the streams of the queries held or assigned here, if they changed."""
        if run.route != "streams" or not replica.synced:
            return  # broadcast: every stream arrives anyway
        tasks = {name: task for name, task in desired.items() if name not in self._failed}
        tasks.update((name, slot.task) for name, slot in self._slots.items())
        streams: set[int] = set()
        for name, task in tasks.items():
            text = self._text(task)
            if text is not None:
                streams |= replica.reads(name, text)
        version = replica.request(frozenset(streams))
        if version is not None:
            logger.info("%s: subscribes to streams %s (version %d)", self.id, sorted(streams), version)
            self._send(Subscribe(run.id, self.id, version, tuple(sorted(streams))))

    def _register(self, replica: RunReplica, name: str, task: str) -> bool:
        assert self._registry is not None and self._run is not None
        try:
            text = self._texts.get(task) or self._registry.get(task).text
            self._texts[task] = text
            replica.register(name, text)
        except (QueryNotFoundError, KazooException):
            return False  # not readable yet (or ZooKeeper unreachable): the next event retries
        except Exception as exc:  # a query that cannot be planned must not stop the container
            logger.error("%s: cannot register %s: %s", self.id, name, exc)
            self._failed.add(name)
            self._send(Failed(self._run.id, self.id, name, str(exc)))
            return False
        logger.info("%s: registered %s (after tick %d)", self.id, name, replica.last_seq)
        return True
