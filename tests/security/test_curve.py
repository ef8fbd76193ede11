"""CURVE on the data plane: a real container runtime, real ZooKeeper, real ZeroMQ peers.

The container's bound sockets (data plane and operator edges) admit only CURVE clients
whose public key a cluster member published in ZooKeeper; a plaintext peer, an unknown
key and a client holding the wrong server key get nothing through and are counted in
``linkstream_dataplane_rejected_peers_total``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from linkstream.containers.runtime import ContainerRuntime
from linkstream.containers.security import Security, SecurityError
from linkstream.containers.transport import CurveKeys, Sender
from linkstream.scheduler.keyring import KeyRing
from linkstream.scheduler.layout import ClusterLayout
from linkstream.scheduler.runs import RunNode, RunSpec
from tests.conftest import ZK_AUTH

pytestmark = [pytest.mark.zookeeper]

METRIC = "linkstream_dataplane_rejected_peers_total"


@pytest.fixture
def hosts(zk_server: str, zk_chroot: str) -> str:
    return f"{zk_server}{zk_chroot}"


@pytest.fixture
def container(hosts: str) -> Iterator[tuple[ContainerRuntime, Security]]:
    security = Security.secure(ZK_AUTH)
    runtime = ContainerRuntime(hosts, container_id="oc-1", security=security, session_timeout=2.0)
    runtime.start()
    try:
        yield runtime, security
    finally:
        runtime.close()


def rejected(runtime: ContainerRuntime, socket: str, reason: str) -> float:
    value = runtime.metrics.registry.get_sample_value(METRIC, {"socket": socket, "reason": reason})
    return value or 0.0


def wait_until(predicate: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def offer(endpoint: str, curve: CurveKeys | None, payload: bytes) -> Sender:
    sender = Sender(endpoint, linger_ms=0, curve_keys=curve)
    assert sender.offer_frames([payload], 1.0)  # queued locally; delivery needs the handshake
    return sender


def test_the_container_publishes_its_public_key_and_never_its_secret(
    container: tuple[ContainerRuntime, Security], hosts: str
) -> None:
    runtime, security = container
    member = Security.secure(ZK_AUTH).connect(hosts, 2.0)
    try:
        assert KeyRing(member).public_key("oc-1") == security.public
        data, _ = member.get(ClusterLayout().container("oc-1"))
        assert security.secret is not None and security.secret not in data
    finally:
        member.stop()
        member.close()


def test_unknown_and_plaintext_peers_are_rejected_and_counted(
    container: tuple[ContainerRuntime, Security], hosts: str
) -> None:
    runtime, security = container
    assert security.public is not None
    inbox = runtime._receiver
    senders = []
    try:
        # A plaintext peer: no handshake, nothing delivered.
        senders.append(offer(runtime.address, None, b"plaintext"))
        wait_until(lambda: rejected(runtime, "data", "not_curve") >= 1, "the plaintext peer counted")
        assert inbox.recv_frames(0.3) is None

        # A CURVE client whose key no member published.
        public, secret = CurveKeys.keypair()
        stranger = CurveKeys(public, secret, server_public=security.public)
        senders.append(offer(runtime.address, stranger, b"unknown key"))
        wait_until(lambda: rejected(runtime, "data", "unknown_key") >= 1, "the unknown key counted")
        assert inbox.recv_frames(0.3) is None

        # A client with a member's key but the wrong server key cannot complete a handshake.
        driver = Security.secure(ZK_AUTH)
        wrong = driver.client(CurveKeys.keypair()[0])
        senders.append(offer(runtime.address, wrong, b"wrong server key"))
        wait_until(lambda: rejected(runtime, "data", "bad_handshake") >= 1, "the bad handshake counted")

        # The operator-edge socket refuses the same way, counted under its own name.
        senders.append(offer(runtime._ops.address, None, b"plaintext edge"))
        wait_until(lambda: rejected(runtime, "ops", "not_curve") >= 1, "the plaintext edge peer counted")

        # A driver that published its key in the run node gets through.
        client = driver.connect(hosts, 2.0)
        try:
            spec = RunSpec(
                "r1", "tcp://127.0.0.1:1", "http://example.org/", 1000, driver_key=driver.public_text
            )
            RunNode(client).claim(spec)
            curve = driver.client(KeyRing(client).public_key("oc-1"), "container oc-1")
            senders.append(offer(runtime.address, curve, b"member"))
            frames = inbox.recv_frames(10.0)
            assert frames is not None and bytes(frames[0]) == b"member"
            assert inbox.recv_frames(0.3) is None  # still nothing from the others
        finally:
            client.stop()
            client.close()
    finally:
        for s in senders:
            s.close(0)


def test_a_secure_process_refuses_a_peer_without_a_published_key() -> None:
    with pytest.raises(SecurityError, match="published no CURVE public key"):
        Security.secure(ZK_AUTH).client("", "container oc-9")
    assert Security.insecure().client("", "container oc-9") is None
    assert Security.insecure().server(None) is None  # type: ignore[arg-type]
