#!/usr/bin/env python3
"""kill -9 of a random container, ``--kills`` times in a row, during cluster replays.

A local cluster (its own ZooKeeper, a coordinator, three container processes) replays
CityBench queries (RStream, plus an IStream and a DStream query over CityBench streams)
``--kills`` times; during each replay a random container is killed with SIGKILL at a
random tick plus a random delay (seeded by ``--seed``), and a fresh container replaces it
before the next replay.  Every result file is compared line for line with the embedded
replay of the same arguments: lines **lost** (in embedded, not in the cluster output) and
**duplicated** (in the cluster output beyond embedded) must both be 0.

Printed per kill: the victim, the tick, lost / duplicated lines, reports recomputed and
the recovery time (the kill to the end of the first tick whose owed reports were
recomputed elsewhere: ZooKeeper's session timeout to see the death, then one recompute).
The summary gives recovery p50 / p99 and the replay time with a kill relative to the
replay without one on the same cluster (measured first, the peer of this run).

    python bench/cluster_kills.py [--kills 20] [--seed 1] [--max-reports 60] [--elements 120]
                                  [--session-timeout 2] [--live] [--kill container|leader]

``--live`` does the same to the live service instead (``linkstream run --zk``: one
coordinator, three containers): each round registers the queries of ``tests/api``'s
CityBench slice under fresh names on the cluster and on an embedded server, pushes the
slice over HTTP (shifted in time per round) to both while a random container holding a
query is killed at a random element, and compares the JSON Lines results read back.
Its recovery time is the kill to the first new result: the first line, read over the API,
of a query the victim held for a report time after the kill; p50 / p99 in the summary
(goal < 5 s).  ``--checkpoint-interval S`` takes cluster checkpoints (the dead container's
queries restored from them).

``--kill leader`` kills the leader coordinator of the live service instead (two coordinators
on a shared ``--state-dir``, three containers; see ``bench/leader_kills.py``): lost and
duplicated lines, recovery to the first push the new leader takes and to the first new
result, p50 / p99, and a round with a kill relative to a round without one.

Needs the shared CityBench corpus (``../shared`` or ``LINKSTREAM_SHARED``) and a ZooKeeper
install (``infra/zookeeper.sh``).  Raw figures go to ``bench/results/cluster_kills.json``.
Exit status 1 if any run lost or duplicated a line.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from linkstream.cli import main as cli_main
from linkstream.cluster.localcluster import LocalCluster
from linkstream.cluster.replay import ClusterEngine, replay_on_cluster
from linkstream.query.continuous import parse_continuous

REPO = Path(__file__).resolve().parents[1]
QUERY_IDS = [
    "csparql-Q4",
    "cqels-Q6",
    "csparql-Q7",
    "csparql-Q10",
    "cqels-Q11",
    "csparql-pollution_weather_1",
    "cqels-Q9",
    "csparql-traffic_parking_1",
]
ULS = "http://www.insight-centre.org/dataset/SampleEventService#UserLocationService"
PARKING = "http://www.insight-centre.org/dataset/SampleEventService#AarhusParkingDataKALKVAERKSVEJ"
DELTAS = {
    "user_istream": f"""PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ct: <http://www.insight-centre.org/citytraffic#>
PREFIX w: <http://example.org/w#>
REGISTER ISTREAM <user_istream> AS SELECT ?ob ?lat ?lon
FROM NAMED WINDOW w:u ON <{ULS}> [RANGE PT5S STEP PT1S]
WHERE {{ WINDOW w:u {{ ?ob sao:hasValue ?v . ?v ct:hasLatitude ?lat . ?v ct:hasLongitude ?lon }} }}""",
    "parking_dstream": f"""PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX w: <http://example.org/w#>
REGISTER DSTREAM <parking_dstream> AS SELECT ?ob ?n
FROM NAMED WINDOW w:p ON <{PARKING}> [RANGE PT20S STEP PT2S]
WHERE {{ WINDOW w:p {{ ?ob sao:hasValue ?n }} }}""",
}


class RoundReaders:
    """Every query of a live round read over the API from the cluster (``cl/<q>``) and from
    the embedded server fed the same pushes (``emb/<q>``), one thread each, until report
    time ``until``; started, and once made, every reader has subscribed."""

    def __init__(self, cl: Any, emb: Any, qs: Iterable[str], until: int, timeout: float = 60) -> None:
        self.qs = list(qs)
        self.got: dict[str, list[str]] = {}
        #: per cluster line read: (monotonic arrival, query, its report time ``t``)
        self.arrivals: list[tuple[float, str, int | None]] = []
        self.errors: list[str] = []
        self.threads = [
            threading.Thread(target=self._read, args=(c, q, f"{k}/{q}", until, timeout), daemon=True)
            for q in self.qs
            for k, c in (("cl", cl), ("emb", emb))
        ]
        for th in self.threads:
            th.start()
        while not all(v["subscribers"] >= 1 for v in [c.query(q) for q in self.qs for c in (cl, emb)]):
            time.sleep(0.05)

    def _read(self, client: Any, q: str, key: str, until: int, timeout: float) -> None:
        try:
            rows = self.got.setdefault(key, [])
            for x in client.results(q, until=until, timeout=timeout):
                rows.append(json.dumps(x, sort_keys=True))
                if key.startswith("cl/"):
                    t = x.get("t")
                    self.arrivals.append((time.monotonic(), q, t if isinstance(t, int) else None))
        except Exception as exc:  # reported with the round
            self.errors.append(f"{key}: {type(exc).__name__}: {exc}")

    def join(self, timeout: float) -> None:
        for th in self.threads:
            th.join(timeout)

    def first_new(self, qs: set[str], after_t: int, killed: float) -> float | None:
        """Seconds from ``killed`` to the first line of one of ``qs`` (the victim's queries)
        for a report time after ``after_t`` (evaluated after the kill: recovered)."""
        got = [a for a, q, t in self.arrivals if q in qs and t is not None and t > after_t and a > killed]
        return min(got) - killed if got else None

    def tally(self) -> tuple[int, int, int]:
        """(lost, duplicated, expected) lines of the cluster against the embedded server."""
        lost = dup = lines = 0
        for q in self.qs:
            want, have = Counter(self.got.get(f"emb/{q}", [])), Counter(self.got.get(f"cl/{q}", []))
            lost += sum((want - have).values())
            dup += sum((have - want).values())
            lines += sum(want.values())
        return lost, dup, lines


def shared_dir() -> Path:
    import os

    return Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()


def trim(src: Path, dest: Path, elements: int) -> None:
    lines, els = [], 0
    with open(src, encoding="utf-8") as f:
        for line in f:
            if "generatedAtTime" in line:
                els += 1
                if els > elements:
                    break
            lines.append(line)
    dest.write_text("".join(lines), encoding="utf-8")


def workload(tmp: Path, max_reports: int, elements: int) -> tuple[list[str], dict]:
    shared = shared_dir()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    base = manifest.get("base", "http://localhost/")
    by_id = {q["id"]: q for q in manifest["queries"]}
    streams: dict[str, Path] = {PARKING: shared / "citybench/streams/AarhusParkingDataKALKVAERKSVEJ.nq"}
    statics: dict[str | None, str] = {}
    texts = dict(DELTAS)
    for qid in QUERY_IDS:
        q = by_id[qid]
        texts[qid] = (shared / q["query"]).read_text()
        for s in q["streams"]:
            streams[s["iri"]] = shared / s["path"]
        for s in q["statics"]:
            statics[s["iri"]] = str(shared / s["path"])
    files = {}
    for iri, path in streams.items():
        files[iri] = tmp / path.name
        trim(path, files[iri], elements)
    args = ["--base", base, "--default-step", "1000", "--max-reports", str(max_reports), "--quiet"]
    queries = []
    for name, text in texts.items():
        p = tmp / f"{name}.rq"
        p.write_text(text)
        args += ["--query", str(p)]
        queries.append(parse_continuous(text, default_name=name, base=base, source=str(p)))
    for iri, p in files.items():
        args += ["--stream", f"{iri}={p}"]
    for iri, sp in statics.items():
        args += ["--static", f"{iri}={sp}" if iri else sp]
    run = {
        "queries": queries,
        "streams": [(iri, str(p)) for iri, p in files.items()],
        "statics": list(statics.items()),
        "base": base,
        "max_reports": max_reports,
    }
    return args, run


def replay(
    cluster: LocalCluster, run: dict, out: Path, kill: tuple[int, float, random.Random] | None
) -> dict:
    engines: list[ClusterEngine] = []
    marks: dict[str, object] = {}
    killers: list[threading.Thread] = []

    def on_tick(seq: int, _c: int) -> None:
        engine = engines[0]
        if kill is not None and seq == kill[0]:
            victim = kill[2].choice(sorted(set(engine.answerers().values())))
            marks["victim"] = victim

            def go() -> None:
                time.sleep(kill[1])
                marks["killed_at"] = time.monotonic()
                cluster.kill(victim, signal.SIGKILL)

            killers.append(threading.Thread(target=go, daemon=True))
            killers[0].start()
        if "killed_at" in marks and "recovered_at" not in marks and engine.recovery.done:
            marks["recovered_at"] = time.monotonic()

    t0 = time.perf_counter()
    with open(out, "w", encoding="utf-8") as f:
        res = replay_on_cluster(
            cluster.hosts,
            run["queries"],
            run["streams"],
            run["statics"],
            f,
            base=run["base"],
            max_reports=run["max_reports"],
            answer_timeout=30.0,
            security=cluster.security,
            on_tick=on_tick,
            on_start=engines.append,
        )
    seconds = time.perf_counter() - t0
    for k in killers:
        k.join(10)
    rec = None
    if "recovered_at" in marks:
        rec = marks["recovered_at"] - marks["killed_at"]  # type: ignore[operator]
    return {
        "seconds": seconds,
        "victim": marks.get("victim"),
        "killed": "killed_at" in marks,
        "lost_reports": len(res.lost),
        "recovered_reports": len(res.recovered),
        "duplicates_dropped": res.duplicates,
        "recovery_s": rec,
    }


def fmt(x: object) -> str:
    return "-" if x is None else f"{x:.2f}"


def compare(expected: Path, got: Path) -> tuple[int, int]:
    want = Counter(expected.read_text().splitlines())
    have = Counter(got.read_text().splitlines())
    return sum((want - have).values()), sum((have - want).values())


def add_containers(cluster: LocalCluster, n: int) -> None:
    """``cluster.add_containers(n)``, printing the log of a container that could not start."""
    try:
        cluster.add_containers(n)
    except RuntimeError as exc:
        log = str(exc).rsplit("see ", 1)[-1]
        tail = Path(log).read_text()[-3000:] if Path(log).is_file() else ""
        raise SystemExit(f"{exc}\n{tail}") from exc


def live_rounds(a: argparse.Namespace, rng: random.Random, tmp: Path) -> tuple[list[dict], dict]:
    """The ``--live`` loop: ``a.kills`` rounds of pushes, each with one container killed."""
    sys.path.insert(0, str(REPO))
    from linkstream.api.client import Client
    from linkstream.cluster.driverstate import task_id
    from linkstream.scheduler.assignment import AssignmentTable
    from tests.api.corpus import build_corpus

    corpus = build_corpus(shared_dir(), tmp)
    if corpus is None:
        raise SystemExit("no CityBench data")
    names = ["cqels-Q1", "rspql-avg-congestion", "csparql-Q1"]
    texts = corpus.texts(names)
    statics = corpus.static_args()
    t0 = min(el.t for el in corpus.elements)
    shift = ((corpus.last_report(1000) - t0) // 60_000 + 2) * 60_000
    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp / "live", session_timeout=a.session_timeout, capacity=16)
    runs: list[dict] = []
    try:
        cluster.start(0, coordinators=0)
        ck = []  # --checkpoint-interval: cluster checkpoints, a dead container's tasks restored from them
        if a.checkpoint_interval:
            ck = ["--state-dir", str(tmp / "state"), "--checkpoint-interval", str(a.checkpoint_interval)]
        cluster.start_coordinator(["--idle-ms", "0", *statics, *ck])
        cluster.add_containers(3)
        (_cid, url), *_ = cluster.api_urls(timeout=60).items()
        cl, emb = Client(url, timeout=60.0), Client(embedded.url)
        deadline = time.monotonic() + 60
        while cl.status().get("role") != "leader":
            if time.monotonic() > deadline:
                raise SystemExit("the coordinator does not lead")
            time.sleep(0.2)
        print(
            f"{'kill':>4} {'victim':>6} {'at':>4} {'lost':>5} {'dup':>4} {'lines':>6} {'round s':>7} {'recov s':>7}"
        )
        previous: list[str] = []
        for r in range(a.kills):
            live_now = cluster.names("container")
            if len(live_now) < 3:
                add_containers(cluster, 3 - len(live_now))
            qs = {f"{q}-r{r}": texts[q] for q in names}
            for q, text in qs.items():
                cl.register(text, q)
                emb.register(text, q)
            until = corpus.last_report(1000) + r * shift
            readers = RoundReaders(cl, emb, qs, until)
            client = cluster.client()
            try:
                tasks = {task_id(q): q for q in qs}
                holder = {
                    tasks[t]: a_.container for t, a_ in AssignmentTable(client).all().items() if t in tasks
                }
                held = set(holder.values())
            finally:
                client.stop()
                client.close()
            victim = rng.choice(sorted(h for h in held if h is not None))
            n = len(corpus.elements)
            at = rng.randint(n // 5, 4 * n // 5)
            t1 = time.perf_counter()
            killed = 0.0
            for k, el in enumerate(corpus.elements):
                if k == at:
                    cluster.kill(victim, signal.SIGKILL)
                    killed = time.monotonic()
                cl.push(el.stream, el.ntriples, t=el.t + r * shift)
                emb.push(el.stream, el.ntriples, t=el.t + r * shift)
                time.sleep(0.02)
            cl.advance(until)
            emb.advance(until)
            readers.join(120)
            seconds = time.perf_counter() - t1
            lost, dup, lines = readers.tally()
            # death to the first new result: the first line of a query the victim held for a
            # report time after the element pushed right after the kill (evaluated after it)
            mine = {q for q, c in holder.items() if c == victim}
            recovery = readers.first_new(mine, corpus.elements[at].t + r * shift, killed)
            # The previous round's queries go once this round's are in: unregistering every
            # query would end the cluster's run (a new one starts with the next query).
            for q in previous:
                cl.unregister(q)
                emb.unregister(q)
            previous = list(qs)
            runs.append(
                {
                    "victim": victim,
                    "at": at,
                    "lost_lines": lost,
                    "duplicated_lines": dup,
                    "lines": lines,
                    "seconds": seconds,
                    "killed": True,
                    "reader_errors": readers.errors,
                    "victim_queries": sorted(mine),
                    "recovery_s": recovery,
                }
            )
            rec = "-" if recovery is None else f"{recovery:.2f}"
            print(
                f"{r + 1:>4} {victim:>6} {at:>4} {lost:>5} {dup:>4} {lines:>6} {seconds:>7.2f} {rec:>7}",
                flush=True,
            )
            for e in readers.errors:
                print("      reader failed:", e, flush=True)
        log = (cluster.dir / "logs" / "coord-1.log").read_text()
        containers = "".join(p.read_text() for p in sorted((cluster.dir / "logs").glob("oc-*.log")))
        extra = {
            "recomputed_reports_logged": log.count("driver: recomputed"),
            "lost_reports_logged": log.count("no live container recomputed"),
            "forwarded_logged": log.count("from the checkpoint at t="),
            # with --checkpoint-interval: the new owners kept the queries restored from the
            # checkpoint, or rebuilt them from their buffers (waited too long or told to)
            "queries_kept_restored": sum(
                int(x) for x in re.findall(r"restored-forward path: (\d+) of", containers)
            ),
            "restore_waits_given_up": containers.count("within 5 s: rebuilt"),
            "rebuilt_not_restored": containers.count("rebuilt from the stream buffers, not restored"),
        }
    finally:
        cluster.stop()
        embedded.stop()
    return runs, extra


def leader_main(a: argparse.Namespace, rng: random.Random) -> int:
    """``--kill leader``: :func:`bench.leader_kills.leader_rounds`, summary and JSON."""
    sys.path.insert(0, str(REPO))
    from bench.leader_kills import leader_rounds
    from tests.api.corpus import REPO_GRAPH, build_corpus

    def go(tmp: Path) -> tuple[list[dict], dict]:
        corpus = build_corpus(shared_dir(), tmp)
        if corpus is None:
            raise SystemExit("no CityBench data")
        return leader_rounds(a, rng, tmp, corpus, REPO_GRAPH)

    if a.dir:
        Path(a.dir).mkdir(parents=True, exist_ok=True)
        runs, extra = go(Path(a.dir))
    else:
        with tempfile.TemporaryDirectory(prefix="cluster-kills-leader-") as d:
            runs, extra = go(Path(d))
    bad = [
        r for r in runs if r["lost_lines"] or r["duplicated_lines"] or not r["killed"] or r["reader_errors"]
    ]
    summary = {
        "kills": len(runs),
        "runs_with_loss_or_duplicates": len(bad),
        "lost_lines": sum(r["lost_lines"] for r in runs),
        "duplicated_lines": sum(r["duplicated_lines"] for r in runs),
        "lines": sum(r["lines"] for r in runs),
        "retried_pushes": sum(r["retried_pushes"] for r in runs),
        **extra,
    }
    ratio = summary["round_with_kill_vs_without"]
    print(
        f"{summary['kills']} leader kills during pushes: {summary['lost_lines']} of {summary['lines']} lines "
        f"lost, {summary['duplicated_lines']} duplicated ({len(bad)} bad rounds); first push taken by the new "
        f"leader p50 {fmt(extra['ingest_recovery_p50_s'])} s p99 {fmt(extra['ingest_recovery_p99_s'])} s; "
        f"first new result p50 {fmt(extra['results_recovery_p50_s'])} s p99 {fmt(extra['results_recovery_p99_s'])} s; "
        f"a round with a kill {fmt(ratio)}x the round without one"
    )
    print(
        "first result after the new leader's election (not a line of the old one delivered late): "
        f"p50 {fmt(extra['new_results_recovery_p50_s'])} s p99 {fmt(extra['new_results_recovery_p99_s'])} s"
    )
    print(
        "take-over phases, s after the kill (p50 / max): "
        + ", ".join(f"{k} {v:.2f}/{extra['phases_max_s'][k]:.2f}" for k, v in extra["phases_p50_s"].items())
    )
    out = Path(a.out or REPO / "bench" / "results" / "cluster_kills_leader.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
    return 1 if bad else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--max-reports", type=int, default=60)
    ap.add_argument("--elements", type=int, default=120, help="elements per stream")
    ap.add_argument("--session-timeout", type=float, default=2.0)
    ap.add_argument("--live", action="store_true", help="kill during pushes to the live service")
    ap.add_argument(
        "--kill",
        choices=("container", "leader"),
        default="container",
        help="leader: kill -9 the leader coordinator of the live service (two coordinators on a "
        "shared --state-dir) instead of a container (see bench/leader_kills.py)",
    )
    ap.add_argument(
        "--checkpoint-interval",
        type=float,
        default=None,
        help="--kill leader: the coordinators' cluster checkpoint interval (default theirs, 10 s); "
        "--live container kills: take cluster checkpoints this often (a dead container's queries "
        "restored from them; default none)",
    )
    ap.add_argument(
        "--dir", default=None, help="--live: work directory to keep (logs); default a temporary one"
    )
    ap.add_argument(
        "--out", default=None, help="JSON figures (default bench/results/cluster_kills[_live].json)"
    )
    a = ap.parse_args()
    rng = random.Random(a.seed)
    if a.kill == "leader":
        return leader_main(a, rng)
    if a.live:
        if a.dir:  # kept for a look at the processes' logs
            Path(a.dir).mkdir(parents=True, exist_ok=True)
            runs, extra = live_rounds(a, rng, Path(a.dir))
        else:
            with tempfile.TemporaryDirectory(prefix="cluster-kills-live-") as d:
                runs, extra = live_rounds(a, rng, Path(d))
        bad = [r for r in runs if r["lost_lines"] or r["duplicated_lines"]]
        recs = sorted(r["recovery_s"] for r in runs if r["recovery_s"] is not None)
        summary = {
            "kills": len(runs),
            "runs_with_loss_or_duplicates": len(bad),
            "lost_lines": sum(r["lost_lines"] for r in runs),
            "duplicated_lines": sum(r["duplicated_lines"] for r in runs),
            "lines": sum(r["lines"] for r in runs),
            # death to the first new result of a query the victim held (goal < 5 s)
            "recovery_p50_s": statistics.median(recs) if recs else None,
            "recovery_p99_s": recs[min(len(recs) - 1, int(round(0.99 * (len(recs) - 1))))] if recs else None,
            "recovery_max_s": recs[-1] if recs else None,
            "recovery_measured": len(recs),
            **extra,
        }
        print(
            f"{summary['kills']} kills during pushes: {summary['lost_lines']} of {summary['lines']} lines lost, "
            f"{summary['duplicated_lines']} duplicated ({len(bad)} bad rounds); "
            f"{extra['recomputed_reports_logged']} recomputes logged; queries kept restored from a "
            f"checkpoint {extra['queries_kept_restored']}, restore waits given up "
            f"{extra['restore_waits_given_up']}, told to rebuild {extra['rebuilt_not_restored']}; "
            f"death to first new result p50 {fmt(summary['recovery_p50_s'])} s p99 "
            f"{fmt(summary['recovery_p99_s'])} s ({len(recs)} of {len(runs)} rounds measured; goal < 5 s)"
        )
        out = Path(a.out or REPO / "bench" / "results" / "cluster_kills_live.json")
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"summary": summary, "runs": runs}, indent=1))
        return 1 if bad else 0
    with tempfile.TemporaryDirectory(prefix="cluster-kills-") as d:
        tmp = Path(d)
        args, run = workload(tmp, a.max_reports, a.elements)
        expected = tmp / "embedded.jsonl"
        t0 = time.perf_counter()
        assert cli_main(["replay", *args, "--out", str(expected)]) == 0
        embedded_s = time.perf_counter() - t0
        cluster = LocalCluster(tmp / "cluster", session_timeout=a.session_timeout, capacity=16)
        runs = []
        try:
            cluster.start(3, 1)
            base = replay(cluster, run, tmp / "peer.jsonl", None)
            base["lost_lines"], base["duplicated_lines"] = compare(expected, tmp / "peer.jsonl")
            print(
                f"embedded {embedded_s:.2f}s; cluster without a kill {base['seconds']:.2f}s, "
                f"lost {base['lost_lines']}, duplicated {base['duplicated_lines']}"
            )
            print(
                f"{'kill':>4} {'victim':>6} {'tick':>4} {'lost':>5} {'dup':>4} {'recomp':>6} {'recov s':>7} {'run s':>6}"
            )
            for i in range(a.kills):
                live = cluster.names("container")
                if len(live) < 3:
                    cluster.add_containers(3 - len(live))
                    time.sleep(a.session_timeout)  # let the coordinator see the new member settle
                tick = rng.randint(3, a.max_reports - 10)
                r = replay(cluster, run, tmp / f"kill{i}.jsonl", (tick, rng.uniform(0.0, 0.05), rng))
                r["tick"] = tick
                r["lost_lines"], r["duplicated_lines"] = compare(expected, tmp / f"kill{i}.jsonl")
                runs.append(r)
                rec = "-" if r["recovery_s"] is None else f"{r['recovery_s']:.2f}"
                print(
                    f"{i + 1:>4} {r['victim']!s:>6} {tick:>4} {r['lost_lines']:>5} {r['duplicated_lines']:>4} "
                    f"{r['recovered_reports']:>6} {rec:>7} {r['seconds']:>6.2f}",
                    flush=True,
                )
        finally:
            cluster.stop()
    recs = sorted(r["recovery_s"] for r in runs if r["recovery_s"] is not None)
    bad = [r for r in runs if r["lost_lines"] or r["duplicated_lines"] or not r["killed"]]
    summary = {
        "kills": len(runs),
        "runs_with_loss_or_duplicates": len(bad),
        "lost_lines": sum(r["lost_lines"] for r in runs),
        "duplicated_lines": sum(r["duplicated_lines"] for r in runs),
        "recovery_p50_s": statistics.median(recs) if recs else None,
        "recovery_p99_s": recs[min(len(recs) - 1, int(round(0.99 * (len(recs) - 1))))] if recs else None,
        "replay_with_kill_vs_without": (
            statistics.median(r["seconds"] for r in runs) / base["seconds"] if runs else None
        ),
        "embedded_s": embedded_s,
        "session_timeout_s": a.session_timeout,
    }
    print(
        f"{summary['kills']} kills: {summary['lost_lines']} lines lost, {summary['duplicated_lines']} duplicated "
        f"({summary['runs_with_loss_or_duplicates']} bad runs); recovery p50 {fmt(summary['recovery_p50_s'])} s "
        f"p99 {fmt(summary['recovery_p99_s'])} s; replay with a kill {summary['replay_with_kill_vs_without']:.2f}x "
        "the replay without one"
    )
    out = Path(a.out or REPO / "bench" / "results" / "cluster_kills.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "peer": base, "runs": runs}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
