#!/usr/bin/env python3
"""Hybrid store: indexed lookups vs peers measured in the same run.

Over the CityBench static graphs (and a synthetic graph of ``--synthetic`` triples):

* store open: first open (index build + cache) vs second open (memory-mapped cache);
* triple-pattern lookups (``s??``, ``sp?``, ``?po``, ``??o``) on the indexed
  :class:`~linkstream.store.persistent.PersistentStore` vs a numpy mask scan (the
  in-memory reference store) and vs pyoxigraph's ``quads_for_pattern`` (CityBench only);
* batched exploration: ``neighbours`` of 10k vertices in one call vs one ``match`` per vertex;
* absorbing: batches/s of 2-triple batches while snapshots are taken, snapshot cost.

Prints ratios; raw figures go to ``bench/results/store.json``.

    python bench/store.py [--synthetic 1000000] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.store import MemoryStore, PersistentStore, layout
from linkstream.store.loader import load_store

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()


def timed(fn, repeat: int = 1) -> float:
    t0 = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - t0) / repeat


def lookups(sn, graph, probes: np.ndarray, shape: str) -> float:
    """Seconds for one lookup per probe row of the given shape."""
    q = {"s??": (1, 0, 0), "sp?": (1, 1, 0), "?po": (0, 1, 1), "??o": (0, 0, 1)}[shape]
    rows = probes.tolist()
    t0 = time.perf_counter()
    for r in rows:
        sn.match(graph, r[0] if q[0] else None, r[1] if q[1] else None, r[2] if q[2] else None)
    return time.perf_counter() - t0


def bench_graph(name: str, store_dir: Path, figures: dict, oxigraph_files: list[Path] | None) -> None:
    dic = MemoryDictionary() if oxigraph_files is None else None
    t_first = timed(lambda: PersistentStore.open(store_dir, dictionary=dic).close())
    t_second = timed(lambda: PersistentStore.open(store_dir, dictionary=dic).close(), 3)
    store = PersistentStore.open(store_dir, dictionary=dic)
    sn = store.snapshot()
    t = layout.read_graph(store_dir, None)
    ref = MemoryStore(store.dictionary, {None: t}).snapshot()
    rng = np.random.default_rng(0)
    probes = t[rng.integers(0, len(t), 300)]
    f: dict = {"triples": int(len(t)), "open_first_s": t_first, "open_cached_s": t_second}
    print(f"[{name}] {len(t):,} triples: open {t_first:.3f}s, cached (mmap) {t_second:.4f}s "
          f"-> {t_first / t_second:.1f}x")  # fmt: skip
    for shape in ("s??", "sp?", "?po", "??o"):
        ours = lookups(sn, None, probes, shape)
        scan = lookups(ref, None, probes[:30], shape) * 10
        f[f"lookup_{shape}_us"] = ours / len(probes) * 1e6
        f[f"scan_{shape}_us"] = scan / len(probes) * 1e6
        line = f"[{name}] {shape}: {ours / len(probes) * 1e6:8.1f} us/lookup, scan x{scan / ours:7.1f}"
        if oxigraph_files is not None and shape in ("s??", "sp?"):
            ox = oxigraph_lookup(oxigraph_files, store, probes, shape)
            f[f"oxigraph_{shape}_us"] = ox / len(probes) * 1e6
            line += f", pyoxigraph x{ox / ours:5.2f}"
        print(line)
    vertices = t[rng.integers(0, len(t), 10_000), 0]
    batched = timed(lambda: sn.neighbours(None, vertices, None, "out"), 3)
    single = timed(lambda: [sn.match(None, int(v), None, None) for v in vertices[:2000]]) * 5
    f["neighbours_10k_s"], f["match_loop_10k_s"] = batched, single
    print(
        f"[{name}] neighbours of 10k vertices: {batched * 1e3:.1f} ms, per-vertex match x{single / batched:.1f}"
    )
    figures[name] = f
    store.close()


def oxigraph_lookup(files: list[Path], store: PersistentStore, probes: np.ndarray, shape: str) -> float:
    import pyoxigraph as ox

    st = ox.Store()
    for path in files:
        st.bulk_load(path=str(path), format=ox.RdfFormat.N_TRIPLES)
    terms = store.dictionary.decode_many(probes[:, :2].reshape(-1))
    pairs = [(terms[2 * i], terms[2 * i + 1]) for i in range(len(probes))]
    pairs = [(s, p) for s, p in pairs if s.startswith("<")]
    nodes = [(ox.NamedNode(s[1:-1]), ox.NamedNode(p[1:-1])) for s, p in pairs]
    t0 = time.perf_counter()
    for s, p in nodes:
        list(st.quads_for_pattern(s, p if shape == "sp?" else None, None, ox.DefaultGraph()))
    return (time.perf_counter() - t0) * len(probes) / max(1, len(nodes))


def bench_absorb(figures: dict) -> None:
    base = np.random.default_rng(2).integers(1, 10**6, size=(100_000, 3))
    store = PersistentStore(MemoryDictionary(), {None: base}, compact_threshold=4096)
    n = 3000
    t0 = time.perf_counter()
    for i in range(n):
        store.absorb("obs", i, np.array([[1000 + i, 5, 7 + i], [1000 + i, 6, 9 + i]]))
    dt = time.perf_counter() - t0
    store.wait_compaction()
    snap = timed(store.snapshot, 10000)
    mem = MemoryStore(MemoryDictionary(), {None: base})
    t0 = time.perf_counter()
    for i in range(n):
        mem.absorb("obs", i, np.array([[1000 + i, 5, 7 + i], [1000 + i, 6, 9 + i]]))
    dm = time.perf_counter() - t0
    figures["absorb"] = {"batches": n, "base": len(base), "seconds": dt, "copy_store_seconds": dm,
                         "snapshot_us": snap * 1e6}  # fmt: skip
    print(f"[absorb] 2-triple batches into a 100k-triple graph: {n / dt:,.0f} batches/s "
          f"({store.compactions} compactions), copy-on-absorb reference store x{dm / dt:.1f} slower; "
          f"snapshot {snap * 1e6:.2f} us")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--synthetic", type=int, default=1_000_000, help="triples of the synthetic graph (0: skip)"
    )
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "store.json"))
    args = ap.parse_args()
    figures: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = sorted((SHARED / "citybench" / "static").glob("*.nt"))
        t0 = time.perf_counter()
        load_store(Path(tmp) / "city", files, partitions=4)
        figures["citybench_load_s"] = time.perf_counter() - t0
        print(f"[citybench] pure-Python load {figures['citybench_load_s']:.2f}s")
        bench_graph("citybench", Path(tmp) / "city", figures, files)
        if args.synthetic:
            rng = np.random.default_rng(1)
            n = args.synthetic
            t = np.stack(
                [rng.integers(1, n // 5, n), rng.integers(1, 40, n), rng.integers(1, n // 2, n)], axis=1
            )
            e = layout.write_partitions(Path(tmp) / "syn", None, t, 4)
            layout.write_manifest(Path(tmp) / "syn", dictionary="memory:", partitions=4, graphs=[e])
            bench_graph("synthetic", Path(tmp) / "syn", figures, None)
    bench_absorb(figures)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"raw figures: {out}")


if __name__ == "__main__":
    main()
