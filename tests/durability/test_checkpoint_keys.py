"""A client's retry after kill -9 of `linkstream run --state-dir DIR`, with the same
idempotency keys, of pushes whose log records a checkpoint covers (and truncated).

The restarted run replays no record (the checkpoint covers them all), so the keys can only
come from the checkpoint: each retry is answered as taken (not late), the stream's element
count does not move, and the results equal an uninterrupted run's -- nothing twice.  Before
the keys were checkpointed, the retry of the last push (at the stream's watermark, so not
late) was applied a second time: a duplicated row in every report of its window.
"""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import time
from pathlib import Path
from typing import Any

from linkstream.api.client import Client
from linkstream.engine.live.runtime import LiveEngine
from tests.durability.test_checkpoint_recovery import Reader, _free_port, _start

EX = "http://example.org/"
S = EX + "s"
OTHER = EX + "other"
INT = "http://www.w3.org/2001/XMLSchema#integer"
QUERIES = {
    "q": f"""PREFIX ex: <{EX}>
SELECT ?x ?v WHERE {{ STREAM ex:s [RANGE 5s SLIDE 1s] {{ ?x ex:p ?v }} }}""",
    # the last 3 triples: an element taken twice pushes an older one out (a time window's
    # content is a set of triples, where the same triple at the same time shows only once)
    "last3": f"""PREFIX ex: <{EX}>
SELECT ?x ?v WHERE {{ STREAM ex:s [TRIPLES 3] {{ ?x ex:p ?v }} }}""",
}
N = 8
END = 20_000


def _triples(i: int) -> list[tuple[str, str, str]]:
    return [(f"<{EX}x{i}>", f"<{EX}p>", f'"{i}"^^<{INT}>')]


def _uninterrupted() -> dict[str, list[dict[str, Any]]]:
    with LiveEngine(idle_ms=None) as live:
        for name, text in QUERIES.items():
            live.register(text, name)
        subs = {name: live.subscribe(name) for name in QUERIES}
        for i in range(1, N + 1):
            live.push(S, 1000 * i, _triples(i))
        live.advance_to(END)
        live.flush()
        out: dict[str, list[dict[str, Any]]] = {}
        for name, sub in subs.items():
            rows = out[name] = []
            while True:
                try:
                    rows.append(json.loads(sub.get(timeout=1.0)))
                except queue.Empty:
                    break
        return out


def _covered(c: Client, last: int, timeout: float = 60.0) -> dict[str, Any]:
    """Pushes to a stream no query reads (so that checkpoints keep being taken) until the
    log was truncated and a checkpoint covers records through ``last``."""
    deadline = time.monotonic() + timeout
    t = 1000
    while True:
        st = c.status()
        ck, lg = st["checkpoints"], st["ingest_log"]
        if ck["last_seq"] is not None and ck["last_seq"] >= last and lg["truncated_segments"] >= 1:
            return st
        assert time.monotonic() < deadline, st
        c.push_triples(OTHER, t, _triples(t))
        t += 1000
        time.sleep(0.25)


def test_retry_after_restart_of_a_checkpointed_push_is_a_repeat(tmp_path: Path) -> None:
    state, errlog, port = tmp_path / "state", tmp_path / "server.log", _free_port()
    args = ["--state-dir", str(state), "--checkpoint-interval", "0.2"]
    url = f"http://127.0.0.1:{port}"
    proc = _start(args, port, errlog, {})
    try:
        with Client(url) as c:
            for name, text in QUERIES.items():
                c.register(text, name)
            for i in range(1, N + 1):
                body = "%s %s %s .\n" % _triples(i)[0]
                assert c.push(S, body, t=1000 * i, key="p%d" % i)["elements"] == 1
            st = _covered(c, N)  # records 1..N: the keyed pushes (0: the registration)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert st["streams"][S]["elements"] == N

    proc = _start(args, port, errlog, {})
    try:
        with Client(url) as c:
            answers = []
            for i in range(1, N + 1):  # the client's retries: same keys, same bodies
                body = "%s %s %s .\n" % _triples(i)[0]
                answers.append(c.push(S, body, t=1000 * i, key="p%d" % i))
            after = c.status()["streams"][S]
            c.advance(END)
            readers = [Reader(url, name, "0", END) for name in QUERIES]
            for r in readers:
                r.start()
            for r in readers:
                r.join(60)
                assert not r.is_alive() and r.error is None, r.error
    finally:
        proc.kill()
        proc.wait(30)
    text = errlog.read_text()
    m = re.search(r"restored checkpoint \d+ of file://\S+ \(log records through (\d+)\)", text)
    assert m and int(m.group(1)) >= N, text[-3000:]  # no keyed record replayed: the keys came from it

    want = _uninterrupted()
    assert all(len(rows) >= 20 for rows in want.values())
    for r in readers:  # the whole run (the result rings were checkpointed)
        assert [row for _, row in r.got] == want[r.name], r.name  # no element in a window twice
    assert (after["elements"], after["late"]) == (N, 0)
    assert all(a["elements"] == 1 and a["late"] == 0 for a in answers), answers  # taken already
