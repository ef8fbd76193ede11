"""The result log a standby polls, as msgpack (``Accept: application/x-msgpack``): the same
answer as the JSON one, and a follower fed either delivers the same results.

The leader serves its entries' msgpack bytes made once per entry
(:meth:`~linkstream.cluster.results.ResultLog.answer_packed`) instead of JSON-encoding
every line at every poll; these tests pin that the content does not change with it.

A query's report reaches the leader as one text of a container's result frame and stays one
(:class:`~linkstream.engine.render.JoinedLines`, split when read) through the log (its
entries, where a resume finds a query's reports) and the :data:`~linkstream.cluster.results.LOG_BLOCKS` answer to standbys: the SSE and JSON
Lines readers, resumed at every line, read the same text as from a log of lines.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence

import pytest

from linkstream.api.app import create_app
from linkstream.api.client import Client
from linkstream.api.results import _lines as result_stream
from linkstream.api.server import BackgroundServer
from linkstream.cluster.results import LOG_BLOCKS, LOG_FRAMES, LOG_MSGPACK, Entry, ResultLog, decode_answer
from linkstream.containers.messages import Result
from linkstream.containers.protocol import decode, encode
from linkstream.engine.live.runtime import LiveEngine
from linkstream.engine.live.subscription import ReportRing, ResultsGone, line_id, parse_cursor
from linkstream.engine.render import JoinedLines

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
    for log in (by_packed, by_json):  # its end replicated too: nothing of it is found any more
        assert log.after("other", (0, 0)) == [] and log.ended["other"] == leader.last


def _as_received(reports: list[tuple[int, list[str]]]) -> list[tuple[int, dict[str, Sequence[str]]]]:
    """Each report as the leader gets it: in a container's result frame, decoded."""
    out = []
    for seq, (t, lines) in enumerate(reports, 1):
        sent = Result("r", "c1", seq, t, {"q": lines, "other": lines[:1], "none": []}, [])
        got = decode([bytes(memoryview(f)) for f in encode(sent)])
        assert isinstance(got, Result)
        out.append((t, dict(got.lines)))
    return out


def test_a_report_travels_as_one_text_and_reads_as_its_lines() -> None:
    reports = _real_reports()
    for (_, lines), (_, got) in zip(reports, _as_received(reports), strict=True):
        q = got["q"]
        if not lines:
            assert q == () and not got["other"]
            continue
        assert isinstance(q, JoinedLines) and q.text == "\n".join(lines)
        assert len(q) == len(lines) and q == lines and list(q) == lines and q.lines() == tuple(lines)
        for k in range(len(lines) + 1):
            assert q[k:] == tuple(lines[k:])
        assert not got["none"] and len(got["none"]) == 0
        assert got["other"] == lines[:1] and len(got["other"]) == 1


def _stream(log: ResultLog, after: str, until: int, *, sse: bool, limit: int | None = None) -> str:
    """The text of ``GET /queries/q/results[.jsonl]`` resumed after ``after``, up to ``until``."""

    async def read() -> str:
        sub = log.subscribe("q", after=parse_cursor(after))
        return "".join([x async for x in result_stream(sub, "q", sse=sse, limit=limit, until=until)])

    return asyncio.run(read())


def test_readers_resumed_anywhere_read_the_same_from_blocks_as_from_lines() -> None:
    reports = _real_reports()
    received = _as_received(reports)
    by_lines = _leader(reports)
    by_blocks = ResultLog(60.0)
    by_blocks.lead(())
    for t, got in received:
        by_blocks.append(t, {"q": got["q"], "other": got["other"]})
    by_blocks.append(reports[-1][0], {}, ended=["other"])
    decode_answer(LOG_BLOCKS, by_blocks.answer_packed(0, None, blocks=True))
    # the leader, its entries and the answer to a standby split none of the reports (read below)
    held = [v for e in by_blocks.entries for v in e.reports.values() if v]
    assert held and all(isinstance(v, JoinedLines) and v._lines is None for v in held)
    # three standbys of the block leader: JSON (any client), msgpack of lines (a standby that
    # predates blocks) and blocks; all equal the JSON answer at every point of the log
    followers = {kind: ResultLog(60.0) for kind in ("json", LOG_MSGPACK, LOG_BLOCKS, LOG_FRAMES)}
    for after in range(by_blocks.last + 1):
        as_json = json.loads(json.dumps(by_blocks.answer(after, None)))
        assert as_json == json.loads(json.dumps(by_lines.answer(after, None)))
        assert decode_answer(LOG_MSGPACK, by_blocks.answer_packed(after, None)) == as_json
        blocks = decode_answer(LOG_BLOCKS, by_blocks.answer_packed(after, None, blocks=True))
        for row in blocks["entries"]:
            row[2] = {n: v.split("\n") if v else [] for n, v in row[2].items()}  # (one text each)
        assert blocks == as_json
        # (each entry one row: every name, then only the reports with lines, their texts joined)
        rows = decode_answer(LOG_FRAMES, by_blocks.answer_packed(after, None, frames=True))
        assert [len(r) for r in rows["entries"]] == [8] * len(as_json["entries"])
        rows["entries"] = [Entry.from_json(r).to_json() for r in rows["entries"]]
        assert rows == as_json
    for after in range(0, by_blocks.last + 1, 2):
        followers["json"].follow(json.loads(json.dumps(by_blocks.answer(after, "f1"))))
        followers[LOG_MSGPACK].follow(decode_answer(LOG_MSGPACK, by_blocks.answer_packed(after, "f2")))
        packed = by_blocks.answer_packed(after, "f3", blocks=True)
        followers[LOG_BLOCKS].follow(decode_answer(LOG_BLOCKS, packed))
        packed = by_blocks.answer_packed(after, "f4", frames=True)
        followers[LOG_FRAMES].follow(decode_answer(LOG_FRAMES, packed))
    assert {(f.last, f.committed) for f in followers.values()} == {(by_blocks.last, by_blocks.last)}
    assert all(f.after("other", (0, 0)) == [] for f in followers.values())
    assert isinstance(followers[LOG_BLOCKS].after("q", (0, 0))[0][1], JoinedLines)
    # a frames follower's reports: one text each, their line counts told (not counted again)
    held = [v for e in followers[LOG_FRAMES].entries for v in e.reports.values() if v]
    assert held and all(isinstance(v, JoinedLines) and v._lines is None and v._n is not None for v in held)
    assert [e.to_json() for e in followers[LOG_FRAMES].entries] == [e.to_json() for e in by_blocks.entries]
    # every resume point: before the first report, after each line of each report, after
    # each whole report (Last-Event-ID / ?after=); nothing missing, nothing repeated
    ids = [(line_id(t, k), ln) for t, lines in reports for k, ln in enumerate(lines, 1)]
    cursors = ["0"] + [i for i, _ in ids] + [str(t) for t, _ in reports]
    until = max(t for t, lines in reports if lines)  # (a reader after it waits for the next)
    for after in cursors:
        cut = parse_cursor(after)
        rest = [(i, ln) for i, ln in ids if parse_cursor(i) > cut]
        if not rest:
            continue
        sse = _stream(by_lines, after, until, sse=True)
        assert sse == "".join(f"id: {i}\ndata: {ln}\n\n" for i, ln in rest).join(
            [': subscribed to "q"\n\n', ""]
        )
        jsonl = _stream(by_lines, after, until, sse=False)
        assert jsonl == "".join(ln + "\n" for _, ln in rest)
        limited = _stream(by_lines, after, until, sse=False, limit=2)
        for log in (by_blocks, *followers.values()):
            assert _stream(log, after, until, sse=True) == sse
            assert _stream(log, after, until, sse=False) == jsonl
            assert _stream(log, after, until, sse=False, limit=2) == limited


def _outcome(read: Callable[..., list[tuple[int, Sequence[str], int]]], *args: object) -> object:
    try:
        return [(t, tuple(lines), first) for t, lines, first in read(*args)]
    except ResultsGone as exc:
        return ("gone", str(exc))


def test_a_resume_finds_in_the_entries_what_a_ring_per_query_kept() -> None:
    """The log keeps no ring per query: a resume finds the query's reports in the entries.
    What it finds equals what a :class:`ReportRing` fed every committed report (the log's
    rings until now) gives, at every cursor and after every report: the retention, the line
    budget (``max_lines``: the newest lines kept), a query ended and registered again."""
    reports = _real_reports()
    now = [0.0]

    def clock() -> float:
        return now[0]

    for max_lines in (100_000, 4, 1):
        log = ResultLog(6.0, clock=clock, max_lines=max_lines)
        log.lead(())
        rings = {n: ReportRing(6.0, max_lines, clock=clock) for n in ("q", "p")}
        seen: dict[str, list[tuple[int, int]]] = {"q": [], "p": []}  # (t, lines) per query
        for r in range(4):
            if r == 2:  # p unregistered (its subscriptions end), then registered again
                log.append(log.max_t or 0, {}, ended=["p"])
                rings["p"], seen["p"] = ReportRing(6.0, max_lines, clock=clock), []
            for k, (t, lines) in enumerate(reports):
                now[0] += 1.0
                t += 100_000 * r
                got = {"q": JoinedLines("\n".join(lines)) if lines else (), "p": tuple(lines[k % 2 :])}
                log.append(t, got)
                for name, ring in rings.items():
                    ring.add(t, got[name], now[0], len(got[name]))
                    seen[name].append((t, len(got[name])))
                for name, ring in rings.items():
                    cursors = {(0, 0), (t + 1, 0)}
                    for s, n in seen[name]:
                        cursors |= {(s, j) for j in range(n + 1)} | {(s - 1, 2**62), (s, 2**62)}
                    for cur in sorted(cursors):
                        want = _outcome(ring.after, cur)
                        assert _outcome(log.after, name, cur) == want, (max_lines, name, cur)
        # the retention and the budget did drop reports: resumes before them are refused
        assert log.dropped and _outcome(log.after, "q", (0, 0))[0] == "gone"


def test_a_commit_reads_no_query_but_the_subscribed_ones() -> None:
    """Committing an entry costs the same with few or many queries: it offers the entry to the
    subscribed queries only (their reports looked up from their side), nothing per query."""

    class Counted(dict):
        reads = 0

        def items(self):  # type: ignore[override]
            Counted.reads += 1
            return super().items()

        def get(self, key, default=None):  # type: ignore[override]
            Counted.reads += 1
            return super().get(key, default)

        def __iter__(self):  # type: ignore[override]
            Counted.reads += 1
            return super().__iter__()

    log = ResultLog(60.0)
    log.lead(())
    sub = log.subscribe("q7")
    for t in range(1, 4):
        log.append(1000 * t, Counted({f"q{k}": (f'{{"k": {k}}}',) for k in range(5000)}))
    assert log.committed == 3 and Counted.reads == 3  # one lookup per entry: the subscribed query's
    assert [sub.get_report(0)[1] for _ in range(3)] == [('{"k": 7}',)] * 3
    assert [t for t, _, _ in log.after("q3", (1000, 1))] == [2000, 3000]


@pytest.mark.parametrize(
    "row",
    [
        [1, 1000, ["a", "b"], [1], [3, 1], [1], "xyz", []],  # sizes for more reports than positions
        [1, 1000, ["a", "b"], [2], [3], [1], "xyz", []],  # a position past the names
        [1, 1000, ["a", "b"], [1], [2], [1], "xyz", []],  # sizes that do not add up to the text
        [1, 1000, ["a", 7], [1], [3], [1], "xyz", []],  # a name that is no string
    ],
)
def test_a_frames_row_whose_parts_do_not_fit_is_refused(row: list) -> None:
    with pytest.raises(ValueError, match="do not fit"):
        Entry.from_json(row)
