"""The inputs of a shared join (CQELS Cloud): timed windows' triples, each once with its
latest timestamp (:class:`LatestGraphOperator`), and scans that keep the timestamp
(:class:`TimedScanOperator`).  The :class:`~linkstream.operators.router.RouterOperator`
after the join splits its rows among the subscriber groups by window containment.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, concat, consolidate, group_starts, merge_sorted
from linkstream.operators.graph import StaticMembership, static_index
from linkstream.operators.relation import Relation
from linkstream.operators.scan import ScanOperator, Slot
from linkstream.operators.state import StateReader, StateWriter
from linkstream.operators.timed_window import TIMED_VARS

#: the "timestamp" of a static triple in a merged (C-SPARQL) graph: in every window instance
STATIC_TS = np.iinfo(np.int64).max // 4


class LatestGraphOperator(Operator):
    """Each triple of timed windows once, with the timestamp of its latest occurrence.

    A triple lies in a window instance ``[close - r, close)`` of a subscriber exactly
    when its latest occurrence in the shared (larger) window does, so the latest
    timestamp is all the router needs -- and the shared join holds one row per binding
    instead of one per combination of occurrences (a triple repeated in k elements would
    otherwise multiply the join's rows by k).

    Several windows (of one range and step) and static triples make a C-SPARQL default
    graph: the RDF merge of the static graph and the windows.  A triple's latest
    occurrence is then taken over all windows, and a static triple carries
    :data:`STATIC_TS`, which every window instance contains.  Static triples are emitted
    once and kept out of the occurrence relations (window occurrences of a static triple
    are dropped): the windows' churn costs work in the window triples only.
    """

    vars = TIMED_VARS
    certain = frozenset(TIMED_VARS)
    event_driven = True
    #: shared-join state serves every query of the join: a query using it is rebuilt, not
    #: migrated (:mod:`linkstream.operators.state`); task checkpoints snapshot it once per
    #: router (:mod:`linkstream.operators.shared_state`)
    migratable = False

    def __init__(
        self,
        windows: Operator | Sequence[Operator],
        static: Batch | None = None,
        static_key: object = None,
    ) -> None:
        super().__init__()
        self.children = (windows,) if isinstance(windows, Operator) else tuple(windows)
        self.window = self.children[0]
        self.occurrences = Relation(TIMED_VARS)
        self.latest = Relation(TIMED_VARS)
        self.static = static if static is not None and len(static) else None
        self.static_key = static_key if self.static is not None else None
        self._seeded = self.static is None
        self._static_index: StaticMembership | None = None

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """Every occurrence and each triple's latest (column ``_t``: timestamps, not ids),
        and whether the static triples were emitted (a router unit's state,
        :mod:`linkstream.operators.shared_state`)."""
        t = TIMED_VARS[3:]
        occ, latest = w.relation(self.occurrences, t), w.relation(self.latest, t)
        return {"occurrences": occ, "latest": latest, "seeded": self._seeded}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("occurrences", "latest", "seeded"))
        self.occurrences = r.relation(entries["occurrences"], self.occurrences)
        self.latest = r.relation(entries["latest"], self.latest)
        self._seeded = r.value(entries["seeded"], bool)

    def describe(self) -> str:
        st = f" static={len(self.static)}" if self.static is not None else ""
        return f"LatestGraph windows={len(self.children)}{st} triples={len(self.latest)}"

    def config_key(self) -> object:
        return ("latest", repr(self.static_key))

    def current(self) -> Batch:
        rows = self.latest.rows
        rows = rows.mask(rows.counts > 0).with_counts(np.ones(int((rows.counts > 0).sum()), dtype=np.int64))
        if self.static is not None and self._seeded:
            rows = concat([rows, self._static_rows()], TIMED_VARS)
        return rows

    def _not_static(self, d: Batch) -> Batch:
        """``d`` without the occurrences of static triples."""
        st = self.static
        if st is None or not len(d):
            return d
        if self._static_index is None:
            self._static_index = static_index(st.cols)
        hit = self._static_index.contains(d.cols[:3])
        if not hit.any():
            return d
        return d.mask(~hit)

    def _static_rows(self) -> Batch:
        st = self.static
        assert st is not None
        cols = np.empty((4, len(st)), dtype=np.int64)
        cols[:3] = st.cols
        cols[3] = STATIC_TS
        return Batch(TIMED_VARS, cols, np.ones(len(st), dtype=np.int64))

    def compute(self, epoch: int) -> Batch:
        out = self._window_delta(epoch)
        if not self._seeded:  # the static triples enter once and never leave
            self._seeded = True
            out = concat([out, self._static_rows()], TIMED_VARS) if len(out) else self._static_rows()
        return out

    def _window_delta(self, epoch: int) -> Batch:
        parts = [d for d in (c.delta(epoch) for c in self.children) if len(d)]
        if not parts:
            return Batch.empty(TIMED_VARS)
        d = consolidate(parts[0] if len(parts) == 1 else concat(parts, TIMED_VARS))
        d = self._not_static(d)
        if not len(d):
            return Batch.empty(TIMED_VARS)
        # (d is consolidated: its triples are sorted, each once per timestamp)
        first = group_starts(d.cols[:3])
        probe = Batch(
            TIMED_VARS[:3], d.cols[:3].compress(first, axis=1), np.ones(int(first.sum()), dtype=np.int64)
        )
        # a relation's base and recent parts answer separately: consolidate before reading
        old = consolidate(self._rows_of(self.latest, probe))
        old = old.mask(old.counts > 0)
        self.occurrences.apply(d)
        occ = consolidate(self._rows_of(self.occurrences, probe))
        occ = occ.mask(occ.counts > 0)
        old = old.with_counts(-np.ones(len(old), dtype=np.int64))
        out = old
        if len(occ):
            # (consolidated: sorted by triple, then timestamp; a triple's last is its latest)
            c = occ.cols
            last = np.ones(c.shape[1], dtype=bool)
            last[:-1] = (c[:3, 1:] != c[:3, :-1]).any(axis=0)
            new = Batch(TIMED_VARS, c.compress(last, axis=1), np.ones(int(last.sum()), dtype=np.int64))
            got = merge_sorted(new, old) if len(old) else None
            out = got[0] if got is not None else consolidate(concat([old, new], TIMED_VARS))
        self.latest.apply(out)
        return out

    @staticmethod
    def _rows_of(rel: Relation, triples: Batch) -> Batch:
        """The rows of ``rel`` (over :data:`TIMED_VARS`) of the ``triples`` (consolidated)."""
        got = rel.prefix_rows(triples)
        return got if got is not None else rel.join(triples, TIMED_VARS)


class TimedScanOperator(ScanOperator):
    """A pattern scan over a timed window: its mappings carry the triple's timestamp."""

    event_driven = True
    #: shared-join state serves every query of the join: a query using it is rebuilt, not
    #: migrated (:mod:`linkstream.operators.state`); task checkpoints snapshot it once per
    #: router (:mod:`linkstream.operators.shared_state`)
    migratable = False

    def __init__(self, graph: Operator, pattern: tuple[Slot, Slot, Slot], time_var: str) -> None:
        super().__init__(graph, pattern)
        self.time_var = time_var
        self.positions = [*self.positions, 3]
        self.vars = (*self.vars, time_var)
        self.certain = frozenset(self.vars)

    def config_key(self) -> object:
        return ("timed", self.pattern, self.time_var)
