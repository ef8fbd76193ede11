"""A drain moves routed queries with their router units (issue 17), real processes.

The CityBench workload of ``test_cluster`` (12 queries, 7 of them on shared joins' routers)
is replayed on three containers; mid-replay the container holding the most routed queries
is drained.  Each of its queries moves between two ticks (:mod:`linkstream.cluster.handover`):
a routed one with the unit of the routers it reads (before: without state, its shared join
built again from the new container's stream buffers).  The output equals the embedded
replay's, every move carried state, at least one a router unit, and every new owner
restored what it was sent (``linkstream_state_migrations_total{direction="in"}`` counts the
moves restored, router units included; a rebuilt one is not counted).
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from linkstream.cluster.localcluster import LocalCluster, pid_alive
from linkstream.cluster.replay import ClusterEngine, task_id
from linkstream.engine.embedded import Engine
from linkstream.operators.shared_state import routers_of
from linkstream.operators.state import StateError
from linkstream.scheduler.membership import Membership
from linkstream.scheduler.status import cluster_status
from tests.cluster.test_cluster import (  # noqa: F401 - the module's fixtures
    Workload,
    _has_window_state,
    compare,
    owners,
    run,
    settle,
    start_cluster,
    wait_until,
    workload,
)

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]


def _migrations_in(metrics: str) -> float:
    with urllib.request.urlopen(f"http://{metrics}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "linkstream_state_migrations_total" and s.labels.get("direction") == "in"
    )


def test_a_drain_moves_routed_queries_with_their_router_units(
    workload: Workload,  # noqa: F811
    start_cluster: Callable[..., LocalCluster],  # noqa: F811
    tmp_path: Path,
    capsys,
    kazoo_client,
) -> None:
    scratch = Engine(default_step=1000, log_fn=lambda _m: None)
    routed = []
    empty = set()  # plans with no window state to ship (csparql-Q11's folded plan, an empty constant)
    for cq in workload.queries:
        root = scratch.register(cq).root
        try:
            routers_of(root)
            routed.append(cq.name)
        except StateError:
            if not _has_window_state(root):
                empty.add(cq.name)
    assert len(routed) >= 5, routed
    cluster = start_cluster(3)
    engines: list[ClusterEngine] = []
    drained: list[str] = []

    def on_tick(seq: int, _c: int) -> None:
        if seq != 12:
            return
        held = owners(kazoo_client)
        hosts = [held[task_id(n)] for n in routed if held.get(task_id(n))]
        drained.append(max(sorted(set(hosts)), key=hosts.count))
        Membership(kazoo_client).request_drain(drained[0])
        wait_until(lambda: drained[0] not in owners(kazoo_client).values(), "the drained container emptied")
        settle(engines[0])

    out = tmp_path / "cluster.jsonl"
    result = run(workload, cluster.hosts, out, on_tick=on_tick, on_start=engines.append)
    assert result.lost == []
    compare(workload.expected, out, capsys)
    every = [m for m in result.migrations if m.src == drained[0]]
    # a plan with nothing to ship moves as a rebuild (0 bytes, not shipped, no error)
    assert all(m.rows == 0 and not m.error for m in every if m.query in empty), every
    moves = [m for m in every if m.query not in empty]
    units = [m for m in moves if m.unit]
    assert units and {m.query for m in units} <= set(routed), moves
    assert all(m.shipped and m.bytes > 0 and not m.error for m in moves), [
        m for m in moves if not (m.shipped and m.bytes > 0 and not m.error)
    ]
    restored = sum(_migrations_in(c["metrics"]) for c in cluster_status(kazoo_client)["containers"])
    # (a move of nothing may count as restored too: an empty state restored)
    assert len(moves) <= restored <= len(every), (restored, every)
    wait_until(lambda: not pid_alive(cluster.pid(drained[0])), "the drained container to exit")
