"""Registration finds a shared join + router again without building it (``Sharing.memo``)
and orders signatures by remembered term keys (``term_key.TermKeys``): the same operators,
plans and reports as building and rendering them for every query."""

from __future__ import annotations

import random

import numpy as np
from rdflib import URIRef

from linkstream.engine.embedded import Engine
from linkstream.engine.term_key import TermKeys, plain_value, term_key
from linkstream.operators.timed_window import TimedWindowOperator
from linkstream.query.continuous import parse_continuous
from linkstream.query.expressions import Const

EX = "http://ex.org/"
S, T = EX + "s", EX + "t"


def _query(rnd: random.Random, wide: int) -> str:
    """One of five shapes over streams S and T, random constants, ranges (up to ``wide``
    seconds) and steps."""
    w = lambda: f"[RANGE {rnd.randint(1, wide)}s STEP {rnd.choice([1, 1, 2])}s]"  # noqa: E731
    u = f"<{EX}u{rnd.randrange(5)}>"
    kind = rnd.randrange(5)
    if kind == 0:
        return f"SELECT ?p ?o WHERE {{ STREAM <{S}> {w()} {{ {u} ?p ?o }} }}"
    if kind == 1:  # stream-stream join on one stream, two windows
        return (
            f"SELECT ?a ?x ?y WHERE {{ STREAM <{S}> {w()} {{ ?a <{EX}p0> ?x }} "
            f"STREAM <{S}> {w()} {{ ?a <{EX}p1> ?y }} FILTER(?x != ?y) }}"
        )
    if kind == 2:  # a constant partnering a join variable (hidden variable of the router)
        return (
            f"SELECT ?x ?y WHERE {{ STREAM <{S}> {w()} {{ {u} <{EX}p0> ?x }} "
            f"STREAM <{T}> {w()} {{ ?x <{EX}p2> ?y }} }}"
        )
    if kind == 3:  # a count aggregate over a join of two streams
        return (
            f"SELECT ?a (COUNT(?y) AS ?n) WHERE {{ STREAM <{S}> {w()} {{ ?a <{EX}p1> ?x }} "
            f"STREAM <{T}> {w()} {{ ?x <{EX}p2> ?y }} }} GROUP BY ?a"
        )
    return (  # count windows
        f"SELECT ?a ?x ?y WHERE {{ STREAM <{S}> [TRIPLES {rnd.randint(3, 12)}] {{ ?a <{EX}p0> ?x }} "
        f"STREAM <{T}> [TRIPLES {rnd.randint(3, 12)}] {{ ?x <{EX}p2> ?y }} }}"
    )


def _graph(eng: Engine) -> tuple[list, int]:
    """Every query's operators: type, signature and children, operators numbered by identity."""
    ids: dict[int, int] = {}
    out = []
    for name, rq in sorted(eng.queries.items()):
        ops = rq.root.walk()
        for o in ops:
            ids.setdefault(id(o), len(ids))
        out.append(
            (
                name,
                [
                    (
                        ids[id(o)],
                        type(o).__name__,
                        repr(getattr(o, "sig", None)),
                        [ids[id(c)] for c in o.children],
                    )
                    for o in ops
                ],
            )
        )
    return out, len(eng.operators)


def _run(memo: bool, seed: int) -> tuple[list, list, Engine]:
    """Registers queries in three waves with data, reports and unregistrations between
    them (windows that started cannot grow: later queries get windows of higher keys)."""
    rnd = random.Random(seed)
    eng = Engine()
    eng._sharing.memo = memo
    enc = eng.dictionary.encode
    texts = [_query(rnd, 4 + 6 * (i // 80)) for i in range(240)]  # wider waves after the first
    reports, graphs = [], []
    names: list[str] = []
    step = 0
    for wave in range(3):
        for i in range(80):
            name = f"q{wave}_{i:03d}"
            eng.register(parse_continuous(texts[80 * wave + i], default_name=name))
            names.append(name)
        graphs.append(_graph(eng))
        for _ in range(4):
            for stream in (S, T):
                rows = [
                    [
                        enc(f"<{EX}u{rnd.randrange(5)}>"),
                        enc(f"<{EX}p{rnd.randrange(3)}>"),
                        enc(f"<{EX}u{rnd.randrange(5)}>"),
                    ]
                    for _ in range(rnd.randrange(1, 6))
                ]
                eng.ingest(stream, 1000 * step + 10, np.array(rows, dtype=np.int64))
            step += 1
            reports.append(eng.tick(1000 * step, sorted(eng.queries), blocks=True).text())
        for name in rnd.sample(names, 20):
            eng.unregister(name)
            names.remove(name)
        graphs.append(_graph(eng))
    return graphs, reports, eng


def test_found_routers_give_the_operators_and_reports_of_building_them() -> None:
    for seed in (1, 2):
        g_on, r_on, eng = _run(True, seed)
        g_off, r_off, ref = _run(False, seed)
        assert g_on == g_off, seed
        assert r_on == r_off, seed
        assert eng._sharing.memo_hits > 100 and ref._sharing.memo_hits == 0
        # late registrations met started windows: windows of higher keys were made
        keys = {op.key for op in eng.operators.values() if isinstance(op, TimedWindowOperator)}
        assert ("timed", 1) in keys, keys


def test_term_keys_equal_term_key() -> None:
    seen: list[str] = []
    text = lambda i: seen.append(str(i)) or f"<t{i}>"  # noqa: E731
    keys = TermKeys(text)
    values = [
        ("w", EX + "s", (("const", 5), ("var", "?0"), ("hid", 0))),
        ("c", EX + "s", 1000, (("var", "?0"), ("const", 7), ("var", "?1"))),
        ("w", EX + "s", (("const", True), ("var", "?0"), ("var", "?1"))),  # a bool: not remembered
        ("w", URIRef(EX + "s"), (("const", 5),)),  # a str subclass: rendered otherwise, not remembered
        ("s", (Const(URIRef(EX + "x"), 9),), ()),
    ]
    for v in values:
        assert keys.plain(v) == term_key(v, text) == keys.plain(v)
    assert [plain_value(v) for v in values] == [True, True, False, False, False]
    assert keys.plain(values[2]) != keys.plain(
        values[2][:2] + ((("const", 1), ("var", "?0"), ("var", "?1")),)
    )
    n = len(seen)
    keys.plain(values[0])
    assert len(seen) == n  # remembered: nothing decoded again

    class Op:  # an interned operator: its signature, set once (a switch gets a new one)
        sig: object = ("ScanOperator", ("?0",), (("const", 3),), ())

    op = Op()
    assert keys.of_op(op) == term_key(op.sig, text) == keys.of_op(op)
    op.sig = ("switched", 12)
    assert keys.of_op(op) == term_key(("switched", 12), text)


def _freed_window_run(memo: bool) -> tuple[list, list[str], Engine]:
    """A lower window freed and made again larger: the next query of a signature whose
    router reads a higher window is built on the lower one (as without the memo)."""
    eng = Engine()
    eng._sharing.memo = memo
    enc = eng.dictionary.encode

    def join(pa: str, pb: str, r: int) -> str:
        return (
            f"SELECT ?a ?x ?y WHERE {{ STREAM <{S}> [RANGE {r}s STEP 1s] {{ ?a <{EX}{pa}> ?x }} "
            f"STREAM <{S}> [RANGE {r}s STEP 1s] {{ ?a <{EX}{pb}> ?y }} }}"
        )

    reports = []
    for step, (name, text, drop) in enumerate(
        [
            ("a", join("p0", "p1", 2), None),  # window 0 of S, range 2 s; it starts
            ("b", join("p1", "p2", 8), None),  # window 0 cannot grow: window 1
            ("c", join("p0", "p2", 8), "a"),  # a freed window 0: made again, range 8 s
            ("b2", join("p1", "p2", 8), None),  # b's signature: window 0 fits now
        ]
    ):
        if drop:
            eng.unregister(drop)
        eng.register(parse_continuous(text, default_name=name))
        rows = [[enc(f"<{EX}u{i % 2}>"), enc(f"<{EX}p{i % 3}>"), enc(f"<{EX}o{i}>")] for i in range(6)]
        eng.ingest(S, 1000 * step + 10, np.array(rows, dtype=np.int64))
        reports.append(eng.tick(1000 * (step + 1), sorted(eng.queries), blocks=True).text())
    return _graph(eng)[0], reports, eng


def test_a_lower_window_that_fits_again_is_taken_as_without_the_memo() -> None:
    g_on, r_on, eng = _freed_window_run(True)
    g_off, r_off, _ = _freed_window_run(False)
    assert g_on == g_off
    assert r_on == r_off
    b = {type(o).__name__ + repr(getattr(o, "key", "")) for o in eng.queries["b"].root.walk()}
    b2 = {type(o).__name__ + repr(getattr(o, "key", "")) for o in eng.queries["b2"].root.walk()}
    assert "TimedWindowOperator('timed', 1)" in b and "TimedWindowOperator('timed', 0)" in b2, (b, b2)
