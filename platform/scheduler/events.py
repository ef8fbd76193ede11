"""What the scheduler core consumes (events) and what it asks the world to do (actions).

Events describe facts the I/O layer observed (a container's ZooKeeper node appeared, a
task was submitted, a migration was acknowledged).  Actions are instructions; the I/O
layer carries them out in order.  Both are plain frozen dataclasses so that a sequence
of them can be logged, compared in tests and replayed.

Action semantics in terms of a task's owner (what ``/tasks/<task>`` names):

* ``Assign(t, c)``: ``t`` had no owner; ``c`` owns it now and starts it.
* ``Unassign(t, c)``: ``c`` owned ``t`` and no longer does; ``t`` is pending or removed.
* ``Migrate(t, src, dst, stateful)``: ``dst`` owns ``t`` now.  ``src`` owned it (or owned
  it before a failed hand-over and still holds its state).  For a stateful task the
  runtime snapshots the state on ``src`` and restores it on ``dst``, then acknowledges
  with :class:`MigrationCompleted`; a stateless move completes at once.
* ``ReportLoss(t, c)``: the state ``t`` had on ``c`` is gone (``c`` died); whoever
  runs ``t`` next must replay it from the last checkpoint.
* ``DrainComplete(c)``: ``c`` was asked to leave gracefully and owns nothing any more.
* ``Rebalanced`` and ``TaskPending``: bookkeeping for logs and metrics; no effect.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from linkstream.scheduler.state import TaskSpec

# --------------------------------------------------------------------------- events


@dataclass(frozen=True)
class ContainerJoined:
    """An operator container registered (or re-registered with new figures).

    Attributes:
        container: Container id.
        capacity: Number of task slots.
        address: Data-plane address, e.g. ``tcp://127.0.0.1:5601``.
    """

    container: str
    capacity: int
    address: str = ""


@dataclass(frozen=True)
class ContainerLeft:
    """A container is gone without draining (its ZooKeeper session ended)."""

    container: str


@dataclass(frozen=True)
class ContainerDraining:
    """A graceful remove was requested: move everything off, then acknowledge."""

    container: str


@dataclass(frozen=True)
class TaskAdded:
    """A task was submitted.

    Attributes:
        task: The task's spec.
        container: Restore hint: the container that already owns the task (a new
            leader rebuilding its state from ZooKeeper); kept if it can be.
        migrating_from: Restore hint: an unacknowledged stateful hand-over's source.
    """

    task: TaskSpec
    container: str | None = None
    migrating_from: str | None = None


@dataclass(frozen=True)
class TaskRemoved:
    """A task was withdrawn (no query needs its signature any more)."""

    task: str


@dataclass(frozen=True)
class LoadReport:
    """Measured load of one container.

    Attributes:
        container: Container id.
        load: Total load in the same units as task weights.
        task_loads: Measured load per task on that container; replaces the weights.
    """

    container: str
    load: float
    task_loads: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class MigrationCompleted:
    """The runtime restored a migrated stateful task on its new owner."""

    task: str


@dataclass(frozen=True)
class Tick:
    """Periodic nudge: place pending tasks, continue drains, rebalance by load."""

    now: float = 0.0


Event = (
    ContainerJoined
    | ContainerLeft
    | ContainerDraining
    | TaskAdded
    | TaskRemoved
    | LoadReport
    | MigrationCompleted
    | Tick
)

# --------------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Assign:
    """``container`` now owns ``task`` (which had no owner)."""

    task: str
    container: str


@dataclass(frozen=True)
class Unassign:
    """``container`` no longer owns ``task``."""

    task: str
    container: str


@dataclass(frozen=True)
class Migrate:
    """Ownership of ``task`` moves from ``src`` to ``dst``; see the module docstring."""

    task: str
    src: str
    dst: str
    stateful: bool


@dataclass(frozen=True)
class ReportLoss:
    """The state of ``task`` held by the dead ``container`` is lost."""

    task: str
    container: str


@dataclass(frozen=True)
class DrainComplete:
    """The draining ``container`` owns no task and may shut down."""

    container: str


@dataclass(frozen=True)
class TaskPending:
    """``task`` has no owner because no container has a free slot."""

    task: str


@dataclass(frozen=True)
class Rebalanced:
    """Summary of one rebalance round.

    Attributes:
        trigger: Name of the event type that started it.
        moves: Tasks moved in this round.
        spread_before: Max minus min utilisation of eligible containers before.
        spread_after: The same after the moves.
    """

    trigger: str
    moves: int
    spread_before: float
    spread_after: float


Action = Assign | Unassign | Migrate | ReportLoss | DrainComplete | TaskPending | Rebalanced
