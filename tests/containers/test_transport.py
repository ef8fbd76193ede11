"""PUSH/PULL channels over real ZeroMQ sockets on 127.0.0.1: round trips, rejection of
malformed messages, back-pressure and CURVE."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import numpy as np
import pytest
import zmq
import zmq.auth
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from zmq.utils.monitor import recv_monitor_message

from linkstream.containers.transport import BackPressure, CurveKeys, Receiver, Sender
from linkstream.containers.wire import BatchMessage, EndOfStream, Heartbeat, Message, encode
from linkstream.operators.batch import Batch


@pytest.fixture(scope="module")
def channel() -> Iterator[tuple[Sender, Receiver]]:
    receiver = Receiver()
    sender = Sender(receiver.endpoint, linger_ms=0)
    yield sender, receiver
    sender.close()
    receiver.close()


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    k = draw(st.integers(0, 4))
    names = draw(st.lists(st.text(min_size=1, max_size=8), min_size=k, max_size=k, unique=True))
    # sizes on both sides of pyzmq's 64 KiB copy threshold
    n = draw(st.integers(0, 40) | st.sampled_from([1000, 3000]))
    ints = hnp.from_dtype(np.dtype(np.int64))
    cols = draw(hnp.arrays(np.int64, (k, n), elements=ints))
    counts = draw(hnp.arrays(np.int64, (n,), elements=ints))
    return Batch(tuple(names), cols, counts)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    batch=batches(),
    seq=st.integers(0, 2**63 - 1),
    watermark=st.none() | st.integers(-(2**63), 2**63 - 1),
    stream=st.text(max_size=20),
)
def test_random_batches_round_trip_byte_exact(
    channel: tuple[Sender, Receiver], batch: Batch, seq: int, watermark: int | None, stream: str
) -> None:
    sender, receiver = channel
    sender.send(BatchMessage(stream, "task-1", 3, seq, batch, watermark), timeout=5.0)
    msg = receiver.recv(timeout=5.0)
    assert isinstance(msg, BatchMessage)
    assert (msg.stream, msg.task, msg.epoch, msg.seq, msg.watermark) == (stream, "task-1", 3, seq, watermark)
    assert msg.batch.vars == batch.vars
    assert msg.batch.cols.shape == batch.cols.shape
    assert msg.batch.cols.tobytes() == batch.cols.tobytes()
    assert msg.batch.counts.tobytes() == batch.counts.tobytes()


def test_control_messages_and_copying_mode(channel: tuple[Sender, Receiver]) -> None:
    receiver = Receiver(copy=True)
    with Sender(receiver.endpoint, copy=True, linger_ms=0) as sender:
        sent: list[Message] = [Heartbeat("a", 1, 10), EndOfStream("a", 1, 5)]
        for m in sent:
            sender.send(m, timeout=2.0)
        assert [receiver.recv(2.0) for _ in sent] == sent
    receiver.close()


def test_malformed_messages_are_skipped_not_fatal(channel: tuple[Sender, Receiver]) -> None:
    _, receiver = channel
    raw = zmq.Context.instance().socket(zmq.PUSH)
    raw.setsockopt(zmq.LINGER, 0)
    raw.connect(receiver.endpoint)
    good = Batch(("a",), np.arange(4, dtype=np.int64).reshape(1, 4), np.ones(4, dtype=np.int64))
    frames = [bytes(f) for f in encode(BatchMessage("s", "t", 0, 0, good))]
    rejected = receiver.stats.rejected
    raw.send_multipart([b"garbage"])
    raw.send_multipart([frames[0], frames[1][:-1], frames[2]])
    raw.send_multipart(frames[:2])
    raw.send_multipart(frames)
    msg = receiver.recv(timeout=5.0)
    raw.close()
    assert isinstance(msg, BatchMessage)
    assert msg.batch.cols.tolist() == [[0, 1, 2, 3]]
    assert receiver.stats.rejected == rejected + 3
    assert receiver.recv(timeout=0.05) is None


def test_recv_times_out() -> None:
    with Receiver() as receiver:
        t0 = time.monotonic()
        assert receiver.recv(timeout=0.2) is None
        assert 0.15 <= time.monotonic() - t0 < 1.0


def test_run_loop_stops_on_handler_event_and_idle() -> None:
    receiver = Receiver()
    sender = Sender(receiver.endpoint, linger_ms=0)
    for i in range(5):
        sender.send(Heartbeat("a", 0, i), timeout=2.0)
    sender.send(EndOfStream("a", 0, 0), timeout=2.0)
    got: list[Message] = []
    n = receiver.run(lambda m: got.append(m) or isinstance(m, EndOfStream), idle_timeout=5.0)
    assert n == 6 and got[-1] == EndOfStream("a", 0, 0)
    assert [m.watermark for m in got[:5]] == [0, 1, 2, 3, 4]

    stop = threading.Event()
    threading.Timer(0.2, stop.set).start()
    t0 = time.monotonic()
    assert receiver.run(got.append, stop=stop, poll_interval=0.05) == 0
    assert time.monotonic() - t0 < 2.0
    assert receiver.run(got.append, idle_timeout=0.1, poll_interval=0.05) == 0
    sender.close()
    receiver.close()


def _big(seq: int) -> BatchMessage:
    n = 16_384  # 384 KiB per message: a few fill the kernel's TCP buffers
    cols = np.empty((2, n), dtype=np.int64)
    cols[0] = seq
    cols[1] = np.arange(n)
    return BatchMessage("s", "t", 0, seq, Batch(("a", "b"), cols, np.ones(n, dtype=np.int64)))


def test_backpressure_reported_and_nothing_lost() -> None:
    receiver = Receiver(rcvhwm=1, rcvbuf=64 * 1024)
    sender = Sender(receiver.endpoint, sndhwm=1, sndbuf=64 * 1024, linger_ms=0)
    accepted = 0
    refused: BatchMessage | None = None
    # The receiver is stalled (never calls recv): queues fill and the sender must say so.
    for seq in range(500):
        msg = _big(seq)
        if not sender.offer(msg, timeout=0.1):
            refused = msg
            break
        accepted += 1
    assert refused is not None, "a stalled receiver never produced back-pressure"
    assert 1 <= accepted < 100
    assert sender.stats.backpressure == 1
    with pytest.raises(BackPressure):
        sender.send(refused, timeout=0.05)

    got = []
    while (m := receiver.recv(timeout=0.5)) is not None:
        got.append(m)
        if len(got) == accepted:
            break
    assert [m.seq for m in got] == list(range(accepted))
    assert all(int(m.batch.cols[0, 0]) == m.seq and len(m.batch) == 16_384 for m in got)
    # Room again: the refused message goes through, nothing was dropped.
    sender.send(refused, timeout=5.0)
    last = receiver.recv(timeout=5.0)
    assert isinstance(last, BatchMessage) and last.seq == accepted
    sender.close()
    receiver.close()


def test_bound_sender_without_peer_reports_backpressure() -> None:
    with Sender("tcp://127.0.0.1:*", bind=True, linger_ms=0) as sender:
        assert sender.endpoint.startswith("tcp://127.0.0.1:")
        assert not sender.offer(Heartbeat("a", 0, 0), timeout=0.1)


# ----------------------------------------------------------------------------- CURVE


def _handshake_events(monitor: zmq.Socket, timeout: float = 3.0) -> set[str]:
    """Names of monitor events until a handshake outcome is seen (or ``timeout``)."""
    names: set[str] = set()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not any(n.startswith("HANDSHAKE") for n in names):
        if monitor.poll(50):
            names.add(zmq.Event(recv_monitor_message(monitor)["event"]).name)
    return names


@pytest.fixture()
def server_keys() -> tuple[bytes, bytes]:
    return CurveKeys.keypair()


def test_curve_round_trip(server_keys: tuple[bytes, bytes]) -> None:
    spub, ssec = server_keys
    cpub, csec = CurveKeys.keypair()
    receiver = Receiver(curve_keys=CurveKeys(spub, ssec))
    monitor = receiver.socket.get_monitor_socket()
    sender = Sender(receiver.endpoint, curve_keys=CurveKeys(cpub, csec, server_public=spub), linger_ms=0)
    sender.send(_big(0), timeout=2.0)
    msg = receiver.recv(timeout=3.0)
    assert isinstance(msg, BatchMessage) and msg.batch.cols[1].tolist() == list(range(16_384))
    assert "HANDSHAKE_SUCCEEDED" in _handshake_events(monitor)
    receiver.socket.disable_monitor()
    monitor.close()
    sender.close()
    receiver.close()


@pytest.mark.parametrize("client", ["plaintext", "wrong-server-key"])
def test_curve_server_refuses_unauthenticated_clients(client: str, server_keys: tuple[bytes, bytes]) -> None:
    spub, ssec = server_keys
    receiver = Receiver(curve_keys=CurveKeys(spub, ssec))
    monitor = receiver.socket.get_monitor_socket()
    if client == "plaintext":
        keys = None
    else:
        cpub, csec = CurveKeys.keypair()
        keys = CurveKeys(cpub, csec, server_public=CurveKeys.keypair()[0])
    sender = Sender(receiver.endpoint, curve_keys=keys, linger_ms=0)
    sender.offer(Heartbeat("intruder", 0, 1), timeout=0.5)
    events = _handshake_events(monitor)
    assert any(e.startswith("HANDSHAKE_FAILED") for e in events), events
    assert "HANDSHAKE_SUCCEEDED" not in events
    assert receiver.recv(timeout=0.3) is None
    receiver.socket.disable_monitor()
    monitor.close()
    sender.close()
    receiver.close()


def test_curve_allow_list(server_keys: tuple[bytes, bytes]) -> None:
    spub, ssec = server_keys
    good_pub, good_sec = CurveKeys.keypair()
    bad_pub, bad_sec = CurveKeys.keypair()
    receiver = Receiver(curve_keys=CurveKeys(spub, ssec, authorized_clients=frozenset({good_pub})))
    bad = Sender(receiver.endpoint, curve_keys=CurveKeys(bad_pub, bad_sec, server_public=spub), linger_ms=0)
    bad.offer(Heartbeat("bad", 0, 1), timeout=0.5)
    assert receiver.recv(timeout=0.5) is None
    good = Sender(
        receiver.endpoint, curve_keys=CurveKeys(good_pub, good_sec, server_public=spub), linger_ms=0
    )
    good.send(Heartbeat("good", 0, 2), timeout=2.0)
    assert receiver.recv(timeout=3.0) == Heartbeat("good", 0, 2)
    assert receiver.recv(timeout=0.2) is None
    bad.close()
    good.close()
    receiver.close()


def test_curve_keys_from_certificate_files(tmp_path) -> None:
    server_pub_file, server_sec_file = zmq.auth.create_certificates(tmp_path, "server")
    client_pub_file, client_sec_file = zmq.auth.create_certificates(tmp_path, "client")
    server = CurveKeys.from_files(server_sec_file, authorized_client_files=[client_pub_file])
    client = CurveKeys.from_files(client_sec_file, server_public_file=server_pub_file)
    assert client.server_public == server.public
    with pytest.raises(ValueError):
        CurveKeys.from_files(server_pub_file)
    with pytest.raises(ValueError):
        Sender("tcp://127.0.0.1:1", curve_keys=CurveKeys(client.public, client.secret))
