"""A durable ingest log for the embedded live engine (``linkstream run --state-dir DIR``).

Every accepted stream element gets ``(stream, offset)`` and a global sequence number and
is appended to a segment file under ``DIR/log/`` before its push is acknowledged; query
registrations, unregistrations and explicit watermarks go into the same log, in the order
the worker sees them, so a replay rebuilds the same windows.  ``DIR/queries.json`` is a
catalog of the registered queries (name, text, dialect), rewritten on every change.

Group commit: callers append records (cheap, in memory) and then wait; one writer thread
takes everything appended so far, writes it, fsyncs once and releases every waiter, so
concurrent requests share an fsync.

Record layout (little-endian)::

    u32 body_len | u32 crc32(body) | body = u32 header_len | msgpack header | payload bytes

The header holds the kind (``push``, ``register``, ``unregister``, ``advance``, ``drop``:
the worker's late drop of the pushes numbered ``d``; ``late``: elements of stream ``s``
the push side refused as late, their times ``t`` and the watermarks ``f`` they were
behind, and ``r``, how many it refused for their event time -- counted again by a replay,
never applied), the
sequence number ``q`` and the kind's fields; a push's payload is the msgpack list of its
``(s, p, o)`` N-Triples terms (``f="nt"``) or its raw int64 ids (``f="ids"``, only
meaningful with a persistent dictionary); a push whose body is durable elsewhere already
has no payload but a reference ``e``, ``r``, ``j`` (``f="ref"``, read back through
:attr:`IngestLog.resolve`: ``run --zk --ingest direct``).  Reading stops at the first record that is short,
fails its CRC or breaks the sequence: a torn tail write after a crash is dropped (the
segment truncated there) -- never a crash at restart, never a wrong element.  Later
segments, which can only exist after damage in the middle, are renamed ``*.damaged``.

Segments rotate by size and age, and at each checkpoint (:meth:`IngestLog.rotate`); a
segment is named by the sequence number of its first record.  Once a complete checkpoint
covers every record up to ``seq`` (:mod:`linkstream.engine.live.checkpoint`), the segments
holding only such records are deleted (:meth:`IngestLog.truncate_through`); a restart then
restores the checkpoint and replays only the records after ``seq``
(:meth:`IngestLog.resume_after`).
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import numpy as np

from linkstream.engine.live.batchpush import TermRows
from linkstream.store.checkpoint_backends import fsync_dir

log = logging.getLogger(__name__)

__all__ = ["IngestLog", "LogRecord", "decode_triples", "scan_prefix", "scan_records"]

_FRAME = struct.Struct("<II")
_HLEN = struct.Struct("<I")
_SUFFIX = ".log"
SEGMENT_BYTES = 64 << 20
SEGMENT_AGE_S = 3600.0


@dataclass(frozen=True)
class LogRecord:
    """One record read back: its sequence number, kind, header and payload."""

    seq: int
    kind: str
    header: dict[str, Any]
    payload: bytes


def decode_triples(rec: LogRecord) -> Any:
    """A push record's triples: an ``(n, 3)`` int64 array or a list of term triples.

    Raises:
        LookupError: The record holds a reference to a body kept elsewhere (``f="ref"``,
            see :attr:`IngestLog.resolve`), which only a resolver can read.
    """
    if rec.header.get("f") == "ref":
        raise LookupError("ingest log record %d refers to a body kept elsewhere (no resolver)" % rec.seq)
    if rec.header.get("f") == "ids":
        return np.frombuffer(rec.payload, dtype=np.int64).reshape(-1, 3).copy()
    return [tuple(tr) for tr in msgpack.unpackb(rec.payload, use_list=True)]


def encode_record(header: dict[str, Any], payload: bytes) -> bytes:
    """The framed bytes of one record (see the module docstring)."""
    h = msgpack.packb(header, use_bin_type=True)
    body = _HLEN.pack(len(h)) + h + payload
    return _FRAME.pack(len(body), zlib.crc32(body)) + body


def _scan(data: bytes, first_seq: int | None) -> tuple[list[LogRecord], int]:
    """The valid records at the start of ``data`` and the byte length they cover."""
    out: list[LogRecord] = []
    pos = 0
    expect = first_seq
    while pos + _FRAME.size <= len(data):
        n, crc = _FRAME.unpack_from(data, pos)
        end = pos + _FRAME.size + n
        if n < _HLEN.size or end > len(data):
            break
        body = data[pos + _FRAME.size : end]
        if zlib.crc32(body) != crc:
            break
        (hl,) = _HLEN.unpack_from(body, 0)
        if _HLEN.size + hl > n:
            break
        try:
            header = msgpack.unpackb(body[_HLEN.size : _HLEN.size + hl], raw=False)
        except Exception:  # a CRC collision on garbage: treat as damage
            break
        if not isinstance(header, dict) or not isinstance(header.get("q"), int):
            break
        if expect is not None and header["q"] != expect:
            break
        out.append(LogRecord(header["q"], str(header.get("k")), header, body[_HLEN.size + hl :]))
        expect = header["q"] + 1
        pos = end
    return out, pos


def scan_records(data: bytes) -> list[LogRecord]:
    """The valid records at the start of one segment's bytes (a torn or damaged tail ends them)."""
    return _scan(data, None)[0]


def scan_prefix(data: bytes) -> tuple[list[LogRecord], int]:
    """:func:`scan_records` and the number of bytes they cover (where a torn tail starts)."""
    return _scan(data, None)


_sync = getattr(os, "fdatasync", os.fsync)


class IngestLog:
    """An append-only, group-committed log of the live engine's inputs under ``directory``.

    Open it, :meth:`records` to replay what it holds, then append (``append_*`` return a
    sequence number) and :meth:`wait`/:meth:`sync` for durability.  Appends must be made in
    the order the engine applies them (the live engine appends under its lock).
    """

    def __init__(
        self,
        directory: str,
        *,
        segment_bytes: int = SEGMENT_BYTES,
        segment_age_s: float = SEGMENT_AGE_S,
    ) -> None:
        self.directory = directory
        self.log_dir = os.path.join(directory, "log")
        self.segment_bytes = segment_bytes
        self.segment_age_s = segment_age_s
        os.makedirs(self.log_dir, exist_ok=True)
        self._lock_fd = os.open(os.path.join(directory, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            raise OSError("%s is in use by another process" % directory) from None
        self._recovered: list[LogRecord] = []
        self._offsets: dict[str, int] = {}  # stream -> next offset
        self._next = 0  # next sequence number
        self._recover()
        self._cv = threading.Condition()
        self._pending: list[tuple[int, bytes]] = []
        self._durable = self._next - 1
        self._error: OSError | None = None
        self._closing = False
        self._fd = -1
        self._seg_name = ""
        self._seg_size = 0
        self._seg_born = time.monotonic()
        self._rotate = False
        self._open_last()
        #: (segment file, bytes of it on disk, last record in them): what a shipper may read
        self._dur_pos = (self._seg_name, self._seg_size, self._durable)
        #: called by the writer with the last durable record after each fsync (log shipping)
        self.on_durable: Callable[[int], None] | None = None
        #: how a replay gets the triples of a push record that refers to a body kept elsewhere
        #: (``f="ref"``: ``run --zk --ingest direct``, the owners' stream logs)
        self.resolve: Callable[[LogRecord], Any] | None = None
        #: what a replay tells the worker's decision on a push record that refers to a body
        #: (``f="ref"``) to: ``(Decided, element index)`` (a new ``--ingest direct`` leader
        #: rebuilds its owners' decisions), or ``None``
        self.decide: Callable[[LogRecord], Any] | None = None
        self.fsyncs = 0
        self.fsync_seconds = 0.0
        self.records_written = 0
        self.bytes_written = 0
        self.truncated_segments = 0
        self._catalog: dict[str, dict[str, str]] = self._read_catalog()
        self._thread = threading.Thread(target=self._run, name="linkstream-ingestlog", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------ recovery

    def _segments(self) -> list[str]:
        return sorted(f for f in os.listdir(self.log_dir) if f.endswith(_SUFFIX))

    def _recover(self) -> None:
        segs = self._segments()
        for k, name in enumerate(segs):
            path = os.path.join(self.log_dir, name)
            if name[:20].isdigit():  # an empty segment still says where numbering goes on
                self._next = max(self._next, int(name[:20]))
            with open(path, "rb") as f:
                data = f.read()
            first = self._next if self._recovered else None
            recs, good = _scan(data, first)
            if recs and first is None and not name.startswith("%020d" % recs[0].seq):
                log.warning("ingest log segment %s starts at record %d", name, recs[0].seq)
            self._recovered.extend(recs)
            if recs:
                self._next = recs[-1].seq + 1
            if good < len(data):
                log.warning(
                    "ingest log %s: dropped %d bytes of a torn or damaged tail after record %s",
                    path,
                    len(data) - good,
                    recs[-1].seq if recs else "(none)",
                )
                os.truncate(path, good)
                for later in segs[k + 1 :]:
                    lp = os.path.join(self.log_dir, later)
                    log.error("ingest log: %s follows a damaged segment; renamed *.damaged", lp)
                    os.replace(lp, lp + ".damaged")
                break
        for rec in self._recovered:
            if rec.kind == "push":
                s = rec.header["s"]
                self._offsets[s] = max(self._offsets.get(s, 0), int(rec.header["o"]) + 1)

    def pending_records(self) -> list[LogRecord]:
        """The records found at open that :meth:`records` has not handed out (a look ahead)."""
        return list(self._recovered)

    def records(self) -> Iterator[LogRecord]:
        """The records found at open, in order (once: they are released as they go)."""
        recs, self._recovered = self._recovered, []
        yield from recs

    def _open_last(self) -> None:
        segs = self._segments()
        if segs:
            path = os.path.join(self.log_dir, segs[-1])
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND)
            self._seg_name = segs[-1]
            self._seg_size = os.fstat(self._fd).st_size
        else:
            self._new_segment(self._next)

    def _new_segment(self, first_seq: int) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._seg_name = "%020d%s" % (first_seq, _SUFFIX)
        path = os.path.join(self.log_dir, self._seg_name)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        fsync_dir(self.log_dir)
        self._seg_size = 0
        self._seg_born = time.monotonic()

    # ------------------------------------------------------------ catalog

    def _catalog_path(self) -> str:
        return os.path.join(self.directory, "queries.json")

    def _read_catalog(self) -> dict[str, dict[str, str]]:
        try:
            with open(self._catalog_path(), encoding="utf-8") as f:
                doc = json.load(f)
            return {q["name"]: q for q in doc}
        except (OSError, ValueError, KeyError, TypeError):
            return {}

    def catalog(self) -> list[dict[str, str]]:
        """The registered queries as last saved: ``[{"name", "text", "dialect"}]``."""
        return list(self._catalog.values())

    def save_query(self, name: str, text: str | None, dialect: str = "") -> None:
        """Records ``name`` as registered with ``text`` (``None``: unregistered) in queries.json."""
        self.save_queries([(name, text, dialect)])

    def save_queries(self, queries: Sequence[tuple[str, str | None, str]]) -> None:
        """:meth:`save_query` of each ``(name, text, dialect)``, with one rewrite of queries.json
        (it holds every query: a rewrite per query of a batch would be quadratic)."""
        for name, text, dialect in queries:
            if text is None:
                self._catalog.pop(name, None)
            else:
                self._catalog[name] = {"name": name, "text": text, "dialect": dialect}
        tmp = self._catalog_path() + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(list(self._catalog.values()), f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._catalog_path())
        fsync_dir(self.directory)

    # ------------------------------------------------------------ appending

    def _append(self, header: dict[str, Any], payload: bytes = b"") -> int:
        with self._cv:
            if self._error is not None:
                raise OSError("the ingest log failed: %s" % self._error)
            if self._closing:
                raise OSError("the ingest log is closed")
            seq = header["q"] = self._next
            self._next += 1
            self._pending.append((seq, encode_record(header, payload)))
            self._cv.notify_all()
            return seq

    def append_push(self, stream: str, t: int, triples: Any, key: str | None = None) -> int:
        """Appends one stream element (``key``: its idempotency key, if the client gave one);
        returns its sequence number (its stream offset is the count of the stream's earlier
        elements)."""
        off = self._offsets.get(stream, 0)
        self._offsets[stream] = off + 1
        ref = getattr(triples, "ref", None)
        if ref is not None:  # the body is durable elsewhere already: (epoch, record, element)
            header = {"k": "push", "s": stream, "o": off, "t": int(t), "f": "ref", "n": len(triples)}
            header["e"], header["r"], header["j"] = (int(x) for x in ref)
            payload = b""
        elif isinstance(triples, np.ndarray):
            header = {"k": "push", "s": stream, "o": off, "t": int(t), "f": "ids", "n": len(triples)}
            payload = np.ascontiguousarray(triples, dtype="<i8").tobytes()
        else:
            rows = triples.strings() if isinstance(triples, TermRows) else [list(tr) for tr in triples]
            header = {"k": "push", "s": stream, "o": off, "t": int(t), "f": "nt", "n": len(rows)}
            payload = msgpack.packb(rows, use_bin_type=True)
        if key is not None:
            header["i"] = key
        return self._append(header, payload)

    def append_register(self, name: str, text: str, dialect: str) -> int:
        return self._append({"k": "register", "name": name, "dialect": dialect}, text.encode("utf-8"))

    def append_unregister(self, name: str) -> int:
        return self._append({"k": "unregister", "name": name})

    def append_advance(self, t: int) -> int:
        return self._append({"k": "advance", "t": int(t)})

    def append_drop(self, stream: str, seqs: Sequence[int]) -> int:
        """Appends the worker's late drop of pushes ``seqs`` (taken on the push side, then
        passed by a report time): a replay skips them instead of deciding them again."""
        return self._append({"k": "drop", "s": stream, "d": [int(q) for q in seqs]})

    def append_late(self, stream: str, times: Sequence[int], floors: Sequence[int], rejected: int = 0) -> int:
        """Appends elements of one body the push side refused as late (event times ``times``,
        each behind watermark ``floors[i]``) and how many it refused for their event time
        (``rejected``: out of range or too far ahead; its time is not kept, it may not fit
        an int64): a replay counts them late (rejected) again, so a new leader's or a
        restart's late and rejected counts include them."""
        header: dict[str, Any] = {
            "k": "late",
            "s": stream,
            "t": [int(t) for t in times],
            "f": [int(f) for f in floors],
        }
        if rejected:
            header["r"] = int(rejected)
        return self._append(header)

    def durable_seq(self) -> int:
        """The last record on disk (``-1``: none)."""
        with self._cv:
            return self._durable

    def last_seq(self) -> int:
        """The sequence number of the last record appended (``-1``: none yet)."""
        with self._cv:
            return self._next - 1

    def offsets(self) -> dict[str, int]:
        """Each stream's next offset (its element count in the log)."""
        return dict(self._offsets)

    # ------------------------------------------------------------ durability

    def wait(self, seq: int, timeout: float | None = 60.0) -> None:
        """Blocks until record ``seq`` (and all before it) is on disk.

        Raises:
            OSError: The log could not be written (or is closed before ``seq`` made it).
            TimeoutError: Not durable within ``timeout`` seconds.
        """
        with self._cv:
            ok = self._cv.wait_for(
                lambda: self._durable >= seq or self._error is not None or not self._thread.is_alive(),
                timeout,
            )
            if self._durable >= seq:
                return
            if self._error is not None:
                raise OSError("the ingest log failed: %s" % self._error)
            if not ok:
                raise TimeoutError("the ingest log did not sync within %ss" % timeout)
            raise OSError("the ingest log is closed")

    def sync(self, timeout: float | None = 60.0) -> None:
        """Blocks until everything appended so far is on disk."""
        with self._cv:
            last = self._next - 1
        self.wait(last, timeout)

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: bool(self._pending) or self._closing)
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
            data = b"".join(b for _, b in batch)
            try:
                if self._seg_size and (
                    self._rotate
                    or self._seg_size + len(data) > self.segment_bytes
                    or time.monotonic() - self._seg_born > self.segment_age_s
                ):
                    self._new_segment(batch[0][0])
                    self._rotate = False
                view = memoryview(data)
                while view:
                    n = os.write(self._fd, view)
                    view = view[n:]
                t0 = time.perf_counter()
                _sync(self._fd)
                dt = time.perf_counter() - t0
            except OSError as e:
                log.error("ingest log write failed: %s; pushes are refused from now on", e)
                with self._cv:
                    self._error = e
                    self._cv.notify_all()
                return
            self._seg_size += len(data)
            with self._cv:
                self._durable = batch[-1][0]
                self._dur_pos = (self._seg_name, self._seg_size, self._durable)
                self.fsyncs += 1
                self.fsync_seconds += dt
                self.records_written += len(batch)
                self.bytes_written += len(data)
                self._cv.notify_all()
            hook = self.on_durable
            if hook is not None:
                hook(batch[-1][0])

    # ------------------------------------------------------------ checkpoints

    def resume_after(self, seq: int, offsets: dict[str, int]) -> None:
        """Continues numbering after a checkpoint that covered records up to ``seq`` with the
        stream offsets ``offsets`` (call it before appending: records after ``seq`` still
        found in the log raise offsets further)."""
        with self._cv:
            if self._pending or self.records_written:
                raise RuntimeError("resume_after() must come before any append")
            self._next = max(self._next, seq + 1)
            self._durable = max(self._durable, self._next - 1)
        for s, off in offsets.items():
            self._offsets[s] = max(self._offsets.get(s, 0), int(off))

    def durable_position(self) -> tuple[str, int, int]:
        """``(segment file, bytes, seq)``: the segment being written, how many of its bytes are
        fsynced (whole records) and the last record they hold (``-1``: none yet).  Segments
        sorted before it are closed and wholly durable (what a log shipper may read)."""
        with self._cv:
            return self._dur_pos

    def adopt(self, records: Sequence[LogRecord]) -> int:
        """Takes ``records`` (a contiguous run read back from the checkpoint store, see
        :mod:`~linkstream.engine.live.logship`) into this log before anything is appended:
        the ones past the local log's end are appended (and fsynced) so that the local log
        continues them; when the local log does not join them (a gap, or a record that
        differs: another leader's log), its segments are set aside as ``*.stale`` and the
        log restarts from ``records``.  :meth:`records` then yields the merged run.  Returns
        the number of records appended."""
        if not records:
            return 0
        with self._cv:
            if self._pending or self.records_written:
                raise RuntimeError("adopt() must come before any append")
        local = {r.seq: r for r in self._recovered}
        first, last = records[0].seq, records[-1].seq
        lo = self._recovered[0].seq if self._recovered else None
        hi = self._recovered[-1].seq if self._recovered else None
        joins = lo is not None and hi is not None and lo <= last + 1 and hi >= first - 1
        same = all(
            local[r.seq].header == r.header and local[r.seq].payload == r.payload
            for r in records
            if r.seq in local
        )
        if lo is not None and not (joins and same):
            log.warning(
                "ingest log %s: its records %s..%s %s the checkpoint store's %d..%d; "
                "its segments are set aside as *.stale",
                self.log_dir,
                lo,
                hi,
                "differ from" if joins else "do not join",
                first,
                last,
            )
            self._recovered, self._offsets = [], {}
            hi = None
        tail = [r for r in records if hi is None or r.seq > hi]
        if hi is None or tail:
            # the records go into a segment of their own, named by the first (never into an
            # empty segment named further on, as a crash right after a rotation leaves one)
            os.close(self._fd)
            self._fd = -1
            for f in sorted(f for f in os.listdir(self.log_dir) if f.endswith(_SUFFIX)):
                path = os.path.join(self.log_dir, f)
                if hi is None:
                    os.replace(path, path + ".stale")
                elif os.path.getsize(path) == 0:
                    os.unlink(path)
            start = first if hi is None else tail[0].seq
            with self._cv:
                self._next = start
                self._durable = start - 1
            self._new_segment(start)
            with self._cv:
                self._dur_pos = (self._seg_name, 0, self._durable)
        for r in tail:
            header = dict(r.header)
            self._append(header, r.payload)
            if r.kind == "push":
                s = r.header["s"]
                self._offsets[s] = max(self._offsets.get(s, 0), int(r.header["o"]) + 1)
        if tail:
            self.sync()
            with self._cv:  # handed out by :meth:`records`, not counted as this run's writes
                self.records_written = 0
                self.bytes_written = 0
                self.fsyncs = 0
                self.fsync_seconds = 0.0
        if hi is None:
            self._recovered = list(tail)
        else:
            self._recovered += tail
        return len(tail)

    def rotate(self) -> None:
        """Starts a new segment at the next write (so that older ones can be truncated)."""
        with self._cv:
            self._rotate = True

    def truncate_through(self, seq: int) -> int:
        """Deletes the segments whose records all have sequence numbers ``<= seq`` (never the
        one being written); returns how many went."""
        segs = [f for f in self._segments() if f[:20].isdigit()]
        gone = 0
        for name, nxt in zip(segs, segs[1:]):
            if int(nxt[:20]) > seq + 1:
                break
            os.unlink(os.path.join(self.log_dir, name))
            gone += 1
        if gone:
            fsync_dir(self.log_dir)
        self.truncated_segments += gone
        return gone

    def stats(self) -> dict[str, Any]:
        """Counters for /status: records and bytes written, fsyncs and their mean cost."""
        with self._cv:
            return {
                "directory": self.directory,
                "next_seq": self._next,
                "durable_seq": self._durable,
                "records": self.records_written,
                "bytes": self.bytes_written,
                "fsyncs": self.fsyncs,
                "fsync_ms_mean": round(1000.0 * self.fsync_seconds / self.fsyncs, 3) if self.fsyncs else None,
                "segments": len(self._segments()),
                "truncated_segments": self.truncated_segments,
            }

    def close(self, timeout: float = 10.0) -> None:
        """Writes what is pending, then stops the writer and closes the segment."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join(timeout)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if self._lock_fd >= 0:
            os.close(self._lock_fd)  # releases the flock
            self._lock_fd = -1
