"""One-sided region reads across real processes: shared memory, TCP, and RDMA where a device exists."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from linkstream.rdma import verbs
from linkstream.rdma.regions import (
    RegionDescriptor,
    RegionError,
    best_transport,
    open_reader,
    transport,
)
from tests.rdma.region_server_proc import arrays

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture(params=["shm", "tcp"])
def remote(request):
    """A server process publishing the arrays of seed 7 over one transport."""
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "region_server_proc.py"), request.param, "7"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    line = proc.stdout.readline()
    assert line, "region server did not start"
    yield request.param, line
    proc.stdin.close()
    proc.wait(timeout=10)


def test_reads_equal_the_published_arrays(remote):
    name, desc = remote
    expected = arrays(7)
    reader = open_reader(desc)
    try:
        assert reader.regions["ids"].length == len(expected["ids"])
        rng = np.random.default_rng(1)
        for region, a in expected.items():
            for _ in range(20):
                lo = int(rng.integers(0, len(a) + 1))
                hi = int(rng.integers(lo, len(a) + 1))
                got = reader.read(region, lo, hi)
                assert got.dtype == a.dtype and np.array_equal(got, a[lo:hi]), (name, region, lo, hi)
        whole = reader.read("ids", 0, len(expected["ids"]))
        assert np.array_equal(whole, expected["ids"])
        many = reader.read_many([("offsets", 10, 20), ("weights", 0, 5), ("empty", 0, 0)])
        assert np.array_equal(many[0], expected["offsets"][10:20])
        assert np.array_equal(many[1], expected["weights"][:5])
        assert len(many[2]) == 0
    finally:
        reader.close()


def test_out_of_range_and_unknown_regions_are_errors(remote):
    _, desc = remote
    reader = open_reader(desc)
    try:
        with pytest.raises(RegionError, match="outside"):
            reader.read("ids", 5, 200_000)
        with pytest.raises(RegionError, match="outside"):
            reader.read("ids", -1, 3)
        with pytest.raises(RegionError, match="unknown region"):
            reader.read("nope", 0, 1)
        # the server still answers afterwards
        assert len(reader.read("ids", 0, 3)) == 3
    finally:
        reader.close()


def test_tcp_server_answers_malformed_requests_with_errors():
    import msgpack
    import zmq

    server = transport("tcp").server()
    server.publish("x", np.arange(10, dtype=np.int64))
    sock = zmq.Context.instance().socket(zmq.REQ)
    sock.linger = 0
    sock.rcvtimeo = 5000
    sock.connect(server.descriptor().endpoint["address"])
    try:
        for bad in (b"\xc1garbage", msgpack.packb({"reads": "x"}), msgpack.packb({"reads": [["x", 0, 99]]})):
            sock.send(bad)
            reply = msgpack.unpackb(sock.recv_multipart()[0], raw=False)
            assert "error" in reply
        sock.send(msgpack.packb({"reads": [["x", 2, 5]]}))
        frames = sock.recv_multipart()
        assert np.array_equal(np.frombuffer(frames[1], dtype=np.int64), [2, 3, 4])
    finally:
        sock.close(0)
        server.close()


@pytest.mark.parametrize(
    "text, message",
    [
        ("not json", "not JSON"),
        ('{"endpoint": {}, "regions": {}}', "transport"),
        ('{"transport": "shm", "regions": {"a": {"dtype": "O", "length": 1}}}', "not allowed"),
        ('{"transport": "shm", "regions": {"a": {"dtype": "<i8", "length": -1}}}', "bad length"),
        ('{"transport": "pigeon", "endpoint": {}, "regions": {}}', "unknown transport"),
    ],
)
def test_bad_descriptors_are_rejected(text, message):
    with pytest.raises(RegionError, match=message):
        open_reader(text)


def test_descriptor_round_trip():
    server = transport("shm").server()
    try:
        server.publish("a", np.arange(5, dtype=np.int64))
        d = server.descriptor()
        again = RegionDescriptor.from_json(d.to_json())
        assert again == d
        assert json.loads(d.to_json())["regions"]["a"]["length"] == 5
        with pytest.raises(RegionError, match="already published"):
            server.publish("a", np.arange(2, dtype=np.int64))
        with pytest.raises(RegionError, match="cannot be published"):
            server.publish("obj", np.array(["x"], dtype=object))
    finally:
        server.close()


def test_best_transport_prefers_rdma_then_shared_memory_then_tcp():
    rdma_ok, _ = transport("rdma").available()
    same = best_transport(same_host=True).name
    other = best_transport(same_host=False).name
    if rdma_ok:
        assert same == other == "rdma"
    else:
        assert same == "shm" and other == "tcp"


@pytest.mark.rdma
@pytest.mark.skipif(
    not verbs.rdma_devices(), reason="no RDMA device: /sys/class/infiniband is absent or empty"
)
def test_rdma_one_sided_reads_equal_the_published_arrays():
    ok, why = transport("rdma").available()
    if not ok:
        pytest.skip(why)
    server = transport("rdma").server("127.0.0.1")
    expected = arrays(3)
    for k, a in expected.items():
        server.publish(k, a)
    reader = open_reader(server.descriptor().to_json())
    try:
        assert np.array_equal(reader.read("ids", 100, 5000), expected["ids"][100:5000])
        assert np.array_equal(reader.read("weights", 0, 777), expected["weights"])
    finally:
        reader.close()
        server.close()


def test_rdma_reports_why_it_is_unavailable():
    ok, why = transport("rdma").available()
    if not verbs.rdma_devices():
        assert not ok and "no RDMA device" in why
        with pytest.raises(RegionError, match="not usable here"):
            open_reader('{"transport": "rdma", "endpoint": {"host": "127.0.0.1", "port": 1}, "regions": {}}')
