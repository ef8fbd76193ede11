"""``run --zk --ingest meta``: the owner hands the leader a meta body (event times, sizes,
the body's stream log record) and sends the terms to the containers itself.

Real :class:`StreamIngest` objects on both sides (the hop between them as in
``test_owner_offsets``), the leader's :class:`LiveEngine` worker deciding on the elements it
holds by reference (:class:`RefRows`), the owner's sender numbering them by its decisions;
the leader's fan-out keeps them as :class:`Deferred` rows and reads their triples from the
owner's stream log (:meth:`RemoteEngine._resolve`) only when a backlog needs them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from linkstream.cluster.decisions import DecisionPoller
from linkstream.cluster.fanout import Deferred, Fanout, table
from linkstream.cluster.remote_engine import RemoteEngine
from linkstream.cluster.streamlog import BodyStore
from linkstream.engine.embedded import Engine
from linkstream.engine.live.batchpush import RefRows
from linkstream.engine.live.runtime import LiveEngine
from linkstream.rdf.dictionary import MemoryDictionary
from tests.cluster.test_owner_offsets import S1, _el, _Hop, _leader, _owner, _Sender

EX = "http://example.org/"


class _RefEngine(Engine):
    """An embedded engine that records what the worker hands it (the leader's engine routes
    references; it never reads their triples)."""

    def __init__(self) -> None:
        super().__init__()
        self.got: list[tuple[str, int, Any]] = []

    def ingest(self, stream: str, t: int, ids: Any) -> None:
        self.got.append((stream, t, ids))


def _body(k: int, n: int) -> list[tuple[int, list[tuple[str, str, str]]]]:
    """Element ``k`` of ``n`` triples, two of them equal (the worker would deduplicate them)."""
    t, triples = _el(1000 + 100 * k, f"v{k}")
    extra = [(f"<{EX}x{k}>", f"<{EX}p{i}>", f'"{k}-{i}"') for i in range(n)]
    return [(t, triples + extra + extra[:1])]


def test_the_leader_decides_on_meta_bodies_and_reads_triples_only_for_a_backlog(tmp_path: Path) -> None:
    engine = _RefEngine()
    live = LiveEngine(engine, idle_ms=None).start()
    leader = _leader(live)
    leader.meta = True
    hop = _Hop(leader)
    sent_bodies: list[dict[str, Any]] = []
    post = hop.post

    def spy(url: Any, content: bytes, headers: dict[str, str]) -> Any:
        sent_bodies.append(msgpack.unpackb(content, raw=False))
        return post(url, content, headers)

    hop.post = spy  # type: ignore[method-assign]
    owner = _owner(hop, tmp_path)
    owner.meta = True
    owner._poller = poller = DecisionPoller(
        owner._undecided,
        lambda polls: {i: (*leader.decisions(i, e, a), "run") for i, e, a in polls},
    )
    raw = [_body(0, 2) + _body(1, 3), _body(2, 0) + _body(3, 4) + _body(4, 1)]
    try:
        for body in raw:
            flags, error = owner.push_elements(S1, body, key=None)
            assert (flags, error) == ([True] * len(body), None)
        live.flush()
        sender = owner.sender
        assert isinstance(sender, _Sender)
        for _ in range(100):  # the decisions come with the polls
            if len(sender.tail) == 0:
                break
            poller._stop.wait(0.05)
    finally:
        poller.close()
        live.close()
        assert owner.stream_log is not None
        owner.stream_log.close()
    elements = [el for body in raw for el in body]
    # the hand-offs carried no terms and no triples
    assert [sorted(b) for b in sent_bodies] == [
        sorted(["stream", "owner", "epoch", "offset", "key", "record", "t", "n"])
    ] * 2
    assert [b["n"] for b in sent_bodies] == [[len(tr) for _, tr in body] for body in raw]
    # the leader's worker handed references, in order, to its engine
    assert [(s, t) for s, t, _ in engine.got] == [(S1, t) for t, _ in elements]
    refs = [ids for _, _, ids in engine.got]
    assert all(isinstance(r, RefRows) for r in refs)
    assert [len(r) for r in refs] == [len(tr) for _, tr in elements]
    assert live.applied_count(S1) == len(elements)
    # the owner sent every element itself, with its terms, numbered by the worker's counts
    sent = [
        (first + i, t, [tuple(x) for x in rows.strings()])
        for first, els in sender.runs
        for i, (t, rows) in enumerate(els)
    ]
    assert sent == [(n, t, list(tr)) for n, (t, tr) in enumerate(elements)]

    # the leader's fan-out keeps references; a backlog (sync, recompute, checkpoint) reads them
    remote = RemoteEngine.__new__(RemoteEngine)
    remote.dictionary = MemoryDictionary()
    remote.bodies = BodyStore(str(tmp_path))
    fan = Fanout(
        "run",
        [S1],
        [None],
        remote.dictionary,
        is_dead=lambda c: False,
        on_wait=lambda: None,
        on_drop=lambda c: None,
    )
    fan.owners_send = True
    fan.resolver = remote._resolve
    for n, r in enumerate(refs):
        fan.ingest(0, elements[n][0], Deferred(len(r), r.ref), n)
    fan.flush()
    assert all(row[3].ids is None for row in fan._backlog[0]) and fan.read_back == 0  # nothing read yet
    rows, at = fan.history([0], [fan.counts()])
    assert fan.read_back == len(elements)
    meta, triples = table(rows)
    assert at == [len(elements)] and meta[1].tolist() == [t for t, _ in elements]
    decoded = np.array(remote.dictionary.decode_many(triples.reshape(-1)), dtype=object).reshape(-1, 3)
    cuts = np.cumsum([0, *meta[2].tolist()])
    got = [sorted(map(tuple, decoded[a:b].tolist())) for a, b in zip(cuts[:-1], cuts[1:])]
    assert got == [sorted(set(tr)) for _, tr in elements]  # each element's triples, deduplicated


def test_a_meta_body_is_checked_and_refused_by_a_leader_that_is_not_meta() -> None:
    live = LiveEngine(_RefEngine(), idle_ms=None).start()
    leader = _leader(live)
    doc = {
        "stream": S1,
        "owner": "o",
        "epoch": 7,
        "offset": 0,
        "key": None,
        "record": 0,
        "t": [1000],
        "n": [2],
    }
    try:
        status, answer = leader.serve(doc)
        assert status == 400 and "not --ingest meta" in answer["error"]
        leader.meta = True
        for bad in ({"t": [1000, 1100]}, {"t": ["1000"]}, {"n": [-1]}, {"record": "0"}):
            status, answer = leader.serve(doc | bad)
            assert status == 400 and answer["error"].startswith("ingest body:"), (bad, answer)
        assert live.applied_count(S1) == 0
        assert leader.serve(doc)[0] == 200
        live.flush()
        assert live.applied_count(S1) == 1
    finally:
        live.close()
