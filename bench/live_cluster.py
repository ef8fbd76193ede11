#!/usr/bin/env python3
"""The live service under load: embedded ``run`` vs ``run --zk`` with 1, 2, 3 containers.

For each configuration, in the same run (one ZooKeeper started here for the clusters):

* **registration rate**: for each ``--queries`` count (1,000 and 10,000 by default), a fresh
  deployment registers that many queries from the CityBench templates of
  ``tests/engine/test_sharing.py`` (``generate``) over HTTP in JSON-array batches of
  ``--register-batch`` (queries/s, wall clock; then the seconds until all are ``running``);
* **push rate** (on the deployment holding ``--push-queries`` queries, 1,000 by default):
  the first ``--elements`` elements of the three traffic streams the queries read, pushed
  as timestamped N-Quads bodies of ``--batch`` elements by two concurrent clients (one per
  stream group, as the issue's end-to-end test does), then one element per request
  (N-Triples with ``?t=``): accepted triples/s, and the CPU milliseconds per 1,000 triples
  each coordinator spent on the batch push (embedded: the bench process, its push clients
  included); then ``POST /watermark`` past them, which
  returns once every report up to it fired: "all reports out" is the triples over the
  seconds from the first push to that answer (what the queries keep up with);
* **CPU until all reports out**: per process (leader, each container), from the first push
  to the watermark's answer -- the containers' sum is what a split costs in all, the
  busiest one the critical path when each container has a core of its own (on a shared
  or small machine the wall-clock ratios between configurations are mostly its load);
* **push-to-result latency**: elements pushed at a steady ``--rate`` elements/s (the streams
  in lock step), a JSONL subscriber on one query; for each report time ``c``, the time from
  the push that moved the watermark past ``c`` to the arrival of its first result line
  (p50 / p99, ms).

The cluster runs ``--coordinators`` coordinators (``run --zk``; 1 by default: the leader, no
forwarding hop).  With 2, stream group ``i`` is pushed to coordinator ``i`` (the leader
first), so the second group goes to the standby (with per-stream owners, to whichever
coordinator owns the stream).  ``--profile S`` records, from the start of the batch push,
``S`` seconds of the leader (the bench process for embedded ``run``), the standbys and
the first container with ``py-spy record --gil`` (the thread holding the GIL: where the
CPU goes) and prints each one's threads and hottest frames (``py-spy`` on ``PATH`` or
``--py-spy``; not a project dependency).  Raw figures go to
``bench/results/live_cluster.json``.

``--ingest leader direct --repeat R`` runs each cluster with a shared ``--state-dir`` (the
durable path) under each ``--ingest`` setting, alternating, ``R`` rounds: their ratios.

``--register-only`` measures registration alone, and prints the cluster's rate as a ratio of
embedded ``run``'s.  ``--baseline-tree DIR`` adds, in the same run, a cluster whose
processes run an older tree (``git archive <commit> platform infra | tar -x -C DIR``): the
before/after of a change.

    python bench/live_cluster.py [--queries 1000 10000] [--push-queries 1000] [--containers 1 2 3]
    python bench/live_cluster.py --quick
    python bench/live_cluster.py --queries 100 --containers 1 --coordinators 2 --ingest leader direct --repeat 3
    python bench/live_cluster.py --register-only [--queries 1000 10000] [--baseline-tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
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


def groups(urls: list[str]) -> list[tuple[str, list[str]]]:
    """Two stream groups (the issue's two push clients): group ``i`` goes to ``urls[i % len]``."""
    return [(urls[i % len(urls)], STREAMS[i::2]) for i in range(2)]


def post_element(http, url: str, iri: str, body: str, ctype: str, params: dict | None = None) -> None:
    """One accepted push (a 429/503 answer is retried after its Retry-After)."""
    while True:
        r = http.post(
            url + "/streams/" + quote(iri, safe=""),
            params=params,
            content=body,
            headers={"content-type": ctype},
        )
        if r.status_code == 202:
            return
        assert r.status_code in (429, 503) and not r.json().get("elements"), r.text[:300]
        time.sleep(float(r.headers.get("retry-after") or 0.1))


def push_batches(http, urls: list[str], els: dict, batch: int, shift: int) -> tuple[float, int]:
    """Pushes every element (``batch`` per request, with their own timestamps), one client
    thread per stream group."""
    import httpx

    triples = 0
    work = []
    for url, streams in groups(urls):
        bodies = []
        for iri in streams:
            rows = els[iri]
            for i in range(0, len(rows), batch):
                part = rows[i : i + batch]
                bodies.append((iri, "".join(nq for _, nq, _ in part)))
                triples += sum(nt.count("\n") for _, _, nt in part)
        work.append((url, bodies))
    errors: list[BaseException] = []

    def client(url: str, bodies: list[tuple[str, str]]) -> None:
        try:
            with httpx.Client(timeout=600) as h:
                for iri, body in bodies:
                    post_element(h, url, iri, body, "application/n-quads")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=client, args=w) for w in work]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0, triples


def push_single(http, urls: list[str], els: dict, shift: int, n: int) -> tuple[float, int]:
    """One element per request, in time order over all streams, one client."""
    where = {iri: url for url, streams in groups(urls) for iri in streams}
    rows = [(t + shift, iri, nt) for iri, rr in els.items() for t, _, nt in rr[:n]]
    rows.sort()
    triples = sum(nt.count("\n") for _, _, nt in rows)
    t0 = time.perf_counter()
    for t, iri, nt in rows:
        post_element(http, where[iri], iri, nt, "application/n-triples", {"t": str(t)})
    return time.perf_counter() - t0, triples


def latency(http, urls: list[str], els: dict, query: str, rate: float, shift: int, n: int) -> list[float]:
    """Steady pushes (both streams in lock step, ``rate`` elements/s); ms from the push that
    passed each report time to the first line of that report at a JSONL subscriber."""
    import httpx

    url = urls[0]
    where = {iri: u for u, streams in groups(urls) for iri in streams}
    arrivals: dict[int, float] = {}
    stop = threading.Event()

    def listen() -> None:
        try:
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
        except httpx.HTTPError as exc:  # the server stopped under the reader (the run is over)
            if not stop.is_set():
                print(f"latency reader: {exc}", flush=True)

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
            post_element(http, where[iri], iri, nt, "application/n-triples", {"t": str(t + shift)})
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


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_note(res: dict) -> str:
    """CPU ms per 1,000 triples of the batch push, per serving process (the shared box's
    load bends wall-clock rates; CPU per triple bends less)."""
    k = res["batch_triples"] / 1000
    mark = {res.get("leader"): " (leader)"} if len(res["batch_cpu_s"]) > 1 else {}
    return ", ".join(
        f"{name}{mark.get(name, '')} {1e3 * s / k:.1f} CPU ms/ktr"
        for name, s in sorted(res["batch_cpu_s"].items())
    )


def wait_running(http, url: str, n: int, timeout: float) -> float:
    """Seconds until ``n`` queries say ``running`` (placed and held by a container), or nan."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        qs = http.get(url + "/queries").json()["queries"]
        if sum(1 for q in qs if q.get("state", "running") == "running") >= n:
            return time.perf_counter() - t0
        time.sleep(0.5)
    return float("nan")


#: a frame of LinkStream's own code in py-spy's output (paths relative to the package)
OWN_FRAME = re.compile(
    r"\((?:api|cli|cluster|containers|engine|metrics|operators|query|rdf|scheduler|store)/"
)


def profile(args: argparse.Namespace, pid: int, label: str) -> subprocess.Popen | None:
    """Starts ``py-spy record`` of ``pid`` for ``--profile`` seconds (``None``: not asked)."""
    if not args.profile:
        return None
    spy = args.py_spy or shutil.which("py-spy")
    if not spy:
        print("--profile: py-spy not found (PATH or --py-spy)", flush=True)
        return None
    out = Path(args.out).with_name("live_cluster_profile_" + label.replace(" ", "_") + ".txt")
    cmd = [spy, "record", "--pid", str(pid), "--duration", str(args.profile), "--rate", "200"]
    # --gil: only the thread holding the GIL is sampled -- where the CPU goes, not who waits
    cmd += ["--format", "raw", "--threads", "--gil", "--nonblocking", "--output", str(out)]
    log = open(out.with_suffix(".log"), "w", encoding="utf-8")  # noqa: SIM115  # closed with the process
    return subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)


def profile_summary(proc: subprocess.Popen | None, label: str, args: argparse.Namespace) -> dict | None:
    """The leaf functions with most samples and the threads' shares, from py-spy's raw output."""
    if proc is None:
        return None
    proc.wait()
    path = Path(args.out).with_name("live_cluster_profile_" + label.replace(" ", "_") + ".txt")
    if not path.exists():
        return None
    leaves: dict[str, int] = {}
    threads: dict[str, int] = {}
    total = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        frames = stack.split(";")
        k = int(n)
        total += k
        threads[frames[0]] = threads.get(frames[0], 0) + k
        leaf = frames[-1].split(" (")[0] if frames else "?"
        if len(frames) > 1:
            # the innermost frame of our own code tells more than a builtin wait
            own = [f for f in frames[1:] if OWN_FRAME.search(f)]
            leaf = (own[-1] if own else frames[-1]).split(" (")[0] + " <- " + frames[-1].split(" (")[0]
        leaves[leaf] = leaves.get(leaf, 0) + k
    top = sorted(leaves.items(), key=lambda kv: -kv[1])[:12]
    thr = sorted(threads.items(), key=lambda kv: -kv[1])[:8]
    print(f"  profile of {label} ({total} samples, {path}):", flush=True)
    for name, k in thr:
        print(f"    thread {100 * k / max(1, total):5.1f}%  {name}", flush=True)
    for name, k in top:
        print(f"    {100 * k / max(1, total):5.1f}%  {name}", flush=True)
    return {"samples": total, "file": str(path), "threads": thr, "top": top}


def run_config(
    label: str,
    urls: list[str],
    args: argparse.Namespace,
    els: dict,
    qs: list[dict[str, str]],
    *,
    push: bool,
    pid: int,
    container_pid: int | None = None,
    serving: dict[str, int] | None = None,
    containers: dict[str, int] | None = None,
) -> dict:
    """Registers ``qs`` through ``urls[0]``; with ``push``, the push and latency runs too.
    ``serving``: the processes whose CPU seconds the batch push costs (name -> pid)."""
    import httpx

    url = urls[0]
    res: dict = {"config": label, "coordinators": len(urls), "leader_pid": pid}
    with httpx.Client(timeout=600) as http:
        res["register_s"] = register_all(http, url, qs, args.register_batch)
        res["queries"] = len(qs)
        res["register_qps"] = len(qs) / res["register_s"]
        res["running_s"] = wait_running(http, url, len(qs), 300.0)
        ratio = (
            "" if args.embedded_qps is None else f" ({res['register_qps'] / args.embedded_qps:.2f}x embedded)"
        )
        print(
            f"{label:>22}: {len(qs):6d} queries registered in {res['register_s']:6.2f} s ="
            f" {res['register_qps']:7.1f} q/s{ratio}; all running {res['running_s']:.1f} s later",
            flush=True,
        )
        if not push:
            return res
        span = max(t for rows in els.values() for t, _, _ in rows) - min(
            t for rows in els.values() for t, _, _ in rows
        )
        shift = 0
        spy = profile(args, pid, label)
        spy_c = None if container_pid is None else profile(args, container_pid, label + " container")
        others = {nm: p for nm, p in (serving or {}).items() if p != pid}  # the standbys
        spy_o = {nm: profile(args, p, f"{label} standby {nm}") for nm, p in others.items()}
        procs = serving or {"embedded": os.getpid()}
        res["leader"] = next((nm for nm, p in procs.items() if p == pid), None)
        cpu0 = {name: cpu_seconds(p) for name, p in procs.items()}
        every = {**procs, **(containers or {})}  # CPU from the first push until all reports are out
        every0 = {name: cpu_seconds(p) for name, p in every.items()}
        dt, tr = push_batches(http, urls, els, args.batch, shift)
        res["batch_cpu_s"] = {name: cpu_seconds(p) - cpu0[name] for name, p in procs.items()}
        res["batch_push_s"], res["batch_triples"] = dt, tr
        res["batch_triples_per_s"] = tr / dt
        shift += span + 10_000
        dt, tr = push_single(http, urls, els, shift, args.single)
        res["single_push_s"], res["single_triples"] = dt, tr
        res["single_triples_per_s"] = tr / dt
        res["single_requests_per_s"] = sum(min(args.single, len(r)) for r in els.values()) / dt
        # drain: the report times of the pushes so far fire before the latency run starts
        last = max(t for rows in els.values() for t, _, _ in rows) + shift + 5_000
        t0 = time.perf_counter()
        while http.post(url + "/watermark", params={"t": str(last)}, timeout=600).status_code == 503:
            time.sleep(0.5)  # the engine did not answer within its own timeout: still draining
        res["drain_s"] = time.perf_counter() - t0
        res["reports_cpu_s"] = {name: cpu_seconds(p) - every0[name] for name, p in every.items()}
        time.sleep(1.0)
        shift += span + 10_000
        lat = latency(http, urls, els, qs[0]["name"], args.rate, shift, args.latency_elements)
        res["latency_ms"] = lat
        done = res["batch_push_s"] + res["single_push_s"] + res["drain_s"]
        res["processed_triples_per_s"] = (res["batch_triples"] + res["single_triples"]) / done
        res["latency_p50_ms"], res["latency_p99_ms"] = pct(lat, 0.5), pct(lat, 0.99)
    ratio = (
        ""
        if args.embedded_push is None
        else f" ({res['batch_triples_per_s'] / args.embedded_push:.2f}x embedded)"
    )
    print(
        f"{label:>22}: {len(qs):6d} queries | push batch {res['batch_triples_per_s']:8.0f} tr/s{ratio}"
        f" ({cpu_note(res)})"
        f" | single {res['single_triples_per_s']:7.0f} tr/s ({res['single_requests_per_s']:.0f} req/s)"
        f" | all reports out {res['processed_triples_per_s']:6.0f} tr/s (drain {res['drain_s']:.1f} s)"
        f" | latency p50 {res['latency_p50_ms']:.1f} ms p99 {res['latency_p99_ms']:.1f} ms ({len(lat)} reports)",
        flush=True,
    )
    if containers:
        cs = [res["reports_cpu_s"][nm] for nm in containers]
        lead = res["reports_cpu_s"].get(res.get("leader") or "", 0.0)
        print(
            f"{label:>22}: CPU until all reports out: leader {lead:.2f} s, containers"
            f" {' / '.join(f'{x:.2f}' for x in cs)} s (sum {sum(cs):.2f}, busiest {max(cs):.2f})",
            flush=True,
        )
    res["profile"] = profile_summary(spy, label, args)
    if spy_c is not None:
        res["container_profile"] = profile_summary(spy_c, label + " container", args)
    for nm, sp in spy_o.items():
        res[f"standby_profile_{nm}"] = profile_summary(sp, f"{label} standby {nm}", args)
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--push-queries", type=int, default=None, help="queries held while pushing (1000)")
    ap.add_argument("--containers", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--coordinators", type=int, default=1, help="run --zk processes of each cluster")
    ap.add_argument("--elements", type=int, default=300, help="elements per stream pushed in batches")
    ap.add_argument("--batch", type=int, default=100, help="elements per request in the batch push")
    ap.add_argument("--single", type=int, default=100, help="elements per stream pushed one per request")
    ap.add_argument("--rate", type=float, default=20.0, help="elements/s of the latency run")
    ap.add_argument("--latency-elements", type=int, default=60, help="elements per stream of the latency run")
    ap.add_argument("--quick", action="store_true", help="100 queries, 1 container")
    ap.add_argument("--register-only", action="store_true", help="registration rate only")
    ap.add_argument("--register-batch", type=int, default=None, help="queries per POST /queries batch")
    ap.add_argument("--profile", type=int, default=0, help="seconds of py-spy record of the leader")
    ap.add_argument("--py-spy", default=None, help="the py-spy executable")
    ap.add_argument("--skip-embedded", action="store_true", help="clusters only (no ratio)")
    ap.add_argument(
        "--baseline-tree",
        default=None,
        help="a directory holding an older platform/ tree: its cluster is measured in the same run",
    )
    ap.add_argument(
        "--ingest",
        nargs="+",
        default=None,
        choices=["leader", "direct", "owners", "meta"],
        help="run each cluster with --state-dir and each of these --ingest settings, alternating",
    )
    ap.add_argument("--repeat", type=int, default=1, help="rounds of the --ingest settings (alternating)")
    ap.add_argument("--tag", default="", help=argparse.SUPPRESS)
    ap.add_argument("--given-embedded-qps", type=float, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "live_cluster.json"))
    args = ap.parse_args(argv)
    if args.quick:
        args.queries, args.containers, args.elements = [100], [1], 100
    if args.register_batch is None:
        args.register_batch = 1000 if args.register_only else 100
    if args.push_queries is None:
        args.push_queries = min(args.queries)
    sizes = list(dict.fromkeys(args.queries))
    if not args.register_only and args.push_queries not in sizes:
        sizes.append(args.push_queries)
    args.embedded_qps = args.embedded_push = None
    from linkstream.api.app import create_app
    from linkstream.api.server import BackgroundServer, build_live
    from linkstream.cluster.localcluster import LocalCluster
    from tests.engine.test_sharing import REPO as REPO_GRAPH

    static = str(SHARED / "citybench" / "static" / "SensorRepository.nt")
    els = {} if args.register_only else read_elements(max(args.elements, args.single, args.latency_elements))
    results = []
    for n in sizes:
        qs = queries(n)
        push = not args.register_only and n == args.push_queries
        args.embedded_qps = args.given_embedded_qps
        if args.given_embedded_qps is None and not args.skip_embedded:
            live = build_live([(None, static), (REPO_GRAPH, static)], idle_ms=0)
            server = BackgroundServer(create_app(live), on_shutdown=live.close).start()
            try:
                res = run_config("embedded", [server.url], args, els, qs, push=push, pid=os.getpid())
                args.embedded_qps = res["register_qps"]
                if push:
                    args.embedded_push = res["batch_triples_per_s"]
                results.append({**res, "n": n})
            finally:
                server.stop()
            save(args, results)
        modes = [m for _ in range(args.repeat) for m in (args.ingest or [None])]
        for i, (k, mode) in enumerate((k, m) for k in args.containers for m in modes):
            label = f"{k} container{'s' if k > 1 else ''}"
            if args.coordinators > 1:
                label += f", {args.coordinators} coord"
            label += f", --ingest {mode}" if mode else ""
            label += f" ({args.tag})" if args.tag else ""
            with tempfile.TemporaryDirectory(prefix="ls-bench-") as tmp:
                cluster = LocalCluster(Path(tmp) / "cluster", session_timeout=4.0, capacity=max(16, 2 * n))
                try:
                    cluster.start(k, coordinators=0)
                    extra = ["--idle-ms", "0", "--static", static, "--static", f"{REPO_GRAPH}={static}"]
                    if mode:  # the durable path: every coordinator on one state directory
                        extra += ["--state-dir", str(Path(tmp) / "state"), "--ingest", mode]
                    names = [cluster.start_coordinator(extra) for _ in range(args.coordinators)]
                    urls = leader_first(cluster, names)
                    leader = next(nm for nm in names if cluster.api_urls()[nm] == urls[0])
                    res = run_config(
                        label,
                        urls,
                        args,
                        els,
                        qs,
                        push=push,
                        pid=cluster.pid(leader),
                        container_pid=cluster.pid(cluster.names("container")[0]),
                        serving={nm: cluster.pid(nm) for nm in cluster.names("coordinator")},
                        containers={nm: cluster.pid(nm) for nm in cluster.names("container")},
                    )
                    results.append({**res, "n": n, "tag": args.tag, "ingest": mode})
                finally:
                    cluster.stop()
                save(args, results)
            if args.baseline_tree and i % len(modes) == len(modes) - 1:  # the same on the older tree
                results += baseline(args, n, k)
                save(args, results)
    save(args, results)
    print(f"raw figures: {args.out}")
    return 0


def leader_first(cluster, names: list[str]) -> list[str]:
    """The coordinators' API URLs, the leader's first (waits until one leads)."""
    import httpx

    deadline = time.monotonic() + 60
    while True:
        by_name = cluster.api_urls(timeout=1)
        if not set(names) <= set(by_name):
            assert time.monotonic() < deadline, f"coordinators without an API: {set(names) - set(by_name)}"
            time.sleep(0.2)
            continue
        roles = {nm: httpx.get(by_name[nm] + "/status", timeout=10).json().get("role") for nm in names}
        if "leader" in roles.values():
            break
        assert time.monotonic() < deadline, "no leader"
        time.sleep(0.2)
    return [by_name[nm] for nm in sorted(names, key=lambda nm: roles[nm] != "leader")]


def baseline(args: argparse.Namespace, n: int, k: int) -> list[dict]:
    """Registration on a cluster of ``k`` containers running the older tree (a child process of
    this script under that tree, so its local cluster starts the older processes too)."""
    out = Path(tempfile.mkdtemp(prefix="ls-baseline-out-")) / "baseline.json"
    env = dict(os.environ, PYTHONPATH=baseline_path(args.baseline_tree))
    cmd = [sys.executable, __file__, "--register-only", "--queries", str(n), "--containers", str(k)]
    cmd += ["--register-batch", str(args.register_batch), "--tag", "baseline tree", "--out", str(out)]
    if args.embedded_qps is not None:
        cmd += ["--given-embedded-qps", str(args.embedded_qps)]
    else:  # --skip-embedded
        cmd += ["--skip-embedded"]
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
