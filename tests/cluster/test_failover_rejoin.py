"""The replay after one in which a container lost its session and rejoined places every query.

A container frozen (SIGSTOP) past its ZooKeeper session is taken for dead: the
coordinator unassigns its queries and deletes its emptied assignment index.  It then
comes back (SIGCONT) under a new session and registers again.  Its assignment watch
was a kazoo ``ChildrenWatch`` that stopped for good on the missing index, so it never
saw a query given to it again: in the next replay the driver waited for queries placed
on it that never became ready ("no container became ready for ... within 60s"), and it
also kept announcing the queries it held before the freeze (one query on two
containers).  The test drives that interleaving: the freeze lasts until the coordinator
has deleted the frozen container's index; a second replay of the queries the frozen
container did not hold before (placed by load alone, so the rejoined container, as
empty as the others, is given some of them) must place every query once and equal the
embedded replay line for line.  Before the fix it failed every time: "no container
became ready for ... within 20s".
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from linkstream.cluster.localcluster import LocalCluster
from linkstream.cluster.replay import ClusterEngine, ClusterReplayResult, replay_on_cluster
from linkstream.containers.security import Security
from linkstream.query.continuous import ContinuousQuery
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.layout import ClusterLayout
from linkstream.scheduler.membership import Membership
from tests.cluster.test_failover import (  # noqa: F401 - workload and start_cluster are fixtures
    MAX_REPORTS,
    Workload,
    lost_and_duplicated,
    start_cluster,
    workload,
)
from tests.conftest import ZK_AUTH

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]


def _replay(
    work: Workload,
    cluster: LocalCluster,
    out: Path,
    on_tick: Callable[[int, int], None] | None = None,
    engines: list[ClusterEngine] | None = None,
    queries: list[ContinuousQuery] | None = None,
) -> ClusterReplayResult:
    with open(out, "w", encoding="utf-8") as f:
        return replay_on_cluster(
            cluster.hosts,
            work.queries if queries is None else queries,
            work.streams,
            work.statics,
            f,
            base=work.base,
            max_reports=MAX_REPORTS,
            answer_timeout=20.0,
            startup_timeout=20.0,
            affinity=False,  # placement by load alone: fresh queries go round the containers
            security=Security.secure(ZK_AUTH),
            on_tick=on_tick,
            on_start=(engines if engines is not None else []).append,
        )


@pytest.mark.slow  # 10-20 s: two replays, a freeze past the session in the first
def test_after_a_container_rejoined_the_next_replay_places_every_query(
    workload: Workload,  # noqa: F811
    start_cluster: Callable[..., LocalCluster],  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster = start_cluster(3)
    client = cluster.client()
    layout = ClusterLayout(cluster.state.root)
    membership = Membership(client, cluster.state.root)
    engines: list[ClusterEngine] = []
    frozen: list[str] = []
    rejoined: list[int] = []
    held: set[str] = set()  # the queries of the frozen container before the freeze

    def on_tick(seq: int, _c: int) -> None:
        if seq == 5:
            answerers = engines[0].answerers()
            frozen.append(sorted(set(answerers.values()))[-1])
            held.update(n for n, c in answerers.items() if c == frozen[0])
            os.kill(cluster.pid(frozen[0]), signal.SIGSTOP)
            try:
                # Frozen until the coordinator took it for dead and deleted its emptied index.
                deadline = time.monotonic() + 20
                while frozen[0] in membership.members() or client.exists(layout.assignments(frozen[0])):
                    assert time.monotonic() < deadline, "the coordinator did not forget the frozen container"
                    time.sleep(0.05)
            finally:
                os.kill(cluster.pid(frozen[0]), signal.SIGCONT)
        elif frozen and not rejoined:
            if frozen[0] in engines[0].fanout.peers:
                rejoined.append(seq)  # said hello again under its new session
            else:
                time.sleep(0.3)  # keep the replay going until it is back in the run

    try:
        first = _replay(workload, cluster, tmp_path / "first.jsonl", on_tick, engines)
        assert frozen and rejoined, "the frozen container did not rejoin the first replay"
        assert first.lost == [] and first.duplicates == 0
        assert lost_and_duplicated(workload.expected, tmp_path / "first.jsonl") == (0, 0)
        cluster.wait_members({"oc-1", "oc-2", "oc-3"}, 20)

        engines.clear()
        seen: dict[str, tuple[dict[str, str], dict[str, str | None]]] = {}

        def look(seq: int, _c: int) -> None:
            if seq == 3:  # the driver's answerers, and the owners in ZooKeeper meanwhile
                names = {task: name for task, name in engines[0].spec.queries.items()}
                table = AssignmentTable(client, cluster.state.root).all()
                owners = {names[t]: a.container for t, a in table.items() if t in names}
                seen["start"] = (engines[0].answerers(), owners)

        # The other queries: the rejoined container is given some of them, none of which
        # it held before (so what it knew before its session expired cannot stand in).
        queries = [q for q in workload.queries if q.name not in held]
        expected = tmp_path / "second-expected.jsonl"
        expected.write_text(
            "".join(
                line + "\n"
                for line in workload.expected.read_text().splitlines()
                if json.loads(line)["query"] not in held
            )
        )
        out = tmp_path / "second.jsonl"
        second = _replay(workload, cluster, out, look, engines, queries)
        assert second.lost == [] and second.duplicates == 0
        assert lost_and_duplicated(expected, out) == (0, 0)
        # Every query was placed once, some of them on the rejoined container, and each is
        # answered by the container ZooKeeper gave it to.
        answerers, owners = seen["start"]
        assert held and set(answerers) == {q.name for q in queries}
        assert answerers == owners
        assert frozen[0] in set(answerers.values()), answerers
    finally:
        client.stop()
        client.close()
