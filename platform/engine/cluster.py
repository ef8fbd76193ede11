"""Cluster mode of the replay: the driver that feeds operator containers over ZeroMQ.

The unit of placement is a **query** (task id = hash of its name; queries with equal
plans share a colocation group so they land on one container and still share
operators there).  The driver

1. publishes the run (:class:`~linkstream.scheduler.runs.RunSpec`: its result endpoint,
   the static files, the streams) as an ephemeral ZooKeeper node, registers the queries
   in the registry and submits one task per query; the leading coordinator assigns
   them to containers;
2. reads the streams exactly as the embedded replay does (it *is*
   :func:`linkstream.engine.replay.replay`, driving this module's :class:`ClusterEngine`
   instead of an embedded engine), so report times follow SEMANTICS.md §4 unchanged;
3. **broadcasts** every stream element (with the dictionary entries it introduces) and
   every tick to every container, and collects, per tick, the result lines of the due
   queries from the containers named as their answerers, writing them in tick order.

Each tick names one answerer per query.  The answerer changes only on a tick boundary
and only to a container that announced the query *ready* from that tick on: since every
container holds the broadcast stream buffers, a query registered on its new container
has full windows, so the lines from the switch on are those of the old one -- no loss,
no duplicates.  Stateful hand-overs are acknowledged in ZooKeeper once the switch is
sent, which lets the coordinator complete a graceful drain.  A container that dies
(its ephemeral node goes) or does not answer within ``answer_timeout`` costs the lines
of the ticks it owed: they are recorded as lost, never waited for forever; the
coordinator reassigns its queries and they report again from their new container.

A stateful move (ZooKeeper assignment with ``migrating_from``) does not rebuild the
query on its new container: between two ticks the driver asks the old answerer for a
snapshot of the query's operator state and forwards it to the new owner ahead of the
next tick (:mod:`linkstream.containers.handover`, :mod:`linkstream.operators.state`);
only when that is impossible does the new owner rebuild from its stream buffers.

A container that joins mid-run says *hello* and gets a ``sync`` message: the whole
dictionary so far and the retained backlog of every stream (``RunSpec.horizons``), so
its buffers equal everyone else's for what any future window can read.

Opt-in ``placement="operators"`` (``--placement operators``) also cuts every query's
shared plan into producer tasks (shared joins, routes, window scans) placed by the
sans-IO scheduler core on containers of their own, which send their deltas to the
queries' containers over ZeroMQ (:mod:`linkstream.containers.operator_driver`,
:mod:`linkstream.containers.operator_tasks`).  Producers do not move during a run.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.recipe.watchers import DataWatch

from linkstream.containers.fanout import Fanout
from linkstream.containers.handover import Handovers, Migration
from linkstream.containers.protocol import (
    Failed,
    Hello,
    Ready,
    Result,
    State,
    Tick,
    Unready,
    decode,
    encode,
)
from linkstream.containers.replica import retention_horizons
from linkstream.containers.transport import LOOPBACK_ANY, Receiver
from linkstream.engine.embedded import QueryStats, ReportSchedule
from linkstream.engine.replay import ReplayResult, replay
from linkstream.query.continuous import ContinuousQuery
from linkstream.rdf.dictionary import Dictionary, MemoryDictionary
from linkstream.scheduler.assignment import Assignment, AssignmentTable
from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout
from linkstream.scheduler.layout import decode as zk_decode
from linkstream.scheduler.membership import Member, Membership
from linkstream.scheduler.runs import RunNode, RunQuery, RunSpec
from linkstream.scheduler.state import TaskSpec

logger = logging.getLogger(__name__)


class ClusterError(RuntimeError):
    """The cluster replay cannot start or continue (no containers, a query failed ...)."""


def task_id(name: str) -> str:
    """The task (and registry) id of query ``name``: a valid ZooKeeper node name."""
    return "q-" + hashlib.sha1(name.encode("utf-8")).hexdigest()[:20]


def plan_key(cq: ContinuousQuery) -> str:
    """Colocation group of a query: equal for queries with equal plans."""
    body = [cq.dialect, cq.mode, cq.sparql, [[w.stream, str(w.spec)] for w in cq.windows]]
    body += [list(cq.static_from), list(cq.static_named)]
    return "p-" + hashlib.sha1(json.dumps(body).encode("utf-8")).hexdigest()[:20]


@dataclass
class RemoteQuery(ReportSchedule):
    """What :func:`~linkstream.engine.replay.replay` needs of a query evaluated elsewhere."""

    cq: ContinuousQuery
    steps: tuple[int, ...]
    stats: QueryStats = field(default_factory=QueryStats)
    last_report: int | None = None

    @property
    def name(self) -> str:
        return self.cq.name


@dataclass(frozen=True)
class Lost:
    """Report lines of ``query`` at time ``t`` that were not received."""

    query: str
    t: int
    container: str | None
    reason: str


@dataclass(frozen=True)
class Switch:
    """From tick ``seq`` on, ``query`` is answered by ``dst`` instead of ``src``."""

    seq: int
    query: str
    src: str | None
    dst: str


class ClusterEngine:
    """The engine interface of :func:`~linkstream.engine.replay.replay`, backed by containers.

    Args:
        client: Started kazoo client of the driver.
        spec: The run (published by :func:`replay_on_cluster`).
        queries: The run's queries, by name.
        receiver: The driver's result PULL socket (``spec.driver``).
        dictionary: Encodes stream terms on the driver.
        answer_timeout: Seconds to wait for a tick's answers before counting them lost.
        root: Cluster root inside the chroot.
        on_tick: Called with ``(seq, c)`` after each tick's answers are in (tests use it
            to change the cluster mid-replay).
    """

    def __init__(
        self,
        client: KazooClient,
        spec: RunSpec,
        queries: dict[str, RemoteQuery],
        receiver: Receiver,
        dictionary: Dictionary,
        *,
        answer_timeout: float = 60.0,
        root: str = DEFAULT_ROOT,
        on_tick: Callable[[int, int], None] | None = None,
    ) -> None:
        self.client = client
        self.spec = spec
        self.queries = queries
        self.receiver = receiver
        self.dictionary = dictionary
        self.answer_timeout = answer_timeout
        self.on_tick = on_tick
        self.layout = ClusterLayout(root)
        self.table = AssignmentTable(client, root)
        self.seq = 0
        self.lost: list[Lost] = []
        self.switches: list[Switch] = []
        self._stream_index = {iri: k for k, iri in enumerate(spec.streams)}
        self.fanout = Fanout(
            spec.id,
            spec.streams,
            spec.horizons,
            dictionary,
            is_dead=self._dead,
            on_wait=self.pump,
            on_drop=self._forget,
            stall_timeout=answer_timeout,
        )
        self._peers = self.fanout.peers
        self.handovers = Handovers(spec.id, self.fanout, self.pump, answer_timeout, self._dead)
        self._hellos: list[Hello] = []
        self._ready: dict[str, dict[str, int]] = {n: {} for n in queries}
        self._answerer: dict[str, str] = {}
        self._released: dict[str, int] = {}
        self._results: dict[int, dict[str, Result]] = {}
        self._failures: list[Failed] = []
        self._acked: set[tuple[str, str | None, str | None]] = set()
        self._lock = threading.Lock()
        self._members: set[str] = set()
        self._departed: set[str] = set()
        self._targets: dict[str, Assignment | None] = {}
        self._watches: list[DataWatch] = []
        self._stopped = False
        #: operator-level placement of the run (``placement="operators"``), else ``None``
        self.placement: dict[str, object] | None = None
        self._member_watch = Membership(client, root).watch(self._on_members)
        for name in queries:
            self._watch_task(name)

    # ------------------------------------------------------------------ ZooKeeper observations

    def _on_members(self, members: dict[str, Member]) -> None:
        with self._lock:
            now = set(members)
            self._departed |= self._members - now
            self._departed -= now
            self._members = now

    def _watch_task(self, name: str) -> None:
        def on_data(data: bytes | None, _stat: object) -> bool | None:
            if self._stopped:
                return False
            assignment = None
            if data is not None:
                try:
                    assignment = Assignment.from_json(zk_decode(data))
                except (ValueError, KeyError):
                    logger.warning("malformed assignment of %s", name)
            with self._lock:
                self._targets[name] = assignment
            return None

        self._watches.append(DataWatch(self.client, self.layout.task(task_id(name)), on_data))

    def _dead(self, cid: str) -> bool:
        with self._lock:
            return cid in self._departed

    def owner_in_zookeeper(self, name: str) -> str | None:
        """The container ZooKeeper currently assigns ``name`` to."""
        with self._lock:
            a = self._targets.get(name)
        return None if a is None else a.container

    def answerers(self) -> dict[str, str]:
        """The container currently named to answer each query."""
        return dict(self._answerer)

    def ready_on(self, name: str) -> set[str]:
        """Containers that announced query ``name`` ready (and did not take it back)."""
        return set(self._ready[name])

    def settled(self) -> bool:
        """Whether every query's ZooKeeper owner has announced it ready (no move in flight)."""
        for name in self.queries:
            owner = self.owner_in_zookeeper(name)
            if owner is None or owner not in self._ready[name]:
                return False
        return True

    # ------------------------------------------------------------------ inbox

    def pump(self, timeout: float = 0.0) -> None:
        """Receives and handles every message already queued (waiting ``timeout`` for one)."""
        wait = timeout
        while True:
            frames = self.receiver.recv_frames(wait)
            if frames is None:
                break
            wait = 0.0
            try:
                message = decode(frames)
            except ValueError as exc:
                logger.warning("driver: rejected malformed message: %s", exc)
                continue
            if getattr(message, "run", None) != self.spec.id:
                continue
            if isinstance(message, Result):
                if message.seq <= self.seq:
                    self._results.setdefault(message.seq, {})[message.container] = message
            elif isinstance(message, Hello):
                self._hellos.append(message)
            elif isinstance(message, Ready) and message.query in self._ready:
                self._ready[message.query][message.container] = message.first_tick
            elif isinstance(message, Unready) and message.query in self._ready:
                self._ready[message.query].pop(message.container, None)
                self._released[message.container] = max(
                    self._released.get(message.container, 0), message.token
                )
            elif isinstance(message, Failed):
                self._failures.append(message)
            elif isinstance(message, State):
                self.handovers.on_state(message)

    def _check_failures(self) -> None:
        if self._failures:
            f = self._failures[0]
            what = f"register {f.query}" if f.query else "take part"
            raise ClusterError(f"container {f.container} cannot {what}: {f.error}")

    def admit(self) -> None:
        """Syncs containers that said hello (safe between ticks, never inside a send)."""
        hellos, self._hellos = self._hellos, []
        for hello in hellos:
            self._forget(hello.container)
            self.fanout.add(hello.container, hello.address, self.seq)

    def _forget(self, cid: str) -> None:
        for ready in self._ready.values():
            ready.pop(cid, None)
        self.handovers.forget(cid)

    def migrate(self) -> list[Migration]:
        """Carries out the stateful moves ZooKeeper shows (between ticks only).

        A query whose ZooKeeper owner is a synced container that has not announced it
        ready, while the assignment still names the container it migrates from, gets its
        operator state from its current answerer (see :mod:`linkstream.containers.handover`).
        """
        moves = []
        for name in sorted(self.queries):
            with self._lock:
                a = self._targets.get(name)
            if a is None or a.migrating_from is None or a.container is None:
                continue
            dst = a.container
            if dst not in self._peers or dst in self._ready[name] or dst == self._answerer.get(name):
                continue
            # The answerer holds the query until the driver names another one (even after
            # it saw the move and said *unready*), so it can snapshot the state.
            src = self._answerer.get(name)
            if src is not None and src not in self._peers:
                src = None
            moves.append((name, src, dst))
        if not moves:
            return []
        return self.handovers.run_moves(self.seq, moves, lambda q, c: c in self._ready[q])

    # ------------------------------------------------------------------ engine interface

    def buffer(self, iri: str) -> None:
        """Checks that ``iri`` is one of the run's streams (the buffers live on the containers)."""
        if iri not in self._stream_index:
            raise ValueError(f"stream <{iri}> is not part of the run")

    def ingest(self, stream: str, t: int, triples: np.ndarray) -> None:
        """Buffers one element for the next broadcast."""
        self.fanout.ingest(self._stream_index[stream], t, triples)

    def gc(self) -> None:
        """Handles what arrived meanwhile (the replay calls this every 256 elements)."""
        self.pump(0.0)
        self._check_failures()

    def choose_owners(self, seq: int) -> dict[str, str]:
        """The answerer of every query at tick ``seq`` (switching only to ready containers)."""
        for name in sorted(self.queries):
            cur = self._answerer.get(name)
            ready = self._ready[name]

            def ok(cid: str | None, ready: dict[str, int] = ready) -> bool:
                return cid is not None and cid in self._peers and ready.get(cid, seq + 1) <= seq

            target = self.owner_in_zookeeper(name)
            new = cur
            if target != cur and ok(target):
                new = target
            elif cur is None or cur not in self._peers:
                new = next((c for c in sorted(ready) if ok(c)), cur)
            if new is not None and new != cur:
                self._answerer[name] = new
                self.switches.append(Switch(seq, name, cur, new))
                logger.info("driver: %s answered by %s from tick %d (was %s)", name, new, seq, cur)
        return dict(self._answerer)

    def _ack_handovers(self, owners: dict[str, str]) -> None:
        for name, owner in owners.items():
            with self._lock:
                a = self._targets.get(name)
            if a is None or a.migrating_from is None or a.container != owner:
                continue
            key = (a.task.id, a.container, a.migrating_from)
            if key in self._acked:
                continue
            self._acked.add(key)
            try:
                self.table.complete_migration(a.task.id)
            except KazooException as exc:
                logger.warning("driver: cannot acknowledge the hand-over of %s: %s", name, exc)

    def tick(self, c: int, reporting: Sequence[str]) -> dict[str, list[str]]:
        """Broadcasts report time ``c`` and returns the lines of the ``reporting`` queries."""
        self.fanout.flush()
        self.pump(0.0)
        self._check_failures()
        for cid in [c_ for c_ in self._peers if self._dead(c_)]:
            self.fanout.drop(cid)
            self._forget(cid)
        self.admit()
        self.migrate()
        self.seq += 1
        seq = self.seq
        owners = self.choose_owners(seq)
        due = sorted(reporting)
        t0 = time.perf_counter()
        self.fanout.broadcast(encode(Tick(self.spec.id, seq, c, due, owners, dict(self._released))))
        self._ack_handovers(owners)
        self.fanout.prune(c)
        out = self._collect(seq, c, due, owners)
        dt = time.perf_counter() - t0
        for name in due:
            st = self.queries[name].stats
            st.reports += 1
            st.rows += len(out[name])
            st.eval_seconds += dt
            st.latencies.append(dt)
            self.queries[name].last_report = c
        if self.on_tick is not None:
            self.on_tick(seq, c)
        return out

    def _collect(self, seq: int, c: int, due: list[str], owners: dict[str, str]) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {name: [] for name in due}
        waiting: dict[str, list[str]] = {}
        for name in due:
            cid = owners.get(name)
            if cid is None or cid not in self._peers:
                self._lose(name, c, cid, "no live container holds the query")
            else:
                waiting.setdefault(cid, []).append(name)
        deadline = time.monotonic() + self.answer_timeout
        while waiting:
            got = self._results.get(seq, {})
            for cid in [x for x in waiting if x in got]:
                result = got[cid]
                for name in waiting.pop(cid):
                    if name in result.lines:
                        out[name] = result.lines[name]
                    else:
                        self._lose(name, c, cid, "the container did not hold the query")
            for cid in [x for x in waiting if self._dead(x)]:
                for name in waiting.pop(cid):
                    self._lose(name, c, cid, "the container died")
            if waiting and time.monotonic() > deadline:
                for cid, names in waiting.items():
                    for name in names:
                        self._lose(name, c, cid, f"no answer within {self.answer_timeout:g}s")
                    # A container that stalls this long is out of the run: later ticks fail fast.
                    self.fanout.drop(cid)
                    self._forget(cid)
                break
            if waiting:
                self.pump(0.02)
        self._results.pop(seq, None)
        return out

    def _lose(self, name: str, c: int, cid: str | None, reason: str) -> None:
        self.lost.append(Lost(name, c, cid, reason))
        logger.warning("driver: lines of %s at t=%d lost (%s: %s)", name, c, cid, reason)

    # ------------------------------------------------------------------ start and stop

    def wait_until_ready(self, timeout: float) -> None:
        """Waits until every query has a container ready to answer its first tick.

        Raises:
            ClusterError: Some query still has none after ``timeout`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            self.pump(0.05)
            self._check_failures()
            self.admit()
            missing = [n for n in sorted(self.queries) if not any(v <= 1 for v in self._ready[n].values())]
            if not missing:
                self.choose_owners(1)
                return
            if time.monotonic() > deadline:
                with self._lock:
                    members = sorted(self._members)
                raise ClusterError(
                    f"no container became ready for {', '.join(missing)} within {timeout:g}s "
                    f"(containers: {', '.join(members) or 'none'}; is a coordinator running?)"
                )

    def close(self) -> None:
        """Stops the watches and closes the sockets to the containers."""
        self._stopped = True
        self._member_watch.stop()
        self.fanout.close()


@dataclass
class ClusterReplayResult:
    """A cluster replay's outcome.

    Attributes:
        replay: Counts and timings, as for an embedded replay.
        lost: Report lines that were not received (a container died or stalled).
        switches: Answerer changes (initial placement and moves).
        containers: Containers that took part.
        bytes_sent: Bytes the driver pushed on the data plane.
        run_id: The run's id (containers log it).
        migrations: Stateful moves, with the operator state shipped for each.
    """

    replay: ReplayResult
    lost: list[Lost]
    switches: list[Switch]
    containers: list[str]
    bytes_sent: int
    run_id: str = ""
    migrations: list[Migration] = field(default_factory=list)
    placement: dict[str, object] | None = None


def _place_operators(
    engine: ClusterEngine, queries: Sequence[ContinuousQuery], client: KazooClient, root: str
) -> dict[str, object]:
    """Sets up operator-level placement on the run's containers (before tick 1)."""
    from linkstream.containers.operator_driver import PlacementError, setup

    members = {c: m for c, m in Membership(client, root).members().items() if c in engine.fanout.peers}
    try:
        return setup(
            engine.spec,
            queries,
            engine.answerers(),
            members,
            {cq.name: task_id(cq.name) for cq in queries},
            engine.fanout.send,
        )
    except PlacementError as exc:
        raise ClusterError(str(exc)) from exc


def replay_on_cluster(
    hosts: str,
    queries: Sequence[ContinuousQuery],
    streams: Sequence[tuple[str, str]],
    statics: Sequence[tuple[str | None, str]],
    out: TextIO | None,
    *,
    base: str,
    default_step: int = 1000,
    lateness_ms: int = 0,
    max_reports: int | None = None,
    dictionary: Dictionary | None = None,
    bind: str = LOOPBACK_ANY,
    root: str = DEFAULT_ROOT,
    answer_timeout: float = 60.0,
    startup_timeout: float = 60.0,
    session_timeout: float = 10.0,
    log: Callable[[str], None] | None = None,
    on_tick: Callable[[int, int], None] | None = None,
    on_start: Callable[[ClusterEngine], None] | None = None,
    placement: str = "queries",
) -> ClusterReplayResult:
    """Replays ``streams`` through ``queries`` on the cluster at ``hosts``.

    Args:
        hosts: ZooKeeper connection string (with chroot) of a running cluster.
        queries: Parsed queries (unique names).
        streams: ``(iri, path)`` stream files.
        statics: ``(iri or None, path)`` static graph files, loaded by every container.
        out: Where the result lines go (JSON Lines, in report order), or ``None``.
        base: Base IRI of the queries.
        default_step: Step of windows without STEP/SLIDE.
        lateness_ms: Allowed lateness of stream elements.
        max_reports: Evaluate only the first N report times of each query.
        dictionary: Driver-side dictionary (default: in memory).
        bind: Endpoint of the driver's result socket.
        root: Cluster root inside the chroot.
        answer_timeout: Seconds to wait for a tick's answers before counting them lost.
        startup_timeout: Seconds to wait for every query to be placed and ready.
        session_timeout: The driver's ZooKeeper session timeout.
        log: Receives warnings about the input files.
        on_tick: Called with ``(seq, c)`` after every tick (testing aid).
        on_start: Called with the engine once every query is ready (testing aid).
        placement: ``"queries"`` (default) places whole queries; ``"operators"`` also
            cuts their plans into producer tasks placed on their own containers, which
            send their deltas over ZeroMQ (:mod:`linkstream.containers.operator_driver`).

    Raises:
        ClusterError: The cluster could not run the replay.
        RunActiveError: Another replay is running on the cluster.
    """
    names = [cq.name for cq in queries]
    if placement not in ("queries", "operators"):
        raise ClusterError(f"unknown placement {placement!r} (queries or operators)")
    if len(set(names)) != len(names):
        raise ClusterError("query names must be unique in a cluster replay")
    iris = [iri for iri, _ in streams]
    client = KazooClient(hosts=hosts, timeout=session_timeout)
    client.start(timeout=30)
    receiver = Receiver(bind, rcvhwm=100000)
    run_id = uuid.uuid4().hex[:12]
    spec = RunSpec(
        id=run_id,
        driver=receiver.endpoint,
        base=base,
        default_step=default_step,
        statics=tuple(statics),
        streams=tuple(iris),
        horizons=tuple(retention_horizons(queries, iris, default_step)),
        queries={task_id(cq.name): cq.name for cq in queries},
    )
    run_node = RunNode(client, root)
    engine: ClusterEngine | None = None
    remote = {}
    submissions = []
    for cq in queries:
        steps = tuple(sorted({w.spec.step_or(default_step) for w in cq.windows}))
        remote[cq.name] = RemoteQuery(cq, steps)
        task = TaskSpec(task_id(cq.name), colocate_with=plan_key(cq), stateful=True)
        submissions.append(RunQuery(task, cq.name, cq.text, cq.dialect))
    try:
        run_node.open(spec, submissions)
        engine = ClusterEngine(
            client,
            spec,
            remote,
            receiver,
            dictionary if dictionary is not None else MemoryDictionary(),
            answer_timeout=answer_timeout,
            root=root,
            on_tick=on_tick,
        )
        engine.wait_until_ready(startup_timeout)
        summary = None
        if placement == "operators":
            summary = engine.placement = _place_operators(engine, queries, client, root)
        if on_start is not None:
            on_start(engine)
        ordered = [remote[n] for n in names]
        res = replay(
            engine,  # type: ignore[arg-type]
            ordered,  # type: ignore[arg-type]
            streams,
            out,
            lateness_ms=lateness_ms,
            max_reports=max_reports,
            log=log,
        )
        return ClusterReplayResult(
            res,
            list(engine.lost),
            list(engine.switches),
            list(engine.fanout.joined),
            engine.fanout.bytes_sent,
            run_id,
            list(engine.handovers.done),
            summary,
        )
    finally:
        if engine is not None:
            engine.close()
        if run_node.get() == spec:
            run_node.close(spec)
        receiver.close()
        client.stop()
        client.close()
