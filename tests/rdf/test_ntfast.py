"""The compiled N-Triples / N-Quads scanner (``platform/rdf/_ntparse.c``) gives what the Python
parser gives: the same terms, the same dictionary ids (first occurrences in file order), the
same rejected lines with the same messages and line numbers.  ``make venv`` builds it
wherever a C compiler is installed; without it the Python parser reads every line."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linkstream.rdf import ntfast, static
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.lmdb_dictionary import LmdbDictionary
from linkstream.rdf.ntriples import NTriplesError, parser_for
from tests.rdf.test_ntriples import _ALPHABET, _SEEDS, CORPUS, XSD, shared_dir

needs_native = pytest.mark.skipif(ntfast._scanner is None, reason="compiled scanner not built")


def test_the_scanner_is_built_where_a_compiler_is() -> None:
    if not (shutil.which("cc") or shutil.which("gcc")):
        pytest.skip("no C compiler on this machine: the Python parser reads every line")
    assert ntfast._scanner is not None, "platform/rdf/_ntparse.c was not built by the install (make venv)"
    assert ntfast.use_native(True) and ntfast.native()


def _load(path: Path, native: bool, prefix: str = "f_") -> tuple[np.ndarray, list, list[str]]:
    """The file read by the compiled scanner into the compiled term index (native), or by
    the Python parser into the Python ``dict`` (not native): the build without a compiler."""
    was = ntfast.use_native(native)
    try:
        d = MemoryDictionary(compiled=native)
        logs: list[str] = []
        triples = static.load_graph(str(path), d, bnode_prefix=prefix, log=logs.append)
        return triples, d.decode_many(np.arange(1, len(d) + 1)), logs
    finally:
        ntfast.use_native(was)


def _same(path: Path, prefix: str = "f_") -> tuple[np.ndarray, list[str]]:
    a, terms_a, logs_a = _load(path, False, prefix)
    b, terms_b, logs_b = _load(path, True, prefix)
    assert terms_b == terms_a  # the same terms, given the same ids
    assert b.dtype == a.dtype == np.int64 and np.array_equal(b, a)
    assert logs_b == logs_a  # the same rejections, messages, line numbers
    return a, logs_a


def _lines_file(tmp_path: Path, lines: list[str | bytes], name: str = "g.nq", end: bytes = b"\n") -> Path:
    data = b"".join((x if isinstance(x, bytes) else x.encode("utf-8", "surrogatepass")) + end for x in lines)
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _scan(line: str | bytes) -> tuple[list[str], list[int], bool]:
    raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")
    assert ntfast._scanner is not None
    terms, idx, end, lines, stopped = ntfast._scanner.scan(
        raw + b"\n", 0, b"m", True, parser_for("m")._langs, None, None
    )
    return terms, np.frombuffer(idx, dtype=np.int64).tolist(), stopped


@needs_native
@pytest.mark.parametrize("line", CORPUS, ids=[repr(x)[:60] for x in CORPUS])
def test_every_line_the_scanner_reads_is_read_as_the_parser_reads_it(line: str | bytes) -> None:
    terms, idx, stopped = _scan(line)
    text = line.decode("utf-8", "surrogateescape") if isinstance(line, bytes) else line
    if stopped:  # the Python parser decides
        assert not terms
        return
    try:
        want = parser_for("m").parse_statements(text)
    except NTriplesError as e:
        raise AssertionError(f"the scanner accepted a line the parser rejects: {e}") from None
    got = [tuple(terms[i] if i >= 0 else None for i in idx[k : k + 4]) for k in range(0, len(idx), 4)]
    assert got == want


@needs_native
def test_the_scanner_reads_the_common_lines() -> None:
    common = [
        "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .",
        "<http://ex.org/s>\t<http://ex.org/p>  <http://ex.org/o> <http://ex.org/g>. # c",
        '_:b1 <http://ex.org/p> "caf\u00e9 \U0001f600" .',
        f'<http://ex.org/s> <http://ex.org/p> "01"^^<{XSD}integer> _:g .',
        f'<http://ex.org/s> <http://ex.org/p> "x"^^<{XSD}string> .',
        "_:a.b <http://ex.org/p> _:b2.",
        "# a comment",
        "",
    ]
    for line in common:
        assert not _scan(line)[2], line
    assert _scan(f'<http://ex.org/s> <http://ex.org/p> "x"^^<{XSD}string> .')[0][2] == '"x"'
    assert _scan("_:a.b <http://ex.org/p> _:b2.")[0] == ["_:ma.b", "<http://ex.org/p>", "_:mb2"]
    # and leaves the others to the parser
    for line in ('<http://ex.org/s> <http://ex.org/p> "x"@en .', "<urn:x> <http://ex.org/p> <urn:y> ."):
        assert _scan(line)[2], line


@needs_native
def test_corpus_file(tmp_path: Path) -> None:
    triples, logs = _same(_lines_file(tmp_path, CORPUS))
    assert len(triples) > 40 and len(logs) > 40
    # a line's number is its line in the file, blank and comment lines counted
    bad = CORPUS.index("garbage") + 1
    assert any(m.startswith(f"{tmp_path / 'g.nq'}:{bad}: rejected: ") for m in logs)


@needs_native
@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_line_ends_and_a_byte_order_mark(tmp_path: Path, end: bytes) -> None:
    lines: list[str | bytes] = [b"\xef\xbb\xbf<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> ."]
    lines += CORPUS[:12] + ["\ufeff<http://ex.org/s> <http://ex.org/p> <http://ex.org/x> ."]
    _same(_lines_file(tmp_path, lines, end=end))


@needs_native
def test_blocks_cut_anywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _lines_file(tmp_path, CORPUS * 3)
    want = _load(path, False)
    for block in (1, 7, 64, 1000):
        monkeypatch.setattr(ntfast, "BLOCK", block)
        monkeypatch.setattr(ntfast, "BATCH_TERMS", 5)
        got = _load(path, True)
        assert got[1] == want[1] and np.array_equal(got[0], want[0]) and got[2] == want[2]


@needs_native
def test_no_line_end_at_the_end_and_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "x.nt"
    path.write_bytes(b"<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\n_:a <http://ex.org/p> _:b .")
    triples, _ = _same(path)
    assert len(triples) == 2
    path.write_bytes(b"")
    assert len(_same(path)[0]) == 0


def _mutate(rnd: random.Random) -> str:
    s = rnd.choice(_SEEDS)
    for _ in range(rnd.randint(0, 3)):
        k = rnd.randrange(len(s) + 1)
        op = rnd.random()
        if op < 0.4:
            s = s[:k] + rnd.choice(_ALPHABET) + s[k:]
        elif op < 0.8:
            s = s[:k] + s[k + 1 :]
        else:
            s = s[:k] + rnd.choice(_ALPHABET) + s[k + 1 :]
    return s.replace("\n", " ")


_IRIS = st.sampled_from(["<http://ex.org/a>", "<http://ex.org/b#x>", "<urn:x>", "<http://ex.org/%41>"])
_BNODES = st.sampled_from(["_:a", "_:b.c", "_:x1", "_:\u00e9t\u00e9"])
_LITS = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=6).map(
        lambda t: (
            '"' + t.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "") + '"'
        )
    ),
    st.sampled_from(['"1"^^<http://ex.org/dt>', f'"x"^^<{XSD}string>', '"x"@en', '"x"@EN-gb', '"\\u0041"']),
)
_WS = st.sampled_from([" ", "\t", "  ", ""])


@st.composite
def _statement(draw: st.DrawFn) -> str:
    s = draw(st.one_of(_IRIS, _BNODES))
    p = draw(_IRIS)
    o = draw(st.one_of(_IRIS, _BNODES, _LITS))
    g = draw(st.one_of(st.just(""), _IRIS, _BNODES))
    w = [draw(_WS) for _ in range(4)]
    tail = draw(st.sampled_from(["", " # c", "#x"]))
    return f"{s}{w[0] or ' '}{p}{w[1]}{o}{w[2]}{g}{w[3]}.{tail}"


@needs_native
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.one_of(_statement(), st.randoms(use_true_random=False).map(_mutate)), max_size=30),
    prefix=st.sampled_from(["", "p_"]),
)
def test_generated_files(tmp_path: Path, lines: list[str], prefix: str) -> None:
    _same(_lines_file(tmp_path, list(lines), name="h.nt"), prefix)


def _citybench(rel: str) -> Path:
    shared = shared_dir()
    path = shared / rel if shared else None
    if path is None or not path.exists():
        pytest.skip("shared data not found (set LINKSTREAM_SHARED)")
    return path


@needs_native
@pytest.mark.parametrize(
    "rel",
    [
        "citybench/static/SensorRepository.nt",
        "citybench/static/AarhusLibraryEvents.nt",
        "citybench/static/AarhusCulturalEvents.nt",
        "citybench/streams/AarhusParkingDataKALKVAERKSVEJ.nq",
    ],
)
def test_citybench_files(rel: str) -> None:
    triples, logs = _same(_citybench(rel), prefix=os.path.basename(rel)[:6] + "_")
    assert len(triples) > 500 and not logs


@needs_native
@pytest.mark.parametrize("block", [ntfast.BLOCK, 97])
def test_other_dictionaries_get_the_same_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """A dictionary that is not the in-memory one (here LMDB) gets each batch's distinct terms
    through encode_many: the same ids as the Python path."""
    path = _lines_file(
        tmp_path, CORPUS * 2 + [f"_:b{i} <http://ex.org/p> <http://ex.org/o{i % 7}> ." for i in range(300)]
    )
    monkeypatch.setattr(ntfast, "BLOCK", block)
    monkeypatch.setattr(ntfast, "BATCH_TERMS", 50)
    got = []
    for native in (False, True):
        was = ntfast.use_native(native)
        d = LmdbDictionary(str(tmp_path / f"lmdb{native}"))
        try:
            logs: list[str] = []
            triples = static.load_graph(str(path), d, bnode_prefix="l_", log=logs.append)
            got.append((triples, d.decode_many(np.arange(1, len(d) + 1)), logs))
        finally:
            d.close()
            ntfast.use_native(was)
    (a, terms_a, logs_a), (b, terms_b, logs_b) = got
    assert terms_b == terms_a and np.array_equal(b, a) and logs_b == logs_a
    assert len(a) > 300 and len(logs_a) > 40


def _same_quads(path: Path, prefix: str = "q_", batch: int | None = None) -> list[tuple]:
    """``encoded_quads`` reads the statements (graphs included) and rejections of
    ``static.line_quads``; only subject, predicate and object terms enter the dictionary, in
    the order they first occur."""
    logs_py: list[str] = []
    want = [tuple(q) for q in static.line_quads(str(path), prefix, logs_py.append)]
    d = MemoryDictionary()
    logs: list[str] = []
    got = []
    for triples, graphs, names in ntfast.encoded_quads(str(path), d, prefix, logs.append):
        assert triples.shape == (len(graphs), 3) and len(set(names)) == len(names)
        for row, g in zip(triples.tolist(), graphs.tolist()):
            got.append((*d.decode_many(np.array(row)), names[g]))
    assert got == want and logs == logs_py
    first = list(dict.fromkeys(t for q in want for t in q[:3]))
    assert d.decode_many(np.arange(1, len(d) + 1)) == first
    return got


@needs_native
def test_quads_of_the_corpus_with_graphs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [
        *CORPUS,
        *(
            f"_:b{i} <http://ex.org/p> <http://ex.org/o{i % 7}> <http://ex.org/g{i % 3}> ."
            for i in range(200)
        ),
    ]
    monkeypatch.setattr(ntfast, "BATCH_TERMS", 50)  # several batches, a graph named in several
    got = _same_quads(_lines_file(tmp_path, lines))
    assert {q[3] for q in got} >= {None, "<http://ex.org/g0>", "<http://ex.org/g2>"}


@needs_native
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(st.one_of(_statement(), st.randoms(use_true_random=False).map(_mutate)), max_size=30),
    prefix=st.sampled_from(["", "p_"]),
)
def test_generated_quads(tmp_path: Path, lines: list[str], prefix: str) -> None:
    _same_quads(_lines_file(tmp_path, list(lines), name="q.nq"), prefix)
