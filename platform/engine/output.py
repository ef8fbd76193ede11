"""The output edge of a query: RStream / IStream / DStream, ASK, CONSTRUCT, and the
per-evaluation ORDER BY / LIMIT / OFFSET (SEMANTICS.md §6).

Without LIMIT/OFFSET the output is incremental: the plan's root delta updates the
materialised result and IStream/DStream are read straight off the delta.  With a slice,
the current result is sorted and sliced at every report.  Decoding to N-Triples happens
here and only here, once per distinct id of the report.
"""

from __future__ import annotations

import bisect
import itertools
import json
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from json.encoder import encode_basestring
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.engine.planner import QueryShape
from linkstream.engine.render import TIME_MARK, BlockLines, join_timed
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch, concat, consolidate, group_starts
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.relation import Relation
from linkstream.query.expressions import Expr
from linkstream.query.functions import scalar as F
from linkstream.rdf.records import record

if TYPE_CHECKING:
    from linkstream.engine.keyed import KeyedGroup
    from linkstream.engine.members import MemberReports
    from linkstream.engine.routed import RoutedBlock
    from linkstream.engine.routed_members import RoutedMembers
    from linkstream.operators.state import StateReader, StateWriter
    from linkstream.rdf.dictionary import Dictionary

_bnode_counter = itertools.count(1)

#: per dictionary: id -> the JSON string of its N-Triples text (ids are stable for the
#: life of a dictionary, so a term is decoded and escaped once, not once per report)
_JSON_TERMS: weakref.WeakKeyDictionary[object, dict[int, str]] = weakref.WeakKeyDictionary()
JSON_TERMS_MAX = 1 << 20


@record
class QueryStats:
    """Counts and timings of one registered query."""

    reports: int = 0
    rows: int = 0
    eval_seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)


def json_terms(dictionary: Dictionary, ids: set[int]) -> dict[int, str]:
    """A mapping holding the JSON string of every non-zero id in ``ids``."""
    try:
        cache = _JSON_TERMS.get(dictionary)
        if cache is None:
            cache = _JSON_TERMS[dictionary] = {}
    except TypeError:  # not weak-referenceable: no cache across calls
        cache = {}
    ids.discard(0)
    missing = [x for x in ids if x not in cache]
    if missing:
        if len(cache) + len(missing) > JSON_TERMS_MAX:
            cache.clear()
        texts = dictionary.decode_many(np.asarray(missing, dtype=np.int64))
        # what json.dumps(t, ensure_ascii=False) gives for a str, without its encoder object
        enc = encode_basestring
        for x, t in zip(missing, texts, strict=True):
            cache[x] = enc(t) if isinstance(t, str) else json.dumps(t, ensure_ascii=False)
    return cache


def order_rows(ev: Evaluator, rows: Batch, order: Sequence[tuple[Expr, bool]]) -> np.ndarray:
    """Row order for ORDER BY (SPARQL ordering of terms, stable)."""
    keys = []
    for e, desc in order:
        ids = ev.values(e, rows)
        uniq, inv = np.unique(ids, return_inverse=True)
        ranked = sorted(
            range(len(uniq)), key=lambda k: F.order_key(ev.terms.term(int(uniq[k])) if uniq[k] else None)
        )
        rank = np.empty(len(uniq), dtype=np.int64)
        rank[ranked] = np.arange(len(uniq))
        r = rank[inv.reshape(-1)]
        keys.append(-r if desc else r)
    if not keys:
        return np.arange(len(rows))
    return np.lexsort(keys[::-1])


class ResultView:
    """The materialised result of one plan root as one output mode sees it.

    Queries that differ only in their names (same shared root, same mode and shape: the
    common case when thousands of queries come from a few templates) share one view: the
    root delta is applied and the result rows are rendered once per epoch, and each query
    only puts its own ``{"query": .., "t": ..`` head in front of the shared bodies.
    """

    def __init__(self, mode: str, root: Operator, shape: QueryShape, evaluator: Evaluator) -> None:
        self.mode = mode
        self.shape = shape
        self.ev = evaluator
        self.root = root
        if shape.form == "SELECT":
            self.vars = shape.project if shape.project is not None else root.vars
        elif shape.form == "CONSTRUCT":
            self.vars = tuple(dict.fromkeys(v for tr in shape.template for k, v in tr if k == "var"))
        else:
            self.vars = ()
        self.full = Relation(root.vars)
        self.sliced = bool(shape.limit is not None or shape.offset)
        self.result = Relation(self.vars)  # current result (after projection/distinct/slice)
        self._started = False  # pulled the plan at least once
        self._sliced_started = False  # computed the sliced / distinct result at least once
        self._bodies: list[str] | None = None
        #: RStream / CONSTRUCT (not ASK): a report repeats the whole current result
        self.repeats = mode not in ("ISTREAM", "DSTREAM") and shape.form != "ASK"
        self._by_row: dict[tuple[int, ...], str] = {}  # RStream: row -> its rendered body
        # per-epoch memos (tuples: not part of a migrated state snapshot)
        self.memo: tuple[int, bool, Batch] | None = None  # (epoch, pulled, delta)
        self.rendered: tuple[int, list[str]] | None = None
        self.users = 0  # queries reading this view
        #: the routed block keeping this view (:mod:`linkstream.engine.routed`), if any
        self.block: RoutedBlock | None = None

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The migrated state (:mod:`linkstream.operators.state`): the plan's full result,
        the current (visible) result and the first-epoch flags.  Rendered bodies and the
        per-epoch memos are not shipped."""
        return {
            "full": w.relation(self.full),
            "result": w.relation(self.result),
            "_started": self._started,
            "_sliced_started": self._sliced_started,
        }

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        """Puts back what :meth:`snapshot` gave (before the view's first update here)."""
        r.expect(self, entries, ("full", "result", "_started", "_sliced_started"))
        self.full = r.relation(entries["full"], self.full)
        self.result = r.relation(entries["result"], self.result)
        self._started = r.value(entries["_started"], bool)
        self._sliced_started = r.value(entries["_sliced_started"], bool)

    @staticmethod
    def share_key(mode: str, root: Operator, shape: QueryShape) -> tuple | None:
        """The key under which equal queries share a view (``None``: not shareable)."""
        if shape.order or shape.template:
            return None
        # a query registered after others reads a shared root through its own
        # AttachOperator; before the first evaluation they all give the same deltas
        while isinstance(root, AttachOperator):
            root = root.shared
        return (id(root), mode, shape.form, shape.project, shape.distinct, shape.offset, shape.limit)

    def _current(self) -> Batch:
        rows = self.full.rows
        rows = rows.take(rows.expand()) if len(rows) else rows
        if self.shape.order:
            rows = rows.take(order_rows(self.ev, rows, self.shape.order))
        rows = rows.project(self.vars)
        if self.shape.distinct and len(rows):
            _, first = np.unique(rows.cols, axis=1, return_index=True)
            rows = rows.take(np.sort(first))
        if self.sliced:
            end = None if self.shape.limit is None else self.shape.offset + self.shape.limit
            rows = rows.take(np.arange(len(rows))[self.shape.offset : end])
        return Batch(self.vars, rows.cols, np.ones(len(rows), dtype=np.int64))

    def update(self, epoch: int, changed: bool = True) -> Batch:
        """Apply this epoch's root delta (once per epoch); the delta of the visible result.

        Args:
            epoch: The engine's epoch.
            changed: ``False`` when the engine knows the root delta is empty this epoch
                (nothing under the query moved): the plan is then not pulled at all.
        """
        memo = self.memo
        if memo is not None and memo[0] == epoch and (memo[1] or not changed):
            return memo[2]
        if not changed and self._started:
            d = self.__dict__.get("_no_change")
            if d is None:
                d = self._no_change = Batch.empty(self.vars)  # read-only: shared by every quiet epoch
            self.memo = (epoch, False, d)
            return d
        blk = self.block
        if blk is not None:  # its block brings it up to date (once per epoch for all)
            blk.advance(epoch)
            memo = self.memo
            if memo is not None and memo[0] == epoch:
                return memo[2]
            got = blk.view_delta(self, epoch)  # (left out of the memo by a lazy block)
            d = got if got is not None else Batch.empty(self.vars)
            self.memo = (epoch, True, d)
            return d
        d = self._apply(epoch)
        self.memo = (epoch, True, d)
        if len(d):  # the rendered RStream rows are stale (also when no report reads them now)
            self._bodies = None
        return d

    def repeat_bodies(self, epoch: int) -> list[str] | None:
        """The rendered rows an RStream / CONSTRUCT report repeats at an epoch that changed
        nothing under the view (``None``: none rendered yet, or not a repeating view)."""
        bodies = self._bodies
        if bodies is None or not self._started or not self.repeats:
            return None
        memo = self.memo
        if memo is None or memo[0] != epoch:
            self.update(epoch, False)
        return bodies

    def _epoch_seen(self) -> int | None:
        """The last epoch this view applied or skipped (tests: was the query looked at)."""
        return None if self.memo is None else self.memo[0]

    def loud(self) -> bool:
        """Whether a report writes lines even in an epoch that changed nothing under the
        query: never evaluated yet, ASK (a line per report), or an RStream / CONSTRUCT
        result that is not empty (RStream repeats the whole result)."""
        if not self._started or self.shape.form == "ASK":
            return True
        return self.mode not in ("ISTREAM", "DSTREAM") and len(self.result.rows) > 0

    def _apply(self, epoch: int) -> Batch:
        self._started = True
        d = self.root.delta(epoch)
        if self.sliced or (self.shape.distinct and self.shape.form == "SELECT"):
            if not len(d) and self._sliced_started:
                return Batch.empty(self.vars)
            self._sliced_started = True
            self.full.apply(d)
            new = consolidate(self._current())
            delta = consolidate(concat([new, self.result.rows.negate()], self.vars))
            self.result.replace(new)
            return delta
        d = d.project(self.vars)
        self.result.apply(d)
        return consolidate(d)

    def bodies(self, epoch: int, changed: bool = True) -> list[str]:
        """Everything after the head of each result line of the report of ``epoch``."""
        if not changed and self._bodies is not None and self._started and self.repeats:
            # an RStream result nothing under the query changed: the rows rendered for an
            # earlier report, as they are (the common case of thousands of quiet queries)
            self.update(epoch, False)
            return self._bodies
        delta = self.update(epoch, changed)
        form = self.shape.form
        if form == "ASK":
            return ['"ask": %s}' % ("true" if len(self.result.rows) else "false")]
        done = self.rendered
        if done is not None and done[0] == epoch:
            return done[1]
        if self.mode not in ("ISTREAM", "DSTREAM"):
            # RStream repeats the whole result: when it did not change, the rendered rows
            # of the previous report are reused and only the report time differs.
            if len(delta) or self._bodies is None:
                self._bodies = self._rstream_bodies(self.result.rows)
            self.rendered = (epoch, self._bodies)
            return self._bodies
        if self.mode == "ISTREAM":
            rows = delta.mask(delta.counts > 0)
        else:
            rows = delta.mask(delta.counts < 0).negate()
        out = self._render(rows.take(rows.expand())) if len(rows) else []
        self.rendered = (epoch, out)
        return out

    def _rstream_bodies(self, rows: Batch) -> list[str]:
        """Bodies of the whole current result (consolidated ``rows``), repeated by
        multiplicity.  A window's churn changes few rows per report: the bodies of rows
        that were already in the previous result are reused, only new rows are rendered."""
        if not len(rows):
            self._by_row = {}
            return []
        if self.shape.form == "CONSTRUCT" or not rows.vars:
            return self._render(rows.take(rows.expand()))
        keys = list(zip(*rows.cols.tolist()))
        prev = self._by_row
        missing = [i for i, key in enumerate(keys) if key not in prev]
        cur = {key: prev[key] for key in keys if key in prev}
        if missing:
            fresh = self._bindings(rows.take(np.array(missing, dtype=np.int64)), "")
            for i, body in zip(missing, fresh, strict=True):
                cur[keys[i]] = body
        self._by_row = cur
        counts = rows.counts.tolist()
        if all(c == 1 for c in counts):
            return [cur[key] for key in keys]
        return [cur[key] for key, c in zip(keys, counts) for _ in range(max(c, 0))]

    def _render(self, rows: Batch) -> list[str]:
        """Everything of each result line after its ``{"query": .., "t": .., `` head."""
        if self.shape.form == "CONSTRUCT":
            return self._construct(rows, "")
        return self._bindings(rows, "")

    def _bindings(self, rows: Batch, head: str) -> list[str]:
        if not len(rows.vars):
            return [head + '"binding": {}}'] * len(rows)
        # one body per distinct row, repeated by multiplicity (rows of a bag are adjacent)
        uniq_rows = rows
        reps = None
        if len(rows) > 1:
            start = group_starts(rows.cols)
            if not start.all():
                idx = np.flatnonzero(start)
                uniq_rows = rows.take(idx)
                reps = np.diff(np.append(idx, len(rows))).tolist()
        names = [json.dumps(v, ensure_ascii=False) + ": " for v in rows.vars]
        cols = uniq_rows.cols.tolist()
        texts = json_terms(self.ev.terms.dictionary, {x for col in cols for x in col})
        per_var = []
        unbound = False
        for name, col in zip(names, cols):
            per_var.append([name + texts[x] if x else "" for x in col])
            unbound = unbound or 0 in col
        pre = head + '"binding": {'
        if unbound:
            out = [pre + ", ".join([p for p in r if p]) + "}}" for r in zip(*per_var)]
        else:
            out = [pre + ", ".join(r) + "}}" for r in zip(*per_var)]
        if reps is not None:
            out = [b for b, k in zip(out, reps) for _ in range(k)]
        return out

    def _construct(self, rows: Batch, head: str) -> list[str]:
        terms = self.ev.terms
        dec = terms.dictionary.decode_many
        seen: set[str] = set()
        out = []
        cols = {v: rows.col(v) for v in self.vars}
        for i in range(len(rows)):
            bnodes: dict[str, str] = {}
            for tr in self.shape.template:
                parts = []
                for pos, (k, v) in enumerate(tr):
                    if k == "var":
                        x = int(cols[v][i])
                        if not x:
                            break
                        s = dec([x])[0]
                    elif k == "bnode":
                        if v not in bnodes:
                            bnodes[v] = "_:c%d" % next(_bnode_counter)
                        s = bnodes[v]
                    else:
                        s = dec([int(v)])[0]
                    if (pos == 0 and s[0] == '"') or (pos == 1 and s[0] != "<"):
                        break
                    parts.append(s)
                else:
                    triple = " ".join(parts) + " ."
                    key = triple if "_:" not in triple else triple + str(i)
                    if key not in seen:
                        seen.add(key)
                        out.append(head + '"triple": ' + json.dumps(triple, ensure_ascii=False) + "}")
        return out


class ReportLines(Mapping[str, list[str]]):
    """The result lines of one tick, by query name: every reporting query is a key.

    Only the queries that were evaluated are stored (:attr:`lines`); the others wrote
    nothing and read as ``[]``.  Building it costs nothing per reporting query.  A tick
    asked for blocks stores a quiet repeating query as one text block instead
    (:attr:`blocks`: its lines, each ended by a newline, with :data:`TIME_MARK` where the
    report time goes; see :meth:`QueryOutput.block`), which :meth:`text` joins with the
    other lines of the report in one go.
    """

    __slots__ = ("lines", "reporting", "blocks", "t_text", "block_rows", "groups")

    def __init__(
        self,
        lines: dict[str, list[str]],
        reporting: Collection[str],
        blocks: dict[str, str] | None = None,
        t_text: str = "",
        block_rows: int = 0,
        groups: list[MemberReports] | None = None,
    ) -> None:
        self.lines = lines
        self.reporting = reporting
        self.blocks = blocks
        self.t_text = t_text
        self.block_rows = block_rows
        #: keyed groups every member of which reports (:mod:`linkstream.engine.keyed`):
        #: their lines are the groups' joined blocks
        self.groups = groups

    def __getitem__(self, name: str) -> list[str]:
        got = self.lines.get(name)
        if got is not None:
            return got
        return list(self.kept(name))

    def kept(self, name: str) -> Sequence[str]:
        """``name``'s lines as a report keeps them: a block of a quiet query or of a group's
        member as :class:`~linkstream.engine.render.BlockLines` (split when read), the
        others as a tuple (``()`` when it wrote nothing)."""
        got = self.lines.get(name)
        if got is not None:
            return tuple(got)
        if self.blocks is not None:
            block = self.blocks.get(name)
            if block is not None:
                return BlockLines(block, self.t_text) if block else ()
        for g in self.groups or ():
            mid = g.by_name.get(name)
            if mid is not None:
                block = g.blocks[mid]
                return BlockLines(block, self.t_text) if block else ()
        if name in self.reporting:
            return ()
        raise KeyError(name)

    def with_lines(self) -> list[tuple[str, Sequence[str]]]:
        """``(name, lines)`` of every reporting query that wrote lines, kept as
        :meth:`kept` keeps them (in no particular order): a walk of what was evaluated,
        not of the reporting queries."""
        got = self.plain_lines()
        t = self.t_text
        for g in self.groups or ():
            cur = g.cur
            mids = np.flatnonzero(cur)  # (members with lines: their block is not empty)
            names = g.names
            got += [
                (names[m], BlockLines(b, t, n))  # type: ignore[misc]  # (a member's slot holds its name)
                for m, b, n in zip(mids.tolist(), g.blocks[mids].tolist(), cur[mids].tolist(), strict=True)
            ]
        return got

    def plain_lines(self) -> list[tuple[str, Sequence[str]]]:
        """:meth:`with_lines` without the members of :attr:`groups` (whose lines a reader
        takes from the groups' arrays)."""
        got: list[tuple[str, Sequence[str]]] = [(n, tuple(ls)) for n, ls in self.lines.items() if ls]
        if self.blocks:
            t = self.t_text
            got += [(n, BlockLines(b, t)) for n, b in self.blocks.items() if b]
        return got

    def __contains__(self, name: object) -> bool:
        return name in self.reporting

    def __iter__(self) -> Iterator[str]:
        return iter(self.reporting)

    def __len__(self) -> int:
        return len(self.reporting)

    def written(self) -> dict[str, list[str]]:
        """The queries that were evaluated (a superset of those that wrote lines)."""
        if not self.blocks and not self.groups:
            return self.lines
        out = dict(self.lines)
        for name in self.blocks or ():
            out[name] = self[name]
        for g in self.groups or ():
            for name, _ in g.member_blocks():
                out[name] = self[name]
        return out

    def text(self, order: Sequence[str] | Callable[[], Sequence[str]] | None = None) -> tuple[int, str]:
        """Every line written, in query name order, each ended by a newline, and their
        number: one join and one time substitution for the whole report.

        Args:
            order: The reporting names, sorted (when at hand, or a function that sorts
                them, called only when needed): walked instead of sorting the written
                names when these are not a small part of them.
        """
        if self.groups:
            return self._text_groups(order)
        if callable(order):
            order = order()
        lines = self.lines
        blocks = self.blocks or {}
        parts: list[str] = []
        n = self.block_rows
        names: Iterable[str]
        if order is not None and 2 * (len(lines) + len(blocks)) > len(order):
            names = order
        else:
            names = sorted(lines.keys() | blocks.keys() if blocks else lines)
        empty: list[str] = []
        for name in names:
            block = blocks.get(name)
            if block is not None:
                parts.append(block)
                continue
            got = lines.get(name, empty)
            if got:
                n += len(got)
                parts.append("\n".join(got))
                parts.append("\n")
        if not parts:
            return 0, ""
        return n, join_timed(parts, self.t_text) if blocks else "".join(parts)

    def _piece(self, name: str) -> tuple[int, str]:
        """The text of one query that is not in a group, and its lines."""
        block = (self.blocks or {}).get(name)
        if block is not None:
            return 0, block  # counted in block_rows
        got = self.lines.get(name)
        if not got:
            return 0, ""
        return len(got), "\n".join(got) + "\n"

    def _pieces(self, names: Iterable[str], parts: list[str]) -> int:
        """Appends :meth:`_piece` of each of ``names`` to ``parts`` (non-empty ones);
        returns their line count (one loop, no call per name)."""
        blocks = self.blocks or {}
        lines = self.lines
        n = 0
        for name in names:
            block = blocks.get(name)
            if block is not None:
                parts.append(block)  # counted in block_rows
                continue
            got = lines.get(name)
            if got:
                n += len(got)
                parts.append("\n".join(got) + "\n")
        return n

    def _text_groups(self, order: Sequence[str] | Callable[[], Sequence[str]] | None) -> tuple[int, str]:
        """:meth:`text` with groups: each group's joined blocks go between the other
        queries' lines where their names sort.  Groups whose names interleave with
        others' are scattered into the report order in one vectorised assignment each."""
        from linkstream.engine.members import order_array

        groups = self.groups or []
        plain = sorted(self.lines.keys() | (self.blocks or {}).keys())
        segs = []
        for g in groups:
            if len(g):
                a, b = g.first_last()
                segs.append((a, b, g))
        segs.sort(key=lambda x: x[0])
        n = self.block_rows
        parts: list[str] = []
        ok = all(segs[i][1] < segs[i + 1][0] for i in range(len(segs) - 1))
        ok = ok and all(bisect.bisect_left(plain, a) == bisect.bisect_right(plain, b) for a, b, _ in segs)
        if ok:
            i = 0
            for a, _, g in segs:
                j = bisect.bisect_left(plain, a)
                n += self._pieces(plain[i:j], parts)
                i = j
                n += g.joined_into(parts)
            n += self._pieces(plain[i:], parts)
            return n, join_timed(parts, self.t_text)
        # interleaved: every reporting name has a place in the report order
        if callable(order):
            order = order()
        if order is None:
            every = set(plain)
            for _, _, g in segs:
                every.update(g.by_name)
            order = tuple(sorted(every))
        at = np.full(len(order), "", dtype=object)
        for _, _, g in segs:
            pos = g.positions(order)
            if pos is None:  # a member not in ``order``: place it by name
                return self._text_groups(None)
            n += g.line_count()
            at[pos] = g.slot_array()
        if plain:
            arr, want = order_array(order), np.array(plain)
            found = arr.searchsorted(want)
            if found.max() >= len(arr) or (arr[found] != want).any():
                return self._text_groups(None)  # a name not in ``order``
            for i, name in zip(found.tolist(), plain):
                k, piece = self._piece(name)
                n += k
                at[i] = piece
        return n, join_timed(at.tolist(), self.t_text)


class QueryOutput:
    """One query's output edge: its name and report times around a (shared) view."""

    def __init__(
        self,
        name: str,
        mode: str,
        root: Operator,
        shape: QueryShape,
        evaluator: Evaluator,
        view: ResultView | None = None,
    ) -> None:
        self.name = name
        self._view = view if view is not None else ResultView(mode, root, shape, evaluator)
        self._view.users += 1
        #: ``(group, member)`` while a keyed group or a routed block's members serve the
        #: query: the group brings the view up to date when it is read (``sync``)
        self._keyed: tuple[KeyedGroup | RoutedMembers, int] | None = None
        self._qname = json.dumps(name, ensure_ascii=False)
        self._head = '{"query": %s, "t": ' % self._qname
        #: the start of every result line, up to the report time
        self.head = self._head
        #: (bodies, block, lines) of :meth:`block`, for the bodies it was built from
        self._block: tuple[list[str], str, int] | None = None

    @property
    def view(self) -> ResultView:
        """The query's (possibly shared) result view, up to date."""
        k = self._keyed
        if k is not None:
            k[0].sync(k[1])
        return self._view

    @property
    def mode(self) -> str:
        return self.view.mode

    @property
    def shape(self) -> QueryShape:
        return self.view.shape

    @property
    def root(self) -> Operator:
        return self.view.root

    @property
    def vars(self) -> tuple[str, ...]:
        return self.view.vars

    @property
    def result(self) -> Relation:
        return self.view.result

    def update(self, epoch: int, changed: bool = True) -> Batch:
        """Apply this epoch's root delta; return the delta of the visible result."""
        return self.view.update(epoch, changed)

    def repeat_lines(self, epoch: int, t: str) -> list[str] | None:
        """The lines of a report at which nothing under the query changed, when its view
        repeats rendered RStream rows (``t``: the report time as text); ``None`` when the
        view has no such rows yet (then :meth:`lines` is the way)."""
        bodies = self.view.repeat_bodies(epoch)
        if bodies is None:
            return None
        if not bodies:
            return []
        head = self.head + t + ", "
        if len(bodies) == 1:
            return [head + bodies[0]]
        return [head + b for b in bodies]

    def block(self, bodies: list[str]) -> tuple[list[str], str, int]:
        """``(bodies, block, n)``: the ``n`` result lines of a report repeating the view's
        rendered ``bodies`` (non-empty), each ended by a newline, as one text with
        :data:`TIME_MARK` for the report time.  Built once per rendering of the bodies."""
        blk = self._block
        if blk is not None and blk[0] is bodies:
            return blk
        head = self.head + TIME_MARK + ", "
        text = head + ("\n" + head).join(bodies) + "\n"
        blk = self._block = (bodies, text, len(bodies))
        return blk

    def lines(self, epoch: int, t: int, changed: bool = True) -> list[str]:
        """Result lines of the report at time ``t`` (``changed`` as in :meth:`update`)."""
        bodies = self.view.bodies(epoch, changed)
        if not bodies:
            return []
        head = self._head + str(t) + ", "
        if len(bodies) == 1:
            return [head + bodies[0]]
        return [head + b for b in bodies]
