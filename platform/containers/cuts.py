"""Ticks that wait for their cuts (``run --zk --ingest direct``; step 3 of
``docs/architecture.md``, "Direct ingest").

With ``--ingest leader`` a container gets a stream's elements on the leader's socket
that carries the ticks too: their FIFO order makes every tick come after exactly the
elements the leader decided before it.  With direct ingest the elements come from the
stream's *owner* coordinator instead, so that order is gone.  The leader's tick names,
per stream, the *applied count* before it (:attr:`Tick.cuts
<linkstream.containers.messages.Tick>`: how many elements of the stream its worker had
applied), and each run of elements an owner sends names the applied count of its first
element.  :class:`CutGate` puts the two back in order:

* a run of a stream's elements is applied only as far as the cut of the first waiting
  tick that names the stream; the rest waits (it comes after that tick in event order);
* elements at counts already applied are passed over (an owner's resend), elements
  after a gap wait until the gap is filled;
* the ticks are evaluated in order, each once every stream it names reached its cut;
  :meth:`CutGate.missing` says which ranges the first waiting tick still lacks (to be
  asked of the owners, or read from their stream logs after an owner change).

Wired for the leader's socket (session 14): with ``--ingest direct`` the leader's ticks
carry ``cuts`` in the run's counts (how many elements of each stream its fan-out had
routed before the tick), the container's replica counts the elements it applied the same
way (a ``sync`` sets a stream's count, each element adds one), and the runtime hands
each tick -- and every message that must come after it -- to the gate, naming only the
streams it receives (:meth:`reached` after each applied message).  The elements still
came on the leader's socket then, in order with the ticks; since the owners' sender (step
2, :mod:`linkstream.containers.owned`) they come from the owners through :meth:`elements`,
and the gate is *bounded*: an owner's elements beyond the last cut wait for the next tick.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Generic, TypeVar

E = TypeVar("E")
K = TypeVar("K")


class CutGate(Generic[E, K]):
    """Orders the runs of elements of several senders and the ticks that cut them.

    Args:
        apply: Called with ``(stream, elements)``: elements to apply, in their stream's order.
        fire: Called with each tick whose cuts are reached, in the ticks' order.
        bounded: While no waiting tick names a stream, apply its runs only up to the cut
            of the last tick that named it (none before a tick names it): an owner's
            elements may overtake the tick that comes before them, and the tick after
            them is not here yet to say where they belong.
    """

    def __init__(
        self, apply: Callable[[str, Sequence[E]], None], fire: Callable[[K], None], bounded: bool = False
    ) -> None:
        self._apply = apply
        self._fire = fire
        self._bounded = bounded
        #: per stream, the cut of the last tick evaluated that named it
        self._last: dict[str, int] = {}
        #: per stream, the elements applied (the next element's applied count)
        self.applied: dict[str, int] = {}
        self._held: dict[str, dict[int, Sequence[E]]] = {}  # stream -> first count -> run
        self._ticks: deque[tuple[dict[str, int], K]] = deque()

    @property
    def waiting(self) -> int:
        """Ticks received and not evaluated yet."""
        return len(self._ticks)

    def start(self, stream: str, count: int) -> None:
        """The first element of ``stream`` this container gets is applied count ``count``
        (it joined after the earlier ones; its backlog starts there)."""
        if stream not in self.applied:
            self.applied[stream] = count
            self._drain()

    def elements(self, stream: str, first: int, run: Sequence[E]) -> None:
        """A run of ``stream``'s elements, the first at applied count ``first``."""
        if not run or first + len(run) <= self.applied.get(stream, 0):
            return  # nothing new (a resend)
        held = self._held.setdefault(stream, {})
        if len(run) > len(held.get(first, ())):
            held[first] = run
        self._drain()

    def reached(self, stream: str, count: int) -> None:
        """``stream``'s elements up to ``count`` were applied another way (the leader's
        socket, in order): ticks waiting for them go."""
        if count > self.applied.get(stream, 0):
            self.applied[stream] = count
            self._drain()

    def tick(self, cuts: Mapping[str, int], tick: K) -> None:
        """A tick evaluated once each stream of ``cuts`` reached its count."""
        self._ticks.append((dict(cuts), tick))
        self._drain()

    def missing(self) -> dict[str, tuple[int, int]]:
        """Per stream, the applied counts ``[from, to)`` the first waiting tick lacks and no
        held run covers (empty when no tick waits or nothing is missing)."""
        if not self._ticks:
            return {}
        out = {}
        for stream, cut in self._ticks[0][0].items():
            at = self.applied.get(stream, 0)
            if at >= cut:
                continue
            later = [f for f in self._held.get(stream, {}) if f > at]
            out[stream] = (at, min([cut, *later]))
        return out

    def _limit(self, stream: str) -> int | None:
        for cuts, _ in self._ticks:
            if stream in cuts:
                return cuts[stream]
        if self._bounded:
            return max(self._last.get(stream, 0), self.applied.get(stream, 0))
        return None

    def _drain(self) -> None:
        while True:
            moved = False
            for stream, held in list(self._held.items()):
                moved |= self._apply_held(stream, held, self._limit(stream))
                if not held:
                    del self._held[stream]
            if self._ticks and all(self.applied.get(s, 0) >= n for s, n in self._ticks[0][0].items()):
                cuts, tick = self._ticks.popleft()
                self._last.update(cuts)
                self._fire(tick)
                moved = True
            if not moved:
                return

    def _apply_held(self, stream: str, held: dict[int, Sequence[E]], limit: int | None) -> bool:
        """Applies the held runs of ``stream`` from its applied count on, up to ``limit``."""
        at = self.applied.get(stream, 0)
        moved = False
        while True:
            for first in [f for f, run in held.items() if f + len(run) <= at]:
                del held[first]  # wholly applied already
            cover = [f for f in held if f <= at]
            if not cover:
                return moved
            first = max(cover, key=lambda f: f + len(held[f]))
            run = held[first]
            end = first + len(run) if limit is None else min(first + len(run), limit)
            if end <= at:
                return moved
            self._apply(stream, run[at - first : end - first])
            at = self.applied[stream] = end
            moved = True


__all__ = ["CutGate"]
