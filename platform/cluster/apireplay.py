"""A replay as a client of the live service: ``linkstream replay --cluster N``.

The live service (``linkstream run`` / ``run --zk``) and a replay share one data path:
:func:`replay_through_api` registers the queries in one ``POST /queries`` batch, pushes
the stream files over ``POST /streams/{iri}`` and reads every query's lines from
``GET /queries/{name}/results.jsonl``, writing the replay's ``--out`` file.  Its results
equal the embedded replay's (SEMANTICS.md §4, §8):

* The files are read by the replay's own reader (:class:`~linkstream.rdf.streams.StreamReader`:
  the same rejected lines, late elements, blank-node scopes and time-jump checks) and
  merged by event time as :func:`linkstream.engine.replay.replay` merges them.
* Before the queries are registered, an explicit watermark at the earliest element of all
  streams makes every query report from the first close strictly after it, as a replay does.
* The merged elements go in chunks: each chunk is one timestamped N-Quads body per
  stream, then ``POST /watermark`` at the timestamp of the next element, so that every
  report time ``c <= t`` fires before an element at ``t`` could be late, as a replay
  evaluates it before ingesting ``t``.  The server must not let streams go idle
  (``--idle-ms 0``): a stream waiting for its turn in a chunk would otherwise stop
  holding back reports.
* The last watermark is the latest of the queries' last report times (the first close
  strictly after the latest element, or the ``max_reports``-th report); a query's lines
  after its own last report are left out.  Once it fired, the queries are unregistered,
  which ends their result streams after every line before it.

A request answered 503 (no leader yet, a stream changing owner, a full input queue) is
sent again; a push goes under an ``Idempotency-Key`` (the run, chunk and stream), so a
retry after a partly taken body or a lost answer takes only what was not taken.

Limits: allowed lateness (``--lateness``) is a replay-only rule (a live server drops what
is older than a fired report), so a replay with lateness runs through the driver
(:mod:`linkstream.cluster.replay`); a blank node is scoped to one pushed body, not to its
whole file.
"""

from __future__ import annotations

import heapq
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import TextIO
from urllib.parse import quote

import httpx

from linkstream.api.client import ApiError, Client
from linkstream.engine.embedded import RegisteredQuery
from linkstream.engine.replay import ReplayResult
from linkstream.rdf.dictionary import Dictionary, MemoryDictionary
from linkstream.rdf.eventtime import DEFAULT_MAX_TIME_JUMP_MS
from linkstream.rdf.streams import PROV_GENERATED_AT, Element, StreamReader
from linkstream.rdf.terms import XSD_DATETIME

__all__ = ["ApiReplayError", "ApiReplayResult", "replay_through_api"]

#: elements per chunk (one body per stream and one watermark per chunk)
CHUNK_ELEMENTS = 2000
#: bytes of N-Quads after which a chunk is cut early
CHUNK_BYTES = 8 << 20
#: lines a result stream may hold for this reader before the server reports a gap
READER_QUEUE = 1_000_000
#: times a request answered 503 (or a push whose answer was lost) is sent again, 0.2 s apart
RETRIES = 300
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_PROV = "<" + PROV_GENERATED_AT + ">"


class ApiReplayError(RuntimeError):
    """The service could not run the replay (one line saying why)."""


@dataclass
class ApiReplayResult:
    """What :func:`replay_through_api` did.

    Attributes:
        replay: Counts and timings, as for an embedded replay (``queries`` holds the local
            schedules; ``rows`` the lines written).
        requests: HTTP requests made (registration, pushes, watermarks, unregistrations).
        body_bytes: Bytes of the pushed bodies.
        url: The API the replay used.
        chunks: Chunks of elements pushed (each one body per stream and a watermark).
        reports: Report times of each query (evaluated or not), as the replay counts them.
        containers: The containers of the service's run (its ``GET /status``).
    """

    replay: ReplayResult
    requests: int = 0
    body_bytes: int = 0
    url: str = ""
    chunks: int = 0
    reports: dict[str, int] = field(default_factory=dict)
    containers: list[str] = field(default_factory=list)


def _iso(t: int) -> str:
    """``t`` ms as an ``xsd:dateTime`` the readers parse back to exactly ``t``."""
    secs, ms = divmod(t, 1000)
    return "%s.%03dZ" % ((_EPOCH + timedelta(seconds=secs)).strftime("%Y-%m-%dT%H:%M:%S"), ms)


def _body(elements: Sequence[Element], dictionary: Dictionary, serial: Iterator[int]) -> str:
    """Timestamped N-Quads of ``elements`` (one named graph each, SEMANTICS.md §2)."""
    parts: list[str] = []
    for el in elements:
        g = "<urn:linkstream:replay:e%d>" % next(serial)
        parts.append('%s %s "%s"^^<%s> .\n' % (g, _PROV, _iso(el.t), XSD_DATETIME))
        if len(el.triples):
            terms = dictionary.decode_many(el.triples.reshape(-1))
            tail = " %s .\n" % g
            parts.extend(
                terms[i] + " " + terms[i + 1] + " " + terms[i + 2] + tail for i in range(0, len(terms), 3)
            )
    return "".join(parts)


def _report_time(line: str) -> int:
    """The ``t`` of a result line (its first unescaped ``"t": `` key)."""
    k = line.find('"t": ')
    if k >= 0:
        end = k + 5
        while end < len(line) and line[end].isdigit():
            end += 1
        if end > k + 5:
            return int(line[k + 5 : end])
    return int(json.loads(line)["t"])


class _Reader(threading.Thread):
    """Collects one query's result lines (``results.jsonl``) until its stream ends."""

    def __init__(self, url: str, token: str | None, name: str) -> None:
        super().__init__(name=f"results-{name}", daemon=True)
        self.url = f"{url}/queries/{quote(name, safe='')}/results.jsonl"
        self.headers = {"Authorization": "Bearer " + token} if token else {}
        self.query = name
        self.lines: list[str] = []
        self.error: str | None = None
        self.open = threading.Event()

    def run(self) -> None:
        try:
            timeout = httpx.Timeout(30.0, read=None)
            params = {"queue": str(READER_QUEUE)}
            with httpx.stream("GET", self.url, params=params, headers=self.headers, timeout=timeout) as r:
                if r.status_code != 200:
                    r.read()
                    self.error = f"results of {self.query}: HTTP {r.status_code}: {r.text.strip()[:200]}"
                    return
                self.open.set()
                for line in r.iter_lines():
                    if not line:
                        continue
                    if line.startswith('{"gap"'):
                        self.error = f"results of {self.query}: the reader fell behind ({line[:200]})"
                        return
                    self.lines.append(line)
        except httpx.HTTPError as e:
            self.error = f"results of {self.query}: {type(e).__name__}: {e}"
        finally:
            self.open.set()


def _nth_report(q: RegisteredQuery, first: int, n: int) -> int:
    c = first
    for _ in range(n - 1):
        c = q.next_report(c)
    return c


def replay_through_api(
    client: Client,
    queries: Sequence[RegisteredQuery],
    streams: Sequence[tuple[str, str]],
    out: TextIO | None,
    *,
    token: str | None = None,
    dictionary: Dictionary | None = None,
    max_reports: int | None = None,
    max_time_jump_ms: int | None = DEFAULT_MAX_TIME_JUMP_MS,
    log: Callable[[str], None] | None = None,
    result_timeout: float = 60.0,
    chunk_elements: int = CHUNK_ELEMENTS,
) -> ApiReplayResult:
    """Replays ``streams`` through ``queries`` registered on the service ``client`` talks to.

    Args:
        client: A client of the service (its leader, to spare a forwarding hop).
        queries: The queries, registered on a local scratch engine (their texts and report
            schedules); they are registered on the service under their names.
        streams: ``(iri, path)`` stream files.
        out: Where the result lines go (JSON Lines in report order, as an embedded replay
            writes them), or ``None``.
        token: The bearer token of ``client`` (the result readers send it too).
        dictionary: The reader's dictionary (default: in memory).
        max_reports: Only the first N report times of each query.
        max_time_jump_ms: The readers' forward-jump check (as for an embedded replay).
        log: Receives the readers' warnings about the input files.
        result_timeout: Seconds to wait for the result streams to end after the last report.
        chunk_elements: Elements per chunk (one body per stream, one watermark).

    Raises:
        ApiReplayError: The service refused something or the results did not arrive.
    """
    res = ReplayResult(queries={q.name: q for q in queries})
    result = ApiReplayResult(res, url=client.url)
    dictionary = dictionary if dictionary is not None else MemoryDictionary()
    t0 = time.perf_counter()
    readers: list[tuple[str, StreamReader, Iterator[Element]]] = []
    heap: list[tuple[int, int, Element]] = []
    seen: set[str] = set()
    for k, (iri, path) in enumerate(streams):
        if iri in seen:
            raise ValueError(f"stream <{iri}> given twice")
        seen.add(iri)
        r = StreamReader(path, dictionary, bnode_prefix=f"st{k}_", log=log, max_time_jump_ms=max_time_jump_ms)
        it = iter(r)
        readers.append((iri, r, it))
        el = next(it, None)
        if el is not None:
            heap.append((el.t, k, el))
    heapq.heapify(heap)
    t_min = min((h[0] for h in heap), default=None)

    def call(what: str, fn: Callable[[], object], resend: bool = False) -> object:
        """``fn()``, again while the service answers 503 (a leader being elected, a stream
        changing owner, a full input queue); with ``resend`` (a push under an idempotency
        key: what was taken is not taken twice) also when the answer was lost."""
        for attempt in range(RETRIES + 1):
            try:
                result.requests += 1
                return fn()
            except ApiError as e:
                if e.status == 503 and attempt < RETRIES:
                    time.sleep(0.2)
                    continue
                raise ApiReplayError(f"{what}: {e}") from None
            except httpx.TransportError as e:
                if resend and attempt < RETRIES:
                    time.sleep(0.2)
                    continue
                raise ApiReplayError(f"{what}: {type(e).__name__}: {e}") from None
            except httpx.HTTPError as e:
                raise ApiReplayError(f"{what}: {type(e).__name__}: {e}") from None
        raise AssertionError("unreachable")

    run = "replay-" + uuid.uuid4().hex[:12]  # idempotency keys: <run>-<chunk>-<stream>
    if t_min is not None:  # every query reports from the first close after the earliest element
        call("watermark", lambda: client.advance(t_min))
    batch = [{"query": q.cq.text, "name": q.name} for q in queries]
    call("registering the queries", lambda: client.register_many(batch))
    names = [q.name for q in queries]
    started = [_Reader(client.url, token, n) for n in names]
    try:
        for rd in started:
            rd.start()
        for rd in started:
            rd.open.wait(30.0)
            if rd.error is not None or not rd.open.is_set():
                raise ApiReplayError(rd.error or f"results of {rd.query}: no answer within 30 s")
        firsts = {q.name: q.first_report_after(t_min) for q in queries} if t_min is not None else {}
        caps = (
            {q.name: _nth_report(q, firsts[q.name], max_reports) for q in queries}
            if max_reports is not None and t_min is not None
            else {}
        )
        stop_at = max(caps.values()) if caps and len(caps) == len(queries) else None
        serial = iter(range(1, 1 << 62))
        t_max = t_min
        pending: dict[int, list[Element]] = {}
        size = count = 0

        def flush(next_t: int | None) -> None:
            nonlocal size, count
            for k in sorted(pending):
                iri = readers[k][0]
                body = _body(pending[k], dictionary, serial).encode("utf-8")
                result.body_bytes += len(body)
                key = f"{run}-{result.chunks}-{k}"
                got = call(
                    f"pushing to <{iri}>",
                    partial(client.push, iri, body, content_type="application/n-quads", key=key),
                    resend=True,
                )
                late = got.get("late", 0) if isinstance(got, dict) else 0
                if late:
                    raise ApiReplayError(
                        f"the service found {late} element(s) of <{iri}> late: is it running with --idle-ms 0?"
                    )
            pending.clear()
            size = count = 0
            result.chunks += 1
            if next_t is not None:
                call("watermark", lambda: client.advance(next_t))

        while heap:
            t, k, el = heapq.heappop(heap)
            t_max = t if t_max is None or t > t_max else t_max
            if stop_at is not None and t >= stop_at:
                break  # no report of any query can see it
            if count >= chunk_elements or size >= CHUNK_BYTES:
                flush(t)
            pending.setdefault(k, []).append(el)
            count += 1
            size += 64 * len(el.triples)
            res.triples += len(el.triples)
            res.elements += 1
            nxt = next(readers[k][2], None)
            if nxt is not None:
                heapq.heappush(heap, (nxt.t, k, nxt))
        if pending:
            flush(None)
        until: dict[str, int] = {}
        if t_max is not None:
            for q in queries:
                last = q.first_report_after(t_max)
                until[q.name] = min(last, caps[q.name]) if q.name in caps else last
            call("watermark", lambda: client.advance(max(until.values())))
        try:
            status = client.status()
            result.containers = [str(c) for c in status.get("containers") or []]
        except (ApiError, httpx.HTTPError, ValueError):
            pass  # only for the summary
        for rd in started:  # a stream ends when its query goes (below), not before
            if not rd.is_alive():
                raise ApiReplayError(rd.error or f"results of {rd.query}: the stream ended before the replay")
        for n in names:  # ends each result stream after every line before it
            call(f"unregistering {n}", partial(client.unregister, n))
        deadline = time.monotonic() + result_timeout
        for rd in started:
            rd.join(max(0.0, deadline - time.monotonic()))
            if rd.is_alive():
                raise ApiReplayError(f"results of {rd.query} did not end within {result_timeout:g} s")
            if rd.error is not None:
                raise ApiReplayError(rd.error)
        per_query: list[tuple[str, list[tuple[int, str]]]] = []
        for q, rd in sorted(zip(queries, started, strict=True), key=lambda x: x[0].name):
            cap = until.get(q.name)
            rows = [(c, ln) for ln in rd.lines if cap is not None and (c := _report_time(ln)) <= cap]
            per_query.append((q.name, rows))
            if cap is not None and q.name in firsts:
                q.stats.reports = q.reports_between(firsts[q.name] - 1, cap)
                q.last_report = cap
            result.reports[q.name] = q.stats.reports
        merged = heapq.merge(
            *[[(c, name, ln) for c, ln in rows] for name, rows in per_query], key=lambda x: (x[0], x[1])
        )
        for _c, _n, line in merged:
            res.rows += 1
            if out is not None:
                out.write(line)
                out.write("\n")
    finally:
        for rd in started:
            if rd.is_alive():
                rd.join(0.0)
    for iri, r, _ in readers:
        res.streams[iri] = r.stats
    res.seconds = time.perf_counter() - t0
    return result
