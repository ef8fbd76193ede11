"""kill -9 of the *leader* coordinator while elements are pushed to the live service (issue 17).

Real processes: the session's ZooKeeper, two API coordinators (``run --zk --state-dir`` on one
shared directory: the cluster's durable ingest log) and three operator containers.  Three
CityBench queries are registered over HTTP on the standby; the slice of ``tests/api`` is
pushed over HTTP, the first part to the leader; then the leader is killed with SIGKILL
between two acknowledged pushes and the rest is pushed to the survivor (503 while it takes
over: retried).  The new leader replays the shared log (every acknowledged element, in the
old leader's order) into a new run on the containers, sends no report time again that the
result log holds, and goes on.

Readers: a JSON Lines reader on the standby stays connected through the fail-over; an SSE
reader on the leader dies with it and resumes on the survivor with ``Last-Event-ID``.  Both
must equal an embedded ``run`` fed the same pushes: 0 lines lost, 0 duplicated, result ids
increasing.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from linkstream.api.client import Client
from linkstream.cluster.localcluster import LocalCluster
from tests.api.corpus import corpus_or_skip
from tests.cluster.test_live_service import QUERIES, SESSION_S, TIMEOUT, _wait_roles
from tests.cluster.test_streamlog import assert_direct

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]


def read_sse(
    url: str, name: str, into: list[tuple[str, str]], *, until: int, last_id: str | None = None
) -> str:
    """Appends ``(id, line)`` of ``name``'s SSE stream to ``into`` until the report at
    ``until`` (``"end"``) or until the connection breaks (``"broken"``)."""
    headers = {"Last-Event-ID": last_id} if last_id else {}
    path = f"{url}/queries/{quote(name, safe='')}/results"
    try:
        with httpx.stream(
            "GET",
            path,
            params={"until": str(until)},
            headers=headers,
            timeout=httpx.Timeout(10.0, read=TIMEOUT),
        ) as r:
            if r.status_code != 200:
                return f"status {r.status_code}: {r.read()!r}"
            ev_id, data = None, []
            for line in r.iter_lines():
                if line.startswith("id:"):
                    ev_id = line[3:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif line.startswith("event:") and line[6:].strip() != "result":
                    if line[6:].strip() == "end":
                        return "end"
                elif not line and data:
                    assert ev_id is not None
                    into.append((ev_id, json.dumps(json.loads("\n".join(data)), sort_keys=True)))
                    ev_id, data = None, []
        return "end"
    except httpx.HTTPError as exc:
        return f"broken: {type(exc).__name__}"


def collect(client: Client, name: str, until: int, into: dict[str, object], key: str) -> None:
    """Every line of ``name`` from its first report (``after=0``) through ``until``."""
    try:
        rows = client.results(name, until=until, after="0", timeout=TIMEOUT)
        into[key] = [json.dumps(row, sort_keys=True) for row in rows]
    except Exception as exc:  # reported by the main thread
        into[key] = exc


def push_retrying(urls: list[str], stream: str, body: str, t: int, deadline_s: float = 90.0) -> str:
    """Pushes one element to the first coordinator that acknowledges it (connection refused
    or 503 while a new leader takes over: the next one, then again); returns its URL."""
    deadline = time.monotonic() + deadline_s
    while True:
        for url in urls:
            try:
                r = httpx.post(
                    f"{url}/streams/{quote(stream, safe='')}",
                    params={"t": str(t)},
                    content=body.encode("utf-8"),
                    headers={"Content-Type": "application/n-triples"},
                    timeout=30.0,
                )
            except httpx.TransportError:
                continue
            if r.status_code == 202:
                assert r.json()["elements"] == 1, r.text
                return url
            assert r.status_code in (502, 503), r.text
        assert time.monotonic() < deadline, "no coordinator took the push"
        time.sleep(0.2)


@pytest.mark.parametrize("ingest", ["leader", "direct"])
def test_kill_9_of_the_leader_during_pushes_loses_nothing(
    tmp_path: Path, zk_server: str, zk_chroot: str, ingest: str
) -> None:
    corpus = corpus_or_skip(tmp_path)
    texts = corpus.texts(QUERIES)
    statics = corpus.static_args()
    state = tmp_path / "state"  # the shared ingest log of the coordinators
    until = corpus.last_report(1000)
    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    try:
        cluster.start(0, coordinators=0)
        names = [
            cluster.start_coordinator(
                ["--idle-ms", "0", "--state-dir", str(state), "--ingest", ingest, *statics]
            )
            for _ in range(2)
        ]
        cluster.add_containers(3)
        urls = cluster.api_urls(timeout=30)
        assert sorted(urls) == sorted(names), urls
        leader, standby = _wait_roles(urls)
        deadline = time.monotonic() + 30
        while True:  # 503 while a ZooKeeper hiccup of the loaded box moves the leadership: retry
            r = httpx.post(
                urls[standby] + "/queries",
                json=[{"query": texts[q], "name": q} for q in QUERIES],
                timeout=TIMEOUT,
            )
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        leader, standby = _wait_roles(urls)
        assert r.status_code == 201, r.text
        emb, std = Client(embedded.url), Client(urls[standby], timeout=TIMEOUT)
        for q in QUERIES:
            emb.register(texts[q], q)

        got: dict[str, object] = {}
        sse_first: list[tuple[str, str]] = []
        ended: dict[str, str] = {}
        threads = []
        for q in QUERIES:
            for key, client in ((f"emb/{q}", emb), (f"std/{q}", std)):
                th = threading.Thread(target=collect, args=(client, q, until, got, key), daemon=True)
                th.start()
                threads.append(th)
        sse_q = QUERIES[0]

        def on_leader() -> None:
            ended["first"] = read_sse(urls[leader], sse_q, sse_first, until=until, last_id="0")

        sse_th = threading.Thread(target=on_leader, daemon=True)
        sse_th.start()
        # (the readers start from the first report: after=0 / Last-Event-ID: 0)

        n = len(corpus.elements)
        kill_at = n // 2
        order = [urls[leader], urls[standby]]
        took: Counter[str] = Counter()
        for k, el in enumerate(corpus.elements):
            if k == kill_at:
                assert sse_first, "the SSE reader on the leader read nothing before the kill"
                cluster.kill(leader, signal.SIGKILL)
                order = [urls[standby]]
            took[push_retrying(order, el.stream, el.ntriples, el.t)] += 1
            emb.push(el.stream, el.ntriples, t=el.t)
            time.sleep(0.02)
        assert took[urls[leader]] == kill_at and took[urls[standby]] == n - kill_at, took
        sse_th.join(TIMEOUT)
        assert ended.get("first", "").startswith("broken"), ended  # it read from the dead leader
        std.advance(until)
        emb.advance(until)
        for th in threads:
            th.join(TIMEOUT)
        for key, value in got.items():
            assert not isinstance(value, Exception), f"{key}: {value!r}"
        for q in QUERIES:
            want, have = Counter(got[f"emb/{q}"]), Counter(got[f"std/{q}"])
            lost, dup = sum((want - have).values()), sum((have - want).values())
            assert (lost, dup) == (0, 0), f"{q}: {lost} lines lost, {dup} duplicated (standby's reader)"
        assert sum(len(got[f"emb/{q}"]) for q in QUERIES) > 0, "no result lines at all"  # type: ignore[arg-type]

        # the SSE reader of the dead leader resumes on the survivor after the last id it read
        rest: list[tuple[str, str]] = []
        assert read_sse(urls[standby], sse_q, rest, until=until, last_id=sse_first[-1][0]) == "end"
        both = sse_first + rest
        keys = [tuple(int(x) for x in i.split(":")) for i, _ in both]
        assert keys == sorted(keys) and len(set(keys)) == len(keys), [i for i, _ in both]
        want = Counter(got[f"emb/{sse_q}"])
        have = Counter(line for _, line in both)
        assert (sum((want - have).values()), sum((have - want).values())) == (0, 0)

        st = Client(urls[standby]).status()
        assert st["role"] == "leader" and st["ingest_log"]["directory"] == str(state), st
        log = (cluster.dir / "logs" / f"{standby}.log").read_text()
        assert "replayed" in log and "ingest log records" in log, log[-3000:]
        if ingest == "direct":  # the replay read the bodies back from the owners' stream logs
            assert_direct(state, sorted({el.stream for el in corpus.elements}))
    finally:
        cluster.stop()
        embedded.stop()


def test_a_new_leader_replays_only_the_registrations_the_registry_still_holds() -> None:
    from linkstream.cluster.registration import stale_registrations
    from linkstream.engine.live.ingestlog import LogRecord

    def rec(seq: int, kind: str, name: str = "") -> LogRecord:
        return LogRecord(seq, kind, {"k": kind, "q": seq, "name": name}, b"")

    log = [
        rec(0, "register", "gone"),  # unregistered later: its containers could not load it
        rec(1, "register", "again"),  # registered twice: only the last one counts
        rec(2, "push"),
        rec(3, "unregister", "again"),
        rec(4, "register", "kept"),
        rec(5, "register", "again"),
        rec(6, "unregister", "gone"),
        rec(7, "register", "lost"),  # in the log, no longer in the registry (removed while it died)
    ]
    assert stale_registrations(log, {"again", "kept"}) == {0, 1, 3, 6, 7}


def test_a_leader_serves_only_once_it_holds_the_log(tmp_path: Path, zk_server: str, zk_chroot: str) -> None:
    """The shared log's lock fences the leaders: while another process holds it (an old leader
    that has not stepped down yet), an elected coordinator does not serve; it does once the
    lock is released."""
    import fcntl

    state = tmp_path / "state"
    state.mkdir()
    fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    try:
        cluster.start(0, coordinators=0)
        name = cluster.start_coordinator(["--idle-ms", "0", "--state-dir", str(state)])
        url = cluster.api_urls(timeout=30)[name]
        deadline = time.monotonic() + 30
        while "elected leader" not in (cluster.dir / "logs" / f"{name}.log").read_text():
            assert time.monotonic() < deadline, "the coordinator was not elected"
            time.sleep(0.1)
        time.sleep(2.0)
        st = httpx.get(url + "/status", timeout=10).json()
        assert st["role"] == "standby" and "ingest_log" not in st, st  # elected, but not serving
        r = httpx.post(url + "/watermark", params={"t": "1000"}, timeout=30)
        assert r.status_code == 503, r.text
        os.close(fd)  # the lock goes with its holder
        deadline = time.monotonic() + 30
        while httpx.get(url + "/status", timeout=10).json()["role"] != "leader":
            assert time.monotonic() < deadline, "the coordinator does not serve after the lock was released"
            time.sleep(0.2)
        assert httpx.get(url + "/status", timeout=10).json()["ingest_log"]["directory"] == str(state)
    finally:
        cluster.stop()
