"""Store integrity (issue 18 item 4): the manifest records sizes and checksums of the files;
opening checks sizes, ``linkstream store verify`` recomputes checksums."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from linkstream.store import layout
from linkstream.store.persistent import PersistentStore

COUNT = "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"


@pytest.fixture
def store(tmp_path: Path, capsys) -> Path:
    src = tmp_path / "data.nt"
    src.write_text(
        "".join(
            f"<http://ex.org/s{i}> <http://ex.org/p{i % 3}> <http://ex.org/o{i % 7}> .\n" for i in range(40)
        ),
        encoding="utf-8",
    )
    d = tmp_path / "store"
    assert cli_main(["load", "--store", str(d), "--partitions", "4", str(src)]) == 0
    capsys.readouterr()
    return d


def _count(store: Path, capsys) -> tuple[int, str, str]:
    rc = cli_main(["sparql", "--store", str(store), "--format", "tsv", COUNT])
    out, err = capsys.readouterr()
    return rc, out, err


def _part(store: Path) -> Path:
    files = json.loads((store / "store.json").read_text())["files"]
    parts = sorted(k for k in files if k.endswith(".npy"))
    assert len(parts) == 4
    return store / parts[1]


def test_manifest_records_sizes_and_checksums(store: Path, capsys) -> None:
    files = json.loads((store / "store.json").read_text())["files"]
    for rel, rec in files.items():
        p = store / rel
        if rel.endswith(".npy"):
            assert rec == {"size": p.stat().st_size, "crc32": layout.file_crc32(p)}
        else:
            assert rel == "dict/data.mdb" and rec["min_size"] <= p.stat().st_size
    assert not list(store.glob("store.json.tmp*"))
    rc, out, _ = _count(store, capsys)
    assert rc == 0 and out.splitlines()[1].startswith('"40"')
    assert cli_main(["store", "verify", str(store)]) == 0
    assert capsys.readouterr().out.startswith("OK ")


def test_deleted_partition_is_a_clear_error_not_a_wrong_count(store: Path, capsys) -> None:
    part = _part(store)
    part.unlink()
    rc, out, err = _count(store, capsys)
    assert rc == 2 and out == ""
    assert str(part) in err and "missing" in err
    with pytest.raises(layout.StoreError, match="missing"):
        PersistentStore.open(store)
    with pytest.raises(layout.StoreError, match="missing"):
        layout.read_graph(store, None)
    assert cli_main(["store", "verify", str(store)]) == 1
    out = capsys.readouterr().out
    assert str(part) in out and "missing" in out


def test_truncated_partition_is_a_clear_error(store: Path, capsys) -> None:
    part = _part(store)
    size = part.stat().st_size
    with open(part, "r+b") as f:
        f.truncate(size - 24)
    rc, _, err = _count(store, capsys)
    assert rc == 2 and str(part) in err and f"size {size - 24} bytes, expected {size}" in err
    assert cli_main(["store", "verify", str(store)]) == 1
    assert str(part) in capsys.readouterr().out


def test_truncated_lmdb_dictionary_is_a_clear_error_not_sigbus(store: Path, capsys) -> None:
    data = store / "dict" / "data.mdb"
    with open(data, "r+b") as f:
        f.truncate(4096)
    with pytest.raises(layout.StoreError, match="truncated"):
        PersistentStore.open(store)
    rc, _, err = _count(store, capsys)
    assert rc == 2 and str(data) in err


def test_flipped_byte_found_by_verify_while_open_still_works(store: Path, capsys) -> None:
    part = _part(store)
    raw = bytearray(part.read_bytes())
    raw[-1] ^= 0x01  # same size, different content
    part.write_bytes(bytes(raw))
    rc, _, err = _count(store, capsys)
    assert rc == 0, err  # the cheap open-time check only compares sizes
    assert cli_main(["store", "verify", str(store)]) == 1
    out = capsys.readouterr().out
    assert str(part) in out and "checksum" in out
    assert out.count("DAMAGED") == 1


def test_store_without_records_still_opens(store: Path, capsys) -> None:
    doc = json.loads((store / "store.json").read_text())
    del doc["files"]
    (store / "store.json").write_text(json.dumps(doc))
    rc, out, _ = _count(store, capsys)
    assert rc == 0 and out.splitlines()[1].startswith('"40"')
    assert cli_main(["store", "verify", str(store)]) == 0
    assert "no checksums recorded" in capsys.readouterr().out
    assert cli_main(["store", "verify", str(store / "nope")]) == 2


def test_checkpoint_rewrites_records(store: Path) -> None:
    import numpy as np

    s = PersistentStore.open(store, background_compaction=False)
    try:
        s.absorb("st", 1, np.array([[1, 2, 3]], dtype=np.int64))
        s.checkpoint()
    finally:
        s.close()
    n, bad = layout.verify_files(store)
    assert n >= 4 and bad == []
    PersistentStore.open(store).close()
