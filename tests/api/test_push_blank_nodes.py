"""Blank nodes of pushed bodies stay apart across requests, API instances and restarts.

Each request's blank-node labels get a prefix of their own.  The prefix used to be a
counter that starts again at 1 in every process: the first body pushed after a restart
of ``run --state-dir`` (whose dictionary and windows come back from its log) reused the
labels of the first body before it, and two coordinators of a cluster (whose parsed
bodies meet at one leader) gave their first bodies the same labels, so unrelated blank
nodes became one.
"""

from __future__ import annotations

from pathlib import Path

from linkstream.api.app import create_app
from linkstream.api.client import Client
from linkstream.api.server import BackgroundServer
from tests.api.test_idempotent_push import _engine

EX = "http://example.org/"
S1 = EX + "s1"
QUERY = (
    f"SELECT (COUNT(DISTINCT ?x) AS ?n) WHERE {{ STREAM <{S1}> [RANGE 10s SLIDE 1s] {{ ?x <{EX}v> ?v }} }}"
)
COUNT = '"%d"^^<http://www.w3.org/2001/XMLSchema#integer>'


def _body(v: int) -> str:
    return f'_:b1 <{EX}v> "{v}" .\n'


def test_two_api_instances_and_a_restart_keep_blank_nodes_apart(tmp_path: Path) -> None:
    state = tmp_path / "state"
    live = _engine(state)
    server = BackgroundServer(create_app(live), on_shutdown=live.close).start()
    try:
        with Client(server.url) as c:
            c.register(QUERY, "q")
            c.push(S1, _body(1), t=1000)
    finally:
        server.stop()

    live = _engine(state)  # restarted on the same state: the first body's blank node is back
    first = BackgroundServer(create_app(live), on_shutdown=live.close).start()
    second = BackgroundServer(create_app(live)).start()  # another API over the same engine
    try:
        with Client(first.url) as a, Client(second.url) as b:
            a.push(S1, _body(2), t=1500)
            b.push(S1, _body(3), t=1600)
            assert a.advance(2000)["last_report"] == 2000
            rows = [r for r in a.results("q", after="0", until=2000) if r["t"] == 2000]
    finally:
        second.stop()
        first.stop()
    # three bodies, each with a blank node of its own
    assert [r["binding"]["n"] for r in rows] == [COUNT % 3]
