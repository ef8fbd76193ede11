#!/usr/bin/env python3
"""A container cut off from the network, ``--cuts`` times in a row, during cluster replays.

A local cluster (its own ZooKeeper, a coordinator, three containers) replays the CityBench
queries of ``bench/cluster_kills.py``.  One container runs in its own network namespace
whose only ways in and out are relayed TCP ports (``tests/cluster/netcut.py``); during
each replay, at a random tick (seeded by ``--seed``), nftables rules loaded into that
namespace drop every packet in and out of it for ``--cut-s`` seconds (a real cut:
nothing is closed or reset, the process keeps running), then are removed.  Every result
file is compared line for line with the embedded replay: lines **lost** and
**duplicated** must both be 0.

Printed per cut: the tick, lost / duplicated lines, reports recomputed, and the times
from the cut to the container's membership node going (its session expired: detection),
to the end of the first tick whose owed reports were recomputed elsewhere (recovery), and
from the end of the cut to the container being back in the run (its new hello admitted).
The summary gives p50 / p99 of each, and the replay time with a cut relative to the
replay without one (measured first, the peer of this run); from the cut until the
container is back the replay is paced at 0.3 s a tick, so that ratio is mostly the cut's
length.  Every replay runs on a fresh cluster (a replay right after one with a failover on
the same cluster can find some tasks never assigned: a coordinator problem of its own).

    python bench/network_cuts.py [--cuts 5] [--cut-s 10] [--seed 1] [--session-timeout 2]
                                 [--max-reports 60] [--elements 120] [--live] [--dir DIR]

``--live`` cuts a container of the live service instead (``linkstream run --zk``: one
coordinator, three containers, the third in the namespace, as ``bench/cluster_kills.py
--live``): each round registers the queries of ``tests/api``'s CityBench slice under fresh
names on the cluster and on an embedded server, pushes the slice over HTTP (shifted in time
per round) to both, cuts the container at a random element for ``--cut-s`` seconds (the
pushes go on, paced at 0.25 s, until it is back in the run) and compares the JSON Lines
results read back.  Recovery there is the cut to the coordinator's first report
recomputed elsewhere (its log), rejoin the end of the cut to the container joining the
run again (its log); rounds where the container held none of the round's queries say so.

Needs root (a network namespace and nftables: ``ip`` and ``nft`` from ``make
system-deps``), the shared CityBench corpus and ZooKeeper.  Raw figures go to
``bench/results/network_cuts.json`` (``network_cuts_live.json``).  Exit status 1 if any
run lost or duplicated a line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

from cluster_kills import compare, fmt, workload  # noqa: E402

from linkstream.cli import main as cli_main  # noqa: E402
from linkstream.cluster.localcluster import LocalCluster, ProcessRecord, free_port  # noqa: E402
from linkstream.cluster.replay import ClusterEngine, replay_on_cluster  # noqa: E402
from tests.cluster.netcut import Netns  # noqa: E402

VICTIM = "oc-3"


def start_victim(cluster: LocalCluster, ns: Netns, data_port: int) -> None:
    """Container ``VICTIM`` inside the namespace, its data plane bound to ``data_port``."""
    st = cluster.state
    args = ["container", "--zk", cluster.hosts, "--id", VICTIM, "--root", st.root, "--capacity", "16"]
    args += ["--session-timeout", str(st.session_timeout), "--metrics-port", "0"]
    args += ["--bind", f"tcp://127.0.0.1:{data_port}", *cluster.security_args()]
    log_path = cluster.dir / "logs" / f"{VICTIM}.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            ns.command([sys.executable, "-m", "linkstream.cli", *args]),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    st.processes[VICTIM] = ProcessRecord(VICTIM, "container", proc.pid, str(log_path))
    st.next_container = max(st.next_container, 4)
    cluster.save()
    cluster.wait_members({VICTIM}, 60)


def replay(
    cluster: LocalCluster, ns: Netns, run: dict, out: Path, cut: tuple[int, float] | None
) -> dict[str, object]:
    """One replay (driver port relayed into the namespace), with a cut at tick ``cut[0]``."""
    port = free_port()
    ns.forward_out(port)
    engines: list[ClusterEngine] = []
    marks: dict[str, float] = {}

    def watch() -> None:
        while "gone" not in marks and time.monotonic() < marks["cut"] + 60:
            if VICTIM not in cluster.members():
                marks["gone"] = time.monotonic()
            time.sleep(0.05)

    def heal(seconds: float) -> None:
        time.sleep(seconds)
        ns.heal()
        marks["healed"] = time.monotonic()

    def on_tick(seq: int, _c: int) -> None:
        engine = engines[0]
        if cut is not None and seq == cut[0]:
            ns.cut()
            marks["cut"] = time.monotonic()
            threading.Thread(target=heal, args=(cut[1],), daemon=True).start()
            threading.Thread(target=watch, daemon=True).start()
        if "cut" in marks and "recovered" not in marks and engine.recovery.done:
            marks["recovered"] = time.monotonic()
        if "healed" in marks and "rejoined" not in marks and VICTIM in engine.fanout.peers:
            marks["rejoined"] = time.monotonic()
        if "cut" in marks and "rejoined" not in marks and time.monotonic() < marks["cut"] + cut[1] + 30:  # type: ignore[index]
            time.sleep(0.3)  # keep the replay going until the container is back in it

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
            bind=f"tcp://127.0.0.1:{port}",
            answer_timeout=30.0,
            security=cluster.security,
            on_tick=on_tick,
            on_start=engines.append,
        )
    seconds = time.perf_counter() - t0
    if ns.cut_active:
        ns.heal()

    def since(a: str, b: str) -> float | None:
        return marks[b] - marks[a] if a in marks and b in marks else None

    return {
        "seconds": seconds,
        "lost_reports": len(res.lost),
        "recovered_reports": len(res.recovered),
        "duplicates_dropped": res.duplicates,
        "detection_s": since("cut", "gone"),
        "recovery_s": since("cut", "recovered"),
        "rejoin_s": since("healed", "rejoined"),
    }


def pct(xs: list[float], q: float) -> float | None:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))] if xs else None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cuts", type=int, default=5)
    ap.add_argument("--cut-s", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--session-timeout", type=float, default=2.0)
    ap.add_argument("--max-reports", type=int, default=60)
    ap.add_argument("--elements", type=int, default=120)
    ap.add_argument("--live", action="store_true", help="cut a container of the live service during pushes")
    ap.add_argument(
        "--dir", default=None, help="--live: work directory to keep (logs); default a temporary one"
    )
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("needs root: a network namespace and nftables rules")
    rng = random.Random(a.seed)
    if a.live:
        from network_cuts_live import live_main

        return live_main(a, rng)
    tmp = Path(tempfile.mkdtemp(prefix="linkstream-cuts-"))
    args, run = workload(tmp, a.max_reports, a.elements)
    expected = tmp / "embedded.jsonl"
    if cli_main(["replay", *args, "--out", str(expected)]) != 0:
        raise SystemExit("the embedded replay failed")
    ns = Netns(f"lsbench{os.getpid()}")
    ns.create()
    rows: list[dict[str, object]] = []

    def fresh_cluster(name: str) -> LocalCluster:
        # A fresh cluster per replay: a replay right after one with a failover on the same
        # cluster can find tasks left unassigned (a known coordinator problem, not the cut's).
        cluster = LocalCluster(tmp / name, session_timeout=a.session_timeout)
        cluster.start(2, 1)
        ns.forward_out(int(cluster.hosts.rsplit(":", 1)[1]))  # its ZooKeeper
        data_port = free_port()
        ns.forward_in(data_port)
        start_victim(cluster, ns, data_port)
        return cluster

    try:
        cluster = fresh_cluster("base")
        try:
            base = replay(cluster, ns, run, tmp / "base.jsonl", None)
        finally:
            cluster.stop()
        print(
            f"replay without a cut: {base['seconds']:.1f}s, lost/dup {compare(expected, tmp / 'base.jsonl')}"
        )
        print(
            f"{'cut':>3} {'tick':>4} {'lost':>5} {'dup':>4} {'redone':>6} {'detect s':>8} {'recover s':>9} {'rejoin s':>8}"
        )
        for i in range(a.cuts):
            tick = rng.randint(3, a.max_reports // 3)
            out = tmp / f"cut{i}.jsonl"
            cluster = fresh_cluster(f"cut{i}")
            try:
                row = replay(cluster, ns, run, out, (tick, a.cut_s))
            finally:
                cluster.stop()
            row["lost"], row["duplicated"] = compare(expected, out)
            row["tick"] = tick
            rows.append(row)
            print(
                f"{i + 1:>3} {tick:>4} {row['lost']:>5} {row['duplicated']:>4} {row['recovered_reports']:>6} "
                f"{fmt(row['detection_s']):>8} {fmt(row['recovery_s']):>9} {fmt(row['rejoin_s']):>8}"
            )
    finally:
        ns.close()
    summary: dict[str, object] = {"cuts": len(rows), "cut_s": a.cut_s, "session_timeout": a.session_timeout}
    for key in ("detection_s", "recovery_s", "rejoin_s"):
        xs = [float(r[key]) for r in rows if r[key] is not None]  # type: ignore[arg-type]
        summary[key] = {"p50": statistics.median(xs) if xs else None, "p99": pct(xs, 0.99)}
    summary["lost"] = sum(int(r["lost"]) for r in rows)  # type: ignore[call-overload]
    summary["duplicated"] = sum(int(r["duplicated"]) for r in rows)  # type: ignore[call-overload]
    cut_seconds = statistics.median(float(r["seconds"]) for r in rows) if rows else None  # type: ignore[arg-type]
    summary["replay_s_with_cut_vs_without"] = (
        cut_seconds / float(base["seconds"]) if cut_seconds else None  # type: ignore[arg-type]
    )
    print(
        f"{len(rows)} cuts of {a.cut_s:g}s (sessions {a.session_timeout:g}s): lost {summary['lost']}, "
        f"duplicated {summary['duplicated']}; "
        + ", ".join(
            f"{k.removesuffix('_s')} p50 {fmt(summary[k]['p50'])}s p99 {fmt(summary[k]['p99'])}s"  # type: ignore[index]
            for k in ("detection_s", "recovery_s", "rejoin_s")
        )
        + f"; replay time with a cut {fmt(summary['replay_s_with_cut_vs_without'])}x the replay without"
    )
    results = REPO / "bench" / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "network_cuts.json").write_text(
        json.dumps({"summary": summary, "runs": rows, "base": base}, indent=1)
    )
    return 1 if summary["lost"] or summary["duplicated"] else 0


if __name__ == "__main__":
    sys.exit(main())
