"""Every query of ``bad_queries/*.rq`` is rejected with a QueryError at a known place.

The first line of each file is ``# expect: LINE:COL`` (or ``# expect: LINE``), optionally
followed by ``(oracle accepts)`` for the few queries LinkStream rejects on purpose although
the reference evaluator accepts them (a zero STEP or TRIPLES).  The reference evaluator
(``shared/tools/oracle.py`` plus pyoxigraph) must agree: it rejects every other file, and
accepts the marked ones.
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import time
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linkstream.query.continuous import parse_continuous
from linkstream.query.errors import QueryError

CORPUS = Path(__file__).resolve().parent / "bad_queries"
REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
EXPECT = re.compile(rb"^# expect: (\d+)(?::(\d+))?( \(oracle accepts\))?\s*$")
BASE = "http://localhost/"


def _corpus() -> list[Path]:
    return sorted(CORPUS.glob("*.rq"))


def _expectation(data: bytes) -> tuple[int, int | None, bool]:
    m = EXPECT.match(data.split(b"\n", 1)[0])
    assert m, "the first line must be '# expect: LINE:COL'"
    return int(m.group(1)), int(m.group(2)) if m.group(2) else None, bool(m.group(3))


def _parse_error(data: bytes | str, source: str) -> QueryError:
    try:
        parse_continuous(data, source=source)
    except QueryError as e:
        return e
    except Exception as e:  # anything else is a bug of the parser
        pytest.fail(f"{source}: {type(e).__name__} escaped instead of QueryError: {e}")
    pytest.fail(f"{source}: accepted")


def test_corpus_is_large_enough() -> None:
    assert len(_corpus()) >= 25


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_bad_query_is_rejected_at_the_expected_place(path: Path) -> None:
    data = path.read_bytes()
    line, col, _ = _expectation(data)
    error = _parse_error(data, path.name)
    assert error.line == line, str(error)
    if col is not None:
        assert error.column == col, str(error)
    message = str(error)
    assert "\n" not in message and "\r" not in message
    assert message.startswith(f"{path.name}:{line}:")
    assert error.message and len(message) < 300


@cache
def _oracle() -> ModuleType | None:
    path = SHARED / "tools" / "oracle.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("linkstream_test_oracle_bad", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _reference_accepts(data: bytes) -> bool:
    """Whether the reference evaluator would run this query (oracle parse, then pyoxigraph)."""
    orc = _oracle()
    if orc is None:
        pytest.skip(f"shared tools not found at {SHARED} (set LINKSTREAM_SHARED)")
    pyoxigraph = pytest.importorskip("pyoxigraph")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    try:
        pq = orc.parse_query(text, "q", 0, BASE)
    except (orc.QueryError, IndexError) as e:
        if "no stream window" not in str(e):
            return False
        sparql, base = text, BASE  # a one-shot query: pyoxigraph decides alone
    else:
        orc.finish_rewrite(pq, [])
        sparql, base = pq.sparql, pq.base
    try:
        pyoxigraph.Store().query(sparql, base_iri=base)
    except SyntaxError:
        return False
    return True


@pytest.mark.parametrize("path", _corpus(), ids=lambda p: p.stem)
def test_reference_evaluator_agrees(path: Path) -> None:
    data = path.read_bytes()
    _, _, oracle_accepts = _expectation(data)
    assert _reference_accepts(data) == oracle_accepts


def test_megabyte_of_random_bytes_fails_fast() -> None:
    data = random.Random(20140801).randbytes(1 << 20)
    for blob in (data, data.decode("latin-1"), data.decode("utf-8", errors="replace")):
        start = time.monotonic()
        error = _parse_error(blob, "random.bin")
        assert time.monotonic() - start < 2.0
        assert error.line is not None and error.column is not None
        assert "\n" not in str(error)


def test_truncated_queries_only_raise_query_errors() -> None:
    """Every prefix of a valid continuous query either parses or raises a located QueryError."""
    text = (
        "PREFIX : <http://example.org/>\nREGISTER ISTREAM :q AS\n"
        "SELECT ?s (COUNT(?o) AS ?n)\nFROM NAMED WINDOW :w ON :s [RANGE PT10S STEP PT5S]\n"
        'WHERE { WINDOW :w { ?s ?p ?o FILTER(?o != "x\\"y") } } GROUP BY ?s'
    )
    for end in range(0, len(text) + 1, 3):
        try:
            parse_continuous(text[:end])
        except QueryError as e:
            assert e.line is not None and "\n" not in str(e)


FRAGMENTS = [
    "SELECT", "ASK", "CONSTRUCT", "WHERE", "FROM", "STREAM", "NAMED", "WINDOW", "ON", "REGISTER",
    "QUERY", "RSTREAM", "AS", "GROUP", "BY", "COUNT", "FILTER", "OPTIONAL", "BIND", "VALUES",
    "PREFIX", "ex:", "ex:a", ":w", "_:b", "<http://example.org/s>", "<rel>", "?s", "?o", "$v",
    '"lit"', "'x'", "1", "-2", "3s", "PT1S", "[", "]", "{", "}", "(", ")", ".", ";", ",", "*",
    "RANGE", "STEP", "SLIDE", "TRIPLES", "NOW", "TUMBLING", "#c\n", "\\u0041", "\n", "\x00", "\ufffd",
]  # fmt: skip


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=30))
def test_random_token_soup_only_raises_query_errors(parts: list[str]) -> None:
    text = " ".join(parts)
    try:
        parse_continuous(text)
    except QueryError as e:
        assert e.line is not None and e.column is not None
        assert "\n" not in str(e)
