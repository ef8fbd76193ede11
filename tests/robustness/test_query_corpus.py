"""A corpus of bad (and borderline valid) query texts in C-SPARQL, CQELS-QL and RSP-QL.

Each row is one query text and its exact outcome: either a :class:`QueryError` whose
one-line text names the problem and where (``q.rq:LINE:COL:`` when the problem has a
place in the text), or an accepted query with the expected dialect and windows.  Every
query goes through the same two steps as ``linkstream replay`` and ``POST /queries``:
:func:`parse_continuous`, then :meth:`Engine.register`.  A few rows also run through the
real ``linkstream replay`` command, in-process and in a subprocess.
"""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from linkstream.cli import main as cli_main
from linkstream.engine.embedded import Engine
from linkstream.query.continuous import parse_continuous
from linkstream.query.errors import QueryError
from linkstream.rdf.dictionary import open_dictionary

S = "<http://ex.org/s>"
PX = "PREFIX : <http://ex.org/> "


def cs(window: str = "[RANGE 3s STEP 1s]", where: str = "?x ?p ?o", head: str = "SELECT ?x") -> str:
    """A C-SPARQL query over stream ``S``."""
    return f"REGISTER QUERY q AS {head} FROM STREAM {S} {window} WHERE {{ {where} }}"


def cq(window: str = "[RANGE 3s]", inner: str = "?x ?p ?o", outer: str = "", head: str = "SELECT ?x") -> str:
    """A CQELS-QL query over stream ``S``."""
    return f"{head} WHERE {{ STREAM {S} {window} {{ {inner} }} {outer} }}"


def rs(
    window: str = "[RANGE PT5S STEP PT1S]", where: str = "WINDOW :w { ?x ?p ?o }", op: str = "RSTREAM"
) -> str:
    """An RSP-QL query over stream ``S`` with window ``:w``."""
    return f"{PX}REGISTER {op} <q> AS SELECT ?x FROM NAMED WINDOW :w ON {S} {window} WHERE {{ {where} }}"


@dataclass
class Bad:
    """A query that must be refused: ``says`` is in the message; ``at`` its (line, column)."""

    id: str
    text: str
    says: str
    at: tuple[int, int] | str | None  # (line, column), or the offending token (first occurrence, line 1)


@dataclass
class Good:
    """A query that must be accepted with this dialect and these windows (``str`` of each spec)."""

    id: str
    text: str
    dialect: str
    windows: list[str]


DEEP = 500
IN_VALUES = ", ".join(str(i) for i in range(600))

# fmt: off
BAD: list[Bad] = [
    # ---------------------------------------------------------------- C-SPARQL
    Bad("csparql-range-zero", cs("[RANGE 0s STEP 1s]"), "window RANGE of <http://ex.org/s> must be 1 ms to 2^53 ms, got 0 ms", None),
    Bad("csparql-range-negative", cs("[RANGE -3s STEP 1s]"), "negative numbers are not allowed in a window", "-3s"),
    Bad("csparql-range-huge", cs("[RANGE 99999999999999999999999s STEP 1s]"), "must be 1 ms to 2^53 ms, got 99999999999999999999999000 ms", None),
    Bad("csparql-range-2^63", cs("[RANGE 9223372036854775808ms]"), "must be 1 ms to 2^53 ms, got 9223372036854775808 ms", None),
    Bad("csparql-step-zero", cs("[RANGE 3s STEP 0s]"), "STEP must be positive, got '0s'", "0s]"),
    Bad("csparql-step-huge", cs("[RANGE 3s STEP 9999999999d]"), "window STEP of <http://ex.org/s> must be 1 ms to 2^53 ms", None),
    Bad("csparql-unknown-unit", cs("[RANGE 3 parsecs]"), "expected STEP, SLIDE or TUMBLING, got 'parsecs'", "parsecs"),
    Bad("csparql-bad-duration", cs("[RANGE 3x STEP 1s]"), "bad duration '3x'", "3x"),
    Bad("csparql-fraction-of-ms", cs("[RANGE 0.5ms]"), "is not a whole number of milliseconds", "0.5ms"),
    Bad("csparql-triples-zero", cs("[TRIPLES 0]"), "TRIPLES must be positive, got '0'", "0]"),
    Bad("csparql-triples-word", cs("[TRIPLES many]"), "bad number of triples 'many'", "many"),
    Bad("csparql-empty-window", cs("[]"), "empty window []", "[]"),
    Bad("csparql-unknown-window-form", cs("[ROWS 5]"), "unknown window form 'ROWS', expected RANGE, TRIPLES or NOW", "ROWS"),
    Bad("csparql-tumbling-zero", cs("[RANGE 0s TUMBLING]"), "a TUMBLING window needs a positive RANGE", "0s TUMBLING"),
    Bad("csparql-trailing-window-word", cs("[RANGE 3s STEP 1s NOW]"), "unexpected 'NOW' after STEP 1s", "NOW"),
    Bad("csparql-unterminated-window", cs("[RANGE 3s"), "unterminated window '['", "[RANGE"),
    Bad("csparql-no-window", f"SELECT ?x FROM STREAM {S} WHERE {{ ?x ?p ?o }}", "expected a window '[' after the stream IRI, found 'WHERE'", "WHERE"),
    Bad("csparql-no-stream-iri", "SELECT ?x FROM STREAM [RANGE 3s] WHERE { ?x ?p ?o }", "expected a stream IRI, found '['", "[RANGE"),
    Bad("csparql-variable-stream", "SELECT ?x FROM STREAM ?s [RANGE 3s] WHERE { ?x ?p ?o }", "expected a stream IRI, found '?s'", "?s"),
    Bad("csparql-stream-iri-with-space", "SELECT ?x FROM STREAM <http://ex .org/s> [RANGE 3s] WHERE { ?x ?p ?o }", "expected a stream IRI, found '<'", "<http://ex .org"),
    Bad("csparql-unknown-prefix", cs(where="?x ex:p ?o"), "unknown prefix 'ex:'", "ex:p"),
    Bad("csparql-unknown-prefix-stream", "SELECT ?x FROM STREAM ex:s [RANGE 3s] WHERE { ?x ?p ?o }", "unknown prefix 'ex:'", "ex:s"),
    Bad("csparql-unclosed-brace", cs()[:-1], "'{' is never closed", "{ ?x"),
    Bad("csparql-extra-brace", cs() + " }", "unmatched '}'", (1, 99)),
    Bad("csparql-register-without-name", f"REGISTER QUERY AS SELECT ?x FROM STREAM {S} [RANGE 3s] WHERE {{ ?x ?p ?o }}", "expected AS after REGISTER QUERY AS, found 'SELECT'", "SELECT"),
    Bad("csparql-register-bad-kind", f"REGISTER TABLE q AS SELECT ?x FROM STREAM {S} [RANGE 3s] WHERE {{ ?x ?p ?o }}", "expected QUERY, STREAM, RSTREAM, ISTREAM or DSTREAM after REGISTER", "TABLE"),
    Bad("csparql-load", "REGISTER QUERY q AS LOAD <http://x>", "expected SELECT, ASK, CONSTRUCT or DESCRIBE", "LOAD"),
    Bad("csparql-update", "INSERT DATA { <http://a> <http://b> <http://c> }", "expected SELECT, ASK, CONSTRUCT or DESCRIBE", (1, 1)),
    Bad("csparql-service", cs(where="SERVICE <http://x> { ?x ?p ?o }"), "SPARQL feature ServiceGraphPattern is not supported", None),
    Bad("csparql-describe", f"DESCRIBE ?x FROM STREAM {S} [RANGE 3s] WHERE {{ ?x ?p ?o }}", "DESCRIBE is not supported for continuous queries", None),
    Bad("csparql-ungrouped-projection", cs(head="SELECT ?x (COUNT(?o) AS ?n)"), "?x must be grouped (GROUP BY) or used in an aggregate", "?x (COUNT"),
    Bad("csparql-unknown-function", cs(where="?x ?p ?o FILTER(<http://x/f>(?o))"), "unknown function <http://x/f>", None),
    Bad("csparql-bad-string-escape", cs(where='?x ?p "a\\q"'), "invalid escape sequence '\\q' in string", "\\q"),
    Bad("csparql-bad-langtag", cs(where='?x ?p "a"@-x'), "syntax error", "-x"),
    Bad("csparql-nul-byte", cs(where="?x ?p ?o \x00"), "invalid character U+0000 is not allowed here", "\x00"),
    Bad("csparql-unicode-junk", cs(where="?x ?p ?o \u202e\ufffd"), "syntax error near", "\u202e"),
    Bad("csparql-deep-groups", f"SELECT ?x FROM STREAM {S} [RANGE 3s] WHERE " + "{" * DEEP + "?x ?p ?o" + "}" * DEEP, "query is nested too deeply for the SPARQL parser", None),
    Bad("csparql-deep-parentheses", cs(where="?x ?p ?o FILTER(" + "(" * 300 + "?o" + ")" * 300 + ")"), "query is nested too deeply for the SPARQL parser", None),
    Bad("csparql-mixed-with-cqels", f"SELECT ?x FROM STREAM {S} [RANGE 3s] WHERE {{ STREAM {S} [RANGE 3s] {{ ?x ?p ?o }} }}", "cannot mix CQELS-QL with C-SPARQL (line 1) in one query", (1, 60)),
    # ---------------------------------------------------------------- CQELS-QL
    Bad("cqels-range-zero", cq("[RANGE 0]"), "window RANGE of <http://ex.org/s> must be 1 ms to 2^53 ms, got 0 ms", None),
    Bad("cqels-range-negative", cq("[RANGE -1s]"), "negative numbers are not allowed in a window", "-1s"),
    Bad("cqels-range-huge", cq("[RANGE 104249991375d]"), "must be 1 ms to 2^53 ms", None),
    Bad("cqels-slide-zero", cq("[RANGE 3s SLIDE 0]"), "SLIDE must be positive, got '0'", "0]"),
    Bad("cqels-triples-negative", cq("[TRIPLES -2]"), "negative numbers are not allowed in a window", "-2"),
    Bad("cqels-all", cq("[ALL]"), "unknown window form 'ALL', expected RANGE, TRIPLES or NOW", "ALL"),
    Bad("cqels-now-with-range", cq("[NOW 3s]"), "unexpected '3s' after NOW", "3s]"),
    Bad("cqels-no-window", f"SELECT ?x WHERE {{ STREAM {S} {{ ?x ?p ?o }} }}", "expected a window '[' after the stream IRI, found '{'", "{ ?x"),
    Bad("cqels-variable-stream", "SELECT ?x WHERE { STREAM ?s [RANGE 3s] { ?x ?p ?o } }", "expected a stream IRI, found '?s'", "?s"),
    Bad("cqels-unknown-prefix", "SELECT ?x WHERE { STREAM ex:s [RANGE 3s] { ?x ?p ?o } }", "unknown prefix 'ex:'", "ex:s"),
    Bad("cqels-bad-unit", cq("[RANGE 3years]"), "bad duration '3years'", "3years"),
    Bad("cqels-unclosed-stream-block", f"SELECT ?x WHERE {{ STREAM {S} [RANGE 3s] {{ ?x ?p ?o }}", "'{' is never closed", (1, 17)),
    Bad("cqels-no-select", f"WHERE {{ STREAM {S} [RANGE 3s] {{ ?x ?p ?o }} }}", "expected SELECT, ASK, CONSTRUCT or DESCRIBE", (1, 1)),
    Bad("cqels-filter-unknown-prefix", cq(outer="FILTER(ex:foo(?o))"), "unknown prefix 'ex:'", "ex:foo"),
    Bad("cqels-bind-rebinds", cq(inner="?x ?p ?o", outer="BIND(1 AS ?x)"), "BIND", None),
    Bad("cqels-group-by-missing", cq(head="SELECT ?p (SUM(?o) AS ?n)"), "?p must be grouped (GROUP BY) or used in an aggregate", "?p (SUM"),
    Bad("cqels-property-path-negated-var", cq(inner="?x !(?p) ?o"), "syntax error", None),
    Bad("cqels-empty-text", "", "expected SELECT, ASK, CONSTRUCT or DESCRIBE", (1, 1)),
    Bad("cqels-whitespace-only", "   \n\t ", "expected SELECT, ASK, CONSTRUCT or DESCRIBE", (2, 3)),
    Bad("cqels-comment-only", "# nothing", "expected SELECT, ASK, CONSTRUCT or DESCRIBE", (1, 10)),
    Bad("cqels-one-shot-sparql", "SELECT ?x WHERE { ?x ?p ?o }", "not a continuous query: it reads no stream window", None),
    # ---------------------------------------------------------------- RSP-QL
    Bad("rspql-range-zero", rs("[RANGE PT0S STEP PT1S]"), "window RANGE of <http://ex.org/s> must be 1 ms to 2^53 ms, got 0 ms", None),
    Bad("rspql-bad-iso", rs("[RANGE P5X STEP PT1S]"), "bad duration 'P5X'", "P5X"),
    Bad("rspql-iso-only-P", rs("[RANGE P STEP PT1S]"), "bad duration 'P'", "P STEP"),
    Bad("rspql-iso-ends-with-T", rs("[RANGE PT STEP PT1S]"), "bad duration 'PT'", "PT STEP"),
    Bad("rspql-negative", rs("[RANGE -PT5S STEP PT1S]"), "negative numbers are not allowed in a window", "-PT5S"),
    Bad("rspql-undeclared-window", rs(where="WINDOW :v { ?x ?p ?o }"), "window :v is used but not declared (FROM NAMED WINDOW ... ON ...)", ":v"),
    Bad("rspql-window-declared-twice", f"{PX}REGISTER RSTREAM <q> AS SELECT ?x FROM NAMED WINDOW :w ON {S} [RANGE PT5S] FROM NAMED WINDOW :w ON {S} [RANGE PT5S] WHERE {{ WINDOW :w {{ ?x ?p ?o }} }}", "window :w is declared twice", (1, 134)),
    Bad("rspql-bad-operator", rs(op="FOOSTREAM"), "expected QUERY, STREAM, RSTREAM, ISTREAM or DSTREAM after REGISTER", "FOOSTREAM"),
    Bad("rspql-no-prefix", rs()[len(PX):], "unknown prefix ':'", ":w"),
    Bad("rspql-window-without-on", f"{PX}REGISTER RSTREAM <q> AS SELECT ?x FROM NAMED WINDOW :w [RANGE PT5S] WHERE {{ WINDOW :w {{ ?x ?p ?o }} }}", "expected ON", "[RANGE"),
    Bad("rspql-step-zero", rs("[RANGE PT5S STEP PT0S]"), "STEP must be positive, got 'PT0S'", "PT0S"),
    Bad("rspql-fraction-of-ms", rs("[RANGE PT0.0005S STEP PT1S]"), "is not a whole number of milliseconds", "PT0.0005S"),
    Bad("rspql-nested-too-deep", rs(where="WINDOW :w { " + "{" * DEEP + "?x ?p ?o" + "}" * DEEP + " }"), "query is nested too deeply for the SPARQL parser", None),
]
# fmt: on

# fmt: off
GOOD: list[Good] = [
    Good("csparql-ok", cs(), "csparql", ["[RANGE 3000ms STEP 1000ms]"]),
    Good("csparql-tumbling", cs("[RANGE 3s TUMBLING]"), "csparql", ["[RANGE 3000ms STEP 3000ms]"]),
    Good("csparql-relative-stream-iri", "SELECT ?x FROM STREAM <s> [RANGE 3s] WHERE { ?x ?p ?o }", "csparql", ["[RANGE 3000ms STEP default]"]),
    Good("csparql-same-stream-twice", f"SELECT ?x FROM STREAM {S} [RANGE 3s] FROM STREAM {S} [RANGE 5s] WHERE {{ ?x ?p ?o }}", "csparql", ["[RANGE 3000ms STEP default]", "[RANGE 5000ms STEP default]"]),
    Good("csparql-range-2^53", cs("[RANGE 9007199254740992ms STEP 1s]"), "csparql", ["[RANGE 9007199254740992ms STEP 1000ms]"]),
    Good("csparql-in-list-600", cs(where=f"?x ?p ?o FILTER(?o IN ({IN_VALUES}))"), "csparql", ["[RANGE 3000ms STEP 1000ms]"]),
    Good("csparql-lowercase-keywords", f"select ?x from stream {S} [range 3s step 1s] where {{ ?x ?p ?o }}", "csparql", ["[RANGE 3000ms STEP 1000ms]"]),
    Good("csparql-unicode-literal", cs(where='?x ?p "caf\u00e9 \u2603 \U0001f600"'), "csparql", ["[RANGE 3000ms STEP 1000ms]"]),
    Good("cqels-ok", cq(), "cqels", ["[RANGE 3000ms STEP default]"]),
    Good("cqels-now", cq("[NOW]"), "cqels", ["[NOW]"]),
    Good("cqels-triples-huge", cq("[TRIPLES 99999999999999999999]"), "cqels", ["[TRIPLES 99999999999999999999]"]),
    Good("cqels-slide-longer-than-range", cq("[RANGE 1s SLIDE 5s]"), "cqels", ["[RANGE 1000ms STEP 5000ms]"]),
    Good("cqels-fractional-seconds", cq("[RANGE 1.5s]"), "cqels", ["[RANGE 1500ms STEP default]"]),
    Good("cqels-range-triples", cq("[RANGE TRIPLES 5]"), "cqels", ["[TRIPLES 5]"]),
    Good("cqels-unbound-projection", cq(head="SELECT ?zz"), "cqels", ["[RANGE 3000ms STEP default]"]),
    Good("rspql-ok", rs(), "rspql", ["[RANGE 5000ms STEP 1000ms]"]),
    Good("rspql-istream", rs(op="ISTREAM"), "rspql", ["[RANGE 5000ms STEP 1000ms]"]),
    Good("rspql-unused-window", rs(where="?x ?p ?o"), "rspql", ["[RANGE 5000ms STEP 1000ms]"]),
    Good("rspql-iso-days", rs("[RANGE P1DT2H STEP PT1M]"), "rspql", ["[RANGE 93600000ms STEP 60000ms]"]),
]
# fmt: on


def _register(text: str, engine: Engine | None = None) -> str:
    """Parse and register ``text`` as ``q.rq``; returns the dialect and windows as a string."""
    engine = engine or Engine(open_dictionary("memory:"), default_step=1000, log_fn=lambda m: None)
    cq_ = parse_continuous(text, default_name="q", base="http://localhost/", source="q.rq")
    engine.register(cq_)
    return cq_.dialect + " " + " ".join(str(w.spec) for w in cq_.windows)


@pytest.mark.parametrize("case", BAD, ids=[b.id for b in BAD])
def test_bad_query_is_one_clear_located_error(case: Bad) -> None:
    t0 = time.perf_counter()
    with pytest.raises(QueryError) as info:
        _register(case.text)
    assert time.perf_counter() - t0 < 10, "a bad query must be refused quickly"
    text = str(info.value)
    assert "\n" not in text and "Traceback" not in text
    assert case.says in text, text
    if case.at is not None:
        at = case.at if isinstance(case.at, tuple) else (1, case.text.index(case.at) + 1)
        assert (info.value.line, info.value.column) == at, text
        assert text.startswith(f"q.rq:{at[0]}:{at[1]}: "), text


@pytest.mark.parametrize("case", GOOD, ids=[g.id for g in GOOD])
def test_valid_query_is_accepted(case: Good) -> None:
    assert _register(case.text) == " ".join([case.dialect, *case.windows])


def test_same_query_name_twice_is_refused() -> None:
    engine = Engine(open_dictionary("memory:"), default_step=1000, log_fn=lambda m: None)
    _register(cs(), engine)
    with pytest.raises(QueryError, match="a query named 'q' is already registered"):
        _register(cs(), engine)


def test_escaped_character_in_iri_is_located() -> None:
    """A backslash in an IRI: named as such, at the backslash (it said: unknown prefix 'http:')."""
    text = cq(inner="?x <http://ex.org/\\q> ?o")
    with pytest.raises(QueryError) as info:
        _register(text)
    assert (info.value.line, info.value.column) == (1, text.index("\\q") + 1), str(info.value)
    assert "invalid escape '\\q': a backslash is only allowed in strings, as \\uXXXX in IRIs" in str(
        info.value
    )


def test_prefixed_name_escapes_are_removed_as_the_oracle_does() -> None:
    """``:a\\.b`` names ``http://ex.org/a.b`` (SPARQL 1.1 PN_LOCAL_ESC); it was ``…a\\.b``."""
    import pyoxigraph
    from rdflib.term import URIRef

    from linkstream.query.rules import iter_tree

    escaped = "x" + "".join("\\" + c for c in "_~.-!$&'()*+,;=/?#@%") + "41y"
    expected = "http://ex.org/x_~.-!$&'()*+,;=/?#@%41y"
    q = parse_continuous(rs(where=f"WINDOW :w {{ ?x :{escaped} :a\\.b }}"), "q")
    iris = {str(x) for x in iter_tree(q.algebra.algebra) if isinstance(x, URIRef)}
    assert {expected, "http://ex.org/a.b"} <= iris and not any("\\" in i for i in iris), iris
    # the reference evaluator (pyoxigraph) reads the same text as the same IRIs
    store = pyoxigraph.Store()
    ex = pyoxigraph.NamedNode
    store.add(pyoxigraph.Quad(ex("http://ex.org/s"), ex(expected), ex("http://ex.org/a.b")))
    rows = list(store.query(f"{PX}SELECT ?x WHERE {{ ?x :{escaped} :a\\.b }}"))
    assert [str(r["x"]) for r in rows] == ["<http://ex.org/s>"]
    # stream and window names written as prefixed names are unescaped too
    q = parse_continuous(rs().replace(S, ":s\\-1"), "q")
    assert [w.stream for w in q.windows] == ["http://ex.org/s-1"]


def test_stream_nobody_provides_is_warned() -> None:
    said: list[str] = []
    engine = Engine(open_dictionary("memory:"), default_step=1000, log_fn=said.append)
    engine.declare_streams({"http://ex.org/other"})
    _register(cq(), engine)
    assert said == ["warning: q: stream <http://ex.org/s> is not replayed; its window is always empty"]


def test_static_graph_nobody_loads_is_warned() -> None:
    said: list[str] = []
    engine = Engine(open_dictionary("memory:"), default_step=1000, log_fn=said.append)
    _register(f"SELECT ?x FROM STREAM {S} [RANGE 3s] FROM <http://ex.org/g> WHERE {{ ?x ?p ?o }}", engine)
    assert said == ["warning: q: graph <http://ex.org/g> is not loaded; treated as empty"]


# ------------------------------------------------------------------ through linkstream replay

STREAM = (
    '<http://ex.org/g1> <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:01Z"'
    "^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
    '<http://ex.org/a> <http://ex.org/p> "1" <http://ex.org/g1> .\n'
)


@pytest.fixture()
def replay_files(tmp_path: Path) -> Path:
    (tmp_path / "s.nq").write_text(STREAM)
    return tmp_path


# fmt: off
REPLAYED = [
    ("replay-csparql-range-zero", cs("[RANGE 0s STEP 1s]"), "q.rq: window RANGE of <http://ex.org/s> must be 1 ms to 2^53 ms, got 0 ms"),
    ("replay-cqels-syntax", cq()[:-2], "q.rq:1:17: '{' is never closed"),
    ("replay-rspql-unknown-prefix", rs()[len(PX):], "q.rq:1:53: unknown prefix ':'"),
    ("replay-not-utf8", None, "cannot read query"),
]
# fmt: on


@pytest.mark.parametrize(("name", "text", "says"), REPLAYED, ids=[r[0] for r in REPLAYED])
def test_replay_refuses_bad_query(
    name: str, text: str | None, says: str, replay_files: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    q = replay_files / "q.rq"
    if text is None:
        q.write_bytes(b"SELECT \xff\xfe ?x")
    else:
        q.write_text(text)
    code = cli_main(
        ["replay", "--query", str(q), "--stream", f"http://ex.org/s={replay_files}/s.nq", "--out", "-"]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and says in err, err


def test_replay_subprocess_bad_query_and_missing_stream(replay_files: Path) -> None:
    """The real command: exit status 2, one line on stderr, no traceback; then a warning only."""
    q = replay_files / "q.rq"
    q.write_text(cq("[RANGE -1s]"))
    cmd = [sys.executable, "-m", "linkstream.cli", "replay", "--query", str(q), "--out", "-", "--quiet"]
    r = subprocess.run(
        [*cmd, "--stream", f"http://ex.org/s={replay_files}/s.nq"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == f"error: {q}:1:51: negative numbers are not allowed in a window"
    q.write_text(cq().replace("ex.org/s", "ex.org/nobody"))
    r = subprocess.run(
        [*cmd, "--stream", f"http://ex.org/s={replay_files}/s.nq"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and r.stdout == ""
    assert (
        r.stderr.strip()
        == "warning: q: stream <http://ex.org/nobody> is not replayed; its window is always empty"
    )
