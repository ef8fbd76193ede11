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
