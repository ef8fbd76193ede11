"""Start-up cost of the command line: what a user pays before the first result.

Measures, in one run and as the median of ``--repeat`` fresh processes each (taken round
robin, so that a change in the machine's load hits every row alike):

* ``python -c pass`` and ``python -c "import numpy, rdflib.plugins.sparql"`` (the floor:
  an interpreter, and the two libraries a query needs; a replay that parses its query
  cannot start faster), and the floor's parts: ``import numpy`` and ``import numpy, rdflib``
  (rdflib without its SPARQL parser: what a replay could cost with the query's parse
  cached and no rdflib SPARQL module imported);
* ``linkstream --help``;
* ``linkstream replay`` of one query over a 10-element stream (issue goal: < 0.3 s) and
  ``linkstream sparql`` of one query over a small store (issue goal: < 0.3 s), each three
  ways: a first run (an empty parse cache: rdflib parses the query and the run stores its
  algebra), a later run (the algebra read from the cache: rdflib's SPARQL parser is not
  imported) and with the cache off (``LINKSTREAM_QUERY_PARSE_CACHE=off``);
* ``pyoxigraph`` loading the same small graph and answering the same query in a fresh
  process (the peer), when pyoxigraph is installed.

It prints wall and CPU seconds per command and each one's ratio to the import floor, and
writes the raw figures to ``bench/results/startup.json``.  ``--base DIR`` adds the replay
and sparql rows of another tree, run in the same round robin: ``DIR`` holds a ``linkstream``
symlink to that tree's ``platform/`` (compile its bytecode first: ``python -m compileall``).

    python bench/startup.py [--repeat 7] [--out FILE] [--base DIR]
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

REPO = Path(__file__).resolve().parents[1]

STREAM_IRI = "http://example.org/sensors"
QUERY = """REGISTER QUERY q AS
PREFIX ex: <http://example.org/>
SELECT ?s ?v
FROM STREAM <http://example.org/sensors> [RANGE 3s STEP 1s]
WHERE { ?s ex:value ?v }
"""
SPARQL = "SELECT ?s ?o WHERE { ?s <http://example.org/knows> ?o } LIMIT 10"


def write_inputs(tmp: Path) -> dict[str, Path]:
    """A 10-element stream, a query, and a 1,000-triple static graph."""
    stream = tmp / "stream.nq"
    with stream.open("w") as f:
        for i in range(10):
            g = f"<http://example.org/e{i}>"
            f.write(
                f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:{i:02d}Z"'
                "^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
            )
            f.write(f'<http://example.org/s{i % 3}> <http://example.org/value> "{i}" {g} .\n')
    query = tmp / "q.rq"
    query.write_text(QUERY)
    graph = tmp / "graph.nt"
    with graph.open("w") as f:
        for i in range(1000):
            f.write(
                f"<http://example.org/p{i}> <http://example.org/knows> <http://example.org/p{(i * 7) % 1000}> .\n"
            )
    return {"stream": stream, "query": query, "graph": graph, "store": tmp / "store"}


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU (user + system of the child) seconds of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed ({p.returncode}): {p.stderr[-1500:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=7, help="fresh processes per command (default 7)")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "startup.json"))
    ap.add_argument("--base", help="a directory with a linkstream symlink to a base tree's platform/")
    args = ap.parse_args(argv)
    py = sys.executable
    # A user's install has bytecode caches (pip compiles them): a PYTHONDONTWRITEBYTECODE
    # set in this shell would charge every run ~0.1 s of compiling the package again.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONWARNINGS"] = "ignore"
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        f = write_inputs(tmp)
        load = [py, "-m", "linkstream.cli", "load", "--store", str(f["store"]), str(f["graph"])]
        subprocess.run(load, check=True, capture_output=True, env=env)
        fresh = iter(range(1_000_000))
        #: parse cache settings: off, a directory the warm-up fills, a new empty one per run
        caches = {
            "off": lambda: "off",
            "cached": lambda: str(tmp / "parse-cache"),
            "first run": lambda: str(tmp / f"empty-cache-{next(fresh)}"),
        }
        commands: dict[str, list[str]] = {
            "python -c pass": [py, "-c", "pass"],
            "import numpy": [py, "-c", "import numpy"],
            "import numpy, rdflib (no SPARQL)": [py, "-c", "import numpy, rdflib"],
            "import floor (numpy, rdflib sparql)": [py, "-c", "import numpy, rdflib.plugins.sparql"],
            "linkstream --help": [py, "-m", "linkstream.cli", "--help"],
            "linkstream replay (10 elements, 1 query, %s)": [
                py,
                "-m",
                "linkstream.cli",
                "replay",
                "--query",
                str(f["query"]),
                "--stream",
                f"{STREAM_IRI}={f['stream']}",
                "--out",
                str(tmp / "out.jsonl"),
                "--quiet",
            ],  # fmt: skip
            "linkstream sparql (1k-triple store, %s)": [
                py,
                "-m",
                "linkstream.cli",
                "sparql",
                "--store",
                str(f["store"]),
                SPARQL,
            ],  # fmt: skip
        }
        for name in [n for n in commands if "%s" in n]:  # one row per parse cache setting
            cmd = commands.pop(name)
            commands.update({name % setting: cmd for setting in caches})
            if args.base:
                commands[name.replace(", %s", "") + " [base]"] = cmd
        try:
            import pyoxigraph  # noqa: F401

            commands["pyoxigraph load + query (peer)"] = [
                py,
                "-c",
                "import pyoxigraph as o, sys; s = o.Store(); "
                f"s.load(path={str(f['graph'])!r}, format=o.RdfFormat.N_TRIPLES); "
                f"print(len(list(s.query({SPARQL!r}))))",
            ]
        except ImportError:
            print("pyoxigraph not installed: no peer row")

        def env_of(name: str) -> dict[str, str]:
            if name.endswith(" [base]"):
                return {**env, "PYTHONPATH": str(Path(args.base).resolve())}
            setting = next((caches[k]() for k in caches if name.endswith(f", {k})")), "off")
            return {**env, "LINKSTREAM_QUERY_PARSE_CACHE": setting}

        for name, cmd in commands.items():
            timed(cmd, env_of(name))  # warm the page cache, the bytecode cache, the parse cache
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.repeat):  # round robin: a change in the machine's load hits every row
            for name, cmd in commands.items():
                runs[name].append(timed(cmd, env_of(name)))
        results = {
            name: {
                "wall_s": statistics.median(w for w, _ in r),
                "cpu_s": statistics.median(c for _, c in r),
                "runs": r,
            }
            for name, r in runs.items()
        }
    floor = results["import floor (numpy, rdflib sparql)"]["cpu_s"]
    print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    print(f"{'command':<56}{'wall s':>9}{'cpu s':>9}{'cpu / floor':>13}")
    for name, r in results.items():
        print(f"{name:<56}{r['wall_s']:>9.3f}{r['cpu_s']:>9.3f}{r['cpu_s'] / floor:>13.2f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"repeat": args.repeat, "results": results}, indent=1))
    print(f"raw figures: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
