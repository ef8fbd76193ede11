#!/usr/bin/env python3
"""Thousands of concurrent queries: shared vs unshared operators, in one run.

Registers N queries generated from CityBench templates (CQELS-QL / C-SPARQL / RSP-QL
variants of Q1 (two-stream join), Q7 (filter), Q12 (aggregate) and Q11 (ASK) over three
traffic streams, with other sensors, constants and window sizes -- the generator of
``tests/engine/test_sharing.py``) and replays the first ``--elements`` elements of each
CityBench traffic stream through all of them, once with operator sharing and once with
every query on its own operators (the baseline).  Every configuration runs in a fresh
process, so resident memory and timings of one do not leak into the next.

Printed per configuration:

* ``reg cpu s``: CPU seconds of parsing + planning + registering all N queries (the
  wall-clock figure is in the JSON);
* ``in tr/s``: sustained input triples per second of replay (wall clock; ``cpu tr/s`` uses
  the process's CPU time, which is what to compare on a loaded machine);
* ``rows/s``: result rows written per second of replay (rendered JSON lines);
* ``tick p50/p99 ms``: result latency: from a report time's trigger until the result lines
  of every query due then are rendered;
* ``q p50/p99 ms``: evaluation time of one query's report (its own share of a tick);
* RSS after registration and at the end;
* ``x rt``: stream seconds replayed per CPU second -- how many times faster than the
  CityBench streams' real rate (one element per second per stream) the engine keeps up.

At CityBench's density every report time brings ~57 new triples but thousands of
reports (RStream repeats whole results), so this workload is bound by reports and
result rows, not by input triples: ``rows/s`` and ``x rt`` are the figures to compare.

The unshared baseline costs time proportional to N; above ``--unshared-max`` queries it
runs on the first ``--unshared-max`` queries and its throughput is scaled by the ratio
(marked ``~``), which is exact for operators that share nothing.  Raw figures go to
``bench/results/many_queries.json``.

    python bench/many_queries.py [--quick] [--sizes 1000 5000 10000] [--elements 60]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def trim_streams(tmp: Path, elements: int, span: list[float] | None = None) -> list[tuple[str, str]]:
    """The first ``elements`` elements of each traffic stream; ``span`` gets the stream
    time they cover (first and last element time, epoch seconds)."""
    from datetime import datetime

    from tests.engine.test_sharing import SES, TRAFFIC

    out = []
    for s in TRAFFIC:
        lines, els = [], 0
        with open(SHARED / "citybench" / "streams" / f"{s}.nq") as f:
            for line in f:
                if "generatedAtTime" in line:
                    els += 1
                    if els > elements:
                        break
                    if span is not None:
                        stamp = line.split('"')[1].replace("Z", "+00:00")
                        t = datetime.fromisoformat(stamp).timestamp()
                        span[:] = [min(span[0], t), max(span[1], t)] if span else [t, t]
                lines.append(line)
        p = tmp / f"{s}.nq"
        p.write_text("".join(lines))
        out.append((SES + s, str(p)))
    return out


class _CountingSink:
    """A text sink that counts what is written to it."""

    def __init__(self) -> None:
        self.chars = 0

    def write(self, s: str) -> int:
        self.chars += len(s)
        return len(s)


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run_one(n: int, share: bool, elements: int) -> dict:
    """One configuration, in this process: register ``n`` queries and replay."""
    from linkstream.engine.embedded import Engine
    from linkstream.engine.replay import replay
    from linkstream.operators.mjoin import MJoinOperator
    from linkstream.query.continuous import parse_continuous
    from linkstream.rdf.static import load_graph
    from tests.engine.test_sharing import REPO as REPO_IRI
    from tests.engine.test_sharing import generate

    texts = generate(n)
    with tempfile.TemporaryDirectory() as tmp:
        span: list[float] = []
        streams = trim_streams(Path(tmp), elements, span)
        eng = Engine()
        eng.share = share
        tr = load_graph(str(SHARED / "citybench" / "static" / "SensorRepository.nt"), eng.dictionary)
        eng.add_static(None, tr)
        eng.add_static(REPO_IRI, tr)
        t0, c0 = time.perf_counter(), time.process_time()
        rqs = [eng.register(parse_continuous(text, default_name=name)) for name, text in texts.items()]
        reg_s, reg_cpu = time.perf_counter() - t0, time.process_time() - c0
        mem0 = rss_mb()
        ticks: list[float] = []
        inner = eng.tick

        def timed_tick(c, names, **kw):
            t = time.perf_counter()
            out = inner(c, names, **kw)
            ticks.append(time.perf_counter() - t)
            return out

        eng.tick = timed_tick  # type: ignore[method-assign]
        out = _CountingSink()  # the lines are produced and counted, not kept (RSS = engine)
        cpu0 = time.process_time()
        res = replay(eng, rqs, streams, out)
        cpu = time.process_time() - cpu0
    lat = [x for q in rqs for x in q.stats.latencies]
    ops = eng.operator_count() if share else sum(len(q.ops) for q in rqs)
    joins = sum(
        isinstance(op, MJoinOperator)
        for op in (eng.operators.values() if share else (o for q in rqs for o in q.ops))
    )
    return {
        "queries": n,
        "shared": share,
        "elements_per_stream": elements,
        "register_s": reg_s,
        "register_cpu_s": reg_cpu,
        "replay_s": res.seconds,
        "replay_cpu_s": cpu,
        "input_triples": res.triples,
        "triples_per_s": res.triples / res.seconds if res.seconds else 0.0,
        "triples_per_cpu_s": res.triples / cpu if cpu else 0.0,
        # how many times faster than CityBench's own (real-time) rate the replay kept up
        "stream_seconds": span[1] - span[0] if span else 0.0,
        "x_real_time_cpu": (span[1] - span[0]) / cpu if span and cpu else 0.0,
        "reports_per_cpu_s": sum(q.stats.reports for q in rqs) / cpu if cpu else 0.0,
        "result_rows": res.rows,
        "rows_per_s": res.rows / res.seconds if res.seconds else 0.0,
        "reports": sum(q.stats.reports for q in rqs),
        "ticks": len(ticks),
        "tick_ms_p50": 1e3 * pct(ticks, 0.5),
        "tick_ms_p99": 1e3 * pct(ticks, 0.99),
        "query_ms_p50": 1e3 * pct(lat, 0.5),
        "query_ms_p99": 1e3 * pct(lat, 0.99),
        "operators": ops,
        "joins": joins,
        "rss_mb_after_register": mem0,
        "rss_mb_end": rss_mb(),
        "output_chars": out.chars,
    }


def spawn(n: int, share: bool, elements: int) -> dict:
    cmd = [sys.executable, __file__, "--one", str(n), "--mode", "shared" if share else "unshared"]
    cmd += ["--elements", str(elements)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


HEAD = (
    f"{'queries':>8} {'mode':>9} {'reg cpu s':>10} {'in tr/s':>9} {'cpu tr/s':>9} {'rows/s':>9} "
    f"{'tick p50':>9} {'tick p99':>9} {'q p50':>7} {'q p99':>7} {'joins':>6} {'RSS MB':>7} {'x rt':>6}"
)


def show(r: dict, scaled: bool = False) -> str:
    mark = "~" if scaled else " "
    return (
        f"{r['queries']:>8} {'shared' if r['shared'] else 'unshared':>9} {r.get('register_cpu_s', r['register_s']):>10.1f} "
        f"{mark}{r['triples_per_s']:>8,.0f} {mark}{r['triples_per_cpu_s']:>8,.0f} {mark}{r['rows_per_s']:>8,.0f} "
        f"{r['tick_ms_p50']:>9.1f} {r['tick_ms_p99']:>9.1f} {r['query_ms_p50']:>7.3f} {r['query_ms_p99']:>7.3f} "
        f"{r['joins']:>6} {r['rss_mb_end']:>7.0f} {mark}{r.get('x_real_time_cpu', 0.0):>5.1f}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--sizes", type=int, nargs="+", default=None, help="query counts (default 1000 5000 10000)"
    )
    ap.add_argument("--elements", type=int, default=None, help="stream elements per stream (default 60)")
    ap.add_argument("--quick", action="store_true", help="1000 queries, 30 elements per stream (~1-2 min)")
    ap.add_argument("--no-unshared", action="store_true", help="skip the unshared baseline")
    ap.add_argument("--unshared-max", type=int, default=1000, help="largest unshared run (default 1000)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "many_queries.json"))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--mode", choices=["shared", "unshared"], default="shared", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if not (SHARED / "citybench" / "streams").is_dir():
        print(f"error: CityBench corpus not found under {SHARED} (set LINKSTREAM_SHARED)", file=sys.stderr)
        return 2
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.mode == "shared", args.elements or 60)))
        return 0
    sizes = args.sizes or ([1000] if args.quick else [1000, 5000, 10000])
    elements = args.elements or (30 if args.quick else 60)
    rows = []
    print(f"CityBench templates over 3 traffic streams, {elements} elements each; one process per run")
    print(HEAD, flush=True)
    for n in sizes:
        s = spawn(n, True, elements)
        rows.append(s)
        print(show(s), flush=True)
        if args.no_unshared:
            continue
        m = min(n, args.unshared_max)
        u = spawn(m, False, elements)
        u["measured_queries"] = m
        if (
            m != n
        ):  # every query on its own operators: time is linear in the query count (rows and reports too, so their rates stay)
            f = m / n
            for k in (
                "triples_per_s",
                "triples_per_cpu_s",
                "rows_per_s",
                "x_real_time_cpu",
                "reports_per_cpu_s",
            ):
                u[k] *= f
            u["scaled_from"] = m
            u["queries"] = n
        rows.append(u)
        print(show(u, scaled=m != n), flush=True)
        print(
            f"{'':>8} sharing speed-up x{s['triples_per_cpu_s'] / max(u['triples_per_cpu_s'], 1e-9):.1f} "
            f"(CPU time){' -- unshared measured on %d queries and scaled' % m if m != n else ''}",
            flush=True,
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(rows, indent=1))
    print(f"raw figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
