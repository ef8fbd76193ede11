"""Hash-partitioned shared joins on the operator path (``--parallelism K``).

The CityBench workload of ``test_operator_placement.py`` replayed on three container
processes with every partitionable shared join split into K instances (K = 2, 3): each
instance joins only the rows of its inputs that the fields grouping of the join
variable (a stable hash of the term) sends to it, and the consumers add the instances'
outputs up.  The results must equal the embedded replay, and the containers' metrics
must show that every instance joined exactly its share of the input (the instances'
kept rows add up to the input) and that every row a consumer received from instance
``i`` hashes to ``i`` (checked by the consumer, with its own dictionary).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from linkstream.cluster.localcluster import LocalCluster
from tests.cluster.test_operator_moves import metric
from tests.cluster.test_operator_placement import (
    SESSION_S,
    Workload,
    make_workload,
    members_meta,
)
from tests.shared_paths import load_tool

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """The operator-placement workload and its embedded results."""
    return make_workload(tmp_path_factory)


@pytest.mark.parametrize("k", [2, 3])
def test_partitioned_joins_equal_embedded_and_split_their_input(
    k: int,
    workload: Workload,
    tmp_path: Path,
    zk_server: str,
    zk_chroot: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cluster = LocalCluster(
        tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S, capacity=24
    )
    try:
        cluster.start(3, 1)
        got, stats = tmp_path / "cluster.jsonl", tmp_path / "stats.json"
        argv = ["replay", *workload.args, "--zk", cluster.hosts, "--placement", "operators"]
        argv += ["--parallelism", str(k), "--out", str(got), "--stats", str(stats)]
        capsys.readouterr()
        assert cli_main(argv) == 0, capsys.readouterr().err
        body = json.loads(stats.read_text())
        assert body["lost"] == []
        capsys.readouterr()
        assert load_tool("compare_results").main([str(workload.expected), str(got)]) == 0, (
            capsys.readouterr().out
        )

        placement = body["placement"]
        assert placement["parallelism"] == k
        partitioned = {p: d for p, d in placement["producers"].items() if d["partition"]}
        # The three CQELS queries' shared join (routes), and Q11's join whose every input
        # binds the partition variable, are among them.
        assert any({"cqels-Q1", "cqels-Q3"} <= set(d["queries"]) for d in partitioned.values())
        assert any("cqels-Q11" in d["queries"] for d in partitioned.values())
        for pid, d in partitioned.items():
            assert sorted(d["instances"]) == [f"{pid}.{i}" for i in range(k)]
        hosts = {c for d in partitioned.values() for c in d["instances"].values()}
        assert len(hosts) > 1  # instances spread over containers

        rows_in: dict[str, float] = {}
        kept: dict[str, float] = {}
        own: dict[str, float] = {}
        foreign = 0.0
        for meta in members_meta(cluster).values():
            for labels, v in metric(
                meta["metrics"], "linkstream_operator_partition_input_rows_total"
            ).items():
                d = dict(labels)
                (rows_in if d["rows"] == "in" else kept)[d["channel"]] = v
            for labels, v in metric(meta["metrics"], "linkstream_operator_partition_rows_total").items():
                d = dict(labels)
                if d["check"] == "foreign":
                    foreign += v
                else:
                    own[d["channel"]] = own.get(d["channel"], 0.0) + v
        assert foreign == 0  # no consumer received a row of another instance's partition
        split = 0
        for pid in partitioned:
            chans = [f"{pid}.{i}" for i in range(k)]
            ins = {rows_in[ch] for ch in chans}
            assert len(ins) == 1, (pid, ins)  # every instance reads the same input ...
            assert sum(kept[ch] for ch in chans) == ins.pop()  # ... and keeps a disjoint share
            split += sum(1 for ch in chans if kept[ch] > 0) > 1
        assert split, "no join's input was spread over more than one instance"
        assert sum(1 for v in own.values() if v > 0) >= 2  # several instances produced rows
    finally:
        cluster.stop()
