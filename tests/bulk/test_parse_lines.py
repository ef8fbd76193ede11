"""The Spark loader's line parsing (``tasks.parse_lines``, run in Spark's Python workers):
the compiled scanner reads what the Python line parser reads -- the same rows in the same
order, the same rejections -- on runs of several files, blank-node prefixes, graphs."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linkstream.bulk import tasks
from linkstream.rdf import ntfast
from tests.rdf.test_ntfast import _mutate, _statement
from tests.rdf.test_ntriples import CORPUS

needs_native = pytest.mark.skipif(ntfast._scanner is None, reason="compiled scanner not built")
FILES = {"/data/a b.nq": "a_", "/data/c.nt": ""}
URIS = ["file:/data/a%20b.nq", "file:///data/c.nt"]


def _text(line: str | bytes) -> str:
    # Spark reads the file as UTF-8 text split at "\n"
    raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
    return raw.decode("utf-8", "replace").replace("\n", " ")


def _parsed(batches: list[pa.RecordBatch], native: bool, default_graph: bool) -> list[dict]:
    was = ntfast.use_native(native)
    try:
        out = list(tasks.parse_lines(iter(batches), prefixes=FILES, default_graph=default_graph))
    finally:
        ntfast.use_native(was)
    for b in out:
        assert b.schema.names == ["s", "p", "o", "g", "err"]
        assert all(t == pa.string() for t in b.schema.types)
    return [row for b in out for row in b.to_pylist()]


def _batches(lines: list[str], rnd: random.Random) -> list[pa.RecordBatch]:
    """``lines`` cut into batches, each a few runs of one file's lines."""
    out, i = [], 0
    while i < len(lines):
        n = rnd.randint(1, 40)
        chunk = lines[i : i + n]
        paths = []
        while len(paths) < len(chunk):
            paths += [rnd.choice(URIS)] * rnd.randint(1, 8)
        out.append(
            pa.RecordBatch.from_arrays(
                [pa.array(chunk, pa.string()), pa.array(paths[: len(chunk)], pa.string())],
                names=["value", "file_path"],
            )
        )
        i += n
    return out


def _same(lines: list[str], seed: int) -> list[dict]:
    batches = _batches(lines, random.Random(seed))
    rows = _parsed(batches, False, False)
    assert _parsed(batches, True, False) == rows
    assert _parsed(batches, True, True) == _parsed(batches, False, True)
    return rows


@needs_native
def test_the_corpus_in_runs_of_two_files() -> None:
    lines = [_text(x) for x in CORPUS] + [
        f"_:b{i} <http://ex.org/p> <http://ex.org/o{i % 7}> <http://ex.org/g{i % 3}> ." for i in range(300)
    ]
    rows = _same(lines, 7)
    assert any(r["err"] for r in rows) and any(r["g"] for r in rows)
    bnodes = [r["s"] for r in rows if r["s"] and r["s"].startswith("_:b")]
    assert any(b[3:].isdigit() for b in bnodes) and any(r["s"].startswith("_:a_b") for r in rows if r["s"])
    assert any(r["err"].startswith("/data/a b.nq: rejected: ") for r in rows if r["err"])


@needs_native
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.one_of(_statement(), st.randoms(use_true_random=False).map(_mutate)), max_size=40),
    seed=st.integers(0, 1000),
)
def test_generated_lines(lines: list[str], seed: int) -> None:
    _same([_text(x) for x in lines], seed)


@needs_native
def test_a_sliced_array_and_a_large_string_array() -> None:
    lines = [_text(x) for x in CORPUS[:40]]
    whole = pa.array(["junk", *lines, "junk"], pa.string())
    for values in (whole.slice(1, len(lines)), pa.array(lines, pa.large_string())):
        batch = pa.RecordBatch.from_arrays(
            [values, pa.array([URIS[0]] * len(lines), pa.string())], names=["value", "file_path"]
        )
        assert _parsed([batch], True, False) == _parsed([batch], False, False)
