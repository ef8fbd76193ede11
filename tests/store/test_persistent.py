"""The indexed persistent store against brute force: CityBench static graphs and random graphs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store import PersistentStore, Snapshot, Store, layout
from linkstream.store.index import GraphIndex
from linkstream.store.loader import load_store
from linkstream.store.persistent import index_dir
from linkstream.store.protocol import RDF_TYPE
from tests.shared_paths import shared_or_skip


def _rows(a: np.ndarray) -> np.ndarray:
    """Rows sorted lexicographically (a canonical form for comparing results as multisets)."""
    a = np.asarray(a, dtype=np.int64).reshape(-1, 3)
    return a[np.lexsort((a[:, 2], a[:, 1], a[:, 0]))]


def assert_same_rows(a: np.ndarray, b: np.ndarray, msg: object = "") -> None:
    np.testing.assert_array_equal(_rows(a), _rows(b), err_msg=str(msg))


def brute_match(t: np.ndarray, s, p, o) -> np.ndarray:
    mask = np.ones(len(t), dtype=bool)
    for col, v in enumerate((s, p, o)):
        if v is not None:
            mask &= t[:, col] == v
    return t[mask]


def brute_neighbours(t: np.ndarray, vertices, p, direction) -> np.ndarray:
    key, other = (0, 2) if direction == "out" else (2, 0)
    out = []
    for row, v in enumerate(np.asarray(vertices).tolist()):
        m = t[:, key] == v
        if p is not None:
            m &= t[:, 1] == p
        sel = t[m]
        out.append(np.stack([np.full(len(sel), row), sel[:, 1], sel[:, other]], axis=1))
    return _rows(np.concatenate(out)) if out else np.empty((0, 3), dtype=np.int64)


def check_snapshot_against(
    sn: Snapshot, graph, t: np.ndarray, rng: np.random.Generator, queries: int
) -> None:
    """Every bound/unbound combination of match on sampled triples equals brute force."""
    t = np.unique(t, axis=0) if len(t) else t.reshape(-1, 3)
    assert_same_rows(sn.triples(graph), t)
    assert sn.cardinality(graph, None) == len(t)
    probes = t[rng.integers(0, len(t), queries)] if len(t) else np.zeros((0, 3), dtype=np.int64)
    for k, r in enumerate(probes.tolist()):
        r = [r[0], r[1], r[2]]
        if k % 5 == 0:
            r[k % 3] = r[k % 3] + 1_000_003  # absent constants too
        for mask in range(1, 8):  # mask 0 (all triples) is checked once above
            q = [r[j] if mask >> j & 1 else None for j in range(3)]
            assert_same_rows(sn.match(graph, *q), brute_match(t, *q), q)
        assert sn.cardinality(graph, r[1]) == int(np.count_nonzero(t[:, 1] == r[1]))


def check_neighbours(sn: Snapshot, graph, t: np.ndarray, vertices: np.ndarray, preds) -> None:
    for direction in ("out", "in"):
        for p in preds:
            rows, ps, nb = sn.neighbours(graph, vertices, p, direction)
            assert np.all(np.diff(rows) >= 0)  # row order is non-decreasing
            got = np.stack([rows, ps, nb], axis=1)
            assert_same_rows(got, brute_neighbours(t, vertices, p, direction), (direction, p))


@pytest.fixture(scope="module")
def citybench_store(tmp_path_factory):
    shared = shared_or_skip()
    d = tmp_path_factory.mktemp("citybench_store")
    files = sorted((shared / "citybench" / "static").glob("*.nt"))
    load_store(d, files, partitions=4)
    store = PersistentStore.open(d)
    yield d, store
    store.close()


def test_citybench_match_and_neighbours_equal_brute_force(citybench_store):
    d, store = citybench_store
    assert isinstance(store, Store)
    sn = store.snapshot()
    assert isinstance(sn, Snapshot) and sn.vts == ()
    t = layout.read_graph(d, None)
    assert len(t) > 60000
    check_snapshot_against(sn, None, t, np.random.default_rng(7), 150)
    rng = np.random.default_rng(3)
    sample = t[rng.integers(0, len(t), 40)]
    vertices = np.concatenate([sample[:, 0], sample[:, 2], [10**12, 0]])
    small = t[np.isin(t[:, 0], vertices) | np.isin(t[:, 2], vertices)]  # brute force on a sub-graph
    check_neighbours(sn, None, small, vertices, [None, int(sample[0, 1]), int(sample[1, 1]), 10**12])


def test_citybench_predicate_and_type_indexes(citybench_store):
    d, store = citybench_store
    sn = store.snapshot()
    t = layout.read_graph(d, None)
    rdf_type = int(store.dictionary.lookup_many([RDF_TYPE])[0])
    assert rdf_type > 0
    for p in np.unique(t[:, 1])[:20].tolist():
        np.testing.assert_array_equal(sn.subjects(None, p), np.unique(t[t[:, 1] == p, 0]))
        np.testing.assert_array_equal(sn.objects(None, p), np.unique(t[t[:, 1] == p, 2]))
    typed = t[t[:, 1] == rdf_type]
    assert len(typed)
    for c in np.unique(typed[:, 2]).tolist():
        np.testing.assert_array_equal(sn.instances(None, c), np.unique(typed[typed[:, 2] == c, 0]))


def _mapped(a: np.ndarray) -> bool:
    """Whether ``a`` is (a view of) a memory-mapped file."""
    while a is not None:
        if isinstance(a, np.memmap):
            return True
        a = a.base if isinstance(a.base, np.ndarray) else None
    return False


def test_index_cache_is_memory_mapped_on_second_open(tmp_path):
    rng = np.random.default_rng(5)
    t = rng.integers(1, 300, size=(3000, 3))
    dic = MemoryDictionary()
    e = layout.write_partitions(tmp_path, None, t, 3)
    layout.write_manifest(tmp_path, dictionary="memory:", partitions=3, graphs=[e])
    s1 = PersistentStore.open(tmp_path, dictionary=dic)
    folder = index_dir(tmp_path, e)
    assert (folder / "meta.json").exists() and (folder / "out_nbr.npy").exists()
    base1 = s1.snapshot()._parts(None)[0]
    assert not _mapped(base1.out_nbr)  # first open builds in memory
    s2 = PersistentStore.open(tmp_path, dictionary=dic)
    base2 = s2.snapshot()._parts(None)[0]
    assert _mapped(base2.out_nbr) and _mapped(base2.in_v) and _mapped(base2.pidx_out)
    assert_same_rows(s2.snapshot().triples(None), np.unique(t, axis=0))
    # a rewritten partition invalidates the cache
    layout.write_partition(tmp_path, e.dir, 0, np.array([[3, 1, 1]]))
    # (re-published manifest: its file records must match, or opening reports damage)
    layout.write_manifest(tmp_path, dictionary="memory:", partitions=3, graphs=[e])
    s3 = PersistentStore.open(tmp_path, dictionary=dic)
    expect = np.unique(np.concatenate([t[t[:, 0] % 3 != 0], [[3, 1, 1]]]), axis=0)
    assert_same_rows(s3.snapshot().triples(None), expect)
    assert not _mapped(s3.snapshot()._parts(None)[0].out_nbr)
    for s in (s1, s2, s3):
        s.close()


def test_unknown_graph_and_bad_direction_are_handled():
    store = PersistentStore(MemoryDictionary(), {"http://g": np.array([[1, 2, 3]])})
    sn = store.snapshot()
    assert sn.graphs() == ["http://g"]
    assert sn.match(None, None, None, None).shape == (0, 3)
    assert sn.cardinality(None, None) == 0
    assert all(len(x) == 0 for x in sn.neighbours(None, np.array([1]), None, "out"))
    with pytest.raises(ValueError):
        sn.neighbours("http://g", np.array([1]), None, "sideways")


triples_st = st.lists(
    st.tuples(st.integers(1, 12), st.integers(1, 4), st.integers(1, 12)), min_size=0, max_size=60
).map(lambda rows: np.array(rows, dtype=np.int64).reshape(-1, 3))


@settings(max_examples=60, deadline=None)
@given(t=triples_st, huge=st.booleans(), seed=st.integers(0, 2**16))
def test_random_graphs_equal_brute_force(t, huge, seed):
    if huge:
        # ids near 2**62 disable the composite keys: the fallback paths must agree too
        t = t + np.array([2**62 - 100, 0, 0], dtype=np.int64)
    ix = GraphIndex.build(t, rdf_type=2)
    if huge and len(np.unique(t[:, 1])) > 1:
        assert len(ix.out_ck) == 0
    store = PersistentStore(MemoryDictionary(), {None: ix})
    sn = store.snapshot()
    rng = np.random.default_rng(seed)
    check_snapshot_against(sn, None, t, rng, 6)
    u = np.unique(t, axis=0) if len(t) else t
    vertices = np.concatenate([u[:, 0], u[:, 2], [5, 1]])[:20] if len(u) else np.array([1, 2], dtype=np.int64)
    check_neighbours(sn, None, u, vertices, [None, 1, 2])
    probe = np.concatenate([u, u + 1]) if len(u) else u
    expect = [tuple(r) in set(map(tuple, u.tolist())) for r in probe.tolist()]
    assert ix.contains(probe).tolist() == expect
    for c in range(1, 13):
        inst = u[(u[:, 1] == 2) & (u[:, 2] == c), 0] if len(u) else u[:0, 0]
        np.testing.assert_array_equal(ix.instances(c), np.unique(inst))
