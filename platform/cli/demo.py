"""``linkstream demo``: replay the bundled CityBench slice and show results and throughput.

``demo --cluster N`` (``make cluster-demo``) replays it through the live API of a local
cluster instead: ZooKeeper, two coordinators serving the HTTP API and N operator
containers, as a client would (one registration batch, pushes over HTTP, result streams).
"""

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
    cluster = getattr(args, "cluster", None)
    if cluster is not None and cluster < 1:
        print(f"error: --cluster must be >= 1, got {cluster}", file=sys.stderr)
        return 2
    data = _find_data(args.data)
    if not (data / "queries").is_dir():
        print(f"error: demo data not found under {data} (use --data)", file=sys.stderr)
        return 2
    if cluster is not None:
        return _cluster_demo(args, data, cluster)
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
    _print_results(queries, buf.getvalue(), args.rows)
    lat = sorted(x for q in queries for x in q.stats.latencies)
    p50 = lat[len(lat) // 2] * 1e3 if lat else 0.0
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] * 1e3 if lat else 0.0
    print(
        f"\nreplayed {res.triples} triples ({res.elements} elements) in {wall:.3f}s: "
        f"{res.triples / wall:,.0f} triples/s through {len(queries)} queries; "
        f"report latency p50 {p50:.3f} ms, p99 {p99:.3f} ms; {res.rows} result rows"
    )
    return 0


def _print_results(queries: list, text: str, rows: int) -> None:
    """Per query: its report and row counts and its first ``rows`` result lines."""
    per_query: dict[str, list[dict]] = {}
    for line in text.splitlines():
        r = json.loads(line)
        per_query.setdefault(r["query"], []).append(r)
    for q in queries:
        got = per_query.get(q.name, [])
        reports = Counter(r["t"] for r in got)
        print(
            f"== {q.name} ({q.cq.dialect}, {q.cq.form}): {q.stats.reports} reports, {len(got)} rows, "
            f"{len(reports)} non-empty reports"
        )
        for r in got[:rows]:
            print("   ", json.dumps(r, ensure_ascii=False))


def _cluster_demo(args: argparse.Namespace, data: Path, containers: int) -> int:
    """The demo through the HTTP API of a throw-away local cluster (see the module docstring)."""
    import shutil

    from linkstream.api.client import Client
    from linkstream.cli.livereplay import start_service
    from linkstream.cluster.apireplay import ApiReplayError, replay_through_api
    from linkstream.engine.embedded import Engine
    from linkstream.query.continuous import parse_continuous

    static = str((data / "static" / "SensorRepository-slice.nt").resolve())
    streams = [(STREAM_PREFIX + p.stem, str(p)) for p in sorted((data / "streams").glob("*.nq"))]
    scratch = Engine(log_fn=lambda _msg: None)
    queries = []
    for qf in sorted((data / "queries").glob("*.rq")):
        cq = parse_continuous(qf.read_text(encoding="utf-8"), default_name=qf.stem, source=str(qf))
        queries.append(scratch.register(cq))
    print(
        f"LinkStream cluster demo: starting ZooKeeper, 2 coordinators serving the HTTP API and "
        f"{containers} operator container(s)...",
        flush=True,
    )
    t0 = time.perf_counter()
    started = start_service(
        containers, ["--static", static, "--static", f"{REPOSITORY_IRI}={static}"], coordinators=2
    )
    if isinstance(started, str):
        print(f"error: {started}", file=sys.stderr)
        return 1
    cluster, url = started
    ok = False
    try:
        print(f"cluster up in {time.perf_counter() - t0:.1f}s; API at {url} (admin token in {cluster.dir})")
        print(
            f"{len(queries)} continuous queries registered in one POST /queries, {len(streams)} CityBench "
            f"streams pushed with POST /streams/{{iri}}, results read from GET /queries/{{name}}/results.jsonl\n"
        )
        buf = io.StringIO()
        with Client(url, token=cluster.api_token) as client:
            result = replay_through_api(
                client,
                queries,
                streams,
                buf,
                token=cluster.api_token,
                log=lambda m: print(m, file=sys.stderr),
            )
        ok = True
    except ApiReplayError as e:
        print(f"error: {e} (logs in {cluster.dir})", file=sys.stderr)
        return 1
    finally:
        cluster.stop()
        if ok:
            shutil.rmtree(cluster.dir, ignore_errors=True)
    _print_results(queries, buf.getvalue(), args.rows)
    res = result.replay
    print(
        f"\npushed {res.triples} triples ({res.elements} elements) through the API of {len(result.containers)} "
        f"container(s) and read every result back in {res.seconds:.3f}s: {res.triples / res.seconds:,.0f} "
        f"triples/s through {len(queries)} queries; {result.requests} HTTP requests, {res.rows} result rows"
    )
    return 0
