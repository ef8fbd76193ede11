"""The driver's state of a cluster run: :class:`DriverState`, and the run's value types.

:class:`DriverState` is what :class:`~linkstream.cluster.driver.ClusterEngine` knows of
the cluster between ticks: it follows ZooKeeper (membership, every query's assignment and
hand-over source), reads the containers' messages (hello, subscribe, ready/unready,
results, state, recomputed answers), admits and syncs containers, carries out stateful
moves between ticks (:mod:`linkstream.cluster.handover`) and applies the changes of a run
that changes while it runs (streams and queries added or removed by the live service).
The ticks themselves -- the answerer of every query, the collection of the answers, their
recovery and the result edge -- are :mod:`linkstream.cluster.driver`'s.

Also here: the run's value types (:class:`Lost`, :class:`Switch`),
:class:`ClusterError` and the ids of a query's task (:func:`task_id`) and plan
(:func:`plan_key`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from linkstream.cluster.fanout import Fanout
from linkstream.cluster.handover import Handovers, Migration
from linkstream.cluster.ledger import RemoteQuery, ReportLedger
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
    Unready,
)
from linkstream.containers.protocol import decode
from linkstream.containers.security import Security, SecurityError
from linkstream.containers.transport import CurveKeys, Receiver
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


class DriverState:
    """The driver's state of a cluster run between ticks (see the module docstring).

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
        #: each query's reports, rows, last report and last report time written (the result
        #: edge), recorded per tick and settled when read (:mod:`linkstream.cluster.ledger`)
        self.ledger = ReportLedger(queries)
        for q in queries.values():
            q.ledger = self.ledger
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
        #: per tick sent, the queries whose answerer left named to their ZooKeeper owner before
        #: it announced them ready: query -> (that owner, the container that left)
        self._early: dict[int, dict[str, tuple[str, str]]] = {}
        self._early_last: dict[str, tuple[str, str]] = {}  # (the last tick's: logged once)
        self._early_told: set[tuple[str, str]] = set()  # (answered so: logged once)

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
                self.fanout.add(cid, message.address, self.seq, message.caps)
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
        self.ledger.settle()  # (the ledger's records name the queries it had)
        for query in queries:
            name = query.name
            self.queries[name] = query
            query.ledger = self.ledger
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
        self.ledger.settle()
        q = self.queries.pop(name, None)
        if q is not None:
            q.ledger = None
        self.reads.pop(name, None)
        self._ready.pop(name, None)
        self._answerer.pop(name, None)
        self._task_ids.pop(name, None)
        self.recovery.forget(name)
        qs = dict(self.spec.queries)
        qs.pop(task_id(name), None)
        self.spec = replace(self.spec, queries=qs)

    def close(self) -> None:
        """Stops the watches and closes the sockets to the containers."""
        self._stopped = True
        self.owners.stop()
        self._member_watch.stop()
        self.fanout.close()
