"""Stream files read by the compiled scanner: the common lines in bulk, no Python work per line.

:class:`~linkstream.rdf.streams.StreamReader` uses this when the compiled scanner
(``platform/rdf/_ntparse.c``, see :mod:`linkstream.rdf.ntfast`) is built.  The scanner reads
a run of lines and returns, per statement, the indexes of its four terms (``-1``: the default
graph) in the run's list of distinct terms; this module then applies the reader's rules to the
whole run with numpy:

* the timestamp lines (default-graph ``prov:generatedAtTime`` statements) are read one per
  *element*: watermark, late elements, event-time limits, the graph -> element map;
* every other statement must name the graph of the last timestamp line before it (a file
  whose elements are contiguous); it goes to that element, or nowhere if the element was late;
* a closed element's triples are deduplicated (first occurrence kept) and encoded when the
  chunk of lines that closed it ends, exactly as the line-by-line reader does: the same
  ``encode_many`` calls with the same terms in the same order, so the dictionary gives the
  same ids.

Anything else hands the rest of the file to the line-by-line reader, with the state read so far
(:class:`~linkstream.rdf.streams.ReadState`) and the byte offset of the first line it did not
apply: a statement of another graph (a non-contiguous file), a rejected timestamp or element,
the first late element (those are logged with their line number), a line the scanner does not
read that is not a plain statement of the open element.  Malformed lines are rejected here with
the line-by-line reader's message.  ``tests/rdf/test_streamfast.py`` compares the two readers.
"""

from __future__ import annotations

from collections.abc import Generator
from itertools import chain

import numpy as np

from linkstream.rdf import ntfast
from linkstream.rdf.dictionary import Dictionary
from linkstream.rdf.eventtime import EVENT_TIME_MAX, EVENT_TIME_MIN
from linkstream.rdf.ntriples import (
    LINE_STRIP,
    LineParser,
    NTriplesError,
    parse_file_line,
    parser_for,
    utf8_error,
)
from linkstream.rdf.streams import (
    _DATETIME_SUFFIX,
    _DT_FAST_RE,
    _PROV_TOKEN,
    ElementBatch,
    ReadState,
    StreamReader,
    _fast_ms,
    _Pending,
    parse_datetime_ms,
)
from linkstream.rdf.terms import unescape_string

#: bytes asked of one read (a pipe gives what it has)
BLOCK = 1 << 20
_NO_SEQ = np.iinfo(np.int64).max
#: a run's terms, its statements' term indexes ``(n, 3)``, each statement's element ``seq``
_Piece = tuple[list[str], np.ndarray, np.ndarray]


def read_fast(reader: StreamReader, st: ReadState) -> Generator[ElementBatch, None, int | None]:
    """The elements of ``reader``'s file, read with the compiled scanner from its start, a
    batch per chunk of lines.

    Returns ``None`` when the whole file was read, or the byte offset of the first line the
    line-by-line reader must read, with ``st`` holding the state up to it."""
    scanner = ntfast.scanner()
    if scanner is None:
        raise RuntimeError("the compiled N-Triples scanner is not available")
    parser = parser_for(reader.bnode_prefix)
    prefix = reader.bnode_prefix.encode("utf-8")
    fast = _Run(reader, st, parser)
    chunk = reader.chunk_lines
    with open(reader.path, "rb", buffering=0) as f:  # (unbuffered: a pipe gives what it has)
        for offset, data in ntfast.line_blocks(f, BLOCK):
            view = memoryview(data)
            ends = np.flatnonzero(np.frombuffer(data, np.uint8) == 10)  # line ends, for the chunks
            lines0 = st.lineno  # lines before data
            pos = 0
            while pos < len(data):
                # the chunk of lines being read ends at line k (counted from the file's start)
                k = st.lineno + chunk - st.lineno % chunk - lines0
                bound = k <= len(ends)
                stop = int(ends[k - 1]) + 1 if bound else len(data)
                while pos < stop:
                    terms, idx, end, lines, stopped = scanner.scan(
                        view[:stop], pos, prefix, True, parser._langs, None, None
                    )
                    if idx and not fast.run(terms, np.frombuffer(idx, dtype=np.int64).reshape(-1, 4)):
                        fast.hand_over()
                        return offset + pos
                    st.lineno += lines
                    pos = end
                    if stopped or (not lines and pos < stop):  # a line for the Python parser
                        nl = data.find(b"\n", pos, stop)
                        end = stop if nl < 0 else nl + 1
                        if not fast.line(data[pos:end].decode("utf-8", "surrogateescape"), st.lineno + 1):
                            fast.hand_over()
                            return offset + pos
                        st.lineno += 1
                        pos = end
                if bound:
                    yield from fast.flush()
    yield from fast.flush()
    yield from fast.flush(last=True)
    return None


class _Run:
    """What the compiled reader holds between runs of lines.

    Elements are numbers here (their ``seq``): ``_Pending`` objects and the graph -> element
    map are only built if the line-by-line reader takes over (:meth:`hand_over`)."""

    def __init__(self, reader: StreamReader, st: ReadState, parser: LineParser) -> None:
        self.reader, self.st, self.parser = reader, st, parser
        self.pieces: list[_Piece] = []  # statements not yet encoded
        self.flushed = 0  # elements before this one are encoded and yielded
        self.graph: str | None = None  # the graph of the last timestamp line
        self.graph_seq = -1  # and its element (-1: dropped)
        # per run: the graphs of its timestamp lines, their elements (-1: dropped), the times
        # of its accepted elements (all of them, and those not yet yielded)
        self.names: list[list[str]] = []
        self.seqs: list[np.ndarray] = []
        self.times: list[np.ndarray] = []
        self.unyielded: list[np.ndarray] = []
        self.parsed: dict[str, int] = {}  # timestamps read one by one

    def run(self, terms: list[str], idx: np.ndarray) -> bool:
        """Applies a run of statements, or returns False (nothing changed) if one of them needs
        the line-by-line reader."""
        st, reader = self.st, self.reader
        ts_rows = np.flatnonzero(idx[:, 3] < 0)
        watermark, n_elements, first_t = st.watermark, st.n_elements, st.first_t
        lateness, max_jump = reader.lateness_ms, reader.max_time_jump_ms
        ts = idx[ts_rows, :3]
        names = [terms[i] for i in ts[:, 0].tolist()]
        stamps = _stamps(terms, ts) if len(ts) else None
        if stamps is not None and _in_order(stamps, watermark, lateness, max_jump):
            # the common run: every element accepted, in time order (watermark: its last)
            watermark = int(stamps[-1]) if watermark is None else max(watermark, int(stamps[-1]))
            first_t = int(stamps[0]) if first_t is None else min(first_t, int(stamps[0]))
            seqs = np.arange(n_elements, n_elements + len(stamps), dtype=np.int64)
            return self._apply(terms, idx, ts_rows, names, seqs, stamps, watermark, first_t, 0)
        seq: list[int] = []
        accepted: list[int] = []
        late = 0
        parsed = self.parsed
        for p_i, o_i in ts[:, 1:].tolist():
            if terms[p_i] != _PROV_TOKEN:
                return False  # rejected with its line number
            o = terms[o_i]
            t = parsed.get(o)
            if t is None:
                t = _timestamp(o)
                if t is None:
                    return False
                if len(parsed) >= 4096:
                    parsed.clear()
                parsed[o] = t
            if not EVENT_TIME_MIN <= t <= EVENT_TIME_MAX:
                return False
            if watermark is not None:
                if max_jump and t - watermark > max_jump:
                    return False
                if t < watermark - lateness:
                    if not st.late_logged:
                        return False  # the first late element is logged with its line
                    late += 1
                    seq.append(-1)
                    continue
            if watermark is None or t > watermark:
                watermark = t
            if first_t is None or t < first_t:
                first_t = t
            seq.append(n_elements + len(accepted))
            accepted.append(t)
        return self._apply(
            terms,
            idx,
            ts_rows,
            names,
            np.array(seq, dtype=np.int64),
            np.array(accepted, dtype=np.int64),
            watermark,
            first_t,
            late,
        )

    def _apply(
        self,
        terms: list[str],
        idx: np.ndarray,
        ts_rows: np.ndarray,
        names: list[str],
        seqs: np.ndarray,
        stamps: np.ndarray,
        watermark: int | None,
        first_t: int | None,
        late: int,
    ) -> bool:
        """Applies the run whose timestamp lines open the elements ``seqs`` (-1: dropped) of
        the graphs ``names`` at the times ``stamps`` (of those accepted), or returns False
        (nothing changed) if one of its statements names another graph than the last
        timestamp line before it."""
        g = idx[:, 3]
        quads = np.flatnonzero(g >= 0)
        seg = np.searchsorted(ts_rows, quads)  # the timestamp lines before each statement
        head = seg == 0
        if head.any():  # statements of the element open before this run
            graphs_in = list(set(g[quads[head]].tolist()))  # (not np.unique: see _stamps)
            if self.graph is None or len(graphs_in) != 1 or terms[graphs_in[0]] != self.graph:
                return False
        if not head.all():
            tail = seg[~head]
            if not np.array_equal(g[quads[~head]], idx[ts_rows[tail - 1], 0]):
                return False
        # applied from here on
        st = self.st
        st.watermark, st.first_t = watermark, first_t
        st.n_elements += len(stamps)
        self.reader.stats.late += late
        if len(quads):
            targets = np.concatenate([np.array([self.graph_seq], dtype=np.int64), seqs])[seg]
            keep = targets >= 0
            if not keep.all():
                quads, targets = quads[keep], targets[keep]
            if len(quads):
                self.pieces.append((terms, idx[quads, :3], targets))
        if names:
            self.graph, self.graph_seq = names[-1], int(seqs[-1])
            self.names.append(names)
            self.seqs.append(seqs)
            self.times.append(stamps)
            self.unyielded.append(stamps)
        return True

    def line(self, raw: str, lineno: int) -> bool:
        """A line the scanner does not read: rejected here, taken if its statements belong to
        the open element, else False (nothing changed)."""
        reader = self.reader
        try:
            quads = parse_file_line(self.parser, raw)
        except NTriplesError as e:
            reader.stats.rejected += 1
            reader.log("%s:%d: rejected: %s" % (reader.path, lineno, utf8_error(raw.strip(LINE_STRIP)) or e))
            return True
        if self.graph_seq < 0 or any(g != self.graph for _, _, _, g in quads):
            return False
        if quads:
            terms = [t for q in quads for t in q[:3]]
            rows = np.arange(len(terms), dtype=np.int64).reshape(-1, 3)
            self.pieces.append((terms, rows, np.full(len(rows), self.graph_seq, dtype=np.int64)))
        return True

    def flush(self, last: bool = False) -> Generator[ElementBatch, None, None]:
        """Encodes and yields the closed elements (``last``: the open one too), as the
        line-by-line reader does at the end of a chunk of lines (and of the file)."""
        st = self.st
        limit = st.n_elements if last else st.n_elements - 1  # the last one is open
        if limit <= self.flushed:
            return
        now: list[_Piece] = []
        later: list[_Piece] = []
        for terms, rows, seqs in self.pieces:
            c = int(np.searchsorted(seqs, limit))
            if c:
                now.append((terms, rows[:c], seqs[:c]))
            if c < len(seqs):
                later.append((terms, rows[c:], seqs[c:]))
        self.pieces = later
        ids, seqs = _encode(now, self.reader.dictionary)
        times = np.concatenate(self.unyielded) if len(self.unyielded) > 1 else self.unyielded[0]
        n = limit - self.flushed
        self.unyielded = [times[n:]]
        counts = np.bincount(seqs - self.flushed, minlength=n) if len(seqs) else np.zeros(n, np.int64)
        stats = self.reader.stats
        stats.triples += len(ids)
        stats.elements, stats.first_t, stats.last_t = st.n_elements, st.first_t, st.watermark
        yield ElementBatch(times[:n], ids, counts.astype(np.int64, copy=False), self.flushed)
        self.flushed = limit

    def hand_over(self) -> None:
        """Leaves in ``st`` what the line-by-line reader needs: the graph -> element map, the
        closed elements not yet encoded (``done``) and the open element, their triples as
        terms."""
        st = self.st
        if not self.names:
            return
        times = np.concatenate(self.times).tolist()
        made: dict[int, _Pending] = {}

        def element(q: int) -> _Pending:
            el = made.get(q)
            if el is None:
                el = made[q] = _Pending(times[q], q)
            return el

        last = dict(zip(chain.from_iterable(self.names), np.concatenate(self.seqs).tolist(), strict=True))
        st.graphs.update((name, element(q) if q >= 0 else None) for name, q in last.items())
        if st.n_elements:
            st.current = element(st.n_elements - 1)
        for terms, rows, seqs in self.pieces:
            for (s, p, o), q in zip(rows.tolist(), seqs.tolist(), strict=True):
                element(q).triples.append((terms[s], terms[p], terms[o]))
        st.done = [element(q) for q in range(self.flushed, st.n_elements - 1)]
        for el in st.done:
            el.triples = list(dict.fromkeys(el.triples))
        self.pieces = []


def _in_order(t: np.ndarray, watermark: int | None, lateness: int, max_jump: int | None) -> bool:
    """Whether the reader would accept every one of the timestamps ``t`` in turn: all in the
    event-time range, none late, none more than ``max_jump`` ahead of the stream's time."""
    if int(t.min()) < EVENT_TIME_MIN or int(t.max()) > EVENT_TIME_MAX:
        return False
    step = np.diff(t)
    if len(step) and int(step.min()) < 0:
        return False
    if watermark is not None:
        if int(t[0]) < watermark - lateness:
            return False
        if max_jump and int(t[0]) - watermark > max_jump:
            return False
    return not (max_jump and len(step) and int(step.max()) > max_jump)


#: positions of a dateTime literal's lexical form ``"YYYY-MM-DDThh:mm:ss[.f...]Z"`` after
#: the opening quote: the digits and the separators
_DIGITS = np.array([1, 2, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16, 18, 19])
_SEPARATORS = {5: ord("-"), 8: ord("-"), 11: ord("T"), 14: ord(":"), 17: ord(":")}
_SUFFIX = np.frombuffer(_DATETIME_SUFFIX.encode("ascii"), np.uint8)
_DAYS = np.array([31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _stamps(terms: list[str], ts: np.ndarray) -> np.ndarray | None:
    """The milliseconds of the timestamp statements ``ts`` (term indexes ``(n, 3)``) when they
    all have the common form (``prov:generatedAtTime`` and ``"YYYY-MM-DDThh:mm:ss[.f...]Z"``
    as an ``xsd:dateTime`` of one length, a valid date, hour below 24), read in bulk; else
    ``None`` (the caller reads them one by one)."""
    for p in set(ts[:, 1].tolist()):  # (np.unique's first call imports numpy.ma: ~10 ms)
        if terms[p] != _PROV_TOKEN:
            return None
    lits = [terms[o] for o in ts[:, 2].tolist()]
    size = len(lits[0])
    n = size - len(_DATETIME_SUFFIX) - 1  # the lexical form's length (the suffix has its quote)
    if (n != 20 and n < 22) or set(map(len, lits)) != {size}:
        return None
    try:
        raw = "".join(lits).encode("ascii")
    except UnicodeEncodeError:
        return None
    a = np.frombuffer(raw, np.uint8).reshape(-1, size)
    if (a[:, 0] != ord('"')).any() or (a[:, n + 1 :] != _SUFFIX).any():
        return None
    if (a[:, n] != ord("Z")).any() or (n > 20 and (a[:, 20] != ord(".")).any()):
        return None
    for col, ch in _SEPARATORS.items():
        if (a[:, col] != ch).any():
            return None
    cols = np.concatenate([_DIGITS, np.arange(21, n)]) if n > 20 else _DIGITS
    d = a[:, cols].astype(np.int64) - ord("0")
    if d.min() < 0 or d.max() > 9:
        return None
    year = d[:, 0] * 1000 + d[:, 1] * 100 + d[:, 2] * 10 + d[:, 3]
    month, day = d[:, 4] * 10 + d[:, 5], d[:, 6] * 10 + d[:, 7]
    hour, minute, sec = d[:, 8] * 10 + d[:, 9], d[:, 10] * 10 + d[:, 11], d[:, 12] * 10 + d[:, 13]
    if year.min() < 1 or month.min() < 1 or month.max() > 12 or day.min() < 1:
        return None
    if hour.max() > 23 or minute.max() > 59 or sec.max() > 59:
        return None
    leap = ((year % 4 == 0) & (year % 100 != 0)) | (year % 400 == 0)
    if (day > _DAYS[month - 1] + (leap & (month == 2))).any():
        return None
    ms = np.zeros(len(a), dtype=np.int64)
    for k, w in enumerate((100, 10, 1)):  # the first three digits of the fraction
        if 14 + k < d.shape[1]:
            ms += d[:, 14 + k] * w
    # days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil)
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month + np.where(month > 2, -3, 9)) + 2) // 5 + day - 1
    days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
    return days * 86400000 + hour * 3600000 + minute * 60000 + sec * 1000 + ms


def _timestamp(o: str) -> int | None:
    """The milliseconds of an ``xsd:dateTime`` literal term, ``None`` if it is not one."""
    if o[0] != '"' or not o.endswith(_DATETIME_SUFFIX):
        return None
    m = _DT_FAST_RE.fullmatch(o, 1, len(o) - len(_DATETIME_SUFFIX))
    if m is not None:
        t = _fast_ms(m)
        if t is not None:
            return t
    try:
        return parse_datetime_ms(unescape_string(o[1 : -len(_DATETIME_SUFFIX)]))
    except ValueError:
        return None


def _encode(pieces: list[_Piece], dictionary: Dictionary) -> tuple[np.ndarray, np.ndarray]:
    """Ids ``(n, 3)`` of the pieces' statements, deduplicated per element (first occurrence
    kept, in order), and each one's element ``seq``: one ``encode_many`` over the terms in the
    order they first occur, as the line-by-line reader encodes its elements."""
    if not pieces:
        return np.empty((0, 3), np.int64), np.empty(0, np.int64)
    words: list[str] = []
    orders: list[np.ndarray] = []
    for terms, rows, _ in pieces:
        u, first = np.unique(rows.ravel(), return_index=True)
        order = u[np.argsort(first, kind="stable")]
        orders.append(order)
        words.extend([terms[i] for i in order.tolist()])
    codes = dictionary.encode_many(words)
    parts = []
    start = 0
    for (terms, rows, _), order in zip(pieces, orders, strict=True):
        lut = np.empty(len(terms), dtype=np.int64)
        lut[order] = codes[start : start + len(order)]
        start += len(order)
        parts.append(lut[rows])
    ids = np.concatenate(parts) if len(parts) > 1 else parts[0]
    seqs = np.concatenate([s for _, _, s in pieces]) if len(pieces) > 1 else pieces[0][2]
    # duplicates within an element: a stable sort brings each one after its first occurrence
    order = np.lexsort((ids[:, 2], ids[:, 1], ids[:, 0], seqs))
    k = ids[order]
    ks = seqs[order]
    dup = np.zeros(len(order), dtype=bool)
    dup[1:] = (ks[1:] == ks[:-1]) & (k[1:] == k[:-1]).all(axis=1)
    if dup.any():
        keep = np.ones(len(order), dtype=bool)
        keep[order[dup]] = False
        ids, seqs = ids[keep], seqs[keep]
    return ids, seqs
