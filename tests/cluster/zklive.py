"""One round of pushes to the live service (``run --zk``) across a ZooKeeper restart.

Shared by ``tests/cluster/test_zk_restart_live.py`` (one round) and
``bench/zk_restarts.py`` (``--restarts`` rounds on one cluster).

A round registers queries under fresh names on the cluster (and on an embedded server);
two clients push the CityBench slice of ``tests/api`` over HTTP, each one stream, in its
time order, to a coordinator of its own, every push under an ``Idempotency-Key``.  Once
both have pushed the first third, the cluster's ZooKeeper is killed with SIGKILL, kept
down for ``down_s`` and started again on its port and data directory; the clients go on
pushing (slowly) while it is away, and push the last third once it is back.  A push
answered 503/502 or whose connection broke is sent again, with the same key, to the next
coordinator until one answers 2xx; one answered 2xx must be in the results.  Then the
watermark passes the last report, and every query's results, read over the API from
every coordinator (``?after=0``: from the first report), must equal the embedded
server's, which was fed the same pushes: 0 lines lost, 0 duplicated.

Two streams pushed concurrently need no common order: each stream's elements are in time
order and no report fires before every stream read has passed it (``--idle-ms 0``), so
no element is late whatever the interleaving (docs/semantics.md, live server).
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import httpx

from linkstream.api.client import Client
from linkstream.cluster.localcluster import ZK_SCRIPT, LocalCluster
from tests.api.corpus import Corpus, Element

TIMEOUT = 60.0
OK = (200, 201, 202)
RETRY = (502, 503)


@dataclass
class PushLog:
    """What one client's pushes met."""

    answered: int = 0  # pushes answered 2xx (each element once)
    refused: int = 0  # answers 503/502 (retried with the key)
    broken: int = 0  # connections refused or broken (retried with the key)
    first_refused: float | None = None  # monotonic time of the first 503/502 or broken connection
    first_ok_after_up: float | None = None  # the first 2xx sent after ZooKeeper was back
    slowest: float = 0.0  # the longest request (s)
    slowest_while_down: float = 0.0  # the longest request sent while ZooKeeper was away
    slowest_while_down_was: str = ""  # that request: where it went and what it was answered
    statuses: Counter[int] = field(default_factory=Counter)
    error: str | None = None


def restart_zookeeper(cluster: LocalCluster, down_s: float, marks: dict[str, float]) -> None:
    """Kills the cluster's own ZooKeeper (SIGKILL), waits ``down_s`` and starts it again on the
    same port, data directory and TLS material; ``marks``: ``down``, ``starting``, ``up``."""
    record = cluster.state.processes["zookeeper"]
    port = cluster.hosts.rsplit(":", 1)[1]
    marks["down"] = time.monotonic()
    cluster.kill("zookeeper", signal.SIGKILL)
    time.sleep(down_s)
    marks["starting"] = time.monotonic()
    command = ["bash", str(ZK_SCRIPT), "--port", port, "--data-dir", str(cluster.dir / "zookeeper")]
    command += ["--tick-time", "500", "--tls-dir", str(cluster.dir / "zk-tls")]
    command += ["--wait", "90"]  # a JVM with TLS starts slowly on a loaded machine
    started = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    if started.returncode != 0:
        raise RuntimeError(f"ZooKeeper did not start again: {started.stderr[-2000:]}")
    record.pid = int(started.stdout.strip().splitlines()[-1])
    cluster.save()
    marks["up"] = time.monotonic()


def post_retrying(urls: list[str], path: str, deadline_s: float = 120.0, **kw: object) -> httpx.Response:
    """POSTs to the first coordinator that answers 2xx (503/502 or a broken connection: the
    next one, then again); an answer of another status is returned as is."""
    deadline = time.monotonic() + deadline_s
    while True:
        for url in urls:
            try:
                r = httpx.post(url + path, timeout=30.0, **kw)  # type: ignore[arg-type]
            except httpx.TransportError:
                continue
            if r.status_code not in RETRY:
                return r
        if time.monotonic() > deadline:
            raise AssertionError(f"no coordinator took POST {path} within {deadline_s:g} s")
        time.sleep(0.2)


def push_stream(
    urls: list[str],
    first: int,
    elements: list[Element],
    shift: int,
    tag: str,
    gates: tuple[threading.Event, threading.Event, threading.Event],
    log: PushLog,
    up: dict[str, float],
) -> None:
    """Pushes ``elements`` (one stream, time order) with keys ``tag-k``: the first third, then
    ``gates[0]`` set and waits for ``gates[1]`` (ZooKeeper down); the next third slowly; waits
    for ``gates[2]`` (ZooKeeper back); the rest.  Retries as :func:`post_retrying`, same key."""
    reached, down, back = gates
    n = len(elements)
    order = urls[first:] + urls[:first]
    try:
        for k, el in enumerate(elements):
            if k == n // 3:
                reached.set()
                down.wait(TIMEOUT)
            if k == 2 * n // 3:
                back.wait(180)
            path = f"/streams/{quote(el.stream, safe='')}"
            deadline = time.monotonic() + 180
            while True:
                sent = time.monotonic()
                try:
                    r = httpx.post(
                        order[0] + path,
                        params={"t": str(el.t + shift)},
                        content=el.ntriples.encode("utf-8"),
                        headers={"Content-Type": "application/n-triples", "Idempotency-Key": f"{tag}-{k}"},
                        timeout=30.0,
                    )
                except httpx.TransportError:
                    log.broken += 1
                    log.first_refused = log.first_refused or time.monotonic()
                    order = order[1:] + order[:1]
                    status = 0
                else:
                    status = r.status_code
                    log.statuses[status] += 1
                took = time.monotonic() - sent
                log.slowest = max(log.slowest, took)
                if "down" in up and sent >= up["down"] and "up" not in up and took > log.slowest_while_down:
                    log.slowest_while_down = took
                    answer = r.text[:300] if status else "connection broken"
                    log.slowest_while_down_was = (
                        f"{tag}-{k} to {order[-1] if status == 0 else order[0]}: {status} {answer}"
                    )
                if status in OK:
                    body = r.json()
                    if body.get("elements") != 1 or body.get("late"):
                        raise AssertionError(f"push {tag}-{k} answered {status}: {r.text}")
                    log.answered += 1
                    if "up" in up and sent >= up["up"] and log.first_ok_after_up is None:
                        log.first_ok_after_up = time.monotonic()
                    break
                if status != 0:
                    if status not in RETRY:
                        raise AssertionError(f"push {tag}-{k} answered {status}: {r.text}")
                    log.refused += 1
                    log.first_refused = log.first_refused or time.monotonic()
                    order = order[1:] + order[:1]
                if time.monotonic() > deadline:
                    raise AssertionError(f"push {tag}-{k}: no coordinator took it within 180 s")
                time.sleep(0.2)
            if down.is_set():
                # slowly while ZooKeeper is away and after (sessions restored by the restart
                # may still expire, the leadership move): the pushes span it all
                time.sleep(0.3 if not back.is_set() else 0.4)
            else:
                time.sleep(0.02)
    except Exception as exc:  # reported by the round
        log.error = f"{type(exc).__name__}: {exc}"
    finally:
        reached.set()


def read_all(urls: dict[str, str], names: list[str], until: int) -> dict[str, list[str] | str]:
    """``{coordinator/query: lines}`` read from every coordinator from the first report
    through ``until`` (a 503 while no leader serves: again)."""
    out: dict[str, list[str] | str] = {}
    for cid, url in urls.items():
        client = Client(url, timeout=TIMEOUT)
        for q in names:
            deadline = time.monotonic() + 120
            while True:
                try:
                    rows = client.results(q, until=until, after="0", timeout=TIMEOUT)
                    out[f"{cid}/{q}"] = [json.dumps(row, sort_keys=True) for row in rows]
                    break
                except Exception as exc:  # a 503 or a broken read while the leadership moves
                    if time.monotonic() > deadline:
                        out[f"{cid}/{q}"] = f"{type(exc).__name__}: {exc}"
                        break
                    time.sleep(0.5)
        client.close()
    return out


def log_times(path: Path, needle: str) -> list[float]:
    """Wall-clock times (epoch s) of the lines of a process log that contain ``needle``."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if needle in line:
            try:
                out.append(datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp())
            except ValueError:
                continue
    return out


@dataclass
class RoundResult:
    lost: int
    duplicated: int
    lines: int
    pushes: int
    refused: int
    broken: int
    errors: list[str]
    marks: dict[str, float]
    first_refused_s: float | None  # ZooKeeper killed -> first push refused
    first_ok_after_up_s: float | None  # ZooKeeper back -> first push taken
    slowest_push_s: float  # the longest push request
    slowest_push_while_down_s: float  # the longest push request sent while ZooKeeper was away
    slowest_push_while_down_was: str  # that push: where it went and what it was answered
    seconds: float


def zk_restart_round(
    cluster: LocalCluster,
    emb: Client,
    corpus: Corpus,
    texts: dict[str, str],
    shift: int,
    down_s: float | None,
    tag: str,
) -> RoundResult:
    """One round (see the module doc); the queries of ``texts`` are registered as given;
    ``down_s`` ``None``: the same pushes without an outage (a peer round)."""
    urls = cluster.api_urls(timeout=TIMEOUT)
    url_list = [urls[c] for c in sorted(urls)]
    r = post_retrying(url_list, "/queries", json=[{"query": t, "name": q} for q, t in texts.items()])
    assert r.status_code == 201, r.text
    for q, text in texts.items():
        emb.register(text, q)
    until = corpus.last_report(1000) + shift
    streams = sorted({el.stream for el in corpus.elements})
    gates = [(threading.Event(), threading.Event(), threading.Event()) for _ in streams]
    logs = [PushLog() for _ in streams]
    marks: dict[str, float] = {}
    t0 = time.perf_counter()
    pushers = [
        threading.Thread(
            target=push_stream,
            args=(
                url_list,
                i % len(url_list),
                [el for el in corpus.elements if el.stream == s],
                shift,
                f"{tag}-{i}",
                gates[i],
                logs[i],
                marks,
            ),
            daemon=True,
        )
        for i, s in enumerate(streams)
    ]
    for th in pushers:
        th.start()
    for g in gates:
        g[0].wait(TIMEOUT)
    outage_error: list[str] = []

    def outage() -> None:
        try:
            restart_zookeeper(cluster, down_s, marks)
        except Exception as exc:  # reported by the round
            outage_error.append(str(exc))
        finally:
            for g in gates:
                g[2].set()

    th_out = threading.Thread(target=outage, daemon=True)
    if down_s is None:  # the peer round: no outage
        for g in gates:
            g[2].set()
    else:
        th_out.start()
    while "down" not in marks and th_out.is_alive():
        time.sleep(0.01)
    for g in gates:
        g[1].set()
    if down_s is not None:
        th_out.join(180)
    for th in pushers:
        th.join(300)
    for el in corpus.elements:  # the embedded server gets the same pushes (merged by time)
        emb.push(el.stream, el.ntriples, t=el.t + shift)
    emb.advance(until)
    r = post_retrying(url_list, "/watermark", params={"t": str(until)})
    assert r.status_code in OK, r.text
    names = list(texts)
    want = {
        q: Counter(json.dumps(row, sort_keys=True) for row in emb.results(q, until=until, after="0"))
        for q in names
    }
    got = read_all(urls, names, until)
    errors = [f"pushes {i}: {lg.error}" for i, lg in enumerate(logs) if lg.error] + outage_error
    lost = dup = 0
    for key, lines in got.items():
        if isinstance(lines, str):
            errors.append(f"read {key}: {lines}")
            continue
        have = Counter(lines)
        w = want[key.split("/", 1)[1]]
        lost += sum((w - have).values())
        dup += sum((have - w).values())
    down = marks.get("down")
    firsts = [lg.first_refused for lg in logs if lg.first_refused is not None]
    oks = [lg.first_ok_after_up for lg in logs if lg.first_ok_after_up is not None]
    return RoundResult(
        lost=lost,
        duplicated=dup,
        lines=sum(sum(w.values()) for w in want.values()) * len(urls),
        pushes=sum(lg.answered for lg in logs),
        refused=sum(lg.refused for lg in logs),
        broken=sum(lg.broken for lg in logs),
        errors=errors,
        marks=marks,
        first_refused_s=min(firsts) - down if firsts and down else None,
        first_ok_after_up_s=min(oks) - marks["up"] if oks and "up" in marks else None,
        slowest_push_s=max(lg.slowest for lg in logs),
        slowest_push_while_down_s=max(lg.slowest_while_down for lg in logs),
        slowest_push_while_down_was=max(logs, key=lambda lg: lg.slowest_while_down).slowest_while_down_was,
        seconds=time.perf_counter() - t0,
    )
