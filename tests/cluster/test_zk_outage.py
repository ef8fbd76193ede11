"""ZooKeeper down for longer than every session's timeout during a cluster replay: nothing lost.

The cluster's own ZooKeeper (TLS) is killed with SIGKILL mid-replay and started again
on the same port and data directory after an outage of three session timeouts of every
process (containers, coordinator, the replay's driver; 2 s).  ZooKeeper restores the
sessions from its data directory and expires those whose client does not come back
within the timeout; every process tries again about every quarter of it (kazoo's
pause between attempts is capped, :func:`linkstream.scheduler.zkclient.reconnect_retry`;
uncapped it grows to seconds after such an outage).  Two cases:

* ``restart``: ZooKeeper comes back on its port; the sessions that still expire (on
  this loaded 2-core machine, usually all of them: the first requests after a restart
  are slow) do so as they happen, and the driver's is expired on purpose (a second client
  joins it and closes it, as ZooKeeper's own tests do), so its run node goes for certain;
* ``unreachable``: ZooKeeper first runs on another port for twice the session timeout,
  so that it expires every restored session for certain, then comes back on its port.

Every process then opens a new session: containers register again and restart their part
of the run (hello, resync, their owed reports recomputed), the coordinator is elected
again, the driver publishes its run node again
(:meth:`linkstream.scheduler.runs.RunNode.keep_across_expiry`) and the containers had
kept the run meanwhile (:class:`linkstream.scheduler.runs.VanishedRun`).  The data plane
does not need ZooKeeper: the containers keep answering ticks while it is away (at least
ten ticks; the replay waits at tick 25 until ZooKeeper is back, so that ticks remain
after it), and the replay's output equals the embedded replay line for line: 0 lost,
0 duplicated.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from kazoo.exceptions import KazooException

from linkstream.cluster.localcluster import ZK_SCRIPT, LocalCluster, free_port
from linkstream.cluster.replay import ClusterEngine, replay_on_cluster
from linkstream.scheduler.runs import RunNode
from linkstream.scheduler.zkclient import make_client
from tests.cluster.test_failover import (  # noqa: F401 - workload is a fixture
    MAX_REPORTS,
    Workload,
    _restart_zookeeper,
    lost_and_duplicated,
    workload,
)

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

SESSION_S = 2.0
DOWN_S = 3 * SESSION_S


def _expire(cluster: LocalCluster, client_id: tuple[int, bytes]) -> None:
    """Ends the session ``client_id`` on the server (ZooKeeper's own tests' way: a second
    client joins the session and closes it); its owner is told SESSION_EXPIRED."""
    security = cluster.security
    other = make_client(cluster.hosts, security.zk_auth, SESSION_S, security.zk_tls, client_id=client_id)
    other.start(timeout=10)
    other.stop()
    other.close()


def _start_zookeeper(cluster: LocalCluster, port: str) -> int:
    """Starts the cluster's ZooKeeper on ``port`` with its data directory and TLS material."""
    command = ["bash", str(ZK_SCRIPT), "--port", port, "--data-dir", str(cluster.dir / "zookeeper")]
    command += ["--tick-time", "500", "--tls-dir", str(cluster.dir / "zk-tls")]
    command += ["--wait", "90"]  # a JVM with TLS starts slowly on a loaded machine (20 s by default)
    started = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert started.returncode == 0, started.stderr[-2000:]
    return int(started.stdout.strip().splitlines()[-1])


def _unreachable_zookeeper(cluster: LocalCluster, down_s: float) -> None:
    """Kills ZooKeeper, runs it on another port (no client finds it) until every restored
    session has expired, then starts it again on its own port; ``down_s`` at least."""
    record = cluster.state.processes["zookeeper"]
    port = cluster.hosts.rsplit(":", 1)[1]
    t0 = time.monotonic()
    cluster.kill("zookeeper", signal.SIGKILL)
    aside = _start_zookeeper(cluster, str(free_port()))
    time.sleep(2 * SESSION_S + 1.0)  # restored sessions expire SESSION_S after the start
    record.pid = aside
    cluster.kill("zookeeper", signal.SIGKILL)
    time.sleep(max(0.0, down_s - (time.monotonic() - t0)))
    record.pid = _start_zookeeper(cluster, port)
    cluster.save()


@pytest.mark.slow  # 40-50 s each under load: its own ZooKeeper (TLS) restarted, down for 6 s or more
@pytest.mark.parametrize("outage", ["restart", "unreachable"])
def test_a_zookeeper_outage_longer_than_the_sessions_loses_nothing(
    outage: str,
    workload: Workload,  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster = LocalCluster(tmp_path / "own-zk", session_timeout=SESSION_S)
    engines: list[ClusterEngine] = []
    outages: list[threading.Thread] = []
    marks: dict[str, float] = {}
    runs: list[str | None] = []
    while_down: list[int] = []  # ticks answered while ZooKeeper was away

    def go_down() -> None:
        driver = engines[0].client
        marks["down"] = time.monotonic()
        if outage == "restart":
            _restart_zookeeper(cluster, DOWN_S)
            marks["up"] = time.monotonic()
            _expire(cluster, driver.client_id)
        else:
            _unreachable_zookeeper(cluster, DOWN_S)
            marks["up"] = time.monotonic()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                spec = RunNode(driver, cluster.state.root).get()
            except KazooException:  # the driver's session expired: not connected again yet
                spec = None
            if spec is not None:
                runs.append(spec.id)
                marks["republished"] = time.monotonic()
                return
            time.sleep(0.05)

    def on_tick(seq: int, _c: int) -> None:
        if seq == 6:
            outages.append(threading.Thread(target=go_down, daemon=True))
            outages[0].start()
        elif seq > 6 and outages and outages[0].is_alive():
            while_down.append(seq)
            time.sleep(0.3)  # the replay goes on (slowly) while ZooKeeper is away
            if seq >= 25:  # (the data plane does not wait for ZooKeeper) with ticks left after it is back
                outages[0].join(120)

    try:
        cluster.start(3, 1)
        out = tmp_path / "cluster.jsonl"
        with open(out, "w", encoding="utf-8") as f:
            result = replay_on_cluster(
                cluster.hosts,
                workload.queries,
                workload.streams,
                workload.statics,
                f,
                base=workload.base,
                max_reports=MAX_REPORTS,
                answer_timeout=20.0,
                session_timeout=SESSION_S,
                security=cluster.security,
                on_tick=on_tick,
                on_start=engines.append,
            )
        assert outages and not outages[0].is_alive(), "ZooKeeper was not back before the replay ended"
        assert runs == [result.run_id]  # the same run, published again under a new session
        # Containers answer ticks without ZooKeeper (none waits on a ZooKeeper call meanwhile).
        assert len(while_down) >= 10, f"ticks while ZooKeeper was away: {while_down}"
        assert result.lost == [] and result.duplicates == 0
        assert lost_and_duplicated(workload.expected, out) == (0, 0)
        deadline = time.monotonic() + 20
        while cluster.members() != {"oc-1", "oc-2", "oc-3"}:
            assert time.monotonic() < deadline, f"members after the restart: {cluster.members()}"
            time.sleep(0.2)
        logs = {n: Path(r.log).read_text() for n, r in cluster.state.processes.items() if n != "zookeeper"}
        expired = sorted(n for n, text in logs.items() if "Session has expired" in text)
        if outage == "unreachable":  # every session expired: each process made a new one
            assert expired == ["coord-1", "oc-1", "oc-2", "oc-3"]
            assert all("registered again" in logs[n] for n in ("oc-1", "oc-2", "oc-3"))
            assert logs["coord-1"].count("elected leader") >= 2
        print(
            f"\nZooKeeper down {marks['up'] - marks['down']:.2f} s (sessions {SESSION_S:g} s); run published "
            f"again {marks['republished'] - marks['up']:.2f} s after it was back; sessions expired: "
            f"{expired} and the driver's; "
            f"{len(result.recovered)} reports recomputed"
        )
    finally:
        cluster.stop()
