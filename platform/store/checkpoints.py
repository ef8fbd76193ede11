"""Checkpoints: named objects of msgpack header + raw numpy buffers, a manifest, a pointer.

A checkpoint is a set of objects written under ``ckpt-<id>/`` of a
:class:`~linkstream.store.checkpoint_backends.Backend` (``file:///path`` or
``s3://bucket/prefix``), then its ``MANIFEST`` (written last: the sizes, crc32 and sha256
of every object, and the caller's metadata), then the pointer ``LATEST`` naming it.  A
checkpoint whose manifest exists is *complete*; the pointer is replaced atomically (a file
rename, an S3 put of one small object; in a cluster it would be a ZooKeeper node), so a
crash at any point leaves the previous complete checkpoint in force.

Objects may also be *shared* (``shared/<name>``): immutable objects several checkpoints
refer to (e.g. chunks of an append-only dictionary), written once and listed, with their
checksums, in the manifest of every checkpoint that needs them.

Object layout (:func:`encode_blob`)::

    b"LSCK" | u32 header_len | msgpack {"h": header, "a": [[dtype, shape], ...]}
    | zero padding to 8 bytes | each buffer (raw, C order), padded to 8 bytes

Nothing is pickled: headers are msgpack maps of plain values and buffers are numpy arrays
of fixed-size dtypes (object dtypes are refused).

Loading (:meth:`CheckpointStore.load`) reads the manifest the pointer names and checks
every object's size and checksums; a missing or corrupt object makes that checkpoint
unusable and the previous complete one is tried, with one log line naming the problem.
Old checkpoints are deleted once ``keep`` newer complete ones exist.
"""

from __future__ import annotations

import hashlib
import logging
import re
import struct
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np

from linkstream.store.checkpoint_backends import Backend, BackendError, open_backend

__all__ = [
    "Blob",
    "Checkpoint",
    "CheckpointError",
    "CheckpointStore",
    "decode_blob",
    "encode_blob",
    "open_checkpoints",
]

log = logging.getLogger(__name__)

MAGIC = b"LSCK"
FORMAT = 1
_LEN = struct.Struct("<I")
POINTER = "LATEST"
MANIFEST = "MANIFEST"
SHARED = "shared/"
_CKPT = re.compile(r"^ckpt-(\d{12})/")


class CheckpointError(ValueError):
    """A checkpoint (or an object of one) that cannot be used; the message says which and why."""


@dataclass
class Blob:
    """One object: a msgpack-able header and the numpy arrays it refers to by index."""

    header: dict[str, Any]
    arrays: list[np.ndarray] = field(default_factory=list)


def _pad(n: int) -> int:
    return -n % 8


def encode_blob(blob: Blob) -> bytes:
    """The bytes of one object (layout in the module docstring)."""
    arrays = [np.ascontiguousarray(a) for a in blob.arrays]
    for a in arrays:
        if a.dtype.hasobject:
            raise CheckpointError("object arrays cannot go into a checkpoint")
    meta = msgpack.packb(
        {"h": blob.header, "a": [[a.dtype.str, list(a.shape)] for a in arrays]}, use_bin_type=True
    )
    parts: list[bytes | memoryview] = [MAGIC, _LEN.pack(len(meta)), meta, b"\0" * _pad(8 + len(meta))]
    for a in arrays:
        raw = a.reshape(-1).view(np.uint8).data if a.size else b""
        parts += [raw, b"\0" * _pad(a.nbytes)]
    return b"".join(parts)


def decode_blob(data: bytes, where: str = "object") -> Blob:
    """Parses :func:`encode_blob` bytes (arrays are read-only views of ``data``).

    Raises:
        CheckpointError: The bytes are not such an object.
    """
    if len(data) < 8 or data[:4] != MAGIC:
        raise CheckpointError(f"{where}: not a checkpoint object")
    (n,) = _LEN.unpack_from(data, 4)
    if 8 + n > len(data):
        raise CheckpointError(f"{where}: header runs past the end")
    try:
        meta = msgpack.unpackb(data[8 : 8 + n], raw=False, strict_map_key=True)
        header, specs = meta["h"], meta["a"]
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as e:
        raise CheckpointError(f"{where}: header is not valid msgpack ({e})") from None
    if not isinstance(header, dict) or not isinstance(specs, list):
        raise CheckpointError(f"{where}: malformed header")
    pos = 8 + n + _pad(8 + n)
    arrays = []
    buf = memoryview(data)
    for spec in specs:
        try:
            dt = np.dtype(spec[0])
            shape = tuple(int(x) for x in spec[1])
        except (TypeError, ValueError, IndexError) as e:
            raise CheckpointError(f"{where}: bad array description {spec!r} ({e})") from None
        if dt.hasobject or any(x < 0 for x in shape):
            raise CheckpointError(f"{where}: bad array description {spec!r}")
        size = dt.itemsize * int(np.prod(shape, dtype=np.int64))
        if pos + size > len(data):
            raise CheckpointError(f"{where}: array data runs past the end")
        arrays.append(np.frombuffer(buf[pos : pos + size], dtype=dt).reshape(shape))
        pos += size + _pad(size)
    if pos != len(data):
        raise CheckpointError(f"{where}: {len(data) - pos} stray bytes at the end")
    return Blob(header, arrays)


def digest(data: bytes) -> dict[str, Any]:
    """The manifest's entry of an object: its size, crc32 and sha256."""
    return {"size": len(data), "crc32": zlib.crc32(data), "sha256": hashlib.sha256(data).hexdigest()}


@dataclass
class Checkpoint:
    """A complete, verified checkpoint as loaded.

    Attributes:
        id: Its id (``ckpt-<id>/`` on the backend).
        meta: The metadata given to :meth:`CheckpointStore.write`.
        objects: Every object of the checkpoint, by name (shared ones as ``shared/<name>``).
        created: Wall-clock time (s since the epoch) it was written.
    """

    id: str
    meta: dict[str, Any]
    objects: dict[str, Blob]
    created: float

    def blob(self, name: str) -> Blob:
        """Object ``name``; :class:`CheckpointError` if the checkpoint has none."""
        got = self.objects.get(name)
        if got is None:
            raise CheckpointError(f"checkpoint {self.id} has no object {name!r}")
        return got


class CheckpointStore:
    """Writes and loads checkpoints on one backend (see the module docstring).

    Args:
        backend: Where the objects go.
        keep: Complete checkpoints kept (older ones, and shared objects only they used, go).
    """

    def __init__(self, backend: Backend, keep: int = 3) -> None:
        self.backend = backend
        self.keep = max(1, keep)
        self.uri = backend.uri
        #: shared objects known to exist -> their digest (filled by writes and loads)
        self._shared: dict[str, dict[str, Any]] = {}
        self.writes = 0
        self.write_seconds = 0.0
        self.bytes_written = 0

    # ------------------------------------------------------------------ listing

    def shared(self) -> set[str]:
        """Keys (``shared/<name>``) of the shared objects this store wrote or loaded."""
        return set(self._shared)

    def ids(self) -> list[str]:
        """Ids of the complete checkpoints (with a manifest), oldest first."""
        out = []
        for key in self.backend.keys("ckpt-"):
            m = _CKPT.match(key)
            if m and key == "ckpt-%s/%s" % (m.group(1), MANIFEST):
                out.append(m.group(1))
        return out

    def latest_id(self) -> str | None:
        """The id the pointer names (``None``: no checkpoint yet, or no readable pointer)."""
        try:
            doc = msgpack.unpackb(self.backend.get(POINTER), raw=False)
            got = doc.get("id") if isinstance(doc, dict) else None
            return got if isinstance(got, str) and re.fullmatch(r"\d{12}", got) else None
        except KeyError:
            return None
        except (ValueError, msgpack.UnpackException):
            log.error("checkpoints %s: the %s pointer is unreadable; using the manifests", self.uri, POINTER)
            return None

    # ------------------------------------------------------------------ writing

    def write(
        self,
        objects: Mapping[str, Blob | bytes],
        meta: dict[str, Any] | None = None,
        shared: Mapping[str, Callable[[], Blob | bytes]] | None = None,
    ) -> str:
        """Writes one checkpoint and makes it the latest; returns its id.

        Args:
            objects: This checkpoint's own objects, by name (``[A-Za-z0-9_.-]``).
            meta: msgpack-able metadata kept in the manifest (:attr:`Checkpoint.meta`).
            shared: Shared objects the checkpoint needs, by name, each with a function making
                its content; one already on the backend (written earlier) is not made again.

        Raises:
            BackendError: The backend refused a write (the previous checkpoint stays latest).
        """
        t0 = time.perf_counter()
        known = self.ids()
        last = max([int(i) for i in known] + [int(self.latest_id() or 0)], default=0)
        cid = "%012d" % (last + 1)
        entries: dict[str, dict[str, Any]] = {}
        written = 0
        for name, obj in objects.items():
            if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name == MANIFEST:
                raise CheckpointError(f"bad checkpoint object name {name!r}")
            data = obj if isinstance(obj, bytes) else encode_blob(obj)
            self.backend.put("ckpt-%s/%s" % (cid, name), data)
            entries[name] = digest(data)
            written += len(data)
        for name, make in (shared or {}).items():
            key = SHARED + name
            entry = self._shared.get(key)
            if entry is None:
                obj = make()
                data = obj if isinstance(obj, bytes) else encode_blob(obj)
                self.backend.put(key, data)
                entry = self._shared[key] = digest(data)
                written += len(data)
            entries[key] = entry
        manifest = {
            "format": FORMAT,
            "id": cid,
            "created": time.time(),
            "meta": meta or {},
            "objects": entries,
        }
        self.backend.put("ckpt-%s/%s" % (cid, MANIFEST), msgpack.packb(manifest, use_bin_type=True))
        self.backend.put(POINTER, msgpack.packb({"id": cid}, use_bin_type=True))
        self.writes += 1
        self.bytes_written += written
        self.write_seconds += time.perf_counter() - t0
        try:
            self._retain([*known, cid])
        except (BackendError, OSError) as e:  # old checkpoints left behind: harmless
            log.warning("checkpoints %s: cannot delete old checkpoints: %s", self.uri, e)
        return cid

    def adopt(self, name: str, entry: dict[str, Any]) -> None:
        """Takes shared object ``name`` that another process wrote (an operator container's
        task snapshot), with its :func:`digest`: a :meth:`write` that names it lists it in
        its manifest without making it again, and a load verifies it."""
        self._shared[SHARED + name] = dict(entry)

    def _retain(self, ids: list[str]) -> None:
        ids = sorted(set(ids))
        drop, keep = ids[: -self.keep], ids[-self.keep :]
        if drop:
            keys = [k for k in self.backend.keys("ckpt-") if (m := _CKPT.match(k)) and m.group(1) in drop]
            # manifests first gone last: a crash in between leaves incomplete checkpoints only
            keys.sort(key=lambda k: k.endswith("/" + MANIFEST))
            self.backend.delete(keys)
        used: set[str] = set()
        for cid in keep:
            try:
                used |= {k for k in self._manifest(cid)["objects"] if k.startswith(SHARED)}
            except CheckpointError:
                return  # cannot tell what is still used: delete no shared object
        # incomplete checkpoints (no manifest) older than the kept ones are debris of a crash
        debris = [
            k
            for k in self.backend.keys("ckpt-")
            if (m := _CKPT.match(k)) and m.group(1) not in ids and m.group(1) < keep[0]
        ]
        gone = [k for k in self.backend.keys(SHARED) if k not in used]
        if debris or gone:
            self.backend.delete(debris + gone)
        for k in gone:
            self._shared.pop(k, None)

    # ------------------------------------------------------------------ loading

    def _manifest(self, cid: str) -> dict[str, Any]:
        try:
            doc = msgpack.unpackb(self.backend.get("ckpt-%s/%s" % (cid, MANIFEST)), raw=False)
        except KeyError:
            raise CheckpointError(f"checkpoint {cid} has no manifest") from None
        except (ValueError, msgpack.UnpackException) as e:
            raise CheckpointError(f"checkpoint {cid}: the manifest is not valid msgpack ({e})") from None
        if (
            not isinstance(doc, dict)
            or doc.get("format") != FORMAT
            or not isinstance(doc.get("objects"), dict)
        ):
            raise CheckpointError(f"checkpoint {cid}: the manifest is not a format-{FORMAT} manifest")
        return doc

    def meta(self, cid: str) -> dict[str, Any]:
        """The metadata in checkpoint ``cid``'s manifest (objects are not read).

        Raises:
            CheckpointError: No readable manifest.
        """
        return dict(self._manifest(cid).get("meta") or {})

    def load_id(self, cid: str, without: str | None = None) -> Checkpoint:
        """Checkpoint ``cid``, every object verified against the manifest.

        ``without``: objects whose name starts with it are neither read nor returned.

        Raises:
            CheckpointError: Missing manifest or object, a size or checksum mismatch, an
                undecodable object.
            BackendError: The backend cannot be read.
        """
        doc = self._manifest(cid)
        objects: dict[str, Blob] = {}
        for name, want in doc["objects"].items():
            if without and name.startswith(without):
                continue
            key = name if name.startswith(SHARED) else "ckpt-%s/%s" % (cid, name)
            try:
                data = self.backend.get(key)
            except KeyError:
                raise CheckpointError(f"checkpoint {cid}: object {key} is missing") from None
            got = digest(data)
            for k in ("size", "crc32", "sha256"):
                if got[k] != want.get(k):
                    raise CheckpointError(
                        f"checkpoint {cid}: object {key} is corrupt ({k} {got[k]} != manifest {want.get(k)})"
                    )
            objects[name] = decode_blob(data, f"checkpoint {cid}: object {key}")
            if name.startswith(SHARED):
                self._shared[name] = want
        return Checkpoint(cid, dict(doc.get("meta") or {}), objects, float(doc.get("created") or 0.0))

    def load(self) -> Checkpoint | None:
        """The latest usable checkpoint, or ``None`` when there is none at all.

        The pointer's checkpoint comes first, then the other complete ones, newest first;
        each unusable one is skipped with an error log line naming the problem.

        Raises:
            CheckpointError: Checkpoints exist but none of them is usable (never a silent
                start from scratch: the log they covered may be gone).
        """
        order = load_order(self.ids(), self.latest_id())
        problems = []
        for k, cid in enumerate(order):
            try:
                ck = self.load_id(cid)
            except CheckpointError as e:
                problems.append(str(e))
                log_fallback(self.uri, e, order, k)
                continue
            if problems:
                log.warning("%s: restored from checkpoint %s, not the latest", self.uri, cid)
            return ck
        if problems:
            raise CheckpointError("no usable checkpoint in %s: %s" % (self.uri, "; ".join(problems)))
        return None


def load_order(ids: list[str], first: str | None) -> list[str]:
    """The order in which to try checkpoints: ``first`` (the pointer's), then the others
    newest first."""
    return ([first] if first else []) + [i for i in reversed(ids) if i != first]


def log_fallback(
    uri: str, error: Exception, order: list[str], k: int, last: str = "no other checkpoint"
) -> None:
    """Log that checkpoint ``order[k]`` is unusable and what is tried next (``last`` when it
    was the last one)."""
    nxt = order[k + 1] if k + 1 < len(order) else None
    log.error(
        "%s: %s; %s",
        uri,
        error,
        "falling back to the previous complete checkpoint %s" % nxt if nxt else last,
    )


def open_checkpoints(uri: str, *, keep: int = 3, s3_client: Any = None) -> CheckpointStore:
    """A :class:`CheckpointStore` on ``uri`` (``file:///path``, a path, ``s3://bucket/prefix``).

    Raises:
        BackendError: A URI of another scheme, or a location that cannot be created.
    """
    return CheckpointStore(open_backend(uri, s3_client=s3_client), keep=keep)


def blob_of_strings(strings: Sequence[str | None], header: dict[str, Any] | None = None) -> Blob:
    """A blob holding ``strings`` (``None`` allowed) as one UTF-8 buffer and int64 end offsets."""
    enc = [(s or "").encode("utf-8") for s in strings]
    ends = np.cumsum([len(b) for b in enc], dtype=np.int64) if enc else np.empty(0, np.int64)
    none = np.asarray([s is None for s in strings], dtype=np.bool_)
    data = np.frombuffer(b"".join(enc), dtype=np.uint8)
    return Blob({**(header or {}), "kind": "strings", "n": len(enc)}, [data, ends, none])


def strings_of_blob(blob: Blob) -> list[str | None]:
    """The strings :func:`blob_of_strings` stored."""
    try:
        data, ends, none = blob.arrays
        raw = data.tobytes()
        out: list[str | None] = []
        start = 0
        for end, missing in zip(ends.tolist(), none.tolist()):
            out.append(None if missing else raw[start:end].decode("utf-8"))
            start = end
    except (ValueError, UnicodeDecodeError) as e:
        raise CheckpointError(f"malformed string object: {e}") from None
    return out
