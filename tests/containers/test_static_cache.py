"""A container parses a run's static graph files once, not once per run.

Every run a container joins (each replay, each take-over by a new leader, each restart
after a lost session) builds a new replica with a fresh dictionary.  The second replica
over the same files must be exactly what a fresh parse gives -- same dictionary (same
ids in the same order), same static triples -- without parsing the files again; a file
that changed is parsed again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import linkstream.containers.staticcache as staticcache
from linkstream.containers.replica import RunReplica
from linkstream.engine.embedded import Engine
from linkstream.rdf.static import load_graph
from linkstream.scheduler.runs import RunSpec

REPO = Path(__file__).resolve().parents[2]
SLICE = REPO / "examples" / "citybench" / "static" / "SensorRepository-slice.nt"
EXTRA = """<http://example.org/a> <http://example.org/p> _:b1 .
_:b1 <http://example.org/q> "x"@en .
<http://example.org/a> <http://example.org/p> _:b1 .
this line is malformed
<http://example.org/c> <http://example.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
"""


def _spec(run: str, files: list[Path]) -> RunSpec:
    statics = tuple((None if k == 0 else f"http://example.org/g{k}", str(p)) for k, p in enumerate(files))
    return RunSpec(run, "tcp://127.0.0.1:1", "http://localhost/", 1000, statics, (), (), {})


def _fresh(files: list[Path]) -> tuple[list[str | None], dict[str | None, list[np.ndarray]]]:
    """Dictionary terms and static triples of an engine that parses the files itself."""
    engine = Engine()
    for k, p in enumerate(files):
        iri = None if k == 0 else f"http://example.org/g{k}"
        engine.add_static(iri, load_graph(str(p), engine.dictionary, bnode_prefix=f"s{k}_"))
    return list(engine.dictionary._terms), engine.statics  # type: ignore[attr-defined]


def _same(replica: RunReplica, want: tuple[list[str | None], dict[str | None, list[np.ndarray]]]) -> None:
    terms, statics = want
    assert replica.engine.dictionary._terms == terms  # type: ignore[attr-defined]
    assert replica.engine.statics.keys() == statics.keys()
    for iri, parts in statics.items():
        got = replica.engine.statics[iri]
        assert len(got) == len(parts) and all(np.array_equal(a, b) for a, b in zip(got, parts, strict=True))


def test_a_second_run_over_the_same_files_does_not_parse_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    extra = tmp_path / "extra.nt"
    extra.write_text(EXTRA, encoding="utf-8")
    files = [SLICE, extra, SLICE]  # the slice twice (default and a named graph), blank nodes in one
    want = _fresh(files)
    assert sum(len(p) for parts in want[1].values() for p in parts) > 40
    rejected: list[str] = []
    first = RunReplica(_spec("r1", files), log=rejected.append)
    _same(first, want)
    assert len(rejected) == 1 and "rejected" in rejected[0]
    first.close()

    def no_parsing(*_a: object, **_k: object) -> np.ndarray:
        raise AssertionError("parsed again")

    monkeypatch.setattr(staticcache, "load_graph", no_parsing)
    second = RunReplica(_spec("r2", files))
    _same(second, want)
    second.close()
    monkeypatch.undo()

    # A changed file is parsed again (and the new content is what the run gets).
    shutil.copy(SLICE, tmp_path / "slice.nt")
    files2 = [tmp_path / "slice.nt", extra]
    RunReplica(_spec("r3", files2)).close()
    with open(extra, "a", encoding="utf-8") as f:
        f.write('<http://example.org/d> <http://example.org/p> "new" .\n')
    st = os.stat(extra)
    os.utime(extra, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))
    third = RunReplica(_spec("r4", files2))
    _same(third, _fresh(files2))
    assert '"new"' in third.engine.dictionary._terms  # type: ignore[attr-defined]
    third.close()
    assert len(staticcache._CACHE) == 2  # the latest run's files only
