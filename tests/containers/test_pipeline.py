"""Producer processes -> this process over real PUSH/PULL sockets: order, completeness,
watermarks, CURVE between processes."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zmq.auth

from linkstream.containers.transport import CurveKeys, Receiver
from linkstream.containers.watermarks import WatermarkTracker
from linkstream.containers.wire import BatchMessage, EndOfStream, Heartbeat, Message
from tests.containers.producer_proc import expected_batch

PRODUCER = Path(__file__).with_name("producer_proc.py")
DEADLINE_S = 15.0


def _start(endpoint: str, count: int, partition: int = 0, *extra: str) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(PRODUCER),
            "--endpoint",
            endpoint,
            "--count",
            str(count),
            "--partition",
            str(partition),
            "--source",
            f"p{partition}",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _collect(receiver: Receiver, producers: list[subprocess.Popen], eos_expected: int) -> list[Message]:
    """Everything received until ``eos_expected`` end-of-stream markers (or the deadline)."""
    got: list[Message] = []
    eos = 0
    deadline = time.monotonic() + DEADLINE_S
    while eos < eos_expected and time.monotonic() < deadline:
        msg = receiver.recv(timeout=0.2)
        if msg is None:
            for p in producers:
                assert p.poll() in (None, 0), f"producer failed: {p.communicate()[1][-2000:]}"
            continue
        got.append(msg)
        eos += isinstance(msg, EndOfStream)
    for p in producers:
        try:
            _, err = p.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        assert p.returncode == 0, err[-2000:]
    assert eos == eos_expected, f"only {eos} of {eos_expected} producers finished in {DEADLINE_S} s"
    return got


def _check_batch(msg: BatchMessage, partition: int) -> None:
    want = expected_batch(msg.seq, partition)
    assert msg.batch.vars == want.vars
    assert np.array_equal(msg.batch.cols, want.cols)
    assert np.array_equal(msg.batch.counts, want.counts)


def test_producer_process_delivers_1000_batches_in_order() -> None:
    receiver = Receiver(rcvhwm=50)
    producer = _start(receiver.endpoint, 1000)
    got = _collect(receiver, [producer], 1)
    receiver.close()
    batches = [m for m in got if isinstance(m, BatchMessage)]
    assert [m.seq for m in batches] == list(range(1000))
    for m in batches:
        _check_batch(m, 0)
        assert m.watermark == m.seq * 10 and m.epoch == 1 and m.task == "p0-task"
    heartbeats = [m for m in got if isinstance(m, Heartbeat)]
    assert [h.watermark for h in heartbeats] == [s * 10 for s in range(99, 1000, 100)]
    assert got[-1] == EndOfStream("p0", 0, 1000)
    assert receiver.stats.rejected == 0


def test_two_producers_fan_in_with_watermarks() -> None:
    receiver = Receiver()
    producers = [_start(receiver.endpoint, 300, p) for p in (0, 1)]
    tracker = WatermarkTracker.of([0, 1])
    combined = []
    per_partition: dict[int, list[int]] = {0: [], 1: []}
    for msg in _collect(receiver, producers, 2):
        if isinstance(msg, BatchMessage):
            partition = int(msg.batch.cols[1, 0]) // 1_000_000
            _check_batch(msg, partition)
            per_partition[partition].append(msg.seq)
            tracker.update(partition, msg.watermark)
        elif isinstance(msg, Heartbeat):
            tracker.update(msg.partition, msg.watermark)
        else:
            assert msg.seq == len(per_partition[msg.partition])
            tracker.finish(msg.partition)
        combined.append(tracker.watermark)
        seen = [per_partition[p][-1] * 10 if per_partition[p] else None for p in (0, 1)]
        if tracker.watermark is not None and not tracker.finished:
            # never ahead of what either partition has actually passed
            assert all(tracker.watermark <= s for s in seen if s is not None)
    receiver.close()
    assert per_partition == {0: list(range(300)), 1: list(range(300))}
    assert tracker.finished
    known = [w for w in combined if w is not None]
    assert known == sorted(known)


def test_curve_between_processes(tmp_path: Path) -> None:
    server_pub, server_sec = zmq.auth.create_certificates(tmp_path, "server")
    client_pub, client_sec = zmq.auth.create_certificates(tmp_path, "client")
    intruder_pub, intruder_sec = zmq.auth.create_certificates(tmp_path, "intruder")
    keys = CurveKeys.from_files(server_sec, authorized_client_files=[client_pub])
    receiver = Receiver(curve_keys=keys)
    intruder = _start(
        receiver.endpoint, 5, 1, "--curve-secret", str(intruder_sec), "--curve-server", str(server_pub)
    )
    producer = _start(
        receiver.endpoint, 50, 0, "--curve-secret", str(client_sec), "--curve-server", str(server_pub)
    )
    got = _collect(receiver, [producer], 1)
    intruder.kill()
    intruder.communicate()
    receiver.close()
    assert [m.seq for m in got if isinstance(m, BatchMessage)] == list(range(50))
    assert all(getattr(m, "source", "p0") == "p0" for m in got)
    assert all(m.task == "p0-task" for m in got if isinstance(m, BatchMessage))
