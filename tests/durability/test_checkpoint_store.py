"""The checkpoint store on a local directory and on S3 (a real moto server, real boto3).

A checkpoint written is read back equal (headers, arrays of several dtypes, shared
objects); a corrupt, truncated or missing object makes the store fall back to the previous
complete checkpoint with a log line naming the object; old checkpoints and the shared
objects only they used are deleted.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from linkstream.store.checkpoint_backends import BackendError, FileBackend, S3Backend, open_backend
from linkstream.store.checkpoints import (
    Blob,
    CheckpointError,
    CheckpointStore,
    blob_of_strings,
    decode_blob,
    encode_blob,
    open_checkpoints,
    strings_of_blob,
)


def _state(k: int) -> dict[str, Blob]:
    rng = np.random.default_rng(k)
    return {
        "state-0": Blob(
            {"k": k, "names": ["a", "b"], "nested": {"x": [1, 2.5, None]}},
            [
                rng.integers(0, 1 << 40, size=(3, 100 + k), dtype=np.int64),
                np.arange(7, dtype=np.int32),
                np.array([True, False, True]),
                np.empty((0, 3), dtype=np.int64),
            ],
        ),
        "state-1": Blob({"empty": True}),
    }


def _same(a: Blob, b: Blob) -> None:
    assert a.header == b.header
    assert len(a.arrays) == len(b.arrays)
    for x, y in zip(a.arrays, b.arrays):
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def test_blob_round_trip_and_refusals() -> None:
    b = _state(3)["state-0"]
    data = encode_blob(b)
    assert len(data) % 8 == 0
    _same(decode_blob(data), b)
    with pytest.raises(CheckpointError, match="not a checkpoint object"):
        decode_blob(b"PK\x03\x04" + data[4:])
    with pytest.raises(CheckpointError, match="runs past the end"):
        decode_blob(data[:-16])
    with pytest.raises(CheckpointError, match="object arrays"):
        encode_blob(Blob({}, [np.array(["x", None], dtype=object)]))
    s = blob_of_strings(["<a>", None, '"é"@fr', ""])
    assert strings_of_blob(decode_blob(encode_blob(s))) == ["<a>", None, '"é"@fr', ""]


def _exercise(store: CheckpointStore) -> None:
    assert store.load() is None
    made: list[str] = []

    def chunk(name: str) -> Blob:
        made.append(name)
        return blob_of_strings([name, name + "!"])

    ids = []
    for k in range(5):
        shared = {"dict-%d" % j: (lambda j=j: chunk("dict-%d" % j)) for j in range(k + 1)}
        ids.append(store.write(_state(k), {"seq": 100 * k}, shared=shared))
    assert ids == ["%012d" % i for i in range(1, 6)]
    assert made == ["dict-%d" % j for j in range(5)]  # each shared object written once
    assert store.ids() == ids[-3:]  # keep=3
    ck = store.load()
    assert ck is not None and ck.id == ids[-1] and ck.meta == {"seq": 400}
    for name, blob in _state(4).items():
        _same(ck.blob(name), blob)
    assert strings_of_blob(ck.blob("shared/dict-2")) == ["dict-2", "dict-2!"]
    # a fresh store on the same location reads the same
    again = CheckpointStore(store.backend, keep=3)
    assert again.latest_id() == ids[-1]
    ck2 = again.load()
    assert ck2 is not None and ck2.meta == {"seq": 400}


def test_file_backend(tmp_path: Path) -> None:
    store = open_checkpoints("file://" + str(tmp_path / "ck"))
    assert isinstance(store.backend, FileBackend)
    _exercise(store)
    assert not list((tmp_path / "ck").rglob(".tmp-*"))


def test_s3_backend_through_moto(moto_s3: SimpleNamespace, s3_bucket: str) -> None:
    store = open_checkpoints(f"s3://{s3_bucket}/some/prefix")
    assert isinstance(store.backend, S3Backend)
    _exercise(store)
    keys = [o["Key"] for o in moto_s3.client().list_objects_v2(Bucket=s3_bucket)["Contents"]]
    assert all(k.startswith("some/prefix/") for k in keys)
    assert "some/prefix/LATEST" in keys and "some/prefix/ckpt-000000000005/MANIFEST" in keys


def test_s3_missing_bucket_is_one_clear_error(moto_s3: SimpleNamespace) -> None:
    store = open_checkpoints("s3://no-such-bucket-here/x")
    with pytest.raises(BackendError, match="s3://no-such-bucket-here/x: cannot list ckpt-: .*NoSuchBucket"):
        store.write(_state(0))


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete", "manifest"])
def test_corruption_falls_back_to_previous(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    store = open_checkpoints(str(tmp_path / "ck"))
    first = store.write(_state(1), {"seq": 1})
    second = store.write(_state(2), {"seq": 2})
    obj = tmp_path / "ck" / ("ckpt-%s" % second) / "state-0"
    if damage == "flip":
        data = bytearray(obj.read_bytes())
        data[len(data) // 2] ^= 0x40
        obj.write_bytes(bytes(data))
        want = "ckpt-%s/state-0 is corrupt (crc32" % second
    elif damage == "truncate":
        obj.write_bytes(obj.read_bytes()[:-8])
        want = "ckpt-%s/state-0 is corrupt (size" % second
    elif damage == "delete":
        obj.unlink()
        want = "ckpt-%s/state-0 is missing" % second
    else:
        (obj.parent / "MANIFEST").write_bytes(b"\xc1garbage")
        want = "checkpoint %s: the manifest is not valid msgpack" % second
    with caplog.at_level(logging.ERROR, logger="linkstream.store.checkpoints"):
        ck = CheckpointStore(open_backend(str(tmp_path / "ck"))).load()
    assert ck is not None and ck.id == first and ck.meta == {"seq": 1}
    _same(ck.blob("state-0"), _state(1)["state-0"])
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and want in errors[0]
    assert "falling back to the previous complete checkpoint %s" % first in errors[0]


def test_no_usable_checkpoint_is_an_error(tmp_path: Path) -> None:
    store = open_checkpoints(str(tmp_path / "ck"))
    only = store.write(_state(1))
    (tmp_path / "ck" / ("ckpt-%s" % only) / "state-1").unlink()
    with pytest.raises(
        CheckpointError, match="no usable checkpoint in file://.*object ckpt-%s/state-1 is missing" % only
    ):
        store.load()


def test_bad_uris() -> None:
    with pytest.raises(BackendError, match="unknown scheme 'gs'"):
        open_backend("gs://bucket/x")
    with pytest.raises(BackendError, match="has no bucket"):
        open_backend("s3:///x")
    with pytest.raises(BackendError, match="name a local path"):
        open_backend("file://host/x")
