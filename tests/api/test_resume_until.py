"""A reader that resumes after the run with ``?after=...&until=T`` gets an end.

Result rings keep only reports with lines; when the query's last report with lines came
before ``T`` but later reports (without lines) were delivered, the stream must still end
at once instead of waiting for a report that will never come.  Embedded ``run`` over HTTP
(SSE and JSON Lines) and the cluster coordinators' result log.
"""

from __future__ import annotations

import asyncio

from linkstream.api.app import create_app
from linkstream.api.client import Client
from linkstream.api.server import BackgroundServer
from linkstream.cluster.results import ResultLog
from linkstream.engine.live.runtime import LiveEngine
from linkstream.engine.live.subscription import parse_cursor

EX = "http://example.org/"
S1 = EX + "s1"
QUERY = f"SELECT ?x WHERE {{ STREAM <{S1}> [RANGE 1s SLIDE 1s] {{ ?x <{EX}p> ?v }} }}"


def test_resume_until_after_the_last_report_with_lines_ends() -> None:
    live = LiveEngine(idle_ms=None).start()
    server = BackgroundServer(create_app(live), on_shutdown=live.close).start()
    try:
        with Client(server.url) as c:
            c.register(QUERY, "q")
            c.push(S1, f"<{EX}a> <{EX}p> <{EX}b> .\n", t=1500)
            assert c.advance(6000)["last_report"] == 6000  # reports at 2000 (a line) .. 6000 (none)
            for sse in (False, True):
                rows = list(c.results("q", after="0", until=5000, sse=sse, timeout=10))
                assert [(r["t"], r["binding"]["x"]) for r in rows] == [(2000, f"<{EX}a>")]
            # until later than every report so far: the reader still waits for it (live)
            c.push(S1, f"<{EX}c> <{EX}p> <{EX}d> .\n", t=6500)
            c.advance(8000)
            rows = list(c.results("q", after="2000:1", until=7000, timeout=10))
            assert [(r["t"], r["binding"]["x"]) for r in rows] == [(7000, f"<{EX}c>")]
    finally:
        server.stop()


def test_result_log_resume_ends_at_the_committed_report_time() -> None:
    log = ResultLog(60.0)
    log.lead(())  # the leader: entries are committed as appended (no follower)
    log.append(1000, {"q": ('{"x": 1}',)})
    log.append(2000, {"q": ()})
    log.append(3000, {"q": ()})

    async def reports(after: str) -> list[tuple[int, tuple[str, ...]]]:
        sub = log.subscribe("q", after=parse_cursor(after))
        out = []
        while (item := await sub.next_report(0.2)) is not None:
            out.append(item)
        return out

    # the kept line, then the latest committed report time (no lines): ?until=2500 ends there
    assert asyncio.run(reports("0")) == [(1000, ('{"x": 1}',)), (3000, ())]
    assert asyncio.run(reports("1000:1")) == [(3000, ())]
