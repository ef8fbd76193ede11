"""The consumer side of a producer channel: generations, resets, and the remote input.

A producer channel (one producer, or one instance of a partitioned one) may be hosted
by several containers in turn during a run: each hosting has a *generation* (the
driver numbers them).  Its host sends one batch per tick, ``(gen, seq, delta)``, and
the **first batch of a generation is the channel's whole state** at that tick (the new
host built the producer from its stream buffers, so its first delta is everything).

:class:`Channel` turns that into exact deltas at tick granularity, whatever the order
batches of two hosts arrive in:

* batches of an older generation than the newest seen are dropped;
* a newer generation's first batch (its *reset*) replaces the accumulated state: the
  delta handed on is ``reset + later batches - accumulated``, so rows the old host
  already sent are not sent twice and rows it never sent are not lost;
* tick ``t`` is complete when the newest generation has sent tick ``t`` (or a reset
  past it: a consumer lagging behind a host that was built later).

:class:`RemoteInput` stands in a consumer's plan for a producer read from its channels
(one, or one per partition instance: the union of their deltas).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, concat, consolidate


@dataclass
class _Entry:
    gen: int
    seq: int
    batch: Batch
    reset: bool


@dataclass
class Channel:
    """What one consumer container received of one producer channel.

    Attributes:
        id: The channel id.
        vars: The consumer's variables of the cut (batches are projected to them).
        partition: ``(var, index, parts)`` of a partitioned instance, else ``None``.
    """

    id: str
    vars: tuple[str, ...]
    partition: tuple[str, int, int] | None = None
    gen: int = 0
    done: int = 0
    resets: int = 0
    dropped: int = 0
    _entries: list[_Entry] = field(default_factory=list)
    _acc: list[Batch] = field(default_factory=list)

    def offer(self, gen: int, seq: int, batch: Batch) -> bool:
        """Files a received batch; returns whether it was kept (not of a stale generation)."""
        if gen < self.gen:
            self.dropped += 1
            return False
        reset = gen > self.gen
        if reset:
            self.resets += self.gen > 0  # a host took over from an earlier one
            self.gen = gen
            self.dropped += len(self._entries)
            self._entries = []
        if batch.vars != self.vars:
            batch = batch.project(self.vars)
        self._entries.append(_Entry(gen, seq, batch, reset))
        return True

    def ready(self, t: int) -> bool:
        """Whether tick ``t``'s delta can be taken."""
        return self.done >= t or any(e.seq >= t for e in self._entries)

    def take(self, t: int) -> Batch:
        """The channel's delta up to tick ``t`` (call once :meth:`ready`)."""
        due = [e for e in self._entries if e.seq <= t or e.reset]
        if not due:
            return Batch.empty(self.vars)
        self._entries = [e for e in self._entries if not (e.seq <= t or e.reset)]
        self.done = max(self.done, max(e.seq for e in due))
        parts = [e.batch for e in due if len(e.batch)]
        if due[0].reset:
            old = self.state()
            self._acc = [consolidate(concat(parts, self.vars))] if parts else []
            if len(old):
                parts = [*parts, old.negate()]
            return consolidate(concat(parts, self.vars)) if parts else Batch.empty(self.vars)
        if not parts:
            return Batch.empty(self.vars)
        d = parts[0] if len(parts) == 1 else concat(parts, self.vars)
        self._acc.append(d)
        if len(self._acc) > 64:
            self._acc = [consolidate(concat(self._acc, self.vars))]
        return d

    def state(self) -> Batch:
        """Everything taken so far, consolidated."""
        if not self._acc:
            return Batch.empty(self.vars)
        if len(self._acc) > 1:
            self._acc = [consolidate(concat(self._acc, self.vars))]
        return self._acc[0]

    def clear(self) -> None:
        """Drops what is queued (nobody reads the channel here any more)."""
        self._entries = []


class RemoteInput(Operator):
    """Stands in a consumer's plan for a producer that runs elsewhere (or in its own engine).

    Its delta at an epoch is the sum of its channels' deltas for the tick being
    evaluated (see :class:`Channel`), already in this container's dictionary ids.
    """

    #: its output changes whenever the producer's does: the engine must pull it every epoch
    event_driven = False

    def __init__(
        self,
        plane: object,
        producer: str,
        channels: list[str],
        vars_: tuple[str, ...],
        certain: frozenset[str],
    ) -> None:
        super().__init__()
        self.plane = plane
        self.producer = producer
        self.channels = list(channels)
        self.vars = vars_
        self.certain = certain

    def describe(self) -> str:
        return f"RemoteInput {self.producer} x{len(self.channels)}"

    def compute(self, epoch: int) -> Batch:
        parts = [self.plane.take(ch) for ch in self.channels]  # type: ignore[attr-defined]  # plane: the container's OperatorPlane
        parts = [p for p in parts if len(p)]
        if not parts:
            return Batch.empty(self.vars)
        return parts[0] if len(parts) == 1 else concat(parts, self.vars)

    def current(self) -> Batch:
        parts = [self.plane.channel_state(ch) for ch in self.channels]  # type: ignore[attr-defined]  # plane: the container's OperatorPlane
        parts = [p for p in parts if len(p)]
        return consolidate(concat(parts, self.vars)) if parts else Batch.empty(self.vars)
