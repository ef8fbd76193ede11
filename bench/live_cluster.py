#!/usr/bin/env python3
"""The live service under load: embedded ``run`` vs ``run --zk`` with 1, 2, 3 containers.

For each configuration, in the same run (one ZooKeeper started here for the clusters):

* **registration rate**: ``--queries`` queries from the CityBench templates of
  ``tests/engine/test_sharing.py`` (``generate``), registered over HTTP in JSON-array
  batches of 100 (queries/s, wall clock);
* **push rate**: the first ``--elements`` elements of the two traffic streams the
  queries read, pushed as timestamped N-Quads bodies of ``--batch`` elements each, then
  one element per request (N-Triples with ``?t=``): accepted triples/s;
* **push-to-result latency**: elements pushed at a steady ``--rate`` elements/s (both
  streams in lock step), a JSONL subscriber on one query; for each report time ``c``, the
  time from the push that moved the watermark past ``c`` to the arrival of its first
  result line (p50 / p99, ms).

The cluster runs one coordinator (``run --zk``, the leader: no forwarding hop); the
queries go through its API like any client's.  Raw figures go to
``bench/results/live_cluster.json``.

``--register-only`` measures registration alone (1,000 and 10,000 queries by default,
JSON-array batches of ``--register-batch``), embedded and on the clusters, and prints the
cluster's rate as a ratio of embedded ``run``'s.  ``--baseline-tree DIR`` adds, in the
same run, a cluster whose processes run an older tree (``git archive <commit> platform
infra | tar -x -C DIR``): the before/after of a change.

    python bench/live_cluster.py [--queries 1000] [--containers 1 2 3] [--quick]
    python bench/live_cluster.py --register-only [--queries 1000 10000] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
SES = "http://www.insight-centre.org/dataset/SampleEventService#"
STREAMS = [SES + "AarhusTrafficData182955", SES + "AarhusTrafficData158505", SES + "AarhusTrafficData192707"]
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"


def pct(xs: list[float], q: float) -> float:
    if not xs:
        return float("nan")
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]


def read_elements(n: int) -> dict[str, list[tuple[int, str, str]]]:
    """Per stream: ``(t, N-Quads text with its timestamp, N-Triples text)`` of the first ``n``."""
    from tests.api.corpus import _split_elements

    out = {}
    for iri in STREAMS:
        stem = iri.rsplit("#", 1)[1]
        lines, k = [], 0
        with open(SHARED / "citybench" / "streams" / f"{stem}.nq", encoding="utf-8") as f:
            for line in f:
                if "generatedAtTime" in line:
                    k += 1
                    if k > n:
                        break
                lines.append(line)
        out[iri] = [(el.t, el.nquads, el.ntriples) for el in _split_elements(iri, "".join(lines))]
    return out


def queries(n: int) -> list[dict[str, str]]:
    from tests.engine.test_sharing import generate

    return [{"query": text, "name": name} for name, text in generate(n).items()]


def register_all(http, url: str, qs: list[dict[str, str]], batch: int = 100) -> float:
    t0 = time.perf_counter()
    i = 0
    while i < len(qs):
        part = qs[i : i + batch]
        r = http.post(url + "/queries", json=part, timeout=600)
        if r.status_code == 201:
            i += len(part)
            continue
        body = r.json()  # a batch stops at its first failure: retry from there (503: busy compiling)
        assert r.status_code in (429, 503), r.text[:500]
        i += int(body.get("index", 0))  # compiled first: busy compiling means nothing registered
        time.sleep(0.05)
    return time.perf_counter() - t0


def push_batches(http, url: str, els: dict, batch: int, shift: int) -> tuple[float, int]:
    """Pushes every element (per stream, ``batch`` per request, with their own timestamps)."""

    triples = 0
    bodies = []
    for iri, rows in els.items():
        for i in range(0, len(rows), batch):
            part = rows[i : i + batch]
            bodies.append((iri, "".join(nq for _, nq, _ in part)))
            triples += sum(nt.count("\n") for _, _, nt in part)
    t0 = time.perf_counter()
    for iri, body in bodies:
        r = http.post(
            url + "/streams/" + quote(iri, safe=""),
            content=body,
            headers={"content-type": "application/n-quads"},
        )
        assert r.status_code == 202, r.text[:300]
    return time.perf_counter() - t0, triples


def push_single(http, url: str, els: dict, shift: int, n: int) -> tuple[float, int]:
    rows = [(t + shift, iri, nt) for iri, rr in els.items() for t, _, nt in rr[:n]]
    rows.sort()
    triples = sum(nt.count("\n") for _, _, nt in rows)
    t0 = time.perf_counter()
    for t, iri, nt in rows:
        r = http.post(
            url + "/streams/" + quote(iri, safe=""),
            params={"t": str(t)},
            content=nt,
            headers={"content-type": "application/n-triples"},
        )
        assert r.status_code == 202, r.text[:300]
    return time.perf_counter() - t0, triples


def latency(http, url: str, els: dict, query: str, rate: float, shift: int, n: int) -> list[float]:
    """Steady pushes (both streams in lock step, ``rate`` elements/s); ms from the push that
    passed each report time to the first line of that report at a JSONL subscriber."""
    import httpx

    arrivals: dict[int, float] = {}
    stop = threading.Event()

    def listen() -> None:
        with httpx.stream(
            "GET",
            url + "/queries/" + quote(query, safe="") + "/results.jsonl",
            timeout=httpx.Timeout(10, read=None),
        ) as r:
            for line in r.iter_lines():
                if stop.is_set():
                    return
                if line.strip():
                    c = json.loads(line)["t"]
                    arrivals.setdefault(c, time.perf_counter())

    th = threading.Thread(target=listen, daemon=True)
    th.start()
    time.sleep(0.5)
    per = [els[s] for s in STREAMS]
    passed: list[tuple[int, float]] = []  # (min watermark after the push, wall time)
    period = len(STREAMS) / rate
    nxt = time.perf_counter()
    for i in range(min(n, *(len(r) for r in per))):
        for rows, iri in zip(per, STREAMS):
            t, _, nt = rows[i]
            r = http.post(
                url + "/streams/" + quote(iri, safe=""),
                params={"t": str(t + shift)},
                content=nt,
                headers={"content-type": "application/n-triples"},
            )
            assert r.status_code == 202, r.text[:300]
        passed.append((min(r[i][0] for r in per) + shift, time.perf_counter()))
        nxt += period
        time.sleep(max(0.0, nxt - time.perf_counter()))
    time.sleep(3.0)
    stop.set()
    out = []
    for c, at in sorted(arrivals.items()):
        # the report at c fires once every stream passed c: the first push whose watermark >= c
        t_push = next((w for m, w in passed if m >= c), None)
        if t_push is not None and at >= t_push:
            out.append((at - t_push) * 1e3)
    return out


def wait_running(http, url: str, n: int, timeout: float) -> float:
    """Seconds until ``n`` queries say ``running`` (placed and held by a container), or nan."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        qs = http.get(url + "/queries").json()["queries"]
        if sum(1 for q in qs if q.get("state", "running") == "running") >= n:
            return time.perf_counter() - t0
        time.sleep(0.5)
    return float("nan")


def run_config(label: str, url: str, args: argparse.Namespace, els: dict, qs: list[dict[str, str]]) -> dict:
    import httpx

    res: dict = {"config": label}
    with httpx.Client(timeout=600) as http:
        res["register_s"] = register_all(http, url, qs, args.register_batch)
        res["queries"] = len(qs)
        res["register_qps"] = len(qs) / res["register_s"]
        if args.register_only:
            res["running_s"] = wait_running(http, url, len(qs), 300.0)
            ratio = (
                ""
                if args.embedded_qps is None
                else f" ({res['register_qps'] / args.embedded_qps:.2f}x embedded)"
            )
            print(
                f"{label:>22}: {len(qs):6d} queries registered in {res['register_s']:6.2f} s ="
                f" {res['register_qps']:7.1f} q/s{ratio}; all running {res['running_s']:.1f} s later",
                flush=True,
            )
            return res
        span = max(t for rows in els.values() for t, _, _ in rows) - min(
            t for rows in els.values() for t, _, _ in rows
        )
        shift = 0
        dt, tr = push_batches(http, url, els, args.batch, shift)
        res["batch_push_s"], res["batch_triples"] = dt, tr
        res["batch_triples_per_s"] = tr / dt
        shift += span + 10_000
        dt, tr = push_single(http, url, els, shift, args.single)
        res["single_push_s"], res["single_triples"] = dt, tr
        res["single_triples_per_s"] = tr / dt
        res["single_requests_per_s"] = sum(min(args.single, len(r)) for r in els.values()) / dt
        # drain: the report times of the pushes so far fire before the latency run starts
        last = max(t for rows in els.values() for t, _, _ in rows) + shift + 5_000
        http.post(url + "/watermark", params={"t": str(last)}, timeout=600)
        time.sleep(1.0)
        shift += span + 10_000
        lat = latency(http, url, els, qs[0]["name"], args.rate, shift, args.latency_elements)
        res["latency_ms"] = lat
        res["latency_p50_ms"], res["latency_p99_ms"] = pct(lat, 0.5), pct(lat, 0.99)
    print(
        f"{label:>12}: register {res['register_qps']:7.1f} q/s | push batch {res['batch_triples_per_s']:9.0f} tr/s"
        f" | single {res['single_triples_per_s']:7.0f} tr/s ({res['single_requests_per_s']:.0f} req/s)"
        f" | latency p50 {res['latency_p50_ms']:.1f} ms p99 {res['latency_p99_ms']:.1f} ms ({len(lat)} reports)",
        flush=True,
    )
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, nargs="+", default=None)
    ap.add_argument("--containers", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--elements", type=int, default=300, help="elements per stream pushed in batches")
    ap.add_argument("--batch", type=int, default=100, help="elements per request in the batch push")
    ap.add_argument("--single", type=int, default=100, help="elements per stream pushed one per request")
    ap.add_argument("--rate", type=float, default=20.0, help="elements/s of the latency run")
    ap.add_argument("--latency-elements", type=int, default=60, help="elements per stream of the latency run")
    ap.add_argument("--quick", action="store_true", help="100 queries, 1 container")
    ap.add_argument("--register-only", action="store_true", help="registration rate only (1k and 10k)")
    ap.add_argument("--register-batch", type=int, default=None, help="queries per POST /queries batch")
    ap.add_argument(
        "--baseline-tree",
        default=None,
        help="a directory holding an older platform/ tree: its cluster is measured in the same run",
    )
    ap.add_argument("--tag", default="", help=argparse.SUPPRESS)
    ap.add_argument("--given-embedded-qps", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "live_cluster.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.queries, args.containers, args.elements = [100], [1], 100
    if args.queries is None:
        args.queries = [1000, 10000] if args.register_only else [1000]
    if args.register_batch is None:
        args.register_batch = 1000 if args.register_only else 100
    args.embedded_qps = None
    from linkstream.api.app import create_app
    from linkstream.api.server import BackgroundServer, build_live
    from linkstream.cluster.localcluster import LocalCluster
    from tests.engine.test_sharing import REPO as REPO_GRAPH

    static = str(SHARED / "citybench" / "static" / "SensorRepository.nt")
    els = {} if args.register_only else read_elements(max(args.elements, args.single, args.latency_elements))
    results = []
    for n in args.queries:
        qs = queries(n)
        args.embedded_qps = args.given_embedded_qps
        if args.given_embedded_qps is None:
            live = build_live([(None, static), (REPO_GRAPH, static)], idle_ms=None)
            server = BackgroundServer(create_app(live), on_shutdown=live.close).start()
            try:
                res = run_config("embedded", server.url, args, els, qs)
                args.embedded_qps = res["register_qps"]
                results.append({**res, "n": n})
            finally:
                server.stop()
            save(args, results)
        for k in args.containers:
            label = f"{k} container{'s' if k > 1 else ''}" + (f" ({args.tag})" if args.tag else "")
            with tempfile.TemporaryDirectory(prefix="ls-bench-") as tmp:
                cluster = LocalCluster(Path(tmp) / "cluster", session_timeout=4.0, capacity=max(16, 2 * n))
                try:
                    cluster.start(k, coordinators=0)
                    cluster.start_coordinator(
                        ["--idle-ms", "0", "--static", static, "--static", f"{REPO_GRAPH}={static}"]
                    )
                    url = next(iter(cluster.api_urls(timeout=60).values()))
                    import httpx

                    deadline = time.monotonic() + 60
                    while httpx.get(url + "/status", timeout=10).json().get("role") != "leader":
                        assert time.monotonic() < deadline, "no leader"
                        time.sleep(0.2)
                    results.append({**run_config(label, url, args, els, qs), "n": n, "tag": args.tag})
                finally:
                    cluster.stop()
                save(args, results)
            if args.baseline_tree:  # the same, every process (this script too) on the older tree
                results += baseline(args, n, k)
                save(args, results)
    save(args, results)
    print(f"raw figures: {args.out}")
    return 0


def baseline(args: argparse.Namespace, n: int, k: int) -> list[dict]:
    """Registration on a cluster of ``k`` containers running the older tree (a child process of
    this script under that tree, so its local cluster starts the older processes too)."""
    import subprocess

    out = Path(tempfile.mkdtemp(prefix="ls-baseline-out-")) / "baseline.json"
    env = dict(os.environ, PYTHONPATH=baseline_path(args.baseline_tree))
    cmd = [sys.executable, __file__, "--register-only", "--queries", str(n), "--containers", str(k)]
    cmd += ["--register-batch", str(args.register_batch), "--tag", "baseline tree", "--out", str(out)]
    cmd += ["--given-embedded-qps", str(args.embedded_qps)]
    proc = subprocess.run(cmd, env=env, check=False)
    if proc.returncode != 0 or not out.exists():
        print(f"baseline tree: the run failed (exit {proc.returncode})", flush=True)
        return []
    return json.loads(out.read_text(encoding="utf-8"))["results"]


def baseline_path(tree: str) -> str:
    """A PYTHONPATH entry under which ``linkstream`` is ``tree/platform`` (an older checkout)."""
    root = Path(tree).resolve()
    src = root / "platform" if (root / "platform").is_dir() else root
    link_dir = Path(tempfile.mkdtemp(prefix="ls-baseline-"))
    (link_dir / "linkstream").symlink_to(src, target_is_directory=True)
    return str(link_dir)


def save(args: argparse.Namespace, results: list[dict]) -> None:
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump({"args": vars(args), "results": results}, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
