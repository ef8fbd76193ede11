"""Seeded repeated kill -9 of `linkstream run --state-dir` while it checkpoints every 0.1 s.

A pusher feeds two streams one element at a time; the server is killed with SIGKILL four times at
seeded random moments (so some kills land in the middle of a checkpoint write or a log
rotation) and restarted each time.  After each restart the pusher goes on from the
element count the server reports (a push whose answer was lost may or may not have been
durable).  At the end the whole result history read from the beginning (``?after=0``: the
result ring travels through the checkpoints) equals that of an engine that never stopped,
report for report.
"""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from linkstream.api.client import ApiError, Client
from linkstream.engine.live.runtime import LiveEngine
from tests.durability.test_checkpoint_recovery import Reader, _free_port, _start

EX = "http://example.org/"
STREAMS = [EX + "a", EX + "b"]
QUERIES = {
    "sum": f"""PREFIX ex: <{EX}>
SELECT (COUNT(?x) AS ?n) (SUM(?v) AS ?s) WHERE {{ STREAM ex:a [RANGE 4s SLIDE 1s] {{ ?x ex:p ?v }} }}""",
    "pairs": f"""PREFIX ex: <{EX}>
SELECT ?x ?y WHERE {{ STREAM ex:b [RANGE 3s SLIDE 1s] {{ ?x ex:p ?v . ?y ex:p ?v FILTER(?x != ?y) }} }}""",
}
N = 200
END = (N + 5) * 1000


def _triple(stream: str, i: int) -> list[tuple[str, str, str]]:
    return [(f"<{stream}/x{i % 11}>", f"<{EX}p>", f'"{i % 7}"^^<http://www.w3.org/2001/XMLSchema#integer>')]


def _want() -> dict[str, list[dict[str, Any]]]:
    with LiveEngine(idle_ms=None) as live:
        for name, text in QUERIES.items():
            live.register(text, name)
        subs = {n: live.subscribe(n) for n in QUERIES}
        for i in range(1, N + 1):
            for s in STREAMS:
                live.push(s, 1000 * i, _triple(s, i))
        live.advance_to(END)
        live.flush()
        out: dict[str, list[dict[str, Any]]] = {n: [] for n in QUERIES}
        for n, sub in subs.items():
            while True:
                try:
                    out[n].append(json.loads(sub.get(timeout=1.0)))
                except queue.Empty:
                    break
        return out


@pytest.mark.slow  # four restarts of a server process
@pytest.mark.parametrize("seed", [17, 11])
def test_repeated_kill_9_loses_and_repeats_nothing(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    state, errlog, port = tmp_path / "state", tmp_path / "server.log", _free_port()
    args = ["--state-dir", str(state), "--checkpoint-interval", "0.1", "--results-retention", "3600"]
    url = f"http://127.0.0.1:{port}"
    proc = _start(args, port, errlog, {})
    stop = threading.Event()
    done = {s: 0 for s in STREAMS}

    def feed(stream: str) -> None:
        with Client(url, timeout=5) as c:
            while not stop.is_set() and done[stream] < N:
                try:
                    # go on from what the server holds (an answer lost in a kill may have been durable)
                    done[stream] = c.status()["streams"].get(stream, {}).get("elements", 0)
                    while done[stream] < N and not stop.is_set():
                        i = done[stream] + 1
                        c.push_triples(stream, 1000 * i, _triple(stream, i))
                        done[stream] = i
                except (httpx.HTTPError, ApiError):
                    time.sleep(0.05)

    try:
        with Client(url) as c:
            for name, text in QUERIES.items():
                c.register(text, name)
        feeders = [threading.Thread(target=feed, args=(s,), daemon=True) for s in STREAMS]
        for th in feeders:
            th.start()
        kills = 0
        for at in sorted(rng.sample(range(20, N - 20), 4)):  # at seeded points of the feed
            deadline = time.monotonic() + 60
            while min(done.values()) < at and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(rng.uniform(0.0, 0.3))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
            kills += 1
            proc = _start(args, port, errlog, {})
        for th in feeders:
            th.join(120)
        assert done == {s: N for s in STREAMS} and kills == 4
        with Client(url) as c:
            st = c.status()
            assert {s: st["streams"][s]["elements"] for s in STREAMS} == done
            readers = [Reader(url, n, "0", END) for n in QUERIES]
            for r in readers:
                r.start()
                r.ready.wait(10)
            c.advance(END)
            for r in readers:
                r.join(60)
                assert not r.is_alive() and r.error is None
    finally:
        stop.set()
        proc.kill()
        proc.wait(30)
    want = _want()
    for r in readers:
        assert [row for _, row in r.got] == want[r.name], r.name
    text = errlog.read_text()
    assert text.count("restored checkpoint") >= 3, text[-3000:]
