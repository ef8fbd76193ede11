"""Property tests: every incremental operator's accumulated output equals recomputing from
the current contents of its inputs, after any sequence of inserts and expiries."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators.aggregate import AggregateOperator, AggSpec
from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch, consolidate
from linkstream.operators.distinct import DistinctOperator
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.negation import KeyedNegationOperator
from linkstream.operators.relation import Relation
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.terminfo import TermInfo
from linkstream.rdf.terms import XSD_INTEGER, Literal


class Feed(Operator):
    """A test source: the delta of each epoch is pushed by the test."""

    def __init__(self, vars, certain=None):
        super().__init__()
        self.vars = tuple(vars)
        self.certain = frozenset(self.vars if certain is None else certain)
        self.pending = Batch.empty(self.vars)
        self.content: Counter = Counter()

    def push(self, rows, sign):
        if not rows:
            self.pending = Batch.empty(self.vars)
            return
        cols = np.array(rows, dtype=np.int64).T.reshape(len(self.vars), -1)
        self.pending = Batch(self.vars, cols, np.full(len(rows), sign, dtype=np.int64))
        for r in rows:
            self.content[tuple(r)] += sign
            if self.content[tuple(r)] == 0:
                del self.content[tuple(r)]

    def compute(self, epoch):
        out, self.pending = self.pending, Batch.empty(self.vars)
        return out


def as_counter(b: Batch, vars) -> Counter:
    b = consolidate(b.project(vars))
    c: Counter = Counter()
    for row, n in zip(b.cols.T.tolist(), b.counts.tolist()):
        c[tuple(row)] += n
    return +c


def step_ops(feeds, ops):
    """Apply one random op to a feed: insert new rows or delete existing ones."""
    k, insert, rows = ops
    f = feeds[k % len(feeds)]
    if insert or not f.content:
        f.push([tuple(r[: len(f.vars)]) for r in rows], +1)
    else:
        existing = list(f.content.elements())
        take = existing[: max(1, len(existing) // 2)]
        f.push(take, -1)
    for other in feeds:
        if other is not f:
            other.push([], +1)


small = st.integers(min_value=1, max_value=4)
rows_st = st.lists(st.tuples(small, small, small), min_size=1, max_size=5)
ops_st = st.lists(st.tuples(st.integers(0, 2), st.booleans(), rows_st), min_size=1, max_size=12)


def naive_join(contents, varlists):
    out: Counter = Counter({(): 1})
    outvars: list[str] = []
    for content, vs in zip(contents, varlists):
        nxt: Counter = Counter()
        for row, n in out.items():
            m = dict(zip(outvars, row))
            for r2, n2 in content.items():
                m2 = dict(zip(vs, r2))
                if all(m[v] == m2[v] for v in vs if v in m):
                    merged = {**m, **m2}
                    newvars = outvars + [v for v in vs if v not in outvars]
                    nxt[tuple(merged[v] for v in newvars)] += n * n2
        outvars = outvars + [v for v in vs if v not in outvars]
        out = nxt
    return out, outvars


@settings(max_examples=60, deadline=None)
@given(ops_st)
def test_mjoin_equals_recompute(ops):
    feeds = [Feed(("a", "b")), Feed(("b", "c")), Feed(("c", "a"))]
    j = MJoinOperator(feeds)
    acc = Batch.empty(j.vars)
    acc_rel = Relation(j.vars)
    for epoch, op in enumerate(ops, 1):
        step_ops(feeds, op)
        acc_rel.apply(j.delta(epoch))
    expected, vs = naive_join([f.content for f in feeds], [f.vars for f in feeds])
    assert as_counter(acc_rel.rows, vs) == +expected
    del acc


@settings(max_examples=60, deadline=None)
@given(ops_st)
def test_distinct_equals_recompute(ops):
    f = Feed(("a", "b"))
    d = DistinctOperator(f)
    rel = Relation(d.vars)
    for epoch, op in enumerate(ops, 1):
        step_ops([f], op)
        rel.apply(d.delta(epoch))
        assert as_counter(rel.rows, d.vars) == Counter({r: 1 for r in f.content})


@settings(max_examples=60, deadline=None)
@given(ops_st, st.sampled_from(["anti", "semi"]))
def test_negation_equals_recompute(ops, mode):
    left, right = Feed(("a", "b")), Feed(("b", "c"))
    n = KeyedNegationOperator(left, right, ("b",), mode)
    rel = Relation(n.vars)
    for epoch, op in enumerate(ops, 1):
        step_ops([left, right], op)
        rel.apply(n.delta(epoch))
        keys = {r[0] for r in right.content}
        want = Counter({r: c for r, c in left.content.items() if (r[1] in keys) == (mode == "semi")})
        assert as_counter(rel.rows, n.vars) == want


def _engine_terms():
    d = MemoryDictionary()
    ids = d.encode_many([Literal(str(i), XSD_INTEGER).n3() for i in range(1, 5)])
    return TermInfo(d), ids


@settings(max_examples=40, deadline=None)
@given(ops_st)
def test_count_sum_equals_recompute(ops):
    terms, ids = _engine_terms()
    ev = Evaluator(terms)
    f = Feed(("g", "x"))
    agg = AggregateOperator(
        f, ("g",), [AggSpec("COUNT", None, False, "n"), AggSpec("SUM", "x", False, "s")], ev
    )
    rel = Relation(agg.vars)
    for epoch, op in enumerate(ops, 1):
        k, ins, rows = op
        # values are dictionary ids of the integers 1..4
        rows = [(g, int(ids[x - 1]), z) for g, x, z in rows]
        step_ops([f], (k, ins, rows))
        rel.apply(agg.delta(epoch))
        want: dict[int, list[int]] = {}
        for (g, x), c in f.content.items():
            want.setdefault(g, []).extend([int(terms.term(x).lex)] * c)
        got = {}
        for g, n, s in rel.rows.cols.T.tolist():
            got[g] = (int(terms.term(n).lex), int(float(terms.term(s).lex)))
        assert got == {g: (len(v), sum(v)) for g, v in want.items()}


# ---------------------------------------------------------------- windows and graphs

from linkstream.operators.graph import GraphOperator  # noqa: E402
from linkstream.operators.recompute import left_join_batch  # noqa: E402
from linkstream.operators.window import StreamBuffer, WindowOperator  # noqa: E402
from linkstream.query.windows import WindowSpec  # noqa: E402

elements_st = st.lists(
    st.tuples(st.integers(0, 700), st.lists(st.tuples(small, small, small), max_size=3)),
    min_size=1,
    max_size=25,
)
spec_st = st.one_of(
    st.builds(
        lambda r, s: WindowSpec("time", r, s),
        st.sampled_from([300, 500, 1000, 1500]),
        st.sampled_from([100, 250, 500]),
    ),
    st.builds(lambda n: WindowSpec("count", count=n), st.integers(1, 6)),
    st.just(WindowSpec("now")),
)


def window_content(elements, spec, step, c):
    """The window's triples at report time c, recomputed from scratch (SEMANTICS.md §3)."""
    if spec.kind == "time":
        close = (c // step) * step
        return [tr for t, trs in elements for tr in trs if close - spec.range_ms <= t < close]
    before = [(t, tr) for t, trs in elements for tr in trs if t < c]
    if spec.kind == "count":
        return [tr for _, tr in before[max(0, len(before) - spec.count) :]]
    times = [t for t, _ in elements if t < c]
    if not times:
        return []
    return [tr for t, trs in elements for tr in trs if t == max(times)]


@settings(max_examples=80, deadline=None)
@given(elements_st, spec_st, st.lists(st.tuples(small, small, small), max_size=4))
def test_window_graph_equals_recompute(raw, spec, static):
    """Window + reference-counted graph: the accumulated set equals the window content
    (as a set, merged with a static part) at every report time."""
    elements, t = [], 0
    for dt, trs in raw:
        t += dt
        elements.append((t, list(dict.fromkeys(trs))))
    buf = StreamBuffer("urn:s")
    w = WindowOperator(buf, spec, 250)
    g = GraphOperator("g", np.array(static, dtype=np.int64).reshape(-1, 3), [w])
    acc = Relation(g.vars)
    k = 0
    for epoch, c in enumerate(range(w.step, t + 2 * w.step, w.step), 1):
        while k < len(elements) and elements[k][0] < c:
            et, trs = elements[k]
            buf.append(et, np.array(trs, dtype=np.int64).reshape(-1, 3))
            k += 1
        w.advance(c)
        acc.apply(g.delta(epoch))
        want = set(map(tuple, window_content(elements, spec, w.step, c))) | set(static)
        assert as_counter(acc.rows, g.vars) == Counter({r: 1 for r in want})
        buf.gc()


@settings(max_examples=60, deadline=None)
@given(ops_st)
def test_optional_composite_equals_recompute(ops):
    """OPTIONAL as join + anti-join on the left row (what the planner builds when the left
    side binds all its variables) equals left_join_batch over the full inputs."""
    from linkstream.operators.project import ProjectOperator, UnionOperator

    left, right = Feed(("a", "b")), Feed(("b", "c"))
    joined = MJoinOperator([left, right])
    matched = ProjectOperator(joined, left.vars)
    unmatched = KeyedNegationOperator(left, matched, left.vars, "anti")
    opt = UnionOperator([joined, unmatched])
    rel = Relation(opt.vars)
    terms, _ = _engine_terms()
    fn = left_join_batch(Evaluator(terms), None)
    for epoch, op in enumerate(ops, 1):
        step_ops([left, right], op)
        rel.apply(opt.delta(epoch))
        lb = Batch(
            left.vars,
            np.array(list(left.content.elements()), dtype=np.int64).reshape(-1, 2).T.copy(),
            np.ones(sum(left.content.values()), dtype=np.int64),
        )
        rb = Batch(
            right.vars,
            np.array(list(right.content.elements()), dtype=np.int64).reshape(-1, 2).T.copy(),
            np.ones(sum(right.content.values()), dtype=np.int64),
        )
        want = fn([lb, rb])
        assert as_counter(rel.rows, opt.vars) == as_counter(want, opt.vars)
