"""The on-disk parse cache (``linkstream.query.parse_store``): a later process reads a query's
algebra as JSON instead of importing rdflib's SPARQL parser, and its results do not change.

* every algebra of the corpus (the conformance slice's queries, CityBench's where present,
  and queries with every construct the planner reads) reads back equal, by
  ``algebra_json.same``, which itself tells a changed tree from the original;
* replays read from the cache give the same output lines as replays that parse;
* a second ``linkstream replay`` process of the same query never imports rdflib (nor
  ``rdflib.plugins.sparql`` or pyparsing);
* a corrupt, cut or altered entry is ignored without a word to the user and rewritten; the
  key changes with the text, the base, the dialect and the code; ``off`` writes nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rdflib import Literal, URIRef

from linkstream.cli import main as cli_main
from linkstream.query import algebra_json, parse_store
from linkstream.query import continuous as C
from linkstream.query import shapes as S
from linkstream.query.continuous import parse_continuous
from tests.conformance.test_slice import MANIFEST, replay_args
from tests.result_compare import differences, load
from tests.shared_paths import REPO, SHARED, SLICE

EX = "http://example.org/"
STREAM = EX + "s"

#: queries with the constructs the planner reads (paths, EXISTS, VALUES, aggregates, ...)
FEATURES = {
    "paths": "PREFIX ex: <%s> SELECT ?a ?b FROM STREAM <%s> [RANGE 5s STEP 1s] "
    "WHERE { ?a ex:p/ex:q* ?b . ?a (ex:p|^ex:q) ?c . ?a !(ex:r|^ex:q) ?d . ?a ex:p? ?e }",
    "negation": 'PREFIX ex: <%s> SELECT ?a (IRI("rel") AS ?i) FROM STREAM <%s> [RANGE 5s STEP 1s] '
    "WHERE { ?a ex:p ?b FILTER NOT EXISTS { ?b ex:q ?a } FILTER (EXISTS { ?a ex:p 2 } || ?b > 1) "
    "MINUS { ?a ex:r ?b } OPTIONAL { ?b ex:q ?c FILTER(?c != ?a) } }",
    "values": "PREFIX ex: <%s> SELECT * FROM STREAM <%s> [RANGE 5s STEP 1s] "
    'WHERE { VALUES (?x ?y) { (ex:a "1"@en) (UNDEF -2.5e0) (ex:b UNDEF) } ?a ex:p ?b BIND(?b * 2 AS ?c) }',
    "aggregate": 'PREFIX ex: <%s> SELECT ?a (COUNT(DISTINCT ?b) AS ?n) (GROUP_CONCAT(STR(?b); SEPARATOR="|") AS ?g) '
    "(SUM(?b) AS ?s) FROM STREAM <%s> [RANGE 5s STEP 1s] "
    "WHERE { { ?a ex:p ?b } UNION { SELECT ?a ?b WHERE { ?b ex:q ?a } ORDER BY ?b LIMIT 2 } } "
    "GROUP BY ?a HAVING (COUNT(?b) > 0) ORDER BY DESC(?n) LIMIT 5",
    "construct": "PREFIX ex: <%s> CONSTRUCT { ?a ex:seen _:x . _:x ex:v ?b } FROM STREAM <%s> [RANGE 5s STEP 1s] "
    'WHERE { ?a ex:p ?b FILTER(REGEX(STR(?a), "^http", "i") && LANG("x"@en-GB) = "en-gb") }',
    "ask": 'PREFIX ex: <%s> ASK FROM STREAM <%s> [RANGE 5s STEP 1s] WHERE { ?a ex:p "01"^^<http://www.w3.org/2001/XMLSchema#integer> }',
    "cqels": "PREFIX ex: <%s> SELECT ?a ?b WHERE { STREAM <%s> [RANGE 3s SLIDE 1s] { ?a ex:p ?b } "
    "GRAPH ?g { ?b ex:q ?c } }",
}


def feature_text(name: str) -> str:
    return FEATURES[name] % (EX, STREAM)


def corpus() -> list[str]:
    texts = [feature_text(n) for n in FEATURES]
    texts += [(SLICE / q["query"]).read_text(encoding="utf-8") for q in MANIFEST["queries"]]
    texts += [p.read_text(encoding="utf-8") for p in sorted((REPO / "examples").glob("**/*.rq"))]
    texts += [p.read_text(encoding="utf-8") for p in sorted(SHARED.glob("citybench/queries/**/*.txt"))]
    return texts


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Empty in-process caches, and the on-disk cache in a fresh directory (off afterwards)."""
    forget()
    cache = tmp_path / "parse-cache"
    monkeypatch.setenv("LINKSTREAM_QUERY_PARSE_CACHE", str(cache))
    yield cache
    parse_store.configure(None)
    forget()


def forget() -> None:
    """Empties the in-process parse caches: only the disk knows a query, as in a new process."""
    C._ALGEBRA_CACHE.clear()
    C._TEMPLATES.clear()
    S._SHAPES.clear()


def test_every_algebra_reads_back_equal() -> None:
    for text in corpus():
        cq = parse_continuous(text)
        back = algebra_json.loads(algebra_json.dumps(cq.algebra))
        assert algebra_json.same(cq.algebra.algebra, back.algebra), text
        assert back.prologue.base == cq.algebra.prologue.base
        stack = [back.algebra]
        while stack:  # nothing of rdflib comes back (terms and paths: linkstream.query.aterms)
            x = stack.pop()
            assert not type(x).__module__.startswith("rdflib"), type(x)
            if type(x).__module__ == "linkstream.query.aterms" and not isinstance(x, str):
                stack.extend(x.__dict__.values())  # (a property path's parts)
            if isinstance(x, dict):
                stack.extend(x.values())
            elif isinstance(x, (list, tuple)):
                stack.extend(x)


def test_same_tells_a_changed_tree() -> None:
    cq = parse_continuous(feature_text("values"))
    back = algebra_json.loads(algebra_json.dumps(cq.algebra)).algebra
    assert algebra_json.same(cq.algebra.algebra, back)
    text = algebra_json.dumps(cq.algebra)
    for old, new in (
        ('"1","en"', '"1","de"'),
        ('"-2.5",null', '"-2.50",null'),
        ('["u","http://example.org/b"]', '["b","x"]'),
    ):
        assert old in text
        changed = algebra_json.loads(text.replace(old, new, 1)).algebra
        assert not algebra_json.same(cq.algebra.algebra, changed), old
    shared = [URIRef(EX)]
    one, two = (
        algebra_json.Node("Join", p1=shared, p2=shared),
        algebra_json.Node("Join", p1=shared, p2=[URIRef(EX)]),
    )
    assert algebra_json.same(
        one, algebra_json.loads(algebra_json.dumps(algebra_json.StoredQuery(None, one))).algebra
    )
    assert not algebra_json.same(one, two)  # a shared list is not two equal lists
    assert not algebra_json.same(Literal("1", datatype=URIRef(EX + "t")), Literal("1"))


def write_inputs(tmp: Path) -> tuple[Path, Path]:
    stream, static = tmp / "s.nq", tmp / "g.nt"
    lines = []
    for i in range(12):
        g = f"<{EX}e{i}>"
        lines.append(
            f'{g} <http://www.w3.org/ns/prov#generatedAtTime> "2024-01-01T00:00:{i:02d}Z"'
            "^^<http://www.w3.org/2001/XMLSchema#dateTime> ."
        )
        lines.append(f"<{EX}a{i % 3}> <{EX}p> <{EX}a{(i + 1) % 4}> {g} .")
        lines.append(f'<{EX}a{i % 4}> <{EX}p> "{i % 5}"^^<http://www.w3.org/2001/XMLSchema#integer> {g} .')
        lines.append(f"<{EX}a{i % 2}> <{EX}q> <{EX}a{i % 3}> {g} .")
    stream.write_text("\n".join(lines) + "\n")
    static.write_text("".join(f"<{EX}a{i}> <{EX}{'qr'[i % 2]}> <{EX}a{(i * 3) % 5}> .\n" for i in range(6)))
    return stream, static


def replay(tmp: Path, name: str, run: str) -> list[str]:
    stream, static = write_inputs(tmp)
    query = tmp / f"{name}.rq"
    query.write_text(feature_text(name))
    out = tmp / f"{name}-{run}.jsonl"
    args = ["replay", "--query", str(query), "--stream", f"{STREAM}={stream}", "--quiet", "--out", str(out)]
    assert cli_main([*args, "--static", str(static), "--static", f"{EX}g={static}"]) == 0
    labels: dict[str, str] = {}  # CONSTRUCT's fresh blank nodes count on across runs of a process
    text = re.sub(r"_:c\d+", lambda m: labels.setdefault(m.group(0), "_:b%d" % len(labels)), out.read_text())
    return text.splitlines()


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_cached_algebra_gives_the_same_results(name: str, fresh: Path, tmp_path: Path) -> None:
    before = dict(parse_store.stats)
    parsed = replay(tmp_path, name, "parsed")
    assert parse_store.stats["stored"] == before["stored"] + 1
    forget()
    cached = replay(tmp_path, name, "cached")
    assert parse_store.stats["hits"] == before["hits"] + 1
    assert cached == parsed
    assert parsed or name == "ask"


def test_conformance_slice_from_the_cache_equals_the_oracle(fresh: Path, tmp_path: Path) -> None:
    for run in ("parse", "cache"):
        forget()
        hits = parse_store.stats["hits"]
        for q in MANIFEST["queries"]:
            out = tmp_path / f"{q['id']}-{run}.jsonl"
            assert cli_main(replay_args(q, out)) == 0
            diffs = differences(load(SLICE / q["expected"]), load(out))
            assert not diffs, (run, q["id"], diffs[:3])
        if run == "cache":
            assert parse_store.stats["hits"] >= hits + len({q["query"] for q in MANIFEST["queries"]})


PROBE = (
    "import sys; from linkstream.cli import main; rc = main(sys.argv[1:]); "
    "print([m for m in ('rdflib.plugins.sparql', 'pyparsing', 'rdflib') if m in sys.modules]); "
    "sys.exit(rc)"
)


def run_cli(tmp: Path, cache: str, out: str) -> subprocess.CompletedProcess:
    stream, _ = write_inputs(tmp)
    query = tmp / "q.rq"
    query.write_text(feature_text("paths"))
    env = {**os.environ, "LINKSTREAM_QUERY_PARSE_CACHE": cache}
    args = [
        "replay",
        "--query",
        str(query),
        "--stream",
        f"{STREAM}={stream}",
        "--quiet",
        "--out",
        str(tmp / out),
    ]
    return subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_a_second_process_skips_rdflibs_sparql_parser(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = run_cli(tmp_path, str(cache), "1.jsonl")
    assert first.returncode == 0, first.stderr
    assert "rdflib.plugins.sparql" in first.stdout
    second = run_cli(tmp_path, str(cache), "2.jsonl")
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "[]", second.stdout
    assert (tmp_path / "1.jsonl").read_text() == (tmp_path / "2.jsonl").read_text()
    assert second.stderr == ""
    [entry] = cache.glob("*.json")
    # altered, cut short, not JSON: ignored without a word, the query parsed, the entry rewritten
    good = entry.read_text()
    for bad in (
        good.replace('"u","http://example.org/p"', '"u","http://example.org/x"', 1),
        good[:-20],
        "x",
        "",
    ):
        entry.write_text(bad)
        again = run_cli(tmp_path, str(cache), "3.jsonl")
        assert again.returncode == 0 and again.stderr == "", again.stderr
        assert "rdflib.plugins.sparql" in again.stdout
        assert (tmp_path / "3.jsonl").read_text() == (tmp_path / "1.jsonl").read_text()
        assert rewritten(entry, good)
    # a stored tree that is not ours is refused too, even with a matching checksum
    body = json.dumps({"base": None, "algebra": ["X"]})
    entry.write_text(hashlib.sha256(body.encode()).hexdigest() + "\n" + body)
    assert run_cli(tmp_path, str(cache), "4.jsonl").stderr == ""
    assert rewritten(entry, good)


def rewritten(entry: Path, good: str) -> bool:
    """Whether ``entry`` is a sound entry (its checksum matches) of the algebra of ``good``
    (sets may list their members in another order: string hashes differ between processes)."""
    digest, _, body = entry.read_text().partition("\n")
    want = algebra_json.loads(good.partition("\n")[2]).algebra
    return digest == hashlib.sha256(body.encode()).hexdigest() and algebra_json.same(
        algebra_json.loads(body).algebra, want
    )


def test_off_writes_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    for value in ("off", ""):
        r = run_cli(tmp_path, value, "o.jsonl")
        assert r.returncode == 0, r.stderr
        assert "rdflib.plugins.sparql" in r.stdout
    assert not list(tmp_path.glob("off")) and not list(Path.cwd().glob("off"))
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": ""}
    env.pop("LINKSTREAM_QUERY_PARSE_CACHE")
    stream, _ = write_inputs(tmp_path)
    args = ["replay", "--query", str(tmp_path / "q.rq"), "--stream", f"{STREAM}={stream}", "--quiet"]
    args += ["--out", str(tmp_path / "d.jsonl")]
    assert subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True).returncode == 0
    assert len(list((home / ".cache" / "linkstream" / "parse").glob("*.json"))) == 1  # the default place


def test_an_algebra_the_planner_hands_to_rdflib_is_not_stored(fresh: Path) -> None:
    parse_store.configure(fresh)
    having = "PREFIX ex: <%s> SELECT ?a WHERE { ?a ex:p ?b } GROUP BY ?a HAVING (EXISTS { ?a ex:q ?z })" % EX
    cq = parse_continuous(having)  # (rdflib leaves this EXISTS pattern untranslated)
    assert algebra_json.needs_parser(cq.algebra.algebra)
    assert not parse_store.save(parse_store.key(having, "http://localhost/", "sparql"), cq.algebra)
    assert not list(fresh.glob("*.json"))
    for name in FEATURES:  # EXISTS in filters: translated, stored
        assert not algebra_json.needs_parser(parse_continuous(feature_text(name)).algebra.algebra)


def test_the_key_covers_text_base_dialect_and_code(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parse_store.configure(fresh)
    k = parse_store.key("SELECT * { ?s ?p ?o }", "http://localhost/", "csparql")
    assert k != parse_store.key("SELECT * { ?s ?p ?o. }", "http://localhost/", "csparql")
    assert k != parse_store.key("SELECT * { ?s ?p ?o }", "http://localhost/x/", "csparql")
    assert k != parse_store.key("SELECT * { ?s ?p ?o }", "http://localhost/", "cqels")
    monkeypatch.setattr(parse_store, "_fingerprint", "another rdflib or LinkStream")
    assert k != parse_store.key("SELECT * { ?s ?p ?o }", "http://localhost/", "csparql")
    parse_store.configure(None)
    assert parse_store.key("SELECT * { ?s ?p ?o }", "http://localhost/", "csparql") is None


def test_the_directory_keeps_at_most_max_entries(fresh: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past MAX_ENTRIES the older half goes (counted at a process's first store and every
    PRUNE_EVERY stores); the newest entry stays readable."""
    cq = parse_continuous(feature_text("values"))
    parse_store.configure(fresh)
    monkeypatch.setattr(parse_store, "MAX_ENTRIES", 4)
    monkeypatch.setattr(parse_store, "PRUNE_EVERY", 3)
    monkeypatch.setitem(parse_store.stats, "stored", 0)
    # each entry older than the next (file times are too coarse to tell entries written in a row)
    real_replace = os.replace
    written = iter(range(1_000_000, 2_000_000, 10))

    def replace(src: str, dst: Path) -> None:
        t = next(written)
        os.utime(src, (t, t))
        real_replace(src, dst)

    monkeypatch.setattr(parse_store.os, "replace", replace)
    keys = [parse_store.key("SELECT * { ?s ?p %d }" % i, "http://localhost/", "sparql") for i in range(10)]
    counts = []
    for k in keys:
        assert parse_store.save(k, cq.algebra)
        counts.append(len(list(fresh.glob("*.json"))))
    # counted at stores 1, 4, 7 and 10: 4 entries at the 4th (kept), 7 at the 7th (-> 4), 7 at the 10th (-> 4)
    assert counts == [1, 2, 3, 4, 5, 6, 4, 5, 6, 4]
    assert parse_store.load(keys[-1]) is not None
    assert parse_store.load(keys[0]) is None  # (the oldest went)
