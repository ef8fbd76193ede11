"""Absorbing timeless stream batches: VTS snapshots, compaction, the delta log, and
acceptance 2 of issue 6 (no snapshot ever sees half a batch, every snapshot sees all
batches up to its stable VTS) with a concurrent writer and thousands of snapshot queries."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store import (
    AbsorbingStore,
    HybridStore,
    MemoryStore,
    PersistentStore,
    Snapshot,
    layout,
    persistent,
)
from linkstream.store.deltalog import DeltaLog


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, dtype=np.int64).reshape(-1, 3)
    return a[np.lexsort((a[:, 2], a[:, 1], a[:, 0]))]


BASE = np.array([[1, 2, 3], [1, 2, 4], [5, 6, 1]], dtype=np.int64)


@pytest.mark.parametrize("background", [False, True])
def test_absorb_publishes_batches_with_vts_and_old_snapshots_stay(background):
    store = PersistentStore(
        MemoryDictionary(), {None: BASE}, compact_threshold=4, background_compaction=background
    )
    s0 = store.snapshot()
    assert s0.vts == () and s0.cardinality(None, None) == 3
    store.absorb("a", 10, np.array([[1, 2, 3], [7, 2, 8], [7, 2, 8]]))  # one repeat of the base, one within
    store.absorb("b", 5, np.array([[9, 9, 9]]), graph="http://g")
    s1 = store.snapshot()
    assert s1.vts == (10, 5) and s1.streams == ("a", "b") and s1.stream_ts("b") == 5
    assert (s0.number, s1.number) == (0, 2)  # scalarised snapshot: batches applied
    np.testing.assert_array_equal(_rows(s1.triples(None)), _rows(np.vstack([BASE, [[7, 2, 8]]])))
    assert s1.graphs() == [None, "http://g"]
    np.testing.assert_array_equal(s1.match("http://g", 9, None, None), [[9, 9, 9]])
    for i in range(20):  # crosses the compaction threshold several times
        store.absorb("a", 11 + i, np.array([[100 + i, 2, 3]]))
    store.wait_compaction()
    s2 = store.snapshot()
    assert s2.vts == (30, 5)
    assert s2.number == 22  # compaction changes no contents, hence no number
    assert store.compactions >= 1
    assert s2.cardinality(None, 2) == 3 + 20
    rows, preds, nb = s2.neighbours(None, np.array([3, 8]), 2, "in")
    assert sorted(zip(rows.tolist(), nb.tolist())) == sorted(
        [(0, 1)] + [(0, 100 + i) for i in range(20)] + [(1, 7)]
    )
    np.testing.assert_array_equal(
        s2.subjects(None, 2), np.array(sorted([1, 7] + [100 + i for i in range(20)]))
    )
    # earlier snapshots are untouched by later batches and by compaction
    assert s0.cardinality(None, None) == 3 and s0.vts == ()
    assert s1.cardinality(None, None) == 4 and s1.vts == (10, 5)
    with pytest.raises(ValueError, match="older"):
        store.absorb("a", 29, np.array([[1, 1, 1]]))
    with pytest.raises(ValueError):
        store.absorb("a", 40, np.array([1, 2, 3]))
    assert store.snapshot().vts == (30, 5)  # a rejected batch changes nothing
    store.close()


def test_batches_absorbed_during_compaction_stay_in_the_delta(monkeypatch):
    store = PersistentStore(MemoryDictionary(), {None: BASE}, compact_threshold=10**6)
    store.absorb("a", 1, np.array([[20, 2, 3]]))
    store.absorb("a", 2, np.array([[21, 2, 3]]))
    real_build = persistent.GraphIndex.build
    fired = []

    def build_and_absorb(triples, rdf_type=0, *, distinct=False):
        if not fired:  # the first build is compaction's new base: absorb meanwhile
            fired.append(True)
            store.absorb("a", 3, np.array([[22, 2, 3], [20, 2, 3]]))
            store.absorb("b", 1, np.array([[23, 2, 3]]))
        return real_build(triples, rdf_type, distinct=distinct)

    monkeypatch.setattr(persistent.GraphIndex, "build", staticmethod(build_and_absorb))
    assert store.compact() == 1
    monkeypatch.setattr(persistent.GraphIndex, "build", real_build)
    sn = store.snapshot()
    assert sn.vts == (3, 1) and sn.number == 4
    assert store.delta_size(None) == 2  # 22 and 23; 20 was already there
    np.testing.assert_array_equal(
        _rows(sn.triples(None)), _rows(np.vstack([BASE, [[20, 2, 3], [21, 2, 3], [22, 2, 3], [23, 2, 3]]]))
    )
    assert store.compact() == 1 and store.delta_size(None) == 0
    assert _rows(store.snapshot().triples(None)).tolist() == _rows(sn.triples(None)).tolist()


def test_type_index_of_absorbed_data_when_rdf_type_is_encoded_later():
    dic = MemoryDictionary()
    dic.encode_many([f"<http://ex.org/{i}>" for i in range(1, 7)])  # the ids BASE uses
    store = PersistentStore(dic, {None: BASE})
    assert store.rdf_type == 0
    a, t, c = dic.encode_many(
        ["<http://ex.org/a>", "<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>", "<http://c>"]
    )
    store.absorb("s", 1, np.array([[a, t, c]]))
    np.testing.assert_array_equal(store.snapshot().instances(None, int(c)), [a])


def test_delta_log_replays_after_reopen_and_cuts_a_torn_tail(tmp_path):
    e = layout.write_partitions(tmp_path, None, BASE, 2)
    layout.write_manifest(tmp_path, dictionary="memory:", partitions=2, graphs=[e])
    dic = MemoryDictionary()
    s = PersistentStore.open(tmp_path, dictionary=dic)
    s.absorb("a", 1, np.array([[20, 2, 3]]))
    s.absorb("b", 7, np.array([[21, 2, 3]]), graph="http://g")
    s.absorb("a", 2, np.array([[22, 2, 3], [1, 2, 3]]))
    expect = s.snapshot()
    s.close()
    log = tmp_path / "delta" / "log.bin"
    with open(log, "ab") as f:
        f.write(b"\x20\x00\x00\x00partial")  # a crash in the middle of an append
    s2 = PersistentStore.open(tmp_path, dictionary=dic)
    got = s2.snapshot()
    assert got.vts == (2, 7) and got.streams == ("a", "b")
    for g in (None, "http://g"):
        np.testing.assert_array_equal(_rows(got.triples(g)), _rows(expect.triples(g)))
    s2.absorb("a", 3, np.array([[23, 2, 3]]))
    s2.close()
    assert [(b.stream, b.ts, len(b.triples)) for b in DeltaLog(log).replay()] == [
        ("a", 1, 1),
        ("b", 7, 1),
        ("a", 2, 2),
        ("a", 3, 1),
    ]


def test_checkpoint_writes_partitions_vts_and_empties_the_log(tmp_path):
    e = layout.write_partitions(tmp_path, None, BASE, 2)
    layout.write_manifest(tmp_path, dictionary="memory:", partitions=2, graphs=[e])
    dic = MemoryDictionary()
    s = PersistentStore.open(tmp_path, dictionary=dic)
    s.absorb("a", 1, np.array([[20, 2, 3], [21, 2, 3]]))
    s.absorb("b", 4, np.array([[22, 2, 3]]), graph="http://g")
    s.checkpoint()
    s.absorb("a", 2, np.array([[23, 2, 3]]))  # after the checkpoint: only in the log
    expect = s.snapshot()
    s.close()
    m = layout.read_manifest(tmp_path)
    assert [(g.iri, g.triples) for g in m.graphs] == [(None, 5), ("http://g", 1)]
    assert m.extra["vts"] == {"a": 1, "b": 4}
    assert [b.ts for b in DeltaLog(tmp_path / "delta" / "log.bin").replay()] == [2]
    s2 = PersistentStore.open(tmp_path, dictionary=dic)
    got = s2.snapshot()
    assert got.vts == (2, 4) and got.streams == ("a", "b")
    for g in (None, "http://g"):
        np.testing.assert_array_equal(_rows(got.triples(g)), _rows(expect.triples(g)))
    assert s2.delta_size(None) == 1  # only the post-checkpoint batch is replayed
    s2.close()
    # a crash between the manifest write and the log truncation: the old log is replayed
    log = tmp_path / "delta" / "log.bin"
    stale = DeltaLog(tmp_path / "stale.bin")
    stale.append("a", 1, None, np.array([[20, 2, 3], [21, 2, 3]]))
    stale.append("b", 4, "http://g", np.array([[22, 2, 3]]))
    stale.close()
    log.write_bytes((tmp_path / "stale.bin").read_bytes() + log.read_bytes())
    s3 = PersistentStore.open(tmp_path, dictionary=dic)
    got = s3.snapshot()
    assert got.vts == (2, 4)
    for g in (None, "http://g"):
        np.testing.assert_array_equal(_rows(got.triples(g)), _rows(expect.triples(g)))
    s3.close()


def test_hybrid_store_opens_a_directory_with_both_sides(tmp_path):
    e = layout.write_partitions(tmp_path, None, BASE, 2)
    layout.write_manifest(tmp_path, dictionary="memory:", partitions=2, graphs=[e])
    h = HybridStore.open(tmp_path, dictionary=MemoryDictionary(), slot_ms=10)
    assert isinstance(h, AbsorbingStore)
    assert {"persistent", "transient", "snapshots", "stream-index", "timeless"} <= h.capabilities
    h.absorb("timeless", 3, np.array([[30, 2, 3]]))
    h.append("windowed", 15, np.array([[40, 2, 3]]))
    h.append("windowed", 27, np.array([[41, 2, 3]]))
    sn = h.snapshot()
    assert sn.vts == (3,) and sn.cardinality(None, 2) == 3  # windowed data stays transient
    triples, ts = h.window("windowed", 20, 30)
    assert triples.tolist() == [[41, 2, 3]] and ts.tolist() == [27]
    assert h.retain("windowed", 20, "w") == 1 and [b.ts for b in h.batches("windowed", 0, 100)] == [27]
    h.close()


# ---------------------------------------------------------------------- acceptance 2

HAS_VALUE, HAS_TIME, OTHER = 1, 2, 3
N_BATCHES = 1200
MIN_QUERIES = 2000
#: two streams with their own subject ranges and local clocks (ts of batch i = step * i)
STREAMS = {"obs": (1_000, 1), "obs2": (5_000_000, 10)}


def _pair(stream: str, i: int) -> np.ndarray:
    obs = STREAMS[stream][0] + i
    return np.array([[obs, HAS_VALUE, 10_000_000 + i], [obs, HAS_TIME, 20_000_000 + i]], dtype=np.int64)


def _make(kind: str) -> AbsorbingStore:
    base = {None: np.array([[5, OTHER, 6], [7, OTHER, 8]], dtype=np.int64)}
    if kind == "memory":
        return MemoryStore(MemoryDictionary(), base)
    p = PersistentStore(MemoryDictionary(), base, compact_threshold=200, background_compaction=True)
    return p if kind == "persistent" else HybridStore(p)


def _count_pairs(sn: Snapshot, stream: str) -> tuple[int, int, int]:
    """(#hasValue, #hasTime, #complete pairs) of one stream, through match and neighbours."""
    lo = STREAMS[stream][0]
    hi = lo + N_BATCHES
    values = sn.match(None, None, HAS_VALUE, None)
    values = values[(values[:, 0] >= lo) & (values[:, 0] < hi)]
    times = sn.match(None, None, HAS_TIME, None)
    times = times[(times[:, 0] >= lo) & (times[:, 0] < hi)]
    rows, _, nb = sn.neighbours(None, values[:, 0], HAS_TIME, "out")
    # a pair is complete if obs_i has both triples and they carry the same i
    same_i = nb - 20_000_000 == values[rows, 2] - 10_000_000
    return len(values), len(times), int(np.count_nonzero(same_i))


@pytest.mark.parametrize("kind", ["persistent", "memory"])
def test_acceptance2_snapshots_never_see_half_pairs(kind):
    """Two writer threads absorb pair batches while this thread runs thousands of
    snapshot queries: no half pair, and exactly the batches up to the stable VTS."""
    store = _make(kind)
    errors: list[BaseException] = []

    def writer(stream: str) -> None:
        try:
            step = STREAMS[stream][1]
            for i in range(N_BATCHES):
                store.absorb(stream, i * step, _pair(stream, i))
                if i % 50 == 0:
                    time.sleep(0)  # let the reader in often
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    last = {s: -1 for s in STREAMS}
    partial = 0
    queries = 0
    threads = [threading.Thread(target=writer, args=(s,), name=f"absorb-{s}") for s in STREAMS]
    for t in threads:
        t.start()
    try:
        while any(t.is_alive() for t in threads) or queries < MIN_QUERIES:
            sn = store.snapshot()
            assert len(sn.vts) == len(sn.streams)
            for stream, (_, step) in STREAMS.items():
                nv, nt, pairs = _count_pairs(sn, stream)
                stable = sn.vts[sn.streams.index(stream)] if stream in sn.streams else -1
                # no half pair: every hasValue has its hasTime and vice versa
                assert nv == nt == pairs, (stream, nv, nt, pairs, sn.vts)
                # every batch up to the stable point, nothing newer: batches i with i*step <= stable
                assert pairs == (stable // step + 1 if stable >= 0 else 0), (stream, pairs, sn.vts)
                if 0 < pairs < N_BATCHES:
                    partial += 1
                assert stable >= last[stream]  # a stream's stable timestamp never goes back
                last[stream] = stable
            queries += 1
    finally:
        for t in threads:
            t.join()
    assert not errors, errors
    assert queries >= MIN_QUERIES
    assert partial > 0, "no snapshot was taken while the writers were absorbing"
    final = store.snapshot()
    assert dict(zip(final.streams, final.vts)) == {
        s: (N_BATCHES - 1) * step for s, (_, step) in STREAMS.items()
    }
    for stream in STREAMS:
        assert _count_pairs(final, stream) == (N_BATCHES, N_BATCHES, N_BATCHES)
    assert final.cardinality(None, OTHER) == 2
    if kind != "memory":
        p = store if isinstance(store, PersistentStore) else store.persistent
        p.wait_compaction()
        assert p.compactions >= 1  # compaction ran while readers were querying
        for stream in STREAMS:
            assert _count_pairs(p.snapshot(), stream) == (N_BATCHES, N_BATCHES, N_BATCHES)


# ---------------------------------------------------------------------- model-based property test

batch_st = st.lists(
    st.tuples(st.integers(1, 9), st.integers(1, 3), st.integers(1, 9)), min_size=0, max_size=6
)
op_st = st.one_of(
    st.tuples(st.just("absorb"), st.sampled_from(["a", "b"]), st.sampled_from([None, "http://g"]), batch_st),
    st.tuples(st.just("compact"), st.none(), st.none(), st.none()),
    st.tuples(st.just("check"), st.none(), st.none(), st.none()),
)


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(op_st, max_size=40), base=batch_st, threshold=st.sampled_from([1, 3, 1000]))
def test_absorb_and_compaction_equal_reference_store(ops, base, threshold):
    """Any interleaving of absorbs and compactions gives the reference store's views,
    and snapshots taken along the way never change afterwards."""
    b = np.array(base, dtype=np.int64).reshape(-1, 3)
    ours = PersistentStore(
        MemoryDictionary(), {None: b}, compact_threshold=threshold, background_compaction=False
    )
    ref = MemoryStore(MemoryDictionary(), {None: b})
    held: list[tuple[Snapshot, Snapshot]] = []
    ts = 0
    for op, stream, graph, rows in ops:
        if op == "absorb":
            ts += 1
            t = np.array(rows, dtype=np.int64).reshape(-1, 3)
            ours.absorb(stream, ts, t, graph)
            ref.absorb(stream, ts, t, graph)
        elif op == "compact":
            ours.compact()
        else:
            held.append((ours.snapshot(), ref.snapshot()))
    held.append((ours.snapshot(), ref.snapshot()))
    for mine, theirs in held:
        assert mine.vts == theirs.vts
        assert set(mine.graphs()) == set(theirs.graphs())
        for g in theirs.graphs():
            np.testing.assert_array_equal(_rows(mine.triples(g)), _rows(theirs.triples(g)))
            assert mine.cardinality(g, 2) == theirs.cardinality(g, 2)
            for q in [
                (3, None, None),
                (None, 2, None),
                (None, None, 4),
                (5, 1, None),
                (None, 3, 7),
                (2, None, 2),
            ]:
                np.testing.assert_array_equal(_rows(mine.match(g, *q)), _rows(theirs.match(g, *q)))
            v = np.arange(1, 10, dtype=np.int64)
            for p in (None, 1):
                for d in ("out", "in"):
                    got = np.stack(mine.neighbours(g, v, p, d), axis=1)
                    exp = np.stack(theirs.neighbours(g, v, p, d), axis=1)
                    np.testing.assert_array_equal(_rows(got), _rows(exp))
