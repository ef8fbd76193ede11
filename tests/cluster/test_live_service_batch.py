"""Issue 15: a thousand queries registered through the cluster's API in one batch.

Real processes: the session's ZooKeeper, two API coordinators (``run --zk``) and three
operator containers.  1,000 queries from the CityBench templates (``tests/engine/test_sharing``)
are registered as one JSON array on the *standby* (forwarded to the leader, which writes the
registry records, the run node and the tasks in a few ZooKeeper transactions); the same batch
goes to an embedded ``run``.  Then the CityBench slice is pushed to both; the result lines of a
sample of the queries, read over JSON Lines from the standby, equal the embedded run's.

A batch that fails part-way is answered as embedded ``run`` answers it (same status, same
body: the failing ``index`` and the names ``registered`` before it), and the cluster holds
exactly those.  Finally the leader is killed (SIGKILL): the standby takes over and re-loads all
the queries from the registry in one pass; they are placed again.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from linkstream.api.client import Client
from linkstream.cluster.driverstate import task_id
from linkstream.cluster.localcluster import LocalCluster
from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.registry import QueryRegistry
from tests.api.corpus import corpus_or_skip
from tests.cluster.test_live_service import _wait_roles
from tests.engine.test_sharing import generate

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper, pytest.mark.slow]  # ~30 s on 2 idle cores

SESSION_S = 2.0
TIMEOUT = 60.0
N = 1000
SAMPLE = 25  # queries whose result lines are compared line by line


def _running(url: str, n: int, timeout: float) -> dict[str, int]:
    """Waits until ``n`` queries are ``running``; returns the count of each state."""
    deadline = time.monotonic() + timeout
    while True:
        qs = httpx.get(url + "/queries", timeout=TIMEOUT).json()["queries"]
        states = Counter(q["state"].split(":")[0] for q in qs)
        if states["running"] >= n or time.monotonic() > deadline:
            return dict(states)
        time.sleep(0.5)


def _read(client: Client, name: str, until: int, into: dict, key: str) -> None:
    try:
        rows = client.results(name, until=until, timeout=TIMEOUT)
        into[key] = [json.dumps(row, sort_keys=True) for row in rows]
    except Exception as exc:  # reported by the main thread
        into[key] = exc


def test_a_thousand_queries_in_one_batch_equal_embedded_run(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    corpus = corpus_or_skip(tmp_path)
    statics = corpus.static_args()
    batch = [{"query": text, "name": name} for name, text in generate(N).items()]
    until = corpus.last_report(2000)

    embedded = corpus.embedded_server()
    cluster = LocalCluster(
        tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S, capacity=N
    )
    try:
        cluster.start(0, coordinators=0)
        for _ in range(2):
            cluster.start_coordinator(["--idle-ms", "0", *statics])
        cluster.add_containers(3)
        urls = cluster.api_urls(timeout=30)
        leader, standby = _wait_roles(urls)

        t0 = time.perf_counter()
        r = httpx.post(urls[standby] + "/queries", json=batch, timeout=TIMEOUT)
        reg_s = time.perf_counter() - t0
        assert r.status_code == 201, r.text[:500]
        names = [q["name"] for q in r.json()["queries"]]
        assert names == [d["name"] for d in batch]
        assert {q["state"] for q in r.json()["queries"]} <= {"pending", "running"}
        r = httpx.post(embedded.url + "/queries", json=batch, timeout=TIMEOUT)
        assert r.status_code == 201, r.text[:500]

        # the registry and the assignment table hold every query, placed on the containers
        zk = cluster.client()
        root = cluster.state.root
        try:
            assert sorted(QueryRegistry(zk, root).list()) == sorted(task_id(n) for n in names)
            states = _running(urls[standby], N, TIMEOUT)
            assert states == {"running": N}, states
            owners = Counter(a.container for a in AssignmentTable(zk, root).all().values())
        finally:
            zk.stop()
            zk.close()
        assert sum(owners.values()) == N and len(owners) == 3, owners
        listed = httpx.get(urls[standby] + "/queries", timeout=TIMEOUT).json()["queries"]
        assert [q["name"] for q in listed] == names  # in registration order

        # a batch failing part-way: answered as embedded run answers it, and only the part before holds
        bad = [
            {"query": batch[0]["query"], "name": "extra-1"},
            {"query": batch[1]["query"], "name": names[7]},  # taken
            {"query": batch[2]["query"], "name": "extra-2"},
        ]
        unparsable = [
            {"query": batch[3]["query"], "name": "extra-3"},
            {"query": "REGISTER RSTREAM <x> AS SELECT * WHERE { ?s ?p", "name": "extra-4"},
        ]
        for body in (bad, unparsable):
            a = httpx.post(urls[standby] + "/queries", json=body, timeout=TIMEOUT)
            b = httpx.post(embedded.url + "/queries", json=body, timeout=TIMEOUT)
            assert (a.status_code, a.json()) == (b.status_code, b.json())
        assert a.status_code == 400 and a.json()["index"] == 1 and "registered" not in a.json()
        conflict = httpx.post(urls[leader] + "/queries", json=bad, timeout=TIMEOUT)
        assert conflict.status_code == 409, conflict.text
        assert conflict.json()["index"] == 0 and "extra-1" in conflict.json()["error"]
        have = {q["name"] for q in httpx.get(urls[standby] + "/queries", timeout=TIMEOUT).json()["queries"]}
        assert "extra-1" in have and "extra-2" not in have and "extra-3" not in have
        assert len(have) == N + 1
        for url in (urls[standby], embedded.url):
            assert httpx.delete(url + "/queries/extra-1", timeout=TIMEOUT).status_code == 204

        # the slice pushed to both: the sample's result lines are equal
        sample = names[:: N // SAMPLE]
        std, emb = Client(urls[standby], timeout=TIMEOUT), Client(embedded.url, timeout=TIMEOUT)
        got: dict[str, object] = {}
        threads = []
        for q in sample:
            for key, client in ((f"cl/{q}", std), (f"emb/{q}", emb)):
                th = threading.Thread(target=_read, args=(client, q, until, got, key), daemon=True)
                th.start()
                threads.append(th)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if all(std.query(q)["subscribers"] >= 1 and emb.query(q)["subscribers"] >= 1 for q in sample):
                break
            time.sleep(0.2)
        for el in corpus.elements:
            assert std.push(el.stream, el.ntriples, t=el.t)["elements"] == 1
            assert emb.push(el.stream, el.ntriples, t=el.t)["elements"] == 1
        std.advance(until)
        emb.advance(until)
        for th in threads:
            th.join(TIMEOUT)
        for key, value in got.items():
            assert not isinstance(value, Exception), f"{key}: {value!r}"
        assert len(got) == 2 * len(sample)
        for q in sample:
            assert Counter(got[f"cl/{q}"]) == Counter(got[f"emb/{q}"]), q  # type: ignore[arg-type]
        assert sum(len(got[f"emb/{q}"]) for q in sample) > 0, "no result lines at all"  # type: ignore[arg-type]

        # the leader dies: the standby re-loads every query of the registry and places them again
        cluster.kill(leader, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _wait_roles_once(urls[standby]) != "leader":
            assert time.monotonic() < deadline, "the standby did not take over"
            time.sleep(0.2)
        states = _running(urls[standby], N, TIMEOUT)
        assert states == {"running": N}, states
        print(f"\nregistered {N} queries in one batch via the standby in {reg_s:.2f} s ({N / reg_s:.0f}/s)")
    finally:
        cluster.stop()
        embedded.stop()


def _wait_roles_once(url: str) -> str:
    try:
        return str(httpx.get(url + "/status", timeout=5).json().get("role", "?"))
    except (httpx.HTTPError, ValueError):
        return "down"
