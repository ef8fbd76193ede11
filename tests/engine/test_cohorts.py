"""The live worker's report schedule in cohorts (:mod:`linkstream.engine.live.cohorts`):
each query due and counted as if scheduled alone (a model), a query among many others
registered at other times reports as alone; and a registration batch big enough to run
without the cyclic collector gives the reports of one-by-one registration and leaves the
collector on."""

from __future__ import annotations

import gc
import queue

from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.engine.embedded import QueryStats
from linkstream.engine.live import runtime
from linkstream.engine.live.cohorts import CohortSchedule, reporting_of
from linkstream.engine.live.runtime import LiveEngine
from linkstream.engine.live.state import QueryView, _Entry

EX = "http://example.org/"
QUERY = (
    "PREFIX ex: <http://example.org/> SELECT ?s ?o "
    "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT{r}S STEP PT{s}S] WHERE {{ WINDOW ex:w {{ ?s ex:p{k} ?o }} }}"
)

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("place"),
            st.sampled_from("abcdefgh"),
            st.sampled_from([(2,), (3,), (2, 3)]),
            st.integers(0, 12),
        ),
        st.tuples(st.just("take"), st.just(""), st.just(()), st.just(0)),
        st.tuples(st.just("remove"), st.sampled_from("abcdefgh"), st.just(()), st.just(0)),
    ),
    max_size=80,
)


class _Rq:
    def __init__(self, steps: tuple[int, ...]) -> None:
        self.steps = steps
        self.stats = QueryStats()
        self.last_report: int | None = None


@settings(max_examples=300, deadline=None)
@given(ops)
def test_cohorts_keep_each_query_due_and_counted_as_alone(steps: list[tuple]) -> None:
    """A model with one due time and one report count per query: taking the earliest time
    gives exactly the queries due then, in one cohort per steps; cohorts that meet merge;
    every query's reports (settled or still counted by its cohort) are the model's."""
    sched = CohortSchedule(counting=True)
    entries: dict[str, _Entry] = {}
    due: dict[str, int] = {}  # the model: name -> next report time
    reports: dict[str, int] = {}
    last: dict[str, int] = {}
    for kind, name, st_, c in steps:
        if kind == "place":
            if name in entries:
                continue
            e = entries[name] = _Entry(None, _Rq(st_), frozenset())  # type: ignore[arg-type]  # (a stand-in query)
            e.cq = type("Cq", (), {"name": name})()  # type: ignore[assignment]
            sched.place(name, e, c)
            due[name] = c
            reports[name] = 0  # (a new entry: a name registered again counts afresh)
            last.pop(name, None)
        elif kind == "remove":
            e = entries.pop(name, None)
            if e is None:
                continue
            assert e.cohort is not None
            e.cohort.remove(name, e)
            assert e.cohort is None and e.due == due.pop(name)
            assert e.rq.stats.reports == reports[name]  # settled when it left
        else:
            first = min(due.values(), default=None)
            assert sched.first() == first
            if first is None:
                assert sched.take(0) == [] and not sched
                continue
            taken = sched.take(first)
            assert sorted(n for k in taken for n in k.names) == sorted(
                n for n, t in due.items() if t == first
            )
            assert len({k.steps for k in taken}) == len(taken)  # one cohort per steps
            assert reporting_of(taken) == {n for n, t in due.items() if t == first}
            for k in taken:
                k.reported(first)
                assert all(entries[n].rq.steps == k.steps for n in k.names)
                nxt = min((first // s + 1) * s for s in k.steps)
                for n in k.names:
                    reports[n] += 1
                    last[n] = first
                    due[n] = nxt
            for k in taken:
                if k.names:
                    sched.move(k, min((first // s + 1) * s for s in k.steps), entries)
        assert len(sched) == len(due)
        for n, e in entries.items():
            assert e.next_due() == due[n] and e.cohort is not None and n in e.cohort.names
            assert e.reports() == reports[n] and e.last_report() == last.get(n)
    for k in list(sched.cohorts()):
        k.settle_all(entries)
    for n, e in entries.items():
        assert e.rq.stats.reports == reports[n] and e.rq.last_report == last.get(n)


def _crowd(extra: int) -> tuple[dict[str, list], dict[str, QueryView]]:
    """The reports of the ``watched`` queries among ``extra`` others registered at other
    times (so that cohorts form, split over quiet gaps and merge), and their views."""
    live = LiveEngine(idle_ms=None).start()
    watched = {
        "w_rstream": QUERY.format(r=3, s=1, k=1),
        "w_ask": "PREFIX ex: <http://example.org/> ASK FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S] "
        "WHERE { WINDOW ex:w { ?s ex:p2 ?o } }",
        "w_istream": "PREFIX ex: <http://example.org/> REGISTER ISTREAM <w_istream> AS SELECT ?s "
        "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT4S STEP PT2S] WHERE { WINDOW ex:w { ?s ex:p3 ?o } }",
        "w_late": QUERY.format(r=2, s=1, k=0),
    }
    try:
        subs = {}
        for i in range(extra):
            live.register(QUERY.format(r=1 + i % 4, s=1 + i % 2, k=i % 5), name=f"x{i:03d}")
        for n in ("w_rstream", "w_ask", "w_istream"):
            live.register(watched[n], name=n)
            subs[n] = live.subscribe(n, maxlen=10**6)
        for t in range(0, 30000, 700):
            if t == 9100:  # registered mid-run: joins the cohorts of its steps
                live.register(watched["w_late"], name="w_late")
                subs["w_late"] = live.subscribe("w_late", maxlen=10**6)
                for i in range(0, extra, 3):
                    live.unregister(f"x{i:03d}")
            if 14000 <= t < 24000:  # a quiet gap: the queries that may skip it do
                continue
            for k in range(5):
                live.push(EX + "s", t, [(f"<{EX}n{t}>", f"<{EX}p{k}>", f'"{t}"')])
        live.advance_to(40000)
        live.sync()
        return _drained(subs), {n: live.view(n) for n in watched}
    finally:
        live.close()


def test_a_query_among_many_reports_as_alone() -> None:
    alone, views_alone = _crowd(0)
    crowd, views_crowd = _crowd(60)
    assert all(alone[n] for n in alone)  # every watched query reported something
    assert alone == crowd
    for n, v in views_crowd.items():
        a = views_alone[n]
        assert (v.stats.reports, v.last_report, v.next_report, v.first_report) == (
            a.stats.reports,
            a.last_report,
            a.next_report,
            a.first_report,
        )
        assert v.stats.reports > 0 and v.last_report is not None


def _reports(live: LiveEngine, names: list[str]) -> dict[str, list[tuple[int, tuple[str, ...]]]]:
    subs = {n: live.subscribe(n) for n in names}
    for t in range(0, 9000, 700):
        for k in range(5):
            live.push(EX + "s", t, [(f"<{EX}n{t}>", f"<{EX}p{k}>", f'"{t}"')])
    live.advance_to(12000)
    return _drained(subs)


def _drained(subs: dict) -> dict[str, list[tuple[int, tuple[str, ...]]]]:
    """Every report each subscription holds (called after ``advance_to``, which returns once
    every report up to it was delivered)."""
    out: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for n, sub in subs.items():
        got = out[n] = []
        while True:
            try:
                got.append(sub.get_report(timeout=0.01))
            except queue.Empty:
                break
    return out


def test_a_big_batch_reports_as_small_ones_and_leaves_the_collector_on(monkeypatch) -> None:
    items = [(QUERY.format(r=1 + i % 4, s=1 + i % 2, k=i % 5), f"q{i:02d}", None) for i in range(40)]
    results = []
    for limit in (10**6, 8):  # one by one (never "big"), then batches over the limit
        monkeypatch.setattr(runtime, "FREEZE_BATCH", limit)
        live = LiveEngine(idle_ms=None).start()
        try:
            if limit > 100:
                names = [live.register(text, name=name) for text, name, _ in items]
            else:
                names = live.register_many(items)
            assert gc.isenabled()
            results.append(_reports(live, names))
        finally:
            live.close()
    assert sum(len(v) for v in results[0].values()) > 40  # every query reported something
    assert results[0] == results[1]


def test_block_lines_read_as_the_tuple_of_their_lines() -> None:
    from linkstream.engine.render import TIME_MARK, BlockLines

    block = f'{{"t": {TIME_MARK}, "a": 1}}\n{{"t": {TIME_MARK}, "é": "x\\ny"}}\n'
    want = ('{"t": 42, "a": 1}', '{"t": 42, "é": "x\\ny"}')
    got = BlockLines(block, "42")
    assert len(got) == 2  # counted before any split
    assert got == want and want == got and got == list(want) and got != want[:1]
    assert got[1] == want[1] and got[1:] == want[1:] and tuple(got) == want and list(got) == list(want)
    assert got == BlockLines(block, "42") and got != BlockLines(block, "43")
    assert BlockLines("", "1") == () and len(BlockLines("", "1")) == 0
