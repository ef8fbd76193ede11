"""The operator contract: a pull-based, epoch-memoised delta function.

Every operator turns the deltas of its inputs into its own output delta.  An *epoch* is one
evaluation (one report time of the queries using the operator).  ``delta(epoch)`` computes
the output delta once per epoch and caches it, so an operator shared by several parents
(or several queries) does its work once.  Config lives in the constructor (frozen after
planning); state lives in the operator, and an operator that holds some exposes it through
its :meth:`Operator.snapshot` / :meth:`Operator.restore` pair (see
:mod:`linkstream.operators.state`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from linkstream.operators.batch import Batch
from linkstream.operators.order import stable_argsort

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter


#: a delta of more than this many rows is not sorted by predicate for its first
#: :data:`PSLICE_MASKED` predicates asked (:meth:`Operator.predicate_slice`): one pass per
#: predicate asked, where a stable sort of a 44k-row static graph costs ~60 passes
PSLICE_SORT_MAX = 2048
PSLICE_MASKED = 32


class _PSlice:
    """An epoch's delta as :meth:`Operator.predicate_slice` reads it: sorted by predicate
    with each predicate's row range, or (large, few predicates asked yet) as it is, with
    the slices taken so far."""

    __slots__ = ("epoch", "delta", "ranges", "masked", "empty")

    def __init__(self, epoch: int, d: Batch) -> None:
        self.epoch = epoch
        self.delta = d
        self.ranges: dict[int, tuple[int, int]] | None = None
        self.masked: dict[int, Batch] = {}
        self.empty: Batch | None = None
        if len(d) <= PSLICE_SORT_MAX:
            self.sort()

    def sort(self) -> None:
        d = self.delta
        ranges: dict[int, tuple[int, int]] = {}
        if len(d):
            keys = d.cols[1]
            order = stable_argsort(keys)
            d = self.delta = d.take(order)
            keys = keys.take(order)
            starts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
            bounds = [0, *starts.tolist(), len(keys)]
            ranges = dict(zip(keys.take(bounds[:-1]).tolist(), zip(bounds[:-1], bounds[1:])))
        self.ranges = ranges
        self.masked = {}


class Operator:
    """Base class: subclasses set ``vars``/``certain``/``children`` and implement ``compute``."""

    #: variables of the mappings produced (column order of output batches)
    vars: tuple[str, ...] = ()
    #: variables bound in every produced mapping
    certain: frozenset[str] = frozenset()
    children: tuple[Operator, ...] = ()
    #: set by :class:`~linkstream.engine.sharing.Sharing` on operators it runs: the
    #: canonical signature and the registration generation that created the operator
    sig: object
    generation: int

    #: whether a query using the operator can have its state migrated; ``False`` makes
    #: :func:`~linkstream.operators.state.snapshot_query` refuse (the query is rebuilt)
    migratable: ClassVar[bool] = True

    def __init__(self) -> None:
        self._epoch = -1
        self._out: Batch | None = None

    def delta(self, epoch: int) -> Batch:
        """Output delta of ``epoch`` (computed once, then cached)."""
        if epoch != self._epoch:
            self._out = self.compute(epoch)
            self._epoch = epoch
        assert self._out is not None
        return self._out

    def compute(self, epoch: int) -> Batch:  # pragma: no cover - abstract
        raise NotImplementedError

    def predicate_slice(self, epoch: int, p: int) -> Batch:
        """The rows of this epoch's delta whose second column (a triple's predicate) is ``p``.

        Used by pattern scans over graph deltas: the delta is sorted by predicate once per
        epoch and every scan with a constant predicate takes its slice by a lookup of the
        predicate's row range (found once per epoch), so a triple costs work only in the
        scans whose predicate it has -- however many other patterns (of however many
        queries) read the same graph.  A large delta (a static graph entering at the first
        epoch) is not sorted for the first few predicates asked: each is one pass over the
        predicate column (memoised), against a sort of every row; the slices hold the same
        rows in the same order either way.
        """
        cache: _PSlice | None = self.__dict__.get("_pslice")
        if cache is None or cache.epoch != epoch:
            cache = self.__dict__["_pslice"] = _PSlice(epoch, self.delta(epoch))
        sd = cache.delta
        if cache.ranges is None:
            hit = cache.masked.get(p)
            if hit is not None:
                return Batch(hit.vars, hit.cols, hit.counts)
            if len(cache.masked) < PSLICE_MASKED:
                m = sd.cols[1] == p
                hit = cache.masked[p] = Batch(sd.vars, sd.cols.compress(m, axis=1), sd.counts.compress(m))
                return Batch(hit.vars, hit.cols, hit.counts)
            cache.sort()
            sd = cache.delta
        ranges = cache.ranges
        assert ranges is not None
        r = ranges.get(p)
        if r is None:
            empty = cache.empty
            if empty is None:
                empty = cache.empty = Batch(sd.vars, sd.cols[:, :0], sd.counts[:0])
            return empty
        lo, hi = r
        return Batch(sd.vars, sd.cols[:, lo:hi], sd.counts[lo:hi])

    def current(self) -> Batch:
        """The operator's whole current output (for a query that attaches to it late)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be attached to")

    def config_key(self) -> object:
        """Hashable configuration for the operator's signature (children excluded)."""
        return (id(self),)  # unique: not shareable unless a subclass says otherwise

    def discard(self) -> None:
        """Release what the operator holds outside itself (called when it is dropped)."""

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The operator's state, to migrate it: msgpack-able header entries.

        Relations and batches are registered with ``w`` (which returns their entries);
        flags and versions are entries as they are.  Everything else (children,
        expressions, caches, counters) is configuration the target's planning reproduces
        and is not shipped.  This default is that of a stateless operator: no entries.
        """
        return {}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        """Puts back the state :meth:`snapshot` gave on the same operator of another engine.

        Called once, before the operator's first delta here.  Raises
        :class:`~linkstream.operators.state.StateError` (through ``r``'s checks) when
        ``entries`` is not what :meth:`snapshot` gives.  This default: no state.
        """
        r.expect(self, entries)

    def rebind(self, mapping: dict[int, Operator]) -> None:
        """Replace children (and the attributes naming them) by ``mapping[id(old)]``."""
        for k, v in list(vars(self).items()):
            if isinstance(v, Operator) and id(v) in mapping:
                setattr(self, k, mapping[id(v)])
        self.children = tuple(mapping.get(id(c), c) for c in self.children)

    def describe(self) -> str:
        """One line for EXPLAIN output."""
        return type(self).__name__

    def walk(self) -> list[Operator]:
        """This operator and all operators below it (each once)."""
        seen: dict[int, Operator] = {}
        stack: list[Operator] = [self]
        while stack:
            op = stack.pop()
            if id(op) in seen:
                continue
            seen[id(op)] = op
            stack.extend(op.children)
        return list(seen.values())


class AttachOperator(Operator):
    """Joins a query registered late to an operator that is already running.

    Its first delta is the shared operator's whole current output; after that it passes
    the shared operator's deltas through.  So the new query's own operators start with
    exactly the state they would have had, had the query been there from the start.
    """

    def __init__(self, shared: Operator) -> None:
        super().__init__()
        self.shared = shared
        self.children = (shared,)
        self.vars = shared.vars
        self.certain = shared.certain
        self.sig = getattr(shared, "sig", None)
        self._attached = False
        #: the epoch whose delta was the shared operator's whole output (-1: none yet)
        self._attach_epoch = -1

    def describe(self) -> str:
        return "Attach -> " + self.shared.describe()

    def compute(self, epoch: int) -> Batch:
        d = self.shared.delta(epoch)
        if not self._attached:
            self._attached = True
            self._attach_epoch = epoch
            return self.shared.current()
        return d

    def predicate_slice(self, epoch: int, p: int) -> Batch:
        """The shared operator's slice once attached (its delta passes through as it is):
        a graph's delta is sorted by predicate once, not once per attachment."""
        self.delta(epoch)
        if self._attached and epoch != self._attach_epoch:
            return self.shared.predicate_slice(epoch, p)
        return super().predicate_slice(epoch, p)

    def current(self) -> Batch:
        return self.shared.current()


def explain(op: Operator, indent: int = 0) -> str:
    lines = ["  " * indent + op.describe() + "  vars=" + ",".join(op.vars)]
    for c in op.children:
        lines.append(explain(c, indent + 1))
    return "\n".join(lines)


def child_deltas(children: Sequence[Operator], epoch: int) -> list[Batch]:
    return [c.delta(epoch) for c in children]
