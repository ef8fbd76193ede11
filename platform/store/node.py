"""Store nodes: a store directory's partitions served as memory regions, advertised in ZooKeeper.

A store node opens a store directory (as ``linkstream load`` wrote it: ``P`` subject-hash
partitions per graph, ``s % P``), takes the :class:`~linkstream.store.index.GraphIndex`
of every partition it holds -- memory-mapped from ``DIR/index/parts`` when current, else
built once and kept there, with the batches absorbed into the directory and not yet
checkpointed merged in (:mod:`linkstream.store.nodeindex`: the node serves the store as
``linkstream sparql --store DIR`` sees it when the node starts) -- and publishes each
index array as one read-only region
(:mod:`linkstream.rdma`) named ``<graph dir>/<partition>/<array>`` -- on shared memory
(readers on the same host) and on TCP (everyone else), and RDMA where a device exists.
Sorted arrays longer than one block also get a *fence* region (every ``BLOCK``-th
element) so that a reader binary-searches them with one fence lookup plus one block read
(:mod:`linkstream.store.remote`).

The node then creates an ephemeral, sequential znode ``<root>/storenodes/node-`` whose
data (JSON) is its :class:`Advertisement`: host, the partitions it holds, the store's
graphs and content fingerprint, where the dictionary is, and one region descriptor per
transport.  Several nodes may hold overlapping partition sets (replication); the znode
vanishes with the node's ZooKeeper session, which is how readers learn of its death.

Nothing a reader sends is executed or unpickled: the TCP transport answers plain
``[region, start, stop]`` reads, checked field by field.

Security (on unless ``--insecure``): the TCP transport and the dictionary server are
CURVE servers (:mod:`linkstream.rdma.curve`) whose allow-list the command line passes
down: the cluster's published keys (containers, the driver) plus the keys of readers
registered under ``<root>/readers`` (:func:`publish_reader_key`: one-shot queries and
other processes that read the store without being a container).  The node's own public
key is ``curve`` in its advertisement; readers connect as CURVE clients holding it.  Only
cluster members can write those znodes (the cluster's ZooKeeper ACL).  Shared-memory
segments are created owner-only (mode 0600): readers on the host must run as the same
user.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from linkstream.rdma.curve import CurveSpec
from linkstream.rdma.regions import RegionDescriptor, RegionError, RegionServer, transport
from linkstream.store.dictserver import DictionaryServer
from linkstream.store.index import GraphIndex
from linkstream.store.layout import (
    Manifest,
    check_files,
    open_store_dictionary,
    partition_path,
    read_manifest,
    resolve_dictionary_uri,
)
from linkstream.store.nodeindex import BuildStats, read_state
from linkstream.store.nodeindex import partition_index as served_index
from linkstream.store.protocol import RDF_TYPE

log = logging.getLogger(__name__)

#: elements per block of a remote array (fences hold every BLOCK-th element)
BLOCK = 4096
#: GraphIndex arrays readers binary-search (they get fence regions)
SORTED = ("out_v", "in_v", "out_ck", "in_ck", "preds", "type_ids")
#: the znode folder (under the cluster root) holding one ephemeral znode per store node
NODES = "storenodes"
#: the znode folder (under the cluster root) where readers that are not containers publish their key
READERS = "readers"
FORMAT = "linkstream-store-node/1"


class StoreNodeError(ValueError):
    """A store node cannot serve what it was asked to (one line naming the problem)."""


def region_name(gdir: str, k: int, array: str) -> str:
    """The region of array ``array`` of partition ``k`` of graph folder ``gdir``."""
    return f"{gdir}/{k}/{array}"


def fence_name(gdir: str, k: int, array: str) -> str:
    return f"{gdir}/{k}/{array}.fence"


def store_fingerprint(manifest: Manifest, absorbed: str = "") -> str:
    """Digest of a store's content as its manifest records it (graphs, sizes, checksums),
    and of the absorbed batches served with it (``absorbed``: their digest, ``""``: none).

    Equal fingerprints on two nodes mean they serve the same data; readers refuse to mix
    nodes of different fingerprints in one graph.
    """
    doc = {
        "dictionary": manifest.dictionary,
        "partitions": manifest.partitions,
        "graphs": [g.to_json() for g in manifest.graphs],
        "files": manifest.extra.get("files"),
        "vts": manifest.extra.get("vts"),
        **({"absorbed": absorbed} if absorbed else {}),
    }
    return hashlib.blake2b(json.dumps(doc, sort_keys=True).encode(), digest_size=16).hexdigest()


def partition_index(store_dir: Path, manifest: Manifest, gdir: str, k: int, rdf_type: int) -> GraphIndex:
    """The index of partition ``k`` of graph folder ``gdir``, built afresh from its file alone
    (empty if the file is missing); nodes serve :func:`~linkstream.store.nodeindex.partition_index`."""
    path = partition_path(store_dir, gdir, k)
    if not path.exists():
        return GraphIndex.empty()
    try:
        t = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise StoreNodeError(f"{path}: cannot read the partition: {e}") from None
    if t.dtype != np.int64 or t.ndim != 2 or t.shape[1] != 3:
        raise StoreNodeError(f"{path}: expected an (n, 3) int64 array, got {t.dtype} {t.shape}")
    return GraphIndex.build(t, rdf_type)


def parse_partitions(text: str | None, total: int) -> list[int]:
    """``"0,2-3"`` -> ``[0, 2, 3]`` (``None`` = every partition).

    Raises:
        StoreNodeError: Not a list of partition numbers below ``total``.
    """
    if text is None or text.strip() in ("", "all"):
        return list(range(total))
    out: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = (int(x) for x in part.split("-", 1))
                out.update(range(a, b + 1))
            else:
                out.add(int(part))
        except ValueError:
            raise StoreNodeError(f"--partitions: {part!r} is not a number or a range A-B") from None
    bad = sorted(k for k in out if not 0 <= k < total)
    if bad:
        raise StoreNodeError(f"--partitions: {bad} outside the store's partitions 0..{total - 1}")
    return sorted(out)


@dataclass(frozen=True)
class Advertisement:
    """What a store node publishes in its znode (JSON) and readers parse back.

    Attributes:
        node: The node's name (its znode's name once registered).
        host: Host name (readers on the same host may use shared memory).
        pid: Process id (diagnostics).
        store: Absolute path of the store directory.
        fingerprint: :func:`store_fingerprint` of the data served.
        partitions_total: ``P`` of the store.
        partitions: The partitions this node holds.
        graphs: ``[(iri or None, dir, triples)]`` of the store.
        dictionary: ``{"uri": ..., "host": ..., "address": ...}``: the store's dictionary
            (an ``lmdb:`` path processes of ``host`` open; others ask the node's
            :class:`~linkstream.store.dictserver.DictionaryServer` at ``address``).
        rdf_type: The dictionary id of rdf:type (the type index is keyed by it).
        block: Elements per block (fences hold every ``block``-th element).
        transports: Transport name -> region descriptor (JSON object).
        curve: The node's CURVE public key (Z85 text; ``""``: plaintext, ``--insecure``).
        metrics: ``host:port`` of the node's Prometheus endpoint (``""``: none).
    """

    node: str
    host: str
    pid: int
    store: str
    fingerprint: str
    partitions_total: int
    partitions: tuple[int, ...]
    graphs: tuple[tuple[str | None, str, int], ...]
    dictionary: dict[str, str]
    rdf_type: int
    block: int
    transports: dict[str, dict[str, Any]]
    curve: str = ""
    metrics: str = ""

    def to_json(self) -> bytes:
        doc = {f.name: getattr(self, f.name) for f in fields(self)}
        doc["format"] = FORMAT
        doc["partitions"] = list(self.partitions)
        doc["graphs"] = [list(g) for g in self.graphs]
        return json.dumps(doc, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes | str, node: str | None = None) -> Advertisement:
        """Parses a znode's data (it crossed a process boundary: checked field by field).

        Raises:
            StoreNodeError: Not a store node advertisement.
        """
        try:
            d = json.loads(data)
        except (ValueError, UnicodeDecodeError) as e:
            raise StoreNodeError(f"store node advertisement is not JSON: {e}") from None
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise StoreNodeError(f"not a store node advertisement (format {FORMAT!r} expected)")
        try:
            graphs = tuple((None if g[0] is None else str(g[0]), str(g[1]), int(g[2])) for g in d["graphs"])
            transports = d["transports"]
            if not isinstance(transports, dict) or not all(isinstance(v, dict) for v in transports.values()):
                raise TypeError("transports must map names to descriptors")
            dictionary = {str(k): str(v) for k, v in dict(d["dictionary"]).items()}
            return cls(
                node=node or str(d["node"]),
                host=str(d["host"]),
                pid=int(d["pid"]),
                store=str(d["store"]),
                fingerprint=str(d["fingerprint"]),
                partitions_total=int(d["partitions_total"]),
                partitions=tuple(int(k) for k in d["partitions"]),
                graphs=graphs,
                dictionary=dictionary,
                rdf_type=int(d["rdf_type"]),
                block=int(d["block"]),
                transports=transports,
                curve=str(d.get("curve") or ""),
                metrics=str(d.get("metrics") or ""),
            )
        except (KeyError, TypeError, ValueError, IndexError) as e:
            raise StoreNodeError(f"malformed store node advertisement: {type(e).__name__}: {e}") from None

    def descriptor(self, name: str) -> RegionDescriptor:
        """The region descriptor of transport ``name``."""
        if name not in self.transports:
            raise StoreNodeError(f"store node {self.node} does not serve over {name!r}")
        try:
            return RegionDescriptor.from_json(json.dumps(self.transports[name]))
        except RegionError as e:
            raise StoreNodeError(f"store node {self.node}: {e}") from None


def _descriptor_json(d: RegionDescriptor) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(d.to_json())
    return out


class StoreNode:
    """Serves the partitions of one store directory as regions (see the module docstring).

    Args:
        store_dir: The store directory.
        partitions: The partitions to hold (default: all).
        transports: Transport names to serve on; unusable ones are skipped with a log line
            (``rdma`` without a device), at least one must work.
        bind: The TCP transport's ZeroMQ bind address.
        curve: CURVE server keys of the TCP transport and the dictionary server (with the
            allow-list and ``on_reject``), ``None``: plaintext (``--insecure``).
        metrics: ``host:port`` of the process's metrics endpoint (advertised).
        cache_index: Memory-map the partition indexes kept under ``DIR/index/parts``
            when current, and keep newly built ones there
            (:mod:`~linkstream.store.nodeindex`); ``False``: build all in memory.

    Raises:
        StoreNodeError: The directory is not a readable store, or no transport works.
    """

    def __init__(
        self,
        store_dir: str | os.PathLike[str],
        partitions: Sequence[int] | None = None,
        transports: Iterable[str] = ("shm", "tcp"),
        bind: str = "tcp://127.0.0.1:*",
        curve: CurveSpec | None = None,
        metrics: str = "",
        cache_index: bool = True,
    ) -> None:
        self.curve = curve
        self.metrics = metrics
        self.store_dir = Path(store_dir).resolve()
        try:
            self.manifest = read_manifest(self.store_dir)
            check_files(self.store_dir, self.manifest)
        except (OSError, ValueError) as e:
            raise StoreNodeError(f"{self.store_dir}: {e}") from None
        m = self.manifest
        self.partitions = tuple(range(m.partitions)) if partitions is None else tuple(sorted(set(partitions)))
        bad = [k for k in self.partitions if not 0 <= k < m.partitions]
        if bad:
            raise StoreNodeError(f"partitions {bad} outside the store's 0..{m.partitions - 1}")
        self.dictionary = open_store_dictionary(self.store_dir, m)
        self.rdf_type = int(self.dictionary.lookup_many([RDF_TYPE])[0])
        self.servers: dict[str, RegionServer] = {}
        #: the dictionary served to readers on other hosts (with the TCP transport)
        self.dictionary_server: DictionaryServer | None = None
        for name in transports:
            t = transport(name)
            ok, why = t.available()
            if not ok:
                log.warning("store node: transport %s skipped: %s", name, why)
                continue
            if name == "tcp":
                self.servers[name] = t.server(bind, curve=curve)
            elif name == "rdma":
                self.servers[name] = t.server(_bind_host(bind))
            else:
                self.servers[name] = t.server()
        if not self.servers:
            self.dictionary.close()
            raise StoreNodeError("no usable transport among " + ", ".join(transports))
        if "tcp" in self.servers:
            self.dictionary_server = DictionaryServer(self.dictionary, f"tcp://{_bind_host(bind)}:*", curve)
        self.bytes = 0
        #: partition indexes memory-mapped from ``DIR/index/parts`` / built at start
        self.index_stats = BuildStats()
        try:
            # manifest, absorbed batches and partition files as one state (the store's lock)
            self.state = read_state(self.store_dir, self.partitions)
            self.manifest = self.state.manifest
            for g in self.state.graphs:
                for k in self.partitions:
                    ix = served_index(
                        self.store_dir,
                        self.state,
                        g.dir,
                        g.iri,
                        k,
                        self.rdf_type,
                        self.index_stats,
                        cache_index,
                    )
                    self._publish(g.dir, k, ix)
        except (OSError, ValueError) as e:
            self.close()
            raise StoreNodeError(f"{self.store_dir}: {e}") from None
        log.info(
            "store node: %d partition indexes memory-mapped, %d built; %d absorbed triples served",
            self.index_stats.mapped,
            self.index_stats.built,
            sum(len(t) for t in self.state.absorbed.values()),
        )

    def _publish(self, gdir: str, k: int, ix: GraphIndex) -> None:
        for f in fields(ix):
            a = np.ascontiguousarray(getattr(ix, f.name), dtype=np.int64)
            regions = [(region_name(gdir, k, f.name), a)]
            if f.name in SORTED:
                regions.append((fence_name(gdir, k, f.name), np.ascontiguousarray(a[::BLOCK])))
            for name, arr in regions:
                for srv in self.servers.values():
                    srv.publish(name, arr)
                self.bytes += arr.nbytes

    def advertisement(self, node: str = "") -> Advertisement:
        m = self.manifest
        uri = resolve_dictionary_uri(self.store_dir, m.dictionary)
        return Advertisement(
            node=node,
            host=socket.gethostname(),
            pid=os.getpid(),
            store=str(self.store_dir),
            fingerprint=store_fingerprint(m, self.state.absorbed_digest),
            partitions_total=m.partitions,
            partitions=self.partitions,
            graphs=tuple((g.iri, g.dir, g.triples) for g in self.state.graphs),
            dictionary={
                "uri": uri,
                "host": socket.gethostname(),
                **({"address": self.dictionary_server.endpoint} if self.dictionary_server else {}),
            },
            rdf_type=self.rdf_type,
            block=BLOCK,
            transports={n: _descriptor_json(s.descriptor()) for n, s in self.servers.items()},
            curve=self.curve.public.decode("ascii") if self.curve is not None else "",
            metrics=self.metrics,
        )

    def register(self, client: Any, root: str) -> str:
        """Creates this node's ephemeral znode under ``<root>/storenodes``; returns its path.

        ``client`` is a started kazoo client made by :mod:`linkstream.scheduler.zkclient`
        (its default ACL is the cluster's private one when security is on).
        """
        folder = f"{root.rstrip('/')}/{NODES}"
        client.ensure_path(folder)
        path: str = client.create(
            f"{folder}/node-", self.advertisement().to_json(), ephemeral=True, sequence=True
        )
        name = path.rsplit("/", 1)[1]
        client.set(path, self.advertisement(name).to_json())
        return path

    def close(self) -> None:
        for srv in self.servers.values():
            srv.close()
        self.servers.clear()
        if self.dictionary_server is not None:
            self.dictionary_server.close()
            self.dictionary_server = None
        self.dictionary.close()


def _key(value: object) -> bytes | None:
    return value.encode("ascii") if isinstance(value, str) and len(value) == 40 else None


def publish_reader_key(client: Any, root: str, public: bytes, who: str = "reader") -> str:
    """Publishes a reader's CURVE public key (an ephemeral znode under ``<root>/readers``,
    gone with the reader's session) so that secure store nodes admit it; returns its path."""
    folder = f"{root.rstrip('/')}/{READERS}"
    client.ensure_path(folder)
    doc = {"curve": public.decode("ascii"), "who": who, "pid": os.getpid(), "host": socket.gethostname()}
    path: str = client.create(f"{folder}/reader-", json.dumps(doc).encode(), ephemeral=True, sequence=True)
    return path


def reader_keys(client: Any, root: str) -> set[bytes]:
    """The keys readers published under ``<root>/readers`` (read afresh)."""
    from kazoo.exceptions import NoNodeError

    folder = f"{root.rstrip('/')}/{READERS}"
    try:
        children = client.get_children(folder)
    except NoNodeError:
        return set()
    out = set()
    for name in children:
        try:
            data, _ = client.get(f"{folder}/{name}")
            doc = json.loads(data)
        except (NoNodeError, ValueError, UnicodeDecodeError):
            continue
        key = _key(doc.get("curve")) if isinstance(doc, dict) else None
        if key is not None:
            out.add(key)
    return out


class StoreClients:
    """The allow-list of a secure store node: ``members`` (the cluster's published keys,
    e.g. a ``KeyRing``) plus the keys of readers under ``<root>/readers``.

    Asked once per handshake, read from ZooKeeper afresh (a stale "no" would lock a
    legitimate reader out: a refused CURVE client is not retried).
    """

    def __init__(self, members: Container[bytes], client: Any, root: str) -> None:
        self.members, self.client, self.root = members, client, root

    def __contains__(self, key: object) -> bool:
        if key in self.members:
            return True
        try:
            return key in reader_keys(self.client, self.root)
        except Exception:  # noqa: BLE001 - ZooKeeper unreachable: refuse, say so
            log.warning("cannot read the readers' keys from ZooKeeper; refusing a peer", exc_info=True)
            return False


def _bind_host(bind: str) -> str:
    host = bind.split("://", 1)[-1].rsplit(":", 1)[0]
    return "127.0.0.1" if host in ("*", "") else host
