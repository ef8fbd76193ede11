"""Result rings of a group's members kept once per report (the live worker's q1 path).

A keyed or routed group (:class:`~linkstream.engine.members.MemberReports`) reports all
its members at once: at each report time the members that wrote lines have a text block
each (``blocks[mid]``, ``cur[mid]`` lines).  Keeping them one :class:`ReportRing` entry
per member and report cost about half of the live worker's time with 10,000 pattern
queries.  A :class:`GroupLog` keeps the group's report once instead -- the member ids
that wrote lines, their blocks and line counts as three arrays -- and each member's ring
is a :class:`MemberRing`: a view that reads its entries out of the log when someone
reads it (a resuming subscriber, a checkpoint), with the semantics of a ring of its own:

* retention: a report older than the ring's ``retention_s`` goes (for all members at
  once, as each member's ring would drop it at the same time);
* line budget: ``max_lines`` per member; a member past it stops seeing its oldest
  reports (its own floor in the log), the other members keep theirs;
* ``dropped_until``: per member, the latest report time of a dropped report in which it
  had lines (a member that had none in a dropped report lost nothing).

A member's ring before it joined the group (a query restored from a checkpoint, or that
reported before the group formed) is the view's *base*, read first.  A member leaving
the group while its query stays registered gets its reports back as a plain ring
(:meth:`MemberRing.detach`).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.live.subscription import Cursor, Item, Lines, ReportRing
from linkstream.engine.render import BlockLines

if TYPE_CHECKING:
    from linkstream.engine.members import MemberReports

_NONE = np.iinfo(np.int64).min  # "nothing dropped" in the per-member dropped array
_NEVER = np.iinfo(np.int64).max  # the floor of a member id that is not linked


class RingMap(dict[str, ReportRing]):
    """The live engine's rings by query name; counts its changes (:attr:`epoch`) so that a
    group's log notices a ring replaced (a restore) without looking at every member."""

    epoch = 0

    def __setitem__(self, name: str, ring: ReportRing) -> None:
        self.epoch += 1
        super().__setitem__(name, ring)

    def pop(self, name: str, *default: Any) -> Any:
        self.epoch += 1
        got = super().pop(name, *default)
        if isinstance(got, MemberRing):
            got.unlink()
        return got


class _Entry:
    __slots__ = ("seq", "now", "t", "t_text", "mids", "blocks", "ns")

    def __init__(
        self, seq: int, now: float, t: int, t_text: str, mids: np.ndarray, blocks: np.ndarray, ns: np.ndarray
    ) -> None:
        self.seq, self.now, self.t, self.t_text = seq, now, t, t_text
        self.mids, self.blocks, self.ns = mids, blocks, ns

    def lines_at(self, j: int) -> BlockLines:
        """The lines of the ``j``-th member of this report."""
        return BlockLines(self.blocks[j], self.t_text, int(self.ns[j]))

    def lines_of(self, mid: int) -> BlockLines | None:
        mids = self.mids
        j = int(np.searchsorted(mids, mid))
        return self.lines_at(j) if j < len(mids) and mids[j] == mid else None


class GroupLog:
    """The reports of one group's members, once per report (see the module docstring)."""

    def __init__(
        self, group: MemberReports, retention_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.group = group
        self.retention_s = retention_s
        self.clock = clock  # (the rings of this clock are linked; ``add`` gets its times)
        self._entries: deque[_Entry] = deque()
        self._next = 0  # the next entry's sequence number
        self._held = np.zeros(0, dtype=np.int64)  # lines each member id sees in the log
        self._cap = np.zeros(0, dtype=np.int64)  # most lines each member id may see (linked)
        self._floor = np.zeros(0, dtype=np.int64)  # first entry each member id sees
        self._dropped = np.zeros(0, dtype=np.int64)
        #: linked members: name -> (member id, its view)
        self.linked: dict[str, tuple[int, MemberRing]] = {}
        #: members whose rings are kept one entry per report (a ring with another clock)
        self.unlinked: list[tuple[str, int]] = []
        self._seen: tuple[int, int] | None = None  # (group version, ring map epoch) synced
        self._moved = 0  # floors moved (for :meth:`first_of`'s cache)
        self._firsts: tuple[tuple[int, int, int], np.ndarray] | None = None
        #: :meth:`prepare_export`'s answers: member id -> (after, reports)
        self._prepared: dict[int, tuple[int | None, list[tuple[float, int, Lines]]]] | None = None

    # -- the worker's side

    def sync(self, rings: RingMap) -> None:
        """Links the group's members' rings (when its members or the rings changed)."""
        g = self.group
        key = (g._version, rings.epoch)
        if key == self._seen:
            return
        by = g.by_name
        for name, (mid, view) in list(self.linked.items()):
            if by.get(name) != mid or rings.get(name) is not view:
                if rings.get(name) is view:
                    rings[name] = view.detach()
                else:
                    view.unlink()
        self.unlinked = []
        for name, mid in by.items():
            if name in self.linked:
                continue
            ring = rings.get(name)
            if ring is None:
                continue
            if isinstance(ring, MemberRing):
                ring = rings[name] = ring.detach()
            if type(ring) is not ReportRing or ring.clock is not self.clock:
                self.unlinked.append((name, mid))
                continue
            self._grow(mid + 1)
            self._floor[mid] = self._next
            self._moved += 1
            self._held[mid] = 0
            self._cap[mid] = max(1, ring.max_lines - ring._lines)
            self._dropped[mid] = _NONE
            view = MemberRing(ring, self, mid, name)
            self.linked[name] = (mid, view)
            rings[name] = view
        self._seen = (g._version, rings.epoch)

    def add(
        self, now: float, t: int, t_text: str, mids: np.ndarray, blocks: np.ndarray, ns: np.ndarray
    ) -> None:
        """Keeps the report at ``t``: members ``mids`` (ascending) wrote ``ns`` lines,
        ``blocks``."""
        if len(mids):
            self._grow(int(mids[-1]) + 1)
            self._entries.append(_Entry(self._next, now, t, t_text, mids, blocks, ns))
            self._next += 1
            held = self._held
            held[mids] += ns
            over = held[mids] > self._cap[mids]
            if over.any():
                for mid in mids[over].tolist():
                    self._trim_member(mid)
        self.trim(now)

    def trim(self, now: float) -> None:
        """Drops the reports older than the retention."""
        r = self._entries
        while r and now - r[0].now > self.retention_s:
            e = r.popleft()
            mids = e.mids
            vis = self._floor[mids] <= e.seq
            if vis.all():
                self._held[mids] -= e.ns
                self._dropped[mids] = e.t
            else:
                self._held[mids[vis]] -= e.ns[vis]
                self._dropped[mids[vis]] = e.t

    def _trim_member(self, mid: int) -> None:
        """Moves member ``mid``'s floor past its oldest reports until it is within budget."""
        r = self._entries
        if not r:
            return
        i = max(0, int(self._floor[mid]) - r[0].seq)
        while self._held[mid] > self._cap[mid] and i < len(r):
            e = r[i]
            got = e.lines_of(mid)
            if got is not None:
                self._held[mid] -= len(got)
                self._dropped[mid] = e.t
            i += 1
        self._floor[mid] = r[0].seq + i
        self._moved += 1

    def _grow(self, n: int) -> None:
        have = len(self._held)
        if n <= have:
            return
        size = max(n, 2 * have, 64)
        # (an id not linked sees nothing and has no budget to trim to)
        for attr, fill in (("_held", 0), ("_cap", _NEVER), ("_floor", _NEVER), ("_dropped", _NONE)):
            old = getattr(self, attr)
            new = np.full(size, fill, dtype=np.int64)
            new[:have] = old
            setattr(self, attr, new)

    # -- a member's view

    def reports_of(self, mid: int, after: int | None = None) -> list[tuple[float, int, Lines]]:
        """Member ``mid``'s kept reports ``(clock time, t, lines)`` with a report time after
        ``after`` (all: ``None``), oldest first."""
        ready = self._prepared.get(mid) if self._prepared is not None else None
        if ready is not None and ready[0] == after:
            return ready[1]
        floor = int(self._floor[mid])
        out: list[tuple[float, int, Lines]] = []
        for e in reversed(self._entries):
            if e.seq < floor or (after is not None and e.t <= after):
                break
            got = e.lines_of(mid)
            if got is not None:
                out.append((e.now, e.t, got))
        out.reverse()
        return out

    def prepare_export(self, afters: dict[int, int | None] | None) -> None:
        """Computes :meth:`reports_of` ``(mid, after)`` for every ``mid, after`` of
        ``afters`` in one pass over the log, for the calls that follow (a checkpoint
        exports every member); ``None`` forgets them."""
        if afters is None or not afters:
            self._prepared = None
            return
        n = len(self._held)
        lim = np.full(n, _NEVER, dtype=np.int64)  # (not asked: never)
        asked = np.fromiter(afters, dtype=np.int64, count=len(afters))
        lim[asked] = [_NONE if a is None else a for a in afters.values()]
        lowest = int(lim[asked].min())
        floor = self._floor
        got_m: list[np.ndarray] = []
        got_k: list[np.ndarray] = []
        got_j: list[np.ndarray] = []
        entries = list(self._entries)
        for k in range(len(entries) - 1, -1, -1):
            e = entries[k]
            if e.t <= lowest:
                break
            em = e.mids
            sel = np.flatnonzero((lim[em] < e.t) & (floor[em] <= e.seq))
            if len(sel):
                got_m.append(em[sel])
                got_k.append(np.full(len(sel), k, dtype=np.int64))
                got_j.append(sel)
        out: dict[int, tuple[int | None, list[tuple[float, int, Lines]]]] = {
            m: (a, []) for m, a in afters.items()
        }
        if got_m:
            m = np.concatenate(got_m)
            kk = np.concatenate(got_k)
            jj = np.concatenate(got_j)
            o = np.lexsort((kk, m))
            for mid, k, j in zip(m[o].tolist(), kk[o].tolist(), jj[o].tolist(), strict=True):
                e = entries[k]
                out[mid][1].append((e.now, e.t, e.lines_at(j)))
        self._prepared = out

    def last_of(self, mid: int) -> int | None:
        """The report time of member ``mid``'s latest kept report."""
        floor = int(self._floor[mid])
        for e in reversed(self._entries):
            if e.seq < floor:
                break
            if e.lines_of(mid) is not None:
                return e.t
        return None

    def first_of(self, mid: int) -> int | None:
        """The report time of member ``mid``'s oldest kept report (for all members at once,
        kept until the log changes: a checkpoint asks it of every member)."""
        key = (self._next, self._entries[0].seq if self._entries else -1, self._moved)
        if self._firsts is None or self._firsts[0] != key:
            firsts = np.full(len(self._held), _NONE, dtype=np.int64)
            floor = self._floor
            for e in reversed(self._entries):
                mids = e.mids
                firsts[mids[floor[mids] <= e.seq]] = e.t
            self._firsts = (key, firsts)
        f = int(self._firsts[1][mid]) if mid < len(self._firsts[1]) else _NONE
        return None if f == _NONE else f

    def dropped_of(self, mid: int) -> int | None:
        d = int(self._dropped[mid])
        return None if d == _NONE else d

    def release(self, name: str, mid: int) -> None:
        """Forgets member ``name`` (id ``mid``): the log's reports are no longer its."""
        if self.linked.get(name, (None,))[0] == mid:
            del self.linked[name]
            self._floor[mid] = _NEVER
            self._moved += 1
            self._held[mid] = 0
            self._cap[mid] = _NEVER
            self._dropped[mid] = _NONE


class MemberRing(ReportRing):
    """One member's ring: its ring before it joined (``base``) and its reports in the
    group's log (see the module docstring).  Reports are added through the log only."""

    def __init__(self, base: ReportRing, log: GroupLog, mid: int, name: str) -> None:  # noqa: D107
        # (no ReportRing.__init__: the storage is the base's and the log's)
        self.base = base
        self.name = name
        self.log: GroupLog | None = log
        self.mid = mid
        self.retention_s = base.retention_s
        self.max_lines = base.max_lines
        self.clock = base.clock
        self.token = base.token

    @property
    def dropped_until(self) -> int | None:
        a = self.base.dropped_until
        b = self.log.dropped_of(self.mid) if self.log is not None else None
        return b if a is None else (a if b is None else max(a, b))

    @dropped_until.setter
    def dropped_until(self, value: int | None) -> None:
        self.base.dropped_until = value

    def _all(self) -> list[tuple[float, int, Lines]]:
        own = self.log.reports_of(self.mid) if self.log is not None else []
        return [*self.base._reports, *own]

    def add(self, t: int, lines: Lines, now: float | None = None, n: int | None = None) -> None:
        raise TypeError("a group member's reports are added through its group's log")

    def trim(self, now: float | None = None) -> None:
        now = self.clock() if now is None else now
        self.base.trim(now)
        if self.log is not None:
            self.log.trim(now)

    def export(self, after: int | None = None) -> list[tuple[float, int, Lines]]:
        now, wall = self.clock(), time.time()
        own = self.log.reports_of(self.mid, after) if self.log is not None else []
        base = [r for r in self.base._reports if after is None or r[1] > after]
        return [(wall - (now - at), t, lines) for at, t, lines in [*base, *own]]

    def first(self) -> int | None:
        if self.base._reports:
            return self.base._reports[0][1]
        return self.log.first_of(self.mid) if self.log is not None else None

    def last(self) -> int | None:
        own = self.log.last_of(self.mid) if self.log is not None else None
        return self.base.last() if own is None else own

    def load(self, reports: list[tuple[float, int, Lines]], dropped_until: int | None) -> None:
        if self.log is not None:
            self.log.release(self.name, self.mid)
            self.log = None
        self.base.load(reports, dropped_until)

    def after(self, cursor: Cursor) -> list[Item]:
        self.trim()
        return self._after(cursor, self._all())

    def unlink(self) -> None:
        """Its query went: the log forgets it."""
        if self.log is not None:
            self.log.release(self.name, self.mid)
            self.log = None

    def detach(self) -> ReportRing:
        """A plain ring with the same reports (the member left its group)."""
        ring = self.base
        if self.log is not None:
            dropped = self.dropped_until
            for at, t, lines in self.log.reports_of(self.mid):
                ring._reports.append((at, t, lines))
                ring._lines += len(lines)
            ring.dropped_until = dropped
            self.unlink()
        return ring
