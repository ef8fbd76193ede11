"""A router's subscriber groups (:class:`~linkstream.operators.router.RouterOperator`):
one group per (range and step per window slot, value per hidden constant), and all of them
as arrays for matching a batch of joined rows to groups at once."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain

import numpy as np

from linkstream.operators.batch import SortedIndex, row_keys
from linkstream.operators.order import stable_argsort


@dataclass
class Group:
    """One subscriber group: a range and a step per slot and a value per hidden constant
    column."""

    ranges: tuple[int, ...]
    consts: tuple[tuple[str, int], ...]
    #: the group's id in the router's count relation
    gid: int
    refs: int = 0
    #: whether the group has been evaluated (its result is that of the router's last closes)
    started: bool = False
    #: per slot, the group's report step (a multiple of the slot window's step; empty: the
    #: window's step)
    steps: tuple[int, ...] = ()

    @property
    def key(self) -> tuple:
        """The group's key in its router (:meth:`RouterOperator.add_group`)."""
        return (self.ranges, self.consts, self.steps) if self.steps else (self.ranges, self.consts)


#: per slot, every group's window instance: its lower bounds and (or ``None``) upper bounds
Bounds = tuple[np.ndarray, "np.ndarray | None"]

#: a router with at most this many subscriber groups matches rows to groups by comparing
#: every (row, group) pair's hidden constants (a handful of numpy calls), not by a hash probe
DIRECT_GROUPS = 8


class GroupTable:
    """The subscriber groups of a router as arrays (rebuilt when a group comes or goes).

    Rows are matched to groups by one hash probe on the hidden constant columns (every
    group of a router has the same hidden variables: they come from the shared join's
    shape), and window containment is tested for all (row, group) pairs at once.
    """

    __slots__ = (
        "groups",
        "keys",
        "gids",
        "ranges",
        "cvals",
        "index",
        "started",
        "by_gid",
        "any_fresh",
        "steps",
        "step_set",
    )

    def __init__(self, groups: list[Group], n_slots: int, n_consts: int) -> None:
        self.groups = groups
        self.keys = [g.key for g in groups]
        n = len(groups)
        self.gids = np.fromiter((g.gid for g in groups), dtype=np.int64, count=n)
        #: (slots, groups) ranges; (hidden constants, groups) values (read flat, one
        #: iterator over all groups' values, no list per group)
        flat = chain.from_iterable
        self.ranges = (
            np.fromiter(flat(g.ranges for g in groups), np.int64, n * n_slots).reshape(n, n_slots).T.copy()
        )
        self.cvals = (
            np.fromiter((c for g in groups for _, c in g.consts), np.int64, n * n_consts)
            .reshape(n, n_consts)
            .T.copy()
            if n_consts
            else np.empty((0, n), dtype=np.int64)
        )
        self.index = SortedIndex(row_keys(self.cvals)) if n_consts else None
        #: (slots, groups) report steps (0: the slot window's step), and per slot the set of them
        none = (0,) * n_slots
        self.steps = (
            np.fromiter(flat(g.steps or none for g in groups), np.int64, n * n_slots)
            .reshape(n, n_slots)
            .T.copy()
        )
        self.step_set = [frozenset(row.tolist()) for row in self.steps]
        self.started = np.fromiter((g.started for g in groups), dtype=bool, count=n)
        self.any_fresh = not bool(self.started.all())
        self.by_gid = {g.gid: k for g, k in zip(groups, self.keys)}

    def pairs(self, hcols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, group) pairs whose hidden constants are equal (``hcols``: (k, n) columns)."""
        n, g = hcols.shape[1], len(self.groups)
        if self.index is None:
            return np.arange(n).repeat(g), np.tile(np.arange(g), n)
        if g <= DIRECT_GROUPS:  # a few groups: every (row, group) pair compared at once
            eq = hcols[:, :, None] == self.cvals[:, None, :]
            return (eq[0] if len(eq) == 1 else np.logical_and.reduce(eq, axis=0)).nonzero()
        ri, gi = self.index.probe(row_keys(hcols))
        if hcols.shape[0] > 1 and len(ri):  # hash keys: rule out collisions
            ok = (hcols.take(ri, axis=1) == self.cvals.take(gi, axis=1)).all(axis=0)
            ri, gi = ri[ok], gi[ok]
        return ri, gi

    def bounds(self, closes: tuple[int, ...], wsteps: tuple[int, ...]) -> list[Bounds]:
        """Per slot, every group's window instance ``[lo, hi)`` at the slot windows' closes
        ``closes`` (each window's step ``wsteps`` divides its groups' steps): ``hi`` is the
        group's own close, the last multiple of its step up to the window's; ``hi`` is
        ``None`` where it is the window's close for every group (no upper test needed: the
        window holds nothing at or after its close)."""
        out: list[Bounds] = []
        for s, (close, ws) in enumerate(zip(closes, wsteps)):
            steps = self.step_set[s]
            if steps <= {0, ws}:
                out.append((close - self.ranges[s], None))
                continue
            st = self.steps[s]
            st = np.where(st == 0, ws, st)
            hi = (close // st) * st
            out.append((hi - self.ranges[s], hi))
        return out

    def qualify(
        self,
        mins: list[np.ndarray],
        maxs: list[np.ndarray] | None,
        bounds: list[Bounds],
        ri: np.ndarray,
        gi: np.ndarray,
    ) -> np.ndarray:
        """Pairs whose row's timestamps per slot lie in the group's window instance
        (``bounds``, from :meth:`bounds`; ``maxs``: the rows' largest timestamp per slot,
        needed where a slot's bounds have an upper end)."""
        q = np.ones(len(ri), dtype=bool)
        for s, (m, (lo, hi)) in enumerate(zip(mins, bounds)):
            q &= m.take(ri) >= lo.take(gi)
            if hi is not None:
                assert maxs is not None  # (asked for by the caller when bounds have an upper end)
                q &= maxs[s].take(ri) < hi.take(gi)
        return q


class Expiry:
    """A router's qualifying (row, group) pairs ordered by when they stop qualifying, for
    windows that only slide forward and share one close (every slot's window ends at the
    same report time, no group has an upper bound): a pair qualifies at close ``c`` while
    ``c <= e``, ``e`` the least over slots of the row's earliest timestamp plus the
    group's range.  Each evaluation then takes the pairs with ``e`` below the new close
    (a binary search per chunk: they leave their groups) instead of testing every row
    already joined against its groups, and adds the delta's qualifying pairs as a chunk.

    Counts are linear: a row and its retraction are two entries with equal ``e`` that
    leave together and cancel, as in the router's parts.  Valid only while every
    evaluation goes through it: the router drops it when its groups or rows change
    otherwise (:meth:`~linkstream.operators.router.RouterOperator._invalidate`)."""

    __slots__ = ("close", "chunks")

    def __init__(self, close: int) -> None:
        #: the close its pairs qualify at (every ``e >= close``)
        self.close = close
        #: (e ascending, the rows' output columns, their counts, the groups' ids)
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []

    def add(self, e: np.ndarray, cols: np.ndarray, counts: np.ndarray, gids: np.ndarray) -> None:
        """Adds pairs qualifying at :attr:`close` (``e``: when each stops, see above)."""
        if not len(e):
            return
        o = stable_argsort(e)
        self.chunks.append((e.take(o), cols.take(o, axis=1), counts.take(o), gids.take(o)))

    def leave(self, close: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Takes out the pairs that no longer qualify at ``close`` (``>= self.close``):
        their (output columns, counts, group ids), by chunk."""
        out = []
        keep = []
        for ch in self.chunks:
            e, cols, counts, gids = ch
            i = int(e.searchsorted(close, "left"))
            if i:
                out.append((cols[:, :i], counts[:i], gids[:i]))
            if i == 0:
                keep.append(ch)
            elif i < len(e):
                keep.append((e[i:], cols[:, i:], counts[i:], gids[i:]))
        self.chunks = keep
        self.close = close
        return out


def pair_ends(mins: list[np.ndarray], ranges: np.ndarray, ri: np.ndarray, gi: np.ndarray) -> np.ndarray:
    """:class:`Expiry`'s ``e`` of pairs ``(ri, gi)``: least over slots of the row's earliest
    timestamp ``mins[s]`` plus the group's range ``ranges[s]`` (``(slots, groups)``)."""
    e: np.ndarray | None = None
    for m, r in zip(mins, ranges):
        x = m.take(ri) + r.take(gi)
        e = x if e is None else np.minimum(e, x)
    assert e is not None  # (a router has a slot)
    return e
