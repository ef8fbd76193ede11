"""The Spark bulk loader (real Spark ``local[2]``) against the pure-Python loader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from linkstream.bulk.spark_load import spark_load
from linkstream.cli import main as cli_main
from linkstream.rdf.dictionary import open_dictionary
from linkstream.store import layout
from linkstream.store.loader import load_store
from tests.bulk.store_compare import assert_same_store, check_partitions
from tests.shared_paths import shared_or_skip

pytestmark = pytest.mark.spark


def _statics() -> list[str]:
    return sorted(str(p) for p in (shared_or_skip() / "citybench" / "static").glob("*.nt"))


@pytest.fixture(scope="module")
def python_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CityBench static graphs loaded by the pure-Python loader."""
    d = tmp_path_factory.mktemp("python-store")
    load_store(d, _statics(), partitions=4)
    return d


def test_citybench_statics_equal_python_load(spark, python_store: Path, tmp_path: Path) -> None:
    out = tmp_path / "spark-store"
    lines: list[str] = []
    res = spark_load(str(out), _statics(), partitions=4, spark=spark, log=lines.append)
    assert res.rejected == 0 and res.statements == 68928
    assert res.new_terms == res.terms > 0
    assert any(x.startswith("parse:") for x in lines) and any(x.startswith("done:") for x in lines)
    m = layout.read_manifest(out)
    assert m.loader == "spark" and m.partitions == 4 and m.dictionary == "lmdb:dict"
    assert [g.iri for g in m.graphs] == [None]
    assert m.sources == tuple(_statics())
    assert not (out / ".spark-work").exists()
    check_partitions(out)
    ref, other = layout.open_store_dictionary(python_store), layout.open_store_dictionary(out)
    try:
        assert len(other) == res.terms
        assert_same_store(python_store, out, ref, other)
    finally:
        ref.close()
        other.close()


def test_existing_terms_keep_their_ids(spark, python_store: Path, tmp_path: Path) -> None:
    # a dictionary that already holds the terms of one of the files (and one unrelated term)
    dict_uri = f"lmdb:{tmp_path / 'shared-dict'}"
    statics = _statics()
    pre = tmp_path / "pre"
    load_store(pre, [statics[0]], dictionary_uri=dict_uri, partitions=2)
    d = open_dictionary(dict_uri)
    extra = d.encode_many(["<http://example.org/unrelated>"])
    before_ids = np.unique(layout.read_graph(pre, None))
    before_terms = d.decode_many(before_ids)
    n_before = len(d)
    d.close()

    out = tmp_path / "spark-store"
    res = spark_load(str(out), statics, partitions=4, dictionary=dict_uri, spark=spark)
    assert 0 < res.new_terms < res.terms
    d = open_dictionary(dict_uri)
    ref = layout.open_store_dictionary(python_store)
    try:
        assert np.array_equal(d.lookup_many(before_terms), before_ids)
        assert d.decode_many(extra) == ["<http://example.org/unrelated>"]
        assert len(d) == n_before + res.new_terms
        assert layout.read_manifest(out).dictionary == dict_uri
        assert_same_store(python_store, out, ref, d)
    finally:
        d.close()
        ref.close()


def test_all_terms_known_gives_identical_arrays(spark, python_store: Path, tmp_path: Path) -> None:
    dict_uri = "lmdb:" + str(python_store / "dict")
    out = tmp_path / "spark-store"
    res = spark_load(str(out), _statics(), partitions=4, dictionary=dict_uri, spark=spark)
    assert res.new_terms == 0
    for k in range(4):
        a = np.load(layout.partition_path(python_store, "g0", k))
        b = np.load(layout.partition_path(out, "g0", k))
        assert np.array_equal(layout.unique_rows(a), layout.unique_rows(b))


BAD_NT = """\
<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .
# a comment, then a blank line

<http://ex.org/a> <http://ex.org/p> "unterminated .
<http://ex.org/a> <http://ex.org/p> "x"@en .
"literal subject" <http://ex.org/p> <http://ex.org/b> .
_:b1 <http://ex.org/p> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .
<relative> <http://ex.org/p> <http://ex.org/b> .
_:b1 <http://ex.org/q> "01"^^<http://www.w3.org/2001/XMLSchema#integer> .
"""

BAD_NQ = """\
<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> <http://ex.org/g1> .
_:b1 <http://ex.org/p> <http://ex.org/c> <http://ex.org/g2> .
<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> "graph literal" .
<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> .
<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> <http://ex.org/g1> .
<http://ex.org/a> <http://ex.org/p> <http://ex.org/c> <http://ex.org/g1>
"""


def _bad_inputs(tmp_path: Path) -> Path:
    src = tmp_path / "in"
    src.mkdir()
    (src / "a.nt").write_text(BAD_NT, encoding="utf-8")
    (src / "b%20 [1].nq").write_text(BAD_NQ, encoding="utf-8")  # URL escapes, glob characters
    return src


@pytest.mark.parametrize("join_on_hash", [True, False], ids=["hash-join", "string-join"])
def test_bad_lines_reported_and_skipped(spark, tmp_path: Path, join_on_hash: bool) -> None:
    src = _bad_inputs(tmp_path)
    lines: list[str] = []
    res = spark_load(
        str(tmp_path / "s"),
        [str(src)],
        partitions=3,
        spark=spark,
        log=lines.append,
        join_on_hash=join_on_hash,
    )
    assert res.rejected == 5 and len(res.errors) == 5
    assert all(": rejected: " in e for e in res.errors)
    assert sum("a.nt: rejected: " in e for e in res.errors) == 3
    assert any("b%20 [1].nq: rejected: " in e and "graph literal" in e for e in res.errors)
    assert all(e in lines for e in res.errors)
    assert res.statements == 9
    rejected: list[str] = []
    load_store(tmp_path / "p", [str(src)], partitions=3, log=rejected.append)
    assert len(rejected) == 5
    m = layout.read_manifest(tmp_path / "s")
    assert {g.iri: g.triples for g in m.graphs} == {None: 5, "http://ex.org/g1": 1, "http://ex.org/g2": 1}
    check_partitions(tmp_path / "s")
    a, b = layout.open_store_dictionary(tmp_path / "p"), layout.open_store_dictionary(tmp_path / "s")
    try:
        assert_same_store(tmp_path / "p", tmp_path / "s", a, b)
        # blank nodes are per file: _:b1 of a.nt and of b.nq are two terms
        assert len([t for t in b.decode_many(np.arange(1, len(b) + 1)) if t.startswith("_:")]) == 2
    finally:
        a.close()
        b.close()


def test_cli_load_with_spark_default_graph(spark, tmp_path: Path, capsys) -> None:
    src = _bad_inputs(tmp_path)
    store = tmp_path / "store"
    rc = cli_main(
        [
            "load",
            "--store",
            str(store),
            "--spark",
            "local[2]",
            "--default-graph",
            "--partitions",
            "2",
            str(src),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "parse: 9 statements, 5 rejected lines" in err
    assert "loaded 6 triples in 1 graph(s)" in err
    doc = json.loads((store / "store.json").read_text())
    assert doc["loader"] == "spark" and [g["iri"] for g in doc["graphs"]] == [None]
    assert spark.sparkContext._jsc is not None  # the test session was reused, not stopped


def test_cli_load_python_and_errors(tmp_path: Path, capsys) -> None:
    src = _bad_inputs(tmp_path)
    store = tmp_path / "store"
    assert cli_main(["load", "--store", str(store), str(src)]) == 0
    err = capsys.readouterr().err
    assert "rejected" in err and "loaded 7 triples in 3 graph(s)" in err
    assert json.loads((store / "store.json").read_text())["loader"] == "python"
    # an existing store, a missing input, a dictionary Spark workers cannot share, bad P
    assert cli_main(["load", "--store", str(store), str(src)]) == 2
    assert "already holds a store" in capsys.readouterr().err
    assert (
        cli_main(["load", "--store", str(tmp_path / "x"), "--spark", "local[2]", str(tmp_path / "nope.nt")])
        == 2
    )
    assert "nope.nt" in capsys.readouterr().err
    assert (
        cli_main(
            [
                "load",
                "--store",
                str(tmp_path / "y"),
                "--spark",
                "local[2]",
                "--dictionary",
                "memory:",
                str(src),
            ]
        )
        == 2
    )
    assert "share" in capsys.readouterr().err
    assert cli_main(["load", "--store", str(tmp_path / "z"), "--partitions", "0", str(src)]) == 2
    with pytest.raises(SystemExit):
        cli_main(["load", "--help"])
    assert "--spark MASTER" in capsys.readouterr().out


def test_hbase_dictionary_written_by_spark_workers(spark, tmp_path: Path) -> None:
    # the HBase Thrift 1 emulator (a test double) serves the workers over a real socket
    from tests.rdf.hbase_emulator import HBaseThriftEmulator
    from tests.rdf.hbase_support import fresh_table

    src = _bad_inputs(tmp_path)
    load_store(tmp_path / "p", [str(src)], partitions=3, log=lambda _m: None)
    with HBaseThriftEmulator() as emu:
        uri = f"hbase://{emu.address}/{fresh_table()}"
        d = open_dictionary(uri)
        known = d.encode_many(["<http://ex.org/a>"])  # a term of the input, already there
        d.close()
        res = spark_load(str(tmp_path / "s"), [str(src)], partitions=3, dictionary=uri, spark=spark)
        assert res.new_terms == res.terms - 1
        ref, other = (
            layout.open_store_dictionary(tmp_path / "p"),
            layout.open_store_dictionary(tmp_path / "s"),
        )
        try:
            assert other.lookup_many(["<http://ex.org/a>"]).tolist() == known.tolist()
            assert len(other) == res.terms
            assert_same_store(tmp_path / "p", tmp_path / "s", ref, other)
        finally:
            ref.close()
            other.close()
