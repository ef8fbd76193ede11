"""The persistent graph store: indexed static graphs plus absorbed "timeless" stream data.

Each graph is a base :class:`~linkstream.store.index.GraphIndex` (built from a store
directory's partitions, cached under ``DIR/index/<gdir>/`` and memory-mapped on the next
open) plus a short list of small *delta runs* holding the triples streams absorbed
since the last compaction (an LSM: a new batch's run is merged with the previous run
while that one is not much larger, so there are O(log n) runs).  All of it, together
with the stream names and the stable vector timestamp, sits in one immutable
:class:`_Version` object:

* ``absorb`` builds the next version off to the side and publishes it with one reference
  swap under a small lock -- a snapshot (one reference read) therefore sees a batch
  wholly or not at all, and its VTS always describes exactly what it sees;
* compaction merges the runs into a new base in a background thread; readers keep the
  arrays of the version they hold (copy-on-write), writers are held only for the final
  swap, and batches absorbed meanwhile stay in the new version's delta.

Absorbed batches are also appended to ``DIR/delta/log.bin`` (write-ahead) when the store
was opened from a directory, and replayed when it is reopened; :meth:`PersistentStore.checkpoint`
writes them into the partitions (with the stable VTS into the manifest) and empties the log.

Several processes may open one directory and absorb into it: the shared files are only
touched under the directory's ``flock`` (:mod:`~linkstream.store.storelock`), and a
process first applies the batches others have logged since it last looked (and reloads
the partitions if another process checkpointed), so the log, the partitions and every
process's view stay consistent and each batch is stored exactly once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from linkstream.rdf.dictionary import Dictionary
from linkstream.store.deltalog import DeltaLog
from linkstream.store.index import GraphIndex, unique_counts
from linkstream.store.indexcache import index_dir, open_index, save_index
from linkstream.store.layout import (
    GraphEntry,
    Manifest,
    check_files,
    open_store_dictionary,
    read_manifest,
    write_manifest,
    write_partitions,
)
from linkstream.store.layout import unique_rows as _unique_rows
from linkstream.store.protocol import RDF_TYPE
from linkstream.store.storelock import StoreLock, StoreLockedError

__all__ = ["PersistentSnapshot", "PersistentStore", "index_dir"]

_log = logging.getLogger(__name__)
_I64 = np.int64
_EMPTY3 = np.empty((0, 3), dtype=_I64)


def _e() -> np.ndarray:
    return np.empty(0, dtype=_I64)


@dataclass(frozen=True)
class _GraphState:
    """One graph in one version: base index, delta runs, and the raw batches of the delta."""

    base: GraphIndex
    runs: tuple[GraphIndex, ...] = ()
    # new triples of each batch since the last compaction, newest first, as an immutable
    # linked list ``(array, rest)`` so that appending one is O(1) and shares the rest
    pending: tuple | None = None
    pending_n: int = 0

    def pending_since(self, done: int) -> list[np.ndarray]:
        """The batches after the first ``done`` pending ones, oldest first."""
        out, node = [], self.pending
        for _ in range(self.pending_n - done):
            assert node is not None
            out.append(node[0])
            node = node[1]
        out.reverse()
        return out

    @property
    def parts(self) -> tuple[GraphIndex, ...]:
        return (self.base, *self.runs)

    @property
    def delta_size(self) -> int:
        return sum(r.size for r in self.runs)


@dataclass(frozen=True)
class _Version:
    graphs: Mapping[str | None, _GraphState]
    streams: tuple[str, ...]
    vts: tuple[int, ...]
    number: int = 0  # batches applied: the snapshot's scalar version


_NO_GRAPH = _GraphState(GraphIndex.empty())


class PersistentSnapshot:
    """An immutable view of a :class:`PersistentStore` version (satisfies ``Snapshot``).

    Attributes:
        vts: the stable vector timestamp of the view (one entry per stream).
        streams: the stream names, in VTS order.
        number: the scalarised snapshot: how many batches the store had applied (equal
            numbers on one store mean equal contents, e.g. for caching derived results).
    """

    def __init__(self, version: _Version) -> None:
        self._v = version
        self.vts: tuple[int, ...] = version.vts
        self.streams: tuple[str, ...] = version.streams
        self.number: int = version.number

    def stream_ts(self, stream: str) -> int | None:
        """The stable local timestamp of ``stream`` in this view (``None`` if unknown)."""
        try:
            return self.vts[self.streams.index(stream)]
        except ValueError:
            return None

    def graphs(self) -> list[str | None]:
        """The graphs of the view, default graph first."""
        return sorted(self._v.graphs, key=lambda g: (g is not None, g or ""))

    def _parts(self, graph: str | None) -> tuple[GraphIndex, ...]:
        return self._v.graphs.get(graph, _NO_GRAPH).parts

    def match(self, graph: str | None, s: int | None, p: int | None, o: int | None) -> np.ndarray:
        """Triples of ``graph`` matching the constants (``None`` = any), by binary search."""
        return _concat3([ix.match(s, p, o) for ix in self._parts(graph) if ix.size])

    def triples(self, graph: str | None) -> np.ndarray:
        """All triples of ``graph``."""
        return _concat3([ix.triples() for ix in self._parts(graph) if ix.size])

    def cardinality(self, graph: str | None, p: int | None) -> int:
        """Triples of ``graph`` with predicate ``p`` (all if ``None``)."""
        return sum(ix.cardinality(p) for ix in self._parts(graph))

    def partitions(self, graph: str | None) -> tuple[GraphIndex, ...]:
        """The indexes whose union is ``graph`` (a remote store's: its partitions, in order)."""
        return self._parts(graph)

    def contains(self, graph: str | None, triples: np.ndarray) -> np.ndarray:
        """Boolean mask: which rows of an ``(n, 3)`` array are triples of ``graph``."""
        t = np.asarray(triples, dtype=np.int64).reshape(-1, 3)
        found = np.zeros(len(t), dtype=bool)
        for ix in self._parts(graph):
            if ix.size and len(t):
                found |= ix.contains(t)
        return found

    def neighbours(
        self, graph: str | None, vertices: np.ndarray, p: int | None, direction: str
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(row, predicate, neighbour)`` of every vertex along ``direction``."""
        res = [ix.neighbours(vertices, p, direction) for ix in self._parts(graph) if ix.size]
        res = [r for r in res if len(r[0])]
        if not res:
            if direction not in ("out", "in"):
                raise ValueError(f"direction must be 'out' or 'in', got {direction!r}")
            return _e(), _e(), _e()
        if len(res) == 1:
            return res[0]
        rows, preds, nbrs = (np.concatenate(c) for c in zip(*res))
        order = np.argsort(rows, kind="stable")
        return rows[order], preds[order], nbrs[order]

    def subjects(self, graph: str | None, p: int) -> np.ndarray:
        """Predicate index: distinct subjects having ``p`` (sorted)."""
        return _union([ix.subjects(p) for ix in self._parts(graph)])

    def objects(self, graph: str | None, p: int) -> np.ndarray:
        """Predicate index: distinct objects of ``p`` (sorted)."""
        return _union([ix.objects(p) for ix in self._parts(graph)])

    def instances(self, graph: str | None, type_id: int) -> np.ndarray:
        """Type index: instances of ``type_id`` (sorted)."""
        return _union([ix.instances(type_id) for ix in self._parts(graph)])


class PersistentStore:
    """Indexed graphs with timeless absorption and VTS snapshots (see the module docstring).

    Use :meth:`open` for a store directory; the constructor takes graphs directly.

    Args:
        dictionary: the dictionary the ids belong to.
        graphs: ``{iri_or_None: (n, 3) int64 triples or a GraphIndex}``.
        store_dir: the store directory (enables the delta log), if any.
        compact_threshold: compact a graph once its delta holds more triples than
            ``max(compact_threshold, base size / 4)``.
        background_compaction: compact in a background thread (else inline in ``absorb``).
        fsync: fsync the delta log after each batch.
        vts: stable timestamps of streams already absorbed (``{stream: ts}``).
        lock_timeout: seconds to wait for another process holding the store directory's
            lock before :class:`~linkstream.store.storelock.StoreLockedError` (``None``:
            wait without limit, ``0``: fail at once).
        lock: the directory's lock, if the caller holds it already (:meth:`open`).
    """

    capabilities = frozenset({"persistent", "snapshots", "timeless"})

    def __init__(
        self,
        dictionary: Dictionary,
        graphs: Mapping[str | None, np.ndarray | GraphIndex] | None = None,
        *,
        store_dir: str | os.PathLike[str] | None = None,
        compact_threshold: int = 65536,
        background_compaction: bool = True,
        fsync: bool = False,
        vts: Mapping[str, int] | None = None,
        lock_timeout: float | None = 30.0,
        lock: StoreLock | None = None,
    ) -> None:
        self.dictionary = dictionary
        self.store_dir = Path(store_dir) if store_dir is not None else None
        self.manifest: Manifest | None = None
        self._own_dictionary = False
        self.rdf_type = int(dictionary.lookup_many([RDF_TYPE])[0])
        states = {
            g: _GraphState(ix if isinstance(ix, GraphIndex) else GraphIndex.build(ix, self.rdf_type))
            for g, ix in (graphs or {}).items()
        }
        vts = dict(vts or {})
        self._version = _Version(states, tuple(vts), tuple(int(x) for x in vts.values()))
        self._lock = threading.Lock()  # guards the version reference only
        self._write_lock = threading.RLock()  # one absorb / swap at a time
        # (re-entrant: a checkpoint's catch-up may apply enough batches to compact inside it)
        self._compact_lock = threading.RLock()
        self._compact_threshold = max(1, compact_threshold)
        self._background = background_compaction
        self._compactor: threading.Thread | None = None
        self.compactions = 0
        self._dlog: DeltaLog | None = None
        self._flock: StoreLock | None = None
        self._log_pos = 0  # the log is applied up to here (others may append after it)
        if self.store_dir is not None:
            self._flock = lock if lock is not None else StoreLock(self.store_dir, lock_timeout)
            with self._disk():
                self._dlog = DeltaLog(self.store_dir / "delta" / "log.bin", fsync=fsync)
                replayed = self._replay_log()
            if replayed:
                _log.info("%s: replayed %d absorbed batches", self.store_dir, replayed)

    @contextlib.contextmanager
    def _disk(self) -> Iterator[None]:
        """The store directory's cross-process lock (nothing for a store without one)."""
        if self._flock is None:
            yield
            return
        self._flock.acquire()
        try:
            yield
        finally:
            self._flock.release()

    def _replay_log(self) -> int:
        """Applies the log's records after ``_log_pos`` (caller holds the locks)."""
        assert self._dlog is not None
        recs, self._log_pos = self._dlog.read_from(self._log_pos)
        n = 0
        for b in recs:
            v = self._version
            if b.stream in v.streams and b.ts < v.vts[v.streams.index(b.stream)]:
                continue  # checkpointed already (a crash came before the log was emptied)
            self._apply(b.stream, b.ts, b.triples, b.graph, log=False)
            n += 1
        return n

    def _catch_up(self) -> None:
        """Applies what other processes logged since we looked (caller holds both locks).

        If one of them checkpointed (and so replaced the log), our base is stale: the
        partitions are read again -- they hold every batch logged before, ours too --
        and the new log is replayed from its start.
        """
        if self._dlog is None or self.store_dir is None:
            return
        if self._dlog.replaced():
            self._reload()
        n = self._replay_log()
        if n:
            _log.debug("%s: applied %d batches absorbed by other processes", self.store_dir, n)

    def _reload(self) -> None:
        assert self.store_dir is not None and self._dlog is not None
        m = read_manifest(self.store_dir)
        check_files(self.store_dir, m)
        self.rdf_type = int(self.dictionary.lookup_many([RDF_TYPE])[0])
        states = {g.iri: _GraphState(open_index(self.store_dir, m, g, self.rdf_type, True)) for g in m.graphs}
        vts = m.extra.get("vts")
        vts = {str(k): int(x) for k, x in vts.items()} if isinstance(vts, dict) else {}
        old = self._version
        nv = _Version(states, tuple(vts), tuple(vts.values()), old.number + 1)
        with self._lock:
            self._version = nv
        self.manifest = m
        self._dlog.reopen()
        self._log_pos = 0
        _log.info("%s: reloaded after another process's checkpoint", self.store_dir)

    def refresh(self) -> None:
        """Applies the batches other processes absorbed into the store directory meanwhile.

        Absorbing and checkpointing do this first anyway; a process that only reads calls
        it to see their batches.
        """
        with self._write_lock, self._disk():
            self._catch_up()

    # ------------------------------------------------------------------ opening

    @classmethod
    def open(
        cls,
        store_dir: str | os.PathLike[str],
        *,
        dictionary: Dictionary | None = None,
        cache_index: bool = True,
        **kwargs: object,
    ) -> PersistentStore:
        """Open a store directory, building (and caching) or memory-mapping its indexes.

        Args:
            store_dir: the directory (``layout.py`` format).
            dictionary: use this dictionary instead of the manifest's.
            cache_index: write built indexes under ``DIR/index/`` and reuse them later.
            **kwargs: passed to the constructor (``compact_threshold`` ...).
        """
        timeout = kwargs.pop("lock_timeout", 30.0)
        lock = StoreLock(store_dir, timeout)  # type: ignore[arg-type]  # lock_timeout is a float
        # the manifest, partitions, index cache and log must be read as one state
        with lock:
            manifest = read_manifest(store_dir)
            check_files(store_dir, manifest)
            dic = dictionary if dictionary is not None else open_store_dictionary(store_dir, manifest)
            rdf_type = int(dic.lookup_many([RDF_TYPE])[0])
            graphs = {
                g.iri: open_index(store_dir, manifest, g, rdf_type, cache_index) for g in manifest.graphs
            }
            vts = manifest.extra.get("vts")
            if isinstance(vts, dict):
                kwargs.setdefault("vts", {str(k): int(v) for k, v in vts.items()})
            store = cls(dic, graphs, store_dir=store_dir, lock=lock, **kwargs)  # type: ignore[arg-type]  # kwargs as the constructor
        store.manifest = manifest
        store._own_dictionary = dictionary is None
        return store

    # ------------------------------------------------------------------ reading

    def snapshot(self) -> PersistentSnapshot:
        """A consistent view: all batches up to the stable VTS, nothing newer (O(1))."""
        with self._lock:
            v = self._version
        return PersistentSnapshot(v)

    @property
    def vts(self) -> tuple[int, ...]:
        """The current stable vector timestamp."""
        return self._version.vts

    @property
    def streams(self) -> tuple[str, ...]:
        """Stream names in VTS order."""
        return self._version.streams

    def delta_size(self, graph: str | None = None) -> int:
        """Triples of ``graph`` absorbed but not yet compacted into its base."""
        return self._version.graphs.get(graph, _NO_GRAPH).delta_size

    # ------------------------------------------------------------------ absorbing

    def absorb(self, stream: str, ts: int, triples: np.ndarray, graph: str | None = None) -> None:
        """Apply one stream batch atomically (see ``AbsorbingStore.absorb``)."""
        t = np.asarray(triples)
        if t.ndim != 2 or t.shape[1] != 3:
            raise ValueError(f"expected an (n, 3) array of triples, got shape {t.shape}")
        if t.size and int(t.min()) <= 0:
            raise ValueError("triple ids must be positive")
        with self._write_lock, self._disk():
            self._catch_up()  # other processes' batches first: the log's order is the truth
            self._apply(stream, int(ts), t.astype(_I64, copy=False), graph, log=True)

    def _apply(self, stream: str, ts: int, t: np.ndarray, graph: str | None, *, log: bool) -> None:
        with self._write_lock:
            if not self.rdf_type:  # rdf:type may have been encoded since we opened
                self.rdf_type = int(self.dictionary.lookup_many([RDF_TYPE])[0])
            v = self._version
            streams, vts = list(v.streams), list(v.vts)
            if stream in streams:
                i = streams.index(stream)
                if ts < vts[i]:
                    raise ValueError(f"stream {stream!r}: timestamp {ts} is older than {vts[i]}")
            else:
                streams.append(stream)
                vts.append(-1)
                i = len(streams) - 1
            vts[i] = ts
            if log and self._dlog is not None:
                # write-ahead: logged before visible (absorb holds the directory's lock)
                self._log_pos = self._dlog.append(stream, ts, graph, t)
            graphs = dict(v.graphs)
            state = graphs.get(graph, _NO_GRAPH)
            new = _unique_rows(t)
            for ix in state.parts:
                # a subject-range test spares the lookups for runs of unrelated subjects
                if len(new) and ix.size and new[-1, 0] >= ix.out_v[0] and new[0, 0] <= ix.out_v[-1]:
                    new = new[~ix.contains(new)]
            if len(new):
                run = GraphIndex.build(new, self.rdf_type, distinct=True)
                runs = list(state.runs)
                # LSM merge: keep run sizes geometrically decreasing -> O(log n) runs
                while runs and runs[-1].size <= 2 * run.size:
                    merged = np.concatenate([runs.pop().triples(), run.triples()])
                    run = GraphIndex.build(merged, self.rdf_type)
                runs.append(run)
                state = replace(
                    state, runs=tuple(runs), pending=(new, state.pending), pending_n=state.pending_n + 1
                )
                graphs[graph] = state
            nv = _Version(graphs, tuple(streams), tuple(vts), v.number + 1)
            with self._lock:
                self._version = nv  # the publication point: batch and VTS become visible together
            if state.delta_size > max(self._compact_threshold, state.base.size // 4):
                self._schedule_compaction()

    # ------------------------------------------------------------------ compaction

    def _schedule_compaction(self) -> None:
        if not self._background:
            self.compact()
            return
        if self._compactor is not None and self._compactor.is_alive():
            return
        self._compactor = threading.Thread(target=self._compact_quietly, name="store-compaction", daemon=True)
        self._compactor.start()

    def _compact_quietly(self) -> None:
        try:
            self.compact()
        except StoreLockedError as e:  # the next absorb schedules it again
            _log.warning("compaction postponed: %s", e)

    def compact(self) -> int:
        """Merge every graph's delta into its base; returns the number of graphs compacted.

        Readers are never blocked; writers only during the final swap.  Batches absorbed
        while the new base is built stay in the delta of the version published after it.
        """
        with self._compact_lock:
            return self._compact_locked()

    def _compact_locked(self) -> int:
        # the caller holds _compact_lock (lock order: compact, then write)
        start = self._version
        built: dict[str | None, tuple[GraphIndex, int]] = {}
        for g, st in start.graphs.items():
            if st.runs:
                merged = np.concatenate([ix.triples() for ix in st.parts])
                built[g] = (GraphIndex.build(merged, self.rdf_type), st.pending_n)
        if not built:
            return 0
        with self._write_lock, self._disk():
            cur = self._version
            graphs = dict(cur.graphs)
            for g, (base, done) in built.items():
                rest = cur.graphs[g].pending_since(done)
                if rest:
                    run = GraphIndex.build(np.concatenate(rest), self.rdf_type)
                    pending: tuple | None = None
                    for arr in rest:
                        pending = (arr, pending)
                    graphs[g] = _GraphState(base, (run,), pending, len(rest))
                else:
                    graphs[g] = _GraphState(base)
            nv = _Version(graphs, cur.streams, cur.vts, cur.number)
            with self._lock:
                self._version = nv
        self.compactions += 1
        _log.debug("compacted %d graphs", len(built))
        return len(built)

    def checkpoint(self) -> None:
        """Write the absorbed triples into the store directory and truncate the delta log.

        Compacts, rewrites the partitions (and index cache) of every graph holding absorbed
        data, records the stable VTS in the manifest, then empties the log.  A crash at
        any point is harmless: replaying the old log onto the new partitions skips the
        triples they already hold.  Readers are not blocked; writers wait.
        """
        if self.store_dir is None or self.manifest is None:
            raise ValueError("checkpoint needs a store opened from a directory")
        with self._compact_lock:
            self._compact_locked()
            with self._write_lock, self._disk():
                self._catch_up()  # never drop batches other processes logged
                self._compact_locked()  # batches absorbed since the first compaction
                self._write_checkpoint()

    def _write_checkpoint(self) -> None:
        assert self.store_dir is not None and self.manifest is not None
        v = self._version
        m = self.manifest
        entries = {g.iri: g for g in m.graphs}
        for g, st in v.graphs.items():
            old = entries.get(g)
            if old is not None and st.base.size == old.triples:
                continue
            gdir = old.dir if old is not None else _free_graph_dir(self.store_dir, entries.values())
            new = write_partitions(self.store_dir, g, st.base.triples(), m.partitions, gdir=gdir)
            entries[g] = new
            save_index(self.store_dir, m, new, self.rdf_type, st.base)
        extra = {k: val for k, val in m.extra.items() if k != "vts"}
        write_manifest(
            self.store_dir,
            dictionary=m.dictionary,
            partitions=m.partitions,
            graphs=list(entries.values()),
            sources=m.sources,
            loader=m.loader,
            vts=dict(zip(v.streams, v.vts)),
            **extra,
        )
        self.manifest = read_manifest(self.store_dir)
        if self._dlog is not None:
            self._dlog.truncate()
            self._log_pos = 0

    def wait_compaction(self, timeout: float | None = None) -> None:
        """Wait for a running background compaction to finish."""
        t = self._compactor
        if t is not None:
            t.join(timeout)

    def close(self) -> None:
        """Finish compaction, close the delta log and the dictionary handle we opened."""
        self.wait_compaction()
        if self._dlog is not None:
            self._dlog.close()
        if self._own_dictionary:
            self._own_dictionary = False
            self.dictionary.close()


def _free_graph_dir(store_dir: Path, used: Iterable[GraphEntry]) -> str:
    taken = {e.dir for e in used}
    k = 0
    while f"g{k}" in taken or (store_dir / "graphs" / f"g{k}").exists():
        k += 1
    return f"g{k}"


def _concat3(parts: list[np.ndarray]) -> np.ndarray:
    if not parts:
        return _EMPTY3.copy()
    return parts[0] if len(parts) == 1 else np.concatenate(parts)


def _union(parts: list[np.ndarray]) -> np.ndarray:
    parts = [p for p in parts if len(p)]
    if not parts:
        return _e()
    return np.asarray(parts[0]) if len(parts) == 1 else unique_counts(np.concatenate(parts))[0]
