"""The autoscaling policy: load signals in, a decision out (sans-IO, no clock of its own).

:class:`Autoscaler` is fed one :class:`Signals` snapshot per round (the time is part of
the snapshot) and answers a :class:`Decision`: scale ``out`` to more containers, ``in``
to fewer, or ``hold``, with a reason.  Nothing here talks to ZooKeeper, a process or a
cloud API; :mod:`linkstream.cluster.autoscaler` reads the signals and carries decisions
out through a driver.

The rules, in order:

1. **Changes in flight.**  While a container is joining (launched, not yet a member) or
   draining, hold: the signals describe a cluster that is about to change.
2. **Bounds.**  Fewer containers than ``min_containers``: out to the minimum; more than
   ``max_containers``: in by one.  No sustain time, no cool-down.
3. **Pressure** (any of): the tick lag above ``target_lag_ms`` (event time pushed but not
   yet reported), more than ``queue_high`` elements queued at the leader, the containers'
   mean busy fraction above ``busy_high``, or fewer task slots than tasks.  Once pressure
   has lasted ``out_after_s`` and the last action is ``out_cooldown_s`` old: out by
   ``step_out`` (bounded by the maximum).  At the maximum it holds with ``at_max`` set,
   which is what the "autoscaler at max" alert watches.
4. **Calm** (all of): lag at most ``low_lag_ms`` (default a quarter of the target),
   nothing queued beyond ``queue_low``, mean busy below ``busy_low``, and the tasks still
   fit on one container fewer.  Once calm has lasted ``in_after_s`` and the last action is
   ``in_cooldown_s`` old: in by one (scale-in is always one container at a time, each
   drained before it stops).
5. Anything in between holds (the hysteresis band).

Unknown signals (``None``: no leader load node yet, no container figures) count as
neither pressure nor a reason against calm, except the lag: without a lag figure the
policy never scales in on calm (it may still scale out on queue, busy or slots).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: decision actions
OUT, IN, HOLD = "out", "in", "hold"

#: reason kinds (the ``reason`` label of ``linkstream_autoscaler_decisions_total``)
REASONS = (
    "settling",  # a container joining or draining
    "below_min",
    "above_max",
    "pressure",  # scaled out
    "at_max",  # pressure, but at the maximum
    "calm",  # scaled in
    "sustain",  # pressure or calm, not yet long enough
    "cooldown",  # pressure or calm, too soon after the last action
    "at_min",  # calm, but at the minimum (or the tasks need every container)
    "steady",  # neither pressure nor calm
)


@dataclass(frozen=True)
class Signals:
    """What the cluster looks like at one moment.

    Attributes:
        t: Seconds on a monotonic clock (only differences matter).
        containers: Live containers that are not draining.
        joining: Containers asked for that have not joined yet.
        draining: Containers being drained.
        lag_ms: Tick lag: newest accepted event time minus the last report fired (leader).
        queued: Elements waiting for the leader's live worker.
        busy: Mean fraction of wall time the containers spent applying messages (0..1).
        tasks: Tasks placed or waiting.
        slots: Task slots of one container (0: unknown).
    """

    t: float
    containers: int
    joining: int = 0
    draining: int = 0
    lag_ms: float | None = None
    queued: int | None = None
    busy: float | None = None
    tasks: int = 0
    slots: int = 0


@dataclass(frozen=True)
class Decision:
    """What to do now.

    Attributes:
        action: ``"out"``, ``"in"`` or ``"hold"``.
        current: Containers counted (live, not draining, plus joining).
        desired: Containers wanted after the action (``current`` when holding).
        reason: One of :data:`REASONS`.
        detail: Human-readable explanation with the figures (for the log).
        at_max: Pressure while at the maximum (more containers would be wanted).
    """

    action: str
    current: int
    desired: int
    reason: str
    detail: str
    at_max: bool = False

    @property
    def delta(self) -> int:
        """Containers to add (positive) or remove (negative)."""
        return self.desired - self.current


@dataclass(frozen=True)
class AutoscalePolicy:
    """The knobs (see the module docstring for what each one does).

    Raises:
        ValueError: Bounds or thresholds that cannot work (min > max, busy_low >= busy_high ...).
    """

    min_containers: int = 1
    max_containers: int = 4
    target_lag_ms: float = 5000.0
    low_lag_ms: float | None = None
    queue_high: int = 10_000
    queue_low: int = 0
    busy_high: float = 0.8
    busy_low: float = 0.3
    out_after_s: float = 10.0
    in_after_s: float = 60.0
    out_cooldown_s: float = 30.0
    in_cooldown_s: float = 120.0
    step_out: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.min_containers <= self.max_containers:
            raise ValueError(
                f"autoscale bounds need 0 <= MIN <= MAX, got {self.min_containers}:{self.max_containers}"
            )
        if self.target_lag_ms <= 0:
            raise ValueError(f"target lag must be positive, got {self.target_lag_ms}")
        if self.low_lag_ms is not None and not 0 <= self.low_lag_ms < self.target_lag_ms:
            raise ValueError("the low lag mark must be below the target lag")
        if not 0 <= self.busy_low < self.busy_high:
            raise ValueError("busy_low must be below busy_high")
        if not 0 <= self.queue_low < self.queue_high:
            raise ValueError("queue_low must be below queue_high")
        if self.step_out < 1:
            raise ValueError("step_out must be at least 1")
        for name in ("out_after_s", "in_after_s", "out_cooldown_s", "in_cooldown_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative")

    @property
    def low_lag(self) -> float:
        """The lag at or below which the cluster counts as calm."""
        return self.target_lag_ms / 4 if self.low_lag_ms is None else self.low_lag_ms


@dataclass
class _Memory:
    pressure_since: float | None = None
    calm_since: float | None = None
    last_action: float | None = None
    history: list[Decision] = field(default_factory=list)


class Autoscaler:
    """Decides one round at a time; remembers only when pressure / calm began and the last action.

    Args:
        policy: The knobs.
        keep: Decisions kept in :attr:`history` (newest last).
    """

    def __init__(self, policy: AutoscalePolicy, keep: int = 100) -> None:
        self.policy = policy
        self.keep = keep
        self._m = _Memory()

    @property
    def history(self) -> list[Decision]:
        """The last decisions, oldest first."""
        return list(self._m.history)

    def _record(self, d: Decision, t: float) -> Decision:
        if d.action != HOLD:
            self._m.last_action = t
            self._m.pressure_since = self._m.calm_since = None
        self._m.history.append(d)
        del self._m.history[: -self.keep]
        return d

    def pressure(self, s: Signals) -> list[str]:
        """Why the cluster is under pressure (empty: it is not)."""
        p = self.policy
        why = []
        if s.lag_ms is not None and s.lag_ms > p.target_lag_ms:
            why.append(f"lag {s.lag_ms:.0f} ms > target {p.target_lag_ms:.0f} ms")
        if s.queued is not None and s.queued > p.queue_high:
            why.append(f"{s.queued} elements queued > {p.queue_high}")
        if s.busy is not None and s.busy > p.busy_high:
            why.append(f"containers {s.busy:.0%} busy > {p.busy_high:.0%}")
        if s.slots > 0 and s.tasks > s.slots * (s.containers + s.joining):
            why.append(f"{s.tasks} tasks > {s.slots * (s.containers + s.joining)} slots")
        return why

    def calm(self, s: Signals) -> list[str]:
        """Why the cluster is *not* calm (empty: it is)."""
        p = self.policy
        why = []
        if s.lag_ms is None:
            why.append("no lag figure")
        elif s.lag_ms > p.low_lag:
            why.append(f"lag {s.lag_ms:.0f} ms > {p.low_lag:.0f} ms")
        if s.queued is not None and s.queued > p.queue_low:
            why.append(f"{s.queued} elements queued")
        if s.busy is not None and s.busy >= p.busy_low:
            why.append(f"containers {s.busy:.0%} busy >= {p.busy_low:.0%}")
        return why

    def needed(self, s: Signals) -> int:
        """Containers the tasks need at least (0 when the slots per container are unknown)."""
        return math.ceil(s.tasks / s.slots) if s.slots > 0 else 0

    def decide(self, s: Signals) -> Decision:
        """The decision for this round (and remembers it)."""
        p, m = self.policy, self._m
        n = s.containers + s.joining
        lag = "-" if s.lag_ms is None else f"{s.lag_ms:.0f} ms"
        busy = "-" if s.busy is None else f"{s.busy:.0%}"
        figures = f"{n} containers, lag {lag}, queued {s.queued}, busy {busy}, {s.tasks} tasks"

        def hold(reason: str, detail: str, at_max: bool = False) -> Decision:
            return self._record(Decision(HOLD, n, n, reason, f"{detail} ({figures})", at_max), s.t)

        if s.joining or s.draining:
            m.pressure_since = m.calm_since = None
            return hold("settling", f"{s.joining} joining, {s.draining} draining")
        if n < p.min_containers:
            d = Decision(OUT, n, p.min_containers, "below_min", f"below the minimum {p.min_containers}")
            return self._record(d, s.t)
        if n > p.max_containers:
            d = Decision(IN, n, n - 1, "above_max", f"above the maximum {p.max_containers}")
            return self._record(d, s.t)
        since_action = math.inf if m.last_action is None else s.t - m.last_action
        hot = self.pressure(s)
        if hot:
            m.calm_since = None
            if m.pressure_since is None:
                m.pressure_since = s.t
            why = "; ".join(hot)
            if n >= p.max_containers:
                return hold("at_max", f"at the maximum {p.max_containers}: {why}", at_max=True)
            if s.t - m.pressure_since < p.out_after_s:
                return hold(
                    "sustain", f"pressure for {s.t - m.pressure_since:.0f}/{p.out_after_s:.0f} s: {why}"
                )
            if since_action < p.out_cooldown_s:
                return hold("cooldown", f"pressure, last action {since_action:.0f} s ago: {why}")
            desired = min(p.max_containers, n + p.step_out)
            return self._record(Decision(OUT, n, desired, "pressure", f"{why} ({figures})"), s.t)
        m.pressure_since = None
        cool = self.calm(s)
        if cool:
            m.calm_since = None
            return hold("steady", "; ".join(cool))
        if m.calm_since is None:
            m.calm_since = s.t
        floor = max(p.min_containers, self.needed(s))
        if n <= floor:
            return hold("at_min", f"calm at the floor {floor}")
        if s.t - m.calm_since < p.in_after_s:
            return hold("sustain", f"calm for {s.t - m.calm_since:.0f}/{p.in_after_s:.0f} s")
        if since_action < p.in_cooldown_s:
            return hold("cooldown", f"calm, last action {since_action:.0f} s ago")
        return self._record(
            Decision(IN, n, n - 1, "calm", f"calm for {s.t - m.calm_since:.0f} s ({figures})"), s.t
        )


__all__ = ["HOLD", "IN", "OUT", "REASONS", "AutoscalePolicy", "Autoscaler", "Decision", "Signals"]
