"""The result log a standby polls, as msgpack (``Accept: application/x-msgpack``): the same
answer as the JSON one, and a follower fed either delivers the same results.

The leader serves its entries' msgpack bytes made once per entry
(:meth:`~linkstream.cluster.results.ResultLog.answer_packed`) instead of JSON-encoding
every line at every poll; these tests pin that the content does not change with it.
"""

from __future__ import annotations

import asyncio
import json

from linkstream.api.app import create_app
from linkstream.api.client import Client
from linkstream.api.server import BackgroundServer
from linkstream.cluster.results import LOG_MSGPACK, ResultLog, decode_answer
from linkstream.engine.live.runtime import LiveEngine
from linkstream.engine.live.subscription import parse_cursor

EX = "http://example.org/"
S1 = EX + "s1"
QUERY = f"SELECT ?x ?v WHERE {{ STREAM <{S1}> [RANGE 2s SLIDE 1s] {{ ?x <{EX}p> ?v }} }}"


def _real_reports() -> list[tuple[int, list[str]]]:
    """Result lines of an embedded run (quotes, escapes and non-ASCII in the literals)."""
    live = LiveEngine(idle_ms=None).start()
    server = BackgroundServer(create_app(live), on_shutdown=live.close).start()
    reports: list[tuple[int, list[str]]] = []
    try:
        with Client(server.url) as c:
            c.register(QUERY, "q")
            for i, lit in enumerate(
                [
                    '"caf\\u00e9 \\"quoted\\""',
                    '"line\\nbreak"',
                    '"\\u65e5\\u672c"',
                    '"42"^^<http://www.w3.org/2001/XMLSchema#integer>',
                ]
            ):
                c.push(S1, f"<{EX}a{i}> <{EX}p> {lit} .\n", t=1000 * i + 500)
            c.advance(6000)
            sub = live.subscribe("q", after=parse_cursor("0"))

            async def drain() -> None:
                while (item := await sub.next_report(0.2)) is not None:
                    reports.append((item[0], list(item[1])))

            asyncio.run(drain())
    finally:
        server.stop()
    assert sum(len(lines) for _, lines in reports) >= 4 and any("\\" in ln for _, ls in reports for ln in ls)
    return reports


def _leader(reports: list[tuple[int, list[str]]], max_entries: int = 200_000) -> ResultLog:
    log = ResultLog(60.0, max_entries=max_entries)
    log.lead(())
    for t, lines in reports:
        log.append(t, {"q": tuple(lines), "other": tuple(lines[:1])})
    log.append(reports[-1][0], {}, ended=["other"])
    return log


def test_the_msgpack_answer_equals_the_json_answer() -> None:
    reports = _real_reports()
    for log in (_leader(reports), _leader(reports, max_entries=2)):  # the second: entries gone
        for after in range(log.last + 1):
            as_json = json.loads(json.dumps(log.answer(after, None)))
            packed = log.answer_packed(after, None)
            assert decode_answer(LOG_MSGPACK, packed) == as_json
            assert decode_answer("application/json", json.dumps(as_json).encode()) == as_json
            assert log.answer_packed(after, None) == packed  # made again from the kept bytes
    assert "gone" in decode_answer(LOG_MSGPACK, _leader(reports, max_entries=2).answer_packed(0, None))


def test_followers_fed_json_or_msgpack_deliver_the_same_results() -> None:
    reports = _real_reports()
    leader = _leader(reports)
    by_json, by_packed = ResultLog(60.0), ResultLog(60.0)
    for after in range(0, leader.last + 1, 2):  # polls of two entries at a time
        by_json.follow(json.loads(json.dumps(leader.answer(after, "f1"))))
        by_packed.follow(decode_answer(LOG_MSGPACK, leader.answer_packed(after, "f2")))
    assert (by_json.last, by_json.committed) == (by_packed.last, by_packed.committed) == (leader.last,) * 2

    async def read(log: ResultLog, name: str, after: str) -> list[tuple[int, tuple[str, ...]]]:
        sub = log.subscribe(name, after=parse_cursor(after))
        out = []
        while (item := await sub.next_report(0.2)) is not None:
            out.append((item[0], tuple(item[1])))
        return out

    expected = [(t, tuple(lines)) for t, lines in reports if lines]
    for after in ["0", f"{reports[0][0]}:1", f"{reports[-1][0]}"]:  # resumes as with Last-Event-ID
        got_json = asyncio.run(read(by_json, "q", after))
        got_packed = asyncio.run(read(by_packed, "q", after))
        assert got_json == got_packed == asyncio.run(read(leader, "q", after))
    assert [r for r in asyncio.run(read(by_packed, "q", "0")) if r[1]] == expected
    assert "other" not in by_packed.rings and "other" not in by_json.rings  # its end replicated too
