"""A router's subscriber groups (:class:`~linkstream.operators.router.RouterOperator`):
one group per (range per window slot, value per hidden constant), and all of them as
arrays for matching a batch of joined rows to groups at once."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from linkstream.operators.batch import SortedIndex, row_keys


@dataclass
class Group:
    """One subscriber group: a range per slot and a value per hidden constant column."""

    ranges: tuple[int, ...]
    consts: tuple[tuple[str, int], ...]
    #: the group's id in the router's count relation
    gid: int
    refs: int = 0
    #: whether the group has been evaluated (its result is that of the router's last closes)
    started: bool = False


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
        "rmin",
        "rmax",
    )

    def __init__(self, groups: list[Group], n_slots: int, n_consts: int) -> None:
        self.groups = groups
        self.keys = [(g.ranges, g.consts) for g in groups]
        n = len(groups)
        self.gids = np.fromiter((g.gid for g in groups), dtype=np.int64, count=n)
        #: (slots, groups) ranges; (hidden constants, groups) values
        self.ranges = np.array([g.ranges for g in groups], dtype=np.int64).reshape(n, n_slots).T.copy()
        self.cvals = (
            np.array([[c for _, c in g.consts] for g in groups], dtype=np.int64).reshape(n, n_consts).T.copy()
        )
        self.index = SortedIndex(row_keys(self.cvals)) if n_consts else None
        #: per slot, the smallest and largest range of the groups
        self.rmin = self.ranges.min(axis=1) if n else np.zeros(n_slots, dtype=np.int64)
        self.rmax = self.ranges.max(axis=1) if n else np.zeros(n_slots, dtype=np.int64)
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

    def qualify(
        self, mins: list[np.ndarray], closes: tuple[int, ...], ri: np.ndarray, gi: np.ndarray
    ) -> np.ndarray:
        """Pairs whose row's smallest timestamp per slot lies in the group's window instance."""
        q = np.ones(len(ri), dtype=bool)
        for s, (m, close) in enumerate(zip(mins, closes)):
            lo = self.ranges[s].take(gi)
            np.subtract(close, lo, out=lo)
            q &= m.take(ri) >= lo
        return q
