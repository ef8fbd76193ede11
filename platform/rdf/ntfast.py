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
    scanner = _native
    if scanner is None:
        raise RuntimeError("the compiled N-Triples scanner is not available")
    parser = parser_for(bnode_prefix)
    prefix = bnode_prefix.encode("utf-8")
    # a memory dictionary is filled by the scanner itself (ids as its encode gives them)
    ids, all_terms = dictionary.tables() if isinstance(dictionary, MemoryDictionary) else (None, None)
    # pieces of a batch: (terms, idx) of the scanner, or (terms, None) of Python-read lines
    pieces: list[tuple[list[str], np.ndarray | None]] = []
    n_terms = 0
    lineno = 0
    with open(path, "rb") as f:
        for _, data in line_blocks(f):
            pos = 0
            while pos < len(data):
                terms, idx, pos, lines, stopped = scanner.scan(
                    data, pos, prefix, False, parser._langs, ids, all_terms
                )
                lineno += lines
                if terms is None:  # ids, in the dictionary already
                    if idx:
                        yield np.frombuffer(idx, dtype=np.int64).reshape(-1, 3)
                elif terms:
                    pieces.append((terms, np.frombuffer(idx, dtype=np.int64).reshape(-1, 3)))
                    n_terms += len(terms)
                if stopped:  # one line for the Python parser
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
                        pieces.append(([t for q in quads for t in q[:3]], None))
                        n_terms += 3 * len(quads)
                        if ids is not None:  # in order with the scanner's ids
                            yield from _encode(pieces, dictionary)
                            pieces, n_terms = [], 0
                if n_terms >= BATCH_TERMS:
                    yield from _encode(pieces, dictionary)
                    pieces, n_terms = [], 0
    if pieces:
        yield from _encode(pieces, dictionary)


def _encode(
    pieces: list[tuple[list[str], np.ndarray | None]], dictionary: Dictionary
) -> Iterator[np.ndarray]:
    """One ``encode_many`` over the terms of every piece (first occurrences in file order, so
    new terms get the ids the line-by-line path gives them), then a gather per piece."""
    terms = [t for ts, _ in pieces for t in ts] if len(pieces) > 1 else pieces[0][0]
    ids = dictionary.encode_many(terms)
    start = 0
    for ts, idx in pieces:
        mine = ids[start : start + len(ts)]
        start += len(ts)
        yield mine.reshape(-1, 3) if idx is None else mine[idx]
