"""Hand-written queries covering every operator and window form, LinkStream vs the oracle.

A deterministic synthetic stream pair (integers, doubles, strings, language-tagged
literals, blank nodes, repeated triples across elements) plus a static graph; each query
is replayed by LinkStream and by ``shared/tools/oracle.py`` and the results compared
with ``shared/tools/compare_results.py``.
"""

from __future__ import annotations

import random

import pytest

from linkstream.cli import main as cli_main
from tests.shared_paths import load_tool, shared_or_skip

EX = "http://example.org/"
XSD = "http://www.w3.org/2001/XMLSchema#"
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"
T0 = 1_700_000_000_000


def _ts(ms: int) -> str:
    import datetime as dt

    d = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (ms % 1000)


def make_stream(path, name: str, seed: int, n: int = 45) -> None:
    rnd = random.Random(seed)
    lines = []
    t = T0 + rnd.randint(0, 400)
    for k in range(n):
        g = f"<{EX}{name}/el{k}>"
        lines.append(f'{g} {PROV} "{_ts(t)}"^^<{XSD}dateTime> .')
        for j in range(rnd.randint(0, 3)):
            ob = f"<{EX}{name}/ob{k}_{j}>"
            sensor = f"<{EX}sensor{rnd.randint(1, 4)}>"
            kind = rnd.random()
            if kind < 0.4:
                val = f'"{rnd.randint(-5, 40)}"^^<{XSD}integer>'
            elif kind < 0.7:
                val = f'"{rnd.uniform(0, 30):.3f}"^^<{XSD}double>'
            elif kind < 0.85:
                val = '"%s"' % rnd.choice(["low", "High", "medium", "Lów"])
            else:
                val = '"%s"@%s' % (rnd.choice(["rain", "sun"]), rnd.choice(["en", "EN-gb", "da"]))
            lines.append(f"{ob} <{EX}observedBy> {sensor} {g} .")
            lines.append(f"{ob} <{EX}value> {val} {g} .")
            if rnd.random() < 0.3:
                lines.append(f"{ob} <{EX}quality> _:q{j} {g} .")
                lines.append(f'_:q{j} <{EX}score> "{rnd.randint(1, 3)}"^^<{XSD}integer> {g} .')
        if rnd.random() < 0.3:  # a triple repeated in several elements (set semantics)
            lines.append(f"<{EX}{name}> <{EX}status> <{EX}online> {g} .")
        t += rnd.choice([0, 150, 300, 450, 700, 1300])
    path.write_text("\n".join(lines) + "\n")


STATIC = f"""
<{EX}sensor1> <{EX}locatedIn> <{EX}north> .
<{EX}sensor2> <{EX}locatedIn> <{EX}south> .
<{EX}sensor3> <{EX}locatedIn> <{EX}north> .
<{EX}sensor1> <{EX}label> "Sensor one"@en .
<{EX}sensor2> <{EX}label> "Sensor two" .
<{EX}north> <{EX}threshold> "10"^^<{XSD}integer> .
<{EX}south> <{EX}threshold> "20.5"^^<{XSD}decimal> .
"""

NAMED = f"""
<{EX}sensor4> <{EX}locatedIn> <{EX}east> .
<{EX}sensor1> <{EX}owner> <{EX}city> .
"""

P = f"PREFIX ex: <{EX}>\nPREFIX xsd: <{XSD}>\n"
S1, S2 = f"<{EX}s1>", f"<{EX}s2>"

QUERIES = {
    # ---- window forms
    "cqels_range_slide": P
    + f"SELECT ?ob ?v WHERE {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:value ?v }} }}",
    "cqels_range_default_step": P
    + f"SELECT ?ob WHERE {{ STREAM {S1} [RANGE 1500ms] {{ ?ob ex:observedBy ?s }} }}",
    "cqels_now": P + f"SELECT ?ob ?s WHERE {{ STREAM {S1} [NOW] {{ ?ob ex:observedBy ?s }} }}",
    "cqels_triples": P + f"SELECT ?x ?p ?y WHERE {{ STREAM {S2} [TRIPLES 5] {{ ?x ?p ?y }} }}",
    "csparql_tumbling": P + f"SELECT ?ob ?v FROM STREAM {S1} [RANGE 2s TUMBLING] WHERE {{ ?ob ex:value ?v }}",
    "csparql_range_triples": P
    + f"SELECT ?x ?y FROM STREAM {S2} [RANGE TRIPLES 4] WHERE {{ ?x ex:value ?y }}",
    "csparql_merge_static": P
    + f"""REGISTER QUERY merged AS SELECT ?ob ?s ?area
        FROM STREAM {S1} [RANGE 3s STEP 1s] FROM STREAM {S2} [RANGE 2s STEP 500ms] FROM <{EX}g/static>
        WHERE {{ ?ob ex:observedBy ?s . ?s ex:locatedIn ?area }}""",
    "csparql_repeated_triple": P
    + f"SELECT ?s ?o FROM STREAM {S1} [RANGE 5s STEP 1s] FROM STREAM {S2} [RANGE 5s STEP 1s] WHERE {{ ?s ex:status ?o }}",
    "rspql_istream": P
    + f"""REGISTER ISTREAM <ist> AS SELECT ?ob ?s FROM NAMED WINDOW ex:w ON {S1} [RANGE PT2S STEP PT1S]
        WHERE {{ WINDOW ex:w {{ ?ob ex:observedBy ?s }} }}""",
    "rspql_dstream_iso": P
    + f"""REGISTER DSTREAM <dst> AS SELECT ?ob FROM NAMED WINDOW ex:w ON STREAM {S2} [RANGE PT1.5S STEP PT0.5S]
        WHERE {{ WINDOW ex:w {{ ?ob ex:observedBy ?s }} }}""",
    "rspql_two_windows": P
    + f"""REGISTER RSTREAM <two> AS SELECT ?s ?a ?b
        FROM NAMED WINDOW ex:w1 ON {S1} [RANGE PT3S STEP PT1S] FROM NAMED WINDOW ex:w2 ON {S2} [RANGE PT2S STEP PT2S]
        WHERE {{ WINDOW ex:w1 {{ ?a ex:observedBy ?s }} WINDOW ex:w2 {{ ?b ex:observedBy ?s }} }}""",
    # ---- operators
    "filter_numeric": P
    + f"SELECT ?ob ?v WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:value ?v }} FILTER(?v > 10 && ?v <= 35) }}",
    "filter_string_lang": P
    + f"""SELECT ?ob ?v WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:value ?v }}
        FILTER(isLiteral(?v) && (langMatches(lang(?v), "en") || regex(str(?v), "^h", "i") || contains(str(?v), "ó"))) }}""",
    "filter_errors_or": P
    + f"SELECT ?ob WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:value ?v }} FILTER(?v * 2 > 30 || strlen(?v) = 4) }}",
    "bind_arith_strings": P
    + f"""SELECT ?ob ?d ?u ?c ?i WHERE {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:value ?v ; ex:observedBy ?s }}
        BIND(?v / 4 AS ?d) BIND(UCASE(STR(?v)) AS ?u) BIND(CONCAT(STR(?s), "#", STR(?v)) AS ?c)
        BIND(IF(isNumeric(?v), ABS(?v) + 1, COALESCE(?nope, STRLEN(STR(?v)))) AS ?i) }}""",
    "optional_static": P
    + f"""SELECT ?ob ?s ?label WHERE {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?s }}
        OPTIONAL {{ ?s ex:label ?label }} }}""",
    "optional_filter": P
    + f"""SELECT ?ob ?v ?q WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:value ?v
        OPTIONAL {{ ?ob ex:quality ?b . ?b ex:score ?q FILTER(?q > 1) }} }} }}""",
    "union": P
    + f"""SELECT ?ob ?x WHERE {{ {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?x }} }}
        UNION {{ STREAM {S2} [RANGE 1s SLIDE 1s] {{ ?ob ex:value ?x }} }} }}""",
    "minus": P
    + f"""SELECT ?ob ?s WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:observedBy ?s }}
        MINUS {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:quality ?q }} }} }}""",
    "not_exists": P
    + f"""SELECT ?s WHERE {{ ?s ex:locatedIn ?a
        FILTER NOT EXISTS {{ STREAM {S2} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?s }} }} }}""",
    "exists": P
    + f"""SELECT ?ob ?s WHERE {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?s }}
        FILTER EXISTS {{ ?s ex:locatedIn ex:north }} }}""",
    "values": P
    + f"""SELECT ?ob ?s ?name WHERE {{ VALUES (?s ?name) {{ (ex:sensor1 "one") (ex:sensor3 "three") (ex:sensor9 UNDEF) }}
        STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?s }} }}""",
    "group_count_empty": P
    + f"SELECT (COUNT(*) AS ?n) (COUNT(?v) AS ?m) WHERE {{ STREAM {S2} [RANGE 500ms SLIDE 500ms] {{ ?ob ex:value ?v }} }}",
    "group_aggregates": P
    + f"""SELECT ?s (COUNT(?v) AS ?n) (SUM(?v) AS ?sum) (AVG(?v) AS ?avg) (MIN(?v) AS ?min) (MAX(?v) AS ?max)
        (COUNT(DISTINCT ?v) AS ?dn)
        WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:observedBy ?s ; ex:value ?v }} FILTER(isNumeric(?v)) }}
        GROUP BY ?s HAVING (COUNT(?v) >= 2)""",
    "group_mixed_types": P
    + f"""SELECT ?s (SUM(?v) AS ?sum) (MIN(?v) AS ?min) (SAMPLE(?s) AS ?x)
        WHERE {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?s ; ex:value ?v }} }} GROUP BY ?s""",
    "group_concat_single": P
    + f"""SELECT ?ob (GROUP_CONCAT(STR(?s); SEPARATOR="|") AS ?all)
        WHERE {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?s }} }} GROUP BY ?ob""",
    "distinct": P
    + f"SELECT DISTINCT ?s WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:observedBy ?s }} }}",
    "order_limit": P
    + f"""SELECT ?ob ?v WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:value ?v }} FILTER(isNumeric(?v)) }}
        ORDER BY DESC(?v) ?ob LIMIT 3 OFFSET 1""",
    "subquery_limit": P
    + f"""SELECT ?s ?n WHERE {{ {{ SELECT ?s (COUNT(*) AS ?n) WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:observedBy ?s }} }}
        GROUP BY ?s ORDER BY DESC(?n) ?s LIMIT 2 }} }}""",
    "ask": P + f"ASK WHERE {{ STREAM {S2} [RANGE 1s SLIDE 1s] {{ ?ob ex:observedBy ex:sensor2 }} }}",
    "construct": P
    + f"""CONSTRUCT {{ ?s ex:saw ?ob . ?ob ex:in ?a }} WHERE {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?s }}
        ?s ex:locatedIn ?a }}""",
    "graph_var_named": P
    + f"""SELECT ?g ?s ?a WHERE {{ GRAPH ?g {{ ?s ex:locatedIn ?a }}
        STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:observedBy ?s }} }}""",
    "numeric_compare_static": P
    + f"""SELECT ?ob ?v ?th WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:observedBy ?s ; ex:value ?v }}
        ?s ex:locatedIn ?a . ?a ex:threshold ?th FILTER(?v >= ?th) }}""",
    "bnodes_in_stream": P
    + f"""SELECT ?ob ?score WHERE {{ STREAM {S1} [RANGE 3s SLIDE 1s] {{ ?ob ex:quality [ ex:score ?score ] }} }}""",
    "cast_and_dates": P
    + f"""SELECT ?ob ?i ?d WHERE {{ STREAM {S1} [RANGE 2s SLIDE 1s] {{ ?ob ex:value ?v }}
        BIND(xsd:integer(?v) AS ?i) BIND(xsd:double(STR(?v)) AS ?d) }}""",
}


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("opdata")
    make_stream(d / "s1.nq", "s1", 1)
    make_stream(d / "s2.nq", "s2", 2)
    (d / "static.nt").write_text(STATIC)
    (d / "named.nt").write_text(NAMED)
    return d


def run_pair(data, tmp_path, name: str, text: str):
    shared_or_skip()
    q = tmp_path / f"{name}.rq"
    q.write_text(text)
    common = [
        "--query",
        str(q),
        "--stream",
        f"{EX}s1={data / 's1.nq'}",
        "--stream",
        f"{EX}s2={data / 's2.nq'}",
        "--static",
        str(data / "static.nt"),
        "--static",
        f"{EX}g/static={data / 'static.nt'}",
        "--static",
        f"{EX}g/named={data / 'named.nt'}",
    ]
    oracle = load_tool("oracle")
    want, got = tmp_path / "want.jsonl", tmp_path / "got.jsonl"
    assert oracle.main([*common, "--out", str(want), "--quiet"]) == 0
    assert cli_main(["replay", *common, "--out", str(got), "--quiet"]) == 0
    return want, got


@pytest.mark.conformance
@pytest.mark.parametrize("name", sorted(QUERIES))
def test_query_equals_oracle(name, data, tmp_path, capsys):
    want, got = run_pair(data, tmp_path, name, QUERIES[name])
    compare = load_tool("compare_results")
    rc = compare.main([str(want), str(got)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert want.read_text().strip() or name in ("ask",), "the oracle gives no rows: the test would be vacuous"
