"""The LinkStream HTTP API: an ASGI application (Starlette) around a :class:`LiveEngine`.

Endpoints (``/openapi.json`` describes them in full):

* ``POST /queries`` register (text body, JSON ``{"query", "name"}``, or a JSON array of
  those: a batch), ``GET /queries``,
  ``GET /queries/{name}``, ``DELETE /queries/{name}``;
* ``GET /queries/{name}/results`` (Server-Sent Events, one event per result line, ``id:``
  ``<report time>:<line>``; ``Last-Event-ID`` resumes after it) and
  ``GET /queries/{name}/results.jsonl`` (chunked JSON Lines; ``?after=<id>`` resumes);
* ``POST /streams/{iri}`` or ``POST /streams?iri=...``: one element (N-Triples, N-Quads,
  Turtle, JSON-LD) at ``t`` / ``X-Event-Time`` (wall clock by default), or a timestamped
  N-Quads body of several elements; ``POST /watermark`` advances event time explicitly;
* ``GET|POST /sparql``: SPARQL 1.1 Protocol one-shot queries over the static graphs;
* ``GET /healthz``, ``GET /metrics`` (Prometheus), ``GET /openapi.json``.

Bad input is a 4xx with a JSON ``{"error": ...}`` body (parse errors add ``line`` and
``column``), never a 500; every error body is one JSON line ``{"error", "where", ...}``.
With tokens configured every endpoint but ``/healthz`` requires ``Authorization: Bearer
<token>`` of a token whose scope allows it (``read``, ``write``, ``admin``:
:mod:`linkstream.api.auth`); :class:`~linkstream.api.guard.ApiGuard` checks that and
limits request bodies, the handlers apply the other :class:`~linkstream.api.limits.ApiLimits`
(per-token query counts: :mod:`linkstream.api.tokens`).  Result streams are
:mod:`linkstream.api.results`; error answers :mod:`linkstream.api.errors`.  Engine calls that
wait for the worker run in Starlette's thread pool; result streams wait on the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import logging
import re
import secrets
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any
from urllib.parse import parse_qs, quote, urljoin

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp

from linkstream.api.auth import Token, TokenTable, parse_token
from linkstream.api.backend import BatchFailed, LiveBackend
from linkstream.api.bodies import BodyError, parse_body
from linkstream.api.compiling import Compiler
from linkstream.api.errors import (
    EXCEPTION_HANDLERS,
    ApiError,
    int_param,
    json_response,
    query_error,
    read_body,
)
from linkstream.api.guard import ApiGuard
from linkstream.api.limits import (
    ApiLimits,
    DeadlineExceeded,
    Interruptible,
    ItemFailed,
    LimitExceeded,
)
from linkstream.api.openapi import openapi_schema
from linkstream.api.results import ResultStreams
from linkstream.api.tokens import QueryOwners
from linkstream.engine.live.runtime import LiveEngine, QueryConflict, QueryView, UnknownQuery
from linkstream.engine.oneshot.embedded import evaluate_one_shot
from linkstream.query.errors import QueryError
from linkstream.rdf.eventtime import EventTimeError, range_error, show_time
from linkstream.rdf.ntriples import iri_error
from linkstream.rdf.streams import parse_datetime_ms

log = logging.getLogger(__name__)

SPARQL_JSON = "application/sparql-results+json"
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")


def query_json(view: QueryView, default_step: int, *, full: bool = True) -> dict[str, Any]:
    """The JSON description of a registered query."""
    cq = view.cq
    out: dict[str, Any] = {
        "name": cq.name,
        "dialect": cq.dialect,
        "form": cq.form,
        "mode": cq.mode,
        "windows": [
            {
                "stream": w.stream,
                "window": str(w.spec),
                "name": w.name,
                "step_ms": w.spec.step_or(default_step),
            }
            for w in cq.windows
        ],
        "first_report": view.first_report,
        "next_report": view.next_report,
        "last_report": view.last_report,
        "state": view.state,
    }
    if full:
        st = view.stats
        lat = sorted(st.latencies[-512:])

        def pct(p: float) -> float:
            return round(lat[min(len(lat) - 1, int(p * (len(lat) - 1) + 0.5))] * 1e3, 4) if lat else 0.0

        out["text"] = cq.text
        out["subscribers"] = view.subscribers
        out["dropped_lines"] = view.dropped
        out["stats"] = {
            "reports": st.reports,
            "rows": st.rows,
            "eval_seconds": round(st.eval_seconds, 6),
            "latency_ms_p50": pct(0.5),
            "latency_ms_p99": pct(0.99),
        }
    return out


def BearerAuth(app: ASGIApp, token: str) -> ASGIApp:  # noqa: N802 (was a class)
    """``app`` behind one admin token (see :func:`create_app` for several tokens and scopes)."""
    return ApiGuard(app, TokenTable([parse_token(token)]), ApiLimits())


class Api:
    """The request handlers, bound to one live engine."""

    def __init__(
        self, live: LiveBackend, base: str = "http://localhost/", limits: ApiLimits | None = None
    ) -> None:
        self.live = live
        self.base = base
        self.limits = limits or ApiLimits()
        self._requests = itertools.count(1)
        #: blank-node labels of pushed bodies are ``h<scope>x<request>_<label>``: the scope,
        #: drawn at random per API instance, keeps two coordinators' requests (whose parsed
        #: bodies meet at one leader) and the requests of a restarted server (whose dictionary
        #: and windows come back from its state) from giving two bodies' blank nodes one label
        self._bnode_scope = secrets.token_hex(6)
        self.owners = QueryOwners(live, self.limits)
        self.compiler = Compiler(live, base, self.limits)
        self.results = ResultStreams(live, self.limits)

    # ------------------------------------------------------------ limits

    async def _compile(self, text: str, *, one_shot: bool = False) -> Any:
        return await self.compiler.compile(text, one_shot=one_shot)

    # ------------------------------------------------------------ queries

    async def register(self, request: Request) -> Response:
        body = await read_body(request)
        name = request.query_params.get("name") or None
        default_name = request.query_params.get("default_name") or None
        ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ApiError(400, "query text is not UTF-8 (byte %d)" % e.start) from None
        if ctype in ("application/json", "application/x-json") or (
            not ctype and text.lstrip().startswith("{")
        ):
            try:
                doc = json.loads(text)
            except json.JSONDecodeError as e:
                raise ApiError(400, "invalid JSON body: %s (line %d)" % (e.msg, e.lineno)) from None
            if isinstance(doc, list):
                return await self._register_many(doc, request)
            if not isinstance(doc, dict) or not isinstance(doc.get("query"), str):
                raise ApiError(400, 'a JSON body must be an object with a string "query"')
            text = doc["query"]
            for key in ("name", "default_name"):
                if doc.get(key) is not None and not isinstance(doc[key], str):
                    raise ApiError(400, '"%s" must be a string' % key)
            name = doc.get("name") or name
            default_name = doc.get("default_name") or default_name
        if not text.strip():
            raise ApiError(400, "empty query", where="body")
        try:
            await self._compile(text)
        except QueryError as e:
            raise query_error(e) from None
        tok = self.owners.reserve(request, 1)
        done: list[str] = []
        try:
            registered = await run_in_threadpool(
                lambda: self.live.register(text, name, default_name=default_name)
            )
            done.append(registered)
        except QueryConflict as e:
            raise ApiError(409, e.message, where="query name") from None
        except QueryError as e:
            raise query_error(e) from None
        finally:
            self.owners.settle(tok, 1, done)
        try:
            created = query_json(self.live.view(registered), self.live.engine.default_step, full=False)
        except UnknownQuery:  # unregistered by another request meanwhile
            created = {"name": registered}
        return json_response(created, 201, {"Location": "/queries/" + quote(registered, safe="")})

    async def _register_many(self, docs: list[Any], request: Request) -> Response:
        """A JSON array of ``{"query", "name"?, "default_name"?}``: registered in order; the
        first failure stops the batch (its ``index`` and the names registered before it
        are in the error body)."""
        for i, doc in enumerate(docs):
            ok = isinstance(doc, dict) and isinstance(doc.get("query"), str) and doc["query"].strip()
            if not ok or any(
                doc.get(k) is not None and not isinstance(doc[k], str) for k in ("name", "default_name")
            ):
                raise ApiError(
                    400, 'item %d: each item must be an object with a non-empty string "query"' % i
                )
        try:
            parsed = await self.compiler.compile_many([doc["query"] for doc in docs])
        except ItemFailed as e:
            if not isinstance(e.error, QueryError):
                raise e.error from None
            err = query_error(e.error)
            raise ApiError(
                400, "item %d: %s" % (e.index, err.message), index=e.index, registered=[], **err.extra
            ) from None
        tok = self.owners.reserve(request, len(docs))
        done: list[str] = []
        many = getattr(self.live, "register_many", None)
        try:
            if many is not None:  # the whole batch in one worker command / few ZooKeeper writes
                items = [(d["query"], d.get("name") or None, d.get("default_name") or None) for d in docs]
                try:
                    done += await run_in_threadpool(lambda: many(items, parsed=parsed))
                except BatchFailed as e:
                    done += e.registered
                    self._batch_error(e.index, e.error, done)
            for i, doc in enumerate(docs if many is None else ()):
                try:
                    done.append(
                        await run_in_threadpool(
                            lambda d=doc: self.live.register(  # type: ignore[misc]  # d: the loop's doc
                                d["query"], d.get("name") or None, default_name=d.get("default_name") or None
                            )
                        )
                    )
                except (QueryConflict, QueryError) as e:
                    self._batch_error(i, e, done)
        finally:
            self.owners.settle(tok, len(docs), done)
        step = self.live.engine.default_step
        out = []
        for name in done:
            try:
                out.append(query_json(self.live.view(name), step, full=False))
            except UnknownQuery:
                out.append({"name": name})
        return json_response({"queries": out}, 201)

    @staticmethod
    def _batch_error(i: int, e: Exception, done: list[str]) -> None:
        """Raises the answer to item ``i`` of a batch failing with ``e`` after ``done``."""
        if isinstance(e, QueryConflict):
            raise ApiError(
                409, "item %d: %s" % (i, e.message), where="query name", index=i, registered=done
            ) from None
        if isinstance(e, QueryError):
            err = query_error(e)
            raise ApiError(
                400, "item %d: %s" % (i, err.message), index=i, registered=done, **err.extra
            ) from None
        raise e

    async def list_queries(self, request: Request) -> Response:
        step = self.live.engine.default_step

        def listing() -> list[dict[str, Any]]:  # a cluster backend reads ZooKeeper: not on the loop
            out = []
            for name in self.live.query_names():
                try:
                    out.append(query_json(self.live.view(name), step, full=False))
                except UnknownQuery:  # unregistered meanwhile
                    continue
            return out

        return json_response({"queries": await run_in_threadpool(listing)})

    def _view(self, request: Request) -> QueryView:
        name = request.path_params["name"]
        try:
            return self.live.view(name)
        except UnknownQuery as e:
            raise ApiError(404, str(e), where="path") from None

    async def get_query(self, request: Request) -> Response:
        view = await run_in_threadpool(self._view, request)
        return json_response(query_json(view, self.live.engine.default_step))

    async def delete_query(self, request: Request) -> Response:
        name = request.path_params["name"]
        owner = self.owners.check_remove(request, name)
        try:
            await run_in_threadpool(self.live.unregister, name)
        except UnknownQuery as e:
            raise ApiError(404, str(e), where="path") from None
        self.owners.removed(name, owner)
        return Response(status_code=204)

    # ------------------------------------------------------------ results

    async def results_sse(self, request: Request) -> Response:
        return self.results.open(request, sse=True)

    async def results_jsonl(self, request: Request) -> Response:
        return self.results.open(request, sse=False)

    # ------------------------------------------------------------ streams

    def _event_time(self, request: Request) -> int | None:
        raw = request.query_params.get("t") or request.headers.get("x-event-time")
        if raw is None or not raw.strip():
            return None
        raw = raw.strip()
        if raw.lstrip("-").isdigit():
            if len(raw) > 20:  # (not even int64: say so without converting thousands of digits)
                raise ApiError(
                    422, "event time %s... is outside the accepted range 0 <= t < 2^53 ms" % raw[:20]
                )
            t = int(raw)
        else:
            try:
                t = parse_datetime_ms(raw)
            except ValueError:
                raise ApiError(400, "event time %r is neither integer ms nor an xsd:dateTime" % raw) from None
        problem = range_error(t)
        if problem is not None:
            raise ApiError(422, problem, t=raw)
        return t

    async def push(self, request: Request) -> Response:
        iri = request.path_params.get("iri") or request.query_params.get("iri")
        if not iri:
            raise ApiError(400, "name the stream: POST /streams/{iri} or /streams?iri=...")
        iri = iri.strip()
        if iri.startswith("<") and iri.endswith(">"):
            iri = iri[1:-1]
        if not _SCHEME.match(iri):
            iri = urljoin(self.base, iri)
        problem = iri_error(iri)
        if problem:
            raise ApiError(400, "invalid stream IRI <%s>: %s" % (iri, problem))
        t = self._event_time(request)
        key = request.headers.get("idempotency-key")
        if key is not None and (
            not key or len(key) > 200 or any(ord(ch) < 33 or ord(ch) > 126 for ch in key)
        ):
            raise ApiError(
                400, "header Idempotency-Key must be 1-200 printable ASCII characters without spaces"
            )
        body = await read_body(request)
        prefix = "h%sx%d_" % (self._bnode_scope, next(self._requests))
        try:
            elements = await run_in_threadpool(
                parse_body, body, request.headers.get("content-type"), bnode_prefix=prefix, base=self.base
            )
        except BodyError as e:
            if e.errors:
                self.live.metrics.rejected_lines.inc(len(e.errors))
            where = (
                "body line %d" % e.line if e.line else ("header Content-Type" if e.status == 415 else "body")
            )
            raise ApiError(e.status, e.message, where=where, line=e.line, errors=e.errors) from None
        self._check_batch(elements)
        stamped = any(el.t is not None for el in elements)
        if stamped and t is not None:
            raise ApiError(400, "the body carries its own timestamps (prov:generatedAtTime): give no t")
        if t is None and not stamped:
            t = int(time.time() * 1000)
        for k, el in enumerate(elements):  # event-time rules: the range, before anything is pushed
            problem = range_error(el.t) if el.t is not None else None
            if problem is not None:
                raise ApiError(422, "element %d of the body: %s" % (k + 1, problem), t=el.t)

        many = getattr(self.live, "push_elements", None)
        if many is not None:  # run --zk: the body goes to the stream's owner coordinator whole
            return await self._push_many(many, iri, t, elements, request.headers.get("idempotency-key"))

        def ingest() -> dict[str, Any]:
            # the body at once: one engine lock per run of elements, the terms encoded together
            default = t if t is not None else 0  # None only when every element has its own time
            els = [(el.t if el.t is not None else default, el.triples) for el in elements]
            keys = None if key is None else ["%s#%d" % (key, k) for k in range(len(els))]
            flags, error = self.live.push_many(iri, els, keys=keys, timeout=60.0)
            accepted = sum(flags)
            triples = sum(len(el.triples) for el, f in zip(elements, flags) if f)
            late = len(flags) - accepted
            if error is not None:
                self.live.sync(timeout=60.0)  # the elements before it are accepted: durable too
            if isinstance(error, EventTimeError):  # too far ahead of the stream's time: refused
                raise ApiError(
                    422, str(error), t=error.t, stream=iri, elements=accepted, triples=triples, late=late
                )
            if error is not None:
                raise ApiError(
                    503, "the engine's input queue is full; retry later", elements=accepted, late=late
                )
            self.live.sync(timeout=60.0)  # --state-dir: acknowledged only once the log is durable
            return {"stream": iri, "elements": accepted, "triples": triples, "late": late}

        try:
            res = await run_in_threadpool(ingest)
        except OSError as e:  # the durable ingest log could not be written
            raise ApiError(503, "the ingest log is not writable: %s" % e) from None
        if not stamped:
            res["t"] = t
        return json_response(res, 202)

    async def _push_many(
        self, many: Any, iri: str, t: int | None, elements: list[Any], key: str | None
    ) -> Response:
        """``push`` through a backend that takes a body at once (``push_elements``: flags per
        element taken, ``False`` = late, and the error that stopped the body)."""
        els = [(el.t if el.t is not None else t, el.triples) for el in elements]
        try:
            flags, error = await run_in_threadpool(many, iri, els, timeout=60.0, key=key)
        except TimeoutError as e:  # no owner or leader takes the stream now (changing hands)
            raise ApiError(503, str(e) or "the engine is busy; retry later") from None
        except OSError as e:  # a durable log (the leader's, or the owner's stream log) failed
            raise ApiError(503, "the ingest log is not writable: %s" % e) from None
        accepted = sum(1 for f in flags if f)
        triples = sum(len(el.triples) for el, f in zip(elements, flags) if f)
        late = len(flags) - accepted
        if isinstance(error, EventTimeError):
            raise ApiError(
                422, str(error), t=error.t, stream=iri, elements=accepted, triples=triples, late=late
            )
        if error is not None:
            raise ApiError(503, "the engine's input queue is full; retry later", elements=accepted, late=late)
        res: dict[str, Any] = {"stream": iri, "elements": accepted, "triples": triples, "late": late}
        if all(el.t is None for el in elements):
            res["t"] = t
        return json_response(res, 202)

    async def watermark(self, request: Request) -> Response:
        t = int_param(request, "t")
        if t is None:
            body = await read_body(request)
            try:
                doc = json.loads(body or b"{}")
                t = int(doc["t"]) if isinstance(doc, dict) and "t" in doc else None
            except (ValueError, TypeError, OverflowError):
                t = None
        if t is None:
            raise ApiError(400, 'give the watermark as ?t=MS or a JSON body {"t": MS}')
        problem = range_error(t)
        if problem is not None:
            raise ApiError(422, "watermark: " + problem, t=show_time(t))
        try:
            fired = await run_in_threadpool(self.live.advance_to, t)
        except EventTimeError as e:  # more than the maximum jump ahead of the current time
            raise ApiError(422, str(e), t=e.t) from None
        return json_response({"watermark": t, "last_report": fired})

    def _check_batch(self, elements: Sequence[Any]) -> None:
        """The push batch limits: elements and triples in one body (413)."""
        lim = self.limits
        if len(elements) > lim.max_push_elements:
            raise LimitExceeded(
                413,
                "max_push_elements",
                lim.max_push_elements,
                "body of %d elements has more than %d" % (len(elements), lim.max_push_elements),
                "body",
            )
        triples = sum(len(el.triples) for el in elements)
        if triples > lim.max_push_triples:
            raise LimitExceeded(
                413,
                "max_push_triples",
                lim.max_push_triples,
                "body of %d triples has more than %d" % (triples, lim.max_push_triples),
                "body",
            )

    # ------------------------------------------------------------ one-shot SPARQL

    async def _one_shot(self, text: str, dflt: list[str] | None, named: list[str] | None) -> dict[str, Any]:
        """Runs a one-shot query under ``sparql_seconds`` and ``sparql_max_rows``.

        On the in-process engine the evaluation is cut short in its worker thread when time
        is up; another backend (a cluster coordinator) is only waited for that long.
        """
        lim = self.limits
        cq = await self._compile(text, one_shot=True)
        live = self.live
        if isinstance(live, LiveEngine):
            guard = Interruptible()
            d = tuple(dflt) if dflt else None
            n = tuple(named) if named else None

            def run() -> dict[str, Any]:
                return guard.run(lambda: evaluate_one_shot(live.engine, cq, d, n))

            # the worker's command queue, as LiveEngine.one_shot uses it, with the guard around the call
            fut = asyncio.ensure_future(
                run_in_threadpool(lambda: live._submit("call", run, lim.sparql_seconds + 30.0))
            )
        else:
            guard = None
            fut = asyncio.ensure_future(
                run_in_threadpool(lambda: live.one_shot(text, default_graphs=dflt, named_graphs=named))
            )
        try:
            res = await asyncio.wait_for(asyncio.shield(fut), lim.sparql_seconds)
        except TimeoutError:
            if guard is not None:
                guard.interrupt()
            fut.add_done_callback(lambda f: f.cancelled() or f.exception())
            raise LimitExceeded(
                503,
                "sparql_seconds",
                lim.sparql_seconds,
                "the query did not finish within %g s" % lim.sparql_seconds,
                "query",
            ) from None
        except DeadlineExceeded:  # interrupted in the worker at the same moment
            raise LimitExceeded(
                503,
                "sparql_seconds",
                lim.sparql_seconds,
                "the query did not finish within %g s" % lim.sparql_seconds,
                "query",
            ) from None
        rows = len(res["triples"]) if "triples" in res else len(res.get("results", {}).get("bindings", ()))
        if rows > lim.sparql_max_rows:
            raise LimitExceeded(
                413,
                "sparql_max_rows",
                lim.sparql_max_rows,
                "the result has %d rows, more than %d (add a LIMIT)" % (rows, lim.sparql_max_rows),
                "query",
            )
        return res

    async def sparql(self, request: Request) -> Response:
        params = {k: request.query_params.getlist(k) for k in request.query_params.keys()}
        if request.method == "POST":
            body = await read_body(request)
            ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
            if ctype == "application/x-www-form-urlencoded":
                try:
                    form = parse_qs(body.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
                except UnicodeDecodeError:
                    raise ApiError(400, "form body is not UTF-8") from None
                for k, v in form.items():
                    params.setdefault(k, []).extend(v)
            elif ctype == "application/sparql-query":
                try:
                    params["query"] = [body.decode("utf-8")]
                except UnicodeDecodeError:
                    raise ApiError(400, "query is not UTF-8") from None
            else:
                raise ApiError(
                    415, "POST /sparql takes application/x-www-form-urlencoded or application/sparql-query"
                )
        if "update" in params:
            raise ApiError(400, "SPARQL Update is not supported")
        queries = params.get("query") or []
        if len(queries) != 1 or not queries[0].strip():
            raise ApiError(400, "give exactly one query (parameter 'query')")
        try:
            res = await self._one_shot(
                queries[0], params.get("default-graph-uri"), params.get("named-graph-uri")
            )
        except QueryError as e:
            raise query_error(e) from None
        if "triples" in res:
            text = "".join(t + "\n" for t in res["triples"])
            return Response(text, media_type="application/n-triples")
        return Response(json.dumps(res, ensure_ascii=False), media_type=SPARQL_JSON)

    # ------------------------------------------------------------ service

    async def healthz(self, request: Request) -> Response:
        """Liveness only: says nothing about queries or streams (it needs no token)."""
        return Response('{"status":"ok"}', media_type="application/json")

    async def status(self, request: Request) -> Response:
        """Engine figures and the limits in force (needs scope read)."""
        body = {"status": "ok", **self.live.status()}
        body["subscribers"] = self.results.open_count
        body["limits"] = dataclasses.asdict(self.limits)
        return json_response(body)

    async def metrics(self, request: Request) -> Response:
        from linkstream.metrics import CONTENT_TYPE

        return Response(self.live.metrics.exposition(), media_type=CONTENT_TYPE)

    async def openapi(self, request: Request) -> Response:
        return json_response(openapi_schema())


def create_app(
    live: LiveBackend,
    *,
    token: str | None = None,
    tokens: Sequence[Token] = (),
    limits: ApiLimits | None = None,
    base: str = "http://localhost/",
    guard: bool = True,
) -> ASGIApp:
    """The ASGI application serving ``live``.

    Args:
        live: The engine (started by the application's lifespan, closed at shutdown).
        token: One admin token (``NAME:SCOPE:SECRET`` or a bare secret), added to ``tokens``.
        tokens: The bearer tokens; with none, every endpoint is open (every caller is admin).
        limits: The request limits; the defaults if ``None``.
        base: Base IRI for relative stream IRIs and relative IRIs in bodies.
        guard: Put :class:`~linkstream.api.guard.ApiGuard` (tokens, body limits) in front;
            ``False`` for a caller that puts it further out (a cluster coordinator's proxy).

    Raises:
        ValueError: An empty token, or two tokens with the same name or secret.
    """
    limits = limits or ApiLimits()
    table = TokenTable([*tokens, *([parse_token(token)] if token is not None else [])])
    api = Api(live, base, limits)
    routes = [
        Route("/healthz", api.healthz, methods=["GET"]),
        Route("/status", api.status, methods=["GET"]),
        Route("/metrics", api.metrics, methods=["GET"]),
        Route("/openapi.json", api.openapi, methods=["GET"]),
        Route("/queries", api.register, methods=["POST"]),
        Route("/queries", api.list_queries, methods=["GET"]),
        Route("/queries/{name:path}/results.jsonl", api.results_jsonl, methods=["GET"]),
        Route("/queries/{name:path}/results", api.results_sse, methods=["GET"]),
        Route("/queries/{name:path}", api.get_query, methods=["GET"]),
        Route("/queries/{name:path}", api.delete_query, methods=["DELETE"]),
        Route("/streams", api.push, methods=["POST"]),
        Route("/streams/{iri:path}", api.push, methods=["POST"]),
        Route("/watermark", api.watermark, methods=["POST"]),
        Route("/sparql", api.sparql, methods=["GET", "POST"]),
    ]

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        live.start()
        try:
            yield
        finally:
            live.close()

    app = Starlette(
        routes=routes,
        exception_handlers=EXCEPTION_HANDLERS,
        lifespan=lifespan,
    )
    app.state.live = live
    return ApiGuard(app, table, limits) if guard else app


__all__ = ["create_app", "ApiError", "BearerAuth", "query_json"]
