#!/usr/bin/env python3
"""``linkstream replay --cluster N`` through the live service vs through the replay driver.

One run replays the same CityBench workload (queries of the shared manifest, each named by
its manifest id, the first ``--max-reports`` report times) three ways, each as a user runs
it, from the command line, wall time from start to exit:

* ``embedded``: ``linkstream replay`` (the reference);
* ``api``: ``linkstream replay --cluster N``, a throw-away local cluster whose coordinator
  serves the HTTP API; the replay is a client of it (``platform/cluster/apireplay.py``);
* ``driver``: the same throw-away cluster driven by the replay process itself over
  ZeroMQ (``platform/cluster/replay.py``, what ``--cluster N`` ran before and ``--zk``
  still runs), the peer the API path is measured against.

``api`` and ``driver`` take turns, ``--repeat`` times; the median is reported, with the
ratio driver / api (above 1: the API path is faster).  Both include the cluster's start
and stop.  Every cluster run's output is compared with the embedded one
(``shared/tools/compare_results.py``).  Raw figures go to ``bench/results/replay_cluster.json``.

    python bench/replay_cluster.py [--queries ID,ID...] [--max-reports N] [--containers N] [--repeat K]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
DEFAULT_QUERIES = "cqels-Q1,csparql-Q1,cqels-Q5,csparql-Q5"


def _args(ids: list[str], work: Path, max_reports: int) -> list[str]:
    man = json.loads((SHARED / "citybench" / "manifest.json").read_text())
    by_id = {q["id"]: q for q in man["queries"]}
    args = ["--base", man.get("base", "http://localhost/"), "--max-reports", str(max_reports), "--quiet"]
    streams: dict[str, str] = {}
    statics: dict[str | None, str] = {}
    for qid in ids:
        q = by_id[qid]
        path = work / f"{qid}.rq"
        path.write_text((SHARED / q["query"]).read_text())
        args += ["--query", str(path)]
        streams.update({s["iri"]: str(SHARED / s["path"]) for s in q["streams"]})
        statics.update({s["iri"]: str(SHARED / s["path"]) for s in q["statics"]})
    for iri, p in streams.items():
        args += ["--stream", f"{iri}={p}"]
    for iri, p in statics.items():
        args += ["--static", f"{iri}={p}" if iri else p]
    return args


def _run(kind: str, args: list[str], out: Path, containers: int) -> float:
    from linkstream.cli.cluster import cmd_replay_cluster
    from linkstream.cli.main import build_parser
    from linkstream.cli.main import main as cli_main

    argv = ["replay", *args, "--out", str(out)]
    t0 = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):
        if kind == "embedded":
            rc = cli_main(argv)
        elif kind == "api":
            rc = cli_main([*argv, "--cluster", str(containers)])
        else:
            ns = build_parser("replay").parse_args([*argv, "--cluster", str(containers)])
            rc = cmd_replay_cluster(ns, lambda _m: None)
    if rc != 0:
        raise SystemExit(f"{kind}: exit status {rc}")
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--queries", default=DEFAULT_QUERIES, help="manifest ids, comma-separated")
    ap.add_argument("--max-reports", type=int, default=150)
    ap.add_argument("--containers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "replay_cluster.json"))
    a = ap.parse_args()
    if not (SHARED / "citybench" / "manifest.json").exists():
        print(f"needs the shared CityBench corpus at {SHARED} (LINKSTREAM_SHARED)", file=sys.stderr)
        return 2
    spec = importlib.util.spec_from_file_location("compare_results", SHARED / "tools" / "compare_results.py")
    assert spec and spec.loader
    compare = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare)
    ids = a.queries.split(",")
    times: dict[str, list[float]] = {"embedded": [], "api": [], "driver": []}
    equal: dict[str, bool] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        args = _args(ids, work, a.max_reports)
        expected = work / "embedded.jsonl"
        for _ in range(a.repeat):
            times["embedded"].append(_run("embedded", args, expected, a.containers))
            for kind in ("api", "driver"):
                got = work / f"{kind}.jsonl"
                times[kind].append(_run(kind, args, got, a.containers))
                with contextlib.redirect_stdout(io.StringIO()):
                    equal[kind] = equal.get(kind, True) and compare.main([str(expected), str(got)]) == 0
    med = {k: statistics.median(v) for k, v in times.items()}
    for kind in ("embedded", "api", "driver"):
        eq = "" if kind == "embedded" else f"  equal to embedded: {equal[kind]}"
        print(
            f"{kind:<9} {med[kind]:7.2f} s wall (median of {a.repeat}: {', '.join(f'{x:.2f}' for x in times[kind])}){eq}"
        )
    print(f"driver / api wall time: {med['driver'] / med['api']:.2f}x (above 1: the API path is faster)")
    body = {
        "queries": ids,
        "max_reports": a.max_reports,
        "containers": a.containers,
        "seconds": times,
        "median_s": med,
        "driver_over_api": med["driver"] / med["api"],
        "equal": equal,
        "load": os.getloadavg(),
    }
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(body, indent=1))
    return 0 if all(equal.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
