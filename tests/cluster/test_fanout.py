"""The driver's element routing (:class:`Fanout`) into real replicas, over real ZeroMQ sockets."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from linkstream.cluster.fanout import Fanout
from linkstream.containers.messages import Elements
from linkstream.containers.protocol import decode
from linkstream.containers.replica import RunReplica
from linkstream.containers.transport import LOOPBACK_ANY, Receiver
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.scheduler.runs import RunSpec

S0, S1 = "http://example.org/s0", "http://example.org/s1"


class Peer:
    """A container's receiving end: a PULL socket feeding a replica of the run."""

    def __init__(self, spec: RunSpec) -> None:
        self.receiver = Receiver(LOOPBACK_ANY, rcvhwm=1000)
        self.replica = RunReplica(spec)
        self.terms_received: list[int] = []

    def drain(self) -> list[Elements]:
        got = []
        while (frames := self.receiver.recv_frames(0.3)) is not None:
            message = decode(frames)
            assert isinstance(message, Elements)
            self.replica.apply(message)
            self.terms_received += message.ids.tolist()
            got.append(message)
        return got

    def held(self, stream: str) -> list[tuple[int, tuple[str, ...]]]:
        """(time, decoded triple) of every triple the replica's buffer holds for ``stream``."""
        buf = self.replica.engine.buffers[stream]
        cols = buf.slice(buf.base, buf.end)
        terms = self.replica.engine.dictionary.decode_many(cols.T.reshape(-1)) if cols.shape[1] else []
        return [(int(t), tuple(terms[3 * i : 3 * i + 3])) for i, t in enumerate(buf.times().tolist())]


@pytest.fixture
def peers() -> Iterator[tuple[RunSpec, dict[str, Peer]]]:
    spec = RunSpec("r1", "tcp://127.0.0.1:1", "http://localhost/", 1000, (), (S0, S1), (None, None), {})
    made = {cid: Peer(spec) for cid in ("a", "b")}
    yield spec, made
    for p in made.values():
        p.receiver.close()
        p.replica.close()


def element(d: MemoryDictionary, stream: int, t: int) -> tuple[int, int, np.ndarray]:
    terms = [f"<http://example.org/obs{stream}_{t}>", "<http://example.org/p>", f'"{t}"']
    return stream, t, d.encode_many(terms).reshape(1, 3)


def make_fanout(d: MemoryDictionary, route: str) -> Fanout:
    return Fanout(
        "r1",
        [S0, S1],
        [None, None],
        d,
        is_dead=lambda _c: False,
        on_wait=lambda: None,
        on_drop=lambda _c: None,
        route=route,
    )


def subscribe(f: Fanout, peer: Peer, cid: str, streams: set[int]) -> None:
    version = peer.replica.request(frozenset(streams))
    assert version is not None
    f.subscribe(cid, version, streams, 0)


def test_elements_go_only_to_subscribers_and_a_new_subscription_brings_the_backlog(
    peers: tuple[RunSpec, dict[str, Peer]],
) -> None:
    _spec, p = peers
    d = MemoryDictionary()
    f = make_fanout(d, "streams")
    try:
        for cid, peer in p.items():
            f.add(cid, peer.receiver.endpoint, 0)
            assert len(peer.drain()) == 1 and peer.replica.synced and peer.replica.live == set()
        subscribe(f, p["a"], "a", {0})
        subscribe(f, p["b"], "b", {1})
        for t in (100, 200, 300):
            f.ingest(*element(d, 0, t))
        for t in (150, 250):
            f.ingest(*element(d, 1, t))
        f.flush()
        for peer in p.values():
            peer.drain()
        assert p["a"].replica.stream_elements == [3, 0] and p["a"].replica.live == {0}
        assert p["b"].replica.stream_elements == [0, 2] and p["b"].replica.live == {1}
        # b takes up stream 0: its backlog arrives, then its new elements, to both.
        subscribe(f, p["b"], "b", {0, 1})
        f.ingest(*element(d, 0, 350))
        f.flush()
        for peer in p.values():
            peer.drain()
        assert p["b"].replica.live == {0, 1}
        assert p["b"].held(S0) == p["a"].held(S0) and len(p["a"].held(S0)) == 4
        # b drops stream 0 and takes it up again: only what it missed comes, no duplicate.
        # (A drop is answered too, with no backlog.)
        subscribe(f, p["b"], "b", {1})
        f.ingest(*element(d, 0, 400))
        f.flush()
        [drop] = p["b"].drain()
        assert drop.streams == (1,) and drop.meta.shape[1] == 0 and p["b"].replica.live == {1}
        assert len(p["a"].drain()) == 1
        subscribe(f, p["b"], "b", {0, 1})
        [sync] = p["b"].drain()
        assert sync.sync_tick == 0 and sync.streams == (0, 1) and sync.meta[1].tolist() == [400]
        assert p["b"].held(S0) == p["a"].held(S0) and len(p["b"].held(S0)) == 5
        assert p["b"].held(S0)[-1] == (
            400,
            ("<http://example.org/obs0_400>", "<http://example.org/p>", '"400"'),
        )
        # Each term went to each container at most once, and only terms it needed.
        for peer in p.values():
            assert len(peer.terms_received) == len(set(peer.terms_received))
        assert d.encode('"150"') not in p["a"].terms_received
        assert f.elements_by_container() == {"a": 5, "b": 2 + 4 + 1}
    finally:
        f.close()


def test_a_containers_counts_follow_the_runs_counts_across_late_and_renewed_subscriptions(
    peers: tuple[RunSpec, dict[str, Peer]],
) -> None:
    """A tick's ``cuts`` (``--ingest direct``) are :meth:`Fanout.counts`: every container
    must count a stream's elements the same way, also when its backlog starts after
    elements it never got (pruned before it subscribed) or after it dropped the stream."""
    _spec, p = peers
    d = MemoryDictionary()
    f = make_fanout(d, "streams")
    f.set_horizon(0, 100)  # keeps what a window of 100 ms opened at the last report can read
    try:
        for cid, peer in p.items():
            f.add(cid, peer.receiver.endpoint, 0)
            peer.drain()
        subscribe(f, p["a"], "a", {0, 1})
        for t in (100, 200, 300, 400):
            f.ingest(*element(d, 0, t))
        f.ingest(*element(d, 1, 150))
        f.flush()
        f.prune(350)  # 100 and 200 are gone (before 350 - 100)
        subscribe(f, p["b"], "b", {0})  # joins late: backlog 300, 400 only
        for peer in p.values():
            peer.drain()
        assert f.counts().tolist() == [4, 1]
        assert p["a"].replica.counts == [4, 1]
        assert p["b"].replica.counts[0] == 4 and p["b"].replica.stream_elements[0] == 2
        subscribe(f, p["b"], "b", set())  # drops stream 0, misses two, takes it up again
        f.ingest(*element(d, 0, 500))
        f.ingest(*element(d, 0, 600))
        f.flush()
        for peer in p.values():
            peer.drain()
        assert p["b"].replica.counts[0] == 4
        subscribe(f, p["b"], "b", {0})
        f.ingest(*element(d, 0, 700))
        f.flush()
        for peer in p.values():
            peer.drain()
        assert f.counts().tolist() == [7, 1]
        assert p["a"].replica.counts == [7, 1] and p["b"].replica.counts[0] == 7
    finally:
        f.close()


def test_a_subscription_that_overtook_an_earlier_one_makes_every_stream_live(
    peers: tuple[RunSpec, dict[str, Peer]],
) -> None:
    """A container whose assignments change twice in quick succession sends two
    subscriptions before the answer to the first arrives; it counts streams live only on
    the answer to its latest one, which must name the streams the first answer brought
    (the cause of the intermittent ``no container became ready`` in
    tests/cluster/test_stream_affinity.py: the queries reading them were never registered)."""
    _spec, p = peers
    d = MemoryDictionary()
    f = make_fanout(d, "streams")
    try:
        for cid, peer in p.items():
            f.add(cid, peer.receiver.endpoint, 0)
            peer.drain()
        for t in (100, 200):
            f.ingest(*element(d, 0, t))
            f.ingest(*element(d, 1, t))
        # a: one query assigned (stream 0), then a second (stream 1) before any answer.
        subscribe(f, p["a"], "a", {0})
        subscribe(f, p["a"], "a", {0, 1})
        # b: two queries assigned, then one taken away again before any answer.
        subscribe(f, p["b"], "b", {0, 1})
        subscribe(f, p["b"], "b", {0})
        first, second = p["a"].drain()
        assert (first.version, first.streams, second.version, second.streams) == (1, (0,), 2, (0, 1))
        assert p["a"].replica.live == {0, 1} and p["a"].replica.stream_elements == [2, 2]
        assert [m.streams for m in p["b"].drain()] == [(0, 1), (0,)]
        assert p["b"].replica.live == {0} and p["b"].replica.stream_elements == [2, 2]
        f.ingest(*element(d, 0, 300))
        f.ingest(*element(d, 1, 300))
        f.flush()
        p["a"].drain()
        p["b"].drain()
        assert p["a"].held(S0) == p["b"].held(S0) and len(p["a"].held(S0)) == 3
        assert p["a"].replica.stream_elements == [3, 3] and p["b"].replica.stream_elements == [3, 2]
    finally:
        f.close()


def test_broadcast_sends_every_stream_to_every_container(peers: tuple[RunSpec, dict[str, Peer]]) -> None:
    _spec, p = peers
    d = MemoryDictionary()
    f = make_fanout(d, "broadcast")
    try:
        f.add("a", p["a"].receiver.endpoint, 0)
        f.ingest(*element(d, 0, 100))
        f.ingest(*element(d, 1, 100))
        f.flush()
        f.add("b", p["b"].receiver.endpoint, 0)  # a late joiner gets the backlog in its sync
        f.ingest(*element(d, 1, 200))
        f.flush()
        for peer in p.values():
            peer.drain()
            assert peer.replica.live == {0, 1} and peer.replica.stream_elements == [1, 2]
        assert p["a"].held(S1) == p["b"].held(S1)
        f.subscribe("a", 1, [0], 0)  # ignored when broadcasting
        assert f.subscribed("a") == {0, 1}
    finally:
        f.close()
