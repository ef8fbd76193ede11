"""A corpus of damaged store directories: truncated, missing, altered parts, manifest and LMDB files.

Each row damages a fresh copy of a small store written by ``linkstream load`` and runs the
three readers a user has, in-process: ``linkstream store verify`` (exit 1 and one
``DAMAGED`` line per file, or 2 when DIR is not a readable store), ``linkstream sparql``
and ``linkstream replay --store`` (exit 2, one line naming the file).  An intact store and
harmless changes are accepted with the right answer (``COUNT`` = 2).  Truncated LMDB files
are refused by the size check before LMDB maps them (a mapped truncated file is SIGBUS).
One row also runs through a real subprocess.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main

COUNT = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"
PART = "graphs/g0/part-00001.npy"  # holds one of the two triples
STREAM = (
    '<http://ex.org/g1> <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:01Z"'
    "^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
    '<http://ex.org/s1> <http://ex.org/q> "1" <http://ex.org/g1> .\n'
)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A two-triple store (8 partitions, an LMDB dictionary), a query and a stream."""
    root = tmp_path_factory.mktemp("store")
    (root / "g.nt").write_text(
        '<http://ex.org/s1> <http://ex.org/p> "1" .\n<http://ex.org/s2> <http://ex.org/p> "2" .\n'
    )
    (root / "q.rq").write_text(
        "SELECT ?v WHERE { ?x <http://ex.org/p> ?v STREAM <http://ex.org/s> [RANGE 3s] { ?x ?q ?o } }"
    )
    (root / "s.nq").write_text(STREAM)
    assert cli_main(["load", "--store", str(root / "store"), "--quiet", str(root / "g.nt")]) == 0
    manifest = json.loads((root / "store" / "store.json").read_text())
    assert manifest["files"][PART]["size"] == 152  # the part the damage below aims at is not empty
    return root


def truncate(rel: str, size: int) -> Callable[[Path], None]:
    return lambda p: os.truncate(p / rel, size)


def remove(rel: str) -> Callable[[Path], None]:
    return lambda p: shutil.rmtree(p / rel) if (p / rel).is_dir() else (p / rel).unlink()


def flip(rel: str, offset: int) -> Callable[[Path], None]:
    def damage(p: Path) -> None:
        with open(p / rel, "r+b") as f:
            f.seek(offset)
            b = f.read(1)
            f.seek(offset)
            f.write(bytes([b[0] ^ 0xFF]))

    return damage


def write(rel: str, data: bytes) -> Callable[[Path], None]:
    def damage(p: Path) -> None:
        if (p / rel).is_dir():
            shutil.rmtree(p / rel)
        (p / rel).write_bytes(data)

    return damage


def manifest(edit: Callable[[dict], object]) -> Callable[[Path], None]:
    def damage(p: Path) -> None:
        doc = json.loads((p / "store.json").read_text())
        edit(doc)
        (p / "store.json").write_text(json.dumps(doc))

    return damage


def make_dir(rel: str) -> Callable[[Path], None]:
    def damage(p: Path) -> None:
        (p / rel).unlink()
        (p / rel).mkdir()

    return damage


@dataclass
class Damage:
    """What a damage does to each reader: (exit status, text in its last stderr line), or the
    ``DAMAGED`` line of ``store verify``; ``None`` means the reader answers correctly."""

    id: str
    damage: Callable[[Path], None]
    verify: tuple[int, str] | None
    read: tuple[int, str] | None


M = "store.json: "
#: a same-size part whose header declares an object (pickled) array
PICKLED = (
    b"\x93NUMPY\x01\x00v\x00"
    + b"{'descr': '|O', 'fortran_order': False, 'shape': (3,), }".ljust(117)
    + b"\n"
    + b"x" * 24
)

# fmt: off
DAMAGES: list[Damage] = [
    Damage("intact", lambda p: None, None, None),
    Damage("lmdb-lock-file-missing", remove("dict/lock.mdb"), None, None),
    Damage("extra-file-in-store", write("notes.txt", b"hello"), None, None),
    Damage("unknown-manifest-key", manifest(lambda m: m.update(comment="x")), None, None),
    Damage("part-truncated", truncate(PART, 100), (1, f"{PART}: size 100 bytes, expected 152"), (2, f"{PART}: size 100 bytes, expected 152")),
    Damage("part-emptied", truncate(PART, 0), (1, f"{PART}: size 0 bytes, expected 152"), (2, f"{PART}: size 0 bytes, expected 152")),
    Damage("part-grown", lambda p: open(p / PART, "ab").write(b"\0" * 24), (1, f"{PART}: size 176 bytes, expected 152"), (2, f"{PART}: size 176 bytes, expected 152")),
    Damage("part-missing", remove(PART), (1, f"{PART}: missing"), (2, f"{PART}: missing")),
    Damage("part-is-a-directory", make_dir(PART), (1, f"{PART}: size"), (2, f"{PART}: size")),
    Damage("part-header-altered", flip(PART, 10), (1, f"{PART}: checksum crc32"), (2, f"{PART}: not a readable .npy array")),
    Damage("part-garbage-same-size", write(PART, b"x" * 152), (1, f"{PART}: checksum crc32"), (2, f"{PART}: not a readable .npy array")),
    Damage("part-pickle-header", write(PART, PICKLED), (1, f"{PART}: checksum crc32"), (2, f"{PART}: not a readable .npy array")),
    Damage("graphs-folder-missing", remove("graphs"), (1, "graphs/g0/part-00000.npy: missing"), (2, "graphs/g0/part-00000.npy: missing")),
    Damage("manifest-missing", remove("store.json"), (2, "not a LinkStream store (no store.json)"), (2, "not a LinkStream store (no store.json)")),
    Damage("manifest-empty", write("store.json", b""), (2, M + "invalid JSON: Expecting value: line 1 column 1 (char 0)"), (2, M + "invalid JSON")),
    Damage("manifest-truncated", truncate("store.json", 100), (2, M + "invalid JSON"), (2, M + "invalid JSON")),
    Damage("manifest-not-utf8", write("store.json", b"\xff\xfe\x00"), (2, M + "not UTF-8 text (invalid start byte at byte 0)"), (2, M + "not UTF-8 text")),
    Damage("manifest-a-list", write("store.json", b"[1, 2]"), (2, M + "not a linkstream-store manifest"), (2, M + "not a linkstream-store manifest")),
    Damage("manifest-is-a-directory", lambda p: (p / "store.json").unlink() or (p / "store.json").mkdir(), (2, M + "unreadable (Is a directory)"), (2, M + "unreadable (Is a directory)")),
    Damage("manifest-other-format", manifest(lambda m: m.update(format="other")), (2, M + "not a linkstream-store manifest"), (2, M + "not a linkstream-store manifest")),
    Damage("manifest-version-9", manifest(lambda m: m.update(version=9)), (2, M + "unsupported store version 9 (expected 1)"), (2, M + "unsupported store version 9")),
    Damage("manifest-partitions-zero", manifest(lambda m: m.update(partitions=0)), (2, M + "'partitions' must be a positive integer, got 0"), (2, M + "'partitions' must be a positive integer, got 0")),
    Damage("manifest-partitions-string", manifest(lambda m: m.update(partitions="8")), (2, M + "'partitions' must be a positive integer, got '8'"), (2, M + "'partitions' must be a positive integer")),
    Damage("manifest-partitions-missing", manifest(lambda m: m.pop("partitions")), (2, M + "'partitions' must be a positive integer, got None"), (2, M + "'partitions' must be a positive integer")),
    Damage("manifest-graphs-missing", manifest(lambda m: m.pop("graphs")), (2, M + "'graphs' must be a list, got NoneType"), (2, M + "'graphs' must be a list")),
    Damage("manifest-graph-dir-escapes", manifest(lambda m: m["graphs"][0].update(dir="../../etc")), (2, M + "bad graph entry"), (2, M + "bad graph entry")),
    Damage("manifest-graph-dir-missing", manifest(lambda m: m["graphs"][0].pop("dir")), (2, M + "bad graph entry"), (2, M + "bad graph entry")),
    Damage("manifest-triples-wrong", manifest(lambda m: m["graphs"][0].update(triples=5)), (1, M + "the default graph records 5 triples, its partitions (graphs/g0) hold 2"), None),
    Damage("manifest-triples-word", manifest(lambda m: m["graphs"][0].update(triples="2")), (2, M + "bad graph entry {'iri': None, 'dir': 'g0', 'triples': '2'} (its 'triples' must be a count)"), (2, M + "bad graph entry")),
    Damage("manifest-files-not-an-object", manifest(lambda m: m.update(files=[1])), (2, M + "'files' must be an object, got list"), (2, M + "'files' must be an object")),
    Damage("manifest-file-size-word", manifest(lambda m: m["files"][PART].update(size="x")), (2, M + f"'files' record of {PART}: size must be a byte count, got 'x'"), (2, M + f"'files' record of {PART}: size must be a byte count")),
    Damage("manifest-file-size-negative", manifest(lambda m: m["files"][PART].update(size=-1)), (2, M + f"'files' record of {PART}: size must be a byte count, got -1"), (2, M + f"'files' record of {PART}: size must be a byte count")),
    Damage("manifest-dictionary-scheme", manifest(lambda m: m.update(dictionary="foo:bar")), (1, "dictionary foo:bar: unknown dictionary backend 'foo:bar'"), (2, "unknown dictionary backend 'foo:bar'")),
    Damage("manifest-dictionary-elsewhere", manifest(lambda m: m.update(dictionary="lmdb:/nonexistent-linkstream/dict")), (1, "its dictionary lmdb:/nonexistent-linkstream/dict is missing"), (2, "its dictionary lmdb:/nonexistent-linkstream/dict is missing")),
    Damage("lmdb-truncated", truncate("dict/data.mdb", 8192), (1, "dict/data.mdb: size 8192 bytes, expected at least"), (2, "dict/data.mdb: size 8192 bytes, expected at least")),
    Damage("lmdb-emptied", truncate("dict/data.mdb", 0), (1, "dict/data.mdb: size 0 bytes"), (2, "dict/data.mdb: size 0 bytes")),
    Damage("lmdb-missing", remove("dict/data.mdb"), (1, "dict/data.mdb: missing"), (2, "dict/data.mdb: missing")),
    Damage("lmdb-folder-missing", remove("dict"), (1, "dict/data.mdb: missing"), (2, "dict/data.mdb: missing")),
    Damage("lmdb-overwritten", lambda p: open(p / "dict/data.mdb", "r+b").write(b"\0" * 4096), (1, "not a usable LMDB dictionary"), (2, "not a usable LMDB dictionary")),
]
# fmt: on


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli_main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 2
    return code, out.getvalue(), err.getvalue()


@pytest.fixture()
def damaged(request: pytest.FixtureRequest, pristine: Path, tmp_path: Path) -> tuple[Damage, Path]:
    case: Damage = request.param
    store = tmp_path / "store"
    shutil.copytree(pristine / "store", store)
    case.damage(store)
    return case, store


def _one_error_line(err: str, code: int, says: str, store: Path) -> None:
    lines = err.strip().splitlines()
    assert "Traceback" not in err
    assert (
        len(lines) == 1 and lines[0].startswith("error: ") and says in lines[0] and str(store) in lines[0]
    ), err


@pytest.mark.parametrize("damaged", DAMAGES, ids=[c.id for c in DAMAGES], indirect=True)
def test_store_verify(damaged: tuple[Damage, Path]) -> None:
    case, store = damaged
    code, out, err = run_cli(["store", "verify", str(store)])
    assert "Traceback" not in err
    if case.verify is None:
        assert code == 0 and out.startswith(f"OK {store} ("), out + err
        return
    want, says = case.verify
    assert code == want, out + err
    if want == 1:
        assert err.strip().endswith("files damaged"), err
        damaged_lines = [x for x in out.splitlines() if x.startswith("DAMAGED ")]
        assert damaged_lines and any(says in x and str(store) in x for x in damaged_lines), out
    else:
        _one_error_line(err, code, says, store)


@pytest.mark.parametrize("damaged", DAMAGES, ids=[c.id for c in DAMAGES], indirect=True)
def test_store_sparql(damaged: tuple[Damage, Path]) -> None:
    case, store = damaged
    code, out, err = run_cli(["sparql", "--store", str(store), COUNT])
    if case.read is None:
        assert code == 0, err
        assert json.loads(out)["results"]["bindings"][0]["n"]["value"] == "2"
        return
    assert code == case.read[0], err
    _one_error_line(err, code, case.read[1], store)


@pytest.mark.parametrize("damaged", DAMAGES, ids=[c.id for c in DAMAGES], indirect=True)
def test_store_replay(damaged: tuple[Damage, Path], pristine: Path) -> None:
    case, store = damaged
    out_file = store.parent / "out.jsonl"
    code, _, err = run_cli(
        ["replay", "--store", str(store), "--query", str(pristine / "q.rq"), "--quiet",
         "--stream", f"http://ex.org/s={pristine}/s.nq", "--out", str(out_file)]
    )  # fmt: skip
    if case.read is None:
        assert code == 0, err
        rows = [json.loads(x) for x in out_file.read_text().splitlines()]
        assert [(r["t"], r["binding"]) for r in rows] == [(1704067202000, {"v": '"1"'})]
        return
    assert code == case.read[0], err
    _one_error_line(err, code, case.read[1], store)


def test_altered_part_data_is_found_by_verify_only(pristine: Path, tmp_path: Path) -> None:
    """Documented: opening checks sizes only; a same-size change of the data is found by
    ``store verify`` (checksums), not by a query, which reads the altered id."""
    store = tmp_path / "store"
    shutil.copytree(pristine / "store", store)
    flip(PART, 140)(store)
    code, out, _ = run_cli(["store", "verify", str(store)])
    assert code == 1 and f"DAMAGED {store}/{PART}: checksum crc32" in out


def test_damaged_index_cache_is_rebuilt(
    pristine: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The index cache is not part of the store: a damaged one is rebuilt, the answer is right."""
    store = tmp_path / "store"
    shutil.copytree(pristine / "store", store)
    assert run_cli(["sparql", "--store", str(store), COUNT])[0] == 0  # builds index/
    caches = sorted((store / "index").rglob("*.npy"))
    assert caches
    os.truncate(caches[0], 60)
    code, out, err = run_cli(["sparql", "--store", str(store), "SELECT ?s WHERE { ?s ?p ?o } ORDER BY ?s"])
    assert code == 0 and "Traceback" not in err
    assert "unusable index cache, rebuilding" in caplog.text
    assert [b["s"]["value"] for b in json.loads(out)["results"]["bindings"]] == [
        "http://ex.org/s1",
        "http://ex.org/s2",
    ]


def test_subprocess_truncated_lmdb_is_refused_not_sigbus(pristine: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    shutil.copytree(pristine / "store", store)
    os.truncate(store / "dict" / "data.mdb", 4096)
    r = subprocess.run(
        [sys.executable, "-m", "linkstream.cli", "sparql", "--store", str(store), COUNT],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip().startswith(f"error: cannot open store {store}: damaged store {store}: ")
    assert "dict/data.mdb: size 4096 bytes, expected at least" in r.stderr
