"""Where checkpoint objects are kept: a local directory or an S3 bucket.

A backend is a flat key -> bytes map with four operations (:class:`Backend`); the
checkpoint logic (:mod:`linkstream.store.checkpoints`) is the same on both.  Keys are
``/``-separated relative names such as ``ckpt-000000000007/state-0``.

* :class:`FileBackend` (``file:///path``): one file per key; every object is written to a
  temporary name, fsynced and renamed, and the directory fsynced, so a key is either
  absent or whole (:meth:`~FileBackend.put` is atomic).
* :class:`S3Backend` (``s3://bucket/prefix``): one object per key through boto3; an S3
  ``PutObject`` is atomic by itself.  The endpoint, region and credentials come from the
  standard AWS configuration (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``,
  ``AWS_REGION``, ``~/.aws/config``, instance roles ...), which boto3 reads itself.

:func:`open_backend` picks one by URI.  boto3 is imported only for an ``s3://`` URI.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

__all__ = ["Backend", "BackendError", "FileBackend", "S3Backend", "fsync_dir", "open_backend"]


class BackendError(OSError):
    """A checkpoint location that cannot be used (bad URI, unreachable, refused)."""


class Backend(Protocol):
    """A flat key -> bytes map (see the module docstring)."""

    #: the URI this backend was opened from (for log lines)
    uri: str

    def put(self, key: str, data: bytes) -> None:
        """Stores ``data`` under ``key`` atomically (a reader sees the old or the new value)."""
        ...

    def get(self, key: str) -> bytes:
        """The bytes under ``key``; ``KeyError`` if there are none."""
        ...

    def keys(self, prefix: str = "") -> list[str]:
        """Every key starting with ``prefix``, sorted."""
        ...

    def delete(self, keys: list[str]) -> None:
        """Removes ``keys`` (missing ones are ignored)."""
        ...


def fsync_dir(path: str) -> None:
    """Makes the entries of directory ``path`` (a file created, renamed or removed) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileBackend:
    """Checkpoint objects as files under ``root`` (created if missing)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.uri = "file://" + self.root
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as e:
            raise BackendError(f"cannot create checkpoint directory {self.root}: {e.strerror or e}") from None

    def _path(self, key: str) -> str:
        parts = key.split("/")
        if not key or any(p in ("", ".", "..") for p in parts):
            raise BackendError(f"bad checkpoint key {key!r}")
        return os.path.join(self.root, *parts)

    def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        d = os.path.dirname(path)
        new_dir = not os.path.isdir(d)
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=d)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            os.unlink(tmp)
            raise
        os.close(fd)
        os.replace(tmp, path)
        fsync_dir(d)
        if new_dir:
            fsync_dir(os.path.dirname(d))

    def get(self, key: str) -> bytes:
        try:
            with open(self._path(key), "rb") as f:
                return f.read()
        except FileNotFoundError:
            raise KeyError(key) from None

    def keys(self, prefix: str = "") -> list[str]:
        out = []
        for dirpath, _dirs, files in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            for f in files:
                if f.startswith(".tmp-"):
                    continue
                key = f if rel == "." else "/".join([*rel.split(os.sep), f])
                if key.startswith(prefix):
                    out.append(key)
        return sorted(out)

    def delete(self, keys: list[str]) -> None:
        dirs = set()
        for key in keys:
            path = self._path(key)
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            dirs.add(os.path.dirname(path))
        for d in sorted(dirs, key=len, reverse=True):
            while d != self.root and d.startswith(self.root):
                try:
                    os.rmdir(d)  # only when empty
                except OSError:
                    break
                d = os.path.dirname(d)


class S3Backend:
    """Checkpoint objects under ``s3://bucket/prefix`` (see the module docstring).

    Args:
        bucket: The bucket (it must exist).
        prefix: Key prefix inside the bucket (``""``: the bucket's root).
        client: A boto3 S3 client; default ``boto3.client("s3")`` (standard AWS configuration).
    """

    def __init__(self, bucket: str, prefix: str = "", client: Any = None) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = "s3://%s/%s" % (bucket, self.prefix)
        if client is None:
            try:
                import boto3
            except ImportError:  # pragma: no cover - boto3 is a dependency
                raise BackendError("s3:// checkpoints need boto3 (pip install boto3)") from None
            client = boto3.client("s3")
        self.client = client
        from botocore.exceptions import BotoCoreError, ClientError

        self._errors = (BotoCoreError, ClientError)

    def _key(self, key: str) -> str:
        return "%s/%s" % (self.prefix, key) if self.prefix else key

    def _fail(self, what: str, key: str, e: Exception) -> BackendError:
        return BackendError(f"{self.uri}: cannot {what} {key}: {e}")

    def put(self, key: str, data: bytes) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except self._errors as e:
            raise self._fail("write", key, e) from None

    def get(self, key: str) -> bytes:
        try:
            got = self.client.get_object(Bucket=self.bucket, Key=self._key(key))
            return bytes(got["Body"].read())
        except self._errors as e:
            code = getattr(e, "response", {}).get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404"):
                raise KeyError(key) from None
            raise self._fail("read", key, e) from None

    def keys(self, prefix: str = "") -> list[str]:
        full = self._key(prefix) if prefix else (self.prefix + "/" if self.prefix else "")
        cut = len(self.prefix) + 1 if self.prefix else 0
        out: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full)
            for page in pages:
                out += [o["Key"][cut:] for o in page.get("Contents", ())]
        except self._errors as e:
            raise self._fail("list", prefix or "/", e) from None
        return sorted(out)

    def delete(self, keys: list[str]) -> None:
        for i in range(0, len(keys), 1000):
            chunk = [{"Key": self._key(k)} for k in keys[i : i + 1000]]
            try:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": chunk, "Quiet": True})
            except self._errors as e:
                raise self._fail("delete", keys[i], e) from None


def open_backend(uri: str, *, s3_client: Any = None) -> Backend:
    """The backend of ``uri``: ``file:///path``, a plain path, or ``s3://bucket/prefix``.

    Raises:
        BackendError: Another scheme, or a URI without a path / bucket.
    """
    u = urlparse(uri)
    if u.scheme in ("", "file"):
        if u.scheme == "file" and u.netloc not in ("", "localhost"):
            raise BackendError(f"checkpoint URI {uri!r}: file:// URIs name a local path (file:///path)")
        path = unquote(u.path) if u.scheme == "file" else uri
        if not path:
            raise BackendError(f"checkpoint URI {uri!r} has no path")
        return FileBackend(path)
    if u.scheme == "s3":
        if not u.netloc:
            raise BackendError(f"checkpoint URI {uri!r} has no bucket (s3://bucket/prefix)")
        return S3Backend(u.netloc, u.path, client=s3_client)
    raise BackendError(f"checkpoint URI {uri!r}: unknown scheme {u.scheme!r} (file:// or s3://)")
