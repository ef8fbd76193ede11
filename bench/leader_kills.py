"""kill -9 of the *leader coordinator* of the live service, N seeded times: ``bench/cluster_kills.py --kill leader``.

A local cluster (its own ZooKeeper, two API coordinators ``run --zk --state-dir`` on one
shared directory, three containers).  Each round registers the queries of ``tests/api``'s
CityBench slice under fresh names on the cluster and on an embedded server, pushes the slice
over HTTP (shifted in time per round, every push with an ``Idempotency-Key``) to both, and
kills the leader coordinator with SIGKILL at a random element plus a random delay (so
sometimes in the middle of a push, which the client then retries on the survivor with the
same key).  A fresh coordinator is started as the next standby after each round.

Readers per round: JSON Lines readers of every query on the standby (they stay connected
through the fail-over) and one SSE reader on the leader that dies with it and resumes on the
survivor with ``Last-Event-ID``.  Their lines are compared with the embedded server's:
**lost** and **duplicated** lines must be 0.

Recovery times per kill: to the first push acknowledged by the new leader (``ingest s``)
and to the first result line a survivor's reader receives (``results s``); the new leader's
own replay of the shared ingest log (from its log), and the take-over's phases: seconds from
the kill to each milestone in the new leader's log (:data:`MILESTONES`: elected, live run
opened, ingest log locked, checkpoint restored, last container joined, log replayed,
leading), printed under each kill, p50 and max in the JSON summary.
"""

from __future__ import annotations

import json
import random
import re
import signal
import statistics
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from linkstream.api.app import create_app
from linkstream.api.client import ApiError, Client
from linkstream.api.server import BackgroundServer, build_live
from linkstream.cluster.localcluster import LocalCluster

NAMES = ["cqels-Q1", "rspql-avg-congestion", "csparql-Q1"]


#: milestones of a take-over in the new leader's log, in order (name, pattern)
MILESTONES = (
    ("elected", r"elected leader"),
    ("run_opened", r"live run \S+ opened"),
    ("log_locked", r"opened the ingest log"),
    ("checkpoint_restored", r"restored cluster checkpoint"),
    ("containers_joined", r"joined the run at tick"),
    ("replayed", r"replayed \d+ ingest log records"),
    ("leading", r"leading; \d+ queries re-loaded"),
)
STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def phases(log: str, killed_wall: float) -> dict[str, float]:
    """Seconds from the kill to each milestone of the take-over in the new leader's ``log``
    (the first line after the kill; for ``containers_joined`` the last one before ``replayed``)."""
    import datetime as dt

    out: dict[str, float] = {}
    for line in log.splitlines():
        m = STAMP.match(line)
        if not m:
            continue
        at = dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
        if at < killed_wall - 0.002:
            continue
        for name, pattern in MILESTONES:
            if re.search(pattern, line) and (
                name not in out or (name == "containers_joined" and "replayed" not in out)
            ):
                out[name] = round(at - killed_wall, 3)
        if "leading" in out:
            break
    return out


def pct(xs: list[float], p: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))] if xs else None


def roles(urls: dict[str, str]) -> dict[str, str]:
    out = {}
    for cid, url in urls.items():
        try:
            out[cid] = httpx.get(url + "/status", timeout=5).json().get("role", "?")
        except (httpx.HTTPError, ValueError):
            out[cid] = "down"
    return out


def leader_and_standby(cluster: LocalCluster, timeout: float = 60.0) -> tuple[str, str, dict[str, str]]:
    deadline = time.monotonic() + timeout
    while True:
        urls = cluster.api_urls(timeout=timeout)
        rs = roles(urls)
        leaders = [c for c, r in rs.items() if r == "leader"]
        standbys = [c for c, r in rs.items() if r == "standby"]
        if len(leaders) == 1 and standbys:
            return leaders[0], standbys[0], urls
        if time.monotonic() > deadline:
            raise SystemExit(f"no leader and standby: {rs}")
        time.sleep(0.2)


def push_retrying(urls: list[str], stream: str, body: str, t: int, key: str) -> tuple[str, float]:
    """Pushes one element to the first coordinator that acknowledges it (connection errors
    and 503 during a take-over: the next one, then again), with the same key each time."""
    deadline = time.monotonic() + 120
    while True:
        for url in urls:
            try:
                r = httpx.post(
                    f"{url}/streams/{quote(stream, safe='')}",
                    params={"t": str(t)},
                    content=body.encode("utf-8"),
                    headers={"Content-Type": "application/n-triples", "Idempotency-Key": key},
                    timeout=30.0,
                )
            except httpx.TransportError:
                continue
            if r.status_code == 202:
                return url, time.monotonic()
            if r.status_code not in (502, 503):
                raise SystemExit(f"push refused: {r.status_code} {r.text}")
        if time.monotonic() > deadline:
            raise SystemExit("no coordinator took a push for 120 s")
        time.sleep(0.1)


def read_sse(url: str, name: str, until: int, into: list[tuple[str, str]], last_id: str | None = None) -> str:
    headers = {"Last-Event-ID": last_id} if last_id else {}
    try:
        with httpx.stream(
            "GET",
            f"{url}/queries/{quote(name, safe='')}/results",
            params={"until": str(until)},
            headers=headers,
            timeout=httpx.Timeout(10.0, read=120.0),
        ) as r:
            if r.status_code != 200:
                return f"status {r.status_code}"
            ev_id, data = None, []
            for line in r.iter_lines():
                if line.startswith("id:"):
                    ev_id = line[3:].strip()
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
                elif line.startswith("event: end"):
                    return "end"
                elif not line and data and ev_id is not None:
                    into.append((ev_id, json.dumps(json.loads("\n".join(data)), sort_keys=True)))
                    ev_id, data = None, []
        return "end"
    except httpx.HTTPError as exc:
        return f"broken: {type(exc).__name__}"


def leader_rounds(
    a: Any, rng: random.Random, tmp: Path, corpus: Any, repo_graph: str
) -> tuple[list[dict], dict]:
    """A round without a kill (the peer), then ``a.kills`` rounds of pushes, each with the
    leader coordinator killed once."""
    texts = corpus.texts(NAMES)
    state = tmp / "shared-state"
    extra = ["--idle-ms", "0", "--state-dir", str(state)]
    if getattr(a, "checkpoint_interval", None) is not None:  # cluster checkpoints (default 10 s)
        extra += ["--checkpoint-interval", str(a.checkpoint_interval)]
    extra += ["--static", str(corpus.static), "--static", f"{repo_graph}={corpus.static}"]
    t0 = min(el.t for el in corpus.elements)
    shift = ((corpus.last_report(1000) - t0) // 60_000 + 2) * 60_000
    live = build_live([(None, str(corpus.static)), (repo_graph, str(corpus.static))], idle_ms=None)
    embedded = BackgroundServer(create_app(live), on_shutdown=live.close).start()
    cluster = LocalCluster(tmp / "leader", session_timeout=a.session_timeout, capacity=16)
    runs: list[dict] = []
    peer: dict = {}
    try:
        cluster.start(0, coordinators=0)
        for _ in range(2):
            cluster.start_coordinator(extra)
        cluster.add_containers(3)
        emb = Client(embedded.url, timeout=60.0)
        print(
            f"{'kill':>4} {'victim':>8} {'at':>4} {'lost':>5} {'dup':>4} {'lines':>6} "
            f"{'ingest s':>8} {'results s':>9} {'replay s':>8} {'retried':>7}"
        )
        previous: list[str] = []
        for r in range(a.kills + 1):
            kills = r > 0  # round 0: the peer, no kill
            leader, standby, urls = leader_and_standby(cluster)
            std = Client(urls[standby], timeout=60.0)
            qs = {f"{q}-r{r}": texts[q] for q in NAMES}
            for attempt in range(60):  # 503 while the leadership moves (a ZooKeeper hiccup): retry
                try:
                    std.register_many([{"query": text, "name": q} for q, text in qs.items()])
                    break
                except ApiError as exc:
                    if exc.status != 503 or attempt == 59:
                        raise
                    time.sleep(0.5)
            leader, standby, urls = leader_and_standby(cluster)
            std = Client(urls[standby], timeout=60.0)
            for q, text in qs.items():
                emb.register(text, q)
            until = corpus.last_report(1000) + r * shift
            got: dict[str, list[str]] = {}
            arrivals: list[float] = []
            errors: list[str] = []

            def read(
                client: Client,
                q: str,
                key: str,
                stamp: bool,
                until: int = until,
                got: dict[str, list[str]] = got,
                arrivals: list[float] = arrivals,
                errors: list[str] = errors,
            ) -> None:
                try:
                    rows = got.setdefault(key, [])
                    for x in client.results(q, until=until, after="0", timeout=120):
                        rows.append(json.dumps(x, sort_keys=True))
                        if stamp:
                            arrivals.append(time.monotonic())
                except Exception as exc:  # reported with the round
                    errors.append(f"{key}: {type(exc).__name__}: {exc}")

            readers = [
                threading.Thread(target=read, args=(c, q, f"{k}/{q}", k == "cl"), daemon=True)
                for q in qs
                for k, c in (("cl", std), ("emb", emb))
            ]
            sse_q = next(iter(qs))
            sse_first: list[tuple[str, str]] = []
            sse_end: dict[str, str] = {}

            def on_leader(
                url: str = urls[leader],
                q: str = sse_q,
                until: int = until,
                into: list = sse_first,
                end: dict[str, str] = sse_end,
            ) -> None:
                end["first"] = read_sse(url, q, until, into, "0")

            readers.append(threading.Thread(target=on_leader, daemon=True))
            for th in readers:
                th.start()
            # (the readers start from the first report: after=0 / Last-Event-ID: 0)
            lc = Client(urls[leader], timeout=60.0)
            while lc.query(sse_q)["subscribers"] < 1:
                time.sleep(0.05)
            n = len(corpus.elements)
            at = rng.randint(n // 4, 3 * n // 4)
            delay = rng.uniform(0.0, 0.03)
            marks: dict[str, float] = {}

            def kill(victim: str = leader, delay: float = delay, marks: dict[str, float] = marks) -> None:
                time.sleep(delay)
                marks["killed"] = time.monotonic()
                marks["killed_wall"] = time.time()
                cluster.kill(victim, signal.SIGKILL)

            killer = threading.Thread(target=kill, daemon=True)
            order = [urls[leader], urls[standby]]
            retried = 0
            t1 = time.perf_counter()
            for k, el in enumerate(corpus.elements):
                if k == at and kills:
                    killer.start()
                key = f"r{r}-e{k}"
                url, acked = push_retrying(order, el.stream, el.ntriples, el.t + r * shift, key)
                if url != order[0]:
                    retried += 1
                    order = [urls[standby]]
                if "killed" in marks and url == urls[standby] and "ingest" not in marks:
                    marks["ingest"] = acked
                emb.push(el.stream, el.ntriples, t=el.t + r * shift)
                time.sleep(0.02)
            if kills:
                killer.join(10)
            std.advance(until)
            emb.advance(until)
            for th in readers:
                th.join(180)
            seconds = time.perf_counter() - t1
            lost = dup = lines = 0
            for q in qs:
                want, have = Counter(got.get(f"emb/{q}", [])), Counter(got.get(f"cl/{q}", []))
                lost += sum((want - have).values())
                dup += sum((have - want).values())
                lines += sum(want.values())
            # the SSE reader of the dead leader resumes on the survivor after the last id it read
            rest: list[tuple[str, str]] = []
            resumed = "-"
            if kills:
                last = sse_first[-1][0] if sse_first else "0"
                resumed = read_sse(urls[standby], sse_q, until, rest, last)
            both = sse_first + rest
            ids = [tuple(int(x) for x in i.split(":")) for i, _ in both]
            want = Counter(got.get(f"emb/{sse_q}", []))
            have = Counter(line for _, line in both)
            sse_lost, sse_dup = sum((want - have).values()), sum((have - want).values())
            if ids != sorted(ids) or len(set(ids)) != len(ids):
                sse_dup += len(ids) - len(set(ids)) or 1
            killed = marks.get("killed")
            first_line = next((x for x in sorted(arrivals) if killed is not None and x > killed), None)
            log = (cluster.dir / "logs" / f"{standby}.log").read_text()
            m = re.findall(r"replayed (\d+) ingest log records .*?\(([\d.]+) s;", log)
            replay_n, replay_s = (int(m[-1][0]), float(m[-1][1])) if m else (None, None)
            steps = phases(log, marks["killed_wall"]) if "killed_wall" in marks else {}
            # a line of the old leader the standby delivers after the kill is not a new result:
            # the first line after the new leader's election is
            elected = None if killed is None or "elected" not in steps else killed + steps["elected"]
            first_new = next((x for x in sorted(arrivals) if elected is not None and x > elected), None)
            for q in previous:
                std.unregister(q)
                emb.unregister(q)
            previous = list(qs)
            run = {
                "victim": leader,
                "at": at,
                "delay_s": delay,
                "lost_lines": lost + sse_lost,
                "duplicated_lines": dup + sse_dup,
                "lines": lines + sum(want.values()),
                "sse": {
                    "first": len(sse_first),
                    "resumed": len(rest),
                    "ended": sse_end.get("first"),
                    "resume": resumed,
                },
                "ingest_recovery_s": None
                if killed is None or "ingest" not in marks
                else marks["ingest"] - killed,
                "results_recovery_s": None if first_line is None or killed is None else first_line - killed,
                "new_results_recovery_s": None if first_new is None or killed is None else first_new - killed,
                "replayed_records": replay_n,
                "replay_s": replay_s,
                "phases_s": steps,
                "retried_pushes": retried,
                "seconds": seconds,
                "killed": killed is not None,
                "reader_errors": errors,
            }
            if not kills:
                peer = run
                print(
                    f"peer round (no kill): {lost + sse_lost} lost, {dup + sse_dup} duplicated, {seconds:.2f} s"
                )
                continue
            runs.append(run)

            def f(x: float | None) -> str:
                return "-" if x is None else f"{x:.2f}"

            print(
                f"{r:>4} {leader:>8} {at:>4} {run['lost_lines']:>5} {run['duplicated_lines']:>4} "
                f"{run['lines']:>6} {f(run['ingest_recovery_s']):>8} {f(run['results_recovery_s']):>9} "
                f"{f(replay_s):>8} {retried:>7}",
                flush=True,
            )
            print(
                "      "
                + ", ".join(f"{k} {v:.2f}" for k, v in steps.items())
                + f", first result after the election {f(run['new_results_recovery_s'])}",
                flush=True,
            )
            for e in errors:
                print("      reader failed:", e, flush=True)
            if kills:
                cluster.start_coordinator(extra)  # the next round's standby
    finally:
        cluster.stop()
        embedded.stop()
    ingest = [r["ingest_recovery_s"] for r in runs if r["ingest_recovery_s"] is not None]
    results = [r["results_recovery_s"] for r in runs if r["results_recovery_s"] is not None]
    new = [r["new_results_recovery_s"] for r in runs if r["new_results_recovery_s"] is not None]
    summary = {
        "ingest_recovery_p50_s": statistics.median(ingest) if ingest else None,
        "ingest_recovery_p99_s": pct(ingest, 0.99),
        "results_recovery_p50_s": statistics.median(results) if results else None,
        "results_recovery_p99_s": pct(results, 0.99),
        "new_results_recovery_p50_s": statistics.median(new) if new else None,
        "new_results_recovery_p99_s": pct(new, 0.99),
        "replay_s_max": max((r["replay_s"] or 0.0 for r in runs), default=None),
        "phases_p50_s": {
            k: statistics.median(v)
            for k, _ in MILESTONES
            if (v := [r["phases_s"][k] for r in runs if k in r["phases_s"]])
        },
        "phases_max_s": {
            k: max(v) for k, _ in MILESTONES if (v := [r["phases_s"][k] for r in runs if k in r["phases_s"]])
        },
        "session_timeout_s": a.session_timeout,
        "peer": peer,
        "round_with_kill_vs_without": (
            statistics.median(r["seconds"] for r in runs) / peer["seconds"] if runs and peer else None
        ),
    }
    return runs, summary
