"""The parse cache: queries that differ only in what the dialect pass blanks (REGISTER
name, windows, stream IRIs) share one rdflib algebra; errors are never cached."""

from __future__ import annotations

import re

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


# --------------------------------------------------------------------------- shape templates

PFX = "PREFIX ex: <http://ex.org/>\nPREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n"
STREAM = "REGISTER RSTREAM <q> AS\n"
WIN = "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT{r}S STEP PT1S]\n"
#: Query shapes with constants ``{a}`` (an IRI or prefixed name) and ``{n}`` (a number) in
#: every place the grammar allows them, and where a template must not stand for them.
SHAPES = [
    "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p {a} . ?s ex:q ?v FILTER(?v > {n}) }} }}",
    "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p ?o }} OPTIONAL {{ ?o ex:r {a} }} }}",
    "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p ?o }} VALUES ?o {{ {a} ex:zz {n} }} }}",
    "SELECT ?s (?v * {n} AS ?w) " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p ?v ; ex:q {a} }} }}",
    "SELECT ?s (COUNT(*) AS ?c) "
    + WIN
    + "WHERE {{ WINDOW ex:w {{ ?s ex:p ?v }} }} GROUP BY ?s HAVING (SUM(?v) > {n}) ORDER BY ?c LIMIT 3",
    "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p/ex:q {a} . ?s ex:q ?v FILTER(?v < -{n}) }} }}",
    "SELECT ?s " + WIN + 'WHERE {{ WINDOW ex:w {{ ?s ex:p "{n}"^^xsd:integer . ?s ex:p {a} }} }}',
    "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p ?v BIND(xsd:double(?v) + {n} AS ?d) }} }}",
    "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p ?v }} FILTER NOT EXISTS {{ ?s ex:q {a} }} }}",
    "CONSTRUCT {{ ?s ex:t {a} . ?s ex:n {n} }} " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p {a} }} }}",
    "ASK "
    + WIN
    + "WHERE {{ WINDOW ex:w {{ ?s ex:p {a}, ex:b, {n} }} {{ SELECT ?s WHERE {{ ?s ex:k {n} }} }} }}",
    "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s {a} ?o . ?o {a} {a} }} MINUS {{ ?s ex:q {n} }} }}",
]
CONSTANTS = [
    ("ex:a", "1"),
    ("<http://ex.org/b>", "2.5"),
    ("ex:b", "1e3"),
    ("<http://ex.org/a>", "10"),
    ("ex:a.b-c", "0.50"),
    ("ex:", "7"),
]


def _canon(x):
    from rdflib.plugins.sparql.parserutils import CompValue

    if isinstance(x, CompValue):
        attrs = sorted((k, _canon(v)) for k, v in vars(x).items() if k not in ("name", "_evalfn"))
        return (type(x).__name__, x.name, tuple((k, _canon(v)) for k, v in dict.items(x)), tuple(attrs))
    if isinstance(x, dict):
        return tuple(sorted(((repr(k), _canon(v)) for k, v in x.items()), key=repr))
    if isinstance(x, (set, frozenset)):
        return ("set", tuple(sorted((_canon(v) for v in x), key=repr)))
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_canon(v) for v in x))
    return (type(x).__name__, repr(x))


def _parse_all(texts, monkeypatch, templates: bool):
    C._ALGEBRA_CACHE.clear()
    C._TEMPLATES.clear()
    with monkeypatch.context() as m:
        if not templates:
            m.setattr(C, "_from_template", lambda *a: (None, True))
        out = []
        for t in texts:
            try:
                out.append(_canon(parse_continuous(t).algebra.algebra))
            except QueryError as e:
                out.append(str(e))
    return out


def test_templates_give_the_algebra_of_the_text(monkeypatch):
    texts = [PFX + STREAM + s.format(a=a, n=n, r=r) for s in SHAPES for a, n in CONSTANTS for r in (3, 4)]
    with_templates = _parse_all(texts, monkeypatch, True)
    used = sum(t is not None for t in C._TEMPLATES.values())
    assert with_templates == _parse_all(texts, monkeypatch, False)
    assert all(not isinstance(x, str) for x in with_templates)  # all parse
    assert used >= len(SHAPES) // 2  # and most shapes were instantiated, not parsed per text


def test_templates_keep_equal_constants_equal(monkeypatch):
    shape = PFX + STREAM + "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p {a} . ?s ex:p {b} }} }}"
    texts = [
        shape.format(a=a, b=b, r=3)
        for a, b in [("ex:a", "ex:b"), ("ex:a", "<http://ex.org/a>"), ("ex:b", "ex:b")]
    ]
    assert _parse_all(texts, monkeypatch, True) == _parse_all(texts, monkeypatch, False)


def test_errors_of_template_shapes_are_the_texts_own(monkeypatch):
    bad = [
        PFX
        + STREAM
        + "SELECT ?s "
        + WIN.format(r=3)
        + "WHERE { WINDOW ex:w { ?s ex:p <http://ex.org/a b> } }",
        PFX + STREAM + "SELECT ?s " + WIN.format(r=3) + "WHERE { WINDOW ex:w { ?s ex:p 1 FILTER(?s > ) } }",
        PFX + STREAM + "SELECT ?s " + WIN.format(r=3) + "WHERE { WINDOW ex:w { ?s ex:p ex:a } } LIMIT 1.5",
        PFX + STREAM + "SELECT ?x " + WIN.format(r=3) + "WHERE { WINDOW ex:w { ?s ex:p 2 } } GROUP BY ?s",
    ]
    good = PFX + STREAM + "SELECT ?s " + WIN.format(r=3) + "WHERE { WINDOW ex:w { ?s ex:p 3 } }"
    got = _parse_all([good, *bad], monkeypatch, True)
    assert got == _parse_all([good, *bad], monkeypatch, False)
    assert not isinstance(got[0], str)
    assert all(re.match(r"[45]:\d+: ", e) for e in got[1:])  # errors located, as before


def _iri_calls(node):
    from rdflib.plugins.sparql.parserutils import CompValue

    out, stack = [], [node]
    while stack:
        x = stack.pop()
        if isinstance(x, CompValue):
            if x.name in ("Builtin_IRI", "Builtin_URI"):
                out.append(x)
            stack.extend(x.values())
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
    return out


def test_template_instances_get_the_base_of_their_iri_calls():
    # a template knows whether its shape calls IRI(): instances of a shape that does get
    # the base bound, as a parse of their own text does; the others skip the walk
    from rdflib.term import URIRef

    C._ALGEBRA_CACHE.clear()
    C._TEMPLATES.clear()
    shape = (
        PFX
        + STREAM
        + "SELECT ?s ?i "
        + WIN
        + 'WHERE {{ WINDOW ex:w {{ ?s ex:p {a} }} BIND(IRI("rel") AS ?i) }}'
    )
    for a in ("ex:a", "ex:b", "<http://ex.org/c>"):
        cq = parse_continuous(shape.format(a=a, r=3), base="http://base.example/")
        calls = _iri_calls(cq.algebra.algebra)
        assert calls and all(c["base"] == URIRef("http://base.example/") for c in calls)
    plain = PFX + STREAM + "SELECT ?s " + WIN + "WHERE {{ WINDOW ex:w {{ ?s ex:p {a} }} }}"
    for a in ("ex:a", "ex:b"):
        parse_continuous(plain.format(a=a, r=3), base="http://base.example/")
    flags = sorted(t.iri_calls for t in C._TEMPLATES.values() if t is not None)
    assert flags == [False, True]
