"""Reading a store from store nodes: one-sided slice reads, a bounded cache, replica failover.

:class:`RemoteStore` follows the store nodes advertised under ``<root>/storenodes`` in
ZooKeeper (:mod:`linkstream.store.node`), or a fixed list of advertisements, and opens
one region reader per node with the best transport between the two peers
(:func:`~linkstream.rdma.regions.best_transport`: RDMA where both sides have it, shared
memory on the same host, TCP otherwise).

Every index array of every partition is a :class:`RemoteArray`: a duck-typed, read-only
stand-in for a numpy array that supports exactly what
:class:`~linkstream.store.index.GraphIndex` does with its arrays -- ``len``, integer,
slice and integer-array indexing, and ``searchsorted`` (``np.searchsorted`` dispatches
to it).  Reads go by *blocks* of ``BLOCK`` elements through one :class:`BlockCache` (LRU
by bytes, shared by all arrays and keyed independently of the node, so a replica serves
what a dead node left uncached); a binary search reads the array's fence region (every
``BLOCK``-th element) and then only the blocks the searched values fall in.  So a
``GraphIndex`` built from remote arrays answers ``match`` / ``neighbours`` / ``subjects``
... with the very code the embedded store runs, and :meth:`RemoteStore.snapshot` is a
:class:`~linkstream.store.persistent.PersistentSnapshot` over the partitions (the union
of the partitions of a graph is the graph, as the delta runs of a persistent graph are).

A read from a node that fails (a TCP timeout, a vanished shared-memory segment) is
retried on another node holding the partition, and the failed node is skipped for
``RETRY_DEAD_S`` seconds; a node whose znode vanished is dropped at once.  Nodes whose store fingerprint differs from the first one
seen are refused (they serve other data).

Security: a node advertising a CURVE public key (``curve``) is read over TCP (regions and
dictionary) as a CURVE client; the keys come from ``curve_client(server_public, peer)``
-- the cluster layer's ``Security.client`` -- passed down by the caller.  Without it a
secure node's TCP transport cannot be read (one clear error); shared memory needs none.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import fields
from typing import Any

import numpy as np

from linkstream.rdf.dictionary import Dictionary, open_dictionary
from linkstream.rdma.curve import CurveSpec
from linkstream.rdma.regions import RegionError, RegionReader, Transport, best_transport, transport
from linkstream.store.dictserver import RemoteDictionary
from linkstream.store.index import GraphIndex
from linkstream.store.node import NODES, SORTED, Advertisement, StoreNodeError, fence_name, region_name
from linkstream.store.persistent import PersistentSnapshot, _GraphState, _Version

log = logging.getLogger(__name__)

_I64 = np.int64
#: seconds a TCP read may take before the node counts as dead
READ_TIMEOUT_S = 2.0
#: seconds a node that failed a read is skipped (unless its znode vanishes first)
RETRY_DEAD_S = 5.0
DEFAULT_CACHE_BYTES = 64 << 20
#: the lookup-result cache takes this fraction (1/n) of a remote store's cache bound
RESULTS_SHARE = 8
#: arrays up to this size are read whole (see RemoteStore)
WHOLE_BYTES = 256 << 10


class RemoteStoreError(RuntimeError):
    """Remote data cannot be read (no live node holds a partition, ...)."""


class BlockCache:
    """LRU of array blocks, bounded by bytes.  Thread-safe.

    Args:
        capacity: Most bytes held (a single block larger than this is returned but not kept).
    """

    def __init__(self, capacity: int = DEFAULT_CACHE_BYTES) -> None:
        self.capacity = int(capacity)
        self._blocks: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.read_bytes = 0  # bytes fetched from store nodes

    def get(self, key: tuple) -> np.ndarray | None:
        with self._lock:
            b = self._blocks.get(key)
            if b is None:
                self.misses += 1
                return None
            self._blocks.move_to_end(key)
            self.hits += 1
            return b

    def put(self, key: tuple, block: np.ndarray) -> None:
        block.flags.writeable = False
        with self._lock:
            self.read_bytes += block.nbytes
            if block.nbytes > self.capacity or key in self._blocks:
                return
            self._blocks[key] = block
            self.bytes += block.nbytes
            while self.bytes > self.capacity:
                _, old = self._blocks.popitem(last=False)
                self.bytes -= old.nbytes
                self.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._blocks.clear()
            self.bytes = 0

    def stats(self) -> dict[str, int]:
        return {
            "bytes": self.bytes,
            "capacity": self.capacity,
            "blocks": len(self._blocks),
            "hits": self.hits,
            "misses": self.misses,
            "evictions": self.evictions,
            "read_bytes": self.read_bytes,
        }


class ResultCache:
    """LRU of lookup results (read-only arrays keyed by the request), bounded by bytes.

    An entry costs its array's bytes plus its key's and a fixed overhead, so empty results
    count too.  Thread-safe.  See :class:`RemoteStore` (``results``) and
    :meth:`linkstream.containers.remotestatic.RemoteStatics.lookup`.
    """

    OVERHEAD = 96

    def __init__(self, capacity: int) -> None:
        self.capacity = int(capacity)
        self._items: OrderedDict[tuple, tuple[np.ndarray, int]] = OrderedDict()
        self._lock = threading.Lock()
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, key: tuple) -> np.ndarray | None:
        with self._lock:
            got = self._items.get(key)
            if got is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return got[0]

    def put(self, key: tuple, value: np.ndarray, key_bytes: int = 0) -> None:
        value.flags.writeable = False
        cost = value.nbytes + key_bytes + self.OVERHEAD
        with self._lock:
            if cost > self.capacity or key in self._items:
                return
            self._items[key] = (value, cost)
            self.bytes += cost
            while self.bytes > self.capacity:
                _, (_, old) = self._items.popitem(last=False)
                self.bytes -= old
                self.evictions += 1

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.bytes = 0


class RemoteArray:
    """A read-only int64 array living on store nodes, read by blocks (see the module docstring).

    Args:
        store: Reads the blocks (:meth:`RemoteStore.read_blocks`).
        gdir, part, name: Which array.
        length: Its number of elements.
        fenced: Whether a fence region exists (sorted arrays longer than one block).
    """

    dtype = np.dtype(_I64)
    ndim = 1

    def __init__(
        self, store: RemoteStore, gdir: str, part: int, name: str, length: int, fenced: bool
    ) -> None:
        self._store = store
        self.key = (gdir, part, name)
        self.length = length
        self._fenced = fenced and length > store.block
        #: small enough to be read (and cached) as one piece
        self._whole = length * 8 <= store.whole_bytes

    def __len__(self) -> int:
        return self.length

    @property
    def shape(self) -> tuple[int]:
        return (self.length,)

    @property
    def size(self) -> int:
        return self.length

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self._range(0, self.length)
        return a if dtype is None else a.astype(dtype)

    # ------------------------------------------------------------------ reads

    def _blocks(self, ids: np.ndarray) -> list[np.ndarray]:
        return self._store.read_blocks(self.key, ids.tolist(), self.length)

    def _all(self) -> np.ndarray:
        return self._store.read_whole(self.key, self.length)

    def _range(self, a: int, b: int) -> np.ndarray:
        if b <= a:
            return np.empty(0, dtype=_I64)
        if self._whole:
            return self._all()[a:b]
        B = self._store.block
        first, last = a // B, (b - 1) // B
        blocks = self._blocks(np.arange(first, last + 1))
        whole = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        return whole[a - first * B : b - first * B]

    def _take(self, idx: np.ndarray) -> np.ndarray:
        idx = np.asarray(idx, dtype=_I64)
        if not len(idx):
            return np.empty(idx.shape, dtype=_I64)
        if self._whole:
            return self._all()[idx]
        idx = np.where(idx < 0, idx + self.length, idx)
        if int(idx.min()) < 0 or int(idx.max()) >= self.length:
            raise IndexError(f"index out of bounds for remote array {'/'.join(map(str, self.key))}")
        B = self._store.block
        blk = idx // B
        lo, hi = int(blk.min()), int(blk.max())
        if hi - lo < 8:  # clustered: the contiguous run of blocks, no grouping
            blocks = self._blocks(np.arange(lo, hi + 1))
            cat = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
            return cat[idx - lo * B]
        ublk = np.unique(blk)
        blocks = self._blocks(ublk)
        if len(blocks) == 1:
            return blocks[0][idx - int(ublk[0]) * B]
        starts = np.concatenate([[0], np.cumsum([len(x) for x in blocks])[:-1]]).astype(_I64)
        return np.concatenate(blocks)[starts[np.searchsorted(ublk, blk)] + idx % B]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            a, b, step = key.indices(self.length)
            if step != 1:
                return self._range(a, b)[::step] if b > a else np.empty(0, dtype=_I64)
            return self._range(a, b)
        if isinstance(key, (int, np.integer)):
            return self._take(np.array([int(key)], dtype=_I64))[0]
        return self._take(np.asarray(key))

    def searchsorted(self, v: Any, side: str = "left", sorter: Any = None) -> Any:
        """Binary search (the array is sorted): fence lookup, then the candidate blocks only."""
        if sorter is not None:
            raise TypeError("RemoteArray.searchsorted takes no sorter")
        scalar = np.ndim(v) == 0
        vals = np.atleast_1d(np.asarray(v, dtype=_I64))
        if self._whole or not self._fenced:
            out = np.searchsorted(self._range(0, self.length), vals, side)  # type: ignore[call-overload]  # side is "left" | "right"
        else:
            out = self._fenced_search(vals, side)
        return out[0] if scalar else out

    def _fenced_search(self, vals: np.ndarray, side: str) -> np.ndarray:
        B = self._store.block
        fence = self._store.fence(self.key, self.length)
        k = np.searchsorted(fence, vals, side)  # type: ignore[call-overload]  # side is "left" | "right"
        out = np.zeros(len(vals), dtype=_I64)
        todo = k > 0
        if not todo.any():
            return out
        blk = k[todo] - 1
        lo, hi = int(blk.min()), int(blk.max())
        if hi - lo < 8:  # clustered: search the contiguous run of blocks
            blocks = self._blocks(np.arange(lo, hi + 1))
            cat = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
            out[todo] = lo * B + np.searchsorted(cat, vals[todo], side)  # type: ignore[call-overload]  # side is "left" | "right"
            return out
        ublk = np.unique(blk)
        blocks = self._blocks(ublk)
        cat = blocks[0] if len(blocks) == 1 else np.concatenate(blocks)
        starts = np.concatenate([[0], np.cumsum([len(x) for x in blocks])[:-1]]).astype(_I64)
        # the needed blocks, in order, are a sorted array; a value's position in it lies
        # inside (or at the end of) its own block
        pos = np.searchsorted(cat, vals[todo], side)  # type: ignore[call-overload]  # side is "left" | "right"
        out[todo] = blk * B + (pos - starts[np.searchsorted(ublk, blk)])
        return out


#: ``curve_client(server_public, peer)``: client keys for a server (``None``: plaintext);
#: raises ``ValueError`` when it cannot (a secure reader and a node publishing no key)
CurveClient = Callable[[str, str], CurveSpec | None]


def _client_keys(curve_client: CurveClient | None, adv: Advertisement) -> CurveSpec | None:
    if curve_client is None:
        if adv.curve:
            raise StoreNodeError(
                f"store node {adv.node} speaks CURVE (not --insecure): this reader has no cluster keys"
            )
        return None
    try:
        return curve_client(adv.curve, f"store node {adv.node}")
    except ValueError as e:
        raise StoreNodeError(str(e)) from None


class _Node:
    """One store node: its advertisement and (lazily) its reader."""

    def __init__(
        self, adv: Advertisement, prefer: str | None, curve_client: CurveClient | None = None
    ) -> None:
        self.adv = adv
        self.curve_client = curve_client
        self.same_host = adv.host == socket.gethostname()
        self.transport = choose_transport(adv, self.same_host, prefer)
        self.reader: RegionReader | None = None
        self.dead_until = 0.0  # monotonic time before which the node is not tried
        self.lock = threading.Lock()

    @property
    def dead(self) -> bool:
        return time.monotonic() < self.dead_until

    def open(self) -> RegionReader:
        if self.reader is None:
            d = self.adv.descriptor(self.transport.name)
            if self.transport.name == "tcp":
                from linkstream.rdma.tcp import TcpReader

                keys = _client_keys(self.curve_client, self.adv)
                self.reader = TcpReader(d, timeout_s=READ_TIMEOUT_S, curve=keys)
            else:
                self.reader = self.transport.reader(d)
        return self.reader

    def close(self) -> None:
        with self.lock:
            if self.reader is not None:
                try:
                    self.reader.close()
                except Exception:  # noqa: BLE001 - a dead node's reader may fail to close
                    pass
                self.reader = None


def choose_transport(adv: Advertisement, same_host: bool, prefer: str | None = None) -> Transport:
    """The transport to read ``adv``'s node with: ``prefer`` if given (must be advertised
    and usable), else :func:`best_transport` when the node serves it, else the best-ranked
    advertised transport usable between the peers.

    Raises:
        StoreNodeError: No advertised transport is usable from here.
    """
    if prefer is not None:
        t = transport(prefer)
        ok, why = t.available()
        if prefer not in adv.transports or not ok or (t.same_host_only and not same_host):
            raise StoreNodeError(f"store node {adv.node}: transport {prefer!r} not usable: {why}")
        return t
    try:
        best = best_transport(same_host)
        if best.name in adv.transports:
            return best
    except RegionError:
        pass
    options = []
    for name in adv.transports:
        try:
            t = transport(name)
        except RegionError:
            continue
        if t.available()[0] and (same_host or not t.same_host_only):
            options.append(t)
    if not options:
        raise StoreNodeError(f"store node {adv.node}: none of {sorted(adv.transports)} is usable from here")
    return min(options, key=lambda t: t.rank)


class RemoteStore:
    """A store read from store nodes (see the module docstring).

    Args:
        advertisements: Fixed store nodes (instead of ZooKeeper).
        client: A started kazoo client (:mod:`linkstream.scheduler.zkclient`); the nodes
            under ``<root>/storenodes`` are followed with a children watch.
        root: The cluster root.
        cache_bytes: Bound of the bytes cached: the block cache, and one ``RESULTS_SHARE``-th
            of it for :attr:`results` (lookup results of static joins).
        whole_bytes: Arrays up to this size are read and cached as one piece (one cache
            entry, no block bookkeeping per lookup); larger ones by blocks.
        prefer: Force one transport (``"shm"``, ``"tcp"``; benchmarks and tests).
        dictionary: The store's dictionary (default: from the advertisement, see
            ``dictionary_via``).
        dictionary_via: ``"auto"``: the ``lmdb:`` dictionary opened directly on the store
            node's host, else asked of the node's dictionary server; ``"node"``: always
            the node's server.
    """

    capabilities = frozenset({"persistent", "snapshots", "remote"})

    def __init__(
        self,
        advertisements: Iterable[Advertisement] = (),
        *,
        client: Any = None,
        root: str = "/linkstream",
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        whole_bytes: int = WHOLE_BYTES,
        prefer: str | None = None,
        dictionary: Dictionary | None = None,
        dictionary_via: str = "auto",
        curve_client: CurveClient | None = None,
    ) -> None:
        self.curve_client = curve_client
        if dictionary_via not in ("auto", "node"):
            raise ValueError(f"dictionary_via must be 'auto' or 'node', got {dictionary_via!r}")
        self.dictionary_via = dictionary_via
        #: lookup results of the static joins of a ``--remote-store`` container
        self.results = ResultCache(int(cache_bytes) // RESULTS_SHARE)
        self.cache = BlockCache(int(cache_bytes) - self.results.capacity)
        self.whole_bytes = min(int(whole_bytes), self.cache.capacity // 8)
        self.prefer = prefer
        self._nodes: dict[str, _Node] = {}
        self._lock = threading.Lock()
        self.fingerprint: str | None = None
        self.block = 0
        self.failovers = 0
        self.reads = 0
        self._client = client
        self._closed = False
        self._folder = f"{root.rstrip('/')}/{NODES}"
        self._changed = threading.Condition(self._lock)
        for adv in advertisements:
            self._add(adv)
        if client is not None:
            client.ensure_path(self._folder)
            client.ChildrenWatch(self._folder, self._on_children)
        if not self._nodes:
            raise RemoteStoreError(f"no store node is advertised (under {self._folder} or given)")
        self._dictionary = dictionary
        self._own_dictionary = False
        self._snapshot: PersistentSnapshot | None = None

    # ------------------------------------------------------------------ nodes

    def _add(self, adv: Advertisement) -> None:
        with self._lock:
            if self.fingerprint is None:
                self.fingerprint, self.block, self._first = adv.fingerprint, adv.block, adv
            elif adv.fingerprint != self.fingerprint or adv.block != self.block:
                log.error(
                    "store node %s serves other data (fingerprint %s); ignored", adv.node, adv.fingerprint
                )
                return
            try:
                self._nodes[adv.node] = _Node(adv, self.prefer, self.curve_client)
            except StoreNodeError as e:
                log.error("%s", e)
            self._changed.notify_all()

    def _on_children(self, children: list[str]) -> bool | None:
        if self._closed:
            return False  # stops kazoo's watch
        known = set(self._nodes)
        for name in sorted(set(children) - known):
            try:
                data, _ = self._client.get(f"{self._folder}/{name}")
                self._add(Advertisement.from_json(data, name))
            except StoreNodeError as e:
                log.error("store node %s: %s", name, e)
            except Exception as e:  # noqa: BLE001 - a node that vanished meanwhile
                log.debug("store node %s: %s", name, e)
        for name in known - set(children):
            self._drop(name, "its znode vanished")
        return None

    def _drop(self, name: str, why: str) -> None:
        with self._lock:
            node = self._nodes.pop(name, None)
        if node is not None:
            log.warning("store node %s dropped: %s", name, why)
            node.close()

    def nodes(self) -> dict[str, Advertisement]:
        """The live nodes' advertisements."""
        with self._lock:
            return {n: x.adv for n, x in self._nodes.items() if not x.dead}

    def transports(self) -> dict[str, str]:
        """Live node -> the transport it is read with."""
        with self._lock:
            return {n: x.transport.name for n, x in self._nodes.items() if not x.dead}

    def wait_nodes(self, n: int, timeout: float = 10.0) -> None:
        """Waits until ``n`` nodes are known (ZooKeeper mode)."""
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._nodes) >= n, timeout):
                raise RemoteStoreError(f"{len(self._nodes)} store nodes known after {timeout}s, {n} wanted")

    @property
    def advertisement(self) -> Advertisement:
        return self._first

    # ------------------------------------------------------------------ reads

    def _holders(self, part: int) -> list[_Node]:
        with self._lock:
            nodes = [x for x in self._nodes.values() if not x.dead and part in x.adv.partitions]
        # same host first (shared memory), then by name: deterministic
        return sorted(nodes, key=lambda x: (not x.same_host, x.transport.rank, x.adv.node))

    def _fetch(self, part: int, requests: list[tuple[str, int, int]]) -> list[np.ndarray]:
        tried = []
        for node in self._holders(part):
            try:
                with node.lock:
                    reader = node.open()
                    got = reader.read_many(requests)
                self.reads += 1
                return got
            except (RegionError, OSError, StoreNodeError) as e:
                tried.append(f"{node.adv.node} ({e})")
                node.dead_until = time.monotonic() + RETRY_DEAD_S
                node.close()
                self.failovers += 1
                log.warning("store node %s failed (%s); trying a replica", node.adv.node, e)
        graph = requests[0][0].split("/", 1)[0] if requests else "?"
        detail = "; tried " + ", ".join(tried) if tried else ""
        raise RemoteStoreError(
            f"partition {part} of graph folder {graph}: no live store node holds it{detail}"
        )

    def read_blocks(self, key: tuple[str, int, str], blocks: Sequence[int], length: int) -> list[np.ndarray]:
        """Blocks ``blocks`` of array ``key`` (through the cache)."""
        gdir, part, name = key
        B = self.block
        out: list[np.ndarray | None] = []
        missing: list[int] = []
        for b in blocks:
            got = self.cache.get((*key, b))
            out.append(got)
            if got is None:
                missing.append(len(out) - 1)
        if missing:
            region = region_name(gdir, part, name)
            reqs = [(region, blocks[i] * B, min((blocks[i] + 1) * B, length)) for i in missing]
            for i, arr in zip(missing, self._fetch(part, reqs)):
                self.cache.put((*key, blocks[i]), arr)
                out[i] = arr
        return out  # type: ignore[return-value]  # every None was filled

    def read_whole(self, key: tuple[str, int, str], length: int) -> np.ndarray:
        """All of array ``key`` (one read, one cache entry)."""
        ck = (*key, "all")
        got = self.cache.get(ck)
        if got is None:
            gdir, part, name = key
            got = self._fetch(part, [(region_name(gdir, part, name), 0, length)])[0]
            self.cache.put(ck, got)
        return got

    def fence(self, key: tuple[str, int, str], length: int) -> np.ndarray:
        """The fence of array ``key`` (every ``block``-th element), through the cache."""
        ck = (*key, "fence")
        got = self.cache.get(ck)
        if got is None:
            gdir, part, name = key
            n = -(-length // self.block)
            got = self._fetch(part, [(fence_name(gdir, part, name), 0, n)])[0]
            self.cache.put(ck, got)
        return got

    # ------------------------------------------------------------------ the store

    @property
    def dictionary(self) -> Dictionary:
        """The store's dictionary: its ``lmdb:`` path opened on the node's host, else (or
        with ``dictionary_via="node"``) the node's dictionary server; read only."""
        if self._dictionary is None:
            adv = self._first
            host, uri = adv.dictionary.get("host"), adv.dictionary.get("uri", "")
            if host == socket.gethostname() and uri.startswith("lmdb:") and self.dictionary_via == "auto":
                self._dictionary = open_dictionary(uri)
            elif adv.dictionary.get("address"):
                try:
                    keys = _client_keys(self.curve_client, adv)
                except StoreNodeError as e:
                    raise RemoteStoreError(f"the store's dictionary: {e}") from None
                self._dictionary = RemoteDictionary(adv.dictionary["address"], curve=keys)
            else:
                raise RemoteStoreError(
                    f"the store's dictionary {uri} is on host {host} and store node {adv.node} does not "
                    "serve it (a node serves it along with the tcp transport)"
                )
            self._own_dictionary = True
        return self._dictionary

    def partition_index(self, gdir: str, part: int) -> GraphIndex:
        """The index of one partition, every array a :class:`RemoteArray`."""
        holders = self._holders(part)
        if not holders:
            raise RemoteStoreError(f"partition {part} of graph folder {gdir}: no live store node holds it")
        regions = holders[0].adv.descriptor(holders[0].transport.name).regions
        arrays = {}
        for f in fields(GraphIndex):
            info = regions.get(region_name(gdir, part, f.name))
            if info is None:
                raise RemoteStoreError(
                    f"store node {holders[0].adv.node} lacks region {region_name(gdir, part, f.name)}"
                )
            arrays[f.name] = RemoteArray(self, gdir, part, f.name, info.length, f.name in SORTED)
        return GraphIndex(**arrays)  # type: ignore[arg-type]  # duck-typed arrays

    def snapshot(self) -> PersistentSnapshot:
        """The store's graphs as a snapshot (each graph: the union of its partitions).

        The snapshot's arrays read through the cache on demand; it is built once (the
        served data is immutable) and shared.
        """
        if self._snapshot is None:
            adv = self._first
            graphs = {}
            for iri, gdir, _triples in adv.graphs:
                parts = tuple(self.partition_index(gdir, k) for k in range(adv.partitions_total))
                graphs[iri] = _GraphState(parts[0], parts[1:])
            self._snapshot = PersistentSnapshot(_Version(graphs, (), ()))
        return self._snapshot

    def graph_triples(self) -> dict[str | None, int]:
        """Graph IRI -> number of triples, as the advertisement says."""
        return {iri: n for iri, _, n in self._first.graphs}

    def close(self) -> None:
        self._closed = True
        with self._lock:
            nodes = list(self._nodes.values())
            self._nodes.clear()
        for node in nodes:
            node.close()
        if self._own_dictionary and self._dictionary is not None:
            self._dictionary.close()
            self._dictionary = None


def advertisements_from(client: Any, root: str = "/linkstream") -> list[Advertisement]:
    """The store nodes registered under ``<root>/storenodes`` right now."""
    folder = f"{root.rstrip('/')}/{NODES}"
    out = []
    for name in sorted(client.get_children(folder)):
        data, _ = client.get(f"{folder}/{name}")
        out.append(Advertisement.from_json(data, name))
    return out


__all__ = [
    "BlockCache",
    "RemoteArray",
    "ResultCache",
    "RemoteStore",
    "RemoteStoreError",
    "advertisements_from",
    "choose_transport",
]
