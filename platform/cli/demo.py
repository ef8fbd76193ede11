"""``linkstream demo``: replay the bundled CityBench slice and show results and throughput."""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections import Counter
from pathlib import Path

STREAM_PREFIX = "http://www.insight-centre.org/dataset/SampleEventService#"
REPOSITORY_IRI = "http://127.0.0.1:9000/WebGlCity/RDF/SensorRepository.rdf"


def _find_data(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    # the repository's examples/ (this file is platform/cli/demo.py of a checkout)
    return Path(__file__).resolve().parents[2] / "examples" / "citybench"


def run_demo(args: argparse.Namespace) -> int:
    from linkstream.engine.embedded import Engine
    from linkstream.engine.replay import replay
    from linkstream.query.continuous import parse_continuous
    from linkstream.rdf.static import load_graph

    if args.rows < 0:
        print(f"error: --rows must be >= 0, got {args.rows}", file=sys.stderr)
        return 2
    data = _find_data(args.data)
    if not (data / "queries").is_dir():
        print(f"error: demo data not found under {data} (use --data)", file=sys.stderr)
        return 2
    engine = Engine()
    static = data / "static" / "SensorRepository-slice.nt"
    triples = load_graph(str(static), engine.dictionary)
    engine.add_static(None, triples)
    engine.add_static(REPOSITORY_IRI, triples)
    streams = [(STREAM_PREFIX + p.stem, str(p)) for p in sorted((data / "streams").glob("*.nq"))]
    engine.declare_streams({i for i, _ in streams})
    queries = []
    for qf in sorted((data / "queries").glob("*.rq")):
        cq = parse_continuous(qf.read_text(encoding="utf-8"), default_name=qf.stem, source=str(qf))
        queries.append(engine.register(cq))
    print(
        f"LinkStream demo: {len(queries)} continuous queries over {len(streams)} CityBench streams ({data})\n"
    )
    buf = io.StringIO()
    t0 = time.perf_counter()
    res = replay(engine, queries, streams, buf, log=lambda m: print(m, file=sys.stderr))
    wall = time.perf_counter() - t0
    rows = [json.loads(line) for line in buf.getvalue().splitlines()]
    per_query: dict[str, list[dict]] = {}
    for r in rows:
        per_query.setdefault(r["query"], []).append(r)
    for q in queries:
        got = per_query.get(q.name, [])
        reports = Counter(r["t"] for r in got)
        print(
            f"== {q.name} ({q.cq.dialect}, {q.cq.form}): {q.stats.reports} reports, {len(got)} rows, "
            f"{len(reports)} non-empty reports"
        )
        for r in got[: args.rows]:
            print("   ", json.dumps(r, ensure_ascii=False))
    lat = sorted(x for q in queries for x in q.stats.latencies)
    p50 = lat[len(lat) // 2] * 1e3 if lat else 0.0
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3 if lat else 0.0
    print(
        f"\nreplayed {res.triples} triples ({res.elements} elements) in {wall:.3f}s: "
        f"{res.triples / wall:,.0f} triples/s through {len(queries)} queries; "
        f"report latency p50 {p50:.3f} ms, p99 {p99:.3f} ms; {res.rows} result rows"
    )
    return 0
