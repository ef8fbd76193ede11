"""A query whose shared join already runs unchanged takes the running router without
building the join again (``Sharing.reuse``): the plans and results are exactly those of
building it again (``reuse`` off), and of every query evaluated on its own operators.

Real data: the CityBench traffic streams (trimmed) and sensor repository, many constant
variants of the CityBench templates (``tests/engine/test_sharing.generate``: streams,
ranges, steps, filter constants and dialects vary).
"""

from __future__ import annotations

import io
from collections import Counter

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.engine.sharing import Sharing
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.engine.test_sharing import REPO, SES, TRAFFIC, by_query, generate, trimmed  # noqa: F401

N = 80


def _engine(static: object, *, reuse: bool = True, share: bool = True) -> Engine:
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    eng._sharing.reuse = reuse
    eng.share = share
    return eng


def _kinds(eng: Engine) -> Counter[str]:
    return Counter(type(op).__name__ for op in eng.operators.values())


def _run(eng: Engine, queries: dict[str, str], streams: list[tuple[str, str]]) -> dict[str, list[str]]:
    rqs = [eng.register(parse_continuous(text, default_name=name)) for name, text in queries.items()]
    buf = io.StringIO()
    replay(eng, rqs, streams, buf)
    return {q: sorted(lines) for q, lines in by_query(buf.getvalue()).items()}


def test_reused_shared_joins_give_the_plans_and_results_of_building_them_again(trimmed, monkeypatch):  # noqa: F811
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    queries = generate(N, seed=11)
    builds = Counter[bool]()
    build = Sharing._build

    def counted(self: Sharing, *args: object) -> object:
        builds[self.reuse] += 1
        return build(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(Sharing, "_build", counted)
    reused, rebuilt, alone = _engine(static), _engine(static, reuse=False), _engine(static, share=False)
    got = _run(reused, queries, streams)
    assert got == _run(rebuilt, queries, streams)  # the same results, line for line ...
    assert _kinds(reused) == _kinds(rebuilt)  # ... from the same operators
    assert builds[False] > N // 2, builds  # most queries build a shared join without the shortcut ...
    assert builds[True] < 0.6 * builds[False], builds  # ... which the shortcut skipped for many
    assert got == _run(alone, queries, streams)  # as every query on operators of its own
    assert len(got) > N // 2  # most queries produced rows: not vacuous

    # churn after the run (instances started): unregister a third, register other variants
    # (some on running joins, some growing a range: a new instance), free everything
    for eng in (reused, rebuilt):
        for name in list(queries)[::3]:
            eng.unregister(name)
        for name, text in generate(80, seed=12).items():
            eng.register(parse_continuous(text.replace(f"{name}", f"x{name}"), default_name=f"x{name}"))
    assert _kinds(reused) == _kinds(rebuilt)
    for eng in (reused, rebuilt):
        for name in list(eng.queries):
            eng.unregister(name)
        assert eng.operator_count() == 0
