"""Reading timestamped N-Quads stream files (SEMANTICS.md §2) element by element.

A stream element is a named graph ``<g>`` whose timestamp is the default-graph quad
``<g> prov:generatedAtTime "..."^^xsd:dateTime``; the element's own quads follow it.
:class:`StreamReader` reads the file in chunks of lines, never the whole of it, and
reproduces the reference loader (``tools/oracle.py``, ``load_stream``) decision for
decision: which lines are rejected and why, which elements are late, the per-element
deduplication of triples, the blank-node relabelling per file.
"""

from __future__ import annotations

import datetime as dt
import errno
import io
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from itertools import chain, islice

import numpy as np

from linkstream.rdf.dictionary import Dictionary
from linkstream.rdf.eventtime import (
    DEFAULT_MAX_TIME_JUMP_MS,
    EVENT_TIME_MAX,
    EVENT_TIME_MIN,
    jump_error,
    range_error,
)
from linkstream.rdf.lazyre import lazy
from linkstream.rdf.ntfast import native as native_streams
from linkstream.rdf.ntriples import LINE_STRIP, NTriplesError, Quad, parser_for, utf8_error
from linkstream.rdf.records import record
from linkstream.rdf.terms import XSD_DATETIME, unescape_string

PROV_GENERATED_AT = "http://www.w3.org/ns/prov#generatedAtTime"
_PROV_TOKEN = "<" + PROV_GENERATED_AT + ">"
_DATETIME_SUFFIX = '"^^<' + XSD_DATETIME + ">"

_log = logging.getLogger(__name__)

# the oracle's expression, kept as is (``\d`` included) so that both accept the same strings
_DT_RE = lazy(r"^(-?\d{4,})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?$")


#: the common spelling ``YYYY-MM-DDThh:mm:ss[.fff]Z`` (ASCII digits, hour not 24): the
#: minute it starts with is looked up in :data:`_MINUTES`, the rest is added
_DT_FAST_RE = lazy(r"(\d{4}-\d\d-\d\dT\d\d:\d\d):([0-5]\d)(?:\.(\d+))?Z", re.ASCII)
#: "YYYY-MM-DDThh:mm" -> its milliseconds since the epoch (a stream's timestamps share a
#: few minutes: one calendar computation per minute instead of one per element)
_MINUTES: dict[str, int] = {}


def parse_datetime_ms(lex: str) -> int:
    """Milliseconds since the epoch of an ``xsd:dateTime`` lexical form, as the oracle computes it.

    No time zone means UTC; fractional seconds are truncated to milliseconds; hour 24
    is midnight of the next day.

    Raises:
        ValueError: ``lex`` is not such a dateTime (or names an impossible date).
    """
    m = _DT_FAST_RE.fullmatch(lex)
    if m is not None:
        got = _fast_ms(m)
        if got is not None:
            return got
    return _parse_datetime_ms(lex)


def _fast_ms(m: re.Match[str]) -> int | None:
    """Milliseconds of a :data:`_DT_FAST_RE` match, or ``None`` when the full parse must
    decide (hour 24, an impossible date)."""
    head = m.group(1)
    base = _MINUTES.get(head)
    if base is None:
        if head[11:13] == "24":
            return None
        try:
            base = _parse_datetime_ms(head + ":00Z")
        except ValueError:
            return None  # the full parse says why
        if len(_MINUTES) >= 4096:
            _MINUTES.clear()
        _MINUTES[head] = base
    frac = m.group(3)
    ms = int((frac + "00")[:3]) if frac else 0
    return base + int(m.group(2)) * 1000 + ms


def _parse_datetime_ms(lex: str) -> int:
    m = _DT_RE.match(lex.strip())
    if not m:
        raise ValueError("bad xsd:dateTime %r" % lex)
    y, mo, d, h, mi, s = (int(g) for g in m.groups()[:6])
    frac = m.group(7) or ""
    ms = int((frac[1:] + "000")[:3]) if frac else 0
    tz = m.group(8)
    off = 0
    if tz and tz != "Z":
        sign = 1 if tz[0] == "+" else -1
        off = sign * (int(tz[1:3]) * 60 + int(tz[4:6]))
    if h == 24:
        h = 0
        extra = 86400000
    else:
        extra = 0
    try:
        base = dt.datetime(y, mo, d, h, mi, s, tzinfo=dt.UTC)
    except OverflowError:  # a year of more digits than a C int holds
        raise ValueError(f"year {y} is out of range") from None
    return int(base.timestamp()) * 1000 + ms + extra - off * 60000


@record
class StreamStats:
    """Counters of one pass over a stream file.

    ``elements`` counts accepted elements (continuations not included), ``triples`` the
    triples yielded, ``rejected`` the rejected statements, ``late`` the dropped late
    elements, ``rejected_elements`` the elements dropped for their timestamp (outside the
    accepted event-time range, or more than the maximum jump ahead of the stream's time:
    see :mod:`linkstream.rdf.eventtime`); ``first_t``/``last_t`` are the smallest and
    largest accepted timestamps.
    """

    elements: int = 0
    triples: int = 0
    rejected: int = 0
    late: int = 0
    rejected_elements: int = 0
    first_t: int | None = None
    last_t: int | None = None


@record(eq=False)
class Element:
    """One stream element: a timestamp and its triples as dictionary ids.

    Attributes:
        t: event time in ms.
        triples: ``(n, 3)`` int64 ids ``(s, p, o)``, deduplicated within the element,
            in first-seen order.
        seq: position of the element in its file (0-based, over accepted elements).
        continuation: ``True`` for extra triples of element ``seq`` that came after it
            had been yielded (non-contiguous files, see :class:`StreamReader`).
    """

    t: int
    triples: np.ndarray
    seq: int = -1
    continuation: bool = False

    def __init__(self, t: int, triples: np.ndarray, seq: int = -1, continuation: bool = False) -> None:
        # (written out: one per element of the line-by-line reader)
        self.t = t
        self.triples = triples
        self.seq = seq
        self.continuation = continuation


class ElementBatch:
    """Consecutive elements of one stream as arrays, without an object per element: element
    ``i`` is at ``t[i]`` with ``counts[i]`` triples, one element's after the other in ``ids``
    ``(m, 3)``, and is element ``seq0 + i`` of its file.  A batch of the line-by-line reader
    holds one element, kept in ``element`` (which may be a continuation)."""

    __slots__ = ("t", "ids", "counts", "seq0", "element")

    def __init__(
        self, t: np.ndarray, ids: np.ndarray, counts: np.ndarray, seq0: int, element: Element | None = None
    ) -> None:
        self.t, self.ids, self.counts, self.seq0, self.element = t, ids, counts, seq0, element

    @classmethod
    def one(cls, el: Element) -> ElementBatch:
        """The batch of the one element ``el``."""
        return cls(
            np.array([el.t], dtype=np.int64), el.triples, np.array([len(el.triples)], np.int64), el.seq, el
        )

    def elements(self) -> Iterator[Element]:
        """The batch's elements, one :class:`Element` each."""
        if self.element is not None:
            yield self.element
            return
        ids, seq0 = self.ids, self.seq0
        ends = np.cumsum(self.counts).tolist()
        for i, (t, a, b) in enumerate(zip(self.t.tolist(), [0, *ends[:-1]], ends, strict=True)):
            yield Element(t, ids[a:b], seq0 + i)


def in_time_order(batches: Iterable[ElementBatch], lateness_ms: int) -> Iterator[ElementBatch]:
    """The accepted elements of ``batches`` (one stream's, read with ``lateness_ms``) in time
    order, ties in file order: the order the reference evaluator evaluates them in (it sorts
    every accepted element on its time, stably).

    A reader drops an element older than the largest time read so far (``top``) minus the
    lateness, so every element still to come has ``t >= top - lateness``: the held elements
    at or before that time go out, sorted; the rest wait for a later ``top`` or the end.  With
    ``lateness_ms <= 0`` the elements already come in time order and pass through as they are.
    Elements go out as arrays (no object per element); a continuation is then an element like
    another at its time.
    """
    if lateness_ms <= 0:
        yield from batches
        return
    held: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    top: int | None = None
    for b in batches:
        if not len(b.t):
            continue
        bt = int(b.t.max())
        top = bt if top is None or bt > top else top
        if held is None:
            held = (b.t, b.ids, b.counts)
        else:
            held = (
                np.concatenate([held[0], b.t]),
                np.concatenate([held[1], b.ids]),
                np.concatenate([held[2], b.counts]),
            )
        out, held = _release(*held, top - lateness_ms)
        if out is not None:
            yield out
    if held is not None and len(held[0]):
        out, _ = _release(*held, None)
        if out is not None:
            yield out


def _release(
    t: np.ndarray, ids: np.ndarray, counts: np.ndarray, upto: int | None
) -> tuple[ElementBatch | None, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The held elements at or before ``upto`` (``None``: all) as one batch in time order (ties
    in the order held), and the others, also in time order.  Held elements already in time
    order (a stream that came in order) are cut where ``upto`` falls, not sorted and copied."""
    starts = np.zeros(len(t) + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    if len(t) < 2 or bool((t[1:] >= t[:-1]).all()):
        k = len(t) if upto is None else int(np.searchsorted(t, upto, "right"))
        cut = int(starts[k])
        kept = (t[k:], ids[cut:], counts[k:])
        return (ElementBatch(t[:k], ids[:cut], counts[:k], -1) if k else None), kept
    order = np.argsort(t, kind="stable")
    k = len(order) if upto is None else int(np.searchsorted(t[order], upto, "right"))

    def pick(sel: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n = counts[sel]
        first = np.cumsum(n) - n  # where each picked element's triples start in the output
        rows = np.repeat(starts[sel] - first, n) + np.arange(int(n.sum()), dtype=np.int64)
        return t[sel], ids[rows], n

    kept = pick(order[k:])
    if not k:
        return None, kept
    rt, rids, rn = pick(order[:k])
    return ElementBatch(rt, rids, rn, -1), kept


class _Pending:
    __slots__ = ("t", "seq", "continuation", "seen", "triples")

    def __init__(self, t: int, seq: int, continuation: bool = False) -> None:
        self.t = t
        self.seq = seq
        self.continuation = continuation
        # continuations deduplicate as they go, an open element when it closes
        self.seen: set[tuple[str, str, str]] | None = set() if continuation else None
        self.triples: list[tuple[str, str, str]] = []


class ReadState:
    """Where a pass over a stream file is: what the compiled reader hands to the Python one.

    ``graphs`` maps each graph to its (latest) element, ``None`` for a dropped one;
    ``current`` is the open element; ``done`` the closed elements not yet encoded;
    ``lineno`` the lines read.
    """

    __slots__ = (
        "graphs",
        "current",
        "continuations",
        "done",
        "watermark",
        "late_logged",
        "lineno",
        "n_elements",
        "first_t",
    )

    def __init__(self) -> None:
        self.graphs: dict[str, _Pending | None] = {}
        self.current: _Pending | None = None
        self.continuations: dict[int, _Pending] = {}
        self.done: list[_Pending] = []
        self.watermark: int | None = None
        self.late_logged = False
        self.lineno = 0
        self.n_elements = 0
        self.first_t: int | None = None


class StreamReader:
    """Streams timestamped N-Quads (SEMANTICS.md §2) element by element, never loading the whole file.

    Elements come in file order.  An element is complete when the next accepted
    timestamp line or the end of the file arrives; its triples are deduplicated and
    encoded with one ``dictionary.encode_many`` call per chunk of lines.

    Rejections follow the oracle, each logged as ``PATH:LINE: rejected: reason`` and
    counted in ``stats.rejected``: malformed lines, a ``prov:generatedAtTime`` object that
    is not an ``xsd:dateTime``, a default-graph triple that is not a timestamp, a quad of
    a graph whose timestamp has not been seen.  An element older than the watermark
    minus ``lateness_ms`` is dropped with its quads, counted in ``stats.late`` and logged
    once.  With ``lateness_ms > 0`` accepted elements may come out of time order; a
    stable sort on ``t`` gives the oracle's order.

    Event-time rules (:mod:`linkstream.rdf.eventtime`): an element whose timestamp is
    outside ``0 <= t < 2^53`` ms, or more than ``max_time_jump_ms`` ahead of the
    stream's current time (the largest accepted timestamp so far), is rejected with its
    quads: counted in ``stats.rejected_elements`` and logged as ``PATH:LINE: rejected
    element: reason`` (the first ten; then only counted).  The stream's time does not
    move, so the elements after it are judged against the last good one.

    Non-contiguous files: the oracle keeps every element open, so a quad may join an
    element long after later timestamps.  Here such quads of an element already yielded
    are collected into a *continuation* :class:`Element` (same ``t`` and ``seq``,
    ``continuation=True``), yielded with the next completed element.  Only the graph ->
    element map is kept for the whole file, not the elements' triples, so a continuation
    is deduplicated within itself only; merging the elements of equal ``seq`` and
    deduplicating gives exactly the oracle's elements.  A graph whose timestamp appears
    again starts a new element and later quads of that graph go to the new one, as in
    the oracle.

    With the compiled scanner built (:mod:`linkstream.rdf.ntfast`), runs of common lines of a
    regular file (not a pipe: a hand-over seeks back) are read in bulk
    (:mod:`linkstream.rdf.streamfast`) with the same results, ids and messages; the first
    line that needs the rules above line by line hands the rest of the file over.

    Args:
        path: the ``.nq`` file.
        dictionary: encodes the terms.
        bnode_prefix: prepended to blank-node labels of this file.
        lateness_ms: allowed lateness.
        log: receives one message per rejection (default: this module's logger).
        chunk_lines: lines read and encoded per batch.
        max_time_jump_ms: largest accepted forward jump of the stream's time (ms);
            ``None`` or ``0``: no limit.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """

    def __init__(
        self,
        path: str,
        dictionary: Dictionary,
        *,
        bnode_prefix: str = "",
        lateness_ms: int = 0,
        log: Callable[[str], None] | None = None,
        chunk_lines: int = 65536,
        max_time_jump_ms: int | None = DEFAULT_MAX_TIME_JUMP_MS,
    ) -> None:
        if not os.path.exists(path):
            raise FileNotFoundError(errno.ENOENT, "stream file not found", path)
        if chunk_lines < 1:
            raise ValueError("chunk_lines must be positive")
        self.path = path
        self.dictionary = dictionary
        self.bnode_prefix = bnode_prefix
        self.lateness_ms = lateness_ms
        self.log: Callable[[str], None] = log if log is not None else _log.warning
        self.chunk_lines = chunk_lines
        self.max_time_jump_ms = max_time_jump_ms
        self.stats = StreamStats()

    def __iter__(self) -> Iterator[Element]:
        for batch in self.batches():
            yield from batch.elements()

    def batches(self) -> Iterator[ElementBatch]:
        """The file's elements, in batches: those of a chunk of lines read by the compiled
        scanner together (arrays, no object per element), the others one by one."""
        self.stats = StreamStats()
        st = ReadState()
        one = ElementBatch.one
        if native_streams() and os.path.isfile(self.path):  # (a hand-over seeks: not a pipe)
            from linkstream.rdf.streamfast import read_fast

            # the compiled scanner reads the common lines; it hands the rest of the file over
            # (at a byte offset, with its state in ``st``) when a line needs the rules below
            handover = yield from read_fast(self, st)
            if handover is None:
                return
            with open(self.path, "rb") as raw:
                raw.seek(handover)
                rest = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="\n")
                yield from map(one, self._lines(rest, st))
        else:
            # utf-8-sig: a byte order mark at the start of the file is not part of the first line
            with open(self.path, encoding="utf-8-sig", errors="surrogateescape", newline="\n") as f:
                yield from map(one, self._lines(f, st))
        done: list[_Pending] = []
        self._close(st.current, st.continuations, done)
        stats = self.stats
        stats.elements, stats.first_t, stats.last_t = st.n_elements, st.first_t, st.watermark
        if done:
            yield from map(one, self._encode(done))

    def _lines(self, f: Iterator[str], st: ReadState) -> Iterator[Element]:
        """The elements of the lines of ``f``, read by the rules of this class from the state
        ``st`` (left in ``st`` at the end; the last element stays open)."""
        stats = self.stats
        parser = parser_for(self.bnode_prefix)
        iris_get, lits_get, split_term = parser._iris.get, parser._lits.get, parser._split_term
        path, log, lateness, max_jump = self.path, self.log, self.lateness_ms, self.max_time_jump_ms
        graphs = st.graphs  # graph -> its (latest) element, None if late
        current = st.current
        continuations = st.continuations
        done = st.done
        st.done = []
        watermark = st.watermark
        late_logged = st.late_logged
        lineno = st.lineno
        # stats.elements and stats.first_t, kept here and stored before each yield (stats.last_t
        # is the watermark: the largest accepted timestamp)
        n_elements = st.n_elements
        first_t = st.first_t
        # the graph token of the last common line of ``current`` (its graph checked once)
        cur_tok: str | None = None
        cur_add: Callable[[tuple[str, str, str]], None] | None = None

        def reject(reason: str) -> None:
            stats.rejected += 1
            log("%s:%d: rejected: %s" % (path, lineno, reason))

        def reject_element(reason: str) -> None:
            stats.rejected_elements += 1
            if stats.rejected_elements <= _LOGGED_ELEMENT_REJECTIONS:
                more = (
                    "; further elements rejected for their time are only counted"
                    if stats.rejected_elements == _LOGGED_ELEMENT_REJECTIONS
                    else ""
                )
                log("%s:%d: rejected element: %s%s" % (path, lineno, reason, more))

        # chunks end where they would have from the start of the file (a reader that took over
        # part way reads up to the next such line first): the same encode calls, the same ids
        size = self.chunk_lines - lineno % self.chunk_lines
        while True:
            lines = list(islice(f, size))
            size = self.chunk_lines
            if not lines:
                break
            for raw in lines:
                lineno += 1
                # a line "... .\n" without CR is split as it is (not stripped first): a
                # token with whitespace around it is no term, so such a line goes to the
                # parser below, which strips it
                parts = raw.split(" ")
                if parts[-1] == ".\n" and "\r" not in raw:
                    parts[-1] = "."
                    line = None
                else:
                    raw = line = raw.strip(LINE_STRIP)  # "raw" is searched for CR below
                    if not line or line[0] == "#":
                        continue
                    parts = line.split(" ")
                # the common line: "<s> <p> <o> <g> ." for the element being read, each
                # token a whole term: the terms the parser's split path would return
                # (its caches, or its term check); anything else goes to the parser
                if len(parts) == 5 and parts[4] == "." and current is not None and "\r" not in raw:
                    try:
                        g_tok = parts[3]
                        if g_tok != cur_tok:
                            g = iris_get(g_tok) or split_term(g_tok, False)
                            if g is None or graphs.get(g) is not current:
                                raise _NotCommon
                            cur_tok = g_tok
                            cur_add = current.triples.append
                        p = iris_get(parts[1]) or split_term(parts[1], False)
                        s = iris_get(parts[0]) or split_term(parts[0], False)
                        o = iris_get(parts[2]) or lits_get(parts[2]) or split_term(parts[2], True)
                        if p is not None and p[0] == "<" and s is not None and o is not None:
                            # deduplicated when the element closes (:meth:`_close`)
                            cur_add((s, p, o))  # type: ignore[misc]  # set with cur_tok
                            continue
                    except (NTriplesError, _NotCommon):
                        pass  # the parser below says why
                quads: list[Quad] | tuple[Quad, ...] | None = None
                fast_t: int | None = None
                # the common timestamp line, "<g> prov:generatedAtTime "..."^^xsd:dateTime .",
                # with a literal in the fast dateTime form: the parser would return the
                # tokens themselves (the subject as its term check gives it)
                if len(parts) == 4 and parts[3] == "." and parts[1] == _PROV_TOKEN and "\r" not in raw:
                    o = parts[2]
                    m = (
                        _DT_FAST_RE.fullmatch(o, 1, len(o) - len(_DATETIME_SUFFIX))
                        if o[0] == '"' and o.endswith(_DATETIME_SUFFIX)
                        else None
                    )
                    if m is not None:
                        try:
                            g = iris_get(parts[0]) or split_term(parts[0], False)
                        except NTriplesError:
                            g = None  # the parser says why
                        if g is not None:
                            quads = ((g, _PROV_TOKEN, o, None),)
                            # no escapes in the fast form: the literal's text is its lexical form
                            head, sec, frac = m.groups()
                            minute = _MINUTES.get(head)
                            if minute is None:
                                fast_t = _fast_ms(m)
                            else:  # as _fast_ms
                                fast_t = minute + int(sec) * 1000 + (int((frac + "00")[:3]) if frac else 0)
                if quads is None:
                    if line is None:
                        line = raw.strip(LINE_STRIP)
                        if not line or line[0] == "#":
                            continue
                    try:
                        if "\r" in line:
                            quads = parser.parse_statements(line)
                        else:
                            q = parser.parse_statement(line)
                            quads = (q,) if q is not None else ()
                    except NTriplesError as e:
                        reject(utf8_error(line) or str(e))
                        continue
                for s, p, o, g in quads:
                    if g is None:
                        cur_tok = None  # the graph -> element map may change
                        if fast_t is not None:
                            t = fast_t
                        elif p != _PROV_TOKEN:
                            reject("default-graph triple that is not a timestamp")
                            continue
                        elif o[0] != '"' or not o.endswith(_DATETIME_SUFFIX):
                            reject("generatedAtTime is not an xsd:dateTime literal")
                            continue
                        else:
                            try:
                                t = parse_datetime_ms(unescape_string(o[1 : -len(_DATETIME_SUFFIX)]))
                            except ValueError as e:
                                reject(str(e))
                                continue
                        problem = None
                        if not EVENT_TIME_MIN <= t <= EVENT_TIME_MAX:
                            problem = range_error(t)
                        elif watermark is not None and max_jump and t - watermark > max_jump:
                            problem = jump_error(t, watermark, max_jump)
                        if problem is not None:
                            reject_element(problem)
                            graphs[s] = None  # its quads go with it
                            continue
                        if watermark is not None and t < watermark - lateness:
                            stats.late += 1
                            if not late_logged:
                                log(
                                    "%s:%d: late element dropped (t=%d < watermark %d); further late "
                                    "elements of this stream are only counted" % (path, lineno, t, watermark)
                                )
                                late_logged = True
                            graphs[s] = None
                            continue
                        if watermark is None or t > watermark:
                            watermark = t
                        if continuations or current is None:
                            self._close(current, continuations, done)
                        else:  # as _close
                            current.triples = list(dict.fromkeys(current.triples))
                            done.append(current)
                        current = _Pending(t, n_elements)
                        n_elements += 1
                        if first_t is None or t < first_t:
                            first_t = t
                        graphs[s] = current
                        continue
                    el = graphs.get(g, _MISSING)
                    if el is _MISSING:
                        reject("quad of graph %s before its timestamp" % g)
                        continue
                    if el is None:  # belongs to a dropped late element
                        continue
                    if el is current:  # deduplicated when it closes
                        el.triples.append((s, p, o))
                        continue
                    # an element already closed: a continuation
                    cont = continuations.get(el.seq)
                    if cont is None:
                        cont = continuations[el.seq] = _Pending(el.t, el.seq, True)
                    key = (s, p, o)
                    seen = cont.seen
                    assert seen is not None  # a continuation's
                    if key not in seen:
                        seen.add(key)
                        cont.triples.append(key)
            stats.elements, stats.first_t, stats.last_t = n_elements, first_t, watermark
            if done:
                yield from self._encode(done)
                done = []
        st.current, st.watermark, st.late_logged, st.lineno = current, watermark, late_logged, lineno
        st.n_elements, st.first_t = n_elements, first_t

    @staticmethod
    def _close(current: _Pending | None, continuations: dict[int, _Pending], done: list[_Pending]) -> None:
        """Move the open element and the pending continuations to ``done``, in ``seq`` order."""
        if continuations:
            done.extend(continuations[k] for k in sorted(continuations))
            continuations.clear()
        if current is not None:
            # the open element's triples, deduplicated in first-seen order (its later quads
            # become continuations)
            current.triples = list(dict.fromkeys(current.triples))
            done.append(current)

    def _encode(self, pending: list[_Pending]) -> Iterator[Element]:
        terms = list(chain.from_iterable(chain.from_iterable(el.triples for el in pending)))
        ids = self.dictionary.encode_many(terms).reshape(-1, 3) if terms else np.empty((0, 3), np.int64)
        stats = self.stats
        start = 0
        for el in pending:
            n = len(el.triples)
            stats.triples += n
            yield Element(el.t, ids[start : start + n], el.seq, el.continuation)
            start += n
            el.triples = []


class _NotCommon(Exception):
    """A line that looked common but is not (the parser reads it)."""


_MISSING = _Pending(0, -1)
_LOGGED_ELEMENT_REJECTIONS = 10
