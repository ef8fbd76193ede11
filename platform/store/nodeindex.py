"""The index layout a store node serves: built once per partition, kept on disk, memory-mapped.

A store node (:mod:`linkstream.store.node`) serves one
:class:`~linkstream.store.index.GraphIndex` per (graph, partition).  Building it sorts
every triple of the partition, so the arrays are written next to the partitions::

    DIR/index/parts/<gdir>/part-00000-<key>/   <array>.npy ... meta.json

where ``<key>`` is a digest of what the index was built from (:func:`cache_key`): the
partition file's record in ``store.json`` (size and CRC-32, which every checkpoint
rewrites; size, mtime and inode for stores without records), the dictionary id of
rdf:type and a digest of the absorbed rows of that partition.  A folder is complete once
its ``meta.json`` (written last, after every array) exists and holds the same key; it is
built in a temporary folder and renamed into place, so two nodes starting on one
directory never see each other's half-written arrays, and a stale folder is simply never
named again (it is removed after a newer one is written).  On the next start every
current partition is memory-mapped (read-only) instead of being rebuilt.

Absorbed data.  ``linkstream run --store DIR --absorb S`` (any
:class:`~linkstream.store.persistent.PersistentStore` absorbing into ``DIR``) appends
each batch to ``DIR/delta/log.bin`` before it becomes visible, and a checkpoint writes
the log into the partitions.  A store node reads, under the directory's lock, the
manifest, the log and the partition files as one state (:func:`read_state`): the batches
logged and not yet checkpointed are split by subject into the ``s % P`` partitions and
served merged into them (graphs that only absorbed batches created are served too).  So
a node serves exactly what ``linkstream sparql --store DIR`` sees at the moment the node
starts; batches absorbed later are served by a node (re)started after them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from linkstream.store.deltalog import LOG_PATH, read_batches
from linkstream.store.index import GraphIndex
from linkstream.store.layout import (
    INDEX,
    Manifest,
    check_files,
    partition_of,
    partition_path,
    read_manifest,
    tmp_suffix,
    unique_rows,
)
from linkstream.store.storelock import StoreLock, StoreLockedError

log = logging.getLogger(__name__)

#: the folder (under ``DIR/index``) of the per-partition indexes store nodes serve
PARTS = "parts"
_FORMAT = 1
_META = "meta.json"
_EMPTY3 = np.empty((0, 3), dtype=np.int64)


@dataclass(frozen=True)
class ServedGraph:
    """One graph as a store node serves it.

    Attributes:
        iri: The graph's IRI (``None``: the default graph).
        dir: Its folder (region names start with it); ``absorbed-<digest>`` for a graph
            only absorbed batches created.
        triples: Rows of the manifest plus absorbed rows (an upper bound when absorbed
            rows repeat rows of partitions this node does not hold).
    """

    iri: str | None
    dir: str
    triples: int


@dataclass(frozen=True)
class StoreState:
    """A store directory as read in one go under its lock (see :func:`read_state`).

    Attributes:
        manifest: ``store.json``.
        graphs: Every graph served (manifest graphs first, then absorbed-only graphs).
        absorbed: Graph IRI -> the distinct absorbed rows not yet checkpointed.
        absorbed_digest: Digest of ``absorbed`` (``""``: nothing absorbed).
        partitions: ``(gdir, k)`` -> the partition's rows (memory-mapped), for the
            partitions asked for.
        records: ``(gdir, k)`` -> what identifies the partition file's content.
    """

    manifest: Manifest
    graphs: tuple[ServedGraph, ...]
    absorbed: dict[str | None, np.ndarray]
    absorbed_digest: str
    partitions: dict[tuple[str, int], np.ndarray]
    records: dict[tuple[str, int], object]


def _digest(*parts: bytes) -> str:
    h = hashlib.blake2b(digest_size=12)
    for p in parts:
        h.update(len(p).to_bytes(8, "little"))
        h.update(p)
    return h.hexdigest()


def _absorbed(store_dir: Path, manifest: Manifest) -> dict[str | None, np.ndarray]:
    """The log's batches a checkpoint has not written yet, per graph, as distinct rows."""
    path = store_dir / LOG_PATH
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    vts = manifest.extra.get("vts")
    done = {str(k): int(v) for k, v in vts.items()} if isinstance(vts, dict) else {}
    per: dict[str | None, list[np.ndarray]] = {}
    for b in read_batches(data):
        # as PersistentStore replays: older than the checkpointed VTS = in the partitions
        if b.stream in done and b.ts < done[b.stream]:
            continue
        if len(b.triples):
            per.setdefault(b.graph, []).append(b.triples)
    return {g: unique_rows(np.concatenate(ts)) for g, ts in per.items()}


def _record(store_dir: Path, manifest: Manifest, path: Path) -> object:
    files = manifest.extra.get("files")
    rel = path.relative_to(store_dir).as_posix()
    if isinstance(files, dict) and isinstance(files.get(rel), dict):
        rec = files[rel]
        return {"size": rec.get("size"), "crc32": rec.get("crc32")}
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ino": st.st_ino}


def read_state(
    store_dir: str | os.PathLike[str], partitions: Iterable[int] | None = None, lock_timeout: float = 30.0
) -> StoreState:
    """Reads the manifest, the absorbed batches and the partition files as one state.

    Held under the directory's lock (:mod:`~linkstream.store.storelock`) so that a
    checkpoint of a running ``run --absorb`` is wholly before or after; the partition
    files are memory-mapped inside it (a later checkpoint replaces them by new files and
    leaves these mappings intact).  A directory whose lock cannot be created (read-only)
    is read without it.

    Raises:
        OSError, ValueError: Not a readable store (``StoreError`` for damaged files).
    """
    root = Path(store_dir)
    lock = StoreLock(root, lock_timeout)
    locked = False
    try:
        lock.acquire()
        locked = True
    except StoreLockedError:
        raise
    except OSError as e:
        log.warning("%s: cannot take the store's lock (%s); reading without it", root, e.strerror or e)
    try:
        m = read_manifest(root)
        check_files(root, m)
        held = range(m.partitions) if partitions is None else sorted(set(partitions))
        absorbed = _absorbed(root, m)
        graphs = list(m.graphs)
        served = [ServedGraph(g.iri, g.dir, g.triples + len(absorbed.get(g.iri, _EMPTY3))) for g in graphs]
        known = {g.iri for g in graphs}
        for iri in sorted((g for g in absorbed if g not in known), key=lambda g: (g is not None, g or "")):
            served.append(ServedGraph(iri, "absorbed-" + _digest(str(iri).encode())[:12], len(absorbed[iri])))
        parts: dict[tuple[str, int], np.ndarray] = {}
        records: dict[tuple[str, int], object] = {}
        for g in graphs:
            for k in held:
                path = partition_path(root, g.dir, k)
                records[(g.dir, k)] = _record(root, m, path)
                parts[(g.dir, k)] = _load_partition(path)
    finally:
        if locked:
            lock.release()
    digest = ""
    if absorbed:
        digest = _digest(
            *(
                b
                for iri in sorted(absorbed, key=lambda g: (g is not None, g or ""))
                for b in (str(iri).encode(), absorbed[iri].tobytes())
            )
        )
    return StoreState(m, tuple(served), absorbed, digest, parts, records)


def _load_partition(path: Path) -> np.ndarray:
    if not path.exists():
        return _EMPTY3
    try:
        t = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as e:
        raise ValueError(f"{path}: cannot read the partition: {e}") from None
    if t.dtype != np.int64 or t.ndim != 2 or t.shape[1] != 3:
        raise ValueError(f"{path}: expected an (n, 3) int64 array, got {t.dtype} {t.shape}")
    return t


def cache_key(record: object, rdf_type: int, absorbed: np.ndarray) -> dict[str, object]:
    """What the index of one partition is built from (its cache folder's identity)."""
    return {
        "format": _FORMAT,
        "partition": record,
        "rdf_type": int(rdf_type),
        "absorbed": _digest(np.ascontiguousarray(absorbed).tobytes()) if len(absorbed) else None,
    }


def parts_dir(store_dir: str | os.PathLike[str], gdir: str) -> Path:
    """Where the served indexes of graph folder ``gdir`` live."""
    return Path(store_dir) / INDEX / PARTS / gdir


def _load_cached(folder: Path, key: dict[str, object]) -> GraphIndex | None:
    try:
        meta = json.loads((folder / _META).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        log.warning("%s: unusable index (%s); rebuilding", folder, e)
        return None
    if not isinstance(meta, dict) or meta.get("key") != key:
        return None
    try:
        ix = GraphIndex.load(folder, mmap=True)
    except (OSError, ValueError) as e:
        log.warning("%s: unusable index (%s); rebuilding", folder, e)
        return None
    lengths = meta.get("lengths")
    if lengths != {f.name: len(getattr(ix, f.name)) for f in fields(ix)}:
        log.warning("%s: index arrays do not match their meta.json; rebuilding", folder)
        return None
    return ix


def _save(folder: Path, key: dict[str, object], ix: GraphIndex) -> GraphIndex:
    """Writes ``ix`` as ``folder`` (via a temporary folder) and returns it memory-mapped."""
    tmp = folder.with_name(folder.name + tmp_suffix())
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        ix.save(tmp)
        lengths = {f.name: len(getattr(ix, f.name)) for f in fields(ix)}
        (tmp / _META).write_text(json.dumps({"key": key, "lengths": lengths}), encoding="utf-8")
        try:
            os.rename(tmp, folder)
        except OSError:  # another node wrote the same folder first: it holds the same arrays
            shutil.rmtree(tmp, ignore_errors=True)
        cached = _load_cached(folder, key)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        log.warning("%s: cannot keep the index on disk (%s); serving it from memory", folder, e.strerror or e)
        return ix
    prefix = folder.name.rsplit("-", 1)[0] + "-"
    for old in folder.parent.glob(prefix + "*"):
        if old != folder and old.is_dir() and ".tmp-" not in old.name:
            shutil.rmtree(old, ignore_errors=True)  # stale: a mapping of it stays valid
    return cached if cached is not None else ix


@dataclass
class BuildStats:
    """How the served indexes were obtained at start (reported by the node)."""

    mapped: int = 0
    built: int = 0


def partition_index(
    store_dir: str | os.PathLike[str],
    state: StoreState,
    gdir: str,
    iri: str | None,
    k: int,
    rdf_type: int,
    stats: BuildStats | None = None,
    cache: bool = True,
) -> GraphIndex:
    """The index of partition ``k`` of graph ``gdir`` with its absorbed rows merged in:
    memory-mapped from ``DIR/index/parts`` when current, else built (and kept there)."""
    m = state.manifest
    base = state.partitions.get((gdir, k), _EMPTY3)
    extra = state.absorbed.get(iri, _EMPTY3)
    if len(extra):
        extra = extra[partition_of(extra[:, 0], m.partitions) == k]
    key = cache_key(state.records.get((gdir, k)), rdf_type, extra)
    folder = parts_dir(store_dir, gdir) / f"part-{k:05d}-{_digest(json.dumps(key, sort_keys=True).encode())}"
    if cache:
        ix = _load_cached(folder, key)
        if ix is not None:
            if stats is not None:
                stats.mapped += 1
            return ix
    rows = np.concatenate([base, extra]) if len(extra) else base
    ix = GraphIndex.build(rows, rdf_type)
    if stats is not None:
        stats.built += 1
    return _save(folder, key, ix) if cache else ix


__all__ = [
    "BuildStats",
    "ServedGraph",
    "StoreState",
    "cache_key",
    "partition_index",
    "parts_dir",
    "read_state",
]
