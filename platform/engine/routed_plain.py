"""A shared operator read by filtered views as one routed group (routed blocks without a router).

Template queries whose plans are not routed (C-SPARQL's ``FROM STREAM`` windows merged
into one default graph: a shared join over the merged graph, then a filter per query)
share everything below their filters by hash-consing; they differ in the constants of a
FILTER / HAVING only.  :class:`PlainSource` presents such a shared operator to a
:class:`~linkstream.engine.routed.RoutedBlock` as a router of one group (group id 0), so
the block serves those views as it serves filtered views on a router's groups
(:mod:`linkstream.engine.routed_filter`): one pass over the operator's delta per epoch,
one vectorised filter for all members.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from linkstream.engine.dirty import event_driven
from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch

GROUP = "%group"


class _One:
    gid = 0


class _Groups:
    """Every route key names the one group."""

    def __getitem__(self, key: object) -> _One:
        return _One()


class PlainRoute:
    """The route of a view on a :class:`PlainSource` (one group: no key)."""

    key = None

    def __init__(self, router: PlainSource) -> None:
        self.router = router


class PlainSource:
    """A shared operator, read by blocks as a router of one group."""

    def __init__(self, op: Operator) -> None:
        self.op = op
        self.out_vars = op.vars
        self.groups = _Groups()
        self.taggers = 0
        self.blocks: list[Any] = []
        self.tagged = Batch.empty((GROUP, *op.vars))
        self._epoch = -1

    def delta(self, epoch: int) -> Batch:
        """The operator's delta at ``epoch``; :attr:`tagged` the same rows, group 0."""
        if epoch != self._epoch:
            self._epoch = epoch
            d = self.op.delta(epoch)
            cols = np.vstack([np.zeros((1, len(d)), dtype=np.int64), d.cols])
            self.tagged = Batch((GROUP, *d.vars), cols, d.counts)
        return self.tagged

    def present(self, key: object) -> Batch:
        """The rows the operator has given so far: none before its first delta (which
        then holds everything, e.g. through the attachments of a new operator to running
        ones), else its current rows."""
        if self.op._epoch == -1:
            return Batch.empty(self.op.vars)
        return self.op.current()


def plain_ok(op: Operator) -> bool:
    """Whether ``op`` can be read as a :class:`PlainSource`: it gives its current rows, and
    every operator under it is event-driven, so every other reader of it is evaluated at
    each epoch its delta is not empty (a window under it moved) and pulling it at every
    epoch takes nothing from them (a route under it: its readers skip epochs whose change
    they read later)."""
    if type(op).current is Operator.current:
        return False
    return all(event_driven(o) for o in op.walk())
