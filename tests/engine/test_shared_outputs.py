"""Queries equal but for their names share one result view, and queries that differ only
in a FILTER constant share one join (the filter runs after the shared join / router).
Both are checked for sharing *and* for results equal to the oracle's per query."""

from __future__ import annotations

import io
import json
from collections import defaultdict

import numpy as np

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.filter import FilterOperator
from linkstream.operators.mjoin import MJoinOperator
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.engine.test_sharing import REPO, SES, TRAFFIC, run_linkstream, template_query, trimmed  # noqa: F401, F811
from tests.shared_paths import load_tool, run_oracle


def _engine(static) -> Engine:
    eng = Engine()
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    return eng


def _oracle_equal(queries: dict[str, str], streams, static, got: str, tmp_path) -> None:
    want = run_oracle(queries, streams, [str(static), f"{REPO}={static}"], tmp_path)
    (tmp_path / "got.jsonl").write_text(got)
    assert load_tool("compare_results").main([str(want), str(tmp_path / "got.jsonl")]) == 0


def _by_query(text: str) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for line in text.splitlines():
        row = json.loads(line)
        out[row.pop("query")].append(row)
    return out


def test_queries_equal_but_for_names_share_one_view_and_report_the_same_rows(trimmed, tmp_path):  # noqa: F811
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    queries = {}
    for i in range(12):
        kind, dialect = (0, "cqels") if i < 6 else (1, "rspql")
        queries[f"v{i}"] = template_query(kind, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.01, dialect, f"v{i}")
    eng, buf = run_linkstream(queries, streams, static)
    views = {id(rq.output.view) for rq in eng.queries.values()}
    assert len(views) == 2  # one per distinct query, not one per name
    got = _by_query(buf.getvalue())
    assert got["v0"] and got["v6"]  # not vacuous: both shapes produce rows
    for i in range(1, 6):
        assert got[f"v{i}"] == got["v0"]
    for i in range(7, 12):
        assert got[f"v{i}"] == got["v6"]
    _oracle_equal(queries, streams, static, buf.getvalue(), tmp_path)


def test_a_view_is_not_shared_once_it_has_run_and_unregistering_keeps_the_others(trimmed):  # noqa: F811
    d, static = trimmed
    eng = _engine(static)
    text = template_query(0, TRAFFIC[0], TRAFFIC[1], 3000, 1000, 0.01, "cqels", "a")
    a = eng.register(parse_continuous(text, default_name="a"))
    b = eng.register(parse_continuous(text, default_name="b"))
    assert a.output.view is b.output.view and a.output.view.users == 2
    eng.ingest(SES + TRAFFIC[0], 1000, np.empty((0, 3), dtype=np.int64))
    eng.tick(1000, ["a", "b"])
    c = eng.register(parse_continuous(text, default_name="c"))
    assert c.output.view is not a.output.view  # a late query builds its own result
    eng.unregister("a")
    assert b.output.view.users == 1
    assert eng.tick(2000, ["b", "c"]).keys() == {"b", "c"}


def test_queries_differing_in_a_filter_constant_share_one_join(trimmed, tmp_path):  # noqa: F811
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    queries = {}
    k = 0
    for const in (0.001, 0.01, 0.02, 5.0, 50.0):
        for dialect in ("cqels", "rspql", "csparql"):
            for kind in (1, 3):
                queries[f"f{k}"] = template_query(
                    kind, TRAFFIC[0], TRAFFIC[2], 2000, 1000, const, dialect, f"f{k}"
                )
                k += 1
    eng, buf = run_linkstream(queries, streams, static)
    joins = [op for op in eng.operators.values() if isinstance(op, MJoinOperator)]
    filters = [op for op in eng.operators.values() if isinstance(op, FilterOperator)]
    # 2 kinds x (routed cqels/rspql + csparql) joins, however many constants
    assert len(joins) <= 2 * 2 * 2, len(joins)
    assert len(filters) >= 5  # the constants live in filters above the shared joins
    got = _by_query(buf.getvalue())
    assert any(len(v) > 1 for v in got.values())
    _oracle_equal(queries, streams, static, buf.getvalue(), tmp_path)


def test_csparql_queries_over_other_ranges_share_one_routed_join(trimmed, tmp_path):  # noqa: F811
    """C-SPARQL merges the static graph and every window into one default graph; with
    ``share_merged`` queries that differ in the windows' range (and filter constants)
    still share one join."""
    from linkstream.operators.router import RouterOperator

    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    queries = {}
    for kind in range(4):
        for rng in (1000, 2000, 3000, 5000):
            for const in (0.01, 0.02):
                name = f"c{kind}_{rng}_{int(const * 100)}"
                queries[name] = template_query(
                    kind, TRAFFIC[1], TRAFFIC[2], rng, 1000, const, "csparql", name
                )
    eng = _engine(static)
    eng.share_merged = True  # (off by default: routed queries are rebuilt, not migrated)
    rqs = [eng.register(parse_continuous(text, default_name=name)) for name, text in queries.items()]
    buf = io.StringIO()
    replay(eng, rqs, streams, buf)
    ops = list(eng.operators.values())
    # one per distinct BGP: kinds 2 (aggregate) and 3 (ASK with a filter) join the same patterns
    assert sum(isinstance(op, MJoinOperator) for op in ops) == 3
    assert sum(isinstance(op, RouterOperator) for op in ops) == 3
    got = _by_query(buf.getvalue())
    assert len(got) >= 16  # most queries produce rows: not vacuous
    _oracle_equal(queries, streams, static, buf.getvalue(), tmp_path)
