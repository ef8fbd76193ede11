"""Cluster mode on store nodes: ZooKeeper, 2 ``linkstream store-node`` processes, a
coordinator and 3 ``linkstream container --remote-store`` processes, all started by
``LocalCluster(store=..., store_nodes=2)`` (``infra/local-cluster start 3 --store DIR
--store-nodes 2``), security on (CURVE between containers and store nodes).

The CityBench slice's C-SPARQL queries replayed on the cluster equal embedded mode while
no container holds a static graph: each container's metrics show no static triple in its
engine (the joins look the windows' keys up on the store nodes) and a block cache within
its bound -- a bound smaller than the static graph, so blocks are evicted and read again.  Then one store node is killed
(every partition is replicated on the other) and the CQELS queries (static default graph)
replayed: still equal to embedded mode.  (Each query set runs once: re-running an identical
set of queries on one cluster sometimes never becomes ready, with or without store nodes.)
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from linkstream.cluster.localcluster import LocalCluster
from tests.result_compare import differences, load
from tests.shared_paths import SLICE
from tests.store.remote_fixtures import MANIFEST, SENSORS, build_store

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

#: bytes of the sensor repository's triples as a container loads them from the file
FULL_STATIC_BYTES = sum(1 for line in open(SENSORS, encoding="utf-8") if line.strip()) * 24
#: the containers' block cache: a bound smaller than the static graph
CACHE_MB = 4 / 1024
CACHE_BYTES = int(CACHE_MB * (1 << 20))


def replay_args(dialect: str, out: Path) -> list[str]:
    qs = [q for q in MANIFEST["queries"] if q["dialect"] == dialect]
    args = ["replay", "--base", MANIFEST["base"], "--default-step", "1000", "--quiet", "--out", str(out)]
    streams: dict[str, str] = {}
    statics: dict[str | None, str] = {}
    for q in qs:
        args += ["--query", str(SLICE / q["query"])]
        for s in q["streams"]:
            streams[s["iri"]] = str(SLICE / s["path"])
        for s in q["statics"]:
            statics[s["iri"]] = str(SLICE / s["path"])
    for iri, path in streams.items():
        args += ["--stream", f"{iri}={path}"]
    for iri, path in statics.items():
        args += ["--static", f"{iri}={path}" if iri else path]
    return args


def container_metrics(cluster: LocalCluster) -> dict[str, dict[str, float]]:
    """Each container's static-data gauges, scraped from its /metrics endpoint."""
    groups = json.loads(cluster.write_prometheus_targets().read_text())
    out = {}
    for g in groups:
        if g.get("labels", {}).get("kind") not in (None, "container"):
            continue
        for target in g["targets"]:
            body = urllib.request.urlopen(f"http://{target}/metrics", timeout=5).read().decode()
            if "linkstream_static_engine_bytes" not in body:
                continue
            vals = {}
            for name in (
                "engine_bytes",
                "cache_bytes",
                "cache_capacity_bytes",
                "remote_read_bytes",
                "cache_evictions",
                "lookups",
                "materialised_bytes",
            ):
                m = re.search(rf"^linkstream_static_{name} ([0-9.e+]+)$", body, re.M)
                assert m, f"{target}: no linkstream_static_{name}"
                vals[name] = float(m.group(1))
            out[target] = vals
    return out


def test_cluster_on_store_nodes_equals_embedded_and_survives_a_store_node(
    tmp_path: Path, zk_server: str, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = build_store(tmp_path)
    cluster = LocalCluster(
        tmp_path / "cluster",
        zk=f"{zk_server}{zk_chroot}",
        session_timeout=2.0,
        capacity=32,
        store=store,
        store_nodes=2,
        cache_mb=CACHE_MB,
    )
    try:
        cluster.start(3, 1)
        assert cluster.names("storenode") == ["store-1", "store-2"]
        assert len(cluster.store_nodes()) == 2
        # the store nodes' /metrics are Prometheus targets too
        groups = json.loads(cluster.write_prometheus_targets().read_text())
        stores = [g for g in groups if g["labels"].get("role") == "storenode"]
        assert sorted(g["labels"]["id"] for g in stores) == sorted(cluster.store_nodes())
        for g in stores:
            body = urllib.request.urlopen(f"http://{g['targets'][0]}/metrics", timeout=5).read().decode()
            assert 'linkstream_process_info{id="' in body and 'role="store-node"' in body
        assert all(
            "--remote-store" in open(f"/proc/{cluster.pid(c)}/cmdline").read()
            for c in ("oc-1", "oc-2", "oc-3")
        )

        def check(label: str, dialect: str) -> None:
            want, got = (
                tmp_path / f"{label}-{dialect}-embedded.jsonl",
                tmp_path / f"{label}-{dialect}.jsonl",
            )
            assert cli_main(replay_args(dialect, want)) == 0
            assert cli_main([*replay_args(dialect, got), "--zk", cluster.hosts]) == 0, capsys.readouterr().err
            a, b = load(want), load(got)
            assert sum(sum(c.values()) for c in a.values()) > 100
            assert not differences(a, b), f"{label} {dialect}: " + "\n".join(differences(a, b))

        check("both-nodes", "csparql")
        metrics = container_metrics(cluster)
        assert len(metrics) == 3, metrics
        assert CACHE_BYTES < FULL_STATIC_BYTES
        for target, m in metrics.items():
            # no static graph held: no static triple in the engine, the block cache only,
            # within its bound (smaller than the graph)
            assert m["engine_bytes"] == 0 and m["materialised_bytes"] == 0, (target, m)
            assert m["cache_capacity_bytes"] == CACHE_BYTES, (target, m)
            assert m["cache_bytes"] <= CACHE_BYTES, (target, m)
        # the containers answering queries looked the windows' keys up: more bytes read
        # than the cache holds (blocks evicted and read again), results equal all the same
        busy = [m for m in metrics.values() if m["lookups"] > 0]
        assert busy, metrics
        assert any(m["cache_evictions"] > 0 and m["remote_read_bytes"] > CACHE_BYTES for m in busy), metrics

        cluster.kill("store-1")
        # the node's znode goes with its session (2 s); the containers then read only
        # from the survivor (a read from the dead node would also fail over)
        deadline = time.monotonic() + 15
        while len(cluster.store_nodes()) != 1:
            assert time.monotonic() < deadline, "the killed store node's znode did not vanish"
            time.sleep(0.1)
        check("one-node", "cqels")
    finally:
        cluster.stop()


def test_local_cluster_store_options_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from linkstream.cluster.localcluster import main

    with pytest.raises(SystemExit) as e:
        main(["start", "1", "--dir", str(tmp_path), "--store-nodes", "2"])
    assert e.value.code == 2
    assert capsys.readouterr().err.endswith("error: --store-nodes needs --store DIR and a count >= 1\n")
    with pytest.raises(SystemExit):
        main(["start", "1", "--dir", str(tmp_path), "--store", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert err.endswith(f"error: --store {tmp_path / 'none'}: not a LinkStream store (no store.json)\n")
    assert not (tmp_path / "cluster.json").exists()  # nothing was started
