"""Prometheus metrics of cluster processes, scraped from real container and coordinator processes."""

from __future__ import annotations

import json
import shutil
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from linkstream.cli import main as cli_main
from linkstream.cluster.localcluster import LocalCluster
from linkstream.metrics import METRIC_NAMES
from tests.shared_paths import shared_or_skip

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

QUERY = "csparql-Q10"


def scrape(address: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` of ``address`` as {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as resp:
        assert resp.status == 200
        text = resp.read().decode("utf-8")
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def exported(samples: dict) -> set[str]:
    """Exposition names of the LinkStream metrics among ``samples`` (histograms by base name)."""
    names = set()
    for name, _labels in samples:
        if name.endswith("_created"):  # counters' and histograms' creation timestamps
            base = name[: -len("_created")]
            name = base + "_total" if base + "_total" in METRIC_NAMES else base
        for suffix in ("_bucket", "_sum", "_count"):
            if name.endswith(suffix) and name[: -len(suffix)] in METRIC_NAMES:
                name = name[: -len(suffix)]
        if name.startswith("linkstream_"):
            names.add(name)
    return names


def test_container_and_coordinator_serve_metrics(
    tmp_path: Path, zk_server: str, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    q = next(q for q in manifest["queries"] if q["id"] == QUERY)
    query = tmp_path / f"{QUERY}.rq"
    shutil.copy(shared / q["query"], query)
    args = ["--base", manifest["base"], "--query", str(query), "--max-reports", "20", "--quiet"]
    args += [f"--stream={s['iri']}={shared / s['path']}" for s in q["streams"]]
    args += [f"--static={s['iri']}={shared / s['path']}" for s in q["statics"]]

    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=2.0)
    try:
        cluster.start(1, 1)
        out = tmp_path / "out.jsonl"
        assert cli_main(["replay", *args, "--zk", cluster.hosts, "--out", str(out)]) == 0
        rows = sum(1 for _ in open(out))
        assert rows > 0

        capsys.readouterr()
        assert cli_main(["status", "--zk", cluster.hosts, "--json"]) == 0
        status = json.loads(capsys.readouterr().out)
        [container] = status["containers"]
        [coordinator] = status["coordinator_nodes"]
        assert container["metrics"] and coordinator["metrics"] and coordinator["id"] == "coord-1"
        assert cli_main(["status", "--zk", cluster.hosts]) == 0
        assert f"metrics {container['metrics']}" in capsys.readouterr().out

        c = scrape(container["metrics"])
        assert c[("linkstream_process_info", (("id", "oc-1"), ("role", "container")))] == 1
        assert c[("linkstream_zookeeper_session_state", (("state", "CONNECTED"),))] == 1
        assert c[("linkstream_zookeeper_session_state", (("state", "LOST"),))] == 0
        assert c[("linkstream_ingest_triples_total", ())] > 0
        assert c[("linkstream_ingest_elements_total", ())] > 0
        assert c[("linkstream_reports_total", ())] == 20
        assert c[("linkstream_result_lines_total", ())] == rows
        assert c[("linkstream_report_latency_seconds_count", ())] >= 20
        assert c[("linkstream_batch_latency_seconds_count", ())] > 0
        assert c[("linkstream_dataplane_received_bytes_total", ())] > 0
        assert c[("linkstream_dataplane_received_messages_total", (("kind", "elements"),))] > 0
        assert c[("linkstream_dataplane_received_messages_total", (("kind", "tick"),))] >= 20
        assert c[("linkstream_dataplane_sent_messages_total", ())] >= 20  # hello, ready, results
        assert c[("linkstream_dataplane_sent_bytes_total", ())] > 0
        assert c[("linkstream_container_capacity", ())] == 16
        assert c[("linkstream_container_runs_total", ())] == 1
        assert ("linkstream_dataplane_queue_depth", ()) in c

        k = scrape(coordinator["metrics"])
        assert k[("linkstream_process_info", (("id", "coord-1"), ("role", "coordinator")))] == 1
        assert k[("linkstream_scheduler_leader", ())] == 1
        assert k[("linkstream_scheduler_elections_total", ())] == 1
        assert k[("linkstream_scheduler_containers", ())] == 1
        assert k[("linkstream_zookeeper_session_state", (("state", "CONNECTED"),))] == 1
        # every name either process exports is declared once in METRIC_NAMES
        assert exported(c) | exported(k) <= set(METRIC_NAMES)

        targets = json.loads((cluster.dir / "prometheus" / "targets.json").read_text())
        assert {(g["labels"]["role"], g["targets"][0]) for g in targets} == {
            ("container", container["metrics"]),
            ("coordinator", coordinator["metrics"]),
        }
    finally:
        cluster.stop()
