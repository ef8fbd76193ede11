"""Stream-affinity placement on a real cluster: fewer subscriptions, results unchanged.

A real ZooKeeper, one coordinator and three container processes run the ``spread``
workload of ``bench/cluster.py`` (six CityBench queries in both dialects over nine
streams) twice, with and without affinity (the driver names each query's streams in its
task spec, or not).  Both runs must equal the embedded replay, and with affinity the
driver must route each stream to fewer containers: the total of ``(container, stream)``
subscriptions it serves is lower, and so is the number of elements it sends.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from linkstream.cluster.localcluster import LocalCluster
from linkstream.cluster.replay import ClusterEngine, ClusterReplayResult, replay_on_cluster
from linkstream.query.continuous import parse_continuous
from tests.shared_paths import load_tool, shared_or_skip

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

SPREAD = [f"{d}-{q}" for q in ("Q4", "Q5", "Q7", "Q10", "Q11", "Q12") for d in ("csparql", "cqels")]
MAX_REPORTS = 30
SESSION_S = 2.0


def test_affinity_lowers_subscriptions_and_keeps_results_equal_to_embedded(
    tmp_path: Path, zk_server: str, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    base = manifest.get("base", "http://localhost/")
    by_id = {q["id"]: q for q in manifest["queries"]}
    args = ["--base", base, "--default-step", "1000", "--max-reports", str(MAX_REPORTS), "--quiet"]
    streams: dict[str, str] = {}
    statics: dict[str | None, str] = {}
    queries = []
    for qid in SPREAD:
        q = by_id[qid]
        path = tmp_path / f"{qid}.rq"
        shutil.copy(shared / q["query"], path)
        args += ["--query", str(path)]
        queries.append(parse_continuous(path.read_text(), default_name=qid, base=base, source=str(path)))
        for s in q["streams"]:
            streams[s["iri"]] = str(shared / s["path"])
        for s in q["statics"]:
            statics[s["iri"]] = str(shared / s["path"])
    for iri, p in streams.items():
        args += ["--stream", f"{iri}={p}"]
    for iri, p in statics.items():
        args += ["--static", f"{iri}={p}" if iri else p]
    expected = tmp_path / "embedded.jsonl"
    assert cli_main(["replay", *args, "--out", str(expected)]) == 0
    assert expected.stat().st_size > 0
    compare = load_tool("compare_results").main

    def run(cluster: LocalCluster, affinity: bool) -> tuple[ClusterReplayResult, int]:
        engines: list[ClusterEngine] = []
        peak: list[int] = [0]

        def on_tick(_seq: int, _c: int) -> None:
            fanout = engines[0].fanout
            total = sum(len(fanout.subscribed(cid)) for cid in fanout.peers)
            peak[0] = max(peak[0], total)

        out = tmp_path / f"cluster-{affinity}.jsonl"
        with open(out, "w", encoding="utf-8") as f:
            result = replay_on_cluster(
                cluster.hosts,
                queries,
                list(streams.items()),
                list(statics.items()),
                f,
                base=base,
                max_reports=MAX_REPORTS,
                answer_timeout=20.0,
                on_start=engines.append,
                on_tick=on_tick,
                affinity=affinity,
                security=cluster.security,
            )
        capsys.readouterr()
        assert compare([str(expected), str(out)]) == 0, capsys.readouterr().out
        assert result.lost == [] and result.route == "streams"
        assert sorted(result.containers) == ["oc-1", "oc-2", "oc-3"]
        return result, peak[0]

    cluster = LocalCluster(
        tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S, capacity=len(SPREAD)
    )
    try:
        cluster.start(3, 1)
        plain, plain_subs = run(cluster, affinity=False)
        near, near_subs = run(cluster, affinity=True)
    finally:
        cluster.stop()
    # Every query reads its streams on one container, and the nine streams each reach at
    # least one: affinity can do no better than nine, and comes within a few of it (how
    # close depends on the order in which the containers join: 11 or 12 in practice),
    # never worse than load-only placement (which, for a rare task order, may be optimal
    # too: so this is not a strict inequality).
    assert len(streams) <= near_subs <= len(streams) + 3, (near_subs, plain_subs)
    assert near_subs <= plain_subs, (near_subs, plain_subs)
    assert near.elements_sent <= plain.elements_sent
    # Still spread over the three containers (the load tolerance bounds the imbalance).
    assert len({cid for cid, n in near.elements_by_container.items() if n > 0}) == 3
