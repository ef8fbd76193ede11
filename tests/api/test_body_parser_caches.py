"""Push bodies are parsed with one blank-node prefix per request but the shared caches of
every other term (``LineParser.with_prefix``): the elements equal those of a parser of
their own, blank nodes stay apart per request, and a bad term is still refused."""

from __future__ import annotations

import pytest

from linkstream.api.bodies import BodyError, parse_body
from linkstream.rdf.ntriples import LineParser

EX = "http://example.org/"
BODY = (
    f'<{EX}e1> <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:01Z"'
    "^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
    f'<{EX}a> <{EX}p> "caf\\u00e9"@en <{EX}e1> .\n'
    f"_:b1 <{EX}p> <{EX}b> <{EX}e1> .\n"
    f'<{EX}a> <{EX}q> "7"^^<http://www.w3.org/2001/XMLSchema#integer> <{EX}e1> .\n'
)


def _own_parser(prefix: str) -> list[tuple[str, str, str]]:
    p = LineParser(prefix)
    quads = [p.parse_line(line) for line in BODY.splitlines()]
    return [(s, pr, o) for s, pr, o, g in (q for q in quads if q) if g is not None]


def test_shared_caches_parse_as_a_parser_of_its_own() -> None:
    first = parse_body(BODY.encode(), "application/n-quads", bnode_prefix="h1_", base=EX)
    again = parse_body(BODY.encode(), "application/n-quads", bnode_prefix="h2_", base=EX)  # warm caches
    assert [el.t for el in first] == [el.t for el in again] == [1704067201000]
    assert first[0].triples == _own_parser("h1_")
    assert again[0].triples == _own_parser("h2_")
    assert ("_:h1_b1", f"<{EX}p>", f"<{EX}b>") in first[0].triples
    assert ("_:h2_b1", f"<{EX}p>", f"<{EX}b>") in again[0].triples
    assert (f"<{EX}a>", f"<{EX}p>", '"café"@en') in again[0].triples


def test_a_bad_term_is_refused_with_warm_caches() -> None:
    parse_body(BODY.encode(), "application/n-quads", bnode_prefix="h3_", base=EX)
    bad = BODY.replace(f"<{EX}b>", "<no-scheme>")
    with pytest.raises(BodyError) as exc:
        parse_body(bad.encode(), "application/n-quads", bnode_prefix="h4_", base=EX)
    assert exc.value.message == "line 3: no scheme in IRI <no-scheme> (IRIs must be absolute)"
    bnode_pred = BODY.replace(f"_:b1 <{EX}p>", f"<{EX}a> _:b1")
    with pytest.raises(BodyError) as exc:
        parse_body(bnode_pred.encode(), "application/n-quads", bnode_prefix="h5_", base=EX)
    assert exc.value.line == 3
