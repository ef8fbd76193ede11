"""A ZooKeeper restart while two clients push to the live service: nothing lost (issue 17).

Real processes: the cluster's own ZooKeeper (TLS), two API coordinators (``run --zk
--state-dir`` on one shared directory) and three operator containers, all with 2 s
sessions.  Two clients push the CityBench slice of ``tests/api`` over HTTP, one stream
each, to different coordinators, every push under an ``Idempotency-Key``; ZooKeeper is
killed with SIGKILL after the first third, kept down for 5 s (longer than every session)
and started again on its port and data directory; the clients push on while it is away
and after.  Pushes answered 503 (or whose connection broke) are retried by the clients
with their key; every push answered 2xx must be in.  The results read over the API from
both coordinators equal an embedded ``run`` fed the same pushes: 0 lines lost, 0
duplicated (:func:`tests.cluster.zklive.zk_restart_round`; ``bench/zk_restarts.py``
repeats it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from linkstream.api.client import Client
from linkstream.cluster.localcluster import LocalCluster
from tests.api.corpus import corpus_or_skip
from tests.cluster.test_live_service import QUERIES, SESSION_S, _wait_roles
from tests.cluster.test_streamlog import assert_direct
from tests.cluster.zklive import zk_restart_round

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

DOWN_S = 5.0


@pytest.mark.slow  # 40-60 s under load: its own ZooKeeper (TLS) restarted, two coordinators
@pytest.mark.parametrize("ingest", ["leader", "direct"])
def test_a_zookeeper_restart_during_live_pushes_loses_nothing(tmp_path: Path, ingest: str) -> None:
    corpus = corpus_or_skip(tmp_path)
    texts = corpus.texts(QUERIES)
    statics = corpus.static_args()
    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp_path / "own-zk", session_timeout=SESSION_S)
    try:
        cluster.start(0, coordinators=0)
        for _ in range(2):
            cluster.start_coordinator(
                ["--idle-ms", "0", "--state-dir", str(tmp_path / "state"), "--ingest", ingest, *statics]
            )
        cluster.add_containers(3)
        _wait_roles(cluster.api_urls(timeout=30))
        res = zk_restart_round(cluster, Client(embedded.url), corpus, texts, 0, DOWN_S, "zk")
        assert res.errors == [], res.errors
        assert res.pushes == len(corpus.elements), res
        assert "up" in res.marks and res.marks["up"] - res.marks["down"] >= DOWN_S
        assert (res.lost, res.duplicated) == (0, 0), res
        assert res.lines > 0, "no result lines at all"
        # the clients met the outage (503 or a refused connection) and retried with their keys
        assert res.refused + res.broken > 0, res
        # answered (503) at once while ZooKeeper was away, not held until it was back
        assert res.slowest_push_while_down_s < 5.0, res
        deadline = time.monotonic() + 60
        while cluster.members() != {"oc-1", "oc-2", "oc-3"}:
            assert time.monotonic() < deadline, f"members after the restart: {cluster.members()}"
            time.sleep(0.2)
        # both coordinators advertised (a session that expired took the node with it)
        assert sorted(cluster.api_urls(timeout=30)) == ["coord-1", "coord-2"]
        if ingest == "direct":  # owners re-claimed with new epochs: their bodies in new stream logs
            assert_direct(tmp_path / "state", sorted({el.stream for el in corpus.elements}))
        print(
            f"\nZooKeeper down {res.marks['up'] - res.marks['down']:.2f} s; {res.pushes} pushes taken, "
            f"{res.refused} answers 503/502 and {res.broken} broken connections retried; first refusal "
            f"{res.first_refused_s} s after the kill, first push taken {res.first_ok_after_up_s} s after "
            f"ZooKeeper was back; slowest push {res.slowest_push_s:.2f} s ({res.slowest_push_while_down_s:.2f} s while ZooKeeper was away); {res.lines} result lines compared"
        )
    finally:
        cluster.stop()
        embedded.stop()
