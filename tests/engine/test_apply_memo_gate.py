"""The engine keeps ``Relation.apply``'s per-epoch memo on only while some operator is read
by two queries: a lone query's deltas each reach one relation, so the memo could never hit
and would cost its bookkeeping at every apply.  Results are the same either way."""

from __future__ import annotations

import numpy as np

from linkstream.engine import embedded
from linkstream.engine.embedded import Engine
from linkstream.operators import relation as R
from linkstream.query.continuous import parse_continuous

EX = "http://ex.org/"


def _query(name: str, rng: int) -> str:
    return (
        f"PREFIX ex: <{EX}>\nSELECT ?s ?o ?k WHERE {{ STREAM ex:s [RANGE {rng}s SLIDE 1s] "
        "{ ?s ex:p ?o . ?s ex:q ?k } }"
    )


def _tick(eng: Engine, step: int) -> list:
    enc = eng.dictionary.encode
    o = enc(f"<{EX}o{step}>")
    tr = [[o, enc(f"<{EX}p>"), enc(f'"{step}"')], [o, enc(f"<{EX}q>"), enc(f"<{EX}k{step % 3}>")]]
    eng.ingest(EX + "s", 1000 * step + 10, np.array(tr, dtype=np.int64))
    res = eng.tick(1000 * (step + 1), list(eng.queries))
    return [(name, list(res[name])) for name in sorted(eng.queries)]


def test_the_memo_is_on_only_while_an_operator_has_two_queries():
    lone = Engine()
    lone.register(parse_continuous(_query("a", 2), default_name="a"))
    _tick(lone, 0)
    assert R._memo_on is False  # one query: no delta reaches two relations
    eng = Engine()
    eng.register(parse_continuous(_query("a", 2), default_name="a"))
    eng.register(parse_continuous(_query("b", 3), default_name="b"))
    _tick(eng, 0)
    assert R._memo_on is True  # the stream's window, graph, scans and join are read by both
    eng.unregister("b")
    _tick(eng, 1)
    assert R._memo_on is False
    R.forget_applied()


def test_results_do_not_depend_on_the_memo(monkeypatch):
    def run(record: bool) -> list:
        real = R.forget_applied
        monkeypatch.setattr(embedded, "forget_applied", lambda on: real(on and record))
        eng = Engine()
        for name, rng in (("a", 2), ("b", 3), ("c", 2)):
            eng.register(parse_continuous(_query(name, rng), default_name=name))
        return [_tick(eng, step) for step in range(8)]

    with_memo = run(True)
    without = run(False)
    assert with_memo == without
    assert sum(len(lines) for tick in with_memo for _, lines in tick) > 10
    R.forget_applied()
