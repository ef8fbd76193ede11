"""A standby ends a dead leader's ZooKeeper session at once, and only with proof (issue 17).

``platform/cluster/deadleader.py``: a leader killed with SIGKILL used to be replaced only when
ZooKeeper expired its session.  Its follower now proves the process gone (its API refuses
connections, the shared ingest log's flock is free, the published session still owns its
node) and closes that session itself.  A leader that is alive -- however busy, even stopped
with SIGSTOP -- keeps its API's listening socket and the log's flock, and keeps leading.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import os
import re
import signal
import socket
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from kazoo.client import KazooClient

from linkstream.cluster import deadleader
from linkstream.cluster.deadleader import LeaderWatch, log_unlocked, publish_session, refuses
from linkstream.cluster.localcluster import LocalCluster
from linkstream.containers.security import Security
from tests.cluster.test_live_service import _wait_roles

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

ROOT = "/linkstream"


def _refusing_url() -> tuple[socket.socket, str]:
    """A loopback port that is bound but not listening: connections are refused."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s, f"http://127.0.0.1:{s.getsockname()[1]}"


def test_refuses_and_log_unlocked(tmp_path: Path) -> None:
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    bound, dead = _refusing_url()
    try:
        assert not refuses(f"http://127.0.0.1:{listening.getsockname()[1]}/x")
        assert refuses(dead)
    finally:
        listening.close()
        bound.close()
    assert log_unlocked(str(tmp_path))  # no lock file: no log was ever opened
    fd = os.open(tmp_path / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert not log_unlocked(str(tmp_path))  # another open file holds it
        fcntl.flock(fd, fcntl.LOCK_UN)
        assert log_unlocked(str(tmp_path))
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the probe let go of it again
    finally:
        os.close(fd)


def test_the_watch_closes_the_session_only_when_every_proof_holds(
    tmp_path: Path,
    zk_server: str,
    zk_chroot: str,
    kazoo_factory: Callable[..., KazooClient],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(deadleader, "RETRY_S", 0.0)
    leader = kazoo_factory(timeout=30.0)  # a long session: only the watch can end it soon
    standby = kazoo_factory()
    publish_session(leader, ROOT, "coord-1")
    leader.create(ROOT + "/mark", b"", ephemeral=True)
    state = tmp_path / "state"
    state.mkdir()
    watch = LeaderWatch(
        standby, f"{zk_server}{zk_chroot}", Security.insecure(), ROOT, "coord-2", str(state), 5.0
    )
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    alive = f"http://127.0.0.1:{listening.getsockname()[1]}"
    bound, dead = _refusing_url()
    try:
        assert not watch.check("coord-1", dead)  # never read that leader's log there: no verdict
        watch.followed("coord-1", alive)
        assert not watch.check("coord-1", alive)  # its API listens: alive
        watch.followed("coord-1", dead)
        fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            assert not watch.check("coord-1", dead)  # someone holds the ingest log: alive
        finally:
            os.close(fd)
        watch.followed("coord-9", dead)
        assert not watch.check("coord-9", dead)  # the published session is coord-1's, not coord-9's
        assert standby.exists(ROOT + "/mark") is not None and watch.closed == []
        watch.followed("coord-1", dead)
        assert watch.check("coord-1", dead)
        assert watch.closed == ["coord-1"]
        deadline = time.monotonic() + 5
        while standby.exists(ROOT + "/mark") is not None:  # the session's ephemeral nodes went with it
            assert time.monotonic() < deadline, "the leader's session was not closed"
            time.sleep(0.05)
        assert standby.exists(deadleader.session_path(ROOT)) is None
        assert not watch.check("coord-1", dead)  # once only: the verdict is spent
    finally:
        listening.close()
        bound.close()


def _log_time(line: str) -> float:
    stamp = re.match(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ", line)
    assert stamp, line
    return dt.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def test_a_stopped_leader_keeps_leading_and_a_killed_one_is_replaced_before_its_session_ends(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    """Real processes (two ``run --zk --state-dir`` coordinators, 8 s sessions): the leader
    stopped with SIGSTOP for 3 s (no answer, no ping) is still the leader afterwards and the
    standby judged nothing; killed with SIGKILL, it is replaced well before 8 s."""
    session = 8.0
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=session)
    extra = ["--idle-ms", "0", "--state-dir", str(tmp_path / "state")]
    try:
        cluster.start(0, coordinators=0)
        for _ in range(2):
            cluster.start_coordinator(extra)
        urls = cluster.api_urls(timeout=30)
        leader, standby = _wait_roles(urls)
        logs = cluster.dir / "logs"
        time.sleep(1.0)  # the standby follows the leader's result log
        cluster.kill(leader, signal.SIGSTOP)
        time.sleep(1.0)
        assert not refuses(urls[leader])  # the kernel still takes connections for it
        time.sleep(2.0)
        cluster.kill(leader, signal.SIGCONT)
        assert _wait_roles(urls) == (leader, standby)
        assert "is gone" not in (logs / f"{standby}.log").read_text()
        r = httpx.post(urls[leader] + "/watermark", params={"t": "1000"}, timeout=30)
        assert r.status_code < 300, r.text

        time.sleep(0.5)
        killed = time.time()
        cluster.kill(leader, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while (role := httpx.get(urls[standby] + "/status", timeout=10).json()["role"]) != "leader":
            assert time.monotonic() < deadline, role
            time.sleep(0.1)
        text = (logs / f"{standby}.log").read_text()
        gone = [line for line in text.splitlines() if f"leader {leader} is gone" in line]
        elected = [line for line in text.splitlines() if "elected leader" in line]
        assert gone and elected, text[-3000:]
        took = _log_time(elected[-1]) - killed
        assert took < session / 2, f"elected {took:.2f} s after the kill (session {session} s)"
    finally:
        cluster.stop()
