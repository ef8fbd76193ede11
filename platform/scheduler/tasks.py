"""Operator-level tasks of a cluster replay: cutting shared plans, placing the pieces.

In the ``operators`` placement mode a query is not one task.  Its shared operator DAG
(what :mod:`linkstream.engine.sharing` built) is cut at the *producer* operators:

* the topmost multiway join (:class:`~linkstream.operators.mjoin.MJoinOperator`), shared
  join route (:class:`~linkstream.operators.router.RouteOperator`, which carries its
  router, join and timed windows along) or window scan on every path from the query's
  root -- with at least one stream window below it.  Equal signatures are one operator
  instance in the engine, hence one **producer task**, shared by every query that holds
  that signature;
* the rest of the query above those cuts (filters, extends, aggregates, projection,
  output) is the query's **consumer task**.

:func:`cut_points` finds the cuts of one query root in a fixed depth-first order, looking
through :class:`~linkstream.operators.base.AttachOperator` wrappers (which depend on the
order queries were registered in, not on the query).  The driver plans every query of a
run in one engine to learn which cuts are equal (:func:`plan_tasks`); each container
plans its own queries and finds the same cuts at the same positions, since a query's
plan shape depends only on the query, the static graphs and the constants' ids (made
equal on every container by ``RunReplica.preplan``).

:func:`place_producers` places producer tasks with the sans-IO
:class:`~linkstream.scheduler.core.SchedulerCore`: the containers with their capacity,
the consumer tasks where the coordinator put them (restore hints), then the producers,
which the core sends to the least utilised container with a free slot.  Nothing here
does I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.router import RouteOperator
from linkstream.operators.scan import ScanOperator
from linkstream.operators.window import WindowOperator
from linkstream.scheduler.core import SchedulerCore
from linkstream.scheduler.events import Assign, ContainerJoined, TaskAdded
from linkstream.scheduler.state import Policy, TaskSpec

CUT_TYPES = (RouteOperator, MJoinOperator, ScanOperator)


def _unwrap(op: Operator) -> Operator:
    while isinstance(op, AttachOperator):
        op = op.shared
    return op


def _reads_stream(op: Operator) -> bool:
    return any(isinstance(o, WindowOperator) for o in op.walk())


def is_cut(op: Operator) -> bool:
    """Whether ``op`` (unwrapped) starts a producer task."""
    return isinstance(op, CUT_TYPES) and _reads_stream(op)


def cut_points(root: Operator) -> list[Operator]:
    """The producer operators of the query rooted at ``root``, in depth-first order.

    The root itself is never a cut (a query whose root is a join runs whole where it is
    placed).  Each operator is listed once, however often the plan reaches it.
    """
    out: list[Operator] = []
    seen: set[int] = set()

    def visit(op: Operator) -> None:
        for child in op.children:
            c = _unwrap(child)
            if id(c) in seen:
                continue
            seen.add(id(c))
            if is_cut(c):
                out.append(c)
            else:
                visit(c)

    visit(_unwrap(root))
    return out


def cut_fingerprint(op: Operator) -> str:
    """A digest of a cut's structure that two containers agree on iff they compute the same.

    It covers operator types, variables, scan patterns (constants as dictionary ids and
    canonical variables), route keys and renamings -- enough to notice that a producer
    and a consumer numbered the canonical variables of a shared join differently (which
    happens when their dictionaries disagree on a constant's id).  Window ranges and
    instance numbers are left out: they legitimately differ between containers.
    """
    parts: list[str] = []
    stack = [op]
    while stack:
        o = _unwrap(stack.pop())
        item: list[object] = [type(o).__name__, o.vars]
        if isinstance(o, ScanOperator):
            item.append(o.pattern)
        elif isinstance(o, RouteOperator):
            item.append(o.key)
        elif isinstance(o, WindowOperator):
            item += [o.buffer.iri, o.step, o.spec.kind]
        mapping = getattr(o, "mapping", None)
        if isinstance(mapping, dict):
            item.append(sorted(mapping.items()))
        item.append(len(o.children))
        parts.append(repr(item))
        stack.extend(reversed(o.children))
    return hashlib.sha1("\n".join(parts).encode("utf-8")).hexdigest()[:16]


@dataclass
class TaskPlan:
    """The operator tasks of a run.

    Attributes:
        producers: Producer task id -> ``(query, cut index)`` occurrences, the first of
            which a host container plans to obtain the operator.
        cuts: Query name -> the producer task id of each of its cuts, in
            :func:`cut_points` order.
        describe: Producer task id -> one line naming the operator (for logs and stats).
        groups: Producer task id -> colocation group: routes of one shared join (one
            router, different window ranges) are best placed together, where the join runs
            once for all of them.
    """

    producers: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    cuts: dict[str, list[str]] = field(default_factory=dict)
    describe: dict[str, str] = field(default_factory=dict)
    groups: dict[str, str | None] = field(default_factory=dict)

    def consumers(self, producer: str) -> list[str]:
        """Queries that read ``producer``."""
        return sorted({q for q, _ in self.producers[producer]})


def plan_tasks(roots: Mapping[str, Operator]) -> TaskPlan:
    """Cuts the plans of queries registered in *one* engine into tasks.

    Args:
        roots: Query name -> root operator (after sharing, so equal signatures are the
            same instance).

    Returns:
        The plan; producer ids are ``op-<n>`` numbered by first appearance in query-name
        order, so equal inputs give equal ids.
    """
    plan = TaskPlan()
    ids: dict[int, str] = {}
    joins: dict[int, str] = {}
    for name in sorted(roots):
        row = []
        for k, op in enumerate(cut_points(roots[name])):
            pid = ids.get(id(op))
            if pid is None:
                pid = ids[id(op)] = f"op-{len(ids) + 1}"
                plan.producers[pid] = []
                plan.describe[pid] = op.describe()
                router = getattr(op, "router", None) if isinstance(op, RouteOperator) else None
                if router is not None:
                    plan.groups[pid] = joins.setdefault(id(router), f"join-{len(joins) + 1}")
                else:
                    plan.groups[pid] = None
            plan.producers[pid].append((name, k))
            row.append(pid)
        plan.cuts[name] = row
    return plan


def place_producers(
    plan: TaskPlan,
    consumers: Mapping[str, str],
    capacities: Mapping[str, int],
    consumer_task: Mapping[str, str] | None = None,
    policy: Policy | None = None,
) -> dict[str, str]:
    """Places the producer tasks with the sans-IO scheduler core.

    Args:
        plan: The run's tasks.
        consumers: Query name -> container holding its consumer task.
        capacities: Container id -> task slots (the containers of the run).
        consumer_task: Query name -> its scheduler task id (default: the name).
        policy: Placement knobs (rebalancing is off here: consumers stay put).

    Returns:
        Producer task id -> container.  A producer the core leaves pending (no free slot
        anywhere) goes to the container of its first consumer.
    """
    core = SchedulerCore(policy or Policy(rebalance_on_tick=False, max_moves=0))
    for cid in sorted(capacities):
        core.handle(ContainerJoined(cid, int(capacities[cid])))
    names = consumer_task or {}
    for q in sorted(consumers):
        if consumers[q] in capacities:
            core.handle(TaskAdded(TaskSpec(names.get(q, q), stateful=True), container=consumers[q]))
    placed: dict[str, str] = {}
    for pid in sorted(plan.producers, key=lambda p: int(p.split("-")[1])):
        # A producer read by several queries weighs more: it feeds more consumers.
        weight = float(len(plan.consumers(pid)))
        spec = TaskSpec(pid, weight=weight, colocate_with=plan.groups.get(pid), stateful=True)
        for action in core.handle(TaskAdded(spec)):
            if isinstance(action, Assign) and action.task == pid:
                placed[pid] = action.container
        if pid not in placed:
            first = plan.producers[pid][0][0]
            placed[pid] = consumers.get(first, sorted(capacities)[0])
    return placed


def remote_cuts(
    plan: TaskPlan, consumers: Mapping[str, str], hosts: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    """``(query, producer, producer's container)`` for every cut read across containers."""
    out = []
    for q in sorted(plan.cuts):
        for pid in plan.cuts[q]:
            if hosts.get(pid) != consumers.get(q):
                out.append((q, pid, hosts[pid]))
    return out


def summarize(plan: TaskPlan, consumers: Mapping[str, str], hosts: Mapping[str, str]) -> dict[str, object]:
    """JSON-ready description of the placement (for stats and tests)."""
    return {
        "producers": {
            pid: {
                "container": hosts[pid],
                "queries": plan.consumers(pid),
                "operator": plan.describe[pid],
                "group": plan.groups.get(pid),
            }
            for pid in plan.producers
        },
        "consumers": {
            q: {"container": consumers.get(q), "reads": list(plan.cuts[q])} for q in sorted(plan.cuts)
        },
        "remote_edges": [list(e) for e in remote_cuts(plan, consumers, hosts)],
    }


def spread_queries(plan: TaskPlan, consumers: Mapping[str, str], hosts: Mapping[str, str]) -> list[str]:
    """Queries whose tasks run on more than one container."""
    return sorted(q for q in plan.cuts if any(hosts[p] != consumers.get(q) for p in plan.cuts[q]))


__all__: Sequence[str] = (
    "CUT_TYPES",
    "TaskPlan",
    "cut_fingerprint",
    "cut_points",
    "is_cut",
    "place_producers",
    "plan_tasks",
    "remote_cuts",
    "spread_queries",
    "summarize",
)
