"""kill -9 of the container holding the routed queries, time and count windows (issue 17).

``test_failover``'s replay (CityBench queries over short streams) with routed joins over
count windows added (``[TRIPLES n]``: their routers' rows hold positions in the stream
buffer of the container that built them), and the victim chosen as the container that
answers routed count-window queries (and the most routed queries among those) rather than at
random.  Its owed reports are recomputed on
a live container, its queries are built again by their new owners from those owners'
buffers (a dead container hands nothing over), and the output equals the embedded
replay's: 0 lines lost, 0 duplicated.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from linkstream.cluster.localcluster import LocalCluster
from linkstream.engine.embedded import Engine
from linkstream.operators.shared_state import routers_of
from linkstream.operators.state import StateError
from linkstream.operators.timed_window import CountedWindowOperator
from tests.cluster.test_failover import (  # noqa: F401 - the module's fixture
    DELTAS,
    Workload,
    build_workload,
    lost_and_duplicated,
    replay_with_a_kill,
    start_cluster,
)

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

SES = "http://www.insight-centre.org/dataset/SampleEventService#"


def _counted(stream: str, n: int) -> str:
    """A CQELS-QL join over a count window (named by its file: the workload's ``name.rq``)."""
    return f"""PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
SELECT ?ob ?v
WHERE {{ STREAM <{SES}{stream}> [TRIPLES {n}] {{ ?ob ssn:observedProperty ?p . ?ob sao:hasValue ?v }} }}"""


COUNTED = {
    f"{stream[:7].lower()}_cnt{n}": _counted(stream, n)
    for stream in ("AarhusWeatherData0", "AarhusParkingDataKALKVAERKSVEJ")
    for n in (20, 45)
}


@pytest.fixture(scope="module")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return build_workload(tmp_path_factory.mktemp("failover_routed"), {**DELTAS, **COUNTED})


def test_kill_9_of_the_container_answering_routed_queries_loses_and_duplicates_nothing(
    workload: Workload,  # noqa: F811
    start_cluster: Callable[..., LocalCluster],  # noqa: F811
    tmp_path: Path,
) -> None:
    scratch = Engine(default_step=1000, log_fn=lambda _m: None)
    routed, counted = set(), set()
    for cq in workload.queries:
        try:
            routers = routers_of(scratch.register(cq).root)
        except StateError:
            continue
        routed.add(cq.name)
        if any(isinstance(w, CountedWindowOperator) for r in routers for w in r.windows):
            counted.add(cq.name)
    assert counted == set(COUNTED) and len(routed) > len(counted), (routed, counted)

    def pick(answerers: dict[str, str]) -> str:
        held = Counter(c for q, c in answerers.items() if q in routed)
        return max(sorted(held), key=lambda c: (any(answerers.get(q) == c for q in counted), held[c]))

    cluster = start_cluster(3)
    out = tmp_path / "cluster.jsonl"
    result, victim, kill_seq = replay_with_a_kill(workload, cluster, out, 7, pick)
    assert result.lost == []
    assert lost_and_duplicated(workload.expected, out) == (0, 0), (victim, kill_seq)
    moved = {s.query for s in result.switches if s.src == victim}
    assert moved & counted and len(moved & routed) > 1, (victim, moved)
    assert result.recovered and {r.src for r in result.recovered} == {victim}
    assert result.duplicates == 0
