"""The live worker with an engine that evaluates runs of report times (the cluster leader's
``tick_many``): the same report times, in the same order, with the same lines as one by one."""

from __future__ import annotations

import queue
from typing import Any

from linkstream.engine.embedded import Engine
from linkstream.engine.live.runtime import LiveEngine

EX = "http://ex.org/"
S1, S2 = EX + "s1", EX + "s2"
PAIR = f"""PREFIX ex: <{EX}>
SELECT ?x ?y WHERE {{
  STREAM ex:s1 [RANGE 2s SLIDE 1s] {{ ?x ex:p ?v }}
  STREAM ex:s2 [RANGE 3s SLIDE 2s] {{ ?y ex:p ?w }}
}}"""
COUNT = f"""PREFIX ex: <{EX}>
SELECT (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s1 [RANGE 3s SLIDE 1s] {{ ?x ex:p ?v }} }}"""
#: COUNT's steps on the other stream: its first report comes later, and its cohort and
#: COUNT's meet at a report time (one joins the other while a run is planned)
COUNT2 = COUNT.replace("ex:s1", "ex:s2")


class RunEngine:
    """An embedded engine behind an interface with ``tick_many`` (not an ``Engine``, so the
    worker takes the run path, as with the cluster leader's ``RemoteEngine``)."""

    def __init__(self) -> None:
        self.inner = Engine()
        self.runs: list[list[tuple[int, list[str]]]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def tick_many(self, plan: list[tuple[int, list[str]]]) -> list[dict[str, list[str]]]:
        self.runs.append([(c, list(names)) for c, names in plan])
        return [dict(self.inner.tick(c, names)) for c, names in plan]


def triple(k: int) -> tuple[str, str, str]:
    return (f"<{EX}o{k}>", f"<{EX}p>", f'"{k}"^^<http://www.w3.org/2001/XMLSchema#integer>')


def drive(live: LiveEngine) -> dict[str, list[tuple[int, tuple[str, ...]]]]:
    names = (live.register(PAIR, "pair"), live.register(COUNT, "count"), live.register(COUNT2, "count2"))
    subs = {n: live.subscribe(n) for n in names}
    for k in range(1, 40):
        live.push(S1, 500 * k, [triple(k)])
        if k % 3 == 0:
            live.push(S2, 500 * k + 100, [triple(1000 + k)])
    live.advance_to(30_000)
    out: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for name, sub in subs.items():
        got = out[name] = []
        while True:
            try:
                got.append(sub.get_report(timeout=0))
            except queue.Empty:
                break
    return out


def watch_emitted(live: LiveEngine, method: str) -> list[tuple[int, dict[str, int | None]]]:
    """After each report time delivered, every query's last report delivered."""
    seen: list[tuple[int, dict[str, int | None]]] = []
    deliver = getattr(live, method)

    def watched(c: int, *args: Any) -> None:
        deliver(c, *args)
        seen.append((c, {n: e.last_emitted() for n, e in live._entries.items()}))

    setattr(live, method, watched)
    return seen


def test_runs_of_report_times_give_the_reports_of_one_tick_at_a_time() -> None:
    with LiveEngine(idle_ms=None) as one:
        want_seen = watch_emitted(one, "_deliver")
        want = drive(one)
        emitted = {n: e.last_emitted() for n, e in one._entries.items()}
    engine = RunEngine()
    with LiveEngine(engine, idle_ms=None) as live:  # type: ignore[arg-type]  # duck-typed engine
        seen = watch_emitted(live, "_deliver_each")
        got = drive(live)
        assert live.status()["last_report"] == one.status()["last_report"]
        # the last report delivered (the restart guard), marked per cohort or, when a cohort
        # changed while the run was planned, per query: the same after every report time
        assert seen == want_seen
        assert {n: e.last_emitted() for n, e in live._entries.items()} == emitted
        live._settle()
        assert {n: e.emitted for n, e in live._entries.items()} == emitted
        assert emitted["count"] == max(c for c, _ in got["count"])
    assert got == want
    assert sum(len(v) for v in want.values()) > 20 and any(lines for v in want.values() for _, lines in v)
    # report times went in runs (the watermark passed several at once), in order, each once
    assert max(len(run) for run in engine.runs) > 1
    times = [c for run in engine.runs for c, _ in run]
    assert times == sorted(set(times))
    due = {c: sorted(names) for run in engine.runs for c, names in run}
    assert [c for c, _ in got["count"]] == [c for c in times if "count" in due[c]]
