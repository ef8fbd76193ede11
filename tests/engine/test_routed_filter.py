"""Routed blocks with filters (engine/routed_filter.py, routed_plain.py): SELECT and ASK queries that
differ in a FILTER / HAVING constant are kept in one block (one vectorised filter for all
members) and answer exactly as each through its own operators: constants of other
datatypes, NaN, unbound values, values equal to the constant, equal constants, late
registrations, unregistering and replanning."""

from __future__ import annotations

import random

import numpy as np

from linkstream.engine.embedded import Engine
from linkstream.engine.routed_filter import Slots, parametrise
from linkstream.query.continuous import parse_continuous
from linkstream.query.expressions import And, Cmp, Const, Or, Var

EX = "http://ex.org/"
POSTS = EX + "posts"
XSD = "http://www.w3.org/2001/XMLSchema#"
PRE = f"PREFIX : <{EX}>\nPREFIX xsd: <{XSD}>\n"
USERS = 5
#: constants: numbers of each type (some equal to values in the data), other datatypes
CONSTS = ["1", "2", "2.0", "2.5", "3e0", '"2"^^xsd:integer', '"NaN"^^xsd:double', '"abc"', ":u1", "true"]
#: the values of :score in the data (numbers of each type, NaN, a string, an IRI)
VALUES = [
    '"1"^^<{x}integer>',
    '"2"^^<{x}integer>',
    '"2.0"^^<{x}decimal>',
    '"2.5"^^<{x}decimal>',
    '"3"^^<{x}double>',
    '"NaN"^^<{x}double>',
    '"abc"',
    "<http://ex.org/u1>",
]


def _text(rnd: random.Random) -> str:
    w = f"[RANGE {rnd.randint(1, 3)}s SLIDE 1s]"
    c, op = rnd.choice(CONSTS), rnd.choice(["<", "<=", ">", ">=", "=", "!="])
    kind = rnd.choice(["f", "f", "or", "having", "opt", "ask", "ask_opt", "one", "ask_one"])
    pat = "?user :creator ?post . ?post :score ?v"
    if kind == "f":
        return PRE + f"SELECT ?user ?v WHERE {{ STREAM <{POSTS}> {w} {{ {pat} }} FILTER(?v {op} {c}) }}"
    if kind == "or":
        c2 = rnd.choice(CONSTS)
        return (
            PRE + f"SELECT ?post ?v WHERE {{ STREAM <{POSTS}> {w} {{ {pat} }} "
            f"FILTER(?v {op} {c} || {c2} < ?v && ?user != :u2) }}"
        )
    if kind == "one":  # one pattern (not routed): blocks over the shared scan (routed_plain.py)
        return (
            PRE
            + f"SELECT ?post ?v WHERE {{ STREAM <{POSTS}> {w} {{ ?post :score ?v }} FILTER(?v {op} {c}) }}"
        )
    if kind == "ask_one":
        return (
            PRE + f"ASK WHERE {{ STREAM <{POSTS}> {w} {{ ?post :score ?v }} FILTER(?v {op} {c} || ?v = 1) }}"
        )
    if kind == "ask":
        return PRE + f"ASK WHERE {{ STREAM <{POSTS}> {w} {{ {pat} }} FILTER(?v + ?v {op} {c}) }}"
    if kind == "ask_opt":
        opt = "?user :creator ?post OPTIONAL { ?post :score ?v }"
        return PRE + f"ASK WHERE {{ STREAM <{POSTS}> {w} {{ {opt} }} FILTER(?v {op} {c}) }}"
    if kind == "opt":  # ?v unbound in some rows
        return (
            PRE + f"SELECT ?user ?post ?v WHERE {{ STREAM <{POSTS}> {w} {{ ?user :creator ?post "
            f"OPTIONAL {{ ?post :score ?v }} }} FILTER(!(?v {op} {c})) }}"
        )
    k = rnd.randrange(4)
    return (
        PRE
        + f"SELECT ?user (COUNT(?post) AS ?n) (MAX(?v) AS ?m) WHERE {{ STREAM <{POSTS}> {w} {{ {pat} }} }} "
        f"GROUP BY ?user HAVING (COUNT(?post) {op} {k})"
    )


def _element(eng: Engine, rnd: random.Random) -> np.ndarray:
    enc = eng.dictionary.encode
    rows = []
    for _ in range(rnd.randrange(0, 5)):
        u, p = rnd.randrange(USERS), rnd.randrange(8)
        rows.append([enc(f"<{EX}u{u}>"), enc(f"<{EX}creator>"), enc(f"<{EX}post{p}>")])
        if p != 7:  # post7 has no score
            v = VALUES[rnd.randrange(len(VALUES))].format(x=XSD)
            rows.append([enc(f"<{EX}post{p}>"), enc(f"<{EX}score>"), enc(v)])
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def _run(blocks: bool, seed: int) -> tuple[list, Engine]:
    eng = Engine()
    eng.routed_blocks = blocks
    rnd = random.Random(seed)
    texts = {f"q{i}": _text(rnd) for i in range(70)}
    texts["same"] = texts["q0"]  # an equal query (same constant, its own name)
    names = list(texts)
    for n in names[:50]:
        eng.register(parse_continuous(texts[n], default_name=n))
    data = random.Random(seed + 1)
    out = []
    for step in range(14):
        if step == 4:  # late registrations, on running slots and new ones
            for n in names[50:]:
                eng.register(parse_continuous(texts[n], default_name=n))
        if step == 7:
            for n in names[1:6] + names[52:54]:
                eng.unregister(n)
        if step == 9:  # they leave their blocks (plain ones among them) and go on alone
            busy = [n for n in names[6:50] if len(eng.queries[n].output.view.result.rows)]
            for n in busy[::4]:
                eng.replanned(eng.queries[n])
        if step != 10:  # a quiet epoch
            eng.ingest(POSTS, 1000 * step + 10, _element(eng, data))
        res = eng.tick(1000 * (step + 1), list(eng.queries), blocks=step % 2 == 0)
        out.append(res.text())
        out.append({n: rq.output.view.result.rows.cols.tolist() for n, rq in eng.queries.items()})
        deltas = {n: rq.output.update(eng.epoch) for n, rq in eng.queries.items()}
        out.append({n: (d.vars, d.cols.tolist(), d.counts.tolist()) for n, d in deltas.items() if len(d)})
    return out, eng


def test_filtered_blocks_report_what_each_query_reports_alone() -> None:
    for seed in (3, 11):
        got, eng = _run(True, seed)
        want, _ = _run(False, seed)
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert a == b, f"seed {seed}, report {i // 3}, part {i % 3}"
        assert sum(n for n, _ in got[0::3]) > 200  # lines were written
        filtered = [b for b in eng._blocks.blocks.values() if b.slots is not None]
        assert filtered
        # members that differ in their constants share blocks (more slots than blocks)
        assert sum(len(b.by_gid) for b in filtered) > len(filtered)
        assert sum(len(b.gid_of) for b in filtered) > 30
        assert any(b.key[0] == "plain" and len(b.by_gid) > 1 for b in filtered)


def test_unregistering_every_filtered_query_frees_the_blocks() -> None:
    _, eng = _run(True, 3)
    for n in list(eng.queries):
        eng.unregister(n)
    assert not eng._blocks.blocks
    assert eng.operator_count() == 0


def test_parametrise_replaces_the_constant_operands_of_comparisons() -> None:
    c1, c2 = Const(None, 7), Const(None, 9)  # type: ignore[arg-type]
    e = Or(Cmp(">", Var("v"), c1), And(Cmp("<", c2, Var("w")), Cmp("=", Var("v"), Var("w"))))
    params: list[int] = []
    t = parametrise(e, params)
    assert params == [7, 9]
    assert t == Or(Cmp(">", Var("v"), Var("%param0")), And(Cmp("<", Var("%param1"), Var("w")), e.b.b))


def test_slots_expand_rows_once_per_slot_of_their_group() -> None:
    from linkstream.operators.batch import Batch

    s = Slots(1)
    a, b, c = s.slot(1, (10,)), s.slot(2, (10,)), s.slot(1, (11,))
    assert s.slot(1, (10,)) == a
    d = Batch(("%group", "x"), np.array([[1, 2, 1, 3], [5, 6, 7, 8]]), np.array([1, 1, 2, 1]))
    got = s.expand(d)
    pairs = sorted(zip(got.cols[0].tolist(), got.cols[1].tolist(), got.counts.tolist()))
    assert pairs == sorted([(a, 5, 1), (c, 5, 1), (b, 6, 1), (a, 7, 2), (c, 7, 2)])
    only = s.expand(d, c)
    assert sorted(zip(only.cols[0].tolist(), only.cols[1].tolist())) == [(c, 5), (c, 7)]
    s.drop(a)
    assert s.gids() == {1, 2} and s.slot(1, (10,)) not in (b, c)


def test_a_query_moved_onto_a_block_members_operators_continues_like_the_old_engine() -> None:
    """A plain block starts with the second view of its chain (the first one ran on its own
    until then).  A query restored with its state (a container move) into an engine where an equal
    query is a plain block's member reads that member's operators through an attachment:
    they never ran (the block gave the member its rows), so the attachment under them had
    to be marked attached when the block started the member -- before, their first pull
    gave the shared scan's whole output once more (each row counted twice)."""
    from linkstream.operators.state import decode_state, encode_state, restore_query, snapshot_query

    text = (
        PRE
        + f"SELECT ?post ?v WHERE {{ STREAM <{POSTS}> [RANGE 4s SLIDE 1s] {{ ?post :score ?v }} FILTER(?v > 1) }}"
    )
    other = text.replace("?v > 1", "?v > 2")  # a second slot of the same block
    old, new = Engine(), Engine()
    for eng in (old, new):
        assert eng.plain_blocks
        eng.register(parse_continuous(other, default_name="o"))
    rnds = {id(old): random.Random(5), id(new): random.Random(5)}
    lines = 0
    for step in range(12):
        c = 1000 * (step + 1)
        if step == 1:  # a late member: its operators read the running scan through an attachment
            for eng in (old, new):
                eng.register(parse_continuous(text, default_name="a"))
            old.register(parse_continuous(text, default_name="b"))
        if step == 4:  # the move: b's state from the old engine, restored in the new one
            st = snapshot_query(old, "b", c - 1000)
            st = decode_state([bytes(memoryview(f)) for f in encode_state(st)])
            new.register(parse_continuous(text, default_name="b"))
            restore_query(new, "b", st, c - 1000)
        for eng in (old, new):
            eng.ingest(POSTS, c - 990, _element(eng, rnds[id(eng)]))
        want = old.tick(c, list(old.queries))
        got = new.tick(c, list(new.queries))
        # a lone view runs through its own operators; its block starts with the second view
        assert (new.queries["o"].output.view.block is None) == (step < 1)
        assert step < 1 or new.queries["a"].output.view.block is new.queries["o"].output.view.block
        for n in new.queries:
            assert got[n] == want[n], (step, n)
            lines += len(want[n]) if step > 4 else 0
    assert lines > 30, lines


def _lone_then_joined(blocks: bool) -> list:
    """A query of a template alone for three epochs, then a second one (its lone view
    enters the block that the second one starts), then a third; every report, result and
    delta."""
    eng = Engine()
    eng.routed_blocks = blocks
    base = (
        PRE
        + f"SELECT ?post ?v WHERE {{ STREAM <{POSTS}> [RANGE 5s SLIDE 1s] {{ ?post :score ?v }} FILTER(?v > 1) }}"
    )
    texts = {"a": base, "b": base.replace("?v > 1", "?v > 2"), "c": base.replace("?v > 1", "?v > 2.5")}
    rnd = random.Random(9)
    out = []
    for step in range(10):
        if step in (0, 3, 6):
            name = "abc"[step // 3]
            eng.register(parse_continuous(texts[name], default_name=name))
        if step != 4:  # (a quiet epoch)
            eng.ingest(POSTS, 1000 * step + 10, _element(eng, rnd))
        res = eng.tick(1000 * (step + 1), list(eng.queries))
        out.append(res.text())
        out.append({n: rq.output.view.result.rows.cols.tolist() for n, rq in eng.queries.items()})
        out.append({n: rq.output.update(eng.epoch).cols.tolist() for n, rq in eng.queries.items()})
        if blocks:  # the first query stays on its own operators until the second comes
            assert (eng.queries["a"].output.view.block is None) == (step < 3)
    return out


def test_a_lone_view_enters_its_block_with_the_second_query_and_reports_as_alone() -> None:
    got, want = _lone_then_joined(True), _lone_then_joined(False)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"report {i // 3}, part {i % 3}"
    assert sum(n for n, _ in got[0::3]) > 20
