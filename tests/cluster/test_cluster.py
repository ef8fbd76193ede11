"""Cluster mode end to end: a real ZooKeeper, coordinator and container processes.

Every test replays the same CityBench workload (12 queries of the shared manifest, the
first ``MAX_REPORTS`` report times) and compares with the embedded replay of the same
arguments, computed once per module.  Changes to the cluster happen inside the driver's
``on_tick`` hook, so they fall in the middle of the replay however fast it runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from prometheus_client.parser import text_string_to_metric_families

from linkstream.cli import main as cli_main
from linkstream.cluster.localcluster import LocalCluster, pid_alive
from linkstream.cluster.replay import ClusterEngine, ClusterReplayResult, replay_on_cluster, task_id
from linkstream.containers.security import Security
from linkstream.engine.embedded import Engine
from linkstream.operators.base import Operator
from linkstream.operators.state import migratable as state_migratable
from linkstream.operators.window import WindowOperator
from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.membership import Membership
from linkstream.scheduler.status import cluster_status
from tests.conftest import ZK_AUTH
from tests.shared_paths import load_tool, shared_or_skip

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

REPO = Path(__file__).resolve().parents[2]
QUERY_IDS = [
    "csparql-Q4",
    "csparql-Q6",
    "csparql-Q7",
    "csparql-Q9",
    "csparql-Q10",
    "csparql-Q11",
    "csparql-pollution_weather_1",
    "cqels-Q4",
    "cqels-Q6",
    "cqels-Q9",
    "cqels-Q11",
    "cqels-pollution_weather_1",
]
EMPTY_PLANS = {"csparql-Q11"}  # queries whose plan holds no state (no rows, no bytes)
MAX_REPORTS = 40
SESSION_S = 2.0  # containers' and coordinators' ZooKeeper session timeout
WAIT_S = 30.0


def wait_until(predicate: Callable[[], object], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.05)


@dataclass
class Workload:
    args: list[str]  # replay arguments shared by embedded and cluster runs
    queries: list[ContinuousQuery]
    streams: list[tuple[str, str]]
    statics: list[tuple[str | None, str]]
    base: str
    expected: Path


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    """The query set, and its embedded replay's results as the expectation."""
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    base = manifest.get("base", "http://localhost/")
    by_id = {q["id"]: q for q in manifest["queries"]}
    tmp = tmp_path_factory.mktemp("workload")
    args = ["--base", base, "--default-step", "1000", "--max-reports", str(MAX_REPORTS), "--quiet"]
    streams: dict[str, str] = {}
    statics: dict[str | None, str] = {}
    queries = []
    for qid in QUERY_IDS:
        q = by_id[qid]
        path = tmp / f"{qid}.rq"  # names queries by id: csparql-Q4 and cqels-Q4 differ
        shutil.copy(shared / q["query"], path)
        args += ["--query", str(path)]
        queries.append(parse_continuous(path.read_text(), default_name=qid, base=base, source=str(path)))
        for s in q["streams"]:
            streams[s["iri"]] = str(shared / s["path"])
        for s in q["statics"]:
            statics[s["iri"]] = str(shared / s["path"])
    for iri, path in streams.items():
        args += ["--stream", f"{iri}={path}"]
    for iri, path in statics.items():
        args += ["--static", f"{iri}={path}" if iri else path]
    expected = tmp / "embedded.jsonl"
    assert cli_main(["replay", *args, "--out", str(expected)]) == 0
    assert expected.stat().st_size > 0
    return Workload(args, queries, list(streams.items()), list(statics.items()), base, expected)


@pytest.fixture
def start_cluster(tmp_path: Path, zk_server: str, zk_chroot: str) -> Iterator[Callable[..., LocalCluster]]:
    """Starts coordinator and container processes against the test's ZooKeeper chroot."""
    started: list[LocalCluster] = []

    def start(containers: int = 3, coordinators: int = 1, capacity: int = 8) -> LocalCluster:
        cluster = LocalCluster(
            tmp_path / f"cluster{len(started)}",
            zk=f"{zk_server}{zk_chroot}",
            session_timeout=SESSION_S,
            capacity=capacity,
        )
        started.append(cluster)
        cluster.start(containers, coordinators)
        return cluster

    yield start
    for cluster in started:
        cluster.stop()


def owners(client: KazooClient) -> dict[str, str | None]:
    return {t: a.container for t, a in AssignmentTable(client).all().items()}


def settle(engine: ClusterEngine) -> None:
    """Waits (on the driver's thread) until every moved query is ready on its new owner."""

    def settled() -> bool:
        engine.pump(0.05)
        engine.admit()  # a container that joined meanwhile gets its sync message
        engine.migrate()  # stateful moves: the new owner gets the operator state now
        return engine.settled()

    wait_until(settled, "every query ready on its ZooKeeper owner")


def compare(expected: Path, got: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    rc = load_tool("compare_results").main([str(expected), str(got)])
    assert rc == 0, capsys.readouterr().out


def run(workload: Workload, hosts: str, out: Path, **kwargs: object) -> ClusterReplayResult:
    with open(out, "w", encoding="utf-8") as f:
        return replay_on_cluster(
            hosts,
            workload.queries,
            workload.streams,
            workload.statics,
            f,
            base=workload.base,
            max_reports=MAX_REPORTS,
            answer_timeout=20.0,
            security=Security.secure(ZK_AUTH),
            **kwargs,  # type: ignore[arg-type]
        )


def test_three_containers_equal_embedded(
    workload: Workload, start_cluster: Callable[..., LocalCluster], tmp_path: Path, capsys, kazoo_client
) -> None:
    cluster = start_cluster(3)
    out, stats = tmp_path / "cluster.jsonl", tmp_path / "stats.json"
    argv = ["replay", *workload.args, "--zk", cluster.hosts, "--out", str(out), "--stats", str(stats)]
    assert cli_main(argv) == 0, capsys.readouterr().err
    compare(workload.expected, out, capsys)
    body = json.loads(stats.read_text())
    assert sorted(body["containers"]) == ["oc-1", "oc-2", "oc-3"]
    assert len(set(body["answerers"].values())) == 3  # the queries were spread over all three
    assert body["lost"] == []
    status = cluster_status(kazoo_client)
    assert [c["id"] for c in status["containers"]] == ["oc-1", "oc-2", "oc-3"]
    assert status["leader"] == "coord-1" and status["run"] is None and status["tasks"] == []


def stream_elements(metrics: str) -> dict[str, float]:
    """``linkstream_stream_elements_total`` of one container, by stream IRI."""
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "linkstream_stream_elements_total":
                out[sample.labels["stream"]] = sample.value
    return out


def test_routing_sends_each_container_only_the_streams_of_its_queries(
    workload: Workload, start_cluster: Callable[..., LocalCluster], tmp_path: Path, capsys, kazoo_client
) -> None:
    cluster = start_cluster(3)
    out = tmp_path / "routed.jsonl"
    routed = run(workload, cluster.hosts, out)
    assert routed.lost == [] and routed.route == "streams"
    compare(workload.expected, out, capsys)
    assert len(routed.switches) == len(workload.queries)  # placed once, never moved
    hosts = {s.query: s.dst for s in routed.switches}
    reads = {cq.name: {w.stream for w in cq.windows} for cq in workload.queries}
    every = {iri for iri, _ in workload.streams}
    left_out = 0
    for c in cluster_status(kazoo_client)["containers"]:
        got = stream_elements(c["metrics"])
        mine = set().union(*(reads[q] for q, h in hosts.items() if h == c["id"]))
        assert mine, f"{c['id']} holds no query"
        # A container hosting no query of stream S received no element of S ...
        assert {s: got[s] for s in every - mine if got.get(s)} == {}, c["id"]
        # ... and every element of the streams its queries read (the driver's count).
        assert all(got.get(s, 0) > 0 for s in mine), (c["id"], got)
        assert sum(got.values()) == routed.elements_by_container[c["id"]]
        left_out += len(every - mine)
    assert left_out > 0, "every container reads every stream: the workload proves nothing"
    # The broadcast route, on the same cluster, gives the same results for more bytes.
    out = tmp_path / "broadcast.jsonl"
    broadcast = run(workload, cluster.hosts, out, route="broadcast")
    assert broadcast.lost == [] and broadcast.route == "broadcast"
    compare(workload.expected, out, capsys)
    assert routed.elements_sent < broadcast.elements_sent
    assert routed.element_bytes < broadcast.element_bytes


def _has_window_state(root: Operator) -> bool:
    """Whether a query planned as ``root`` can migrate state that reads a stream window."""
    return state_migratable(root) and any(isinstance(op, WindowOperator) for op in root.walk())


def test_add_and_drain_mid_replay_keeps_results_equal(
    workload: Workload, start_cluster: Callable[..., LocalCluster], tmp_path: Path, capsys, kazoo_client
) -> None:
    cluster = start_cluster(3)
    engines: list[ClusterEngine] = []
    added: list[str] = []
    drained: list[str] = []
    scratch = Engine(default_step=1000, log_fn=lambda _m: None)
    # (with window state to ship: csparql-Q11's folded plan, an empty constant, has none)
    migratable = [cq.name for cq in workload.queries if _has_window_state(scratch.register(cq).root)]
    assert migratable

    def on_tick(seq: int, _c: int) -> None:
        if seq == 8:
            added.extend(cluster.add_containers(1))
            wait_until(lambda: added[0] in owners(kazoo_client).values(), "tasks moved to the new container")
            settle(engines[0])
        elif seq == 16:
            # Drain a container holding a query whose state can migrate (not on a router).
            held = owners(kazoo_client)
            candidates = {held[task_id(n)] for n in migratable} - {added[0], None}
            drained.append(max(sorted(candidates)))
            Membership(kazoo_client).request_drain(drained[0])
            wait_until(
                lambda: drained[0] not in owners(kazoo_client).values(), "the drained container emptied"
            )
            settle(engines[0])

    out = tmp_path / "cluster.jsonl"
    result = run(workload, cluster.hosts, out, on_tick=on_tick, on_start=engines.append)
    assert result.lost == [] and result.route == "streams"
    compare(workload.expected, out, capsys)
    # The container added mid-replay subscribed to its queries' streams (their backlog
    # came in a sync) and was sent their elements from then on.
    assert result.elements_by_container[added[0]] > 0
    moved_in = [s for s in result.switches if s.dst == added[0]]
    # (The join's rebalance may also have moved queries off the container drained later.)
    moved_out = [s for s in result.switches if s.src == drained[0] and s.seq > 16]
    assert moved_in and all(s.seq > 8 for s in moved_in)
    assert moved_out
    # The moves carried operator state (join relations, aggregates, results), restored by
    # the new owners rather than re-derived from their stream buffers.
    shipped = [m for m in result.migrations if m.shipped]
    assert {m.src for m in shipped} >= {drained[0]}, result.migrations
    # (a routed query whose routers' unit came with another query's move has 0 bytes, and
    # so has csparql-Q11, planned as an empty constant: FILTER(!BOUND) of a bound variable)
    assert all(m.bytes > 0 or m.unit or m.query in EMPTY_PLANS for m in shipped)
    assert sum(m.rows for m in shipped) > 0
    restored_rows = 0.0
    for c in cluster_status(kazoo_client)["containers"]:
        with urllib.request.urlopen(f"http://{c['metrics']}/metrics", timeout=10) as resp:
            for family in text_string_to_metric_families(resp.read().decode()):
                for sample in family.samples:
                    if (
                        sample.name == "linkstream_state_migrated_rows_total"
                        and sample.labels["direction"] == "in"
                    ):
                        restored_rows += sample.value
    assert restored_rows > 0
    wait_until(lambda: not pid_alive(cluster.pid(drained[0])), "the drained container to exit")


def test_standby_coordinator_takes_over(
    workload: Workload, start_cluster: Callable[..., LocalCluster], tmp_path: Path, capsys, kazoo_client
) -> None:
    cluster = start_cluster(3, coordinators=2)
    engines: list[ClusterEngine] = []
    election = kazoo_client.Election("/linkstream/leader")
    wait_until(lambda: len(election.contenders()) == 2, "two coordinators contending")
    leaders: list[str] = []
    drained: list[str] = []

    def on_tick(seq: int, _c: int) -> None:
        if seq == 8:
            leaders.append(election.contenders()[0])
            cluster.kill(leaders[0], signal.SIGKILL)
            wait_until(lambda: election.contenders()[:1] not in ([], [leaders[0]]), "a new leader")
            leaders.append(election.contenders()[0])
            # Only the new leader can carry out a drain.
            drained.append("oc-2")
            Membership(kazoo_client).request_drain("oc-2")
            wait_until(lambda: "oc-2" not in owners(kazoo_client).values(), "the drain by the new leader")
            settle(engines[0])

    out = tmp_path / "cluster.jsonl"
    result = run(workload, cluster.hosts, out, on_tick=on_tick, on_start=engines.append)
    assert leaders[1] != leaders[0] and leaders[1].startswith("coord-")
    assert result.lost == []
    compare(workload.expected, out, capsys)
    assert [s for s in result.switches if s.src == "oc-2" and s.seq > 8]


def test_killed_container_is_detected_and_its_queries_reassigned(
    workload: Workload, start_cluster: Callable[..., LocalCluster], tmp_path: Path, capsys, kazoo_client
) -> None:
    cluster = start_cluster(3)
    engines: list[ClusterEngine] = []
    victim: list[str] = []
    victim_queries: set[str] = set()
    reassigned: dict[str, str | None] = {}

    def on_tick(seq: int, _c: int) -> None:
        engine = engines[0]
        if seq == 8:
            victim.append("oc-1")
            victim_queries.update(n for n, c in engine.answerers().items() if c == "oc-1")
            cluster.kill("oc-1", signal.SIGKILL)  # tick 9 goes out before anyone knows
        elif seq == 9:
            # Let the replacements announce themselves before the replay runs on.
            def replaced() -> bool:
                engine.pump(0.05)
                engine.admit()  # the new owners subscribe to the queries' streams first
                return all(engine.ready_on(n) - {"oc-1"} for n in victim_queries)

            wait_until(replaced, "the killed container's queries to be registered elsewhere")
            reassigned.update(owners(kazoo_client))

    out = tmp_path / "cluster.jsonl"
    t0 = time.monotonic()
    result = run(workload, cluster.hosts, out, on_tick=on_tick, on_start=engines.append)
    assert time.monotonic() - t0 < 60
    assert victim_queries
    # The reports oc-1 owed (tick 9 and until the replacements were ready) were
    # recomputed on the live containers: nothing is lost.
    assert result.lost == []
    assert result.recovered and {x.src for x in result.recovered} == {"oc-1"}
    assert {x.query for x in result.recovered} <= victim_queries
    assert all(s.dst != "oc-1" for s in result.switches if s.seq > 8)
    assert {s.query for s in result.switches if s.src == "oc-1"} == victim_queries
    assert reassigned and "oc-1" not in set(reassigned.values()) and None not in set(reassigned.values())
    compare(workload.expected, out, capsys)


def test_local_cluster_script_and_commands(workload: Workload, tmp_path: Path, capsys) -> None:
    """``infra/local-cluster``, ``containers add|remove``, ``status`` and ``replay --cluster``."""
    state = tmp_path / "lc"
    script = [str(REPO / "infra" / "local-cluster")]
    env = {**os.environ, "LINKSTREAM_PYTHON": sys.executable}
    started = subprocess.run(
        [*script, "start", "2", "--dir", str(state), "--detach", "--session-timeout", str(SESSION_S)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    try:
        assert started.returncode == 0, started.stderr
        assert "zookeeper: 127.0.0.1:" in started.stdout and "oc-2" in started.stdout
        # two coordinators serve the API, which takes the printed admin token
        urls = [ln.split()[1] for ln in started.stdout.splitlines() if ln.startswith("api: ")]
        tokens = [ln.split()[1] for ln in started.stdout.splitlines() if ln.startswith("token: ")]
        assert len(urls) == 2 and len(tokens) == 1, started.stdout
        for url in urls:
            request = urllib.request.Request(url + "/queries")
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 401
            request.add_header("Authorization", "Bearer " + tokens[0])
            with urllib.request.urlopen(request, timeout=10) as answer:
                assert json.loads(answer.read()) == {"queries": []}
        capsys.readouterr()
        assert cli_main(["containers", "add", "1", "--dir", str(state)]) == 0
        assert capsys.readouterr().out.split() == ["oc-3"]

        def status() -> dict:
            capsys.readouterr()
            assert cli_main(["status", "--dir", str(state), "--json"]) == 0
            return json.loads(capsys.readouterr().out)

        assert [c["id"] for c in status()["containers"]] == ["oc-1", "oc-2", "oc-3"]
        assert cli_main(["containers", "remove", "oc-1", "--dir", str(state), "--timeout", "30"]) == 0
        assert [c["id"] for c in status()["containers"]] == ["oc-2", "oc-3"]
    finally:
        stopped = subprocess.run(
            [*script, "stop", "--dir", str(state)], capture_output=True, text=True, env=env
        )
    assert stopped.returncode == 0, stopped.stderr
    cluster = LocalCluster.load(state)
    assert not any(pid_alive(p.pid) for p in cluster.state.processes.values())
    # The same workload through a throw-away local cluster of two containers, as a client of
    # its live service (registered in one batch, pushed over HTTP, results read back).
    out, stats = tmp_path / "cluster.jsonl", tmp_path / "stats.json"
    argv = ["replay", *workload.args, "--cluster", "2", "--out", str(out), "--stats", str(stats)]
    assert cli_main(argv) == 0
    compare(workload.expected, out, capsys)
    body = json.loads(stats.read_text())
    assert body["path"] == "api" and sorted(body["containers"]) == ["oc-1", "oc-2"]
    assert sorted(body["reports"]) == sorted(QUERY_IDS)
