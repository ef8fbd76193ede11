"""A lone query's join, planned on its own until a second query could share it.

A multiway join that could run as a shared join with a router
(:mod:`linkstream.operators.router`) costs, for one query, the whole machinery of
sharing: timed windows, latest-occurrence relations, a join over timestamped rows and a
router re-filtering them at every report.  While a query is alone with its join shape,
:class:`~linkstream.engine.sharing.Sharing` plans that join directly (windows, graphs,
scans, an incremental join) under a :class:`SwitchOperator`; when a second query with
the same shape arrives, the switch is pointed at the shared join's route for this
query's group.

The switch keeps the query's result exact across the change: at the first epoch after
it, its delta is the new subplan's delta -- a fresh route's first delta is its group's
whole result -- minus what the old subplan had produced up to then (its ``current()``,
taken when the switch happened).  From then on it passes the route's deltas through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, concat, consolidate

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter


class SwitchOperator(Operator):
    """Its child's deltas; at one epoch after :meth:`switch`, the change to a new child.

    Args:
        child: The subplan computing the result (the lone query's direct join).
    """

    #: output changes only with the child's -- but for the epoch after a switch, which the
    #: engine evaluates whatever moved (``Dependencies.touch``)
    event_driven = True

    def __init__(self, child: Operator) -> None:
        super().__init__()
        self.child = child
        self.children = (child,)
        self.vars = child.vars
        self.certain = child.certain
        #: what the old child had produced, to be retracted at the next epoch
        self._old: Batch | None = None
        self.switched = False

    def config_key(self) -> object:
        # queries equal up to their joins share the switch (and their result view)
        return ("switch",)

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The old result still to be retracted (``None``: none): a switch only has one
        between a switch and the next epoch."""
        return {"_old": None if self._old is None else w.batch(self._old)}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("_old",))
        old = entries["_old"]
        self._old = None if old is None else r.batch(old, self.vars)

    def describe(self) -> str:
        return "Switch (shared)" if self.switched else "Switch (alone)"

    def switch(self, new: Operator) -> list[Operator]:
        """Reads from ``new`` from the next epoch on (its first delta must be its whole
        result, as a fresh route's is); returns the children it replaced."""
        assert set(new.vars) == set(self.vars), (new.vars, self.vars)
        old = self.children
        cur = self.child.current().project(self.vars)
        self._old = cur if len(cur) else None
        self.child = new
        self.children = (new,)
        self.switched = True
        return list(old)

    def compute(self, epoch: int) -> Batch:
        d = self.child.delta(epoch)
        old = self._old
        if old is None:
            return d
        self._old = None
        return consolidate(concat([d.project(self.vars), old.negate()], self.vars))

    def current(self) -> Batch:
        return self.child.current().project(self.vars)
