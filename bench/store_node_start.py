#!/usr/bin/env python3
"""Store-node start-up: indexes rebuilt at every start vs kept on disk and memory-mapped.

For each ``--scale`` (1 = the CityBench static graphs; K adds K-1 renamed copies, as
``bench/oneshot.py`` does) the data are loaded with ``linkstream load --store``, then
``linkstream store-node --store DIR --insecure --transports shm,tcp`` is started
``--repeat`` times in each mode and timed from launch to its advertisement line (it is
serving then):

* ``rebuild``: ``--no-index-cache``, every partition index built in memory (the former
  behaviour, the baseline);
* ``first``: ``DIR/index/parts`` emptied first: indexes built and written;
* ``kept``: the indexes written by ``first`` memory-mapped.

The same three are also timed in-process (the ``StoreNode`` constructor alone, without
the interpreter's start).  Prints medians and the ratio rebuild / kept (> 1: faster with
the kept layout), and writes raw figures to ``bench/results/store_node_start.json``.

    python bench/store_node_start.py [--scale 1,4] [--repeat 3] [--partitions 4] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "bench"))

from oneshot import make_data  # noqa: E402  # the --scale copies of bench/oneshot.py

CLI = [sys.executable, "-m", "linkstream.cli"]
MODES = ("rebuild", "first", "kept")


def _parts(store: Path) -> Path:
    return store / "index" / "parts"


def start_process(store: Path, mode: str) -> float:
    """Seconds from launching ``linkstream store-node`` to its advertisement line."""
    if mode == "first":
        shutil.rmtree(_parts(store), ignore_errors=True)
    cmd = [*CLI, "store-node", "--store", str(store), "--insecure", "--transports", "shm,tcp"]
    cmd += ["--log-level", "WARNING"] + (["--no-index-cache"] if mode == "rebuild" else [])
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    dt = time.perf_counter() - t0
    proc.terminate()
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:  # say where it hangs (py-spy, if installed), then kill it
        if shutil.which("py-spy"):
            subprocess.run(["py-spy", "dump", "--pid", str(proc.pid)], check=False)
        proc.kill()
        _, err = proc.communicate()
        print(f"store-node did not exit within 60 s of SIGTERM: {err.strip()[-500:]}", file=sys.stderr)
    if not line.startswith("{"):
        raise SystemExit(f"store-node did not start: {err.strip()}")
    return dt


def start_in_process(store: Path, mode: str) -> tuple[float, dict[str, int]]:
    """Seconds the ``StoreNode`` constructor takes (and its mapped/built counts)."""
    from linkstream.store.node import StoreNode

    if mode == "first":
        shutil.rmtree(_parts(store), ignore_errors=True)
    t0 = time.perf_counter()
    node = StoreNode(store, transports=("shm", "tcp"), cache_index=mode != "rebuild")
    dt = time.perf_counter() - t0
    stats = {"mapped": node.index_stats.mapped, "built": node.index_stats.built, "bytes": node.bytes}
    node.close()
    return dt, stats


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--scale", default="1,4", help="comma-separated copies of the static graphs (default 1,4)"
    )
    ap.add_argument("--repeat", type=int, default=3, help="starts per mode (default 3)")
    ap.add_argument("--partitions", type=int, default=4, help="partitions of the store (default 4)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "store_node_start.json"))
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "platform"))
    from linkstream.store.layout import read_manifest

    results = []
    for scale in (int(x) for x in args.scale.split(",")):
        with tempfile.TemporaryDirectory(prefix="ls-nodestart-") as tmpd:
            tmp = Path(tmpd)
            files = make_data(tmp, scale)
            store = tmp / "store"
            t0 = time.perf_counter()
            load = [*CLI, "load", "--store", str(store), "--partitions", str(args.partitions), "--quiet"]
            subprocess.run([*load, *map(str, files)], check=True, cwd=REPO)
            load_s = time.perf_counter() - t0
            triples = read_manifest(store).total_triples
            row: dict[str, object] = {"scale": scale, "triples": triples, "load_s": load_s}
            for where, fn in (("process", start_process), ("in_process", start_in_process)):
                for mode in MODES:
                    times, extra = [], None
                    for _ in range(args.repeat):
                        r = fn(store, mode)
                        if isinstance(r, tuple):
                            r, extra = r
                        times.append(r)
                    row[f"{where}_{mode}_s"] = statistics.median(times)
                    row[f"{where}_{mode}_all_s"] = times
                    if extra is not None:
                        row[f"{where}_{mode}_stats"] = extra
            size = sum(f.stat().st_size for f in _parts(store).rglob("*.npy"))
            row["kept_index_bytes"] = size
            results.append(row)
            print(
                f"scale {scale}: {triples} triples, {args.partitions} partitions, kept indexes {size >> 20} MiB"
            )
            for where in ("process", "in_process"):
                r, f, k = (float(row[f"{where}_{m}_s"]) for m in MODES)  # type: ignore[arg-type]
                print(
                    f"  {where:10s} rebuild {r:6.3f} s  first {f:6.3f} s  kept {k:6.3f} s"
                    f"  ratio rebuild/kept {r / k:5.2f}x"
                )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"repeat": args.repeat, "cpus": os.cpu_count(), "runs": results}, indent=2))
    print(f"raw figures: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
