"""Acceptance 1 of cluster mode: every CityBench query on 3 containers equals embedded mode.

One cluster (a real ZooKeeper, a coordinator and three container processes) serves two
replays, each registering a whole group of queries at once, rather than one cluster per
query: the 31 light queries over their 11 streams for the first ``LIGHT_REPORTS`` report
times, then the 6 heavy ones (Q8, Q10_5, Q10_8 of both dialects, thousands of rows per
report) for ``HEAVY_REPORTS``.  Each replay's result file must equal the embedded replay
of the same arguments under ``compare_results.py`` (SEMANTICS.md §6).

Each group is replayed twice on the cluster: by the replay driver (``replay --zk``) and
as a client of the cluster's live service (what ``replay --cluster N`` runs,
:func:`linkstream.cluster.apireplay.replay_through_api`: the queries registered in one
batch on the coordinator's API, the files pushed over HTTP, the results read back).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from linkstream.api.client import Client
from linkstream.cli import main as cli_main
from linkstream.cluster.apireplay import replay_through_api
from linkstream.cluster.localcluster import LocalCluster
from linkstream.engine.embedded import Engine, RegisteredQuery
from linkstream.query.continuous import parse_continuous
from tests.shared_paths import load_tool, shared_or_skip

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

HEAVY = {"Q8", "Q10_5", "Q10_8"}  # manifest names with thousands of rows per report
LIGHT_REPORTS = 150  # every light query but the two always-empty ones has rows by then
HEAVY_REPORTS = 4  # Q10_8's third report alone has 3^8 rows
ALWAYS_EMPTY = {"Q12", "location_parking_1"}  # per the manifest's notes
SESSION_S = 2.0


def replay_args(shared: Path, queries: list[dict], base: str, tmp: Path, max_reports: int) -> list[str]:
    """Replay arguments registering ``queries`` (named by manifest id) in one run."""
    args = ["--base", base, "--default-step", "1000", "--max-reports", str(max_reports), "--quiet"]
    streams: dict[str, str] = {}
    statics: dict[str | None, str] = {}
    for q in queries:
        path = tmp / f"{q['id']}.rq"  # csparql-Q4 and cqels-Q4 must not share a name
        shutil.copy(shared / q["query"], path)
        args += ["--query", str(path)]
        for s in q["streams"]:
            streams[s["iri"]] = str(shared / s["path"])
        for s in q["statics"]:
            statics[s["iri"]] = str(shared / s["path"])
    for iri, path in streams.items():
        args += ["--stream", f"{iri}={path}"]
    for iri, path in statics.items():
        args += ["--static", f"{iri}={path}" if iri else path]
    return args


def service_flags(shared: Path, queries: list[dict], base: str) -> list[str]:
    """``run --zk`` flags of a coordinator that serves replays of ``queries``: their static
    graphs, the base, and streams that never go idle (the replay client sets watermarks)."""
    statics: dict[str | None, str] = {}
    for q in queries:
        for s in q["statics"]:
            statics[s["iri"]] = str(shared / s["path"])
    flags = ["--idle-ms", "0", "--base", base, "--default-step", "1000"]
    for iri, path in statics.items():
        flags += ["--static", f"{iri}={path}" if iri else path]
    return flags


def api_replay(
    service: LocalCluster, args: list[str], base: str, out: Path, max_reports: int
) -> dict[str, int]:
    """The replay of ``args`` (queries and streams) through the live service of ``service``."""
    (url,) = service.api_urls(timeout=30).values()
    scratch = Engine(default_step=1000)
    queries: list[RegisteredQuery] = []
    streams: list[tuple[str, str]] = []
    for flag, value in zip(args, args[1:], strict=False):
        if flag == "--query":
            cq = parse_continuous(Path(value).read_text(), default_name=Path(value).stem, base=base)
            queries.append(scratch.register(cq))
        elif flag == "--stream":
            iri, path = value.split("=", 1)
            streams.append((iri, path))
    with Client(url) as client, open(out, "w", encoding="utf-8") as f:
        result = replay_through_api(client, queries, streams, f, max_reports=max_reports)
    assert sorted(result.containers) == ["oc-1", "oc-2", "oc-3"]
    return result.reports


def rows_by_query(path: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            name = json.loads(line)["query"]
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_every_citybench_query_on_three_containers_equals_embedded(
    tmp_path: Path, zk_server: str, zk_chroot: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    base = manifest.get("base", "http://localhost/")
    light = [q for q in manifest["queries"] if q["name"] not in HEAVY]
    heavy = [q for q in manifest["queries"] if q["name"] in HEAVY]
    assert sorted(q["id"] for q in light + heavy) == sorted(q["id"] for q in manifest["queries"])
    assert len(heavy) == 6

    compare = load_tool("compare_results").main
    cluster = LocalCluster(
        tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S, capacity=32
    )
    try:
        cluster.start(3, 1)
        for label, group, max_reports in (("light", light, LIGHT_REPORTS), ("heavy", heavy, HEAVY_REPORTS)):
            work = tmp_path / label
            work.mkdir()
            args = replay_args(shared, group, base, work, max_reports)
            expected, got, stats = work / "embedded.jsonl", work / "cluster.jsonl", work / "stats.json"
            assert cli_main(["replay", *args, "--out", str(expected)]) == 0
            argv = ["replay", *args, "--zk", cluster.hosts, "--out", str(got), "--stats", str(stats)]
            assert cli_main(argv) == 0, capsys.readouterr().err
            capsys.readouterr()
            assert compare([str(expected), str(got)]) == 0, f"{label}: {capsys.readouterr().out}"
            body = json.loads(stats.read_text())
            assert body["lost"] == [] and body["route"] == "streams"
            assert sorted(body["containers"]) == ["oc-1", "oc-2", "oc-3"]
            assert sorted(body["answerers"]) == sorted(q["id"] for q in group)
            assert len(set(body["answerers"].values())) == 3, f"{label}: not spread over 3 containers"
            # Equal files of empty results would prove little: every query that can have
            # rows in these report times has them.
            rows = rows_by_query(got)
            empty = sorted(q["id"] for q in group if q["name"] not in ALWAYS_EMPTY and not rows.get(q["id"]))
            assert not empty, f"{label}: no rows for {empty}"
            # The same replay as a client of a live service (replay --cluster N).  Its report
            # times only grow, so each group gets a service of its own (another cluster root).
            service = LocalCluster(
                tmp_path / f"service-{label}",
                zk=f"{zk_server}{zk_chroot}",
                session_timeout=SESSION_S,
                capacity=32,
                coordinator_args=service_flags(shared, group, base),
            )
            service.state.root = f"/service-{label}"
            try:
                service.start(3, 1)
                live = work / "service.jsonl"
                reports = api_replay(service, args, base, live, max_reports)
            finally:
                service.stop()
            assert compare([str(expected), str(live)]) == 0, f"{label} (service): {capsys.readouterr().out}"
            assert reports == {q["id"]: max_reports for q in group}
    finally:
        cluster.stop()
