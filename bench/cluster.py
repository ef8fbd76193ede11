#!/usr/bin/env python3
"""Cluster mode vs embedded mode, and routed vs broadcast elements, on one CityBench workload.

One run measures, on the same workload (CityBench queries of the shared manifest, each
named by its manifest id, the first ``--max-reports`` report times):

* ``embedded``: the embedded engine in this process (``linkstream replay``);
* ``cluster-N`` for N = 1 .. ``--containers``: a local cluster (ZooKeeper +
  coordinator + N container processes, ``linkstream.cluster.localcluster``) driven
  by this process (``linkstream replay --zk``), elements routed by stream (the default:
  each element goes only to the containers whose queries read its stream); containers
  are added one at a time between runs;
* ``cluster-N-broadcast`` for the largest N: the same cluster with ``--route
  broadcast`` (every element to every container), the peer the routing is measured
  against.  Routed and broadcast runs take turns;
* ``cluster-N-noaffinity`` for the largest N: routed by stream, but the queries' task
  specs name no streams, so the scheduler places them by load and colocation only (no
  stream affinity: ``--no-affinity``), the peer stream affinity is measured against
  (skip it with ``--no-affinity-peer``).  ``subscriptions`` is the most
  ``(container, stream)`` pairs the driver routed to during the run.

CPU s is the CPU time of the replay: this process for embedded, driver plus every
container (from the containers' logs) for the cluster runs.

Throughput is stream triples / replay seconds (reading, encoding and sending the
streams, evaluating every report and writing every result line; not the one-off start:
static graphs loaded and queries registered, reported separately as ``startup_s``).
Every cluster run is checked against the embedded results with
``shared/tools/compare_results.py``; ``equal`` records the outcome.  The data-plane
figures are what the driver pushed: all bytes (elements with their dictionary terms,
syncs, ticks) and, of them, the element bytes, plus the elements sent summed over the
containers.

Workloads (``--workload``): ``spread`` (default) is twelve queries of both dialects
over different streams (user locations, one traffic sensor, two car parks, pollution,
weather, another traffic sensor: ``SPREAD``), where routing can leave streams out;
``light`` is every CityBench query but the three whose result sets dwarf every other
(``Q8``, ``Q10_5``, ``Q10_8``: hundreds of thousands of rows for a few reports, which
would let output formatting hide evaluation), where most containers read the busiest
streams anyway; ``all`` (or ``--all``) is every query.  On a 2-core machine the driver
and N containers share two cores: read the ratios with that in mind.
``--routes-only`` skips the clusters smaller than ``--containers``.

Each configuration runs ``--repeat`` times (embedded and cluster runs taking turns); the
median run is reported with the spread (max - min) / median.

    python bench/cluster.py [--workload spread|light|all] [--max-reports N] [--containers 3]
                            [--repeat K] [--routes-only] [--no-affinity-peer] [--out FILE]

Raw figures go to ``bench/results/cluster.json``, one entry per workload (a run updates
its own).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import platform
import re
import sys
import tempfile
import time
from pathlib import Path

from linkstream.cluster.localcluster import LocalCluster
from linkstream.cluster.replay import replay_on_cluster
from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
HEAVY = ("Q8", "Q10_5", "Q10_8")
SPREAD = tuple(f"{d}-{q}" for q in ("Q4", "Q5", "Q7", "Q10", "Q11", "Q12") for d in ("csparql", "cqels"))


def load_compare():
    spec = importlib.util.spec_from_file_location("compare_results", SHARED / "tools" / "compare_results.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def workload(name: str) -> tuple[list, list[tuple[str, str]], list[tuple[str | None, str]], str]:
    man = json.loads((SHARED / "citybench" / "manifest.json").read_text())
    base = man.get("base", "http://localhost/")
    queries, streams, statics = [], {}, {}
    for q in man["queries"]:
        if name == "light" and q["id"].split("-", 1)[1] in HEAVY:
            continue
        if name == "spread" and q["id"] not in SPREAD:
            continue
        text = (SHARED / q["query"]).read_text()
        queries.append(parse_continuous(text, default_name=q["id"], base=base, source=q["query"]))
        for s in q["streams"]:
            streams[s["iri"]] = str(SHARED / s["path"])
        for s in q["statics"]:
            statics[s["iri"]] = str(SHARED / s["path"])
    return queries, list(streams.items()), list(statics.items()), base


def run_embedded(queries, streams, statics, max_reports: int, out: Path) -> dict:
    t0 = time.perf_counter()
    engine = Engine(default_step=1000, log_fn=lambda _m: None)
    for k, (iri, path) in enumerate(statics):
        engine.add_static(iri, load_graph(path, engine.dictionary, bnode_prefix=f"s{k}_"))
    rqs = [engine.register(cq) for cq in queries]
    startup = time.perf_counter() - t0
    cpu0 = time.process_time()
    with open(out, "w", encoding="utf-8") as f:
        res = replay(engine, rqs, streams, f, max_reports=max_reports, log=lambda _m: None)
    return {
        "config": "embedded",
        "containers": 0,
        "triples": res.triples,
        "rows": res.rows,
        "replay_s": res.seconds,
        "startup_s": startup,
        "triples_per_s": res.triples / res.seconds,
        "cpu_s": time.process_time() - cpu0,
    }


def container_cpu(cluster: LocalCluster, run_id: str, n: int) -> float | None:
    """CPU seconds the containers spent on ``run_id`` (from their logs), once all n logged."""
    pattern = re.compile(rf"run {run_id} ended after .*?([0-9.]+)s CPU")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        found = []
        for name in cluster.names("container"):
            text = Path(cluster.state.processes[name].log).read_text(errors="replace")
            found += [float(m.group(1)) for m in pattern.finditer(text)]
        if len(found) >= n:
            return sum(found)
        time.sleep(0.1)
    return None


def run_cluster(
    cluster: LocalCluster,
    n: int,
    queries,
    streams,
    statics,
    base,
    max_reports,
    out,
    route: str,
    affinity: bool = True,
) -> dict:
    t0 = time.perf_counter()
    started: list[float] = []
    engines: list = []
    subscriptions = [0]

    def on_start(engine) -> None:
        started.append(time.perf_counter())
        engines.append(engine)

    def on_tick(_seq: int, _c: int) -> None:
        fanout = engines[0].fanout
        subscriptions[0] = max(subscriptions[0], sum(len(fanout.subscribed(c)) for c in fanout.peers))

    cpu0 = time.process_time()
    with open(out, "w", encoding="utf-8") as f:
        result = replay_on_cluster(
            cluster.hosts,
            queries,
            streams,
            statics,
            f,
            base=base,
            max_reports=max_reports,
            on_start=on_start,
            on_tick=on_tick,
            log=lambda _m: None,
            route=route,
            affinity=affinity,
            security=cluster.security,
        )
    res = result.replay
    driver_cpu = time.process_time() - cpu0
    return {
        "config": f"cluster-{n}"
        + ("-broadcast" if route == "broadcast" else "")
        + ("" if affinity else "-noaffinity"),
        "route": route,
        "affinity": affinity,
        "subscriptions": subscriptions[0] if route == "streams" else None,
        "driver_cpu_s": driver_cpu,
        "containers_cpu_s": container_cpu(cluster, result.run_id, n),
        "containers": len(result.containers),
        "triples": res.triples,
        "rows": res.rows,
        "replay_s": res.seconds,
        "startup_s": started[0] - t0,
        "triples_per_s": res.triples / res.seconds,
        "dataplane_MB": result.bytes_sent / 1e6,
        "dataplane_MB_per_s": result.bytes_sent / 1e6 / res.seconds,
        "element_MB": result.element_bytes / 1e6,
        "elements_sent": result.elements_sent,
        "elements_by_container": result.elements_by_container,
        "lost": len(result.lost),
    }


def median_run(rows: list[dict]) -> dict:
    """The run with the median throughput, with the spread (max - min) / median of all runs."""
    ordered = sorted(rows, key=lambda r: r["triples_per_s"])
    mid = dict(ordered[len(ordered) // 2])
    rates = [r["triples_per_s"] for r in rows]
    mid["spread"] = (max(rates) - min(rates)) / mid["triples_per_s"]
    mid["runs"] = rates
    mid["equal"] = all(r.get("equal", True) for r in rows) if "equal" in mid else None
    mid["lost"] = sum(r.get("lost", 0) for r in rows)
    return mid


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-reports", type=int, default=150, help="report times per query (default 150)")
    ap.add_argument(
        "--workload",
        choices=("spread", "light", "all"),
        default="spread",
        help="queries over different streams (default), every query but Q8/Q10_5/Q10_8, or all",
    )
    ap.add_argument("--all", action="store_true", help="same as --workload all")
    ap.add_argument("--containers", type=int, default=3, help="largest cluster measured (default 3)")
    ap.add_argument(
        "--repeat", type=int, default=3, help="runs per configuration, median reported (default 3)"
    )
    ap.add_argument(
        "--routes-only",
        action="store_true",
        help="measure only the largest cluster, routed and broadcast (no 1 .. N-1 scaling)",
    )
    ap.add_argument(
        "--no-affinity-peer",
        action="store_true",
        help="do not measure the routed run without stream affinity on the largest cluster",
    )
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "cluster.json"))
    args = ap.parse_args(argv)
    compare = load_compare()
    name = "all" if args.all else args.workload
    queries, streams, statics, base = workload(name)
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        want = Path(tmp) / "embedded.jsonl"
        cluster = LocalCluster(Path(tmp) / "cluster", capacity=len(queries))
        try:
            first = args.containers if args.routes_only else 1
            cluster.start(first)
            for n in range(first, args.containers + 1):
                if n > first:
                    cluster.add_containers(1)
                routes = [("streams", True)]
                if n == args.containers:
                    routes += [] if args.no_affinity_peer else [("streams", False)]
                    routes += [("broadcast", True)]
                for _ in range(args.repeat):  # embedded and cluster runs take turns
                    if len(runs.get("embedded", [])) < args.repeat:
                        row = run_embedded(queries, streams, statics, args.max_reports, want)
                        runs.setdefault("embedded", []).append(row)
                    for route, affinity in routes:
                        got = Path(tmp) / f"cluster-{n}-{route}-{affinity}.jsonl"
                        row = run_cluster(
                            cluster,
                            n,
                            queries,
                            streams,
                            statics,
                            base,
                            args.max_reports,
                            got,
                            route,
                            affinity,
                        )
                        with contextlib.redirect_stdout(io.StringIO()):
                            row["equal"] = compare.main([str(want), str(got)]) == 0
                        runs.setdefault(row["config"], []).append(row)
                        subs = row["subscriptions"]
                        print(
                            f"  {row['config']}: {row['triples_per_s']:,.0f} triples/s, "
                            f"{row['dataplane_MB']:.1f} MB out"
                            + ("" if subs is None else f", {subs} subscriptions")
                            + f", equal={row['equal']}",
                            flush=True,
                        )
        finally:
            cluster.stop()
    results = [median_run(rows) for rows in runs.values()]
    emb = results[0]["triples_per_s"]
    print(
        f"workload {name}: {len(queries)} queries over {len(streams)} streams, {args.max_reports} reports "
        f"each, {results[0]['triples']} stream triples"
    )
    print(
        f"{'config':<20}{'triples/s':>12}{'spread':>8}{'x embedded':>12}{'replay s':>10}{'startup s':>11}"
        f"{'CPU s':>8}{'MB/s out':>10}  equal"
    )
    for r in results:
        mbs = f"{r['dataplane_MB_per_s']:.1f}" if "dataplane_MB_per_s" in r else "-"
        cpu = r.get("cpu_s") or ((r.get("containers_cpu_s") or 0.0) + r.get("driver_cpu_s", 0.0))
        print(
            f"{r['config']:<20}{r['triples_per_s']:>12,.0f}{r['spread']:>8.2f}{r['triples_per_s'] / emb:>12.2f}"
            f"{r['replay_s']:>10.2f}{r['startup_s']:>11.2f}{cpu:>8.2f}{mbs:>10}  {'-' if r.get('equal') is None else r['equal']}"
        )
    by = {r["config"]: r for r in results}
    routed, broadcast = by[f"cluster-{args.containers}"], by[f"cluster-{args.containers}-broadcast"]
    routing = {
        "containers": args.containers,
        "streams": len(streams),
        "dataplane_bytes_broadcast_over_routed": broadcast["dataplane_MB"] / routed["dataplane_MB"],
        "element_bytes_broadcast_over_routed": broadcast["element_MB"] / routed["element_MB"],
        "elements_broadcast_over_routed": broadcast["elements_sent"] / routed["elements_sent"],
        "throughput_routed_over_broadcast": routed["triples_per_s"] / broadcast["triples_per_s"],
    }
    print(
        f"\nrouting on {args.containers} containers, {len(streams)} streams: data plane "
        f"{routed['dataplane_MB']:.1f} MB routed vs {broadcast['dataplane_MB']:.1f} MB broadcast "
        f"({routing['dataplane_bytes_broadcast_over_routed']:.2f}x less; elements "
        f"{routed['elements_sent']:,} vs {broadcast['elements_sent']:,}); throughput "
        f"{routed['triples_per_s']:,.0f} vs {broadcast['triples_per_s']:,.0f} triples/s "
        f"({routing['throughput_routed_over_broadcast']:.2f}x)"
    )
    affinity_peer = by.get(f"cluster-{args.containers}-noaffinity")
    stream_affinity = None
    if affinity_peer is not None:
        stream_affinity = {
            "containers": args.containers,
            "subscriptions_with": routed["subscriptions"],
            "subscriptions_without": affinity_peer["subscriptions"],
            "dataplane_bytes_without_over_with": affinity_peer["dataplane_MB"] / routed["dataplane_MB"],
            "element_bytes_without_over_with": affinity_peer["element_MB"] / routed["element_MB"],
            "elements_without_over_with": affinity_peer["elements_sent"] / routed["elements_sent"],
            "element_bytes_broadcast_over_with": broadcast["element_MB"] / routed["element_MB"],
            "element_bytes_broadcast_over_without": broadcast["element_MB"] / affinity_peer["element_MB"],
            "throughput_with_over_without": routed["triples_per_s"] / affinity_peer["triples_per_s"],
        }
        print(
            f"stream affinity on {args.containers} containers: {routed['subscriptions']} vs "
            f"{affinity_peer['subscriptions']} (container, stream) subscriptions; routed data plane "
            f"{routed['dataplane_MB']:.2f} MB with vs {affinity_peer['dataplane_MB']:.2f} MB without "
            f"({stream_affinity['dataplane_bytes_without_over_with']:.2f}x less; element bytes "
            f"{stream_affinity['element_bytes_without_over_with']:.2f}x less); routed vs broadcast "
            f"element bytes {stream_affinity['element_bytes_broadcast_over_with']:.2f}x with, "
            f"{stream_affinity['element_bytes_broadcast_over_without']:.2f}x without; throughput "
            f"{stream_affinity['throughput_with_over_without']:.2f}x"
        )
    body = {
        "workload": name,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "queries": [cq.name for cq in queries],
        "max_reports": args.max_reports,
        "repeat": args.repeat,
        "results": results,
        "summary": {r["config"]: r["triples_per_s"] / emb for r in results},
        "routing": routing,
        "stream_affinity": stream_affinity,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    saved: dict = {}
    if out.exists():
        with contextlib.suppress(ValueError):
            saved = json.loads(out.read_text())
    workloads = saved.get("workloads") if isinstance(saved.get("workloads"), dict) else {}
    workloads[name] = body
    out.write_text(json.dumps({"workloads": workloads}, indent=1))
    return 0 if all(r.get("equal") is not False and not r.get("lost") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
