"""Remote region reads: shared memory and RDMA (where a device exists) vs the TCP fallback.

Graph exploration reads many small slices (a vertex's neighbour list) and some large
ones (a predicate's whole index).  This benchmark publishes a 10M-element int64 region
in a server process and times, in one run, random small reads (16 elements) and large
reads (1M elements) over every transport usable here.  Prints ratios against TCP and
writes raw figures to bench/results/regions.json.

Usage: python bench/regions.py [--small N] [--large N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from linkstream.rdma.regions import open_reader, transport

ROOT = Path(__file__).resolve().parents[1]
SERVER = r"""
import sys, numpy as np
from linkstream.rdma.regions import transport
s = transport(sys.argv[1]).server()
s.publish("ids", np.arange(10_000_000, dtype=np.int64))
print(s.descriptor().to_json(), flush=True)
sys.stdin.read()
s.close()
"""


def measure(name: str, small: int, large: int) -> dict[str, float]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER, name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    reader = open_reader(proc.stdout.readline())
    try:
        rng = np.random.default_rng(0)
        starts = rng.integers(0, 10_000_000 - 16, size=small)
        t0 = time.perf_counter()
        for s in starts:
            reader.read("ids", int(s), int(s) + 16)
        t_small = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(large):
            lo = (i * 1_000_000) % 9_000_000
            a = reader.read("ids", lo, lo + 1_000_000)
            assert a[0] == lo
        t_large = time.perf_counter() - t0
    finally:
        reader.close()
        proc.stdin.close()
        proc.wait(timeout=30)
    return {
        "small_reads_per_s": small / t_small,
        "small_read_us": t_small / small * 1e6,
        "large_read_mb_per_s": large * 8.0 / t_large,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--small", type=int, default=5000, help="random 16-element reads (default 5000)")
    ap.add_argument("--large", type=int, default=20, help="1M-element reads (default 20)")
    args = ap.parse_args()
    results: dict[str, dict[str, float]] = {}
    for name in ("tcp", "shm", "rdma"):
        ok, why = transport(name).available()
        if not ok:
            print(f"{name:5s} skipped: {why}")
            continue
        results[name] = measure(name, args.small, args.large)
        r = results[name]
        print(
            f"{name:5s} small reads {r['small_reads_per_s']:10.0f}/s ({r['small_read_us']:.1f} us)"
            f"   large reads {r['large_read_mb_per_s']:8.0f} MB/s"
        )
    base = results["tcp"]
    for name, r in results.items():
        if name != "tcp":
            print(
                f"{name} vs tcp: small reads x{r['small_reads_per_s'] / base['small_reads_per_s']:.1f}, "
                f"large reads x{r['large_read_mb_per_s'] / base['large_read_mb_per_s']:.1f}"
            )
    out = ROOT / "bench" / "results" / "regions.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=2))
    print(f"raw figures: {out}")


if __name__ == "__main__":
    main()
