"""The parse cache: queries that differ only in what the dialect pass blanks (REGISTER
name, windows, stream IRIs) share one rdflib algebra; errors are never cached."""

from __future__ import annotations

import pytest

from linkstream.query import continuous as C
from linkstream.query.continuous import parse_continuous
from linkstream.query.errors import QueryError

TEMPLATE = """PREFIX ex: <http://ex.org/>
REGISTER QUERY {name} AS
SELECT ?s ?o FROM STREAM ex:{stream} [RANGE {rng}s STEP 1s]
WHERE {{ ?s ex:p ?o FILTER(?o > {const}) }}"""


def test_same_parser_text_reuses_the_algebra():
    a = parse_continuous(TEMPLATE.format(name="a", stream="s1", rng=3, const=1))
    b = parse_continuous(TEMPLATE.format(name="b", stream="s2", rng=5, const=1))
    c = parse_continuous(TEMPLATE.format(name="c", stream="s1", rng=3, const=2))
    assert a.algebra is b.algebra  # only blanked clauses differ
    assert a.algebra is not c.algebra  # the constant is part of the SPARQL text
    assert (a.name, b.name) == ("a", "b")
    assert a.windows[0].stream != b.windows[0].stream
    assert a.windows[0].spec != b.windows[0].spec
    # uncached, the same text gives an equal algebra
    C._ALGEBRA_CACHE.clear()
    fresh = parse_continuous(TEMPLATE.format(name="a", stream="s1", rng=3, const=1))
    assert fresh.algebra is not a.algebra
    assert str(fresh.algebra.algebra) == str(a.algebra.algebra)


def test_errors_are_located_every_time_and_not_cached():
    bad = TEMPLATE.format(name="a", stream="s1", rng=3, const="") + "\n"
    for _ in range(2):
        with pytest.raises(QueryError) as e:
            parse_continuous(bad)
        assert e.value.line == 4
    assert not any("> )" in k[0] for k in C._ALGEBRA_CACHE)


def test_cache_is_bounded(monkeypatch):
    monkeypatch.setattr(C, "ALGEBRA_CACHE_SIZE", 2)
    C._ALGEBRA_CACHE.clear()
    for k in range(5):
        parse_continuous(TEMPLATE.format(name="a", stream="s1", rng=3, const=k))
    assert 1 <= len(C._ALGEBRA_CACHE) <= 2
