"""Event-time rules at the live edges (docs/semantics.md, "Event-time rules"): pushes and
``POST /watermark`` outside ``0 <= t < 2^53`` ms or more than the maximum jump ahead are
refused with a 422 naming the value, nothing is poisoned, and a large (allowed) gap is
crossed in work proportional to the reports that write something.

Every engine call runs under a thread timeout of a few seconds: a hang fails the test.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from linkstream.api.app import create_app
from linkstream.engine.live.runtime import LiveEngine
from linkstream.rdf.eventtime import EventTimeError

EX = "http://ex.org/"
S = EX + "s"
SELECT = f"""PREFIX ex: <{EX}>
SELECT ?x WHERE {{ STREAM ex:s [RANGE 2s SLIDE 1s] {{ ?x ex:p ?v }} }}"""
ASK = f"""PREFIX ex: <{EX}>
ASK WHERE {{ STREAM ex:s [RANGE 2s SLIDE 1s] {{ ?x ex:p ?v }} }}"""
LIMIT_S = 10.0


def bounded(fn: Callable[[], Any], seconds: float = LIMIT_S) -> Any:
    """``fn()`` in a thread; fails the test if it does not return within ``seconds``."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # handed back to the test
            box["error"] = e

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(seconds)
    if th.is_alive():
        pytest.fail(f"did not finish within {seconds}s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def triple(k: int) -> tuple[str, str, str]:
    return (f"<{EX}o{k}>", f"<{EX}p>", f'"{k}"^^<http://www.w3.org/2001/XMLSchema#integer>')


def drain(sub) -> list[tuple[int, tuple[str, ...]]]:
    import queue

    out = []
    while True:
        try:
            out.append(sub.get_report(timeout=0))
        except queue.Empty:
            return out


# ---------------------------------------------------------------- the live engine


def test_push_out_of_range_is_refused_and_nothing_is_poisoned() -> None:
    with LiveEngine(idle_ms=None) as live:
        name = live.register(SELECT, "q")
        sub = live.subscribe(name)
        assert live.push(S, 1000, [triple(1)])
        for bad in (10**23, -1, 2**53, 2**63):
            with pytest.raises(EventTimeError, match="outside the accepted range"):
                live.push(S, bad, [triple(9)])
        assert live.push(S, 2000, [triple(2)])  # not late: the refused ones moved nothing
        assert bounded(lambda: live.advance_to(3000)) == 3000
        got = {c: sorted(json.loads(x)["binding"]["x"] for x in lines) for c, lines in drain(sub)}
        assert got == {2000: [f"<{EX}o1>"], 3000: [f"<{EX}o1>", f"<{EX}o2>"]}
        st = live.status()["streams"][S]
        assert st["rejected"] == 4 and st["late"] == 0 and st["elements"] == 2


def test_push_far_ahead_is_refused_with_the_reason() -> None:
    with LiveEngine(idle_ms=None) as live:
        live.register(SELECT, "q")
        assert live.push(S, 1000, [triple(1)])
        with pytest.raises(EventTimeError, match="--max-time-jump") as e:
            live.push(S, 1_700_000_000_000, [triple(2)])
        assert e.value.reason == "jump"
        assert live.push(S, 2000 + 86_400_000 - 1000, [triple(3)])  # within a day: accepted
        bounded(live.flush)


def test_watermark_checks_and_a_huge_allowed_gap_is_crossed_quickly() -> None:
    with LiveEngine(idle_ms=None) as live:
        name = live.register(SELECT, "q")
        sub = live.subscribe(name)
        assert live.push(S, 1000, [triple(1)])
        with pytest.raises(EventTimeError, match="outside"):
            live.advance_to(10**23)
        with pytest.raises(EventTimeError, match="--max-time-jump"):
            live.advance_to(1_700_000_000_000)
        live.max_time_jump_ms = 0  # no limit: the gap costs the reports that write
        far = 1_700_000_000_000
        assert bounded(lambda: live.advance_to(far)) == far
        assert live.push(S, far + 10, [triple(2)])
        assert bounded(lambda: live.advance_to(far + 3000)) == far + 3000
        got = {c for c, lines in drain(sub) if lines}
        assert got == {2000, 3000, far + 1000, far + 2000}
        assert live.push(S, 5000, [triple(3)]) is False  # older than what fired: late
        assert live.view(name).stats.reports == (far + 3000 - 2000) // 1000 + 1


def test_ask_over_a_day_long_gap_reports_every_time_in_bounded_time() -> None:
    with LiveEngine(idle_ms=None) as live:
        name = live.register(ASK, "a")
        sub = live.subscribe(name, maxlen=200_000)
        assert live.push(S, 1000, [triple(1)])
        day = 86_400_000
        assert bounded(lambda: live.advance_to(1000 + day), 60.0) == 1000 + day
        reports = drain(sub)
        assert len(reports) == day // 1000
        assert [json.loads(x)["ask"] for x in reports[0][1]] == [True]
        assert [json.loads(x)["ask"] for x in reports[-1][1]] == [False]


# ---------------------------------------------------------------- HTTP


@pytest.fixture
def client() -> Iterator[TestClient]:
    live = LiveEngine(idle_ms=None)
    with TestClient(create_app(live)) as c:
        c.live = live  # type: ignore[attr-defined]
        yield c


def test_http_push_1e23_is_422_and_later_pushes_are_not_late(client: TestClient) -> None:
    body = f"<{EX}o1> <{EX}p> <{EX}v> ."
    hdr = {"content-type": "application/n-triples"}
    r = bounded(lambda: client.post("/streams", params={"iri": S, "t": "1000"}, content=body, headers=hdr))
    assert r.status_code == 202
    for bad in ("100000000000000000000000", "-5", "9" * 5000):
        r = bounded(
            lambda b=bad: client.post("/streams", params={"iri": S, "t": b}, content=body, headers=hdr)
        )
        assert r.status_code == 422, r.text
        assert "outside the accepted range" in r.json()["error"]
    r = bounded(lambda: client.post("/streams", params={"iri": S, "t": "2000"}, content=body, headers=hdr))
    assert r.status_code == 202 and r.json()["late"] == 0 and r.json()["elements"] == 1


def test_http_push_far_ahead_is_422(client: TestClient) -> None:
    body = f"<{EX}o1> <{EX}p> <{EX}v> ."
    hdr = {"content-type": "application/n-triples"}
    assert (
        client.post("/streams", params={"iri": S, "t": "1000"}, content=body, headers=hdr).status_code == 202
    )
    r = bounded(
        lambda: client.post("/streams", params={"iri": S, "t": "1700000000000"}, content=body, headers=hdr)
    )
    assert r.status_code == 422 and "--max-time-jump" in r.json()["error"]
    r = client.post("/streams", params={"iri": S, "t": "3000"}, content=body, headers=hdr)
    assert r.status_code == 202 and r.json()["late"] == 0


def test_http_timestamped_body_dated_year_one_is_422(client: TestClient) -> None:
    prov = "<http://www.w3.org/ns/prov#generatedAtTime>"
    body = (
        f'<{EX}g1> {prov} "0001-01-01T00:00:00Z"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
        f"<{EX}o1> <{EX}p> <{EX}v> <{EX}g1> .\n"
    )
    r = bounded(
        lambda: client.post(
            "/streams", params={"iri": S}, content=body, headers={"content-type": "application/n-quads"}
        )
    )
    assert r.status_code == 422 and "element 1 of the body" in r.json()["error"]


def test_http_watermark_huge_is_422_not_a_hang(client: TestClient) -> None:
    client.post("/queries", content=SELECT, headers={"content-type": "application/sparql-query"})
    body = f"<{EX}o1> <{EX}p> <{EX}v> ."
    hdr = {"content-type": "application/n-triples"}
    assert (
        client.post("/streams", params={"iri": S, "t": "1000"}, content=body, headers=hdr).status_code == 202
    )
    for bad in ("100000000000000000000000", "-1"):
        r = bounded(lambda b=bad: client.post("/watermark", params={"t": b}))
        assert r.status_code == 422 and "outside" in r.json()["error"], r.text
    r = bounded(lambda: client.post("/watermark", json={"t": 1e308}))
    assert r.status_code == 422
    r = bounded(lambda: client.post("/watermark", content=b'{"t": Infinity}'))
    assert r.status_code == 400
    r = bounded(lambda: client.post("/watermark", params={"t": "1700000000000"}))
    assert r.status_code == 422 and "--max-time-jump" in r.json()["error"]
    r = bounded(lambda: client.post("/watermark", params={"t": "50000"}))
    assert r.status_code == 200 and r.json()["watermark"] == 50000
