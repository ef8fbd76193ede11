"""The queries of a routed block report through the block's members (engine/routed_members.py):
their lines as one text block each, a report of all of them joined, their views' results
built only when read.  Every report, line, result, delta and row count equals what each
query reports on its own -- across late registrations, unregistering a query of a shared
view or of a whole view mid-run, and replanning."""

from __future__ import annotations

import random

import pytest

from linkstream.engine import routed_members
from linkstream.engine.embedded import Engine
from linkstream.engine.routed_members import RoutedMembers
from linkstream.query.continuous import parse_continuous
from tests.engine.test_routed_blocks import LIKES, POSTS, _element, _engine, _text


def _run(members: bool, seed: int = 11) -> tuple[list, Engine, dict[str, int]]:
    eng = _engine(True)
    eng.group_routed = members
    rnd = random.Random(seed)
    texts = {f"q{i:02d}": _text(rnd) for i in range(70)}
    names = list(texts)
    for n in names[:55]:
        eng.register(parse_continuous(texts[n], default_name=n))
    data = random.Random(seed + 1)
    out: list = []
    seen = {"grouped_reports": 0, "members": len(eng._rgrouped)}
    for step in range(16):
        if step == 4:  # late registrations
            for n in names[55:]:
                eng.register(parse_continuous(texts[n], default_name=n))
        if step == 6:
            # one query of a view that others read too, and every query of another view
            views: dict[int, list[str]] = {}
            for n in sorted(eng.queries):
                v = eng.queries[n].output._view
                if v.block is not None:
                    views.setdefault(id(v), []).append(n)
            shared = [ns for ns in views.values() if len(ns) >= 2]
            alone = [ns for ns in views.values() if len(ns) == 1]
            assert shared and alone
            for n in (shared[0][0], alone[0][0]):
                eng.unregister(n)
        if step == 9:  # a member leaves its block and goes on alone
            busy = [
                n
                for n in sorted(eng.queries)
                if eng.queries[n].output._view.block is not None and len(eng.queries[n].output.result.rows)
            ]
            eng.replanned(eng.queries[busy[0]])
        if step != 11:  # a quiet epoch
            for k, s in enumerate((POSTS, LIKES)):
                eng.ingest(s, 1000 * step + 10 + k, _element(eng, s, step, data))
        res = eng.tick(1000 * (step + 1), set(eng.queries), blocks=step % 3 != 2)
        seen["grouped_reports"] += sum(isinstance(g, RoutedMembers) for g in res.groups or ())
        out.append(res.text())
        out.append({k: list(v) for k, v in res.written().items() if v})
        if step % 2:  # read the results (built when read) only at some epochs
            out.append(
                {
                    n: (rq.output.view.result.rows.cols.tolist(), rq.stats.rows)
                    for n, rq in eng.queries.items()
                }
            )
            deltas = {n: rq.output.update(eng.epoch) for n, rq in eng.queries.items()}
            out.append({n: (d.cols.tolist(), d.counts.tolist()) for n, d in deltas.items() if len(d)})
    out.append({n: (rq.stats.rows, rq.stats.reports) for n, rq in eng.queries.items()})
    return out, eng, seen


@pytest.mark.parametrize("reduce_lines", [routed_members.REDUCE_LINES, 1])
def test_members_report_what_each_query_reports_alone(
    reduce_lines: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(``reduce_lines=1``: blocks of one line joined by ``np.add.reduceat`` and larger ones
    by ``str.join`` in the same rebuild)"""
    monkeypatch.setattr(routed_members, "REDUCE_LINES", reduce_lines)
    got, eng, seen = _run(True)
    want, ref, ref_seen = _run(False)
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want, strict=True)):
        assert a == b, f"part {i}"
    assert sum(len(v) for w in got[1::4] for v in w.values()) > 100  # lines were written
    assert seen["members"] > 30 and seen["grouped_reports"] > 10  # reported by the members
    assert ref_seen["members"] == 0 and ref_seen["grouped_reports"] == 0
    assert ref._blocks is not None and ref._blocks.blocks  # (the reference's views are in blocks too)


def test_results_are_built_when_read() -> None:
    """After a tick the members' views hold only their rendered rows; reading a query's
    result through its output builds exactly the result of the per-query path."""
    eng = _engine(True)
    ref = _engine(True)
    ref.group_routed = False
    rnd = random.Random(3)
    texts = {f"q{i:02d}": _text(rnd) for i in range(30)}
    for e in (eng, ref):
        for n, t in texts.items():
            e.register(parse_continuous(t, default_name=n))
    for step in range(6):
        for e in (eng, ref):
            data = random.Random(100 + step)
            for k, s in enumerate((POSTS, LIKES)):
                e.ingest(s, 1000 * step + 10 + k, _element(e, s, step, data))
            e.tick(1000 * (step + 1), set(e.queries), blocks=True)
    assert eng._blocks is not None
    assert sum(b.unbuilt() for b in eng._blocks.blocks.values()) > 0  # results left to be built
    for n in texts:
        a = eng.queries[n].output.result.rows
        b = ref.queries[n].output.result.rows
        assert (a.cols.tolist(), a.counts.tolist()) == (b.cols.tolist(), b.counts.tolist()), n
    assert sum(b.unbuilt() for b in eng._blocks.blocks.values()) == 0
