"""Load figures while ZooKeeper is unreachable: :meth:`LoadReporter.publish` does not wait.

A container publishes its load from the loop that answers the driver's ticks.  kazoo
holds a synchronous call made while it is disconnected until the connection is back, so
a ZooKeeper outage stalled the data plane for the whole outage (the driver then took the
containers for stalled).  Here the client points at a port nothing listens on.
"""

from __future__ import annotations

import time

from kazoo.client import KazooClient

from linkstream.cluster.localcluster import free_port
from linkstream.scheduler.load import LoadReporter


def test_publish_while_disconnected_returns_at_once() -> None:
    client = KazooClient(hosts=f"127.0.0.1:{free_port()}", timeout=2.0)
    client.start_async()  # connecting, never connected
    try:
        assert not client.connected
        reporter = LoadReporter(client, "oc-1", "/linkstream", interval=0)
        t0 = time.monotonic()
        for _ in range(3):
            assert reporter.publish({"role": "container", "busy": 0.5}) is False
        assert time.monotonic() - t0 < 0.5
    finally:
        client.stop()
        client.close()
