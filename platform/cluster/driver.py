"""The driver's protocol state in a cluster replay: :class:`ClusterEngine`.

:class:`ClusterEngine` is the engine interface that :func:`linkstream.engine.replay.replay`
drives in cluster mode (:func:`linkstream.cluster.replay.replay_on_cluster` sets it up).
It follows ZooKeeper (membership, every query's assignment), reads the containers'
messages (hello, subscribe, ready/unready, results, state), admits and syncs
containers, routes the stream elements (:class:`~linkstream.cluster.fanout.Fanout`),
carries out stateful moves between ticks (:mod:`linkstream.cluster.handover`),
names one answerer per query and tick, and collects the ticks' result lines.

Each tick names one answerer per query.  The answerer changes only on a tick boundary
and only to a container that announced the query *ready* from that tick on.  A container
announces a query ready only once it holds the query's streams: when the run routes by
stream (the default) it first subscribes to them and the driver, between two ticks,
sends it their retained backlog; when the run broadcasts, it holds every stream anyway.
Either way the query's windows on its new container are full, so the lines from the
switch on are those of the old one -- no loss, no duplicates.  Stateful hand-overs are
acknowledged in ZooKeeper once the switch is sent, which lets the coordinator complete a
graceful drain; they start only once the new owner subscribed to the query's streams,
so the state arrives after their backlog.  A container that dies (its ephemeral node
goes) or does not answer within ``answer_timeout`` does not cost the lines of the
ticks it owed: a live container recomputes them from the driver's retained history of
the queries' streams (:mod:`linkstream.cluster.recovery`) until the coordinator has
reassigned the queries and their new owners are ready; only a report no live container
can recompute is recorded as lost.  Results are deduplicated at the result edge by
(query, report time): a report time at or before the last one written for a query is
never written again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from linkstream.cluster.fanout import Fanout
from linkstream.cluster.handover import Handovers, Migration
from linkstream.cluster.owners import OwnerView
from linkstream.cluster.recovery import Backoff, Recovery
from linkstream.cluster.tasksnapshots import TaskSnapshots
from linkstream.containers.messages import (
    Failed,
    Hello,
    Ready,
    Recomputed,
    Result,
    State,
    Subscribe,
    Tick,
    Unready,
)
from linkstream.containers.protocol import decode, encode
from linkstream.containers.security import Security, SecurityError
from linkstream.containers.transport import CurveKeys, Receiver
from linkstream.engine.embedded import QueryStats, ReportSchedule
from linkstream.query.continuous import ContinuousQuery
from linkstream.rdf.dictionary import Dictionary
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.keyring import KeyRing
from linkstream.scheduler.layout import DEFAULT_ROOT, ClusterLayout
from linkstream.scheduler.membership import Member, Membership
from linkstream.scheduler.runs import RunSpec

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
        security: The driver's credential and CURVE keys (``None``: insecure); its sockets
            to the containers use the keys they published in membership.
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
        security: Security | None = None,
    ) -> None:
        self.client = client
        self.security = security or Security.insecure()
        self.keyring = KeyRing(client, root)
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
        #: stream indexes each query reads (what its container must subscribe to)
        self.reads = {
            name: frozenset(
                self._stream_index[w.stream] for w in q.cq.windows if w.stream in self._stream_index
            )
            for name, q in queries.items()
        }
        self.fanout = Fanout(
            spec.id,
            spec.streams,
            spec.horizons,
            dictionary,
            is_dead=self._dead,
            on_wait=self.pump,
            on_drop=self._forget,
            stall_timeout=answer_timeout,
            route=spec.route,
            curve_for=self.curve_for,
        )
        self._peers = self.fanout.peers
        self.handovers = Handovers(spec.id, self.fanout, self.pump, answer_timeout, self._dead)
        self.recovery = Recovery(spec.id, self.fanout, dictionary, self.pump, answer_timeout, self._dead)
        self.recovery.is_ready = lambda name, cid: cid in self._ready.get(name, {})  # (restore-forward)
        self.recovery.is_live = lambda name, cid: (
            self.reads.get(name, frozenset()) <= self.fanout.subscribed(cid)
        )
        self.tasks = TaskSnapshots(spec.id)  # cluster checkpoints' operator state (:mod:`.tasksnapshots`)
        #: per query, the last report time whose lines were handed out (the result edge)
        self.written: dict[str, int] = {}
        #: result lines dropped at the result edge (a report time already handed out)
        self.duplicates = 0
        self._control: list[Hello | Subscribe] = []  # in arrival order
        self._ready: dict[str, dict[str, int]] = {n: {} for n in queries}
        self._answerer: dict[str, str] = {}
        #: counts the changes of the queries, their ready announcements and answerers; with
        #: the owners' version and the peers it says when :meth:`choose_owners` may skip
        self._owning = 0
        self._chosen: tuple[int, int, tuple[str, ...]] | None = None
        self._released: dict[str, int] = {}
        self._results: dict[int, dict[str, Result]] = {}
        self._failures: list[Failed] = []
        self._acked: set[tuple[str, str | None, str | None]] = set()
        self._lock = threading.Lock()
        self._members: set[str] = set()
        self._synced_at: dict[str, int] = {}  # tick each container was last admitted at
        self._departed: set[str] = set()
        self._stopped = False
        #: operator-level placement of the run (``placement="operators"``), else ``None``
        self.placement: dict[str, object] | None = None
        self._member_watch = Membership(client, root).watch(self._on_members)
        #: every task's owner and hand-over source (a watch per container index, not per task)
        self.owners = OwnerView(client, root)
        self._task_ids: dict[str, str] = {}
        #: queries a dead container answered, until ready on their new owner (restore-forward:
        #: forwarded at the first tick the death is known, due or not); containers seen dead
        self._orphans: dict[str, str] = {}
        self._seen_dead: set[str] = set()
        self._orphan_poll = Backoff()  # (while none of them has a live new owner)

    def curve_for(self, cid: str) -> CurveKeys | None:
        """CURVE keys to connect to container ``cid`` (``None``: plaintext)."""
        if not self.security.enabled:
            return None
        return self.security.client(self.keyring.public_key(cid), f"container {cid}")

    # ------------------------------------------------------------------ ZooKeeper observations

    def _on_members(self, members: dict[str, Member]) -> None:
        with self._lock:
            now = set(members)
            self._departed |= self._members - now
            self._departed -= now
            self._members = now

    def _dead(self, cid: str) -> bool:
        with self._lock:
            return cid in self._departed

    def owner_in_zookeeper(self, name: str) -> str | None:
        """The container ZooKeeper currently assigns ``name`` to."""
        return self.owners.owner(self._tid(name))

    def _tid(self, name: str) -> str:
        """``task_id(name)``, remembered (asked for every query at every tick)."""
        t = self._task_ids.get(name)
        if t is None:
            t = self._task_ids[name] = task_id(name)
        return t

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
                if not self.tasks.on_frames(frames):  # a cluster checkpoint's task snapshots
                    logger.warning("driver: rejected malformed message: %s", exc)
                continue
            if getattr(message, "run", None) != self.spec.id:
                continue
            if isinstance(message, Result):
                if message.seq <= self.seq:
                    self._results.setdefault(message.seq, {})[message.container] = message
            elif isinstance(message, (Hello, Subscribe)):
                self._control.append(message)
            elif isinstance(message, Ready) and message.query in self._ready:
                self._ready[message.query][message.container] = message.first_tick
                self._owning += 1
            elif isinstance(message, Unready):
                self._owning += 1
                # released even when the query left the run meanwhile (live service)
                self._ready.get(message.query, {}).pop(message.container, None)
                self._released[message.container] = max(
                    self._released.get(message.container, 0), message.token
                )
            elif isinstance(message, Failed):
                self._failures.append(message)
            elif isinstance(message, State):
                self.handovers.on_state(message)
            elif isinstance(message, Recomputed):
                self.recovery.on_answer(message)

    def _check_failures(self) -> None:
        if self._failures:
            f = self._failures[0]
            what = f"register {f.query}" if f.query else "take part"
            raise ClusterError(f"container {f.container} cannot {what}: {f.error}")

    def admit(self) -> None:
        """Syncs containers that said hello and answers subscriptions (between ticks only).

        Hellos and subscriptions are applied in arrival order, so a subscription a
        container sent before it rejoined (with a new hello) cannot outlive the rejoin.
        """
        control, self._control = self._control, []
        for i, message in enumerate(control):
            if isinstance(message, Hello):
                cid = message.container
                try:
                    self.curve_for(cid)  # its key, from ZooKeeper (the driver's session may be down)
                except (KazooException, SecurityError) as exc:
                    logger.warning("driver: cannot admit %s yet: %s", cid, exc or type(exc).__name__)
                    self._control[:0] = control[i:]  # tried again at the next admission
                    return
                self._forget(cid)
                # A container that says hello again (its session expired) starts afresh: it
                # answers nothing until it announces queries ready again; the reports due
                # meanwhile are recomputed elsewhere (:mod:`linkstream.cluster.recovery`).
                for name in [n for n, a in self._answerer.items() if a == cid]:
                    del self._answerer[name]
                self._owning += 1
                self.fanout.add(cid, message.address, self.seq)
                self._synced_at[cid] = self.seq  # it gets the ticks after this one only
            else:
                self.fanout.subscribe(message.container, message.version, message.streams, self.seq)

    def _forget(self, cid: str) -> None:
        self._owning += 1
        for ready in self._ready.values():
            ready.pop(cid, None)
        self.handovers.forget(cid)

    def migrate(self) -> list[Migration]:
        """Carries out the stateful moves ZooKeeper shows (between ticks only).

        A query whose ZooKeeper owner is a synced container that has not announced it
        ready, while the assignment still names the container it migrates from, gets its
        operator state from its current answerer (see :mod:`linkstream.cluster.handover`).
        """
        moves = []
        for name in sorted(self.queries):
            dst, src_zk = self.owners.placed(self._tid(name))
            if src_zk is None or dst is None:
                continue
            if dst not in self._peers or dst in self._ready[name] or dst == self._answerer.get(name):
                continue
            if not self.reads[name] <= self.fanout.subscribed(dst):
                continue  # the state must follow the backlog of the query's streams
            # The answerer holds the query until the driver names another one (even after
            # it saw the move and said *unready*), so it can snapshot the state.
            src = self._answerer.get(name)
            if src is not None and src not in self._peers:
                src = None
            moves.append((name, src, dst))
        if not moves:
            return []
        return self.handovers.run_moves(self.seq, moves, lambda q, c: c in self._ready[q])

    # ------------------------------------------------------------------ a run that changes (live service)

    def add_stream(self, iri: str, horizon: int | None) -> int:
        """Adds stream ``iri`` to the run (``spec`` and fan-out); returns its index.

        The caller publishes the new ``spec`` before any container may need the stream.
        """
        k = self._stream_index.get(iri)
        if k is not None:
            return k
        k = self.fanout.add_stream(iri, horizon)
        self._stream_index[iri] = k
        self.spec = replace(
            self.spec, streams=(*self.spec.streams, iri), horizons=(*self.spec.horizons, horizon)
        )
        return k

    def set_horizon(self, iri: str, horizon: int | None) -> None:
        """Changes the retained backlog of a stream of the run (``spec`` and fan-out)."""
        k = self._stream_index[iri]
        if self.spec.horizons[k] == horizon:
            return
        self.fanout.set_horizon(k, horizon)
        hs = list(self.spec.horizons)
        hs[k] = horizon
        self.spec = replace(self.spec, horizons=tuple(hs))

    def add_query(self, query: RemoteQuery) -> None:
        """Adds a query to the run (its streams must be in the run already)."""
        self.add_queries([query])

    def add_queries(self, queries: Sequence[RemoteQuery]) -> None:
        """Adds queries to the run (their streams must be in the run already): one new ``spec``."""
        for query in queries:
            name = query.name
            self.queries[name] = query
            self.reads[name] = frozenset(
                self._stream_index[w.stream] for w in query.cq.windows if w.stream in self._stream_index
            )
            self._ready.setdefault(name, {})
        self._owning += 1
        self.spec = replace(
            self.spec, queries={**self.spec.queries, **{task_id(q.name): q.name for q in queries}}
        )

    def remove_query(self, name: str) -> None:
        """Removes a query from the run (its owner is no longer asked for)."""
        self._owning += 1
        self.queries.pop(name, None)
        self.reads.pop(name, None)
        self._ready.pop(name, None)
        self._answerer.pop(name, None)
        self._task_ids.pop(name, None)
        self.recovery.forget(name)
        qs = dict(self.spec.queries)
        qs.pop(task_id(name), None)
        self.spec = replace(self.spec, queries=qs)

    # ------------------------------------------------------------------ engine interface

    def buffer(self, iri: str) -> None:
        """Checks that ``iri`` is one of the run's streams (the buffers live on the containers)."""
        if iri not in self._stream_index:
            raise ValueError(f"stream <{iri}> is not part of the run")

    def ingest(self, stream: str, t: int, triples: np.ndarray) -> None:
        """Buffers one element for the containers subscribed to ``stream``."""
        self.fanout.ingest(self._stream_index[stream], t, triples)

    def gc(self) -> None:
        """Handles what arrived meanwhile (the replay calls this every 256 elements)."""
        self.pump(0.0)
        self._check_failures()
        self.forward_orphans()

    def _idle_orphans(self, due: Sequence[str] = ()) -> dict[str, str]:
        """The queries a dead container answered that are not ``due`` and not ready on their
        ZooKeeper owner yet (their restore from the last checkpoint is sent at once)."""
        if not self.recovery.points and not self._orphans:
            return {}
        with self._lock:
            gone = self._departed - self._seen_dead
            self._seen_dead = (self._seen_dead & self._departed) | gone
        if gone and self.recovery.points:  # (once per death: not a pass over every query per tick)
            self._orphans.update((n, a) for n, a in self._answerer.items() if a in gone)
        for name, dead in list(self._orphans.items()):
            owner = self.owner_in_zookeeper(name)  # (may still name the dead one for a while)
            ready = owner != dead and owner in self._ready.get(name, ())
            if ready or name not in self.queries or name in self.recovery.refused:
                del self._orphans[name]
        skip = set(due)
        return {n: cid for n, cid in self._orphans.items() if n not in skip}

    def forward_orphans(self) -> None:
        """Between ticks: a dead container's queries sent to their new owners to be restored
        from the last checkpoint as soon as the driver and ZooKeeper know of the death, not
        at their next report (:meth:`Recovery.forward_idle`)."""
        if not self._orphans:
            if not self.recovery.points:
                return  # no checkpoint to restore from
            with self._lock:
                if self._departed <= self._seen_dead:
                    return  # (the usual case: nothing died)
        key = (self.owners.version, tuple(self._peers), len(self._departed))
        if not self._orphan_poll.due(key):
            return  # (none of them had a live new owner, and nothing changed since)
        self.pump(0.0)  # ready announcements: a query kept by its new owner is not sent again
        self.admit()  # subscriptions answered: the streams' backlog goes before the forward
        idle = self._idle_orphans()
        if idle and self.seq > 0:
            self.recovery.forward_idle(self.seq, idle, self.reads, self.owner_in_zookeeper)
        owners = {self.owner_in_zookeeper(n) for n in idle}
        if idle and not any(o in self._peers and not self._dead(o) for o in owners if o is not None):
            self._orphan_poll.wait(key)  # (no free slot anywhere yet: looked up less often)
        else:
            self._orphan_poll.reset()

    def choose_owners(self, seq: int) -> dict[str, str]:
        """The answerer of every query at tick ``seq`` (switching only to ready containers).

        Once every query is answered by its owner in ZooKeeper, ready there, nothing can
        change until the owners, the peers, the queries or their ready announcements do:
        the ticks until then skip the pass over every query."""
        key = (self.owners.version, self._owning, tuple(self._peers))
        if self._chosen is not None and self._chosen == key:
            return dict(self._answerer)
        settled = True
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
            if settled and (new != target or not ok(target)):
                settled = False
        self._chosen = key if settled else None
        return dict(self._answerer)

    def _ack_handovers(self, owners: dict[str, str]) -> None:
        if not self.owners.migrating():  # (no marker: nothing to acknowledge)
            return
        for name, owner in owners.items():
            tid = self._tid(name)
            container, src = self.owners.placed(tid)
            if src is None or container != owner:
                continue
            key = (tid, container, src)
            if key in self._acked:
                continue
            self._acked.add(key)
            try:
                self.table.complete_migration(tid)
            except KazooException as exc:
                logger.warning("driver: cannot acknowledge the hand-over of %s: %s", name, exc)

    def tick(self, c: int, reporting: Sequence[str]) -> dict[str, Sequence[str]]:
        """Sends report time ``c`` to every container; returns the lines of the ``reporting`` queries."""
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
        self.recovery.record(seq, c, self.fanout.counts())
        self.fanout.broadcast(encode(Tick(self.spec.id, seq, c, due, owners, dict(self._released))))
        self._ack_handovers(owners)
        self.fanout.prune(self.recovery.floor(c))  # a checkpoint's windows stay (restore-forward)
        out = self._collect(seq, c, due, owners)
        self._delivered(seq, c, due, out, time.perf_counter() - t0)
        return out

    def _delivered(self, seq: int, c: int, due: list[str], out: dict[str, Sequence[str]], dt: float) -> None:
        """Accounts the answers of tick ``seq`` at ``c``: a report already written is emptied
        (the result edge: each report once), the others are counted in their statistics."""
        written, queries = self.written, self.queries
        for name in due:
            if c <= written.get(name, c - 1):
                self.duplicates += len(out[name])
                out[name] = ()
                continue
            written[name] = c
            q = queries[name]
            st = q.stats
            st.reports += 1
            st.rows += len(out[name])
            st.eval_seconds += dt
            st.latencies.append(dt)
            q.last_report = c
        if self.on_tick is not None:
            self.on_tick(seq, c)

    def _collect(self, seq: int, c: int, due: list[str], owners: dict[str, str]) -> dict[str, Sequence[str]]:
        # (no lines yet: one shared empty tuple, not a list per due query and tick)
        out: dict[str, Sequence[str]] = dict.fromkeys(due, ())
        waiting: dict[str, list[str]] = {}
        owed: dict[str, tuple[str | None, str]] = {}  # recomputed elsewhere (or lost)
        for name in due:
            cid = owners.get(name)
            if cid is None or cid not in self._peers:
                owed[name] = (cid, "no live container holds the query")
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
                        owed[name] = (cid, "the container did not hold the query")
            for cid in [x for x in waiting if self._dead(x) or self._restarted(x, seq)]:
                for name in waiting.pop(cid):
                    owed[name] = (cid, "the container died or restarted")
            if waiting and time.monotonic() > deadline:
                for cid, names in waiting.items():
                    for name in names:
                        owed[name] = (cid, f"no answer within {self.answer_timeout:g}s")
                    # A container that stalls this long is out of the run: later ticks fail fast.
                    self.fanout.drop(cid)
                    self._forget(cid)
                break
            if waiting:
                self.pump(0.02)
        self._results.pop(seq, None)
        idle = self._idle_orphans(due)  # restored now, not at their next report (restore-forward)
        if owed or idle:
            redone = self.recovery.recompute(
                seq,
                {n: cid for n, (cid, _) in owed.items()},
                self.reads,
                self.owner_in_zookeeper,
                self._admit_restarted,
                idle,
            )
            for name, (cid, reason) in sorted(owed.items()):
                if name in redone:
                    out[name] = redone[name]
                else:
                    self._lose(name, c, cid, f"{reason}; no live container recomputed it")
        return out

    def _restarted(self, cid: str, seq: int) -> bool:
        """Whether ``cid`` restarted its run (its session expired) since tick ``seq`` was sent,
        so it will not answer it: it said hello again, or was admitted again at or after it."""
        if self._synced_at.get(cid, -1) >= seq:
            return True
        return any(isinstance(m, Hello) and m.container == cid for m in self._control)

    def _admit_restarted(self) -> None:
        """Admits the containers that said hello again, mid-tick (synced at this tick).

        After a ZooKeeper outage longer than the sessions every container restarts its run
        at once; the tick's owed reports are recomputed by the first of them to come back
        (:meth:`linkstream.cluster.recovery.Recovery.recompute` calls this while it waits).
        """
        if any(isinstance(m, Hello) for m in self._control):
            self.admit()

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
        self.owners.stop()
        self._member_watch.stop()
        self.fanout.close()
