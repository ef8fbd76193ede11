"""Static joins on store nodes: local graph vs remote reads over shared memory vs TCP.

Every CityBench query with a static part (``shared/citybench/manifest.json``; the
repository's slice, ``tests/data/conformance``, when the shared corpus is absent) is
registered on one container replica (:class:`~linkstream.containers.replica.RunReplica`)
and its streams replayed for ``--reports`` report times, in one fresh process per mode:

* ``local``: the replica loads the static graph files, as containers do by default;
* ``shm`` / ``tcp``: the replica reads them from a ``linkstream store-node`` process
  (started here) through the remote store, over shared memory or TCP.

Per mode it prints the report throughput and latency p50/p99 (every report joins the
windows with the static data), the set-up time (loading the files / reading the
pattern-relevant triples through the store's indexes), the static bytes the engine holds,
the remote cache, and the process's RSS; then a raw lookup benchmark on the same data:
batches of 512 ``neighbours`` lookups on random subjects, warm cache, in every mode.
Last, the latency of selective one-shot SPARQL queries (every triple of one subject) on the
local store directory vs through the store node.  Ratios are against ``local`` measured in
the same run (goal: shm >= 0.8x local).
Modes run in rotating order over ``--rounds`` rounds; medians are reported, and the best
round per CPU second (on a loaded machine wall time mostly measures the other processes).  Raw figures
go to ``bench/results/store_path.json``.

Usage: python bench/store_path.py [--reports N] [--rounds R] [--slice] [--cache-mb M]
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

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
SLICE = REPO / "tests" / "data" / "conformance"
#: queries with thousands of rows per report (their output, not the static join, dominates)
HEAVY = {"Q8", "Q10_5", "Q10_8"}
MODES = ("local", "shm", "tcp")


def corpus(use_slice: bool) -> tuple[Path, dict]:
    if not use_slice and (SHARED / "citybench" / "manifest.json").exists():
        return SHARED, json.loads((SHARED / "citybench" / "manifest.json").read_text())
    return SLICE, json.loads((SLICE / "slice.json").read_text())


def static_queries(root: Path, manifest: dict) -> list[dict]:
    return [q for q in manifest["queries"] if q["statics"] and q["name"] not in HEAVY]


def rss_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


# ---------------------------------------------------------------------- child


def oneshot(mode: str, adv_json: str, store_dir: str) -> dict:
    """Latency of selective one-shot SPARQL lookups (all triples of one subject) over the
    store directory opened in this process (``local``) or the store node (``shm``/``tcp``)."""
    from linkstream.engine.oneshot.store import run_sparql
    from linkstream.store import PersistentStore
    from linkstream.store.node import Advertisement
    from linkstream.store.remote import RemoteStore

    local = PersistentStore.open(store_dir, background_compaction=False)
    store: object = local
    remote = None
    if mode != "local":
        remote = RemoteStore([Advertisement.from_json(adv_json)], prefer=mode, dictionary=local.dictionary)
        store = remote
    snap = local.snapshot()
    g = snap.graphs()[0]
    subjects = np.unique(snap.triples(g)[:, 0])
    rng = np.random.default_rng(11)
    picks = local.dictionary.decode_many(rng.choice(subjects, size=300))
    graph = "" if g is None else f"FROM <{g}> "
    texts = [f"SELECT ?p ?o {graph}WHERE {{ {s} ?p ?o }}" for s in picks if s.startswith("<")]
    lat = []
    rows = 0
    for k, text in enumerate(texts):
        t0 = time.perf_counter()
        res = run_sparql(store, text)
        if k >= 20:  # the first ones warm the cache and the query session
            lat.append(time.perf_counter() - t0)
            rows += len(res["results"]["bindings"])
    if remote is not None:
        remote.close()
    local.close()
    return {
        "queries": len(lat),
        "rows": rows,
        "p50_ms": 1000 * float(np.percentile(lat, 50)),
        "p99_ms": 1000 * float(np.percentile(lat, 99)),
    }


def child(mode: str, adv_json: str, reports: int, use_slice: bool, cache_mb: float = 16.0) -> dict:
    from linkstream.containers.replica import RunReplica
    from linkstream.engine.replay import replay
    from linkstream.scheduler.runs import RunSpec
    from linkstream.store.index import GraphIndex
    from linkstream.store.node import Advertisement
    from linkstream.store.remote import RemoteStore

    root, manifest = corpus(use_slice)
    qs = static_queries(root, manifest)
    streams: dict[str, str] = {}
    statics: dict[str | None, str] = {}
    for q in qs:
        for s in q["streams"]:
            streams[s["iri"]] = str(root / s["path"])
        for s in q["statics"]:
            statics[s["iri"]] = str(root / s["path"])
    spec = RunSpec(
        id="bench",
        driver="tcp://127.0.0.1:1",
        base=manifest.get("base", "http://localhost/"),
        default_step=1000,
        statics=tuple(statics.items()),
        streams=tuple(streams),
        horizons=tuple([None] * len(streams)),
    )
    texts = {q["id"]: (root / q["query"]).read_text(encoding="utf-8") for q in qs}
    rss0 = rss_kb()
    t0 = time.perf_counter()
    remote = None
    if mode != "local":
        remote = RemoteStore(
            [Advertisement.from_json(adv_json)], prefer=mode, cache_bytes=int(cache_mb * (1 << 20))
        )
    rep = RunReplica(spec, log=lambda _m: None, remote=remote)
    rep.preplan(texts)
    rqs = [rep.register(n, t) for n, t in sorted(texts.items())]
    setup_s = time.perf_counter() - t0
    lat: list[float] = []
    cpu: list[float] = []
    tick = rep.engine.tick

    def timed(*a: object, **k: object) -> object:
        s, c = time.perf_counter(), time.process_time()
        try:
            return tick(*a, **k)  # type: ignore[arg-type]
        finally:
            lat.append(time.perf_counter() - s)
            cpu.append(time.process_time() - c)

    rep.engine.tick = timed  # type: ignore[method-assign]
    reads0 = remote.cache.stats()["read_bytes"] if remote is not None else 0
    t0 = time.perf_counter()
    res = replay(rep.engine, rqs, list(streams.items()), None, max_reports=reports)
    run_s = time.perf_counter() - t0
    stats = rep.static_stats()
    stats["replay_read_bytes"] = (remote.cache.stats()["read_bytes"] - reads0) if remote is not None else 0
    rss1 = rss_kb()

    # raw lookups: neighbours of random subjects of the first static graph, warm cache
    rng = np.random.default_rng(5)
    g = spec.statics[0][0]
    if remote is not None:
        snap = remote.snapshot()
    else:
        from linkstream.store.persistent import PersistentSnapshot, _GraphState, _Version

        triples = rep.engine._static_triples((g,))
        snap = PersistentSnapshot(_Version({g: _GraphState(GraphIndex.build(triples, 0))}, (), ()))
    subjects = np.unique(snap.triples(g)[:, 0])
    batches = [rng.choice(subjects, size=512) for _ in range(200)]
    for b in batches[:20]:
        snap.neighbours(g, b, None, "out")
    t0 = time.perf_counter()
    found = 0
    for b in batches:
        found += len(snap.neighbours(g, b, None, "out")[0])
    lookup_s = time.perf_counter() - t0
    out = {
        "mode": mode,
        "queries": len(rqs),
        "reports": len(lat),
        "report_seconds": run_s,
        "reports_per_s": len(lat) / run_s if run_s else 0.0,
        "reports_per_cpu_s": len(cpu) / sum(cpu) if sum(cpu) else 0.0,
        "latency_p50_ms": 1000 * float(np.percentile(lat, 50)) if lat else 0.0,
        "latency_p99_ms": 1000 * float(np.percentile(lat, 99)) if lat else 0.0,
        "setup_seconds": setup_s,
        "lookups_per_s": len(batches) * 512 / lookup_s,
        "lookup_rows": found,
        "rss_before_kb": rss0,
        "rss_after_kb": rss1,
        "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "result_rows": res.rows,
        **{k: v for k, v in stats.items() if k != "mode"},
    }
    if remote is not None:
        out["remote_cache"] = remote.cache.stats()
        remote.close()
    return out


# ---------------------------------------------------------------------- parent


def build_store(tmp: Path, root: Path, manifest: dict) -> Path:
    """A store with every static graph of the static queries, under the IRIs they use."""
    inputs = []
    for q in static_queries(root, manifest):
        for s in q["statics"]:
            path = root / s["path"]
            if s["iri"] is None:
                inputs.append(str(path))
            else:
                nq = tmp / f"{abs(hash(s['iri']))}.nq"
                if not nq.exists():
                    with open(path, encoding="utf-8") as f, open(nq, "w", encoding="utf-8") as o:
                        for line in f:
                            line = line.rstrip()
                            if line.endswith("."):
                                o.write(f"{line[:-1].rstrip()} <{s['iri']}> .\n")
                inputs.append(str(nq))
    inputs = list(dict.fromkeys(inputs))
    store = tmp / "store"
    cmd = [
        sys.executable,
        "-m",
        "linkstream.cli",
        "load",
        "--store",
        str(store),
        "--partitions",
        "4",
        "--quiet",
    ]
    subprocess.run([*cmd, *inputs], check=True, cwd=REPO)
    return store


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reports", type=int, default=120, help="report times replayed per mode (default 120)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds over the modes (default 3)")
    ap.add_argument("--slice", action="store_true", help="use the repository's CityBench slice")
    ap.add_argument(
        "--cache-mb", type=float, default=16.0, help="remote modes' cache bound in MiB (default 16)"
    )
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--adv", default="", help=argparse.SUPPRESS)
    ap.add_argument("--store", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        out = child(args.child, args.adv, args.reports, args.slice, args.cache_mb)
        if args.store:
            out["oneshot"] = oneshot(args.child, args.adv, args.store)
        print(json.dumps(out))
        return
    root, manifest = corpus(args.slice)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with tempfile.TemporaryDirectory(prefix="store-path-") as tmpd:
        tmp = Path(tmpd)
        store = build_store(tmp, root, manifest)
        node = subprocess.Popen(
            [sys.executable, "-m", "linkstream.cli", "store-node", "--store", str(store)]
            # no ZooKeeper here, hence no cluster keys: plaintext TCP on loopback
            + ["--transports", "shm,tcp", "--insecure", "--log-level", "WARNING"],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        assert node.stdout is not None
        adv = node.stdout.readline().strip()
        node_rss = 0
        try:
            runs: dict[str, list[dict]] = {m: [] for m in MODES}
            for r in range(args.rounds):
                order = MODES[r % 3 :] + MODES[: r % 3]
                for mode in order:
                    cmd = [
                        sys.executable,
                        __file__,
                        "--child",
                        mode,
                        "--adv",
                        adv,
                        "--reports",
                        str(args.reports),
                        "--store",
                        str(store),
                    ]
                    if args.slice:
                        cmd.append("--slice")
                    cmd += ["--cache-mb", str(args.cache_mb)]
                    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO, env=env)
                    runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
            with open(f"/proc/{node.pid}/status", encoding="ascii") as f:
                node_rss = next(int(x.split()[1]) for x in f if x.startswith("VmRSS:"))
        finally:
            node.terminate()
            node.wait(timeout=10)

    def med(mode: str, key: str) -> float:
        return float(statistics.median(float(x[key]) for x in runs[mode]))

    corpus_name = "slice" if root == SLICE else "CityBench (shared corpus)"
    print(
        f"corpus: {corpus_name}; {runs['local'][0]['queries']} static queries; {args.reports} reports; "
        f"{args.rounds} rounds (medians)"
    )
    print(f"store node RSS: {node_rss / 1024:.1f} MiB")
    head = (
        f"{'mode':6} {'reports/s':>10} {'/CPU s':>8} {'p50 ms':>8} {'p99 ms':>8} {'setup s':>8} {'lookups/s':>11} "
        f"{'engine static KiB':>18} {'cache KiB':>10} {'RSS MiB':>8} {'x local':>8} {'CPU x':>6} {'lookups x':>10}"
    )
    print(head)
    base_tp, base_lk = med("local", "reports_per_s"), med("local", "lookups_per_s")
    base_tc = med("local", "reports_per_cpu_s")
    summary = {}
    for mode in MODES:
        tp, lk, tc = med(mode, "reports_per_s"), med(mode, "lookups_per_s"), med(mode, "reports_per_cpu_s")
        cache = statistics.median(x.get("cache_bytes", 0) for x in runs[mode])
        summary[mode] = {
            "reports_per_s": tp,
            "reports_per_cpu_s": tc,
            "cpu_throughput_ratio_vs_local": tc / base_tc if base_tc else 0.0,
            "latency_p50_ms": med(mode, "latency_p50_ms"),
            "latency_p99_ms": med(mode, "latency_p99_ms"),
            "setup_seconds": med(mode, "setup_seconds"),
            "lookups_per_s": lk,
            "engine_static_bytes": med(mode, "engine_static_bytes"),
            "cache_bytes": cache,
            "rss_after_mib": med(mode, "rss_after_kb") / 1024,
            "throughput_ratio_vs_local": tp / base_tp if base_tp else 0.0,
            "lookup_ratio_vs_local": lk / base_lk if base_lk else 0.0,
        }
        s = summary[mode]
        print(
            f"{mode:6} {tp:10.1f} {tc:8.1f} {s['latency_p50_ms']:8.2f} {s['latency_p99_ms']:8.2f} {s['setup_seconds']:8.3f} "
            f"{lk:11.0f} {s['engine_static_bytes'] / 1024:18.1f} {cache / 1024:10.1f} {s['rss_after_mib']:8.1f} "
            f"{s['throughput_ratio_vs_local']:8.2f} {s['cpu_throughput_ratio_vs_local']:6.2f} "
            f"{s['lookup_ratio_vs_local']:10.2f}"
        )
    for m in MODES:
        os_p50 = statistics.median(x["oneshot"]["p50_ms"] for x in runs[m])
        os_p99 = statistics.median(x["oneshot"]["p99_ms"] for x in runs[m])
        summary[m]["oneshot_p50_ms"], summary[m]["oneshot_p99_ms"] = os_p50, os_p99
    print(
        "one-shot lookup (all triples of one subject, warm cache) p50/p99 ms: "
        + ", ".join(
            f"{m} {summary[m]['oneshot_p50_ms']:.2f}/{summary[m]['oneshot_p99_ms']:.2f}" for m in MODES
        )
        + f" ({runs['local'][0]['oneshot']['queries']} queries, equal rows: "
        + f"{len({x['oneshot']['rows'] for m in MODES for x in runs[m]}) == 1})"
    )
    rows = {m: sorted({x["result_rows"] for x in runs[m]}) for m in MODES}
    print(f"result rows per mode (must be equal): {rows}")
    best = {m: max(float(x["reports_per_cpu_s"]) for x in runs[m]) for m in MODES}
    for m in MODES:
        summary[m]["best_reports_per_cpu_s"] = best[m]
        summary[m]["best_cpu_ratio_vs_local"] = best[m] / best["local"] if best["local"] else 0.0
    print(
        "best round, reports per CPU second: "
        + ", ".join(f"{m} {best[m]:.1f} ({summary[m]['best_cpu_ratio_vs_local']:.2f}x)" for m in MODES)
    )
    goal = summary["shm"]["throughput_ratio_vs_local"]
    goal_cpu = summary["shm"]["cpu_throughput_ratio_vs_local"]
    print(
        f"shm / local report throughput: {goal:.2f} wall, {goal_cpu:.2f} per CPU second "
        f"(goal >= 0.8: {'met' if min(goal, goal_cpu) >= 0.8 else 'NOT met'}); "
        f"bytes read from store nodes while replaying: {[x.get('replay_read_bytes') for x in runs['shm']]}"
    )
    for m in ("shm", "tcp"):
        held = [
            (
                x["engine_static_bytes"] + x.get("materialised_bytes", 0),
                x["cache_bytes"],
                x.get("cache_capacity", 0),
            )
            for x in runs[m]
        ]
        evictions = [x.get("cache_evictions", 0) for x in runs[m]]
        print(
            f"{m}: static bytes held (engine + emitted whole, cache, cache bound) per round: {held}; cache evictions "
            f"{evictions}; held = cache only: {all(e == 0 and c <= b for e, c, b in held)}"
        )
    out = REPO / "bench" / "results" / "store_path.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "args": vars(args),
                "corpus": corpus_name,
                "store_node_rss_kb": node_rss,
                "summary": summary,
                "runs": runs,
            },
            indent=2,
        )
    )
    print(f"raw figures: {out}")


if __name__ == "__main__":
    main()
