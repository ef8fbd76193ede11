"""Routed blocks: the views of queries on a router's groups (LSBench Q4 / Q5 / Q10 shapes)
are kept in one pass per epoch (engine/routed.py) and answer exactly as each through its
own operators -- also across late registrations, unregistering and replanning."""

from __future__ import annotations

import random

import numpy as np

from linkstream.engine.embedded import Engine
from linkstream.query.continuous import parse_continuous

EX = "http://ex.org/"
POSTS, LIKES = EX + "posts", EX + "likes"
PRE = f"PREFIX : <{EX}>\n"
USERS = 8


def _w(rnd: random.Random) -> str:
    return f"[RANGE {rnd.randint(1, 4)}s SLIDE 1s]"


def _text(rnd: random.Random) -> str:
    u = f":u{rnd.randrange(USERS)}"
    kind = rnd.choice(["q4", "q5", "q10", "q10", "q10b"])
    if kind == "q4":
        return (
            PRE + "SELECT ?user ?p1 ?p2 ?tag WHERE {\n"
            f"  STREAM <{POSTS}> {_w(rnd)} {{ ?user :creator ?p1 . ?p1 :tag ?tag }}\n"
            f"  STREAM <{POSTS}> {_w(rnd)} {{ ?user :creator ?p2 . ?p2 :tag ?tag }}\n"
            "  FILTER(?p1 != ?p2)\n}"
        )
    if kind == "q5":
        return (
            PRE + "SELECT ?post ?friend WHERE {\n"
            f"  STREAM <{LIKES}> {_w(rnd)} {{ {u} :like ?post }}\n"
            f"  STREAM <{POSTS}> {_w(rnd)} {{ ?friend :creator ?post }}\n"
            f"  {u} :knows ?friend .\n}}"
        )
    if kind == "q10b":  # the group key projected away: counts > 1 in the view's result
        return (
            PRE + "SELECT (COUNT(?liker) AS ?n) WHERE {\n"
            f"  STREAM <{POSTS}> {_w(rnd)} {{ ?creator :creator ?post }}\n"
            f"  STREAM <{LIKES}> {_w(rnd)} {{ ?liker :like ?post }}\n"
            f"  {u} :knows ?creator .\n}} GROUP BY ?creator"
        )
    return (
        PRE + "SELECT ?creator (COUNT(?liker) AS ?likes) WHERE {\n"
        f"  STREAM <{POSTS}> {_w(rnd)} {{ ?creator :creator ?post }}\n"
        f"  STREAM <{LIKES}> {_w(rnd)} {{ ?liker :like ?post }}\n"
        f"  {u} :knows ?creator .\n}} GROUP BY ?creator"
    )


def _engine(blocks: bool) -> Engine:
    eng = Engine()
    eng.routed_blocks = blocks
    enc = eng.dictionary.encode
    knows = [(a, b) for a in range(USERS) for b in range(USERS) if a != b and (a * 3 + b) % 4 == 0]
    static = np.array(
        [[enc(f"<{EX}u{a}>"), enc(f"<{EX}knows>"), enc(f"<{EX}u{b}>")] for a, b in knows], dtype=np.int64
    )
    eng.add_static(None, static)
    return eng


def _element(eng: Engine, stream: str, step: int, rnd: random.Random) -> np.ndarray:
    enc = eng.dictionary.encode
    rows = []
    for _ in range(rnd.randrange(0, 4)):
        u, p = rnd.randrange(USERS), rnd.randrange(6)
        if stream == POSTS:
            rows.append([enc(f"<{EX}u{u}>"), enc(f"<{EX}creator>"), enc(f"<{EX}post{p}>")])
            rows.append([enc(f"<{EX}post{p}>"), enc(f"<{EX}tag>"), enc(f"<{EX}tag{p % 3}>")])
        else:
            rows.append([enc(f"<{EX}u{u}>"), enc(f"<{EX}like>"), enc(f"<{EX}post{p}>")])
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def _run(blocks: bool, seed: int = 5, replan: bool = True) -> tuple[list, Engine]:
    eng = _engine(blocks)
    rnd = random.Random(seed)
    texts = {f"q{i}": _text(rnd) for i in range(60)}
    names = list(texts)
    for n in names[:45]:
        eng.register(parse_continuous(texts[n], default_name=n))
    data = random.Random(seed + 1)
    out = []
    for step in range(18):
        if step == 5:  # late registrations: on running groups and on new ones
            for n in names[45:]:
                eng.register(parse_continuous(texts[n], default_name=n))
        if step == 8:
            for n in (names[1], names[2], names[46]):
                eng.unregister(n)
        if step == 10 and replan:  # they leave their blocks and go on alone (an aggregate among them)
            agg = [n for n in names[3:45] if "COUNT" in texts[n] and n in eng.queries]
            busy = [n for n in agg if len(eng.queries[n].output.view.result.rows)]
            assert busy
            for n in busy[:3] + [names[3]]:
                eng.replanned(eng.queries[n])
        if step not in (12, 13):  # two quiet epochs
            for k, s in enumerate((POSTS, LIKES)):
                eng.ingest(s, 1000 * step + 10 + k, _element(eng, s, step, data))
        res = eng.tick(1000 * (step + 1), list(eng.queries), blocks=step % 2 == 0)
        out.append(res.text())
        out.append({k: list(v) for k, v in res.written().items() if v})
        out.append(
            {n: (rq.output.view.result.rows.cols.tolist(), rq.stats.rows) for n, rq in eng.queries.items()}
        )
        deltas = {n: rq.output.update(eng.epoch) for n, rq in eng.queries.items()}  # this epoch's
        out.append({n: (d.vars, d.cols.tolist(), d.counts.tolist()) for n, d in deltas.items() if len(d)})
    return out, eng


def test_blocks_report_what_each_query_reports_alone() -> None:
    got, eng = _run(True)
    want, ref = _run(False)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"report {i // 4}, part {i % 4}"
    assert sum(len(v) for w in got[1::4] for v in w.values()) > 100  # lines were written
    assert eng._blocks is not None and len(eng._blocks.blocks) >= 3
    served = sum(len(b.gid_of) for b in eng._blocks.blocks.values())
    assert served > 30  # most views are kept by a block
    assert ref._blocks is None


def test_a_replanned_query_whose_operators_did_not_change_reports_as_before() -> None:
    """``Engine.replanned`` on queries that had reported (aggregates among them) and whose
    operators stay the same: every later report, line, result and delta is the one of a
    run that never replanned (an aggregate keeps its route and its first report is not
    sent again)."""
    got, _ = _run(True)
    want, _ = _run(True, replan=False)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"report {i // 4}, part {i % 4}"
    assert sum(len(v) for w in got[45::4] for v in w.values()) > 10  # lines after the replan


def test_unregistering_every_query_frees_the_blocks() -> None:
    _, eng = _run(True)
    routers = [b.router for b in eng._blocks.blocks.values()]
    assert routers
    for n in list(eng.queries):
        eng.unregister(n)
    assert not eng._blocks.blocks
    assert all(not r.blocks and r.taggers == 0 for r in routers)
    assert eng.operator_count() == 0
