"""Structure of the Grafana dashboard, its provisioning and the Prometheus config.

Every metric a PromQL expression names (dashboard panels, alert rules) must be one that
``platform/metrics.py`` defines (``METRIC_NAMES``), so a renamed metric cannot leave an
empty panel behind.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from linkstream.metrics import METRIC_NAMES

REPO = Path(__file__).resolve().parents[1]
DASHBOARD = REPO / "dashboards" / "linkstream.json"
PROVISIONING = REPO / "dashboards" / "provisioning"
INFRA = REPO / "infra"

# PromQL words that look like identifiers but are not metric names
_PROMQL_WORDS = {
    "sum", "max", "min", "avg", "count", "rate", "increase", "irate", "by", "without", "on",
    "ignoring", "group_left", "group_right", "histogram_quantile", "time", "le", "and", "or",
    "unless", "bool", "offset",
}  # fmt: skip
_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def metric_names(expr: str) -> set[str]:
    """Metric names an expression selects (label matchers, strings and ranges removed)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    expr = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", expr)  # grouping labels
    names = set()
    for word in re.findall(r"\b[a-zA-Z_:][a-zA-Z0-9_:]*\b(?!\s*\()", expr):
        if word in _PROMQL_WORDS:
            continue
        names.add(word)
    return names


def declared(name: str) -> bool:
    """Whether ``name`` (possibly a histogram's series) is one of ``METRIC_NAMES``."""
    if name in METRIC_NAMES:
        return True
    return any(name.endswith(s) and name[: -len(s)] in METRIC_NAMES for s in _HISTOGRAM_SUFFIXES)


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # collapsed rows nest theirs
    return out


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
    assert declared("linkstream_report_latency_seconds_count") and not declared("linkstream_nope_total")


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
    rules = yaml.safe_load((INFRA / "prometheus-rules.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            unknown = sorted(n for n in metric_names(rule["expr"]) if not declared(n))
            assert not unknown, f"alert {rule['alert']}: {unknown} not in metrics.METRIC_NAMES"
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
    ):
        assert name in base, f"dashboard lacks {name}"


def test_provisioning_files() -> None:
    ds = yaml.safe_load((PROVISIONING / "datasources" / "linkstream.yaml").read_text())
    assert ds["apiVersion"] == 1
    assert [d["type"] for d in ds["datasources"]] == ["prometheus"]
    prov = yaml.safe_load((PROVISIONING / "dashboards" / "linkstream.yaml").read_text())
    assert prov["apiVersion"] == 1
    [provider] = prov["providers"]
    assert provider["type"] == "file" and provider["options"]["path"]


def test_prometheus_config_scrapes_the_local_cluster() -> None:
    config = yaml.safe_load((INFRA / "prometheus.yml").read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    files = jobs["linkstream-cluster"]["file_sd_configs"][0]["files"]
    # LocalCluster.write_prometheus_targets writes here for the default cluster directory
    assert files == ["/tmp/linkstream-local-cluster/prometheus/targets.json"]
    assert config["rule_files"] == ["prometheus-rules.yml"]
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool not installed (infra/install-system-deps.sh installs prometheus)")
    for args in (["check", "config", "prometheus.yml"], ["check", "rules", "prometheus-rules.yml"]):
        done = subprocess.run([promtool, *args], cwd=INFRA, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stdout + done.stderr
