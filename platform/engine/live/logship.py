"""Log shipping: the durable ingest log copied to the checkpoint store, and read back from it.

The ingest log (:mod:`~linkstream.engine.live.ingestlog`) is local: a push is acknowledged
once its record is fsynced there.  A :class:`LogShipper` uploads what is durable to the
checkpoint store (``file:///path`` or ``s3://bucket/prefix``, the same
:class:`~linkstream.store.checkpoint_backends.Backend` the checkpoints use) in its own
thread, so that a lost disk (a replaced machine, a new cluster leader without a shared
state directory) loses only what was not shipped yet:

* **What is shipped.**  Closed (rotated) segments and the durable tail of the segment being
  written, as *pieces*: ``log/<first seq>-<last seq>.log`` objects holding whole records
  (the same bytes as the local segment, CRC-framed), each uploaded once.  A ship happens
  every ``interval_s`` seconds and at each checkpoint (:meth:`LogShipper.checkpointed`).
* **The manifest.**  ``log/MANIFEST`` (msgpack, rewritten after each upload: one atomic put)
  lists every piece with its sequence range, size, crc32 and sha256; a piece is part of
  the shipped log only once the manifest names it.  Reading verifies every piece against
  it: a missing or corrupt piece is one clear :class:`CheckpointError`.
* **Truncation.**  Once the oldest checkpoint kept covers a piece wholly, the piece leaves
  the manifest and the store (with the local segments it came from:
  :meth:`IngestLog.truncate_through <linkstream.engine.live.ingestlog.IngestLog.truncate_through>`).
* **Failures.**  Bad credentials or an unreachable store never hold up a push (the shipper
  only reads what is already durable): the failure is logged, counted
  (``linkstream_log_ship_failures``) and retried with exponential backoff (up to
  :data:`MAX_BACKOFF_S`); ``linkstream_log_ship_lag_seconds`` grows meanwhile.

**Bound.**  An acknowledged record is in the store at most ``interval_s`` plus two ships
(the one under way at its fsync, then its own) after its fsync, while the store answers
(``run --log-ship-interval``, default 1 s).

**Recovery** (:func:`adopt_shipped`): before the log is replayed, the shipped records are
read back and merged into the local log (:meth:`IngestLog.adopt
<linkstream.engine.live.ingestlog.IngestLog.adopt>`): a lost or shorter local log is
continued from the store, a local log that does not continue the store's (another
leader's) is set aside.  The restart then restores the latest checkpoint and replays the
records after it, as it does from a local log alone.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import socket
import threading
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgpack

from linkstream.engine.live.ingestlog import LogRecord, scan_records
from linkstream.metrics import LogShipMetrics
from linkstream.store.checkpoint_backends import Backend, BackendError
from linkstream.store.checkpoints import CheckpointError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from linkstream.engine.live.ingestlog import IngestLog

log = logging.getLogger(__name__)

__all__ = ["LogShipper", "Piece", "adopt_shipped", "read_manifest", "ship_enabled", "shipped_records"]

PREFIX = "log/"
MANIFEST = PREFIX + "MANIFEST"
FORMAT = 1
#: longest wait between two attempts while the store fails
MAX_BACKOFF_S = 30.0
_PIECE = re.compile(r"^log/(\d{20})-(\d{20})\.log$")
_FRAME_HEAD = 8  # u32 body_len | u32 crc32
_HLEN = 4


@dataclass(frozen=True)
class Piece:
    """One shipped piece of the log: records ``first..last``, and its bytes' checksums."""

    first: int
    last: int
    size: int
    crc32: int
    sha256: str

    @property
    def key(self) -> str:
        return "%s%020d-%020d.log" % (PREFIX, self.first, self.last)

    def row(self) -> list[Any]:
        return [self.first, self.last, self.size, self.crc32, self.sha256]


def ship_enabled(uri: str, state_dir: str) -> bool:
    """Whether the log of ``state_dir`` is shipped to checkpoints at ``uri``: not when they
    are a directory inside ``state_dir`` (the default ``file://DIR/checkpoints``: the same
    disk, nothing would be gained)."""
    from urllib.parse import unquote, urlparse

    u = urlparse(uri)
    if u.scheme not in ("", "file"):
        return True
    path = os.path.abspath(unquote(u.path) if u.scheme == "file" else uri)
    root = os.path.abspath(state_dir)
    return not (path == root or path.startswith(root + os.sep))


def read_manifest(backend: Backend) -> list[Piece]:
    """The pieces the store's log manifest lists, in order (``[]``: nothing shipped).

    Raises:
        CheckpointError: The manifest is unreadable.
        BackendError: The store cannot be read.
    """
    return _read_manifest(backend)[0]


def _read_manifest(backend: Backend) -> tuple[list[Piece], str | None]:
    """The manifest's pieces and the shipper that wrote it last (``None``: no manifest)."""
    try:
        data = backend.get(MANIFEST)
    except KeyError:
        return [], None
    try:
        doc = msgpack.unpackb(data, raw=False)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise ValueError("not a format-%d log manifest" % FORMAT)
        pieces = [Piece(int(a), int(b), int(n), int(c), str(h)) for a, b, n, c, h in doc["pieces"]]
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as e:
        raise CheckpointError("%s/%s is unreadable: %s" % (backend.uri, MANIFEST, e)) from None
    return sorted(pieces, key=lambda p: p.first), str(doc.get("writer") or "")


class Superseded(RuntimeError):
    """Another shipper (a newer cluster leader) writes the store's log manifest now."""


def _piece_bytes(backend: Backend, p: Piece) -> bytes:
    try:
        data = backend.get(p.key)
    except KeyError:
        raise CheckpointError("%s: shipped log piece %s is missing" % (backend.uri, p.key)) from None
    if len(data) != p.size or zlib.crc32(data) != p.crc32 or hashlib.sha256(data).hexdigest() != p.sha256:
        raise CheckpointError(
            "%s: shipped log piece %s is corrupt (size or checksum differs from %s)"
            % (backend.uri, p.key, MANIFEST)
        )
    return data


def shipped_records(
    backend: Backend, after: int = -1, pieces: list[Piece] | None = None
) -> Iterator[LogRecord]:
    """The shipped records after sequence number ``after``, in order, every piece verified
    against the manifest.

    Raises:
        CheckpointError: A piece is missing, corrupt or does not hold what the manifest says.
        BackendError: The store cannot be read.
    """
    for p in read_manifest(backend) if pieces is None else pieces:
        if p.last <= after:
            continue
        recs = scan_records(_piece_bytes(backend, p))
        if not recs or recs[0].seq != p.first or recs[-1].seq != p.last:
            raise CheckpointError(
                "%s: shipped log piece %s does not hold records %d..%d"
                % (backend.uri, p.key, p.first, p.last)
            )
        for r in recs:
            if r.seq > after:
                after = r.seq  # a record in two pieces (a re-shipped tail) counts once
                yield r


def download_pieces(backend: Backend, after: int, directory: str) -> list[str]:
    """Writes the verified pieces holding records after ``after`` to ``directory`` (as
    ``<first>-<last>.log`` segment files, for ``linkstream restore``'s Spark job); returns
    their paths."""
    os.makedirs(directory, exist_ok=True)
    out = []
    for p in read_manifest(backend):
        if p.last <= after:
            continue
        path = os.path.join(directory, p.key[len(PREFIX) :])
        with open(path, "wb") as f:
            f.write(_piece_bytes(backend, p))
        out.append(path)
    return out


def adopt_shipped(ingest_log: IngestLog, backend: Backend) -> int:
    """Merges the store's shipped records into ``ingest_log`` (opened, nothing appended yet):
    see the module docstring.  Returns the number of records the local log lacked.

    Raises:
        CheckpointError: A shipped piece is missing or corrupt.
        BackendError: The store cannot be read.
    """
    pieces = read_manifest(backend)
    if not pieces:
        return 0
    recs = list(shipped_records(backend, -1, pieces))
    for k in range(len(recs) - 1, 0, -1):
        if recs[k].seq != recs[k - 1].seq + 1:
            # pieces a checkpoint covers, not deleted yet (a crash between ship and
            # truncation): the run after the gap is what a restore needs (if the checkpoint
            # does not cover the gap, the replay stops with "records are missing")
            log.warning(
                "%s: the shipped log jumps from record %d to %d; records before the jump are not used",
                backend.uri,
                recs[k - 1].seq,
                recs[k].seq,
            )
            recs = recs[k:]
            break
    n = ingest_log.adopt(recs)
    if n:
        log.info("ingest log: %d records restored from the shipped log in %s", n, backend.uri)
    return n


def _frames(data: bytes) -> tuple[int, int, int]:
    """``(first seq, last seq, bytes)`` of the whole records at the start of ``data``
    (``(-1, -1, 0)``: none); only the first and last headers are decoded."""
    pos = 0
    first_at = last_at = -1
    n = len(data)
    while pos + _FRAME_HEAD <= n:
        blen = int.from_bytes(data[pos : pos + 4], "little")
        end = pos + _FRAME_HEAD + blen
        if blen < _HLEN or end > n:
            break
        if first_at < 0:
            first_at = pos
        last_at = pos
        pos = end
    if first_at < 0:
        return -1, -1, 0
    return _seq_at(data, first_at), _seq_at(data, last_at), pos


def _seq_at(data: bytes, pos: int) -> int:
    body = pos + _FRAME_HEAD
    hl = int.from_bytes(data[body : body + _HLEN], "little")
    header = msgpack.unpackb(data[body + _HLEN : body + _HLEN + hl], raw=False)
    return int(header["q"])


class LogShipper:
    """Ships ``ingest_log`` to ``backend`` in a thread of its own (see the module docstring).

    Args:
        ingest_log: The log (open; its recovery done).
        backend: The checkpoint store's backend.
        interval_s: Seconds between ships (``> 0``).
        registry: Where the ship metrics go (a private registry when ``None``).
    """

    def __init__(
        self,
        ingest_log: IngestLog,
        backend: Backend,
        interval_s: float = 1.0,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.log = ingest_log
        self.backend = backend
        self.interval_s = max(0.01, float(interval_s))
        self._lock = threading.Lock()  # one ship or truncation at a time
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pieces: list[Piece] | None = None  # the manifest as last written (None: not read)
        self._pos: tuple[str, int] | None = None  # (segment, byte offset) shipped up to
        self._shipped = -1  # last record in the store
        self._floor = -1  # records a kept checkpoint covers: not worth shipping
        self._trunc = -1  # truncate pieces wholly <= this
        self._cut_done = -1  # truncated through this already
        self._durable = -1
        self._waiting_since: float | None = None  # when a record not in the store became durable
        self._streak = 0
        self._final = True
        #: this shipper's id in the manifest it writes
        self.writer = "%s-%d-%s" % (socket.gethostname(), os.getpid(), os.urandom(4).hex())
        self._took_over = False  # wrote the manifest once (later writes check it is still ours)
        self.superseded = False
        self.pieces_shipped = 0
        self.bytes_shipped = 0
        self.ship_seconds = 0.0
        self.failures = 0
        self.truncated = 0
        self.last_error: str | None = None
        try:
            self.metrics = LogShipMetrics(registry, self.lag)
        except ValueError:  # another shipper still on that registry: count on a private one
            self.metrics = LogShipMetrics(None, self.lag)

    # ------------------------------------------------------------ figures

    def lag(self) -> float:
        """Seconds since the oldest record not yet in the store became durable (``0``: none)."""
        since = self._waiting_since
        return 0.0 if since is None or self._durable <= self._shipped else time.monotonic() - since

    def _on_durable(self, seq: int) -> None:
        self._durable = seq
        if self._waiting_since is None and seq > self._shipped:
            self._waiting_since = time.monotonic()

    def stats(self) -> dict[str, Any]:
        """Figures for /status (``checkpoints.shipping``)."""
        n = max(1, self.pieces_shipped)
        return {
            "uri": self.backend.uri,
            "interval_s": self.interval_s,
            "shipped_seq": self._shipped,
            "pieces": self.pieces_shipped,
            "bytes": self.bytes_shipped,
            "ship_ms_mean": round(1000 * self.ship_seconds / n, 3),
            "lag_s": round(self.lag(), 3),
            "failures": self.failures,
            "truncated": self.truncated,
            "last_error": self.last_error,
            "superseded": self.superseded,
        }

    # ------------------------------------------------------------ lifecycle

    def start(self) -> LogShipper:
        if self._thread is None:
            self._durable = self.log.durable_position()[2]
            self.log.on_durable = self._on_durable
            self._on_durable(self._durable)
            self._thread = threading.Thread(target=self._run, name="linkstream-logship", daemon=True)
            self._thread.start()
        return self

    def kick(self) -> None:
        """Ships now (in the shipper's thread)."""
        self._wake.set()

    def checkpointed(self, covered: int) -> None:
        """The oldest checkpoint kept covers the records through ``covered``: the pieces it
        covers go from the store, and the tail is shipped (in the shipper's thread)."""
        self._floor = max(self._floor, covered)
        self._trunc = max(self._trunc, covered)
        self._wake.set()

    def stop(self, timeout: float = 10.0, final: bool = True) -> None:
        """Stops the thread after one last ship (``final``; skipped while the store is failing)."""
        self._final = final
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        if self.log.on_durable == self._on_durable:
            self.log.on_durable = None
        self.metrics.unregister()  # a later shipper (the next leadership) registers its own

    def _run(self) -> None:
        wait = 0.0
        while True:
            self._wake.wait(wait)
            self._wake.clear()
            stopping = self._stop.is_set()
            if stopping and (self._streak or not self._final) or self.superseded:
                return
            try:
                self.ship_once()
                self._streak = 0
                self.last_error = None
                wait = self.interval_s
            except Superseded as e:
                self.superseded = True
                self.last_error = str(e)
                log.error("log shipping: %s", e)
                return
            except (BackendError, CheckpointError, OSError, ValueError) as e:
                self._streak += 1
                self.failures += 1
                self.metrics.failures.inc()
                self.last_error = str(e)
                wait = min(MAX_BACKOFF_S, max(0.5, self.interval_s) * 2 ** (self._streak - 1))
                log.error(
                    "log shipping to %s failed (%s); acknowledged records stay local, retrying in %.1fs",
                    self.backend.uri,
                    e,
                    wait,
                )
            if stopping:
                return

    # ------------------------------------------------------------ shipping

    def _load(self) -> list[Piece]:
        """The manifest's pieces and where shipping resumes in the local log (first call)."""
        if self._pieces is not None:
            return self._pieces
        pieces = read_manifest(self.backend)
        shipped = max((p.last for p in pieces), default=-1)
        seg, size, _ = self.log.durable_position()
        pos: tuple[str, int] = (seg, size)
        for name in self._segments():
            if name > seg:
                break
            data = self._read(name, 0, size if name == seg else None)
            off = self._offset_after(data, shipped)
            if off < len(data):
                pos = (name, off)
                break
        self._pieces, self._shipped, self._pos = pieces, shipped, pos
        return pieces

    @staticmethod
    def _offset_after(data: bytes, seq: int) -> int:
        """Byte offset of the first record after ``seq`` in ``data`` (``len``: none)."""
        pos = 0
        while pos + _FRAME_HEAD <= len(data):
            blen = int.from_bytes(data[pos : pos + 4], "little")
            end = pos + _FRAME_HEAD + blen
            if end > len(data) or _seq_at(data, pos) > seq:
                return pos
            pos = end
        return len(data)

    def _segments(self) -> list[str]:
        return sorted(f for f in os.listdir(self.log.log_dir) if f.endswith(".log"))

    def _read(self, name: str, start: int, end: int | None) -> bytes:
        try:
            with open(os.path.join(self.log.log_dir, name), "rb") as f:
                f.seek(start)
                return f.read() if end is None else f.read(max(0, end - start))
        except FileNotFoundError:  # truncated meanwhile: a checkpoint covers it
            return b""

    def ship_once(self) -> int:
        """Uploads what is durable and not shipped yet, then truncates what checkpoints
        cover; returns the number of pieces uploaded.

        Raises:
            BackendError: The store refused (nothing is lost: the next call retries).
        """
        with self._lock:
            pieces = self._load()
            seg, size, durable = self.log.durable_position()
            t0 = time.monotonic()
            new: list[Piece] = []
            assert self._pos is not None
            pos = self._pos
            shipped = self._shipped
            if durable > shipped:
                for name in self._segments():
                    if name < pos[0] or name > seg:
                        continue
                    start = pos[1] if name == pos[0] else 0
                    data = self._read(name, start, size if name == seg else None)
                    first, last, good = _frames(data)
                    if good:
                        data = data[:good]
                        if last > max(shipped, self._floor):
                            t1 = time.perf_counter()
                            p = Piece(first, last, good, zlib.crc32(data), hashlib.sha256(data).hexdigest())
                            self.backend.put(p.key, data)
                            self.ship_seconds += time.perf_counter() - t1
                            new.append(p)
                        shipped = max(shipped, last)
                    pos = (name, start + good)
            if new:
                t1 = time.perf_counter()
                self._write_manifest(pieces + new)
                self.ship_seconds += time.perf_counter() - t1
                self._pieces = pieces = pieces + new
                nbytes = sum(p.size for p in new)
                self.pieces_shipped += len(new)
                self.bytes_shipped += nbytes
                self.metrics.segments_shipped.inc(len(new))
                self.metrics.bytes_shipped.inc(nbytes)
            self._pos, self._shipped = pos, shipped
            if self._durable > shipped:
                self._waiting_since = t0  # records after the snapshot became durable after t0
            else:
                self._waiting_since = None
            self._truncate()
            return len(new)

    def _write_manifest(self, pieces: list[Piece]) -> None:
        """Replaces the manifest, unless another shipper took it over since this one did
        (fencing: a deposed cluster leader stops shipping instead of overwriting the new
        leader's manifest)."""
        if self._took_over:
            _, writer = _read_manifest(self.backend)
            if writer != self.writer:
                raise Superseded(
                    "%s/%s is written by another shipper (%s) now: this one stops"
                    % (self.backend.uri, MANIFEST, writer)
                )
        doc = {
            "format": FORMAT,
            "pieces": [p.row() for p in pieces],
            "written": time.time(),
            "writer": self.writer,
        }
        self.backend.put(MANIFEST, msgpack.packb(doc, use_bin_type=True))
        self._took_over = True

    def _truncate(self) -> None:
        """Deletes the pieces (and debris of failed ships) wholly covered by a kept checkpoint."""
        cut = self._trunc
        if cut <= self._cut_done:
            return
        pieces = self._pieces or []
        drop = [p for p in pieces if p.last <= cut]
        keep = [p for p in pieces if p.last > cut]
        if drop:
            self._write_manifest(keep)
            self._pieces = keep
        named = {p.key for p in keep}
        gone = [p.key for p in drop]
        for key in self.backend.keys(PREFIX):  # debris: uploaded, never listed (a failed manifest put)
            m = _PIECE.match(key)
            if m and key not in named and key not in gone and int(m.group(2)) <= cut:
                gone.append(key)
        if gone:
            self.backend.delete(gone)
        self.truncated += len(drop)
        self.metrics.truncated.inc(len(drop))
        self._cut_done = cut
