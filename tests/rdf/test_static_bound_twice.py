"""`linkstream replay` with one static file bound twice (default and named graph, as the
CityBench runs do) reads it once when that cannot change the graphs: an N-Triples file
without blank node labels.  A file with blank nodes is read per binding (each binding's
blank nodes are its own), and so is a file with a rejected line (the rejection is logged
per binding)."""

from __future__ import annotations

import shutil

from linkstream.cli.main import main
from linkstream.rdf.static import reusable_key

STREAM = """\
<http://ex/e1> <http://www.w3.org/ns/prov#generatedAtTime> "2014-08-01T00:00:01.000Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
<http://ex/x> <http://ex/q> <http://ex/y> <http://ex/e1> .
<http://ex/e2> <http://www.w3.org/ns/prov#generatedAtTime> "2014-08-01T00:00:03.000Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .
<http://ex/x> <http://ex/q> <http://ex/z> <http://ex/e2> .
"""

# ?x must be in the default graph and in <http://g>: the same subject in both
QUERY = """PREFIX : <http://ex/>
REGISTER RSTREAM <out> AS SELECT ?x ?y FROM NAMED WINDOW :w ON :s [RANGE PT2S STEP PT1S] FROM NAMED <http://g>
WHERE { ?x :p :o . GRAPH <http://g> { ?x :p :o } WINDOW :w { :x :q ?y } }
"""


def _replay(tmp_path, default: str, named: str, out: str) -> str:
    rc = main(
        [
            "replay",
            "--query",
            str(tmp_path / "q.rq"),
            "--stream",
            f"http://ex/s={tmp_path / 's.nq'}",
            "--static",
            str(tmp_path / default),
            "--static",
            f"http://g={tmp_path / named}",
            "--out",
            str(tmp_path / out),
            "--quiet",
        ]
    )
    assert rc == 0
    return (tmp_path / out).read_text()


def _setup(tmp_path, static: str) -> None:
    (tmp_path / "s.nq").write_text(STREAM)
    (tmp_path / "q.rq").write_text(QUERY)
    (tmp_path / "st.nt").write_text(static)
    shutil.copy(tmp_path / "st.nt", tmp_path / "copy.nt")


def test_reusable_only_for_line_formats_without_blank_node_labels(tmp_path):
    (tmp_path / "a.nt").write_text("<http://ex/a> <http://ex/p> <http://ex/o> .\n")
    (tmp_path / "b.nt").write_text("_:b <http://ex/p> <http://ex/o> .\n")
    (tmp_path / "c.ttl").write_text("<http://ex/a> <http://ex/p> <http://ex/o> .\n")
    key = reusable_key(str(tmp_path / "a.nt"))
    assert key is not None and key[0].endswith("a.nt")
    assert reusable_key(str(tmp_path / "b.nt")) is None
    assert reusable_key(str(tmp_path / "c.ttl")) is None
    assert reusable_key(str(tmp_path / "missing.nt")) is None


def test_file_bound_twice_equals_two_copies(tmp_path):
    _setup(
        tmp_path, "<http://ex/a> <http://ex/p> <http://ex/o> .\n<http://ex/b> <http://ex/p> <http://ex/o> .\n"
    )
    twice = _replay(tmp_path, "st.nt", "st.nt", "twice.jsonl")
    copies = _replay(tmp_path, "st.nt", "copy.nt", "copies.jsonl")
    assert twice == copies
    assert '"x": "<http://ex/a>"' in twice and '"x": "<http://ex/b>"' in twice


def test_blank_nodes_of_each_binding_stay_apart(tmp_path):
    _setup(tmp_path, "<http://ex/a> <http://ex/p> <http://ex/o> .\n_:b1 <http://ex/p> <http://ex/o> .\n")
    twice = _replay(tmp_path, "st.nt", "st.nt", "twice.jsonl")
    assert twice == _replay(tmp_path, "st.nt", "copy.nt", "copies.jsonl")
    rows = twice.splitlines()
    # the blank node of the default graph is not the one of <http://g>: only :a joins
    assert len(rows) == 3 and all('"x": "<http://ex/a>"' in r for r in rows)


def test_a_rejected_line_is_logged_for_each_binding(tmp_path, capsys):
    _setup(tmp_path, "<http://ex/a> <http://ex/p> <http://ex/o> .\nnot a triple\n")
    capsys.readouterr()
    twice = _replay(tmp_path, "st.nt", "st.nt", "twice.jsonl")
    err = capsys.readouterr().err
    assert err.count("st.nt:2: rejected") == 2, err
    assert twice == _replay(tmp_path, "st.nt", "copy.nt", "copies.jsonl")
