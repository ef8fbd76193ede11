"""Cluster mode of the replay: the driver that feeds operator containers over ZeroMQ.

The unit of placement is a **query** (task id = hash of its name; queries with equal
plans share a colocation group so they land on one container and still share
operators there; the task spec names the streams the query reads, so the scheduler's
stream affinity puts it where they already arrive -- ``affinity=False`` /
``--no-affinity`` leaves them out).  The driver (:func:`replay_on_cluster`)

1. publishes the run (:class:`~linkstream.scheduler.runs.RunSpec`: its result endpoint,
   the static files, the streams, the route) as an ephemeral ZooKeeper node, registers
   the queries in the registry and submits one task per query; the leading
   coordinator assigns them to containers;
2. reads the streams exactly as the embedded replay does (it *is*
   :func:`linkstream.engine.replay.replay`, driving a
   :class:`~linkstream.cluster.driver.ClusterEngine` instead of an embedded
   engine), so report times follow SEMANTICS.md §4 unchanged;
3. **routes** every stream element (with the dictionary entries its container lacks)
   to the containers that subscribed to its stream -- those that hold, or are about
   to hold, a query reading it; ZooKeeper's assignments decide -- and sends every tick
   to every container; per tick it collects the result lines of the due queries from
   the containers named as their answerers and writes them in tick order.
   ``route="broadcast"`` (``--route broadcast``) sends every element to every
   container instead, as the first version of cluster mode did (kept for comparison:
   ``bench/cluster.py``); operator placement always broadcasts, since its producer
   tasks read streams their containers' queries may not.

A query moves only at a tick boundary, and only to a container that announced it
ready; a container does that only once it holds the query's streams (see
:mod:`linkstream.cluster.driver` for the answerer protocol and
:mod:`linkstream.cluster.fanout` for the per-stream backlog a subscription brings).

A stateful move (ZooKeeper assignment with ``migrating_from``) does not rebuild the
query on its new container: between two ticks the driver asks the old answerer for a
snapshot of the query's operator state and forwards it to the new owner ahead of the
next tick (:mod:`linkstream.cluster.handover`, :mod:`linkstream.operators.state`);
only when that is impossible does the new owner rebuild from its stream buffers.

A container that dies mid-run (``kill -9``) costs nothing: the reports it owed are
recomputed on a live container from the driver's retained history of their streams
(:mod:`linkstream.cluster.recovery`) until the coordinator has moved its queries and
their new owners are ready; the output equals a run nothing happened to.

A container that joins mid-run says *hello* and gets a ``sync`` message (the retained
backlog of every stream when broadcasting, of none when routing: it subscribes next),
its buffers then equal everyone else's for what any future window can read.

Opt-in ``placement="operators"`` (``--placement operators``) also cuts every query's
shared plan into producer tasks (shared joins, routes, window scans) placed by the
sans-IO scheduler core on containers of their own, which send their deltas to the
queries' containers over ZeroMQ (:mod:`linkstream.cluster.placement.driver`,
:mod:`linkstream.containers.placement.tasks`); producers are ZooKeeper tasks too and move
with drains, rebalances and failures (:mod:`linkstream.cluster.placement.control`).

The driver's protocol state lives in :mod:`linkstream.cluster.driver` (the ticks) and
:mod:`linkstream.cluster.driverstate` (the state between ticks, the run's value types);
their public names are re-exported here.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException

from linkstream.cluster.driver import ClusterEngine
from linkstream.cluster.driverstate import ClusterError, Lost, Switch, plan_key, task_id
from linkstream.cluster.handover import Migration
from linkstream.cluster.ledger import RemoteQuery
from linkstream.cluster.recovery import Recovered
from linkstream.containers.replica import retention_horizons
from linkstream.containers.security import Security
from linkstream.containers.transport import LOOPBACK_ANY, Receiver
from linkstream.engine.replay import ReplayResult, replay
from linkstream.metrics import DriverMetrics
from linkstream.query.continuous import ContinuousQuery
from linkstream.rdf.dictionary import Dictionary, MemoryDictionary
from linkstream.scheduler.layout import DEFAULT_ROOT
from linkstream.scheduler.membership import Membership
from linkstream.scheduler.runs import ROUTES, RunNode, RunQuery, RunSpec
from linkstream.scheduler.state import TaskSpec

__all__ = [
    "ClusterEngine",
    "ClusterError",
    "ClusterReplayResult",
    "Lost",
    "Recovered",
    "RemoteQuery",
    "Switch",
    "plan_key",
    "replay_on_cluster",
    "task_id",
]

logger = logging.getLogger(__name__)


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
        placement: Summary of the operator placement, if the run used it.
        route: ``"streams"`` or ``"broadcast"`` (how elements went to the containers).
        element_bytes: Of ``bytes_sent``, the bytes of stream elements and their terms.
        elements_sent: Stream elements sent, summed over the containers.
        elements_by_container: Stream elements sent to each container.
        recovered: Reports a dead or stalled container owed, recomputed on a live one
            (:mod:`linkstream.cluster.recovery`).
        duplicates: Result lines dropped at the result edge because their report time
            had been written already (0 unless something went wrong).
    """

    replay: ReplayResult
    lost: list[Lost]
    switches: list[Switch]
    containers: list[str]
    bytes_sent: int
    run_id: str = ""
    migrations: list[Migration] = field(default_factory=list)
    placement: dict[str, object] | None = None
    route: str = "streams"
    element_bytes: int = 0
    elements_sent: int = 0
    elements_by_container: dict[str, int] = field(default_factory=dict)
    recovered: list[Recovered] = field(default_factory=list)
    duplicates: int = 0


def _place_operators(
    engine: ClusterEngine,
    queries: Sequence[ContinuousQuery],
    client: KazooClient,
    root: str,
    parallelism: int = 1,
) -> dict[str, object]:
    """Sets up operator-level placement on the run's containers (before tick 1)."""
    from linkstream.cluster.placement.driver import PlacementError, setup

    members = {c: m for c, m in Membership(client, root).members().items() if c in engine.fanout.peers}
    try:
        return setup(
            engine.spec,
            queries,
            engine.answerers(),
            members,
            {cq.name: task_id(cq.name) for cq in queries},
            engine.fanout.send,
            client=client,
            root=root,
            parallelism=parallelism,
            curve_for=engine.curve_for,
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
    connect_timeout: float = 30.0,
    log: Callable[[str], None] | None = None,
    on_tick: Callable[[int, int], None] | None = None,
    on_start: Callable[[ClusterEngine], None] | None = None,
    placement: str = "queries",
    route: str = "streams",
    parallelism: int = 1,
    affinity: bool = True,
    security: Security | None = None,
    on_reject: Callable[[str], None] | None = None,
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
        connect_timeout: Seconds to wait for the ZooKeeper connection.
        log: Receives warnings about the input files.
        on_tick: Called with ``(seq, c)`` after every tick (testing aid).
        on_start: Called with the engine once every query is ready (testing aid).
        placement: ``"queries"`` (default) places whole queries; ``"operators"`` also
            cuts their plans into producer tasks placed on their own containers, which
            send their deltas over ZeroMQ (:mod:`linkstream.cluster.placement.driver`).
        route: ``"streams"`` (default) sends each stream element only to the containers
            whose queries read its stream; ``"broadcast"`` sends it to every container.
            Operator placement always broadcasts.
        parallelism: Operator placement: instances of every shared join whose inputs
            all bind one variable, each joining one hash partition of it.
        affinity: Whether each query's task names the streams it reads, so that the
            scheduler places it where they already arrive (stream affinity); ``False``
            places by load and colocation only (so does broadcasting, where it saves nothing).
        security: The cluster credential and this driver's CURVE keys (``None``: insecure).
            Secure: the result socket admits only the containers' published keys, the
            driver's public key goes into the run node, its sockets to the containers use
            theirs.
        on_reject: Counts refused handshakes on the result socket (default: a
            :class:`~linkstream.metrics.DriverMetrics` counter nobody serves).

    Raises:
        ClusterError: The cluster could not run the replay.
        RunActiveError: Another replay is running on the cluster.
    """
    names = [cq.name for cq in queries]
    if placement not in ("queries", "operators"):
        raise ClusterError(f"unknown placement {placement!r} (queries or operators)")
    if route not in ROUTES:
        raise ClusterError(f"unknown route {route!r} ({' or '.join(ROUTES)})")
    if placement == "operators":
        route = "broadcast"  # producer tasks read streams no query of their container may read
    if len(set(names)) != len(names):
        raise ClusterError("query names must be unique in a cluster replay")
    iris = [iri for iri, _ in streams]
    security = security or Security.insecure()
    client = security.connect(hosts, session_timeout, connect_timeout)
    if on_reject is None:
        on_reject = DriverMetrics().on_reject("results")
    receiver = Receiver(bind, rcvhwm=100000, curve_keys=security.server(client, root, on_reject))
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
        route=route,
        driver_key=security.public_text,
    )
    run_node = RunNode(client, root)
    engine: ClusterEngine | None = None
    remote = {}
    submissions = []
    for cq in queries:
        steps = tuple(sorted({w.spec.step_or(default_step) for w in cq.windows}))
        remote[cq.name] = RemoteQuery(cq, steps)
        # Affinity saves routed elements only when routing by stream.
        reads = tuple(w.stream for w in cq.windows) if affinity and route == "streams" else ()
        task = TaskSpec(task_id(cq.name), colocate_with=plan_key(cq), stateful=True, streams=reads)
        submissions.append(RunQuery(task, cq.name, cq.text, cq.dialect))
    keep: Callable[[], None] | None = None
    try:
        run_node.open(spec, submissions)
        # After a ZooKeeper outage longer than the session the run node is published again.
        keep = run_node.keep_across_expiry(lambda: spec if engine is None else engine.spec)
        engine = ClusterEngine(
            client,
            spec,
            remote,
            receiver,
            dictionary if dictionary is not None else MemoryDictionary(),
            answer_timeout=answer_timeout,
            root=root,
            on_tick=on_tick,
            security=security,
        )
        engine.wait_until_ready(startup_timeout)
        summary = None
        if placement == "operators":
            summary = engine.placement = _place_operators(engine, queries, client, root, parallelism)
        if on_start is not None:
            on_start(engine)
        ordered = [remote[n] for n in names]
        res = replay(
            engine,  # type: ignore[arg-type]  # the driver duck-types Engine
            ordered,  # type: ignore[arg-type]  # remote queries duck-type RegisteredQuery
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
            route,
            engine.fanout.element_bytes,
            engine.fanout.elements_sent,
            engine.fanout.elements_by_container(),
            list(engine.recovery.done),
            engine.duplicates,
        )
    finally:
        if keep is not None:
            keep()
        if engine is not None:
            engine.close()
        try:
            # (a read while ZooKeeper is unreachable would wait for it: the node goes with the session)
            ours = client.connected and run_node.get() == spec
        except KazooException as exc:  # its session expired just now (a ZooKeeper outage)
            logger.warning(
                "cannot read run %s back from ZooKeeper at its end: %s", spec.id, exc or type(exc).__name__
            )
            ours = True  # clean up what is left (never raises)
        if ours:
            run_node.close(spec)
        elif not client.connected:
            logger.warning("ZooKeeper unreachable at the end of run %s: its tasks stay submitted", spec.id)
        receiver.close()
        client.stop()
        client.close()
