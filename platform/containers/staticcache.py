"""Static graph files parsed once per container process, not once per run.

A container builds a new :class:`~linkstream.containers.replica.RunReplica` -- a new
engine, a new dictionary, the run's static graph files loaded again -- for every run it
joins: every replay, and every take-over of the live service by a new leader (its run
is a new one) or restart after a lost ZooKeeper session.  Parsing the files is most of
that set-up (CityBench's 7.5 MB sensor repository, loaded as the default and a named
graph: ~0.5-0.8 s, more on a loaded host), and it lies on the path of a take-over: the
new leader replays its log only once the containers have said hello.

:func:`load_static` therefore keeps, per file (path, blank-node prefix, inode, size and
modification time: a changed file is parsed again), the graph's distinct terms in the
order they were first encoded and its triples as indexes into them.  A later run encodes
that term list into its fresh dictionary in one call: the same terms in the same order,
so the dictionary assigns the same ids and the triples equal a fresh parse.  Malformed
lines are reported at the first parse only.  Only the files of the latest run are kept.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable

import numpy as np

from linkstream.rdf.dictionary import Dictionary
from linkstream.rdf.static import load_graph

_Key = tuple[str, str, int, int, int]

#: file identity -> (distinct terms in first-encoded order, triples as indexes into them)
_CACHE: dict[_Key, tuple[list[str], np.ndarray]] = {}


def _key(path: str, bnode_prefix: str) -> _Key | None:
    try:
        st = os.stat(path)
    except OSError:
        return None  # load_graph reports it
    return (os.path.abspath(path), bnode_prefix, st.st_ino, st.st_size, st.st_mtime_ns)


def load_static(
    path: str, dictionary: Dictionary, bnode_prefix: str, log: Callable[[str], None] | None = None
) -> np.ndarray:
    """:func:`~linkstream.rdf.static.load_graph`, parsing each file once per process."""
    key = _key(path, bnode_prefix)
    hit = None if key is None else _CACHE.get(key)
    if hit is not None:
        terms, rows = hit
        if not len(rows):
            return np.empty((0, 3), dtype=np.int64)
        return dictionary.encode_many(terms)[rows]
    triples = load_graph(path, dictionary, bnode_prefix=bnode_prefix, log=log)
    if key is not None:
        flat = triples.reshape(-1)
        uniq, first, inverse = np.unique(flat, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")  # first-encoded order (a row's first term first)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        terms = dictionary.decode_many(uniq[order]) if len(uniq) else []
        _CACHE[key] = (terms, rank[inverse.reshape(-1)].reshape(-1, 3))
    return triples


def keep_only(files: Iterable[tuple[str, str]]) -> None:
    """Forgets every cached file but ``files`` (``(path, bnode prefix)``: the current run's)."""
    keep = {k for path, prefix in files if (k := _key(path, prefix)) is not None}
    for key in [k for k in _CACHE if k not in keep]:
        del _CACHE[key]
