"""Loading static RDF graphs into dictionary-encoded triple arrays.

N-Triples and N-Quads go through the compiled scanner of :mod:`linkstream.rdf.ntfast` where
it was built, and the fast line parser of :mod:`linkstream.rdf.ntriples` for the lines it
leaves (malformed lines are reported and skipped, as in stream files; the graph of a quad
is ignored); Turtle, N3, RDF/XML, JSON-LD and TriG go through rdflib, whose terms are
turned into the N-Triples strings (lexical forms as written) of :mod:`linkstream.rdf.terms`.
"""

from __future__ import annotations

import errno
import logging
import os
import warnings
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from operator import itemgetter

import numpy as np

from linkstream.rdf import ntfast
from linkstream.rdf.dictionary import Dictionary
from linkstream.rdf.ntriples import LINE_STRIP, NTriplesError, parser_for, utf8_error
from linkstream.rdf.terms import IRI, RDF_LANGSTRING, XSD_STRING, BNode, Literal, Term

_log = logging.getLogger(__name__)

#: file suffix -> rdflib parser name (N-Triples / N-Quads are parsed natively)
RDFLIB_FORMATS = {
    ".ttl": "turtle",
    ".turtle": "turtle",
    ".n3": "n3",
    ".rdf": "xml",
    ".xml": "xml",
    ".owl": "xml",
    ".jsonld": "json-ld",
    ".json-ld": "json-ld",
    ".json": "json-ld",
    ".trig": "trig",
}
LINE_FORMATS = (".nt", ".ntriples", ".nq", ".nquads")
_QUAD_FORMATS = ("trig", "json-ld")
_CHUNK = 65536
_TRIPLE = itemgetter(0, 1, 2)


def reusable_key(path: str) -> tuple | None:
    """A key under which the triples :func:`load_graph` reads from ``path`` may be reused
    for another binding of the same file, or ``None`` when they may not: only N-Triples /
    N-Quads files without blank node labels (each load gives blank nodes a prefix of its
    own, so two loads of a file with ``_:`` labels differ)."""
    if not path.lower().endswith(LINE_FORMATS):
        return None
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            if b"_:" in f.read():
                return None
    except OSError:
        return None
    return (os.path.realpath(path), st.st_size, st.st_mtime_ns)


def load_graph(
    path: str,
    dictionary: Dictionary,
    *,
    bnode_prefix: str = "",
    log: Callable[[str], None] | None = None,
) -> np.ndarray:
    """Load an RDF file as an ``(n, 3)`` int64 array of deduplicated triples (first-seen order).

    Args:
        path: the file; its suffix gives the format (``.nt``, ``.nq``, ``.ttl``, ``.n3``,
            ``.rdf``/``.xml``/``.owl``, ``.jsonld``/``.json``, ``.trig``).
        dictionary: encodes the terms.
        bnode_prefix: prepended to blank-node labels of this file.
        log: receives ``PATH:LINE: rejected: reason`` for each malformed line of an
            N-Triples/N-Quads file (default: this module's logger).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: unknown suffix, or an rdflib format that fails to parse.
    """
    if not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "RDF file not found", path)
    if os.path.isdir(path):
        raise ValueError(f"{path!r} is a directory, not an RDF file")
    low = path.lower()
    if low.endswith(LINE_FORMATS):
        if ntfast.native():  # lines scanned in C, terms encoded per batch
            chunks = ntfast.encoded_triples(path, dictionary, bnode_prefix, log or _log.warning)
        else:
            quads = line_quads(path, bnode_prefix, log or _log.warning)
            chunks = _encode_chunks(map(_TRIPLE, quads), dictionary)
    else:
        fmt = next((f for suffix, f in RDFLIB_FORMATS.items() if low.endswith(suffix)), None)
        if fmt is None:
            raise ValueError(
                f"unknown RDF format for {path!r} (suffixes: {', '.join(LINE_FORMATS)}, "
                f"{', '.join(RDFLIB_FORMATS)})"
            )
        chunks = _encode_chunks(_rdflib_triples(path, fmt, bnode_prefix), dictionary)
    parts = list(chunks)
    if not parts:
        return np.empty((0, 3), dtype=np.int64)
    return dedup_triples(np.concatenate(parts))


def dedup_triples(triples: np.ndarray) -> np.ndarray:
    """Rows of an ``(n, 3)`` int64 array without repeats, in first-seen order."""
    if len(triples) < 2:
        return np.ascontiguousarray(triples, dtype=np.int64)
    triples = np.ascontiguousarray(triples, dtype=np.int64)
    if triples.min() >= 0 and triples.max() < (1 << 21):
        # ids of up to 21 bits: one int64 key per row and a 1-d unique, which also keeps
        # the first occurrence of each (1 M rows: 0.11 s, against 1.12 s for axis=0)
        keys = (triples[:, 0] << 42) | (triples[:, 1] << 21) | triples[:, 2]
        _, first = np.unique(keys, return_index=True)
    else:
        _, first = np.unique(triples, axis=0, return_index=True)
    if len(first) == len(triples):
        return triples
    return triples[np.sort(first)]


def _encode_chunks(triples: Iterable[tuple[str, str, str]], dictionary: Dictionary) -> Iterator[np.ndarray]:
    it = iter(triples)
    while True:
        chunk = list(islice(it, _CHUNK))
        if not chunk:
            return
        # dedup strings first: static files repeat little, but this keeps encode batches tight
        uniq = list(dict.fromkeys(chunk))
        terms = [term for tr in uniq for term in tr]
        yield dictionary.encode_many(terms).reshape(-1, 3)


def line_quads(
    path: str, bnode_prefix: str, log: Callable[[str], None]
) -> Iterator[tuple[str, str, str, str | None]]:
    """The statements of an N-Triples / N-Quads file; malformed lines are logged and skipped."""
    parser = parser_for(bnode_prefix)
    statement = parser.parse_statement
    # utf-8-sig: a byte order mark at the start of the file is not part of the first line
    with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="\n") as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.strip(LINE_STRIP)
            if not line or line[0] == "#":
                continue
            try:  # parse_file_line, inlined for the common line (one statement, no CR)
                if "\r" in line:
                    quads = parser.parse_statements(line)
                else:
                    q = statement(line)
                    if q is not None:
                        yield q
                    continue
            except NTriplesError as e:
                log("%s:%d: rejected: %s" % (path, lineno, utf8_error(raw) or e))
                continue
            yield from quads


def _rdflib_triples(path: str, fmt: str, bnode_prefix: str) -> Iterator[tuple[str, str, str]]:
    import rdflib

    # formats that may name graphs are read into a Dataset (graphs are then ignored)
    graph: rdflib.Graph = rdflib.Dataset() if fmt in _QUAD_FORMATS else rdflib.Graph()
    # keep lexical forms as written (rdflib would re-serialise numbers, dateTime values ...)
    saved = rdflib.NORMALIZE_LITERALS
    rdflib.NORMALIZE_LITERALS = False
    try:
        with warnings.catch_warnings():
            # rdflib's own parsers use its deprecated ConjunctiveGraph API internally
            warnings.simplefilter("ignore", DeprecationWarning)
            graph.parse(path, format=fmt)
            triples = (
                [(s, p, o) for s, p, o, _g in graph.quads((None, None, None, None))]
                if isinstance(graph, rdflib.Dataset)
                else list(graph)
            )
    except Exception as e:  # rdflib raises parser-specific exception types
        reason = " ".join(str(e).split())  # rdflib's messages span several lines
        raise ValueError(f"{path}: cannot parse as {fmt}: {reason}") from e
    finally:
        rdflib.NORMALIZE_LITERALS = saved
    for s, p, o in triples:
        yield (
            rdflib_term_str(s, bnode_prefix),
            rdflib_term_str(p, bnode_prefix),
            rdflib_term_str(o, bnode_prefix),
        )


def rdflib_term_str(term: object, bnode_prefix: str = "") -> str:
    """The N-Triples string of an rdflib term (IRI, blank node or literal), lexical form as written."""
    import rdflib

    t: Term
    if isinstance(term, rdflib.URIRef):
        t = IRI(str(term))
    elif isinstance(term, rdflib.BNode):
        t = BNode(bnode_prefix + str(term))
    elif isinstance(term, rdflib.Literal):
        if term.language:
            t = Literal(str(term), RDF_LANGSTRING, term.language.lower())
        else:
            t = Literal(str(term), str(term.datatype) if term.datatype else XSD_STRING)
    else:
        raise ValueError(f"unsupported rdflib term {term!r}")
    return t.n3()
