"""The N-Triples / N-Quads line parser against pyoxigraph (the oracle's parser)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pyoxigraph as ox
import pytest

from linkstream.rdf.ntriples import LINE_STRIP, LineParser, NTriplesError, iri_error, parse_line
from linkstream.rdf.terms import RDF_LANGSTRING, Literal, parse_term

XSD = "http://www.w3.org/2001/XMLSchema#"
S, P = "<http://ex.org/s>", "<http://ex.org/p>"


def shared_dir() -> Path | None:
    env = os.environ.get("LINKSTREAM_SHARED")
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "shared"
    return path if path.is_dir() else None


def ox_term(t: object, prefix: str = "") -> str:
    """The N-Triples string of a pyoxigraph term (lexical forms as written)."""
    if isinstance(t, ox.NamedNode):
        return "<" + t.value + ">"
    if isinstance(t, ox.BlankNode):
        return "_:" + prefix + t.value
    if isinstance(t, ox.Triple):
        return "<<( %s %s %s )>>" % (
            ox_term(t.subject, prefix),
            ox_term(t.predicate),
            ox_term(t.object, prefix),
        )
    assert isinstance(t, ox.Literal)
    if t.language:
        s = Literal(t.value, RDF_LANGSTRING, t.language).n3()
        return s + ("--" + str(t.direction).lower() if t.direction else "")
    return Literal(t.value, t.datatype.value).n3()


def reference(line: str | bytes, prefix: str = "") -> list[tuple[str, str, str, str | None]] | None:
    """pyoxigraph's reading of a line the oracle's way; ``None`` if it rejects it."""
    raw = line.encode("utf-8", "surrogateescape") if isinstance(line, str) else line
    try:
        quads = list(ox.parse(raw.strip(), format=ox.RdfFormat.N_QUADS))
    except SyntaxError:
        return None
    return [
        (
            ox_term(q.subject, prefix),
            ox_term(q.predicate),
            ox_term(q.object, prefix),
            None if isinstance(q.graph_name, ox.DefaultGraph) else ox_term(q.graph_name, prefix),
        )
        for q in quads
    ]


def mine(line: str | bytes, prefix: str = "") -> list[tuple[str, str, str, str | None]] | None:
    text = line.decode("utf-8", "surrogateescape") if isinstance(line, bytes) else line
    try:
        return LineParser(prefix).parse_statements(text)
    except NTriplesError as e:
        assert str(e)
        return None


def T(obj: str, graph: str = "") -> str:
    return f"{S} {P} {obj} {graph} ."


CORPUS: list[str | bytes] = [
    # plain shapes, whitespace, comments
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g> .",
    "<http://ex.org/s><http://ex.org/p><http://ex.org/o>.",
    "<http://ex.org/s>\t<http://ex.org/p>\t<http://ex.org/o>\t.",
    "  <http://ex.org/s>  <http://ex.org/p>   <http://ex.org/o>  .  ",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> . # trailing comment",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .#comment",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g>.",
    b"<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> . # bad utf-8 in a comment \xff",
    "# only a comment",
    "   ",
    "",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\r\n",
    # literals: strings, escapes, unicode
    T('"plain"'),
    T('""'),
    T('"with space and \t tab"'),
    T('"caf\u00e9 \u6771\u4eac \U0001f600"'),
    T('"esc \\t \\b \\n \\r \\f \\" \\\' \\\\"'),
    T('"\\u00E9\\U0001F600\\u0041"'),
    T('"a\\u0022b"'),
    T('"\\uD800"'),
    T('"\\U00110000"'),
    T('"bad \\q escape"'),
    T('"short \\u00 escape"'),
    T('"unterminated'),
    T('"x\\"'),
    T("'single quotes'"),
    T('"""long"""'),
    T('"nul \x00 and vt \x0b"'),
    b'<http://ex.org/s> <http://ex.org/p> "bad utf-8 \xff" .',
    # language tags
    T('"x"@en'),
    T('"x"@EN-us'),
    T('"x"@zh-Hant-TW'),
    T('"x"@de-DE-1996'),
    T('"x"@en-US-x-private'),
    T('"x"@x-a-b'),
    T('"x"@i-klingon'),
    T('"x"@sgn-BE-FR'),
    T('"x"@en-a-bbb-x-ccc'),
    T('"x" @en'),
    T('"x"@en--ltr'),
    T('"x"@ar--rtl'),
    T('"x"@en--up'),
    T('"x"@EN--LTR'),
    T('"x"@'),
    T('"x"@en-'),
    T('"x"@123'),
    T('"x"@a'),
    T('"x"@abcdefghi'),
    T('"x"@en-abcdefghi'),
    T('"x"@en-12'),
    T('"x"@en-US-US'),
    T('"x"@en-x'),
    T('"x"@en-aaa-bbb-ccc-ddd'),
    T('"x"@en^^<http://ex.org/dt>'),
    # datatypes, canonical numbers
    T(f'"01"^^<{XSD}integer>'),
    T(f'"+7"^^<{XSD}int>'),
    T(f'"1.50"^^<{XSD}decimal>'),
    T(f'"52.0"^^<{XSD}double>'),
    T(f'"1e3"^^<{XSD}float>'),
    T(f'"0.00048426150121065375"^^<{XSD}double>'),
    T(f'"1"^^<{XSD}boolean>'),
    T(f'"abc"^^<{XSD}integer>'),
    T(f'"x"^^<{XSD}string>'),
    T(f'"2014-08-01T00:01:34.000Z"^^<{XSD}dateTime>'),
    T('"x"^^ <http://ex.org/dt>'),
    T('"x" ^^<http://ex.org/dt>'),
    T('"x"^^xsd:string'),
    T('"x"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#langString>'),
    T('"x"^^<http://www.w3.org/1999/02/22-rdf-syntax-ns#dirLangString>'),
    T('"x"^^<dt>'),
    T('"1"^^<http://ex.org/\\u0064t>'),
    # IRIs
    "<s> <http://ex.org/p> <http://ex.org/o> .",
    "<http://ex.org/a b> <http://ex.org/p> <http://ex.org/o> .",
    T("<http://ex.org/\u00e4\u00f6>"),
    T("<http://ex.org/\\u0041>"),
    T("<http://ex.org/\\u0020>"),
    T("<http://ex.org/\\u003E>"),
    T("<http://ex.org/\\n>"),
    T("<http://ex.org/%41%c3%a9>"),
    T("<http://ex.org/%zz>"),
    T("<http://ex.org/%4>"),
    T("<http://u:pw@ex.org:8080/p/q?x=1&y=2#frag>"),
    T("<http://ex.org:80a/>"),
    T("<http://[::1]:80/>"),
    T("<http://[1:2]/>"),
    T("<http://[v1.x]/>"),
    T("<http://ex.org/a#b#c>"),
    T("<http://ex.org/{x}>"),
    T("<http://ex.org/a|b>"),
    T("<http://ex.org/a^b>"),
    T("<http://ex.org/a`b>"),
    T("<http://ex.org/[x]>"),
    T("<http://ex.org/\ue000>"),
    T("<http://ex.org/?\ue000>"),
    T("<http://ex.org/\ufffd>"),
    T("<urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66>"),
    T("<mailto:someone@ex.org>"),
    T("<a:>"),
    T("<1a:b>"),
    T("<a_b:c>"),
    T("<>"),
    T("<http://ex.org/o"),
    # blank nodes
    "_:b1 <http://ex.org/p> _:b2 .",
    "_:b1 <http://ex.org/p> _:b2.",
    "_:a.b <http://ex.org/p> _:c-d_e\u00b7f .",
    "_:1x <http://ex.org/p> _:\u00e9t\u00e9 .",
    "_:a.. <http://ex.org/p> _:b .",
    "_:-a <http://ex.org/p> _:b .",
    "_:a:b <http://ex.org/p> _:b .",
    "_: <http://ex.org/p> _:b .",
    "<http://ex.org/s> _:p <http://ex.org/o> .",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> _:g .",
    "_:s <http://ex.org/p> _:o<http://ex.org/g>.",
    # triple terms (RDF 1.2)
    T("<<( <http://ex.org/a> <http://ex.org/b> <http://ex.org/c> )>>"),
    T('<<(_:x <http://ex.org/b> "v"@en)>>'),
    T("<<( <http://ex.org/a> <http://ex.org/b> <<( _:y <http://ex.org/b> <http://ex.org/c> )>> )>>"),
    T('<<( "lit" <http://ex.org/b> <http://ex.org/c> )>>'),
    T("<< <http://ex.org/a> <http://ex.org/b> <http://ex.org/c> >>"),
    "<<( <http://ex.org/a> <http://ex.org/b> <http://ex.org/c> )>> <http://ex.org/p> <http://ex.org/o> .",
    # structure errors
    '"literal" <http://ex.org/p> <http://ex.org/o> .',
    '<http://ex.org/s> "p" <http://ex.org/o> .',
    '<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> "g" .',
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o>",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g>",
    "<http://ex.org/s> <http://ex.org/p> .",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> . .",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .x",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> . <http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .",
    "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> <http://ex.org/g> <http://ex.org/h> .",
    "<http://ex.org/s>\x0b<http://ex.org/p> <http://ex.org/o> .",
    "\ufeff<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .",
    "@prefix ex: <http://ex.org/> .",
    "ex:s ex:p ex:o .",
    ".",
    "garbage",
]


@pytest.mark.parametrize("line", CORPUS, ids=[repr(x)[:60] for x in CORPUS])
def test_corpus_agrees_with_pyoxigraph(line: str | bytes) -> None:
    assert mine(line) == reference(line)


def test_corpus_covers_both_outcomes() -> None:
    outcomes = [reference(x) for x in CORPUS]
    assert sum(o is None for o in outcomes) > 40
    assert sum(bool(o) for o in outcomes) > 40


def test_blank_and_comment_lines_give_none() -> None:
    for line in ("", "   \t", "# c", "  # c <http://ex.org/s>", "\n", "\r\n"):
        assert parse_line(line) is None


def test_term_strings_keep_lexical_forms() -> None:
    """Typed literals keep lexical form and datatype; only escapes and tags get one spelling."""
    lines = {
        T(f'"01"^^<{XSD}integer>'): f'"01"^^<{XSD}integer>',
        T(f'"1.50"^^<{XSD}decimal>'): f'"1.50"^^<{XSD}decimal>',
        T(f'"52.0"^^<{XSD}double>'): f'"52.0"^^<{XSD}double>',
        T(f'"1"^^<{XSD}boolean>'): f'"1"^^<{XSD}boolean>',
        T(f'"-3"^^<{XSD}negativeInteger>'): f'"-3"^^<{XSD}negativeInteger>',
        T(f'"+1.0"^^<{XSD}decimal>'): f'"+1.0"^^<{XSD}decimal>',
        T(f'"abc"^^<{XSD}integer>'): f'"abc"^^<{XSD}integer>',
        T(f'"x"^^<{XSD}string>'): '"x"',
        T('"x"@EN-Us'): '"x"@en-us',
        T('"a\\u0022b\\tc\\nd"'): '"a\\"b\tc\\nd"',
        T('"\\u00e9"'): '"\u00e9"',
        T('"1"^^<http://ex.org/\\u0064t>'): '"1"^^<http://ex.org/dt>',
    }
    for line, obj in lines.items():
        q = parse_line(line)
        assert q is not None and q[2] == obj, line
        assert parse_term(obj).n3() == obj  # the key reads back as the same term


def test_fast_and_slow_paths_agree() -> None:
    # same statements, once with single spaces (split path) and once with tabs (regex path)
    p = LineParser()
    compared = 0
    for line in CORPUS:
        if isinstance(line, bytes) or reference(line) in (None, []) or "\t" in line or '"' in line:
            continue
        spaced = p.parse_line(line)
        tabbed = LineParser().parse_line(line.replace(" ", "\t"))
        assert spaced == tabbed, line
        compared += 1
    assert compared > 20


def test_bnode_prefix() -> None:
    assert parse_line("_:b1 <http://ex.org/p> _:b2 _:g .", "f1_") == ("_:f1_b1", P, "_:f1_b2", "_:f1_g")
    assert mine("_:b1 <http://ex.org/p> _:b2 .", "k") == reference("_:b1 <http://ex.org/p> _:b2 .", "k")
    with pytest.raises(ValueError):
        LineParser("bad prefix")


def test_several_statements_separated_by_cr() -> None:
    line = (
        "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> .\r<http://ex.org/s> <http://ex.org/p> _:x ."
    )
    assert mine(line) == reference(line)
    assert len(LineParser().parse_statements(line)) == 2
    with pytest.raises(NTriplesError):
        parse_line(line)


def test_error_is_value_error_with_reason() -> None:
    with pytest.raises(ValueError, match="IRI"):
        parse_line("<s> <http://ex.org/p> <http://ex.org/o> .")
    with pytest.raises(NTriplesError, match="'\\.'"):
        parse_line("<http://ex.org/s> <http://ex.org/p> <http://ex.org/o>")
    with pytest.raises(NTriplesError, match="literal"):
        parse_line('"s" <http://ex.org/p> <http://ex.org/o> .')


def test_iri_error() -> None:
    assert iri_error("http://ex.org/a") is None
    assert iri_error("relative/path") is not None
    assert iri_error("http://ex.org/a b") is not None


_SEEDS = [
    '<http://ex.org/s> <http://ex.org/p> "x y"@en-US <http://ex.org/g> .',
    f'_:b1 <http://ex.org/p> "1.50"^^<{XSD}decimal> .',
    "<http://u:p@h:80/p?q#f> <http://ex.org/p> <urn:x:y> _:g .",
    '<http://ex.org/s> <http://ex.org/p> "a\\u00E9\\n\\"b" .',
    '<http://ex.org/s> <http://ex.org/p> <<( _:x <http://ex.org/q> "v" )>> .',
    '<http://[::1]:8080/a%20b>\t<http://ex.org/p> "x"@zh-Hant-TW .',
    "_:a.b <http://ex.org/p> _:c-d . # comment",
]
_ALPHABET = list('<>"_:.@^#\\ \t-/%?[]()xX0aZ9u') + ["\u00e9", "\u00b7", "\ue000", "\x7f", "\ufffd"]
_ALPHABET += ["\\u0041", "\\U0001F600", "<<(", ")>>", "--ltr", "\r", "  "]


def test_mutated_lines_agree_with_pyoxigraph() -> None:
    rnd = random.Random(20240801)
    p = LineParser("m")
    checked = 0
    for _ in range(4000):
        s = rnd.choice(_SEEDS)
        for _ in range(rnd.randint(1, 3)):
            k = rnd.randrange(len(s) + 1)
            op = rnd.random()
            if op < 0.4:
                s = s[:k] + rnd.choice(_ALPHABET) + s[k:]
            elif op < 0.8:
                s = s[:k] + s[k + 1 :]
            else:
                s = s[:k] + rnd.choice(_ALPHABET) + s[k + 1 :]
        try:
            got: list | None = p.parse_statements(s)
        except NTriplesError:
            got = None
        assert got == reference(s, "m"), repr(s)
        checked += got is not None
    assert checked > 500


@pytest.mark.parametrize(
    "rel", ["citybench/streams/AarhusTrafficData158505.nq", "citybench/static/AarhusLibraryEvents.nt"]
)
def test_citybench_files_agree_with_pyoxigraph(rel: str) -> None:
    shared = shared_dir()
    if shared is None or not (shared / rel).is_file():
        pytest.skip("shared data not found (set LINKSTREAM_SHARED)")
    path = shared / rel
    fmt = ox.RdfFormat.N_QUADS if rel.endswith(".nq") else ox.RdfFormat.N_TRIPLES
    ref = [
        (
            ox_term(q.subject, "f"),
            ox_term(q.predicate),
            ox_term(q.object, "f"),
            None if isinstance(q.graph_name, ox.DefaultGraph) else ox_term(q.graph_name, "f"),
        )
        for q in ox.parse(path=str(path), format=fmt)
    ]
    p = LineParser("f")
    with open(path, encoding="utf-8", newline="\n") as f:
        got = [q for line in f if (q := p.parse_line(line.strip(LINE_STRIP))) is not None]
    assert got == ref


def test_sparql_json_terms_read_back_as_the_same_terms() -> None:
    from linkstream.engine.oneshot.embedded import term_json
    from linkstream.rdf.terms import term_from_json

    for nt in (
        "<http://ex.org/a>",
        "_:b1",
        '"x"',
        '"01"^^<http://www.w3.org/2001/XMLSchema#integer>',
        '"a\\"b\\nc"@en-gb',
        '"1"^^<http://ex.org/dt>',
    ):
        assert term_from_json(term_json(nt)).n3() == nt
    with pytest.raises(ValueError, match="not a SPARQL JSON term"):
        term_from_json({"type": "triple", "value": {}})
