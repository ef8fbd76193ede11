"""Producer channels of operator placement move: a drained host, a SIGKILLed host.

The CityBench workload of ``test_operator_placement.py`` on three container processes
with a real ZooKeeper and coordinator (the drain with two hash-partitioned instances
of every partitionable join).  Producer channels are ZooKeeper tasks; when the
coordinator moves them (drain) or fails them over (a container killed with SIGKILL),
the driver tells the new host, which rebuilds the producer from its stream buffers and
sends its whole state as the first batch of a new generation.  The results must equal
the embedded replay (every line, or every line not reported lost with a dead
container's own queries), and the moves must have happened.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from linkstream.cluster.localcluster import LocalCluster, pid_alive
from linkstream.cluster.replay import ClusterEngine, ClusterReplayResult, replay_on_cluster
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.membership import Membership
from tests.cluster.test_operator_placement import (
    MAX_REPORTS,
    SESSION_S,
    Workload,
    make_workload,
    members_meta,
    wait_until,
)
from tests.conftest import ZK_AUTH
from tests.shared_paths import load_tool

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """The operator-placement workload and its embedded results."""
    return make_workload(tmp_path_factory)


CAPACITY = 16


def metric(address: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Samples of metric ``name`` of one container, by their labels."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://{address}/metrics", timeout=10) as resp:
        text = resp.read().decode("utf-8")
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def channel_hosts(placement: dict[str, Any]) -> dict[str, str]:
    """Producer channel -> its initial host."""
    return {ch: c for d in placement["producers"].values() for ch, c in d["instances"].items()}


def zk_owners(client: KazooClient, placement: dict[str, Any]) -> dict[str, str | None]:
    """Producer channel -> its owner in ZooKeeper."""
    table = AssignmentTable(client)
    out = {}
    for ch, task in placement["tasks"].items():
        a = table.get(task)
        out[ch] = None if a is None else a.container
    return out


def compare_kept(workload: Workload, got: Path, result: ClusterReplayResult, tmp_path: Path, capsys) -> None:
    """``got`` equals the embedded replay without the lines reported lost."""
    lost = {(x.query, x.t) for x in result.lost}
    kept = tmp_path / "expected-kept.jsonl"
    with open(workload.expected) as src, open(kept, "w") as dst:
        for line in src:
            row = json.loads(line)
            if (row["query"], row["t"]) not in lost:
                dst.write(line)
    capsys.readouterr()
    assert load_tool("compare_results").main([str(kept), str(got)]) == 0, capsys.readouterr().out


def run(workload: Workload, cluster: LocalCluster, out: Path, **kw: Any) -> ClusterReplayResult:
    with open(out, "w", encoding="utf-8") as fh:
        return replay_on_cluster(
            cluster.hosts,
            workload.queries,
            workload.streams,
            workload.statics,
            fh,
            base=workload.base,
            max_reports=MAX_REPORTS,
            answer_timeout=30.0,
            placement="operators",
            security=cluster.security,
            **kw,
        )


def test_a_drained_producer_host_hands_its_producers_over(
    workload: Workload, tmp_path: Path, zk_server: str, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = LocalCluster(
        tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S, capacity=CAPACITY
    )
    client = KazooClient(hosts=f"{zk_server}{zk_chroot}", timeout=5.0, auth_data=ZK_AUTH.auth_data)
    engines: list[ClusterEngine] = []
    drained: list[str] = []
    moved: dict[str, str | None] = {}

    def on_tick(seq: int, _c: int) -> None:
        if seq != 12:
            return
        engine = engines[0]
        placement: dict[str, Any] = engine.placement  # type: ignore[assignment]
        hosts = channel_hosts(placement)
        counts = {c: list(hosts.values()).count(c) for c in set(hosts.values())}
        drained.append(min(sorted(counts), key=lambda c: -counts[c]))  # the busiest producer host
        Membership(client).request_drain(drained[0])
        mine = [ch for ch, c in hosts.items() if c == drained[0]]
        wait_until(
            lambda: all(zk_owners(client, placement)[ch] not in (None, drained[0]) for ch in mine),
            "the drained container's producer tasks to move in ZooKeeper",
        )
        moved.update({ch: zk_owners(client, placement)[ch] for ch in mine})

        def settled() -> bool:
            engine.pump(0.05)
            engine.admit()
            engine.migrate()
            return engine.settled()

        wait_until(settled, "every query ready on its ZooKeeper owner")

    try:
        cluster.start(3, 1)
        client.start(timeout=10)
        got = tmp_path / "cluster.jsonl"
        # Two instances per partitionable join: partitioned channels move as well.
        result = run(workload, cluster, got, on_tick=on_tick, on_start=engines.append, parallelism=2)
        assert result.lost == []
        assert result.recovered == []  # a drain moves tasks; no container died
        compare_kept(workload, got, result, tmp_path, capsys)
        placement = result.placement
        assert placement is not None and drained and moved
        # Every channel of the drained container moved to the owner ZooKeeper gave it,
        # as a new generation, after the drain began.
        moves = {m["channel"]: m for m in placement["moves"]}  # type: ignore[index]
        for ch, owner in moved.items():
            assert ch in moves and moves[ch]["from"] == drained[0] and moves[ch]["to"] == owner, (
                moved,
                placement["moves"],
            )
            assert moves[ch]["gen"] >= 2 and moves[ch]["sent"]
        # The new hosts built them (a hosting "moved"), and the old host let go of them:
        # it held no query and no producer any more, so it left once the drain completed.
        rebuilt = 0.0
        for meta in members_meta(cluster).values():
            for labels, v in metric(meta["metrics"], "linkstream_operator_hostings_total").items():
                if ("reason", "moved") in labels:
                    rebuilt += v
        assert rebuilt >= len(moved)
        takeovers = sum(
            v
            for meta in members_meta(cluster).values()
            for v in metric(meta["metrics"], "linkstream_operator_channel_takeovers_total").values()
        )
        assert takeovers >= 1  # consumers switched to the new hosts' generations
        wait_until(lambda: not pid_alive(cluster.pid(drained[0])), "the drained container to exit")
    finally:
        client.stop()
        client.close()
        cluster.stop()


def test_a_killed_producer_host_is_replaced_without_a_hang(
    workload: Workload, tmp_path: Path, zk_server: str, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = LocalCluster(
        tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S, capacity=CAPACITY
    )
    engines: list[ClusterEngine] = []
    victim: list[str] = []
    victim_channels: list[str] = []
    victim_queries: set[str] = set()

    def on_tick(seq: int, _c: int) -> None:
        engine = engines[0]
        if seq == 8:
            placement: dict[str, Any] = engine.placement  # type: ignore[assignment]
            hosts = channel_hosts(placement)
            counts = {c: list(hosts.values()).count(c) for c in set(hosts.values())}
            victim.append(min(sorted(counts), key=lambda c: -counts[c]))
            victim_channels.extend(ch for ch, c in hosts.items() if c == victim[0])
            victim_queries.update(n for n, c in engine.answerers().items() if c == victim[0])
            cluster.kill(victim[0], signal.SIGKILL)  # tick 9 goes out before anyone knows

    t0 = time.monotonic()
    try:
        cluster.start(3, 1)
        got = tmp_path / "cluster.jsonl"
        result = run(workload, cluster, got, on_tick=on_tick, on_start=engines.append)
        elapsed = time.monotonic() - t0
        assert elapsed < 60, f"took {elapsed:.1f}s"
        assert victim and victim_channels
        # Only the dead container's own queries lost lines (its producers' consumers
        # waited for the new hosts instead); everything else equals the embedded replay.
        assert {x.container for x in result.lost} <= {victim[0]}
        assert {x.query for x in result.lost} <= victim_queries
        compare_kept(workload, got, result, tmp_path, capsys)
        placement = result.placement
        assert placement is not None
        # Each of its channels moved off it (maybe first to a fallback host, as soon as
        # its death was seen, then to the owner the coordinator chose), with increasing
        # generations, and never back.
        moves: dict[str, list[dict[str, Any]]] = {}
        for m in placement["moves"]:  # type: ignore[attr-defined]
            moves.setdefault(m["channel"], []).append(m)
        for ch in victim_channels:
            assert moves[ch][0]["from"] == victim[0], moves
            assert all(m["to"] != victim[0] and m["sent"] for m in moves[ch])
            assert [m["gen"] for m in moves[ch]] == list(range(2, 2 + len(moves[ch])))
        assert victim[0] in placement["gone"]  # type: ignore[operator]
        # The surviving consumers switched their channels to the new hosts' generations.
        takeovers = sum(
            v
            for meta in members_meta(cluster).values()
            for v in metric(meta["metrics"], "linkstream_operator_channel_takeovers_total").values()
        )
        assert takeovers >= 1
    finally:
        cluster.stop()
