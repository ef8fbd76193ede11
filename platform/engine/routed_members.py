"""The queries of a routed block, reported in one pass.

A :class:`~linkstream.engine.routed.RoutedBlock` brings the views of thousands of queries
on one router's groups up to date at once; without more, each of those queries still
costs the engine's per-query work at every report (is it dirty, is it loud, its lines as a
block, its stats).  :class:`RoutedMembers` takes that work over for the block's queries,
as a :class:`~linkstream.engine.keyed.KeyedGroup` does for keyed pattern queries:

* each member keeps its lines as one text block (:meth:`QueryOutput.block`'s form: the
  head with :data:`~linkstream.engine.output.TIME_MARK` for the report time), rebuilt
  only for the members of the views the block changed this epoch (and new members);
* a report of every member is the blocks joined in name order
  (:meth:`~linkstream.engine.members.MemberReports.joined`); a report of some members
  reads theirs one by one.

The engine leaves the members out of its per-query loops (dirty, loud); their views stay
exactly what the block made them, so everything else that reads a view sees no
difference, and a member can leave (unregister, replanning) at any epoch.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

import numpy as np

from linkstream.engine.keyed_stats import MemberStats
from linkstream.engine.members import MemberReports
from linkstream.engine.output import TIME_MARK
from linkstream.engine.render import member_blocks

if TYPE_CHECKING:
    from linkstream.engine.embedded import Engine, RegisteredQuery
    from linkstream.engine.output import ResultView
    from linkstream.engine.routed import RoutedBlock


#: blocks of at most this many lines are joined by one ``np.add.reduceat`` over all of
#: them (pairwise concatenation, quadratic in the lines); larger ones by a ``str.join`` each
REDUCE_LINES = 32


class RoutedMembers(MemberReports):
    """The queries reading the views of one :class:`RoutedBlock` (see the module docstring)."""

    def __init__(self, block: RoutedBlock) -> None:
        # (weak: the block holds its members; no reference cycle outlives an unregister)
        self._block = weakref.ref(block)
        self.names = []
        self.by_name = {}
        self.rqs: list[RegisteredQuery | None] = []
        self.views: list[ResultView | None] = []
        #: id(view) -> the members reading it
        self.by_view: dict[int, list[int]] = {}
        #: the head of each member's lines, with :data:`TIME_MARK` for the report time
        self.heads = np.full(0, "", dtype=object)
        #: each member's group in the block (-1: a free id)
        self.mgid = np.zeros(0, dtype=np.int64)
        #: (version, member groups sorted, member ids in that order)
        self._csr: tuple[int, np.ndarray, np.ndarray] | None = None
        self.blocks = np.full(0, "", dtype=object)
        self.cur = np.zeros(0, dtype=np.int64)
        self.acc = np.zeros(0, dtype=np.int64)
        self._free: list[int] = []
        #: members whose block is not built yet
        self.pending: set[int] = set()
        self._loud: set[str] | None = None
        self._order = None
        self._place = np.zeros(0, dtype=np.int64)
        self.slots = []
        self._positions = None
        self._rows = 0
        self._cover = None
        self._version = 0
        self.nrep = 0  # (reports are counted per member: members may have other steps)
        self.seconds = 0.0
        self.latencies = []
        self.epoch = -1

    @property
    def block(self) -> RoutedBlock:
        blk = self._block()
        assert blk is not None
        return blk

    @property
    def loud(self) -> set[str]:
        """Members whose report writes lines (or not built yet)."""
        got = self._loud
        if got is None:
            names = self.names
            got = {names[m] for m in np.flatnonzero(self.cur).tolist()}  # type: ignore[misc]  # names of live members are str (None marks a freed slot, never a member)
            got.update(names[m] for m in self.pending)  # type: ignore[misc]  # as above
            self._loud = got
        return got

    # ------------------------------------------------------------ members

    def add(self, rq: RegisteredQuery) -> None:
        """Makes ``rq`` (whose view is in the block) a member."""
        if self._free:
            mid = self._free.pop()
        else:
            mid = len(self.names)
            self.names.append(None)
            self.rqs.append(None)
            self.views.append(None)
            if mid >= len(self.cur):
                more = max(16, len(self.cur))
                self.cur = np.concatenate([self.cur, np.zeros(more, dtype=np.int64)])
                self.acc = np.concatenate([self.acc, np.zeros(more, dtype=np.int64)])
                self.mgid = np.concatenate([self.mgid, np.full(more, -1, dtype=np.int64)])
                self.heads = np.concatenate([self.heads, np.full(more, "", dtype=object)])
                self.blocks = np.concatenate([self.blocks, np.full(more, "", dtype=object)])
        view = rq.output._view
        self.names[mid] = rq.name
        self.rqs[mid] = rq
        self.views[mid] = view
        self.heads[mid] = rq.output.head + TIME_MARK + ", "
        self.mgid[mid] = self.block.gid_of[id(view)]
        self.blocks[mid] = ""
        self.cur[mid] = 0
        self.acc[mid] = 0
        self.by_name[rq.name] = mid
        self.by_view.setdefault(id(view), []).append(mid)
        self.pending.add(mid)
        rq.output._keyed = (self, mid)
        rq.stats = MemberStats(self, mid, rq.stats)
        self._loud = None
        self._order = None
        self._version += 1

    def remove(self, name: str) -> RegisteredQuery:
        """Takes ``name`` out; its query reports on its own again (its view is current)."""
        mid = self.by_name.pop(name)
        rq = self.rqs[mid]
        view = self.views[mid]
        assert rq is not None and view is not None
        self.sync(mid)
        rq.output._keyed = None
        if isinstance(rq.stats, MemberStats):
            rq.stats = rq.stats.plain()
        mids = self.by_view[id(view)]
        mids.remove(mid)
        if not mids:
            del self.by_view[id(view)]
        self.names[mid] = self.rqs[mid] = self.views[mid] = None
        self.mgid[mid] = -1
        self._release(mid)
        return rq

    def sync(self, mid: int) -> None:
        """Brings member ``mid``'s view's result up to date (read through
        :attr:`QueryOutput.view <linkstream.engine.output.QueryOutput.view>`)."""
        view = self.views[mid]
        if view is not None and view.block is self.block:
            self.block.materialize(view)

    def names_of(self, view: ResultView) -> list[str]:
        """The members reading ``view``."""
        names = self.names
        return [names[m] for m in self.by_view.get(id(view), ())]  # type: ignore[misc]  # names of live members are str

    # ------------------------------------------------------------ epochs

    def refresh(self, epoch: int) -> None:
        """Brings the block to ``epoch`` and rebuilds the blocks of the members whose view
        it changed (and of new members)."""
        if epoch == self.epoch:
            return
        self.epoch = epoch
        blk = self.block
        blk.advance(epoch)
        touched = blk.touched if blk.touched_epoch == epoch else ()
        pending = self.pending
        if not touched and not pending:
            return
        by_view = self.by_view
        heads = self.heads
        mids: list[int] = []
        texts: list[str] = []
        ns: list[int] = []
        for view, bodies in touched:
            got = by_view.get(id(view))
            if not got:
                continue
            n = len(bodies)
            for mid in got:
                h = heads[mid]
                mids.append(mid)
                ns.append(n)
                if n == 1:
                    texts.append(h + bodies[0] + "\n")
                elif n:
                    texts.append(h + ("\n" + h).join(bodies) + "\n")
                else:
                    texts.append("")
        if pending:
            done = set(mids)
            for mid in pending:
                if mid in done:
                    continue
                pv = self.views[mid]
                assert pv is not None
                self.block.materialize(pv)
                bodies = pv._bodies if pv._started and pv._bodies is not None else []
                h = heads[mid]
                mids.append(mid)
                ns.append(len(bodies))
                texts.append(h + ("\n" + h).join(bodies) + "\n" if bodies else "")
            pending.clear()
        if not mids:
            return
        new = np.empty(len(texts), dtype=object)
        new[:] = texts
        self._set(np.array(mids, dtype=np.int64), new, np.array(ns, dtype=np.int64))

    def _member_keys(self) -> np.ndarray:
        return self.mgid

    def rebuild(
        self, gids: np.ndarray, starts: np.ndarray, ends: np.ndarray, counts: np.ndarray, rendered: np.ndarray
    ) -> None:
        """Rebuilds the blocks of the members of changed groups ``gids`` (distinct), whose
        current rows are ``starts[i]:ends[i]`` of ``counts`` and ``rendered`` (their bodies).
        Vectorised over the members and their lines: a group's members are a range of
        :meth:`_members`; every line of every member is its head and a row's body in one
        object addition over all of them, and a member's block is its lines summed in one
        ``np.add.reduceat`` (concatenation; a handful of lines per block)."""
        sk, sm = self._members()
        a = sk.searchsorted(gids, "left")
        cnt = sk.searchsorted(gids, "right") - a
        has = cnt > 0
        if not has.all():
            gids, starts, ends, a, cnt = gids[has], starts[has], ends[has], a[has], cnt[has]
        if not len(gids):
            return
        csum = np.concatenate(([0], np.cumsum(counts)))
        lines = csum.take(ends) - csum.take(starts)  # lines of each group (rows by count)
        tot = int(cnt.sum())
        mids = sm[np.repeat(a - (np.cumsum(cnt) - cnt), cnt) + np.arange(tot)]
        mlines = np.repeat(lines, cnt)  # lines of each member
        new = np.full(tot, "", dtype=object)
        n_el = int(mlines.sum())
        if n_el:
            # the groups' lines, in group order: each row of a group repeated by its count
            nrows = ends - starts
            rcum = np.cumsum(nrows)
            ridx = np.arange(int(rcum[-1]), dtype=np.int64) + np.repeat(starts - (rcum - nrows), nrows)
            rc = counts.take(ridx)
            lidx = ridx if bool((rc == 1).all()) else np.repeat(ridx, rc)
            # every member's lines: its head + the body of each of its group's lines
            m_el = np.cumsum(mlines) - mlines  # each member's first line among all lines
            loff = np.repeat(np.cumsum(lines) - lines, cnt)  # its group's first line in ``lidx``
            el_line = np.arange(n_el, dtype=np.int64) + np.repeat(loff - m_el, mlines)
            heads = self.heads.take(mids)
            got = member_blocks(heads.tolist(), mlines.tolist(), rendered.take(lidx.take(el_line)).tolist())
            if got is not None:  # (compiled: each block in one allocation and one copy)
                new[:] = got
                self.pending.difference_update(mids.tolist())
                self._set(mids, new, mlines)
                return
            el_m = np.repeat(np.arange(tot, dtype=np.int64), mlines)
            text = heads.take(el_m) + (rendered.take(lidx) + "\n").take(el_line)
            small = (mlines > 0) & (mlines <= REDUCE_LINES)
            big = mlines > REDUCE_LINES
            if big.any():  # (reduceat concatenates pairwise: quadratic in a block's lines)
                text_big = text[big[el_m]].tolist()
                lo = 0
                for j, k in zip(big.nonzero()[0].tolist(), mlines[big].tolist(), strict=True):
                    new[j] = "".join(text_big[lo : lo + k])
                    lo += k
                text = text[small[el_m]]
            if small.any():
                ms = mlines[small]
                new[small] = np.add.reduceat(text, np.cumsum(ms) - ms)
        self.pending.difference_update(mids.tolist())
        self._set(mids, new, mlines)


def join_block(engine: Engine, rq: RegisteredQuery, plain: bool) -> None:
    """Puts the view of ``rq`` (just registered) in the routed block of its chain, if it has
    one, and makes ``rq`` a member of the block; the queries of a lone view that entered
    the block with it (:meth:`RoutedBlocks.join <linkstream.engine.routed.RoutedBlocks.join>`)
    become members too, as if they had been registered now."""
    blocks = engine._blocks
    assert blocks is not None
    view = rq.output._view
    _, moved = blocks.join(view, plain, rq.name)
    blk = view.block
    if blk is None or not engine.group_routed:
        return
    for name in moved:
        other = engine.queries.get(name)
        if other is None or other.output._view.block is not blk or name in engine._rgrouped:
            continue  # (unregistered meanwhile)
        blk.members.add(other)
        engine._rgrouped[name] = blk.members
        engine._deps.add(other, routed_member=True)
        engine._loud.discard(name)
        engine._quiet_blocks.pop(name, None)
        engine._reports[name] = (other.output, other.output._view, other.stats)
    blk.members.add(rq)
    engine._rgrouped[rq.name] = blk.members


def unroute(engine: Engine, name: str) -> None:
    """Takes ``name`` out of its routed block's members: it reports on its own again, and
    its routes' changes make it dirty again."""
    g = engine._rgrouped.pop(name, None)
    if g is None:
        return
    rq = g.remove(name)
    engine._reports[name] = (rq.output, rq.output.view, rq.stats)
    engine._loud.add(name)
    if name in engine._deps:
        engine._deps.add(rq)


def leave_block(engine: Engine, view: ResultView) -> None:
    """Takes ``view`` (and the queries reading it) out of its routed block."""
    blk = view.block
    if engine._blocks is None:
        return
    if blk is None:  # (a lone view waiting for a second one of its chain: no more)
        engine._blocks.forget(view)
        return
    for name in blk.members.names_of(view):
        unroute(engine, name)
    engine._blocks.leave(view)
