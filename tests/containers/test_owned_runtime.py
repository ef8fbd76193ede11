"""Elements from a stream's owner (``owned`` messages, ``run --zk --ingest direct``) reach
a real container runtime (real ZooKeeper, its own loop thread, real ZeroMQ) out of order
with the ticks and with each other: the container applies them through its cut gate --
each tick evaluated on exactly the elements its cuts name, resends passed over, a gap
held -- and its windows hold what the leader's ``els`` path puts there.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from linkstream.cluster.ingestwire import pack_elements, split_elements
from linkstream.cluster.ownersender import owned_message
from linkstream.containers.messages import Hello, Owned, Tick
from linkstream.containers.protocol import decode, encode
from linkstream.containers.runtime import ContainerRuntime
from linkstream.containers.transport import Receiver, Sender
from tests.containers.test_cut_runtime import RUN, S0, _elements, _until, container  # noqa: F401

EX = "http://example.org/"


def _body(times: list[int]) -> list[tuple[int, list[tuple[str, str, str]]]]:
    # two triples per element, one repeated (the container deduplicates as the leader's worker does)
    return [
        (
            t,
            [
                (f"<{EX}obs{t}>", f"<{EX}value>", f'"{t % 97}"'),
                (f"<{EX}obs{t}>", f"<{EX}value>", f'"{t % 97}"'),
            ],
        )
        for t in times
    ]


def _owned(first: int, times: list[int]) -> Owned:
    els = split_elements(pack_elements(_body(times)))
    message = decode(encode(owned_message(RUN, S0, first, els)))
    assert isinstance(message, Owned) and message.first == first
    return message


def _window(rt: ContainerRuntime) -> list[tuple[int, tuple[str, ...]]]:
    replica = rt._replica
    assert replica is not None
    buf = replica.engine.buffer(S0)
    triples, times = buf.slice_timed(buf.base, buf.end)
    terms = replica.engine.dictionary.decode_many(np.asarray(triples).reshape(3, -1).T.reshape(-1))
    return [(int(t), tuple(terms[3 * i : 3 * i + 3])) for i, t in enumerate(np.asarray(times).tolist())]


def test_owned_runs_are_gated_by_the_ticks_cuts(
    container: tuple[ContainerRuntime, Sender, Receiver, Hello],  # noqa: F811  (the fixture, imported)
    caplog: pytest.LogCaptureFixture,
) -> None:
    rt, to, _, _ = container
    to.offer_frames(encode(_elements(0, [], sync=(5, 0))), 5.0)  # stream 0 counts from 5 here
    _until(lambda: rt._replica is not None and rt._replica.synced)
    replica = rt._replica
    assert replica is not None
    times = [1000, 1100, 1200, 1300]  # applied counts 5, 6, 7, 8

    to.offer_frames(encode(Tick(RUN, 1, 1250, [], {}, {}, {S0: 8})), 5.0)
    for message in (_owned(8, times[3:]), _owned(6, times[1:3])):  # beyond the cut; after a gap
        to.offer_frames(encode(message), 5.0)
    time.sleep(0.4)
    assert replica.ticks == 0 and replica.counts[0] == 5, "a gap was applied, or the tick ran without it"
    assert rt._gate.missing() == {S0: (5, 6)}

    to.offer_frames(encode(_owned(5, times[:2])), 5.0)  # fills the gap, resends count 6
    _until(lambda: replica.ticks == 1)
    time.sleep(0.3)
    # count 8 is held after the tick went: the next tick (not here yet) says where it belongs
    assert replica.counts[0] == 8 and _window(rt) == [
        (t, tr) for t, els in _body(times[:3]) for tr in els[:1]
    ]
    assert not any("beyond its cuts" in r.getMessage() for r in caplog.records)

    to.offer_frames(encode(Tick(RUN, 2, 1350, [], {}, {}, {S0: 9})), 5.0)
    _until(lambda: replica.ticks == 2)
    assert replica.counts[0] == 9 and rt._gate.waiting == 0 and replica.last_c == 1350
    # the same elements through the leader's socket would have filled the window alike
    assert _window(rt) == [(t, tr) for t, els in _body(times) for tr in els[:1]]
