"""``SELECT *`` lists its variables in the order they first appear in the query text, in
every process: rdflib lists them from a set, whose order followed the string-hash seed,
so a query's result columns (and the key order of its JSON bindings) changed between
runs of the same query."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from linkstream.query.continuous import parse_continuous

PROGRAM = """
import json, sys
from linkstream.query.continuous import parse_continuous
out = []
for text in json.loads(sys.argv[1]):
    out.append([str(v) for v in parse_continuous(text, default_name="q").algebra.algebra.PV])
print(json.dumps(out))
"""

QUERIES = [
    "PREFIX : <http://e/> SELECT * WHERE { STREAM :s [RANGE 1s] { ?zeta :p ?alpha . ?alpha :q ?mid } }",
    "PREFIX : <http://e/> SELECT DISTINCT * WHERE { STREAM :s [RANGE 1s] { ?b :p ?a . ?c :q ?a } } LIMIT 5",
    "PREFIX : <http://e/> SELECT * WHERE { STREAM :s [RANGE 1s] { ?y :p ?x } BIND(1 AS ?w) }",
]
EXPECTED = [["zeta", "alpha", "mid"], ["b", "a", "c"], ["y", "x", "w"]]


def test_select_star_is_in_text_order():
    for text, want in zip(QUERIES, EXPECTED):
        assert [str(v) for v in parse_continuous(text, default_name="q").algebra.algebra.PV] == want


@pytest.mark.parametrize("seed", ["1", "2", "3", "4"])
def test_select_star_order_does_not_follow_the_hash_seed(seed):
    p = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(QUERIES)],
        capture_output=True,
        text=True,
        env={"PYTHONHASHSEED": seed, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    assert json.loads(p.stdout) == EXPECTED


def test_an_explicit_projection_keeps_its_order():
    text = "PREFIX : <http://e/> SELECT ?b (?b AS ?a) ?c WHERE { STREAM :s [RANGE 1s] { ?c :p ?b } }"
    assert [str(v) for v in parse_continuous(text, default_name="q").algebra.algebra.PV] == ["b", "a", "c"]
