"""The cluster driver's per-query figures computed when read (:mod:`linkstream.cluster.ledger`)
and its answers grouped at C speed (``ClusterEngine._waiting`` / ``_collect``): the same as
counted and grouped query by query, as the driver did before (in-process: real queries,
the real driver methods, no ZooKeeper and no sockets)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, cast

import pytest

import linkstream.cluster.ledger as ledger_mod
from linkstream.cluster.driver import ClusterEngine
from linkstream.cluster.ledger import RemoteQuery, ReportLedger
from linkstream.containers.messages import Result
from linkstream.engine.embedded import QueryStats
from linkstream.query.continuous import parse_continuous

EX = "http://ex.org/"


def _query(name: str, slide: int) -> RemoteQuery:
    text = f"PREFIX ex: <{EX}> SELECT ?x WHERE {{ STREAM ex:s [RANGE 3s SLIDE {slide}s] {{ ?x ex:p ?v }} }}"
    cq = parse_continuous(text, default_name=name)
    return RemoteQuery(cq, (slide * 1000,))


def _driver(queries: dict[str, RemoteQuery], peers: Sequence[str] = ("oc-1", "oc-2")) -> Any:
    """A ``ClusterEngine`` of its result edge's parts only."""
    eng = cast(Any, object.__new__(ClusterEngine))
    eng.__dict__.update(
        queries=queries,
        ledger=ReportLedger(queries),
        duplicates=0,
        on_tick=None,
        _peers=dict.fromkeys(peers),
        _results={},
        _lock=threading.Lock(),
        _departed=set(),
        _control=[],
        _synced_at={},
        _orphans={},
        _early={},
        _early_told=set(),
        answer_timeout=5.0,
        recovery=type("NoPoints", (), {"points": []})(),
    )
    for q in queries.values():
        q.ledger = eng.ledger
    return eng


class Eager:
    """The driver's result edge as it was: every due query counted at every tick."""

    def __init__(self, names: Sequence[str]) -> None:
        self.stats = {n: QueryStats() for n in names}
        self.last: dict[str, int | None] = dict.fromkeys(names)
        self.written: dict[str, int] = {}
        self.duplicates = 0

    def delivered(self, c: int, due: list[str], out: dict[str, Sequence[str]], dt: float) -> None:
        for name in due:
            if c <= self.written.get(name, c - 1):
                self.duplicates += len(out[name])
                out[name] = ()
                continue
            self.written[name] = c
            st = self.stats[name]
            st.reports += 1
            st.rows += len(out[name])
            st.eval_seconds += dt
            st.latencies.append(dt)
            self.last[name] = c


def _same(eng: Any, ref: Eager) -> None:
    for name, q in eng.queries.items():
        st, want = q.stats, ref.stats[name]
        assert (st.reports, st.rows, st.latencies) == (want.reports, want.rows, want.latencies), name
        assert st.eval_seconds == pytest.approx(want.eval_seconds)
        assert q.last_report == ref.last[name]
        assert eng.ledger.written_at(name) == ref.written.get(name)
    assert eng.duplicates == ref.duplicates


@pytest.mark.parametrize("fold_every", [256, 5])
def test_the_figures_settled_when_read_are_the_ones_counted_at_every_tick(
    monkeypatch: pytest.MonkeyPatch, fold_every: int
) -> None:
    monkeypatch.setattr(ledger_mod, "FOLD_EVERY", fold_every)
    qs = {n: _query(n, s) for n, s in (("a", 1), ("b", 2), ("c", 2), ("d", 3))}
    eng = _driver(qs)
    qs_all = {**qs, "e": _query("e", 1)}
    ref = Eager(list(qs) + ["e"])
    lines = ("l1", "l2", "l3")
    ticks = []
    for k in range(1, 40):
        c = 1000 * k
        due = sorted(n for n, q in qs_all.items() if c % q.steps[0] == 0 and (n != "e" or k >= 20))
        ticks.append((c, due, {n: lines[: (k + i) % 4] for i, n in enumerate(due)}, 0.001 * k))
    ticks.insert(30, ticks[25])  # report times at or before the last written: the slow path
    ticks.insert(12, (ticks[11][0], ["a"], {"a": lines}, 0.5))
    for i, (c, due, lines_of, dt) in enumerate(ticks):
        if c == 20_000 and "e" not in qs:  # a query registered meanwhile: no earlier tick counts
            eng.ledger.settle()  # (as ``add_queries`` does)
            qs["e"] = _query("e", 1)
            qs["e"].ledger = eng.ledger
        mine, theirs = dict(lines_of), dict(lines_of)
        eng._delivered(i, c, due, mine, dt)
        ref.delivered(c, due, theirs, dt)
        assert mine == theirs  # a duplicate's lines emptied on both
        if i in (7, 23, 33):  # read midway: the records since are folded, later ones too
            _same(eng, ref)
    _same(eng, ref)
    assert ref.duplicates > 0 and sum(st.rows for st in ref.stats.values()) > 100
    assert len({tuple(d) for _, d, _, _ in ticks}) > 3  # several due lists, interleaved


def test_a_query_taken_out_and_registered_again_starts_afresh_but_keeps_its_edge() -> None:
    qs = {"a": _query("a", 1)}
    eng = _driver(qs)
    for c in (1000, 2000, 3000):
        eng._delivered(c, c, ["a"], {"a": ("x",)}, 0.01)
    eng.ledger.settle()
    old = qs.pop("a")
    old.ledger = None
    assert (old.stats.reports, old.stats.rows, old.last_report) == (3, 3, 3000)
    qs["a"] = _query("a", 1)
    qs["a"].ledger = eng.ledger
    out = {"a": ("y", "z")}
    eng._delivered(4, 3000, ["a"], out, 0.01)  # written before it left: not again
    assert out == {"a": ()} and eng.duplicates == 2
    eng._delivered(5, 4000, ["a"], {"a": ("y",)}, 0.01)
    assert (qs["a"].stats.reports, qs["a"].stats.rows, qs["a"].last_report) == (1, 1, 4000)


def _waiting_eager(eng: Any, due: list[str], owners: dict[str, str]) -> tuple[dict, dict]:
    waiting: dict[str, list[str]] = {}
    owed: dict[str, tuple[str | None, str]] = {}
    for name in due:
        cid = owners.get(name)
        if cid is None or cid not in eng._peers:
            owed[name] = (cid, "no live container holds the query")
        else:
            waiting.setdefault(cid, []).append(name)
    return waiting, owed


@pytest.mark.parametrize(
    "owners",
    [
        {},
        {"a": "oc-1", "b": "oc-1", "c": "oc-1", "d": "oc-1"},
        {"a": "oc-2", "b": "oc-1", "c": "oc-2", "d": "oc-1"},
        {"a": "oc-2", "b": "oc-9", "c": "oc-1"},  # a dead container, a query without owner
    ],
)
def test_due_queries_are_grouped_by_container_as_one_by_one(owners: dict[str, str]) -> None:
    eng = _driver({})
    for due in (["a", "b", "c", "d"], ["b", "d"], []):
        owed: dict[str, tuple[str | None, str]] = {}
        got = eng._waiting(due, owners, owed)
        want, want_owed = _waiting_eager(eng, due, owners)
        assert (got, list(got), owed, list(owed)) == (want, list(want), want_owed, list(want_owed))


def test_answers_are_taken_at_once_or_query_by_query_with_the_same_lines() -> None:
    """A container's answer naming exactly the queries asked goes in at once; one naming
    another query too (it still holds a query it no longer answers) query by query."""
    eng = _driver({})
    due = ["a", "b", "c", "d"]
    owners = {"a": "oc-2", "b": "oc-1", "c": "oc-2", "d": "oc-1"}
    for extra in ({}, {"a": ("stale",)}):
        eng._results = {
            1: {
                "oc-1": Result("r", "oc-1", 1, 1000, {"b": (), "d": ("d1", "d2"), **extra}),
                "oc-2": Result("r", "oc-2", 1, 1000, {"a": ("a1",), "c": ()}),
            }
        }
        out = eng._collect(1, 1000, due, owners)
        assert out == {"a": ("a1",), "b": (), "c": (), "d": ("d1", "d2")}
        assert list(out) == due
