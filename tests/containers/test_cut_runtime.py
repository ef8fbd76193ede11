"""A container evaluates a tick only once it applied the elements the tick's cuts name
(``run --zk --ingest direct``): a real container runtime (real ZooKeeper, its own loop
thread) in a run whose driver is this test, over real ZeroMQ sockets.

The test sends what the leader's socket never sends in this order -- a tick before the
elements it cuts, as elements from the streams' owners will race the leader's ticks --
and checks that the tick (and the tick after it, which names no cut) waits until the
elements are there, that a cut on a stream the container does not receive is not
waited for, and that a ``sync`` sets a stream's count (a backlog after a gap).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from kazoo.client import KazooClient

from linkstream.containers.messages import Elements, Hello, Result, Tick
from linkstream.containers.protocol import decode, encode
from linkstream.containers.runtime import ContainerRuntime
from linkstream.containers.takeover import Slot
from linkstream.containers.transport import LOOPBACK_ANY, Receiver, Sender
from linkstream.engine.embedded import Engine
from linkstream.query.continuous import parse_continuous
from linkstream.scheduler.layout import DEFAULT_ROOT
from linkstream.scheduler.runs import RunNode, RunSpec

S0, S1 = "http://example.org/s0", "http://example.org/s1"
RUN = "cut-run"


def _until(what: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _elements(stream: int, times: list[int], sync: tuple[int, ...] | None = None) -> Elements:
    """Elements of one stream, one triple each (ids 1..3 shipped with every message)."""
    k = len(times)
    meta = np.array([[stream] * k, times, [1] * k], dtype=np.int64).reshape(3, k)
    triples = np.tile(np.array([[1, 2, 3]], dtype=np.int64), (k, 1))
    terms = ["<http://example.org/o>", "<http://example.org/p>", '"v"']
    ids = np.array([1, 2, 3], dtype=np.int64)
    if sync is None:
        return Elements(RUN, ids, terms, meta, triples)
    return Elements(RUN, ids, terms, meta, triples, 0, (0, 1), 0, sync)


@pytest.fixture
def container(
    zk_server: str, zk_chroot: str, kazoo_client: KazooClient
) -> Iterator[tuple[ContainerRuntime, Sender, Receiver, Hello]]:
    driver = Receiver(LOOPBACK_ANY, rcvhwm=1000)
    rt = ContainerRuntime(zk_server + zk_chroot, container_id="c1")
    rt.start()
    stop = threading.Event()
    loop = threading.Thread(target=rt.run, args=(stop,), daemon=True)
    loop.start()
    spec = RunSpec(RUN, driver.endpoint, "http://localhost/", 1000, (), (S0, S1), (None, None), {})
    RunNode(kazoo_client, DEFAULT_ROOT).claim(spec)
    hello = None
    deadline = time.monotonic() + 15
    while hello is None and time.monotonic() < deadline:
        frames = driver.recv_frames(0.2)
        if frames is not None and isinstance(m := decode(frames), Hello):
            hello = m
    assert hello is not None, "the container did not join the run"
    to = Sender(hello.address, sndhwm=1000, linger_ms=0)
    try:
        yield rt, to, driver, hello
    finally:
        to.close(linger_ms=0)
        stop.set()
        loop.join(15)
        rt.close()
        driver.close()


def test_a_tick_waits_for_the_elements_its_cuts_name(
    container: tuple[ContainerRuntime, Sender, Receiver, Hello],
) -> None:
    rt, to, _, _ = container
    # the hello's answer: stream 0 has 5 elements before this container joined (count 5 from
    # here, none in the backlog: a gap), stream 1 is received too, nothing routed yet
    to.offer_frames(encode(_elements(0, [], sync=(5, 0))), 5.0)
    _until(lambda: rt._replica is not None and rt._replica.synced)
    replica = rt._replica
    assert replica is not None and replica.counts == [5, 0]

    to.offer_frames(encode(Tick(RUN, 1, 1000, [], {}, {}, {S0: 7, S1: 0})), 5.0)
    to.offer_frames(encode(Tick(RUN, 2, 2000, [], {}, {})), 5.0)  # no cuts: after tick 1 all the same
    time.sleep(0.5)
    assert replica.ticks == 0 and rt._gate.waiting == 2, "a tick ran before the elements it cuts"

    to.offer_frames(encode(_elements(0, [900])), 5.0)
    time.sleep(0.3)
    assert replica.ticks == 0, "one of the two elements is still missing"

    to.offer_frames(encode(_elements(0, [950])), 5.0)
    _until(lambda: replica.ticks == 2)
    assert replica.last_c == 2000 and replica.counts == [7, 0] and rt._gate.waiting == 0

    # a cut on a stream this container does not receive (not in the run's live streams) is no wait
    to.offer_frames(encode(Tick(RUN, 3, 3000, [], {}, {}, {S0: 7, "http://example.org/other": 9})), 5.0)
    _until(lambda: replica.ticks == 3)


def _result(driver: Receiver, seq: int) -> Result:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        frames = driver.recv_frames(0.2)
        if frames is not None and isinstance(m := decode(frames), Result) and m.seq == seq:
            return m
    raise AssertionError(f"no result of tick {seq}")


def test_a_query_named_before_its_first_tick_is_listed_missing_with_it(
    container: tuple[ContainerRuntime, Sender, Receiver, Hello],
) -> None:
    """The driver may name a container to answer a query before it read the container's
    *ready* announcement (a query whose answerer left: ``ClusterEngine.choose_owners``).  The
    container answers it only from the first tick it announced -- an IStream query registered
    after tick 0 from tick 2 -- and lists it as missing before, with that tick (``from``); its
    hello says it does so (``caps``).  Its first answer equals the embedded engine's."""
    rt, to, driver, hello = container
    assert "from" in hello.caps
    to.offer_frames(encode(_elements(0, [], sync=(0, 0))), 5.0)
    _until(lambda: rt._replica is not None and rt._replica.synced)
    replica = rt._replica
    assert replica is not None
    text = (
        "PREFIX : <http://example.org/w#> REGISTER ISTREAM <q> AS SELECT ?s ?o "
        f"FROM NAMED WINDOW :w ON <{S0}> [RANGE PT3S STEP PT1S] WHERE {{ WINDOW :w {{ ?s ?p ?o }} }}"
    )
    replica.register("q", text)  # as its assignment does, after tick 0 (the loop waits for a message)
    rt._slots["q"] = Slot("t-q", 0)
    rt._firsts["q"] = 2  # its ready announcement: from tick 2
    embedded = Engine()
    embedded.register(parse_continuous(text, default_name="q"))
    terms = ["<http://example.org/o>", "<http://example.org/p>", '"v"']
    embedded.ingest(S0, 500, embedded.dictionary.encode_many(terms).reshape(1, 3))
    to.offer_frames(encode(_elements(0, [500])), 5.0)
    to.offer_frames(encode(Tick(RUN, 1, 1000, ["q"], {"q": "c1"}, {})), 5.0)
    first = _result(driver, 1)
    assert (dict(first.lines), first.missing, first.first) == ({}, ["q"], {"q": 2})
    embedded.tick(1000, ["q"])
    to.offer_frames(encode(Tick(RUN, 2, 2000, ["q"], {"q": "c1"}, {})), 5.0)
    second = _result(driver, 2)
    want = embedded.tick(2000, ["q"])
    assert (second.missing, second.first) == ([], {}) and list(second.lines["q"]) == list(want["q"])
    assert not rt._firsts  # (every announced first tick passed: nothing looked up per tick)
