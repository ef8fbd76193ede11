"""Store directory format: partitions, manifest, dictionary URI, and the pure-Python loader."""

from __future__ import annotations

import json

import numpy as np
import pytest

from linkstream.rdf import ntfast
from linkstream.rdf.dictionary import open_dictionary
from linkstream.store import layout
from linkstream.store.loader import expand_inputs, load_store


def _rows(a: np.ndarray) -> set[tuple[int, int, int]]:
    return set(map(tuple, np.asarray(a).reshape(-1, 3).tolist()))


def test_write_partitions_round_trip_dedups_and_partitions_by_subject(tmp_path):
    rng = np.random.default_rng(1)
    t = rng.integers(1, 50, size=(2000, 3))
    chunks = [t[:700], t[700:1500], t[1500:], t[:100]]  # repeats across chunks
    e = layout.write_partitions(tmp_path, "http://ex.org/g", chunks, 4)
    assert e.iri == "http://ex.org/g" and e.dir == "g0"
    assert e.triples == len(_rows(t))
    layout.write_manifest(tmp_path, dictionary="lmdb:dict", partitions=4, graphs=[e], sources=["a.nt"])
    m = layout.read_manifest(tmp_path)
    assert m.partitions == 4 and m.graph("http://ex.org/g") == e and m.graph(None) is None
    assert m.sources == ("a.nt",) and m.loader == "python"
    parts = list(layout.iter_partitions(tmp_path, "http://ex.org/g", mmap=True))
    assert len(parts) == 4
    for k, p in enumerate(parts):
        assert p.dtype == np.int64 and p.shape[1] == 3
        assert np.all(p[:, 0] % 4 == k)
        assert len(_rows(p)) == len(p)  # distinct within the partition
    assert _rows(layout.read_graph(tmp_path, "http://ex.org/g")) == _rows(t)
    doc = json.loads((tmp_path / "store.json").read_text())
    assert doc["format"] == "linkstream-store" and doc["version"] == 1
    assert doc["graphs"] == [{"iri": "http://ex.org/g", "dir": "g0", "triples": e.triples}]


def test_manifest_orders_default_graph_first_and_next_dir(tmp_path):
    g1 = layout.write_partitions(tmp_path, "http://ex.org/b", np.array([[1, 2, 3]]), 2)
    g0 = layout.write_partitions(tmp_path, None, np.array([[4, 5, 6]]), 2)
    assert (g1.dir, g0.dir) == ("g0", "g1")
    layout.write_manifest(tmp_path, dictionary="memory:", partitions=2, graphs=[g1.to_json(), g0])
    m = layout.read_manifest(tmp_path)
    assert [g.iri for g in m.graphs] == [None, "http://ex.org/b"]
    assert m.total_triples == 2
    assert list(layout.iter_partitions(tmp_path, "http://nope")) == []


def test_read_manifest_errors(tmp_path):
    with pytest.raises(FileNotFoundError):
        layout.read_manifest(tmp_path)
    (tmp_path / "store.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="not a linkstream-store"):
        layout.read_manifest(tmp_path)
    (tmp_path / "store.json").write_text('{"format": "linkstream-store", "version": 9, "partitions": 1}')
    with pytest.raises(ValueError, match="unsupported store version"):
        layout.read_manifest(tmp_path)


def test_dictionary_uri_resolution(tmp_path):
    assert layout.resolve_dictionary_uri(tmp_path, "lmdb:dict") == f"lmdb:{tmp_path.resolve() / 'dict'}"
    assert layout.resolve_dictionary_uri(tmp_path, "lmdb:/abs/d") == "lmdb:/abs/d"
    assert layout.resolve_dictionary_uri(tmp_path, "hbase://h:9090/t") == "hbase://h:9090/t"
    assert layout.resolve_dictionary_uri(tmp_path, "memory:") == "memory:"


NQ = """\
<http://ex.org/a> <http://ex.org/p> "x" <http://ex.org/g1> .
<http://ex.org/a> <http://ex.org/p> "x" <http://ex.org/g1> .
<http://ex.org/b> <http://ex.org/p> _:n1 <http://ex.org/g2> .
<http://ex.org/c> <http://ex.org/q> <http://ex.org/d> .
this line is broken
"""
NT = """\
_:n1 <http://ex.org/q> "1"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://ex.org/c> <http://ex.org/q> <http://ex.org/d> .
"""


@pytest.fixture(params=[True, False], ids=["compiled", "python"])
def reader(request):
    """The compiled N-Triples scanner on, then off (the Python line parser reads every line)."""
    if request.param and not ntfast.native():
        pytest.skip("compiled scanner not built")
    was = ntfast.use_native(request.param)
    yield request.param
    ntfast.use_native(was)


def test_load_store_named_graphs_bnodes_and_rejects(tmp_path, reader):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.nq").write_text(NQ)
    (tmp_path / "in" / "b.nt").write_text(NT)
    rejected: list[str] = []
    progress: list[str] = []
    out = tmp_path / "store"
    entries = load_store(out, [tmp_path / "in"], partitions=3, progress=progress.append, log=rejected.append)
    assert [e.iri for e in entries] == [None, "http://ex.org/g1", "http://ex.org/g2"]
    assert [e.triples for e in entries] == [2, 1, 1]  # the repeated quad / triple counted once
    assert len(rejected) == 1 and "a.nq:5: rejected" in rejected[0]
    assert progress and progress[-1].startswith(f"store {out}")
    m = layout.read_manifest(out)
    assert m.dictionary == "lmdb:dict" and m.loader == "python" and len(m.sources) == 2
    d = layout.open_store_dictionary(out, m)
    try:

        def decoded(g):
            t = layout.read_graph(out, g)
            return {tuple(d.decode_many(r)) for r in t}

        assert decoded(None) == {
            ("_:s1_n1", "<http://ex.org/q>", '"1"^^<http://www.w3.org/2001/XMLSchema#integer>'),
            ("<http://ex.org/c>", "<http://ex.org/q>", "<http://ex.org/d>"),
        }
        # blank nodes of different files stay distinct (per-file prefix s{k}_)
        assert decoded("http://ex.org/g2") == {("<http://ex.org/b>", "<http://ex.org/p>", "_:s0_n1")}
    finally:
        d.close()
    with pytest.raises(FileExistsError):
        load_store(out, [tmp_path / "in"])
    entries = load_store(out, [tmp_path / "in"], default_graph=True, overwrite=True)
    assert [(e.iri, e.triples) for e in entries] == [(None, 4)]


def test_load_store_other_formats_and_errors(tmp_path):
    ttl = tmp_path / "x.ttl"
    ttl.write_text("@prefix : <http://ex.org/> . :a :p :b , :c .\n")
    dic = open_dictionary("memory:")
    entries = load_store(tmp_path / "s", [ttl], dictionary_uri="memory:", dictionary=dic, partitions=1)
    assert [(e.iri, e.triples) for e in entries] == [(None, 2)]
    with pytest.raises(FileNotFoundError):
        expand_inputs([tmp_path / "missing.nt"])
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(ValueError, match="unknown RDF format"):
        load_store(tmp_path / "s2", [tmp_path / "x.csv"], dictionary_uri="memory:", dictionary=dic)
