"""Keyed groups: RStream pattern queries that differ in one constant are served in one
pass per epoch (engine/keyed.py) and answer exactly as each on its own operators."""

from __future__ import annotations

import random
import time

import numpy as np

from linkstream.engine import keyed
from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous

EX = "http://ex.org/"
S = EX + "s"


def _text(i: int, user: int, kind: str) -> str:
    w = "[RANGE 3s SLIDE 1s]" if kind != "count" else "[TRIPLES 5]"
    if kind == "swap":  # other output order: a group of its own
        return f"SELECT ?o ?p WHERE {{ STREAM <{S}> {w} {{ <{EX}u{user}> ?p ?o }} }}"
    if kind == "obj":  # the constant in the object position
        return f"SELECT * WHERE {{ STREAM <{S}> {w} {{ ?s ?p <{EX}u{user}> }} }}"
    if kind == "proj":  # ?o projected away: a row may come several times (bag semantics)
        return f"SELECT ?p WHERE {{ STREAM <{S}> {w} {{ <{EX}u{user}> ?p ?o }} }}"
    if kind == "istream":  # same pattern, another mode (RSP-QL): on its own operators
        return (
            f"PREFIX : <{EX}>\nREGISTER ISTREAM <q{i}> AS SELECT ?p ?o FROM NAMED WINDOW :w ON <{S}> "
            f"[RANGE PT3S STEP PT1S] WHERE {{ WINDOW :w {{ <{EX}u{user}> ?p ?o }} }}"
        )
    return f"SELECT ?p ?o WHERE {{ STREAM <{S}> {w} {{ <{EX}u{user}> ?p ?o }} }}"


def _workload(n: int, seed: int, kinds: list[str] | None = None) -> dict[str, str]:
    rnd = random.Random(seed)
    kinds = kinds or ["plain"] * 6 + ["swap", "obj", "istream", "count"]
    return {f"q{i}": _text(i, rnd.randrange(6), rnd.choice(kinds)) for i in range(n)}


def _element(eng: Engine, step: int, rnd: random.Random) -> np.ndarray:
    enc = eng.dictionary.encode
    rows = []
    for _ in range(rnd.randrange(0, 4)):
        u, v = rnd.randrange(6), rnd.randrange(6)
        p = rnd.choice(["knows", "likes"])
        rows.append([enc(f"<{EX}u{u}>"), enc(f"<{EX}{p}>"), enc(f"<{EX}u{v}>")])
    if step % 4 == 0 and rows:  # a triple twice in the window (a graph is a set)
        rows.append(list(rows[0]))
    return np.array(rows, dtype=np.int64).reshape(-1, 3)


def _run(grouped: bool, blocks: bool, seed: int = 3, kinds: list[str] | None = None) -> tuple[list, Engine]:
    eng = Engine()
    eng.group_keyed = grouped
    texts = _workload(40, seed, kinds)
    names = [eng.register(parse_continuous(texts[n], default_name=n)).name for n in list(texts)[:30]]
    rnd = random.Random(seed)
    out = []
    for step in range(16):
        if step == 4:  # late registrations: known constants and new ones
            for n in list(texts)[30:]:
                names.append(eng.register(parse_continuous(texts[n], default_name=n)).name)
        if step == 7:
            eng.unregister(names[2])
            eng.unregister(names[31])
        if step == 9:
            eng.replanned(eng.queries[names[5]])  # leaves its group, goes on alone
        if step not in (10, 11):  # two quiet epochs
            eng.ingest(S, 1000 * step + 10, _element(eng, step, rnd))
        res = eng.tick(1000 * (step + 1), list(eng.queries), blocks=blocks)
        out.append(res.text() if blocks else {k: list(v) for k, v in res.written().items() if v})
    return out, eng


def test_grouped_reports_equal_the_per_query_path() -> None:
    for blocks in (True, False):
        got, eng = _run(True, blocks)
        want, ref = _run(False, blocks)
        assert got == want
        assert len(eng._grouped) > 20  # most queries were grouped ...
        assert not ref._grouped
        assert any(r[0] if blocks else r for r in got)  # ... and they wrote lines
        for name, rq in eng.queries.items():
            st, rst = rq.stats, ref.queries[name].stats
            assert (st.rows, st.reports) == (rst.rows, rst.reports), name
            # the views (brought up to date when read) hold what the per-query path built
            view, rview = rq.output.view, ref.queries[name].output.view
            assert _decoded(eng, view.result.rows) == _decoded(ref, rview.result.rows), name
            assert view.loud() == rview.loud() and eng.skips_quietly(rq) == ref.skips_quietly(
                ref.queries[name]
            ), name


def test_repeated_rows_equal_the_per_query_path() -> None:
    """Projections that repeat a row (several lines of one row, by its count) and rows of
    several lines per key: grouped as the per-query path writes them."""
    for blocks in (True, False):
        got, eng = _run(True, blocks, seed=5, kinds=["proj"] * 3 + ["plain"])
        want, _ = _run(False, blocks, seed=5, kinds=["proj"] * 3 + ["plain"])
        assert got == want
        assert len(eng._grouped) > 20
        text = "".join(r[1] for r in got) if blocks else str(got)
        assert text.count('"p"') > 100  # (lines written)


def test_state_merge_by_packed_rows_equals_the_lexsort_merge(monkeypatch) -> None:
    """A group's state is merged through packed rows when its ids fit (small ids here);
    with a lower bound on the ids the lexsort path takes over (for good or from the
    first large id on): the same reports either way."""
    calls: dict[str, int] = {}
    for meth in ("_merge_packed", "_merge_sorted"):
        orig = getattr(keyed.KeyedGroup, meth)

        def spy(self, *a, _orig=orig, _meth=meth):
            calls[_meth] = calls.get(_meth, 0) + 1
            return _orig(self, *a)

        monkeypatch.setattr(keyed.KeyedGroup, meth, spy)
    want, _ = _run(True, True)
    assert calls.get("_merge_packed") and not calls.get("_merge_sorted")
    for limit in (1, 8):  # 1: never packed; 8: the first ids fit, later ones do not
        calls.clear()
        monkeypatch.setattr(keyed, "_LIMIT", limit)
        got, _ = _run(True, True)
        assert got == want, limit
        assert calls.get("_merge_sorted"), limit
        assert bool(calls.get("_merge_packed")) == (limit > 1), limit


def _decoded(eng: Engine, rows) -> list[tuple]:
    cols = [eng.dictionary.decode_many(c) if len(c) else [] for c in rows.cols]
    return sorted(zip(*cols, rows.counts.tolist()))


def test_grouped_lines_are_the_window_contents() -> None:
    """Independent of either path: an RStream report of ``<u> ?p ?o`` over a 3 s window is
    the distinct (p, o) of the triples with subject u that arrived in [c - 3000, c)."""
    eng = Engine()
    rnd = random.Random(11)
    for u in range(6):
        eng.register(parse_continuous(_text(0, u, "plain"), default_name=f"u{u}"))
    assert len(eng._grouped) == 6
    arrived: list[tuple[int, np.ndarray]] = []
    dec = eng.dictionary.decode_many
    for step in range(12):
        el = _element(eng, step, rnd)
        eng.ingest(S, 1000 * step + 10, el)
        arrived.append((1000 * step + 10, el))
        c = 1000 * (step + 1)
        res = eng.tick(c, [f"u{u}" for u in range(6)], blocks=True)
        n, text = res.text()
        lines = text.splitlines()
        assert n == len(lines)
        for u in range(6):
            subj = eng.dictionary.encode(f"<{EX}u{u}>")
            rows = {(int(p), int(o)) for t, el in arrived if c - 3000 <= t < c for s, p, o in el if s == subj}
            want = sorted(rows)
            got = [x for x in lines if x.startswith(f'{{"query": "u{u}", "t": {c}, ')]
            assert len(got) == len(want)
            for line, (p, o) in zip(got, want):
                ps, os_ = dec(np.array([p, o]))
                assert f'"p": "{ps}"' in line and f'"o": "{os_}"' in line


def test_replay_with_quiet_gaps_equals_the_per_query_path(tmp_path) -> None:
    """Replay (grouped reports, quiet-gap skipping) over a stream with long gaps."""
    rnd = random.Random(5)
    lines = []
    t = 1_700_000_000_000
    for k in range(60):
        t += rnd.choice([300, 700, 1000, 25_000])  # some gaps of many report times
        g = f"<{EX}ev{k}>"
        secs, milli = divmod(t, 1000)
        when = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{milli:03d}Z"
        stamp = f'"{when}"^^<http://www.w3.org/2001/XMLSchema#dateTime>'
        lines.append(f"{g} <http://www.w3.org/ns/prov#generatedAtTime> {stamp} .")
        u, v = rnd.randrange(6), rnd.randrange(6)
        lines.append(f"<{EX}u{u}> <{EX}knows> <{EX}u{v}> {g} .")
    path = tmp_path / "s.nq"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    texts = _workload(30, 8)
    outs = []
    for grouped in (True, False):
        eng = Engine()
        eng.group_keyed = grouped
        rqs = [eng.register(parse_continuous(q, default_name=n)) for n, q in texts.items()]
        out = tmp_path / f"out{grouped}.jsonl"
        with open(out, "w", encoding="utf-8") as f:
            res = replay(eng, rqs, [(S, str(path))], f)
        outs.append((out.read_bytes(), res.rows, {q.name: (q.stats.rows, q.stats.reports) for q in rqs}))
        assert bool(eng._grouped) is grouped
    assert outs[0] == outs[1]
    assert outs[0][1] > 0


def test_groups_between_other_queries_keep_the_name_order() -> None:
    """A group whose names do not interleave with other queries' goes in as one block."""
    texts = {f"m{u}": _text(0, u, "plain") for u in range(6)}
    texts["a"] = (
        f"SELECT ?p ?o WHERE {{ STREAM <{S}> [RANGE 3s SLIDE 1s] {{ <{EX}u1> ?p ?o FILTER(?o != <{EX}u0>) }} }}"
    )
    texts["z"] = f"SELECT ?s ?o WHERE {{ STREAM <{S}> [RANGE 3s SLIDE 1s] {{ ?s ?p ?o }} }}"
    outs = []
    for grouped in (True, False):
        eng = Engine()
        eng.group_keyed = grouped
        for n, q in texts.items():
            eng.register(parse_continuous(q, default_name=n))
        assert set(eng._grouped) == ({f"m{u}" for u in range(6)} if grouped else set())
        rnd = random.Random(2)
        got = []
        for step in range(10):
            eng.ingest(S, 1000 * step + 10, _element(eng, step, rnd))
            got.append(eng.tick(1000 * (step + 1), set(texts), blocks=True).text())
        outs.append(got)
    assert outs[0] == outs[1]
    texts_out = [t for _, t in outs[0]]
    assert any('"query": "a"' in t and '"query": "m' in t and '"query": "z"' in t for t in texts_out)
