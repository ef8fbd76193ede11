"""StreamReader and load_graph against the oracle's ``load_stream`` / ``load_static``."""

from __future__ import annotations

import importlib.util
import os
import random
import re
import threading
from pathlib import Path
from types import ModuleType

import numpy as np
import pyoxigraph as ox
import pytest

from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.static import load_graph
from linkstream.rdf.streams import Element, StreamReader, parse_datetime_ms
from linkstream.rdf.terms import RDF_LANGSTRING, Literal

XSD = "http://www.w3.org/2001/XMLSchema#"
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"
Triple = tuple[str, str, str]


def shared_dir() -> Path | None:
    env = os.environ.get("LINKSTREAM_SHARED")
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "shared"
    return path if path.is_dir() else None


def _load_oracle() -> ModuleType | None:
    shared = shared_dir()
    if shared is None or not (shared / "tools" / "oracle.py").is_file():
        return None
    spec = importlib.util.spec_from_file_location("linkstream_test_oracle", shared / "tools" / "oracle.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


ORACLE = _load_oracle()
needs_oracle = pytest.mark.skipif(
    ORACLE is None, reason="shared/tools/oracle.py not found (set LINKSTREAM_SHARED)"
)


def citybench_stream(name: str) -> Path:
    shared = shared_dir()
    path = shared / "citybench" / "streams" / name if shared else None
    if path is None or not path.is_file():
        pytest.skip(f"CityBench stream {name} not found (set LINKSTREAM_SHARED)")
    return path


def ox_term(t: object) -> str:
    """The N-Triples string of a pyoxigraph term (lexical forms as written)."""
    if isinstance(t, ox.NamedNode):
        return "<" + t.value + ">"
    if isinstance(t, ox.BlankNode):
        return "_:" + t.value
    assert isinstance(t, ox.Literal)
    if t.language:
        return Literal(t.value, RDF_LANGSTRING, t.language).n3()
    return Literal(t.value, t.datatype.value).n3()


def _dedup(triples: list[Triple]) -> list[Triple]:
    return list(dict.fromkeys(triples))


def _line_numbers(logs: list[str], what: str) -> list[int]:
    return [int(m.group(1)) for msg in logs if (m := re.search(r":(\d+): " + what, msg))]


def oracle_run(
    path: Path, lateness: int = 0, tag: str = "t_"
) -> tuple[list[tuple[int, list[Triple]]], int, int, list[str]]:
    assert ORACLE is not None
    logs: list[str] = []
    st = ORACLE.load_stream("urn:stream", str(path), tag, lateness, logs.append)
    elements = [
        (
            el.t,
            _dedup([(ox_term(tr.subject), ox_term(tr.predicate), ox_term(tr.object)) for tr in el.triples]),
        )
        for el in st.elements
    ]
    return elements, st.rejected, st.late, logs


def decode(d: MemoryDictionary, triples: np.ndarray) -> list[Triple]:
    flat = d.decode_many(triples.reshape(-1))
    return [(flat[i], flat[i + 1], flat[i + 2]) for i in range(0, len(flat), 3)]


def merge(d: MemoryDictionary, raw: list[Element]) -> list[tuple[int, list[Triple]]]:
    """Elements and their continuations merged by ``seq``, deduplicated, in the oracle's (t, seq) order."""
    by_seq: dict[int, tuple[int, list[Triple]]] = {}
    for el in raw:
        t, triples = by_seq.setdefault(el.seq, (el.t, []))
        assert t == el.t
        triples.extend(decode(d, el.triples))
    return [(t, _dedup(tr)) for _, (t, tr) in sorted(by_seq.items(), key=lambda kv: (kv[1][0], kv[0]))]


def reader_run(
    path: Path, lateness: int = 0, prefix: str = "t_", **kw: int
) -> tuple[list, StreamReader, list[str], list[Element], MemoryDictionary]:
    d = MemoryDictionary()
    logs: list[str] = []
    r = StreamReader(str(path), d, bnode_prefix=prefix, lateness_ms=lateness, log=logs.append, **kw)
    raw = list(r)
    return merge(d, raw), r, logs, raw, d


def assert_same_as_oracle(path: Path, lateness: int = 0, **kw: int) -> tuple[StreamReader, list[Element]]:
    expected, rejected, late, ologs = oracle_run(path, lateness)
    got, reader, logs, raw, _ = reader_run(path, lateness, **kw)
    assert [t for t, _ in got] == [t for t, _ in expected]
    assert got == expected
    st = reader.stats
    assert (st.rejected, st.late, st.elements) == (rejected, late, len(expected))
    assert _line_numbers(logs, "rejected") == _line_numbers(ologs, "rejected")
    assert _line_numbers(logs, "late element") == _line_numbers(ologs, "late element")
    if expected:
        assert (st.first_t, st.last_t) == (min(t for t, _ in expected), max(t for t, _ in expected))
    assert st.triples == sum(len(el.triples) for el in raw)
    for el in raw:
        assert el.triples.dtype == np.int64 and el.triples.shape[1:] == (3,)
        assert len({tuple(r) for r in el.triples.tolist()}) == len(el.triples)
    return reader, raw


# ------------------------------------------------------------------ CityBench files


@needs_oracle
@pytest.mark.parametrize(
    "name",
    [
        "AarhusTrafficData158505.nq",
        "AarhusPollutionData182955.nq",
        "AarhusWeatherData0.nq",
        "UserLocationService.nq",
        "AarhusParkingDataKALKVAERKSVEJ.nq",
    ],
)
def test_citybench_stream_equals_oracle(name: str) -> None:
    reader, raw = assert_same_as_oracle(citybench_stream(name))
    assert reader.stats.rejected == 0 and reader.stats.elements > 100
    assert not any(el.continuation for el in raw)
    assert [el.seq for el in raw] == list(range(len(raw)))


@needs_oracle
def test_small_chunks_give_the_same_elements() -> None:
    path = citybench_stream("AarhusWeatherData0.nq")
    _, _, _, big, d1 = reader_run(path)
    _, _, _, small, d2 = reader_run(path, chunk_lines=7)
    assert [(e.t, e.seq, decode(d1, e.triples)) for e in big] == [
        (e.t, e.seq, decode(d2, e.triples)) for e in small
    ]


class CountingDictionary(MemoryDictionary):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def encode_many(self, terms):  # type: ignore[no-untyped-def]
        self.calls += 1
        return super().encode_many(terms)


def test_terms_are_encoded_in_batches() -> None:
    path = citybench_stream("AarhusTrafficData158505.nq")
    d = CountingDictionary()
    elements = list(StreamReader(str(path), d, chunk_lines=1000))
    n_lines = sum(1 for _ in open(path, encoding="utf-8"))
    assert len(elements) > 700
    assert d.calls <= n_lines // 1000 + 2


# ------------------------------------------------------------------ broken and odd files


def _ts(g: str, lex: str, dt: str = XSD + "dateTime") -> str:
    return f'{g} {PROV} "{lex}"^^<{dt}> .'


def _q(g: str, s: str, v: str) -> str:
    return f'<http://ex.org/ob-{s}> <http://ex.org/value> "{v}"^^<{XSD}integer> {g} .'


def _el(n: int) -> str:
    return f"<http://ex.org/el-{n}>"


BROKEN: list[str | bytes] = [
    "# a stream with every kind of problem",
    _ts(_el(1), "2014-08-01T00:00:00Z"),
    _q(_el(1), "a", "10"),
    _q(_el(1), "a", "10"),  # duplicate within the element
    _q(_el(1), "a", "010"),  # the same value, another lexical form
    "this line is garbage",
    _q(_el(1), "b", "5"),
    "",
    _ts(_el(2), "2014-08-01T00:00:01.5Z"),
    _q(_el(2), "c", "1"),
    "<relative> <http://ex.org/p> <http://ex.org/o> <http://ex.org/el-2> .",
    _ts(_el(3), "not a date"),
    _q(_el(3), "d", "1"),  # its timestamp was rejected: before its timestamp
    _ts(_el(4), "2014-08-01T00:00:02Z", XSD + "string"),
    f'{_el(4)} {PROV} "2014-08-01T00:00:02Z"@en .',
    f"{_el(4)} {PROV} <http://ex.org/not-a-literal> .",
    _ts(_el(4), "2014-13-01T00:00:00Z"),
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .",  # default graph, not a timestamp
    _q(_el(99), "e", "1"),  # graph never timestamped
    _ts(_el(5), "2014-08-01T00:00:03+02:00"),  # two hours late
    _q(_el(5), "f", "1"),
    _ts(_el(6), "2014-08-01T00:00:02.9Z"),
    _q(_el(6), "g", "1"),
    _ts(_el(7), "2014-08-01T00:00:02.000Z"),  # 900 ms late
    _q(_el(7), "h", "1"),
    _q(_el(7), "h", "2") + "\r",  # CRLF line end
    _ts(_el(8), "2014-08-01T00:00:04Z"),  # an element without quads
    _ts("_:g9", "2014-08-01T00:00:05Z"),
    "_:x <http://ex.org/knows> _:y _:g9 .",
    '_:x <http://ex.org/name> "x"@EN _:g9 .',
    b'<http://ex.org/s> <http://ex.org/p> "\xff\xfe" _:g9 .',  # invalid UTF-8
    _q("_:g9", "i", "1") + "\r" + _q("_:g9", "j", "1"),  # two statements split by a bare CR
    _q("_:g9", "k", "1") + "\r" + "<bad> <http://ex.org/p> <http://ex.org/o> _:g9 .",
    _q(_el(2), "c", "2"),  # non-contiguous: back to element 2
    _q(_el(2), "c", "1"),  # ... repeating one of its triples
    _ts(_el(1), "2014-08-01T00:00:06Z"),  # graph 1 timestamped again: a new element
    _q(_el(1), "l", "1"),
    _ts(_el(10), "2014-08-01T24:00:00Z"),
    _q(_el(10), "m", "1"),
    _ts(_el(11), "  2014-08-02T00:00:00.1234+00:00  "),
    _q(_el(11), "n", "1"),
    f"<relative-s> <http://ex.org/p> <http://ex.org/o> {_el(11)} .",  # bad term, open element
    "   # indented comment",
    _q(_el(11), "n", "1") + " # with a comment",
    _ts("<relative-graph>", "2014-08-02T00:00:01Z"),  # a timestamp line of the fast form, bad IRI
]


def _write(path: Path, lines: list[str | bytes]) -> Path:
    with open(path, "wb") as f:
        for line in lines:
            f.write((line.encode() if isinstance(line, str) else line) + b"\n")
    return path


@needs_oracle
@pytest.mark.parametrize("lateness", [0, 1000, 10**10])
def test_broken_stream_equals_oracle(tmp_path: Path, lateness: int) -> None:
    path = _write(tmp_path / "broken.nq", BROKEN)
    reader, raw = assert_same_as_oracle(path, lateness)
    st = reader.stats
    assert st.rejected == 14
    assert st.late == {0: 2, 1000: 1, 10**10: 0}[lateness]
    assert any(el.continuation for el in raw)


def test_broken_stream_messages(tmp_path: Path) -> None:
    path = _write(tmp_path / "broken.nq", BROKEN)
    logs: list[str] = []
    reader = StreamReader(str(path), MemoryDictionary(), log=logs.append)
    elements = list(reader)
    rejected = [m for m in logs if ": rejected: " in m]
    assert len(rejected) == reader.stats.rejected
    assert all(m.startswith(f"{path}:") for m in logs)
    assert f"{path}:6: rejected: " in rejected[0]
    assert any("before its timestamp" in m for m in rejected)
    assert any("not an xsd:dateTime" in m for m in rejected)
    assert any("not a timestamp" in m for m in rejected)
    assert rejected[-2].endswith(": rejected: no scheme in IRI <relative-s> (IRIs must be absolute)")
    assert rejected[-1].endswith(": rejected: no scheme in IRI <relative-graph> (IRIs must be absolute)")
    assert sum("late element" in m for m in logs) == 1  # logged once, counted twice
    assert reader.stats.late == 2
    assert [e.t for e in elements if not e.continuation] == sorted(
        e.t for e in elements if not e.continuation
    )


def _shuffled(tmp_path: Path, src: Path, n_lines: int, seed: int, timestamps_first: bool) -> Path:
    with open(src, encoding="utf-8") as f:
        lines = [line.rstrip("\n") for _, line in zip(range(n_lines), f)]
    rnd = random.Random(seed)
    if timestamps_first:
        ts = [x for x in lines if PROV in x]
        rest = [x for x in lines if PROV not in x]
        rnd.shuffle(rest)
        lines = ts[:3] + rest[: len(rest) // 2] + ts[3:] + rest[len(rest) // 2 :]
    else:
        rnd.shuffle(lines)
    return _write(tmp_path / f"shuffled-{seed}.nq", list(lines))


@needs_oracle
@pytest.mark.parametrize("lateness", [0, 10**12])
@pytest.mark.parametrize("seed", [1, 2])
def test_shuffled_file_equals_oracle(tmp_path: Path, seed: int, lateness: int) -> None:
    path = _shuffled(tmp_path, citybench_stream("AarhusTrafficData158505.nq"), 600, seed, False)
    reader, _ = assert_same_as_oracle(path, lateness)
    assert reader.stats.rejected > 0
    assert_same_as_oracle(path, lateness, chunk_lines=13)


@needs_oracle
def test_non_contiguous_elements_equal_oracle(tmp_path: Path) -> None:
    path = _shuffled(tmp_path, citybench_stream("AarhusWeatherData0.nq"), 650, 3, True)
    reader, raw = assert_same_as_oracle(path)
    assert reader.stats.rejected > 0  # quads of elements whose timestamp comes later
    assert sum(el.continuation for el in raw) > 10
    _, small = assert_same_as_oracle(path, chunk_lines=5)
    assert [(e.t, e.seq, e.continuation, len(e.triples)) for e in raw] == [
        (e.t, e.seq, e.continuation, len(e.triples)) for e in small
    ]


def test_bnodes_are_relabelled_per_file(tmp_path: Path) -> None:
    lines: list[str | bytes] = [_ts("_:g", "2014-08-01T00:00:00Z"), "_:b1 <http://ex.org/p> _:b2 _:g ."]
    a = _write(tmp_path / "a.nq", lines)
    b = _write(tmp_path / "b.nq", lines)
    d = MemoryDictionary()
    (ea,) = StreamReader(str(a), d, bnode_prefix="a_")
    (eb,) = StreamReader(str(b), d, bnode_prefix="b_")
    assert d.decode_many(ea.triples[0]) == ["_:a_b1", "<http://ex.org/p>", "_:a_b2"]
    assert ea.triples[0, 0] != eb.triples[0, 0] and ea.triples[0, 1] == eb.triples[0, 1]


def test_empty_files(tmp_path: Path) -> None:
    for name, content in [("empty.nq", b""), ("comments.nq", b"# nothing\n\n   \n")]:
        path = tmp_path / name
        path.write_bytes(content)
        logs: list[str] = []
        reader = StreamReader(str(path), MemoryDictionary(), log=logs.append)
        assert list(reader) == []
        assert reader.stats.elements == reader.stats.rejected == reader.stats.triples == 0
        assert reader.stats.first_t is None and logs == []


def test_missing_file() -> None:
    with pytest.raises(FileNotFoundError, match="no-such-stream.nq"):
        StreamReader("/nonexistent/no-such-stream.nq", MemoryDictionary())


def test_reader_streams_without_reading_ahead(tmp_path: Path) -> None:
    fifo = tmp_path / "live.nq"
    os.mkfifo(fifo)
    first_seen = threading.Event()
    in_time: list[bool] = []

    def writer() -> None:
        with open(fifo, "w", encoding="utf-8") as f:
            f.write(
                "\n".join(
                    [
                        _ts(_el(1), "2014-08-01T00:00:00Z"),
                        _q(_el(1), "a", "1"),
                        _ts(_el(2), "2014-08-01T00:00:01Z"),
                    ]
                )
                + "\n"
            )
            f.flush()
            in_time.append(first_seen.wait(10))
            f.write(_q(_el(2), "b", "2") + "\n")

    th = threading.Thread(target=writer)
    th.start()
    it = iter(StreamReader(str(fifo), MemoryDictionary(), chunk_lines=1))
    first = next(it)
    first_seen.set()
    rest = list(it)
    th.join()
    assert in_time == [True]
    assert (first.t, len(first.triples)) == (1406851200000, 1)
    assert [(e.t, len(e.triples)) for e in rest] == [(1406851201000, 1)]


DATETIMES = [
    "2014-08-01T00:00:00Z",
    "2014-08-01T00:00:00.123456Z",
    "2014-08-01T00:00:00.1+01:30",
    "2014-08-01T00:00:00-05:00",
    "2014-08-01T00:00:00",
    "2014-08-01T24:00:00Z",
    "  2014-08-01T00:00:00Z\n",
    "1969-12-31T23:59:59.999Z",
    "12014-08-01T00:00:00Z",
    "-2014-08-01T00:00:00Z",
    "2014-02-30T00:00:00Z",
    "2014-08-01 00:00:00Z",
    "2014-08-01T00:00Z",
    "",
]


@needs_oracle
@pytest.mark.parametrize("lex", DATETIMES)
def test_parse_datetime_ms_as_oracle(lex: str) -> None:
    assert ORACLE is not None
    try:
        expected: int | str = ORACLE.parse_datetime_ms(lex)
    except ValueError:
        expected = "error"
    try:
        got: int | str = parse_datetime_ms(lex)
    except ValueError:
        got = "error"
    assert got == expected


# ------------------------------------------------------------------ static graphs


def _triples(d: MemoryDictionary, arr: np.ndarray) -> list[Triple]:
    assert arr.dtype == np.int64 and arr.ndim == 2 and arr.shape[1] == 3
    return decode(d, arr)


def _oracle_static(path: Path, tag: str = "") -> list[Triple]:
    assert ORACLE is not None
    return _dedup(
        [
            (ox_term(t.subject), ox_term(t.predicate), ox_term(t.object))
            for t in ORACLE.load_static(str(path), tag)
        ]
    )


def _no_bnodes(triples: list[Triple]) -> set[Triple]:
    return {tuple("_:" if x.startswith("_:") else x for x in tr) for tr in triples}  # type: ignore[misc]


@needs_oracle
def test_static_ntriples_equals_oracle() -> None:
    shared = shared_dir()
    assert shared is not None
    path = shared / "citybench" / "static" / "SensorRepository.nt"
    if not path.is_file():
        pytest.skip("SensorRepository.nt not found")
    d = MemoryDictionary()
    got = _triples(d, load_graph(str(path), d, bnode_prefix="s_"))
    assert got == _oracle_static(path, "s_")


TURTLE = """@prefix ex: <http://ex.org/> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
ex:s ex:int 42 ; ex:dec 4.50 ; ex:dbl 4.2e0 ; ex:bool true ;
     ex:name "caf\\u00e9"@FR , "plain" , "typed"^^xsd:string ;
     ex:when "2014-08-01T00:00:00.000Z"^^xsd:dateTime ;
     ex:long \"\"\"two
lines\"\"\" ;
     ex:knows [ ex:name "anon" ] , _:b1 .
_:b1 ex:value "007"^^xsd:integer .
"""

RDFXML = """<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns:ex="http://ex.org/">
  <rdf:Description rdf:about="http://ex.org/s">
    <ex:name xml:lang="en">name</ex:name>
    <ex:v rdf:datatype="http://www.w3.org/2001/XMLSchema#double">1.50</ex:v>
    <ex:o rdf:resource="http://ex.org/o"/>
  </rdf:Description>
</rdf:RDF>
"""


@needs_oracle
@pytest.mark.parametrize("name,text", [("g.ttl", TURTLE), ("g.n3", TURTLE), ("g.rdf", RDFXML)])
def test_static_rdflib_formats_equal_oracle(tmp_path: Path, name: str, text: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    d = MemoryDictionary()
    got = _triples(d, load_graph(str(path), d))
    expected = _oracle_static(path)
    assert len(got) == len(expected)
    assert _no_bnodes(got) == _no_bnodes(expected)


def test_static_jsonld(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonld"
    path.write_text(
        '{"@context": {"ex": "http://ex.org/"}, "@id": "ex:s", "ex:p": [{"@id": "ex:o"}, '
        '{"@value": "01", "@type": "http://www.w3.org/2001/XMLSchema#integer"}, {"@value": "x", "@language": "EN"}]}',
        encoding="utf-8",
    )
    d = MemoryDictionary()
    got = set(_triples(d, load_graph(str(path), d)))
    s, p = "<http://ex.org/s>", "<http://ex.org/p>"
    assert got == {(s, p, "<http://ex.org/o>"), (s, p, f'"01"^^<{XSD}integer>'), (s, p, '"x"@en')}


def test_static_ntriples_skips_malformed_lines_and_dedups(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "g.nq",
        [
            "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .",
            "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g> .",
            f'<http://ex.org/s> <http://ex.org/p> "1"^^<{XSD}integer> .',
            f'<http://ex.org/s> <http://ex.org/p> "01"^^<{XSD}integer> .',
            "not rdf at all",
            "_:b <http://ex.org/p> _:c .",
        ],
    )
    d = MemoryDictionary()
    logs: list[str] = []
    got = _triples(d, load_graph(str(path), d, bnode_prefix="z", log=logs.append))
    assert got == [
        ("<http://ex.org/s>", "<http://ex.org/p>", "<http://ex.org/o>"),
        ("<http://ex.org/s>", "<http://ex.org/p>", f'"1"^^<{XSD}integer>'),
        ("<http://ex.org/s>", "<http://ex.org/p>", f'"01"^^<{XSD}integer>'),  # another term
        ("_:zb", "<http://ex.org/p>", "_:zc"),
    ]
    assert len(logs) == 1 and logs[0].startswith(f"{path}:5: rejected: ")


def test_static_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        load_graph(str(tmp_path / "missing.nt"), MemoryDictionary())
    odd = tmp_path / "g.csv"
    odd.write_text("a,b,c\n")
    with pytest.raises(ValueError, match="unknown RDF format"):
        load_graph(str(odd), MemoryDictionary())
    bad = tmp_path / "bad.ttl"
    bad.write_text("this is { not turtle")
    with pytest.raises(ValueError, match="cannot parse"):
        load_graph(str(bad), MemoryDictionary())
    empty = tmp_path / "empty.nt"
    empty.write_text("")
    assert load_graph(str(empty), MemoryDictionary()).shape == (0, 3)


# lines the reader splits before stripping them: whitespace around the tokens, line ends,
# comments shaped like quads or timestamps, a last line without its line feed
EDGE: list[str | bytes] = [
    _ts(_el(1), "2014-08-01T00:00:00Z") + "   ",
    "\t" + _q(_el(1), "a", "1"),
    "  " + _q(_el(1), "b", "1"),
    _q(_el(1), "c", "1") + "\t",
    _q(_el(1), "d", "1") + "\r",
    _q(_el(1), "d", "1") + "\x0c",
    "# " + _q(_el(1), "e", "1"),
    "#" + _q(_el(1), "e", "1"),
    "#" + _ts(_el(2), "2014-08-01T00:00:01Z"),
    "\t" + _ts(_el(2), "2014-08-01T00:00:01Z"),
    _q(_el(2), "f", "1"),
    _q(_el(2), "f", "2")[:-2] + ".",  # no space before the dot
    _q(_el(2), "g", "1").replace(" ", "  "),
    _q(_el(2), "g", "2").replace(" ", "\t"),
    _ts(_el(3), "2014-08-01T00:00:02Z") + "\r",
    _q(_el(3), "h", "1"),
    " .",
    ".",
    "\t",
    _ts(_el(4), "2014-08-01T00:00:03Z").replace(" ", "  "),
    _q(_el(4), "i", "1"),
    _q(_el(3), "h", "2"),  # back to element 3: a continuation
    f"{_el(4)} {PROV} .",
    _ts(_el(5), "2014-08-01T00:00:04Z"),
]


@needs_oracle
@pytest.mark.parametrize("chunk_lines", [65536, 3, 1])
@pytest.mark.parametrize("last_line_end", [b"\n", b""])
def test_whitespace_and_line_ends_equal_oracle(
    tmp_path: Path, chunk_lines: int, last_line_end: bytes
) -> None:
    path = tmp_path / "edge.nq"
    with open(path, "wb") as f:
        f.write(b"\n".join(x.encode() if isinstance(x, str) else x for x in EDGE))
        f.write(b"\n" + _q(_el(5), "j", "1").encode() + last_line_end)
    reader, raw = assert_same_as_oracle(path, chunk_lines=chunk_lines)
    st = reader.stats
    # rejected: " .", "." and the timestamp line without an object
    assert (st.elements, st.rejected) == (5, 3)
    assert sum(el.continuation for el in raw) == 1
    # a b c d (d twice) | f f g g | h, and h again as a continuation | i | j
    assert [len(el.triples) for el in raw] == [4, 4, 1, 1, 1, 1]
