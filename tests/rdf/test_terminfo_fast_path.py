"""TermInfo reads a typed literal's lexical form and datatype without the term grammar
when the rendering has no escape: its arrays equal those of the per-term parse."""

from __future__ import annotations

import numpy as np
import pytest

from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.terminfo import TermInfo, numeric_code
from linkstream.rdf.terms import (
    INTEGER_TYPES,
    KIND_BNODE,
    KIND_IRI,
    KIND_LITERAL,
    XSD_BOOLEAN,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    XSD_STRING,
    Literal,
    parse_term,
)

LEXES = [
    "1",
    " 2 ",
    "-3.5",
    "4e2",
    "INF",
    "-INF",
    "NaN",
    "nan",
    "x",
    "",
    "true",
    "false",
    "0",
    "1.0",
    'abc\\"^^<x>',
    "tab\\t1",
    "12\\u0031",
    "1e400",
    "+7",
]
TYPES = sorted(INTEGER_TYPES) + [
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    XSD_BOOLEAN,
    XSD_STRING,
    "http://example.org/dt",
]


def _corpus() -> list[str]:
    terms = ["<http://example.org/a>", "_:b1", '"plain"', '"tagged"@en', '"a>"', '"x"@en-GB']
    terms += [f'"{lex}"^^<{dt}>' for lex in LEXES for dt in TYPES]
    return terms


def test_arrays_equal_the_parsed_terms() -> None:
    d = MemoryDictionary()
    terms = _corpus()
    ids = d.encode_many(terms)
    info = TermInfo(d)
    info.ensure(ids)
    for i, s in zip(ids.tolist(), terms):
        t = parse_term(s)
        kind = KIND_IRI if s[0] == "<" else KIND_BNODE if s[0] == "_" else KIND_LITERAL
        code, v = numeric_code(t)
        assert info.kind[i] == kind, s
        assert (info.num_type[i], info.num_val[i]) == (code, v) or (
            np.isnan(v) and np.isnan(info.num_val[i])
        ), s
        b = -1
        if isinstance(t, Literal) and t.datatype == XSD_BOOLEAN:
            b = 1 if t.lex in ("true", "1") else 0 if t.lex in ("false", "0") else -1
        assert info.bool_val[i] == b, s
    assert info.num_type[ids].any() and (info.bool_val[ids] >= 0).any()


def test_bulk_decode_equals_one_by_one_and_names_a_bad_id() -> None:
    d = MemoryDictionary()
    ids = d.encode_many(_corpus())
    assert d.decode_many(ids[::-1]) == [d.decode(int(i)) for i in ids[::-1]]
    first = d.reserve(2)  # reserved, not published: KeyError names it
    with pytest.raises(KeyError) as e:
        d.decode_many([int(ids[0]), first + 1])
    assert e.value.args == (first + 1,)
    for bad in (0, -1, len(_corpus()) + 10):
        with pytest.raises(KeyError):
            d.decode_many([int(ids[0]), bad])
