#!/usr/bin/env python3
"""Thousands of concurrent queries: shared vs unshared operators, in one run.

Registers N queries generated from CityBench templates (CQELS-QL / C-SPARQL / RSP-QL
variants of Q1, Q7, Q12, Q11 over three traffic streams, with other constants and window
sizes) and replays the CityBench traffic streams through all of them, once with operator
sharing (signature hash-consing, predicate-sliced pattern matching) and once with every
query on its own operators.  Prints sustained input triples/s, report latency p50/p99
(one tick = every query due at that time) and resident memory; writes raw figures to
``bench/results/many_queries.json``.

    python bench/many_queries.py [--sizes 1000 5000 10000] [--elements 120] [--no-unshared]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()

from linkstream.engine.embedded import Engine  # noqa: E402
from linkstream.engine.replay import replay  # noqa: E402
from linkstream.operators.mjoin import MJoinOperator  # noqa: E402
from linkstream.query.continuous import parse_continuous  # noqa: E402
from linkstream.rdf.static import load_graph  # noqa: E402
from tests.engine.test_sharing import REPO as REPO_IRI  # noqa: E402
from tests.engine.test_sharing import SES, TRAFFIC, generate  # noqa: E402


def rss_mb() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def trim_streams(tmp: Path, elements: int) -> list[tuple[str, str]]:
    out = []
    for s in TRAFFIC:
        lines, els = [], 0
        for line in open(SHARED / "citybench" / "streams" / f"{s}.nq"):
            if "generatedAtTime" in line:
                els += 1
                if els > elements:
                    break
            lines.append(line)
        p = tmp / f"{s}.nq"
        p.write_text("".join(lines))
        out.append((SES + s, str(p)))
    return out


def run(n: int, share: bool, streams, static: Path, parsed: dict) -> dict:
    eng = Engine()
    eng.share = share
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO_IRI, tr)
    t0 = time.perf_counter()
    rqs = [eng.register(cq) for cq in parsed.values()]
    reg_s = time.perf_counter() - t0
    mem0 = rss_mb()
    ticks: list[float] = []
    last = {"c": None, "t": time.perf_counter()}

    def sink(q, c, lines):
        if last["c"] != c:
            now = time.perf_counter()
            ticks.append(now - last["t"])
            last["c"], last["t"] = c, now

    res = replay(eng, rqs, streams, io.StringIO(), sink=sink)
    lat = sorted(q.stats.eval_seconds / max(q.stats.reports, 1) for q in rqs)
    joins = sum(isinstance(op, MJoinOperator) for op in eng.operators.values())
    return {
        "queries": n,
        "shared": share,
        "register_s": reg_s,
        "replay_s": res.seconds,
        "input_triples": res.triples,
        "triples_per_s": res.triples / res.seconds if res.seconds else 0.0,
        "result_rows": res.rows,
        "latency_ms_p50": 1e3 * lat[len(lat) // 2] if lat else 0.0,
        "latency_ms_p99": 1e3 * lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else 0.0,
        "operators": eng.operator_count() if share else sum(len(q.ops) for q in rqs),
        "joins": joins if share else sum(isinstance(op, MJoinOperator) for q in rqs for op in q.ops),
        "rss_mb_after_register": mem0,
        "rss_mb_end": rss_mb(),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 10000])
    ap.add_argument("--elements", type=int, default=120, help="stream elements per stream (default 120)")
    ap.add_argument("--no-unshared", action="store_true", help="skip the unshared baseline")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "many_queries.json"))
    args = ap.parse_args(argv)
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        streams = trim_streams(Path(tmp), args.elements)
        static = SHARED / "citybench" / "static" / "SensorRepository.nt"
        print(
            f"{'queries':>8} {'mode':>9} {'register s':>11} {'triples/s':>11} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'joins':>7} {'RSS MB':>8}"
        )
        for n in args.sizes:
            t0 = time.perf_counter()
            texts = generate(n)
            parsed = {name: parse_continuous(text, default_name=name) for name, text in texts.items()}
            parse_s = time.perf_counter() - t0
            for share in [True] if args.no_unshared else [True, False]:
                r = run(n, share, streams, static, parsed)
                r["parse_s"] = parse_s
                rows.append(r)
                print(
                    f"{n:>8} {'shared' if share else 'unshared':>9} {r['register_s']:>11.2f} "
                    f"{r['triples_per_s']:>11,.0f} {r['latency_ms_p50']:>8.3f} {r['latency_ms_p99']:>8.3f} "
                    f"{r['joins']:>7} {r['rss_mb_end']:>8.0f}",
                    flush=True,
                )
            if not args.no_unshared:
                s, u = rows[-2], rows[-1]
                print(f"{'':>8} sharing speed-up x{s['triples_per_s'] / max(u['triples_per_s'], 1e-9):.1f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))
    print(f"raw figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
