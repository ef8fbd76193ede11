"""Pure-Python loading of RDF files into a store directory (``linkstream load`` without Spark).

N-Triples / N-Quads are read by the compiled scanner (:mod:`linkstream.rdf.ntfast`; the
fast Python line parser without it); a quad goes to its named graph
(unless ``default_graph``), a triple to the default graph.  Other formats (Turtle,
RDF/XML, JSON-LD, TriG ...) go through :func:`linkstream.rdf.static.load_graph` into the
default graph.  Blank-node labels of the ``k``-th input file get the prefix ``s{k}_``
(``_:b1`` -> ``_:s0_b1``), as the replay CLI does for static files, so blank nodes of
different files stay distinct; the Spark loader uses the same rule.  Malformed lines
are reported through ``log`` and skipped.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from linkstream.rdf import ntfast
from linkstream.rdf.dictionary import Dictionary, open_dictionary
from linkstream.rdf.static import LINE_FORMATS, RDFLIB_FORMATS, line_quads, load_graph
from linkstream.store.layout import (
    DEFAULT_DICTIONARY,
    GRAPHS,
    INDEX,
    MANIFEST,
    GraphEntry,
    GraphWriter,
    resolve_dictionary_uri,
    write_manifest,
)

_log = logging.getLogger(__name__)
_CHUNK = 65536
_PROGRESS_EVERY = 500_000
RDF_SUFFIXES = tuple(LINE_FORMATS) + tuple(RDFLIB_FORMATS)


def expand_inputs(paths: Sequence[str | os.PathLike[str]]) -> list[str]:
    """Files to load: each path itself, or the RDF files of a directory (sorted, recursive).

    Raises:
        FileNotFoundError: a path does not exist.
        ValueError: a file is named twice (itself twice, or also inside a given folder): it
            would be loaded twice.
    """
    out: list[str] = []
    for p in paths:
        path = Path(p)
        if path.is_dir():
            found = sorted(
                str(f) for f in path.rglob("*") if f.is_file() and f.name.lower().endswith(RDF_SUFFIXES)
            )
            out.extend(found)
        elif path.exists():
            out.append(str(path))
        else:
            raise FileNotFoundError(f"no such file or directory: {p}")
    seen: dict[str, str] = {}
    for f in out:
        real = os.path.realpath(f)
        if real in seen:
            also = "" if seen[real] == f else f" (also as {seen[real]})"
            raise ValueError(f"{f}: named twice in the inputs{also}; give each file once")
        seen[real] = f
    return out


def graph_name(term: str) -> str:
    """Store name of a graph term: an IRI without its brackets; a blank node as written."""
    return term[1:-1] if term.startswith("<") and term.endswith(">") else term


def load_store(
    store_dir: str | os.PathLike[str],
    files: Sequence[str | os.PathLike[str]],
    dictionary_uri: str | None = None,
    partitions: int = 8,
    default_graph: bool = False,
    progress: Callable[[str], None] | None = None,
    *,
    dictionary: Dictionary | None = None,
    overwrite: bool = False,
    log: Callable[[str], None] | None = None,
) -> list[GraphEntry]:
    """Load RDF files into a new store directory (``layout.py`` format).

    Args:
        store_dir: the directory (created if missing).
        files: RDF files or directories of them.
        dictionary_uri: dictionary URI recorded in the manifest (default ``lmdb:dict``,
            i.e. ``DIR/dict``); relative ``lmdb:`` paths are relative to ``store_dir``.
        partitions: subject-hash partitions per graph.
        default_graph: put quads into the default graph instead of their named graphs.
        progress: receives human-readable progress lines.
        dictionary: an already open dictionary to encode with (its URI must still be
            given as ``dictionary_uri`` for the manifest).
        overwrite: replace an existing store's graphs (the dictionary is kept: ids stay).
        log: receives ``PATH:LINE: rejected: reason`` for malformed lines.

    Returns:
        The manifest entries of the written graphs, default graph first.

    Raises:
        FileExistsError: the directory already holds a store and ``overwrite`` is false.
        FileNotFoundError: an input does not exist.
        ValueError: an input has an unknown format or cannot be parsed.
    """
    root = Path(store_dir)
    say = progress or (lambda _m: None)
    if (root / MANIFEST).exists():
        if not overwrite:
            raise FileExistsError(f"{root} already holds a store (use overwrite)")
        for sub in (GRAPHS, INDEX, "delta"):
            shutil.rmtree(root / sub, ignore_errors=True)
        (root / MANIFEST).unlink()
    inputs = expand_inputs(files)
    for f in inputs:
        if not f.lower().endswith(RDF_SUFFIXES):
            raise ValueError(f"unknown RDF format for {f!r} (suffixes: {', '.join(RDF_SUFFIXES)})")
    root.mkdir(parents=True, exist_ok=True)
    uri = dictionary_uri or DEFAULT_DICTIONARY
    own_dict = dictionary is None
    dic = dictionary if dictionary is not None else open_dictionary(resolve_dictionary_uri(root, uri))
    writers: dict[str | None, GraphWriter] = {}
    reject = log or _log.warning

    def writer(g: str | None) -> GraphWriter:
        w = writers.get(g)
        if w is None:
            w = writers[g] = GraphWriter(root, g, partitions, gdir=f"g{len(writers)}")
        return w

    try:
        total = 0
        for k, path in enumerate(inputs):
            prefix = f"s{k}_"
            before = total
            if path.lower().endswith(LINE_FORMATS):
                for g, chunk in _line_chunks(path, prefix, dic, default_graph, reject):
                    writer(g).add(chunk)
                    total += len(chunk)
                    if total // _PROGRESS_EVERY > (total - len(chunk)) // _PROGRESS_EVERY:
                        say(f"{path}: {total - before:,} statements ({total:,} in all)")
            else:
                t = load_graph(path, dic, bnode_prefix=prefix, log=reject)
                writer(None).add(t)
                total += len(t)
            say(f"loaded {path}: {total - before:,} statements")
        say(f"writing {len(writers)} graph(s) in {partitions} partitions ...")
        entries = [w.finish() for w in writers.values()]
    except BaseException:
        for w in writers.values():
            w.abort()
        raise
    finally:
        if own_dict:
            dic.close()
    write_manifest(
        root, dictionary=uri, partitions=partitions, graphs=entries, sources=inputs, loader="python"
    )
    n = sum(e.triples for e in entries)
    say(f"store {root}: {n:,} distinct triples in {len(entries)} graph(s)")
    entries.sort(key=lambda e: (e.iri is not None, e.iri or ""))
    return entries


def _line_chunks(
    path: str, prefix: str, dic: Dictionary, default_graph: bool, reject: Callable[[str], None]
) -> Iterator[tuple[str | None, np.ndarray]]:
    """Encoded ``(graph, (n, 3) triples)`` chunks of an N-Triples / N-Quads file."""
    if ntfast.native():  # lines scanned in C, terms encoded per batch
        for triples, graphs, names in ntfast.encoded_quads(path, dic, prefix, reject):
            if default_graph or len(names) == 1:
                yield (None if default_graph or names[0] is None else graph_name(names[0])), triples
                continue
            order = np.argsort(graphs, kind="stable")
            bounds = np.searchsorted(graphs[order], np.arange(len(names) + 1))
            for k, g in enumerate(names):
                yield (None if g is None else graph_name(g)), triples[order[bounds[k] : bounds[k + 1]]]
        return
    buf: dict[str | None, list[tuple[str, str, str]]] = {}
    pending = 0
    for s, p, o, g in line_quads(path, prefix, reject):
        key = None if default_graph or g is None else graph_name(g)
        buf.setdefault(key, []).append((s, p, o))
        pending += 1
        if pending >= _CHUNK:
            yield from _encode(buf, dic)
            buf, pending = {}, 0
    yield from _encode(buf, dic)


def _encode(
    buf: dict[str | None, list[tuple[str, str, str]]], dic: Dictionary
) -> Iterator[tuple[str | None, np.ndarray]]:
    for g, rows in buf.items():
        uniq = list(dict.fromkeys(rows))
        yield g, dic.encode_many([t for tr in uniq for t in tr]).reshape(-1, 3)
