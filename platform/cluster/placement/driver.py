"""The driver's part of operator-level placement (``--placement operators``).

Once every query (consumer task) is registered and ready on its container, the driver

1. plans every query of the run in one scratch engine built like a container's
   (:class:`~linkstream.containers.replica.RunReplica`: same static graphs, same
   constant ids), and cuts the plans into producer and consumer tasks
   (:func:`linkstream.engine.cutting.plan_tasks`);
2. places the producer channels (one per producer, or ``parallelism`` instances of a
   partitionable join) with the sans-IO scheduler core, given the containers'
   capacities and where the coordinator put the consumers
   (:func:`linkstream.engine.cutting.place_producers`);
3. sends each container an ``optasks`` message
   (:mod:`linkstream.containers.placement.tasks`) on its data-plane socket, ahead of
   the first tick, so it sets up its producers and remote inputs before evaluating.
   Every cut of every query is read through its producer's channels, also where the
   producer runs on the query's own container (delivered without a socket), so a
   producer that moves later changes nothing in its consumers' plans;
4. publishes every channel as a ZooKeeper task owned by its container and follows
   the coordinator's moves of them (:mod:`linkstream.cluster.placement.control`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient

from linkstream.cluster.placement.control import ProducerController
from linkstream.containers.placement.tasks import HostedProducer, OpTasks, RemoteCut, encode_optasks
from linkstream.containers.replica import RunReplica
from linkstream.containers.transport import CurveKeys
from linkstream.engine.cutting import TaskPlan, place_producers, plan_tasks, producer_specs, summarize
from linkstream.query.continuous import ContinuousQuery
from linkstream.scheduler.layout import DEFAULT_ROOT
from linkstream.scheduler.membership import Member
from linkstream.scheduler.runs import RunSpec

#: default number of instances of a partitionable shared join (1: no partitioning)
DEFAULT_PARALLELISM = 1

logger = logging.getLogger(__name__)


class PlacementError(RuntimeError):
    """Operator placement cannot be set up (e.g. a container without an edge address)."""


def plan_run(spec: RunSpec, queries: Sequence[ContinuousQuery], parallelism: int = 1) -> TaskPlan:
    """Plans ``queries`` together, as a container would, and cuts them into tasks."""
    scratch = RunReplica(spec, log=lambda msg: logger.debug("planning: %s", msg))
    try:
        for cq in sorted(queries, key=lambda q: q.name):
            scratch.register(cq.name, cq.text)
        return plan_tasks({n: rq.root for n, rq in scratch.engine.queries.items()}, parallelism)
    finally:
        scratch.close()


def setup(
    spec: RunSpec,
    queries: Sequence[ContinuousQuery],
    consumers: Mapping[str, str],
    members: Mapping[str, Member],
    consumer_task: Mapping[str, str],
    send: Callable[[str, list[Any]], None],
    *,
    client: KazooClient | None = None,
    root: str = DEFAULT_ROOT,
    parallelism: int = DEFAULT_PARALLELISM,
    curve_for: Callable[[str], CurveKeys | None] | None = None,
) -> dict[str, Any]:
    """Plans, places and announces the operator tasks of a run.

    Args:
        spec: The run.
        queries: Its queries.
        consumers: Query name -> container answering it (its consumer task's host).
        members: The run's containers (membership nodes, with ``meta["ops"]``).
        consumer_task: Query name -> scheduler task id of its consumer task.
        send: Sends frames to one container (after what was sent to it before).
        client: The driver's kazoo client: with one, the producer channels become
            ZooKeeper tasks that move with the coordinator's decisions; without, they
            stay where they are placed.
        root: Cluster root inside the chroot.
        parallelism: Instances of every partitionable shared join.
        curve_for: CURVE keys of the producer controller's sockets to a container, by its
            id (``None``: plaintext).

    Returns:
        JSON-ready summary: producers with their container(s) and queries, consumers,
        the edges that cross containers, and (updated while the run lasts) the moves.

    Raises:
        PlacementError: A container has no edge address, or ``parallelism`` < 1.
    """
    if parallelism < 1:
        raise PlacementError(f"parallelism must be at least 1, not {parallelism}")
    plan = plan_run(spec, queries, parallelism)
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
    hosted: dict[str, HostedProducer] = {}
    for pid, uses in plan.producers.items():
        dsts = sorted({consumers[q] for q, _ in uses if consumers.get(q) in address})
        q0, k0 = uses[0]
        channels = plan.channels(pid)
        for i, ch in enumerate(channels):
            h = HostedProducer(
                ch,
                q0,
                k0,
                texts[q0],
                [(d, address[d]) for d in dsts],
                part=i,
                parts=len(channels),
                var=plan.partition.get(pid, ""),
            )
            hosted[ch] = h
            host[hosts[ch]].append(h)
    for q, cuts in plan.cuts.items():
        c = consumers.get(q)
        if c is None or c not in remote:
            continue
        for k, pid in enumerate(cuts):
            remote[c].append(RemoteCut(q, k, pid, plan.channels(pid), plan.partition.get(pid, "")))
    for cid in sorted(members):
        send(cid, encode_optasks(OpTasks(spec.id, cid, host[cid], remote[cid])))
    summary = summarize(plan, consumers, hosts)
    summary["parallelism"] = parallelism
    if client is not None:
        control = ProducerController(client, root, spec.id, hosted, hosts, members, curve_for=curve_for)
        control.start(producer_specs(plan))
        summary["moves"] = control.moves  # the controller appends while the run lasts
        summary["gone"] = control.gone
        summary["tasks"] = {ch: control.tasks.task_id(ch) for ch in hosted}
    logger.info(
        "driver: %d producer(s) in %d channel(s), %d consumer task(s), %d cross-container edge(s)",
        len(plan.producers),
        len(hosted),
        len(plan.cuts),
        len(summary["remote_edges"]),  # type: ignore[arg-type]  # a list in the summary
    )
    return summary
