"""The live engine without HTTP: event-time firing, idle streams, late elements, slow
subscribers, retention for late registration; and the stream body parser."""

from __future__ import annotations

import asyncio
import json
import queue

import pytest

from linkstream.api.bodies import BodyError, parse_body
from linkstream.engine.live.runtime import LiveEngine, QueryConflict, UnknownQuery
from linkstream.engine.live.subscription import SubscriptionClosed
from linkstream.query.errors import QueryError

EX = "http://ex.org/"
S1, S2 = EX + "s1", EX + "s2"
TWO_STREAMS = f"""PREFIX ex: <{EX}>
SELECT ?x ?y WHERE {{
  STREAM ex:s1 [RANGE 2s SLIDE 1s] {{ ?x ex:p ?v }}
  STREAM ex:s2 [RANGE 2s SLIDE 1s] {{ ?y ex:p ?w }}
}}"""
COUNT_S1 = f"""PREFIX ex: <{EX}>
SELECT (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s1 [RANGE {{r}}s SLIDE 1s] {{ ?x ex:p ?v }} }}"""


def triple(k: int) -> tuple[str, str, str]:
    return (f"<{EX}o{k}>", f"<{EX}p>", f'"{k}"^^<http://www.w3.org/2001/XMLSchema#integer>')


def count(line: str) -> int:
    """The ``?n`` of a COUNT result line."""
    return int(json.loads(line)["binding"]["n"].split('"')[1])


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def drain(sub) -> list[tuple[int, tuple[str, ...]]]:
    out = []
    while True:
        try:
            out.append(sub.get_report(timeout=0))
        except queue.Empty:
            return out


def test_reports_fire_when_every_stream_passed_them_or_a_silent_stream_went_idle() -> None:
    clock = FakeClock()
    with LiveEngine(idle_ms=500, clock=clock) as live:
        name = live.register(TWO_STREAMS, "two")
        sub = live.subscribe(name)
        for k in range(1, 6):
            assert live.push(S1, k * 1000, [triple(k)])
        assert live.flush() is None  # s2 has no data and is not idle yet: nothing fires
        assert live.view(name).first_report is None
        live.push(S2, 1500, [triple(100)])
        assert live.flush() is None  # the first report is the first close after 1000: 2000
        assert live.view(name).first_report == 2000
        live.push(S2, 2500, [triple(101)])
        assert live.flush() == 2000  # both streams passed 2000, not 3000
        assert [c for c, _ in drain(sub)] == [2000]
        clock.now = 1.0  # s2 silent for 1 s > idle_ms: it stops holding s1 back
        assert live.flush() == 5000
        assert [c for c, _ in drain(sub)] == [3000, 4000, 5000]
        # s2 comes back with data older than what fired: late, dropped, counted
        assert live.push(S2, 4000, [triple(102)]) is False
        assert live.status()["streams"][S2]["late"] == 1
        assert live.push(S2, 5000, [triple(103)]) is True


def test_advance_to_fires_empty_windows_and_makes_older_elements_late() -> None:
    with LiveEngine(idle_ms=None) as live:
        live.register(COUNT_S1.replace("{r}", "2"), "n")
        sub = live.subscribe("n")
        live.push(S1, 1000, [triple(1), triple(2)])
        assert live.advance_to(5000) == 5000
        counts = [(c, count(lines[0])) for c, lines in drain(sub)]
        # a window [c-2s, c): the two triples at 2000 and 3000, then COUNT = 0 (empty windows report too)
        assert counts == [(2000, 2), (3000, 2), (4000, 0), (5000, 0)]
        assert live.push(S1, 4999, [triple(3)]) is False
        assert live.push(S1, 5000, [triple(3)]) is True


def test_slow_subscriber_loses_oldest_and_never_blocks_the_engine() -> None:
    with LiveEngine(idle_ms=None, subscriber_queue=3) as live:
        live.register(COUNT_S1.replace("{r}", "1"), "n")
        slow, fast = live.subscribe("n"), live.subscribe("n", maxlen=1000)
        for k in range(1, 21):
            live.push(S1, k * 1000, [triple(k)])
        assert live.advance_to(21000) == 21000
        kept = drain(slow)
        assert [c for c, _ in kept] == [19000, 20000, 21000]
        assert slow.dropped == 17 and live.view("n").dropped == 17
        assert len(drain(fast)) == 20 and fast.dropped == 0
        slow.close()
        assert live.view("n").subscribers == 1


def gaps_total(live: LiveEngine) -> float:
    return live.metrics.registry.get_sample_value("linkstream_subscriber_gaps_total") or 0.0


def test_slow_subscriber_is_told_the_gap_with_the_next_report() -> None:
    async def entries(sub) -> list:
        out = []
        while (e := await sub.next_entry(0.01)) is not None:
            out.append(e)
        return out

    with LiveEngine(idle_ms=None, subscriber_queue=3) as live:
        live.register(COUNT_S1.replace("{r}", "1"), "n")
        slow, fast = live.subscribe("n"), live.subscribe("n", maxlen=1000)
        before = gaps_total(live)
        for k in range(1, 12):
            live.push(S1, k * 1000, [triple(k)])
        assert live.advance_to(12000) == 12000
        got = asyncio.run(entries(slow))
        # reports 2000..12000 (one line each): 2000..9000 lost as one run, then 10000 after it
        assert [(g, c) for g, (c, _, _) in got] == [
            (("2000:1", "9000:1", 8), 10000),
            (None, 11000),
            (None, 12000),
        ]
        assert slow.gaps == 1 and gaps_total(live) - before == 1
        for k in range(12, 17):  # caught up, then falls behind again: a second gap
            live.push(S1, k * 1000, [triple(k)])
        assert live.advance_to(17000) == 17000
        assert [g for g, _ in asyncio.run(entries(slow))] == [("13000:1", "14000:1", 2), None, None]
        assert slow.gaps == 2 and all(g is None for g, _ in asyncio.run(entries(fast)))


def test_register_unregister_and_names() -> None:
    with LiveEngine(idle_ms=None) as live:
        with pytest.raises(QueryError) as ei:
            live.register("SELECT ?x WHERE { STREAM <urn:s> [RANGE 2s] { ?x ?p } }")
        assert ei.value.line == 1 and ei.value.column
        q = "SELECT ?x WHERE { STREAM <urn:s> [RANGE 2s] { ?x ?p ?o } }"
        assert live.register(q) == "q1"
        assert live.register(q, default_name="file-stem") == "file-stem"
        csparql = (
            "REGISTER QUERY named AS SELECT ?x FROM STREAM <urn:s> [RANGE 2s STEP 1s] WHERE { ?x ?p ?o }"
        )
        assert live.register(csparql) == "named"
        assert live.register(csparql, "renamed") == "renamed"
        with pytest.raises(QueryConflict):
            live.register(q, "q1")
        sub = live.subscribe("q1")
        n = live.status()["operators"]
        live.unregister("q1")
        with pytest.raises(SubscriptionClosed):
            sub.get_report(timeout=5)  # the query went: its subscriptions end
        live.unregister("file-stem")
        live.unregister("named")
        live.unregister("renamed")
        assert live.status()["operators"] < n and live.status()["operators"] == 0
        with pytest.raises(UnknownQuery):
            live.unregister("q1")
        with pytest.raises(UnknownQuery):
            live.subscribe("q1")


def test_late_registered_query_sees_retained_history_in_range() -> None:
    with LiveEngine(idle_ms=None, retention_ms=10_000) as live:
        live.register(COUNT_S1.replace("{r}", "1"), "short")
        for k in range(1, 41):
            live.push(S1, k * 1000, [triple(k)])
        live.flush()
        live.register(COUNT_S1.replace("{r}", "8"), "long")
        assert live.view("long").first_report == 41000
        sub = live.subscribe("long")
        live.push(S1, 41000, [triple(41)])
        assert live.advance_to(42000) == 42000
        reports = drain(sub)
        assert [c for c, _ in reports] == [41000, 42000]
        assert [count(lines[0]) for _, lines in reports] == [8, 8]


def test_body_formats_and_errors() -> None:
    nt = b'<urn:a> <urn:p> "x" .\n# comment\n\n<urn:a> <urn:p> "x" .\n_:b1 <urn:p> <urn:c> .\n'
    [el] = parse_body(nt, "application/n-triples; charset=utf-8", bnode_prefix="r1_", base=EX)
    assert el.t is None and el.triples == [("<urn:a>", "<urn:p>", '"x"'), ("_:r1_b1", "<urn:p>", "<urn:c>")]
    stamped = (
        b'<urn:g1> <http://www.w3.org/ns/prov#generatedAtTime> "1970-01-01T00:00:01Z"'
        b"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
        b"<urn:a> <urn:p> <urn:b> <urn:g1> .\n"
        b'<urn:g2> <http://www.w3.org/ns/prov#generatedAtTime> "1970-01-01T00:00:02.5Z"'
        b"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n"
        b"<urn:c> <urn:p> <urn:d> <urn:g2> .\n<urn:e> <urn:p> <urn:f> <urn:g1> .\n"
    )
    els = parse_body(stamped, "application/n-quads", bnode_prefix="", base=EX)
    assert [(e.t, len(e.triples)) for e in els] == [(1000, 2), (2500, 1)]
    [el] = parse_body(b"<urn:a> <urn:p> <urn:b> <urn:g> .\n", "application/n-quads", bnode_prefix="", base=EX)
    assert el.triples == [("<urn:a>", "<urn:p>", "<urn:b>")]
    [el] = parse_body(b"<a> <p> 1.50 .", "text/turtle", bnode_prefix="", base=EX)
    assert el.triples == [(f"<{EX}a>", f"<{EX}p>", '"1.50"^^<http://www.w3.org/2001/XMLSchema#decimal>')]
    with pytest.raises(BodyError) as ei:
        parse_body(
            b"<urn:a> <urn:p> <urn:b> .\n<urn:a> <p> <urn:b> .\n<urn:a> <urn:p> .\n",
            None,
            bnode_prefix="",
            base=EX,
        )
    assert ei.value.line == 2 and [e["line"] for e in ei.value.errors] == [2, 3]
    with pytest.raises(BodyError) as ei:
        parse_body(
            b"<urn:a> <urn:p> <urn:b> <urn:g9> .\n" + stamped, "application/n-quads", bnode_prefix="", base=EX
        )
    assert "before its timestamp" in ei.value.message
    with pytest.raises(BodyError) as ei:
        parse_body(b"{}", "application/xml", bnode_prefix="", base=EX)
    assert ei.value.status == 415
    with pytest.raises(BodyError):
        parse_body(
            b'{"@context": [{"@import": "http://x.org/c"}]}', "application/ld+json", bnode_prefix="", base=EX
        )
