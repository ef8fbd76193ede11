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
equal on every container by ``RunReplica.preplan``).  That is why engines of a cluster
keep ``Engine(lone_joins=False)``: a lone routable join planned directly would be a plain
join on a container that holds the query alone and a shared join's route where another
query of its signature is registered.

:func:`place_producers` places producer tasks with the sans-IO
:class:`~linkstream.scheduler.core.SchedulerCore`: the containers with their capacity,
the consumer tasks where the coordinator put them (restore hints), then the producers,
which the core sends to the least utilised container with a free slot.  Nothing here
does I/O.

**Partitioned producers.**  With ``parallelism`` k > 1, a producer whose join inputs
bind a common output variable (:func:`partition_var`; every route of one shared join
must agree on it) is split into k *instances*, the producer *channels* ``<pid>.<i>``:
instance ``i`` joins only the rows of its inputs whose fields-grouping hash of that
variable is ``i`` (:class:`~linkstream.containers.groupings.FieldsGrouping`), so its
output is partition ``i`` of the join's output and the consumers' union of the k
outputs is the whole.  When all inputs bind the variable every input is partitioned;
otherwise the inputs that do not are broadcast whole to every instance.
Instances are placed like any producer (one task each); an unpartitioned producer has
the single channel ``<pid>``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.router import RouteOperator
from linkstream.operators.scan import ScanOperator
from linkstream.operators.timed_window import TimedWindowOperator
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
    happens when their dictionaries disagree on a constant's id).  Window ranges, the
    steps of a shared join's timed windows and instance numbers are left out: they
    legitimately differ between containers.
    """
    parts: list[str] = []
    stack = [op]
    while stack:
        o = _unwrap(stack.pop())
        while getattr(o, "fingerprint_transparent", False):
            o = _unwrap(o.children[0])  # a partitioned instance's input filter
        item: list[object] = [type(o).__name__, o.vars]
        if isinstance(o, ScanOperator):
            item.append(o.pattern)
        elif isinstance(o, RouteOperator):
            item.append(o.key)
        elif isinstance(o, TimedWindowOperator):  # (its step, like its range, fits its readers)
            item += [o.buffer.iri, o.spec.kind]
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
    #: producer id -> the variable its instances are partitioned on (absent: unpartitioned)
    partition: dict[str, str] = field(default_factory=dict)
    #: the number of instances of every partitioned producer
    parallelism: int = 1

    def consumers(self, producer: str) -> list[str]:
        """Queries that read ``producer``."""
        return sorted({q for q, _ in self.producers[producer]})

    def parts(self, producer: str) -> int:
        """How many instances ``producer`` runs as."""
        return self.parallelism if producer in self.partition else 1

    def channels(self, producer: str) -> list[str]:
        """The channel (instance) ids of ``producer``: ``[pid]``, or ``pid.0`` .. ``pid.k-1``."""
        return channel_ids(producer, self.parts(producer))

    def all_channels(self) -> list[str]:
        """Every channel of every producer, in producer order."""
        return [ch for pid in _ordered(self.producers) for ch in self.channels(pid)]


def channel_ids(producer: str, parts: int) -> list[str]:
    """Channel ids of a producer run as ``parts`` instances."""
    return [producer] if parts <= 1 else [f"{producer}.{i}" for i in range(parts)]


def _ordered(producers: Mapping[str, object]) -> list[str]:
    return sorted(producers, key=lambda p: int(p.split("-")[1]))


def partition_join(op: Operator) -> MJoinOperator | None:
    """The join whose inputs a partitioned instance of producer ``op`` filters, if any."""
    op = _unwrap(op)
    if isinstance(op, RouteOperator):
        join = _unwrap(op.router.join)
    else:
        join = op
    if isinstance(join, MJoinOperator) and len(join.children) >= 2:
        return join
    return None


def _hidden(var: str) -> bool:
    # Timestamp (``%t``) and hidden constant (``%h``) columns of shared joins.
    return var.startswith(("%t", "%h"))


def partition_coverage(op: Operator) -> dict[str, int]:
    """Variables producer ``op`` can be hash-partitioned on, with how many join inputs bind each.

    A variable qualifies when the producer outputs it (so instances output disjoint
    rows, and a router's per-binding counts never span two instances) and at least one
    input of its join binds it in every row.  Inputs that bind it are fields-grouped on
    it; inputs that do not are broadcast to every instance (the all grouping): a join
    row then comes out of exactly the instance its value hashes to.  Hidden columns
    (timestamps, constants) never qualify.
    """
    join = partition_join(op)
    if join is None:
        return {}
    out_vars = {v for v in _unwrap(op).vars if not _hidden(v)}
    cover: dict[str, int] = {}
    for child in join.children:
        for v in child.vars:
            if v in child.certain and v in out_vars:
                cover[v] = cover.get(v, 0) + 1
    return cover


def partition_candidates(op: Operator) -> set[str]:
    """The variables :func:`partition_var` may choose for producer ``op``."""
    return set(partition_coverage(op))


def partition_var(op: Operator) -> str | None:
    """The variable producer ``op`` is partitioned on, or ``None``.

    The one bound by the most join inputs (ties: the smallest name), so the fewest
    inputs are broadcast; ``None`` unless it is bound by at least two.
    """
    cover = partition_coverage(op)
    if not cover:
        return None
    best = min(cover, key=lambda v: (-cover[v], v))
    return best if cover[best] >= 2 else None


def plan_tasks(roots: Mapping[str, Operator], parallelism: int = 1) -> TaskPlan:
    """Cuts the plans of queries registered in *one* engine into tasks.

    Args:
        roots: Query name -> root operator (after sharing, so equal signatures are the
            same instance).
        parallelism: Instances of every partitionable producer (1: none is partitioned).

    Returns:
        The plan; producer ids are ``op-<n>`` numbered by first appearance in query-name
        order, so equal inputs give equal ids.
    """
    if parallelism < 1:
        raise ValueError(f"parallelism must be >= 1, got {parallelism}")
    plan = TaskPlan(parallelism=parallelism)
    ids: dict[int, str] = {}
    joins: dict[int, str] = {}
    ops: dict[str, Operator] = {}
    for name in sorted(roots):
        row = []
        for k, op in enumerate(cut_points(roots[name])):
            pid = ids.get(id(op))
            if pid is None:
                pid = ids[id(op)] = f"op-{len(ids) + 1}"
                ops[pid] = op
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
    if parallelism > 1:
        _partition(plan, ops)
    return plan


def _partition(plan: TaskPlan, ops: Mapping[str, Operator]) -> None:
    """Chooses the partition variable of every partitionable producer (whole join groups)."""
    by_group: dict[str, list[str]] = {}
    for pid in _ordered(plan.producers):
        by_group.setdefault(plan.groups.get(pid) or pid, []).append(pid)
    for members in by_group.values():
        # Routes of one join share the join (and its partition filters) on a host: they
        # must agree on the variable, which every one of them outputs.
        chosen = {partition_var(ops[pid]) for pid in members}
        common = set.intersection(*(partition_candidates(ops[pid]) for pid in members))
        var = chosen.pop() if len(chosen) == 1 else None
        if var is not None and var in common:
            for pid in members:
                plan.partition[pid] = var


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
        Producer channel id (:meth:`TaskPlan.channels`) -> container.  A channel the
        core leaves pending (no free slot anywhere) goes to the container of its first
        consumer.
    """
    core = SchedulerCore(policy or Policy(rebalance_on_tick=False, max_moves=0))
    for cid in sorted(capacities):
        core.handle(ContainerJoined(cid, int(capacities[cid])))
    names = consumer_task or {}
    for q in sorted(consumers):
        if consumers[q] in capacities:
            core.handle(TaskAdded(TaskSpec(names.get(q, q), stateful=True), container=consumers[q]))
    placed: dict[str, str] = {}
    for spec in producer_specs(plan):
        ch = spec.id
        for action in core.handle(TaskAdded(spec)):
            if isinstance(action, Assign) and action.task == ch:
                placed[ch] = action.container
        if ch not in placed:
            first = plan.producers[ch.split(".")[0]][0][0]
            placed[ch] = consumers.get(first, sorted(capacities)[0])
    return placed


def producer_specs(plan: TaskPlan) -> list[TaskSpec]:
    """The scheduler task spec of every producer channel (ids are channel ids).

    A producer read by several queries weighs more (it feeds more consumers); each
    instance of a partitioned one does a k-th of its work.  Routes of one join are
    colocated, instance by instance.
    """
    out = []
    for pid in _ordered(plan.producers):
        k = plan.parts(pid)
        weight = float(len(plan.consumers(pid))) / k
        group = plan.groups.get(pid)
        for i, ch in enumerate(plan.channels(pid)):
            g = group if group is None or k == 1 else f"{group}.{i}"
            out.append(TaskSpec(ch, weight=weight, colocate_with=g, stateful=True))
    return out


def remote_cuts(
    plan: TaskPlan, consumers: Mapping[str, str], hosts: Mapping[str, str]
) -> list[tuple[str, str, str]]:
    """``(query, channel, its container)`` for every producer channel read across containers."""
    out = []
    for q in sorted(plan.cuts):
        for pid in plan.cuts[q]:
            for ch in plan.channels(pid):
                if hosts.get(ch) != consumers.get(q):
                    out.append((q, ch, hosts[ch]))
    return out


def summarize(plan: TaskPlan, consumers: Mapping[str, str], hosts: Mapping[str, str]) -> dict[str, object]:
    """JSON-ready description of the placement (for stats and tests)."""
    return {
        "producers": {
            pid: {
                "container": hosts[plan.channels(pid)[0]],
                "queries": plan.consumers(pid),
                "operator": plan.describe[pid],
                "group": plan.groups.get(pid),
                "partition": plan.partition.get(pid),
                "instances": {ch: hosts[ch] for ch in plan.channels(pid)},
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
    return sorted(
        q
        for q in plan.cuts
        if any(hosts[ch] != consumers.get(q) for p in plan.cuts[q] for ch in plan.channels(p))
    )


__all__: Sequence[str] = (
    "CUT_TYPES",
    "TaskPlan",
    "channel_ids",
    "cut_fingerprint",
    "cut_points",
    "is_cut",
    "partition_candidates",
    "partition_coverage",
    "partition_join",
    "partition_var",
    "place_producers",
    "plan_tasks",
    "producer_specs",
    "remote_cuts",
    "spread_queries",
    "summarize",
)
