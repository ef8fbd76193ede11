"""An owner never gives a body's offsets to another body once a leader may hold it.

The owner hands a body to the leader, the leader applies it and dies before answering;
the hand-off gives up (503 to the client, who goes away).  Another client's body comes
next.  Had the owner sequenced it at the same offset, the leader (its replay holds the
first body) would skip it as the owner's retry: answered accepted, never applied -- and
with ``--ingest owners`` the owner would send it under the first body's counts.

Real :class:`StreamIngest` objects on both sides (the owner's hand-off, the leader's
``serve`` and ``apply`` into a real :class:`LiveEngine`); the HTTP hop between them is a
stand-in that can lose the answer after the leader applied the body.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import msgpack
import pytest

from linkstream.cluster import ingest as ingest_mod
from linkstream.cluster.decisions import DecisionPoller
from linkstream.cluster.ingest import StreamIngest
from linkstream.cluster.ownersender import OwnedTail
from linkstream.cluster.service import NotLeading
from linkstream.cluster.streamlog import StreamLog
from linkstream.cluster.streamowners import Owner
from linkstream.engine.live.runtime import LiveEngine

EX = "http://example.org/"
S1 = EX + "s1"
EPOCH = 7


def _el(t: int, o: str) -> tuple[int, list[tuple[str, str, str]]]:
    return t, [(f"<{EX}a>", f"<{EX}p>", f'"{o}"')]


class _Hop:
    """The owner's HTTP client to the leader: ``mode`` ``"up"`` answers, ``"dies"`` applies the
    body on the leader and loses the answer (then the leader is gone: ``"down"``)."""

    def __init__(self, leader: StreamIngest) -> None:
        self.leader = leader
        self.mode = "up"

    def post(self, url: Any, content: bytes, headers: dict[str, str]) -> httpx.Response:
        if self.mode == "down":
            raise httpx.ConnectError("connection refused")
        after = headers.get("x-linkstream-decided")
        status, doc = self.leader.serve(
            msgpack.unpackb(content, raw=False), None if after is None else int(after)
        )
        if self.mode == "dies":
            self.mode = "down"
            raise httpx.RemoteProtocolError("server disconnected without sending a response")
        return httpx.Response(status, json=doc)


class _Sender:
    """The owners' sender's bookkeeping (:class:`OwnedTail`) without its sockets."""

    def __init__(self) -> None:
        self.tail = OwnedTail()
        self.runs: list[tuple[int, list[Any]]] = []

    def add(self, iri: str, epoch: int, offset: int, elements: Any) -> None:
        self.tail.add(offset, elements)

    def decided(self, iri: str, epoch: int, decisions: list[list[Any]], run: str | None) -> None:
        self.runs += self.tail.decide(decisions)


def _leader(live: LiveEngine) -> StreamIngest:
    ready = threading.Event()
    ready.set()
    service = SimpleNamespace(
        client=None,
        root="/t",
        identifier="L",
        api_url="http://leader",
        _ready=ready,
        _live=live,
        _remote=None,
    )
    service.leading = lambda: True
    service._leader_live = lambda wait=10.0: live
    return StreamIngest(service)  # type: ignore[arg-type]


def _owner(hop: _Hop, state: Path | None) -> StreamIngest:
    service = SimpleNamespace(
        client=SimpleNamespace(connected=True),
        root="/t",
        identifier="O",
        api_url="http://owner",
        _ready=threading.Event(),
        _leader_cache=(0.0, "L", "http://leader"),
    )
    service.leading = lambda: False
    service.leader = lambda max_age=1.0: ("L", "http://leader")
    service.forget_leader = lambda: None
    owner = StreamIngest(service)  # type: ignore[arg-type]
    owner.owners.claim = lambda iri: Owner("O", "http://owner", EPOCH)  # type: ignore[method-assign]
    owner._client = lambda: hop  # type: ignore[assignment,method-assign,return-value]
    if state is not None:  # --ingest owners: a stream log, the sender's tail
        owner.stream_log = StreamLog(str(state))
        owner.owners_send = True
        owner.sender = _Sender()  # type: ignore[assignment]
    return owner


@pytest.mark.parametrize("ingest", ["leader", "owners"])
def test_a_body_after_an_unanswered_hand_off_is_applied_at_new_offsets(
    ingest: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ingest_mod, "HANDOFF_S", 0.3)
    live = LiveEngine(idle_ms=None).start()
    leader = _leader(live)
    hop = _Hop(leader)
    owner = _owner(hop, tmp_path if ingest == "owners" else None)
    poller = None
    try:
        if ingest == "owners":  # the owner's polls for decisions, answered by the leader
            owner._poller = poller = DecisionPoller(
                owner._undecided,
                lambda polls: {i: (*leader.decisions(i, e, a), "run") for i, e, a in polls},
            )
        hop.mode = "dies"  # the leader applies the first client's body and dies unanswered
        with pytest.raises(NotLeading):
            owner.push_elements(S1, [_el(1000, "a"), _el(1100, "b")], key="client-1")
        # the new leader (here: the same state, as its replay of the durable log rebuilds it)
        hop.mode = "up"
        flags, error = owner.push_elements(S1, [_el(1200, "c"), _el(1300, "d")], key="client-2")
        assert (flags, error) == ([True, True], None)
        live.flush()
        assert live.applied_count(S1) == 4  # before: 2 (the second body skipped as a retry)
        # the first client's retry (same key) is taken once: answered accepted, applied before
        flags, error = owner.push_elements(S1, [_el(1000, "a"), _el(1100, "b")], key="client-1")
        assert (flags, error) == ([True, True], None)
        live.flush()
        assert live.applied_count(S1) == 4
        if ingest == "owners":
            sender = owner.sender
            assert isinstance(sender, _Sender)
            deadline = threading.Event()
            for _ in range(100):  # the poller brings the decisions of every body
                if len(sender.tail) == 0:
                    break
                deadline.wait(0.05)
            sent = [(first + i, t) for first, els in sender.runs for i, (t, _) in enumerate(els)]
            # each applied element once, under the count the worker gave it
            assert sent == [(0, 1000), (1, 1100), (2, 1200), (3, 1300)]
            assert (sender.tail.sent, sender.tail.replaced, len(sender.tail)) == (4, 0, 0)
    finally:
        if poller is not None:
            poller.close()
        live.close()
        if owner.stream_log is not None:
            owner.stream_log.close()
