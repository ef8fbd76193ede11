#!/usr/bin/env python3
"""Queries of one join shape that differ in window steps: the widening guard on vs off.

One shared join serves queries of every report step whose common divisor its timed
windows step at, reaching back ``r + s - gcd`` for a range ``r`` at step ``s``
(``platform/operators/timed_window.py``).  A skewed mix (1-2 s ranges at steps of 1 s and
10 s) would make that window ten times longer than any range asked for; past
``STEP_WIDEN_MAX`` such a step gets a join of its own.  This runs each mix in fresh
processes, alternating the guard on (the default) and off (``STEP_WIDEN_MAX`` = infinity),
and prints the CPU time of the replay (engine evaluation and output), the joins each
planned, and whether their outputs are equal (sorted lines).  Raw figures go to
``bench/results/router_steps.json``.

    python bench/router_steps.py [--pairs 3] [--queries 200] [--elements 3000]

(``--child on|off MIX ...`` is how it runs one replay; not for direct use.)
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EX = "http://linkstream.example/bench#"
XSD = "http://www.w3.org/2001/XMLSchema#"
#: per mix, the (range ms, step ms) its queries alternate between
MIXES = {
    "skewed": [(2000, 10000), (1000, 1000)],
    "mild": [(10000, 1000), (10000, 2000)],
}


def stream_file(elements: int, seed: int = 3) -> str:
    """A timestamped N-Quads stream: one element every 100 ms, two triples each."""
    rnd = random.Random(seed)
    base = datetime.datetime(2014, 8, 1, tzinfo=datetime.UTC)
    lines = []
    for k in range(elements):
        t = (base + datetime.timedelta(milliseconds=100 * k)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        g = f"<{EX}el{k}>"
        lines.append(f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "{t}"^^<{XSD}dateTime> .')
        lines.append(f"<{EX}a{rnd.randrange(40)}> <{EX}p> <{EX}c{rnd.randrange(20)}> {g} .")
        lines.append(f"<{EX}a{rnd.randrange(40)}> <{EX}q> <{EX}b{rnd.randrange(50)}> {g} .")
    with tempfile.NamedTemporaryFile("w", suffix=".nq", delete=False) as f:
        f.write("\n".join(lines) + "\n")
    return f.name


def child(mode: str, mix: str, queries: int, path: str) -> None:
    from linkstream.engine.embedded import Engine
    from linkstream.engine.replay import replay
    from linkstream.operators import timed_window
    from linkstream.operators.mjoin import MJoinOperator
    from linkstream.query.continuous import parse_continuous

    if mode == "off":
        timed_window.STEP_WIDEN_MAX = float("inf")
    eng = Engine()
    rqs = []
    for k in range(queries):
        rng, step = MIXES[mix][k % len(MIXES[mix])]
        text = (
            f"PREFIX : <{EX}> SELECT ?x ?z WHERE {{ STREAM :s [RANGE {rng}ms SLIDE {step}ms] "
            f"{{ ?x :p :c{k % 20} . ?x :q ?z }} }}"
        )
        rqs.append(eng.register(parse_continuous(text, default_name=f"q{k}")))
    buf = io.StringIO()
    t0 = time.process_time()
    replay(eng, rqs, [(EX + "s", path)], buf)
    cpu = time.process_time() - t0
    lines = sorted(buf.getvalue().splitlines())
    joins = sum(isinstance(o, MJoinOperator) for o in eng.operators.values())
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    print(json.dumps({"cpu": cpu, "joins": joins, "lines": len(lines), "sha256": digest}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=3, help="alternating on/off pairs per mix (default 3)")
    ap.add_argument("--queries", type=int, default=200, help="queries per mix (default 200)")
    ap.add_argument("--elements", type=int, default=3000, help="stream elements, 100 ms apart (default 3000)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "router_steps.json"))
    args = ap.parse_args(argv)
    path = stream_file(args.elements)
    report: dict[str, object] = {"load": os.getloadavg(), "args": vars(args), "mixes": {}}
    ok = True
    try:
        for mix in MIXES:
            runs: dict[str, list[dict]] = {"on": [], "off": []}
            for _ in range(args.pairs):
                for mode in ("off", "on"):
                    cmd = [sys.executable, __file__, "--child", mode, mix, str(args.queries), path]
                    p = subprocess.run(cmd, capture_output=True, text=True)
                    if p.returncode != 0:
                        raise SystemExit(f"{mix}/{mode} failed: {p.stderr[-2000:]}")
                    runs[mode].append(json.loads(p.stdout.strip().splitlines()[-1]))
            on, off = (statistics.median(r["cpu"] for r in runs[m]) for m in ("on", "off"))
            same = len({r["sha256"] for r in runs["on"] + runs["off"]}) == 1
            ok &= same
            print(
                f"{mix:7s} {MIXES[mix]}: joins off {runs['off'][0]['joins']} / on {runs['on'][0]['joins']}, "
                f"CPU median off {off:.3f} s / on {on:.3f} s: x{off / on:.2f}, "
                f"{runs['on'][0]['lines']:,} lines, outputs {'equal' if same else 'DIFFER'}"
            )
            report["mixes"][mix] = {"runs": runs, "ratio_off_over_on": off / on, "equal": same}  # type: ignore[index]  # a dict made above
    finally:
        os.unlink(path)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        sys.exit(main())
