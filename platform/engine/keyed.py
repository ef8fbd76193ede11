"""Shared keyed scans: many RStream pattern queries that differ in one constant.

Thousands of registered queries are often one template with a different constant
(LSBench Q1: ``SELECT ?p ?o WHERE { STREAM <posts> [RANGE 10s SLIDE 1s] { <user> ?p ?o } }``
for 10,000 users).  Each has its own scan over the shared window graph, but all of them
read the same graph delta and differ only in which rows hold their constant.  A
:class:`KeyedGroup` serves every such query of one shape -- same graph, same constant
position, same output columns and variable names, same report steps -- in one pass per
epoch (the alpha network of a Rete, CQELS Cloud's shared matcher):

* the graph delta is split by the constant column with one sorted probe against the
  group's constants; the keys hit (``np.unique``) are the only ones whose result changed;
* the group keeps the current result of all its keys as one array sorted by (key, output
  columns), with the rendered body of each row beside it (an object array that moves
  with the rows), so a change costs a merge of the delta and the rendering of new rows;
* for the queries of the changed keys (and the newly registered ones) it rebuilds their
  result block (:meth:`~linkstream.engine.output.QueryOutput.block`) and puts it in a list
  of blocks ordered by query name; a report of all the group's queries is that list
  joined in one call.  A query whose result did not change costs nothing at a report.

The queries' :class:`~linkstream.engine.output.ResultView` objects are kept up to date
for the keys that changed (their ``result``, rendered bodies and started flag), so
everything else that looks at a view (quiet-gap skipping, checkpoints, migration) sees
what the per-query path would have built, and a query can leave the group
(:meth:`KeyedGroup.remove`) at any epoch and go on through its own operators.  The
output is byte-for-byte that of the per-query path: RStream repeats a query's whole
result, in the order of its consolidated rows (lexicographic in the output columns).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np

from linkstream.engine.keyed_stats import MemberStats
from linkstream.engine.members import MemberReports
from linkstream.engine.output import TIME_MARK, QueryStats, json_terms
from linkstream.engine.render import member_blocks
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch, group_starts, insert_sorted, sum_by_key
from linkstream.operators.graph import GraphOperator
from linkstream.operators.project import ProjectOperator
from linkstream.operators.router import RenameOperator
from linkstream.operators.scan import ScanOperator
from linkstream.operators.window import WindowOperator

if TYPE_CHECKING:
    from linkstream.engine.embedded import RegisteredQuery
    from linkstream.engine.output import ResultView
    from linkstream.rdf.dictionary import Dictionary

_OPS = frozenset({ProjectOperator, RenameOperator, ScanOperator, GraphOperator, WindowOperator})

#: bits of one id in a packed state row (key and up to two output columns in an int64)
_BITS = 21
_LIMIT = 1 << _BITS


def _uniq(a: np.ndarray) -> np.ndarray:
    """The distinct values of int64 ``a``, ascending (``np.unique`` without its overhead:
    its first call in a process also imports ``numpy.ma``)."""
    if len(a) < 2:
        return a.copy()
    a = np.sort(a)
    keep = np.empty(len(a), dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    return a[keep]


def _pack(k: np.ndarray, cols: np.ndarray) -> np.ndarray | None:
    """One int64 per row of (key, columns) ordered as the rows (lexicographically), or
    ``None`` when they do not fit (more than two columns, an id of 2^21 or more)."""
    if cols.shape[0] > 2:
        return None
    if len(k) and (int(k.max()) >= _LIMIT or int(k.min()) < 0):
        return None
    if cols.size and (int(cols.max()) >= _LIMIT or int(cols.min()) < 0):
        return None
    out = k.copy()
    for c in cols:
        out <<= _BITS
        out |= c
    return out


def keyed_shape(rq: RegisteredQuery) -> tuple[tuple, GraphOperator, int] | None:
    """``(group key, graph, constant)`` when ``rq`` can be served by a :class:`KeyedGroup`:
    an RStream SELECT (no ORDER BY, DISTINCT, LIMIT or OFFSET) whose plan is a projection
    of one triple pattern with exactly one constant and no repeated variable over a graph
    fed only by stream windows; ``None`` otherwise."""
    out = rq.output
    shape = out.shape
    if out.mode != "RSTREAM" or shape.form != "SELECT" or shape.order or shape.template:
        return None
    if shape.distinct or shape.limit is not None or shape.offset:
        return None
    if any(type(o) not in _OPS for o in rq.ops):
        return None
    op: Operator = rq.root
    while type(op) is AttachOperator:
        op = op.shared
    if type(op) is not ProjectOperator:
        return None
    pvars = op.vars
    op = op.children[0]
    mapping: dict[str, str] = {}
    if type(op) is RenameOperator:
        mapping = op.mapping
        op = op.child
    if type(op) is not ScanOperator or len(op.consts) != 1 or op.repeats:
        return None
    scan = op
    g: Operator = scan.graph
    while type(g) is AttachOperator:
        g = g.shared
    if (
        type(g) is not GraphOperator
        or len(g.static)
        or not g.children
        or getattr(g, "static_source", None) is not None
    ):
        return None
    if any(type(w) is not WindowOperator for w in g.children):
        return None
    pos_of = {mapping.get(v, v): p for v, p in zip(scan.vars, scan.positions)}
    if tuple(out.vars) != pvars or any(v not in pos_of for v in pvars):
        return None
    pos, const = scan.consts[0]
    key = (id(g), pos, tuple(pos_of[v] for v in pvars), pvars, rq.steps)
    return key, g, const


class KeyedGroup(MemberReports):
    """The queries of one keyed-scan shape (see the module docstring)."""

    def __init__(
        self,
        graph: GraphOperator,
        pos: int,
        out_pos: tuple[int, ...],
        vars: tuple[str, ...],
        dictionary: Dictionary,
    ) -> None:
        self.graph = graph
        self.dictionary = dictionary
        self.pos = pos
        self.out_pos = list(out_pos)
        self.vars = vars
        self._pre = '"binding": {'
        self._names = [json.dumps(v, ensure_ascii=False) + ": " for v in vars]
        # members, by id (ids of removed members are reused)
        self.names: list[str | None] = []
        self.keys: list[int] = []
        self.rqs: list[RegisteredQuery | None] = []
        self.views: list[ResultView | None] = []
        self.stats: list[QueryStats | None] = []
        #: the head of each member's lines, with :data:`TIME_MARK` for the report time
        #: (an object array by member id, as :attr:`blocks`: vectorised per changed key)
        self.heads = np.full(0, "", dtype=object)
        #: each member's key (by member id)
        self.mkey = np.zeros(0, dtype=np.int64)
        #: the version of its key's result each member's view holds (-1: none)
        self.view_ver: list[int] = []
        #: key -> version of its result (bumped when it changes or a member is new)
        self.key_ver: dict[int, int] = {}
        self._ver = 0
        #: each member's lines as one text (:meth:`QueryOutput.block`; "" when empty)
        self.blocks = np.full(0, "", dtype=object)
        self._free: list[int] = []
        self.by_name: dict[str, int] = {}
        self.by_key: dict[int, list[int]] = {}
        #: result lines per report of each member, and the lines counted so far
        self.cur = np.zeros(0, dtype=np.int64)
        self.acc = np.zeros(0, dtype=np.int64)
        #: members not evaluated yet
        self.pending: set[int] = set()
        self._loud: set[str] | None = None
        # report order: member ids sorted by name, each member's place (-1: none) and the
        # blocks in that order
        self._order: list[int] | None = None
        self._place = np.zeros(0, dtype=np.int64)
        #: (version, member keys sorted, member ids in that order): members by key
        self._csr: tuple[int, np.ndarray, np.ndarray] | None = None
        self.slots: list[str] = []
        self._positions: tuple[object, int, np.ndarray | None] | None = None
        self._rows = 0  # lines of a report of every member
        self._cover: tuple[object, int, bool] | None = None
        self._version = 0
        # the current result of every key with a member, sorted by (key, columns)
        k = len(out_pos)
        self.keys_arr = np.empty(0, dtype=np.int64)  # sorted keys with state
        self.st_k = np.empty(0, dtype=np.int64)
        self.st_c = np.empty((k, 0), dtype=np.int64)
        self.st_n = np.empty(0, dtype=np.int64)
        self.st_b = np.empty(0, dtype=object)
        #: the state rows packed (:func:`_pack`), ``None`` until needed or when they do not fit
        self._st_p: np.ndarray | None = None
        self._prune = False
        self._empty = Batch.empty(vars)  # read-only: every empty key's rows
        self.epoch = -1
        #: reports counted for every member at once (a replay of whole units)
        self.nrep = 0
        #: evaluation seconds and per-report latencies of the group (its members')
        self.seconds = 0.0
        self.latencies: list[float] = []

    @property
    def loud(self) -> set[str]:
        """Members whose report writes lines: a result that is not empty, or never
        evaluated (built on demand: only quiet-gap skipping asks)."""
        got = self._loud
        if got is None:
            names = self.names
            got = {names[m] for m in np.flatnonzero(self.cur).tolist()}  # type: ignore[misc]  # names of live members are str (None marks a freed slot, never a member)
            got.update(names[m] for m in self.pending)  # type: ignore[misc]  # names of live members are str (None marks a freed slot, never a member)
            self._loud = got
        return got

    # ------------------------------------------------------------ members

    def add(self, rq: RegisteredQuery, const: int) -> None:
        name = rq.name
        if self._free:
            mid = self._free.pop()
        else:
            mid = len(self.names)
            for lst in (self.names, self.rqs, self.views, self.stats):
                lst.append(None)
            self.keys.append(0)
            self.view_ver.append(-1)
            if mid >= len(self.cur):
                n = max(16, 2 * len(self.cur))
                more = n - len(self.cur)
                self.cur = np.concatenate([self.cur, np.zeros(more, dtype=np.int64)])
                self.acc = np.concatenate([self.acc, np.zeros(more, dtype=np.int64)])
                self.mkey = np.concatenate([self.mkey, np.zeros(more, dtype=np.int64)])
                self.heads = np.concatenate([self.heads, np.full(more, "", dtype=object)])
                self.blocks = np.concatenate([self.blocks, np.full(more, "", dtype=object)])
        self.names[mid] = name
        self.keys[mid] = const
        self.mkey[mid] = const
        self.rqs[mid] = rq
        self.views[mid] = rq.output._view
        self.view_ver[mid] = -1
        rq.output._keyed = (self, mid)
        self.heads[mid] = rq.output.head + TIME_MARK + ", "
        self.blocks[mid] = ""
        self.cur[mid] = 0
        self.acc[mid] = 0
        self.by_name[name] = mid
        self.by_key.setdefault(const, []).append(mid)
        self.pending.add(mid)
        self._loud = None
        rq.stats = self.stats[mid] = MemberStats(self, mid, rq.stats)
        self._order = None
        self._version += 1

    def remove(self, name: str) -> RegisteredQuery:
        """Takes ``name`` out of the group; its query continues on its own operators."""
        mid = self.by_name[name]
        rq = self.rqs[mid]
        assert rq is not None
        self.sync(mid)
        rq.output._keyed = None
        del self.by_name[name]
        if isinstance(rq.stats, MemberStats):
            rq.stats = rq.stats.plain()
        if rq.output.view._started:
            # the view holds its result: the query's own operators go on from the deltas
            for op in rq.root.walk():
                if type(op) is AttachOperator:
                    op._attached = True
        key = self.keys[mid]
        mids = self.by_key[key]
        mids.remove(mid)
        if not mids:
            del self.by_key[key]
            self._prune = True
        self.names[mid] = self.rqs[mid] = self.views[mid] = self.stats[mid] = None
        self._release(mid)
        return rq

    # ------------------------------------------------------------ epochs

    def advance(self, epoch: int) -> list[int]:
        """Brings every member's result to ``epoch``; returns the members whose result
        changed or who were evaluated for the first time."""
        self.epoch = epoch
        d = self.graph.delta(epoch)
        if self._prune:
            self._drop_unused()
        touched: list[int] = []
        changed = None
        if len(d) and len(self.keys_arr):
            kc = d.cols[self.pos]
            ks = self.keys_arr
            i = ks.searchsorted(kc)
            i[i == len(ks)] = 0
            hit = np.flatnonzero(ks[i] == kc)
            if len(hit):
                cols = d.cols.take(self.out_pos, axis=0).take(hit, axis=1)
                kh = kc.take(hit)
                self._merge(kh, cols, d.counts.take(hit))
                changed = _uniq(kh)
        keys: np.ndarray | None = changed
        if self.pending:
            pk = _uniq(self.mkey[np.fromiter(self.pending, dtype=np.int64, count=len(self.pending))])
            known = self.keys_arr
            if len(known):
                j = known.searchsorted(pk)
                j[j == len(known)] = 0
                new_keys = pk[known[j] != pk]
            else:
                new_keys = pk
            if len(new_keys):
                self._adopt(new_keys)
            keys = pk if changed is None else _uniq(np.concatenate([changed, pk]))
        if keys is not None and len(keys):
            touched = self._render_keys(keys)
        self.pending.clear()
        return touched

    def _drop_unused(self) -> None:
        self._prune = False
        live = np.array(sorted(self.by_key), dtype=np.int64)
        keep = np.isin(self.st_k, live)
        if not keep.all():
            self.st_k, self.st_c = self.st_k[keep], self.st_c[:, keep]
            self.st_n, self.st_b = self.st_n[keep], self.st_b[keep]
            self._st_p = None
        self.keys_arr = live[np.isin(live, self.keys_arr)]

    def _adopt(self, new_keys: np.ndarray) -> None:
        """State for keys seen for the first time: the graph's rows that hold them."""
        cur = self.graph.current()
        kc = cur.cols[self.pos]
        hit = np.flatnonzero(np.isin(kc, new_keys))
        self.keys_arr = _uniq(np.concatenate([self.keys_arr, new_keys]))
        if len(hit):
            cols = cur.cols.take(self.out_pos, axis=0).take(hit, axis=1)
            self._merge(kc.take(hit), cols, cur.counts.take(hit))

    def _merge(self, k: np.ndarray, cols: np.ndarray, counts: np.ndarray) -> None:
        """Adds signed rows to the state (kept consolidated and sorted); renders the
        bodies of the rows that were not in it."""
        dp = _pack(k, cols)
        if dp is not None:
            sp = self._st_p
            if sp is None:
                sp = _pack(self.st_k, self.st_c)
            if sp is not None:
                self._merge_packed(sp, dp, counts)
                return
        self._st_p = None
        self._merge_sorted(k, cols, counts)

    def _merge_packed(self, sp: np.ndarray, dp: np.ndarray, counts: np.ndarray) -> None:
        """:meth:`_merge` with the state's rows and the delta's packed (the same rows in the
        same order): a sort of the delta, one binary search and an insertion."""
        dp, counts = sum_by_key(dp, counts)
        if not len(dp):
            self._st_p = sp
            return
        pos = sp.searchsorted(dp)
        found = pos < len(sp)
        found[found] = sp.take(pos[found]) == dp[found]
        st_k, st_c, st_n, st_b = self.st_k, self.st_c, self.st_n.copy(), self.st_b
        if found.any():
            st_n[pos[found]] += counts[found]
        ins = ~found
        if ins.any():
            at = pos[ins]
            new = dp[ins]
            ncol = st_c.shape[0]
            mask = (1 << _BITS) - 1
            ncols = np.empty((ncol, len(new)), dtype=np.int64)
            for j in range(ncol):
                ncols[j] = (new >> (_BITS * (ncol - 1 - j))) & mask
            nk = new >> (_BITS * ncol)
            new_at, old_at = insert_sorted(at, len(sp))
            m = len(sp) + len(new)
            sp2 = np.empty(m, dtype=np.int64)
            sp2[new_at], sp2[old_at] = new, sp
            k2 = np.empty(m, dtype=np.int64)
            k2[new_at], k2[old_at] = nk, st_k
            c2 = np.empty((ncol, m), dtype=np.int64)
            c2[:, new_at], c2[:, old_at] = ncols, st_c
            n2 = np.empty(m, dtype=np.int64)
            n2[new_at], n2[old_at] = counts[ins], st_n
            b2 = np.empty(m, dtype=object)
            b2[new_at] = self._render(ncols)
            b2[old_at] = st_b
            sp, st_k, st_c, st_n, st_b = sp2, k2, c2, n2, b2
        keep = st_n != 0
        if not keep.all():
            sp, st_k, st_c, st_n, st_b = sp[keep], st_k[keep], st_c[:, keep], st_n[keep], st_b[keep]
        self.st_k, self.st_c, self.st_n, self.st_b, self._st_p = st_k, st_c, st_n, st_b, sp

    def _merge_sorted(self, k: np.ndarray, cols: np.ndarray, counts: np.ndarray) -> None:
        n0 = len(self.st_k)
        ak = np.concatenate([self.st_k, k])
        ac = np.concatenate([self.st_c, cols], axis=1)
        an = np.concatenate([self.st_n, counts])
        order = np.lexsort((*ac[::-1], ak))  # stable: a state row before the delta's equal rows
        ak, ac, an = ak[order], ac[:, order], an[order]
        starts = np.flatnonzero(group_starts(np.vstack([ak[None, :], ac])))
        if len(starts) != len(ak):
            an = np.add.reduceat(an, starts)
            ak, ac, order = ak[starts], ac[:, starts], order[starts]
        keep = an != 0
        if not keep.all():
            ak, ac, an, order = ak[keep], ac[:, keep], an[keep], order[keep]
        # each row's body: the state's when the row was there, rendered when it is new
        fresh = order >= n0
        ab = np.empty(len(ak), dtype=object)
        old = ~fresh
        ab[old] = self.st_b[order[old]]
        todo = np.flatnonzero(fresh)
        if len(todo):
            ab[todo] = self._render(ac.take(todo, axis=1))
        self.st_k, self.st_c, self.st_n, self.st_b = ak, ac, an, ab

    def _render(self, cols: np.ndarray) -> list[str]:
        """The body of each row (after the line's head), as the per-query path renders it."""
        lists = cols.tolist()
        texts = json_terms(self.dictionary, {x for col in lists for x in col})
        pre = self._pre
        per_var = [[name + texts[x] for x in col] for name, col in zip(self._names, lists)]
        if len(per_var) == 1:
            return [pre + a + "}}" for a in per_var[0]]
        return [pre + ", ".join(r) + "}}" for r in zip(*per_var)]

    def sync(self, mid: int) -> None:
        """Brings member ``mid``'s view to its key's current result (when it changed since
        the view last got it): the result relation, rendered bodies and started flag its
        own update would have left."""
        k = self.keys[mid]
        v = self.key_ver.get(k)
        if v is None or self.view_ver[mid] == v:
            return
        self.view_ver[mid] = v
        view = self.views[mid]
        assert view is not None
        st_k = self.st_k
        lo, hi = int(st_k.searchsorted(k, "left")), int(st_k.searchsorted(k, "right"))
        if hi == lo:
            _set_view(view, self._empty, [])
            return
        counts = self.st_n[lo:hi]
        bodies = self.st_b[lo:hi].tolist()
        if (counts != 1).any():
            bodies = [b for b, c in zip(bodies, counts.tolist()) for _ in range(max(c, 0))]
        _set_view(view, Batch(self.vars, self.st_c[:, lo:hi], counts), bodies)

    def _member_keys(self) -> np.ndarray:
        return self.mkey

    def _render_keys(self, karr: np.ndarray) -> list[int]:
        """Updates the views and blocks of the members of ``karr`` (distinct keys,
        ascending); returns those members.  Vectorised over the members: a key's rows are
        a range of the state, its members a range of :meth:`_members`; a one-line block
        is its member's head and the row's body in one object-array addition."""
        st_k, st_n = self.st_k, self.st_n
        sk, sm = self._members()
        a = sk.searchsorted(karr, "left")
        cnt = sk.searchsorted(karr, "right") - a
        has = cnt > 0
        if not has.all():
            karr, a, cnt = karr[has], a[has], cnt[has]
        nk = len(karr)
        if not nk:
            return []
        ver = self._ver
        # the members' views read their key's version when they are looked at
        self.key_ver.update(zip(karr.tolist(), range(ver + 1, ver + 1 + nk)))
        self._ver = ver + nk
        los = st_k.searchsorted(karr, "left")
        n = st_k.searchsorted(karr, "right") - los  # lines of each key
        tot = int(cnt.sum())
        mids = sm[np.repeat(a - (np.cumsum(cnt) - cnt), cnt) + np.arange(tot)]
        mn = np.repeat(n, cnt)  # lines of each member
        blocks, heads = self.blocks, self.heads
        got_m: list[np.ndarray] = []
        got_b: list[np.ndarray] = []
        got_n: list[np.ndarray] = []
        empty = mn == 0
        if empty.any():  # an empty result: only members that had lines (or never ran) change
            me = mids[empty]
            me = me[blocks[me] != ""]
            if len(me):
                got_m.append(me)
                got_b.append(np.full(len(me), "", dtype=object))
                got_n.append(np.zeros(len(me), dtype=np.int64))
        k1 = n == 1
        if k1.any():
            k1 &= st_n[np.minimum(los, len(st_n) - 1)] == 1
        single = np.repeat(k1, cnt)
        if single.any():  # the common case: one row, one line
            m1 = mids[single]
            got_m.append(m1)
            got_b.append(self._render_single(heads[m1], np.repeat(self.st_b[los[k1]], cnt[k1])))
            got_n.append(np.ones(len(m1), dtype=np.int64))
        many = np.flatnonzero((n > 0) & ~k1)
        if len(many):  # several lines (a row repeated by its count)
            m_m, b_m, n_m = self._render_many(los[many], n[many], a[many], cnt[many], sm)
            got_m.append(m_m)
            got_b.append(b_m)
            got_n.append(n_m)
        if not got_m:
            return []
        if len(got_m) == 1:
            touched, new, ns = got_m[0], got_b[0], got_n[0]
        else:
            touched, new, ns = np.concatenate(got_m), np.concatenate(got_b), np.concatenate(got_n)
        self._set(touched, new, ns)
        return touched.tolist()

    @staticmethod
    def _render_single(heads: np.ndarray, bodies: np.ndarray) -> np.ndarray:
        """One-line blocks: each of ``heads`` before its body of ``bodies`` (object arrays)."""
        got = member_blocks(heads.tolist(), [1] * len(heads), bodies.tolist())
        if got is None:
            return heads + (bodies + "\n")
        out = np.empty(len(got), dtype=object)
        out[:] = got
        return out

    def _render_many(
        self, los: np.ndarray, n: np.ndarray, a: np.ndarray, cnt: np.ndarray, sm: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The blocks of the members of keys with several lines (key ``k``: state rows
        ``los[k]`` to ``los[k] + n[k]``, members ``sm[a[k]:a[k] + cnt[k]]``): each member's
        head before each row's body, a row repeated by its count.  Returns the members,
        their blocks and their line counts.  All the lines go into one string in one join,
        cut at the members' ends (lengths in characters, from the heads' and bodies'
        lengths): no Python work per line, one slice per member."""
        st_b, st_n, heads = self.st_b, self.st_n, self.heads
        # each key's state rows, each repeated by its count (the rows of the keys are ranges)
        rows = np.repeat(los - (np.cumsum(n) - n), n) + np.arange(int(n.sum()))
        reps = np.maximum(st_n[rows], 0)
        key_of_row = np.repeat(np.arange(len(n)), n)
        lines = np.repeat(rows, reps)  # per key: its lines' rows
        kl = np.bincount(key_of_row, weights=reps, minlength=len(n)).astype(np.int64)  # lines per key
        kstart = np.cumsum(kl) - kl
        mids = sm[np.repeat(a - (np.cumsum(cnt) - cnt), cnt) + np.arange(int(cnt.sum()))]
        mkey = np.repeat(np.arange(len(n)), cnt)  # each member's key
        ml = kl[mkey]  # lines per member
        # each member's lines: its key's lines, in order
        at = np.repeat(kstart[mkey] - (np.cumsum(ml) - ml), ml) + np.arange(int(ml.sum()))
        line_rows = lines[at]
        got = member_blocks(heads[mids].tolist(), ml.tolist(), st_b[line_rows].tolist())
        if got is not None:  # compiled: each block in one allocation
            blocks = np.empty(len(mids), dtype=object)
            blocks[:] = got
            return mids, blocks, ml
        line_mid = np.repeat(mids, ml)
        flat = np.empty(3 * len(line_rows), dtype=object)
        flat[0::3] = heads[line_mid]
        flat[1::3] = st_b[line_rows]
        flat[2::3] = "\n"
        text = "".join(flat.tolist())
        body_len = np.fromiter(map(len, st_b[rows].tolist()), dtype=np.int64, count=len(rows))
        head_len = np.fromiter(map(len, heads[mids].tolist()), dtype=np.int64, count=len(mids))
        kchars = np.bincount(key_of_row, weights=body_len * reps, minlength=len(n)).astype(np.int64)
        size = kchars[mkey] + ml * (head_len + 1)  # characters of each member's block
        ends = np.cumsum(size).tolist()
        starts = [0, *ends[:-1]]
        blocks = np.empty(len(mids), dtype=object)
        blocks[:] = [text[i:j] for i, j in zip(starts, ends, strict=True)]
        return mids, blocks, ml


def _set_view(view: ResultView, rows: Batch, bodies: list[str]) -> None:
    """Puts a key's current result in a member's view, as its own update would have."""
    view._started = True
    view.result.set_consolidated(rows)
    view._bodies = bodies
    view.memo = None
    view.rendered = None
