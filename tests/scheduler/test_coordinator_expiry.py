"""A standby coordinator whose ZooKeeper session expired advertises itself again (real ZooKeeper).

Its advertisement (``<root>/coordinators/<id>``: the API URL clients find it by, the live
coordinators a stream is placed on) is ephemeral and goes with an expired session, while
the election goes on under the new one.  A leader advertises itself again when it rebuilds;
a standby used to stay unlisted until it was elected (seen in ``bench/zk_restarts.py``:
after a ZooKeeper restart the next round found one coordinator of two).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from linkstream.scheduler.coordinator import Coordinator
from linkstream.scheduler.layout import ClusterLayout
from tests.conftest import ZK_AUTH
from tests.scheduler.test_coordinator import wait_until

pytestmark = pytest.mark.zookeeper


def test_a_standby_advertises_itself_again_after_its_session_expired(
    kazoo_factory: Callable[..., KazooClient], zk_server: str, zk_chroot: str
) -> None:
    leader = Coordinator(kazoo_factory(), "coord-1", tick_interval=0.1, meta={"api": "http://127.0.0.1:1"})
    leader.start()
    client = kazoo_factory(timeout=2.0)
    standby = Coordinator(client, "coord-2", tick_interval=0.1, meta={"api": "http://127.0.0.1:2"})
    observer = kazoo_factory()
    node = ClusterLayout().coordinator("coord-2")
    try:
        wait_until(lambda: leader.is_leader, what="leadership")
        standby.start()
        wait_until(lambda: observer.exists(node) is not None, what="the standby's advertisement")
        session = client.client_id
        # ZooKeeper's own tests' way to expire a session: a second client joins it and closes it
        other = KazooClient(hosts=f"{zk_server}{zk_chroot}", client_id=session, auth_data=ZK_AUTH.auth_data)
        other.start(timeout=10)
        other.stop()
        other.close()
        wait_until(lambda: client.client_id != session and client.connected, 20, "a new session")
        wait_until(lambda: observer.exists(node) is not None, 10, "the advertisement again")
        assert json.loads(observer.get(node)[0])["api"] == "http://127.0.0.1:2"
        assert observer.exists(node).ephemeralOwner == client.client_id[0]  # the new session's
        assert leader.is_leader and not standby.is_leader
    finally:
        standby.stop()
        leader.stop()
