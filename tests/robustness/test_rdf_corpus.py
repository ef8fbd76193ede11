"""A corpus of bad (and borderline valid) N-Triples / N-Quads lines, stream files and static files.

* Lines: :func:`parse_line` returns the exact quad, or raises :class:`NTriplesError` whose
  one-line text names the problem (and the column where it has one).
* Stream files: :class:`StreamReader` yields exactly the expected elements and counts, and
  logs the first rejection as ``PATH:LINE: ...`` naming the problem.
* Static files: :func:`load_graph` returns the expected number of triples, or raises
  ``ValueError``/``OSError`` naming the file and the problem in one line.
* A few through ``linkstream replay``: exit status, one-line errors, the warnings.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from linkstream.rdf.dictionary import open_dictionary
from linkstream.rdf.ntriples import NTriplesError, parse_line
from linkstream.rdf.static import load_graph
from linkstream.rdf.streams import StreamReader

A, P, G = "<http://ex.org/a>", "<http://ex.org/p>", "<http://ex.org/g>"
XSD = "http://www.w3.org/2001/XMLSchema#"
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"
OK = f'{A} {P} "x" .'


def tt(depth: int) -> str:
    """A statement whose object is a triple term nested ``depth`` deep."""
    return f"{A} {P} " + f"<<( {A} {P} " * depth + '"x"' + " )>>" * depth + " ."


@dataclass
class Line:
    """One statement: ``quad`` when accepted, else ``says`` is in the NTriplesError text."""

    id: str
    line: str
    quad: tuple[str, str, str, str | None] | None = None
    says: str = ""


# fmt: off
LINES: list[Line] = [
    Line("ok", OK, (A, P, '"x"', None)),
    Line("ok-quad", f'{A} {P} "x" {G} .', (A, P, '"x"', G)),
    Line("ok-tabs", f'{A}\t{P}\t"x"\t.', (A, P, '"x"', None)),
    Line("ok-no-spaces", f'{A}{P}"x".', (A, P, '"x"', None)),
    Line("ok-trailing-comment", OK + " # c", (A, P, '"x"', None)),
    Line("ok-crlf", OK + "\r\n", (A, P, '"x"', None)),
    Line("ok-iri-u-escape", f'<http://ex.org/\\u0041> {P} "x" .', ("<http://ex.org/A>", P, '"x"', None)),
    Line("ok-nul-in-literal", f'{A} {P} "x\x00y" .', (A, P, '"x\x00y"', None)),
    Line("ok-ill-typed-integer", f'{A} {P} "abc"^^<{XSD}integer> .', (A, P, f'"abc"^^<{XSD}integer>', None)),
    Line("ok-double-overflow", f'{A} {P} "1e999999"^^<{XSD}double> .', (A, P, f'"1e999999"^^<{XSD}double>', None)),
    Line("ok-dir-langtag", f'{A} {P} "x"@en--ltr .', (A, P, '"x"@en--ltr', None)),
    Line("ok-bnode-graph", f'{A} {P} "x" _:g .', (A, P, '"x"', "_:g")),
    Line("ok-triple-term", tt(1), (A, P, f'<<( {A} {P} "x" )>>', None)),
    Line("ok-triple-term-64-deep", tt(64), (A, P, tt(64)[len(A) + len(P) + 2:-2], None)),
    Line("overlong-literal-accepted", f'{A} {P} "{"x" * 2_000_000}" .', (A, P, '"' + "x" * 2_000_000 + '"', None)),
    Line("relative-iri", f'<a> {P} "x" .', says="no scheme in IRI <a> (IRIs must be absolute)"),
    Line("space-in-iri", f'<http://ex .org/a> {P} "x" .', says="invalid character ' ' in IRI <http://ex .org/a>"),
    Line("bad-percent", f'<http://ex.org/%zz> {P} "x" .', says="invalid IRI <http://ex.org/%zz>"),
    Line("bad-port", f'<http://ex.org:99x/a> {P} "x" .', says="invalid IRI <http://ex.org:99x/a>"),
    Line("bad-ipv6", f'<http://[::zz]/a> {P} "x" .', says="invalid IPv6 host in <http://[::zz]/a>"),
    Line("iri-bad-escape", f'<http://ex.org/\\q> {P} "x" .', says="invalid character '\\\\' in IRI"),
    Line("iri-escaped-surrogate", f'<http://ex.org/\\uD800> {P} "x" .', says="escape \\uD800 is not a Unicode scalar value"),
    Line("iri-escaped-space", f'<http://ex.org/\\u0020> {P} "x" .', says="invalid IRI code point ' '"),
    Line("iri-nul", f'<http://ex.org/a\x00> {P} "x" .', says="invalid character '\\x00' in IRI"),
    Line("iri-unterminated", f'<http://ex.org/a {P} "x" .', says="invalid character ' ' in IRI"),
    Line("string-bad-escape", f'{A} {P} "x\\q" .', says="unexpected escape character '\\q' in string"),
    Line("string-short-u-escape", f'{A} {P} "x\\u12" .', says="unexpected escape character '\\u' in string"),
    Line("string-escape-beyond-unicode", f'{A} {P} "x\\U00110000" .', says="escape \\U00110000 is not a Unicode scalar value"),
    Line("string-unterminated", f'{A} {P} "x .', says="unterminated or invalid string literal at column 37"),
    Line("string-raw-surrogate", f'{A} {P} "x\udcff" .', says="unterminated or invalid string literal at column 37"),
    Line("literal-subject", f'"x" {P} "x" .', says="a literal cannot be the subject"),
    Line("bnode-predicate", f'{A} _:p "x" .', says="the predicate must be an IRI, not a blank node"),
    Line("literal-graph", f'{A} {P} "x" "g" .', says="a literal cannot be the graph"),
    Line("no-final-dot", f'{A} {P} "x"', says="statement not terminated by '.'"),
    Line("two-statements", OK + " " + OK, says="only one statement per line: unexpected '<http://ex' after '.'"),
    Line("trailing-junk", OK + " junk", says="only one statement per line: unexpected 'junk' after '.'"),
    Line("five-terms", f'{A} {P} "x" {G} <http://ex.org/h> .', says="expected '.' at column 59"),
    Line("bad-langtag", f'{A} {P} "x"@123456789 .', says="invalid language tag at column 40"),
    Line("bad-direction", f'{A} {P} "x"@en--up .', says="the allowed base directions are --ltr and --rtl, found --up"),
    Line("langstring-without-tag", f'{A} {P} "x"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#langString> .', says="must not be rdf:langString"),
    Line("relative-datatype", f'{A} {P} "x"^^<int> .', says="no scheme in IRI <int>"),
    Line("prefixed-datatype", f'{A} {P} "x"^^xsd:int .', says="a literal datatype must be an IRI"),
    Line("bom-mid-file", "\ufeff" + OK, says="expected the subject at column 1, found '\\ufeff<http://e'"),
    Line("nul-before-subject", "\x00" + OK, says="expected the subject at column 1, found '\\x00<http://e'"),
    Line("cr-separated-statements", OK + "\r" + OK, says="several statements on one line (separated by CR)"),
    Line("empty-bnode-label", f'_: {P} "x" .', says="empty or invalid blank node label at column 1"),
    Line("bnode-label-ends-with-dot", f'_:a. {P} "x" .', says="expected the predicate at column 4"),
    Line("triple-term-subject", f'<<( {A} {P} "x" )>> {P} "x" .', says="a triple term cannot be the subject"),
    Line("triple-term-unclosed", f'{A} {P} <<( {A} {P} "x" .', says="triple term not closed by ')>>' at column 81"),
    Line("triple-term-65-deep", tt(65), says="triple terms nested more than 64 deep"),
    Line("triple-term-3000-deep", tt(3000), says="triple terms nested more than 64 deep"),
    Line("only-dot", ".", says="expected the subject at column 1, found '.'"),
    Line("unicode-junk", f'\u202e\u200b {P} "x" .', says="expected the subject at column 1"),
    Line("predicate-only", f' {P}', says="the statement ends before its predicate"),
]
# fmt: on


@pytest.mark.parametrize("case", LINES, ids=[c.id for c in LINES])
def test_statement(case: Line) -> None:
    if case.quad is not None:
        assert parse_line(case.line) == case.quad
        return
    with pytest.raises(NTriplesError) as info:
        parse_line(case.line)
    text = str(info.value)
    assert "\n" not in text and case.says in text, text


# ------------------------------------------------------------------ stream files


def ts(g: str, t: str) -> str:
    return f'<http://ex.org/{g}> {PROV} "{t}"^^<{XSD}dateTime> .\n'


def q(g: str, o: str = "1") -> str:
    return f'{A} {P} "{o}" <http://ex.org/{g}> .\n'


T1, T2 = 1704067201000, 1704067202000  # 2024-01-01T00:00:01Z and :02Z
E1 = ts("g1", "2024-01-01T00:00:01Z") + q("g1")
E2 = ts("g2", "2024-01-01T00:00:02Z") + q("g2", "2")


@dataclass
class StreamFile:
    """A stream file and what reading it gives: elements (t, triples), counters, first log line."""

    id: str
    data: bytes
    elements: list[tuple[int, int]]
    rejected: int = 0
    late: int = 0
    rejected_elements: int = 0
    log: str | None = None  # the first log message, after "PATH:"


# fmt: off
STREAMS: list[StreamFile] = [
    StreamFile("ok", (E1 + E2).encode(), [(T1, 1), (T2, 1)]),
    StreamFile("bom-at-start", ("\ufeff" + E1 + E2).encode(), [(T1, 1), (T2, 1)]),
    StreamFile("crlf", (E1 + E2).replace("\n", "\r\n").encode(), [(T1, 1), (T2, 1)]),
    StreamFile("cr-only", (E1 + E2).replace("\n", "\r").encode(), [(T1, 1), (T2, 1)]),
    StreamFile("no-final-newline", (E1 + E2).rstrip("\n").encode(), [(T1, 1), (T2, 1)]),
    StreamFile("nul-byte-before-a-line", (E1 + "\x00" + E2).encode(), [(T1, 1)], rejected=2, log="3: rejected: expected the subject at column 1, found '\\x00<http://e'"),
    StreamFile("nul-line", (E1 + "\x00\x00\x00\n" + E2).encode(), [(T1, 1), (T2, 1)], rejected=1, log="3: rejected: expected the subject at column 1, found '\\x00\\x00\\x00'"),
    StreamFile("invalid-utf8", E1.encode() + f'{A} {P} "\xff\xfe" <http://ex.org/g1> .\n'.encode("latin-1") + E2.encode(), [(T1, 1), (T2, 1)], rejected=1, log="3: rejected: invalid UTF-8 at byte 38 of the line (0xFF)"),
    StreamFile("invalid-utf8-after-multibyte", E1.encode() + f'{A} {P} "\u00e9'.encode() + b'\xc3(" <http://ex.org/g1> .\n' + E2.encode(), [(T1, 1), (T2, 1)], rejected=1, log="3: rejected: invalid UTF-8 at byte 40 of the line (0xC3)"),
    StreamFile("empty", b"", []),
    StreamFile("only-comments", b"# a\n# b\n", []),
    StreamFile("no-timestamps", (q("g1") + q("g2")).encode(), [], rejected=2, log="1: rejected: quad of graph <http://ex.org/g1> before its timestamp"),
    StreamFile("ntriples-not-nquads", f"{OK}\n".encode(), [], rejected=1, log="1: rejected: default-graph triple that is not a timestamp"),
    StreamFile("out-of-order", (E2 + E1).encode(), [(T2, 1)], late=1, log="3: late element dropped (t=1704067201000 < watermark 1704067202000)"),
    StreamFile("same-time-twice", (E1 + ts("g2", "2024-01-01T00:00:01Z") + q("g2", "2")).encode(), [(T1, 1), (T1, 1)]),
    StreamFile("far-future", (E1 + ts("g9", "9999-12-31T23:59:59Z") + q("g9") + E2).encode(), [(T1, 1), (T2, 1)], rejected_elements=1, log="3: rejected element: event time 253402300799000 ms is 251698233598000 ms ahead of the stream's current time 1704067201000 ms (more than the maximum jump of 86400000 ms, --max-time-jump)"),
    StreamFile("jump-of-two-days", (E1 + ts("g2", "2024-01-03T00:00:02Z") + q("g2")).encode(), [(T1, 1)], rejected_elements=1, log="3: rejected element: event time 1704240002000 ms is 172801000 ms ahead"),
    StreamFile("year-1", (ts("g0", "0001-01-01T00:00:00Z") + q("g0") + E1 + E2).encode(), [(T1, 1), (T2, 1)], rejected_elements=1, log="1: rejected element: event time -62135596800000 ms is outside the accepted range 0 <= t < 2^53 ms"),
    StreamFile("negative-year", (ts("g0", "-0044-03-15T00:00:00Z") + q("g0") + E1).encode(), [(T1, 1)], rejected=2, log="1: rejected: year -44 is out of range"),
    StreamFile("eleven-digit-year", (E1 + ts("g3", "99999999999-01-01T00:00:05Z") + q("g3")).encode(), [(T1, 1)], rejected=2, log="3: rejected: year 99999999999 is out of range"),
    StreamFile("month-13", (ts("g0", "2024-13-01T00:00:00Z") + q("g0") + E1).encode(), [(T1, 1)], rejected=2, log="1: rejected: month must be in 1..12"),
    StreamFile("february-30", (ts("g0", "2024-02-30T00:00:00Z") + q("g0") + E1).encode(), [(T1, 1)], rejected=2, log="1: rejected: day is out of range for month"),
    StreamFile("hour-24-is-next-midnight", (E1 + ts("g3", "2024-01-01T24:00:00Z") + q("g3")).encode(), [(T1, 1), (1704153600000, 1)]),
    StreamFile("hour-25", (E1 + ts("g3", "2024-01-01T25:00:00Z") + q("g3")).encode(), [(T1, 1)], rejected=2, log="3: rejected: hour must be in 0..23"),
    StreamFile("timestamp-plain-string", (E1 + f'<http://ex.org/g3> {PROV} "yesterday" .\n' + q("g3")).encode(), [(T1, 1)], rejected=2, log="3: rejected: generatedAtTime is not an xsd:dateTime literal"),
    StreamFile("timestamp-integer", (E1 + f'<http://ex.org/g3> {PROV} "17"^^<{XSD}integer> .\n' + q("g3")).encode(), [(T1, 1)], rejected=2, log="3: rejected: generatedAtTime is not an xsd:dateTime literal"),
    StreamFile("timestamp-date-only", (E1 + f'<http://ex.org/g3> {PROV} "2024-01-01"^^<{XSD}dateTime> .\n' + q("g3")).encode(), [(T1, 1)], rejected=2, log="3: rejected: bad xsd:dateTime '2024-01-01'"),
    StreamFile("timestamp-iri", (E1 + f"<http://ex.org/g3> {PROV} <http://x> .\n" + q("g3")).encode(), [(T1, 1)], rejected=2, log="3: rejected: generatedAtTime is not an xsd:dateTime literal"),
    StreamFile("nanoseconds-truncated", (E1 + ts("g2", "2024-01-01T00:00:02.123456789Z") + q("g2")).encode(), [(T1, 1), (T2 + 123, 1)]),
    StreamFile("quad-before-its-timestamp", (q("g1") + E1 + E2).encode(), [(T1, 1), (T2, 1)], rejected=1, log="1: rejected: quad of graph <http://ex.org/g1> before its timestamp"),
    StreamFile("default-graph-triple", (E1 + OK + "\n" + E2).encode(), [(T1, 1), (T2, 1)], rejected=1, log="3: rejected: default-graph triple that is not a timestamp"),
    StreamFile("overlong-line", (E1 + f'{A} {P} "{"x" * 3_000_000}" <http://ex.org/g1> .\n' + E2).encode(), [(T1, 2), (T2, 1)]),
    StreamFile("timestamp-graph-again", (E1 + E2 + ts("g1", "2024-01-01T00:00:03Z") + q("g1", "3")).encode(), [(T1, 1), (T2, 1), (T2 + 1000, 1)]),
    StreamFile("deep-triple-term", (E1 + tt(3000)[:-1] + "<http://ex.org/g1> .\n" + E2).encode(), [(T1, 1), (T2, 1)], rejected=1, log="3: rejected: triple terms nested more than 64 deep"),
    StreamFile("duplicate-triples-deduplicated", (E1 + q("g1") + q("g1") + E2).encode(), [(T1, 1), (T2, 1)]),
]
# fmt: on


@pytest.mark.parametrize("case", STREAMS, ids=[c.id for c in STREAMS])
def test_stream_file(case: StreamFile, tmp_path: Path) -> None:
    path = tmp_path / "s.nq"
    path.write_bytes(case.data)
    said: list[str] = []
    reader = StreamReader(str(path), open_dictionary("memory:"), log=said.append)
    got = [(el.t, len(el.triples)) for el in reader]
    st = reader.stats
    assert got == case.elements
    assert (st.rejected, st.late, st.rejected_elements) == (case.rejected, case.late, case.rejected_elements)
    assert st.elements == len([e for e in case.elements])
    if case.log is None:
        assert said == []
    else:
        assert said and said[0].startswith(f"{path}:{case.log}"), said[:1]
        assert all("\n" not in s for s in said)


# ------------------------------------------------------------------ static files


@dataclass
class Static:
    """A static file: ``triples`` loaded (``rejected`` lines logged), or ``says`` in the error."""

    id: str
    name: str
    data: bytes | None  # None: a directory of that name
    triples: int | None = None
    rejected: int = 0
    says: str = ""


# fmt: off
STATICS: list[Static] = [
    Static("ok-nt", "g.nt", f"{OK}\n".encode(), 1),
    Static("empty-nt", "g.nt", b"", 0),
    Static("empty-ttl", "g.ttl", b"", 0),
    Static("bom-nt", "g.nt", f"\ufeff{OK}\n".encode(), 1),
    Static("bom-ttl", "g.ttl", f"\ufeff{OK}\n".encode(), 1),
    Static("quads-as-static", "g.nq", f'{A} {P} "x" {G} .\n'.encode(), 1),
    Static("mixed-good-and-bad-lines", "g.nt", f"{OK}\nbroken\n{A} {P} \"y\" .\n".encode(), 2, rejected=1),
    Static("binary-nt", "g.nt", bytes(range(256)) * 4, 0, rejected=5),
    Static("xxe-not-expanded", "g.rdf", b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY e SYSTEM "file:///etc/passwd">]><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex.org/"><rdf:Description rdf:about="http://ex.org/a"><ex:p>&e;</ex:p></rdf:Description></rdf:RDF>', 1),
    Static("turtle-syntax-error", "g.ttl", b"@prefix ex: <http://ex.org/> .\nex:a ex:p \n", says="g.ttl: cannot parse as turtle: "),
    Static("turtle-unbound-prefix", "g.ttl", b"ex:a ex:p ex:b .\n", says='Prefix "ex:" not bound'),
    Static("turtle-binary", "g.ttl", bytes(range(256)) * 4, says="g.ttl: cannot parse as turtle: 'utf-8' codec can't decode byte 0x80"),
    Static("turtle-latin1", "g.ttl", f'{A} {P} "caf\xe9" .\n'.encode("latin-1"), says="g.ttl: cannot parse as turtle: 'utf-8' codec can't decode byte 0xe9"),
    Static("turtle-deep-blank-nodes", "g.ttl", f"{A} {P} ".encode() + b"[ <http://ex.org/p> " * 2000 + b'"x"' + b" ]" * 2000 + b" .\n", says="g.ttl: cannot parse as turtle: maximum recursion depth exceeded"),
    Static("turtle-deep-list", "g.ttl", f"{A} {P} ".encode() + b"( " * 2000 + b'"x"' + b" )" * 2000 + b" .\n", says="g.ttl: cannot parse as turtle: maximum recursion depth exceeded"),
    Static("rdfxml-broken", "g.rdf", b"<rdf:RDF><not closed", says="g.rdf: cannot parse as xml: "),
    Static("jsonld-not-json", "g.jsonld", b"{not json", says="g.jsonld: cannot parse as json-ld: Expecting property name enclosed in double quotes"),
    Static("jsonld-bad-context", "g.json", b'{"@context": 5}', says="g.json: cannot parse as json-ld: "),
    Static("trig-broken", "g.trig", b"{ <a> <b> }", says="g.trig: cannot parse as trig: "),
    Static("n3-broken", "g.n3", b"@@@", says="g.n3: cannot parse as n3: "),
    Static("unknown-suffix", "g.csv", b"a,b,c\n", says="unknown RDF format for"),
    Static("no-suffix", "graph", f"{OK}\n".encode(), says="unknown RDF format for"),
    Static("directory", "dir.nt", None, says="is a directory, not an RDF file"),
]
# fmt: on


@pytest.mark.parametrize("case", STATICS, ids=[c.id for c in STATICS])
def test_static_file(case: Static, tmp_path: Path) -> None:
    path = tmp_path / case.name
    if case.data is None:
        path.mkdir()
    else:
        path.write_bytes(case.data)
    said: list[str] = []
    if case.triples is not None:
        triples = load_graph(str(path), open_dictionary("memory:"), log=said.append)
        assert (len(triples), len(said)) == (case.triples, case.rejected), said
        assert all(s.startswith(f"{path}:") and ": rejected: " in s for s in said)
        return
    with pytest.raises((ValueError, OSError)) as info:
        load_graph(str(path), open_dictionary("memory:"), log=said.append)
    text = str(info.value)
    assert "\n" not in text and case.says in text and case.name in text, text


def test_static_file_invalid_utf8_names_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "g.nt"
    path.write_bytes(f"{OK}\n".encode() + f'{A} {P} "'.encode() + b'x\xff" .\n')
    said: list[str] = []
    assert len(load_graph(str(path), open_dictionary("memory:"), log=said.append)) == 1
    assert said == [f"{path}:2: rejected: invalid UTF-8 at byte {len(f'{A} {P} ') + 3} of the line (0xFF)"]


def test_missing_static_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as info:
        load_graph(str(tmp_path / "none.nt"), open_dictionary("memory:"))
    assert "RDF file not found" in str(info.value) and "none.nt" in str(info.value)


# ------------------------------------------------------------------ through linkstream replay


def _replay(tmp_path: Path, stream: bytes, *extra: str) -> list[str]:
    (tmp_path / "q.rq").write_text("SELECT ?o WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?x ?p ?o } }")
    (tmp_path / "s.nq").write_bytes(stream)
    return [
        "replay", "--query", str(tmp_path / "q.rq"), "--stream", f"http://ex.org/s={tmp_path}/s.nq",
        "--out", str(tmp_path / "out.jsonl"), "--quiet", *extra,
    ]  # fmt: skip


def test_replay_of_a_file_with_no_element_accepted_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(_replay(tmp_path, (q("g1") + OK + "\n").encode())) == 0
    err = capsys.readouterr().err.splitlines()
    assert f"{tmp_path}/s.nq:1: rejected: quad of graph <http://ex.org/g1> before its timestamp" in err
    assert (
        f"warning: stream file {tmp_path}/s.nq: no element accepted (2 rejected lines, 0 late, 0 rejected for their time)"
        in err
    )
    assert (tmp_path / "out.jsonl").read_text() == ""


def test_replay_of_a_far_future_element_keeps_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stream = (E1 + ts("g9", "9999-12-31T23:59:59Z") + q("g9", "9") + E2).encode()
    assert cli_main(_replay(tmp_path, stream)) == 0
    err = capsys.readouterr().err
    assert (
        "elements rejected for their time (outside 0 <= t < 2^53 ms, or more than --max-time-jump ahead): 1"
        in err
    )
    rows = [json.loads(r) for r in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["t"], r["binding"]["o"]) for r in rows] == [
        (T2, '"1"'),
        (T2 + 1000, '"1"'),
        (T2 + 1000, '"2"'),
    ]


def test_replay_with_a_bom_keeps_the_first_element(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_main(_replay(tmp_path, ("\ufeff" + E1).encode())) == 0
    assert capsys.readouterr().err == ""
    rows = [json.loads(r) for r in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["t"], r["binding"]["o"]) for r in rows] == [(T2, '"1"')]  # the element at T1 is kept


@pytest.mark.parametrize(
    ("static", "says"),
    [
        ("g.ttl", "cannot parse as turtle"),
        ("dir.nt", "is a directory, not an RDF file"),
        ("g.csv", "unknown RDF format"),
    ],
)
def test_replay_refuses_a_bad_static_file(
    static: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / static
    if static == "dir.nt":
        path.mkdir()
    else:
        path.write_text("ex:a ex:p \n")
    assert cli_main(_replay(tmp_path, E1.encode(), "--static", str(path))) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1 and err.startswith(f"error: static graph file {path}: ") and says in err
    ), err
