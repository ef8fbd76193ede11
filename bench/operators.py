#!/usr/bin/env python3
"""Operator placement (unpartitioned and hash-partitioned joins) vs query placement.

One run measures, on one CityBench workload (``bench/cluster.py``'s workloads, the first
``--max-reports`` report times of each query) and one local cluster of ``--containers``
container processes:

* ``embedded``: the embedded engine in this process, the reference for equality;
* ``queries``: query placement with every element broadcast to every container (the
  peer: operator placement always broadcasts, so this isolates the placement);
* ``operators-k1``: ``--placement operators`` (shared joins, routes and scans as
  producer channels of their own, deltas over ZeroMQ);
* ``operators-kK`` for every K of ``--parallelism``: the same with every partitionable
  shared join run as K hash-partitioned instances.

Configurations take turns ``--repeat`` times; the median run is reported with the
spread (max - min) / median, as a ratio to ``queries`` measured in the same run.
Throughput is stream triples / replay seconds; every run is checked against the
embedded results (``equal``).  Raw figures go to ``bench/results/operators.json``.
On a 2-core machine the driver and every container share two cores: partitioning
spreads a join's work over processes, it cannot add cores.

    python bench/operators.py [--workload spread|light|all] [--max-reports N]
                              [--containers 3] [--parallelism 2 3] [--repeat K] [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

from linkstream.cluster.localcluster import LocalCluster
from linkstream.cluster.replay import replay_on_cluster

REPO = Path(__file__).resolve().parent.parent


def _bench_cluster():
    """``bench/cluster.py`` as a module (its workloads and embedded run)."""
    spec = importlib.util.spec_from_file_location("bench_cluster", REPO / "bench" / "cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_one(
    cluster: LocalCluster, config: str, queries, streams, statics, base, max_reports, out: Path
) -> dict:
    placement, k = ("queries", 1) if config == "queries" else ("operators", int(config.split("-k")[1]))
    started: list[float] = []
    t0 = time.perf_counter()
    with open(out, "w", encoding="utf-8") as f:
        result = replay_on_cluster(
            cluster.hosts,
            queries,
            streams,
            statics,
            f,
            base=base,
            max_reports=max_reports,
            on_start=lambda _e: started.append(time.perf_counter()),
            log=lambda _m: None,
            placement=placement,
            route="broadcast",
            parallelism=k,
            security=cluster.security,
        )
    res = result.replay
    summary = result.placement or {}
    producers = summary.get("producers", {})
    return {
        "config": config,
        "triples": res.triples,
        "rows": res.rows,
        "replay_s": res.seconds,
        "startup_s": started[0] - t0,
        "triples_per_s": res.triples / res.seconds,
        "producers": len(producers),
        "channels": sum(len(d["instances"]) for d in producers.values()),
        "partitioned": sum(1 for d in producers.values() if d.get("partition")),
        "remote_edges": len(summary.get("remote_edges", [])),
        "lost": len(result.lost),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", choices=("spread", "light", "all"), default="spread")
    ap.add_argument("--max-reports", type=int, default=100, help="report times per query (default 100)")
    ap.add_argument("--containers", type=int, default=3, help="cluster size (default 3)")
    ap.add_argument(
        "--parallelism", type=int, nargs="+", default=[2, 3], help="instances per join (default 2 3)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration (default 3)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "operators.json"))
    args = ap.parse_args(argv)
    bc = _bench_cluster()
    compare = bc.load_compare()
    queries, streams, statics, base = bc.workload(args.workload)
    configs = ["queries", "operators-k1", *[f"operators-k{k}" for k in args.parallelism if k > 1]]
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        want = Path(tmp) / "embedded.jsonl"
        runs["embedded"] = [bc.run_embedded(queries, streams, statics, args.max_reports, want)]
        # Producer channels are tasks too: room for every query and every instance.
        cluster = LocalCluster(Path(tmp) / "cluster", capacity=len(queries) * (1 + max(args.parallelism)))
        try:
            cluster.start(args.containers)
            for _ in range(args.repeat):
                for config in configs:
                    got = Path(tmp) / f"{config}.jsonl"
                    row = run_one(cluster, config, queries, streams, statics, base, args.max_reports, got)
                    with contextlib.redirect_stdout(io.StringIO()):
                        row["equal"] = compare.main([str(want), str(got)]) == 0
                    runs.setdefault(config, []).append(row)
                    print(
                        f"  {config}: {row['triples_per_s']:,.0f} triples/s, {row['channels']} channels, "
                        f"equal={row['equal']}",
                        flush=True,
                    )
        finally:
            cluster.stop()
    results = {c: bc.median_run(rows) for c, rows in runs.items() if c != "embedded"}
    peer = results["queries"]["triples_per_s"]
    print(
        f"workload {args.workload}: {len(queries)} queries, {args.max_reports} reports each, "
        f"{args.containers} containers, {results['queries']['triples']} stream triples"
    )
    print(
        f"{'config':<16}{'triples/s':>12}{'spread':>8}{'x queries':>11}{'channels':>10}{'partitioned':>13}  equal"
    )
    for c, r in results.items():
        print(
            f"{c:<16}{r['triples_per_s']:>12,.0f}{r['spread']:>8.2f}{r['triples_per_s'] / peer:>11.2f}"
            f"{r.get('channels', 0):>10}{r.get('partitioned', 0):>13}  {r['equal']}"
        )
    body = {
        "workload": args.workload,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "containers": args.containers,
        "max_reports": args.max_reports,
        "repeat": args.repeat,
        "embedded": runs["embedded"][0],
        "results": results,
        "ratio_to_query_placement": {c: r["triples_per_s"] / peer for c, r in results.items()},
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(body, indent=1))
    return 0 if all(r["equal"] and not r["lost"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
