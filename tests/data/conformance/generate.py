"""Regenerates the CityBench conformance slice (``tests/data/conformance/``) from the shared corpus.

    LINKSTREAM_SHARED=../shared .venv/bin/python tests/data/conformance/generate.py

Run it only to change the slice: the test (``tests/conformance/test_slice.py``) reads the
files written here and never needs ``../shared``.  It

* copies the queries of :data:`QUERIES` byte for byte from ``shared/citybench/queries/``;
* trims every stream they read to the elements with an event time in :data:`SPAN`;
* keeps of ``SensorRepository.nt`` the triples reachable in :data:`DEPTH` steps from the
  stream IRIs and from every IRI of the trimmed streams (the sensors, their observed
  properties, the properties' features of interest and coordinates);
* writes ``slice.json`` (the shared manifest's format, paths relative to this folder) and
  the oracle's results ``expected/<id>.jsonl`` (``shared/tools/oracle.py``, pyoxigraph),
  every report time of SEMANTICS.md section 4.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.shared_paths import load_tool, shared_or_skip  # noqa: E402

#: (dialect, query file stem): a handful of each dialect, on traffic, pollution, weather
#: and parking streams: joins with the static graph, arithmetic, aggregates, ASK, FILTER.
QUERIES = [(d, q) for d in ("csparql", "cqels") for q in ("Q1", "Q3", "Q7", "Q10", "Q11", "Q12")]
ORIGIN_MS = 1406851200000
#: event-time span (ms after the corpus origin) of the stream elements kept
SPAN = (94_000, 116_000)
DEPTH = 3
STATIC = "SensorRepository.nt"
_IRI = re.compile(r"<([^>]*)>|(_:\S+)")


def _trim_stream(src: Path, dest: Path) -> int:
    """Copies the elements of ``src`` whose timestamp lies in :data:`SPAN`; returns their count."""
    from datetime import datetime

    keep, kept, out = False, 0, []
    lo, hi = ORIGIN_MS + SPAN[0], ORIGIN_MS + SPAN[1]
    with open(src, encoding="utf-8") as f:
        for line in f:
            if "generatedAtTime" in line:
                stamp = line.split('"')[1]
                ms = int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)
                keep = lo <= ms < hi
                kept += keep
            if keep:
                out.append(line)
    dest.write_text("".join(out), encoding="utf-8")
    return kept


def _trim_static(src: Path, dest: Path, seeds: set[str]) -> int:
    by_subject: dict[str, list[str]] = {}
    with open(src, encoding="utf-8") as f:
        for line in f:
            m = _IRI.match(line)
            if m:
                by_subject.setdefault(m.group(0), []).append(line)
    keep: set[str] = set()
    frontier = {s for s in seeds if s in by_subject}
    for _ in range(DEPTH):
        nxt = set()
        for s in frontier:
            for line in by_subject[s]:
                if line not in keep:
                    keep.add(line)
                    nxt.update(m.group(0) for m in _IRI.finditer(line) if m.group(0) in by_subject)
        frontier = nxt
    lines = sorted(keep)
    dest.write_text("".join(lines), encoding="utf-8")
    return len(lines)


def main() -> int:
    shared = shared_or_skip()
    cb = shared / "citybench"
    man = json.loads((cb / "manifest.json").read_text())
    by_id = {q["id"]: q for q in man["queries"]}
    for sub in ("queries", "streams", "static", "expected"):
        shutil.rmtree(HERE / sub, ignore_errors=True)
        (HERE / sub).mkdir()
    entries, streams, seeds = [], {}, set()
    for dialect, stem in QUERIES:
        q = dict(by_id[f"{dialect}-{stem}"])
        (HERE / "queries" / dialect).mkdir(exist_ok=True)
        shutil.copyfile(cb / "queries" / dialect / f"{stem}.txt", HERE / "queries" / dialect / f"{stem}.txt")
        q["query"] = f"queries/{dialect}/{stem}.txt"
        for s in q["streams"]:
            name = Path(s["path"]).name
            streams[name] = s["iri"]
            s["path"] = f"streams/{name}"
        for s in q["statics"]:
            assert Path(s["path"]).name == STATIC, s
            s["path"] = f"static/{STATIC}"
        q["expected"] = f"expected/{q['id']}.jsonl"
        q.pop("max_reports", None)
        q.pop("note", None)
        entries.append(q)
    for name, iri in sorted(streams.items()):
        n = _trim_stream(cb / "streams" / name, HERE / "streams" / name)
        print(f"{name}: {n} elements", file=sys.stderr)
        seeds.add(f"<{iri}>")
        seeds.update(m.group(0) for m in _IRI.finditer((HERE / "streams" / name).read_text()))
    n = _trim_static(cb / "static" / STATIC, HERE / "static" / STATIC, seeds)
    print(f"{STATIC}: {n} triples", file=sys.stderr)
    slice_manifest = {
        "name": "citybench-slice",
        "description": "A few CityBench queries of each dialect on trimmed streams; see README.md",
        "paths_relative_to": "tests/data/conformance",
        "base": man.get("base", "http://localhost/"),
        "span_ms": [ORIGIN_MS + SPAN[0], ORIGIN_MS + SPAN[1]],
        "queries": entries,
    }
    (HERE / "slice.json").write_text(json.dumps(slice_manifest, indent=1) + "\n", encoding="utf-8")
    oracle = load_tool("oracle")
    for q in entries:
        args = ["--query", str(HERE / q["query"]), "--base", slice_manifest["base"], "--quiet"]
        for s in q["streams"]:
            args += ["--stream", f"{s['iri']}={HERE / s['path']}"]
        for s in q["statics"]:
            args += [
                "--static",
                str(HERE / s["path"]) if s["iri"] is None else f"{s['iri']}={HERE / s['path']}",
            ]
        if q.get("default_step") is not None:
            args += ["--default-step", str(q["default_step"])]
        out = HERE / q["expected"]
        assert oracle.main([*args, "--out", str(out)]) == 0, q["id"]
        rows = sum(1 for _ in open(out, encoding="utf-8"))
        print(f"{q['id']}: {rows} rows", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
