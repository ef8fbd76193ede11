"""LIMIT stops graph exploration early, and the rows it gives are still right.

``SELECT ... WHERE { BGP } LIMIT k`` without ORDER BY / DISTINCT / aggregates may return
any k solutions: each must be a solution (a sub-multiset of the full result), there must
be ``min(k, total)`` of them (pyoxigraph's count), and the candidate triples the
exploration looked at (``ExploreOperator.explored``, shown by ``explain``) must follow k,
not the size of the data.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import numpy as np
import pyoxigraph as ox
import pytest

from linkstream.engine.oneshot.store import run_sparql
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.static import load_graph
from linkstream.store.memory import MemoryStore
from linkstream.store.persistent import PersistentStore
from tests.shared_paths import shared_or_skip
from tests.store.test_sparql_oneshot import P, _load_ox

KINDS = {
    "memory": lambda d, graphs: MemoryStore(d, graphs),
    "persistent": lambda d, graphs: PersistentStore(d, graphs, background_compaction=False),
}


@pytest.fixture(scope="module", params=sorted(KINDS))
def citybench(request) -> tuple[Any, ox.Store]:
    shared = shared_or_skip()
    files = sorted((shared / "citybench" / "static").glob("*.nt"))
    d = MemoryDictionary()
    ref = ox.Store()
    arrays = []
    for f in files:
        arrays.append(load_graph(str(f), d))
        _load_ox(ref, f, None)
    return KINDS[request.param](d, {None: np.concatenate(arrays)}), ref


def _run(store: Any, q: str) -> tuple[dict[str, Any], list[int]]:
    """The result and the ``explored`` figure of every exploration in the plan."""
    plans: list[str] = []
    res = run_sparql(store, P + q, explain=plans.append)
    return res, [int(x) for x in re.findall(r"explored=(\d+)", plans[0])]


def _rows(res: dict[str, Any]) -> Counter:
    return Counter(tuple(sorted((k, v["value"]) for k, v in b.items())) for b in res["results"]["bindings"])


#: (id, body, limit, offset)
CASES = [
    ("star", "SELECT ?n ?lat ?lon WHERE { ?n a ct:Node ; ct:hasLatitude ?lat ; ct:hasLongitude ?lon }", 5, 0),
    ("path", "SELECT ?svc ?prop ?foi WHERE { ?svc ssn:observes ?prop . ?prop ssn:isPropertyOf ?foi }", 7, 0),
    ("filter", "SELECT ?n ?lat WHERE { ?n ct:hasLatitude ?lat FILTER(?lat > 56.15) }", 10, 0),
    ("offset", "SELECT ?n WHERE { ?n a ct:Node ; ct:hasNodeName ?name }", 4, 6),
    ("all-var", "SELECT ?s ?p ?o WHERE { ?s ?p ?o }", 3, 0),
    ("var-predicate", "SELECT ?x ?p WHERE { ?x a ct:Node ; ?p ?y }", 20, 0),
    ("more-than-exist", 'SELECT ?x WHERE { ?x ct:hasNodeName "Risskov" }', 50, 0),
    ("bind", "SELECT ?n ?d WHERE { ?n ct:hasLatitude ?lat BIND(?lat * 2 AS ?d) }", 9, 0),
]


@pytest.mark.parametrize("qid,body,limit,offset", CASES, ids=[c[0] for c in CASES])
def test_limit_gives_a_valid_subset_and_explores_little(
    citybench, qid: str, body: str, limit: int, offset: int
) -> None:
    store, ref = citybench
    full, full_work = _run(store, body)
    q = body + (f" OFFSET {offset}" if offset else "") + f" LIMIT {limit}"
    part, work = _run(store, q)
    n_ref = len(list(ref.query(P + q)))
    got, everything = _rows(part), _rows(full)
    assert sum(got.values()) == n_ref == max(0, min(limit, sum(everything.values()) - offset))
    assert not got - everything, "a LIMITed row that is not a solution"
    assert part["head"]["vars"] == full["head"]["vars"]
    # bounded work: a few chunks of at most 4 * max(64, 2k) candidates per pattern
    n_patterns = body.count(";") + body.count(" . ") + 1
    bound = 4 * max(64, 2 * (limit + offset)) * 4 * n_patterns
    assert sum(work) <= bound, (work, bound)
    if sum(full_work) > 10 * bound:
        assert sum(work) * 10 < sum(full_work)


def test_ask_stops_at_the_first_solution(citybench) -> None:
    store, ref = citybench
    q = "ASK { ?s ?p ?o . ?o ?q ?r }"
    plans: list[str] = []
    res = run_sparql(store, P + q, explain=plans.append)
    assert res["boolean"] is bool(ref.query(P + q)) is True
    assert "limit=1" in plans[0]
    assert int(re.search(r"explored=(\d+)", plans[0]).group(1)) <= 4 * 128 * 2  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "body",
    [
        "SELECT ?n WHERE { ?n a ct:Node ; ct:hasLatitude ?lat } ORDER BY ?lat LIMIT 3",
        "SELECT DISTINCT ?t WHERE { ?n a ?t } LIMIT 3",
        "SELECT ?t (COUNT(*) AS ?c) WHERE { ?n a ?t } GROUP BY ?t LIMIT 3",
        "SELECT ?n ?f WHERE { ?n a ct:Node OPTIONAL { ?n ct:hasNodeName ?f } } LIMIT 3",
        "SELECT ?n WHERE { ?n a ct:Node FILTER NOT EXISTS { ?n ct:hasNodeName ?x } } LIMIT 3",
    ],
)
def test_limit_is_not_pushed_where_all_rows_are_needed(citybench, body: str) -> None:
    store, ref = citybench
    plans: list[str] = []
    res = run_sparql(store, P + body, explain=plans.append)
    assert all("limit=" not in line for line in plans[0].splitlines() if "Explore" in line)
    assert len(res["results"]["bindings"]) == len(list(ref.query(P + body)))
