"""The worker's late drops are logged: a replay of the ingest log drops the same elements.

``push_many`` takes an element when it passes the lateness check on the push side; the
worker can still drop it when a report time passed it before its ingestion -- here an
``--idle-ms`` report, fired by the wall clock, which a replay does not repeat.  Without a
record of that drop a new leader's replay would ingest the element: its windows, and the
stream's applied count (``--ingest direct`` numbers elements by it), would differ from
the old leader's.  With the ``drop`` record the replay counts the element late again.
"""

from __future__ import annotations

from pathlib import Path

from linkstream.engine.live.ingestlog import IngestLog
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
