"""Owners' stream logs: the pushed bodies of ``run --zk --ingest direct``, durable in the
shared state directory before the leader decides on them.

With ``--ingest direct`` the durability of an element's *body* (its terms and triples)
moves from the leader's ingest log to the stream's owner coordinator
(``docs/architecture.md``, "Direct ingest"): the owner appends every sequenced body of a
stream it owns, in the form it hands to the leader (the msgpack of
:func:`~linkstream.cluster.ingest.pack_elements` plus the stream, epoch and offset), to

    ``DIR/streams/<stream key>/<epoch, 20 digits>.log``

and fsyncs it before anybody else sees the body.  The leader's
:class:`~linkstream.engine.live.ingestlog.IngestLog` then records, per taken element, only a
*reference* ``(epoch, record, element index)`` (``TermRows.ref``), and a new leader
replaying the log reads the bodies back from here (:class:`BodyStore`).

Each ``(stream, epoch)`` has one writer: an epoch has one owner (the ZooKeeper node's
creation zxid); a later owner writes new files.  The owner starts a new *segment* once one
holds :data:`SEGMENT_BYTES`: ``<epoch>.log`` holds the epoch's first records, then
``<epoch>.<q of its first record, 12 digits>.log``.  After each cluster checkpoint the
leader deletes the segments wholly before the oldest body its ingest log still refers to
(:func:`prune`): the checkpoint holds the elements the log before it took, so only the
log's tail names bodies.  Records use the
ingest log's framing (CRC, ``q`` numbering each file's records from 0): a torn tail left
by a crash is cut off when the file is opened again, and a reader stops at it (such a
body was never handed to the leader, so no reference names it).  A record is named by
its ``q``, not by its offset: an owner whose hand-off failed gives the next body the same
offset again.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import msgpack

from linkstream.cluster.ingestwire import unpack_elements
from linkstream.cluster.streamowners import stream_key
from linkstream.engine.live.ingestlog import LogRecord, encode_record, scan_prefix, scan_records
from linkstream.engine.live.logship import ship_enabled
from linkstream.store.checkpoint_backends import fsync_dir

if TYPE_CHECKING:
    from linkstream.cluster.service import ClusterService

#: the directory of the stream logs inside the state directory
STREAMS_DIR = "streams"
#: decoded bodies a reader keeps (a replay reads the elements of one body in a row)
BODY_CACHE = 8
#: bytes after which an owner starts a new segment of a stream's log (old ones can go)
SEGMENT_BYTES = 64 << 20

_sync = getattr(os, "fdatasync", os.fsync)


def log_path(state_dir: str, iri: str, epoch: int, first: int = 0) -> str:
    """The segment of ``iri``'s bodies logged under ``epoch`` whose first record is ``first``."""
    name = "%020d.log" % epoch if first == 0 else "%020d.%012d.log" % (epoch, first)
    return os.path.join(state_dir, STREAMS_DIR, stream_key(iri), name)


def segments(state_dir: str, iri: str) -> list[tuple[int, int, str]]:
    """``(epoch, first record, path)`` of every segment of ``iri``'s log, in order."""
    where = os.path.join(state_dir, STREAMS_DIR, stream_key(iri))
    try:
        names = os.listdir(where)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        parts = name.split(".")
        if parts[-1] != "log" or not all(x.isdigit() for x in parts[:-1]) or len(parts) not in (2, 3):
            continue
        out.append((int(parts[0]), int(parts[1]) if len(parts) == 3 else 0, os.path.join(where, name)))
    return sorted(out)


@dataclass
class _File:
    fd: int
    next: int  # ``q`` of the next record
    size: int  # bytes of whole records in the open segment
    lock: threading.Lock = field(default_factory=threading.Lock)


class StreamLog:
    """The writer side (an owner coordinator): one appendable file per owned ``(stream, epoch)``.

    Args:
        state_dir: The shared state directory (``run --zk --state-dir``).
        segment_bytes: Bytes after which a new segment starts.
    """

    def __init__(self, state_dir: str, segment_bytes: int = SEGMENT_BYTES) -> None:
        self.state_dir = state_dir
        self.segment_bytes = segment_bytes
        self._files: dict[tuple[str, int], _File] = {}
        self._lock = threading.Lock()
        self.bodies = 0
        self.bytes = 0

    def _open(self, iri: str, epoch: int) -> _File:
        with self._lock:
            f = self._files.get((iri, epoch))
            if f is not None:
                return f
            mine = [(first, path) for e, first, path in segments(self.state_dir, iri) if e == epoch]
            first, path = mine[-1] if mine else (0, log_path(self.state_dir, iri, epoch))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            good = 0
            nxt = first
            if os.path.exists(path):  # written before in this epoch: continue after its good records
                with open(path, "rb") as fh:
                    data = fh.read()
                recs, good = scan_prefix(data)
                if good < len(data):
                    os.truncate(path, good)
                nxt = first + len(recs)
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            if good == 0:
                fsync_dir(os.path.dirname(path))
            f = self._files[(iri, epoch)] = _File(fd, nxt, good)
            return f

    def _next_segment(self, iri: str, epoch: int, f: _File) -> None:
        """Closes ``f``'s full segment; the next record starts a new one (under ``f.lock``)."""
        path = log_path(self.state_dir, iri, epoch, f.next)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        fsync_dir(os.path.dirname(path))
        os.close(f.fd)
        f.fd, f.size = fd, 0

    def reserve(self, iri: str, epoch: int) -> int:
        """The record number the next :meth:`append` of ``(iri, epoch)`` gets (the owner
        holds the stream's lock from here to the append: one body of a stream at a time)."""
        return self._open(iri, epoch).next

    def append(self, iri: str, epoch: int, offset: int, packed: bytes, record: int) -> None:
        """Appends one body as record ``record`` (``packed``: its hand-off bytes, its first
        element at ``offset``) and fsyncs it.

        Raises:
            OSError: The file could not be written (the push must then be refused; a part
                written is cut off again, so the next record follows the last good one).
        """
        f = self._open(iri, epoch)
        with f.lock:
            if record != f.next:
                raise ValueError("stream log of <%s>: record %d is not the next (%d)" % (iri, record, f.next))
            data = encode_record({"q": record, "o": int(offset)}, packed)
            try:
                view = memoryview(data)
                while view:
                    n = os.write(f.fd, view)
                    view = view[n:]
                _sync(f.fd)
            except OSError:
                os.ftruncate(f.fd, f.size)
                raise
            f.next = record + 1
            f.size += len(data)
            if f.size >= self.segment_bytes:
                try:
                    self._next_segment(iri, epoch, f)
                except OSError:  # the full segment stays open: the next append tries again
                    pass
        self.bodies += 1
        self.bytes += len(data)

    def close(self) -> None:
        with self._lock:
            files, self._files = self._files, {}
        for f in files.values():
            os.close(f.fd)


#: records' payloads a :class:`BodyStore` keeps indexed per file (the newest; older ones are
#: read from the file again if asked)
INDEX_KEEP = 4096


class BodyStore:
    """The reader side (a leader replaying its ingest log): the elements a reference names.

    Args:
        state_dir: The shared state directory.
    """

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir
        self._index: dict[str, dict[int, bytes]] = {}
        self._read: dict[str, int] = {}  # per file: the bytes of whole records indexed
        #: decoded bodies, the newest BODY_CACHE: ``(offset, elements)``
        self._bodies: OrderedDict[tuple[str, int, int], tuple[int, list[tuple[int, Any]]]] = OrderedDict()

    def _record(self, iri: str, epoch: int, q: int) -> bytes:
        mine = [(first, p) for e, first, p in segments(self.state_dir, iri) if e == epoch and first <= q]
        path = max(mine)[1] if mine else log_path(self.state_dir, iri, epoch)
        index = self._index.get(path)
        if index is None or q not in index:  # first read, or the file grew since: its new bytes
            index = self._index.setdefault(path, {})
            done = self._read.get(path, 0)
            if index and q < min(index):  # read before and dropped (the newest are kept): again
                done = 0
            try:
                with open(path, "rb") as fh:
                    fh.seek(done)
                    recs, n = scan_prefix(fh.read())
            except FileNotFoundError:
                recs, n = [], 0
            index.update((r.header["q"], r.payload) for r in recs)
            self._read[path] = done + n  # a torn tail is read again (its writer cuts and rewrites it)
            if len(index) > INDEX_KEEP:  # a leader reading a live log (--ingest meta) for long
                for old in sorted(index)[: len(index) - INDEX_KEEP]:
                    if old != q:
                        del index[old]
        if q not in index:
            raise LookupError(
                "stream log %s holds no record %d: the body of a logged element is missing" % (path, q)
            )
        return index[q]

    def _load(self, iri: str, epoch: int, q: int) -> tuple[int, list[tuple[int, Any]]]:
        key = (iri, epoch, q)
        got = self._bodies.get(key)
        if got is None:
            doc = msgpack.unpackb(self._record(iri, epoch, q), raw=False)
            got = self._bodies[key] = (int(doc["offset"]), unpack_elements(doc))
            while len(self._bodies) > BODY_CACHE:
                self._bodies.popitem(last=False)
        else:
            self._bodies.move_to_end(key)
        return got

    def body(self, iri: str, epoch: int, q: int) -> list[tuple[int, Any]]:
        """The elements ``(t, TermRows)`` of record ``q`` of ``iri``'s log of ``epoch``."""
        return self._load(iri, epoch, q)[1]

    def offset(self, iri: str, epoch: int, q: int) -> int:
        """The stream offset of the first element of record ``q`` (its owner's numbering)."""
        return self._load(iri, epoch, q)[0]

    def resolve(self, rec: LogRecord) -> Any:
        """The triples of an ingest log push record that holds a reference (``f="ref"``).

        Raises:
            LookupError: The stream log or the element is missing (the log cannot be replayed).
        """
        h = rec.header
        elements = self.body(str(h["s"]), int(h["e"]), int(h["r"]))
        j = int(h["j"])
        if not 0 <= j < len(elements):
            raise LookupError(
                "ingest log record %d names element %d of a %d-element body" % (rec.seq, j, len(elements))
            )
        return elements[j][1]


def oldest_references(log_dir: str) -> dict[str, tuple[int, int]]:
    """Per stream, the oldest body ``(epoch, record)`` the ingest log in ``log_dir`` (its
    segments as they are now) refers to -- read from its oldest segment holding references
    only: a stream's references never go back in log order (an owner's records only grow,
    a newer owner's epoch is larger and the leader refuses older ones), so a stream's oldest
    is there if it is in the log's tail at all.  A stream missing from that segment is left
    out (nothing of it is pruned this time)."""
    out: dict[str, tuple[int, int]] = {}
    for name in sorted(os.listdir(log_dir)):
        if out:
            break
        if not name.endswith(".log"):
            continue
        try:
            with open(os.path.join(log_dir, name), "rb") as fh:
                recs = scan_records(fh.read())
        except FileNotFoundError:  # truncated meanwhile
            continue
        for r in recs:
            h = r.header
            if h.get("f") == "ref":
                at = (int(h["e"]), int(h["r"]))
                s = str(h["s"])
                if s not in out or at < out[s]:
                    out[s] = at
    return out


def prune(state_dir: str, oldest: dict[str, tuple[int, int]]) -> int:
    """Deletes, per stream of ``oldest``, the segments wholly before its oldest referenced body
    (the segment after one starts at or before it); never a stream's last segment, nothing
    of a stream the ingest log does not name.  Returns how many went."""
    gone = 0
    for iri, at in oldest.items():
        segs = segments(state_dir, iri)
        here = 0
        for (_, _, path), (e, first, _) in zip(segs, segs[1:]):
            if (e, first) > at:
                break
            os.unlink(path)
            here += 1
        if here:
            fsync_dir(os.path.dirname(segs[0][2]))
        gone += here
    return gone


def set_ingest(service: ClusterService, mode: str, segment_mb: float = SEGMENT_BYTES / 2**20) -> str | None:
    """Sets how ``service`` ingests (``run --zk --ingest``); returns why it cannot, else ``None``.

    ``direct`` needs the shared state directory (the stream logs live there) and refuses a
    log shipped to a checkpoint store outside it: its references would name files the store
    does not hold.
    """
    if mode == "leader":
        return None
    if mode not in ("direct", "owners", "meta"):
        return f"--ingest must be leader, direct, owners or meta, got {mode!r}"
    if not service.state_dir:
        return f"--ingest {mode} needs --state-dir (each owner logs its streams' bodies there)"
    if service.checkpoints and ship_enabled(service.checkpoints, service.state_dir):
        return f"--ingest {mode} needs --checkpoints inside --state-dir (the log is not shipped elsewhere)"
    if not segment_mb > 0:
        return f"--stream-segment-mb must be > 0, got {segment_mb:g}"
    service.ingest.stream_log = StreamLog(service.state_dir, max(1, int(segment_mb * 2**20)))
    service.ingest.owners_send = mode in ("owners", "meta")  # the owners send the elements (ownersender.py)
    service.ingest.meta = mode == "meta"  # and the leader gets meta bodies (no terms)
    return None


__all__ = [
    "SEGMENT_BYTES",
    "STREAMS_DIR",
    "BodyStore",
    "StreamLog",
    "log_path",
    "oldest_references",
    "prune",
    "segments",
    "set_ingest",
]
