"""Prometheus metrics of LinkStream processes.

Every metric a dashboard or an alert uses is defined here, once.  Metrics live on a
:class:`prometheus_client.CollectorRegistry` owned by the process (or by one server in a
test process that runs several), never on prometheus-client's global registry, so two
engines in one process never add up into each other's gauges.

The names (``/metrics`` exposition, counters with their ``_total`` suffix):

=============================================  =========  ====================================
name                                           type       what
=============================================  =========  ====================================
``linkstream_ingest_triples_total``            counter    stream triples accepted
``linkstream_ingest_elements_total``           counter    stream elements accepted
``linkstream_late_elements_total``             counter    elements dropped as late (§1)
``linkstream_rejected_lines_total``            counter    malformed input lines rejected
``linkstream_queries_registered``              gauge      continuous queries registered
``linkstream_operators``                       gauge      running operator instances
``linkstream_report_latency_seconds``          histogram  evaluation time of one report
``linkstream_reports_total``                   counter    reports evaluated (per query report)
``linkstream_result_lines_total``              counter    result lines produced
``linkstream_subscriber_dropped_lines_total``  counter    lines a slow subscriber lost
``linkstream_subscriber_gaps_total``           counter    gaps a slow subscriber was told of
``linkstream_watermark_ms``                    gauge      the watermark that drives reports
=============================================  =========  ====================================

With the ingest log shipped to the checkpoint store (``run --state-dir`` with
``--checkpoints`` outside it, :class:`LogShipMetrics`): ``linkstream_log_segments_shipped_total``,
``linkstream_log_shipped_bytes_total``, ``linkstream_log_ship_failures_total`` (failed
attempts, retried), ``linkstream_log_shipped_truncated_total`` (pieces deleted once a
checkpoint covers them) and ``linkstream_log_ship_lag_seconds`` (age of the oldest
acknowledged record not in the store yet).  A checkpointer (:class:`CheckpointMetrics`)
adds ``linkstream_checkpoints_total``, ``linkstream_checkpoint_failures_total``,
``linkstream_checkpoint_age_seconds`` (since the state was last covered by a complete
checkpoint) and ``linkstream_checkpoint_interval_seconds``.

Cluster processes (operator containers and coordinators, :class:`ContainerMetrics` and
:class:`CoordinatorMetrics`) serve their own registry at ``/metrics`` with
:func:`serve_metrics`; a container also counts ingestion and reports under the names
above.  Their own names:

===================================================  =========  ==============================
name                                                 type       what
===================================================  =========  ==============================
``linkstream_process_info``                          gauge      1, labels ``role`` and ``id``
``linkstream_zookeeper_session_state``               gauge      1 for the current ``state``
``linkstream_zookeeper_session_events_total``        counter    session transitions by state
``linkstream_container_tasks``                       gauge      queries (tasks) held
``linkstream_container_capacity``                    gauge      task slots offered
``linkstream_container_task_moves_total``            counter    tasks moved ``in`` / ``out``
``linkstream_container_runs_total``                  counter    replays joined
``linkstream_batch_latency_seconds``                 histogram  time to apply one batch
``linkstream_dataplane_queue_depth``                 gauge      inbox backlog last drained
``linkstream_dataplane_received_messages_total``     counter    data-plane messages by kind
``linkstream_dataplane_received_bytes_total``        counter    data-plane bytes received
``linkstream_dataplane_sent_messages_total``         counter    data-plane messages sent
``linkstream_dataplane_sent_bytes_total``            counter    data-plane bytes sent
``linkstream_dataplane_backpressure_total``          counter    sends that met a full queue
``linkstream_dataplane_rejected_peers_total``        counter    refused CURVE handshakes, by
                                                                ``socket`` and ``reason``
``linkstream_state_migrations_total``                counter    operator-state hand-overs
``linkstream_state_migrated_bytes_total``            counter    bytes of migrated state
``linkstream_state_migrated_rows_total``             counter    rows of migrated state
``linkstream_scheduler_leader``                      gauge      1 while this coordinator leads
``linkstream_scheduler_containers``                  gauge      live containers (leader's view)
``linkstream_scheduler_tasks``                       gauge      tasks by ``state``
``linkstream_scheduler_rebalances_total``            counter    rebalance rounds that moved
``linkstream_scheduler_task_moves_total``            counter    task moves decided
``linkstream_scheduler_lost_tasks_total``            counter    task states lost with a crash
``linkstream_scheduler_elections_total``             counter    times this process was elected
``linkstream_container_busy_seconds_total``          counter    wall time applying messages
``linkstream_autoscaler_decisions_total``            counter    decisions by ``action``, ``reason``
``linkstream_autoscaler_containers``                 gauge      containers counted (+ joining)
``linkstream_autoscaler_desired_containers``         gauge      containers the policy wants
``linkstream_autoscaler_bound_containers``           gauge      the ``min`` / ``max`` bound
``linkstream_autoscaler_at_max``                     gauge      1: pressure at the maximum
``linkstream_autoscaler_tick_lag_seconds``           gauge      the leader's tick lag it read
===================================================  =========  ==============================

Cluster processes also export prometheus-client's process collectors
(``PROCESS_METRIC_NAMES``, e.g. ``process_resident_memory_bytes``), as ``linkstream run``
does.  A server on a store (``linkstream run --store``) adds :class:`StoreCollector`:
``linkstream_store_stable_timestamp_ms{stream}`` (the store's stable vector timestamp, what
``/sparql`` snapshots see), ``linkstream_store_snapshot_age_seconds`` (wall time since that
timestamp last moved, at scrape resolution) and ``linkstream_store_delta_rows`` (absorbed
triples not yet compacted).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

#: exposition names of every metric defined here (what a dashboard may query)
METRIC_NAMES: tuple[str, ...] = (
    "linkstream_ingest_triples_total",
    "linkstream_ingest_elements_total",
    "linkstream_stream_elements_total",
    "linkstream_late_elements_total",
    "linkstream_rejected_lines_total",
    "linkstream_queries_registered",
    "linkstream_operators",
    "linkstream_report_latency_seconds",
    "linkstream_reports_total",
    "linkstream_result_lines_total",
    "linkstream_subscriber_dropped_lines_total",
    "linkstream_subscriber_gaps_total",
    "linkstream_watermark_ms",
    # cluster processes
    "linkstream_process_info",
    "linkstream_zookeeper_session_state",
    "linkstream_zookeeper_session_events_total",
    "linkstream_container_tasks",
    "linkstream_container_capacity",
    "linkstream_container_task_moves_total",
    "linkstream_container_runs_total",
    "linkstream_batch_latency_seconds",
    "linkstream_dataplane_queue_depth",
    "linkstream_dataplane_received_messages_total",
    "linkstream_dataplane_received_bytes_total",
    "linkstream_dataplane_sent_messages_total",
    "linkstream_dataplane_sent_bytes_total",
    "linkstream_dataplane_backpressure_total",
    "linkstream_dataplane_rejected_peers_total",
    "linkstream_state_migrations_total",
    "linkstream_state_migrated_bytes_total",
    "linkstream_state_migrated_rows_total",
    "linkstream_scheduler_leader",
    "linkstream_scheduler_containers",
    "linkstream_scheduler_tasks",
    "linkstream_scheduler_rebalances_total",
    "linkstream_scheduler_task_moves_total",
    "linkstream_scheduler_lost_tasks_total",
    "linkstream_scheduler_elections_total",
    # the autoscaler (``linkstream autoscaler``) and the container figure it reads
    "linkstream_container_busy_seconds_total",
    "linkstream_autoscaler_decisions_total",
    "linkstream_autoscaler_containers",
    "linkstream_autoscaler_desired_containers",
    "linkstream_autoscaler_bound_containers",
    "linkstream_autoscaler_at_max",
    "linkstream_autoscaler_tick_lag_seconds",
    # operator placement (``linkstream.containers.placement.edges``)
    "linkstream_operator_edge_batches_total",
    "linkstream_operator_edge_bytes_total",
    "linkstream_operator_hostings_total",
    "linkstream_operator_partition_rows_total",
    "linkstream_operator_partition_input_rows_total",
    "linkstream_operator_channel_takeovers_total",
    # ingest log shipping to the checkpoint store (LogShipMetrics, ``run --state-dir --checkpoints``)
    "linkstream_log_segments_shipped_total",
    "linkstream_log_shipped_bytes_total",
    "linkstream_log_ship_failures_total",
    "linkstream_log_shipped_truncated_total",
    "linkstream_log_ship_lag_seconds",
    # checkpoints of ``run --state-dir`` and of the cluster's leader (CheckpointMetrics)
    "linkstream_checkpoints_total",
    "linkstream_checkpoint_failures_total",
    "linkstream_checkpoint_age_seconds",
    "linkstream_checkpoint_interval_seconds",
    # a store's state (StoreCollector, ``linkstream run --store``)
    "linkstream_store_stable_timestamp_ms",
    "linkstream_store_snapshot_age_seconds",
    "linkstream_store_delta_rows",
    # static graphs of a container (``linkstream.containers.remotestatic``; local or store nodes)
    "linkstream_static_engine_bytes",
    "linkstream_static_cache_bytes",
    "linkstream_static_remote_read_bytes",
    "linkstream_static_cache_capacity_bytes",
    "linkstream_static_cache_evictions",
    "linkstream_static_lookups",
    "linkstream_static_materialised_bytes",
)

#: prometheus-client's process collector names (``with_process_collectors``) dashboards use
PROCESS_METRIC_NAMES: tuple[str, ...] = (
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_cpu_seconds_total",
    "process_open_fds",
    "process_start_time_seconds",
)

#: reasons of ``linkstream_dataplane_rejected_peers_total`` (see ``containers/transport.py``)
REJECT_REASONS = ("unknown_key", "not_curve", "bad_handshake")

#: ZooKeeper session states of ``linkstream_zookeeper_session_state`` (kazoo's names)
ZK_STATES = ("CONNECTED", "SUSPENDED", "LOST")

#: report latency buckets (seconds): sub-millisecond reports up to slow multi-second ones
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: batch latency buckets (seconds): applying one data-plane message
BATCH_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)

#: the ``Content-Type`` of :func:`exposition` output
CONTENT_TYPE = CONTENT_TYPE_LATEST


class LiveMetrics:
    """The metrics of one live engine and its HTTP API, on one registry.

    Args:
        registry: Where the metrics are registered; a fresh registry when ``None``.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.ingest_triples = Counter(
            "linkstream_ingest_triples", "Stream triples accepted for ingestion", registry=r
        )
        self.ingest_elements = Counter(
            "linkstream_ingest_elements", "Stream elements accepted for ingestion", registry=r
        )
        self.late_elements = Counter(
            "linkstream_late_elements", "Stream elements dropped because they were late", registry=r
        )
        self.rejected_lines = Counter(
            "linkstream_rejected_lines", "Malformed input lines rejected (stream bodies)", registry=r
        )
        self.queries_registered = Gauge(
            "linkstream_queries_registered", "Continuous queries currently registered", registry=r
        )
        self.operators = Gauge("linkstream_operators", "Operator instances currently running", registry=r)
        self.report_latency = Histogram(
            "linkstream_report_latency_seconds",
            "Wall time to evaluate one report time (all reporting queries of the tick)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.reports = Counter("linkstream_reports", "Query reports evaluated", registry=r)
        self.result_lines = Counter("linkstream_result_lines", "Result lines produced", registry=r)
        self.subscriber_dropped = Counter(
            "linkstream_subscriber_dropped_lines",
            "Result lines dropped because a subscriber did not keep up",
            registry=r,
        )
        self.subscriber_gaps = Counter(
            "linkstream_subscriber_gaps",
            "Runs of result lines a slow subscriber lost (each told with one gap event)",
            registry=r,
        )
        self.watermark = Gauge(
            "linkstream_watermark_ms", "Event-time watermark (ms) that drives report times", registry=r
        )

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


class LogShipMetrics:
    """The metrics of ingest log shipping to the checkpoint store (one shipper per registry).

    Args:
        registry: Where the metrics are registered; a fresh registry when ``None``.
        lag: Reads the ship lag in seconds (the age of the oldest durable record not in the
            store yet, ``0``: none) when the registry is scraped.
    """

    def __init__(
        self, registry: CollectorRegistry | None = None, lag: Callable[[], float] | None = None
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.segments_shipped = Counter(
            "linkstream_log_segments_shipped",
            "Ingest log pieces (closed segments, tails) uploaded to the checkpoint store",
            registry=r,
        )
        self.bytes_shipped = Counter(
            "linkstream_log_shipped_bytes", "Ingest log bytes uploaded to the checkpoint store", registry=r
        )
        self.failures = Counter(
            "linkstream_log_ship_failures",
            "Failed attempts to ship or truncate the ingest log in the checkpoint store (retried)",
            registry=r,
        )
        self.truncated = Counter(
            "linkstream_log_shipped_truncated",
            "Shipped ingest log pieces deleted from the store once a checkpoint covered them",
            registry=r,
        )
        self.lag = Gauge(
            "linkstream_log_ship_lag_seconds",
            "Age of the oldest acknowledged (locally durable) log record not yet in the checkpoint store",
            registry=r,
        )
        if lag is not None:
            self.lag.set_function(lag)

    def unregister(self) -> None:
        """Takes these metrics off the registry (idempotent)."""
        for m in (self.segments_shipped, self.bytes_shipped, self.failures, self.truncated, self.lag):
            try:
                self.registry.unregister(m)
            except KeyError:
                pass


class CheckpointMetrics:
    """The metrics of a checkpointer (``run --state-dir``; the cluster's leader).

    Args:
        registry: Where the metrics are registered; a fresh registry when ``None``.
        age: Reads the seconds since the engine's state was last known to be covered by a
            complete checkpoint (a checkpoint written, or nothing changed since the last one).
        interval_s: Seconds between periodic checkpoints (``<= 0``: none, no interval series,
            so that the staleness alert, age / interval, has nothing to divide).
    """

    def __init__(
        self, registry: CollectorRegistry | None, age: Callable[[], float], interval_s: float
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.taken = Counter("linkstream_checkpoints", "Complete checkpoints written", registry=r)
        self.failures = Counter(
            "linkstream_checkpoint_failures",
            "Checkpoints that failed or stayed incomplete (the previous complete one stays current)",
            registry=r,
        )
        self.age = Gauge(
            "linkstream_checkpoint_age_seconds",
            "Seconds since the state was last covered by a complete checkpoint",
            registry=r,
        )
        self.age.set_function(age)
        self.interval: Gauge | None = None
        if interval_s > 0:
            self.interval = Gauge(
                "linkstream_checkpoint_interval_seconds", "Seconds between periodic checkpoints", registry=r
            )
            self.interval.set(interval_s)

    def unregister(self) -> None:
        """Takes these metrics off the registry (idempotent)."""
        for m in [m for m in (self.taken, self.failures, self.age, self.interval) if m is not None]:
            try:
                self.registry.unregister(m)
            except KeyError:
                pass


def with_process_collectors(registry: CollectorRegistry) -> CollectorRegistry:
    """Adds the standard process, platform and GC collectors to ``registry``.

    Args:
        registry: A registry that does not hold them yet.

    Returns:
        ``registry``.
    """
    from prometheus_client import GCCollector, PlatformCollector, ProcessCollector

    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class _ProcessMetrics:
    """What every cluster process exports: identity and ZooKeeper session state."""

    def __init__(self, role: str, registry: CollectorRegistry | None) -> None:
        self.registry = registry if registry is not None else with_process_collectors(CollectorRegistry())
        r = self.registry
        self.role = role
        self.info = Gauge("linkstream_process_info", "1 for this process", ["role", "id"], registry=r)
        self.zk_state = Gauge(
            "linkstream_zookeeper_session_state",
            "1 for the ZooKeeper session's current state (CONNECTED, SUSPENDED, LOST)",
            ["state"],
            registry=r,
        )
        self.zk_events = Counter(
            "linkstream_zookeeper_session_events",
            "ZooKeeper session state transitions, by the state entered",
            ["state"],
            registry=r,
        )
        self.rejected_peers = Counter(
            "linkstream_dataplane_rejected_peers",
            "Data-plane handshakes refused: unknown_key (CURVE client not a cluster member), "
            "not_curve (plaintext peer), bad_handshake (e.g. wrong server key)",
            ["socket", "reason"],
            registry=r,
        )
        for state in ZK_STATES:
            self.zk_state.labels(state).set(0)
            self.zk_events.labels(state)

    def on_reject(self, socket: str) -> Callable[[str], None]:
        """The ``on_reject`` hook of a CURVE server socket named ``socket`` (``data``, ``ops``,
        ``results``): counts each refused handshake in ``linkstream_dataplane_rejected_peers_total``."""
        for reason in REJECT_REASONS:
            self.rejected_peers.labels(socket, reason)

        def count(reason: str) -> None:
            self.rejected_peers.labels(socket, reason).inc()

        return count

    def identify(self, ident: str) -> None:
        """Sets ``linkstream_process_info{role, id}`` once the process knows its id."""
        self.info.labels(self.role, ident).set(1)

    def zookeeper_state(self, state: str) -> None:
        """Records a session transition (kazoo's ``KazooState`` value)."""
        state = str(state).upper()
        if state not in ZK_STATES:
            return
        for s in ZK_STATES:
            self.zk_state.labels(s).set(1 if s == state else 0)
        self.zk_events.labels(state).inc()

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


class ContainerMetrics(_ProcessMetrics):
    """The metrics of one operator container process.

    Args:
        registry: Where the metrics are registered; a fresh registry when ``None``.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("container", registry)
        r = self.registry
        self.ingest_triples = Counter(
            "linkstream_ingest_triples", "Stream triples accepted for ingestion", registry=r
        )
        self.ingest_elements = Counter(
            "linkstream_ingest_elements", "Stream elements accepted for ingestion", registry=r
        )
        self.stream_elements = Counter(
            "linkstream_stream_elements", "Stream elements received, by stream", ["stream"], registry=r
        )
        self.queries_registered = Gauge(
            "linkstream_queries_registered", "Continuous queries currently registered", registry=r
        )
        self.report_latency = Histogram(
            "linkstream_report_latency_seconds",
            "Wall time to evaluate one report time (all reporting queries of the tick)",
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.reports = Counter("linkstream_reports", "Query reports evaluated", registry=r)
        self.result_lines = Counter("linkstream_result_lines", "Result lines produced", registry=r)
        self.watermark = Gauge(
            "linkstream_watermark_ms", "Event-time watermark (ms) that drives report times", registry=r
        )
        self.tasks = Gauge("linkstream_container_tasks", "Tasks (queries) this container holds", registry=r)
        self.capacity = Gauge("linkstream_container_capacity", "Task slots this container offers", registry=r)
        self.task_moves = Counter(
            "linkstream_container_task_moves",
            "Tasks moved onto (in) or off (out) this container during a run",
            ["direction"],
            registry=r,
        )
        self.runs = Counter("linkstream_container_runs", "Replays this container took part in", registry=r)
        self.batch_latency = Histogram(
            "linkstream_batch_latency_seconds",
            "Wall time to apply one data-plane batch of stream elements",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "linkstream_dataplane_queue_depth",
            "Messages found waiting in the inbox the last time it was drained",
            registry=r,
        )
        self.received_messages = Counter(
            "linkstream_dataplane_received_messages",
            "Data-plane messages received, by kind",
            ["kind"],
            registry=r,
        )
        self.received_bytes = Counter(
            "linkstream_dataplane_received_bytes", "Data-plane payload bytes received", registry=r
        )
        self.sent_messages = Counter(
            "linkstream_dataplane_sent_messages", "Data-plane messages sent", registry=r
        )
        self.sent_bytes = Counter(
            "linkstream_dataplane_sent_bytes", "Data-plane payload bytes sent", registry=r
        )
        self.busy_seconds = Counter(
            "linkstream_container_busy_seconds",
            "Wall time spent applying data-plane messages (the autoscaler's busy figure)",
            registry=r,
        )
        self.backpressure = Counter(
            "linkstream_dataplane_backpressure",
            "Data-plane sends that found the peer's queue full and had to wait",
            registry=r,
        )
        self.migrations = Counter(
            "linkstream_state_migrations",
            "Operator-state hand-overs, sent (out) or restored (in)",
            ["direction"],
            registry=r,
        )
        self.migrated_bytes = Counter(
            "linkstream_state_migrated_bytes",
            "Bytes of operator state migrated, sent (out) or restored (in)",
            ["direction"],
            registry=r,
        )
        self.migrated_rows = Counter(
            "linkstream_state_migrated_rows",
            "Rows (mappings, window entries) of operator state migrated",
            ["direction"],
            registry=r,
        )
        for d in ("in", "out"):
            self.task_moves.labels(d)
            self.migrations.labels(d)
            self.migrated_bytes.labels(d)
            self.migrated_rows.labels(d)


class CoordinatorMetrics(_ProcessMetrics):
    """The metrics of one coordinator process (leader or standby).

    Args:
        registry: Where the metrics are registered; a fresh registry when ``None``.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("coordinator", registry)
        r = self.registry
        self.leader = Gauge("linkstream_scheduler_leader", "1 while this coordinator leads", registry=r)
        self.containers = Gauge(
            "linkstream_scheduler_containers",
            "Live containers as the leading scheduler sees them",
            registry=r,
        )
        self.tasks = Gauge(
            "linkstream_scheduler_tasks",
            "Tasks by state (assigned, pending, migrating) in the leader's view",
            ["state"],
            registry=r,
        )
        self.rebalances = Counter(
            "linkstream_scheduler_rebalances", "Rebalance rounds that moved at least one task", registry=r
        )
        self.moves = Counter("linkstream_scheduler_task_moves", "Task moves decided", registry=r)
        self.lost = Counter(
            "linkstream_scheduler_lost_tasks", "Task states lost with a crashed container", registry=r
        )
        self.elections = Counter(
            "linkstream_scheduler_elections", "Times this coordinator was elected leader", registry=r
        )
        for state in ("assigned", "pending", "migrating"):
            self.tasks.labels(state).set(0)


class DriverMetrics(_ProcessMetrics):
    """The metrics of a ``replay --zk`` driver (its result socket's refused handshakes).

    Args:
        registry: Where the metrics are registered; a fresh registry when ``None``.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("driver", registry)


class StoreNodeMetrics(_ProcessMetrics):
    """The metrics of ``linkstream store-node``: its session state and the handshakes its
    CURVE sockets (regions over TCP, the dictionary; ``socket="store"``) refused.

    Args:
        registry: Where the metrics are registered; a fresh registry when ``None``.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("store-node", registry)


class AutoscalerMetrics(_ProcessMetrics):
    """The metrics of ``linkstream autoscaler`` (:mod:`linkstream.cluster.autoscaler`).

    Args:
        registry: Where the metrics are registered; a fresh registry when ``None``.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__("autoscaler", registry)
        r = self.registry
        self.decisions = Counter(
            "linkstream_autoscaler_decisions",
            "Autoscaling rounds, by action (out, in, hold) and reason",
            ["action", "reason"],
            registry=r,
        )
        self.containers = Gauge(
            "linkstream_autoscaler_containers",
            "Containers the autoscaler counts (live, not draining, plus joining)",
            registry=r,
        )
        self.desired = Gauge(
            "linkstream_autoscaler_desired_containers",
            "Containers the autoscaling policy wants (its recommendation)",
            registry=r,
        )
        self.bound = Gauge(
            "linkstream_autoscaler_bound_containers",
            "The autoscaler's bounds on the container count (min, max)",
            ["bound"],
            registry=r,
        )
        self.at_max = Gauge(
            "linkstream_autoscaler_at_max",
            "1 while the cluster is under pressure at the maximum container count",
            registry=r,
        )
        self.tick_lag = Gauge(
            "linkstream_autoscaler_tick_lag_seconds",
            "Tick lag of the leader as the autoscaler last read it (event time pushed, not reported)",
            registry=r,
        )


class StoreCollector(Collector):
    """Reads a store's state at scrape time (register it on a registry).

    Args:
        store: A :class:`~linkstream.store.hybrid.HybridStore` or ``PersistentStore``.
    """

    def __init__(self, store: object) -> None:
        self.persistent = getattr(store, "persistent", store)
        self._vts: tuple[int, ...] | None = None
        self._moved = time.time()

    def collect(self) -> Iterator[Metric]:
        p = self.persistent
        vts, streams = tuple(p.vts), tuple(p.streams)  # type: ignore[attr-defined]  # p: a PersistentStore, duck-typed
        if vts != self._vts:
            self._vts, self._moved = vts, time.time()
        stable = GaugeMetricFamily(
            "linkstream_store_stable_timestamp_ms",
            "Stable timestamp (ms) of each absorbed stream",
            labels=["stream"],
        )
        for stream, ts in zip(streams, vts):
            stable.add_metric([stream], ts)
        yield stable
        yield GaugeMetricFamily(
            "linkstream_store_snapshot_age_seconds",
            "Wall time since the store's stable timestamp (its snapshot) last moved",
            value=time.time() - self._moved,
        )
        graphs = p.snapshot().graphs()  # type: ignore[attr-defined]  # p: a PersistentStore, duck-typed
        yield GaugeMetricFamily(
            "linkstream_store_delta_rows",
            "Absorbed triples not yet compacted into the graph indexes",
            value=sum(p.delta_size(g) for g in graphs),  # type: ignore[attr-defined]  # p: a PersistentStore, duck-typed
        )


def serve_metrics(
    registry: CollectorRegistry, port: int = 0, addr: str = "127.0.0.1"
) -> tuple[WSGIServer, int]:
    """Serves ``registry`` at ``http://addr:port/metrics`` from a daemon thread.

    Args:
        registry: What to expose.
        port: TCP port; 0 picks a free one.
        addr: Address to bind.

    Returns:
        ``(server, port)``: the WSGI server (``shutdown()`` stops it) and the bound port.
    """
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=addr, registry=registry)
    return server, int(server.server_port)
