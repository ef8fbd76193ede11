"""Issue 15, first cut: the cluster is a live service (``linkstream run --zk``).

Real processes: the session's ZooKeeper, two API coordinators (``run --zk``) and two
operator containers.  Queries are registered (one batch) and the CityBench slice of
``tests/api`` is pushed over HTTP on the *standby*, which forwards to the leader; the
result lines read over JSONL and SSE from the standby must equal those of an embedded
``run`` (a :class:`LiveEngine` behind the same app) fed the same pushes.  Then the
leader is killed with SIGKILL: the other coordinator still lists the queries (the
registry is the truth) and, once elected, re-loads them.

Resumable delivery: SSE subscribers disconnect and come back with ``Last-Event-ID`` --
on the same coordinator, on the embedded server, and on the standby after the leader they
read from was killed with SIGKILL -- and JSONL readers with ``?after=``: what they read
before and after, together, equals the embedded run's lines, none twice.  A second test
adds a container and drains another while elements are pushed; the results still equal
the embedded run's.
"""

from __future__ import annotations

import json
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

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

SESSION_S = 2.0
QUERIES = ["cqels-Q1", "rspql-avg-congestion", "csparql-Q1"]
TIMEOUT = 60.0


def _roles(urls: dict[str, str]) -> dict[str, str]:
    out = {}
    for cid, url in urls.items():
        try:  # engine figures moved from /healthz to /status in the API's auth work
            r = httpx.get(url + "/status", timeout=5)
            if r.status_code == 404:
                r = httpx.get(url + "/healthz", timeout=5)
            out[cid] = r.json().get("role", "?")
        except httpx.HTTPError:
            out[cid] = "down"
    return out


def _wait_roles(urls: dict[str, str], timeout: float = 30.0) -> tuple[str, str]:
    """``(leader, standby)`` coordinator ids once one leads with its backend up."""
    deadline = time.monotonic() + timeout
    while True:
        roles = _roles(urls)
        leaders = [c for c, r in roles.items() if r == "leader"]
        standbys = [c for c, r in roles.items() if r == "standby"]
        if len(leaders) == 1 and standbys:
            return leaders[0], standbys[0]
        assert time.monotonic() < deadline, f"no leader: {roles}"
        time.sleep(0.2)


def _sse(
    url: str,
    name: str,
    *,
    last_id: str | None = None,
    limit: int | None = None,
    stop_after: int | None = None,
    after: str | None = None,
    jsonl: bool = False,
) -> list[tuple[str | None, str]]:
    """``(id, line)`` pairs read from a result stream; ``stop_after``: disconnect after that many."""
    headers = {"Last-Event-ID": last_id} if last_id else {}
    params = {k: v for k, v in (("limit", limit), ("after", after)) if v is not None}
    path = f"{url}/queries/{quote(name, safe='')}/results" + (".jsonl" if jsonl else "")
    out: list[tuple[str | None, str]] = []
    timeout = httpx.Timeout(10.0, read=TIMEOUT)
    with httpx.stream("GET", path, params=params, headers=headers, timeout=timeout) as r:
        assert r.status_code == 200, r.read()
        ev_id, data = None, []
        for line in r.iter_lines():
            if jsonl:
                if line.strip():
                    out.append((None, json.dumps(json.loads(line), sort_keys=True)))
            elif line.startswith("id:"):
                ev_id = line[3:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].strip())
            elif line.startswith("event: end"):
                break
            elif not line and data:
                out.append((ev_id, json.dumps(json.loads("\n".join(data)), sort_keys=True)))
                ev_id, data = None, []
            if stop_after is not None and len(out) >= stop_after:
                break
    return out


def _check_resume(url: str, name: str, want: Counter, cut: int) -> list[str]:
    """Reads ``cut`` lines from the start (``Last-Event-ID: 0``), disconnects, resumes after
    the last id read; the two parts must be ``want``, ids increasing, none twice."""
    total = sum(want.values())
    first = _sse(url, name, last_id="0", stop_after=cut)
    assert len(first) == cut
    rest = _sse(url, name, last_id=first[-1][0], limit=total - cut)
    ids = [i for i, _ in first + rest]
    keys = [tuple(int(x) for x in i.split(":")) for i in ids]  # type: ignore[union-attr]
    assert keys == sorted(keys) and len(set(keys)) == len(keys), ids
    assert Counter(line for _, line in first + rest) == want
    # JSON Lines resume after the same id: the same rest
    assert [ln for _, ln in _sse(url, name, after=first[-1][0], limit=total - cut, jsonl=True)] == [
        ln for _, ln in rest
    ]
    return ids


def _collect(client: Client, name: str, until: int, sse: bool, into: dict, key: str) -> None:
    try:
        into[key] = [line for line in _lines(client, name, until, sse)]
    except Exception as exc:  # reported by the main thread
        into[key] = exc


def _lines(client: Client, name: str, until: int, sse: bool):
    import json

    for row in client.results(name, until=until, sse=sse, timeout=TIMEOUT):
        yield json.dumps(row, sort_keys=True)


def test_cluster_serves_the_api_like_embedded_run(tmp_path: Path, zk_server: str, zk_chroot: str) -> None:
    corpus = corpus_or_skip(tmp_path)
    texts = corpus.texts(QUERIES)
    statics = corpus.static_args()
    until = corpus.last_report(1000)

    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    try:
        cluster.start(0, coordinators=0)  # the credential and the state file, no process yet
        for _ in range(2):
            cluster.start_coordinator(["--idle-ms", "0", *statics])
        cluster.add_containers(2)
        urls = cluster.api_urls(timeout=30)
        assert len(urls) == 2, urls
        leader, standby = _wait_roles(urls)

        # register: one batch on the standby (forwarded), the same queries one by one embedded
        t0 = time.perf_counter()
        r = httpx.post(
            urls[standby] + "/queries",
            json=[{"query": texts[q], "name": q} for q in QUERIES],
            timeout=TIMEOUT,
        )
        reg_s = time.perf_counter() - t0
        assert r.status_code == 201, r.text
        assert [q["name"] for q in r.json()["queries"]] == QUERIES
        emb = Client(embedded.url)
        for q in QUERIES:
            emb.register(texts[q], q)
        std = Client(urls[standby], timeout=TIMEOUT)
        assert sorted(q["name"] for q in std.queries()) == sorted(QUERIES)

        # subscribe (JSONL on both, SSE too on the standby), then push the same elements
        got: dict[str, object] = {}
        threads = []
        for q in QUERIES:
            for key, client, sse in (
                (f"emb/{q}", emb, False),
                (f"cl/{q}", std, False),
                (f"sse/{q}", std, True),
            ):
                if key.startswith("sse/") and q != QUERIES[0]:
                    continue
                th = threading.Thread(target=_collect, args=(client, q, until, sse, got, key), daemon=True)
                th.start()
                threads.append(th)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            views = [std.query(q) for q in QUERIES] + [emb.query(q) for q in QUERIES]
            if all(v["subscribers"] >= 1 for v in views):
                break
            time.sleep(0.1)
        t0 = time.perf_counter()
        for el in corpus.elements:
            assert std.push(el.stream, el.ntriples, t=el.t)["elements"] == 1
        push_s = time.perf_counter() - t0
        for el in corpus.elements:
            emb.push(el.stream, el.ntriples, t=el.t)
        std.advance(until)
        emb.advance(until)
        for th in threads:
            th.join(TIMEOUT)
        for key, value in got.items():
            assert not isinstance(value, Exception), f"{key}: {value!r}"
        for q in QUERIES:
            want, have = Counter(got[f"emb/{q}"]), Counter(got[f"cl/{q}"])
            assert have == want, f"{q}: cluster {sum(have.values())} lines, embedded {sum(want.values())}"
        assert Counter(got[f"sse/{QUERIES[0]}"]) == Counter(got[f"emb/{QUERIES[0]}"])
        assert sum(len(got[f"emb/{q}"]) for q in QUERIES) > 0, "no result lines at all"  # type: ignore[arg-type]
        # resume on one coordinator, on the embedded server: the same lines, none twice
        for q in QUERIES:
            want = Counter(got[f"emb/{q}"])
            if sum(want.values()) < 2:
                continue
            cut = sum(want.values()) // 2
            ids = _check_resume(urls[standby], q, want, cut)
            assert _check_resume(embedded.url, q, want, cut) == ids, f"{q}: ids differ from embedded"
        # a subscriber of the leader reads part, the leader dies (kill -9), it resumes on the standby
        q = max(QUERIES, key=lambda n: len(got[f"emb/{n}"]))  # type: ignore[arg-type]
        want = Counter(got[f"emb/{q}"])
        cut = max(1, sum(want.values()) // 3)
        first = _sse(urls[leader], q, last_id="0", stop_after=cut)
        cluster.kill(leader, signal.SIGKILL)
        rest = _sse(urls[standby], q, last_id=first[-1][0], limit=sum(want.values()) - cut)
        assert Counter(ln for _, ln in first + rest) == want, "resumed after kill -9: lines differ"
        assert len({i for i, _ in first + rest}) == sum(want.values()), "resumed after kill -9: an id twice"

        print(
            f"\nregistered {len(QUERIES)} queries in {reg_s * 1e3:.0f} ms (batch, via standby); pushed "
            f"{len(corpus.elements)} elements in {push_s:.2f} s ({len(corpus.elements) / push_s:.0f}/s, via standby)"
        )

        # the leader is dead: the other coordinator lists the queries, then leads with them
        names = sorted(q["name"] for q in std.queries())
        assert names == sorted(QUERIES)
        deadline = time.monotonic() + 30
        while _roles({standby: urls[standby]})[standby] != "leader":
            assert time.monotonic() < deadline, "the standby did not take over"
            time.sleep(0.2)
        assert sorted(q["name"] for q in std.queries()) == sorted(QUERIES)
        assert std.query(QUERIES[1])["state"] in ("pending", "running")
    finally:
        cluster.stop()
        embedded.stop()


def test_results_equal_while_containers_come_and_go(tmp_path: Path, zk_server: str, zk_chroot: str) -> None:
    """One coordinator, two containers; while the slice is pushed a third container joins
    and the first is drained away (``containers add`` / ``remove``): the JSONL results
    still equal the embedded run's."""
    corpus = corpus_or_skip(tmp_path)
    texts = corpus.texts(QUERIES)
    statics = corpus.static_args()
    until = corpus.last_report(1000)
    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    try:
        cluster.start(0, coordinators=0)
        cluster.start_coordinator(["--idle-ms", "0", *statics])
        first = cluster.add_containers(2)[0]
        (cid, url), *_ = cluster.api_urls(timeout=30).items()
        deadline = time.monotonic() + 30
        while _roles({cid: url})[cid] != "leader":
            assert time.monotonic() < deadline, "the coordinator does not lead"
            time.sleep(0.2)
        cl, emb = Client(url, timeout=TIMEOUT), Client(embedded.url)
        for q in QUERIES:
            cl.register(texts[q], q)
            emb.register(texts[q], q)
        got: dict[str, object] = {}
        threads = []
        for q in QUERIES:
            for key, client in ((f"emb/{q}", emb), (f"cl/{q}", cl)):
                th = threading.Thread(target=_collect, args=(client, q, until, False, got, key), daemon=True)
                th.start()
                threads.append(th)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
            v["subscribers"] >= 1 for v in [cl.query(q) for q in QUERIES] + [emb.query(q) for q in QUERIES]
        ):
            time.sleep(0.1)
        changes: list[threading.Thread] = []
        n = len(corpus.elements)
        for k, el in enumerate(corpus.elements):
            if k == n // 6:
                th = threading.Thread(target=cluster.add_containers, args=(1,), daemon=True)
            elif k == n // 3:
                th = threading.Thread(target=cluster.remove_container, args=(first, 60.0), daemon=True)
            else:
                th = None
            if th is not None:
                th.start()
                changes.append(th)
            assert cl.push(el.stream, el.ntriples, t=el.t)["elements"] == 1
            emb.push(el.stream, el.ntriples, t=el.t)
            time.sleep(0.1)
        for th in changes:
            th.join(70)
            assert not th.is_alive(), "adding or draining a container did not finish"
        assert first not in cluster.members()
        cl.advance(until)
        emb.advance(until)
        for th in threads:
            th.join(TIMEOUT)
        for key, value in got.items():
            assert not isinstance(value, Exception), f"{key}: {value!r}"
        for q in QUERIES:
            want, have = Counter(got[f"emb/{q}"]), Counter(got[f"cl/{q}"])
            assert have == want, f"{q}: cluster {sum(have.values())} lines, embedded {sum(want.values())}"
        assert sum(len(got[f"emb/{q}"]) for q in QUERIES) > 0, "no result lines at all"  # type: ignore[arg-type]
    finally:
        cluster.stop()
        embedded.stop()
