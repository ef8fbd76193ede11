"""Graph exploration of basic graph patterns and the query dictionary of one-shot SPARQL."""

from __future__ import annotations

import re

import numpy as np
import pytest

from linkstream.engine.oneshot.explore import ExploreOperator, SnapshotGraph
from linkstream.engine.oneshot.store import QueryDictionary, run_sparql
from linkstream.operators.base import Operator
from linkstream.operators.values import ConstantOperator
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.static import load_graph
from linkstream.store.memory import MemoryStore
from linkstream.store.persistent import PersistentStore
from tests.shared_paths import shared_or_skip


def _store(kind: str, graphs: dict) -> object:
    d = MemoryDictionary()
    d.encode_many([f"<http://e/{k}>" for k in range(1, 40)])  # ids 1..39 = <http://e/1>..
    if kind == "memory":
        return MemoryStore(d, graphs)
    return PersistentStore(d, graphs, background_compaction=False)


def _rows(op: Operator) -> set[tuple]:
    b = op.delta(1)
    assert (b.counts > 0).all()
    return {tuple(int(x) for x in b.cols[:, i]) + (int(b.counts[i]),) for i in range(len(b))}


def v(name: str) -> tuple[str, object]:
    return ("var", name)


def c(i: int) -> tuple[str, object]:
    return ("const", i)


T = np.array(
    [
        [1, 10, 2],
        [1, 10, 3],
        [2, 10, 3],
        [3, 10, 1],
        [3, 10, 3],
        [1, 11, 20],
        [2, 11, 21],
        [3, 12, 22],
    ],
    dtype=np.int64,
)


@pytest.fixture(params=["memory", "persistent"])
def graph(request) -> SnapshotGraph:
    st = _store(request.param, {None: T, "http://g": np.array([[1, 10, 2], [5, 10, 6]], dtype=np.int64)})
    return SnapshotGraph(st.snapshot(), (None,), "default")  # type: ignore[attr-defined]


def test_path_and_cycle(graph: SnapshotGraph) -> None:
    op = ExploreOperator(graph, [(v("a"), c(10), v("b")), (v("b"), c(10), v("c")), (v("c"), c(10), v("a"))])
    got = {r[:3] for r in _rows(op)}
    brute = {
        (a, b, cc)
        for a, p1, b in T.tolist()
        for b2, p2, cc in T.tolist()
        for c2, p3, a2 in T.tolist()
        if p1 == p2 == p3 == 10 and b2 == b and c2 == cc and a2 == a
    }
    assert got == brute and (3, 3, 3) in got


def test_repeated_variable_and_variable_predicate(graph: SnapshotGraph) -> None:
    assert _rows(ExploreOperator(graph, [(v("x"), c(10), v("x"))])) == {(3, 1)}
    # ?p bound by the first pattern, then used as a predicate from ?o
    op = ExploreOperator(graph, [(c(1), v("p"), v("o")), (v("o"), v("p"), v("z"))])
    assert {r[:3] for r in _rows(op)} == {(10, 2, 3), (10, 3, 1), (10, 3, 3)}


def test_disconnected_patterns_cross(graph: SnapshotGraph) -> None:
    op = ExploreOperator(graph, [(v("s"), c(11), v("o")), (v("t"), c(12), v("u"))])
    assert {r[:4] for r in _rows(op)} == {(1, 20, 3, 22), (2, 21, 3, 22)}


def test_seed_keeps_multiplicities(graph: SnapshotGraph) -> None:
    seed = ConstantOperator(["x"], np.array([[1, 1, 2, 9]], dtype=np.int64))
    op = ExploreOperator(graph, [(v("x"), c(11), v("o"))], seed=seed)
    assert _rows(op) == {(1, 20, 2), (2, 21, 1)}


def test_merged_graphs_are_a_set(graph: SnapshotGraph) -> None:
    merged = SnapshotGraph(graph.snap, (None, "http://g"), "merge")
    op = ExploreOperator(merged, [(v("s"), c(10), v("o"))])
    rows = _rows(op)
    assert (1, 2, 1) in rows and (5, 6, 1) in rows  # (1 10 2) is in both graphs: once
    assert len(rows) == 6
    r, p, n = merged.neighbours(np.array([1, 5, 1], dtype=np.int64), 10, "out")
    assert r.tolist() == [0, 0, 1, 2, 2] and n.tolist() == [2, 3, 6, 2, 3]


def test_query_dictionary_private_ids() -> None:
    base = MemoryDictionary()
    base.encode_many(["<a>", "<b>"])
    qd = QueryDictionary(base, len(base) + 1)
    ids = qd.encode_many(["<b>", '"new"', "<a>", '"new"'])
    assert ids.tolist() == [2, 3, 1, 3]
    base.encode_many(["<c>"])  # allocated after the snapshot: the query keeps its own id
    assert qd.encode_many(["<c>"]).tolist() == [4]
    assert qd.decode_many([1, 3, 4]) == ["<a>", '"new"', "<c>"]
    assert qd.lookup_many(['"new"', "<zz>"]).tolist() == [3, 0]
    assert len(base) == 3 and len(qd) == 4


def test_computed_values_stay_right_while_the_store_grows() -> None:
    d = MemoryDictionary()
    ids = d.encode_many(["<http://e/s>", "<http://e/p>", '"1"^^<http://www.w3.org/2001/XMLSchema#integer>'])
    st = MemoryStore(d, {None: ids.reshape(1, 3)})
    q = 'SELECT ?x WHERE { <http://e/s> <http://e/p> ?o BIND(CONCAT("v", STR(?o + %d)) AS ?x) }'
    for k in range(5):
        assert run_sparql(st, q % k)["results"]["bindings"] == [
            {"x": {"type": "literal", "value": f"v{k + 1}"}}
        ]
        # the stream adds new terms: ids the previous query used privately now mean these
        new = d.encode_many([f"<http://e/n{k}>", f'"grown {k}"'])
        st.absorb("s", k, np.array([[new[0], ids[1], new[1]]], dtype=np.int64))
        res = run_sparql(st, "SELECT ?o WHERE { ?s <http://e/p> ?o FILTER(isLiteral(?o)) }")
        assert sorted(b["o"]["value"] for b in res["results"]["bindings"]) == ["1"] + [
            f"grown {j}" for j in range(k + 1)
        ]


def test_exploration_reads_little_from_a_constant() -> None:
    shared = shared_or_skip()
    d = MemoryDictionary()
    t = np.concatenate(
        [load_graph(str(f), d) for f in sorted((shared / "citybench" / "static").glob("*.nt"))]
    )
    st = PersistentStore(d, {None: t}, background_compaction=False)
    plans: list[str] = []
    q = """PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
    SELECT ?prop ?foi ?t WHERE {
      <http://www.insight-centre.org/dataset/SampleEventService#AarhusParkingDataKALKVAERKSVEJ> ssn:observes ?prop .
      ?prop ssn:isPropertyOf ?foi ; a ?t }"""
    res = run_sparql(st, q, explain=plans.append)
    assert len(res["results"]["bindings"]) == 1
    explored = [int(x) for x in re.findall(r"explored=(\d+)", plans[0])]
    # a scan-and-join plan reads 2706 + 2706 + 20884 triples; exploration a handful
    assert explored and sum(explored) < 20, plans[0]


def test_fast_term_json_agrees_with_the_full_parser() -> None:
    from linkstream.engine.oneshot.embedded import term_json
    from linkstream.engine.oneshot.store import fast_term_json

    shared = shared_or_skip()
    d = MemoryDictionary()
    for f in sorted((shared / "citybench" / "static").glob("*.nt")):
        load_graph(str(f), d)
    extra = [
        '"a"@en-GB',
        '"x"^^<http://www.w3.org/2001/XMLSchema#string>',
        '"q \\" \\\\ \\n"',
        '"with \\"quote\\""@fr',
        "<http://e/\\u00E9>",
        '""',
        '"1"^^<http://www.w3.org/2001/XMLSchema#integer>',
    ]
    terms = d.decode_many(np.arange(1, len(d) + 1)) + extra
    assert all(fast_term_json(t) == term_json(t) for t in terms)
