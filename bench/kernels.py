#!/usr/bin/env python3
"""Compiled kernels vs numpy kernels: CPU per report on the CityBench queries.

Runs every query of ``shared/citybench/manifest.json`` (or those named by ``--only``)
through ``linkstream replay`` in fresh processes, alternating between the compiled kernels
(``platform/operators/_kernels.c``) and the numpy kernels of the same tree
(``linkstream.operators.batch.use_native(False)``), ``--pairs`` times each.  For each query
it prints the CPU time of evaluation per report (the engine's evaluation timers read on
process CPU time: steadier than wall time on a shared machine) and of ``Engine.tick`` per
report, the smallest of the runs of each side, their ratio, and whether the two result
files are byte-identical (the exit status is 1 if any differs).  Geometric means close
the table; raw figures go to ``bench/results/kernels.json``.

``--versus DIR`` compares another build instead of the numpy kernels: the linkstream
package found in DIR (``DIR/linkstream``, e.g. a symlink to another checkout's
``platform/`` with its compiled extensions) against this tree, both with their compiled
kernels, alternating in the same way (the "numpy" column is then that package).

    python bench/kernels.py [--pairs 2] [--only ID ...] [--versus DIR] [--out FILE]

(``--child on|off ARGS...`` is how it runs one replay; not for direct use.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from citybench import ENV, REPO, SHARED, common_args, geomean  # noqa: E402


def child(mode: str, args: list[str], ticks_out: str) -> None:
    """One replay with the kernels ``mode`` (on/off), timers on process CPU time."""
    time.perf_counter = time.process_time  # the engine's evaluation timers, on CPU time
    from linkstream.engine import embedded
    from linkstream.operators import batch

    if batch.use_native(mode == "on") != (mode == "on"):
        sys.exit("the compiled kernels are not built in this install (make venv with a C compiler)")
    tick = embedded.Engine.tick
    acc = {"tick_cpu": 0.0, "ticks": 0}

    def timed_tick(self, *a, **k):
        t0 = time.process_time()
        try:
            return tick(self, *a, **k)
        finally:
            acc["tick_cpu"] += time.process_time() - t0
            acc["ticks"] += 1

    embedded.Engine.tick = timed_tick  # type: ignore[method-assign]
    from linkstream.cli import main as cli_main

    try:
        rc = cli_main(["replay", *args])
    finally:
        Path(ticks_out).write_text(json.dumps(acc))
    sys.exit(rc or 0)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=int, default=2, help="runs of each side per query (alternating)")
    ap.add_argument("--only", action="append", default=[], help="query id (repeatable)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "kernels.json"))
    ap.add_argument(
        "--versus",
        default=None,
        metavar="DIR",
        help="compare the linkstream package in DIR (DIR/linkstream) with this tree, both compiled",
    )
    a = ap.parse_args(argv)
    man = json.loads((SHARED / "citybench" / "manifest.json").read_text())
    base = man.get("base", "http://localhost/")
    env = {**ENV, "LINKSTREAM_SHARED": str(SHARED), "LINKSTREAM_QUERY_PARSE_CACHE": "off"}
    res: dict[str, dict[str, list[float]]] = {}
    differ = []
    modes = ["off", "on"]
    names = ("versus", "this") if a.versus else ("numpy", "compiled")
    print(
        f"{'query':<28} {names[0]:>8} {names[1]:>9} {'ratio':>6}   tick/report: {names[0]} {names[1]} ratio  same"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for q in man["queries"]:
            if a.only and q["id"] not in a.only:
                continue
            args = common_args(q, base, False)
            r = res.setdefault(q["id"], {})
            for k in range(a.pairs):
                for mode in modes if k % 2 == 0 else modes[::-1]:
                    st, tk = f"{tmp}/stats.json", f"{tmp}/ticks.json"
                    cmd = [sys.executable, __file__, "--child", "on" if a.versus else mode, tk, *args]
                    cmd += ["--out", f"{tmp}/{mode}.jsonl", "--stats", st]
                    # (--versus: "off" is the other package, run from DIR with its own kernels)
                    run_env = {**env, "PYTHONPATH": a.versus} if a.versus and mode == "off" else env
                    p = subprocess.run(cmd, env=run_env, capture_output=True, text=True)
                    if p.returncode:
                        raise SystemExit(f"{q['id']} ({mode}) failed: {p.stderr[-2000:]}")
                    s = json.loads(Path(st).read_text())["queries"][0]
                    reports = max(1, s["reports"])
                    r.setdefault(mode, []).append(1e3 * s["eval_seconds"] / reports)
                    r.setdefault(mode + "_tick", []).append(
                        1e3 * json.loads(Path(tk).read_text())["tick_cpu"] / reports
                    )
            same = Path(f"{tmp}/off.jsonl").read_bytes() == Path(f"{tmp}/on.jsonl").read_bytes()
            if not same:
                differ.append(q["id"])
            off, on, toff, ton = (min(r[m]) for m in ("off", "on", "off_tick", "on_tick"))
            print(
                f"{q['id']:<28} {off:8.3f} {on:9.3f} {off / on:6.2f}   {toff:17.3f} {ton:8.3f} {toff / ton:5.2f}  {same}",
                flush=True,
            )
    summary = {}
    for key in ("", "_tick"):
        g_off = geomean([min(r["off" + key]) for r in res.values()])
        g_on = geomean([min(r["on" + key]) for r in res.values()])
        summary["eval" if not key else "tick"] = {
            "numpy_ms": g_off,
            "compiled_ms": g_on,
            "ratio": g_off / g_on,
        }
        what = "evaluation" if not key else "Engine.tick"
        print(
            f"geo-mean CPU ms per report ({what}, min of {a.pairs}): {names[0]} {g_off:.3f}, "
            f"{names[1]} {g_on:.3f}, ratio x{g_off / g_on:.3f}"
        )
    if differ:
        print(f"results differ: {', '.join(differ)}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(
        json.dumps({"pairs": a.pairs, "versus": a.versus, "summary": summary, "queries": res}, indent=1)
    )
    print(f"raw figures: {a.out}")
    return 1 if differ else 0


if __name__ == "__main__":
    if len(sys.argv) > 3 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[4:], sys.argv[3])
    raise SystemExit(main())
