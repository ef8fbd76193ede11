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

from linkstream.containers.messages import Elements, Hello, Tick
from linkstream.containers.protocol import decode, encode
from linkstream.containers.runtime import ContainerRuntime
from linkstream.containers.transport import LOOPBACK_ANY, Receiver, Sender
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
) -> Iterator[tuple[ContainerRuntime, Sender]]:
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
        yield rt, to
    finally:
        to.close(linger_ms=0)
        stop.set()
        loop.join(15)
        rt.close()
        driver.close()


def test_a_tick_waits_for_the_elements_its_cuts_name(container: tuple[ContainerRuntime, Sender]) -> None:
    rt, to = container
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
