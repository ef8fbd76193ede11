"""CURVE on store nodes: a real ``linkstream store-node`` process, real ZooKeeper, real ZeroMQ.

A store node started with ``--zk`` (security on: the cluster credential) serves its TCP
regions and its dictionary as CURVE servers admitting only the cluster's published keys
(containers, the driver, readers under ``ROOT/readers``) and advertises its public key.
A secure reader whose key is published reads equal data; an unknown key and a plaintext
client get nothing and are counted in ``linkstream_dataplane_rejected_peers_total``
(``socket="store"``); a reader without keys is told so in one line.  Without ``--zk`` the
TCP transport needs ``--insecure``.  Shared-memory segments are owner-only.
"""

from __future__ import annotations

import os
import stat
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

from linkstream.cli import main as cli_main
from linkstream.containers.runtime import ContainerRuntime
from linkstream.containers.security import Security
from linkstream.rdma.regions import RegionError
from linkstream.rdma.tcp import TcpReader
from linkstream.scheduler.zkclient import ZkAuth, connect
from linkstream.store import PersistentStore
from linkstream.store.dictserver import DictionaryError, RemoteDictionary
from linkstream.store.remote import RemoteStore, RemoteStoreError
from tests.store.remote_fixtures import StoreNodeProcess, build_store, secure_reader

pytestmark = [pytest.mark.zookeeper]

ROOT = "/linkstream"
METRIC = "linkstream_dataplane_rejected_peers_total"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_store(tmp_path_factory.mktemp("secure-store"), partitions=2)


@pytest.fixture
def client(zk_server: str, zk_chroot: str, zk_auth: ZkAuth) -> Iterator:
    c = connect(f"{zk_server}{zk_chroot}", zk_auth, timeout=2.0)
    yield c
    c.stop()
    c.close()


@pytest.fixture
def node(store_dir: Path, zk_server: str, zk_chroot: str) -> Iterator[StoreNodeProcess]:
    n = StoreNodeProcess(store_dir, f"{zk_server}{zk_chroot}", "--metrics-port", "0")
    yield n
    n.stop()


def rejected(node: StoreNodeProcess, reason: str) -> float:
    with urllib.request.urlopen(f"http://{node.adv.metrics}/metrics", timeout=5) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(METRIC + "{") and 'socket="store"' in line and f'reason="{reason}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _norm(t: np.ndarray) -> np.ndarray:
    return np.unique(t, axis=0) if len(t) else t.reshape(0, 3)


def test_a_secure_reader_reads_what_the_local_store_holds(
    node: StoreNodeProcess, client, zk_auth: ZkAuth, store_dir: Path
) -> None:
    adv = node.adv
    assert len(adv.curve) == 40 and adv.transports["tcp"]["endpoint"]["curve"] == adv.curve
    reader = secure_reader(client, ROOT, zk_auth)
    local = PersistentStore.open(store_dir)
    remote = RemoteStore(
        client=client, root=ROOT, prefer="tcp", dictionary_via="node", curve_client=reader.client
    )
    try:
        remote.wait_nodes(1)
        loc, rem = local.snapshot(), remote.snapshot()
        for g in loc.graphs():
            assert np.array_equal(_norm(rem.triples(g)), _norm(loc.triples(g)))
        terms = ["<http://purl.oclc.org/NET/ssnx/ssn#observes>", "<http://example.org/not-there>"]
        ids = remote.dictionary.lookup_many(terms)
        assert ids.tolist() == local.dictionary.lookup_many(terms).tolist() and ids[0] > 0 == ids[1]
        assert remote.dictionary.decode_many(ids[:1]) == terms[:1]
    finally:
        remote.close()
        local.close()
    assert rejected(node, "unknown_key") == 0 and rejected(node, "not_curve") == 0


def test_a_container_is_admitted_with_the_key_of_its_membership(
    node: StoreNodeProcess, zk_server: str, zk_chroot: str, zk_auth: ZkAuth, store_dir: Path
) -> None:
    """A real container runtime publishes its key with its membership (no reader key):
    the store node admits it, as the runtime's ``--remote-store`` reads do."""
    security = Security.secure(zk_auth)
    runtime = ContainerRuntime(
        f"{zk_server}{zk_chroot}", container_id="oc-7", security=security, session_timeout=2.0
    )
    runtime.start()
    local = PersistentStore.open(store_dir)
    remote = RemoteStore([node.adv], prefer="tcp", dictionary_via="node", curve_client=security.client)
    try:
        assert np.array_equal(_norm(remote.snapshot().triples(None)), _norm(local.snapshot().triples(None)))
        assert len(remote.dictionary) == len(local.dictionary)
    finally:
        remote.close()
        local.close()
        runtime.close()
    assert rejected(node, "unknown_key") == 0


def test_an_unknown_key_is_refused_and_counted(node: StoreNodeProcess, zk_auth: ZkAuth) -> None:
    stranger = Security.secure(zk_auth)  # the credential, but its key published nowhere
    keys = stranger.client(node.adv.curve, "the store node")
    d = node.adv.descriptor("tcp")
    region = sorted(d.regions)[0]
    reader = TcpReader(d, timeout_s=1.0, curve=keys)
    try:
        with pytest.raises(RegionError, match="did not answer in time .*refused this reader's CURVE key"):
            reader.read(region, 0, 1)
    finally:
        reader.close()
    dictionary = RemoteDictionary(node.adv.dictionary["address"], timeout_s=1.0, curve=keys)
    try:
        with pytest.raises(DictionaryError, match="did not answer in time"):
            len(dictionary)
    finally:
        dictionary.close()
    wait_until(lambda: rejected(node, "unknown_key") >= 2, "two unknown_key rejections")


def test_a_plaintext_client_gets_nothing_and_is_counted(node: StoreNodeProcess) -> None:
    d = node.adv.descriptor("tcp")
    region = sorted(d.regions)[0]
    # our own reader refuses to speak plaintext to a node advertising a key
    with pytest.raises(RegionError, match="speaks CURVE: a reader needs client keys"):
        TcpReader(d, timeout_s=1.0)
    keyless = RemoteStore([node.adv], prefer="tcp")
    try:
        with pytest.raises(
            RemoteStoreError, match=r"speaks CURVE \(not --insecure\): this reader has no cluster keys"
        ):
            keyless.snapshot().triples(None)
    finally:
        keyless.close()
    # a raw plaintext peer: the request never reaches the server
    ctx = zmq.Context()
    s = ctx.socket(zmq.REQ)
    s.linger = 0
    s.rcvtimeo = 1000
    s.connect(d.endpoint["address"])
    try:
        s.send(msgpack.packb({"reads": [[region, 0, 1]]}))
        with pytest.raises(zmq.Again):
            s.recv_multipart()
    finally:
        s.close(0)
        ctx.term()
    wait_until(lambda: rejected(node, "not_curve") >= 1, "a not_curve rejection")


def test_tcp_without_zookeeper_needs_insecure(store_dir: Path, capsys: pytest.CaptureFixture) -> None:
    assert cli_main(["store-node", "--store", str(store_dir)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "error: store-node: without --zk the tcp transport cannot check its readers' CURVE keys: "
        "give --zk (the cluster's keys), --insecure (plaintext, anyone), or --transports shm"
    )


def test_an_insecure_node_is_read_in_plaintext_and_shm_segments_are_owner_only(store_dir: Path) -> None:
    n = StoreNodeProcess(store_dir, None)  # --insecure
    try:
        assert n.adv.curve == "" and "curve" not in n.adv.transports["tcp"]["endpoint"]
        local = PersistentStore.open(store_dir)
        remote = RemoteStore([n.adv], prefer="tcp", dictionary=local.dictionary)
        try:
            assert np.array_equal(
                _norm(remote.snapshot().triples(None)), _norm(local.snapshot().triples(None))
            )
        finally:
            remote.close()
            local.close()
        segments = [i["location"]["segment"] for i in n.adv.transports["shm"]["regions"].values()]
        assert segments
        for seg in segments:
            st = os.stat(f"/dev/shm/{seg}")
            assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid(), seg
    finally:
        n.stop()
