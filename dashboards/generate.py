"""Generates ``dashboards/linkstream.json``, the LinkStream Grafana dashboard, as code.

Built with the Grafana Foundation SDK (``grafana-foundation-sdk``, typed builders generated
from Grafana's own schemas; dashboards/README.md says why this one).  Every expression
names only metrics from ``platform/metrics.py`` (``METRIC_NAMES`` and
``PROCESS_METRIC_NAMES``); ``tests/test_dashboards.py`` checks that, and that the
committed JSON is what this script writes.  Regenerate with::

    .venv/bin/python dashboards/generate.py          # writes dashboards/linkstream.json
    .venv/bin/python dashboards/generate.py --check  # exit 1 if the committed file differs

Grafana variables in the expressions: ``$instance`` (a query variable over the processes
that report queries) and ``$__rate_interval``.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from grafana_foundation_sdk.builders import common as gc
from grafana_foundation_sdk.builders import dashboard as gd
from grafana_foundation_sdk.builders import prometheus as gp
from grafana_foundation_sdk.builders import stat as gstat
from grafana_foundation_sdk.builders import timeseries as gts
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common as cm
from grafana_foundation_sdk.models import dashboard as dm

OUT = Path(__file__).resolve().parent / "linkstream.json"
DATASOURCE = dm.DataSourceRef(type_val="prometheus", uid="linkstream-prometheus")
RATE = "$__rate_interval"
#: label matcher of the ``instance`` variable (processes: API servers and containers)
INST = 'instance=~"$instance"'


@dataclass(frozen=True)
class Query:
    """One PromQL target of a panel."""

    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    """A panel: ``kind`` is ``timeseries`` or ``stat``; ``w`` and ``h`` in grid units."""

    title: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: str = "timeseries"
    w: int = 8
    h: int = 8
    description: str = ""


@dataclass(frozen=True)
class Row:
    """A dashboard row and the panels under it."""

    title: str
    panels: tuple[Panel, ...] = field(default_factory=tuple)


def _rate(metric: str, by: str = "instance", sel: str = INST) -> str:
    return f"sum by ({by}) (rate({metric}{{{sel}}}[{RATE}]))"


def _quantile(q: float, histogram: str, sel: str = INST) -> str:
    return f"histogram_quantile({q}, sum by (le) (rate({histogram}_bucket{{{sel}}}[{RATE}])))"


ROWS: tuple[Row, ...] = (
    Row(
        "Cluster",
        (
            Panel(
                "Containers",
                (
                    Query("max(linkstream_scheduler_containers)", "scheduler's view"),
                    Query('count(linkstream_process_info{role="container"})', "scraped"),
                ),
                kind="stat",
                w=4,
                description="Live containers as the leading scheduler sees them, and container processes Prometheus scrapes",
            ),
            Panel(
                "Coordinators",
                (Query('count(linkstream_process_info{role="coordinator"})', "coordinators"),),
                kind="stat",
                w=4,
                description="Coordinator processes (one leader, the rest standbys)",
            ),
            Panel(
                "Leader",
                (
                    Query("max by (instance) (linkstream_scheduler_leader) == 1", "{{instance}}"),
                    Query("sum(linkstream_scheduler_leader)", "leaders"),
                ),
                kind="stat",
                w=4,
                description="The coordinator that leads, and how many lead (1 when healthy)",
            ),
            Panel(
                "ZooKeeper session state",
                (Query("sum by (state) (linkstream_zookeeper_session_state)", "{{state}}"),),
                w=6,
                description="Cluster processes per ZooKeeper session state (CONNECTED, SUSPENDED, LOST)",
            ),
            Panel(
                "ZooKeeper session events",
                (
                    Query(
                        f"sum by (state) (increase(linkstream_zookeeper_session_events_total[{RATE}]))",
                        "{{state}}",
                    ),
                ),
                w=6,
                description="Session transitions, by the state entered",
            ),
            Panel(
                "Tasks by state",
                (Query("max by (state) (linkstream_scheduler_tasks)", "{{state}}"),),
                description="Tasks assigned, pending a slot, or migrating (leader's view)",
            ),
            Panel(
                "Scheduler activity",
                (
                    Query(f"sum(rate(linkstream_scheduler_rebalances_total[{RATE}]))", "rebalances/s"),
                    Query(f"sum(rate(linkstream_scheduler_task_moves_total[{RATE}]))", "task moves/s"),
                    Query(
                        f"sum(increase(linkstream_scheduler_lost_tasks_total[{RATE}]))", "lost task states"
                    ),
                    Query(f"sum(increase(linkstream_scheduler_elections_total[{RATE}]))", "elections"),
                ),
                w=16,
            ),
            Panel(
                "Autoscaler",
                (
                    Query("max(linkstream_autoscaler_containers)", "containers"),
                    Query("max(linkstream_autoscaler_desired_containers)", "desired"),
                    Query('max(linkstream_autoscaler_bound_containers{bound="max"})', "max"),
                    Query("max(linkstream_autoscaler_at_max)", "at max"),
                ),
                description="linkstream autoscaler: containers it counts, what its policy wants, its maximum, "
                "and 1 while the cluster is under pressure at that maximum",
            ),
        ),
    ),
    Row(
        "Ingest",
        (
            Panel(
                "Triples/s",
                (Query(_rate("linkstream_ingest_triples_total"), "{{instance}}"),),
                unit="short",
                description="Stream triples accepted, per process (no per-stream triple counter exists)",
            ),
            Panel(
                "Elements/s per stream",
                (
                    Query(_rate("linkstream_stream_elements_total", "stream"), "{{stream}}"),
                    Query(_rate("linkstream_ingest_elements_total"), "all streams {{instance}}"),
                ),
                description="Stream elements per stream (containers) and in total per process",
            ),
            Panel(
                "Late and rejected input/s",
                (
                    Query(_rate("linkstream_late_elements_total"), "late elements {{instance}}"),
                    Query(_rate("linkstream_rejected_lines_total"), "rejected lines {{instance}}"),
                ),
                description="Elements dropped as late (older than the watermark) and malformed lines rejected",
            ),
            Panel(
                "Watermark lag",
                (
                    Query(
                        f"(time() * 1000 - max by (instance) (linkstream_watermark_ms{{{INST}}})) / 1000",
                        "{{instance}}",
                    ),
                ),
                unit="s",
                w=24,
                h=6,
                description="Wall clock minus the event-time watermark that drives reports",
            ),
        ),
    ),
    Row(
        "Queries",
        (
            Panel(
                "Queries registered",
                (
                    Query(f"sum(linkstream_queries_registered{{{INST}}})", "queries"),
                    Query(f"sum(linkstream_operators{{{INST}}})", "operators"),
                ),
                kind="stat",
                w=4,
            ),
            Panel(
                "Reports/s",
                (Query(_rate("linkstream_reports_total"), "{{instance}}"),),
                w=6,
                description="Query reports evaluated",
            ),
            Panel(
                "Result rows/s",
                (
                    Query(_rate("linkstream_result_lines_total"), "{{instance}}"),
                    Query(_rate("linkstream_subscriber_dropped_lines_total"), "dropped {{instance}}"),
                ),
                w=6,
                description="Result lines produced, and lines lost by slow subscribers",
            ),
            Panel(
                "Report latency p50 / p99",
                (
                    Query(_quantile(0.5, "linkstream_report_latency_seconds"), "p50"),
                    Query(_quantile(0.99, "linkstream_report_latency_seconds"), "p99"),
                ),
                unit="s",
                description="Time to evaluate one report time (histogram_quantile over the latency buckets)",
            ),
        ),
    ),
    Row(
        "Containers",
        (
            Panel(
                "Tasks per container",
                (
                    Query(f"max by (instance) (linkstream_container_tasks{{{INST}}})", "tasks {{instance}}"),
                    Query(
                        f"max by (instance) (linkstream_container_capacity{{{INST}}})", "slots {{instance}}"
                    ),
                ),
            ),
            Panel(
                "Busy time",
                (
                    Query(_rate("linkstream_batch_latency_seconds_sum"), "applying batches {{instance}}"),
                    Query(_rate("linkstream_report_latency_seconds_sum"), "evaluating reports {{instance}}"),
                ),
                unit="percentunit",
                description="Seconds per second spent applying data-plane batches and evaluating reports",
            ),
            Panel(
                "Memory (RSS)",
                (Query(f"max by (instance) (process_resident_memory_bytes{{{INST}}})", "{{instance}}"),),
                unit="bytes",
            ),
            Panel(
                "Task moves",
                (
                    Query(
                        f"sum by (instance, direction) (increase(linkstream_container_task_moves_total{{{INST}}}[{RATE}]))",
                        "{{direction}} {{instance}}",
                    ),
                    Query(
                        f"sum by (direction) (increase(linkstream_state_migrations_total{{{INST}}}[{RATE}]))",
                        "state hand-overs {{direction}}",
                    ),
                ),
            ),
            Panel(
                "Moved state",
                (
                    Query(
                        _rate("linkstream_state_migrated_bytes_total", "direction"), "bytes/s {{direction}}"
                    ),
                    Query(_rate("linkstream_state_migrated_rows_total", "direction"), "rows/s {{direction}}"),
                ),
                unit="Bps",
                description="Operator state migrated with task moves, sent (out) and restored (in)",
            ),
            Panel(
                "Batch latency p50 / p99",
                (
                    Query(_quantile(0.5, "linkstream_batch_latency_seconds"), "p50"),
                    Query(_quantile(0.99, "linkstream_batch_latency_seconds"), "p99"),
                ),
                unit="s",
            ),
            Panel(
                "Data plane bytes/s",
                (
                    Query(_rate("linkstream_dataplane_received_bytes_total"), "in {{instance}}"),
                    Query(_rate("linkstream_dataplane_sent_bytes_total"), "out {{instance}}"),
                ),
                unit="Bps",
            ),
            Panel(
                "Data plane messages/s",
                (
                    Query(_rate("linkstream_dataplane_received_messages_total", "kind"), "in {{kind}}"),
                    Query(_rate("linkstream_dataplane_sent_messages_total"), "out {{instance}}"),
                    Query(_rate("linkstream_dataplane_backpressure_total"), "backpressure {{instance}}"),
                ),
            ),
            Panel(
                "Inbox queue depth",
                (Query(f"max by (instance) (linkstream_dataplane_queue_depth{{{INST}}})", "{{instance}}"),),
            ),
        ),
    ),
    Row(
        "Store",
        (
            Panel(
                "Absorb lag",
                (
                    Query(
                        "(max by (instance) (linkstream_watermark_ms) - on (instance) group_right "
                        "linkstream_store_stable_timestamp_ms) / 1000",
                        "{{stream}} {{instance}}",
                    ),
                ),
                unit="s",
                description="Event time the store's stable timestamp (what /sparql sees) trails the watermark, per absorbed stream",
            ),
            Panel(
                "Snapshot age",
                (Query("max by (instance) (linkstream_store_snapshot_age_seconds)", "{{instance}}"),),
                unit="s",
                description="Wall time since the store last published a snapshot (measured at scrape resolution)",
            ),
            Panel(
                "Delta rows awaiting compaction",
                (Query("max by (instance) (linkstream_store_delta_rows)", "{{instance}}"),),
                description="Absorbed rows in the store's delta, not yet compacted into the graph indexes",
            ),
        ),
    ),
    Row(
        "Durability",
        (
            Panel(
                "Checkpoint age",
                (
                    Query(
                        f"max by (instance) (linkstream_checkpoint_age_seconds{{{INST}}})", "age {{instance}}"
                    ),
                    Query(
                        f"max by (instance) (linkstream_checkpoint_interval_seconds{{{INST}}})",
                        "interval {{instance}}",
                    ),
                ),
                unit="s",
                description="Seconds since the state was last covered by a complete checkpoint, against the "
                "checkpoint interval (alert LinkStreamCheckpointsFailing: over 5 intervals for 2 min)",
            ),
            Panel(
                "Checkpoints/s",
                (
                    Query(_rate("linkstream_checkpoints_total"), "complete {{instance}}"),
                    Query(_rate("linkstream_checkpoint_failures_total"), "failed {{instance}}"),
                ),
                description="Complete and failed (or incomplete) checkpoints per second",
            ),
            Panel(
                "Ingest log ship lag",
                (Query(f"max by (instance) (linkstream_log_ship_lag_seconds{{{INST}}})", "{{instance}}"),),
                unit="s",
                description="Age of the oldest acknowledged (locally durable) push not yet in the checkpoint store",
            ),
        ),
    ),
)


def _target(ref: str, q: Query) -> gp.Dataquery:
    t = gp.Dataquery().expr(q.expr).ref_id(ref).datasource(DATASOURCE)
    return t.legend_format(q.legend) if q.legend else t


def _panel(pid: int, p: Panel) -> gd.Panel:
    if p.kind == "stat":
        b = gstat.Panel().reduce_options(gc.ReduceDataOptions().calcs(["lastNotNull"]))
    else:
        legend = (
            gc.VizLegendOptions().display_mode(cm.LegendDisplayMode.LIST).placement(cm.LegendPlacement.BOTTOM)
        )
        tooltip = gc.VizTooltipOptions().mode(cm.TooltipDisplayMode.MULTI).sort(cm.SortOrder.DESCENDING)
        b = gts.Panel().fill_opacity(10).legend(legend.show_legend(True)).tooltip(tooltip)
    b = b.id(pid).title(p.title).datasource(DATASOURCE).unit(p.unit).span(p.w).height(p.h)
    if p.description:
        b = b.description(p.description)
    for k, q in enumerate(p.queries):
        b = b.with_target(_target(chr(ord("A") + k), q))
    return b


def build() -> dict[str, object]:
    """The dashboard as a JSON-ready dict."""
    variable = (
        gd.QueryVariable("instance")
        .label("Instance")
        .datasource(DATASOURCE)
        .query("label_values(linkstream_queries_registered, instance)")
        .refresh(dm.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(dm.VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )
    d = (
        gd.Dashboard("LinkStream")
        .uid("linkstream")
        .description("Cluster, ingest, queries, containers and store of LinkStream (platform/metrics.py)")
        .tags(["linkstream"])
        .timezone("browser")
        .editable()
        .refresh("10s")
        .time("now-30m", "now")
        .tooltip(dm.DashboardCursorSync.CROSSHAIR)
        .with_variable(variable)
    )
    pid = 0
    for row in ROWS:
        pid += 1
        d = d.with_row(gd.Row(row.title).id(pid))
        for p in row.panels:
            pid += 1
            d = d.with_panel(_panel(pid, p))
    return json.loads(json.dumps(d.build(), cls=JSONEncoder))


def render() -> str:
    """The dashboard file's text (sorted keys, 2-space indent, trailing newline)."""
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the committed JSON is stale")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        if not args.out.exists() or args.out.read_text() != text:
            print(f"{args.out} is stale: run python dashboards/generate.py", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
