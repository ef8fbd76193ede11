"""A write sent to a standby is never refused because the cluster is between leaders.

Real processes: the session's ZooKeeper, two API coordinators (``run --zk``) and one
container.  A standby forwards writes to the leader; when it knows no leader (an election
under way, a leader whose API is not published yet) or cannot connect to the one it knows
(killed with SIGKILL a moment ago), it waits for the next leader -- possibly itself -- up to
``ELECTION_WAIT_S`` instead of answering 503 at once.  Nothing is sent twice: a request is
sent again only when no connection to the old leader was made.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from linkstream.cluster.localcluster import LocalCluster
from linkstream.cluster.proxy import ELECTION_WAIT_S
from tests.cluster.test_live_service import SESSION_S, TIMEOUT
from tests.cluster.test_live_service_batch import _wait_roles

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

QUERY = """REGISTER QUERY {name} AS
PREFIX ex: <http://example.org/>
SELECT ?s ?o FROM STREAM <http://example.org/s> [RANGE 10s STEP 1s] WHERE {{ ?s ex:p ?o }}"""


def test_writes_on_a_standby_wait_out_a_leader_change(tmp_path: Path, zk_server: str, zk_chroot: str) -> None:
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    try:
        cluster.start(0, coordinators=0)
        for _ in range(2):
            cluster.start_coordinator(["--idle-ms", "0"])
        cluster.add_containers(1)
        urls = cluster.api_urls(timeout=30)
        leader, standby = _wait_roles(urls)

        # forwarded while a leader serves
        r = httpx.post(urls[standby] + "/queries", content=QUERY.format(name="before"), timeout=TIMEOUT)
        assert r.status_code == 201, r.text

        # the leader dies; the very next write on the standby waits for the next leader (itself)
        cluster.kill(leader, signal.SIGKILL)
        t0 = time.monotonic()
        r = httpx.post(urls[standby] + "/queries", content=QUERY.format(name="after"), timeout=TIMEOUT)
        waited = time.monotonic() - t0
        assert r.status_code == 201, r.text
        assert r.json()["name"] == "after"
        assert waited < ELECTION_WAIT_S + 10.0  # the standby's bring-up included

        # both are registered once, on the new leader, and the registry lists them
        listed = httpx.get(urls[standby] + "/queries", timeout=TIMEOUT).json()["queries"]
        assert sorted(q["name"] for q in listed) == ["after", "before"]
        assert httpx.get(urls[standby] + "/status", timeout=TIMEOUT).json()["role"] == "leader"
    finally:
        cluster.stop()
