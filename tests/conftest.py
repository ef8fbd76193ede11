"""Shared fixtures: a real ZooKeeper server for the session, a fresh chroot per test.

The server is Debian's ``zookeeper`` package started by ``infra/zookeeper.sh`` on a
free 127.0.0.1 port; it is never skipped: a missing package is installed with
``infra/install-system-deps.sh`` and a server that does not start fails the tests that
need it, with the reason.

Cluster security is on by default, so the session has one ZooKeeper credential
(``zk_auth``): it is ``LINKSTREAM_CLUSTER_ZK_AUTH`` for everything the tests start (local
clusters write it to their ``zk-auth`` file, in-process ``replay --zk`` / ``status`` read
it) and ``kazoo_factory`` clients authenticate with it, so they can read a secure tree
(the nodes they create themselves keep open ACLs, as the scheduler tests expect).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from linkstream.scheduler.zkclient import ZkAuth

REPO = Path(__file__).resolve().parent.parent
ZK_SCRIPT = REPO / "infra" / "zookeeper.sh"
ZK_JAR = Path("/usr/share/java/zookeeper.jar")
ZK_TICK_MS = 200  # sessions may then last 0.4 s to 4 s
ZK_SESSION_TIMEOUT = 2.0  # seconds; what test clients ask for


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def four_letter_word(port: int, word: str, timeout: float = 1.0) -> str:
    """Sends a ZooKeeper four-letter command to 127.0.0.1:port and returns the reply."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def _ensure_zookeeper_installed() -> None:
    if ZK_JAR.exists() and shutil.which("java"):
        return
    result = subprocess.run(
        ["bash", str(REPO / "infra" / "install-system-deps.sh")], capture_output=True, text=True, check=False
    )
    if not (ZK_JAR.exists() and shutil.which("java")):
        pytest.fail(
            "ZooKeeper is not installed and infra/install-system-deps.sh could not install it "
            f"(exit {result.returncode}): {result.stderr.strip()[-2000:]}",
            pytrace=False,
        )


@pytest.fixture(scope="session")
def zk_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone ZooKeeper for the whole session; yields ``"127.0.0.1:PORT"``."""
    _ensure_zookeeper_installed()
    data_dir = tmp_path_factory.mktemp("zookeeper")
    port = _free_port()
    log_path = data_dir / "zookeeper.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(
            [
                "bash",
                str(ZK_SCRIPT),
                "--foreground",
                "--port",
                str(port),
                "--data-dir",
                str(data_dir),
                "--tick-time",
                str(ZK_TICK_MS),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"ZooKeeper exited with {proc.returncode}: {log_path.read_text(errors='replace')[-2000:]}",
                    pytrace=False,
                )
            try:
                if four_letter_word(port, "ruok") == "imok" and "not currently serving" not in (
                    four_letter_word(port, "srvr")
                ):
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"ZooKeeper on 127.0.0.1:{port} did not answer imok within 30 s", pytrace=False)
            time.sleep(0.05)
        yield f"127.0.0.1:{port}"
    finally:
        # The script exec'd java, so this PID is the server's; its data dir is thrown away.
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=10)


ZK_AUTH = ZkAuth.generate("linkstream-test")
ZK_AUTH_ENV = "LINKSTREAM_CLUSTER_ZK_AUTH"


PARSE_CACHE_ENV = "LINKSTREAM_QUERY_PARSE_CACHE"


@pytest.fixture(scope="session", autouse=True)
def no_parse_cache() -> Iterator[None]:
    """Commands the tests run keep no on-disk parse cache (``~/.cache/linkstream/parse``):
    every test parses its queries; ``tests/query/test_parse_store.py`` turns it on."""
    old = os.environ.get(PARSE_CACHE_ENV)
    os.environ[PARSE_CACHE_ENV] = "off"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(PARSE_CACHE_ENV, None)
        else:
            os.environ[PARSE_CACHE_ENV] = old


@pytest.fixture(scope="session", autouse=True)
def zk_auth() -> Iterator[ZkAuth]:
    """The session's cluster credential, also in ``LINKSTREAM_CLUSTER_ZK_AUTH``."""
    old = os.environ.get(ZK_AUTH_ENV)
    os.environ[ZK_AUTH_ENV] = f"{ZK_AUTH.user}:{ZK_AUTH.password}"
    try:
        yield ZK_AUTH
    finally:
        if old is None:
            os.environ.pop(ZK_AUTH_ENV, None)
        else:
            os.environ[ZK_AUTH_ENV] = old


@pytest.fixture(scope="session")
def zk_session_timeout() -> float:
    """Session timeout (seconds) that ``kazoo_factory`` clients ask for."""
    return ZK_SESSION_TIMEOUT


@pytest.fixture
def zk_chroot(zk_server: str) -> str:
    """A fresh chroot path (``/t-<uuid>``) for one test; it exists on the server."""
    chroot = f"/t-{uuid.uuid4().hex[:12]}"
    client = KazooClient(hosts=zk_server, timeout=ZK_SESSION_TIMEOUT)
    client.start(timeout=10)
    try:
        client.ensure_path(chroot)
    finally:
        client.stop()
        client.close()
    return chroot


@pytest.fixture
def kazoo_factory(zk_server: str, zk_chroot: str) -> Iterator[Callable[..., KazooClient]]:
    """Makes started kazoo clients inside the test's chroot; all are closed afterwards.

    Call it as ``kazoo_factory(timeout=2.0)``; keyword arguments go to ``KazooClient``.
    """
    clients: list[KazooClient] = []

    def make(**kwargs: object) -> KazooClient:
        kwargs.setdefault("timeout", ZK_SESSION_TIMEOUT)
        kwargs.setdefault("auth_data", ZK_AUTH.auth_data)
        client = KazooClient(hosts=f"{zk_server}{zk_chroot}", **kwargs)
        client.start(timeout=10)
        clients.append(client)
        return client

    yield make
    for client in clients:
        try:
            client.stop()
            client.close()
        except Exception:  # an already-closed client, or a server gone at teardown
            pass


@pytest.fixture
def kazoo_client(kazoo_factory: Callable[..., KazooClient]) -> KazooClient:
    """A started kazoo client whose chroot is the test's own (short session timeout)."""
    return kazoo_factory()


# HBase contract suites (tests/rdf, tests/store): the Thrift emulator and the optional live gateway


@pytest.fixture(scope="module")
def hbase_emulator_address() -> Iterator[str]:
    """An HBase Thrift 1 emulator (test double) for the module; yields ``host:port``."""
    from tests.rdf.hbase_emulator import HBaseThriftEmulator

    with HBaseThriftEmulator() as emulator:
        yield emulator.address


@pytest.fixture(scope="module")
def hbase_live_address() -> str:
    """``LINKSTREAM_TEST_HBASE`` (a real HBase Thrift gateway), or skip."""
    from tests.rdf.hbase_support import live_address_or_skip

    return live_address_or_skip()
