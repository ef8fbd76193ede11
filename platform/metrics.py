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
``linkstream_watermark_ms``                    gauge      the watermark that drives reports
=============================================  =========  ====================================
"""

from __future__ import annotations

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

#: exposition names of every metric defined here (what a dashboard may query)
METRIC_NAMES: tuple[str, ...] = (
    "linkstream_ingest_triples_total",
    "linkstream_ingest_elements_total",
    "linkstream_late_elements_total",
    "linkstream_rejected_lines_total",
    "linkstream_queries_registered",
    "linkstream_operators",
    "linkstream_report_latency_seconds",
    "linkstream_reports_total",
    "linkstream_result_lines_total",
    "linkstream_subscriber_dropped_lines_total",
    "linkstream_watermark_ms",
)

#: report latency buckets (seconds): sub-millisecond reports up to slow multi-second ones
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

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
        self.watermark = Gauge(
            "linkstream_watermark_ms", "Event-time watermark (ms) that drives report times", registry=r
        )

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return generate_latest(self.registry)


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
