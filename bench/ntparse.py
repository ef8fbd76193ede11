#!/usr/bin/env python3
"""The compiled N-Triples scanner (``platform/rdf/_ntparse.c``) vs the Python line parser.

Two measures, each in fresh processes alternating between the compiled scanner and the
Python parser of the same tree (``linkstream.rdf.ntfast.use_native(False)``), ``--pairs``
times, on process CPU time (steadier than wall time on a shared machine):

* parse + encode: ``load_graph`` of the CityBench static files and of a generated static
  graph of ``--triples`` statements (CityBench-like shapes, with 1% language-tagged and 0.5%
  escaped literals that the Python parser reads) into a fresh in-memory dictionary:
  triples per CPU second of each side, the smallest run of each, and their ratio; the
  triples and dictionaries of the two sides must be equal;
* stream files: ``StreamReader`` over CityBench's stream files (all of them in one process)
  and a generated stream of ``--elements`` elements (LSBench-like: a timestamp line and 1-4
  quads each): elements and triples per CPU second of each side; elements, triples and
  dictionaries must be equal;
* whole process: ``linkstream replay`` of the CityBench queries (manifest report limits):
  process CPU (user + system) of each side, the per-query ratio and its geometric mean; the
  two result files must be byte-identical (the exit status is 1 if any differs).

Raw figures go to ``bench/results/ntparse.json``.

    python bench/ntparse.py [--pairs 2] [--triples 1000000] [--elements 200000] [--only ID ...] [--no-replay] [--out FILE]

(``--child-load`` / ``--child-replay`` are how it runs one process; not for direct use.)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from citybench import ENV, REPO, SHARED, common_args, geomean  # noqa: E402

XSD = "http://www.w3.org/2001/XMLSchema#"


def _set(mode: str) -> None:
    from linkstream.rdf import ntfast

    if ntfast.use_native(mode == "on") != (mode == "on"):
        sys.exit("the compiled scanner is not built in this install (make venv with a C compiler)")


def child_load(mode: str, path: str) -> None:
    """One load_graph; prints triples, CPU seconds and a digest of triples + dictionary."""
    _set(mode)
    from linkstream.rdf.dictionary import MemoryDictionary
    from linkstream.rdf.static import load_graph

    d = MemoryDictionary()
    t0 = time.process_time()
    triples = load_graph(path, d, bnode_prefix="b_", log=lambda m: None)
    cpu = time.process_time() - t0
    h = hashlib.sha256(triples.tobytes())
    for t in d._terms[1:]:
        h.update(str(t).encode("utf-8", "surrogatepass") + b"\n")
    print(json.dumps({"triples": len(triples), "cpu": cpu, "digest": h.hexdigest()}))


def child_stream(mode: str, paths: list[str]) -> None:
    """``StreamReader`` over the stream files, one dictionary; prints triples, CPU seconds and a
    digest of the elements + dictionary."""
    _set(mode)
    from linkstream.rdf.dictionary import MemoryDictionary
    from linkstream.rdf.streams import StreamReader

    d = MemoryDictionary()
    h = hashlib.sha256()
    n = 0
    t0 = time.process_time()
    for k, path in enumerate(paths):
        for e in StreamReader(path, d, bnode_prefix=f"s{k}_", log=lambda m: None):
            h.update(b"%d %d %d" % (e.t, e.seq, len(e.triples)))
            h.update(e.triples.tobytes())
            n += len(e.triples)
    cpu = time.process_time() - t0
    for t in d._terms[1:]:
        h.update(str(t).encode("utf-8", "surrogatepass") + b"\n")
    print(json.dumps({"triples": n, "cpu": cpu, "digest": h.hexdigest()}))


def generate_stream(path: Path, n: int, seed: int = 17) -> None:
    """A stream of ``n`` elements in LSBench's shape: a timestamp line, 1-4 quads of posts,
    users and tags."""
    rnd = random.Random(seed)
    ex = "http://lsbench.example/"
    t = 1700000000000
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            t += rnd.randrange(0, 40)
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t // 1000)) + ".%03dZ" % (t % 1000)
            f.write(
                f'<{ex}ev/{i}> <http://www.w3.org/ns/prov#generatedAtTime> "{stamp}"^^<{XSD}dateTime> .\n'
            )
            f.write(
                f"<{ex}user/{rnd.randrange(2000)}> <http://rdfs.org/sioc/ns#creator_of> <{ex}post/{i}> <{ex}ev/{i}> .\n"
            )
            for _ in range(rnd.randrange(0, 4)):
                f.write(
                    f"<{ex}post/{i}> <http://www.ins.cwi.nl/sib/vocabulary/hashtag> <{ex}tag/{rnd.randrange(80)}> <{ex}ev/{i}> .\n"
                )


def child_replay(mode: str, args: list[str]) -> None:
    _set(mode)
    from linkstream.cli import main

    sys.exit(main(["replay", *args]))


def generate(path: Path, n: int, seed: int = 16) -> None:
    """A static graph of ``n`` statements in CityBench's shapes (sensors, observations,
    blank-node points, typed literals), with a few lines the Python parser reads."""
    rnd = random.Random(seed)
    ns = "http://www.insight-centre.org/dataset/SampleEventService#"
    preds = [f"<http://purl.oclc.org/NET/ssnx/ssn#p{i}>" for i in range(24)]
    preds.append("<http://www.w3.org/1999/02/22-rdf-syntax-ns#type>")
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            s = f"<{ns}sensor{i // 8}>" if i % 3 else f"_:point{i // 6}"
            p = preds[rnd.randrange(len(preds))]
            r = rnd.random()
            if r < 0.35:
                o = f"<{ns}property-{rnd.randrange(n // 4 + 1)}>"
            elif r < 0.65:
                o = f'"{rnd.uniform(-90, 90):.6f}"^^<{XSD}decimal>'
            elif r < 0.8:
                o = f'"{rnd.randrange(10**6)}"^^<{XSD}integer>'
            elif r < 0.9:
                o = f"_:point{rnd.randrange(n // 6 + 1)}"
            elif r < 0.985:
                o = f'"Aarhus event {rnd.randrange(n)} \u00e5"'
            elif r < 0.995:
                o = f'"Begivenhed {rnd.randrange(1000)}"@da'
            else:
                o = f'"line\\nbreak {rnd.randrange(1000)}"'
            f.write(f"{s} {p} {o} .\n")


def _run(cmd: list[str]) -> tuple[subprocess.CompletedProcess[str], float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed: {p.stderr[-2000:]}")
    return p, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def bench_load(paths: list[tuple[str, list[Path]]], pairs: int) -> tuple[list[dict], bool]:
    """``paths``: (what, files) pairs; ``what`` is "graph" (one static file) or "streams"."""
    me = [sys.executable, str(Path(__file__).resolve())]
    rows, same = [], True
    print(f"{'file':<34}{'triples':>10}{'python t/s':>13}{'compiled t/s':>14}{'ratio':>8}")
    for what, files in paths:
        child = "--child-load" if what == "graph" else "--child-stream"
        path = files[0] if len(files) == 1 else Path(f"{len(files)} stream files")
        got: dict[str, list[dict]] = {"off": [], "on": []}
        for k in range(pairs):
            for mode in ("on", "off") if k % 2 else ("off", "on"):
                p, _ = _run([*me, child, mode, *map(str, files)])
                got[mode].append(json.loads(p.stdout.strip().splitlines()[-1]))
        digests = {r["digest"] for rs in got.values() for r in rs}
        same &= len(digests) == 1
        n = got["on"][0]["triples"]
        py, c = min(r["cpu"] for r in got["off"]), min(r["cpu"] for r in got["on"])
        row = {"file": path.name, "triples": n, "python_cpu_s": py, "compiled_cpu_s": c}
        row |= {"python_tps": n / py, "compiled_tps": n / c, "ratio": py / c, "equal": len(digests) == 1}
        rows.append(row)
        print(
            f"{path.name:<34}{n:>10}{row['python_tps']:>13,.0f}{row['compiled_tps']:>14,.0f}"
            f"{row['ratio']:>8.2f}{'' if row['equal'] else '  DIFFER'}",
            flush=True,
        )
    return rows, same


def bench_replay(queries: list[dict], base: str, pairs: int, tmp: Path) -> tuple[list[dict], bool]:
    me = [sys.executable, str(Path(__file__).resolve())]
    rows, same = [], True
    print(f"\n{'query':<30}{'python cpu s':>13}{'compiled cpu s':>15}{'ratio':>8}")
    for q in queries:
        ca = common_args(q, base, False)
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        outs: dict[str, bytes] = {}
        for k in range(pairs):
            for mode in ("on", "off") if k % 2 else ("off", "on"):
                out = tmp / f"{mode}.jsonl"
                _, c = _run([*me, "--child-replay", mode, *ca, "--out", str(out)])
                cpu[mode].append(c)
                outs[mode] = out.read_bytes()
        equal = outs["on"] == outs["off"]
        same &= equal
        py, c = min(cpu["off"]), min(cpu["on"])
        rows.append({"id": q["id"], "python_cpu_s": py, "compiled_cpu_s": c, "ratio": py / c, "equal": equal})
        print(f"{q['id']:<30}{py:>13.3f}{c:>15.3f}{py / c:>8.3f}{'' if equal else '  DIFFER'}", flush=True)
    return rows, same


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child-load"]:
        child_load(argv[1], argv[2])
        return 0
    if argv[:1] == ["--child-stream"]:
        child_stream(argv[1], argv[2:])
        return 0
    if argv[:1] == ["--child-replay"]:
        child_replay(argv[1], argv[2:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--triples", type=int, default=1_000_000, help="statements of the generated graph")
    ap.add_argument("--elements", type=int, default=200_000, help="elements of the generated stream")
    ap.add_argument("--only", action="append", default=[], help="CityBench query id (repeatable)")
    ap.add_argument("--no-replay", action="store_true", help="parse + encode only")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "ntparse.json"))
    args = ap.parse_args(argv)
    man = json.loads((SHARED / "citybench" / "manifest.json").read_text())
    queries = [q for q in man["queries"] if not args.only or q["id"] in args.only]
    with tempfile.TemporaryDirectory() as tmpd:
        tmp = Path(tmpd)
        gen = tmp / f"generated_{args.triples}.nt"
        generate(gen, args.triples)
        stream = tmp / f"stream_{args.elements}.nq"
        generate_stream(stream, args.elements)
        statics = sorted((SHARED / "citybench" / "static").glob("*.nt"))
        streams = sorted((SHARED / "citybench" / "streams").glob("*.nq"))
        todo = [("graph", [p]) for p in [*statics, gen]] + [("streams", streams), ("streams", [stream])]
        load_rows, load_same = bench_load(todo, args.pairs)
        replay_rows: list[dict] = []
        replay_same = True
        if not args.no_replay:
            replay_rows, replay_same = bench_replay(queries, man.get("base", ""), args.pairs, tmp)
    summary: dict[str, float] = {}
    if replay_rows:
        summary["replay_geomean_ratio"] = geomean([r["ratio"] for r in replay_rows])
        summary["replay_total_ratio"] = sum(r["python_cpu_s"] for r in replay_rows) / sum(
            r["compiled_cpu_s"] for r in replay_rows
        )
        print(
            f"\nwhole process, {len(replay_rows)} queries: CPU python / compiled geo-mean "
            f"x{summary['replay_geomean_ratio']:.3f}, total x{summary['replay_total_ratio']:.3f}"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(
        json.dumps(
            {"summary": summary, "load": load_rows, "replay": replay_rows, "pairs": args.pairs}, indent=1
        )
    )
    print(f"raw figures: {args.out}")
    if not (load_same and replay_same):
        print("the compiled and Python paths DIFFER")
        return 1
    print("the compiled and Python paths give the same triples, dictionaries and results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
