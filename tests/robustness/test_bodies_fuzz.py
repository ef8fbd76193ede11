"""Hypothesis fuzzing of the ``POST /streams`` body parsers (:mod:`linkstream.api.bodies`)
and the JSON nesting scanner: whatever the bytes, the only exception is the documented one."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linkstream.api.bodies import MAX_JSON_DEPTH, MEDIA_TYPES, BodyError, parse_body
from linkstream.api.limits import JsonDepthScanner, JsonTooDeep
from linkstream.rdf.streams import PROV_GENERATED_AT

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CONTENT_TYPES = st.sampled_from([*MEDIA_TYPES, None, "", "image/png", "text/turtle; charset=utf-8", "x/y;;"])

# pieces of N-Triples / N-Quads / Turtle, recombined
_TERMS = [
    "<http://ex.org/a>",
    "<http://ex.org/p>",
    "<rel>",
    "<http://ex.org/a b>",
    "_:b0",
    '"lit"',
    '"x"@en',
    '"1"^^<http://www.w3.org/2001/XMLSchema#integer>',
    '"2024-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime>',
    "<" + PROV_GENERATED_AT + ">",
    '"\\u00e9\\n"',
    '"unterminated',
    "@prefix ex: <http://ex.org/> .",
    "ex:a",
    "[",
    "]",
    "(",
    ")",
    ";",
    ",",
    ".",
    "#",
    "\r",
    "\n",
    "\\",
    '"""',
    "\x00",
    "\ud800",
]
RDFISH = st.lists(st.sampled_from(_TERMS), max_size=40).map(" ".join)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda kids: (
        st.lists(kids, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["@id", "@context", "@type", "@graph", "@value", "@list", "@import", "http://ex.org/p", "x"]
            ),
            kids,
            max_size=4,
        )
    ),
    max_leaves=30,
)


def _parse(data: bytes, ctype: str | None) -> None:
    try:
        parse_body(data, ctype, bnode_prefix="f_", base="http://localhost/")
    except BodyError as e:
        assert e.status in (400, 415, 422) and e.message


@FUZZ
@given(data=st.binary(max_size=2000), ctype=CONTENT_TYPES)
def test_random_bytes(data: bytes, ctype: str | None) -> None:
    _parse(data, ctype)


@FUZZ
@given(text=RDFISH, ctype=st.sampled_from(["application/n-triples", "application/n-quads", "text/turtle"]))
def test_rdf_like_text(text: str, ctype: str) -> None:
    _parse(text.encode("utf-8", "surrogatepass"), ctype)


@FUZZ
@given(doc=JSON_VALUES)
def test_json_ld_documents(doc: object) -> None:
    _parse(json.dumps(doc).encode(), "application/ld+json")


@settings(max_examples=50, deadline=None)
@given(
    depth=st.integers(min_value=MAX_JSON_DEPTH + 1, max_value=200_000),
    opener=st.sampled_from(["[", '{"a":', '{"@graph":']),
)
def test_deep_json_ld_is_422(depth: int, opener: str) -> None:
    data = (opener * depth).encode()
    try:
        parse_body(data, "application/ld+json", bnode_prefix="f_", base="http://localhost/")
    except BodyError as e:
        assert e.status == 422 and "nested deeper" in e.message
    else:
        raise AssertionError("a deep document was accepted")


@FUZZ
@given(doc=JSON_VALUES, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=5))
def test_depth_scanner_agrees_with_json(doc: object, cuts: list[int]) -> None:
    """Fed in any chunks, the scanner measures the same nesting as the document has."""
    data = json.dumps(doc).encode()

    def depth(x: object) -> int:
        if isinstance(x, list):
            return 1 + max((depth(v) for v in x), default=0)
        if isinstance(x, dict):
            return 1 + max((depth(v) for v in x.values()), default=0)
        return 0

    want = depth(doc)
    for limit in (want, max(0, want - 1)):
        scanner = JsonDepthScanner(limit)
        bounds = sorted({0, len(data), *(min(c, len(data)) for c in cuts)})
        try:
            for a, b in zip(bounds, bounds[1:], strict=False):
                scanner.feed(data[a:b])
        except JsonTooDeep:
            assert limit < want
        else:
            assert limit >= want
