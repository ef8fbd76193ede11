"""Store nodes keep their served index layout on disk and serve absorbed batches.

* The per-partition indexes a node serves are written once under ``DIR/index/parts``,
  memory-mapped on the next start, rebuilt only for the partitions a checkpoint rewrote
  (or whose absorbed rows changed), and a damaged cache folder is rebuilt, not fatal.
* Batches a running absorber (``PersistentStore.absorb``, what ``run --store DIR --absorb
  S`` does) logged and did not checkpoint are served merged into the partitions, so
  ``linkstream sparql --zk`` over a real ``linkstream store-node`` process answers exactly
  as ``linkstream sparql --store DIR``; batches absorbed after the node started are
  served once the node is restarted (the documented rule).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from linkstream.cli import main as cli_main
from linkstream.scheduler.zkclient import ZkAuth
from linkstream.store import PersistentStore
from linkstream.store.layout import read_manifest
from linkstream.store.node import StoreNode, partition_index
from linkstream.store.nodeindex import PARTS
from tests.shared_paths import REPO, SLICE
from tests.store.remote_fixtures import StoreNodeProcess, build_store

STREAMS = SLICE / "streams"
EX = "http://example.org/absorbed"
#: absorbs the first N elements of a stream file into a store directory, as ``run --absorb``
#: does, then waits (a running absorber) until stdin closes
ABSORBER = r"""
import sys
from linkstream.rdf.streams import StreamReader
from linkstream.store import PersistentStore
store = PersistentStore.open(sys.argv[1], background_compaction=False)
def absorb(path, n, graph):
    for k, el in enumerate(StreamReader(path, store.dictionary)):
        if k >= n:
            break
        store.absorb(path.rsplit("/", 1)[-1], el.t, el.triples, graph=graph)
for line in sys.stdin:
    path, n, graph = line.split()
    absorb(path, int(n), None if graph == "-" else graph)
    print("absorbed", flush=True)
store.close()
"""


def _served_equal(a, b) -> None:
    for f in fields(a):
        assert np.array_equal(np.asarray(getattr(a, f.name)), np.asarray(getattr(b, f.name))), f.name


def test_served_indexes_are_kept_mapped_and_rebuilt_only_when_stale(tmp_path: Path, caplog) -> None:
    store = build_store(tmp_path, partitions=3)
    m = read_manifest(store)
    node = StoreNode(store, transports=("tcp",))
    try:
        assert (node.index_stats.mapped, node.index_stats.built) == (0, 3 * len(m.graphs))
    finally:
        node.close()
    node = StoreNode(store, transports=("tcp",))
    try:
        assert (node.index_stats.mapped, node.index_stats.built) == (3 * len(m.graphs), 0)
        assert node.bytes > 0
    finally:
        node.close()
    folders = sorted((store / "index" / PARTS).glob("*/part-*"))
    assert len(folders) == 3 * len(m.graphs)
    # a checkpoint of absorbed rows rewrites only the partitions of their subjects
    ps = PersistentStore.open(store, background_compaction=False)
    try:
        s = int(ps.dictionary.encode_many([f"<{EX}/s>"])[0])
        p, o = (int(x) for x in ps.dictionary.encode_many([f"<{EX}/p>", '"x"']))
        ps.absorb("s", 1, np.array([[s, p, o]], dtype=np.int64))
        ps.checkpoint()
    finally:
        ps.close()
    m2 = read_manifest(store)
    # a damaged cache folder (a truncated array) is rebuilt with a warning
    victim = next(f for f in folders if f.exists() and not f.name.startswith(f"part-{s % 3:05d}"))
    (victim / "out_nbr.npy").write_bytes(b"\x93NUMPY")
    caplog.set_level("WARNING")
    node = StoreNode(store, transports=("tcp",))
    try:
        assert node.index_stats.built == 2  # the rewritten default-graph partition + the damaged one
        assert node.index_stats.mapped == 3 * len(m2.graphs) - 2
        assert "unusable index" in caplog.text
        srv = node.servers["tcp"]
        for g in m2.graphs:
            for k in range(3):
                want = partition_index(store, m2, g.dir, k, node.rdf_type)
                got = {f.name: srv._arrays[f"{g.dir}/{k}/{f.name}"] for f in fields(want)}
                _served_equal(want, type(want)(**got))
    finally:
        node.close()
    # stale folders are gone: one per partition
    assert len(sorted((store / "index" / PARTS).glob("*/part-*"))) == 3 * len(m2.graphs)


# ------------------------------------------------------------------ absorbed data, real processes

QUERIES = [
    "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }",
    "SELECT ?t (COUNT(*) AS ?n) WHERE { ?x a ?t } GROUP BY ?t ORDER BY ?t",
    "SELECT ?ob ?v WHERE { ?ob <http://purl.oclc.org/NET/sao/hasValue> ?v } ORDER BY ?ob ?v",
    f"SELECT (COUNT(*) AS ?n) WHERE {{ GRAPH <{EX}> {{ ?s ?p ?o }} }}",
]


class Absorber:
    """A running process absorbing stream elements into a store directory."""

    def __init__(self, store: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ABSORBER, str(store)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )

    def absorb(self, stream: str, n: int, graph: str | None = None) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{STREAMS / stream} {n} {graph or '-'}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline() == "absorbed\n"

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0
        assert self.proc.stdout is not None
        self.proc.stdout.close()


@pytest.fixture
def zk(zk_server: str, zk_chroot: str, zk_auth: ZkAuth) -> str:
    return f"{zk_server}{zk_chroot}"


@pytest.fixture
def absorber(tmp_path: Path) -> Iterator[tuple[Path, Absorber]]:
    store = build_store(tmp_path, partitions=3)
    a = Absorber(store)
    yield store, a
    a.close()


def _answers(capsys: pytest.CaptureFixture, *source: str) -> list[str]:
    out = []
    for q in QUERIES:
        assert cli_main(["sparql", *source, q]) == 0
        got, err = capsys.readouterr()
        assert err == ""
        out.append(got)
    return out


def _count(answer: str) -> int:
    return int(json.loads(answer)["results"]["bindings"][0]["n"]["value"])


@pytest.mark.zookeeper
def test_store_node_serves_absorbed_batches_as_the_store_directory(
    absorber: tuple[Path, Absorber], zk: str, capsys: pytest.CaptureFixture
) -> None:
    store, a = absorber
    before = _answers(capsys, "--store", str(store))
    a.absorb("AarhusTrafficData182955.nq", 40)
    a.absorb("AarhusWeatherData0.nq", 30, EX)  # a graph only absorbed batches create
    at_start = _answers(capsys, "--store", str(store))
    assert _count(at_start[0]) > _count(before[0]) and _count(at_start[3]) > 0
    node = StoreNodeProcess(store, zk, "--transports", "tcp")
    try:
        assert EX in [g[0] for g in node.adv.graphs]
        assert _answers(capsys, "--zk", zk) == at_start
        # absorbed after the node started: not served until the node restarts
        a.absorb("AarhusParkingDataKALKVAERKSVEJ.nq", 20)
        later = _answers(capsys, "--store", str(store))
        assert _count(later[0]) > _count(at_start[0])
        assert _answers(capsys, "--zk", zk) == at_start
    finally:
        node.stop()
    node = StoreNodeProcess(store, zk, "--transports", "tcp")
    try:
        assert _answers(capsys, "--zk", zk) == later
    finally:
        node.stop()


def test_no_index_cache_serves_the_same_and_writes_nothing(tmp_path: Path) -> None:
    store = build_store(tmp_path, partitions=2)
    node = StoreNodeProcess(store, None, "--transports", "tcp", "--no-index-cache")
    try:
        assert not (store / "index" / PARTS).exists()
    finally:
        node.stop()
    kept = StoreNodeProcess(store, None, "--transports", "tcp")
    try:
        assert len(list((store / "index" / PARTS).glob("*/part-*/meta.json"))) == 2 * len(kept.adv.graphs)
        assert kept.adv.fingerprint == node.adv.fingerprint
        assert kept.adv.transports["tcp"]["regions"] == node.adv.transports["tcp"]["regions"]
    finally:
        kept.stop()


@pytest.mark.zookeeper
def test_nodes_holding_some_partitions_each_serve_their_absorbed_rows(
    absorber: tuple[Path, Absorber], zk: str, capsys: pytest.CaptureFixture
) -> None:
    store, a = absorber
    a.absorb("AarhusTrafficData182955.nq", 25)
    a.absorb("AarhusPollutionData184892.nq", 25, EX)
    want = _answers(capsys, "--store", str(store))
    assert _count(want[3]) > 0  # the absorbed-only graph is there
    nodes = [StoreNodeProcess(store, zk, "--transports", "tcp", "--partitions", p) for p in ("0", "1-2")]
    try:
        assert nodes[0].adv.fingerprint == nodes[1].adv.fingerprint
        assert [n.adv.partitions for n in nodes] == [(0,), (1, 2)]
        assert _answers(capsys, "--zk", zk) == want
    finally:
        for n in nodes:
            n.stop()
