"""The on-disk log of absorbed stream batches (``DIR/delta/log.bin``).

Each record is one stream batch, appended before the batch is published (write-ahead),
so a reopened store replays exactly the batches it had acknowledged::

    u32 little-endian header length | msgpack header {"stream", "ts", "graph", "n"}
    | n * 3 int64 little-endian (s, p, o)

A torn last record (a crash mid-append) is detected by its short length, reported and
cut off; nothing here unpickles or evaluates what it reads.

Several processes may share one log (see :mod:`linkstream.store.storelock`: every call
here except :meth:`DeltaLog.replay` runs under the store's lock).  Each keeps the offset
up to which it has read (:meth:`DeltaLog.read_from` returns the records others appended
since), and emptying the log replaces the file by a new one, so a process still holding
the old file sees :meth:`DeltaLog.replaced` and starts over from the checkpoint.
"""

from __future__ import annotations

import io
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import msgpack
import numpy as np

_log = logging.getLogger(__name__)
#: where a store directory keeps its log, relative to the directory
LOG_PATH = os.path.join("delta", "log.bin")
_LEN = struct.Struct("<I")
_MAX_HEADER = 1 << 16


@dataclass(frozen=True)
class LoggedBatch:
    """One batch read back from the log."""

    stream: str
    ts: int
    graph: str | None
    triples: np.ndarray


class DeltaLog:
    """Append-only batch log.

    Args:
        path: the log file (created with its folder if missing).
        fsync: ``os.fsync`` after each append (durability against power loss).
    """

    def __init__(self, path: str | os.PathLike[str], *, fsync: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fsync = fsync
        self._good = self._scan_end()
        # drop a torn tail so the next append starts on a record boundary
        if self.path.exists() and self.path.stat().st_size > self._good:
            _log.warning("%s: cutting a torn record at byte %d", self.path, self._good)
            with open(self.path, "r+b") as f:
                f.truncate(self._good)
        self._f = open(self.path, "ab")  # noqa: SIM115 - kept open for appends

    @property
    def end(self) -> int:
        """The size of the log file this object appends to."""
        return os.fstat(self._f.fileno()).st_size

    def append(self, stream: str, ts: int, graph: str | None, triples: np.ndarray) -> int:
        """Append one batch and flush it to the OS; returns the log's new end offset."""
        t = np.ascontiguousarray(triples, dtype="<i8").reshape(-1, 3)
        header = msgpack.packb({"stream": stream, "ts": int(ts), "graph": graph, "n": len(t)})
        self._f.write(_LEN.pack(len(header)) + header + t.tobytes())
        self._f.flush()
        if self._fsync:
            os.fsync(self._f.fileno())
        return self.end

    def read_from(self, offset: int) -> tuple[list[LoggedBatch], int]:
        """The complete records from byte ``offset`` on, and the offset after them."""
        out: list[LoggedBatch] = []
        if self.end <= offset:
            return out, offset
        with open(self.path, "rb") as f:
            f.seek(offset)
            while True:
                rec, pos = _read_record(f)
                if rec is None:
                    return out, pos
                out.append(rec)

    def replaced(self) -> bool:
        """Whether the log file was replaced (emptied by another process) since we opened it."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return True
        mine = os.fstat(self._f.fileno())
        return (st.st_ino, st.st_dev) != (mine.st_ino, mine.st_dev)

    def reopen(self) -> None:
        """Append to the file now at the log's path (after :meth:`replaced`)."""
        self.close()
        self._f = open(self.path, "ab")  # noqa: SIM115 - kept open for appends

    def replay(self) -> Iterator[LoggedBatch]:
        """The complete records of the log, oldest first."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            while True:
                rec, _ = _read_record(f)
                if rec is None:
                    return
                yield rec

    def truncate(self) -> None:
        """Empty the log (after its batches were written elsewhere).

        A new empty file replaces the old one, so that other processes appending to the
        old file notice (:meth:`replaced`) instead of reading new records at old offsets.
        """
        self._f.flush()
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            if self._fsync:
                os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self.reopen()

    def close(self) -> None:
        """Close the file (idempotent)."""
        if not self._f.closed:
            self._f.close()

    def _scan_end(self) -> int:
        """Byte offset after the last complete record."""
        if not self.path.exists():
            return 0
        with open(self.path, "rb") as f:
            while True:
                rec, good = _read_record(f)
                if rec is None:
                    return good


def read_batches(data: bytes) -> Iterator[LoggedBatch]:
    """The complete records of a log file's bytes, oldest first (a torn tail ends them)."""
    f = io.BytesIO(data)
    while True:
        rec, _ = _read_record(f)
        if rec is None:
            return
        yield rec


def _read_record(f: BinaryIO) -> tuple[LoggedBatch | None, int]:
    """The next record and the offset after it; ``(None, start)`` at the end or a torn record."""
    start = f.tell()
    raw = f.read(_LEN.size)
    if len(raw) < _LEN.size:
        return None, start
    (hlen,) = _LEN.unpack(raw)
    header = f.read(hlen) if hlen <= _MAX_HEADER else b""
    try:
        h = msgpack.unpackb(header) if len(header) == hlen else None
    except (ValueError, msgpack.UnpackException):
        h = None
    if not isinstance(h, dict) or not isinstance(h.get("n"), int) or h["n"] < 0:
        return None, start
    n = h["n"]
    body = f.read(n * 24)
    if len(body) < n * 24:
        return None, start
    t = np.frombuffer(body, dtype="<i8").astype(np.int64).reshape(n, 3)
    g = h.get("graph")
    return LoggedBatch(str(h["stream"]), int(h["ts"]), None if g is None else str(g), t), f.tell()
