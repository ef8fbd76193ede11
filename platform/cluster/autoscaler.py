"""``linkstream autoscaler``: reads the cluster's load, asks the policy, acts through a driver.

One autoscaler acts per cluster: every ``linkstream autoscaler`` process joins the
election at ``<root>/autoscaler-election`` and only the elected one runs rounds, so it can
run next to every coordinator.  A round (every ``interval`` seconds):

1. **Read** (:func:`read_signals`): membership (live and draining containers), the
   assignment table (tasks, tasks per container) and the load nodes
   (:mod:`linkstream.scheduler.load`): the leading coordinator's tick lag and queued
   elements, each container's busy fraction.  Figures older than ``max_age_s`` count as
   unknown.
2. **Decide** (:class:`linkstream.scheduler.autoscale.Autoscaler`, sans-IO): hysteresis,
   sustain times, cool-downs, bounds.
3. **Log and count**: every decision is logged with its reason (actions and reason
   changes at INFO) and counted in ``linkstream_autoscaler_decisions_total{action,
   reason}``; the gauges show the count, the recommendation, the bounds, ``at_max`` and
   the lag read.
4. **Act** through a driver:

   * ``local`` (:class:`LocalDriver`): starts container processes of a
     :class:`~linkstream.cluster.localcluster.LocalCluster`; scale-in drains one container
     (the scheduler moves its tasks, stateful ones with their state), which then leaves
     and exits; its process is stopped if it lingers.
   * ``aws`` (:class:`AwsDriver`): sets the autoscaling group's desired capacity (boto3);
     scale-in drains the container first, then terminates its instance with
     ``ShouldDecrementDesiredCapacity``; an instance the group itself is terminating
     (``Terminating:Wait`` through the drain lifecycle hook) is drained too, and its
     lifecycle action completed (``CONTINUE``) once the container has left.  Containers
     must be started with ``--id <EC2 instance id>`` (``terraform/`` does).
   * ``none`` (:class:`RecommendDriver`): changes nothing; the recommendation is the
     ``linkstream_autoscaler_desired_containers`` gauge, a virtual container count that
     follows the policy's advice (and resets to the real count whenever that changes).

Scale-in is always one drained container at a time; the policy holds while a container
joins or drains.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from linkstream.metrics import AutoscalerMetrics
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.autoscale import HOLD, IN, OUT, AutoscalePolicy, Autoscaler, Decision, Signals
from linkstream.scheduler.layout import DEFAULT_ROOT, encode
from linkstream.scheduler.load import autoscalers_path, read_loads
from linkstream.scheduler.membership import Member, Membership

if TYPE_CHECKING:
    from linkstream.cluster.localcluster import LocalCluster

logger = logging.getLogger(__name__)

#: load figures older than this (seconds) count as unknown
MAX_AGE_S = 10.0


def _path(root: str, *parts: str) -> str:
    return "/".join(("" if root == "/" else root, *parts))


def election_path(root: str = DEFAULT_ROOT) -> str:
    """Where autoscalers elect the one that acts."""
    return _path(root, "autoscaler-election")


# ---------------------------------------------------------------------------- signals


class ClusterView:
    """One read of the cluster: members, tasks per container, load figures."""

    def __init__(
        self, members: dict[str, Member], tasks: dict[str, str | None], loads: dict[str, dict[str, Any]]
    ) -> None:
        self.members = members
        self.tasks = tasks  # task -> container (None: pending)
        self.loads = loads

    @property
    def live(self) -> dict[str, Member]:
        """Members that are not draining."""
        return {k: m for k, m in self.members.items() if not m.draining}

    def tasks_on(self, cid: str) -> int:
        return sum(1 for c in self.tasks.values() if c == cid)

    @classmethod
    def read(cls, client: KazooClient, root: str = DEFAULT_ROOT) -> ClusterView:
        members = Membership(client, root).members()
        tasks = {t: a.container for t, a in AssignmentTable(client, root).all().items()}
        return cls(members, tasks, read_loads(client, root))


def _fresh(node: dict[str, Any] | None, now: float, max_age_s: float) -> bool:
    return node is not None and now - float(node.get("at", 0)) <= max_age_s


def read_signals(
    view: ClusterView,
    t: float,
    *,
    containers: int,
    joining: int,
    draining: int,
    max_age_s: float = MAX_AGE_S,
    wall: float | None = None,
) -> Signals:
    """The policy's :class:`Signals` from one :class:`ClusterView`.

    Args:
        view: What was read.
        t: Monotonic time of the round.
        containers: Containers to count (the driver's view: live members, or a virtual count).
        joining: Containers asked for that have not joined.
        draining: Containers being drained.
        max_age_s: Load figures older than this are unknown.
        wall: Wall clock of the round (``time.time()`` when ``None``).
    """
    now = time.time() if wall is None else wall
    leader = view.loads.get("leader")
    lag = queued = None
    if _fresh(leader, now, max_age_s):
        assert leader is not None
        lag = float(leader.get("lag_ms", 0))
        queued = int(leader.get("queued", 0))
    busy = [
        float(view.loads[cid].get("busy", 0.0))
        for cid in view.live
        if _fresh(view.loads.get(cid), now, max_age_s)
    ]
    caps = [m.capacity for m in view.live.values() if m.capacity > 0]
    return Signals(
        t=t,
        containers=containers,
        joining=joining,
        draining=draining,
        lag_ms=lag,
        queued=queued,
        busy=sum(busy) / len(busy) if busy else None,
        tasks=len(view.tasks),
        slots=min(caps) if caps else 0,
    )


def pick_victim(view: ClusterView, candidates: list[str]) -> str | None:
    """The container to drain: fewest tasks, then the newest (``oc-10`` after ``oc-9``)."""
    newest_first = sorted(candidates, key=lambda c: (len(c), c), reverse=True)
    return min(newest_first, key=view.tasks_on, default=None)


# ---------------------------------------------------------------------------- drivers


class Driver(Protocol):
    """How decisions become containers."""

    name: str

    def step(self, view: ClusterView) -> None:
        """Moves asynchronous work on (drains that completed, instances to finish)."""

    def count(self, view: ClusterView) -> int:
        """Containers to count for the policy."""

    def joining(self, view: ClusterView) -> int:
        """Containers asked for that have not joined yet."""

    def draining(self, view: ClusterView) -> int:
        """Containers being drained."""

    def candidates(self, view: ClusterView) -> list[str]:
        """Containers this driver may remove."""

    def scale_out(self, n: int, view: ClusterView) -> None:
        """Asks for ``n`` more containers."""

    def scale_in(self, cid: str, view: ClusterView) -> None:
        """Starts removing ``cid`` (drain first)."""


class _Drains:
    """Drain requests this autoscaler made and is waiting on."""

    def __init__(self, membership: Membership, timeout: float) -> None:
        self.membership = membership
        self.timeout = timeout
        self.started: dict[str, float] = {}

    def request(self, cid: str) -> None:
        self.membership.request_drain(cid)
        self.started.setdefault(cid, time.monotonic())
        logger.info("autoscaler: draining %s", cid)

    def finished(self, view: ClusterView) -> list[str]:
        """Drained containers (no longer members); forgets them."""
        done = [c for c in self.started if c not in view.members]
        for c in done:
            logger.info("autoscaler: %s drained in %.1f s", c, time.monotonic() - self.started.pop(c))
        for c, t0 in self.started.items():
            if time.monotonic() - t0 > self.timeout:
                logger.warning("autoscaler: %s still draining after %.0f s", c, time.monotonic() - t0)
        return done


def _draining_members(view: ClusterView) -> int:
    return sum(1 for m in view.members.values() if m.draining)


class RecommendDriver:
    """``none``: acts on nothing; its count follows the policy's advice (the recommendation).

    The virtual count starts at the real one and resets to it whenever the real count
    changes (someone acted on the recommendation, or a container died).
    """

    name = "none"

    def __init__(self) -> None:
        self.virtual: int | None = None
        self._real: int | None = None

    def step(self, view: ClusterView) -> None:
        real = len(view.live)
        if real != self._real:
            self._real = self.virtual = real

    def count(self, view: ClusterView) -> int:
        return len(view.live) if self.virtual is None else self.virtual

    def joining(self, view: ClusterView) -> int:
        return 0

    def draining(self, view: ClusterView) -> int:
        return _draining_members(view)

    def candidates(self, view: ClusterView) -> list[str]:
        return list(view.live) or ["-"]  # nothing is removed: only the count moves

    def scale_out(self, n: int, view: ClusterView) -> None:
        self.virtual = self.count(view) + n

    def scale_in(self, cid: str, view: ClusterView) -> None:
        self.virtual = max(0, self.count(view) - 1)


class LocalDriver:
    """``local``: container processes of a :class:`LocalCluster`.

    Args:
        cluster: The local cluster (``LocalCluster.load(DIR)``).
        membership: Membership on the autoscaler's ZooKeeper client.
        capacity: Task slots of added containers (default: the cluster's).
        drain_timeout: Seconds after which a drain that has not completed is reported.
        join_timeout: Seconds a started container may take to join before it is given up.
    """

    name = "local"

    def __init__(
        self,
        cluster: LocalCluster,
        membership: Membership,
        capacity: int | None = None,
        drain_timeout: float = 120.0,
        join_timeout: float = 60.0,
    ) -> None:
        self.cluster = cluster
        self.capacity = capacity
        self.join_timeout = join_timeout
        self.drains = _Drains(membership, drain_timeout)
        self.started: dict[str, float] = {}

    def step(self, view: ClusterView) -> None:
        from linkstream.cluster.localcluster import pid_alive

        joined = False
        for cid, t0 in list(self.started.items()):
            record = self.cluster.state.processes.get(cid)
            if cid in view.members:
                joined = True
                del self.started[cid]
            elif record is None or not pid_alive(record.pid):
                logger.error(
                    "autoscaler: container %s exited before joining (log %s)", cid, record and record.log
                )
                del self.started[cid]
            elif time.monotonic() - t0 > self.join_timeout:
                logger.error("autoscaler: container %s did not join within %.0f s", cid, self.join_timeout)
                del self.started[cid]
        for cid in self.drains.finished(view):
            record = self.cluster.state.processes.get(cid)
            if record is not None and pid_alive(record.pid):
                # a drained container leaves on its own; stop it if it lingers
                threading.Thread(target=self._stop_later, args=(cid,), daemon=True).start()
            joined = True
        if joined:
            try:
                self.cluster.write_prometheus_targets()
            except Exception:  # advisory
                logger.debug("cannot rewrite the Prometheus targets", exc_info=True)

    def _stop_later(self, cid: str, grace: float = 5.0) -> None:
        from linkstream.cluster.localcluster import pid_alive

        record = self.cluster.state.processes[cid]
        deadline = time.monotonic() + grace
        while pid_alive(record.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if pid_alive(record.pid):
            self.cluster.kill(cid, signal.SIGTERM)

    def count(self, view: ClusterView) -> int:
        return len(view.live)

    def joining(self, view: ClusterView) -> int:
        return len(self.started)

    def draining(self, view: ClusterView) -> int:
        return max(len(self.drains.started), _draining_members(view))

    def candidates(self, view: ClusterView) -> list[str]:
        return [c for c in view.live if c in self.cluster.state.processes]

    def scale_out(self, n: int, view: ClusterView) -> None:
        ids = self.cluster.add_containers(n, capacity=self.capacity, wait=0)
        now = time.monotonic()
        for cid in ids:
            self.started[cid] = now
        logger.info("autoscaler: started %s", ", ".join(ids))

    def scale_in(self, cid: str, view: ClusterView) -> None:
        self.drains.request(cid)


class AwsDriver:
    """``aws``: an EC2 autoscaling group whose instances run one container each (id = instance id).

    Args:
        asg: A boto3 ``autoscaling`` client.
        group: The autoscaling group's name.
        membership: Membership on the autoscaler's ZooKeeper client.
        hook: Name of the group's termination lifecycle hook (``terraform/``: ``drain``).
        drain_timeout: Seconds after which a drain that has not completed is reported.
        join_timeout: Seconds an instance may take from launch to joining before it no
            longer counts as joining.
    """

    name = "aws"

    def __init__(
        self,
        asg: Any,
        group: str,
        membership: Membership,
        hook: str = "drain",
        drain_timeout: float = 600.0,
        join_timeout: float = 900.0,
    ) -> None:
        self.asg = asg
        self.group = group
        self.hook = hook
        self.join_timeout = join_timeout
        self.drains = _Drains(membership, drain_timeout)
        self.terminating: set[str] = set()  # drained by us, terminated, hook not yet completed
        self.completed: set[str] = set()
        self._first_seen: dict[str, float] = {}
        self._desc: dict[str, Any] = {}

    def describe(self) -> dict[str, Any]:
        """The group as ``describe_auto_scaling_groups`` returns it."""
        groups = self.asg.describe_auto_scaling_groups(AutoScalingGroupNames=[self.group])[
            "AutoScalingGroups"
        ]
        if not groups:
            raise RuntimeError(f"no autoscaling group named {self.group!r}")
        self._desc = groups[0]
        return self._desc

    def _instances(self) -> dict[str, str]:
        return {i["InstanceId"]: i["LifecycleState"] for i in self._desc.get("Instances", [])}

    def step(self, view: ClusterView) -> None:
        self.describe()
        instances = self._instances()
        now = time.monotonic()
        for iid in instances:
            self._first_seen.setdefault(iid, now)
        for cid in self.drains.finished(view):
            if cid in self.terminating or cid in self.completed:
                continue
            if instances.get(cid, "").startswith("Terminating"):
                self.terminating.add(cid)  # the group's own termination: the hook below
                continue
            logger.info("autoscaler: terminating instance %s of %s (drained)", cid, self.group)
            self.asg.terminate_instance_in_auto_scaling_group(
                InstanceId=cid, ShouldDecrementDesiredCapacity=True
            )
            self.terminating.add(cid)
        for iid, state in instances.items():
            if state != "Terminating:Wait" or iid in self.completed:
                continue
            member = view.members.get(iid)
            if member is not None:
                if iid not in self.drains.started:
                    logger.info("autoscaler: %s is terminating (lifecycle hook): draining it first", iid)
                    self.drains.request(iid)
                continue
            logger.info("autoscaler: completing lifecycle action %s of %s (CONTINUE)", self.hook, iid)
            self.asg.complete_lifecycle_action(
                LifecycleHookName=self.hook,
                AutoScalingGroupName=self.group,
                InstanceId=iid,
                LifecycleActionResult="CONTINUE",
            )
            self.completed.add(iid)
            self.terminating.discard(iid)
        for iid in list(self.terminating):
            if iid not in instances:  # gone (no hook, or completed meanwhile)
                self.terminating.discard(iid)

    def _active(self) -> dict[str, str]:
        return {i: s for i, s in self._instances().items() if not s.startswith(("Terminating", "Terminated"))}

    def count(self, view: ClusterView) -> int:
        return sum(1 for c in view.live if c in self._active())

    def joining(self, view: ClusterView) -> int:
        active = self._active()
        now = time.monotonic()
        waiting = [
            i
            for i in active
            if i not in view.members and now - self._first_seen.get(i, now) <= self.join_timeout
        ]
        unlaunched = max(0, int(self._desc.get("DesiredCapacity", 0)) - len(active))
        return len(waiting) + unlaunched

    def draining(self, view: ClusterView) -> int:
        return max(len(self.drains.started) + len(self.terminating), _draining_members(view))

    def candidates(self, view: ClusterView) -> list[str]:
        active = self._active()
        return [c for c in view.live if active.get(c) == "InService"]

    def scale_out(self, n: int, view: ClusterView) -> None:
        desired = int(self._desc.get("DesiredCapacity", 0)) + n
        cap = int(self._desc.get("MaxSize", desired))
        if desired > cap:
            logger.warning(
                "autoscaler: %s's MaxSize %d caps the desired capacity %d", self.group, cap, desired
            )
            desired = cap
        logger.info("autoscaler: desired capacity of %s -> %d", self.group, desired)
        self.asg.set_desired_capacity(
            AutoScalingGroupName=self.group, DesiredCapacity=desired, HonorCooldown=False
        )

    def scale_in(self, cid: str, view: ClusterView) -> None:
        self.drains.request(cid)


# ---------------------------------------------------------------------------- the loop


class AutoscalerService:
    """Rounds of read, decide, log, count, act (while elected).

    Args:
        client: A started kazoo client (the cluster's credential).
        driver: How decisions become containers.
        policy: The policy's knobs.
        root: Cluster root inside the chroot.
        interval: Seconds between rounds.
        metrics: Where to count; fresh when ``None``.
        identifier: Name in the election.
        meta: Fields of the advertised node (pid, ``/metrics`` endpoint).
        max_age_s: Load figures older than this are unknown.
        clock: Monotonic clock of the rounds.
        on_decision: Called with every decision (tests, the bench).
    """

    def __init__(
        self,
        client: KazooClient,
        driver: Driver,
        policy: AutoscalePolicy,
        *,
        root: str = DEFAULT_ROOT,
        interval: float = 2.0,
        metrics: AutoscalerMetrics | None = None,
        identifier: str = "autoscaler",
        meta: dict[str, Any] | None = None,
        max_age_s: float = MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
        on_decision: Callable[[Decision, Signals], None] | None = None,
    ) -> None:
        self.client = client
        self.driver = driver
        self.policy = policy
        self.scaler = Autoscaler(policy)
        self.root = root
        self.interval = interval
        self.metrics = metrics or AutoscalerMetrics()
        self.identifier = identifier
        self.meta = dict(meta or {})
        self.max_age_s = max_age_s
        self.clock = clock
        self.on_decision = on_decision
        self._last_reason: str | None = None
        self.metrics.identify(identifier)
        self.metrics.bound.labels("min").set(policy.min_containers)
        self.metrics.bound.labels("max").set(policy.max_containers)
        for action in (OUT, IN, HOLD):
            self.metrics.decisions.labels(action, "steady" if action == HOLD else "pressure")

    def round(self) -> Decision:
        """One read-decide-act round."""
        view = ClusterView.read(self.client, self.root)
        self.driver.step(view)
        signals = read_signals(
            view,
            self.clock(),
            containers=self.driver.count(view),
            joining=self.driver.joining(view),
            draining=self.driver.draining(view),
            max_age_s=self.max_age_s,
        )
        d = self.scaler.decide(signals)
        m = self.metrics
        m.decisions.labels(d.action, d.reason).inc()
        m.containers.set(d.current)
        m.desired.set(d.desired)
        m.at_max.set(1 if d.at_max else 0)
        if signals.lag_ms is not None:
            m.tick_lag.set(signals.lag_ms / 1000.0)
        if d.action != HOLD:
            logger.info("autoscaler: %s %d -> %d: %s: %s", d.action, d.current, d.desired, d.reason, d.detail)
        elif d.reason != self._last_reason:
            logger.info("autoscaler: hold at %d: %s: %s", d.current, d.reason, d.detail)
        else:
            logger.debug("autoscaler: hold at %d: %s: %s", d.current, d.reason, d.detail)
        self._last_reason = d.reason
        if d.action == OUT:
            self.driver.scale_out(d.delta, view)
        elif d.action == IN:
            victim = pick_victim(view, self.driver.candidates(view))
            if victim is not None:
                self.driver.scale_in(victim, view)
            else:
                logger.warning("autoscaler: no container this driver may remove")
        if self.on_decision is not None:
            self.on_decision(d, signals)
        return d

    def _advertise(self) -> None:
        path = f"{autoscalers_path(self.root)}/{self.identifier}"
        try:
            self.client.create(path, encode(self.meta), ephemeral=True, makepath=True)
        except NodeExistsError:
            self.client.set(path, encode(self.meta))

    def serve(self, stop: threading.Event) -> int:
        """Joins the election and runs rounds while elected, until ``stop`` is set."""
        self._advertise()
        election = self.client.Election(election_path(self.root), self.identifier)

        def lead() -> None:
            logger.info("autoscaler %s: elected (driver %s)", self.identifier, self.driver.name)
            while not stop.is_set():
                try:
                    self.round()
                except Exception:  # a ZooKeeper or cloud API hiccup: next round
                    logger.exception("autoscaler round failed")
                stop.wait(self.interval)

        th = threading.Thread(target=election.run, args=(lead,), name="autoscaler-election", daemon=True)
        th.start()
        stop.wait()
        election.cancel()
        th.join(self.interval + 5)
        return 0


__all__ = [
    "AutoscalerService",
    "AwsDriver",
    "ClusterView",
    "Driver",
    "LocalDriver",
    "RecommendDriver",
    "election_path",
    "pick_victim",
    "read_signals",
]
