"""The ``hbase://`` dictionary beyond the shared contract: concurrent writers, layout, URIs.

Every test runs against the in-process HBase Thrift 1 emulator (a test double, see
``tests/rdf/hbase_emulator.py``); the tests marked with the ``gateway`` fixture also run
against a real HBase Thrift gateway when ``LINKSTREAM_TEST_HBASE=host:port`` is set.
"""

from __future__ import annotations

import hashlib
import random
import socket
import threading
from collections.abc import Iterator

import happybase
import numpy as np
import pytest
from thriftpy2.thrift import TApplicationException

from linkstream.rdf.dictionary import open_dictionary
from linkstream.rdf.hbase_dictionary import COUNTER_ROW, NEXT_ID, T_ID, HBaseDictionary, parse_hbase_uri
from tests.rdf.hbase_emulator import HBaseThriftEmulator
from tests.rdf.hbase_support import drop_table, fresh_table, live_address_or_skip, split_address


@pytest.fixture(scope="module")
def emulator() -> Iterator[HBaseThriftEmulator]:
    """One HBase Thrift 1 emulator (test double) for the module."""
    with HBaseThriftEmulator() as emu:
        yield emu


@pytest.fixture(params=["emulator", "live"])
def gateway(request: pytest.FixtureRequest, emulator: HBaseThriftEmulator) -> str:
    """``host:port`` of the emulator, or of the real gateway in ``LINKSTREAM_TEST_HBASE``."""
    return emulator.address if request.param == "emulator" else live_address_or_skip()


@pytest.fixture
def table(gateway: str) -> Iterator[tuple[str, int, str]]:
    """``(host, port, table)``: a fresh table, dropped after the test."""
    name = fresh_table()
    host, port = split_address(gateway)
    yield host, port, name
    drop_table(gateway, name)


def _terms(n: int, tag: str = "r") -> list[str]:
    return [f"<http://ex.org/{tag}/{i}>" for i in range(n)]


# ------------------------------------------------------------------ concurrency


def test_concurrent_writers_agree(table: tuple[str, int, str]) -> None:
    host, port, name = table
    pool = _terms(3000) + ['"' + "long literal " * 100 + str(i) + '"' for i in range(40)]
    n_threads = 4
    writers = [HBaseDictionary(host, port, name, block=64) for _ in range(n_threads)]
    seen: list[dict[str, int]] = [{} for _ in range(n_threads)]
    errors: list[BaseException] = []
    start = threading.Barrier(n_threads)

    def work(k: int) -> None:
        try:
            mine = pool[k * 500 : k * 500 + 1500] + pool[-40:]  # overlaps its neighbours'
            random.Random(k).shuffle(mine)
            start.wait()
            for j in range(0, len(mine), 97):
                batch = mine[j : j + 97] + mine[:j:7]  # new terms plus already-known ones
                ids = writers[k].encode_many(batch)
                for t, i in zip(batch, ids.tolist()):
                    assert seen[k].setdefault(t, i) == i
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert sum(w.lost_races for w in writers) > 0  # the same new term did race (~200 times a run)
    ranges = sorted(r for w in writers for r in w.ranges)
    for w in writers:
        w.close()

    # every term has exactly one id, whichever writer encoded it
    agreed: dict[str, int] = {}
    for s in seen:
        for t, i in s.items():
            assert agreed.setdefault(t, i) == i, f"{t} got ids {agreed[t]} and {i}"
    assert len(set(agreed.values())) == len(agreed)
    assert all(i > 0 for i in agreed.values())

    # counter ranges of different writers never overlap, and every id comes from one
    for (a0, a1), (b0, b1) in zip(ranges, ranges[1:]):
        assert a0 <= a1 < b0 <= b1
    starts = [r[0] for r in ranges]
    for i in agreed.values():
        k = int(np.searchsorted(starts, i, side="right")) - 1
        assert k >= 0 and ranges[k][0] <= i <= ranges[k][1]

    # fresh readers agree with the writers, both ways
    terms = list(agreed)
    with HBaseDictionary(host, port, name) as r1, HBaseDictionary(host, port, name) as r2:
        expect = [agreed[t] for t in terms]
        assert r1.lookup_many(terms).tolist() == expect
        assert r2.encode_many(terms[::-1]).tolist() == expect[::-1]
        assert r1.decode_many(expect) == terms
        assert len(r1) == len(terms)


def test_lost_race_adopts_winner_and_recycles_its_id(
    table: tuple[str, int, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, port, name = table
    with HBaseDictionary(host, port, name, block=8) as a, HBaseDictionary(host, port, name, block=8) as b:
        winner = int(b.encode_many(["<http://ex.org/x>"])[0])
        # make ``a`` miss the published term once, as if it had read just before ``b`` wrote
        real = a._read_ids
        calls = {"n": 0}

        def stale_once(terms: list[str]) -> dict[str, int]:
            calls["n"] += 1
            return {} if calls["n"] == 1 else real(terms)

        monkeypatch.setattr(a, "_read_ids", stale_once)
        assert int(a.encode_many(["<http://ex.org/x>"])[0]) == winner
        lost = a.ranges[0][0]  # the id ``a`` wrote an id -> term row for, then lost
        assert int(a.encode_many(["<http://ex.org/y>"])[0]) == lost  # reused
        assert a.decode_many([lost, winner]) == ["<http://ex.org/y>", "<http://ex.org/x>"]
        assert len(a) == 2


# ------------------------------------------------------------------ ids and layout


def test_single_writer_ids_are_dense_across_reopen(table: tuple[str, int, str]) -> None:
    host, port, name = table
    with HBaseDictionary(host, port, name, block=4) as d:
        assert d.encode_many(_terms(10)).tolist() == list(range(1, 11))
        assert len(d.ranges) == 1  # one range sized for the batch
        assert d.encode_many(_terms(13)).tolist() == list(range(1, 14))
    with HBaseDictionary(host, port, name, block=1024) as d:  # the unused tail was given back
        assert d.encode_many(_terms(3, "z")).tolist() == [14, 15, 16]
    with HBaseDictionary(host, port, name) as d:
        assert d.decode_many(range(1, 17))[-3:] == _terms(3, "z")
        with pytest.raises(KeyError):
            d.decode_many([17])


def test_tail_is_not_given_back_after_another_writer(table: tuple[str, int, str]) -> None:
    host, port, name = table
    a = HBaseDictionary(host, port, name, block=10)
    b = HBaseDictionary(host, port, name, block=10)
    assert a.encode_many(_terms(2, "a")).tolist() == [1, 2]
    assert b.encode_many(_terms(2, "b")).tolist() == [11, 12]
    a.close()  # b holds ids above a's range: a's tail 3..10 stays a gap
    b.close()  # the counter still ends at b's range: its tail is given back
    with HBaseDictionary(host, port, name) as c:
        assert int(c.encode_many(["<http://ex.org/c>"])[0]) == 13
        with pytest.raises(KeyError):
            c.decode_many([3])


def test_layout_rows_and_hashed_long_terms(table: tuple[str, int, str]) -> None:
    host, port, name = table
    long_term = '"' + "x" * 2000 + '"'
    with HBaseDictionary(host, port, name) as d:
        ids = d.encode_many(["<http://ex.org/s>", long_term]).tolist()
    conn = happybase.Connection(host, port)
    try:
        t = conn.table(name)
        assert t.row(b"<http://ex.org/s>", columns=[T_ID]) == {T_ID: ids[0].to_bytes(8, "big")}
        hashed = b"h:" + hashlib.sha256(long_term.encode()).digest()
        assert t.row(hashed, columns=[T_ID]) == {T_ID: ids[1].to_bytes(8, "big") + long_term.encode()}
        assert t.row(ids[1].to_bytes(8, "big"), columns=[b"i:term"]) == {b"i:term": long_term.encode()}
        assert int.from_bytes(t.row(COUNTER_ROW, columns=[NEXT_ID])[NEXT_ID], "big") == 2
        # a forged hashed row (what a SHA-256 collision would look like) is detected
        t.put(hashed, {T_ID: ids[1].to_bytes(8, "big") + b'"another long term"'})
    finally:
        conn.close()
    with HBaseDictionary(host, port, name) as d, pytest.raises(RuntimeError, match="collision"):
        d.lookup_many([long_term])


def test_terms_starting_with_the_hash_prefix_are_hashed(table: tuple[str, int, str]) -> None:
    host, port, name = table
    odd = "h:" + "\x00" * 32  # not N-Triples, but a key must never pass for a hashed row
    with HBaseDictionary(host, port, name) as d:
        ids = d.encode_many([odd, "h:", "<h:x>"])
        assert d.decode_many(ids) == [odd, "h:", "<h:x>"]
    with HBaseDictionary(host, port, name) as d:
        assert d.lookup_many([odd, "h:", "<h:x>"]).tolist() == ids.tolist()


def test_batched_requests(emulator: HBaseThriftEmulator) -> None:
    name = fresh_table()
    calls = emulator.handler.calls
    try:
        with HBaseDictionary("127.0.0.1", emulator.port, name, batch_size=1000) as d:
            before = calls.copy()
            terms = _terms(2500)
            ids = d.encode_many(terms)
            assert calls["getRowsWithColumns"] - before["getRowsWithColumns"] == 3  # one read per batch
            assert calls["mutateRows"] - before["mutateRows"] == 3  # one id -> term write per batch
            assert calls["checkAndPut"] - before["checkAndPut"] == 2500  # one per new term
            assert calls["atomicIncrement"] - before["atomicIncrement"] <= 6
            before = calls.copy()
            with HBaseDictionary("127.0.0.1", emulator.port, name, batch_size=1000) as r:
                assert r.decode_many(ids) == terms
                assert r.lookup_many(terms).tolist() == ids.tolist()
                assert r.encode_many(terms).tolist() == ids.tolist()  # all cached now
            assert calls["getRowsWithColumns"] - before["getRowsWithColumns"] == 6
            assert calls["checkAndPut"] - before["checkAndPut"] == 0
    finally:
        drop_table(emulator.address, name)


# ------------------------------------------------------------------ URIs, tables, errors


def test_uri_parsing() -> None:
    assert parse_hbase_uri("hbase://h:9091/terms") == {"host": "h", "port": 9091, "table": "terms"}
    assert parse_hbase_uri("hbase://h/terms?prefix=ls&block=16&timeout=500") == {
        "host": "h",
        "port": 9090,
        "table": "terms",
        "table_prefix": "ls",
        "block": 16,
        "timeout_ms": 500,
    }
    for bad in ("hbase://h:9090", "hbase://h:9090/", "hbase:///t", "hbase://h/a/b", "hbase://h/t?nosuch=1"):
        with pytest.raises(ValueError):
            parse_hbase_uri(bad)
    with pytest.raises(ValueError):
        parse_hbase_uri("hbase://h/t?block=many")


def test_open_dictionary_with_prefix(gateway: str) -> None:
    name = fresh_table()
    d = open_dictionary(f"hbase://{gateway}/{name}?prefix=lsx&block=16")
    try:
        assert isinstance(d, HBaseDictionary)
        assert d.encode_many(["<http://ex.org/a>"]).tolist() == [1]
        host, port = split_address(gateway)
        conn = happybase.Connection(host, port)
        try:
            assert f"lsx_{name}".encode() in conn.tables()
        finally:
            conn.close()
    finally:
        d.close()
        d.close()  # idempotent
        drop_table(gateway, f"lsx_{name}")


def test_table_without_the_families_is_refused(table: tuple[str, int, str]) -> None:
    host, port, name = table
    conn = happybase.Connection(host, port)
    try:
        conn.create_table(name, {"other": {}})
    finally:
        conn.close()
    with pytest.raises(ValueError, match="column families t and i"):
        HBaseDictionary(host, port, name)


def test_unreachable_gateway() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectionError, match="HBase Thrift gateway"):
        HBaseDictionary("127.0.0.1", port, "t", timeout_ms=2000)


# ------------------------------------------------------------------ the emulator itself


def test_emulator_follows_hbase_semantics(emulator: HBaseThriftEmulator) -> None:
    import Hbase_thrift as hb  # the client-side IDL module happybase loads

    host, port = split_address(emulator.address)
    conn = happybase.Connection(host, port)
    name = fresh_table()
    try:
        conn.create_table(name, {"t": {}})
        t = conn.table(name)
        client = conn.client
        assert client.checkAndPut(t.name, b"r", b"t:c", None, hb.Mutation(column=b"t:c", value=b"1"), {})
        assert not client.checkAndPut(t.name, b"r", b"t:c", None, hb.Mutation(column=b"t:c", value=b"2"), {})
        assert client.checkAndPut(t.name, b"r", b"t:c", b"1", hb.Mutation(column=b"t:c", value=b"3"), {})
        assert t.row(b"r") == {b"t:c": b"3"}
        assert t.counter_inc(b"n", b"t:k", 5) == 5 and t.counter_inc(b"n", b"t:k", -2) == 3
        # happybase leaves Thrift strings undecoded: messages are bytes
        with pytest.raises(hb.IOError) as e1:
            t.counter_inc(b"r", b"t:c")
        assert b"not a long" in e1.value.message
        with pytest.raises(hb.IOError) as e2:
            t.put(b"r", {b"zz:q": b"1"})
        assert b"NoSuchColumnFamily" in e2.value.message
        with pytest.raises(hb.IllegalArgument) as e3:
            t.put(b"", {b"t:q": b"1"})
        assert b"Row length" in e3.value.message
        t.put(b"r2", {b"t:a": b"1", b"t:b": b"2"})
        assert t.rows([b"r2", b"missing", b"r"], columns=[b"t:a", b"t"]) == [
            (b"r2", {b"t:a": b"1", b"t:b": b"2"}),
            (b"r", {b"t:c": b"3"}),
        ]
        t.delete(b"r2", columns=[b"t:a"])
        assert t.row(b"r2") == {b"t:b": b"2"}
        with pytest.raises(TApplicationException) as e4:
            list(t.scan())
        assert b"does not implement scannerOpenWithScan" in e4.value.message
    finally:
        conn.close()
        drop_table(emulator.address, name)
