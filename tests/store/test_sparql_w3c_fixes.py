"""One-shot SPARQL cases the W3C query-evaluation tests found (issue 19), over a store."""

from __future__ import annotations

import pytest

from linkstream.engine.oneshot.store import run_sparql
from linkstream.store.loader import load_store
from linkstream.store.persistent import PersistentStore

EX = "http://example.org/"
DATA = "".join(
    f'<{EX}s{k}> <{EX}v> "{v}"^^<http://www.w3.org/2001/XMLSchema#integer> .\n'
    for k, v in enumerate([5, 2, 9, 1])
)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    d = tmp_path_factory.mktemp("w3cfix")
    (d / "data.nt").write_text(DATA)
    load_store(d / "store", [d / "data.nt"])
    st = PersistentStore.open(d / "store", background_compaction=False)
    yield st
    st.close()


def _values(res: dict, var: str) -> list[str]:
    return [b[var]["value"] for b in res["results"]["bindings"] if var in b]


def test_order_by_with_offset_zero_is_sorted(store) -> None:
    q = f"SELECT ?v WHERE {{ ?s <{EX}v> ?v }} ORDER BY ?v OFFSET 0"
    assert _values(run_sparql(store, q), "v") == ["1", "2", "5", "9"]
    q = f"SELECT ?v WHERE {{ ?s <{EX}v> ?v }} ORDER BY DESC(?v) OFFSET 1"
    assert _values(run_sparql(store, q), "v") == ["5", "2", "1"]


def test_graph_not_in_the_dataset_has_no_solution(store) -> None:
    assert run_sparql(store, f"SELECT * {{ GRAPH <{EX}nowhere> {{}} }}")["results"]["bindings"] == []
    assert run_sparql(store, f"ASK {{ GRAPH <{EX}nowhere> {{ BIND(1 AS ?x) }} }}")["boolean"] is False
    assert run_sparql(store, "SELECT * { {} }")["results"]["bindings"] == [{}]


def test_empty_argument_lists(store) -> None:
    assert run_sparql(store, "ASK { FILTER(2 NOT IN ()) }")["boolean"] is True
    assert run_sparql(store, "ASK { FILTER(2 IN ()) }")["boolean"] is False
    res = run_sparql(store, "SELECT (CONCAT() AS ?c) (COALESCE() AS ?d) WHERE {}")
    assert res["results"]["bindings"] == [{"c": {"type": "literal", "value": ""}}]


def test_exists_inside_an_expression_and_inside_minus(store) -> None:
    q = f"SELECT ?s {{ ?s <{EX}v> ?v FILTER(?v > 8 || NOT EXISTS {{ ?s <{EX}v> 2 }}) }} ORDER BY ?s"
    assert _values(run_sparql(store, q), "s") == [EX + "s0", EX + "s2", EX + "s3"]
    q = (
        f"SELECT ?s {{ ?s <{EX}v> ?v MINUS {{ ?s <{EX}v> ?w FILTER(?w < 3 && EXISTS {{ ?s <{EX}v> ?w }}) }} }}"
        " ORDER BY ?s"
    )
    assert _values(run_sparql(store, q), "s") == [EX + "s0", EX + "s2"]


def test_iri_resolves_against_the_base(store) -> None:
    q = 'BASE <http://example.org/d/>\nSELECT (IRI("x") AS ?a) (URI("../y") AS ?b) (IRI("http://z/") AS ?c) {}'
    (row,) = run_sparql(store, q)["results"]["bindings"]
    assert {k: v["value"] for k, v in row.items()} == {
        "a": "http://example.org/d/x",
        "b": "http://example.org/y",
        "c": "http://z/",
    }
    (row,) = run_sparql(store, 'SELECT (IRI("x") AS ?a) {}', base="http://example.org/q/")["results"][
        "bindings"
    ]
    assert row["a"]["value"] == "http://example.org/q/x"


def test_decimal_sums_are_exact_to_15_digits(store) -> None:
    res = run_sparql(store, "SELECT (SUM(?d) AS ?s) { VALUES ?d { 1.1 2.2 3.3 4.5 } }")
    assert res["results"]["bindings"][0]["s"]["value"] == "11.1"


def test_dates_with_and_without_timezone_are_not_comparable_for_equality(store) -> None:
    q = (
        'SELECT ?d { VALUES ?d { "2006-08-23"^^xsd:date "2006-08-23Z"^^xsd:date "2001-01-01Z"^^xsd:date }'
        ' FILTER(?d != "2006-08-23"^^xsd:date) }'
    )
    q = "PREFIX xsd: <http://www.w3.org/2001/XMLSchema#>\n" + q
    assert _values(run_sparql(store, q), "d") == ["2001-01-01Z"]


def test_values_with_undef_graph_variable_inside_graph(tmp_path) -> None:
    (tmp_path / "d.nq").write_text(
        f"<{EX}a> <{EX}p> <{EX}b> <{EX}g1> .\n<{EX}a> <{EX}p> <{EX}c> <{EX}g2> .\n", encoding="utf-8"
    )
    load_store(tmp_path / "st", [tmp_path / "d.nq"])
    st = PersistentStore.open(tmp_path / "st", background_compaction=False)
    try:
        q = f'SELECT ?g ?t {{ GRAPH ?g {{ VALUES (?g ?t) {{ (UNDEF "foo") (<{EX}g1> "bar") }} }} }}'
        got = sorted((b["g"]["value"], b["t"]["value"]) for b in run_sparql(st, q)["results"]["bindings"])
        assert got == [(EX + "g1", "bar"), (EX + "g1", "foo"), (EX + "g2", "foo")]
    finally:
        st.close()


def test_bnode_of_a_string_is_one_blank_node_per_solution(store) -> None:
    q = 'SELECT ?x ?y (BNODE(?x) AS ?b1) (BNODE(?y) AS ?b2) { VALUES ?x { "a" "b" } VALUES ?y { "a" "b" } }'
    rows = run_sparql(store, q)["results"]["bindings"]
    assert len(rows) == 4
    labels = set()
    for r in rows:
        assert r["b1"]["type"] == r["b2"]["type"] == "bnode"
        # one solution: equal strings give the same blank node, different ones different nodes
        assert (r["b1"]["value"] == r["b2"]["value"]) == (r["x"]["value"] == r["y"]["value"])
        labels |= {r["b1"]["value"], r["b2"]["value"]}
    assert len(labels) == 6  # no blank node shared between solutions
    assert "_bnode_solution" not in run_sparql(store, q)["head"]["vars"]


def test_iri_base_in_static_one_shot_and_continuous_queries() -> None:
    from linkstream.engine.embedded import Engine
    from linkstream.engine.oneshot.embedded import evaluate_one_shot, parse_one_shot
    from linkstream.query.continuous import parse_continuous
    from linkstream.query.expressions import Call, Const, compile_expr
    from linkstream.query.functions.scalar import call
    from linkstream.rdf.terms import IRI

    q = 'BASE <http://example.org/d/>\nSELECT (IRI("x") AS ?a) {}'
    (row,) = evaluate_one_shot(Engine(), parse_one_shot(q, "http://localhost/"))["results"]["bindings"]
    assert row["a"]["value"] == "http://example.org/d/x"
    # a continuous query's IRI() call gets the base too
    cq = parse_continuous(
        "BASE <http://example.org/c/>\nREGISTER QUERY q AS SELECT ?i FROM STREAM <http://s> [RANGE 1s STEP 1s]"
        ' WHERE { ?s ?p ?o BIND(IRI("y") AS ?i) }'
    )
    found = []

    def walk(x: object) -> None:
        if isinstance(x, dict):
            if getattr(x, "name", None) == "Builtin_IRI":
                found.append(compile_expr(x, lambda t: 1))
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(cq.algebra.algebra)
    (e,) = found
    assert isinstance(e, Call) and all(isinstance(a, Const) for a in e.args)
    assert call("IRI", [a.term for a in e.args]) == IRI("http://example.org/c/y")
