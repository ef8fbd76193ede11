#!/usr/bin/env python3
"""A ZooKeeper restart during live pushes, ``--restarts`` times in a row (issue 17).

The live service (``linkstream run --zk``: two coordinators on one shared ``--state-dir``,
three containers, the cluster's own ZooKeeper with TLS, ``--session-timeout`` sessions)
takes ``--restarts`` rounds of :func:`tests.cluster.zklive.zk_restart_round`: the queries of
``tests/api``'s CityBench slice are registered under fresh names on the cluster and on an
embedded server; two clients push the slice (shifted in time per round), one stream each,
to different coordinators under ``Idempotency-Key`` headers; after the first third
ZooKeeper is killed with SIGKILL, kept down ``--down-s`` seconds and started again on its
port and data directory; pushes answered 503/502 (or whose connection broke) are retried
with their key.  The results read over the API from both coordinators are compared line
for line with the embedded server's: lines **lost** and **duplicated** must both be 0.

Printed per round: lost / duplicated lines, pushes taken, answers 503/502 retried, how long
ZooKeeper was away (kill to its start answering), the first push refused after the kill, the
first push taken after ZooKeeper was back (ingest recovery) and the round time.  The summary
gives p50 / p99 of the ingest recovery, and a round with a restart relative to the round
without one (measured first on the same cluster, same pacing: the peer of this run).

    python bench/zk_restarts.py [--restarts 20] [--down-s 5] [--session-timeout 2] [--dir DIR]

Needs the shared CityBench corpus (``../shared`` or ``LINKSTREAM_SHARED``) and a ZooKeeper
install (``infra/zookeeper.sh``).  Raw figures go to ``bench/results/zk_restarts.json``.
Exit status 1 if any round lost or duplicated a line (or failed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from cluster_kills import fmt, shared_dir  # noqa: E402

from linkstream.api.client import Client  # noqa: E402
from linkstream.cluster.localcluster import LocalCluster  # noqa: E402
from tests.api.corpus import build_corpus  # noqa: E402
from tests.cluster.zklive import zk_restart_round  # noqa: E402

QUERIES = ["cqels-Q1", "rspql-avg-congestion", "csparql-Q1"]


def pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None


def rounds(a: argparse.Namespace, tmp: Path) -> tuple[list[dict], dict]:
    corpus = build_corpus(shared_dir(), tmp)
    if corpus is None:
        raise SystemExit("no CityBench data")
    texts = corpus.texts(QUERIES)
    statics = corpus.static_args()
    t0 = min(el.t for el in corpus.elements)
    shift = ((corpus.last_report(1000) - t0) // 60_000 + 2) * 60_000
    embedded = corpus.embedded_server()
    emb = Client(embedded.url)
    cluster = LocalCluster(tmp / "cluster", session_timeout=a.session_timeout, capacity=16)
    runs: list[dict] = []
    peer: dict = {}
    try:
        cluster.start(0, coordinators=0)
        for _ in range(2):
            cluster.start_coordinator(["--idle-ms", "0", "--state-dir", str(tmp / "state"), *statics])
        cluster.add_containers(3)
        cluster.wait_leader(cluster.api_urls(timeout=60), timeout=60)
        previous: list[str] = []
        print(
            f"{'round':>5} {'lost':>5} {'dup':>4} {'lines':>6} {'pushes':>6} {'503s':>5} {'zk away s':>9} "
            f"{'refused s':>9} {'ingest s':>8} {'round s':>7}",
            flush=True,
        )
        for r in range(a.restarts + 1):
            qs = {f"{q}-r{r}": texts[q] for q in QUERIES}
            res = zk_restart_round(
                cluster, emb, corpus, qs, r * shift, None if r == 0 else a.down_s, f"r{r}-{os.getpid()}"
            )
            urls = sorted(cluster.api_urls(timeout=60).values())
            # the previous round's queries go once this round's are in (unregistering every
            # query would end the cluster's run)
            for q in previous:
                deadline = time.monotonic() + 60
                while True:  # 503 while the leadership moves: again
                    resp = httpx.delete(f"{urls[0]}/queries/{q}", timeout=30)
                    if resp.status_code not in (502, 503) or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                emb.unregister(q)
            previous = list(qs)
            row = asdict(res)
            row["round"] = r
            row["away_s"] = res.marks["up"] - res.marks["down"] if "up" in res.marks else None
            if r == 0:
                peer = row
                print(
                    f"peer round without a restart: {res.seconds:.2f} s, lost {res.lost}, dup {res.duplicated}"
                )
                continue
            runs.append(row)
            print(
                f"{r:>5} {res.lost:>5} {res.duplicated:>4} {res.lines:>6} {res.pushes:>6} "
                f"{res.refused + res.broken:>5} {fmt(row['away_s']):>9} {fmt(res.first_refused_s):>9} "
                f"{fmt(res.first_ok_after_up_s):>8} {res.seconds:>7.2f}",
                flush=True,
            )
            for e in res.errors:
                print("      error:", e, flush=True)
        logs = {n: Path(p.log).read_text(errors="replace") for n, p in cluster.state.processes.items()}
        extra = {
            "elections_logged": sum(
                t.count("elected leader") for n, t in logs.items() if n.startswith("coord")
            ),
            "sessions_expired_logged": sum(t.count("Session has expired") for t in logs.values()),
            "containers_registered_again": sum(
                t.count("registered again") for n, t in logs.items() if n.startswith("oc-")
            ),
            "peer": peer,
        }
    finally:
        cluster.stop()
        embedded.stop()
    return runs, extra


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--restarts", type=int, default=20)
    ap.add_argument("--down-s", type=float, default=5.0, help="seconds ZooKeeper stays down (default 5)")
    ap.add_argument("--session-timeout", type=float, default=2.0)
    ap.add_argument("--dir", default=None, help="work directory to keep (logs); default a temporary one")
    ap.add_argument("--out", default=None, help="JSON figures (default bench/results/zk_restarts.json)")
    a = ap.parse_args()
    load0 = os.getloadavg()
    if a.dir:
        Path(a.dir).mkdir(parents=True, exist_ok=True)
        runs, extra = rounds(a, Path(a.dir))
    else:
        with tempfile.TemporaryDirectory(prefix="zk-restarts-") as d:
            runs, extra = rounds(a, Path(d))
    bad = [r for r in runs if r["lost"] or r["duplicated"] or r["errors"]]
    ingest = [float(r["first_ok_after_up_s"]) for r in runs if r["first_ok_after_up_s"] is not None]
    peer_s = float(extra["peer"]["seconds"])
    summary = {
        "restarts": len(runs),
        "down_s": a.down_s,
        "session_timeout_s": a.session_timeout,
        "bad_rounds": len(bad),
        "lost_lines": sum(r["lost"] for r in runs),
        "duplicated_lines": sum(r["duplicated"] for r in runs),
        "lines": sum(r["lines"] for r in runs),
        "pushes": sum(r["pushes"] for r in runs),
        "retried_answers": sum(r["refused"] + r["broken"] for r in runs),
        "ingest_recovery_p50_s": statistics.median(ingest) if ingest else None,
        "ingest_recovery_p99_s": pct(ingest, 0.99),
        "away_p50_s": statistics.median(float(r["away_s"]) for r in runs) if runs else None,
        "round_with_restart_vs_without": (
            statistics.median(r["seconds"] for r in runs) / peer_s if runs else None
        ),
        "load_before": load0,
        "load_after": os.getloadavg(),
        **{k: v for k, v in extra.items() if k != "peer"},
    }
    print(
        f"{summary['restarts']} ZooKeeper restarts ({a.down_s:g} s down, sessions {a.session_timeout:g} s) during "
        f"live pushes: {summary['lost_lines']} of {summary['lines']} lines lost, {summary['duplicated_lines']} "
        f"duplicated ({len(bad)} bad rounds); {summary['pushes']} pushes taken, {summary['retried_answers']} "
        f"answers 503/502 retried; ZooKeeper away p50 {fmt(summary['away_p50_s'])} s; first push taken after it "
        f"was back p50 {fmt(summary['ingest_recovery_p50_s'])} s p99 {fmt(summary['ingest_recovery_p99_s'])} s; "
        f"a round with a restart {fmt(summary['round_with_restart_vs_without'])}x the round without one; "
        f"{summary['elections_logged']} elections, {summary['containers_registered_again']} container "
        f"re-registrations logged; load {load0[0]:.1f} -> {summary['load_after'][0]:.1f}"  # type: ignore[index]
    )
    out = Path(a.out or REPO / "bench" / "results" / "zk_restarts.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"summary": summary, "peer": extra["peer"], "runs": runs}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
