"""Operator-level placement (``--placement operators``): producer tasks on their own containers.

A handful of CityBench queries -- CQELS-QL queries sharing one routed join (Q1, Q1_win_1,
Q3), C-SPARQL joins, and queries with aggregates -- replayed on three container
processes with a real ZooKeeper and coordinator, with their shared join/scan operators
placed as producer tasks apart from the queries' consumer tasks.  The result file must
equal the embedded replay (``compare_results.py``), some query must have its tasks on
more than one container, and batches must have crossed containers over ZeroMQ (the
containers' Prometheus edge counters say so).
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from linkstream.cli import main as cli_main
from linkstream.cluster.localcluster import LocalCluster, pid_alive
from linkstream.cluster.replay import ClusterEngine, replay_on_cluster
from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.membership import Membership
from tests.conftest import ZK_AUTH
from tests.shared_paths import load_tool, shared_or_skip

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

QUERY_IDS = [
    "cqels-Q1",
    "cqels-Q1_win_1",
    "cqels-Q3",
    "cqels-Q12",
    "csparql-Q1",
    "csparql-Q3",
    "csparql-Q2",
    "cqels-Q11",
]
#: Aggregates over the joins of Q1 (written here: the manifest's only aggregate queries,
#: Q12, have no rows): their consumer tasks group and count what the shared producer sends.
DERIVED = {
    "agg-cqels-Q1": (
        "cqels-Q1",
        "select ?obId1 ?obId2 ?v1 ?v2",
        "select ?obId1 (count(?obId2) as ?n) (max(?v2) as ?top)",
        "\ngroup by ?obId1",
    ),
    "agg-csparql-Q1": (
        "csparql-Q1",
        "select ?obId1 ?obId2 ?v1 ?v2",
        "select (count(*) as ?n) (count(distinct ?obId2) as ?o2)",
        "",
    ),
}
MAX_REPORTS = 150
ALWAYS_EMPTY = {"cqels-Q12"}
SESSION_S = 2.0


def edge_batches(address: str) -> dict[str, float]:
    """The ``linkstream_operator_edge_batches`` counters of one container, by direction."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as resp:
        text = resp.read().decode("utf-8")
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "linkstream_operator_edge_batches_total":
                out[s.labels["direction"]] = s.value
    return out


@dataclass
class Workload:
    args: list[str]  # replay arguments shared by the embedded and the cluster runs
    queries: list[ContinuousQuery]
    streams: list[tuple[str, str]]
    statics: list[tuple[str | None, str]]
    base: str
    expected: Path  # the embedded replay's results


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """The queries (manifest ones and derived aggregates) and their embedded results."""
    return make_workload(tmp_path_factory)


def make_workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """Builds :func:`workload` (other operator-placement test modules share it)."""
    tmp_path = tmp_path_factory.mktemp("operator-workload")
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    base = manifest.get("base", "http://localhost/")
    by_id = {q["id"]: q for q in manifest["queries"]}
    args = ["--base", base, "--default-step", "1000", "--max-reports", str(MAX_REPORTS), "--quiet"]
    streams: dict[str, str] = {}
    statics: dict[str | None, str] = {}
    queries = []
    for qid in QUERY_IDS:
        q = by_id[qid]
        path = tmp_path / f"{qid}.rq"
        shutil.copy(shared / q["query"], path)
        args += ["--query", str(path)]
        queries.append(parse_continuous(path.read_text(), default_name=qid, base=base, source=str(path)))
        for s in q["streams"]:
            streams[s["iri"]] = str(shared / s["path"])
        for s in q["statics"]:
            statics[s["iri"]] = str(shared / s["path"])
    for qid, (src, old, new, tail) in DERIVED.items():
        text = (shared / by_id[src]["query"]).read_text()
        assert old in text
        path = tmp_path / f"{qid}.rq"
        path.write_text(text.replace(old, new, 1).rstrip() + tail + "\n")
        args += ["--query", str(path)]
        queries.append(parse_continuous(path.read_text(), default_name=qid, base=base, source=str(path)))
    for iri, p in streams.items():
        args += ["--stream", f"{iri}={p}"]
    for iri, p in statics.items():
        args += ["--static", f"{iri}={p}" if iri else p]
    expected = tmp_path / "embedded.jsonl"
    assert cli_main(["replay", *args, "--out", str(expected)]) == 0
    return Workload(args, queries, list(streams.items()), list(statics.items()), base, expected)


def test_operator_placement_on_three_containers_equals_embedded(
    workload: Workload, tmp_path: Path, zk_server: str, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args, queries, expected = workload.args, workload.queries, workload.expected
    got = tmp_path / "cluster.jsonl"
    capsys.readouterr()

    cluster = LocalCluster(
        tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S, capacity=8
    )
    try:
        cluster.start(3, 1)
        stats = tmp_path / "stats.json"
        argv = ["replay", *args, "--zk", cluster.hosts, "--placement", "operators"]
        assert cli_main([*argv, "--out", str(got), "--stats", str(stats)]) == 0, capsys.readouterr().err
        capsys.readouterr()
        body = json.loads(stats.read_text())
        assert body["lost"] == []
        assert body["recovered"] == []  # no container died (a crash would be recomputed silently)
        compare = load_tool("compare_results").main
        assert compare([str(expected), str(got)]) == 0, capsys.readouterr().out

        rows: dict[str, int] = {}
        for line in got.read_text().splitlines():
            name = json.loads(line)["query"]
            rows[name] = rows.get(name, 0) + 1
        empty = sorted(q.name for q in queries if q.name not in ALWAYS_EMPTY and not rows.get(q.name))
        assert not empty, f"no rows for {empty}: the comparison would prove little"

        placement = body["placement"]
        assert placement is not None
        producers = placement["producers"]
        consumers = placement["consumers"]
        # The three CQELS queries over the same join read one shared producer task.
        shared_join = [
            p for p, d in producers.items() if {"cqels-Q1", "cqels-Q3", "agg-cqels-Q1"} <= set(d["queries"])
        ]
        assert shared_join, producers
        # Some query's tasks run on more than one container.
        spread = [
            q
            for q, c in consumers.items()
            if any(producers[p]["container"] != c["container"] for p in c["reads"])
        ]
        assert spread, placement
        assert placement["remote_edges"]
        assert (
            len({d["container"] for d in producers.values()} | {c["container"] for c in consumers.values()})
            == 3
        )

        # Batches really crossed containers: the producers' and consumers' edge counters.
        members = members_meta(cluster)
        sent = received = 0.0
        for meta in members.values():
            counts = edge_batches(meta["metrics"])
            sent += counts.get("sent", 0.0)
            received += counts.get("received", 0.0)
        assert sent > 0 and received > 0
        assert received == sent  # every batch sent was taken by its consumer
        edges = {(p, consumers[q]["container"]) for q, p, _ in placement["remote_edges"]}
        assert received >= len(edges) * MAX_REPORTS  # one batch per edge and tick, at least
    finally:
        cluster.stop()


def members_meta(cluster: LocalCluster) -> dict[str, dict]:
    """Membership metadata of the cluster's containers, by id."""
    from kazoo.client import KazooClient

    client = KazooClient(hosts=cluster.hosts, timeout=5.0, auth_data=ZK_AUTH.auth_data)
    client.start(timeout=10)
    try:
        return {cid: m.meta for cid, m in Membership(client).members().items()}
    finally:
        client.stop()
        client.close()


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


def test_operator_placement_survives_an_added_and_a_drained_container(
    workload: Workload, tmp_path: Path, zk_server: str, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Consumer and producer tasks move (to a new container, off a drained one); results stay equal."""
    from kazoo.client import KazooClient

    cluster = LocalCluster(
        tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S, capacity=8
    )
    client = KazooClient(hosts=f"{zk_server}{zk_chroot}", timeout=5.0, auth_data=ZK_AUTH.auth_data)
    engines: list[ClusterEngine] = []
    added: list[str] = []
    drained: list[str] = []

    def owners() -> dict[str, str | None]:
        return {t: a.container for t, a in AssignmentTable(client).all().items()}

    def settle() -> None:
        engine = engines[0]

        def settled() -> bool:
            engine.pump(0.05)
            engine.admit()
            engine.migrate()
            return engine.settled()

        wait_until(settled, "every query ready on its ZooKeeper owner")

    def on_tick(seq: int, _c: int) -> None:
        if seq == 8:
            added.extend(cluster.add_containers(1))
            wait_until(lambda: added[0] in owners().values(), "tasks moved to the new container")
            settle()
        elif seq == 16:
            # The busiest producer host: its queries and its producers leave.
            placement = engines[0].placement
            assert placement is not None
            hosts = [d["container"] for d in placement["producers"].values()]  # type: ignore[attr-defined]
            drained.append(max(sorted(set(hosts)), key=hosts.count))
            Membership(client).request_drain(drained[0])
            wait_until(lambda: drained[0] not in owners().values(), "the drained container emptied")
            settle()

    try:
        cluster.start(3, 1)
        client.start(timeout=10)
        got = tmp_path / "cluster.jsonl"
        with open(got, "w", encoding="utf-8") as out:
            result = replay_on_cluster(
                cluster.hosts,
                workload.queries,
                workload.streams,
                workload.statics,
                out,
                base=workload.base,
                max_reports=MAX_REPORTS,
                answer_timeout=30.0,
                placement="operators",
                on_tick=on_tick,
                security=cluster.security,
                on_start=engines.append,
            )
        assert result.lost == []
        capsys.readouterr()
        assert load_tool("compare_results").main([str(workload.expected), str(got)]) == 0, (
            capsys.readouterr().out
        )
        assert result.placement is not None and result.placement["remote_edges"]
        moved_in = [s for s in result.switches if s.dst == added[0]]
        moved_out = [s for s in result.switches if s.src == drained[0]]
        assert moved_in and all(s.seq > 8 for s in moved_in)
        assert moved_out and all(s.seq > 16 for s in moved_out)
        # Once the run is over the drained container has nothing left and exits.
        wait_until(lambda: not pid_alive(cluster.pid(drained[0])), "the drained container to exit")
    finally:
        client.stop()
        client.close()
        cluster.stop()
