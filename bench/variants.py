#!/usr/bin/env python3
"""Many variant queries in one process: LinkStream vs the reference evaluator, same run.

Generates ``--queries`` variants of CityBench templates (CQELS-QL / C-SPARQL / RSP-QL
forms of Q1 (two-stream join), Q7 (filter), Q12 (aggregate) and Q11 (ASK) over three
traffic streams, with other sensors, constants and window sizes: the generator of
``tests/engine/test_sharing.py``), takes the first ``--elements`` elements of each traffic
stream, and runs all the queries in ONE process twice, each in a fresh process:

* ``linkstream replay`` with every ``--query``;
* ``shared/tools/oracle.py`` (pyoxigraph re-evaluation of each window) with the same.

Prints the whole-process wall and CPU time of each, the ratio reference / LinkStream
(how many times faster LinkStream is), and checks that both outputs are equal with
``shared/tools/compare_results.py`` (the spec's equality). The rounds alternate the two
processes; the ratio quoted is the median of the per-round ratios (a shared machine is
noisy). Raw figures go to ``bench/results/variants.json``.

    python bench/variants.py [--queries 300] [--elements 60] [--rounds 1]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
sys.path.insert(0, str(REPO))


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


#: children run as a user's install does: with bytecode caches (a PYTHONDONTWRITEBYTECODE
#: in the caller's environment would make every run compile the modules it imports)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def compile_package(py: str) -> None:
    """Writes the bytecode of the ``linkstream`` package the children import (as ``make
    venv`` and a pip install do), so no timed run compiles it."""
    import importlib.util

    spec = importlib.util.find_spec("linkstream")  # a namespace package: its first portion
    for d in [p for p in (spec.submodule_search_locations or [] if spec else []) if Path(p).is_dir()][:1]:
        subprocess.run([py, "-m", "compileall", "-q", str(d)], capture_output=True, env=ENV)


def timed(cmd: list[str], what: str) -> tuple[float, float]:
    """Runs ``cmd``; returns (wall s, CPU s of the process)."""
    cpu0, t0 = children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if p.returncode != 0:
        raise SystemExit(f"{what} failed (exit {p.returncode}): {p.stderr.strip()[-2000:]}")
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, default=300, help="variant queries (default 300)")
    ap.add_argument("--elements", type=int, default=60, help="elements per traffic stream (default 60)")
    ap.add_argument("--rounds", type=int, default=1, help="alternating rounds (default 1)")
    ap.add_argument("--seed", type=int, default=7, help="generator seed (default 7)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "variants.json"))
    args = ap.parse_args(argv)

    from bench.many_queries import trim_streams
    from tests.engine.test_sharing import REPO as REPO_IRI
    from tests.engine.test_sharing import generate

    static = SHARED / "citybench" / "static" / "SensorRepository.nt"
    if not static.exists():
        print(f"error: {static} not found (set LINKSTREAM_SHARED to the shared directory)", file=sys.stderr)
        return 2
    py = sys.executable
    compile_package(py)
    rounds = []
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        streams = trim_streams(tmp, args.elements)
        qdir = tmp / "queries"
        qdir.mkdir()
        common: list[str] = []
        for name, text in generate(args.queries, args.seed).items():
            (qdir / f"{name}.rq").write_text(text)
            common += ["--query", str(qdir / f"{name}.rq")]
        for iri, path in streams:
            common += ["--stream", f"{iri}={path}"]
        common += ["--static", str(static), "--static", f"{REPO_IRI}={static}"]
        triples = sum(
            1 for _, p in streams for line in open(p) if line.strip() and "generatedAtTime" not in line
        )
        ls_out, or_out = tmp / "linkstream.jsonl", tmp / "oracle.jsonl"
        print(
            f"{args.queries} variant queries, {args.elements} elements x {len(streams)} streams "
            f"({triples} triples), {args.rounds} round(s)",
            flush=True,
        )
        for k in range(args.rounds):
            ls = timed(
                [py, "-m", "linkstream.cli", "replay", *common, "--out", str(ls_out), "--quiet"], "replay"
            )
            print(f"  round {k + 1}: linkstream {ls[0]:.2f} s wall, {ls[1]:.2f} s CPU", flush=True)
            ref = timed(
                [py, str(SHARED / "tools" / "oracle.py"), *common, "--out", str(or_out), "--quiet"], "oracle"
            )
            print(f"  round {k + 1}: reference  {ref[0]:.2f} s wall, {ref[1]:.2f} s CPU", flush=True)
            rounds.append(
                {
                    "linkstream_wall_s": ls[0],
                    "linkstream_cpu_s": ls[1],
                    "oracle_wall_s": ref[0],
                    "oracle_cpu_s": ref[1],
                }
            )
        cmp = subprocess.run(
            [py, str(SHARED / "tools" / "compare_results.py"), str(or_out), str(ls_out)],
            capture_output=True,
            text=True,
        )
        equal = cmp.returncode == 0
        rows = sum(1 for _ in open(ls_out))
    wall_x = statistics.median(r["oracle_wall_s"] / r["linkstream_wall_s"] for r in rounds)
    cpu_x = statistics.median(r["oracle_cpu_s"] / max(r["linkstream_cpu_s"], 1e-9) for r in rounds)
    print(
        f"LinkStream vs reference, {args.queries} queries in one process: x{wall_x:.1f} wall, "
        f"x{cpu_x:.1f} CPU (median of rounds); {rows} result lines; outputs "
        + ("EQUAL" if equal else "DIFFER:\n" + cmp.stdout[-3000:]),
        flush=True,
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "queries": args.queries,
                "elements": args.elements,
                "triples": triples,
                "rounds": rounds,
                "ratio_wall": wall_x,
                "ratio_cpu": cpu_x,
                "result_lines": rows,
                "equal": equal,
            },
            indent=1,
        )
    )
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
