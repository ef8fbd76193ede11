#!/usr/bin/env python3
"""The W3C SPARQL query-evaluation tests: LinkStream's one-shot SPARQL vs pyoxigraph, same run.

Runs every ``mf:QueryEvaluationTest`` of the SPARQL 1.1 query manifest
(``sparql/sparql11/manifest-sparql11-query.ttl``) and of the SPARQL 1.0 evaluation
manifest (``sparql/sparql10/manifest-evaluation.ttl``) of github.com/w3c/rdf-tests
(withdrawn tests and those needing SERVICE or an entailment regime left out):

* LinkStream: the test's data (``qt:data`` into the default graph, ``qt:graphData`` and
  files named by the query's ``FROM`` / ``FROM NAMED`` into named graphs of their file
  IRI) is written as one N-Quads file, loaded with
  :func:`linkstream.store.loader.load_store` (what ``linkstream load`` runs) and queried
  with :func:`linkstream.engine.oneshot.store.run_sparql` (what ``linkstream sparql``
  runs), in process;
* pyoxigraph: the same files loaded into a ``pyoxigraph.Store``, the query run there.

Results are compared with the expected ``.srx`` / ``.srj`` / RDF result sets as the
test suite means them: terms exactly (a simple literal is its ``xsd:string``, language
tags case-insensitively), blank nodes up to a consistent renaming, rows as a multiset
unless the query has ORDER BY (then the sequence of the ORDER BY keys must match too);
CONSTRUCT graphs up to blank-node isomorphism.

The test data is never committed.  It is found in ``--tests DIR`` / ``$W3C_RDF_TESTS``
(a checkout of rdf-tests), else in ``~/.cache/linkstream/rdf-tests``, else extracted there
from a local git mirror (``/work/.mirror/w3c+rdf-tests/repo``) or cloned from GitHub.

    python bench/w3c_sparql.py [--tests DIR] [--only SUBSTRING] [--no-peer] [--out FILE]

Prints PASS/FAIL per test for both systems and the totals; raw figures go to
``bench/results/w3c_sparql.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urljoin, urlparse

from linkstream.rdf import terms as rdf
from linkstream.rdf.ntriples import NTriplesError, parse_line

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "linkstream" / "rdf-tests"
MIRROR = Path("/work/.mirror/w3c+rdf-tests/repo")
GITHUB = "https://github.com/w3c/rdf-tests"
MANIFESTS = ("sparql/sparql11/manifest-sparql11-query.ttl", "sparql/sparql10/manifest-evaluation.ttl")

MF = "http://www.w3.org/2001/sw/DataAccess/tests/test-manifest#"
QT = "http://www.w3.org/2001/sw/DataAccess/tests/test-query#"
DAWGT = "http://www.w3.org/2001/sw/DataAccess/tests/test-dawg#"
RS = "http://www.w3.org/2001/sw/DataAccess/tests/result-set#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
SRX = "{http://www.w3.org/2005/sparql-results#}"
XML_LANG = "{http://www.w3.org/XML/1998/namespace}lang"
TIMEOUT_S = 30

#: a term as compared: ("uri", iri) | ("bnode", label) | ("literal", lex, lang, datatype)
#: ("" for none: a simple literal is its xsd:string, language tags lower case); read with
#: the platform's term model and parsers (:mod:`linkstream.rdf.terms`, ``.ntriples``)
Term = tuple[str, ...]
Row = tuple[tuple[str, Term], ...]  # (variable, term) pairs, sorted; unbound left out


# ---------------------------------------------------------------- finding the tests


def locate(explicit: str | None = None, clone: bool = True) -> tuple[Path | None, str]:
    """The rdf-tests directory (holding ``sparql/``), or ``None`` and why not.

    ``clone=False`` never goes to the network (tests): a checkout, the cache or the mirror.
    """
    for cand in (explicit, os.environ.get("W3C_RDF_TESTS")):
        if cand:
            p = Path(cand)
            if (p / MANIFESTS[0]).is_file():
                return p, ""
            return None, f"{p} holds no {MANIFESTS[0]}"
    if (CACHE / MANIFESTS[0]).is_file():
        return CACHE, ""
    CACHE.mkdir(parents=True, exist_ok=True)
    if (MIRROR / "HEAD").exists():
        try:
            arch = subprocess.run(
                ["git", f"--git-dir={MIRROR}", "archive", "HEAD", "sparql/sparql10", "sparql/sparql11"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(CACHE)], input=arch, check=True)
            return CACHE, ""
        except (OSError, subprocess.CalledProcessError) as e:
            reason = f"cannot extract {MIRROR}: {e}"
    else:
        reason = f"no {MIRROR}"
    if not clone:
        return None, f"W3C rdf-tests not found ({reason}); set W3C_RDF_TESTS to a checkout"
    try:
        tmp = CACHE.with_name("rdf-tests.clone")
        subprocess.run(["git", "clone", "--depth", "1", GITHUB, str(tmp)], check=True, capture_output=True)
        tmp.replace(CACHE) if not CACHE.exists() or not any(CACHE.iterdir()) else None
        if (CACHE / MANIFESTS[0]).is_file():
            return CACHE, ""
    except (OSError, subprocess.CalledProcessError) as e:
        reason += f"; git clone {GITHUB} failed: {getattr(e, 'stderr', b'') or e}"
    return None, f"W3C rdf-tests not found ({reason}); set W3C_RDF_TESTS to a checkout"


@dataclass
class Case:
    """One query-evaluation test."""

    name: str  # "sparql11/property-path/pp01"
    query: Path
    data: list[Path] = field(default_factory=list)
    graph_data: list[tuple[str, Path]] = field(default_factory=list)  # (graph IRI, file)
    result: Path | None = None
    lax: bool = False  # mf:resultCardinality mf:LaxCardinality (REDUCED): duplicates may go


def _path(uri: str) -> Path:
    return Path(unquote(urlparse(uri).path))


def file_uri(p: Path) -> str:
    return p.resolve().as_uri()


def load_cases(root: Path) -> list[Case]:
    """Every query-evaluation test of the two manifests (and the manifests they include)."""
    import rdflib

    cases: list[Case] = []
    todo = [root / m for m in MANIFESTS]
    seen: set[Path] = set()
    while todo:
        man = todo.pop(0)
        if man in seen or not man.is_file():
            continue
        seen.add(man)
        g = rdflib.Graph()
        g.parse(man, format="turtle", publicID=file_uri(man))
        u = rdflib.URIRef
        for lst in g.objects(None, u(MF + "include")):
            todo.extend(_path(str(x)) for x in rdflib.collection.Collection(g, lst))
        for lst in g.objects(None, u(MF + "entries")):
            for t in rdflib.collection.Collection(g, lst):
                if (t, u(RDF + "type"), u(MF + "QueryEvaluationTest")) not in g:
                    continue
                if (t, u(DAWGT + "approval"), u(DAWGT + "Withdrawn")) in g:
                    continue
                act = g.value(t, u(MF + "action"))
                if act is None or g.value(act, u(QT + "query")) is None:
                    continue
                if g.value(act, u(QT + "serviceData")) is not None:
                    continue
                if any(
                    True
                    for _ in g.objects(
                        act, u("http://www.w3.org/ns/sparql-service-description#entailmentRegime")
                    )
                ):
                    continue
                rel = man.parent.relative_to(root / "sparql")
                name = str(t).rsplit("#", 1)[-1] if "#" in str(t) else str(t).rsplit("/", 1)[-1]
                c = Case(f"{rel}/{name}", _path(str(g.value(act, u(QT + "query")))))
                c.data = sorted(_path(str(d)) for d in g.objects(act, u(QT + "data")))
                for gd in g.objects(act, u(QT + "graphData")):
                    inner = g.value(gd, u(QT + "graph"))
                    f = _path(str(inner if inner is not None else gd))
                    label = g.value(gd, u(RDFS + "label"))
                    c.graph_data.append((str(label) if label is not None else file_uri(f), f))
                res = g.value(t, u(MF + "result"))
                c.result = _path(str(res)) if res is not None else None
                c.lax = (t, u(MF + "resultCardinality"), u(MF + "LaxCardinality")) in g
                cases.append(c)
    return cases


def dataset_files(case: Case, text: str) -> list[tuple[str, Path]]:
    """``qt:graphData`` plus local files named by the query's FROM / FROM NAMED."""
    out = list(case.graph_data)
    base = file_uri(case.query)
    m = re.search(r"^\s*BASE\s*<([^>]*)>", text, re.I | re.M)
    if m:
        base = urljoin(base, m.group(1))
    for m in re.finditer(r"\bFROM\s+(?:NAMED\s+)?<([^>]*)>", text, re.I):
        iri = urljoin(base, m.group(1))
        if iri.startswith("file:") and _path(iri).is_file() and all(g != iri for g, _ in out):
            out.append((iri, _path(iri)))
    return out


# ---------------------------------------------------------------- expected results


def key(t: rdf.Term) -> Term:
    """The compared form of a platform term."""
    if isinstance(t, rdf.IRI):
        return ("uri", t.value)
    if isinstance(t, rdf.BNode):
        return ("bnode", t.value)
    if t.lang:
        return ("literal", t.lex, t.lang.lower(), "")
    return ("literal", t.lex, "", "" if t.datatype == rdf.XSD_STRING else t.datatype)


def _lit(lex: str, lang: str | None, dt: str | None) -> Term:
    if lang:
        return key(rdf.Literal(lex, rdf.RDF_LANGSTRING, lang))
    return key(rdf.Literal(lex, dt or rdf.XSD_STRING))


def json_term(t: dict[str, Any]) -> Term:
    """A term of SPARQL 1.1 Query Results JSON."""
    return key(rdf.term_from_json(t))


def nt_triples(lines: list[str]) -> list[Row]:
    """N-Triples statements (a CONSTRUCT result) read by the platform's parser."""
    rows = []
    for line in lines:
        try:
            q = parse_line(line)
        except NTriplesError as e:
            raise ValueError(f"not N-Triples: {line!r}: {e}") from None
        if q is not None:
            rows.append(_triple_row(*(key(rdf.parse_term(x)) for x in q[:3])))
    return rows


def _row(pairs: Iterator[tuple[str, Term]] | list[tuple[str, Term]]) -> Row:
    return tuple(sorted(pairs))


@dataclass
class Result:
    """A query result: rows (SELECT), a boolean (ASK) or triples as rows (graphs)."""

    kind: str  # "select" | "ask" | "graph"
    rows: list[Row] = field(default_factory=list)
    boolean: bool | None = None


def read_srx(path: Path) -> Result:
    root = ET.parse(path).getroot()
    b = root.find(f"{SRX}boolean")
    if b is not None:
        return Result("ask", boolean=b.text.strip() == "true")
    rows = []
    for r in root.iter(f"{SRX}result"):
        pairs = []
        for bd in r.findall(f"{SRX}binding"):
            (el,) = list(bd)
            tag = el.tag[len(SRX) :]
            if tag == "uri":
                t: Term = ("uri", el.text or "")
            elif tag == "bnode":
                t = ("bnode", el.text or "")
            else:
                t = _lit(el.text or "", el.get(XML_LANG), el.get("datatype"))
            pairs.append((bd.get("name"), t))
        rows.append(_row(pairs))
    return Result("select", rows)


def read_srj(path: Path) -> Result:
    d = json.loads(path.read_text(encoding="utf-8"))
    if "boolean" in d:
        return Result("ask", boolean=bool(d["boolean"]))
    return Result("select", [_row((k, json_term(v)) for k, v in b.items()) for b in d["results"]["bindings"]])


def _rdflib_term(t: Any) -> Term:
    import rdflib

    if isinstance(t, rdflib.URIRef):
        return ("uri", str(t))
    if isinstance(t, rdflib.BNode):
        return ("bnode", str(t))
    return _lit(str(t), t.language, str(t.datatype) if t.datatype else None)


def read_rdf_result(path: Path) -> Result:
    """A result set in the DAWG result-set vocabulary, or else a graph."""
    import rdflib

    saved = rdflib.NORMALIZE_LITERALS
    rdflib.NORMALIZE_LITERALS = False
    try:
        g = rdflib.Graph()
        fmt = "xml" if path.suffix == ".rdf" else "turtle"
        g.parse(path, format=fmt, publicID=file_uri(path))
    finally:
        rdflib.NORMALIZE_LITERALS = saved
    u = rdflib.URIRef
    rs = next(iter(g.subjects(u(RDF + "type"), u(RS + "ResultSet"))), None)
    if rs is None:
        return Result("graph", [_triple_row(*(_rdflib_term(x) for x in tr)) for tr in g])
    b = g.value(rs, u(RS + "boolean"))
    if b is not None:
        return Result("ask", boolean=str(b) == "true")
    rows = []
    for sol in g.objects(rs, u(RS + "solution")):
        pairs = [
            (str(g.value(bd, u(RS + "variable"))), _rdflib_term(g.value(bd, u(RS + "value"))))
            for bd in g.objects(sol, u(RS + "binding"))
        ]
        idx = g.value(sol, u(RS + "index"))
        rows.append((int(idx) if idx is not None else 0, _row(pairs)))
    rows.sort(key=lambda x: x[0])
    return Result("select", [r for _, r in rows])


def _triple_row(s: Term, p: Term, o: Term) -> Row:
    return (("o", o), ("p", p), ("s", s))


def read_expected(path: Path) -> Result:
    if path.suffix == ".srx":
        return read_srx(path)
    if path.suffix == ".srj":
        return read_srj(path)
    return read_rdf_result(path)


# ---------------------------------------------------------------- comparison


def _bnodes(row: Row) -> bool:
    return any(t[0] == "bnode" for _, t in row)


def _shape(row: Row) -> Row:
    return tuple((v, ("bnode",) if t[0] == "bnode" else t) for v, t in row)


def _extend(a: Row, b: Row, fwd: dict[str, str], back: dict[str, str]) -> list[tuple[str, str]] | None:
    """New bnode pairs making ``a`` equal ``b`` under the mapping, or ``None`` if impossible."""
    if len(a) != len(b):
        return None
    new: list[tuple[str, str]] = []
    f, r = dict(), dict()
    for (va, ta), (vb, tb) in zip(a, b):
        if va != vb or ta[0] != tb[0]:
            return None
        if ta[0] != "bnode":
            if ta != tb:
                return None
            continue
        x, y = ta[1], tb[1]
        have = fwd.get(x, f.get(x))
        if have is not None:
            if have != y:
                return None
            continue
        if y in back or y in r:
            return None
        f[x], r[y] = y, x
        new.append((x, y))
    return new


def equivalent(exp: list[Row], act: list[Row], ordered: bool, budget: int = 200_000) -> bool:
    """Equal multisets (sequences when ``ordered``) of rows up to a renaming of blank nodes."""
    if len(exp) != len(act):
        return False
    if ordered:
        fwd: dict[str, str] = {}
        back: dict[str, str] = {}
        for a, b in zip(exp, act):
            new = _extend(a, b, fwd, back)
            if new is None:
                return False
            for x, y in new:
                fwd[x], back[y] = y, x
        return True
    plain_e = Counter(r for r in exp if not _bnodes(r))
    plain_a = Counter(r for r in act if not _bnodes(r))
    if plain_e != plain_a:
        return False
    be = [r for r in exp if _bnodes(r)]
    ba = [r for r in act if _bnodes(r)]
    if Counter(map(_shape, be)) != Counter(map(_shape, ba)):
        return False
    if not be:
        return True
    by_shape: dict[Row, list[int]] = {}
    for k, r in enumerate(ba):
        by_shape.setdefault(_shape(r), []).append(k)
    order = sorted(range(len(be)), key=lambda k: len(by_shape[_shape(be[k])]))
    used = [False] * len(ba)
    fwd, back = {}, {}
    steps = [0]

    def search(i: int) -> bool:
        if i == len(order):
            return True
        steps[0] += 1
        if steps[0] > budget:
            return False
        a = be[order[i]]
        for k in by_shape[_shape(a)]:
            if used[k]:
                continue
            new = _extend(a, ba[k], fwd, back)
            if new is None:
                continue
            used[k] = True
            for x, y in new:
                fwd[x], back[y] = y, x
            if search(i + 1):
                return True
            used[k] = False
            for x, y in new:
                del fwd[x], back[y]
        return False

    return search(0)


def order_keys(text: str) -> list[str] | None:
    """The variables of the outermost ORDER BY when every key is one (else ``None``)."""
    ms = list(re.finditer(r"\bORDER\s+BY\b", text, re.I))
    if not ms:
        return None
    rest = text[ms[-1].end() :]
    rest = re.split(r"\b(?:LIMIT|OFFSET|VALUES)\b|}", rest, maxsplit=1, flags=re.I)[0]
    keys = []
    for tok in re.finditer(r"(?:(ASC|DESC)\s*\(\s*([?$]\w+)\s*\))|([?$]\w+)|(\S)", rest, re.I):
        if tok.group(4):
            return None
        keys.append((tok.group(2) or tok.group(3))[1:])
    return keys


def _key_seq(rows: list[Row], keys: list[str]) -> list[tuple[Term | None, ...]]:
    out = []
    for r in rows:
        d = dict(r)
        out.append(tuple(None if d.get(k, ("u",))[0] == "bnode" else d.get(k) for k in keys))
    return out


_NUMERIC = {
    "http://www.w3.org/2001/XMLSchema#" + n
    for n in (
        "integer",
        "decimal",
        "float",
        "double",
        "int",
        "long",
        "short",
        "byte",
        "nonNegativeInteger",
        "positiveInteger",
        "negativeInteger",
        "nonPositiveInteger",
        "unsignedLong",
        "unsignedInt",
        "unsignedShort",
        "unsignedByte",
    )
}
_BOOLEAN = "http://www.w3.org/2001/XMLSchema#boolean"


def by_value(t: Term) -> Term:
    """A numeric or boolean literal as its value (the lenient comparison of ``--by-value``)."""
    if t[0] != "literal" or not t[3]:
        return t
    if t[3] in _NUMERIC:
        try:
            v = Decimal(t[1].strip())
            return ("number", str(v.normalize()) if v.is_finite() else str(v))
        except InvalidOperation:
            return t
    if t[3] == _BOOLEAN and t[1] in ("1", "0", "true", "false"):
        return ("boolean", str(t[1] in ("1", "true")))
    return t


def _lenient(r: Result) -> Result:
    rows = [tuple((v, by_value(t)) for v, t in row) for row in r.rows]
    return Result(r.kind, rows, r.boolean)


def matches(expected: Result, actual: Result, text: str, lenient: bool = False, lax: bool = False) -> bool:
    """Whether ``actual`` is the expected result (``lax``: any number of each duplicate row, >= 1)."""
    if lenient:
        expected, actual = _lenient(expected), _lenient(actual)
    if expected.kind == "ask" or actual.kind == "ask":
        return expected.kind == actual.kind and expected.boolean == actual.boolean
    if lax and expected.kind == "select" and actual.kind == "select":
        # the manifest's mf:LaxCardinality: compare the sets of rows, and never more copies
        # of a row than expected
        most = Counter(map(_shape, expected.rows))
        if any(k > most[r] for r, k in Counter(map(_shape, actual.rows)).items()):
            return False
        return equivalent(list(dict.fromkeys(expected.rows)), list(dict.fromkeys(actual.rows)), False)
    if expected.kind == "graph":
        exp = list(dict.fromkeys(expected.rows))
        act = list(dict.fromkeys(actual.rows))
        return equivalent(exp, act, False)
    if not equivalent(expected.rows, actual.rows, False):
        return False
    if re.search(r"\bORDER\s+BY\b", text, re.I) is None:
        return True
    if equivalent(expected.rows, actual.rows, True):
        return True
    keys = order_keys(text)
    return keys is not None and _key_seq(expected.rows, keys) == _key_seq(actual.rows, keys)


# ---------------------------------------------------------------- the two systems


class Timeout(Exception):
    pass


def _alarm(_sig: int, _frame: object) -> None:
    raise Timeout(f"over {TIMEOUT_S}s")


def _ox_format(path: Path) -> Any:
    import pyoxigraph as ox

    return {
        ".ttl": ox.RdfFormat.TURTLE,
        ".nt": ox.RdfFormat.N_TRIPLES,
        ".rdf": ox.RdfFormat.RDF_XML,
        ".n3": ox.RdfFormat.N3,
        ".nq": ox.RdfFormat.N_QUADS,
        ".trig": ox.RdfFormat.TRIG,
    }.get(path.suffix, ox.RdfFormat.TURTLE)


def _ox_term(t: Any) -> Term:
    import pyoxigraph as ox

    if isinstance(t, ox.NamedNode):
        return ("uri", t.value)
    if isinstance(t, ox.BlankNode):
        return ("bnode", t.value)
    return _lit(t.value, t.language, t.datatype.value if t.datatype else None)


def write_nquads(case: Case, graphs: list[tuple[str, Path]], out: Path) -> None:
    """The test's dataset as one N-Quads file (lexical forms as written)."""
    import pyoxigraph as ox

    quads = []
    for f in case.data:
        quads += [
            ox.Quad(t.subject, t.predicate, t.object)
            for t in ox.parse(path=f, format=_ox_format(f), base_iri=file_uri(f))
        ]
    for k, (iri, f) in enumerate(graphs):
        # blank nodes of different files stay apart
        tr = list(ox.parse(path=f, format=_ox_format(f), base_iri=file_uri(f)))
        ren: dict[str, ox.BlankNode] = {}

        def b(x: Any, k: int = k, ren: dict[str, Any] = ren) -> Any:
            if isinstance(x, ox.BlankNode):
                return ren.setdefault(x.value, ox.BlankNode(f"g{k}_{x.value}"))
            return x

        quads += [ox.Quad(b(t.subject), t.predicate, b(t.object), ox.NamedNode(iri)) for t in tr]
    out.write_bytes(ox.serialize(quads, format=ox.RdfFormat.N_QUADS) or b"")


def run_linkstream(case: Case, text: str, work: Path) -> Result:
    from linkstream.engine.oneshot.store import run_sparql
    from linkstream.store.loader import load_store
    from linkstream.store.persistent import PersistentStore

    nq = work / "data.nq"
    write_nquads(case, dataset_files(case, text), nq)
    load_store(work / "store", [nq], log=lambda _m: None)
    store = PersistentStore.open(work / "store", background_compaction=False)
    try:
        res = run_sparql(store, text, base=file_uri(case.query))
    finally:
        store.close()
    if "boolean" in res:
        return Result("ask", boolean=bool(res["boolean"]))
    if "triples" in res:
        return Result("graph", nt_triples(res["triples"]))
    return Result(
        "select", [_row((k, json_term(v)) for k, v in b.items()) for b in res["results"]["bindings"]]
    )


def run_oxigraph(case: Case, text: str) -> Result:
    import pyoxigraph as ox

    store = ox.Store()
    for f in case.data:
        store.load(path=f, format=_ox_format(f), base_iri=file_uri(f), to_graph=ox.DefaultGraph())
    for iri, f in dataset_files(case, text):
        store.load(path=f, format=_ox_format(f), base_iri=file_uri(f), to_graph=ox.NamedNode(iri))
    res = store.query(text, base_iri=file_uri(case.query))
    if isinstance(res, ox.QueryBoolean):
        return Result("ask", boolean=bool(res))
    if isinstance(res, ox.QueryTriples):
        return Result(
            "graph",
            [_triple_row(_ox_term(t.subject), _ox_term(t.predicate), _ox_term(t.object)) for t in res],
        )
    names = [v.value for v in res.variables]
    rows = []
    for sol in res:
        rows.append(_row((n, _ox_term(sol[n])) for n in names if sol[n] is not None))
    return Result("select", rows)


def run_case(case: Case, system: str) -> tuple[str, str, bool]:
    """("pass" | "fail" | "error", detail, whether it passes comparing numbers by value)."""
    try:
        text = case.query.read_text(encoding="utf-8")
        if case.result is None:
            return "error", "no expected result", False
        expected = read_expected(case.result)
    except Exception as e:  # a test this harness cannot read
        return "error", f"harness: {type(e).__name__}: {e}", False
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        if system == "linkstream":
            with tempfile.TemporaryDirectory(prefix="w3c-") as tmp:
                actual = run_linkstream(case, text, Path(tmp))
        else:
            actual = run_oxigraph(case, text)
        ok = matches(expected, actual, text, lax=case.lax)
        detail = "" if ok else f"expected {_summary(expected)}, got {_summary(actual)}"
        return ("pass" if ok else "fail"), detail, ok or matches(expected, actual, text, True, case.lax)
    except Exception as e:
        return "error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300], False
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _summary(r: Result) -> str:
    if r.kind == "ask":
        return f"ASK {r.boolean}"
    return f"{len(r.rows)} {'triples' if r.kind == 'graph' else 'rows'}"


def run_all(root: Path, only: str | None = None, peer: bool = True, say=print) -> dict[str, Any]:
    """Runs the selected tests; returns the raw figures (also what the JSON file holds)."""
    import logging

    logging.disable(logging.WARNING)
    cases = [c for c in load_cases(root) if only is None or only in c.name]
    out: dict[str, Any] = {"tests": [], "root": str(root)}
    totals = Counter()
    t0 = time.perf_counter()
    for c in cases:
        ours, why, ours_v = run_case(c, "linkstream")
        entry = {"name": c.name, "linkstream": ours, "linkstream_by_value": ours_v, "linkstream_detail": why}
        totals["linkstream_" + ours] += 1
        totals["linkstream_by_value"] += ours_v
        line = f"{ours.upper():5} {c.name}"
        if peer:
            ox_res, ox_why, ox_v = run_case(c, "oxigraph")
            entry.update(oxigraph=ox_res, oxigraph_by_value=ox_v, oxigraph_detail=ox_why)
            totals["oxigraph_" + ox_res] += 1
            totals["oxigraph_by_value"] += ox_v
            line += f"   [pyoxigraph {ox_res}]"
        if why:
            line += f"   {why}"
        say(line)
        out["tests"].append(entry)
    out["total"] = len(cases)
    out["linkstream_pass"] = totals["linkstream_pass"]
    out["oxigraph_pass"] = totals["oxigraph_pass"] if peer else None
    out["linkstream_pass_by_value"] = totals["linkstream_by_value"]
    out["oxigraph_pass_by_value"] = totals["oxigraph_by_value"] if peer else None
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--tests", default=None, help="an rdf-tests checkout (default: located, see the docstring)"
    )
    ap.add_argument("--only", default=None, help="run only tests whose name contains this")
    ap.add_argument("--no-peer", action="store_true", help="skip pyoxigraph")
    ap.add_argument("--out", default=str(REPO / "bench" / "results" / "w3c_sparql.json"))
    args = ap.parse_args(argv)
    root, why = locate(args.tests)
    if root is None:
        print(f"skipped: {why}", file=sys.stderr)
        return 2
    res = run_all(root, args.only, not args.no_peer)
    n = res["total"]
    print(f"\nLinkStream {res['linkstream_pass']}/{n} pass", end="")
    if res["oxigraph_pass"] is not None:
        print(f", pyoxigraph {res['oxigraph_pass']}/{n} pass (same run)", end="")
        if res["oxigraph_pass"]:
            print(f", ratio {res['linkstream_pass'] / res['oxigraph_pass']:.3f}", end="")
    print(f"  [{res['seconds']}s]")
    line = f"numbers compared by value: LinkStream {res['linkstream_pass_by_value']}/{n}"
    if res["oxigraph_pass"] is not None:
        line += f", pyoxigraph {res['oxigraph_pass_by_value']}/{n}"
    print(line)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
