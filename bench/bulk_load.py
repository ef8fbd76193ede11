#!/usr/bin/env python3
"""Bulk loading and dictionary throughput, all peers measured in the same run.

1. Dictionary encode / decode throughput per backend: ``memory:``, ``lmdb:`` and
   ``hbase://`` against the in-process HBase Thrift 1 emulator (a test double standing in
   for an HBase Thrift gateway: its figures measure the client protocol over a real
   socket, not an HBase cluster).  Per backend: encode of new terms, encode of known terms,
   lookup, and decode by a freshly opened dictionary (cold caches where the backend
   persists), in batches of 10,000 terms.
2. Bulk load of the same generated N-Triples / N-Quads files (``--triples``, 1M by default)
   by LinkStream's Spark loader (``local[2]``; the session is started before the clock
   runs, its start-up time is reported apart), LinkStream's pure-Python loader, rdflib
   parsing into an in-memory ``Graph`` / ``Dataset``, and pyoxigraph's ``Store.bulk_load``
   into an on-disk store.  Prints triples/s and ratios; raw figures go to
   ``bench/results/bulk_load.json``.

    python bench/bulk_load.py [--triples N] [--terms N] [--master local[2]] [--skip rdflib ...]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests.rdf.hbase_emulator

BATCH = 10_000


def _terms(n: int) -> list[str]:
    """``n`` distinct terms shaped like real data: IRIs, typed and language-tagged literals, blank nodes."""
    out = []
    for i in range(n):
        k = i % 4
        if k == 0:
            out.append(f"<http://example.org/bench/entity/{i}>")
        elif k == 1:
            out.append(f'"{i}"^^<http://www.w3.org/2001/XMLSchema#integer>')
        elif k == 2:
            out.append(f'"label number {i}"@en')
        else:
            out.append(f"_:b{i}")
    return out


def _timed(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_dictionary(name: str, uri: str, n: int) -> dict[str, float | int | str]:
    """Throughputs (terms/s) of one backend on ``n`` terms."""
    import numpy as np

    from linkstream.rdf.dictionary import open_dictionary

    terms = _terms(n)
    batches = [terms[k : k + BATCH] for k in range(0, n, BATCH)]
    d = open_dictionary(uri)
    ids: list[np.ndarray] = []
    t_new = _timed(lambda: ids.extend(d.encode_many(b) for b in batches))
    t_known = _timed(lambda: [d.encode_many(b) for b in batches])
    if uri != "memory:":  # reopen: lookups and decodes start with cold in-process caches
        d.close()
        d = open_dictionary(uri)
    t_lookup = _timed(lambda: [d.lookup_many(b) for b in batches])
    if uri != "memory:":
        d.close()
        d = open_dictionary(uri)
    decoded: list[str] = []
    t_decode = _timed(lambda: [decoded.extend(d.decode_many(i)) for i in ids])
    if decoded != terms:
        raise AssertionError(f"{name}: decode does not give the encoded terms back")
    d.close()
    return {
        "backend": name,
        "terms": n,
        "encode_new_per_s": n / t_new,
        "encode_known_per_s": n / t_known,
        "lookup_per_s": n / t_lookup,
        "decode_per_s": n / t_decode,
    }


def bench_spark(files: list[str], work: Path, master: str) -> dict[str, float | int]:
    from linkstream.bulk.session import spark_session
    from linkstream.bulk.spark_load import spark_load

    t0 = time.perf_counter()
    spark = spark_session(master, app_name="linkstream-bench", driver_memory="2g")
    startup = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        res = spark_load(str(work / "spark-store"), files, spark=spark)
        wall = time.perf_counter() - t0
    finally:
        spark.stop()
    return {
        "seconds": wall,
        "session_startup_seconds": startup,
        "statements": res.statements,
        "distinct_triples": res.total_triples,
        "stage_seconds": res.seconds,
    }


def bench_python(files: list[str], work: Path) -> dict[str, float | int]:
    from linkstream.store.loader import load_store

    t0 = time.perf_counter()
    entries = load_store(work / "python-store", files)
    return {"seconds": time.perf_counter() - t0, "distinct_triples": sum(e.triples for e in entries)}


def bench_rdflib(files: list[str]) -> dict[str, float | int]:
    import warnings

    import rdflib

    t0 = time.perf_counter()
    n = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for f in files:
            if f.endswith(".nq"):
                ds = rdflib.Dataset()
                ds.parse(f, format="nquads")
                n += sum(len(g) for g in ds.graphs())
            else:
                g = rdflib.Graph()
                g.parse(f, format="nt")
                n += len(g)
    return {"seconds": time.perf_counter() - t0, "triples_in_graphs": n}


def bench_oxigraph(files: list[str], work: Path) -> dict[str, float | int]:
    import pyoxigraph as ox

    t0 = time.perf_counter()
    store = ox.Store(str(work / "oxigraph"))
    for f in files:
        fmt = ox.RdfFormat.N_QUADS if f.endswith(".nq") else ox.RdfFormat.N_TRIPLES
        store.bulk_load(path=f, format=fmt)
    store.flush()
    wall = time.perf_counter() - t0
    return {"seconds": wall, "quads": len(store)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--triples", type=int, default=1_000_000, help="generated statements (default 1M)")
    ap.add_argument("--terms", type=int, default=200_000, help="terms per dictionary backend (default 200k)")
    ap.add_argument(
        "--hbase-terms", type=int, default=20_000, help="terms for the HBase emulator (default 20k)"
    )
    ap.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    ap.add_argument(
        "--skip",
        action="append",
        default=[],
        choices=["dictionary", "spark", "python", "rdflib", "oxigraph"],
        help="leave a part out (repeatable)",
    )
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "bulk_load.json"))
    args = ap.parse_args(argv)

    from linkstream.bulk.synthetic import write_synthetic

    report: dict[str, object] = {
        "machine": {"python": platform.python_version(), "platform": platform.platform()},
        "triples": args.triples,
    }
    work = Path(tempfile.mkdtemp(prefix="linkstream-bulk-bench-"))
    try:
        if "dictionary" not in args.skip:
            from tests.rdf.hbase_emulator import HBaseThriftEmulator

            rows = [
                bench_dictionary("memory", "memory:", args.terms),
                bench_dictionary("lmdb", f"lmdb:{work / 'dict-bench'}", args.terms),
            ]
            with HBaseThriftEmulator() as emu:
                rows.append(
                    bench_dictionary("hbase-emulator", f"hbase://{emu.address}/bench", args.hbase_terms)
                )
            report["dictionary"] = rows
            print(
                f"{'backend':<16}{'terms':>9}{'encode new/s':>15}{'encode known/s':>16}{'lookup/s':>12}{'decode/s':>12}"
            )
            for r in rows:
                print(
                    f"{r['backend']:<16}{r['terms']:>9,}{r['encode_new_per_s']:>15,.0f}"
                    f"{r['encode_known_per_s']:>16,.0f}{r['lookup_per_s']:>12,.0f}{r['decode_per_s']:>12,.0f}"
                )
            lm = rows[1]
            for r in (rows[0], rows[2]):
                print(
                    f"  {r['backend']} / lmdb: encode new x{r['encode_new_per_s'] / lm['encode_new_per_s']:.2f}, "
                    f"decode x{r['decode_per_s'] / lm['decode_per_s']:.2f}"
                )

        gen = write_synthetic(str(work / "data"), args.triples, files=4, seed=1)
        files = gen.paths
        print(
            f"\nbulk load of {gen.lines:,} statements ({sum(Path(f).stat().st_size for f in files):,} bytes)"
        )
        loads: dict[str, dict[str, object]] = {}
        if "spark" not in args.skip:
            loads["spark"] = bench_spark(files, work, args.master)
        if "python" not in args.skip:
            loads["python"] = bench_python(files, work)
        if "rdflib" not in args.skip:
            loads["rdflib"] = bench_rdflib(files)
        if "oxigraph" not in args.skip:
            loads["oxigraph"] = bench_oxigraph(files, work)
        for name, r in loads.items():
            r["statements_per_s"] = gen.lines / float(r["seconds"])  # type: ignore[arg-type]
            extra = (
                f" (+{r['session_startup_seconds']:.1f}s session start)"
                if "session_startup_seconds" in r
                else ""
            )
            print(f"{name:<10}{r['seconds']:>8.1f}s {r['statements_per_s']:>12,.0f} statements/s{extra}")
        ratios = {}
        for a in ("spark", "python"):
            for b in ("python", "rdflib", "oxigraph"):
                if a != b and a in loads and b in loads:
                    ratios[f"{a}/{b}"] = loads[a]["statements_per_s"] / loads[b]["statements_per_s"]  # type: ignore[operator]
        for k, v in ratios.items():
            print(f"  {k}: x{v:.2f}")
        report["bulk_load"] = loads
        report["ratios"] = ratios
    finally:
        shutil.rmtree(work, ignore_errors=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(f"\nraw figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
