#!/usr/bin/env python3
"""LSBench-shaped workloads: thousands of queries over a synthetic social-network stream.

A deterministic generator of data shaped like LSBench's SIB social network (users,
``foaf:knows`` in a static graph; four streams: posts with ``sioc:creator_of`` and
``sib:hashtag``, photos with ``sib:usertag``, likes of posts, likes of photos) and the
four query shapes of the LSBench experiments, as CQELS-QL:

* **Q1** pattern with a user constant: ``STREAM <posts> [RANGE w SLIDE 1s] { <u> ?p ?o }``;
* **Q4** two post-stream blocks joined on user and hashtag, ``FILTER(?post1 != ?post2)``
  (no constant: its variants differ in their window ranges);
* **Q5** photo likes of the constant user ⋈ photo usertags ⋈ static ``<u> foaf:knows ?f``;
* **Q10** post creators ⋈ post likes ⋈ static ``<u> foaf:knows ?creator``,
  ``COUNT(?liker) ... GROUP BY ?creator``.

Workloads (``--workload``):

* ``q1``: N Q1 queries that differ only in the user constant, all ``[RANGE 10s SLIDE 1s]``,
  over the post stream alone (the "one pattern shape" row of issue 16);
* ``mixed``: N queries drawn from the four shapes with random users and random window
  ranges of 1-10 s (``--windows time``) or ``[TRIPLES n]`` with n in 10-200
  (``--windows count``), over all four streams and the static graph.

Every configuration runs in a fresh process (``--one``) and prints input triples/s and
result rows/s of the whole replay (registration excluded, reported apart), report
latency, and RSS.  The peer, measured in the same run, is the reference evaluator
(``shared/tools/oracle.py``, pyoxigraph re-evaluation): a sample of queries
(``--sample`` per shape) is run through both LinkStream's ``linkstream replay`` and the
oracle over the same streams, the results must be equal (``shared/tools/compare_results.py``),
and the oracle's seconds per query give its throughput for N queries (it evaluates each
query on its own, so its time is linear in N).  Raw figures: ``bench/results/lsbench.json``.

    python bench/lsbench.py [--quick] [--workload q1 mixed] [--sizes 100 1000 10000]
                            [--windows time count] [--seconds 60] [--users 2000] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()

from bench.many_queries import _CountingSink, pct, rss_mb  # noqa: E402  (after the path set-up)

EX = "http://lsbench.example/"
SIOC = "http://rdfs.org/sioc/ns#"
SIB = "http://www.ins.cwi.nl/sib/vocabulary/"
FOAF = "http://xmlns.com/foaf/0.1/"
PROV_T = "<http://www.w3.org/ns/prov#generatedAtTime>"
XSD_DT = "<http://www.w3.org/2001/XMLSchema#dateTime>"
STREAMS = {
    "posts": EX + "stream/posts",
    "photos": EX + "stream/photos",
    "postlikes": EX + "stream/postlikes",
    "photolikes": EX + "stream/photolikes",
}
#: elements per second of stream time, per stream (scaled by --rate)
RATES = {"posts": 40, "photos": 20, "postlikes": 120, "photolikes": 80}
PREFIXES = f"PREFIX sioc: <{SIOC}>\nPREFIX sib: <{SIB}>\nPREFIX foaf: <{FOAF}>\n"
T0_MS = 1_700_000_000_000  # stream time origin (2023-11-14), whole seconds


# ----------------------------------------------------------------------------- data


def _user(i: int) -> str:
    return f"<{EX}user/{i}>"


def _stamp(ms: int) -> str:
    secs, milli = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{milli:03d}Z"


@dataclass
class Dataset:
    """Paths of one generated dataset and its sizes."""

    static: Path
    streams: dict[str, Path]
    static_triples: int
    stream_triples: dict[str, int]


def generate(dest: Path, users: int, seconds: int, rate: float, knows: int, seed: int) -> Dataset:
    """Writes the static graph and the four stream files under ``dest`` (deterministic in ``seed``)."""
    rnd = random.Random(seed)
    dest.mkdir(parents=True, exist_ok=True)
    static = dest / "social.nt"
    n_static = 0
    with open(static, "w", encoding="utf-8") as f:
        for u in range(users):
            for v in sorted(set(rnd.randrange(users) for _ in range(knows)) - {u}):
                f.write(f"{_user(u)} <{FOAF}knows> {_user(v)} .\n")
                n_static += 1
    tags = [f"<{EX}tag/{i}>" for i in range(max(10, users // 20))]
    posts: list[str] = []
    photos: list[str] = []
    files = {name: open(dest / f"{name}.nq", "w", encoding="utf-8") for name in STREAMS}
    counts = dict.fromkeys(STREAMS, 0)
    # events of all streams in time order; each stream's elements are evenly spread over
    # its second with a little jitter, so the streams interleave
    events: list[tuple[int, str]] = []
    for name, per_s in RATES.items():
        n = max(1, int(per_s * rate))
        for s in range(seconds):
            for k in range(n):
                events.append(
                    (T0_MS + s * 1000 + (k * 1000) // n + rnd.randrange(0, max(1, 1000 // n)), name)
                )
    events.sort()
    seq = 0
    for t, name in events:
        seq += 1
        g = f"<{EX}ev/{seq}>"
        u = _user(rnd.randrange(users))
        if name == "posts":
            p = f"<{EX}post/{len(posts)}>"
            posts.append(p)
            quads = [f"{u} <{SIOC}creator_of> {p}"]
            quads += [f"{p} <{SIB}hashtag> {tag}" for tag in sorted(set(rnd.sample(tags, rnd.randint(1, 3))))]
        elif name == "photos":
            p = f"<{EX}photo/{len(photos)}>"
            photos.append(p)
            quads = [f"{u} <{SIOC}creator_of> {p}"]
            quads += [
                f"{p} <{SIB}usertag> {_user(v)}" for v in sorted({rnd.randrange(users) for _ in range(2)})
            ]
        elif name == "postlikes":
            if not posts:
                continue
            quads = [f"{u} <{SIB}like> {posts[max(0, len(posts) - 1 - rnd.randrange(200))]}"]
        else:
            if not photos:
                continue
            quads = [f"{u} <{SIB}like> {photos[max(0, len(photos) - 1 - rnd.randrange(200))]}"]
        f = files[name]
        f.write(f'{g} {PROV_T} "{_stamp(t)}"^^{XSD_DT} .\n')
        for q in quads:
            f.write(f"{q} {g} .\n")
        counts[name] += len(quads)
    for f in files.values():
        f.close()
    return Dataset(static, {n: dest / f"{n}.nq" for n in STREAMS}, n_static, counts)


# ----------------------------------------------------------------------------- queries


def _window(rnd: random.Random, windows: str) -> str:
    if windows == "count":
        return f"[TRIPLES {rnd.randint(10, 200)}]"
    return f"[RANGE {rnd.randint(1, 10)}s SLIDE 1s]"


def query_text(shape: str, user: str, rnd: random.Random, windows: str) -> str:
    """One query of ``shape`` (q1, q4, q5, q10) with the constant ``user``."""
    s = STREAMS
    if shape == "q1":
        w = _window(rnd, windows)
        return f"SELECT ?p ?o WHERE {{ STREAM <{s['posts']}> {w} {{ {user} ?p ?o }} }}"
    if shape == "q4":  # no constant: the variants differ in their windows (``user`` is unused)
        w1, w2 = _window(rnd, windows), _window(rnd, windows)
        return (
            PREFIXES + "SELECT ?user ?post1 ?post2 ?tag WHERE {\n"
            f"  STREAM <{s['posts']}> {w1} {{ ?user sioc:creator_of ?post1 . ?post1 sib:hashtag ?tag }}\n"
            f"  STREAM <{s['posts']}> {w2} {{ ?user sioc:creator_of ?post2 . ?post2 sib:hashtag ?tag }}\n"
            "  FILTER(?post1 != ?post2)\n}"
        )
    if shape == "q5":
        w1, w2 = _window(rnd, windows), _window(rnd, windows)
        return (
            PREFIXES + "SELECT ?photo ?friend WHERE {\n"
            f"  STREAM <{s['photolikes']}> {w1} {{ {user} sib:like ?photo }}\n"
            f"  STREAM <{s['photos']}> {w2} {{ ?photo sib:usertag ?friend }}\n"
            f"  {user} foaf:knows ?friend .\n}}"
        )
    if shape == "q10":
        w1, w2 = _window(rnd, windows), _window(rnd, windows)
        return (
            PREFIXES + "SELECT ?creator (COUNT(?liker) AS ?likes) WHERE {\n"
            f"  STREAM <{s['posts']}> {w1} {{ ?creator sioc:creator_of ?post }}\n"
            f"  STREAM <{s['postlikes']}> {w2} {{ ?liker sib:like ?post }}\n"
            f"  {user} foaf:knows ?creator .\n}} GROUP BY ?creator"
        )
    raise ValueError(shape)


def workload(kind: str, n: int, users: int, windows: str, seed: int) -> dict[str, str]:
    """``n`` queries of workload ``kind``, name -> text (deterministic in ``seed``)."""
    rnd = random.Random(seed * 7919 + n)
    out = {}
    for i in range(n):
        user = _user(rnd.randrange(users))
        if kind == "q1":
            w = "[TRIPLES 100]" if windows == "count" else "[RANGE 10s SLIDE 1s]"
            out[f"q1_{i}"] = f"SELECT ?p ?o WHERE {{ STREAM <{STREAMS['posts']}> {w} {{ {user} ?p ?o }} }}"
        else:
            shape = ("q1", "q4", "q5", "q10")[i % 4]
            out[f"{shape}_{i}"] = query_text(shape, user, rnd, windows)
    return out


def streams_of(kind: str) -> list[str]:
    return ["posts"] if kind == "q1" else list(STREAMS)


# ----------------------------------------------------------------------------- one run


def run_one(data_dir: Path, kind: str, n: int, users: int, windows: str, seed: int) -> dict:
    """Registers the workload's ``n`` queries in one embedded engine and replays the streams."""
    from linkstream.engine.embedded import Engine
    from linkstream.engine.replay import replay
    from linkstream.query.continuous import parse_continuous
    from linkstream.rdf.static import load_graph

    texts = workload(kind, n, users, windows, seed)
    eng = Engine()
    t0 = time.perf_counter()
    if kind != "q1":
        eng.add_static(None, load_graph(str(data_dir / "social.nt"), eng.dictionary))
    static_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    rqs = [eng.register(parse_continuous(text, default_name=name)) for name, text in texts.items()]
    reg_s, reg_cpu = time.perf_counter() - t0, time.process_time() - c0
    mem_reg = rss_mb()
    streams = [(STREAMS[s], str(data_dir / f"{s}.nq")) for s in streams_of(kind)]
    out = _CountingSink()
    cpu0 = time.process_time()
    res = replay(eng, rqs, streams, out)
    cpu = time.process_time() - cpu0
    lat = [x for q in rqs for x in q.stats.latencies]
    return _figures(
        kind,
        windows,
        n,
        static_s,
        reg_s,
        reg_cpu,
        mem_reg,
        res.seconds,
        cpu,
        res.triples,
        res.rows,
        sum(q.stats.reports for q in rqs),
        lat,
        eng.operator_count(),
        out.chars,
    )


def _figures(
    kind: str, windows: str, n: int, static_s: float, reg_s: float, reg_cpu: float, mem_reg: float,
    wall: float, cpu: float, triples: int, rows: int, reports: int, lat: list[float], operators: int,
    chars: int,
) -> dict:  # fmt: skip
    """One configuration's raw figures (``wall`` / ``cpu``: the replay's or the pushes')."""
    return {
        "workload": kind,
        "windows": windows,
        "queries": n,
        "static_load_s": static_s,
        "register_s": reg_s,
        "register_cpu_s": reg_cpu,
        "registrations_per_s": n / reg_s if reg_s else 0.0,
        "replay_s": wall,
        "replay_cpu_s": cpu,
        "input_triples": triples,
        "triples_per_s": triples / wall if wall else 0.0,
        "triples_per_cpu_s": triples / cpu if cpu else 0.0,
        "result_rows": rows,
        "rows_per_s": rows / wall if wall else 0.0,
        "reports": reports,
        "query_ms_p50": 1e3 * pct(lat, 0.5),
        "query_ms_p99": 1e3 * pct(lat, 0.99),
        "operators": operators,
        "rss_mb_after_register": mem_reg,
        "rss_mb_end": rss_mb(),
        "output_chars": chars,
    }


def run_live(data_dir: Path, kind: str, n: int, users: int, windows: str, seed: int) -> dict:
    """:func:`run_one` in the live engine, as ``linkstream run`` serves it: the queries
    registered in one batch, the streams' elements pushed one by one in time order, then
    the watermark advanced past the last report; the worker's thread does all the work
    (the figures are this process's CPU time)."""
    from linkstream.engine.live.runtime import LiveEngine
    from linkstream.rdf.static import load_graph
    from linkstream.rdf.streams import StreamReader

    texts = workload(kind, n, users, windows, seed)
    live = LiveEngine(idle_ms=None).start()
    try:
        t0 = time.perf_counter()
        if kind != "q1":
            live.add_static(None, load_graph(str(data_dir / "social.nt"), live.engine.dictionary))
        static_s = time.perf_counter() - t0
        t0, c0 = time.perf_counter(), time.process_time()
        live.register_many([(text, name, None) for name, text in texts.items()], timeout=3600)
        reg_s, reg_cpu = time.perf_counter() - t0, time.process_time() - c0
        mem_reg = rss_mb()
        elements = []
        for s in streams_of(kind):
            for el in StreamReader(str(data_dir / f"{s}.nq"), live.engine.dictionary):
                elements.append((el.t, STREAMS[s], el.triples))
        elements.sort(key=lambda x: x[0])
        triples = sum(len(x[2]) for x in elements)
        t0, cpu0 = time.perf_counter(), time.process_time()
        for t, iri, tr in elements:
            live.push(iri, t, tr)
        live.advance_to(elements[-1][0] + 20_000 if elements else 0, timeout=3600)
        live.sync(timeout=3600)
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        sample = live.metrics.registry.get_sample_value
        rows = int(sample("linkstream_result_lines_total") or 0)
        reports = int(sample("linkstream_reports_total") or 0)
        return _figures(
            "live " + kind,
            windows,
            n,
            static_s,
            reg_s,
            reg_cpu,
            mem_reg,
            wall,
            cpu,
            triples,
            rows,
            reports,
            [],
            live.engine.operator_count(),
            0,
        )
    finally:
        live.close()


def spawn(
    data_dir: Path,
    kind: str,
    n: int,
    users: int,
    windows: str,
    seed: int,
    pythonpath: str | None = None,
    live: bool = False,
) -> dict:
    """One configuration in a fresh process; ``pythonpath`` puts another ``linkstream``
    package first (the baseline of ``--baseline``); ``live``: in the live engine."""
    cmd = [sys.executable, __file__, "--one", str(n), "--data", str(data_dir), "--workload", kind]
    cmd += ["--users", str(users), "--windows", windows, "--seed", str(seed)] + (["--live"] if live else [])
    env = None if pythonpath is None else dict(os.environ, PYTHONPATH=pythonpath)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{p.stderr[-3000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- the peer


def check_sample(data_dir: Path, kind: str, users: int, windows: str, seed: int, per_shape: int) -> dict:
    """Runs a sample of the workload's queries through ``linkstream replay`` and the oracle.

    Both see the same streams and static graph; the oracle evaluates each query on its own.
    Returns the oracle's seconds per query, LinkStream's, and whether every result was equal.
    """
    if per_shape < 1:
        return {"skipped": "--sample 0"}
    if not (SHARED / "tools" / "oracle.py").exists():
        return {"skipped": f"reference tools not found under {SHARED}"}
    texts = workload(kind, max(4 * per_shape, per_shape), users, windows, seed)
    if kind == "q1":
        names = list(texts)[:per_shape]
    else:
        names = [
            n
            for shape in ("q1_", "q4_", "q5_", "q10_")
            for n in [k for k in texts if k.startswith(shape)][:per_shape]
        ]
    streams = [f"{STREAMS[s]}={data_dir / f'{s}.nq'}" for s in streams_of(kind)]
    static = [] if kind == "q1" else [str(data_dir / "social.nt")]
    oracle_s, ours_s, unequal = 0.0, 0.0, []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            q = Path(tmp) / f"{name}.rq"
            q.write_text(texts[name], encoding="utf-8")
            common = ["--query", str(q)] + [a for s in streams for a in ("--stream", s)]
            common += [a for s in static for a in ("--static", s)]
            want, got = Path(tmp) / f"{name}.want.jsonl", Path(tmp) / f"{name}.got.jsonl"
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, str(SHARED / "tools" / "oracle.py"), *common, "--out", str(want), "--quiet"],
                check=True,
                capture_output=True,
            )
            oracle_s += time.perf_counter() - t
            t = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "linkstream.cli", "replay", *common, "--out", str(got), "--quiet"],
                check=True,
                capture_output=True,
                cwd=REPO,
            )
            ours_s += time.perf_counter() - t
            cmp = subprocess.run(
                [sys.executable, str(SHARED / "tools" / "compare_results.py"), str(want), str(got)],
                capture_output=True,
                text=True,
            )
            if cmp.returncode != 0:
                unequal.append(f"{name}: {cmp.stdout.strip()[-300:]}")
    return {
        "sample": names,
        "oracle_s_per_query": oracle_s / len(names),
        "linkstream_process_s_per_query": ours_s / len(names),
        "equal": not unequal,
        "unequal": unequal,
    }


# ----------------------------------------------------------------------------- main

HEAD = (
    f"{'workload':>10} {'windows':>7} {'queries':>8} {'reg q/s':>9} {'in tr/s':>10} {'cpu tr/s':>10} "
    f"{'rows/s':>10} {'rows':>10} {'q p99 ms':>9} {'RSS MB':>7} {'x oracle':>9} {'x base':>7}"
)


def show(r: dict) -> str:
    ratio = r.get("x_oracle")
    base = r.get("x_baseline_cpu")
    return (
        f"{r['workload']:>10} {r['windows']:>7} {r['queries']:>8} {r['registrations_per_s']:>9,.0f} "
        f"{r['triples_per_s']:>10,.0f} {r['triples_per_cpu_s']:>10,.0f} {r['rows_per_s']:>10,.0f} "
        f"{r['result_rows']:>10,} {r['query_ms_p99']:>9.3f} {r['rss_mb_end']:>7.0f} "
        f"{(f'{ratio:>8.1f}x' if ratio else '-'):>9} {(f'{base:>6.1f}x' if base else '-'):>7}"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workload", nargs="+", choices=["q1", "mixed"], default=["q1", "mixed"])
    ap.add_argument(
        "--sizes", type=int, nargs="+", default=None, help="query counts (default 100 1000 10000)"
    )
    ap.add_argument(
        "--windows", nargs="+", choices=["time", "count"], default=None, help="default: time count"
    )
    ap.add_argument("--seconds", type=int, default=None, help="stream time generated, seconds (default 60)")
    ap.add_argument("--rate", type=float, default=1.0, help="scale of the streams' element rates (default 1)")
    ap.add_argument("--users", type=int, default=2000, help="users in the social graph (default 2000)")
    ap.add_argument("--knows", type=int, default=25, help="foaf:knows edges drawn per user (default 25)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--sample", type=int, default=2, help="queries per shape checked against the oracle (default 2)"
    )
    ap.add_argument(
        "--quick", action="store_true", help="100 and 1000 queries, 20 s of streams, time windows"
    )
    ap.add_argument(
        "--baseline",
        help="a source tree of another commit (git archive COMMIT | tar -x -C DIR): every configuration "
        "also runs on its platform/ in the same run (rows marked 'base'); 'x base' is the ratio of "
        "input triples per CPU second, this tree over the baseline",
    )
    ap.add_argument(
        "--live",
        action="store_true",
        help="run the queries in the live engine (linkstream run's: one registration batch, the "
        "elements pushed one by one) instead of a replay",
    )
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "lsbench.json"))
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--data", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        w = (args.windows or ["time"])[0]
        run = run_live if args.live else run_one
        print(json.dumps(run(Path(args.data), args.workload[0], args.one, args.users, w, args.seed)))
        return 0
    sizes = args.sizes or ([100, 1000] if args.quick else [100, 1000, 10000])
    windows = args.windows or (["time"] if args.quick else ["time", "count"])
    seconds = args.seconds or (20 if args.quick else 60)
    rows: list[dict] = []
    checks: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as base_pkg:
        data_dir = Path(tmp)
        base_path = None
        if args.baseline:
            src = Path(args.baseline).resolve() / "platform"
            if not (src / "engine" / "embedded.py").exists():
                ap.error(f"--baseline {args.baseline}: no platform/engine/embedded.py under it")
            os.symlink(src, Path(base_pkg) / "linkstream")  # the package as installed names it
            base_path = base_pkg
        t = time.perf_counter()
        ds = generate(data_dir, args.users, seconds, args.rate, args.knows, args.seed)
        print(
            f"LSBench-shaped data: {args.users} users, {ds.static_triples:,} static triples, "
            f"{seconds} s of streams: "
            + ", ".join(f"{k} {v:,}" for k, v in ds.stream_triples.items())
            + f" triples (generated in {time.perf_counter() - t:.1f} s)",
            flush=True,
        )
        print(HEAD, flush=True)
        for kind in args.workload:
            for w in windows:
                check = check_sample(data_dir, kind, args.users, w, args.seed, args.sample)
                check.update(workload=kind, windows=w)
                checks.append(check)
                for n in sizes:
                    if base_path is not None:
                        b = spawn(data_dir, kind, n, args.users, w, args.seed, base_path, args.live)
                        b["workload"] = "base " + kind
                        rows.append(b)
                        print(show(b), flush=True)
                    r = spawn(data_dir, kind, n, args.users, w, args.seed, live=args.live)
                    if base_path is not None:
                        r["x_baseline_cpu"] = r["triples_per_cpu_s"] / b["triples_per_cpu_s"]
                        r["x_baseline_rows"] = r["result_rows"] == b["result_rows"]
                    per_q = check.get("oracle_s_per_query")
                    if per_q:
                        # the oracle evaluates every query on its own: N queries cost N times one
                        oracle_tps = r["input_triples"] / (per_q * n)
                        r["oracle_triples_per_s_estimated"] = oracle_tps
                        r["x_oracle"] = r["triples_per_s"] / oracle_tps if oracle_tps else None
                    rows.append(r)
                    print(show(r), flush=True)
                    if base_path is not None and not r["x_baseline_rows"]:
                        print(f"{'':>10} result rows differ from the baseline's", flush=True)
                if "equal" in check:
                    verdict = "equal" if check["equal"] else "DIFFERENT: " + "; ".join(check["unequal"])
                    print(
                        f"{'':>9} oracle check ({len(check['sample'])} queries, {kind}/{w}): {verdict}; "
                        f"oracle {check['oracle_s_per_query']:.2f} s/query, linkstream replay process "
                        f"{check['linkstream_process_s_per_query']:.2f} s/query",
                        flush=True,
                    )
                else:
                    print(f"{'':>9} oracle check skipped: {check['skipped']}", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {
                "data": {
                    "users": args.users,
                    "seconds": seconds,
                    "seed": args.seed,
                    "static_triples": ds.static_triples,
                    "stream_triples": ds.stream_triples,
                },
                "runs": rows,
                "checks": checks,
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    print(f"raw figures: {args.out}")
    return 0 if all(c.get("equal", True) for c in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
