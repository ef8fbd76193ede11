"""ZooKeeper reads made for a request are answered within a bound (:func:`call_within`).

kazoo holds a call made while its connection is lost until the connection is back, and
for a few seconds after ZooKeeper went away (under load, longer) the client still says it
is connected.  A push that asked ZooKeeper in that window was held for the whole outage
(6.1 s in CI, ``test_zk_restart_live``) instead of being answered 503 at once.  Here the
client reaches the real ZooKeeper through a relay the test freezes: the connection stays
open, no byte passes, ``client.connected`` is still ``True``.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from linkstream.cluster.localcluster import free_port
from linkstream.scheduler.election import LeaderElection
from linkstream.scheduler.zkclient import call_within

pytestmark = pytest.mark.zookeeper


class FreezableRelay:
    """Relays 127.0.0.1:``port`` to ``target``; while ``frozen`` is set no byte passes."""

    def __init__(self, target: str) -> None:
        host, port = target.rsplit(":", 1)
        self.target = (host, int(port))
        self.frozen = threading.Event()
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                down, _ = self.server.accept()
            except OSError:
                return
            up = socket.create_connection(self.target)
            self.socks += [down, up]
            for a, b in ((down, up), (up, down)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                while self.frozen.is_set():
                    time.sleep(0.01)
                dst.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        for s in [self.server, *self.socks]:
            s.close()


@pytest.fixture
def frozen_client(zk_server: str) -> Iterator[KazooClient]:
    """A client connected through a relay, then frozen: it still believes it is connected."""
    relay = FreezableRelay(zk_server)
    client = KazooClient(hosts=f"127.0.0.1:{relay.port}", timeout=10.0)
    client.start(timeout=15)
    client.ensure_path("/bounded/leader")
    election = LeaderElection(client, "coord-a", root="/bounded")
    election.start()
    deadline = time.monotonic() + 10
    while not election.is_leader:
        assert time.monotonic() < deadline, "the only contender was not elected"
        time.sleep(0.05)
    relay.frozen.set()
    try:
        yield client
    finally:
        relay.frozen.clear()
        election.stop()
        client.stop()
        client.close()
        relay.close()


def test_a_held_call_is_answered_within_its_bound(frozen_client: KazooClient) -> None:
    assert frozen_client.connected  # the loss is not noticed yet: a plain call would wait
    t0 = time.monotonic()
    with pytest.raises(ConnectionLoss, match="did not answer within 0.3 s"):
        call_within(frozen_client, "get", "/bounded", timeout=0.3)
    assert time.monotonic() - t0 < 2.0


def test_the_leader_is_asked_within_its_bound(frozen_client: KazooClient) -> None:
    election = LeaderElection(frozen_client, "coord-b", root="/bounded")
    t0 = time.monotonic()
    with pytest.raises(ConnectionLoss):
        election.leader(timeout=0.3)
    assert time.monotonic() - t0 < 2.0


def test_the_leader_is_read_as_kazoo_reads_it(zk_server: str) -> None:
    client = KazooClient(hosts=zk_server, timeout=10.0)
    client.start(timeout=15)
    elections = [LeaderElection(client, f"coord-{k}", root="/bounded-read") for k in range(3)]
    try:
        assert elections[0].leader(timeout=2.0) is None  # nobody contends yet
        for e in elections:
            e.start()
        deadline = time.monotonic() + 10
        while not any(e.is_leader for e in elections):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        leader = next(e.identifier for e in elections if e.is_leader)
        assert elections[2].leader(timeout=2.0) == elections[1].leader() == leader
    finally:
        for e in elections:
            e.stop()
        client.stop()
        client.close()


def test_no_connection_is_answered_at_once() -> None:
    client = KazooClient(hosts=f"127.0.0.1:{free_port()}", timeout=2.0)
    client.start_async()  # connecting, never connected
    try:
        t0 = time.monotonic()
        with pytest.raises(ConnectionLoss, match="unreachable"):
            call_within(client, "get", "/", timeout=5.0)
        assert time.monotonic() - t0 < 0.5
    finally:
        client.stop()
        client.close()
