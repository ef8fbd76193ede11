"""Wire format: encode/decode round trips and strict rejection of malformed messages."""

from __future__ import annotations

import msgpack
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.containers.wire import (
    BatchMessage,
    EndOfStream,
    Heartbeat,
    WireError,
    decode,
    encode,
    encode_batch,
)
from linkstream.operators.batch import Batch


def _batch() -> Batch:
    cols = np.array([[1, 2, 3], [-4, 2**63 - 1, -(2**63)]], dtype=np.int64)
    return Batch(("s", "o"), cols, np.array([1, -1, 3], dtype=np.int64))


def _frames() -> list[bytes]:
    """A valid batch message, as plain bytes frames."""
    return [bytes(f) for f in encode_batch(_batch(), stream="st", task="t1", epoch=2, seq=7, watermark=99)]


def _header(frames: list[bytes]) -> dict:
    return msgpack.unpackb(frames[0])


def _with_header(frames: list[bytes], **changes: object) -> list[bytes]:
    h = _header(frames)
    for k, v in changes.items():
        if v is _DELETE:
            del h[k]
        else:
            h[k] = v
    return [msgpack.packb(h), *frames[1:]]


_DELETE = object()


def test_batch_round_trip_is_exact() -> None:
    frames = _frames()
    header = _header(frames)
    assert header == {
        "v": 1,
        "kind": "batch",
        "stream": "st",
        "task": "t1",
        "epoch": 2,
        "seq": 7,
        "vars": ["s", "o"],
        "n": 3,
        "dtype": "<i8",
        "watermark": 99,
    }
    msg = decode(frames)
    assert isinstance(msg, BatchMessage)
    assert (msg.stream, msg.task, msg.epoch, msg.seq, msg.watermark) == ("st", "t1", 2, 7, 99)
    assert msg.batch.vars == ("s", "o")
    assert msg.batch.cols.tobytes() == _batch().cols.tobytes()
    assert msg.batch.counts.tobytes() == _batch().counts.tobytes()
    assert not msg.batch.cols.flags.writeable


def test_encode_aliases_contiguous_arrays() -> None:
    b = _batch()
    frames = encode_batch(b, stream="s", task="t", epoch=0, seq=0)
    assert np.shares_memory(np.frombuffer(frames[1], dtype=np.int64), b.cols)
    assert np.shares_memory(np.frombuffer(frames[2], dtype=np.int64), b.counts)


def test_encode_copies_non_contiguous_columns() -> None:
    wide = np.arange(20, dtype=np.int64).reshape(2, 10)
    b = Batch(("a", "b"), wide[:, ::2], np.ones(5, dtype=np.int64))
    msg = decode([bytes(f) for f in encode_batch(b, stream="s", task="t", epoch=0, seq=0)])
    assert msg.batch.cols.tolist() == wide[:, ::2].tolist()


@pytest.mark.parametrize("batch", [Batch.empty(()), Batch.empty(("a", "b")), Batch.unit()])
def test_degenerate_batches(batch: Batch) -> None:
    msg = decode([bytes(f) for f in encode_batch(batch, stream="s", task="t", epoch=0, seq=0)])
    assert msg.batch.vars == batch.vars
    assert msg.batch.cols.shape == batch.cols.shape
    assert msg.batch.counts.tolist() == batch.counts.tolist()


def test_control_messages_round_trip() -> None:
    hb = Heartbeat("src", 3, -5)
    eos = EndOfStream("src", 3, 1000)
    assert decode([bytes(f) for f in encode(hb)]) == hb
    assert decode([bytes(f) for f in encode(eos)]) == eos
    assert msgpack.unpackb(encode(hb)[0]) == {
        "v": 1,
        "kind": "heartbeat",
        "source": "src",
        "partition": 3,
        "watermark": -5,
    }


@pytest.mark.parametrize(
    "bad",
    [
        Batch(("a",), np.zeros((2, 3), dtype=np.int64), np.zeros(3, dtype=np.int64)),
        Batch(("a",), np.zeros((1, 3), dtype=np.int64), np.zeros(4, dtype=np.int64)),
        Batch(("a",), np.zeros((1, 3)), np.zeros(3, dtype=np.int64)),
        Batch(("a", "a"), np.zeros((2, 3), dtype=np.int64), np.zeros(3, dtype=np.int64)),
    ],
)
def test_encode_rejects_inconsistent_batches(bad: Batch) -> None:
    with pytest.raises(WireError):
        encode_batch(bad, stream="s", task="t", epoch=0, seq=0)


def test_encode_rejects_bad_fields() -> None:
    with pytest.raises(WireError):
        encode_batch(_batch(), stream="s", task="t", epoch=-1, seq=0)
    with pytest.raises(WireError):
        encode(Heartbeat("s", -1, 0))
    with pytest.raises(WireError):
        encode("not a message")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda f: [], id="no-frames"),
        pytest.param(lambda f: f[:1], id="missing-arrays"),
        pytest.param(lambda f: f[:2], id="missing-counts"),
        pytest.param(lambda f: [*f, b""], id="extra-frame"),
        pytest.param(lambda f: [f[0], f[1][:-1], f[2]], id="short-cols"),
        pytest.param(lambda f: [f[0], f[1], f[2][:-8]], id="short-counts"),
        pytest.param(lambda f: [f[0], f[1] + b"\0" * 8, f[2]], id="long-cols"),
        pytest.param(lambda f: [f[0][:-3], f[1], f[2]], id="truncated-header"),
        pytest.param(lambda f: [f[0] + b"\x01", f[1], f[2]], id="trailing-header-bytes"),
        pytest.param(lambda f: [b"\xc1", f[1], f[2]], id="reserved-msgpack-byte"),
        pytest.param(lambda f: [msgpack.packb([1, 2]), f[1], f[2]], id="header-not-map"),
        pytest.param(lambda f: [msgpack.packb({1: 2}), f[1], f[2]], id="int-keys"),
        pytest.param(lambda f: [b"\x81" + b"\x00" * 70000, f[1], f[2]], id="huge-header"),
        pytest.param(lambda f: _with_header(f, v=2), id="version-2"),
        pytest.param(lambda f: _with_header(f, v=True), id="version-bool"),
        pytest.param(lambda f: _with_header(f, v=_DELETE), id="no-version"),
        pytest.param(lambda f: _with_header(f, kind="batches"), id="unknown-kind"),
        pytest.param(lambda f: _with_header(f, dtype=">i8"), id="big-endian"),
        pytest.param(lambda f: _with_header(f, dtype="<f8"), id="float"),
        pytest.param(lambda f: _with_header(f, n=4), id="n-too-big"),
        pytest.param(lambda f: _with_header(f, n=-1), id="n-negative"),
        pytest.param(lambda f: _with_header(f, n=2**64 - 1), id="n-uint64"),
        pytest.param(lambda f: _with_header(f, vars=["s"]), id="vars-too-few"),
        pytest.param(lambda f: _with_header(f, vars=["s", "s"]), id="vars-duplicate"),
        pytest.param(lambda f: _with_header(f, vars=["s", 1]), id="vars-not-str"),
        pytest.param(lambda f: _with_header(f, vars="so"), id="vars-string"),
        pytest.param(lambda f: _with_header(f, seq=-1), id="seq-negative"),
        pytest.param(lambda f: _with_header(f, seq=1.5), id="seq-float"),
        pytest.param(lambda f: _with_header(f, watermark="x"), id="watermark-str"),
        pytest.param(lambda f: _with_header(f, stream=b"st"), id="stream-bytes"),
        pytest.param(lambda f: _with_header(f, task=_DELETE), id="no-task"),
        pytest.param(lambda f: _with_header(f, extra=1), id="unknown-key"),
        pytest.param(lambda f: [msgpack.packb({"v": 1, "kind": "heartbeat"})], id="heartbeat-empty"),
        pytest.param(
            lambda f: [
                msgpack.packb({"v": 1, "kind": "heartbeat", "source": "a", "partition": 0, "watermark": 1}),
                b"",
            ],
            id="heartbeat-extra-frame",
        ),
        pytest.param(
            lambda f: [msgpack.packb({"v": 1, "kind": "eos", "source": "a", "partition": 0, "seq": -1})],
            id="eos-negative-seq",
        ),
        pytest.param(lambda f: [object(), f[1], f[2]], id="not-a-buffer"),
    ],
)
def test_decode_rejects_malformed(mutate) -> None:
    with pytest.raises(WireError):
        decode(mutate(_frames()))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), min_size=1, max_size=4))
def test_decode_of_random_frames_only_raises_wire_error(frames: list[bytes]) -> None:
    try:
        decode(frames)
    except WireError:
        pass


_values = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=5)
    | st.binary(max_size=5)
)


@settings(max_examples=300, deadline=None)
@given(
    key=st.sampled_from(["v", "kind", "stream", "task", "epoch", "seq", "vars", "n", "dtype", "watermark"]),
    value=_values | st.lists(_values, max_size=3),
    cut=st.integers(0, 40),
)
def test_decode_of_mutated_headers_only_raises_wire_error(key: str, value: object, cut: int) -> None:
    frames = _with_header(_frames(), **{key: value})
    frames[1] = frames[1][: len(frames[1]) - cut]
    try:
        msg = decode(frames)
    except WireError:
        return
    # Accepted only if still self-consistent.
    assert isinstance(msg, BatchMessage)
    assert msg.batch.cols.shape == (len(msg.batch.vars), len(msg.batch))
