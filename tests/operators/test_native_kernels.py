"""The compiled kernels (``platform/operators/_kernels.c``) give exactly what the numpy
kernels give: same rows, same order, same counts, the same batch back when there is
nothing to do.  ``make venv`` builds them wherever a C compiler is installed."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.operators import batch as B
from linkstream.operators.batch import Batch

VARS = ("a", "b", "c", "d")


@pytest.fixture
def numpy_kernels():
    """Run the body with the numpy kernels, then restore what was in use."""
    was = B.use_native(False)
    yield
    B.use_native(was)


def _with(native: bool, b: Batch) -> Batch:
    was = B.use_native(native)
    try:
        return B.consolidate(b)
    finally:
        B.use_native(was)


def _same(x: Batch, y: Batch, dtype: type = np.int64) -> None:
    assert x.vars == y.vars
    assert x.cols.shape == y.cols.shape and x.cols.dtype == y.cols.dtype == dtype
    assert np.array_equal(x.cols, y.cols)
    assert np.array_equal(x.counts, y.counts)


def test_the_kernels_are_built_where_a_compiler_is():
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler on this machine: the numpy kernels run")
    assert B._kernels is not None, "platform/operators/_kernels.c was not built by the install (make venv)"
    assert B.use_native(True) and B.native()


needs_native = pytest.mark.skipif(B._kernels is None, reason="compiled kernels not built")

batches = st.integers(1, 4).flatmap(
    lambda k: st.tuples(
        st.just(k),
        st.integers(0, 300),
        st.integers(1, 6),  # distinct values per column: few -> many equal rows
        st.integers(0, 2**32 - 1),
    )
)


@needs_native
@settings(max_examples=400, deadline=None)
@given(batches)
def test_native_consolidate_equals_numpy(spec):
    k, n, span, seed = spec
    rng = np.random.default_rng(seed)
    cols = rng.integers(0, span, size=(k, n)).astype(np.int64)
    if seed % 5 == 0:  # the extremes of int64 compare as numbers
        cols[:, ::3] = np.iinfo(np.int64).max - cols[:, ::3]
        cols[:, 1::4] = np.iinfo(np.int64).min + cols[:, 1::4]
    b = Batch(VARS[:k], cols, rng.integers(-2, 3, size=n).astype(np.int64))
    _same(_with(True, b), _with(False, b))


@needs_native
def test_native_consolidate_of_views_and_odd_dtypes():
    rng = np.random.default_rng(7)
    wide = rng.integers(1, 4, size=(3, 80)).astype(np.int64)
    counts = rng.integers(-1, 3, size=160).astype(np.int64)
    for b in (
        Batch(("a", "b", "c"), wide[:, ::2], counts[::4]),  # strided columns and counts
        Batch(("a", "b"), wide.T[:40].T[:2], counts[:40]),  # a transposed view
    ):
        _same(_with(True, b), _with(False, b))
    odd = Batch(("a", "b"), wide[:2, :40].astype(np.int32), counts[:40])  # not int64: numpy's path
    _same(_with(True, odd), _with(False, odd), np.int32)


@needs_native
def test_native_consolidate_returns_a_consolidated_batch_as_is():
    b = Batch(("a", "b"), np.array([[1, 1, 2], [2, 3, 1]], dtype=np.int64), np.array([1, -1, 2]))
    assert _with(True, b) is b
    c = Batch(b.vars, b.cols[:, ::-1].copy(), b.counts[::-1].copy())
    assert _with(True, c) is not c
    _same(_with(True, c), b)


@needs_native
def test_native_consolidate_of_all_zero_sums_is_empty():
    b = Batch(("a",), np.array([[5, 5, 6, 6]], dtype=np.int64), np.array([1, -1, 2, -2], dtype=np.int64))
    out = _with(True, b)
    assert out.cols.shape == (1, 0) and len(out.counts) == 0


@needs_native
def test_the_kernel_checks_its_buffer_sizes():
    k = B._kernels
    cols = np.zeros(6, dtype=np.int64)
    out = np.empty(6, dtype=np.int64)
    counts = np.ones(3, dtype=np.int64)
    with pytest.raises(ValueError, match="cols: 48 bytes, expected 8 int64"):
        k.consolidate(cols, counts, 2, 4, out, counts.copy())
    with pytest.raises(ValueError, match="counts"):
        k.consolidate(cols, counts[:2], 2, 3, out, counts.copy())
    with pytest.raises(TypeError):
        k.consolidate(cols, counts, 2, 3, b"readonly" * 6, counts.copy())


def test_numpy_kernels_alone(numpy_kernels):
    assert not B.native()
    b = Batch(("a",), np.array([[3, 1, 3]], dtype=np.int64), np.array([1, 1, 1], dtype=np.int64))
    out = B.consolidate(b)
    assert out.cols.tolist() == [[1, 3]] and out.counts.tolist() == [1, 2]


class _Counting:
    """The compiled kernels, counting the calls of each."""

    def __init__(self, kernels) -> None:
        self.kernels = kernels
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str):
        fn = getattr(self.kernels, name)

        def call(*args):
            self.calls[name] = self.calls.get(name, 0) + 1
            return fn(*args)

        return call


@needs_native
@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_native_join_equals_numpy_and_runs(seed):
    from linkstream.operators import relation as R

    rng = np.random.default_rng(seed)
    rv = tuple(rng.choice(VARS, size=int(rng.integers(1, 5)), replace=False))
    pv = tuple(rng.choice(VARS, size=int(rng.integers(1, 5)), replace=False))
    low = 0 if seed % 5 == 0 else 1
    rel_native, rel_numpy = R.Relation(rv), R.Relation(rv)
    for _ in range(int(rng.integers(1, 4))):
        n = int(rng.integers(0, 40))
        d = Batch(rv, rng.integers(low, 5, size=(len(rv), n)), rng.integers(-2, 3, size=n).astype(np.int64))
        rel_native.apply(d)
        rel_numpy.apply(d)
    n = int(rng.integers(0, 30))
    probe = Batch(pv, rng.integers(low, 5, size=(len(pv), n)), rng.integers(-3, 4, size=n).astype(np.int64))
    counting = _Counting(B._kernels)
    was = B.native()
    try:
        B._native = counting  # (what use_native(True) sets, counted)
        got = rel_native.join(probe)
        B.use_native(False)
        want = rel_numpy.join(probe)
    finally:
        B.use_native(was)
    _same(got, want)
    shared = [v for v in pv if v in rv]
    if shared and n and low and len(rel_native):
        assert counting.calls.get("join_small"), "the compiled join did not run"


@needs_native
def test_the_join_kernel_checks_its_arguments():
    k = B._kernels
    z = np.zeros(4, dtype=np.int64)
    with pytest.raises(ValueError, match="p_idx: column 5 of 2"):
        k.join_small(
            z, 2, 2, np.array([5]), z[:2], 2, z[:0], 0, z[:2], z[:2], np.empty(8, np.int64), z.copy()
        )
    with pytest.raises(ValueError, match="out_cols"):
        k.join_small(
            z, 2, 2, np.array([0]), z[:2], 2, z[:0], 0, z[:2], z[:2], np.empty(7, np.int64), z.copy()
        )
    # an unbound probe key: -1, nothing written (the general path decides)
    out = np.full(8, 7, dtype=np.int64)
    assert k.join_small(z, 2, 2, np.array([0]), z[:2] + 1, 2, z[:0], 0, z[:2], z[:2], out, z.copy()) == -1
    assert (out == 7).all()


def _held_bytes(a: np.ndarray) -> int:
    while a.base is not None:
        a = a.base
    return a.nbytes


@needs_native
def test_kernel_outputs_keep_no_oversized_buffers_alive():
    from linkstream.operators import relation as R

    # 1,000 rows that cancel down to 10: the consolidated batch holds ~10 rows' memory
    keep = np.arange(1, 11, dtype=np.int64)
    gone = np.arange(100, 595, dtype=np.int64)
    cols = np.concatenate([keep, gone, gone])[None, :]
    counts = np.concatenate([np.ones(10), np.ones(495), -np.ones(495)]).astype(np.int64)
    out = _with(True, Batch(("a",), cols, counts))
    assert len(out) == 10
    assert _held_bytes(out.cols) <= 2 * 10 * 8 and _held_bytes(out.counts) <= 2 * 10 * 8
    # a join of 40 x 100 candidate pairs with 40 matches holds 40 rows, not 4,000
    rel = R.Relation(("a", "b"))
    rel.apply(
        Batch(("a", "b"), np.vstack([np.arange(1, 101), np.arange(1, 101)]), np.ones(100, dtype=np.int64))
    )
    probe = Batch(("a", "c"), np.vstack([np.arange(1, 41), np.full(40, 7)]), np.ones(40, dtype=np.int64))
    joined = rel.join(probe)
    assert len(joined) == 40
    assert _held_bytes(joined.cols) <= 2 * 3 * 40 * 8
