"""The driver's recompute (:class:`linkstream.cluster.recovery.Recovery`) when containers restart.

After a ZooKeeper outage longer than the sessions, every container restarts its run at
once: it ends the run, binds a new data-plane socket and says hello again under the same
id (it re-registers, so the driver never sees it depart).  A recompute request sent to
its old socket is never answered.  The owed report must still be recomputed -- by the
container's new incarnation once the driver admits it -- instead of being waited out to
the timeout and recorded lost; and while no container is live at all, the driver waits
for one to come back.  Real ZeroMQ sockets, the container's own recompute code.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import numpy as np
import pytest

from linkstream.cluster.fanout import Fanout
from linkstream.cluster.recovery import Recovery
from linkstream.containers.messages import Recompute
from linkstream.containers.protocol import decode
from linkstream.containers.recovery import recompute
from linkstream.containers.replica import RunReplica
from linkstream.containers.transport import LOOPBACK_ANY, Receiver
from linkstream.engine.embedded import Engine
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.dictionary import MemoryDictionary
from tests.cluster.test_recompute import HORIZON, QUERIES, S, _spec

TIMEOUT = 8.0  # the run's patience (answer timeout)
COMES_BACK = 0.5  # a restarted container says hello again after this


class Incarnation:
    """One run of a container: its data-plane socket and replica; answers only while ``up``."""

    def __init__(self, cid: str) -> None:
        self.cid = cid
        self.receiver = Receiver(LOOPBACK_ANY, rcvhwm=1000)
        self.replica = RunReplica(_spec())
        self.up = True
        self.asked = 0

    def serve(self, recovery: Recovery) -> None:
        """Answers the recompute requests queued on its socket (the others are sync messages)."""
        while self.up and (frames := self.receiver.recv_frames(0.0)) is not None:
            message = decode(frames)
            if isinstance(message, Recompute):
                self.asked += 1
                recovery.on_answer(recompute(self.replica, QUERIES, message, self.cid))

    def close(self) -> None:
        self.receiver.close()
        self.replica.close()


class Cluster:
    """The driver's fan-out and recovery, and the containers' incarnations."""

    def __init__(self) -> None:
        self.dictionary = MemoryDictionary()
        self.incarnations: list[Incarnation] = []
        self.hellos: list[tuple[float, Incarnation]] = []  # (when, new incarnation) not admitted yet
        self.departed: dict[str, float] = {}  # container -> when it is registered again
        self.fanout = Fanout(
            "r1",
            [S],
            [HORIZON],
            self.dictionary,
            is_dead=lambda _c: False,
            on_wait=lambda: None,
            on_drop=lambda _c: None,
            route="broadcast",
        )
        self.recovery = Recovery("r1", self.fanout, self.dictionary, self.pump, TIMEOUT, self.dead)
        self.seq = 0

    def dead(self, cid: str) -> bool:
        """Whether membership shows ``cid`` gone (its old session expired, not registered again)."""
        return time.monotonic() < self.departed.get(cid, 0.0)

    def start(self, cid: str) -> Incarnation:
        inc = Incarnation(cid)
        self.incarnations.append(inc)
        return inc

    def join(self, inc: Incarnation) -> None:
        self.fanout.add(inc.cid, inc.receiver.endpoint, self.seq)

    def restart(self, old: Incarnation) -> Incarnation:
        """``old`` restarts its run: its socket goes unanswered; its hello comes later."""
        old.up = False
        new = self.start(old.cid)
        self.hellos.append((time.monotonic() + COMES_BACK, new))
        return new

    def admit(self) -> None:
        """The driver's mid-tick admission of the containers that said hello again."""
        now = time.monotonic()
        for when, inc in [h for h in self.hellos if h[0] <= now]:
            self.hellos.remove((when, inc))
            self.join(inc)

    def pump(self, timeout: float) -> None:
        time.sleep(timeout)
        for inc in self.incarnations:
            inc.serve(self.recovery)

    def close(self) -> None:
        self.fanout.close()
        for inc in self.incarnations:
            inc.close()


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    yield made
    made.close()


def _run_two_ticks(cluster: Cluster) -> dict[str, list[str]]:
    """Sends the driver two ticks' elements and records both; the embedded lines of the second."""
    embedded = Engine()
    for name, text in QUERIES.items():
        embedded.register(parse_continuous(text, default_name=name))
    want: dict[str, list[str]] = {}
    for step, c in enumerate((2000, 3000)):
        for k in range(3):
            t = 1000 * step + 300 * k
            terms = [f"<http://example.org/x{k}>", "<http://example.org/p>", f'"{step}"']
            embedded.ingest(S, t, embedded.dictionary.encode_many(terms).reshape(1, 3))
            cluster.fanout.ingest(0, t, cluster.dictionary.encode_many(terms).reshape(1, 3))
        cluster.fanout.flush()
        cluster.seq += 1
        cluster.recovery.record(cluster.seq, c, cluster.fanout.counts())
        want = embedded.tick(c, list(QUERIES))
    return {name: sorted(lines) for name, lines in want.items()}


def test_a_container_that_restarts_while_asked_recomputes_the_report(cluster: Cluster) -> None:
    """oc-1 is asked, but it restarted its run (its old socket never answers): its new
    incarnation is asked once admitted, well within the patience; oc-2 answers its share."""
    oc1, oc2 = cluster.start("oc-1"), cluster.start("oc-2")
    cluster.join(oc1)
    cluster.join(oc2)
    want = _run_two_ticks(cluster)
    new1 = cluster.restart(oc1)
    prefer = {"r": "oc-1", "i": "oc-1", "d": "oc-2", "n": "oc-2"}
    t0 = time.monotonic()
    got = cluster.recovery.recompute(
        cluster.seq,
        dict.fromkeys(QUERIES, "oc-1"),
        dict.fromkeys(QUERIES, frozenset({0})),
        prefer.get,
        cluster.admit,
    )
    took = time.monotonic() - t0
    assert {name: sorted(lines) for name, lines in got.items()} == want
    assert sum(len(v) for v in want.values()) > 3
    assert took < TIMEOUT / 2, f"waited {took:.2f}s"  # not waited out to the timeout
    assert (oc1.asked, new1.asked, oc2.asked) == (0, 1, 1)
    done = {r.query: r.dst for r in cluster.recovery.done}
    assert done == {"r": "oc-1", "i": "oc-1", "d": "oc-2", "n": "oc-2"}


def test_with_every_container_restarting_the_first_back_recomputes_it(cluster: Cluster) -> None:
    """Every container restarts at once (no socket answers): the report waits for the first
    one to say hello again instead of being recorded lost."""
    oc1, oc2 = cluster.start("oc-1"), cluster.start("oc-2")
    cluster.join(oc1)
    cluster.join(oc2)
    want = _run_two_ticks(cluster)
    cluster.restart(oc1)
    cluster.restart(oc2)
    cluster.fanout.drop("oc-1")  # one was seen to depart (its session expired), one was not
    t0 = time.monotonic()
    got = cluster.recovery.recompute(
        cluster.seq,
        dict.fromkeys(QUERIES, "oc-1"),
        dict.fromkeys(QUERIES, frozenset({0})),
        lambda _n: None,
        cluster.admit,
    )
    assert {name: sorted(lines) for name, lines in got.items()} == want
    assert COMES_BACK <= time.monotonic() - t0 < TIMEOUT / 2


def test_without_any_container_the_report_is_lost_after_the_patience(cluster: Cluster) -> None:
    """No container ever comes back: nothing is recomputed, after the full timeout."""
    cluster.recovery.timeout = 1.0
    _run_two_ticks(cluster)
    t0 = time.monotonic()
    got = cluster.recovery.recompute(
        cluster.seq,
        dict.fromkeys(QUERIES, "oc-1"),
        dict.fromkeys(QUERIES, frozenset({0})),
        lambda _n: None,
        cluster.admit,
    )
    assert got == {}
    assert time.monotonic() - t0 >= 1.0
    assert np.array_equal(cluster.fanout.counts(), [6])


def test_a_container_seen_departed_while_asked_is_asked_again_when_back(cluster: Cluster) -> None:
    """The only container is asked, then seen to depart (its session expired) and to register
    again under a new session before its run restarts: it is not written off as having
    failed the report -- its new run is asked once it says hello."""
    oc1 = cluster.start("oc-1")
    cluster.join(oc1)
    want = _run_two_ticks(cluster)
    new1 = cluster.restart(oc1)

    calls = []

    def admit() -> None:  # the second round: after the request went to oc-1's old socket
        calls.append(1)
        if len(calls) == 2:
            assert cluster.recovery.fanout.peers["oc-1"] is not None
            cluster.departed["oc-1"] = time.monotonic() + COMES_BACK / 2
        cluster.admit()

    got = cluster.recovery.recompute(
        cluster.seq,
        dict.fromkeys(QUERIES, "oc-1"),
        dict.fromkeys(QUERIES, frozenset({0})),
        lambda _n: None,
        admit,
    )
    assert {name: sorted(lines) for name, lines in got.items()} == want
    assert len(calls) > 2 and new1.asked == 1
