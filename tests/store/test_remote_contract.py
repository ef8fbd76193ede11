"""The remote-array contract on every transport: a store node process serves a store whose
index arrays span many blocks; reads through :class:`RemoteArray` (fence + block searches,
gathers, slices) equal numpy on the partition's local index, and the snapshot's lookups
equal the local store's.  RDMA runs where a device exists and is skipped otherwise."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from linkstream.cli import main as cli_main
from linkstream.rdma.regions import transport
from linkstream.store import PersistentStore
from linkstream.store.index import GraphIndex
from linkstream.store.layout import read_manifest
from linkstream.store.node import BLOCK, partition_index
from linkstream.store.remote import WHOLE_BYTES, RemoteArray, RemoteStore
from tests.store.remote_fixtures import StoreNodeProcess

N_SUBJECTS = 6000


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """~30k triples over 2 partitions: every sorted array spans several blocks."""
    tmp = tmp_path_factory.mktemp("contract")
    rng = np.random.default_rng(19)
    lines = []
    for s in range(N_SUBJECTS):
        lines.append(
            f"<http://ex/s{s}> <http://www.w3.org/1999/02/22-rdf-syntax-ns#type> <http://ex/T{s % 7}> ."
        )
        for p in rng.choice(12, size=4, replace=False).tolist():
            o = int(rng.integers(0, 3000))
            lines.append(f"<http://ex/s{s}> <http://ex/p{p}> <http://ex/o{o}> .")
    nt = tmp / "big.nt"
    nt.write_text("\n".join(lines) + "\n", encoding="utf-8")
    store = tmp / "store"
    assert cli_main(["load", "--store", str(store), "--partitions", "2", "--quiet", str(nt)]) == 0
    return store


@pytest.fixture(scope="module")
def node(big_store: Path):
    n = StoreNodeProcess(big_store, None, "--transports", "rdma,shm,tcp")
    yield n
    n.stop()


@pytest.mark.parametrize("whole", [0, WHOLE_BYTES], ids=["blocks", "whole"])
@pytest.mark.parametrize("name", ["rdma", "shm", "tcp"])
def test_remote_arrays_behave_as_numpy(
    name: str, whole: int, node: StoreNodeProcess, big_store: Path
) -> None:
    ok, why = transport(name).available()
    if not ok:
        pytest.skip(f"{name}: {why}")
    assert name in node.adv.transports
    m = read_manifest(big_store)
    local = PersistentStore.open(big_store)
    cache = 96 << 10 if not whole else 4 << 20
    remote = RemoteStore(
        [node.adv], prefer=name, cache_bytes=cache, whole_bytes=whole, dictionary=local.dictionary
    )
    rng = np.random.default_rng(7)
    try:
        for k in range(m.partitions):
            want = partition_index(big_store, m, m.graphs[0].dir, k, node.adv.rdf_type)
            got = remote.partition_index(m.graphs[0].dir, k)
            assert 2 * BLOCK < len(want.out_v) < WHOLE_BYTES // 8  # both paths are exercised
            for f in fields(GraphIndex):
                a, r = getattr(want, f.name), getattr(got, f.name)
                assert isinstance(r, RemoteArray) and len(r) == len(a)
                if not len(a):
                    continue
                idx = rng.integers(-len(a), len(a), size=300)
                assert np.array_equal(r[idx], a[idx])
                assert int(r[-1]) == int(a[-1]) and int(r[len(a) // 2]) == int(a[len(a) // 2])
                lo = int(rng.integers(0, len(a)))
                hi = int(rng.integers(lo, len(a) + 1))
                assert np.array_equal(r[lo:hi], a[lo:hi]) and np.array_equal(r[hi:lo], a[hi:lo])
                if f.name in ("out_v", "in_v", "out_ck", "in_ck", "preds", "type_ids"):
                    probes = np.concatenate(
                        [a[rng.integers(0, len(a), 200)], rng.integers(-5, int(a[-1]) + 5, 200)]
                    )
                    for side in ("left", "right"):
                        assert np.array_equal(
                            np.searchsorted(r, probes, side), np.searchsorted(a, probes, side)
                        )
                        assert int(np.searchsorted(r, int(probes[0]), side)) == int(
                            np.searchsorted(a, int(probes[0]), side)
                        )
        stats = remote.cache.stats()
        if not whole:  # every array by blocks (fences searched), bounded: blocks were evicted
            assert stats["bytes"] <= 96 << 10 and stats["evictions"] > 0
        else:  # arrays this small are read whole: one entry each
            assert stats["blocks"] <= 2 * len(fields(GraphIndex)) and stats["bytes"] <= 4 << 20
        snap, want_snap = remote.snapshot(), local.snapshot()
        vertices = rng.integers(1, 20000, size=2000)
        for p in (None, int(local.dictionary.lookup_many(["<http://ex/p3>"])[0])):
            for d in ("out", "in"):
                a, b = snap.neighbours(None, vertices, p, d), want_snap.neighbours(None, vertices, p, d)
                ka, kb = np.lexsort(np.stack(a)), np.lexsort(np.stack(b))
                assert len(ka) and all(np.array_equal(x[ka], y[kb]) for x, y in zip(a, b))
    finally:
        remote.close()
        local.close()
