#!/usr/bin/env python3
"""CPU per report of an embedded replay with many CityBench-template queries (issue 16).

Replays the first ``--elements`` elements of the three CityBench traffic streams
(``citybench/streams`` of the shared corpus) with ``N`` queries from the templates of
``tests/engine/test_sharing.py`` (``generate``, as ``bench/live_cluster.py`` registers them)
in an embedded :class:`~linkstream.engine.embedded.Engine`, each size in its own child
process, and prints per size: the CPU seconds of the replay, the result lines, and the
CPU time per 1,000 result lines.  With ``--profile`` the child also runs under cProfile and
reports where the time of routed queries goes: the exclusive time of
``Dependencies.dirty`` -> ``_Routed.touched`` (deciding which routed queries changed)
against its inclusive time (the routers and the shared joins below them, which it is the
first to pull at every epoch), and ``RouterOperator.compute`` without its join.

``--baseline-tree DIR`` runs every size on an older tree too (``git archive <commit>
platform | tar -x -C DIR``), in the same run: the ratio of CPU times, and whether the two
outputs are byte-identical (their SHA-256).  Raw figures go to
``bench/results/routed_replay.json``.

    python bench/routed_replay.py [--queries 100 400] [--elements 100] [--baseline-tree DIR] [--profile]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
SES = "http://www.insight-centre.org/dataset/SampleEventService#"
TRAFFIC = ["AarhusTrafficData182955", "AarhusTrafficData158505", "AarhusTrafficData192707"]


def child(n: int, streams_dir: str, profile: bool) -> dict:
    """One replay in this process (under whatever ``linkstream`` the path resolves)."""
    import io

    import linkstream.engine.dirty as dirty
    from linkstream.engine.embedded import Engine
    from linkstream.engine.replay import replay
    from linkstream.query.continuous import parse_continuous
    from linkstream.rdf.static import load_graph
    from tests.engine.test_sharing import REPO as REPO_GRAPH
    from tests.engine.test_sharing import generate

    eng = Engine()
    tr = load_graph(str(SHARED / "citybench" / "static" / "SensorRepository.nt"), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO_GRAPH, tr)
    rqs = [eng.register(parse_continuous(t, default_name=name)) for name, t in generate(n).items()]
    streams = [(SES + s, str(Path(streams_dir) / f"{s}.nq")) for s in TRAFFIC]
    buf = io.StringIO()
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
    c0, w0 = time.process_time(), time.perf_counter()
    if prof is not None:
        prof.enable()
    replay(eng, rqs, streams, buf)
    if prof is not None:
        prof.disable()
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    text = buf.getvalue()
    res = {
        "queries": n,
        "tree": str(Path(dirty.__file__).resolve().parent.parent),
        "cpu_s": round(cpu, 3),
        "wall_s": round(wall, 3),
        "lines": text.count("\n"),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }
    if prof is not None:
        import inspect
        import pstats

        from linkstream.operators.router import RouterOperator

        st = pstats.Stats(prof).stats  # type: ignore[attr-defined]  # pstats keeps its table here
        total = sum(v[2] for v in st.values())
        router_line = inspect.getsourcelines(RouterOperator.compute)[1]
        for (path, line_no, func), (_cc, _nc, tt, ct, _callers) in st.items():
            key = None
            if path.endswith("engine/dirty.py") and func == "touched":
                key = "touched"
            elif path.endswith("operators/router.py") and line_no == router_line:
                key = "router_compute"
            elif path.endswith("engine/embedded.py") and func == "tick":
                key = "tick"
            if key is not None:
                # both touched methods live in dirty.py: sum them (the keyed one is cheap)
                old = res.get(key, {"excl_s": 0.0, "incl_s": 0.0})
                res[key] = {"excl_s": round(old["excl_s"] + tt, 3), "incl_s": round(old["incl_s"] + ct, 3)}
        res["profiled_s"] = round(total, 3)
    return res


def trim(dest: Path, elements: int) -> None:
    for s in TRAFFIC:
        lines, k = [], 0
        with open(SHARED / "citybench" / "streams" / f"{s}.nq", encoding="utf-8") as f:
            for line in f:
                if "generatedAtTime" in line:
                    k += 1
                    if k > elements:
                        break
                lines.append(line)
        (dest / f"{s}.nq").write_text("".join(lines), encoding="utf-8")


def tree_path(tree: str) -> str:
    """A PYTHONPATH entry under which ``linkstream`` is ``tree/platform``."""
    root = Path(tree).resolve()
    src = root / "platform" if (root / "platform").is_dir() else root
    link_dir = Path(tempfile.mkdtemp(prefix="ls-routed-"))
    (link_dir / "linkstream").symlink_to(src, target_is_directory=True)
    return str(link_dir)


def run_child(n: int, streams_dir: str, profile: bool, tree: str | None) -> dict:
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = tree_path(tree)
    cmd = [sys.executable, __file__, "--child", str(n), "--streams", streams_dir]
    if profile:
        cmd.append("--profile")
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"replay of {n} queries failed: {proc.stderr.strip().splitlines()[-1:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--queries", type=int, nargs="+", default=[100, 400])
    ap.add_argument("--elements", type=int, default=100, help="elements per traffic stream")
    ap.add_argument("--baseline-tree", default=None, help="an older tree measured in the same run")
    ap.add_argument("--profile", action="store_true", help="cProfile each replay (slower)")
    ap.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--streams", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "routed_replay.json"))
    args = ap.parse_args(argv)
    if args.child is not None:
        print(json.dumps(child(args.child, args.streams, args.profile)))
        return 0
    if not (SHARED / "citybench" / "streams").is_dir():
        print(f"no CityBench corpus under {SHARED}", file=sys.stderr)
        return 2
    d = Path(tempfile.mkdtemp(prefix="ls-routed-streams-"))
    trim(d, args.elements)
    results = []
    for n in args.queries:
        cur = run_child(n, str(d), args.profile, None)
        line = f"{n} queries: cpu {cur['cpu_s']:.2f} s, {cur['lines']} lines, {1e6 * cur['cpu_s'] / max(cur['lines'], 1):.0f} ms CPU/1k lines"
        if "touched" in cur:
            t = cur["touched"]
            line += f"; _Routed.touched excl {t['excl_s']:.3f} s incl {t['incl_s']:.2f} s of {cur['profiled_s']:.2f} s"
        row = {"current": cur}
        if args.baseline_tree:
            base = run_child(n, str(d), args.profile, args.baseline_tree)
            row["baseline"] = base
            same = "identical" if base["sha256"] == cur["sha256"] else "DIFFERENT"
            line += f" | baseline cpu {base['cpu_s']:.2f} s, ratio {cur['cpu_s'] / base['cpu_s']:.2f}, output {same}"
        print(line, flush=True)
        results.append(row)
    if len(results) > 1:
        a, b = results[0]["current"], results[-1]["current"]
        print(
            f"{b['queries']} vs {a['queries']} queries: cpu x{b['cpu_s'] / a['cpu_s']:.2f}, "
            f"lines x{b['lines'] / max(a['lines'], 1):.2f}"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"elements": args.elements, "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
