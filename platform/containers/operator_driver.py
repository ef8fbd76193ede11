"""The driver's part of operator-level placement (``--placement operators``).

Once every query (consumer task) is registered and ready on its container, the driver

1. plans every query of the run in one scratch engine built like a container's
   (:class:`~linkstream.containers.replica.RunReplica`: same static graphs, same
   constant ids), and cuts the plans into producer and consumer tasks
   (:func:`linkstream.scheduler.tasks.plan_tasks`);
2. places the producer tasks with the sans-IO scheduler core, given the containers'
   capacities and where the coordinator put the consumers
   (:func:`linkstream.scheduler.tasks.place_producers`);
3. sends each container an ``optasks`` message
   (:mod:`linkstream.containers.operator_tasks`) on its data-plane socket, ahead of
   the first tick, so it sets up its producers and remote inputs before evaluating.

Producer placements live in the run (the driver), not in ZooKeeper task nodes: they
do not move during the run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from linkstream.containers.operator_tasks import HostedProducer, OpTasks, RemoteCut, encode_optasks
from linkstream.containers.replica import RunReplica
from linkstream.query.continuous import ContinuousQuery
from linkstream.scheduler.membership import Member
from linkstream.scheduler.runs import RunSpec
from linkstream.scheduler.tasks import TaskPlan, place_producers, plan_tasks, summarize

logger = logging.getLogger(__name__)


class PlacementError(RuntimeError):
    """Operator placement cannot be set up (e.g. a container without an edge address)."""


def plan_run(spec: RunSpec, queries: Sequence[ContinuousQuery]) -> TaskPlan:
    """Plans ``queries`` together, as a container would, and cuts them into tasks."""
    scratch = RunReplica(spec, log=lambda msg: logger.debug("planning: %s", msg))
    try:
        for cq in sorted(queries, key=lambda q: q.name):
            scratch.register(cq.name, cq.text)
        return plan_tasks({n: rq.root for n, rq in scratch.engine.queries.items()})
    finally:
        scratch.close()


def setup(
    spec: RunSpec,
    queries: Sequence[ContinuousQuery],
    consumers: Mapping[str, str],
    members: Mapping[str, Member],
    consumer_task: Mapping[str, str],
    send: Callable[[str, list[Any]], None],
) -> dict[str, Any]:
    """Plans, places and announces the operator tasks of a run.

    Args:
        spec: The run.
        queries: Its queries.
        consumers: Query name -> container answering it (its consumer task's host).
        members: The run's containers (membership nodes, with ``meta["ops"]``).
        consumer_task: Query name -> scheduler task id of its consumer task.
        send: Sends frames to one container (after what was sent to it before).

    Returns:
        JSON-ready summary: producers with their container and queries, consumers, and
        the edges that cross containers.

    Raises:
        PlacementError: A container has no edge address.
    """
    plan = plan_run(spec, queries)
    caps = {cid: m.capacity for cid, m in members.items()}
    hosts = place_producers(plan, consumers, caps, consumer_task)
    address = {}
    for cid, m in members.items():
        a = m.meta.get("ops")
        if not isinstance(a, str):
            raise PlacementError(f"container {cid} has no operator-edge address (an older version?)")
        address[cid] = a
    texts = {cq.name: cq.text for cq in queries}
    host: dict[str, list[HostedProducer]] = {cid: [] for cid in members}
    remote: dict[str, list[RemoteCut]] = {cid: [] for cid in members}
    for pid, uses in plan.producers.items():
        dsts = sorted({consumers[q] for q, _ in uses if consumers.get(q) not in (None, hosts[pid])})
        if not dsts:
            continue  # read only where it runs: part of the local queries' own plans
        q0, k0 = uses[0]
        host[hosts[pid]].append(HostedProducer(pid, q0, k0, texts[q0], [(d, address[d]) for d in dsts]))
    for q, cuts in plan.cuts.items():
        for k, pid in enumerate(cuts):
            c = consumers.get(q)
            if c is not None and c != hosts[pid]:
                remote[c].append(RemoteCut(q, k, pid))
    for cid in sorted(members):
        send(cid, encode_optasks(OpTasks(spec.id, cid, host[cid], remote[cid])))
    summary = summarize(plan, consumers, hosts)
    logger.info(
        "driver: %d producer task(s), %d consumer task(s), %d cross-container edge(s)",
        len(plan.producers),
        len(plan.cuts),
        len(summary["remote_edges"]),  # type: ignore[arg-type]
    )
    return summary
