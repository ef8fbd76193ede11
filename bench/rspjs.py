#!/usr/bin/env python3
"""RSP-QL queries: LinkStream vs rsp-js (npm), same streams, same queries, same run.

rsp-js is a peer for this bench only: it is installed from npm into the git-ignored
``bench/.peers/rspjs/`` (``npm install --prefix``) when the bench runs, never by the
platform or its pyproject.  Needs ``node`` and ``npm`` on PATH; without them (or when the
install fails) the bench prints why and exits 0 with no rows.

Each query is RSP-QL text that both engines accept (rsp-js parses RSP-QL line by line:
one ``FROM NAMED WINDOW :w ON STREAM <s> [RANGE ms STEP ms]`` per line, ``WINDOW :w {``
at the start of a line).  The streams are CityBench streams (``$LINKSTREAM_SHARED/citybench``,
default ``../shared``) cut to their first ``--seconds`` of event time; the static sensor
repository goes into the default graph of both.  LinkStream runs as ``linkstream replay``
(a fresh process); rsp-js runs under ``bench/rspjs_driver.js``, which feeds the stream
elements in event-time order with their timestamps and waits for each evaluation an
element triggers (rsp-js copies window + static data into a new store per evaluation, so
queuing them all exhausts the heap), with rsp-js's file logger and console output off.

Printed per query: input triples/s of each (whole process, by wall time), the ratio
LinkStream / rsp-js by wall time, by CPU time (user + system of each process: steadier when
other work shares the cores) and by evaluation time alone (LinkStream ``eval_seconds`` vs
rsp-js feed + evaluation), result counts (rows, non-empty reports, distinct rows), and how
many rsp-js reports equal LinkStream's report at the same window close.  The counts are not expected
to agree: rsp-js reports a window only when a later element of the same stream arrives
(so never the last windows, nor empty ones), reports once per new timestamp, and in a
multi-window query joins the triggering window with the *open* instance of the others;
LinkStream follows the window-close report policy of docs/semantics.md at every close
time.  Raw figures go to ``bench/results/rspjs.json``.

``--versus DIR`` also runs the LinkStream found in ``DIR`` (``DIR/linkstream``: a symlink to
another checkout's ``platform/``, its bytecode compiled) in the same run, before this tree's,
and prints its CPU ratio beside.  Each LinkStream build replays each query once untimed
first: the parse cache then holds the query on both sides (its entries are per build).

    python bench/rspjs.py [--seconds 30] [--only ID ...] [--versus DIR] [--out FILE]
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
PEER = REPO / "bench" / ".peers" / "rspjs"
DRIVER = REPO / "bench" / "rspjs_driver.js"
RSPJS_VERSION = "1.3.5"
SES = "http://www.insight-centre.org/dataset/SampleEventService#"
GAT = b"<http://www.w3.org/ns/prov#generatedAtTime>"
PREFIXES = """PREFIX : <http://localhost/w#>
PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ct: <http://www.insight-centre.org/citytraffic#>
"""

# id -> (streams, uses static sensor repository, RSP-QL body after the prefixes)
QUERIES: dict[str, tuple[list[str], bool, str]] = {
    # CityBench Q1's pattern on one traffic stream, no static data
    "traffic-pattern": (
        ["AarhusTrafficData182955"],
        False,
        f"""REGISTER RStream <traffic-pattern> AS
SELECT ?obId1 ?p1 ?v1
FROM NAMED WINDOW :w1 ON STREAM <{SES}AarhusTrafficData182955> [RANGE 3000 STEP 1000]
WHERE {{
WINDOW :w1 {{
?obId1 ssn:observedProperty ?p1 .
?obId1 sao:hasValue ?v1 .
?obId1 ssn:observedBy <{SES}AarhusTrafficData182955> .
}}
}}
""",
    ),
    # the same window joined with the static sensor repository (congestion levels only)
    "traffic-static": (
        ["AarhusTrafficData182955"],
        True,
        f"""REGISTER RStream <traffic-static> AS
SELECT ?obId1 ?v1
FROM NAMED WINDOW :w1 ON STREAM <{SES}AarhusTrafficData182955> [RANGE 3000 STEP 1000]
WHERE {{
?p1 a ct:CongestionLevel .
WINDOW :w1 {{
?obId1 ssn:observedProperty ?p1 .
?obId1 sao:hasValue ?v1 .
}}
}}
""",
    ),
    # CityBench Q1 (C-SPARQL form) in RSP-QL: two traffic windows x static congestion levels
    "citybench-Q1": (
        ["AarhusTrafficData182955", "AarhusTrafficData158505"],
        True,
        f"""REGISTER RStream <citybench-Q1> AS
SELECT ?obId1 ?obId2 ?v1 ?v2
FROM NAMED WINDOW :w1 ON STREAM <{SES}AarhusTrafficData182955> [RANGE 3000 STEP 1000]
FROM NAMED WINDOW :w2 ON STREAM <{SES}AarhusTrafficData158505> [RANGE 3000 STEP 1000]
WHERE {{
?p1 a ct:CongestionLevel .
?p2 a ct:CongestionLevel .
WINDOW :w1 {{
?obId1 ssn:observedProperty ?p1 .
?obId1 sao:hasValue ?v1 .
?obId1 ssn:observedBy <{SES}AarhusTrafficData182955> .
}}
WINDOW :w2 {{
?obId2 ssn:observedProperty ?p2 .
?obId2 sao:hasValue ?v2 .
?obId2 ssn:observedBy <{SES}AarhusTrafficData158505> .
}}
}}
""",
    ),
}


def install_peer() -> str | None:
    """Install rsp-js into bench/.peers/rspjs; return a reason string when impossible."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            return f"{tool} not found on PATH"
    if (PEER / "node_modules" / "rsp-js" / "package.json").exists():
        return None
    PEER.mkdir(parents=True, exist_ok=True)
    cmd = ["npm", "install", "--prefix", str(PEER), f"rsp-js@{RSPJS_VERSION}", "--no-audit", "--no-fund"]
    print("installing rsp-js:", " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"npm install failed: {e}"
    if p.returncode != 0:
        return f"npm install failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"
    return None


def cut_stream(src: Path, dst: Path, seconds: float) -> int:
    """Copy the elements of src whose event time is within `seconds` of the first; return triples."""
    first: float | None = None
    n = 0
    with open(src, "rb") as f, open(dst, "wb") as out:
        for line in f:
            if GAT in line:
                lit = line.split(b'"')[1].decode()
                t = calendar.timegm(time.strptime(lit[:19], "%Y-%m-%dT%H:%M:%S"))
                first = t if first is None else first
                if t - first >= seconds:
                    break
            elif line.strip():
                n += 1
            out.write(line)
    return n


#: LinkStream runs as a user's install does: with bytecode caches (a PYTHONDONTWRITEBYTECODE
#: in the caller's environment would make every run compile the modules it imports)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def compile_package() -> None:
    """Writes the bytecode of the ``linkstream`` package the replay imports (as ``make venv``
    and a pip install do), so no timed run compiles it."""
    import importlib.util

    spec = importlib.util.find_spec("linkstream")  # a namespace package: its first portion
    for d in [p for p in (spec.submodule_search_locations or [] if spec else []) if Path(p).is_dir()][:1]:
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(d)], capture_output=True, env=ENV)


def run(cmd: list[str], **kw: object) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """Run cmd; return its wall time, its CPU time (user + system) and the process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), p


NUMERIC = re.compile(r'^"([^"]*)"\^\^<http://www.w3.org/2001/XMLSchema#(?:double|float|decimal|integer)>$')


def norm_row(binding: dict[str, str]) -> str:
    """One binding row as a comparable string; numeric literals compare by value."""
    parts = []
    for k, v in sorted(binding.items()):
        m = NUMERIC.match(v)
        parts.append(f"{k}={float(m.group(1))!r}" if m else f"{k}={v}")
    return " ".join(parts)


def linkstream_reports(path: Path) -> dict[int, Counter[str]]:
    """Result rows of a replay output, per report time."""
    by_t: dict[int, Counter[str]] = {}
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if "binding" in r:
                by_t.setdefault(int(r["t"]), Counter())[norm_row(r["binding"])] += 1
    return by_t


def compare(ls: dict[int, Counter[str]], js: dict[str, list[dict[str, str]]]) -> dict[str, int]:
    """Per report time: rsp-js's report vs LinkStream's report at the same window close."""
    js_by_t = {int(t): Counter(norm_row(b) for b in rows) for t, rows in js.items()}
    equal = sum(1 for t, c in js_by_t.items() if ls.get(t, Counter()) == c)
    return {
        "rspjs_reports": len(js_by_t),
        "equal_reports": equal,
        "linkstream_only_reports": sum(1 for t in ls if t not in js_by_t),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--seconds", type=float, default=30.0, help="event seconds of each stream (default 30)")
    ap.add_argument("--only", action="append", default=[], choices=sorted(QUERIES), help="query id")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "rspjs.json"))
    ap.add_argument("--versus", metavar="DIR", help="also time the linkstream package in DIR (same run)")
    args = ap.parse_args(argv)
    why = install_peer()
    if why:
        print(f"rsp-js comparison skipped: {why}")
        return 0
    env = dict(os.environ, NODE_PATH=str(PEER / "node_modules"))
    compile_package()
    rows = []
    hdr = f"{'query':<17}{'triples':>8}{'LS tr/s':>10}{'rsp-js tr/s':>12}{'ratio':>8}{'CPU ratio':>10}{'eval ratio':>11}"
    print(hdr + f"{'LS rows/reports/distinct':>26}{'rsp-js rows/evals/distinct':>28}  equal reports")
    with tempfile.TemporaryDirectory() as tmp_s:
        tmp = Path(tmp_s)
        for qid, (streams, static, body) in QUERIES.items():
            if args.only and qid not in args.only:
                continue
            qfile = tmp / f"{qid}.rq"
            qfile.write_text(PREFIXES + body)
            spec_streams, n_tr, ls_args = [], 0, []
            for s in streams:
                cut = tmp / f"{s}.nq"
                n_tr_s = cut_stream(SHARED / "citybench" / "streams" / f"{s}.nq", cut, args.seconds)
                n_tr += n_tr_s
                spec_streams.append({"iri": SES + s, "path": str(cut)})
                ls_args += ["--stream", f"{SES}{s}={cut}"]
            statics = [str(SHARED / "citybench" / "static" / "SensorRepository.nt")] if static else []
            for st in statics:
                ls_args += ["--static", st]
            stats, out = tmp / f"{qid}.stats.json", tmp / f"{qid}.jsonl"
            ls_cmd = [sys.executable, "-m", "linkstream.cli", "replay", "--query", str(qfile), *ls_args]
            vs_env = {**ENV, "PYTHONPATH": args.versus} if args.versus else None
            for warm_env in [ENV] + ([vs_env] if vs_env else []):  # (untimed: fills the parse cache)
                run([*ls_cmd, "--out", str(tmp / "warm.jsonl"), "--quiet"], env=warm_env)
            vs_cpu = None
            if vs_env is not None:
                _, vs_cpu, p = run([*ls_cmd, "--out", str(tmp / "vs.jsonl"), "--quiet"], env=vs_env)
                if p.returncode != 0:
                    vs_cpu = None
            ls_wall, ls_cpu, p = run(
                [*ls_cmd, "--out", str(out), "--stats", str(stats), "--quiet"],
                env=ENV,
            )
            if p.returncode != 0:
                print(f"{qid}: linkstream replay failed: {p.stderr.strip()[-500:]}")
                continue
            ls_q = json.loads(stats.read_text())["queries"][0]
            ls_by_t = linkstream_reports(out)
            ls_rows = sum(sum(c.values()) for c in ls_by_t.values())
            ls_reports = len(ls_by_t)
            ls_distinct = len(set().union(*ls_by_t.values())) if ls_by_t else 0
            spec = tmp / f"{qid}.spec.json"
            spec.write_text(
                json.dumps({"query": PREFIXES + body, "streams": spec_streams, "statics": statics})
            )
            js_wall, js_cpu, p = run(["node", str(DRIVER), str(spec)], env=env, cwd=tmp_s)
            if p.returncode != 0:
                print(f"{qid}: rsp-js driver failed: {p.stderr.strip()[-500:]}")
                continue
            js = json.loads(p.stdout.strip().splitlines()[-1])
            r = {
                "id": qid,
                "query": PREFIXES + body,
                "seconds": args.seconds,
                "stream_triples": n_tr,
                "rspjs_triples_fed": js["triples"],
                "linkstream_wall_s": ls_wall,
                "rspjs_wall_s": js_wall,
                "linkstream_eval_s": ls_q["eval_seconds"],
                "rspjs_feed_eval_s": js["feed_eval_s"],
                "rspjs_parse_s": js["parse_s"],
                "linkstream_triples_per_s": n_tr / ls_wall,
                "rspjs_triples_per_s": n_tr / js_wall,
                "ratio": js_wall / ls_wall,
                "linkstream_cpu_s": ls_cpu,
                "rspjs_cpu_s": js_cpu,
                "cpu_ratio": js_cpu / max(ls_cpu, 1e-6),
                "eval_ratio": js["feed_eval_s"] / max(ls_q["eval_seconds"], 1e-6),
                "linkstream_rows": ls_rows,
                "linkstream_reports": ls_q["reports"],
                "linkstream_nonempty_reports": ls_reports,
                "linkstream_distinct_rows": ls_distinct,
                "rspjs_rows": js["rows"],
                "rspjs_evaluations": js["evaluations"],
                "rspjs_distinct_rows": js["distinct_rows"],
            }
            if vs_cpu is not None:
                r["versus_cpu_s"] = vs_cpu
                r["versus_cpu_ratio"] = js_cpu / max(vs_cpu, 1e-6)
            r.update(compare(ls_by_t, js["reports"]))
            rows.append(r)
            ls_c = f"{ls_rows}/{ls_reports}/{ls_distinct}"
            js_c = f"{js['rows']}/{js['evaluations']}/{js['distinct_rows']}"
            print(
                f"{qid:<17}{n_tr:>8}{r['linkstream_triples_per_s']:>10.0f}{r['rspjs_triples_per_s']:>12.1f}"
                f"{r['ratio']:>8.1f}{r['cpu_ratio']:>10.1f}{r['eval_ratio']:>11.1f}{ls_c:>26}{js_c:>28}  {r['equal_reports']}/{r['rspjs_reports']}"
                + (f"  versus: CPU ratio {r['versus_cpu_ratio']:.1f}" if vs_cpu is not None else ""),
                flush=True,
            )
    print(
        "ratio = whole-process triples/s LinkStream / rsp-js (wall); CPU ratio = the same by CPU time"
        " (user + system; steadier on a busy machine); eval ratio = rsp-js feed+evaluation time /"
        " LinkStream eval_seconds.\nrows/reports/distinct: result rows, non-empty reports (rsp-js: evaluations),"
        " distinct rows over all reports.\nequal reports: rsp-js reports whose rows equal LinkStream's"
        " report at the same window close (numeric literals by value) / rsp-js reports. rsp-js never"
        " reports the last windows nor empty ones and joins open instances of other windows, so"
        " totals differ by design (see the docstring)."
    )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rspjs_version": RSPJS_VERSION, "queries": rows}, indent=1))
    print(f"raw figures: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
