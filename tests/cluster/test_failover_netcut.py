"""A container cut off from the network for 10 s during a cluster replay: nothing lost.

One of three containers runs in its own network namespace (:mod:`tests.cluster.netcut`):
its only way out is a relay of the ports it needs (ZooKeeper, the driver's result
socket) and its only way in is a relay of its data-plane port, so it uses the same
``127.0.0.1`` addresses as the others.  Mid-replay, nftables rules loaded into the
namespace drop every packet in and out of it for 10 s (a real cut: the kernel discards
the traffic, connections are neither closed nor reset, the process keeps running and
keeps trying), then are removed.  The container's ZooKeeper session expires after its
timeout (2 s), the driver has its owed reports recomputed on a live container, the
coordinator moves its queries; when the network is back its old session is gone, it
registers again, says hello and rejoins the run, and whatever TCP delivers late from
before the cut never reaches the output.  The result file equals the embedded replay
line for line.

Skipped, with the reason, without root or where the kernel refuses a network namespace
or nf_tables (``ip``/``nft`` come from ``make system-deps``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from linkstream.cluster.localcluster import LocalCluster, ProcessRecord, free_port
from linkstream.cluster.replay import ClusterEngine, replay_on_cluster
from linkstream.containers.security import Security
from tests.cluster.netcut import netns_or_skip
from tests.cluster.test_failover import (  # noqa: F401 - workload is a fixture
    MAX_REPORTS,
    SESSION_S,
    Workload,
    lost_and_duplicated,
    workload,
)
from tests.conftest import ZK_AUTH

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

CUT_S = 10.0
VICTIM = "oc-3"


def _start_in_netns(cluster: LocalCluster, ns_command, bind_port: int) -> None:  # noqa: ANN001
    """Starts container ``VICTIM`` inside the namespace, binding its data plane to ``bind_port``."""
    state = cluster.state
    args = ["container", "--zk", cluster.hosts, "--id", VICTIM, "--root", state.root]
    args += ["--capacity", str(state.capacity), "--session-timeout", str(state.session_timeout)]
    args += ["--metrics-port", "0", "--bind", f"tcp://127.0.0.1:{bind_port}", *cluster.security_args()]
    log_path = cluster.dir / "logs" / f"{VICTIM}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            ns_command([sys.executable, "-m", "linkstream.cli", *args]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    state.processes[VICTIM] = ProcessRecord(VICTIM, "container", proc.pid, str(log_path))
    state.next_container = max(state.next_container, 4)
    cluster.save()  # cluster.stop() ends it with the others
    cluster.wait_members({VICTIM}, 60)


@pytest.mark.slow  # about 25 s: the cut lasts 10 s, then the rejoin
def test_a_container_cut_off_the_network_for_10s_loses_nothing_and_rejoins(
    workload: Workload,  # noqa: F811
    zk_server: str,
    zk_chroot: str,
    tmp_path: Path,
) -> None:
    ns = netns_or_skip(f"lscut{os.getpid()}")
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    try:
        cluster.start(2, 1)
        zk_port = int(zk_server.rsplit(":", 1)[1])
        driver_port, data_port = free_port(), free_port()
        ns.forward_out(zk_port)  # the container's ZooKeeper session
        ns.forward_out(driver_port)  # its result socket to the driver
        ns.forward_in(data_port)  # the driver's elements and ticks to it
        _start_in_netns(cluster, ns.command, data_port)
        assert cluster.members() == {"oc-1", "oc-2", VICTIM}

        engines: list[ClusterEngine] = []
        held: list[set[str]] = []
        marks: dict[str, float] = {}
        rejoined: list[int] = []

        def watch_membership() -> None:  # when the cut is seen, and when it is over
            while "gone" not in marks and time.monotonic() < marks["cut"] + 30:
                if VICTIM not in cluster.members():
                    marks["gone"] = time.monotonic()
                time.sleep(0.05)
            while "healed" not in marks or "member" not in marks:
                if "healed" in marks and VICTIM in cluster.members():
                    marks["member"] = time.monotonic()
                elif time.monotonic() > marks["cut"] + 60:
                    return
                time.sleep(0.05)

        def heal() -> None:
            time.sleep(CUT_S)
            ns.heal()
            marks["healed"] = time.monotonic()

        def on_tick(seq: int, _c: int) -> None:
            if seq == 5:
                held.append({q for q, c in engines[0].answerers().items() if c == VICTIM})
                ns.cut()
                marks["cut"] = time.monotonic()
                threading.Thread(target=heal, daemon=True).start()
                threading.Thread(target=watch_membership, daemon=True).start()
            elif seq > 5:
                marks.setdefault("first_tick_after_cut", time.monotonic())
                if rejoined:
                    return
                if "healed" in marks and VICTIM in engines[0].fanout.peers:
                    rejoined.append(seq)  # its new hello was admitted: it is in the run again
                    marks["rejoined"] = time.monotonic()
                elif "healed" not in marks or time.monotonic() < marks["healed"] + 20.0:
                    time.sleep(0.4)  # keep the replay going until the container is back and rejoined

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
                bind=f"tcp://127.0.0.1:{driver_port}",
                answer_timeout=20.0,
                security=Security.secure(ZK_AUTH),
                on_tick=on_tick,
                on_start=engines.append,
            )
        assert held and held[0], f"{VICTIM} held no query when the cut began"
        assert "healed" in marks, "the replay ended before the network came back"
        assert rejoined, f"{VICTIM} did not rejoin the run after the cut"
        assert ns.relayed >= 3  # ZooKeeper, results and data plane did go through the namespace
        assert result.lost == [] and result.duplicates == 0
        assert lost_and_duplicated(workload.expected, out) == (0, 0)
        assert result.recovered and {r.src for r in result.recovered} == {VICTIM}
        assert {s.query for s in result.switches if s.src == VICTIM} >= held[0]
        deadline = time.monotonic() + 20
        while "member" not in marks:
            assert time.monotonic() < deadline, f"{VICTIM} did not register again after the cut"
            time.sleep(0.1)
        cut = marks["cut"]
        print(
            f"\nnetwork cut {CUT_S:g} s, session {SESSION_S:g} s: membership gone after "
            f"{marks['gone'] - cut:.2f} s, first tick after the cut {marks['first_tick_after_cut'] - cut:.2f} s, "
            f"registered again {marks['member'] - marks['healed']:.2f} s and in the run "
            f"{marks['rejoined'] - marks['healed']:.2f} s after the heal; "
            f"{len(result.recovered)} reports recomputed"
        )
    finally:
        if ns.cut_active:
            ns.heal()
        cluster.stop()
        ns.close()
