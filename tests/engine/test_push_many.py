"""``LiveEngine.push_many`` decides exactly what ``push`` decides element by element.

Two live engines hold the same query; one is fed element by element with ``push``, the
other body by body with ``push_many`` (string triples, and the owner hand-off's term
table form :class:`TermRows` through ``pack_elements``/``unpack_elements``): the per-element
answers (taken / late / the event-time error that stops a body), the stream figures and
every report are equal.  With a durable ingest log, the log of ``push_many`` replayed
into a fresh engine gives the same reports and knows the idempotency keys.
"""

from __future__ import annotations

from pathlib import Path

import msgpack
import pytest

from linkstream.cluster.ingest import pack_elements, unpack_elements
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from linkstream.rdf.eventtime import EventTimeError

EX = "http://example.org/"
S1 = EX + "s1"
QUERY = f"SELECT ?x (COUNT(?v) AS ?n) WHERE {{ STREAM <{S1}> [RANGE 3s SLIDE 1s] {{ ?x <{EX}p> ?v }} }} GROUP BY ?x"


def _el(t: int, *pairs: tuple[str, str]) -> tuple[int, list[tuple[str, str, str]]]:
    return t, [(f"<{EX}{s}>", f"<{EX}p>", f'"{o}"') for s, o in pairs]


#: bodies in order: a repeated key, a late element, an element too far ahead (stops the body)
BODIES: list[tuple[list[tuple[int, list[tuple[str, str, str]]]], list[str | None]]] = [
    ([_el(1000, ("a", "1"), ("b", "2")), _el(1500, ("a", "3")), _el(1500)], ["k1", "k2", None]),
    ([_el(1500, ("a", "3"))], ["k2"]),  # k2 again: taken, not pushed twice
    ([_el(1200, ("c", "9")), _el(2500, ("b", "4"), ("b", "5"), ("a", "6"))], [None, "k3"]),  # 1200: late
    ([_el(3100, ("c", "7")), _el(10**15, ("d", "0")), _el(3200, ("d", "1"))], [None, None, None]),
    ([_el(4100, ("a", "1"), ("c", "2")), _el(5600, ("c", "8"))], ["k4", "k5"]),
]


def _one_by_one(live: LiveEngine) -> list[tuple[list[bool], str | None]]:
    out = []
    for elements, keys in BODIES:
        flags: list[bool] = []
        error = None
        for (t, triples), key in zip(elements, keys):
            try:
                flags.append(live.push(S1, t, triples, key=key))
            except EventTimeError as exc:
                error = str(exc)
                break
        out.append((flags, error))
    return out


def _by_body(live: LiveEngine, packed: bool) -> list[tuple[list[bool], str | None]]:
    out = []
    for elements, keys in BODIES:
        body = elements
        if packed:  # as the leader gets it from an owner: the term table and int32 rows
            wire = msgpack.unpackb(msgpack.packb(pack_elements(elements), use_bin_type=True), raw=False)
            body = unpack_elements(wire)  # type: ignore[assignment]  # TermRows stand for the triples
        flags, error = live.push_many(S1, body, keys=keys)
        assert error is None or isinstance(error, EventTimeError)
        out.append((flags, None if error is None else str(error)))
    return out


def _run(feed, state: Path | None = None) -> tuple[list, dict, list]:
    live = LiveEngine(idle_ms=None).start()
    if state is not None:
        live.recover(IngestLog(str(state)), timeout=30)
    try:
        live.register(QUERY, "q")
        sub = live.subscribe("q")
        answers = feed(live)
        live.flush()
        figures = live.status()["streams"][S1]
        live.advance_to(9000)
        reports = []
        while not reports or reports[-1][0] < 9000:
            t, lines = sub.get_report(timeout=5)
            reports.append((t, tuple(sorted(lines))))
        return answers, figures, reports
    finally:
        live.close()


@pytest.mark.parametrize("packed", [False, True], ids=["strings", "term-table"])
def test_push_many_equals_push_one_by_one(packed: bool) -> None:
    want = _run(_one_by_one)
    got = _run(lambda live: _by_body(live, packed))
    assert got[0] == want[0]
    assert want[0][1] == ([True], None)  # the repeated key
    assert want[0][2][0] == [False, True]  # the late element
    assert want[0][3][0] == [True] and "maximum jump" in str(want[0][3][1])  # the body stopped there
    assert got[1] == want[1] == {"watermark": 5600, "elements": 7, "triples": 10, "late": 1, "rejected": 1}
    assert got[2] == want[2]
    assert any(lines for _, lines in want[2])


def test_push_many_log_replays_the_same(tmp_path: Path) -> None:
    """The ingest log of bodies pushed in the term-table form (logged as N-Triples strings)."""
    state = tmp_path / "state"
    first = _run(lambda live: _by_body(live, True), state)
    live = LiveEngine(idle_ms=None).start()
    try:
        live.recover(IngestLog(str(state)), timeout=30)
        live.flush()
        # late elements and elements refused for their time are logged (counted again)
        assert first[1]["late"] > 0 and first[1]["rejected"] > 0
        assert live.status()["streams"][S1] == first[1]
        # the keys came back with the log: a retry is taken, not pushed again
        assert live.push_many(S1, [_el(5600, ("z", "z"))], keys=["k5"]) == ([True], None)
        live.flush()
        assert live.status()["streams"][S1]["elements"] == first[1]["elements"]
    finally:
        live.close()
    assert first[2] == _run(_one_by_one)[2]
