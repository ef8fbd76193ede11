#!/usr/bin/env python3
"""Ring-backed windows (``RingBuffer`` over a ``TransientStore``) vs ``StreamBuffer``.

Two measurements, each peer measured in the same run (alternating, best of ``--repeat``):

* **CityBench replay**: every query of the shared manifest replayed on its own through
  the embedded engine (the manifest's report times, or all of them with ``--full``),
  once with the default
  ``StreamBuffer`` and once with ``Engine(transient=TransientStore())``; the outputs
  must be identical.  Prints per-query and total ratios (ring seconds / buffer seconds).
* **window layer alone**: the elements of every CityBench stream appended to one buffer
  with time (3 s / 20 s), count (``[TRIPLES 50]``) and ``[NOW]`` windows advanced every
  second and collected every 256 elements -- no query evaluation, just what the buffer
  costs.

Raw figures go to ``bench/results/transient.json``.

    python bench/transient.py [--repeat 3] [--full] [--queries csparql-Q1,cqels-Q5] [--out FILE]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import time
from pathlib import Path

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.window import RingBuffer, StreamBuffer, WindowOperator
from linkstream.query.continuous import parse_continuous
from linkstream.query.windows import WindowSpec
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.static import load_graph
from linkstream.rdf.streams import StreamReader
from linkstream.store.transient import TransientStore

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()


def replay_query(q: dict, base: str, ring: bool, full: bool) -> tuple[float, str, dict]:
    """Seconds of one full replay of manifest query ``q``, its output and ring stats."""
    store = TransientStore(slot_ms=1000) if ring else None
    eng = Engine(default_step=q.get("default_step") or 1000, transient=store)
    for k, s in enumerate(q["statics"]):
        eng.add_static(s["iri"], load_graph(str(SHARED / s["path"]), eng.dictionary, bnode_prefix=f"s{k}_"))
    rq = eng.register(parse_continuous((SHARED / q["query"]).read_text(), default_name=q["name"], base=base))
    out = io.StringIO()
    streams = [(s["iri"], str(SHARED / s["path"])) for s in q["streams"]]
    t0 = time.perf_counter()
    replay(eng, [rq], streams, out, max_reports=None if full else q.get("max_reports"))
    dt = time.perf_counter() - t0
    stats = {s: store.stats(s) for s, _ in streams} if store is not None else {}
    return dt, out.getvalue(), stats


SPECS = [
    WindowSpec("time", 3000, 1000),
    WindowSpec("time", 20000, 1000),
    WindowSpec("count", count=50),
    WindowSpec("now"),
]


def window_layer(elements: list[tuple[int, object]], ring: bool) -> tuple[float, int]:
    """Seconds to append ``elements`` and advance the windows of :data:`SPECS` every second."""
    buf = RingBuffer("s", TransientStore(slot_ms=1000)) if ring else StreamBuffer("s")
    wins = [WindowOperator(buf, s, 1000) for s in SPECS]
    rows = 0
    t0 = time.perf_counter()
    c = None
    for i, (t, tr) in enumerate(elements):
        if c is None:
            c = (t // 1000 + 1) * 1000
        while c <= t:
            for w in wins:
                w.advance(c)
                for b in w._pending:
                    rows += b.cols.shape[1]
                w._pending = []
            c += 1000
        buf.append(t, tr)  # type: ignore[arg-type]
        if i % 256 == 255:
            buf.gc()
    return time.perf_counter() - t0, rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per peer (best is kept)")
    ap.add_argument("--full", action="store_true", help="every report time (not the manifest's first N)")
    ap.add_argument("--queries", default="", help="comma-separated manifest ids (default: all)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "transient.json"))
    args = ap.parse_args(argv)
    manifest = SHARED / "citybench" / "manifest.json"
    if not manifest.exists():
        print(f"shared corpus not found at {SHARED} (set LINKSTREAM_SHARED)", file=sys.stderr)
        return 2
    man = json.loads(manifest.read_text())
    wanted = {x for x in args.queries.split(",") if x}
    queries = [q for q in man["queries"] if not wanted or q["id"] in wanted]
    figures: dict = {"repeat": args.repeat, "full": args.full, "replay": {}, "window_layer": {}}

    tot = {"buffer": 0.0, "ring": 0.0}
    print(f"{'query':<28} {'buffer s':>9} {'ring s':>9} {'ring/buf':>9}  ring held/freed batches")
    for q in queries:
        best = {"buffer": float("inf"), "ring": float("inf")}
        outs: dict[str, str] = {}
        stats: dict = {}
        for _ in range(args.repeat):
            for mode in ("buffer", "ring"):
                dt, text, st = replay_query(q, man["base"], mode == "ring", args.full)
                best[mode] = min(best[mode], dt)
                outs[mode] = text
                stats = st or stats
        if outs["buffer"] != outs["ring"]:
            print(f"{q['id']}: ring and buffer outputs DIFFER", file=sys.stderr)
            return 1
        held = sum(s["batches"] for s in stats.values())
        freed = sum(s["freed"] for s in stats.values())
        ratio = best["ring"] / best["buffer"]
        print(f"{q['id']:<28} {best['buffer']:>9.3f} {best['ring']:>9.3f} {ratio:>9.2f}  {held}/{freed}")
        figures["replay"][q["id"]] = {
            "buffer_s": best["buffer"],
            "ring_s": best["ring"],
            "ratio": ratio,
            "rows": outs["ring"].count("\n"),
            "ring_batches_held": held,
            "ring_batches_freed": freed,
        }
        for k in tot:
            tot[k] += best[k]
    total_ratio = tot["ring"] / tot["buffer"] if tot["buffer"] else float("nan")
    figures["replay_total"] = {"buffer_s": tot["buffer"], "ring_s": tot["ring"], "ratio": total_ratio}
    print(f"{'TOTAL replay':<28} {tot['buffer']:>9.3f} {tot['ring']:>9.3f} {total_ratio:>9.2f}")

    # the window layer alone, on every stream of the corpus
    dic = MemoryDictionary()
    streams = sorted({(s["iri"], s["path"]) for q in man["queries"] for s in q["streams"]})
    lt = {"buffer": 0.0, "ring": 0.0}
    n_el = n_tr = 0
    for iri, path in streams:
        elements = [(el.t, el.triples) for el in StreamReader(str(SHARED / path), dic)]
        n_el += len(elements)
        n_tr += sum(len(tr) for _, tr in elements)
        best = {"buffer": float("inf"), "ring": float("inf")}
        rows = {}
        for _ in range(args.repeat):
            for mode in ("buffer", "ring"):
                dt, rows[mode] = window_layer(elements, mode == "ring")
                best[mode] = min(best[mode], dt)
        assert rows["buffer"] == rows["ring"], (iri, rows)
        figures["window_layer"][iri] = {**{f"{k}_s": v for k, v in best.items()}, "delta_rows": rows["ring"]}
        for k in lt:
            lt[k] += best[k]
    wl_ratio = lt["ring"] / lt["buffer"]
    figures["window_layer_total"] = {
        "streams": len(streams),
        "elements": n_el,
        "triples": n_tr,
        "buffer_s": lt["buffer"],
        "ring_s": lt["ring"],
        "ratio": wl_ratio,
    }
    print(
        f"window layer ({len(streams)} streams, {n_el} elements, {n_tr} triples, 4 windows each): "
        f"buffer {lt['buffer']:.3f}s ring {lt['ring']:.3f}s ring/buf {wl_ratio:.2f}"
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(figures, indent=1))
    print(f"raw figures: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
