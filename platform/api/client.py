"""A Python client of the LinkStream HTTP API.

Example::

    from linkstream.api.client import Client

    with Client("http://127.0.0.1:8080", token=None) as c:
        name = c.register(open("q.rq").read())["name"]
        c.push("http://ex.org/s", "<urn:a> <urn:p> <urn:b> .\\n", t=1000)
        for row in c.results(name, until=5000):
            print(row)

Every non-2xx answer raises :class:`ApiError` with the server's message (and, for a
query that does not parse, its ``line`` and ``column``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import quote

import httpx

DEFAULT_URL = "http://127.0.0.1:8080"


class ApiError(Exception):
    """An error answer of the API.

    Attributes:
        status: HTTP status code.
        message: The server's ``error`` text.
        line: Line of a query or body error, if given.
        column: Column of a query error, if given.
        where: The part of the request at fault (``"body"``, ``"header Authorization"``, ...).
        limit: The server limit reached (``"max_body_bytes"``, ...), for 408/413/422/429/503.
        body: The whole decoded error body.
    """

    def __init__(self, status: int, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__("HTTP %d: %s" % (status, message))
        self.status = status
        self.message = message
        self.body = body or {}
        self.line = self.body.get("line")
        self.column = self.body.get("column")
        self.where = self.body.get("where")
        self.limit = self.body.get("limit")


def _q(name: str) -> str:
    return quote(name, safe="")


class Client:
    """Talks to one LinkStream server.

    Args:
        url: The server's base URL.
        token: Bearer token (its secret), if the server requires one.
        timeout: Seconds to wait for an answer (result streams wait for each chunk).
    """

    def __init__(self, url: str = DEFAULT_URL, token: str | None = None, timeout: float = 60.0) -> None:
        headers = {"Authorization": "Bearer " + token} if token else {}
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def close(self) -> None:
        """Closes the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ plumbing

    def _check(self, r: httpx.Response) -> httpx.Response:
        if r.status_code >= 400:
            try:
                body = r.json()
            except ValueError:
                body = {"error": r.text.strip()}
            if not isinstance(body, dict):
                body = {"error": str(body)}
            raise ApiError(r.status_code, str(body.get("error", r.reason_phrase)), body)
        return r

    def _request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return self._check(self._http.request(method, path, **kw))

    # ------------------------------------------------------------ queries

    def register(
        self, text: str, name: str | None = None, *, default_name: str | None = None
    ) -> dict[str, Any]:
        """Registers a continuous query; returns ``{"name", "dialect", "form", "windows", ...}``.

        Args:
            text: The query.
            name: Its name (overrides a REGISTER clause).
            default_name: Its name if it has no REGISTER clause (e.g. the file stem).
        """
        body: dict[str, Any] = {"query": text}
        if name is not None:
            body["name"] = name
        if default_name is not None:
            body["default_name"] = default_name
        return self._request("POST", "/queries", json=body).json()

    def register_many(self, items: list[dict[str, str]]) -> list[dict[str, Any]]:
        """Registers a batch ``[{"query", "name"?, "default_name"?}, ...]`` in one request (on a
        cluster: a few ZooKeeper transactions for all); returns their descriptions in order.

        Raises:
            ApiError: An item failed (``body["index"]``; ``body.get("registered")`` went in).
        """
        return self._request("POST", "/queries", json=list(items)).json()["queries"]

    def queries(self) -> list[dict[str, Any]]:
        """The registered queries."""
        return self._request("GET", "/queries").json()["queries"]

    def query(self, name: str) -> dict[str, Any]:
        """One query's text, windows, schedule and statistics."""
        return self._request("GET", "/queries/" + _q(name)).json()

    def unregister(self, name: str) -> None:
        """Unregisters a query."""
        self._request("DELETE", "/queries/" + _q(name))

    # ------------------------------------------------------------ streams

    def push(
        self,
        stream: str,
        body: str | bytes,
        *,
        t: int | None = None,
        content_type: str = "application/n-triples",
        key: str | None = None,
    ) -> dict[str, Any]:
        """Pushes one element (or a timestamped N-Quads body of several) to ``stream``.

        Args:
            stream: The stream's IRI.
            body: RDF in the ``content_type`` format.
            t: Event time in ms (server wall clock if ``None`` and the body has no timestamps).
            content_type: ``application/n-triples``, ``application/n-quads``,
                ``text/turtle`` or ``application/ld+json``.
            key: Idempotency key (``Idempotency-Key``): a retry of this push with the same
                key, after its answer was lost, does not push it twice.

        Returns:
            ``{"stream", "elements", "triples", "late"}``.
        """
        params = {"t": str(t)} if t is not None else None
        data = body.encode("utf-8") if isinstance(body, str) else body
        headers = {"Content-Type": content_type, **({"Idempotency-Key": key} if key is not None else {})}
        return self._request(
            "POST", "/streams/" + _q(stream), content=data, params=params, headers=headers
        ).json()

    def push_triples(self, stream: str, t: int, triples: Iterable[tuple[str, str, str]]) -> dict[str, Any]:
        """Pushes one element given as ``(s, p, o)`` N-Triples terms."""
        body = "".join("%s %s %s .\n" % tr for tr in triples)
        return self.push(stream, body, t=t)

    def advance(self, t: int) -> dict[str, Any]:
        """Declares that every stream has passed ``t``; returns once reports up to ``t`` fired."""
        return self._request("POST", "/watermark", params={"t": str(t)}).json()

    # ------------------------------------------------------------ results

    def results(
        self,
        name: str,
        *,
        until: int | None = None,
        limit: int | None = None,
        sse: bool = False,
        timeout: float | None = None,
        after: str | None = None,
        queue: int | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Result rows of ``name`` as they are reported, as decoded JSON lines.

        Args:
            name: The query.
            until: Stop after the report at or after this time.
            limit: Stop after this many lines.
            sse: Read the Server-Sent Events endpoint instead of JSON Lines.
            timeout: Seconds to wait for the next chunk (``None``: forever).
            after: Resume after this result id (from the kept results).
            queue: Most lines held for this reader while it falls behind.

        A reader that fell behind its ``queue`` gets ``{"gap": {"query", "from", "to",
        "lines", "after"}}`` where lines were lost; ``?after=`` re-reads them while kept.
        """
        given = (("until", until), ("limit", limit), ("after", after), ("queue", queue))
        params = {k: str(v) for k, v in given if v is not None}
        path = "/queries/%s/results%s" % (_q(name), "" if sse else ".jsonl")
        t = httpx.Timeout(self._http.timeout.connect, read=timeout)
        with self._http.stream("GET", path, params=params, timeout=t) as r:
            if r.status_code >= 400:
                r.read()
                self._check(r)
            if sse:
                event, data = "message", []
                for line in r.iter_lines():
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        data.append(line[5:].lstrip(" "))
                    elif not line:
                        if event == "end":
                            return
                        if data:
                            row = json.loads("\n".join(data))
                            yield {"gap": row} if event == "gap" else row
                        event, data = "message", []
            else:
                for line in r.iter_lines():
                    if line.strip():
                        yield json.loads(line)

    # ------------------------------------------------------------ the rest

    def sparql(self, query: str, *, method: str = "GET") -> dict[str, Any]:
        """Runs a one-shot SELECT/ASK query over the static graphs (SPARQL results JSON)."""
        if method == "GET":
            r = self._request("GET", "/sparql", params={"query": query})
        else:
            r = self._request("POST", "/sparql", data={"query": query})
        return r.json()

    def health(self) -> dict[str, Any]:
        """``/healthz``: ``{"status": "ok"}`` while the server answers (no token needed)."""
        return self._request("GET", "/healthz").json()

    def status(self) -> dict[str, Any]:
        """``/status``: engine figures (queries, operators, streams) and the limits in force."""
        return self._request("GET", "/status").json()

    def metrics(self) -> str:
        """``/metrics`` in the Prometheus text format."""
        return self._request("GET", "/metrics").text
