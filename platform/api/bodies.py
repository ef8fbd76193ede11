"""Stream element bodies of ``POST /streams``: N-Triples, N-Quads, Turtle and JSON-LD.

A body is parsed completely before anything is ingested: one malformed line rejects the
whole body (HTTP 400 naming the line and the reason), so a client can fix and resend it
without duplicating what was accepted.

Two shapes of body:

* **One element** (every format): all triples of the body share one timestamp, given by
  the request (query parameter ``t`` / header ``X-Event-Time``; wall clock by default).
  The graph of an N-Quads statement is ignored (the element is the merge).  An empty
  body is an empty element: it only moves the stream's watermark (a heartbeat).
* **Timestamped N-Quads** (SEMANTICS.md §2, the replay file format): an N-Quads body
  holding default-graph ``<g> prov:generatedAtTime "..."^^xsd:dateTime`` statements is a
  sequence of elements, one per named graph ``<g>``, each with its own timestamp; the
  request then must not give a timestamp.

Terms come out as the canonical N-Triples strings of :mod:`linkstream.rdf.terms`, with
blank-node labels prefixed per request (blank nodes are scoped to their document).
Triples are deduplicated within an element, as the replay's reader does.
"""

from __future__ import annotations

import json
import threading
import warnings
from dataclasses import dataclass, field
from typing import Any

from linkstream.api.limits import JsonTooDeep, check_json_depth
from linkstream.rdf.ntriples import LINE_STRIP, NTriplesError, parser_for
from linkstream.rdf.static import rdflib_term_str
from linkstream.rdf.streams import PROV_GENERATED_AT, parse_datetime_ms
from linkstream.rdf.terms import XSD_DATETIME, unescape_string

Triple = tuple[str, str, str]

#: media type -> format name
MEDIA_TYPES = {
    "application/n-triples": "nt",
    "text/plain": "nt",
    "application/n-quads": "nq",
    "text/x-nquads": "nq",
    "text/turtle": "turtle",
    "application/x-turtle": "turtle",
    "application/ld+json": "json-ld",
    "application/json": "json-ld",
}
_MAX_ERRORS = 20
#: JSON-LD bodies nested deeper are refused (422) before any recursive parser sees them
MAX_JSON_DEPTH = 64
_PROV = "<" + PROV_GENERATED_AT + ">"
_DT_SUFFIX = '"^^<' + XSD_DATETIME + ">"
_RDFLIB_LOCK = threading.Lock()  # rdflib.NORMALIZE_LITERALS is process-global


class BodyError(ValueError):
    """A body that cannot be accepted.

    Attributes:
        message: One line saying what is wrong (with the first bad line's number).
        line: 1-based line of the first problem, if known.
        errors: Every problem found (up to 20), as ``{"line", "reason"}`` dictionaries.
        status: The HTTP status to answer with (400, 415 for an unknown media type, 422
            for a JSON-LD body nested deeper than :data:`MAX_JSON_DEPTH`).
    """

    def __init__(
        self,
        message: str,
        line: int | None = None,
        errors: list[dict[str, Any]] | None = None,
        status: int = 400,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.errors = errors or []
        self.status = status


@dataclass
class ParsedElement:
    """One element of a body: its timestamp (``None``: the request's) and triples."""

    t: int | None
    triples: list[Triple] = field(default_factory=list)


def media_format(content_type: str | None) -> str:
    """The format name of a ``Content-Type`` header value.

    Raises:
        BodyError: Unknown media type (status 415).
    """
    media = (content_type or "").split(";", 1)[0].strip().lower()
    # no type, or the type curl and HTML forms send by default: N-Triples
    fmt = MEDIA_TYPES.get(media) or ("nt" if media in ("", "application/x-www-form-urlencoded") else None)
    if fmt is None:
        raise BodyError(
            "unsupported media type %r (use one of %s)" % (media, ", ".join(sorted(MEDIA_TYPES))), status=415
        )
    return fmt


def parse_body(data: bytes, content_type: str | None, *, bnode_prefix: str, base: str) -> list[ParsedElement]:
    """Parses a ``POST /streams`` body into elements.

    Args:
        data: The raw body.
        content_type: Its ``Content-Type`` (N-Triples when missing).
        bnode_prefix: Prepended to blank-node labels (unique per request).
        base: Base IRI for relative IRIs in Turtle and JSON-LD.

    Raises:
        BodyError: The body is malformed; nothing of it should be ingested.
    """
    fmt = media_format(content_type)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise BodyError(
            "line %d: body is not UTF-8 (byte %d)" % (line, e.start), line, [{"line": line, "reason": str(e)}]
        ) from None
    if fmt in ("nt", "nq"):
        return _parse_lines(text, fmt, bnode_prefix)
    return [_dedup(ParsedElement(None, _parse_rdflib(text, fmt, bnode_prefix, base)))]


def _dedup(el: ParsedElement) -> ParsedElement:
    el.triples = list(dict.fromkeys(el.triples))
    return el


def _parse_lines(text: str, fmt: str, bnode_prefix: str) -> list[ParsedElement]:
    # a prefix per request: its own blank nodes, the shared caches of every other term
    parser = parser_for("").with_prefix(bnode_prefix)
    errors: list[dict[str, Any]] = []
    quads: list[tuple[int, tuple[str, str, str, str | None]]] = []
    for lineno, raw in enumerate(text.split("\n"), 1):
        line = raw.strip(LINE_STRIP)
        if not line or line[0] == "#":
            continue
        try:
            for q in parser.parse_statements(line) if "\r" in line else [parser.parse_statement(line)]:
                if q is None:
                    continue
                if fmt == "nt" and q[3] is not None:
                    raise NTriplesError("a graph term in N-Triples (send N-Quads as application/n-quads)")
                quads.append((lineno, q))
        except NTriplesError as e:
            errors.append({"line": lineno, "reason": str(e)})
            if len(errors) >= _MAX_ERRORS:
                break
    if not errors and fmt == "nq" and any(q[3] is None and q[1] == _PROV for _, q in quads):
        return _timestamped(quads)
    if errors:
        raise _error(errors)
    return [_dedup(ParsedElement(None, [(s, p, o) for _, (s, p, o, _g) in quads]))]


def _timestamped(quads: list[tuple[int, tuple[str, str, str, str | None]]]) -> list[ParsedElement]:
    """Elements of a timestamped N-Quads body (the checks of the replay's reader)."""
    errors: list[dict[str, Any]] = []
    elements: list[ParsedElement] = []
    graphs: dict[str, ParsedElement] = {}
    for lineno, (s, p, o, g) in quads:
        if g is None:
            if p != _PROV:
                errors.append({"line": lineno, "reason": "default-graph triple that is not a timestamp"})
            elif o[0] != '"' or not o.endswith(_DT_SUFFIX):
                errors.append({"line": lineno, "reason": "generatedAtTime is not an xsd:dateTime literal"})
            else:
                try:
                    t = parse_datetime_ms(unescape_string(o[1 : -len(_DT_SUFFIX)]))
                except ValueError as e:
                    errors.append({"line": lineno, "reason": str(e)})
                    continue
                el = graphs[s] = ParsedElement(t)
                elements.append(el)
            continue
        owner = graphs.get(g)
        if owner is None:
            errors.append({"line": lineno, "reason": "quad of graph %s before its timestamp" % g})
        else:
            owner.triples.append((s, p, o))
    if errors:
        raise _error(errors[:_MAX_ERRORS])
    return [_dedup(el) for el in elements]


def _error(errors: list[dict[str, Any]]) -> BodyError:
    first = errors[0]
    more = " (and %d more)" % (len(errors) - 1) if len(errors) > 1 else ""
    return BodyError("line %d: %s%s" % (first["line"], first["reason"], more), first["line"], errors)


def _parse_rdflib(text: str, fmt: str, bnode_prefix: str, base: str) -> list[Triple]:
    import rdflib

    if fmt == "json-ld":
        try:
            check_json_depth(text, MAX_JSON_DEPTH)
        except JsonTooDeep as e:
            raise BodyError("JSON-LD body: %s" % e, status=422) from None
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise BodyError(
                "line %d: invalid JSON: %s" % (e.lineno, e.msg),
                e.lineno,
                [{"line": e.lineno, "reason": e.msg}],
            ) from None
        if _remote_context(doc):
            raise BodyError("remote JSON-LD contexts are not fetched: give the @context inline")
    graph = rdflib.Dataset() if fmt == "json-ld" else rdflib.Graph()
    with _RDFLIB_LOCK:
        saved = rdflib.NORMALIZE_LITERALS
        rdflib.NORMALIZE_LITERALS = False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                graph.parse(data=text, format=fmt, publicID=base)
        except Exception as e:  # rdflib's parsers raise many exception types (RecursionError too)
            msg = " ".join(str(e).split()) or type(e).__name__
            raise BodyError("cannot parse the body as %s: %s" % (fmt, msg)) from None
        finally:
            rdflib.NORMALIZE_LITERALS = saved
    if isinstance(graph, rdflib.Dataset):
        spo = [(s, p, o) for s, p, o, _g in graph.quads((None, None, None, None))]
    else:
        spo = list(graph)
    try:
        return [
            (
                rdflib_term_str(s, bnode_prefix),
                rdflib_term_str(p, bnode_prefix),
                rdflib_term_str(o, bnode_prefix),
            )
            for s, p, o in spo
        ]
    except ValueError as e:
        raise BodyError("unsupported term in the body: %s" % e) from None


def _remote_context(doc: Any) -> bool:
    """Whether a JSON-LD document names a context by IRI (which rdflib would download)."""
    if isinstance(doc, list):
        return any(_remote_context(x) for x in doc)
    if not isinstance(doc, dict):
        return False
    for k, v in doc.items():
        if k == "@import":
            return True
        if k == "@context":
            items = v if isinstance(v, list) else [v]
            if any(isinstance(x, str) for x in items):
                return True
            if any(isinstance(x, dict) and _remote_context({"x": x}) for x in items):
                return True
        elif _remote_context(v):
            return True
    return False
