"""Hypothesis fuzzing of the N-Triples / N-Quads reader and the query lexer and parsers of the
three dialects: whatever the input, the only exception is the documented one
(:class:`NTriplesError`, ``ValueError`` for a timestamp or a duration, :class:`QueryError`).
The HTTP body parsers are fuzzed in ``test_bodies_fuzz.py``.  Each test runs a bounded
number of examples so the suite stays fast.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from linkstream.engine.embedded import Engine
from linkstream.query.continuous import parse_continuous
from linkstream.query.errors import QueryError
from linkstream.query.lexer import tokenize
from linkstream.query.windows import WindowSpec, parse_duration, parse_window
from linkstream.rdf.dictionary import open_dictionary
from linkstream.rdf.eventtime import parse_time_jump
from linkstream.rdf.ntriples import NTriplesError, parse_line, parser_for
from linkstream.rdf.streams import PROV_GENERATED_AT, StreamReader, parse_datetime_ms

FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
XSD = "http://www.w3.org/2001/XMLSchema#"

# --------------------------------------------------------------------------- N-Triples / N-Quads

_NT_PIECES = [
    "<http://ex.org/a>", "<http://ex.org/p>", "<http://ex.org/g>", "<a>", "<http://ex .org/>", "<http://[::1]/x>",
    "<http://ex.org/\\u0041>", "<http://ex.org/\\uD800>", "<http://ex.org/\\q>", "<", ">", "<<(", ")>>",
    "_:b0", "_:", "_:a.", '"x"', '"x', '"\\u00e9\\n\\t"', '"\\q"', '"\\U00110000"', '"x"@en', '"x"@en--ltr',
    '"x"@-', '"1"^^<' + XSD + 'integer>', '"x"^^xsd:int', '"x"^^<int>', "^^", "@", ".", " ", "\t", "\r", "#c",
    "\ufeff", "\x00", "\u202e", "\udcff", "\U0001f600", "<" + PROV_GENERATED_AT + ">",
    '"2024-01-01T00:00:00Z"^^<' + XSD + 'dateTime>',
]  # fmt: skip
NT_LINES = st.lists(st.sampled_from(_NT_PIECES), max_size=12).map(" ".join) | st.text(max_size=200)


@FUZZ
@given(line=NT_LINES)
@example(
    line="<http://ex.org/a> <http://ex.org/p> " + "<<( <http://ex.org/a> <http://ex.org/p> " * 500 + '"x"'
)
def test_ntriples_line(line: str) -> None:
    try:
        quad = parse_line(line)
    except NTriplesError as e:
        assert str(e) and "\n" not in str(e)
        return
    if quad is not None:  # an accepted statement parses again to itself
        s, p, o, g = quad
        again = f"{s} {p} {o} {g} ." if g else f"{s} {p} {o} ."
        assert parse_line(again) == quad


@FUZZ
@given(line=NT_LINES, prefix=st.sampled_from(["", "f1_", "s0_"]))
def test_ntriples_statements_with_cr(line: str, prefix: str) -> None:
    try:
        parser_for(prefix).parse_statements(line + "\r" + line)
    except NTriplesError:
        pass


@FUZZ
@given(
    lex=st.from_regex(
        r"-?\d{1,12}-\d{1,3}-\d{1,3}T\d{1,3}:\d{1,3}:\d{1,3}(\.\d{0,12})?(Z|[+-]\d\d:\d\d)?", fullmatch=True
    )
    | st.text(max_size=40)
)
@example(lex="99999999999-01-01T00:00:05Z")
@example(lex="2024-01-01T24:00:00Z")
def test_datetime_lexical_forms(lex: str) -> None:
    try:
        parse_datetime_ms(lex)
    except ValueError as e:
        assert str(e)


def _stream_line(kind: int, g: int, value: str) -> str:
    if kind == 0:
        return f'<http://ex.org/g{g}> <{PROV_GENERATED_AT}> "{value}"^^<{XSD}dateTime> .'
    if kind == 1:
        return f'<http://ex.org/a> <http://ex.org/p> "{g}" <http://ex.org/g{g}> .'
    return value


STREAM_LINES = st.lists(
    st.builds(
        _stream_line,
        st.integers(0, 2),
        st.integers(0, 5),
        st.sampled_from(
            ["2024-01-01T00:00:01Z", "2024-01-01T00:00:00.5Z", "2024-01-02T00:00:00Z", "1969-12-31T23:59:59Z",
             "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z", "2024-02-30T00:00:00Z", "bad", "\ufeff", "\x00", "#"]
        ) | st.text(max_size=30),
    ),
    max_size=25,
)  # fmt: skip


@FEW
@given(
    lines=STREAM_LINES,
    bom=st.booleans(),
    eol=st.sampled_from(["\n", "\r\n", "\r"]),
    lateness=st.integers(0, 2000),
)
def test_stream_file(tmp_path_factory: object, lines: list[str], bom: bool, eol: str, lateness: int) -> None:
    path = Path(str(tmp_path_factory.mktemp("fuzz"))) / "s.nq"  # type: ignore[attr-defined]
    path.write_bytes(("\ufeff" if bom else "").encode() + eol.join(lines).encode("utf-8", "surrogatepass"))
    said: list[str] = []
    reader = StreamReader(str(path), open_dictionary("memory:"), lateness_ms=lateness, log=said.append)
    elements = list(reader)
    st_ = reader.stats
    assert st_.elements == len([e for e in elements if not e.continuation])
    assert st_.triples == sum(len(e.triples) for e in elements)
    assert all(0 <= e.t < 2**53 for e in elements)
    assert all(m.startswith(f"{path}:") and "\n" not in m for m in said)


# --------------------------------------------------------------------------- query lexer and parsers

S = "<http://ex.org/s>"
SEEDS = [
    f"REGISTER QUERY q AS SELECT ?x FROM STREAM {S} [RANGE 3s STEP 1s] WHERE {{ ?x ?p ?o }}",
    f"SELECT ?x (COUNT(?o) AS ?n) WHERE {{ STREAM {S} [RANGE 3s SLIDE 1s] {{ ?x ?p ?o }} FILTER(?o > 1) }} GROUP BY ?x",
    f"PREFIX : <http://ex.org/> REGISTER RSTREAM <q> AS SELECT ?x FROM NAMED WINDOW :w ON {S} [RANGE PT5S STEP PT1S] "
    "WHERE { WINDOW :w { ?x ?p ?o OPTIONAL { ?x :q ?z } } }",
    f"SELECT ?x WHERE {{ STREAM {S} [TRIPLES 5] {{ ?x ?p ?o }} MINUS {{ ?x ?p 3 }} }}",
    f'CONSTRUCT {{ ?x ?p ?o }} FROM STREAM {S} [NOW] WHERE {{ ?x ?p ?o BIND(STR(?o) AS ?s) FILTER(REGEX(?s, "a")) }}',
]
_Q_VOCAB = [
    "SELECT", "WHERE", "STREAM", "FROM", "NAMED", "WINDOW", "ON", "REGISTER", "QUERY", "RSTREAM", "AS", "RANGE",
    "STEP", "SLIDE", "TRIPLES", "NOW", "TUMBLING", "FILTER", "OPTIONAL", "UNION", "MINUS", "GRAPH", "BIND", "VALUES",
    "GROUP", "BY", "HAVING", "ORDER", "LIMIT", "COUNT(", "SUM(", "IN", "NOT", "EXISTS", "SERVICE", "PREFIX", "BASE",
    "{", "}", "[", "]", "(", ")", ".", ";", ",", "*", "?x", "?o", "$y", ":w", "ex:p", "<http://ex.org/s>", "<s>",
    "<http://ex .org>", '"a"', '"a\\q"', "'b'", '"x"@en', "3s", "0", "-1", "PT5S", "P", "9" * 30, "1.5e9", "\x00",
    "\u202e", "\udcff", "\\u0041", "#", "\n", "@", "^^", "||", "&&", "!", "=", "<", ">", "+",
]  # fmt: skip


@st.composite
def mutated_queries(draw: st.DrawFn) -> str:
    """A seed query with a few tokens deleted, replaced or inserted."""
    words = draw(st.sampled_from(SEEDS)).split(" ")
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(words)))
        op = draw(st.sampled_from(["delete", "replace", "insert"]))
        if op == "delete" and i < len(words):
            del words[i]
        elif op == "replace" and i < len(words):
            words[i] = draw(st.sampled_from(_Q_VOCAB))
        else:
            words.insert(i, draw(st.sampled_from(_Q_VOCAB)))
    return " ".join(words)


_VARS = ["?x", "?p", "?o", "?y", "?n"]
_TERMS = [*_VARS, "<http://ex.org/a>", "<http://ex.org/p>", '"a"', '"a"@en', "1", "2.5", "-3", "true",
          '"2024-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>', "_:b"]  # fmt: skip
_FUNCS = ["STR", "LANG", "DATATYPE", "BOUND", "ISIRI", "ISLITERAL", "ABS", "CEIL", "STRLEN", "UCASE", "YEAR",
          "xsd:integer", "xsd:dateTime", "<http://x/f>", "COALESCE", "IF", "CONCAT", "SUBSTR", "REGEX", "NOW"]  # fmt: skip
_OPS = ["+", "-", "*", "/", "=", "!=", "<", ">=", "&&", "||"]
_WINDOWS = ["[RANGE 3s]", "[RANGE 3s STEP 1s]", "[TRIPLES 2]", "[NOW]", "[RANGE 1ms STEP 1ms]", "[RANGE 0s]",
            "[RANGE 1d STEP 1ms]", "[RANGE 1s SLIDE 5s]", "[RANGE 9007199254740993ms]"]  # fmt: skip
_AGGS = ["COUNT(*)", "COUNT(DISTINCT ?o)", "SUM(?o)", "AVG(?o)", "MIN(?x)", "MAX(?o)", "SAMPLE(?o)",
         'GROUP_CONCAT(?o; SEPARATOR=",")']  # fmt: skip


def _expr(draw: st.DrawFn, depth: int = 0) -> str:
    kind = draw(st.integers(0, 3 if depth < 3 else 0))
    if kind == 0:
        return draw(st.sampled_from(_TERMS))
    if kind == 1:
        args = ", ".join(_expr(draw, depth + 1) for _ in range(draw(st.integers(0, 3))))
        return f"{draw(st.sampled_from(_FUNCS))}({args})"
    if kind == 2:
        return f"({_expr(draw, depth + 1)} {draw(st.sampled_from(_OPS))} {_expr(draw, depth + 1)})"
    return f"{_expr(draw, depth + 1)} IN ({', '.join(draw(st.lists(st.sampled_from(_TERMS), max_size=4)))})"


@st.composite
def composed_queries(draw: st.DrawFn) -> str:
    """Mostly well-formed queries of the three dialects, with random patterns, expressions,
    windows, aggregates and solution modifiers: they reach the SPARQL rules and the planner."""
    triples = " . ".join(
        " ".join(draw(st.sampled_from(_TERMS)) for _ in range(3)) for _ in range(draw(st.integers(1, 3)))
    )
    extras = []
    for _ in range(draw(st.integers(0, 3))):
        k = draw(st.integers(0, 4))
        if k == 0:
            extras.append(f"FILTER({_expr(draw)})")
        elif k == 1:
            extras.append(f"OPTIONAL {{ ?x <http://ex.org/q> {draw(st.sampled_from(_VARS))} }}")
        elif k == 2:
            extras.append(f"MINUS {{ ?x ?p {draw(st.sampled_from(_TERMS))} }}")
        elif k == 3:
            extras.append(f"BIND({_expr(draw)} AS {draw(st.sampled_from(_VARS))})")
        else:
            extras.append(
                f"VALUES {draw(st.sampled_from(_VARS))} {{ {' '.join(draw(st.lists(st.sampled_from(_TERMS), max_size=3)))} }}"
            )
    where = " ".join(extras)
    window = draw(st.sampled_from(_WINDOWS))
    head = draw(st.sampled_from(["*", "?x", "?x ?o", "DISTINCT ?x"]))
    tail = ""
    if draw(st.booleans()):
        head = f"?x ({draw(st.sampled_from(_AGGS))} AS ?agg)"
        tail = draw(st.sampled_from(["GROUP BY ?x", "GROUP BY ?x HAVING (COUNT(*) > 1)", "", "GROUP BY ?o"]))
    tail += " " + draw(
        st.sampled_from(["", "ORDER BY ?x", "ORDER BY DESC(?o) LIMIT 2", "LIMIT 0", "OFFSET 1"])
    )
    dialect = draw(st.integers(0, 2))
    if dialect == 0:
        return f"PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> SELECT {head} FROM STREAM {S} {window} WHERE {{ {triples} {where} }} {tail}"
    if dialect == 1:
        return f"PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> SELECT {head} WHERE {{ STREAM {S} {window} {{ {triples} }} {where} }} {tail}"
    return (
        f"PREFIX xsd: <http://www.w3.org/2001/XMLSchema#> PREFIX : <http://ex.org/> REGISTER RSTREAM <q> AS "
        f"SELECT {head} FROM NAMED WINDOW :w ON {S} {window} WHERE {{ WINDOW :w {{ {triples} }} {where} }} {tail}"
    )


QUERY_TEXTS = (
    composed_queries()
    | mutated_queries()
    | st.lists(st.sampled_from(_Q_VOCAB), max_size=25).map(" ".join)
    | st.text(max_size=120)
)


@FUZZ
@given(text=QUERY_TEXTS)
def test_lexer(text: str) -> None:
    try:
        tokens = tokenize(text)
    except QueryError as e:
        assert e.line is not None and e.column is not None and "\n" not in str(e)
        return
    assert "".join(t.text for t in tokens) == text  # the tokens cover the text without gaps


@FUZZ
@given(text=QUERY_TEXTS)
@example(text=SEEDS[0].replace("WHERE {", "WHERE " + "{" * 400) + "}" * 400)
def test_continuous_parser_and_planner(text: str) -> None:
    try:
        cq = parse_continuous(text, default_name="q", base="http://localhost/", source="q.rq")
        Engine(open_dictionary("memory:"), default_step=1000, log_fn=lambda m: None).register(cq)
    except QueryError as e:
        assert str(e) and "\n" not in str(e)
        if e.line is not None:
            assert str(e).startswith(f"q.rq:{e.line}:")
            assert 1 <= e.line <= text.count("\n") + 1


_WINDOW_WORDS = ["RANGE", "STEP", "SLIDE", "TRIPLES", "NOW", "TUMBLING", "3s", "0", "-", "1.5", "PT5S", "P1DT2H",
                 "9" * 25, "0.5ms", "x", "", "ms", "PT", "P"]  # fmt: skip


@FUZZ
@given(words=st.lists(st.sampled_from(_WINDOW_WORDS) | st.text(max_size=8), max_size=6))
def test_window_bodies(words: list[str]) -> None:
    try:
        spec = parse_window(words)
    except QueryError as e:
        assert str(e)
        return
    assert isinstance(spec, WindowSpec)
    assert (spec.range_ms or 0) >= 0 and (spec.step_ms is None or spec.step_ms > 0)
    assert spec.count is None or spec.count > 0


@FUZZ
@given(text=st.from_regex(r"[PT0-9.DHMSmshd]{0,12}", fullmatch=True) | st.text(max_size=12))
def test_durations(text: str) -> None:
    try:
        assert parse_duration(text) >= 0
    except QueryError:
        pass
    try:
        assert 0 <= parse_time_jump(text) <= 2**53
    except ValueError:
        pass


# --------------------------------------------------------------------------- evaluation of what parses

_EVAL_STREAM = "".join(
    f'<http://ex.org/g{i}> <{PROV_GENERATED_AT}> "2024-01-01T00:00:0{i}Z"^^<{XSD}dateTime> .\n' + body
    for i, body in (
        (1, '<http://ex.org/a> <http://ex.org/p> "1" <http://ex.org/g1> .\n'
            '<http://ex.org/a> <http://ex.org/q> "a"@en <http://ex.org/g1> .\n'),
        (2, f'<http://ex.org/a> <http://ex.org/p> "2.5"^^<{XSD}decimal> <http://ex.org/g2> .\n'
            "<http://ex.org/b> <http://ex.org/p> <http://ex.org/a> <http://ex.org/g2> .\n"
            f'<http://ex.org/b> <http://ex.org/p> "x"^^<{XSD}integer> <http://ex.org/g2> .\n'),
        (3, f'<http://ex.org/b> <http://ex.org/p> "2024-01-01T00:00:00Z"^^<{XSD}dateTime> <http://ex.org/g3> .\n'
            "<http://ex.org/a> <http://ex.org/p> _:b1 <http://ex.org/g3> .\n"),
    )
)  # fmt: skip

#: queries the fuzzing below found crashing the evaluation (TypeError on an empty static
#: fingerprint; KeyError for a GROUP BY key or aggregate argument the pattern never binds)
FOUND = {
    "minus-bind-empty-static": f"SELECT * WHERE {{ STREAM {S} [RANGE 3s] {{ ?p <http://ex.org/p> ?x . "
    "<http://ex.org/p> <http://ex.org/p> ?x } MINUS { ?x ?p ?n } BIND(<http://ex.org/a> IN (?o, ?p) AS ?o) }",
    "group-by-unbound-key": f"SELECT ?x (COUNT(*) AS ?n) WHERE {{ STREAM {S} [RANGE 3s] {{ ?a <http://ex.org/p> ?o }} }} GROUP BY ?x",
    "sum-of-unbound": f"SELECT ?x (SUM(?o) AS ?s) WHERE {{ STREAM {S} [RANGE 3s] {{ ?x <http://ex.org/p> ?v }} }} GROUP BY ?x",
    "minus-group-by-unbound": f"SELECT ?x (COUNT(*) AS ?n) FROM STREAM {S} [RANGE 3s STEP 1s] "
    'WHERE { ?o <http://ex.org/p> 1 . "a" ?y 2.5 MINUS { ?x ?p ?x } } GROUP BY ?x ORDER BY ?x',
}


def _evaluate(text: str, stream: Path, name: str = "q") -> str:
    """Registers ``text`` on an embedded engine and replays ``stream``; the JSON Lines out."""
    import gc
    import io

    from linkstream.engine.replay import replay

    engine = Engine(open_dictionary("memory:"), default_step=1000, log_fn=lambda m: None)
    rq = engine.register(parse_continuous(text, default_name=name, base="http://localhost/", source="q.rq"))
    out = io.StringIO()
    try:
        replay(engine, [rq], [("http://ex.org/s", str(stream))], out, log=lambda m: None)
    finally:
        gc.unfreeze()  # (replay freezes the registered objects out of the collector)
    return out.getvalue()


@FEW
@given(text=composed_queries())
def test_composed_queries_evaluate(tmp_path_factory: object, text: str) -> None:
    """Whatever parses and registers also evaluates over a small stream without an exception."""
    stream = Path(str(tmp_path_factory.getbasetemp())) / "eval.nq"  # type: ignore[attr-defined]
    if not stream.exists():
        stream.write_text(_EVAL_STREAM)
    try:
        _evaluate(text, stream)
    except QueryError:
        pass


def test_found_queries_equal_the_oracle(tmp_path: Path) -> None:
    from tests.result_compare import differences, load
    from tests.shared_paths import load_tool

    oracle = load_tool("oracle")
    stream = tmp_path / "s.nq"
    stream.write_text(_EVAL_STREAM)
    for name, text in FOUND.items():
        q = tmp_path / f"{name}.rq"
        q.write_text(text)
        want, got = tmp_path / f"{name}.want", tmp_path / f"{name}.got"
        common = ["--query", str(q), "--stream", f"http://ex.org/s={stream}"]
        assert oracle.main([*common, "--out", str(want), "--quiet"]) == 0
        got.write_text(_evaluate(text, stream, name))
        assert want.read_text().strip() or name in ("minus-bind-empty-static", "minus-group-by-unbound"), name
        assert differences(load(want), load(got)) == [], name
