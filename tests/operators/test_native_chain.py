"""The compiled component join (``_kernels.join_chain``, :mod:`linkstream.operators.chain`)
gives exactly what the Python loop of :meth:`MJoinOperator._component_join` gives: the
same batch (variables, rows, order, counts), the same filters applied and the same
variables bound -- on random inputs (unbound values, filters, inputs with a base and a
recent part, inputs large next to the partial result) and on CityBench replays."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import batch as B
from linkstream.operators import chain as C
from linkstream.operators import mjoin as M
from linkstream.operators.batch import Batch, consolidate
from linkstream.operators.evaluate import Evaluator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.relation import Relation
from linkstream.query.expressions import Cmp, Var
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.terminfo import TermInfo
from linkstream.rdf.terms import XSD_INTEGER, Literal
from tests.operators.test_incremental_properties import Feed
from tests.shared_paths import shared_or_skip

needs_native = pytest.mark.skipif(
    B._kernels is None or not hasattr(B._kernels, "join_chain"), reason="compiled kernels not built"
)

VARS = ("a", "b", "c", "d", "e")


class _Counting:
    """The compiled kernels, counting the calls of ``join_chain``."""

    def __init__(self, kernels) -> None:
        self.kernels = kernels
        self.chain_calls = 0

    def __getattr__(self, name: str):
        return getattr(self.kernels, name)

    def join_chain(self, *args):
        self.chain_calls += 1
        return self.kernels.join_chain(*args)


def _join_both(op: MJoinOperator, comp: tuple[int, ...], again: bool = False):
    """``op``'s component join by the Python loop, then by the kernel (caches cleared);
    ``again``: then by the kernel once more, with the join plan it kept (the keys of the
    steps it handed back, the fan-outs counted) -- large inputs joined through their
    indexes in the kernel."""
    out = []
    for on in (False, True) + ((True,) if again else ()):
        for cache in ("_comp_cache", "_comp_rel") + (("_fanouts",) if len(out) < 2 else ()):
            op.__dict__.pop(cache, None)
        C.ENABLED = on
        try:
            out.append(op._component_join(comp))
        finally:
            C.ENABLED = True
    return out


def _same(x: tuple[Batch, set[int], set[str]], y: tuple[Batch, set[int], set[str]]) -> None:
    assert x[0].vars == y[0].vars
    assert x[0].cols.shape == y[0].cols.shape
    assert np.array_equal(x[0].cols, y[0].cols) and np.array_equal(x[0].counts, y[0].counts)
    assert x[1] == y[1] and x[2] == y[2]


@st.composite
def joins(draw):
    n_in = draw(st.integers(1, 5))
    inputs = [tuple(draw(st.permutations(VARS))[: draw(st.integers(1, 3))]) for _ in range(n_in)]
    unbound = draw(st.booleans())
    filters = draw(
        st.lists(
            st.tuples(st.sampled_from(["!=", "<", "="]), st.sampled_from(VARS), st.sampled_from(VARS)),
            max_size=2,
        )
    )
    return inputs, unbound, filters, draw(st.integers(0, 2**32 - 1))


@needs_native
@settings(max_examples=250, deadline=None)
@given(joins(), st.sampled_from([0, 1, 2, 64]), st.booleans())
def test_chain_equals_the_python_loop(spec, rest_fanout, two_parts):
    inputs, unbound, filters, seed = spec
    rng = np.random.default_rng(seed)
    d = MemoryDictionary()
    ids = np.array(d.encode_many([Literal(str(i), XSD_INTEGER).n3() for i in range(1, 7)]), dtype=np.int64)
    feeds = [Feed(vs, certain=() if unbound and k == 0 else None) for k, vs in enumerate(inputs)]
    exprs = [Cmp(o, Var(x), Var(y)) for o, x, y in filters]
    op = MJoinOperator(feeds, exprs, Evaluator(TermInfo(d)))
    old = M.REST_FANOUT, Relation.SMALL, Relation.FLOOR
    M.REST_FANOUT = rest_fanout
    if two_parts:  # small relations keep a recent part next to their base
        Relation.SMALL, Relation.FLOOR = 2, 1
    checked = 0
    try:
        for _ in range(int(rng.integers(1, 4))):
            for k, vs in enumerate(inputs):
                n = int(rng.integers(0, 8 if rng.random() < 0.8 else 160))
                values = rng.integers(0, rng.integers(1, 4) if n > 20 else len(ids), size=(len(vs), n))
                cols = ids[values]
                if unbound and k == 0 and n:
                    cols[0, rng.random(n) < 0.3] = 0
                op.state[k].apply(consolidate(Batch(vs, cols, rng.integers(-1, 3, size=n).astype(np.int64))))
            for comp in op._all_components():
                counting = _Counting(B._kernels)
                B._native = counting
                try:
                    python, native, kept = _join_both(op, comp, again=True)
                finally:
                    B.use_native(True)
                _same(python, native)
                _same(python, kept)
                assert counting.chain_calls, "the compiled chain did not run"
                checked += 1
    finally:
        M.REST_FANOUT, Relation.SMALL, Relation.FLOOR = old
    assert checked


@needs_native
def test_chain_steps_through_python_where_the_loop_does_something_else():
    """A large input next to a one-row partial result goes back to Python (which may join
    the rest of the inputs as one relation); an unbound shared value too."""
    big = Batch(("b", "c"), np.array([np.arange(1, 201), np.full(200, 7)]), np.ones(200, dtype=np.int64))
    feeds = [Feed(("a", "b")), Feed(("b", "c")), Feed(("c", "d"))]
    op = MJoinOperator(feeds)
    op.state[0].apply(Batch(("a", "b"), np.array([[1], [5]]), np.ones(1, dtype=np.int64)))
    op.state[1].apply(big)
    op.state[2].apply(Batch(("c", "d"), np.array([[7, 7, 8], [1, 2, 3]]), np.ones(3, dtype=np.int64)))
    python, native = _join_both(op, (0, 1, 2))
    _same(python, native)
    assert len(native[0]) == 2
    op.state[2].apply(Batch(("c", "d"), np.array([[0], [4]]), np.ones(1, dtype=np.int64)))  # unbound ?c
    python, native = _join_both(op, (0, 1, 2))
    _same(python, native)
    assert len(native[0]) == 3


class _Statuses(_Counting):
    """:class:`_Counting`, keeping the status of every ``join_chain`` call."""

    def __init__(self, kernels) -> None:
        super().__init__(kernels)
        self.statuses: list[int] = []

    def join_chain(self, *args):
        got = super().join_chain(*args)
        self.statuses.append(got[0])
        return got


@needs_native
@pytest.mark.parametrize("recent", [0, 3, 400])
def test_large_inputs_join_in_the_kernel_through_the_indexes_of_the_plan_kept(recent):
    """A step the kernel handed back (a large input next to a small partial result) is
    joined in the kernel at the next report, through the input's sorted index on the key
    of that step: the same rows in the same order as the Python loop; one whose fan-out
    is high (the loop may then join the rest as one relation) is still handed back."""
    rng = np.random.default_rng(7)
    feeds = [Feed(("a", "b")), Feed(("b", "c")), Feed(("c", "d")), Feed(("d", "e"))]
    op = MJoinOperator(feeds)
    n = 3000
    op.state[0].apply(
        consolidate(Batch(("a", "b"), rng.integers(1, 40, size=(2, 4)), np.ones(4, dtype=np.int64)))
    )
    # unique-ish keys on ?b (low fan-out: joined in the kernel), few values of ?d on the
    # last input (high fan-out next to one ?c: handed back, the rest may be one relation)
    big_b = np.vstack([np.arange(1, n + 1), rng.integers(1, 60, size=n)])
    op.state[1].apply(consolidate(Batch(("b", "c"), big_b, rng.integers(1, 3, size=n))))
    op.state[2].apply(
        consolidate(
            Batch(
                ("c", "d"),
                np.vstack([np.arange(1, 61), np.arange(1, 61) % 3 + 1]),
                np.ones(60, dtype=np.int64),
            )
        )
    )
    op.state[3].apply(
        consolidate(
            Batch(
                ("d", "e"), np.vstack([np.arange(n) % 3 + 1, np.arange(1, n + 1)]), np.ones(n, dtype=np.int64)
            )
        )
    )
    if recent:  # a recent part next to the large inputs' bases (indexed when large)
        for k, vs in ((1, ("b", "c")), (3, ("d", "e"))):
            extra = np.vstack([rng.integers(1, 40, size=recent), rng.integers(1, 60, size=recent)])
            op.state[k].apply(consolidate(Batch(vs, extra, np.ones(recent, dtype=np.int64))))
        assert len(op.state[1]._recent.rows) > 0
    statuses = _Statuses(B._kernels)
    B._native = statuses
    try:
        python, native, kept = _join_both(op, (0, 1, 2, 3), again=True)
        first = statuses.statuses.count(C.STEP)
        statuses.statuses.clear()
        for cache in ("_comp_cache", "_comp_rel"):
            op.__dict__.pop(cache, None)
        again = op._component_join((0, 1, 2, 3))
    finally:
        B.use_native(True)
    _same(python, native)
    _same(python, kept)
    _same(python, again)
    assert len(python[0]) > 0
    assert first >= 1
    assert statuses.statuses.count(C.STEP) < first  # (the low fan-out step stays in the kernel)


@needs_native
@pytest.mark.parametrize("recent", [0, 400])
def test_the_rest_of_the_inputs_joins_as_one_relation_in_the_kernel(recent):
    """Where the Python loop joins the rest of the inputs as one relation (a large input of
    high fan-out next to a small partial result: csparql-Q6 / Q10 / Q3's last hand-back),
    the kernel does the same once the plan is kept -- the rest's own join (the large input
    last, through its index on the other key the plan kept), consolidated, probed with the
    partial result: the same rows in the same order as the Python loop, no step handed
    back; with :data:`chain.REST` off the step goes back to Python as before."""
    rng = np.random.default_rng(11)
    feeds = [Feed(("a", "b")), Feed(("b", "c")), Feed(("c", "d")), Feed(("d", "e"))]
    op = MJoinOperator(feeds)
    n = 3000
    op.state[0].apply(Batch(("a", "b"), np.array([[1, 2], [3, 5]]), np.array([1, 2], dtype=np.int64)))
    # few values of ?b (fan-out ~600 next to the two rows of input 0), ?c unique
    big = np.vstack([rng.integers(1, 6, size=n), np.arange(1, n + 1)])
    op.state[1].apply(consolidate(Batch(("b", "c"), big, rng.integers(1, 3, size=n))))
    op.state[2].apply(
        consolidate(
            Batch(
                ("c", "d"),
                np.vstack([rng.integers(1, n, 20), rng.integers(1, 5, 20)]),
                np.ones(20, dtype=np.int64),
            )
        )
    )
    op.state[3].apply(
        consolidate(
            Batch(
                ("d", "e"),
                np.vstack([rng.integers(1, 5, 24), rng.integers(1, 9, 24)]),
                np.ones(24, dtype=np.int64),
            )
        )
    )
    if recent:  # a recent part next to the large input's base (indexed from its second read)
        extra = np.vstack([rng.integers(1, 6, size=recent), np.arange(n + 1, n + recent + 1)])
        op.state[1].apply(consolidate(Batch(("b", "c"), extra, np.ones(recent, dtype=np.int64))))
        assert len(op.state[1]._recent.rows) > 0
    statuses = _Statuses(B._kernels)
    B._native = statuses
    try:
        python, native, kept = _join_both(op, (0, 1, 2, 3), again=True)
        assert C.STEP in statuses.statuses  # (the first kernel run hands the rest step back)
        runs = []
        for rest in (False, True, True):  # (twice: the large recent part is indexed at its second read)
            C.REST = rest
            statuses.statuses.clear()
            for cache in ("_comp_cache", "_comp_rel"):
                op.__dict__.pop(cache, None)
            runs.append((op._component_join((0, 1, 2, 3)), list(statuses.statuses)))
    finally:
        C.REST = True
        B.use_native(True)
    _same(python, native)
    _same(python, kept)
    for got, _ in runs:
        _same(python, got)
    assert len(python[0]) > 0
    assert C.STEP in runs[0][1]  # REST off: handed back
    assert C.STEP not in runs[2][1]  # joined in the kernel, the rest's join included


@needs_native
def test_chain_of_large_inputs_joins_through_a_hash_table():
    """200 x 300 candidate pairs (the kernel's hash join, not its nested loop), on two keys."""
    rng = np.random.default_rng(3)
    feeds = [Feed(("a", "b", "x")), Feed(("b", "a", "y"))]
    op = MJoinOperator(feeds)
    for k, n in ((0, 200), (1, 300)):
        cols = np.vstack([rng.integers(1, 4, size=(2, n)), np.arange(1, n + 1)[None, :]])
        op.state[k].apply(consolidate(Batch(feeds[k].vars, cols, rng.integers(1, 3, size=n))))
    python, native = _join_both(op, (0, 1))
    _same(python, native)
    assert len(native[0]) > 5000


@needs_native
def test_the_chain_kernel_refuses_what_it_does_not_read():
    k = B._kernels
    cols = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    counts = np.ones(3, dtype=np.int64)
    good = ((0, 1), 3, ((cols, counts),))
    assert k.join_chain((good,), (), None, (), 0, 1, 0, 64)[0] == C.DONE
    for bad in (
        ((0, 1), 3, ((cols.astype(np.int32), counts),)),  # not int64
        ((0, 1), 3, ((cols[:, ::2], counts[:2]),)),  # not contiguous
        ((0, 1), 3, ((cols[:1], counts),)),  # a size that does not fit the variables
        ((0, 99), 3, ((cols, counts),)),  # a variable id out of range
    ):
        assert k.join_chain((bad,), (), None, (), 0, 1, 0, 64)[0] == C.UNUSABLE


CITY = ["csparql-Q1", "csparql-Q5", "csparql-Q6", "csparql-Q7", "cqels-Q1_win_1", "cqels-Q7"]


@needs_native
@pytest.mark.parametrize("qid", CITY)
def test_citybench_replays_are_byte_identical_with_and_without_the_chain(qid, tmp_path):
    from linkstream.cli.main import main as cli_main

    shared = shared_or_skip()
    man = json.loads((shared / "citybench" / "manifest.json").read_text())
    q = next(x for x in man["queries"] if x["id"] == qid)
    args = ["replay", "--query", str(shared / q["query"]), "--base", man["base"], "--quiet"]
    for s in q["streams"]:
        args += ["--stream", f"{s['iri']}={shared / s['path']}"]
    for s in q["statics"]:
        args += ["--static", f"{s['iri']}={shared / s['path']}" if s["iri"] else str(shared / s["path"])]
    if q.get("default_step"):
        args += ["--default-step", str(q["default_step"])]
    if q.get("max_reports"):
        args += ["--max-reports", str(q["max_reports"])]
    outs = []
    counting = _Counting(B._kernels)
    for on in (False, True):
        C.ENABLED = on
        B._native = counting
        try:
            assert cli_main([*args, "--out", str(tmp_path / f"{on}.jsonl")]) == 0
        finally:
            C.ENABLED = True
            B.use_native(True)
        outs.append((tmp_path / f"{on}.jsonl").read_bytes())
    assert outs[0] == outs[1]
    assert outs[0].count(b"\n") > 0
    assert counting.chain_calls > 0


@needs_native
@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 4), st.integers(0, 300), st.integers(0, 40), st.integers(1, 6), st.integers(0, 2**32 - 1)
)
def test_a_delta_in_any_order_applied_to_a_small_relation_equals_consolidate(k, nb, nd, span, seed):
    """``Relation.apply`` of a delta in any order (consolidated alone, then merged with the
    base) gives what ``consolidate`` of base and delta concatenated gives, with and without
    the compiled kernels."""
    rng = np.random.default_rng(seed)
    vs = VARS[:k]
    low = 0 if seed % 5 == 0 else 1  # (some unbound values: the merge declines them)
    base = consolidate(
        Batch(vs, rng.integers(low, span + 1, size=(k, nb)).astype(np.int64), rng.integers(-2, 3, size=nb))
    )
    if seed % 7 == 0:  # the extremes of int64 compare as numbers
        base = consolidate(Batch(vs, base.cols - 2**62, base.counts))
    delta = Batch(
        vs, rng.integers(low, span + 1, size=(k, nd)).astype(np.int64), rng.integers(-2, 3, size=nd)
    )
    want = consolidate(
        Batch(
            vs, np.concatenate((base.cols, delta.cols), axis=1), np.concatenate((base.counts, delta.counts))
        )
    )
    was = B.native()
    for native in (True, False):
        B.use_native(native)
        try:
            rel = Relation(vs)
            rel.set_consolidated(base)
            rel.apply(delta)
            got = rel.rows
        finally:
            B.use_native(was)
        assert got.vars == want.vars and got.cols.shape == want.cols.shape
        assert np.array_equal(got.cols, want.cols) and np.array_equal(got.counts, want.counts)
