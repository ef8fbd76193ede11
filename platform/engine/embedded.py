"""The embedded engine: streams, static graphs and registered queries in one process.

:class:`Engine` owns the dictionary, the per-stream buffers (the transient store), the
static graphs, and the registered queries with their operator graphs.  Ingest appends
elements to stream buffers; :meth:`Engine.report` evaluates one query at one report time
by advancing its windows and pulling the delta through its operators.
"""

from __future__ import annotations

import itertools
import logging
import math
import time
from collections.abc import Callable, Collection
from dataclasses import field
from typing import Any

import numpy as np

from linkstream.engine.dirty import Dependencies, first_window_change
from linkstream.engine.keyed import KeyedGroup, keyed_shape
from linkstream.engine.lone import switched
from linkstream.engine.members import MemberReports
from linkstream.engine.output import QueryOutput, QueryStats, ReportLines, ResultView
from linkstream.engine.planner import Dataset, Planner, QueryShape
from linkstream.engine.routed import RoutedBlocks
from linkstream.engine.routed_members import RoutedMembers, join_block, leave_block, unroute
from linkstream.engine.sharing import Sharing
from linkstream.engine.units import StepsIndex
from linkstream.operators.aggregate import AggregateOperator
from linkstream.operators.base import AttachOperator, Operator, explain
from linkstream.operators.distinct import DistinctOperator
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.graph import GraphOperator, dedup_triples
from linkstream.operators.project import ProjectOperator
from linkstream.operators.relation import forget_applied
from linkstream.operators.static_result import StaticResults
from linkstream.operators.switch import SwitchOperator
from linkstream.operators.window import RingBuffer, StreamBuffer, WindowBuffer, WindowOperator
from linkstream.query.continuous import ContinuousQuery
from linkstream.query.errors import QueryError
from linkstream.rdf.dictionary import Dictionary, MemoryDictionary
from linkstream.rdf.eventtime import DURATION_MAX
from linkstream.rdf.records import record
from linkstream.rdf.terminfo import TermInfo
from linkstream.store.static_results import StaticResultStore, engine_static_results
from linkstream.store.transient import TransientStore

log = logging.getLogger(__name__)


class ReportSchedule:
    """Report times of a query whose windows step by ``steps`` (SEMANTICS.md §4)."""

    steps: tuple[int, ...]

    def first_report_after(self, t: int) -> int:
        """The first close time strictly after ``t``."""
        return min((t // s + 1) * s for s in self.steps)

    def next_report(self, c: int) -> int:
        """The next report time after ``c``."""
        return min((c // s + 1) * s for s in self.steps)

    def last_report_before(self, t: int) -> int:
        """The last report time strictly before ``t``."""
        return max(((t - 1) // s) * s for s in self.steps)

    def reports_between(self, a: int, b: int) -> int:
        """How many report times ``c`` have ``a < c <= b`` (inclusion-exclusion over the steps)."""
        if b <= a:
            return 0
        steps = self.steps
        n = 0
        for r in range(1, len(steps) + 1):
            sign = 1 if r % 2 else -1
            for combo in itertools.combinations(steps, r):
                m = math.lcm(*combo)
                n += sign * (b // m - a // m)
        return n


@record(eq=False)  # an entity: equal to itself only (replay compares lists of them)
class RegisteredQuery(ReportSchedule):
    """A continuous query with its operators and report schedule."""

    cq: ContinuousQuery
    windows: list[WindowOperator]
    root: Operator
    output: QueryOutput
    steps: tuple[int, ...]
    ops: list[Operator] = field(default_factory=list)
    last_report: int | None = None
    registered_at: int | None = None
    stats: QueryStats = field(default_factory=QueryStats)
    #: ``cq.name`` (a plain attribute: replay and tick read it for every query)
    name: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.name = self.cq.name

    def explain(self) -> str:
        return explain(self.root)


class Engine:
    """One-process continuous query engine over dictionary-encoded streams.

    ``lone_joins=True`` plans a join that could run on a shared join + router directly
    while no other query has its routed signature (:mod:`linkstream.operators.switch`):
    cheaper for a lone query, but a query's plan then depends on the queries registered
    before and after it, which the cluster's task cutting, moves and restores cannot
    allow (:mod:`linkstream.engine.cutting`); ``linkstream replay`` turns it on.
    """

    def __init__(
        self,
        dictionary: Dictionary | None = None,
        *,
        default_step: int = 1000,
        log_fn: Callable[[str], None] | None = None,
        static_results: str | StaticResultStore | bool | None = None,
        transient: TransientStore | None = None,
        lone_joins: bool = False,
    ) -> None:
        self.dictionary = dictionary if dictionary is not None else MemoryDictionary()
        self.terms = TermInfo(self.dictionary)
        self.evaluator = Evaluator(self.terms)
        self.default_step = default_step
        self.statics: dict[str | None, list[np.ndarray]] = {}
        self._static_cache: dict[tuple, np.ndarray] = {}
        #: stream elements live in ``transient``'s rings when given (e.g. a HybridStore's)
        self.transient = transient
        self.buffers: dict[str, WindowBuffer] = {}
        self.queries: dict[str, RegisteredQuery] = {}
        self.log = log_fn or log.warning
        #: operator signature -> the one running instance (shared by every query using it)
        self.operators: dict[object, Operator] = {}
        self._refs: dict[int, int] = {}
        self._shared_ops = 0  # operators used by 2+ queries (none: tick turns the apply memo off)
        self._views: dict[tuple, ResultView] = {}  # queries equal but for their names share one
        self._sharing = Sharing(self)
        self._sharing.lone_direct = lone_joins  # (see the class docstring)
        #: id of a lone query's switch -> the query (see :mod:`linkstream.operators.switch`)
        self._lone_owner: dict[int, list[str]] = {}
        self.epoch, self.share = 0, True
        #: also share C-SPARQL joins across window ranges (a default graph merging static
        #: triples and windows read through a router); off by default, since queries on a
        #: router are rebuilt, not migrated, when a cluster moves them
        self.share_merged = False
        self._static_version = 0
        #: the static version the last tick saw (a change makes every query dirty once)
        self._static_ticked: int | None = None
        #: bumped whenever operators are added or freed (caches of the running set)
        self._operators_version = 0
        #: sources of every registered query: which queries an epoch has to touch
        self._deps = Dependencies()
        #: queries that write lines at a report even when nothing under them moved (ASK,
        #: a non-empty RStream / CONSTRUCT result) or that were never evaluated
        self._loud: set[str] = set()
        #: name -> (output, result view, stats) of every registered query: what a report
        #: of a quiet query touches, in one lookup
        self._reports: dict[str, tuple[QueryOutput, ResultView, QueryStats]] = {}
        #: name -> (view, bodies, block, lines, stats) of a quiet repeating query's last
        #: block (:meth:`QueryOutput.block`): valid while the view repeats those bodies
        self._quiet_blocks: dict[str, tuple[ResultView, list[str], str, int, QueryStats]] = {}
        #: RStream pattern queries that differ in one constant, served together per shape
        #: (:mod:`linkstream.engine.keyed`); off: every query on its own operators
        self.group_keyed = True
        self._groups: dict[tuple, KeyedGroup] = {}
        #: the registered queries by report steps (replay's units, :mod:`.units`)
        self.steps_index = StepsIndex()
        self._grouped: dict[str, KeyedGroup] = {}
        #: the result views of queries on a router's groups, kept per chain shape in one
        #: pass (:mod:`linkstream.engine.routed`); off: every view through its own operators
        self.routed_blocks = True
        self._blocks: RoutedBlocks | None = None
        #: the queries of routed blocks report through their block's members
        #: (:mod:`linkstream.engine.routed_members`); off: one by one
        self.group_routed = True
        #: filtered views on a shared operator that is not a route share blocks too, from
        #: the second of a chain (:mod:`linkstream.engine.routed_plain`); needs group_routed
        self.plain_blocks = True
        self._rgrouped: dict[str, RoutedMembers] = {}
        #: static sub-join results: None = default store next to the dictionary, False = off
        self._static_results_spec = static_results
        self._static_results: StaticResults | None = None
        #: the time of the last :meth:`tick` (every live window is at its content then)
        self.last_tick: int | None = None
        #: static graphs read on demand (:meth:`use_static_source`), ``None``: held arrays
        self.static_source: Any = None

    # ------------------------------------------------------------ data

    def add_static(self, iri: str | None, triples: np.ndarray) -> None:
        """Add triples to the static default graph (``iri=None``) or the named graph ``iri``."""
        self.statics.setdefault(iri, []).append(np.asarray(triples, dtype=np.int64).reshape(-1, 3))
        self._static_cache.clear()
        self._static_version += 1

    def use_static_source(self, source: Any) -> None:
        """Read static graphs on demand from ``source`` for the queries it ``covers(cq)``.

        ``source`` answers :class:`~linkstream.operators.static_probe.StaticSource`
        lookups.  Those queries' graphs hold no static triples: their joins probe the
        source with the keys of each delta (:mod:`linkstream.operators.static_probe`);
        other queries read the arrays of :meth:`add_static`.  Shared joins with routers
        are turned off (they hold static predicates whole).
        """
        self.static_source = source
        self._sharing.routing = False

    @property
    def static_results(self) -> StaticResults | None:
        """The static sub-join results of this engine (``None`` when turned off)."""
        spec = self._static_results_spec
        if self._static_results is None and spec is not False:
            store = engine_static_results(spec, self.dictionary)
            self._static_results = StaticResults(
                store, self._static_triples, lambda: self._static_version, self.evaluator
            )
        return self._static_results

    def buffer(self, stream: str) -> WindowBuffer:
        b = self.buffers.get(stream)
        if b is None:
            t = self.transient
            b = self.buffers[stream] = StreamBuffer(stream) if t is None else RingBuffer(stream, t)
        return b

    def ingest(self, stream: str, t: int, triples: np.ndarray) -> None:
        """Append one stream element (already encoded, (n, 3) int64)."""
        self.buffer(stream).append(t, triples)

    def ingest_many(self, stream: str, ts: np.ndarray, triples: np.ndarray, counts: np.ndarray) -> None:
        """:meth:`ingest` of the elements ``i`` of one stream at ``ts[i]`` with ``counts[i]``
        triples, one after the other in ``triples``, in their order."""
        self.buffer(stream).append_arrays(ts, triples, counts)

    def _static_triples(self, graphs: tuple[str | None, ...]) -> np.ndarray:
        arr = self._static_cache.get(graphs)
        if arr is None:
            parts = [a for g in graphs for a in self.statics.get(g, [])]
            arr = dedup_triples(np.concatenate(parts)) if parts else np.empty((0, 3), dtype=np.int64)
            self._static_cache[graphs] = arr
        return arr

    # ------------------------------------------------------------ queries

    def register(self, cq: ContinuousQuery) -> RegisteredQuery:
        """Plan ``cq`` and make it report from its first close time on."""
        if cq.name in self.queries:
            raise QueryError(f"a query named {cq.name!r} is already registered")
        if not cq.windows:
            raise QueryError("not a continuous query: it reads no stream window")
        if cq.form == "DESCRIBE":
            raise QueryError("DESCRIBE is not supported for continuous queries")
        for w in cq.windows:  # event-time arithmetic stays far inside int64
            for what, ms in (("RANGE", w.spec.range_ms), ("STEP", w.spec.step_or(self.default_step))):
                if ms is not None and not 0 < ms <= DURATION_MAX:
                    raise QueryError(f"window {what} of <{w.stream}> must be 1 ms to 2^53 ms, got {ms} ms")
        for g in cq.static_from + cq.static_named:
            if g not in self.statics:
                self.log(f"warning: {cq.name}: graph <{g}> is not loaded; treated as empty")
        windows = [WindowOperator(self.buffer(w.stream), w.spec, self.default_step) for w in cq.windows]
        for w in cq.windows:
            known = self._known_streams()
            if known is not None and not self.buffers[w.stream].n and w.stream not in known:
                self.log(
                    f"warning: {cq.name}: stream <{w.stream}> is not replayed; its window is always empty"
                )
        src = self.static_source if self.static_source is not None and self.static_source.covers(cq) else None
        default_static = None if src is not None else self._static_triples((None, *cq.static_from))
        named_iris = list(cq.static_named)
        if not named_iris:
            named_iris = sorted(g for g in self.statics if g is not None and g not in cq.static_from)
        named: dict[str, Operator] = {}
        sv = self._static_version
        if cq.dialect == "csparql":
            default = GraphOperator("default", default_static, windows, deduplicated=True)
        else:
            default = GraphOperator("default", default_static, deduplicated=True)
            for w, wop in zip(cq.windows, windows):
                wg = named[w.graph] = GraphOperator(w.graph, None, [wop])
                wg.static_key = ("window",)
        default.static_key = ("static", (None, *cq.static_from), sv)
        if src is not None:
            default.static_key = ("remote", (None, *cq.static_from))
            default.static_source = (src, (None, *cq.static_from))
        for g in named_iris:
            if g not in named:
                sg = named[g] = GraphOperator(
                    g, None if src is not None else self._static_triples((g,)), deduplicated=True
                )
                sg.static_key = ("static", (g,), sv) if src is None else ("remote", (g,))
                if src is not None:
                    sg.static_source = (src, (g,))
        empty = GraphOperator("empty", None)
        empty.static_key = ("empty",)
        ds = Dataset(default=default, named=named, empty=empty, static=self.static_results)
        planner = Planner(ds, self.evaluator)
        try:
            root, shape = planner.plan_query(cq.algebra.algebra)
        except QueryError:
            raise
        except (ValueError, NotImplementedError, KeyError, TypeError, AttributeError) as e:
            for wop in windows:
                wop.close()
            raise QueryError(f"cannot plan query {cq.name!r}: {e}") from None
        if shape.form == "SELECT" and shape.limit is None and not shape.offset:
            vars_ = shape.project if shape.project is not None else root.vars
            root = ProjectOperator(root, vars_)
            if shape.distinct:
                root = DistinctOperator(root)
                shape.distinct = False
        root = self._share(root)
        self._operators_version += 1
        ops = [op for op in root.walk() if not isinstance(op, AttachOperator)]
        for op in ops:
            n = self._refs[id(op)] = self._refs.get(id(op), 0) + 1
            self._shared_ops += n == 2
            if type(op) is SwitchOperator and not op.switched:
                self._lone_owner.setdefault(id(op), []).append(cq.name)
        for sw in self._sharing.take_switched():
            switched(self, sw)
        output = QueryOutput(
            cq.name, cq.mode, root, shape, self.evaluator, view=self._view(cq.mode, root, shape)
        )
        steps = tuple(sorted({w.spec.step_or(self.default_step) for w in cq.windows}))
        used_windows = [op for op in ops if isinstance(op, WindowOperator)]
        rq = RegisteredQuery(cq, used_windows, root, output, steps, ops=ops)
        self.queries[cq.name] = rq
        if not (self.group_keyed and self._group(rq)):
            if self.routed_blocks:
                if self._blocks is None:
                    self._blocks = RoutedBlocks(self.dictionary)
                join_block(self, rq, self.group_routed and self.plain_blocks)
            member = cq.name in self._rgrouped
            self._deps.add(rq, routed_member=member)  # (a member's block says when it changed)
            if not member:
                self._loud.add(cq.name)
        self._reports[cq.name] = (output, output.view, rq.stats)
        self.steps_index.add(rq, type(rq).next_report is ReportSchedule.next_report)
        return rq

    def _group(self, rq: RegisteredQuery) -> bool:
        """Puts ``rq`` in the keyed group of its shape, if it has one (see :mod:`.keyed`)."""
        found = keyed_shape(rq)
        if found is None:
            return False
        key, graph, const = found
        g = self._groups.get(key)
        if g is None:
            g = self._groups[key] = KeyedGroup(graph, key[1], key[2], key[3], self.dictionary)
        g.add(rq, const)
        self._grouped[rq.name] = g
        return True

    def _ungroup(self, name: str) -> None:
        g = self._grouped.pop(name, None)
        if g is None:
            return
        rq = g.remove(name)
        self._reports[name] = (rq.output, rq.output.view, rq.stats)
        if not len(g):
            for k, v in list(self._groups.items()):
                if v is g:
                    del self._groups[k]

    def _view(self, mode: str, root: Operator, shape: QueryShape) -> ResultView:
        """The result view of a new query: shared with the queries that have the same root,
        mode and shape as long as none of them has been evaluated yet (a view that has run
        holds a result the new query must build from :class:`AttachOperator` instead)."""
        key = ResultView.share_key(mode, root, shape)
        view = self._views.get(key) if key is not None else None
        if view is None or view._started or view.users <= 0:
            view = ResultView(mode, root, shape, self.evaluator)
            if key is not None:
                self._views[key] = view
        return view

    def _share(self, root: Operator) -> Operator:
        """Replace every subplan that is already running by the running instance (hash-consing
        on signatures, alpha-renaming, shared joins with routers across ranges: :mod:`.sharing`)."""
        return self._sharing.share(root)

    def _known_streams(self) -> set[str] | None:
        return getattr(self, "_streams_declared", None)

    def declare_streams(self, iris: set[str]) -> None:
        """Tell the engine which streams will be fed (to warn about unknown stream IRIs)."""
        self._streams_declared = set(iris)

    def unregister(self, name: str) -> None:
        """Remove a query; operators no other query uses are freed."""
        rq = self.queries.pop(name)
        self.steps_index.remove(rq, type(rq).next_report is ReportSchedule.next_report)
        self._ungroup(name)
        unroute(self, name)
        self._reports.pop(name, None)
        self._quiet_blocks.pop(name, None)
        self._deps.remove(name)
        self._loud.discard(name)
        view = rq.output.view
        view.users -= 1
        if view.users <= 0:
            leave_block(self, view)
            key = ResultView.share_key(view.mode, view.root, view.shape)
            if key is not None and self._views.get(key) is view:
                del self._views[key]
        for op in rq.ops:
            if type(op) is SwitchOperator and name in self._lone_owner.get(id(op), ()):
                self._lone_owner[id(op)].remove(name)
        self.release(rq.ops)

    def release(self, ops: Collection[Operator]) -> None:
        """Drops one reference to each of ``ops``; operators no query uses any more are freed."""
        dead = []
        for op in ops:
            if isinstance(op, GraphOperator):
                op.forget_current()
            n = self._refs.get(id(op), 0) - 1
            self._shared_ops -= n == 1
            if n <= 0:
                self._refs.pop(id(op), None)
                dead.append(op)
            else:
                self._refs[id(op)] = n
        for op in dead:
            sig = getattr(op, "sig", None)
            if sig is not None and self.operators.get(sig) is op:
                del self.operators[sig]
        self._operators_version += 1
        for op in dead:
            op.discard()
        self._sharing.forget(dead)
        forget_applied()  # (its last epoch's entries keep the parts of freed relations alive)

    def operator_count(self) -> int:
        return len(self.operators)

    def live_windows(self) -> list[WindowOperator]:
        """The running window operators (cached while the set of operators is unchanged)."""
        ops = self.operators
        key = (len(ops), self._sharing_version())
        cached = self.__dict__.get("_windows_cache")
        if cached is None or cached[0] != key:
            cached = self._windows_cache = (
                key,
                [op for op in ops.values() if isinstance(op, WindowOperator)],
            )
        return cached[1]

    def _sharing_version(self) -> int:
        return self._operators_version

    def tick(
        self, c: int, reporting: Collection[str], *, count_reports: bool = True, blocks: bool = False
    ) -> ReportLines:
        """One evaluation epoch at time ``c``: advance every window, update the queries under
        which something moved, and return the result lines of the queries in ``reporting``.

        Only two kinds of queries are touched (see :mod:`linkstream.engine.dirty`): the
        *dirty* ones, whose sources produced rows this epoch (found from the windows that
        moved and the constants of keyed scans, without a loop over the registered
        queries), and the *loud* reporting ones, whose report writes lines although nothing
        under them moved (ASK, a non-empty RStream result, which repeats).  Every other
        reporting query would write nothing and is not looked at: it is absent from the
        :class:`ReportLines` answers ``[]`` for it without having stored it.  So an epoch
        costs work in the queries that have something new or something to say, not in
        every registered one.  RStream pattern queries that differ in one constant are
        served by their :class:`~linkstream.engine.keyed.KeyedGroup` in one pass: a
        report of every member of a group is its blocks joined (:attr:`ReportLines.groups`).

        Args:
            c: The report time.
            reporting: Names of the queries that report at ``c`` (a set is not copied).
            count_reports: Count the report in each reporting query's ``stats.reports`` and
                set its ``last_report`` (a loop over ``reporting``); a caller that schedules
                whole groups of queries counts them itself.
            blocks: Store each quiet repeating query as one text block
                (:attr:`ReportLines.blocks`, read all at once with :meth:`ReportLines.text`)
                instead of a list of lines.
        """
        perf = time.perf_counter
        t0 = perf()
        self.epoch += 1
        epoch = self.epoch
        self.last_tick = c
        forget_applied(self._shared_ops > 0)  # (no operator read by two queries: no memo)
        moved: set[int] = set()
        for w in self.live_windows():
            w.advance(c)
            if getattr(w, "_pending", True):
                moved.add(id(w))
        static_v = self._static_version
        if self._static_ticked != static_v:
            dirty = set(self.queries).difference(self._grouped)  # the static graphs changed
            self._static_ticked = static_v
        else:
            dirty = self._deps.dirty(epoch, moved)
        rgroups = self._blocks.member_groups() if self._rgrouped and self._blocks is not None else []
        if rgroups and dirty:  # (routed members report below)
            rgd = self._rgrouped
            dirty = {n for n in dirty if n not in rgd} if len(dirty) < len(rgd) else dirty.difference(rgd)
        shared_dt = perf() - t0
        groups = list(self._groups.values()) if self._groups else ()
        for g in groups:
            g.advance(epoch)
        group_dt = perf() - t0 - shared_dt
        t1 = perf()
        for rg in rgroups:
            rg.refresh(epoch)
        rgroup_dt = perf() - t1 + shared_dt
        if isinstance(reporting, dict):
            reporting = reporting.keys()
        elif not isinstance(reporting, (set, frozenset)):
            reporting = set(reporting)
        loud = self._loud
        out: dict[str, list[str]] = {}
        queries = self.queries
        # loud reporting queries under which nothing moved: their view repeats its rendered
        # rows (memoised per view and epoch); only the head of each line is new
        t_text = str(c)
        repeated: dict[int, list[str] | None] = {}  # per view: the rows it repeats
        reports = self._reports
        block_out: dict[str, str] | None = {} if blocks else None
        block_rows = 0
        quiet_blocks = self._quiet_blocks
        for name in (loud & reporting) - dirty:
            if block_out is not None:
                ent = quiet_blocks.get(name)
                if ent is not None:  # the block of the view's rows built at an earlier report
                    view = ent[0]
                    vid = id(view)
                    if vid in repeated:
                        bodies = repeated[vid]
                    else:
                        bodies = repeated[vid] = view.repeat_bodies(epoch)
                    if bodies is ent[1]:
                        block_out[name] = ent[2]
                        block_rows += ent[3]
                        ent[4].rows += ent[3]
                        continue
            rec = reports.get(name)
            if rec is None:
                continue
            output, view, stats = rec
            vid = id(view)
            if vid in repeated:
                bodies = repeated[vid]
            else:
                bodies = repeated[vid] = view.repeat_bodies(epoch)
            if bodies is None:
                fresh = not view._started  # evaluated for the first time now
                lines = output.lines(epoch, c, changed=False)
                if fresh and not view.loud():
                    loud.discard(name)
            elif not bodies:
                lines = []
            elif block_out is not None:  # the whole block of the query, its time left open
                blk = output.block(bodies)
                quiet_blocks[name] = (view, bodies, blk[1], blk[2], stats)
                block_out[name] = blk[1]
                block_rows += blk[2]
                stats.rows += blk[2]
                continue
            else:  # the common case: the view's rows repeated under this query's head
                head = output.head + t_text + ", "
                lines = [head + bodies[0]] if len(bodies) == 1 else [head + b for b in bodies]
            out[name] = lines
            stats.rows += len(lines)
        for name in dirty:
            rec = reports.get(name)  # (output, view, stats): as queries[name] gives them
            if rec is None:
                continue
            output, view, st = rec
            if output._keyed is not None:
                view = output.view  # (brought up to date by its keyed group)
            is_loud = None
            if name in reporting:
                t1 = perf()
                if block_out is not None and view.repeats:
                    # the query's rows as one block, its time left open (kept for the
                    # quiet reports that repeat them); a routed block rendered them this
                    # epoch already (what ``bodies`` would return, without the calls;
                    # its RStream SELECT view is loud exactly when it has rows)
                    r = view.rendered
                    if view.block is not None and r is not None and r[0] == epoch:
                        bodies = r[1]
                        is_loud = len(bodies) > 0
                    else:
                        bodies = view.bodies(epoch, True)
                    n = len(bodies)
                    if n:
                        blk = output.block(bodies)
                        block_out[name] = blk[1]
                        block_rows += n
                        quiet_blocks[name] = (view, bodies, blk[1], n, st)
                    else:
                        out[name] = []
                else:
                    lines = output.lines(epoch, c, changed=True)
                    out[name] = lines
                    n = len(lines)
                dt = perf() - t1 + shared_dt
                st.rows += n
                st.eval_seconds += dt
                st.latencies.append(dt)
            else:
                output.update(epoch)
            if is_loud if is_loud is not None else view.loud():
                loud.add(name)
            else:
                loud.discard(name)
        full: list[MemberReports] = []
        every: list[tuple[MemberReports, float]] = [(g, group_dt) for g in groups]
        every += [(g, rgroup_dt) for g in rgroups]
        for mg, g_dt in every:
            if block_out is not None and mg.covered(reporting):
                mg.report(g_dt)
                full.append(mg)
                continue
            for name in mg.loud if len(mg.loud) < len(reporting) else reporting:
                if name in mg.by_name and name in reporting:
                    lines = mg.lines_of(name, t_text)
                    mg.count(name)
                    if lines:
                        out[name] = lines
            mg.timed(g_dt)
        if count_reports:
            for name in reporting:
                rq = queries.get(name)
                if rq is not None:
                    rq.last_report = c
                    rq.stats.reports += 1
        return ReportLines(out, reporting, block_out, t_text, block_rows, full)

    # ------------------------------------------------------------ quiet gaps

    def quiet_until(self, limit: int) -> int | None:
        """The first time ``h`` in ``(last_tick, limit]`` at which the content of some live
        window may differ from its content at :attr:`last_tick`, ``limit + 1`` if none can
        (``None`` before the first tick).

        Only the elements already in the stream buffers are looked at: a caller that
        ingests an element at ``t`` must ask with ``limit <= t`` (see
        :func:`~linkstream.engine.dirty.first_window_change`).
        """
        c = self.last_tick
        return None if c is None else first_window_change(self.live_windows(), c, limit)

    def skips_quietly(self, rq: RegisteredQuery) -> bool:
        """``True`` when every report of ``rq`` after :attr:`last_tick`, for as long as no
        window moves, writes nothing: its plan is event-driven (:func:`~linkstream.engine.dirty.quiet_windows`), it
        has been evaluated since the static graphs last changed, and its output is then
        empty (IStream / DStream: no delta; RStream, CONSTRUCT: an empty current result).
        ASK and a result that is not empty (``COUNT`` = 0 over empty windows) report a line
        at every report time: such a query never skips."""
        if rq.name in self._deps.never_quiet or self._static_ticked != self._static_version:
            return False
        return not rq.output.view.loud()

    def replanned(self, rq: RegisteredQuery) -> None:
        """Tells the engine that ``rq``'s operators changed after registration (a cluster
        replaced some by remote inputs): its sources are indexed anew and it is evaluated
        at its next report."""
        self._ungroup(rq.name)
        leave_block(self, rq.output.view)
        for op in rq.root.walk():
            if isinstance(op, AggregateOperator):
                op.reroute()
        self._deps.add(rq)
        self._loud.add(rq.name)
        self._operators_version += 1

    def all_skip_quietly(self, names: frozenset[str] | set[str]) -> bool:
        """:meth:`skips_quietly` for every query in ``names``, without a loop over them (the
        set of queries that may not skip is kept up to date by :meth:`tick`)."""
        if self._static_ticked != self._static_version:
            return False
        if not (self._deps.never_quiet.isdisjoint(names) and self._loud.isdisjoint(names)):
            return False
        if not all(g.loud.isdisjoint(names) for g in self._groups.values()):
            return False
        return self._blocks is None or all(g.loud.isdisjoint(names) for g in self._blocks.member_groups())

    def report(self, rq: RegisteredQuery, c: int) -> list[str]:
        """Evaluate at time ``c`` and return ``rq``'s lines (other queries are updated too)."""
        return self.tick(c, (rq.name,))[rq.name]

    def gc(self) -> None:
        for b in self.buffers.values():
            b.gc()
