"""Multiway join (MJoin) with an adaptive probing order.

The join keeps one :class:`~.relation.Relation` per input.  A delta of input *i* is joined
with the current state of every other input, one input at a time, in an order chosen at
that moment from live cardinalities: next is always the smallest input that shares a
variable with what has been joined so far (cross products only when nothing connects),
and the probe stops as soon as the intermediate result is empty.  Deltas of several
inputs in one epoch are applied one after the other, which is the standard incremental
rule  d(R1..Rn) = sum_i R1'..R(i-1)' dRi R(i+1)..Rn  (primed = already updated).

Inputs that share no variable with the rest (e.g. the star patterns of several streams
joined only by a filter or not at all) form independent components.  Their joins are
cached until an input changes, and the partial result is crossed with them rather than
with one input at a time.  When every changed component is small, an epoch recomputes
each changed component's join and applies the same product rule to the components
instead of probing input by input: one small join per component replaces one probe per
changed input.

Filters whose variables are all certainly bound by a set of inputs are evaluated as soon
as the intermediate result binds them (filter push-down into the join).

An input may have a *static part read on demand* (a pattern scan over a graph whose static
triples stay on store nodes, :mod:`.static_probe`): its relation then holds only the
window matches, and joining a partial result with it also probes the static part with
the partial result's keys.  The static part never changes, so it has no delta: the rule
above holds with each such input being (relation + static part); at the first epoch the
join of the inputs' static parts alone (when every input has one) is emitted once.
Components are then not cached (their joins would hold static rows).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from linkstream.operators import chain as _chain
from linkstream.operators.base import AttachOperator, Operator
from linkstream.operators.batch import Batch, concat, consolidate, cross_product
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.relation import Relation, union_vars
from linkstream.operators.router import RenameOperator
from linkstream.operators.static_probe import StaticJoinPart, static_part_of
from linkstream.query.expressions import Expr

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter

#: a join whose inputs form independent components (sharing no variable) recomputes the
#: join of a changed component and diffs it with the previous one when the component's
#: smallest input and its join have at most this many rows; above, it probes input by input
COMPONENT_MAX = 4096

#: a changed component whose join had more than :data:`COMPONENT_MAX` rows is not joined
#: again (only to find it too large) at the next this many epochs that change it: they probe
#: input by input (see :meth:`MJoinOperator._compute_by_components`)
LARGE_RETRY = 8

#: a probe whose next input has more than this many rows per partial-result row joins the
#: rest of the inputs as one component when they form one (see :meth:`MJoinOperator._probe`)
REST_FANOUT = 64

#: an input's fan-out is counted again when its size moved by more than 1 / this from the
#: size it was counted at (see :meth:`MJoinOperator._fanout`; defined with the check that
#: reads it, :func:`.chain.fanout_cached`)
FANOUT_DRIFT = _chain.FANOUT_DRIFT


class MJoinOperator(Operator):
    """n-ary natural join (SPARQL compatibility) of its children."""

    #: per input, its content (one :class:`Relation` per child; set on first use)
    state: list[Relation]

    def __init__(
        self,
        children: Sequence[Operator],
        filters: Sequence[Expr] = (),
        evaluator: Evaluator | None = None,
    ) -> None:
        super().__init__()
        self.children = tuple(children)
        vs: tuple[str, ...] = ()
        cert: set[str] = set()
        for c in self.children:
            vs = union_vars(vs, c.vars)
            cert |= c.certain
        self.vars = vs
        self.certain = frozenset(cert)
        # ``state`` (per input, its content) is built on first use (:meth:`__getattr__`): most
        # joins a planner builds are dropped again when a query shares a running one (issue 15:
        # building them was ~15% of a container's CPU while 10,000 queries were registered)
        self.filters = [(f, f.vars()) for f in filters]
        self.evaluator = evaluator
        self.probes = 0  # number of relation probes done (for stats / tests)
        #: per input, its static part read on demand (``None``: all in its relation)
        self.static_parts = [static_part_of(c) for c in self.children]
        self.has_static = any(p is not None for p in self.static_parts)
        self._static_started = False
        self.pruned = not self.has_static
        self._twin_of = self._twins()
        self._twin_children = self.children

    def _twins(self) -> list[int]:
        """Per input, an earlier input that renames the same operator's output (two uses
        of one pattern, say), or -1.  Their relations receive the same deltas, so one
        can take the other's content instead of consolidating it again (see
        :meth:`_live_twins`)."""

        def source(op: Operator) -> Operator:
            while True:
                if isinstance(op, AttachOperator):
                    op = op.shared
                elif type(op) is RenameOperator:
                    op = op.child
                else:
                    return op

        src = [source(c) for c in self.children]
        ks = [len(c.vars) for c in self.children]
        return [
            next((i for i in range(j) if src[i] is src[j] and ks[i] == ks[j]), -1) for j in range(len(src))
        ]

    def _live_twins(self, deltas: list[Batch]) -> list[int]:
        """:meth:`_twins` that received equal deltas (in their relations' column order)
        at every epoch so far, this one included: their relations hold the same columns
        (-1 for an input that ever differed).  Twins share their deltas' arrays, except
        at a late query's first epoch (each attachment reads the current rows)."""
        tw = self._twin_of
        if self._twin_children is not self.children:  # rebound (attachments put in, say)
            started = any(len(r) or r.version for r in self.state)
            tw = self._twin_of = [-1] * len(self.children) if started else self._twins()
            self._twin_children = self.children
        state = self.state
        for j, i in enumerate(tw):
            if i >= 0:
                a, b = deltas[j], deltas[i]
                if (len(a) or len(b)) and not (
                    a.vars == state[j].vars
                    and b.vars == state[i].vars
                    and (a.cols is b.cols or np.array_equal(a.cols, b.cols))
                    and (a.counts is b.counts or np.array_equal(a.counts, b.counts))
                ):
                    tw[j] = -1
        return tw

    def __getattr__(self, name: str) -> list[Relation]:
        # only called for attributes not set yet: ``state`` before its first use
        if name == "state":
            state = self.state = [Relation(c.vars) for c in self.children]
            return state
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """The content of every input, and whether the static parts' own join was emitted."""
        return {"state": w.relations(self.state), "_static_started": self._static_started}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        r.expect(self, entries, ("state", "_static_started"))
        self.state = r.relations(entries["state"], self.state)
        self._twin_of = [-1] * len(self.children)  # (restored relations: not known to be equal)
        #: (whether the static parts' own join was emitted where the state comes from)
        self._static_started = r.value(entries["_static_started"], bool)

    def describe(self) -> str:
        f = f" filters={len(self.filters)}" if self.filters else ""
        return f"MJoin n={len(self.children)}{f}"

    def _apply_filters(self, b: Batch, done: set[int], bound: set[str]) -> Batch:
        for k, (f, fv) in enumerate(self.filters):
            if k in done or not fv <= bound:
                continue
            done.add(k)
            if len(b):
                assert self.evaluator is not None
                b = b.mask(self.evaluator.filter_mask(f, b))
        return b

    def _child_vars(self) -> list[frozenset[str]]:
        cache = self.__dict__.get("_cvars")
        if cache is None or cache[0] is not self.children:
            cache = self._cvars = (self.children, [frozenset(c.vars) for c in self.children])
        return cache[1]

    def _probe(self, i: int, d: Batch, hidden: frozenset[int] = frozenset()) -> Batch:
        """``d`` (a delta of input ``i``) joined with every other input; the relations of
        the inputs in ``hidden`` are left out (their static parts are not)."""
        state = self.state
        parts = self.static_parts
        remaining = [j for j in range(len(self.children)) if j != i]
        for j in remaining:  # (checked first: it makes the whole probe empty)
            if (j in hidden or not len(state[j])) and parts[j] is None:
                return Batch.empty(self.vars)
        cur = d
        bound = set(d.vars) & (self.children[i].certain if i >= 0 else frozenset(d.vars))
        done: set[int] = set()
        filters = bool(self.filters)
        if filters:
            cur = self._apply_filters(cur, done, bound)
        cvars = self._child_vars()
        while remaining and len(cur):
            cv = cur.vars
            connected = [j for j in remaining if not cvars[j].isdisjoint(cv)]
            if not connected and len(remaining) > 1 and not self.has_static:
                # the rest shares no variable with the partial result: join its connected
                # components on their own (cached until their inputs change) and cross
                # the partial result with them, instead of crossing with one input and
                # joining the others against the blown-up product
                for comp in self._components(remaining):
                    if not len(cur):
                        break
                    rows, applied, comp_bound = self._component_join(comp)
                    cur = cross_product(cur, rows)
                    self.probes += 1
                    done |= applied
                    bound |= comp_bound
                    if filters:
                        cur = self._apply_filters(cur, done, bound)
                remaining = []
                break
            pool = connected or remaining
            j = pool[0] if len(pool) == 1 else min(pool, key=lambda k: len(state[k]))
            if (
                len(remaining) > 1
                and not self.has_static
                and len(state[j]) > REST_FANOUT * len(cur)
                and self._fanout(j, cv) > REST_FANOUT
                and len(comps := self._components(remaining)) == 1
            ):
                # the next input is large next to the partial result and the rest is one
                # connected piece (a star pattern reached through a large static relation
                # on a generalised constant, say): join the partial result with the rest's
                # own join (small, cached until its inputs change) instead of blowing it up
                # through the large input first
                rest = self._component_relation(comps[0])
                if rest is not None:
                    rel, applied, comp_bound = rest
                    cur = rel.join(cur)
                    self.probes += 1
                    done |= applied
                    bound |= comp_bound
                    if filters:
                        cur = self._apply_filters(cur, done, bound)
                    remaining = []
                    break
            remaining.remove(j)
            part = parts[j]
            if part is None:
                cur = state[j].join(cur)
            else:
                got = part.probe(cur)
                if j not in hidden and len(state[j]):
                    got = concat([state[j].join(cur), got], got.vars)
                cur = got
            self.probes += 1
            if filters:
                bound |= self.children[j].certain
                cur = self._apply_filters(cur, done, bound)
        if not len(cur):
            return Batch.empty(self.vars)
        return self._apply_filters(cur, done, set(self.vars)).project(self.vars)

    def probe_static(self, seed: Batch) -> Batch:
        """``seed`` (bindings of some of this join's variables) joined with every input's
        static part (:class:`~.static_probe.StaticJoinPart`: a join above probes this one)."""
        return self._probe(-1, seed, hidden=frozenset(range(len(self.children))))

    def _prune_static(self) -> None:
        """Drops the static parts no triple can match (once: static graphs do not change)."""
        self.pruned = True
        self.static_parts = [None if p is not None and p.empty() else p for p in self.static_parts]
        self.has_static = any(p is not None for p in self.static_parts)

    def _all_static(self) -> Batch | None:
        """The join of the inputs' static parts alone (``None`` unless every input has
        one): seeded with the most selective part's matches, probed through the others."""
        parts = self.static_parts
        if not parts or any(p is None for p in parts):
            return None
        k = max(range(len(parts)), key=lambda j: parts[j].constants)  # type: ignore[union-attr]  # none is None
        seed = parts[k].probe(Batch.unit())  # type: ignore[union-attr]  # none is None
        if not len(seed):
            return Batch.empty(self.vars)
        return self._probe(k, seed, hidden=frozenset(range(len(parts))))

    def _materialised(self, rows: Batch) -> None:
        part = next(p for p in self.static_parts if p is not None)
        part.source.materialised(int(rows.cols.nbytes + rows.counts.nbytes))

    def _current_static(self) -> Batch:
        """:meth:`current` with static parts:  S1..Sn + sum_i R1..R(i-1) Di S(i+1)..Sn,
        where Rj = Dj + Sj (relation plus static part)."""
        n = len(self.children)
        out = []
        base = self._all_static()
        if base is not None and len(base):
            out.append(base)
            self._materialised(base)
        for i in range(n):
            if len(self.state[i]):
                r = self._probe(i, self.state[i].rows, hidden=frozenset(range(i + 1, n)))
                if len(r):
                    out.append(r)
        return consolidate(concat(out, self.vars)) if out else Batch.empty(self.vars)

    def _components(self, idx: list[int]) -> list[tuple[int, ...]]:
        """Inputs ``idx`` grouped into connected components (shared variables), smallest
        current cardinality first."""
        cvars = self._child_vars()
        comps: list[tuple[list[int], set[str]]] = []
        for j in idx:
            hit = [c for c in comps if not cvars[j].isdisjoint(c[1])]
            merged = ([j], set(cvars[j]))
            for c in hit:
                comps.remove(c)
                merged[0].extend(c[0])
                merged[1].update(c[1])
            comps.append(merged)
        state = self.state
        out = [tuple(sorted(c[0])) for c in comps]
        out.sort(key=lambda c: min(len(state[k]) for k in c))
        return out

    def _fanout(self, j: int, cv: Sequence[str]) -> float:
        """Rows of input ``j`` per distinct value of the variables it shares with ``cv``.

        An estimate for the choice of a probing order (any order gives the same rows):
        cached per content version, and kept across versions while the input's size stays
        within :data:`FANOUT_DRIFT` of the size it was counted at -- a sliding window's
        input changes every epoch, and counting its distinct keys (a sort of the whole
        input) was a quarter of some CityBench queries' evaluation.
        """
        rel = self.state[j]
        keyvars = tuple(v for v in rel.vars if v in cv)
        cache = self.__dict__.setdefault("_fanouts", {})
        got = _chain.fanout_cached(cache.get((j, keyvars)), rel)
        if got is not None:
            return got
        rows = rel.contents()  # (not ``rows``: that would merge the relation's parts)
        distinct = len(rows)
        if keyvars and len(rows):
            k = rows.project(keyvars)
            distinct = len(consolidate(k.with_counts(np.ones(len(k), dtype=np.int64))))
        f = len(rows) / max(distinct, 1) if keyvars else float(len(rows))
        cache[(j, keyvars)] = (rel, rel.version, f, len(rel))
        return f

    def fanout_known(self, j: int, keyvars: tuple[str, ...]) -> float | None:
        """:meth:`_fanout` of input ``j`` on ``keyvars`` (its variables, in its order) where
        that would read its cache, else ``None`` (nothing counted, nothing cached)."""
        fanouts = self.__dict__.get("_fanouts")
        return None if fanouts is None else _chain.fanout_cached(fanouts.get((j, keyvars)), self.state[j])

    def _component_relation(self, comp: tuple[int, ...]) -> tuple[Relation, set[int], set[str]] | None:
        """:meth:`_component_join` as a relation to probe (cached with it), or ``None``
        when the join or its smallest input is larger than :data:`COMPONENT_MAX`."""
        state = self.state
        if min(len(state[k]) for k in comp) > COMPONENT_MAX:
            return None
        rows, applied, comp_bound = self._component_join(comp)
        if len(rows) > COMPONENT_MAX:
            return None
        cache = self.__dict__.setdefault("_comp_rel", {})
        hit = cache.get(comp)
        if hit is not None and hit[0] is rows:
            return hit[1]
        rel = Relation(rows.vars)
        rel.replace(rows)
        res = (rel, applied, comp_bound)
        cache[comp] = (rows, res)
        return res

    def _component_join(self, comp: tuple[int, ...]) -> tuple[Batch, set[int], set[str]]:
        """The join of the current states of inputs ``comp`` with the filters that only
        read variables they certainly bind applied, the indexes of those filters and
        those variables.  Cached until one of the inputs' relations changes."""
        state = self.state
        rels = tuple([state[k] for k in comp])
        versions = tuple([r.version for r in rels])
        cache = self.__dict__.setdefault("_comp_cache", {})
        hit = cache.get(comp)
        # (tuples of relations compare by identity: a relation has no ``__eq__``)
        if hit is not None and hit[1] == versions and hit[0] == rels:
            return hit[2]
        res = _chain.component_join(self, comp, REST_FANOUT, rels, COMPONENT_MAX) if _chain.in_use() else None
        if res is None:
            first = min(comp, key=lambda k: len(state[k]))
            # its parts as they are (join is bilinear): reading ``rows`` would merge them
            cur = state[first].contents()
            bound = set(cur.vars) & self.children[first].certain
            done: set[int] = set()
            if self.filters:
                cur = self._apply_filters(cur, done, bound)
            res = self.join_rest(comp, cur, [k for k in comp if k != first], bound, done)
        cache[comp] = (rels, versions, res)
        return res

    def join_rest(
        self, comp: tuple[int, ...], cur: Batch, remaining: list[int], bound: set[str], done: set[int]
    ) -> tuple[Batch, set[int], set[str]]:
        """:meth:`_component_join` from a partial result ``cur`` of inputs ``comp`` (the
        inputs ``remaining`` still to join, the variables ``bound`` and the filters ``done``
        so far; the last three are updated)."""
        while remaining and len(cur):
            j = self.next_input(cur, remaining)
            cur, finished = self.join_step(j, cur, remaining, bound, done)
            if finished:
                break
        return self.component_result(comp, cur, remaining, bound, done)

    def next_input(self, cur: Batch, remaining: list[int]) -> int:
        """The input :meth:`_component_join` joins next with ``cur``: the smallest of
        ``remaining`` sharing a variable with it (else the smallest; the first on ties)."""
        cv, cvars, state = cur.vars, self._child_vars(), self.state
        pool = [j for j in remaining if not cvars[j].isdisjoint(cv)] or remaining
        return pool[0] if len(pool) == 1 else min(pool, key=lambda k: len(state[k]))

    def join_step(
        self, j: int, cur: Batch, remaining: list[int], bound: set[str], done: set[int]
    ) -> tuple[Batch, bool]:
        """One step of :meth:`join_rest`: ``cur`` joined with input ``j`` (``remaining``,
        ``bound`` and ``done`` updated), and whether that joined every remaining input."""
        state = self.state
        if (
            len(remaining) > 1
            and len(state[j]) > REST_FANOUT * len(cur)
            and self._fanout(j, cur.vars) > REST_FANOUT
            and len(rest_comps := self._components(remaining)) == 1
        ):
            # as in :meth:`_probe`: the rest joined on its own, not blown up through j
            rest = self._component_relation(rest_comps[0])
            if rest is not None:
                rel, applied, comp_bound = rest
                cur = rel.join(cur)
                done |= applied
                bound |= comp_bound
                if self.filters:
                    cur = self._apply_filters(cur, done, bound)
                remaining.clear()
                return cur, True
        remaining.remove(j)
        cur = state[j].join(cur)
        bound |= self.children[j].certain
        if self.filters:
            cur = self._apply_filters(cur, done, bound)
        return cur, False

    def component_result(
        self, comp: tuple[int, ...], cur: Batch, remaining: list[int], bound: set[str], done: set[int]
    ) -> tuple[Batch, set[int], set[str]]:
        if remaining or not len(cur):  # the join became empty: keep every variable
            vs: tuple[str, ...] = ()
            for j in comp:
                vs = union_vars(vs, self.children[j].vars)
                bound |= self.children[j].certain
            cur = Batch.empty(vs)
        return cur, done, bound

    def config_key(self) -> object:
        return tuple(f for f, _ in self.filters)

    def current(self) -> Batch:
        if not self.pruned:
            self._prune_static()
        if self.has_static:
            return self._current_static()
        if not self.state or any(len(s) == 0 for s in self.state):
            return Batch.empty(self.vars)
        i = min(range(len(self.state)), key=lambda k: len(self.state[k]))
        return consolidate(self._probe(i, self.state[i].rows))

    def compute(self, epoch: int) -> Batch:
        if not self.pruned:
            self._prune_static()
        # an input that is a join of static parts only is probed, never read
        deltas = [
            Batch.empty(c.vars) if isinstance(p, StaticJoinPart) else c.delta(epoch)
            for c, p in zip(self.children, self.static_parts)
        ]
        parts = []
        if self.has_static and not self._static_started:
            self._static_started = True
            base = self._all_static()
            if base is not None and len(base):
                parts.append(base)
                self._materialised(base)
        sizes = [d.counts.shape[0] for d in deltas]
        if not any(sizes):
            return parts[0] if parts else Batch.empty(self.vars)
        twins = self._live_twins(deltas)
        comps = self._all_components() if not self.has_static else []
        if len(comps) > 1 or (comps and len(sizes) - sizes.count(0) > 1):
            # several components, or one whose inputs changed in several places (a
            # window's churn reaches every pattern of a star): recomputing the small
            # joins and diffing them costs one join per input instead of one probe
            # through all the others per changed input
            out = self._compute_by_components(deltas, comps, twins, sizes)
            if out is not None:
                return out
        for i, d in enumerate(deltas):
            if not len(d):
                continue
            d = consolidate(d)
            if not len(d):
                continue
            r = self._probe(i, d)
            if len(r):
                parts.append(r)
            self.state[i].apply(d)
        if not parts:
            return Batch.empty(self.vars)
        return concat(parts, self.vars)

    def _all_components(self) -> list[tuple[int, ...]]:
        cache = self.__dict__.get("_all_comps")
        if cache is None or cache[0] is not self.children:
            comps = self._components(list(range(len(self.children))))
            cache = self._all_comps = (self.children, sorted(comps))
        return cache[1]

    def _compute_by_components(
        self, deltas: list[Batch], comps: list[tuple[int, ...]], twins: list[int], sizes: list[int]
    ) -> Batch | None:
        """The epoch's output delta when the inputs form several independent components
        (a cross product of star patterns, say) -- or one component in which several
        inputs changed -- whose joins are small, or ``None`` when they are not (the caller
        then probes input by input).

        Each changed component's join is recomputed from its inputs (a few small joins)
        and diffed with the cached previous one; the product rule then gives the output
        delta:  d(A1..An) = sum_k A1'..A(k-1)' dAk A(k+1)..An  (primed = new).  This
        replaces one probe per changed input, each crossing with the other components,
        by one small join per changed component.  An input with a live twin (see
        :meth:`_live_twins`) takes its twin's new content instead of consolidating the
        same delta again.  (``sizes``: the deltas' lengths.)
        """
        state = self.state
        changed = [any([sizes[j] for j in c]) for c in comps]
        for c, ch in zip(comps, changed):
            # the join restarts from the smallest input and indexes the changed parts (a
            # large input's delta goes to its recent part: its base keeps its index): that
            # must stay small next to probing with the deltas
            if ch and (
                min([len(state[j]) for j in c]) > COMPONENT_MAX or max([sizes[j] for j in c]) > COMPONENT_MAX
            ):
                return None
        # (a component whose join was too large lately: not joined again to find that out;
        # its inputs changed since, so the join would be recomputed, not read from the cache)
        large = self.__dict__.setdefault("_large_comps", {})
        for c, ch in zip(comps, changed):
            if ch and large.get(c, 0) > 0:
                large[c] -= 1
                return None
        olds = [self._component_join(c) for c in comps]
        for c, o, ch in zip(comps, olds, changed):
            if ch and len(o[0]) > COMPONENT_MAX:
                large[c] = LARGE_RETRY
                return None
        for i, n in enumerate(sizes):
            if n:
                t = twins[i]
                if t >= 0:
                    state[i].mirror(state[t])
                else:
                    state[i].apply(deltas[i])
        news = [self._component_join(c) if ch else o for c, ch, o in zip(comps, changed, olds)]
        done: set[int] = set()
        for o in olds:
            done |= o[1]
        out = []
        for k in range(len(comps)):
            if not changed[k] or news[k] is olds[k]:
                continue
            cur = consolidate(concat([news[k][0], olds[k][0].negate()]))
            for m in range(len(comps)):
                if not len(cur):
                    break
                if m != k:
                    cur = cross_product(cur, (news[m] if m < k else olds[m])[0])
            if len(cur):
                cur = self._apply_filters(cur, set(done), set(self.vars))
            if len(cur):
                out.append(cur.project(self.vars))
        if not out:
            return Batch.empty(self.vars)
        return out[0] if len(out) == 1 else concat(out, self.vars)
