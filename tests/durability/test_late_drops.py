"""The worker's late drops are logged: a replay of the ingest log drops the same elements.

``push_many`` takes an element when it passes the lateness check on the push side; the
worker can still drop it when a report time passed it before its ingestion -- here an
``--idle-ms`` report, fired by the wall clock, which a replay does not repeat.  Without a
record of that drop a new leader's replay would ingest the element: its windows, and the
stream's applied count (``--ingest direct`` numbers elements by it), would differ from
the old leader's.  With the ``drop`` record the replay counts the element late again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

from linkstream.engine.live.ingestlog import IngestLog, LogRecord
from linkstream.engine.live.recovery import dropped_pushes, replay_records
from linkstream.engine.live.runtime import LiveEngine

EX = "http://example.org/"
S1, S2 = EX + "s1", EX + "s2"
QUERY = (
    f"PREFIX ex: <{EX}>\nSELECT (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s1 [RANGE 1s SLIDE 1s] {{ ?x ex:p ?v }} "
    f"STREAM ex:s2 [RANGE 1s SLIDE 1s] {{ ?x ex:q ?w }} }}"
)


def _el(p: str, i: int) -> list[tuple[str, str, str]]:
    return [(f"<{EX}x{i}>", f"<{EX}{p}>", f'"{i}"')]


def test_a_worker_late_drop_is_dropped_again_by_the_replay(tmp_path: Path) -> None:
    now = [0.0]
    d = str(tmp_path / "state")
    lg = IngestLog(d)
    live = LiveEngine(idle_ms=1000, clock=lambda: now[0])
    live.recover(lg)
    try:
        live.register(QUERY, "q")
        for stream, t, p in ((S1, 1000, "p"), (S2, 1000, "q"), (S1, 5000, "p")):
            assert live.push_many(stream, [(t, _el(p, t))]) == ([True], None)
        live.flush()

        def idle_then_push() -> None:
            # in the worker, between two batches: both streams go idle (the next _fire
            # reports up to 5000), and an element of s2 at 1500 is taken on the push side
            now[0] += 10.0
            assert live.push_many(S2, [(1500, _el("q", 1500))]) == ([True], None)

        live.call(idle_then_push)
        live.flush()
        live.sync()
        assert live.status()["streams"][S2]["late"] == 1  # the worker dropped it
        assert live.applied_count(S2) == 1
        before = live.status()["streams"]
    finally:
        live.close()
        lg.close()

    lg = IngestLog(d)
    again = LiveEngine(idle_ms=1000)
    try:
        again.recover(lg)
        again.flush()
        assert again.applied_count(S2) == 1 and again.applied_count(S1) == 2
        assert again.status()["streams"] == before
    finally:
        again.close()
        lg.close()


def test_a_replay_applies_every_logged_push_no_drop_record_names(tmp_path: Path) -> None:
    """The logged run applied s2@1500 (no report had passed it); the replay's worker fires
    the reports up to 5000 before it (its streams look idle to the replay's clock): the
    element is applied all the same, not dropped as late (windows and applied counts of
    the replay equal the logged run's)."""
    d = str(tmp_path / "state")
    lg = IngestLog(d)
    live = LiveEngine(idle_ms=1000, clock=lambda: 0.0)
    live.recover(lg)
    try:
        live.register(QUERY, "q")
        for stream, t, p in ((S1, 1000, "p"), (S2, 1000, "q"), (S1, 5000, "p"), (S2, 1500, "q")):
            assert live.push_many(stream, [(t, _el(p, t))]) == ([True], None)
        live.flush()
        live.sync()
        assert live.applied_count(S2) == 2 and live.status()["streams"][S2]["late"] == 0
        before = live.status()["streams"]
    finally:
        live.close()
        lg.close()

    lg = IngestLog(d)
    now = [0.0]
    again = LiveEngine(idle_ms=1000, clock=lambda: now[0])
    records = list(lg.records())
    last_push = max(r.seq for r in records if r.kind == "push")

    def slow_replay() -> Iterator[LogRecord]:
        for rec in records:
            if rec.seq == last_push:
                # the replay's timing, not the log's: both streams idle, the reports up to
                # 5000 fire before s2@1500 is pushed again
                again.flush()  # the elements before are ingested at the old clock
                now[0] += 10.0
                deadline = time.monotonic() + 10.0
                while (again.status()["last_report"] or 0) <= 1500 and time.monotonic() < deadline:
                    time.sleep(0.01)
                assert again.status()["last_report"] > 1500  # s2@1500 is behind the reports now
            yield rec

    try:
        replay_records(again, slow_replay(), -1, d, dropped=dropped_pushes(records))
        again.flush()
        assert again.applied_count(S2) == 2 and again.applied_count(S1) == 2
        assert again.status()["streams"] == before
    finally:
        again.close()
        lg.close()


def test_push_side_late_elements_are_counted_again_by_the_replay(tmp_path: Path) -> None:
    """Elements the push side refuses as late (behind their stream's watermark) are never
    applied, but a ``late`` record counts them: a restart (or a new cluster leader, whose
    replay is this one) shows the late count the old process showed, also after a
    checkpoint of the counts before (the records after it add theirs)."""
    d = str(tmp_path / "state")
    lg = IngestLog(d)
    live = LiveEngine(idle_ms=None)
    live.recover(lg)
    try:
        live.register(QUERY, "q")
        assert live.push_many(S1, [(5000, _el("p", 5000))]) == ([True], None)
        # two late elements in one body (behind s1's 5000), one taken between them
        body = [(1000, _el("p", 1)), (6000, _el("p", 6000)), (2000, _el("p", 2))]
        assert live.push_many(S1, body) == ([False, True, False], None)
        assert live.push_many(S2, [(3000, _el("q", 3000))]) == ([True], None)
        assert live.push_many(S2, [(2500, _el("q", 2500))]) == ([False], None)
        live.flush()
        live.sync()
        before = live.status()["streams"]
        assert (before[S1]["late"], before[S2]["late"]) == (2, 1)
    finally:
        live.close()
        lg.close()

    lg = IngestLog(d)
    again = LiveEngine(idle_ms=None)
    try:
        again.recover(lg)
        again.flush()
        assert again.status()["streams"] == before
        assert again.applied_count(S1) == 2 and again.applied_count(S2) == 1
    finally:
        again.close()
        lg.close()
    lg = IngestLog(d)
    try:
        assert [(r.header["t"], r.header["f"]) for r in lg.records() if r.kind == "late"] == [
            ([1000, 2000], [5000, 6000]),
            ([2500], [3000]),
        ]
    finally:
        lg.close()


def test_elements_refused_for_their_event_time_are_counted_again_by_the_replay(tmp_path: Path) -> None:
    """An element refused for its event time (too far ahead of its stream's time, or out of
    range) ends its body and is counted ``rejected``; the ``late`` record of the body says
    so (``r``), so a restart's (a new cluster leader's) rejected counts are the old
    process's -- also with late elements of the same body before it."""
    d = str(tmp_path / "state")
    lg = IngestLog(d)
    live = LiveEngine(idle_ms=None)
    live.recover(lg)
    try:
        live.register(QUERY, "q")
        assert live.push_many(S1, [(5000, _el("p", 5000))]) == ([True], None)
        far = 5000 + 10 * 86_400_000  # more than the maximum jump (a day) ahead
        flags, error = live.push_many(S1, [(1000, _el("p", 1)), (far, _el("p", 2)), (6000, _el("p", 3))])
        assert flags == [False] and isinstance(error, ValueError)  # late, then refused (body ends)
        flags, error = live.push_many(S2, [(3000, _el("q", 3000)), (-1, _el("q", 1))])
        assert flags == [True] and isinstance(error, ValueError)  # taken, then out of range
        live.flush()
        live.sync()
        before = live.status()["streams"]
        assert (before[S1]["late"], before[S1]["rejected"], before[S2]["rejected"]) == (1, 1, 1)
    finally:
        live.close()
        lg.close()

    lg = IngestLog(d)
    again = LiveEngine(idle_ms=None)
    try:
        again.recover(lg)
        again.flush()
        assert again.status()["streams"] == before
        assert again.applied_count(S1) == 1 and again.applied_count(S2) == 1
    finally:
        again.close()
        lg.close()
