"""``recompute`` / ``recomputed`` messages and the scratch evaluation, without processes.

The container's half of failover (:mod:`linkstream.containers.recovery`) must give, from
the driver's retained history cut at the previous and the owed tick, exactly the lines
the query's own container would have written -- for RStream and for IStream / DStream,
whose reports are differences to the previous tick.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, cast

import msgpack
import numpy as np
import pytest

from linkstream.containers.messages import Elements, Recompute, Recomputed
from linkstream.containers.protocol import VERSION, ProtocolError, decode, encode
from linkstream.containers.recovery import recompute
from linkstream.containers.replica import RunReplica
from linkstream.containers.transport import Sender
from linkstream.engine.embedded import Engine
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.scheduler.runs import RunSpec

S = "http://example.org/s"
HORIZON = 4000  # RANGE + STEP of the widest window below
QUERIES = {
    "r": """SELECT ?s ?o FROM STREAM <http://example.org/s> [RANGE 3000ms STEP 1000ms]
WHERE { ?s <http://example.org/p> ?o }""",
    "i": """PREFIX : <http://example.org/w#>
REGISTER ISTREAM <i> AS SELECT ?s FROM NAMED WINDOW :w ON <http://example.org/s> [RANGE PT3S STEP PT1S]
WHERE { WINDOW :w { ?s <http://example.org/p> ?o } }""",
    "d": """PREFIX : <http://example.org/w#>
REGISTER DSTREAM <d> AS SELECT ?s FROM NAMED WINDOW :w ON <http://example.org/s> [RANGE PT2S STEP PT1S]
WHERE { WINDOW :w { ?s <http://example.org/p> ?o } }""",
    "n": """SELECT (COUNT(?s) AS ?n) FROM STREAM <http://example.org/s> [RANGE 3000ms STEP 1000ms]
WHERE { ?s <http://example.org/p> ?o }""",
}


def test_recompute_messages_round_trip() -> None:
    meta = np.array([[0, 0], [1000, 1500], [1, 1]], dtype=np.int64)
    triples = np.array([[1, 2, 3], [4, 2, 3]], dtype=np.int64)
    els = Elements("r1", np.array([1, 2, 3, 4]), ["<a>", "<p>", '"x"', "<b>"], meta, triples)
    message = Recompute("r1", 5, ["q1", "q2"], [2000, 3000], [1, 2], els)
    got = decode([bytes(memoryview(f)) for f in encode(message)])
    assert isinstance(got, Recompute)
    assert (got.run, got.id, got.queries, got.ticks, got.at) == ("r1", 5, ["q1", "q2"], [2000, 3000], [1, 2])
    assert got.elements.terms == els.terms and np.array_equal(got.elements.triples, triples)
    answer = Recomputed("r1", "oc-2", 5, 3000, {"q1": ['{"a": 1}'], "q2": []}, "", {4000: {"q1": ["x"]}})
    back = decode([bytes(memoryview(f)) for f in encode(answer)])
    assert isinstance(back, Recomputed)  # (lines decode as JoinedLines, an empty report as ())
    assert back == replace(answer, lines={n: tuple(v) for n, v in answer.lines.items()})


def _recompute_frames(ticks: list[int], at: list[int]) -> list[bytes]:
    header = {
        "v": VERSION,
        "kind": "recompute",
        "run": "r",
        "id": 1,
        "queries": ["q"],
        "ticks": ticks,
        "at": at,
    }
    header.update(nt=0, k=1, n=0)
    return [
        msgpack.packb(header),
        msgpack.packb([]),
        b"",
        np.array([0, 5, 0], dtype=np.int64).tobytes(),
        b"",
    ]


@pytest.mark.parametrize(
    ("ticks", "at"),
    [([2000, 1000], [0, 1]), ([1000], [2]), ([1000, 2000], [1, 0]), ([], []), ([1000], [0, 1])],
)
def test_malformed_recompute_requests_are_refused(ticks: list[int], at: list[int]) -> None:
    with pytest.raises(ProtocolError, match="recompute"):
        decode(_recompute_frames(ticks, at))


def _spec() -> RunSpec:
    return RunSpec("r1", "tcp://127.0.0.1:1", "http://localhost/", 1000, (), (S,), (HORIZON,), {"t": "q"})


def test_scratch_evaluation_equals_the_queries_own_engine() -> None:
    """Every tick of a run, recomputed from the history the driver keeps, equals the engine
    that ran the queries all along -- RStream, IStream, DStream and an aggregate."""
    driver = MemoryDictionary()
    embedded = Engine()
    for name, text in QUERIES.items():
        embedded.register(parse_continuous(text, default_name=name))
    replica = RunReplica(_spec())  # holds no query: the dead container's are recomputed here
    rows: list[tuple[int, np.ndarray]] = []  # (t, triples in driver ids): the driver's backlog
    cuts: list[tuple[int, int]] = []  # (c, elements before it)
    rng = np.random.default_rng(7)
    compared = 0
    answers: dict[int, dict[str, list[str]]] = {}  # per report time, the request's answer
    for step in range(12):
        for _ in range(int(rng.integers(0, 4))):
            t = 1000 * step + int(rng.integers(0, 1000))
            subj = int(rng.integers(0, 5))
            terms = [f"<http://example.org/x{subj}>", "<http://example.org/p>", f'"{step}"']
            embedded.ingest(S, t, embedded.dictionary.encode_many(terms).reshape(1, 3))
            rows.append((t, driver.encode_many(terms).reshape(1, 3)))
        c = 1000 * (step + 1)
        want = embedded.tick(c, list(QUERIES))
        cuts.append((c, len(rows)))
        # The driver's backlog after pruning: elements a window opened now can still read.
        first = next((k for k, (t, _) in enumerate(rows) if t >= c - HORIZON), len(rows))
        window = cuts[-2:]
        kept = rows[first : window[-1][1]]
        meta = np.array([[0] * len(kept), [t for t, _ in kept], [1] * len(kept)], dtype=np.int64)
        triples = np.concatenate([tr for _, tr in kept]) if kept else np.empty((0, 3), dtype=np.int64)
        ids = np.unique(triples)
        els = Elements("r1", ids, driver.decode_many(ids) if len(ids) else [], meta.reshape(3, -1), triples)
        at = [max(0, n - first) for _, n in window]
        message = Recompute("r1", step, list(QUERIES), [x for x, _ in window], at, els)
        got = recompute(replica, QUERIES, message, "oc-2")
        assert got.error == "" and got.c == c and not got.later
        for name in QUERIES:
            assert sorted(got.lines[name]) == sorted(want[name]), (name, c)
            compared += len(want[name])
        answers[c] = got.lines
    assert compared > 20
    assert not replica.engine.queries  # the replica itself is untouched
    # A batch of ticks in one pass (the live driver sends several with the same elements):
    # the owed tick's lines and every later one's equal, byte for byte, the requests of one
    # tick each above.
    for owe in (4000, 9000):
        first = next((k for k, (t, _) in enumerate(rows) if t >= owe - 1000 - HORIZON), len(rows))
        kept = rows[first:]
        meta = np.array([[0] * len(kept), [t for t, _ in kept], [1] * len(kept)], dtype=np.int64)
        triples = np.concatenate([tr for _, tr in kept]) if kept else np.empty((0, 3), dtype=np.int64)
        ids = np.unique(triples)
        els = Elements("r1", ids, driver.decode_many(ids) if len(ids) else [], meta.reshape(3, -1), triples)
        batch = [(c, n - first) for c, n in cuts if c >= owe - 1000]
        ticks = [c for c, _ in batch]
        message = Recompute("r1", 99, list(QUERIES), ticks, [n for _, n in batch], els, owe=owe)
        message = decode([bytes(memoryview(f)) for f in encode(message)])
        assert isinstance(message, Recompute) and message.owe == owe
        got = recompute(replica, QUERIES, message, "oc-2")
        assert got.error == "" and got.c == owe and got.lines == answers[owe]
        assert sorted(got.later) == [c for c in ticks if c > owe]
        for c, lines in got.later.items():
            assert lines == answers[c], c


def test_a_query_the_container_cannot_read_is_an_error_answer() -> None:
    replica = RunReplica(_spec())
    els = Elements("r1", np.empty(0, dtype=np.int64), [], np.empty((3, 0), dtype=np.int64), np.empty((0, 3)))
    got = recompute(replica, {}, Recompute("r1", 1, ["nope"], [1000], [0], els), "oc-1")
    assert got.lines == {} and "unknown queries nope" in got.error


class _Peer:
    """A container's data-plane socket, as the fan-out offers it messages."""

    def __init__(self, offer_frames: Callable[[list[Any], float], bool]) -> None:
        self.offer_frames = offer_frames


@pytest.mark.parametrize("mode", ["new", "older", "named"])
def test_a_batch_of_owed_ticks_on_a_new_and_an_older_container(mode: str) -> None:
    """The driver's :class:`Recovery` over a real fan-out backlog asks the only live container
    for a dead one's reports, the live driver's way: ticks in batches of three, sent after the
    same elements.  A container of this version answers a batch's owed ticks in one request
    (``owe``, ``later``); an older one (its decoder ignores ``owe``, its answer has no
    ``caps``) answers the batch's last tick only: the driver sees that in the answer's header
    and asks it one tick per request.  ``named``: the new owner was named to answer ``i``
    before it announced it ready and answers it itself from each batch's second tick (its
    result listed ``i`` as missing at the first, ``from`` the second): ``i`` is recomputed
    for the first tick only, the other queries over the whole batch.  Every owed report
    equals the engine that ran the queries all along."""
    from linkstream.cluster.fanout import Fanout
    from linkstream.cluster.recovery import Recovery

    older = mode == "older"
    replica = RunReplica(_spec())  # the survivor, oc-2
    embedded = Engine()
    for name, text in QUERIES.items():
        embedded.register(parse_continuous(text, default_name=name))
    driver = MemoryDictionary()
    requests: list[tuple[list[int], int]] = []
    wire: list[list[bytes]] = []  # answers on their way to the driver

    def receive(frames: list[Any], _timeout: float) -> bool:  # oc-2's data-plane socket
        message = decode([bytes(memoryview(f)) for f in frames])
        assert isinstance(message, Recompute)
        requests.append((message.ticks, message.owe))
        if older:  # (its decoder did not read "owe"; its answer says nothing of what it does)
            message = replace(message, owe=0)
        answer = recompute(replica, QUERIES, message, "oc-2")
        wire.append([bytes(memoryview(f)) for f in encode(replace(answer, caps=()) if older else answer)])
        return True

    def pump(_timeout: float) -> None:
        while wire:
            answer = decode(wire.pop(0))
            assert isinstance(answer, Recomputed)
            rec.on_answer(answer)

    fanout = Fanout(
        "r1", [S], [HORIZON], driver, is_dead=lambda c: c == "oc-1", on_wait=lambda: None, on_drop=print
    )
    fanout.peers["oc-2"] = cast(Sender, _Peer(receive))
    rec = Recovery("r1", fanout, driver, pump, 5.0, lambda c: c == "oc-1")
    rng = np.random.default_rng(11)
    seq, compared = 0, 0
    for first in range(1000, 13000, 3000):  # a batch: elements, then three ticks
        for _ in range(int(rng.integers(2, 6))):
            t = first - 1000 + int(rng.integers(0, 1000))
            terms = [f"<http://example.org/x{rng.integers(0, 4)}>", "<http://example.org/p>", f'"{t}"']
            embedded.ingest(S, t, embedded.dictionary.encode_many(terms).reshape(1, 3))
            fanout.ingest(0, t, driver.encode_many(terms).reshape(1, 3))
        fanout.flush()
        batch = [(seq + k, first + 1000 * k) for k in (1, 2, 3)]
        for s, c in batch:
            rec.record(s, c, fanout.counts())
        rec.ahead(batch)
        for k, (s, c) in enumerate(batch):
            want = {n: list(x) for n, x in embedded.tick(c, list(QUERIES)).items()}
            if mode == "named" and k:  # answered by its new owner itself
                del want["i"]
            until = {"i": s + 1} if mode == "named" and k == 0 else None
            got = rec.recompute(
                s,
                dict.fromkeys(want, "oc-1"),
                dict.fromkeys(QUERIES, frozenset({0})),
                lambda _n: "oc-2",
                until=until,
            )
            assert {n: list(x) for n, x in got.items()} == want, c
            compared += sum(map(len, want.values()))
        seq = batch[-1][0]
        fanout.prune(rec.floor(batch[-1][1]))
    assert compared > 20
    if older:  # one batch asked in one pass (answered with its last tick), then one tick per request
        assert requests[0] == ([2000, 3000, 4000], 2000)
        assert requests[1:] == [([2000], 0)] + [([c - 1000, c], 0) for c in range(3000, 14000, 1000)]
    elif mode == "named":  # i alone for the batch's first tick, the others in one pass
        assert requests == [([2000, 3000, 4000], 2000), ([2000], 0)] + [
            x
            for c in (5000, 8000, 11000)
            for x in (([c - 1000, c, c + 1000, c + 2000], c), ([c - 1000, c], 0))
        ]
    else:  # one request per batch of three ticks
        assert requests == [([2000, 3000, 4000], 2000)] + [
            ([c - 1000, c, c + 1000, c + 2000], c) for c in (5000, 8000, 11000)
        ]
