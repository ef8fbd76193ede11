"""Slow subscribers through a real uvicorn server: a reader whose queue overflowed gets one
explicit gap (SSE ``event: gap``, JSON Lines ``{"gap": ...}``) with the exact missed range,
re-reads that range with ``?after=``, and a reader that keeps up never sees a gap.

The overflow is made deterministic by resuming from the result ring (``?after=0``) with a
queue smaller than what is kept: the kept reports are offered all at once, as to a reader
that fell behind the live engine.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx

from linkstream.api.client import Client
from tests.api.corpus import Corpus
from tests.api.test_http_api import TIMEOUT, Reader, push, subscribers, wait_for

QUEUE = 5


def sse_events(
    url: str, name: str, stop_id: str | None = None, **params: Any
) -> Iterator[tuple[str, str, str]]:
    """``(event, id, data)`` of the SSE endpoint until ``event: end`` or the id ``stop_id``."""
    with httpx.stream("GET", f"{url}/queries/{name}/results", params=params, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.read()
        event, eid, data = "message", "", ""
        for line in r.iter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("id: "):
                eid = line[4:]
            elif line.startswith("data: "):
                data = line[6:]
            elif not line and data:
                if event == "end":
                    return
                yield event, eid, data
                if eid == stop_id:
                    return
                event, eid, data = "message", "", ""


def jsonl(url: str, name: str, n: int, **params: Any) -> list[str]:
    """The first ``n`` lines of the JSON Lines endpoint."""
    out: list[str] = []
    with httpx.stream("GET", f"{url}/queries/{name}/results.jsonl", params=params, timeout=TIMEOUT) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.strip():
                out.append(line)
                if len(out) == n:
                    break
    return out


def kept_suffix(ids: list[str], queue: int) -> int:
    """How many of the first ``ids`` a queue of ``queue`` lines drops when they are offered
    report by report (whole reports go, the newest one always stays)."""
    sizes: list[int] = []
    last = None
    for i in ids:
        t = i.split(":")[0]
        if t != last:
            sizes.append(0)
            last = t
        sizes[-1] += 1
    kept = sizes[-1]
    for s in reversed(sizes[:-1]):
        if kept + s > queue:
            break
        kept += s
    return len(ids) - kept


def test_slow_subscriber_gets_gap_and_rereads_it(corpus: Corpus, make_server) -> None:
    srv = make_server()
    url = srv.url
    name = "cqels-Q1"
    with Client(url) as client:
        client.register((corpus.queries / "cqels-Q1.rq").read_text(), default_name=name)
        last = corpus.last_report()
        fast_sse = Reader(lambda: sse_events(url, name, until=last))
        fast_jsonl = Reader(lambda: (json.loads(x) for x in _raw_jsonl(url, name, until=last)))
        fast_sse.start()
        fast_jsonl.start()
        wait_for(lambda: subscribers(url, name) == 2, "subscribers")
        for el in corpus.elements:
            push(client, url, el)
        assert httpx.post(url + "/watermark", params={"t": last}, timeout=TIMEOUT).status_code == 200
        fast_sse.finish()
        fast_jsonl.finish()

    # a reader that keeps up: every line, no gap
    events = fast_sse.rows
    assert events and all(ev == "message" for ev, _, _ in events)
    assert not any("gap" in row for row in fast_jsonl.rows)
    ids = [eid for _, eid, _ in events]
    data = [d for _, _, d in events]
    assert [json.loads(d) for d in data] == fast_jsonl.rows
    missed = kept_suffix(ids, QUEUE)
    assert missed > 10  # not vacuous: the queue really overflowed
    t0, k0 = ids[0].split(":")
    assert k0 == "1"
    gap = {"query": name, "from": ids[0], "to": ids[missed - 1], "lines": missed, "after": str(int(t0) - 1)}

    # a reader that fell behind (SSE): the gap first, with the exact range, then the newer lines
    slow = list(sse_events(url, name, stop_id=ids[-1], after="0", queue=QUEUE))
    assert slow[0][0] == "gap" and json.loads(slow[0][2]) == gap and slow[0][1] == ""
    assert slow[1:] == events[missed:]

    # the same over JSON Lines
    lines = jsonl(url, name, 1 + len(ids) - missed, after="0", queue=QUEUE)
    assert json.loads(lines[0]) == {"gap": gap}
    assert [json.loads(x) for x in lines[1:]] == fast_jsonl.rows[missed:]

    # the missed range re-read from the ring: exactly the lost lines, none more
    again = jsonl(url, name, missed, after=gap["after"], limit=missed)
    assert [json.loads(x) for x in again] == [json.loads(d) for d in data[:missed]]
    resent = list(sse_events(url, name, stop_id=gap["to"], after=gap["after"]))
    assert resent == events[:missed]

    # the Python client hands gaps over as {"gap": ...} rows; the metrics count them
    with Client(url) as client:
        rows = client.results(
            name, sse=True, after="0", queue=QUEUE, limit=len(ids) - missed, timeout=TIMEOUT
        )
        got = list(rows)
    assert got[0] == {"gap": gap} and got[1:] == fast_jsonl.rows[missed:]
    metrics = httpx.get(url + "/metrics", timeout=TIMEOUT).text
    assert "linkstream_subscriber_gaps_total 3.0" in metrics
    assert "linkstream_subscriber_dropped_lines_total %s" % float(3 * missed) in metrics


def _raw_jsonl(url: str, name: str, **params: Any) -> Iterator[str]:
    with httpx.stream("GET", f"{url}/queries/{name}/results.jsonl", params=params, timeout=TIMEOUT) as r:
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.strip():
                yield line
