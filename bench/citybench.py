#!/usr/bin/env python3
"""CityBench: LinkStream vs the reference evaluator (pyoxigraph re-evaluation per window).

Runs every query of ``shared/citybench/manifest.json`` through LinkStream's embedded
engine and through ``shared/tools/oracle.py`` in the same run, each in a fresh process,
and prints per query and as geometric means:

* end-to-end throughput: stream triples / wall time of the whole process (parse, load,
  evaluate, write) -- the ratio LinkStream / oracle; and the same ratio of CPU seconds
  (user + system of each process: steadier than wall time on a shared machine);
* evaluation throughput: stream triples / time spent evaluating (oracle: window upkeep +
  SPARQL per report; LinkStream: window advance + incremental operators + output);
* latency per report (evaluation time / number of reports);
* whether the two result files are equal (``shared/tools/compare_results.py``, not timed):
  the exit status is 1 if any query's results differ.

Raw figures go to ``bench/results/citybench.json``.  By default each query runs over the
report times its manifest entry keeps (``max_reports``); ``--full`` runs every report.

    python bench/citybench.py [--only ID ...] [--full] [--versus DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()


def stream_triples(q: dict) -> int:
    n = 0
    for s in q["streams"]:
        with open(SHARED / s["path"], "rb") as f:
            n += sum(1 for line in f if b"generatedAtTime" not in line and line.strip())
    return n


def common_args(q: dict, base: str, full: bool) -> list[str]:
    args = ["--query", str(SHARED / q["query"]), "--base", base, "--quiet"]
    for s in q["streams"]:
        args += ["--stream", f"{s['iri']}={SHARED / s['path']}"]
    for s in q["statics"]:
        args += ["--static", (f"{s['iri']}={SHARED / s['path']}" if s["iri"] else str(SHARED / s["path"]))]
    if q.get("default_step"):
        args += ["--default-step", str(q["default_step"])]
    if q.get("max_reports") and not full:
        args += ["--max-reports", str(q["max_reports"])]
    return args


#: children run as a user's install does: with bytecode caches (a PYTHONDONTWRITEBYTECODE
#: of this shell would charge every LinkStream process ~0.1 s of compiling the package)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run(cmd: list[str], pythonpath: str | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one fresh process."""
    env = ENV if pythonpath is None else {**ENV, "PYTHONPATH": pythonpath}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed: {p.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", default=[], help="query id (repeatable)")
    ap.add_argument("--full", action="store_true", help="all report times, not the manifest's max_reports")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "citybench.json"))
    ap.add_argument(
        "--versus",
        default=None,
        metavar="DIR",
        help="also run the linkstream package found in DIR (DIR/linkstream, e.g. a symlink to "
        "another checkout's platform/) in the same run, alternating with this one: its "
        "end-to-end ratio and latency per report are printed beside",
    )
    args = ap.parse_args(argv)
    man = json.loads((SHARED / "citybench" / "manifest.json").read_text())
    base = man.get("base", "http://localhost/")
    queries = [q for q in man["queries"] if not args.only or q["id"] in args.only]
    py = sys.executable
    oracle = SHARED / "tools" / "oracle.py"
    compare = SHARED / "tools" / "compare_results.py"
    rows = []
    differ: list[str] = []
    print(
        f"{'query':<28}{'reports':>8}{'e2e x':>8}{'eval x':>9}{'LS ms/rep':>11}{'oracle ms/rep':>15}"
        f"{'cpu x':>7}{'results':>9}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for q in queries:
            n_tr = stream_triples(q)
            ca = common_args(q, base, args.full)
            ls_stats = Path(tmp) / f"{q['id']}.ls.json"
            or_stats = Path(tmp) / f"{q['id']}.or.json"
            vs_stats = Path(tmp) / f"{q['id']}.vs.json"
            ls_cmd = [py, "-m", "linkstream.cli", "replay", *ca, "--out", str(Path(tmp) / "ls.jsonl")]
            vs_wall, vs_cpu = (
                run([*ls_cmd, "--stats", str(vs_stats)], args.versus) if args.versus else (None, 0.0)
            )
            ls_wall, ls_cpu = run([*ls_cmd, "--stats", str(ls_stats)])
            or_wall, or_cpu = run(
                [py, str(oracle), *ca, "--out", str(Path(tmp) / "or.jsonl"), "--stats", str(or_stats)]
            )
            # the outputs must be equal (SEMANTICS.md section 6); not part of the timings
            same = subprocess.run(
                [py, str(compare), str(Path(tmp) / "ls.jsonl"), str(Path(tmp) / "or.jsonl")],
                capture_output=True,
                text=True,
            )
            ls = json.loads(ls_stats.read_text())
            orc = json.loads(or_stats.read_text())[0]
            ls_q = ls["queries"][0]
            ls_eval = max(ls_q["eval_seconds"], 1e-6)
            reports = max(ls_q["reports"], 1)
            or_eval = max(orc["seconds"], 1e-6)
            r = {
                "id": q["id"],
                "reports": ls_q["reports"],
                "oracle_reports": orc["report_times"],
                "stream_triples": n_tr,
                "linkstream_wall_s": ls_wall,
                "oracle_wall_s": or_wall,
                "linkstream_eval_s": ls_eval,
                "oracle_eval_s": or_eval,
                "e2e_ratio": or_wall / ls_wall,
                "linkstream_cpu_s": ls_cpu,
                "oracle_cpu_s": or_cpu,
                "e2e_cpu_ratio": or_cpu / ls_cpu,
                "eval_ratio": or_eval / ls_eval,
                "linkstream_ms_per_report": 1e3 * ls_eval / reports,
                "oracle_ms_per_report": 1e3 * or_eval / max(orc["report_times"], 1),
                "linkstream_p99_ms": ls_q["latency_ms_p99"],
                "results_equal": same.returncode == 0,
            }
            if vs_wall is not None:
                vs_q = json.loads(vs_stats.read_text())["queries"][0]
                r["versus_wall_s"] = vs_wall
                r["versus_e2e_ratio"] = or_wall / vs_wall
                r["versus_cpu_s"] = vs_cpu
                r["versus_e2e_cpu_ratio"] = or_cpu / vs_cpu
                r["versus_ms_per_report"] = 1e3 * max(vs_q["eval_seconds"], 1e-6) / max(vs_q["reports"], 1)
            if same.returncode != 0:
                differ.append(q["id"])
            rows.append(r)
            print(
                f"{q['id']:<28}{r['reports']:>8}{r['e2e_ratio']:>8.2f}{r['eval_ratio']:>9.1f}"
                f"{r['linkstream_ms_per_report']:>11.3f}{r['oracle_ms_per_report']:>15.3f}"
                f"{r['e2e_cpu_ratio']:>7.2f}{'equal' if r['results_equal'] else 'DIFFER':>9}"
                + (
                    f"  versus: e2e x{r['versus_e2e_ratio']:.2f} cpu x{r['versus_e2e_cpu_ratio']:.2f} "
                    f"{r['versus_ms_per_report']:.3f} ms/rep"
                    if vs_wall is not None
                    else ""
                ),
                flush=True,
            )
    summary = {
        "geomean_e2e_ratio": geomean([r["e2e_ratio"] for r in rows]),
        "geomean_e2e_cpu_ratio": geomean([r["e2e_cpu_ratio"] for r in rows]),
        "geomean_eval_ratio": geomean([r["eval_ratio"] for r in rows]),
        "geomean_linkstream_ms_per_report": geomean([r["linkstream_ms_per_report"] for r in rows]),
        "geomean_oracle_ms_per_report": geomean([r["oracle_ms_per_report"] for r in rows]),
    }
    if args.versus:
        summary["versus_geomean_e2e_ratio"] = geomean([r["versus_e2e_ratio"] for r in rows])
        summary["versus_geomean_e2e_cpu_ratio"] = geomean([r["versus_e2e_cpu_ratio"] for r in rows])
        summary["versus_geomean_ms_per_report"] = geomean([r["versus_ms_per_report"] for r in rows])
    print(
        f"\ngeo-mean: end-to-end throughput x{summary['geomean_e2e_ratio']:.2f} (CPU "
        f"x{summary['geomean_e2e_cpu_ratio']:.2f}), evaluation throughput "
        f"x{summary['geomean_eval_ratio']:.1f} vs oracle; latency per report "
        f"{summary['geomean_linkstream_ms_per_report']:.3f} ms (oracle "
        f"{summary['geomean_oracle_ms_per_report']:.3f} ms)"
    )
    if args.versus:
        print(
            f"--versus {args.versus}: end-to-end x{summary['versus_geomean_e2e_ratio']:.2f} "
            f"(CPU x{summary['versus_geomean_e2e_cpu_ratio']:.2f}), latency per "
            f"report {summary['versus_geomean_ms_per_report']:.3f} ms (same run)"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"summary": summary, "queries": rows, "full": args.full}, indent=1))
    print(f"raw figures: {args.out}")
    if differ:
        print(f"results differ from the reference: {', '.join(differ)}")
        return 1
    print("results: every query equal to the reference")
    return 0


if __name__ == "__main__":
    sys.exit(main())
