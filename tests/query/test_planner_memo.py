"""The planner's per-dictionary memo: constants are encoded by each engine's own
dictionary, and a shared algebra plans to the same operators as a fresh one."""

from __future__ import annotations

from linkstream.engine.embedded import Engine
from linkstream.operators.base import explain
from linkstream.operators.scan import ScanOperator
from linkstream.query import continuous as C
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.terms import IRI

QUERY = """PREFIX ex: <http://ex.org/>
REGISTER RSTREAM <{name}> AS
SELECT ?s ?v FROM NAMED WINDOW ex:w ON ex:s [RANGE PT3S STEP PT1S]
WHERE {{ WINDOW ex:w {{ ?s ex:p ex:{obj} ; ex:v ?v FILTER(?v > 3) }} }}"""


def _scan_constants(rq, eng: Engine) -> set[str]:
    out = set()
    for op in rq.root.walk():
        if isinstance(op, ScanOperator):
            for _, i in op.consts:
                out.add(eng.terms.term(i).value)
    return out


def test_each_engine_encodes_constants_with_its_own_dictionary():
    a, b = Engine(), Engine()
    a.share = b.share = False  # the scans as planned
    b.terms.encode_one(IRI("http://ex.org/unrelated"))  # b's ids are shifted against a's
    cq = parse_continuous(QUERY.format(name="q", obj="o"))
    ra, rb = a.register(cq), b.register(cq)
    want = {"http://ex.org/p", "http://ex.org/o", "http://ex.org/v"}
    assert _scan_constants(ra, a) == want
    assert _scan_constants(rb, b) == want
    assert a.terms.encode_one(IRI("http://ex.org/o")) != b.terms.encode_one(IRI("http://ex.org/o"))


def test_memoised_plan_equals_a_fresh_plan():
    eng, fresh = Engine(), Engine()
    eng.share = fresh.share = False
    first = [eng.register(parse_continuous(QUERY.format(name=f"q{k}", obj=f"o{k % 2}"))) for k in range(4)]
    C._ALGEBRA_CACHE.clear()
    C._TEMPLATES.clear()
    again = [fresh.register(parse_continuous(QUERY.format(name=f"q{k}", obj=f"o{k % 2}"))) for k in range(4)]
    for x, y in zip(first, again, strict=True):
        assert _scan_constants(x, eng) == _scan_constants(y, fresh)
        assert explain(x.root).count("\n") == explain(y.root).count("\n")
