"""``run --zk --ingest direct``, step 1: owners' stream logs and the leader's references.

Real files: a :class:`StreamLog` (the owner's side) writes bodies in their hand-off form,
a torn tail is cut off when the file is opened again, and a :class:`BodyStore` (a new
leader's side) reads the elements an ingest log reference names.  Then a live engine
with an ingest log takes bodies whose elements carry references: the log holds no terms,
and a new engine recovering that log through the stream logs reports exactly what the
first one did.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgpack
import pytest

from linkstream.cluster import streamlog
from linkstream.cluster.ingest import (
    pack_elements,
    split_elements,
    stream_key,
    unpack_elements,
    with_refs,
)
from linkstream.cluster.streamlog import (
    BodyStore,
    StreamLog,
    log_path,
    oldest_references,
    prune,
    segments,
)
from linkstream.engine.embedded import Engine
from linkstream.engine.live.checkpoint import Checkpointer
from linkstream.engine.live.ingestlog import IngestLog, LogRecord, decode_triples, scan_records
from linkstream.engine.live.runtime import LiveEngine
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store.checkpoints import open_checkpoints

S = "http://ex.org/s"
QUERY = """PREFIX ex: <http://ex.org/>
REGISTER QUERY q AS SELECT ?x ?y FROM STREAM <http://ex.org/s> [RANGE 2s STEP 1s]
WHERE { ?x ex:p ?y }"""


def _elements(first: int, n: int) -> list[tuple[int, list[tuple[str, str, str]]]]:
    return [
        (1000 * (first + k), [(f"<http://ex.org/a{first + k}>", "<http://ex.org/p>", f'"{k}"')])
        for k in range(n)
    ]


def _body(epoch: int, offset: int, record: int, elements: list) -> dict:
    return {"stream": S, "epoch": epoch, "offset": offset, "record": record, **pack_elements(elements)}


def test_stream_log_bodies_read_back_and_a_torn_tail_is_cut(tmp_path: Path) -> None:
    log = StreamLog(str(tmp_path))
    for k in range(3):
        q = log.reserve(S, 7)
        assert q == k
        log.append(S, 7, 2 * k, msgpack.packb(_body(7, 2 * k, q, _elements(2 * k, 2))), q)
    with pytest.raises(ValueError):
        log.append(S, 7, 6, b"x", 1)  # not the next record
    log.close()
    path = log_path(str(tmp_path), S, 7)
    with open(path, "ab") as f:
        f.write(b"\x05\x00\x00\x00torn")  # a crash in the middle of a write
    again = StreamLog(str(tmp_path))
    assert again.reserve(S, 7) == 3  # numbering goes on after the good records
    again.append(S, 7, 6, msgpack.packb(_body(7, 6, 3, _elements(6, 1))), 3)
    again.close()
    assert [r.header["q"] for r in scan_records(Path(path).read_bytes())] == [0, 1, 2, 3]

    store = BodyStore(str(tmp_path))
    rows = store.body(S, 7, 1)[1][1]
    assert rows.strings() == [["<http://ex.org/a3>", "<http://ex.org/p>", '"1"']]
    rec = LogRecord(9, "push", {"k": "push", "s": S, "e": 7, "r": 3, "j": 0, "f": "ref"}, b"")
    assert store.resolve(rec).strings()[0][0] == "<http://ex.org/a6>"
    with pytest.raises(LookupError):
        decode_triples(rec)  # a reference without a resolver is an error, not an empty element
    with pytest.raises(LookupError):
        store.resolve(LogRecord(9, "push", {**rec.header, "r": 4}, b""))
    with pytest.raises(LookupError):
        store.resolve(LogRecord(9, "push", {**rec.header, "e": 8}, b""))


def test_a_body_store_reads_only_what_a_stream_log_gained_since(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--ingest meta``: the leader reads bodies of a live stream log (a sync's backlog) again
    and again; each read scans the bytes appended since the last one, not the whole file."""
    log = StreamLog(str(tmp_path))
    store = BodyStore(str(tmp_path))
    path = log_path(str(tmp_path), S, 7)
    for k in range(4):
        q = log.reserve(S, 7)
        log.append(S, 7, k, msgpack.packb(_body(7, k, q, _elements(k, 1))), q)
        assert store.body(S, 7, k)[0][1].strings()[0][0] == f"<http://ex.org/a{k}>"
        assert store._read[path] == os.path.getsize(path)
    assert sorted(store._index[path]) == [0, 1, 2, 3]
    log.close()
    # a store that keeps the newest two reads an older record from the file again
    monkeypatch.setattr(streamlog, "INDEX_KEEP", 2)
    small = BodyStore(str(tmp_path))
    assert small.body(S, 7, 3)[0][0] == 3000 and sorted(small._index[path]) == [2, 3]
    assert small.body(S, 7, 0)[0][0] == 0 and sorted(small._index[path]) == [0, 2, 3]


def test_an_owner_splits_its_own_body_as_the_leader_unpacks_it() -> None:
    """The leader-as-owner takes its packed parts apart without a second check: the same
    elements the leader gets from the wire (times, triples, shared term table)."""
    els = _elements(0, 3) + [(3000, [])] + _elements(4, 2)
    doc = _body(7, 0, 0, els)
    wire = msgpack.unpackb(msgpack.packb(doc, use_bin_type=True), raw=False)
    mine, theirs = split_elements(doc), unpack_elements(wire)
    assert [t for t, _ in mine] == [t for t, _ in theirs] == [t for t, _ in els]
    assert [r.strings() for _, r in mine] == [r.strings() for _, r in theirs]
    assert [r.strings() for _, r in mine] == [[list(tr) for tr in trs] for _, trs in els]
    assert len({id(r.terms) for _, r in mine}) == 1  # one term table for the body


def test_segments_are_read_across_and_pruned_before_the_oldest_reference(tmp_path: Path) -> None:
    state = str(tmp_path)
    log = StreamLog(state, segment_bytes=1)  # every body closes its segment
    for k in range(4):
        q = log.reserve(S, 7)
        log.append(S, 7, k, msgpack.packb(_body(7, k, q, _elements(k, 1))), q)
    log.close()
    assert [(e, first) for e, first, _ in segments(state, S)] == [(7, 0), (7, 1), (7, 2), (7, 3), (7, 4)]
    again = StreamLog(state, segment_bytes=1)  # numbering goes on in the last (empty) segment
    assert again.reserve(S, 7) == 4
    again.append(S, 7, 4, msgpack.packb(_body(7, 4, 4, _elements(4, 1))), 4)
    again.close()
    store = BodyStore(state)
    assert [store.body(S, 7, q)[0][0] for q in range(5)] == [0, 1000, 2000, 3000, 4000]

    other = "http://ex.org/other"
    assert prune(state, {S: (7, 2), other: (1, 0)}) == 2  # records 0 and 1 are before (7, 2)
    assert [first for _, first, _ in segments(state, S)] == [2, 3, 4, 5]
    fresh = BodyStore(state)
    assert [fresh.body(S, 7, q)[0][0] for q in range(2, 5)] == [2000, 3000, 4000]
    with pytest.raises(LookupError):
        fresh.body(S, 7, 1)
    assert prune(state, {S: (9, 0)}) == 3  # never the last segment
    assert [first for _, first, _ in segments(state, S)] == [5]


def test_a_checkpoint_prunes_the_stream_logs_and_a_recovery_still_reports_the_same(tmp_path: Path) -> None:
    """After a checkpoint the ingest log's tail alone names bodies: the segments before its
    oldest reference go, and an engine recovering checkpoint + tail reports what the first did."""
    state = str(tmp_path)

    class Pruning(Checkpointer):
        def _truncated(self) -> None:
            self.pruned = prune(state, oldest_references(self.log.log_dir))

    owner = StreamLog(state, segment_bytes=1)
    first = _live()
    ingest = IngestLog(state)
    ckpts = open_checkpoints(str(tmp_path / "checkpoints"))
    first.recover(ingest, checkpoints=ckpts)
    ck = Pruning(first, ingest, ckpts, 0)
    first.register(QUERY, "q")

    def push(k: int) -> None:
        elements = _elements(2 * k, 2)
        q = owner.reserve(S, 5)
        body = _body(5, 2 * k, q, elements)
        owner.append(S, 5, 2 * k, msgpack.packb(body), q)
        assert first.push_many(S, with_refs(unpack_elements(body), 5, q)) == ([True, True], None)

    for k in range(3):
        push(k)
    first.sync()
    assert ck.checkpoint() is not None
    assert not hasattr(ck, "pruned") or ck.pruned == 0  # nothing referred to yet after the cut
    for k in range(3, 6):
        push(k)
    first.sync()
    assert ck.checkpoint() is not None
    assert ck.pruned == 3  # bodies 0-2: covered by the checkpoint, no longer referred to
    for k in range(6, 8):
        push(k)
    first.advance_to(15000)
    first.sync()
    first.close()
    ingest.close()
    owner.close()
    assert [f for _, f, _ in segments(state, S)][0] == 3
    assert oldest_references(os.path.join(state, "log"))[S] == (
        5,
        3,
    )  # the log keeps all after the oldest kept checkpoint

    want = _unlogged_report(8, 16000)
    assert want and any("a15" in line for line in want), want

    second = _live()
    again = IngestLog(state)
    again.resolve = BodyStore(state).resolve
    second.recover(again, checkpoints=open_checkpoints(str(tmp_path / "checkpoints")))
    assert second.status()["streams"][S]["elements"] == 16
    assert _report_at(second, 16000) == want
    second.close()
    again.close()


def _live() -> LiveEngine:
    return LiveEngine(Engine(MemoryDictionary(), default_step=1000), idle_ms=None).start()


def _unlogged_report(pushes: int, t: int) -> tuple[str, ...]:
    """The report at ``t`` of an engine without any log fed the first ``pushes`` pushes."""
    oracle = _live()
    oracle.register(QUERY, "q")
    for k in range(pushes):
        oracle.push_many(S, _elements(2 * k, 2))
    oracle.advance_to(t - 1000)
    want = _report_at(oracle, t)
    oracle.close()
    return want


def _report_at(live: LiveEngine, t: int) -> tuple[str, ...]:
    """The lines of ``q``'s report at ``t`` (the engine stands before it)."""
    sub = live.subscribe("q")
    live.advance_to(t)
    while True:
        at, lines = sub.get_report(timeout=30)
        if at == t:
            return lines


def test_the_ingest_log_keeps_references_and_a_recovery_resolves_them(tmp_path: Path) -> None:
    state = str(tmp_path)
    owner = StreamLog(state)
    first = _live()
    ingest = IngestLog(state)
    first.recover(ingest)  # attaches the (empty) log
    first.register(QUERY, "q")
    for k in range(4):  # four bodies of two elements, as an owner hands them over
        elements = _elements(2 * k, 2)
        q = owner.reserve(S, 5)
        body = _body(5, 2 * k, q, elements)
        owner.append(S, 5, 2 * k, msgpack.packb(body), q)
        flags, error = first.push_many(S, with_refs(unpack_elements(body), 5, q))
        assert flags == [True, True] and error is None
    first.advance_to(7000)
    first.sync()
    first.close()
    ingest.close()
    owner.close()

    segs = sorted(f for f in os.listdir(os.path.join(state, "log")) if f.endswith(".log"))
    recs = [r for f in segs for r in scan_records(Path(state, "log", f).read_bytes())]
    pushes = [r for r in recs if r.kind == "push"]
    assert len(pushes) == 8 and all(r.header["f"] == "ref" and r.payload == b"" for r in pushes)

    # the same pushes fed to an engine without any log: the report at 8000 to compare with
    want = _unlogged_report(4, 8000)
    assert want and any("a7" in line for line in want), want

    second = _live()
    again = IngestLog(state)
    again.resolve = BodyStore(state).resolve
    assert second.recover(again) == len(recs)
    assert second.status()["streams"][S]["elements"] == 8
    assert _report_at(second, 8000) == want  # the terms came back from the stream log
    second.close()
    again.close()

    third = _live()
    bare = IngestLog(state)  # no resolver: the replay fails loudly instead of losing elements
    with pytest.raises(LookupError):
        third.recover(bare)
    third.close()
    bare.close()


def assert_direct(state: Path, streams: list[str]) -> None:
    """A ``run --zk --ingest direct`` cluster's state directory: every stream has stream
    log files, and the ingest log's push records hold references, not terms (for the live
    tests in ``tests/cluster``)."""
    for iri in streams:
        files = list((state / "streams" / stream_key(iri)).glob("*.log"))
        assert files and all(f.stat().st_size for f in files), (iri, files)
    kinds: dict[str, int] = {}
    for seg in sorted((state / "log").glob("*.log")):
        for rec in scan_records(seg.read_bytes()):
            if rec.kind == "push":
                kinds[rec.header["f"]] = kinds.get(rec.header["f"], 0) + 1
    assert kinds.get("ref", 0) > 0 and set(kinds) == {"ref"}, kinds


def test_direct_ingest_needs_a_shared_state_directory(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from linkstream.cli.main import main
    from linkstream.cluster.streamlog import set_ingest

    def service(state_dir: str | None, checkpoints: str | None = None) -> SimpleNamespace:
        return SimpleNamespace(
            state_dir=state_dir, checkpoints=checkpoints, ingest=SimpleNamespace(stream_log=None)
        )

    assert set_ingest(service(None), "leader") is None
    assert "needs --state-dir" in str(set_ingest(service(None), "direct"))
    shipped = service(str(tmp_path), "s3://bucket/prefix")
    assert "--checkpoints inside --state-dir" in str(set_ingest(shipped, "direct"))
    local = service(str(tmp_path), f"file://{tmp_path}/checkpoints")
    assert set_ingest(local, "direct") is None and isinstance(local.ingest.stream_log, StreamLog)
    local.ingest.stream_log.close()
    assert main(["run", "--ingest", "direct", "--port", "0"]) != 0  # embedded run has no owners
