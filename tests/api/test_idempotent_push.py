"""Pushes with an ``Idempotency-Key``: a retry after a lost answer is not pushed twice.

Over HTTP on an embedded server with a durable ingest log: the same push sent twice is
answered 202 both times and counted once; after the log is replayed into a fresh engine
(a restart, or a new cluster leader) the key is still known.  A bad key is refused.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from linkstream.api.app import create_app
from linkstream.api.client import Client
from linkstream.api.server import BackgroundServer
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine

EX = "http://example.org/"
S1 = EX + "s1"
QUERY = f"SELECT (COUNT(?x) AS ?n) WHERE {{ STREAM <{S1}> [RANGE 10s SLIDE 1s] {{ ?x ?p ?v }} }}"
BODY = f"<{EX}a> <{EX}p> <{EX}b> .\n<{EX}c> <{EX}p> <{EX}d> .\n"
BODY2 = f"<{EX}e> <{EX}p> <{EX}f> .\n"
BODY3 = f"<{EX}g> <{EX}p> <{EX}h> .\n"


def _engine(state: Path) -> LiveEngine:
    live = LiveEngine(idle_ms=None).start()
    live.recover(IngestLog(str(state)), timeout=30)
    return live


def test_a_retried_push_is_taken_once_also_after_a_replay(tmp_path: Path) -> None:
    state = tmp_path / "state"
    live = _engine(state)
    server = BackgroundServer(create_app(live), on_shutdown=live.close).start()
    try:
        with Client(server.url) as c:
            c.register(QUERY, "q")
            first = c.push(S1, BODY, t=1000, key="client-7/1")
            again = c.push(S1, BODY, t=1000, key="client-7/1")
            assert first == again == {"stream": S1, "elements": 1, "triples": 2, "late": 0, "t": 1000}
            c.push(S1, BODY2, t=1500)  # no key: always taken
            c.push(S1, BODY3, t=2000, key="client-7/2")
            assert c.push(S1, BODY3, t=2000, key="client-7/2")["elements"] == 1  # answered as before
            assert c.status()["streams"][S1]["elements"] == 3
            with httpx.Client(base_url=server.url) as h:
                r = h.post(
                    "/streams/x", params={"t": "2000"}, content=BODY, headers={"Idempotency-Key": "a b"}
                )
            assert r.status_code == 400
            assert r.json()["error"] == (
                "header Idempotency-Key must be 1-200 printable ASCII characters without spaces"
            )
            assert c.advance(3000)["last_report"] == 3000
            lines = list(c.results("q", after="0", until=3000))
    finally:
        server.stop()
    count = '"%d"^^<http://www.w3.org/2001/XMLSchema#integer>'
    assert [(row["t"], row["binding"]["n"]) for row in lines] == [(2000, count % 3), (3000, count % 4)]

    live = _engine(state)  # the log replayed: the keys of its elements are known again
    try:
        assert live.push(S1, 2000, [(f"<{EX}a>", f"<{EX}p>", f"<{EX}b>")], key="client-7/2#0") is True
        assert live.push(S1, 3500, [(f"<{EX}a>", f"<{EX}p>", f"<{EX}e>")], key="client-7/3#0") is True
        live.flush()
        assert live.status()["streams"][S1]["elements"] == 4
    finally:
        live.close()
