"""`linkstream run --state-dir DIR`: a push answered 202 survives kill -9.

A real server subprocess is fed concurrent pushes, killed with SIGKILL right after the last
answer and restarted on the same directory: every acknowledged element is back (stream
counts), the query is re-registered, and its results after the restart equal those of an
uninterrupted engine fed the same pushes.  A unit test covers a torn tail record.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from linkstream.api.client import Client
from linkstream.engine.live.ingestlog import IngestLog, decode_triples
from linkstream.engine.live.runtime import LiveEngine

EX = "http://example.org/"
S1 = EX + "s1"
QUERY = f"""PREFIX ex: <{EX}>
SELECT (COUNT(?x) AS ?n) (SUM(?v) AS ?sum)
WHERE {{ STREAM ex:s1 [RANGE 5s SLIDE 1s] {{ ?x ex:p ?v }} }}"""
OTHERS = [EX + "s2", EX + "s3", EX + "s4"]
# the other streams are read too, so that reports wait for all four (none of them is late)
OTHER_QUERIES = {
    "c%d" % k: "SELECT (COUNT(?x) AS ?n) WHERE { STREAM <%s> [RANGE 1s SLIDE 1s] { ?x ?p ?v } }" % s
    for k, s in enumerate(OTHERS, 2)
}
N = 150  # elements per stream


def _triple(stream: str, i: int) -> tuple[str, str, str]:
    return (f"<{stream}/x{i}>", f"<{EX}p>", f'"{i}"^^<http://www.w3.org/2001/XMLSchema#integer>')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(state: Path, port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "linkstream.cli", "run", "--port", str(port), "--state-dir", str(state)]
    cmd += ["--idle-ms", "0", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError("server exited: %s" % proc.stderr.read().decode()[-2000:])  # type: ignore[union-attr]
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("server did not come up")


def test_acknowledged_pushes_survive_kill_9(tmp_path: Path) -> None:
    state = tmp_path / "state"
    port = _free_port()
    proc = _start(state, port)
    url = f"http://127.0.0.1:{port}"
    acked: dict[str, int] = {}
    try:
        with Client(url) as c:
            c.register(QUERY, "q")
            for name, text in OTHER_QUERIES.items():
                c.register(text, name)
        errors: list[BaseException] = []

        def feed(stream: str) -> None:
            try:
                with Client(url) as c:
                    for i in range(1, N + 1):
                        r = c.push_triples(stream, 1000 * i, [_triple(stream, i)])
                        assert r["elements"] == 1
                        acked[stream] = i
            except BaseException as e:  # noqa: BLE001 (reported below)
                errors.append(e)

        threads = [threading.Thread(target=feed, args=(s,)) for s in [S1, *OTHERS]]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        elapsed = time.perf_counter() - t0
        stats = httpx.get(url + "/status").json()["ingest_log"]  # writes nothing: all answered is synced
        os.kill(proc.pid, signal.SIGKILL)  # right after the last answer
        proc.wait(30)
        assert not errors, errors
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    pushes = sum(acked.values())
    log_stats = IngestLog(str(state))
    try:
        recs = list(log_stats.records())
    finally:
        log_stats.close()
    print(
        "\ndurable ingest: %d acknowledged pushes from 4 threads in %.2fs (%.2f ms per push); "
        "%d fsyncs for %d records (%.1f records per fsync), %.3f ms per fsync"
        % (
            pushes,
            elapsed,
            1000 * elapsed / pushes,
            stats["fsyncs"],
            stats["records"],
            stats["records"] / max(1, stats["fsyncs"]),
            stats["fsync_ms_mean"],
        )
    )
    assert sum(1 for r in recs if r.kind == "push") == pushes

    proc = _start(state, port)
    try:
        with Client(url) as c:
            st = c.status()
            assert {s: st["streams"][s]["elements"] for s in acked} == acked
            assert [q["name"] for q in c.queries()] == ["q", *OTHER_QUERIES]
            assert st["ingest_log"]["next_seq"] == len(recs)
            got: list[dict] = []
            reader = threading.Thread(
                target=lambda: got.extend(Client(url).results("q", until=(N + 10) * 1000, timeout=30))
            )
            reader.start()
            time.sleep(0.5)  # the subscription is open before the watermark moves
            c.advance((N + 10) * 1000)
            reader.join(60)
            assert not reader.is_alive()
    finally:
        proc.kill()
        proc.wait(30)

    # the same pushes into an engine that never stopped
    with LiveEngine(idle_ms=None) as live:
        live.register(QUERY, "q")
        for name, text in OTHER_QUERIES.items():
            live.register(text, name)
        for i in range(1, N + 1):
            for s in [S1, *OTHERS]:
                live.push(s, 1000 * i, [_triple(s, i)])
        live.flush()
        sub = live.subscribe("q")
        live.advance_to((N + 10) * 1000)
        want: list[dict] = []
        while True:
            try:
                want.append(json.loads(sub.get(timeout=2.0)))
            except queue.Empty:
                break
    assert len(want) == 10 and got == want  # report times 151s..160s, windows holding pre-crash elements


def test_torn_tail_record_is_dropped(tmp_path: Path) -> None:
    d = str(tmp_path / "state")
    lg = IngestLog(d)
    for i in range(5):
        lg.append_push(S1, 1000 * i, [_triple(S1, i)])
    lg.sync()
    lg.close()
    seg = sorted((tmp_path / "state" / "log").iterdir())[-1]
    whole = seg.stat().st_size
    with open(seg, "r+b") as f:  # a torn write: the last record loses its end
        f.truncate(whole - 7)
    lg = IngestLog(d)
    recs = list(lg.records())
    assert [r.seq for r in recs] == [0, 1, 2, 3]
    assert [decode_triples(r) for r in recs] == [[_triple(S1, i)] for i in range(4)]
    assert lg.offsets() == {S1: 4}
    lg.append_push(S1, 9000, [_triple(S1, 9)])  # appends continue after the cut
    lg.sync()
    lg.close()
    with open(seg, "ab") as f:  # garbage after good records: a bad CRC, not a wrong element
        f.write(b"\x10\x00\x00\x00\xde\xad\xbe\xef" + b"x" * 16)
    lg = IngestLog(d)
    recs = list(lg.records())
    assert [r.seq for r in recs] == [0, 1, 2, 3, 4]
    assert recs[-1].header["o"] == 4 and recs[-1].header["t"] == 9000
    lg.close()


def test_state_dir_is_locked(tmp_path: Path) -> None:
    lg = IngestLog(str(tmp_path))
    try:
        with pytest.raises(OSError, match="in use"):
            IngestLog(str(tmp_path))
    finally:
        lg.close()
    IngestLog(str(tmp_path)).close()
