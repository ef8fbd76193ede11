"""`linkstream replay --store DIR` gives the same results as `--static IRI=PATH`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from linkstream.store.loader import load_store
from tests.shared_paths import shared_or_skip

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "linkstream.cli", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize("qid", ["csparql-Q1", "cqels-Q5"])
def test_replay_from_store_equals_replay_from_files(tmp_path, qid):
    shared = shared_or_skip()
    m = json.loads((shared / "citybench" / "manifest.json").read_text())
    q = next(x for x in m["queries"] if x["id"] == qid)
    # the statics as N-Quads, each in the graph the manifest names (default graph: no name)
    quads = tmp_path / "statics.nq"
    with quads.open("w") as out:
        for st in q["statics"]:
            for line in (shared / st["path"]).read_text().splitlines():
                line = line.strip()
                if not line or line.startswith("#"):
                    continue
                assert line.endswith(".")
                out.write(line[:-1].rstrip() + (f" <{st['iri']}> .\n" if st["iri"] else " .\n"))
    store = tmp_path / "store"
    load_store(store, [quads])
    common = ["--query", str(shared / q["query"]), "--max-reports", "20", "--quiet"]
    for s in q["streams"]:
        common += ["--stream", f"{s['iri']}={shared / s['path']}"]
    from_files = tmp_path / "files.jsonl"
    statics = []
    for st in q["statics"]:
        statics += ["--static", (f"{st['iri']}=" if st["iri"] else "") + str(shared / st["path"])]
    r1 = _cli("replay", *common, *statics, "--out", str(from_files))
    assert r1.returncode == 0, r1.stderr
    from_store = tmp_path / "store.jsonl"
    r2 = _cli("replay", *common, "--store", str(store), "--out", str(from_store))
    assert r2.returncode == 0, r2.stderr
    a = [json.loads(x) for x in from_files.read_text().splitlines()]
    b = [json.loads(x) for x in from_store.read_text().splitlines()]
    assert a and sorted(map(json.dumps, a)) == sorted(map(json.dumps, b))


def test_replay_store_rejects_a_second_dictionary_and_cluster(tmp_path):
    r = _cli("replay", "--query", "q.rq", "--out", "-", "--store", str(tmp_path), "--dictionary", "lmdb:x")
    assert r.returncode != 0 and "own dictionary" in r.stderr
    r = _cli("replay", "--query", "q.rq", "--out", "-", "--store", str(tmp_path), "--cluster", "2")
    assert r.returncode != 0 and "embedded replays" in r.stderr
