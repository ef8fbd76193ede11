"""The cache of built graph indexes in a store directory (``DIR/index/<graph dir>/``).

Building a :class:`~linkstream.store.index.GraphIndex` from a graph's partitions costs a
sort of every triple; the arrays are therefore saved next to the partitions (one ``.npy``
file each, replaced atomically) with a fingerprint of the partitions they came from, and
memory-mapped on the next open while the fingerprint still matches.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from linkstream.store.index import GraphIndex
from linkstream.store.layout import INDEX, GraphEntry, Manifest, partition_path, read_graph, tmp_suffix

_log = logging.getLogger(__name__)
_INDEX_FORMAT = 1


def _fingerprint(
    store_dir: str | os.PathLike[str], manifest: Manifest, entry: GraphEntry, rdf_type: int
) -> dict:
    parts = []
    for k in range(manifest.partitions):
        p = partition_path(store_dir, entry.dir, k)
        st = p.stat() if p.exists() else None
        parts.append([st.st_size, st.st_mtime_ns] if st else None)
    return {"format": _INDEX_FORMAT, "rdf_type": rdf_type, "triples": entry.triples, "partitions": parts}


def index_dir(store_dir: str | os.PathLike[str], entry: GraphEntry) -> Path:
    """Where the cached indexes of a graph live."""
    return Path(store_dir) / INDEX / entry.dir


def open_index(
    store_dir: str | os.PathLike[str], manifest: Manifest, entry: GraphEntry, rdf_type: int, cache: bool
) -> GraphIndex:
    """The index of graph ``entry``: memory-mapped from the cache if it is current, else built.

    Args:
        store_dir: The store directory.
        manifest: Its manifest.
        entry: The graph.
        rdf_type: The id of ``rdf:type`` (the type index depends on it).
        cache: Use the cache, and write a newly built index into it.
    """
    folder = index_dir(store_dir, entry)
    meta_path = folder / "meta.json"
    fp = _fingerprint(store_dir, manifest, entry, rdf_type)
    if cache and meta_path.exists():
        try:
            if json.loads(meta_path.read_text(encoding="utf-8")) == fp:
                return GraphIndex.load(folder, mmap=True)
        except (OSError, ValueError) as e:
            _log.warning("%s: unusable index cache, rebuilding: %s", folder, e)
    ix = GraphIndex.build(read_graph(store_dir, entry, manifest=manifest), rdf_type)
    if cache:
        save_index(store_dir, manifest, entry, rdf_type, ix)
    return ix


def save_index(
    store_dir: str | os.PathLike[str], manifest: Manifest, entry: GraphEntry, rdf_type: int, ix: GraphIndex
) -> None:
    """Writes ``ix`` into the cache of graph ``entry`` (a failure is only logged)."""
    folder = index_dir(store_dir, entry)
    meta_path = folder / "meta.json"
    try:
        meta_path.unlink(missing_ok=True)  # invalid while the arrays are rewritten
        ix.save(folder)
        tmp = folder / f"meta.json{tmp_suffix()}"
        tmp.write_text(json.dumps(_fingerprint(store_dir, manifest, entry, rdf_type)), encoding="utf-8")
        os.replace(tmp, meta_path)
    except OSError as e:
        _log.warning("%s: cannot cache indexes: %s", folder, e)


__all__ = ["index_dir", "open_index", "save_index"]
