"""Contract tests of the static sub-join result stores, run against every backend.

``memory`` and ``lmdb`` are the real backends; ``hbase`` runs the happybase backend
against the in-process HBase Thrift 1 *emulator* (a test double, no HBase server can be
installed here); ``hbase-live`` runs it against a real gateway named by
``LINKSTREAM_TEST_HBASE=host:port`` and is skipped when that is unset.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import happybase
import msgpack
import numpy as np
import pytest

from linkstream.store.static_results import (
    HBaseStaticResultStore,
    LmdbStaticResultStore,
    MemoryStaticResultStore,
    StaticResult,
    StaticResultStore,
    decode_header,
    default_static_results_uri,
    encode_result,
    open_static_results,
    signature_key,
)
from tests.rdf.hbase_support import (
    Backend,
    backends,
    drop_table,
    fresh_table,
    split_address,
)

BACKENDS = backends("results")


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Backend, str, str]]:
    b = BACKENDS[request.param]
    address = request.getfixturevalue(b.server) if b.server else ""
    uri = b.uri(tmp_path, address)
    yield b, uri, address
    if uri.startswith("hbase://"):
        drop_table(address, uri.rsplit("/", 1)[1])


@pytest.fixture
def store(backend: tuple[Backend, str, str]) -> Iterator[StaticResultStore]:
    s = open_static_results(backend[1])
    yield s
    s.close()


def result(n: int, k: int = 3, seed: int = 0) -> StaticResult:
    rng = np.random.default_rng(seed)
    cols = rng.integers(1, 1 << 62, size=(k, n), dtype=np.int64)
    if n and k:
        cols[0, 0] = 0  # an unbound value
    counts = rng.integers(-3, 4, size=n, dtype=np.int64)
    return StaticResult(tuple(f"v{j}" for j in range(k)), cols, counts)


def same(a: StaticResult | None, b: StaticResult) -> bool:
    return (
        a is not None
        and a.vars == b.vars
        and a.cols.dtype == np.int64
        and np.array_equal(a.cols, b.cols)
        and np.array_equal(a.counts, b.counts)
    )


SIG = "linkstream-static-subjoin/1|patterns=[v0 #5 v1] filters=[]|ab12"


def test_missing_signature_is_none(store: StaticResultStore) -> None:
    assert store.get(SIG) is None


@pytest.mark.parametrize("n,k", [(0, 2), (1, 0), (7, 1), (1000, 3)])
def test_put_then_get_gives_the_same_result(store: StaticResultStore, n: int, k: int) -> None:
    r = result(n, k)
    store.put(SIG, r)
    got = store.get(SIG)
    assert same(got, r)
    assert got is not None and len(got) == n


def test_large_results_are_chunked_and_reassembled(store: StaticResultStore) -> None:
    r = result(20_000, 4, seed=3)
    if hasattr(store, "chunk_bytes"):
        store.chunk_bytes = 64 * 1024  # type: ignore[attr-defined]  # many chunks, fast
        header, chunks = encode_result(SIG, r, 64 * 1024)
        assert len(chunks) > 5 and msgpack.unpackb(header)["chunks"] == len(chunks)
    store.put(SIG, r)
    assert same(store.get(SIG), r)


def test_signatures_are_independent_and_overwrite_is_idempotent(store: StaticResultStore) -> None:
    a, b = result(10, 2, seed=1), result(5, 3, seed=2)
    store.put(SIG, a)
    store.put(SIG + "x", b)
    store.put(SIG, a)
    assert same(store.get(SIG), a)
    assert same(store.get(SIG + "x"), b)
    assert store.get(SIG + "y") is None


def test_persistent_backends_survive_reopening(backend: tuple[Backend, str, str]) -> None:
    b, uri, _ = backend
    r = result(300, 3, seed=5)
    s = open_static_results(uri)
    s.put(SIG, r)
    s.close()
    s = open_static_results(uri)
    try:
        assert same(s.get(SIG), r) if b.persistent else s.get(SIG) is None
    finally:
        s.close()


def test_header_of_another_signature_is_never_served() -> None:
    header, _ = encode_result(SIG, result(3))
    assert decode_header(SIG, header) is not None
    assert decode_header(SIG + "other", header) is None
    assert decode_header(SIG, b"\x00garbage") is None


def test_lmdb_entry_with_a_lost_chunk_is_a_miss(tmp_path: Path) -> None:
    s = LmdbStaticResultStore(str(tmp_path / "r"))
    s.chunk_bytes = 1024
    s.put(SIG, result(500, 2))
    with s._env.begin(db=s._db, write=True) as txn:
        assert txn.delete(signature_key(SIG) + b"c" + (1).to_bytes(4, "big"))
    assert s.get(SIG) is None
    s.close()


def test_hbase_layout_header_row_and_chunk_rows(hbase_emulator_address: str) -> None:
    table = fresh_table()
    host, port = split_address(hbase_emulator_address)
    s = HBaseStaticResultStore(host, port, table)
    s.chunk_bytes = 1024
    try:
        r = result(400, 3)
        s.put(SIG, r)
        _, chunks = encode_result(SIG, r, 1024)
        conn = happybase.Connection(host, port)
        t = conn.table(table)
        key = signature_key(SIG)
        h = msgpack.unpackb(t.row(key)[b"r:h"])
        assert h["rows"] == 400 and h["vars"] == ["v0", "v1", "v2"] and h["chunks"] == len(chunks)
        first = t.row(key + b"/00000000")[b"r:d"]
        assert np.array_equal(np.frombuffer(first, "<i8").reshape(4, -1)[:3], r.cols[:, : h["chunk_rows"]])
        # a lost chunk makes the entry a miss, never a short result
        t.delete(key + b"/00000001")
        conn.close()
        assert s.get(SIG) is None
    finally:
        s.close()
        drop_table(hbase_emulator_address, table)


def test_memory_store_is_bounded() -> None:
    s = MemoryStaticResultStore(max_entries=2)
    for i in range(3):
        s.put(f"s{i}", result(1))
    assert len(s) == 2 and s.get("s0") is None and s.get("s2") is not None


@pytest.mark.parametrize(
    "uri", ["nosuch:x", "lmdb:", "hbase://", "hbase://h:1/", "hbase://h:1/a/b", "hbase://h:1/t?bogus=1"]
)
def test_bad_uris_are_rejected(uri: str) -> None:
    with pytest.raises(ValueError):
        open_static_results(uri)


def test_default_store_lives_with_the_dictionary(tmp_path: Path) -> None:
    from linkstream.rdf.dictionary import MemoryDictionary, open_dictionary

    assert default_static_results_uri(MemoryDictionary()) == "memory:"
    d = open_dictionary(f"lmdb:{tmp_path / 'dict'}")
    try:
        assert default_static_results_uri(d) == f"lmdb:{tmp_path / 'dict' / 'static-results'}"
    finally:
        d.close()


def test_engine_store_resolution(tmp_path: Path) -> None:
    from linkstream.rdf.dictionary import MemoryDictionary
    from linkstream.store.static_results import engine_static_results

    assert isinstance(engine_static_results(None, MemoryDictionary()), MemoryStaticResultStore)
    mine = MemoryStaticResultStore()
    assert engine_static_results(mine, MemoryDictionary()) is mine
    s = engine_static_results(f"lmdb:{tmp_path / 'r'}", MemoryDictionary())
    assert isinstance(s, LmdbStaticResultStore)
    s.close()
    # an explicitly named store that cannot be reached is an error, not a silent fallback
    with pytest.raises(ConnectionError):
        engine_static_results("hbase://127.0.0.1:1/t", MemoryDictionary())
