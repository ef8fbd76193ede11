"""The compiled N-Triples / N-Quads reader: lines scanned in C, terms encoded per batch.

:mod:`linkstream.rdf._ntparse` (``platform/rdf/_ntparse.c``, built by ``pip install`` when a C
compiler is there) scans a block of lines and returns the distinct term strings of the
statements it read and, per statement, their indexes: the dictionary then encodes each
block with one ``encode_many`` call and the triples are one numpy gather, with no Python
work per line.  It reads the common lines only (simple ASCII IRIs, blank nodes, literals
without escapes or language tags); it stops at any other line, which the Python parser of
:mod:`linkstream.rdf.ntriples` reads (accepting it or rejecting it with its reason), and
then goes on.  Terms, ids (in the order the Python path allocates them) and rejections are
those of the Python path: ``tests/rdf/test_ntfast.py`` compares the two.

Without the extension (or after ``use_native(False)``) :func:`native` is False and the
callers read every line in Python.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from types import ModuleType
from typing import BinaryIO

import numpy as np

from linkstream.rdf.dictionary import Dictionary, MemoryDictionary
from linkstream.rdf.ntriples import NTriplesError, parse_file_line, parser_for, utf8_error

_scanner: ModuleType | None
try:  # the compiled scanner (platform/rdf/_ntparse.c), built by ``pip install``
    from linkstream.rdf import _ntparse as _built

    _scanner = _built
except ImportError:  # no C compiler at install time: the Python parser reads every line
    _scanner = None

#: the scanner in use, or ``None`` (see :func:`use_native`)
_native = _scanner

#: bytes read per block
BLOCK = 1 << 20
#: terms gathered before one ``encode_many`` call
BATCH_TERMS = 1 << 16
_BOM = b"\xef\xbb\xbf"


def native() -> bool:
    """Whether the compiled scanner is in use (built at install time, and not turned off by
    :func:`use_native`)."""
    return _native is not None


def scanner() -> ModuleType | None:
    """The compiled scanner in use, or ``None`` (see :func:`use_native`)."""
    return _native


def use_native(on: bool) -> bool:
    """Turn the compiled scanner on or off (tests, benchmarks); returns :func:`native`."""
    global _native
    _native = _scanner if on else None
    return _native is not None


def line_blocks(f: BinaryIO, size: int = BLOCK) -> Iterator[tuple[int, bytes]]:
    """Blocks of whole lines of the binary file ``f`` (the file's last line may have no line
    end), each with its offset in the file; a byte order mark at the start is skipped.  A
    pipe's block is what its reads have given so far."""
    carry = b""
    offset = 0
    first = True
    while True:
        block = f.read(size)
        eof = not block
        buf = carry + block if carry else block
        if first:
            if len(buf) < 3 and not eof:
                carry = buf
                continue
            first = False
            if buf.startswith(_BOM):
                buf = buf[3:]
                offset = 3
        cut = len(buf) if eof else buf.rfind(b"\n") + 1
        carry = buf[cut:]
        if cut:
            yield offset, buf[:cut]
            offset += cut
        if eof:
            return


def encoded_triples(
    path: str, dictionary: Dictionary, bnode_prefix: str, log: Callable[[str], None]
) -> Iterator[np.ndarray]:
    """``(n, 3)`` int64 id arrays of the statements of an N-Triples / N-Quads file, in file
    order (graphs ignored, repeats kept); malformed lines are logged as
    ``PATH:LINE: rejected: reason`` and skipped.  Needs :func:`native`."""
    # a memory dictionary is filled by the scanner itself (ids as its encode gives them)
    tables = dictionary.tables() if isinstance(dictionary, MemoryDictionary) else (None, None)
    pieces: list[tuple[list[str], np.ndarray]] = []
    n_terms = 0
    for terms, idx, by_python in _scanned(path, bnode_prefix, log, False, tables):
        if terms is None:  # ids, in the dictionary already
            if len(idx):
                yield idx
            continue
        pieces.append((terms, idx))
        n_terms += len(terms)
        if n_terms >= BATCH_TERMS or (by_python and tables[0] is not None):
            # (a line read in Python is encoded before the scanner allocates more ids)
            yield from _encode(pieces, dictionary)
            pieces, n_terms = [], 0
    if pieces:
        yield from _encode(pieces, dictionary)


def encoded_quads(
    path: str, dictionary: Dictionary, bnode_prefix: str, log: Callable[[str], None]
) -> Iterator[tuple[np.ndarray, np.ndarray, list[str | None]]]:
    """The statements of an N-Triples / N-Quads file in file order (repeats kept), per batch
    ``(triples, graphs, names)``: an ``(n, 3)`` int64 id array, an ``(n,)`` array of indexes
    into ``names``, the graph terms as written (``None``: the default graph).  Only subject,
    predicate and object terms are encoded (in the order they first occur); malformed lines
    are logged as ``PATH:LINE: rejected: reason`` and skipped.  Needs :func:`native`."""
    pieces: list[tuple[list[str], np.ndarray]] = []
    n_terms = 0
    for terms, idx, _ in _scanned(path, bnode_prefix, log, True, (None, None)):
        assert terms is not None  # index mode: no memory tables given
        pieces.append((terms, idx))
        n_terms += len(terms)
        if n_terms >= BATCH_TERMS:
            yield _encode_quads(pieces, dictionary)
            pieces, n_terms = [], 0
    if pieces:
        yield _encode_quads(pieces, dictionary)


def _scanned(
    path: str,
    bnode_prefix: str,
    log: Callable[[str], None],
    graphs: bool,
    tables: tuple[object | None, list | None],
) -> Iterator[tuple[list[str] | None, np.ndarray, bool]]:
    """``(terms, idx, by_python)`` per scanned run of lines: ``idx`` (3 or 4 columns, ``-1``
    for the default graph) indexes ``terms``, or is ids when ``terms`` is None (``tables``
    of a memory dictionary given); ``by_python`` for a line the Python parser read."""
    scanner = _native
    if scanner is None:
        raise RuntimeError("the compiled N-Triples scanner is not available")
    parser = parser_for(bnode_prefix)
    prefix = bnode_prefix.encode("utf-8")
    width = 4 if graphs else 3
    ids, all_terms = tables
    lineno = 0
    with open(path, "rb") as f:
        for _, data in line_blocks(f):
            pos = 0
            while pos < len(data):
                terms, idx, pos, lines, stopped = scanner.scan(
                    data, pos, prefix, graphs, parser._langs, ids, all_terms
                )
                lineno += lines
                if terms is None or terms:
                    yield terms, np.frombuffer(idx, dtype=np.int64).reshape(-1, width), False
                if not stopped:
                    continue
                # one line for the Python parser
                end = data.find(b"\n", pos)
                end = len(data) if end < 0 else end + 1
                raw = data[pos:end].decode("utf-8", "surrogateescape")
                lineno += 1
                pos = end
                try:
                    quads = parse_file_line(parser, raw)
                except NTriplesError as e:
                    log("%s:%d: rejected: %s" % (path, lineno, utf8_error(raw) or e))
                    continue
                if quads:
                    yield _python_piece(quads, graphs) + (True,)


def _python_piece(
    quads: list[tuple[str, str, str, str | None]], graphs: bool
) -> tuple[list[str], np.ndarray]:
    """The ``(terms, idx)`` piece of the statements of a line the Python parser read."""
    terms: list[str] = []
    rows: list[list[int]] = []
    for q in quads:
        k = len(terms)
        terms.extend(q[:3])
        rows.append([k, k + 1, k + 2])
        if graphs:
            rows[-1].append(-1 if q[3] is None else k + 3)
            if q[3] is not None:
                terms.append(q[3])
    return terms, np.array(rows, dtype=np.int64)


def _encode(pieces: list[tuple[list[str], np.ndarray]], dictionary: Dictionary) -> Iterator[np.ndarray]:
    """One ``encode_many`` over the terms of every piece (first occurrences in file order, so
    new terms get the ids the line-by-line path gives them), then a gather per piece."""
    terms = [t for ts, _ in pieces for t in ts] if len(pieces) > 1 else pieces[0][0]
    ids = dictionary.encode_many(terms)
    start = 0
    for ts, idx in pieces:
        yield ids[start : start + len(ts)][idx]
        start += len(ts)


def _encode_quads(
    pieces: list[tuple[list[str], np.ndarray]], dictionary: Dictionary
) -> tuple[np.ndarray, np.ndarray, list[str | None]]:
    """One batch of :func:`encoded_quads`: the subject, predicate and object terms encoded
    in the order they first occur (graph terms are not encoded), the graphs named."""
    terms = [t for ts, _ in pieces for t in ts] if len(pieces) > 1 else pieces[0][0]
    parts = []
    start = 0
    for ts, idx in pieces:
        shifted = idx + start
        shifted[idx[:, 3] < 0, 3] = -1
        parts.append(shifted)
        start += len(ts)
    idx = np.concatenate(parts) if len(parts) > 1 else parts[0]
    spo = idx[:, :3]
    used, first = np.unique(spo, return_index=True)
    order = used[np.argsort(first, kind="stable")]
    lut = np.zeros(len(terms), dtype=np.int64)
    lut[order] = dictionary.encode_many([terms[i] for i in order.tolist()])
    seen, inverse = np.unique(idx[:, 3], return_inverse=True)
    names: list[str | None] = []
    code: dict[str | None, int] = {}
    remap = np.empty(len(seen), dtype=np.int64)
    for k, i in enumerate(seen.tolist()):
        name = None if i < 0 else terms[i]
        remap[k] = code.setdefault(name, len(code))
        if remap[k] == len(names):
            names.append(name)
    return lut[spo], remap[inverse.reshape(-1)], names
