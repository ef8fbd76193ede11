"""Query shapes (platform/query/shapes.py): a query of a known shape gets exactly what a full
parse gives (every field, the offset map, the algebra), and an error exactly the full
parse's error, over the CityBench and LSBench templates and the CityBench query files."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from linkstream.query import continuous as C
from linkstream.query import shapes as S
from linkstream.query.continuous import parse_continuous
from linkstream.query.errors import QueryError
from tests.engine.test_sharing import PFX, TRAFFIC, generate, template_query
from tests.query.test_parse_cache import _canon
from tests.shared_paths import shared_or_skip

REPO = Path(__file__).resolve().parents[2]
FIELDS = (
    "name",
    "dialect",
    "mode",
    "form",
    "windows",
    "static_from",
    "static_named",
    "base",
    "text",
    "sparql",
)


def _result(text: str, name: str):
    try:
        cq = parse_continuous(text, default_name=name, source="q.rq")
    except QueryError as e:
        return ("error", str(e), e.line, e.column)
    return tuple(getattr(cq, f) for f in FIELDS) + (cq.offset_map, _canon(cq.algebra.algebra))


def _parse_all(named: list[tuple[str, str]], monkeypatch, on: bool) -> tuple[list, int]:
    C._ALGEBRA_CACHE.clear()
    C._TEMPLATES.clear()
    S._SHAPES.clear()
    hits = []
    real = S.instance

    def counted(text, base):
        got = real(text, base)
        hits.append(got is not None)
        return got

    with monkeypatch.context() as m:
        m.setattr(C, "SHAPES", on)
        m.setattr(S, "instance", counted)
        out = [_result(t, n) for n, t in named]
    return out, sum(hits)


def _same(named, monkeypatch) -> tuple[list, int]:
    fast, hits = _parse_all(named, monkeypatch, True)
    full, none = _parse_all(named, monkeypatch, False)
    assert none == 0
    for (n, _), a, b in zip(named, fast, full, strict=True):
        assert a == b, n
    return fast, hits


def test_citybench_templates_equal_full_parse(monkeypatch):
    named = list(generate(400, seed=3).items())
    out, hits = _same(named, monkeypatch)
    assert all(r[0] != "error" for r in out)
    assert hits >= 150  # 4 kinds x 3 dialects x 6 stream pairs x 4 windows: <= 288 shapes


def test_lsbench_templates_equal_full_parse(monkeypatch, tmp_path):
    sys.path.insert(0, str(REPO))
    from bench import lsbench

    named = []
    for kind, windows in (("mixed", "time"), ("mixed", "count"), ("q1", "time")):
        named += [(n + kind + windows, t) for n, t in lsbench.workload(kind, 120, 150, windows, 5).items()]
    out, hits = _same(named, monkeypatch)
    assert all(r[0] != "error" for r in out)
    assert hits >= 120  # window ranges are part of a shape


def test_citybench_query_files_equal_full_parse(monkeypatch):
    shared = shared_or_skip()
    files = sorted((shared / "citybench" / "queries").glob("*/*.txt"))
    named = [(f.parent.name + f.stem, f.read_text(encoding="utf-8")) for f in files]
    out, hits = _same(named + named, monkeypatch)  # the second round: instances of their own shape
    assert hits >= len(named)
    assert sum(r[0] != "error" for r in out) >= len(named)


def _bad_instances() -> list[tuple[str, str]]:
    """Queries of learnt shapes whose constants are wrong, or unlike the shape's."""
    good = lambda k, a, b, c, d, n: template_query(k, a, b, 2000, 1000, c, d, n)  # noqa: E731
    out = []
    for d in ("csparql", "cqels", "rspql"):
        for k in range(4):
            base = good(k, TRAFFIC[0], TRAFFIC[1], 0.01, d, "first")
            out += [
                ("ok%d%s" % (k, d), base),
                ("ok2%d%s" % (k, d), good(k, TRAFFIC[1], TRAFFIC[0], 0.02, d, "x2")),
            ]
            body = base.replace("ssn:observedBy ses:%s" % TRAFFIC[0], "ssn:observedBy %s")
            for bad in (
                "<http://ex.org/a b>",
                "<http://ex.org/%zz>",
                "<http://ex.org/[x]>",
                "zz:Unknown",
                "<rel>",
                "ses:a.b",
                "ses:" + TRAFFIC[1],
                '"s"',
            ):
                out.append(("bad%s%d%s" % (bad, k, d), body.replace("%s", bad, 1) if "%s" in body else base))
            out.append(("num%d%s" % (k, d), base.replace("0.01", "1e2").replace(" 1)", " 1.5)")))
            out.append(("num%d%s" % (k, d), base.replace("0.01", "0.").replace(" 1)", " -1)")))
            for nm in ("a:b", "<http://ex.org/q>", "9x", "SELECT", "g 1"):
                out.append(("name%s" % nm, base.replace("first", nm, 1)))
    return out


def test_wrong_constants_report_the_full_parse_error(monkeypatch):
    named = _bad_instances()
    out, hits = _same(named, monkeypatch)
    errors = [r for r in out if r[0] == "error"]
    assert len(errors) >= 20
    assert any("unknown prefix 'zz:'" in r[1] for r in errors)
    assert any("invalid IRI" in r[1] for r in errors)
    assert hits >= 12


def test_equal_constants_stay_equal(monkeypatch):
    shape = PFX + (
        "REGISTER QUERY {n} AS SELECT ?o1 FROM STREAM ses:X [RANGE 3s STEP 1s] "
        "WHERE {{ ?o1 ssn:observedBy {a} . ?o2 ssn:observedBy {b} FILTER(?v > {c} || ?w > {d}) }}"
    )
    combos = [
        ("ses:A", "ses:B", "1", "2"),
        ("ses:C", "ses:D", "3", "4"),
        ("ses:C", "ses:C", "3", "4"),
        ("ses:C", "<http://www.insight-centre.org/dataset/SampleEventService#C>", "3", "3"),
        ("ses:E", "ses:F", "3", "03"),
        ("ses:A", "ses:B", "1", "2"),
    ]
    rnd = random.Random(1)
    named = [
        ("q%d" % i, shape.format(n="q%d" % i, a=a, b=b, c=c, d=d)) for i, (a, b, c, d) in enumerate(combos)
    ]
    rnd.shuffle(named)
    _same(named, monkeypatch)


@pytest.mark.parametrize("prefix", ["", "# a comment <x> 1\n", "BASE <http://b.org/>\n"])
def test_offsets_of_errors_after_a_longer_constant(monkeypatch, prefix):
    """The rewrite of an instance is shifted by its longer constants: a full parse error further
    on (here a GROUP BY rule) and the offset map point at the same places."""
    t = (
        prefix
        + PFX
        + (
            "REGISTER QUERY {n} AS SELECT ?o1 FROM STREAM ses:X [RANGE 3s STEP 1s] "
            "WHERE {{ ?o1 ssn:observedBy {a} FILTER(?v > {c}) }}{tail}"
        )
    )
    named = [
        ("a", t.format(n="aa", a="ses:A", c="1", tail="")),
        ("b", t.format(n="bbbbbbbbbb", a="ses:AAAAAAAAAAAAAAA", c="1000000", tail="")),
        ("c", t.format(n="cc", a="ses:AAAAAAAA", c="10", tail=" GROUP BY ?v")),
        ("d", t.format(n="dddd", a="ses:A", c="12345", tail="")),
        ("e", t.format(n="e", a="ses:AAA", c="7", tail="")),  # blanked to one space: no piece of its own
        ("f", t.format(n="f", a="ses:A", c="1", tail="")),  # a shape whose name cannot vary
        ("g", t.format(n="g", a="ses:AAAAA", c="123", tail="")),
    ]
    out, hits = _same(named, monkeypatch)
    assert out[2][0] == "error" and hits >= 2


def test_windows_and_streams_vary_within_a_shape(monkeypatch):
    """Window ranges and steps and stream IRIs are slots of a shape (values of the same
    length): the 400 generated queries (4 kinds x 3 dialects, 6 stream pairs, 4 windows)
    are instances of at most 12 shapes, each equal to its full parse, windows included."""
    named = list(generate(400, seed=3).items())
    out, hits = _same(named, monkeypatch)
    assert hits >= 400 - 12
    windows = {r[FIELDS.index("windows")] for r in out}
    assert len({w.spec for ws in windows for w in ws}) == 4
    assert len({w.stream for ws in windows for w in ws}) == 3


def test_window_values_of_a_shape_the_full_parse_reads_otherwise(monkeypatch):
    """A window value or stream that the full parse rejects, reads differently (equal
    streams, a relative IRI) or that changes the clause's length is parsed in full, with
    the full parse's result or error."""
    t = PFX + (
        "REGISTER QUERY {n} AS SELECT ?o1 FROM STREAM {s} [RANGE {r} STEP {st}] "
        "FROM STREAM {s2} [{w}] WHERE {{ ?o1 ssn:observedBy ses:A }}"
    )
    combos = [
        ("ses:A", "3000ms", "1000ms", "ses:B", "RANGE 2s"),
        ("ses:C", "2000ms", "2000ms", "ses:D", "RANGE 5s"),
        ("ses:C", "2000ms", "0000ms", "ses:D", "RANGE 5s"),  # STEP must be positive
        ("ses:C", "0000ms", "1000ms", "ses:D", "RANGE 0s"),
        ("ses:C", "2000ms", "1000ms", "ses:C", "RANGE 5s"),  # equal streams
        ("zz:C", "2000ms", "1000ms", "ses:D", "RANGE 5s"),  # unknown prefix
        ("ses:CC", "2000ms", "1000ms", "ses:D", "RANGE 5s"),  # longer: a shape of its own
        ("ses:EE", "2000ms", "1000ms", "ses:F", "RANGE 7s"),
        ("ses:C", "20000ms", "1000ms", "ses:D", "RANGE 5s"),
        ("ses:C", "2000s1", "1000ms", "ses:D", "RANGE 5s"),
        ("ses:C", "2000MS", "1000ms", "ses:D", "RANGE 5s"),
        ("<http://ex.org/s>", "2000ms", "1000ms", "ses:D", "RANGE 5s"),
        ("<http://ex.org/t>", "4000ms", "1000ms", "ses:D", "RANGE 5s"),
        ("<relative/a>", "4000ms", "1000ms", "ses:D", "RANGE 5s"),
        ("ses:C", "2000ms", "1000ms", "ses:D", "TRIPLES 5"),
        ("ses:C", "2000ms", "1000ms", "ses:D", "TRIPLES 7"),
        ("ses:C", "2000ms", "1000ms", "ses:D", "TRIPLES 0"),  # must be positive
        ("ses:C", "2000ms", "1000ms", "ses:D", "RANGE 9s"),
    ]
    named = [
        ("q%d" % i, t.format(n="q%d" % i, s=s, r=r, st=st, s2=s2, w=w))
        for i, (s, r, st, s2, w) in enumerate(combos)
    ]
    out, hits = _same(named, monkeypatch)
    errors = [r for r in out if r[0] == "error"]
    assert len(errors) == 4
    assert out[1][FIELDS.index("windows")][0].spec.range_ms == 2000
    assert out[13][FIELDS.index("windows")][0].stream == "http://localhost/relative/a"
    assert hits >= 6


def test_instances_with_other_windows_plan_their_own_windows(monkeypatch):
    """Queries of one shape with other window sizes and streams get the plans of their own
    windows: each query's plan equals the plan of its full parse."""
    from linkstream.engine.embedded import Engine

    named = []
    for d in ("csparql", "cqels", "rspql"):
        for k in (0, 2):
            for a, b in ((TRAFFIC[0], TRAFFIC[1]), (TRAFFIC[2], TRAFFIC[0])):
                for rng, step in ((2000, 1000), (3000, 2000)):
                    name = "q%d%s%d%d%s" % (k, d, rng, step, a[-3:])
                    named.append((name, template_query(k, a, b, rng, step, 0.01, d, name)))

    def plans(on: bool) -> tuple[list[str], int]:
        C._ALGEBRA_CACHE.clear()
        C._TEMPLATES.clear()
        S._SHAPES.clear()
        eng = Engine()
        eng.declare_streams(
            {"http://www.insight-centre.org/dataset/SampleEventService#" + s for s in TRAFFIC}
        )
        hits = []
        real = S.instance

        def counted(text, base):
            got = real(text, base)
            hits.append(got is not None)
            return got

        with monkeypatch.context() as m:
            m.setattr(C, "SHAPES", on)
            m.setattr(S, "instance", counted)
            return [eng.register(parse_continuous(text, default_name=n)).explain() for n, text in named], sum(
                hits
            )

    (fast, hits), (full, _) = plans(True), plans(False)
    assert hits == len(named) - 6  # one shape per kind and dialect
    assert fast == full
    assert any("RANGE 3000ms STEP 2000ms" in p and TRAFFIC[2] in p for p in fast)
