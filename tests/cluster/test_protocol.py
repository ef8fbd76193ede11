"""Driver/container messages and the container's replica, without processes or ZooKeeper."""

from __future__ import annotations

from dataclasses import replace

import msgpack
import numpy as np
import pytest

from linkstream.containers.messages import (
    Elements,
    Failed,
    Handover,
    Hello,
    Ready,
    Result,
    State,
    Subscribe,
    Tick,
    Unready,
)
from linkstream.containers.protocol import VERSION, ProtocolError, decode, encode
from linkstream.containers.replica import RunReplica
from linkstream.engine.embedded import Engine
from linkstream.engine.render import JoinedLines
from linkstream.operators.state import decode_state, encode_state
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.scheduler.runs import RunSpec

S = "http://example.org/s"
QUERY = """SELECT ?s ?o (?o + 1 AS ?n)
FROM STREAM <http://example.org/s> [RANGE 3000ms STEP 1000ms]
WHERE { ?s <http://example.org/p> ?o }"""


def test_every_message_round_trips() -> None:
    meta = np.array([[0, 1], [1000, 1500], [2, 1]], dtype=np.int64)
    triples = np.arange(9, dtype=np.int64).reshape(3, 3) + 1
    for message in (
        Elements("r1", np.array([5, 9]), ["<a>", '"x"@en'], meta, triples),
        Elements(
            "r1", np.empty(0, dtype=np.int64), [], meta, triples, sync_tick=7, streams=(0, 2), version=3
        ),
        Subscribe("r1", "oc-1", 4, (0, 3)),
        Tick("r1", 3, 4000, ["q1"], {"q1": "oc-1", "q2": "oc-2"}, {"oc-1": 2}),
        Hello("r1", "oc-1", "tcp://127.0.0.1:5000"),
        Hello("r1", "oc-1", "tcp://127.0.0.1:5000", ("owe", "kept", "from")),
        Ready("r1", "oc-1", "q1", 4),
        Unready("r1", "oc-1", "q1", 9),
        Result("r1", "oc-1", 3, 4000, {"q1": ['{"a": 1}', '{"a": 2}'], "q2": []}, ["q3"]),
        Result("r1", "oc-1", 3, 4000, {"q1": []}, ["q3", "q4"], {"q4": 5}),  # q4 answered from tick 5
        Failed("r1", "oc-1", "q1", "boom"),
        Handover("r1", "q1", "oc-2", 7),
        State("r1", "oc-1", "q1", "oc-2", 7, [], "no state"),
    ):
        frames = [bytes(memoryview(f)) for f in encode(message)]
        got = decode(frames)
        assert type(got) is type(message)
        if isinstance(message, Elements):
            assert isinstance(got, Elements)
            assert (got.run, got.terms, got.sync_tick, got.streams, got.version) == (
                message.run,
                message.terms,
                message.sync_tick,
                message.streams,
                message.version,
            )
            assert np.array_equal(got.ids, message.ids)
            assert np.array_equal(got.meta, meta) and np.array_equal(got.triples, triples)
        elif isinstance(message, Result):
            assert isinstance(got, Result)
            assert _as_lists(got) == message
        else:
            assert got == message


def test_result_lines_travel_in_one_frame_also_when_they_are_not_ascii() -> None:
    lines = {
        "q1": ['{"a": "\u00e9t\u00e9"}', '{"a": 2}'],
        "q2": [],
        "q3": ['{"s": "\u6771\u4eac"}'],
    }
    frames = encode(Result("r1", "oc-1", 3, 4000, lines, []))
    assert len(frames) == 2  # the header and one frame of every query's lines
    got = decode([bytes(memoryview(f)) for f in frames])
    assert isinstance(got, Result) and _as_lists(got) == Result("r1", "oc-1", 3, 4000, lines, [])
    assert got.lines["q1"] == lines["q1"] and len(got.lines["q3"]) == 1 and not got.lines["q2"]


@pytest.mark.parametrize("text", ["a\nb", "\u00e9\n\u6771"])  # ASCII, and not
def test_each_name_gets_its_own_block_also_among_many_empty_ones(text: str) -> None:
    """Only the reports with lines are cut out of the frame (the empty ones share one tuple):
    every name still gets exactly its block, and a name given twice its last block."""
    blocks = [text if k % 5 == 2 else "" for k in range(40)] + [text + "x", ""]
    names = [f"q{k}" for k in range(40)] + ["q2", "q7"]
    got = decode(_result(names, [len(b.encode()) for b in blocks], "".join(blocks).encode()))
    assert isinstance(got, Result) and list(got.lines) == names[:40]
    want = dict(zip(names, blocks))  # (the last of a name given twice)
    assert {n: "\n".join(v) for n, v in got.lines.items()} == want
    assert all(type(v) is tuple for n, v in got.lines.items() if not want[n])


@pytest.mark.parametrize("text", ["a\nb\nc", "é\n€"])
def test_a_result_tells_the_line_counts_of_its_blocks_or_they_are_counted_when_read(text: str) -> None:
    """``counts`` (the non-empty blocks' line counts) is what ``len`` of each report gives,
    with no count of its own; a frame without it (an older container), or with counts that
    do not fit, reads the same lines, counted when read."""
    lines = {f"q{k}": text.split("\n")[: k % 4] for k in range(12)}
    frames = encode(Result("r", "c", 1, 1000, lines))
    header = msgpack.unpackb(frames[0])
    assert header["counts"] == [len(v) for v in lines.values() if v]
    got = decode(frames)
    assert isinstance(got, Result)
    assert {n: (len(v), list(v)) for n, v in got.lines.items()} == {n: (len(v), v) for n, v in lines.items()}
    told = [v for v in got.lines.values() if v]
    assert told and all(isinstance(v, JoinedLines) and v._n == len(v) for v in told)
    for counts in (None, [1], "x", [0] * len(told)):
        h = {k: v for k, v in header.items() if k != "counts"} | (
            {} if counts is None else {"counts": counts}
        )
        old = decode([msgpack.packb(h), frames[1]])
        assert isinstance(old, Result) and old.lines == got.lines
        assert all(v._n is None for v in old.lines.values() if v)  # type: ignore[attr-defined]
        assert {n: len(v) for n, v in old.lines.items()} == {n: len(v) for n, v in lines.items()}


def _as_lists(got: Result) -> Result:
    """``got`` with each query's lines as a list (they come as one sequence each)."""
    return replace(got, lines={n: list(v) for n, v in got.lines.items()})


def _result(names: list[str], sizes: object, data: bytes) -> list[bytes]:
    header = {"v": VERSION, "kind": "result", "run": "r", "container": "c", "seq": 1, "c": 1}
    return [msgpack.packb({**header, "names": names, "sizes": sizes, "missing": []}), data]


@pytest.mark.parametrize(
    ("frames", "error"),
    [
        (_result(["a", "b"], [1], b"xy"), "result: sizes must hold one byte count >= 0 per name"),
        (_result(["a"], [-1], b""), "result: sizes must hold one byte count >= 0 per name"),
        (_result(["a"], "3", b"xyz"), "result: sizes must hold one byte count >= 0 per name"),
        (_result(["a", "b"], [1, 1], b"xyz"), "result: the lines frame holds 3 bytes, sizes say 2"),
        (_result(["a", "b"], [1, 2], b"x\xff\xfe"), "result lines of 'b' are not UTF-8"),
        (_result(["a"], [1], b"x")[:1], "result message has 1 frames, expected 2"),
    ],
)
def test_malformed_result_lines_are_named(frames: list[bytes], error: str) -> None:
    with pytest.raises(ProtocolError) as info:
        decode(frames)
    assert str(info.value) == error


@pytest.mark.parametrize(
    "frames",
    [
        [],
        [b"\xc1"],
        [msgpack.packb({"v": 99, "kind": "tick"})],
        [msgpack.packb({"v": VERSION, "kind": "nope", "run": "r"})],
        [
            msgpack.packb(
                {
                    "v": VERSION,
                    "kind": "tick",
                    "run": "r",
                    "seq": 0,
                    "c": 1,
                    "due": [],
                    "owners": {},
                    "rel": {},
                }
            )
        ],
        [msgpack.packb({"v": VERSION, "kind": "ready", "run": "r", "container": "c", "query": 5, "from": 1})],
        [
            msgpack.packb(
                {
                    "v": VERSION,
                    "kind": "result",
                    "run": "r",
                    "container": "c",
                    "seq": 1,
                    "c": 1,
                    "names": ["q"],
                    "missing": [],
                }
            )
        ],
        [
            msgpack.packb({"v": VERSION, "kind": "els", "run": "r", "nt": 0, "k": 1, "n": 1}),
            msgpack.packb([]),
            b"",
            np.array([0, 0, 2], dtype=np.int64).tobytes(),  # says 2 triples, sends 1
            np.zeros(3, dtype=np.int64).tobytes(),
        ],
        [
            msgpack.packb({"v": VERSION, "kind": "els", "run": "r", "nt": 1, "k": 0, "n": 0}),
            msgpack.packb(["<a>"]),
            np.array([0], dtype=np.int64).tobytes(),  # id 0 is "unbound", never a term
            b"",
            b"",
        ],
        [
            msgpack.packb(
                {"v": VERSION, "kind": "subscribe", "run": "r", "container": "c", "sub": 1, "streams": [-1]}
            )
        ],
    ],
)
def test_malformed_messages_raise_protocol_error(frames: list[bytes]) -> None:
    with pytest.raises(ProtocolError):
        decode(frames)


def _spec() -> RunSpec:
    return RunSpec("r1", "tcp://127.0.0.1:1", "http://localhost/", 1000, (), (S,), (4000,), {"t": "q"})


def test_replica_translates_ids_and_reports_like_the_embedded_engine() -> None:
    driver = MemoryDictionary()
    replica = RunReplica(_spec())
    # The replica allocates ids of its own first (query constants, computed values) ...
    replica.register("q", QUERY)
    embedded = Engine()
    embedded.register(parse_continuous(QUERY, default_name="q"))
    sent = np.zeros(1, dtype=bool)  # driver ids shipped so far
    lines = []
    for step in range(6):
        t = 1000 * step + 10
        terms = [
            f"<http://example.org/x{step}>",
            "<http://example.org/p>",
            f'"{step}"^^<http://www.w3.org/2001/XMLSchema#integer>',
        ]
        ids = driver.encode_many(terms).reshape(1, 3)
        embedded.ingest(S, t, embedded.dictionary.encode_many(terms).reshape(1, 3))
        # ... then the driver ships its own, some of them equal to the replica's ("1" + 1 = 2),
        # each id once: the predicate only with the first element.
        sent = np.concatenate([sent, np.zeros(len(driver) + 1 - len(sent), dtype=bool)])
        fresh = np.unique(ids)[~sent[np.unique(ids)]]
        sent[fresh] = True
        meta = np.array([[0], [t], [1]], dtype=np.int64)
        sync = 0 if step == 0 else None
        replica.apply(Elements("r1", fresh, driver.decode_many(fresh), meta, ids, sync_tick=sync))
        c = 1000 * (step + 1)
        got = replica.tick(step + 1, c, ["q"])
        want = embedded.tick(c, ["q"])
        assert sorted(got.lines["q"]) == sorted(want["q"])
        lines += got.lines["q"]
    assert lines and replica.synced and replica.last_seq == 6


def test_replica_rejects_ids_it_was_never_sent() -> None:
    replica = RunReplica(_spec())
    meta = np.array([[0], [5], [1]], dtype=np.int64)
    with pytest.raises(ProtocolError):
        replica.apply(Elements("r1", np.array([1]), ["<a>"], meta, np.array([[1, 2, 1]]), sync_tick=0))
    replica.apply(Elements("r1", np.array([1, 3]), ["<a>", "<c>"], meta, np.array([[1, 3, 1]]), sync_tick=0))
    with pytest.raises(ProtocolError):  # id 2 lies inside the ids shipped, but was never shipped
        replica.apply(Elements("r1", np.array([4]), ["<b>"], meta, np.array([[1, 2, 4]])))


def test_state_message_carries_a_snapshot_between_replicas() -> None:
    """A query's state goes from one replica through ``state`` frames into another."""
    spec = RunSpec(
        id="r1", driver="tcp://127.0.0.1:1", base="http://localhost/", default_step=1000,
        statics=(), streams=(S,), horizons=(None,), queries={"t1": "q"},
    )  # fmt: skip
    src, dst = RunReplica(spec), RunReplica(spec)
    for r in (src, dst):
        r.preplan({"q": QUERY})
    src.register("q", QUERY)
    terms = [
        "<http://example.org/a>",
        "<http://example.org/p>",
        '"1"^^<http://www.w3.org/2001/XMLSchema#integer>',
    ]
    meta = np.array([[0], [500], [1]], dtype=np.int64)
    for r in (src, dst):
        r.apply(Elements("r1", np.array([1, 2, 3]), terms, meta, np.array([[1, 2, 3]]), sync_tick=0))
        r.tick(1, 1000, ["q"] if r is src else [])
    state = src.snapshot("q")
    message = State("r1", "oc-1", "q", "oc-2", 1, encode_state(state))
    got = decode([bytes(memoryview(f)) for f in encode(message)])
    assert isinstance(got, State) and got.seq == 1 and len(got.frames) == 1 + len(state.arrays)
    assert dst.register_restored("q", QUERY, decode_state(got.frames))
    assert state.rows > 0
    # Both now answer the next report identically (the window slid by one step).
    a, b = src.tick(2, 2000, ["q"]), dst.tick(2, 2000, ["q"])
    assert a.lines == b.lines and a.lines["q"]
