"""The report side of a group of queries served in one pass: each member's lines kept as
one text block, the blocks in query name order, a report of every member their join.

:class:`MemberReports` is shared by :class:`~linkstream.engine.keyed.KeyedGroup` (pattern
queries that differ in a constant) and :class:`~linkstream.engine.routed_members.RoutedMembers`
(the queries of a routed block).  A group keeps, by member id: ``names``, ``blocks`` (the
member's lines, each ended by a newline, with :data:`~linkstream.engine.output.TIME_MARK`
for the report time; ``""`` when it has none), ``cur`` (its lines per report) and ``acc``
(lines counted so far); ``slots`` are the blocks in name order (``_place``: each member's
slot), rebuilt by :meth:`MemberReports._reorder` when a member comes or goes
(``_order = None``).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import numpy as np

from linkstream.engine.render import TIME_MARK, put


class MemberReports:
    """Report-side methods of a group of queries (see the module docstring)."""

    names: list[str | None]
    by_name: dict[str, int]
    blocks: np.ndarray
    cur: np.ndarray
    acc: np.ndarray
    slots: list[str]
    _order: list[int] | None
    _place: np.ndarray
    _positions: tuple[object, int, np.ndarray | None] | None
    _rows: int
    _loud: set[str] | None
    _csr: tuple[int, np.ndarray, np.ndarray] | None
    _cover: tuple[object, int, bool] | None
    _version: int
    _free: list[int]
    pending: set[int]
    nrep: int
    seconds: float
    latencies: list[float]

    def _set(self, at: np.ndarray, new: np.ndarray, ns: np.ndarray) -> None:
        """Members ``at`` (distinct) now have blocks ``new`` of ``ns`` lines."""
        self.blocks[at] = new
        if self._order is not None:
            put(self.slots, self._place[at].tolist(), new.tolist())
        cur = self.cur
        self._rows += int(ns.sum()) - int(cur[at].sum())
        cur[at] = ns
        self._loud = None

    def _release(self, mid: int) -> None:
        """Frees member id ``mid``: no block, no lines, a new report order (whose rebuild
        recounts :attr:`_rows`) and a new membership version."""
        self.pending.discard(mid)
        self.blocks[mid] = ""
        self.cur[mid] = 0
        self._free.append(mid)
        self._loud = None
        self._order = None
        self._version += 1

    def _member_keys(self) -> np.ndarray:
        """Each member id's key (a routed member's group id, a keyed member's constant)."""
        raise NotImplementedError

    def _members(self) -> tuple[np.ndarray, np.ndarray]:
        """The members' keys, ascending, and the member ids in that order (cached until a
        member comes or goes)."""
        c = self._csr
        if c is not None and c[0] == self._version:
            return c[1], c[2]
        live = np.fromiter(self.by_name.values(), dtype=np.int64, count=len(self.by_name))
        ks = self._member_keys()[live]
        o = np.argsort(ks, kind="stable")
        self._csr = (self._version, ks[o], live[o])
        return ks[o], live[o]

    def __len__(self) -> int:
        return len(self.by_name)

    @property
    def loud(self) -> set[str]:
        """Members whose report writes lines (or that were never evaluated)."""
        raise NotImplementedError

    def _reorder(self) -> None:
        names = self.names
        order = sorted(self.by_name.values(), key=names.__getitem__)  # type: ignore[arg-type]  # names of live members are str (None marks a freed slot, never a member)
        self._order = order
        self._place = place = np.full(len(self.cur), -1, dtype=np.int64)
        oarr = np.array(order, dtype=np.int64)
        place[oarr] = np.arange(len(order))
        self.slots = self.blocks[oarr].tolist() if len(order) else []
        self._rows = int(self.cur.sum())

    def covered(self, reporting: Collection[str]) -> bool:
        """Whether every member reports (the report is the joined blocks)."""
        c = self._cover
        if c is not None and c[0] is reporting and c[1] == self._version:
            return c[2]
        names = self.by_name.keys()
        if isinstance(reporting, frozenset | set):
            ok = names <= reporting  # one C-level subset test
        else:
            ok = len(reporting) >= len(names) and all(n in reporting for n in names)
        self._cover = (reporting, self._version, ok)
        return ok

    def timed(self, dt: float) -> None:
        """Counts ``dt`` seconds of evaluation at one report."""
        self.seconds += dt
        self.latencies.append(dt)

    def report(self, dt: float) -> None:
        """Counts a report of every member (in their stats' ``rows``) that took ``dt``."""
        self.acc += self.cur
        self.timed(dt)

    def joined(self) -> tuple[int, str]:
        """Every member's block in name order, and their lines: a whole report."""
        if self._order is None:
            self._reorder()
        return self._rows, "".join(self.slots)

    def line_count(self) -> int:
        """The lines of a report of every member (:meth:`joined` without the text)."""
        if self._order is None:
            self._reorder()
        return self._rows

    def joined_into(self, parts: list[str]) -> int:
        """Appends every member's block in name order to ``parts`` (a report being
        assembled); returns their lines."""
        if self._order is None:
            self._reorder()
        parts += self.slots
        return self._rows

    def slot_array(self) -> np.ndarray:
        """:attr:`slots` as an object array (to scatter into a report order)."""
        if self._order is None:
            self._reorder()
        arr = np.empty(len(self.slots), dtype=object)
        arr[:] = self.slots
        return arr

    def positions(self, order: Sequence[str]) -> np.ndarray | None:
        """Where each member (in name order) is in ``order`` (sorted names holding every
        member; ``None`` if one is missing)."""
        if self._order is None:
            self._reorder()
        got = self._positions
        if got is not None and got[0] is order and got[1] == self._version:
            return got[2]
        arr = order_array(order)
        names = np.array([self.names[m] for m in self._order or ()], dtype=arr.dtype if len(arr) else None)
        pos: np.ndarray | None = arr.searchsorted(names) if len(arr) else np.zeros(0, dtype=np.int64)
        if pos is not None and len(pos) and (pos.max() >= len(arr) or (arr[pos] != names).any()):
            pos = None
        self._positions = (order, self._version, pos)
        return pos

    def first_last(self) -> tuple[str, str]:
        if self._order is None:
            self._reorder()
        assert self._order
        a, b = self.names[self._order[0]], self.names[self._order[-1]]
        assert a is not None and b is not None
        return a, b

    def member_blocks(self) -> list[tuple[str, str]]:
        """(name, block) of every member with lines, in name order."""
        if self._order is None:
            self._reorder()
        names = self.names
        return [(names[m], b) for m, b in zip(self._order or (), self.slots) if b]  # type: ignore[misc]  # names of live members are str (None marks a freed slot, never a member)

    def lines_of(self, name: str, t_text: str) -> list[str]:
        blk = self.blocks[self.by_name[name]]
        if not blk:
            return []
        return blk.replace(TIME_MARK, t_text).split("\n")[:-1]

    def count(self, name: str) -> int:
        """Counts one report of ``name`` (when not every member reported)."""
        mid = self.by_name[name]
        self.acc[mid] += self.cur[mid]
        return int(self.cur[mid])


#: id(order) -> (order, its names as a numpy array): the report orders of replay's units
_ORDERS: dict[int, tuple[Sequence[str], np.ndarray]] = {}


def order_array(order: Sequence[str]) -> np.ndarray:
    """``order`` (sorted names) as a numpy string array, memoised by identity."""
    hit = _ORDERS.get(id(order))
    if hit is not None and hit[0] is order:
        return hit[1]
    arr = np.array(list(order)) if len(order) else np.empty(0, dtype=str)
    if len(_ORDERS) >= 8:
        _ORDERS.clear()
    _ORDERS[id(order)] = (order, arr)
    return arr
