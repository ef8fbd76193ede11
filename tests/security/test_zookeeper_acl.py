"""ZooKeeper security on by default: a real server, real coordinator and container processes.

An unauthenticated client (or one with another password) can read, create, change or
delete nothing under the cluster root; every node LinkStream made is private to the
cluster credential; processes without a credential refuse to start with one line.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NoNodeError

from linkstream.cluster.localcluster import LocalCluster
from linkstream.scheduler.layout import ClusterLayout, encode
from linkstream.scheduler.zkclient import CREDENTIALS_HINT, ZkAuth, connect, is_open, lock_down

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

ROOT = "/linkstream"


@pytest.fixture
def cluster(tmp_path: Path, zk_server: str, zk_chroot: str) -> Iterator[LocalCluster]:
    """One coordinator and two containers, secure (the default), in the test's chroot."""
    c = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=2.0, capacity=4)
    try:
        c.start(2, 1)
        c.api_urls(timeout=30)  # the coordinator has made its nodes
        yield c
    finally:
        c.stop()


def _tree(client: KazooClient, root: str = ROOT) -> list[str]:
    out, todo = [], [root]
    while todo:
        path = todo.pop()
        out.append(path)
        todo.extend(f"{path}/{c}" for c in client.get_children(path))
    return sorted(out)


def _stranger(hosts: str, **kwargs: object) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=2.0, **kwargs)  # type: ignore[arg-type]
    client.start(timeout=10)
    return client


def test_the_local_cluster_credential_file_is_private(cluster: LocalCluster) -> None:
    path = cluster.auth_file
    assert path is not None and path.exists()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "--zk-auth-file" in cluster.security_args()


def test_every_linkstream_node_is_private_to_the_cluster_credential(cluster: LocalCluster) -> None:
    auth = ZkAuth.from_file(cluster.auth_file)  # type: ignore[arg-type]
    client = cluster.client()
    try:
        nodes = _tree(client)
        layout = ClusterLayout(ROOT)
        # The membership, the coordinator and the election made their nodes.
        assert layout.container("oc-1") in nodes and layout.container("oc-2") in nodes
        assert any(p.startswith(layout.coordinators + "/") for p in nodes)
        for path in nodes:
            acl, _ = client.get_acls(path)
            assert list(acl) == auth.acl, f"{path}: {acl}"
            assert not is_open(acl)
    finally:
        client.stop()
        client.close()


@pytest.mark.parametrize("who", ["anonymous", "wrong password"])
def test_an_outsider_can_neither_read_nor_create_change_or_delete(cluster: LocalCluster, who: str) -> None:
    auth = ZkAuth.from_file(cluster.auth_file)  # type: ignore[arg-type]
    kwargs = {} if who == "anonymous" else {"auth_data": ZkAuth(auth.user, "not-the-password").auth_data}
    member = cluster.client()
    outsider = _stranger(cluster.hosts, **kwargs)
    try:
        nodes = _tree(member)
        layout = ClusterLayout(ROOT)
        fake = encode({"capacity": 100, "address": "tcp://127.0.0.1:1"})
        # The attack that broke a replay: a fake container node.
        with pytest.raises(NoAuthError):
            outsider.create(layout.container("oc-fake"), fake, ephemeral=True)
        for path in nodes:
            with pytest.raises(NoAuthError):
                outsider.get(path)
            with pytest.raises(NoAuthError):
                outsider.get_children(path)
            with pytest.raises(NoAuthError):
                outsider.set(path, b"{}")
            with pytest.raises(NoAuthError):
                outsider.create(f"{path}/intruder", b"{}")
            if path != ROOT:  # deleting a node needs the parent's DELETE permission
                with pytest.raises(NoAuthError):
                    outsider.delete(path)
            with pytest.raises(NoAuthError):
                outsider.set_acls(path, member.get_acls(path)[0] + [])
        after = _tree(member)  # the cluster goes on changing its own nodes; nobody else did
        assert not [p for p in after if p.rsplit("/", 1)[1] in ("intruder", "oc-fake")]
        assert set(member.get_children(layout.containers)) == {"oc-1", "oc-2"}
    finally:
        for c in (member, outsider):
            c.stop()
            c.close()


def test_processes_without_a_credential_refuse_to_start(zk_server: str, zk_chroot: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LINKSTREAM_CLUSTER_ZK_AUTH")}
    hosts = f"{zk_server}{zk_chroot}"
    for argv in (["container", "--zk", hosts], ["coordinator", "--zk", hosts], ["status", "--zk", hosts]):
        done = subprocess.run(
            [sys.executable, "-m", "linkstream.cli", *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, (argv, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert lines == [f"error: {CREDENTIALS_HINT}"], (argv, done.stderr)


def test_insecure_is_the_explicit_opt_out(tmp_path: Path, zk_server: str, zk_chroot: str) -> None:
    c = LocalCluster(tmp_path / "open", zk=f"{zk_server}{zk_chroot}", session_timeout=2.0, insecure=True)
    try:
        c.start(1, 0)
        assert c.auth_file is None and c.security_args() == ["--insecure"]
        assert not (tmp_path / "open" / "zk-auth").exists()
        outsider = _stranger(c.hosts)
        try:
            data, _ = outsider.get(ClusterLayout(ROOT).container("oc-1"))
            assert b"curve" not in data  # plaintext data plane: no key published
            assert is_open(outsider.get_acls(ROOT)[0])
        finally:
            outsider.stop()
            outsider.close()
    finally:
        c.stop()


def test_lock_down_makes_an_open_tree_private(zk_server: str, zk_chroot: str) -> None:
    hosts = f"{zk_server}{zk_chroot}"
    auth = ZkAuth.generate()
    opened = _stranger(hosts)
    member = connect(hosts, auth, 2.0)
    try:
        opened.ensure_path(f"{ROOT}/queries/q1")
        opened.ensure_path(f"{ROOT}/tasks")
        assert lock_down(member, ROOT, auth) == []
        for path in (ROOT, f"{ROOT}/queries", f"{ROOT}/queries/q1", f"{ROOT}/tasks"):
            assert list(member.get_acls(path)[0]) == auth.acl
        with pytest.raises(NoAuthError):
            opened.get(f"{ROOT}/queries/q1")
        with pytest.raises(NoAuthError):
            opened.create(f"{ROOT}/tasks/t1", b"{}")
        with pytest.raises(NoNodeError):
            member.get(f"{ROOT}/tasks/t1")
    finally:
        for c in (opened, member):
            c.stop()
            c.close()
