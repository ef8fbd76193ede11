"""Structure of the Grafana dashboard, its provisioning and the Prometheus config.

The dashboard is generated (``dashboards/generate.py``); the committed JSON must be what
the generator writes.  Every metric a PromQL expression names (dashboard panels, template
variables, alert rules) must be one that ``platform/metrics.py`` defines (``METRIC_NAMES``,
``PROCESS_METRIC_NAMES``), so a renamed metric cannot leave an empty panel behind.  The
alert rules have ``promtool test rules`` unit tests (``infra/alerts_test.yml``).
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from linkstream.metrics import METRIC_NAMES, PROCESS_METRIC_NAMES

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "dashboards" / "linkstream.json"
PROVISIONING = REPO / "dashboards" / "provisioning"
INFRA = REPO / "infra"
RULE_FILES = ("alerts.yml",)

# PromQL words that look like identifiers but are not metric names
_PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "rate", "increase", "irate", "by", "without", "on",
    "ignoring", "group_left", "group_right", "histogram_quantile", "time", "le", "and", "or",
    "unless", "bool", "offset",
}  # fmt: skip
#: series Prometheus itself makes for every scrape target
_PROMETHEUS_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped"}
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (label matchers, strings and ranges removed)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)  # labels
    expr = re.sub(r"\$\w+", "", expr)  # Grafana variables
    expr = re.sub(r"\b\d+(\.\d+)?(e[+-]?\d+)?\b", "", expr)  # numbers
    names = set()
    for word in re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", expr):
        if word in _PROMQL_WORDS:
            continue
        names.add(word)
    return names


def declared(name: str) -> bool:
    """Whether ``name`` (possibly a histogram's series) is one of ``METRIC_NAMES``."""
    if name in METRIC_NAMES or name in PROCESS_METRIC_NAMES or name in _PROMETHEUS_SERIES:
        return True
    return any(name.endswith(s) and name[: -len(s)] in METRIC_NAMES for s in _HISTOGRAM_SUFFIXES)


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # collapsed rows nest theirs
    return out


def load_generator() -> Any:
    """``dashboards/generate.py`` as a module (dashboards/ is not a package)."""
    spec = importlib.util.spec_from_file_location("dashboards_generate", REPO / "dashboards" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def rules() -> list[dict[str, Any]]:
    """Every alerting and recording rule of the rule files prometheus.yml loads."""
    out = []
    for name in RULE_FILES:
        for group in yaml.safe_load((INFRA / name).read_text())["groups"]:
            out.extend(group["rules"])
    return out


def dashboard_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every panel target."""
    return [(p["title"], t["expr"]) for p in panels(dashboard) for t in p.get("targets", [])]


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def test_metric_name_extraction() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le) (rate(linkstream_batch_latency_seconds_bucket{job="x"}[5m])))'
    )
    assert metric_names(expr) == {"linkstream_batch_latency_seconds_bucket"}
    assert metric_names("max by (id) (linkstream_scheduler_leader) == 1") == {"linkstream_scheduler_leader"}
    assert metric_names("(time() * 1000 - max(linkstream_watermark_ms)) / 1000") == {
        "linkstream_watermark_ms"
    }
    assert metric_names(
        'max by (instance) (linkstream_watermark_ms) - on (instance) group_right linkstream_store_delta_rows{instance=~"$instance"}'
    ) == {"linkstream_watermark_ms", "linkstream_store_delta_rows"}
    assert metric_names("sum(rate(linkstream_reports_total[$__rate_interval])) > 1e-3") == {
        "linkstream_reports_total"
    }
    assert declared("linkstream_report_latency_seconds_count") and not declared("linkstream_nope_total")
    assert declared("process_resident_memory_bytes") and declared("up")


def test_committed_dashboard_is_the_generated_one() -> None:
    pytest.importorskip("grafana_foundation_sdk")
    generate = load_generator()
    assert DASHBOARD.read_text() == generate.render(), "run: .venv/bin/python dashboards/generate.py"


def test_dashboard_structure(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "linkstream" and dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    datasources = {
        d["uid"]
        for d in yaml.safe_load((PROVISIONING / "datasources" / "linkstream.yaml").read_text())["datasources"]
    }
    for p in panels(dashboard):
        grid = p["gridPos"]
        assert set(grid) == {"h", "w", "x", "y"} and 0 <= grid["x"] and grid["x"] + grid["w"] <= 24
        if p["type"] == "row":
            continue
        assert p["type"] in {"timeseries", "stat", "gauge", "table"} and p["title"]
        assert p["datasource"]["uid"] in datasources, f"{p['title']}: unknown datasource"
        assert p["targets"], f"{p['title']}: no queries"
        refs = [t["refId"] for t in p["targets"]]
        assert len(refs) == len(set(refs))
        for t in p["targets"]:
            assert t["expr"].strip() and t["datasource"]["uid"] in datasources


def test_every_promql_metric_exists(dashboard: dict[str, Any]) -> None:
    used: set[str] = set()
    for p in panels(dashboard):
        for t in p.get("targets", []):
            names = metric_names(t["expr"])
            assert names, f"{p['title']}: {t['expr']!r} selects no metric"
            unknown = sorted(n for n in names if not declared(n))
            assert not unknown, f"{p['title']}: {unknown} not in metrics.METRIC_NAMES"
            used |= names
    for var in dashboard["templating"]["list"]:
        assert var["type"] == "query" and var["datasource"]["uid"] == "linkstream-prometheus"
        [inner] = re.findall(r"label_values\((\w+),", var["query"])
        assert declared(inner), f"variable {var['name']}: {inner} not in metrics.METRIC_NAMES"
    for rule in rules():
        names = metric_names(rule["expr"])
        assert names, f"rule {rule.get('alert')}: selects no metric"
        unknown = sorted(n for n in names if not declared(n))
        assert not unknown, f"rule {rule.get('alert')}: {unknown} not in metrics.METRIC_NAMES"
    # The operability metrics issue 5 asks for are on the dashboard.
    base = {re.sub(r"_(bucket|sum|count)$", "", n) for n in used}
    for name in (
        "linkstream_ingest_triples_total",
        "linkstream_batch_latency_seconds",
        "linkstream_dataplane_queue_depth",
        "linkstream_container_tasks",
        "linkstream_zookeeper_session_state",
        "linkstream_scheduler_rebalances_total",
        "linkstream_dataplane_received_bytes_total",
        "linkstream_state_migrated_bytes_total",
        # issue 20: cluster, ingest, queries, containers, store
        "linkstream_process_info",
        "linkstream_scheduler_leader",
        "linkstream_late_elements_total",
        "linkstream_rejected_lines_total",
        "linkstream_queries_registered",
        "linkstream_reports_total",
        "linkstream_result_lines_total",
        "linkstream_report_latency_seconds",
        "linkstream_container_task_moves_total",
        "process_resident_memory_bytes",
        "linkstream_store_stable_timestamp_ms",
        "linkstream_store_snapshot_age_seconds",
    ):
        assert name in base, f"dashboard lacks {name}"
    quantiles = [e for _t, e in dashboard_exprs(dashboard) if "linkstream_report_latency_seconds_bucket" in e]
    assert any("histogram_quantile(0.5," in e for e in quantiles)
    assert any("histogram_quantile(0.99," in e for e in quantiles)
    assert [v["name"] for v in dashboard["templating"]["list"]] == ["instance"]


def test_provisioning_files() -> None:
    ds = yaml.safe_load((PROVISIONING / "datasources" / "linkstream.yaml").read_text())
    assert ds["apiVersion"] == 1
    assert [d["type"] for d in ds["datasources"]] == ["prometheus"]
    prov = yaml.safe_load((PROVISIONING / "dashboards" / "linkstream.yaml").read_text())
    assert prov["apiVersion"] == 1
    [provider] = prov["providers"]
    assert provider["type"] == "file" and provider["options"]["path"]


def _promtool() -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (infra/install-system-deps.sh installs the prometheus package)")
    return promtool


def test_prometheus_config_scrapes_the_local_cluster() -> None:
    config = yaml.safe_load((INFRA / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    files = jobs["linkstream-cluster"]["file_sd_configs"][0]["files"]
    # LocalCluster.write_prometheus_targets writes here for the default cluster directory
    assert files == ["/tmp/linkstream-local-cluster/prometheus/targets.json"]
    assert config["rule_files"] == list(RULE_FILES)
    promtool = _promtool()
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", *RULE_FILES]):
        done = subprocess.run([promtool, *args], cwd=INFRA, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr


def test_alert_rules() -> None:
    alerts = {r["alert"]: r for r in rules()}
    for name in (
        "LinkStreamTargetDown",
        "LinkStreamReportLag",
        "LinkStreamZooKeeperSessionLost",
        "LinkStreamLateElements",
        "LinkStreamNoLeader",
    ):
        assert name in alerts, f"missing alert {name}"
    for name, rule in alerts.items():
        assert rule["labels"]["severity"] in {"warning", "critical"}, name
        assert rule["annotations"]["summary"], name
    # every alert has a promtool unit test
    tested = {
        case["alertname"]
        for test in yaml.safe_load((INFRA / "alerts_test.yml").read_text())["tests"]
        for case in test.get("alert_rule_test", [])
    }
    assert set(alerts) <= tested, f"alerts without a unit test: {sorted(set(alerts) - tested)}"


def test_alert_rules_unit_tests() -> None:
    done = subprocess.run(
        [_promtool(), "test", "rules", "alerts_test.yml"],
        cwd=INFRA,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
