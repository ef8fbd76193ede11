"""Engine epochs: queries with nothing new are not pulled, and results do not change."""

from __future__ import annotations

import numpy as np
import pytest

from linkstream.engine import dirty
from linkstream.engine.embedded import Engine
from linkstream.operators.mjoin import MJoinOperator
from linkstream.query.continuous import parse_continuous

EX = "http://ex.org/"


def _query(name: str, stream: str, rng: int = 2) -> str:
    return (
        f"PREFIX ex: <{EX}>\nSELECT ?s ?o ?k WHERE {{ STREAM ex:{stream} [RANGE {rng}s SLIDE 1s] "
        f"{{ ?s ex:p ?o . ?s ex:q ?k }} ?k ex:label ?l }}"
    )


def _run(monkeypatch, skip: bool, share: bool = False):
    if not skip:
        monkeypatch.setattr(dirty, "quiet_windows", lambda rq: False)
    eng = Engine()
    # unshared: every query on plain windows (a shared join's router is driven by the
    # clock, and the queries reading it are updated at every epoch)
    eng.share = share
    enc = eng.dictionary.encode
    eng.add_static(
        None, np.array([[enc(f"<{EX}k{i}>"), enc(f"<{EX}label>"), enc(f'"k{i}"')] for i in range(3)])
    )
    rqs = [
        eng.register(parse_continuous(_query("a", "s1"), default_name="a")),
        eng.register(parse_continuous(_query("b", "s2"), default_name="b")),
        eng.register(parse_continuous(_query("c", "s2", 3), default_name="c")),
    ]
    out = []
    pulls = []
    for step in range(12):
        t = 1000 * step + 10
        # s1 gets an element every epoch; s2 only in the first three (then it is quiet)
        streams = ["s1", "s2"] if step < 3 else ["s1"]
        for s in streams:
            o = enc(f"<{EX}o{s}{step}>")
            tr = [[o, enc(f"<{EX}p>"), enc(f'"{step}"')], [o, enc(f"<{EX}q>"), enc(f"<{EX}k{step % 3}>")]]
            eng.ingest(EX + s, t, np.array(tr, dtype=np.int64))
        if step == 8:  # a static change reaches every query, quiet or not
            eng.add_static(None, np.array([[enc(f"<{EX}k1>"), enc(f"<{EX}label>"), enc('"one"')]]))
        res = eng.tick(1000 * (step + 1), [q.name for q in rqs])
        out.append(res)
        pulls.append({q.name: [op._epoch for op in q.ops if isinstance(op, MJoinOperator)] for q in rqs})
    return out, pulls, eng


def test_quiet_queries_are_skipped_without_changing_results(monkeypatch):
    got, pulls, eng = _run(monkeypatch, skip=True)
    with monkeypatch.context() as m:
        want, _, _ = _run(m, skip=False)
    assert got == want
    assert any(lines for res in got for lines in res.values())  # not vacuous
    # b and c (stream s2) stop being pulled once their windows no longer move ...
    b_epochs = [p["b"][0] for p in pulls]
    assert b_epochs[6] == b_epochs[7], b_epochs
    # ... but a static change is delivered to them
    assert b_epochs[8] == 9, b_epochs
    # a (stream s1) is pulled every epoch
    assert [p["a"][0] for p in pulls] == list(range(1, 13))
    # a quiet RStream query still reports its (unchanged) result at every report time
    assert all(res["c"] == [] or res["c"][0].startswith('{"query": "c", "t": ') for res in got)


def test_shared_plans_give_the_same_results(monkeypatch):
    got, _, _ = _run(monkeypatch, skip=True, share=True)
    with monkeypatch.context() as m:
        want, _, _ = _run(m, skip=False, share=False)
    assert got == want


@pytest.mark.parametrize("stream", ["s1", "s2"])
def test_registered_between_epochs_gets_its_first_update(monkeypatch, stream):
    _, _, eng = _run(monkeypatch, skip=True)
    late = eng.register(parse_continuous(_query("late", stream), default_name="late"))
    res = eng.tick(13000, ["late"])
    assert late.stats.reports == 1
    assert isinstance(res["late"], list)


def _constant_queries(n: int) -> dict[str, str]:
    """``n`` pattern queries that differ in their subject constant (LSBench Q1's shape)."""
    return {
        f"u{i}": f"PREFIX ex: <{EX}>\nSELECT ?p ?o WHERE {{ STREAM ex:s1 [RANGE 3s SLIDE 1s] {{ ex:u{i} ?p ?o }} }}"
        for i in range(n)
    }


def _run_constants(monkeypatch, keyed: bool, share: bool):
    if not keyed:
        monkeypatch.setattr(dirty, "quiet_windows", lambda rq: False)
    eng = Engine()
    eng.share = share
    enc = eng.dictionary.encode
    rqs = [eng.register(parse_continuous(t, default_name=n)) for n, t in _constant_queries(20).items()]
    out, pulled = [], []
    for step in range(10):
        # one user per element: u(step % 4) -- the other 16 constants never arrive
        u = enc(f"<{EX}u{step % 4}>")
        eng.ingest(EX + "s1", 1000 * step + 5, np.array([[u, enc(f"<{EX}p>"), enc(f'"{step}"')]]))
        before = {q.name: q.output.view._epoch_seen() for q in rqs}
        out.append(dict(eng.tick(1000 * (step + 1), [q.name for q in rqs])))
        pulled.append({q.name for q in rqs if q.output.view._epoch_seen() != before[q.name]})
    return out, pulled


@pytest.mark.parametrize("share", [False, True])
def test_keyed_scans_touch_only_the_queries_whose_constant_arrived(monkeypatch, share):
    got, pulled = _run_constants(monkeypatch, keyed=True, share=share)
    with monkeypatch.context() as m:
        want, _ = _run_constants(m, keyed=False, share=share)
    assert got == want
    assert sum(len(lines) for res in got for lines in res.values()) > 10  # not vacuous
    # after the first epoch (every query is evaluated once), only u0..u3 are ever looked at
    assert set().union(*pulled[1:]) <= {"u0", "u1", "u2", "u3"}, pulled
    assert all(not lines for res in got for n, lines in res.items() if n not in {"u0", "u1", "u2", "u3"})


class _Looked(dict):
    """A keyed shape's constants -> queries that counts how often a tick reads it."""

    looked = 0

    def items(self):
        type(self).looked += 1
        return super().items()

    def get(self, *a):
        type(self).looked += 1
        return super().get(*a)


@pytest.mark.parametrize("few", [0, 8])
def test_a_lone_query_stops_the_keyed_check_once_it_is_dirty(monkeypatch, few):
    """A query alone on a graph with two constant shapes (a predicate; a predicate and an
    object) is dirty once the first shape finds its constant: the second is not read
    (``FEW_USERS`` 0: every shape is read, same results)."""
    monkeypatch.setattr(dirty, "FEW_USERS", few)
    eng = Engine()
    eng.share = False  # (plain windows: a shared join's router is looked at otherwise)
    enc = eng.dictionary.encode
    q = f"PREFIX ex: <{EX}>\nSELECT ?s ?o WHERE {{ STREAM ex:s1 [RANGE 2s SLIDE 1s] {{ ?s ex:p ?o . ?s ex:q ex:k }} }}"
    eng.register(parse_continuous(q, default_name="a"))
    (kg,) = eng._deps.keyed.values()
    assert len(kg.shapes) == 2
    for positions in list(kg.shapes):
        kg.shapes[positions] = _Looked(kg.shapes[positions])
    _Looked.looked = 0
    lines = []
    for step in range(4):
        s = enc(f"<{EX}o{step}>")
        tr = [[s, enc(f"<{EX}p>"), enc(f'"{step}"')], [s, enc(f"<{EX}q>"), enc(f"<{EX}k>")]]
        eng.ingest(EX + "s1", 1000 * step + 10, np.array(tr, dtype=np.int64))
        lines += eng.tick(1000 * (step + 1), ["a"])["a"]
    assert len(lines) >= 4
    # each tick's graph delta holds both constants: after the first tick (a new query is
    # evaluated anyway), one shape is read per tick -- or both, without the early stop
    assert _Looked.looked == (3 if few else 6), _Looked.looked
