#!/usr/bin/env python3
"""Cluster mode vs embedded mode: end-to-end triples/s of one CityBench workload.

One run measures, on the same workload (CityBench queries of the shared manifest, each
named by its manifest id, the first ``--max-reports`` report times):

* ``embedded``: the embedded engine in this process (``linkstream replay``);
* ``cluster-N`` for N = 1, 2, 3: a local cluster (ZooKeeper + coordinator + N container
  processes, ``linkstream.containers.localcluster``) driven by this process
  (``linkstream replay --zk``); containers are added one at a time between runs.

Throughput is stream triples / replay seconds (reading, encoding and broadcasting the
streams, evaluating every report and writing every result line; not the one-off start:
static graphs loaded and queries registered, reported separately as ``startup_s``).
Every cluster run is checked against the embedded results with
``shared/tools/compare_results.py``; ``equal`` records the outcome.  The data-plane
figure is what the driver pushed (broadcast elements, ticks, sync messages) per second.

By default the three CityBench queries whose result sets dwarf every other (``Q8``,
``Q10_5``, ``Q10_8``: hundreds of thousands of rows for a few reports) are left out, so
that output formatting does not hide evaluation; ``--all`` keeps them.  On a 2-core
machine the driver and N containers share two cores: read the ratios with that in mind.

    python bench/cluster.py [--max-reports N] [--all] [--containers 3] [--out FILE]

Raw figures go to ``bench/results/cluster.json``.
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

from linkstream.containers.localcluster import LocalCluster
from linkstream.engine.cluster import replay_on_cluster
from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
HEAVY = ("Q8", "Q10_5", "Q10_8")


def load_compare():
    spec = importlib.util.spec_from_file_location("compare_results", SHARED / "tools" / "compare_results.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def workload(include_all: bool) -> tuple[list, list[tuple[str, str]], list[tuple[str | None, str]], str]:
    man = json.loads((SHARED / "citybench" / "manifest.json").read_text())
    base = man.get("base", "http://localhost/")
    queries, streams, statics = [], {}, {}
    for q in man["queries"]:
        if not include_all and q["id"].split("-", 1)[1] in HEAVY:
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
    }


def run_cluster(cluster: LocalCluster, n: int, queries, streams, statics, base, max_reports, out) -> dict:
    t0 = time.perf_counter()
    started: list[float] = []
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
        )
    res = result.replay
    return {
        "config": f"cluster-{n}",
        "containers": len(result.containers),
        "triples": res.triples,
        "rows": res.rows,
        "replay_s": res.seconds,
        "startup_s": started[0] - t0,
        "triples_per_s": res.triples / res.seconds,
        "dataplane_MB": result.bytes_sent / 1e6,
        "dataplane_MB_per_s": result.bytes_sent / 1e6 / res.seconds,
        "lost": len(result.lost),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max-reports", type=int, default=150, help="report times per query (default 150)")
    ap.add_argument("--all", action="store_true", help="include the heavy-output queries Q8, Q10_5, Q10_8")
    ap.add_argument("--containers", type=int, default=3, help="largest cluster measured (default 3)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "cluster.json"))
    args = ap.parse_args(argv)
    compare = load_compare()
    queries, streams, statics, base = workload(args.all)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        want = Path(tmp) / "embedded.jsonl"
        results.append(run_embedded(queries, streams, statics, args.max_reports, want))
        cluster = LocalCluster(Path(tmp) / "cluster", capacity=len(queries))
        try:
            cluster.start(1)
            for n in range(1, args.containers + 1):
                if n > 1:
                    cluster.add_containers(1)
                got = Path(tmp) / f"cluster-{n}.jsonl"
                row = run_cluster(cluster, n, queries, streams, statics, base, args.max_reports, got)
                with contextlib.redirect_stdout(io.StringIO()):
                    row["equal"] = compare.main([str(want), str(got)]) == 0
                results.append(row)
        finally:
            cluster.stop()
    emb = results[0]["triples_per_s"]
    print(f"{len(queries)} queries, {args.max_reports} reports each, {results[0]['triples']} stream triples")
    print(
        f"{'config':<12}{'triples/s':>12}{'x embedded':>12}{'replay s':>10}{'startup s':>11}{'MB/s out':>10}  equal"
    )
    for r in results:
        mbs = f"{r['dataplane_MB_per_s']:.1f}" if "dataplane_MB_per_s" in r else "-"
        print(
            f"{r['config']:<12}{r['triples_per_s']:>12,.0f}{r['triples_per_s'] / emb:>12.2f}"
            f"{r['replay_s']:>10.2f}{r['startup_s']:>11.2f}{mbs:>10}  {r.get('equal', '-')}"
        )
    body = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "queries": [cq.name for cq in queries],
        "max_reports": args.max_reports,
        "results": results,
        "summary": {r["config"]: r["triples_per_s"] / emb for r in results},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(body, indent=1))
    return 0 if all(r.get("equal", True) and not r.get("lost") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
