"""Reading a store through store nodes: real ``linkstream store-node`` processes, real ZooKeeper.

* every index lookup through the remote reader (shared memory and TCP) equals the local
  persistent store's, and one-shot SPARQL over it gives the same results;
* a container's engine reading its static graphs remotely gives the CityBench slice's
  results equal to embedded mode (and to the oracle), holding no static triple, only a
  bounded block cache (also one smaller than the graph: evictions, same results);
* killing a store node whose partitions are replicated: queries continue, results equal;
  killing the only holder of a partition: one clear error;
* the advertisement is private to the cluster credential (ZooKeeper ACL).
"""

from __future__ import annotations

import io
import time
from pathlib import Path

import numpy as np
import pytest
from kazoo.exceptions import NoAuthError

from linkstream.cli import main as cli_main
from linkstream.containers.replica import RunReplica
from linkstream.containers.security import Security
from linkstream.engine.oneshot.store import run_sparql
from linkstream.engine.replay import replay
from linkstream.scheduler.zkclient import ZkAuth, connect
from linkstream.store import PersistentStore
from linkstream.store.node import NODES
from linkstream.store.remote import RemoteStore, RemoteStoreError, advertisements_from
from tests.result_compare import differences, load
from tests.shared_paths import SLICE
from tests.store.remote_fixtures import (
    MANIFEST,
    StoreNodeProcess,
    build_store,
    replay_replica,
    secure_reader,
    slice_run,
)

pytestmark = [pytest.mark.zookeeper]

ROOT = "/linkstream"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("remote-store"))


@pytest.fixture
def zk(zk_server: str, zk_chroot: str) -> str:
    return f"{zk_server}{zk_chroot}"


@pytest.fixture
def client(zk: str, zk_auth: ZkAuth):
    c = connect(zk, zk_auth, timeout=2.0)
    yield c
    c.stop()
    c.close()


@pytest.fixture
def reader(client, zk_auth: ZkAuth) -> Security:
    """This test process as a secure reader: its CURVE key published under ROOT/readers."""
    return secure_reader(client, ROOT, zk_auth)


@pytest.fixture
def two_nodes(store_dir: Path, zk: str):
    """Two store nodes holding every partition (replication factor 2)."""
    nodes = [StoreNodeProcess(store_dir, zk), StoreNodeProcess(store_dir, zk)]
    yield nodes
    for n in nodes:
        n.stop()


def _norm(t: np.ndarray) -> np.ndarray:
    return np.unique(t, axis=0) if len(t) else t.reshape(0, 3)


@pytest.mark.parametrize("prefer", ["shm", "tcp"])
def test_remote_lookups_equal_the_local_store(
    store_dir: Path, two_nodes, client, reader, prefer: str
) -> None:
    local = PersistentStore.open(store_dir)
    remote = RemoteStore(
        client=client,
        root=ROOT,
        prefer=prefer,
        curve_client=reader.client,
        cache_bytes=1 << 20,
        dictionary=local.dictionary,
    )
    try:
        remote.wait_nodes(2)
        assert set(remote.transports().values()) == {prefer}
        loc, rem = local.snapshot(), remote.snapshot()
        assert rem.graphs() == loc.graphs()
        for g in loc.graphs():
            t = loc.triples(g)
            assert np.array_equal(_norm(rem.triples(g)), _norm(t))
            for s, p, o in t[::5].tolist():
                for q in (
                    (s, None, None),
                    (None, p, None),
                    (None, None, o),
                    (s, p, None),
                    (None, p, o),
                    (s, None, o),
                    (s, p, o),
                ):
                    assert np.array_equal(_norm(rem.match(g, *q)), _norm(loc.match(g, *q))), (g, q)
            vertices = np.concatenate([t[:, 0], t[:, 2], [10**9, -1]])
            for p in (None, int(t[0, 1])):
                for d in ("out", "in"):
                    a, b = rem.neighbours(g, vertices, p, d), loc.neighbours(g, vertices, p, d)
                    ka, kb = np.lexsort(np.stack(a)), np.lexsort(np.stack(b))
                    assert all(np.array_equal(x[ka], y[kb]) for x, y in zip(a, b))
            for p in sorted(set(t[:, 1].tolist())):
                assert rem.cardinality(g, p) == loc.cardinality(g, p)
                assert np.array_equal(rem.subjects(g, p), loc.subjects(g, p))
                assert np.array_equal(rem.objects(g, p), loc.objects(g, p))
                assert np.array_equal(rem.instances(g, p), loc.instances(g, p))
        stats = remote.cache.stats()
        assert 0 < stats["bytes"] <= stats["capacity"] and stats["hits"] > stats["misses"]
        for text in (
            "SELECT ?s ?o WHERE { ?s <http://purl.oclc.org/NET/ssnx/ssn#observes> ?o } ORDER BY ?s ?o",
            "SELECT ?t (COUNT(*) AS ?n) WHERE { ?x a ?t } GROUP BY ?t ORDER BY ?t",
            "SELECT ?s ?lat WHERE { ?s <http://www.insight-centre.org/citytraffic#hasStartLatitude> ?lat "
            "FILTER(?lat > 56.1) } ORDER BY ?s",
            f"ASK FROM <{'http://127.0.0.1:9000/WebGlCity/RDF/SensorRepository.rdf'}> {{ ?s ?p ?o }}",
        ):
            want = run_sparql(local, text)
            assert run_sparql(remote, text) == want, text
            assert want.get("boolean") is True or want["results"]["bindings"], text
    finally:
        remote.close()
        local.close()


@pytest.mark.parametrize(
    ("prefer", "cache_bytes"), [("shm", 256 << 10), ("tcp", 256 << 10), ("shm", 2 << 10), ("tcp", 2 << 10)]
)
@pytest.mark.parametrize("dialect", ["csparql", "cqels"])
def test_container_engine_reading_remotely_equals_embedded(
    two_nodes, client, reader, dialect: str, prefer: str, cache_bytes: int
) -> None:
    local_lines, local_stats, rep = replay_replica(dialect, None)
    rep.close()
    remote = RemoteStore(
        client=client, root=ROOT, curve_client=reader.client, prefer=prefer, cache_bytes=cache_bytes
    )
    try:
        remote.wait_nodes(2)
        lines, stats, rep = replay_replica(dialect, remote)
        rep.close()
    finally:
        remote.close()
    assert local_lines.count("\n") > 100
    assert sorted(lines.splitlines()) == sorted(local_lines.splitlines())
    # the static data held: no graph file loaded, no static triple in the engine (the
    # joins look the delta's keys up): the block cache only, within its bound
    assert local_stats["mode"] == "local" and stats["mode"] == "remote"
    assert stats["engine_static_triples"] == 0 < local_stats["engine_static_triples"]
    assert stats["engine_static_bytes"] == 0 and stats["lookups"] > 0 and stats["looked_up_triples"] > 0
    assert stats["materialised_bytes"] == 0  # no query part matches static triples only
    assert 0 < stats["cache_bytes"] <= stats["cache_capacity"] == cache_bytes
    assert stats["failovers"] == 0
    if cache_bytes < local_stats["engine_static_bytes"]:
        # a cache smaller than the static graph: blocks are evicted and read again
        assert stats["cache_evictions"] > 0 and stats["read_bytes"] > local_stats["engine_static_bytes"]


def test_remote_results_equal_the_oracle(two_nodes, client, reader, tmp_path: Path) -> None:
    remote = RemoteStore(client=client, root=ROOT, curve_client=reader.client)
    try:
        remote.wait_nodes(2)
        for dialect in ("csparql", "cqels"):
            lines, _, rep = replay_replica(dialect, remote)
            rep.close()
            out = tmp_path / f"{dialect}.jsonl"
            out.write_text(lines, encoding="utf-8")
            got = load(out)
            for q in (q for q in MANIFEST["queries"] if q["dialect"] == dialect):
                want = load(SLICE / q["expected"])
                # the run replays every stream of the dialect: it reports past the end of
                # this query's own streams, where the oracle (one query, its streams) stops
                last = max((t for _, t in want), default=None)
                mine = {
                    (q["name"], t): rows
                    for (name, t), rows in got.items()
                    if name == q["id"] and (last is None or t <= last)
                }
                assert not differences(want, mine), (q["id"], differences(want, mine))
    finally:
        remote.close()


def test_killing_a_replicated_store_node_leaves_queries_running(two_nodes, client, reader) -> None:
    first, second = two_nodes
    want, _, rep = replay_replica("csparql", None)
    rep.close()
    remote = RemoteStore(
        client=client, root=ROOT, curve_client=reader.client, prefer="tcp", cache_bytes=64 << 10
    )
    try:
        remote.wait_nodes(2)
        before, _, rep = replay_replica("csparql", remote)
        rep.close()
        assert sorted(before.splitlines()) == sorted(want.splitlines())
        # the node reads go to first (sorted by name); kill it without goodbye
        used = sorted(remote.nodes())[0]
        victim = first if first.adv.node == used or not first.adv.node else second
        victim.kill()
        remote.cache.clear()  # every block must now come from the survivor
        after, stats, rep = replay_replica("csparql", remote)
        rep.close()
        assert sorted(after.splitlines()) == sorted(want.splitlines())
        # the dead node was noticed: by a failed read, or by its znode vanishing first
        deadline = time.monotonic() + 10
        while len(remote.nodes()) != 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert list(remote.nodes()) == [n.adv.node for n in two_nodes if n is not victim]
    finally:
        remote.close()


def test_an_unreplicated_partition_of_a_dead_node_is_a_clear_error(
    store_dir: Path, zk: str, client, reader
) -> None:
    a = StoreNodeProcess(store_dir, zk, "--partitions", "0-1")
    b = StoreNodeProcess(store_dir, zk, "--partitions", "2-3")
    try:
        local = PersistentStore.open(store_dir)
        remote = RemoteStore(
            client=client,
            root=ROOT,
            prefer="tcp",
            curve_client=reader.client,
            cache_bytes=64 << 10,
            dictionary=local.dictionary,
        )
        remote.wait_nodes(2)
        try:
            snap = remote.snapshot()
            assert np.array_equal(_norm(snap.triples(None)), _norm(local.snapshot().triples(None)))
            a.kill()
            remote.cache.clear()
            with pytest.raises(
                RemoteStoreError, match=r"partition [01] of graph folder g\d: no live store node holds it"
            ):
                snap.triples(None)
            # a container evaluating queries then: planning reads nothing (the joins look
            # static triples up per report), the first report's lookups say it
            spec, texts, streams = slice_run("cqels")
            rep = RunReplica(spec, remote=remote)
            try:
                assert rep.preplan(texts) == len(texts)
                rq = rep.register("cqels-Q1", texts["cqels-Q1"])
                with pytest.raises(RemoteStoreError, match="no live store node holds it"):
                    replay(rep.engine, [rq], streams, io.StringIO())
            finally:
                rep.close()
        finally:
            local.close()
            remote.close()
    finally:
        a.stop()
        b.stop()


def test_advertisement_is_private_to_the_cluster_credential(two_nodes, zk: str, client) -> None:
    advs = advertisements_from(client, ROOT)
    assert len(advs) == 2
    for adv in advs:
        assert adv.partitions == (0, 1, 2, 3) and adv.partitions_total == 4
        assert set(adv.transports) >= {"shm", "tcp"} and "rdma" not in adv.transports
        assert adv.dictionary["uri"].startswith("lmdb:/")
    stranger = connect(zk, None, timeout=2.0)
    try:
        with pytest.raises(NoAuthError):
            stranger.get_children(f"{ROOT}/{NODES}")
    finally:
        stranger.stop()
        stranger.close()


def test_store_node_bad_input_is_one_line(
    tmp_path: Path, store_dir: Path, capsys: pytest.CaptureFixture
) -> None:
    assert cli_main(["store-node", "--store", str(tmp_path / "none")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("error: store-node: ") and "store.json" in err
    assert cli_main(["store-node", "--store", str(store_dir), "--partitions", "2-9"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == "error: store-node: --partitions: [4, 5, 6, 7, 8, 9] outside the store's partitions 0..3"
