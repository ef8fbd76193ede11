"""ZooKeeper over TLS: a real server started by ``infra/zookeeper.sh --tls-dir`` (Netty,
TLS-only port), real kazoo clients through :class:`~linkstream.containers.security.Security`.

What must hold: a client with the cluster's CA connects and its nodes are private; a
plaintext client and a client that trusts another CA never get a session; the script
opens no plaintext port and keeps its keys private; bad TLS settings are one-line errors.
"""

from __future__ import annotations

import logging
import os
import socket
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.handlers.threading import KazooTimeoutError

from linkstream.containers.security import Security, SecurityError, resolve
from linkstream.scheduler.zkclient import ZkAuth, ZkTls
from tests.conftest import ZK_SCRIPT, _ensure_zookeeper_installed, _free_port


@pytest.fixture(scope="module")
def tls_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A TLS-only ZooKeeper; yields ``("127.0.0.1:PORT", tls_dir)``."""
    _ensure_zookeeper_installed()
    data = tmp_path_factory.mktemp("zk-tls")
    tls_dir = data / "tls"
    port = _free_port()
    result = subprocess.run(
        ["bash", str(ZK_SCRIPT), "--port", str(port), "--data-dir", str(data), "--tls-dir", str(tls_dir)]
        + ["--tick-time", "500", "--wait", "60"],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}", tls_dir
    finally:
        subprocess.run(["bash", str(ZK_SCRIPT), "stop", "--data-dir", str(data)], check=False, timeout=30)


@pytest.fixture
def quiet_kazoo() -> Iterator[None]:
    """kazoo logs every refused connection attempt; these tests expect refusals."""
    logger = logging.getLogger("kazoo")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def _other_ca(tmp_path: Path) -> Path:
    ca = tmp_path / "other-ca.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=someone-else",
        ]
        + ["-keyout", str(tmp_path / "other-ca.key"), "-out", str(ca)],
        check=True,
        capture_output=True,
    )
    return ca


def test_the_script_makes_a_private_ca_and_opens_no_plaintext_port(tls_zk: tuple[str, Path]) -> None:
    hosts, tls_dir = tls_zk
    for name in ("ca.key", "server.pem"):
        assert stat.S_IMODE(os.stat(tls_dir / name).st_mode) == 0o600, name
    assert (tls_dir / "ca.pem").read_text().startswith("-----BEGIN CERTIFICATE-----")
    cfg = (tls_dir.parent / "zoo.cfg").read_text()
    assert "secureClientPort=" in cfg and "\nclientPort=" not in cfg
    # a four-letter word in clear gets no answer: the port speaks TLS only
    host, port = hosts.split(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"ruok")
        s.settimeout(3)
        try:
            reply = s.recv(64)
        except (TimeoutError, ConnectionResetError):
            reply = b""
    assert b"imok" not in reply


def test_a_client_with_the_ca_connects_and_its_nodes_are_private(tls_zk: tuple[str, Path]) -> None:
    hosts, tls_dir = tls_zk
    auth = ZkAuth.generate("tls-test")
    security = Security.secure(auth, zk_tls=ZkTls.from_files(str(tls_dir / "ca.pem")))
    client = security.connect(hosts, 5.0)
    try:
        client.create("/tls-private", b"secret")
        assert client.get("/tls-private")[0] == b"secret"
        # the CURVE keys are fresh per process, the TLS setting stays
        assert security.with_fresh_keys().zk_tls == security.zk_tls
    finally:
        client.stop()
        client.close()
    # another TLS client without the credential can connect but not read the node
    stranger = KazooClient(hosts=hosts, timeout=5.0, **ZkTls(str(tls_dir / "ca.pem")).kazoo_args)
    stranger.start(timeout=20)
    try:
        with pytest.raises(NoAuthError):
            stranger.get("/tls-private")
    finally:
        stranger.stop()
        stranger.close()


@pytest.mark.usefixtures("quiet_kazoo")
def test_a_plaintext_client_gets_no_session(tls_zk: tuple[str, Path]) -> None:
    hosts, _ = tls_zk
    client = Security.secure(ZkAuth.generate()).kazoo(hosts, 3.0)
    try:
        with pytest.raises(KazooTimeoutError):
            client.start(timeout=4)
    finally:
        client.stop()
        client.close()


@pytest.mark.usefixtures("quiet_kazoo")
def test_a_client_that_trusts_another_ca_gets_no_session(tls_zk: tuple[str, Path], tmp_path: Path) -> None:
    hosts, _ = tls_zk
    security = Security.secure(ZkAuth.generate(), zk_tls=ZkTls.from_files(str(_other_ca(tmp_path))))
    client = security.kazoo(hosts, 3.0)
    try:
        with pytest.raises(KazooTimeoutError):
            client.start(timeout=4)
    finally:
        client.stop()
        client.close()


def test_bad_tls_settings_are_one_line_errors(tmp_path: Path) -> None:
    auth = tmp_path / "zk-auth"
    ZkAuth.generate().write(auth)
    with pytest.raises(SecurityError, match=r"missing\.pem: cannot read the ZooKeeper TLS CA"):
        resolve(auth_file=str(auth), zk_tls_ca=str(tmp_path / "missing.pem"))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(SecurityError, match=r"junk\.pem: the ZooKeeper TLS CA is not a PEM file"):
        resolve(auth_file=str(auth), zk_tls_ca=str(junk))
    ca = _other_ca(tmp_path)
    with pytest.raises(SecurityError, match="both a client certificate and its key"):
        resolve(auth_file=str(auth), zk_tls_ca=str(ca), zk_tls_cert=str(ca))
    with pytest.raises(SecurityError, match="needs --zk-tls-ca"):
        resolve(auth_file=str(auth), zk_tls_cert=str(ca), zk_tls_key=str(ca))
    security = resolve(auth_file=str(auth), zk_tls_ca=str(ca))
    assert security.zk_tls == ZkTls(str(ca)) and security.enabled
