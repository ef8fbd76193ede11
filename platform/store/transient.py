"""The transient store: a per-stream ring of timestamped batches with a stream index.

Streams whose data only matters inside windows keep their batches here rather than in
the persistent graphs (Wukong+S's transient store).  Per stream:

* the *ring*: batches in arrival order, each ``(seq, ts, (n, 3) int64 triples)``; local
  timestamps are non-decreasing, so the ring is sorted by time;
* the *stream index*: time slot (``ts // slot_ms``) -> the sequence range of the batches
  in that slot, plus the ordered list of occupied slots; a window ``[a, b)`` finds its
  first and last batch through the slots it covers (clamped to occupied ones) and a
  binary search inside the two boundary slots -- it never scans the ring;
* *retention*: each holder (a registered window range, e.g. one per window operator)
  declares the oldest timestamp it may still read with :meth:`TransientStore.retain`;
  batches older than every holder's floor are garbage-collected.  A stream nobody
  holds keeps at most ``capacity`` batches (when set), oldest dropped first.

Besides time ranges, the ring answers reads by *triple position*: every triple a stream
ever received has an absolute position (0, 1, ... in arrival order, stable across GC), and
each batch records the position of its first triple.  Window operators
(:class:`~linkstream.operators.window.RingBuffer`) keep their bounds as positions, found
from timestamps through the stream index (:meth:`TransientStore.position`) and read back
by batch sequence ranges (:meth:`TransientStore.slice`).
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from dataclasses import field

import numpy as np

from linkstream.rdf.records import record

_log = logging.getLogger(__name__)
_I64 = np.int64
_EMPTY3 = np.empty((0, 3), dtype=_I64)
_EMPTY1 = np.empty(0, dtype=_I64)
_EMPTY3.flags.writeable = False
_EMPTY1.flags.writeable = False


@record(frozen=True)
class TimedBatch:
    """One stream batch: sequence number, local timestamp and its triples."""

    seq: int
    ts: int
    triples: np.ndarray

    def __init__(self, seq: int, ts: int, triples: np.ndarray) -> None:
        # (written out: one per stored batch)
        object.__setattr__(self, "seq", seq)
        object.__setattr__(self, "ts", ts)
        object.__setattr__(self, "triples", triples)


@record
class _Ring:
    """One stream's batches in arrival order, with the slots that hold them."""

    head: int = 0  # sequence number of ts[0] / data[0]
    ts: list[int] = field(default_factory=list)
    data: list[np.ndarray] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)  # triple position of data[k][0]
    total: int = 0  # triples ever appended (position one past the last)
    slots: list[int] = field(default_factory=list)  # occupied slots, ascending
    index: dict[int, list[int]] = field(default_factory=dict)  # slot -> [first seq, end seq)
    holders: dict[str, int] = field(default_factory=dict)
    freed: int = 0
    dropped_needed: int = 0

    @property
    def end(self) -> int:
        return self.head + len(self.ts)


class TransientStore:
    """Per-stream rings of timestamped batches with a (stream, slot) index and GC.

    Args:
        slot_ms: width of a stream-index time slot (ms).
        capacity: most batches kept per stream whatever the holders say (``None`` = no
            bound); dropping a batch a holder still needed is logged and counted.
    """

    capabilities = frozenset({"transient", "stream-index"})

    def __init__(self, slot_ms: int = 1000, capacity: int | None = None) -> None:
        if slot_ms < 1:
            raise ValueError(f"slot_ms must be >= 1, got {slot_ms}")
        self.slot_ms = slot_ms
        self.capacity = capacity
        self._rings: dict[str, _Ring] = {}
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ writing

    def append(self, stream: str, ts: int, triples: np.ndarray) -> int:
        """Add one batch of ``stream`` at local time ``ts``; returns its sequence number.

        Raises:
            ValueError: ``ts`` is older than the stream's last batch, or a bad shape.
        """
        t = np.asarray(triples)
        if t.ndim != 2 or t.shape[1] != 3:
            raise ValueError(f"expected an (n, 3) array of triples, got shape {t.shape}")
        t = np.array(t, dtype=_I64)  # own copy: callers may reuse their buffers
        t.flags.writeable = False
        ts = int(ts)
        with self._lock:
            r = self._rings.setdefault(stream, _Ring())
            if r.ts and ts < r.ts[-1]:
                raise ValueError(f"stream {stream!r}: timestamp {ts} is older than {r.ts[-1]}")
            seq = r.end
            r.ts.append(ts)
            r.data.append(t)
            r.starts.append(r.total)
            r.total += len(t)
            slot = ts // self.slot_ms
            if r.slots and r.slots[-1] == slot:
                r.index[slot][1] = seq + 1
            else:
                r.slots.append(slot)
                r.index[slot] = [seq, seq + 1]
            if self.capacity is not None and len(r.ts) > self.capacity:
                self._drop(r, len(r.ts) - self.capacity, forced=True)
            return seq

    # ------------------------------------------------------------------ reading

    def _range(self, r: _Ring, a: int, b: int) -> tuple[int, int]:
        """Ring positions ``[i, j)`` of the batches with ``a <= ts < b``, via the stream index."""
        if b <= a or not r.slots:
            return 0, 0
        i0 = bisect_left(r.slots, a // self.slot_ms)
        i1 = bisect_right(r.slots, (b - 1) // self.slot_ms)
        if i0 >= i1:
            return 0, 0
        first_lo, first_hi = r.index[r.slots[i0]]
        last_lo, last_hi = r.index[r.slots[i1 - 1]]
        # exact bounds only need a search inside the two boundary slots
        i = bisect_left(r.ts, a, first_lo - r.head, first_hi - r.head)
        j = bisect_left(r.ts, b, last_lo - r.head, last_hi - r.head)
        return i, j

    def batches(self, stream: str, a: int, b: int) -> list[TimedBatch]:
        """The batches of ``stream`` with ``a <= ts < b``, oldest first."""
        with self._lock:
            r = self._rings.get(stream)
            if r is None:
                return []
            i, j = self._range(r, a, b)
            return [TimedBatch(r.head + k, r.ts[k], r.data[k]) for k in range(i, j)]

    def window(self, stream: str, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Triples of ``stream`` in the window ``[a, b)`` and their timestamps.

        Returns:
            ``(triples (n, 3), ts (n,))`` int64 arrays in arrival order.
        """
        bs = self.batches(stream, a, b)
        if not bs:
            return np.empty((0, 3), dtype=_I64), np.empty(0, dtype=_I64)
        lens = [len(x.triples) for x in bs]
        return np.concatenate([x.triples for x in bs]), np.repeat(
            np.array([x.ts for x in bs], dtype=_I64), lens
        )

    # ------------------------------------------------------------------ reading by position

    def _seek(self, r: _Ring, t: int) -> int:
        """Ring index of the first batch with ``ts >= t`` (``len(r.ts)`` if none).

        The first occupied slot at or after ``t``'s slot holds it; only that slot is
        searched.
        """
        slots = r.slots
        i = bisect_left(slots, t // self.slot_ms)
        if i == len(slots):
            return len(r.ts)
        lo, hi = r.index[slots[i]]
        return bisect_left(r.ts, t, lo - r.head, hi - r.head)

    def seek(self, stream: str, t: int) -> int:
        """Sequence number of the first batch of ``stream`` with ``ts >= t`` (its end if none)."""
        with self._lock:
            r = self._rings.get(stream)
            return 0 if r is None else r.head + self._seek(r, int(t))

    def position(self, stream: str, t: int) -> int:
        """Position of the first triple of ``stream`` with ``ts >= t`` (one past the last if none).

        Positions number every triple the stream ever received, in arrival order; they do
        not change when older batches are collected.
        """
        with self._lock:
            r = self._rings.get(stream)
            if r is None:
                return 0
            k = self._seek(r, int(t))
            return r.starts[k] if k < len(r.starts) else r.total

    def extent(self, stream: str) -> tuple[int, int]:
        """Positions ``(first held triple, one past the last triple)`` of ``stream``."""
        with self._lock:
            r = self._rings.get(stream)
            if r is None:
                return 0, 0
            return (r.starts[0] if r.starts else r.total), r.total

    def last_ts(self, stream: str) -> int | None:
        """Timestamp of the newest batch of ``stream`` held (``None`` if none is)."""
        with self._lock:
            r = self._rings.get(stream)
            return r.ts[-1] if r is not None and r.ts else None

    def last_before(self, stream: str, t: int) -> int | None:
        """Timestamp of the latest batch (empty ones included) with ``ts < t``, if held."""
        with self._lock:
            r = self._rings.get(stream)
            if r is None:
                return None
            k = self._seek(r, int(t))
            return r.ts[k - 1] if k else None

    def slice(
        self, stream: str, lo: int, hi: int, *, times: bool = False
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Triples of ``stream`` at positions ``[lo, hi)``, read batch by batch.

        The positions map to the batch sequence range holding them (a binary search over
        the batches' first positions); positions already collected are skipped (only a
        ``capacity`` bound can collect what a reader still holds, and that is logged).

        Returns:
            ``(triples (n, 3), ts (n,) or None)``; the triples may be a read-only view.
        """
        with self._lock:
            r = self._rings.get(stream)
            if r is None or hi <= lo or not r.starts:
                return _EMPTY3, (_EMPTY1 if times else None)
            starts = r.starts
            k0 = max(bisect_right(starts, lo) - 1, 0)
            k1 = bisect_left(starts, hi, k0)
            parts = r.data[k0:k1]
            stamps = r.ts[k0:k1]
            off = starts[k0]
        if not parts:
            return _EMPTY3, (_EMPTY1 if times else None)
        arr = parts[0] if len(parts) == 1 else np.concatenate(parts)
        a, b = max(lo - off, 0), hi - off
        ts = None
        if times:
            ts = np.repeat(np.array(stamps, dtype=_I64), [len(p) for p in parts])[a:b]
        return arr[a:b], ts

    def floor(self, stream: str, pos: int) -> int | None:
        """Timestamp a reader at position ``pos`` must keep: its batch's (``None``: nothing held).

        A reader past the last triple keeps the newest batch (its timestamp still answers
        "the latest element before ``c``").
        """
        with self._lock:
            r = self._rings.get(stream)
            if r is None or not r.ts:
                return None
            if pos >= r.total:
                return r.ts[-1]
            return r.ts[max(bisect_right(r.starts, pos) - 1, 0)]

    def retain_many(self, stream: str, floors: dict[str, int], prefix: str | None = None) -> int:
        """:meth:`retain` for several holders at once (one collection pass).

        Args:
            stream: The stream.
            floors: ``holder -> oldest timestamp it may still read``.
            prefix: If given, holders whose name starts with it and that are not in
                ``floors`` are released (a reader that left without saying so).

        Returns:
            The number of batches freed.
        """
        with self._lock:
            r = self._rings.setdefault(stream, _Ring())
            if prefix is not None:
                for h in [h for h in r.holders if h.startswith(prefix) and h not in floors]:
                    del r.holders[h]
            r.holders.update(floors)
            return self._collect(r)

    def streams(self) -> list[str]:
        """Streams with a ring."""
        with self._lock:
            return list(self._rings)

    def stats(self, stream: str) -> dict[str, int]:
        """Batches held, triples held, batches freed so far, first/last sequence numbers, holders."""
        with self._lock:
            r = self._rings.get(stream)
            if r is None:
                return {"batches": 0, "triples": 0, "freed": 0, "head": 0, "end": 0}
            return {
                "batches": len(r.ts),
                "triples": r.total - r.starts[0] if r.starts else 0,
                "freed": r.freed,
                "head": r.head,
                "end": r.end,
                "slots": len(r.slots),
                "dropped_needed": r.dropped_needed,
                "holders": len(r.holders),
            }

    # ------------------------------------------------------------------ retention / GC

    def retain(self, stream: str, min_ts: int, holder: str = "default") -> int:
        """Declare that ``holder`` still needs the batches of ``stream`` from ``min_ts`` on.

        Collects the batches older than every holder's floor; returns how many were freed.
        """
        with self._lock:
            r = self._rings.setdefault(stream, _Ring())
            r.holders[holder] = int(min_ts)
            return self._collect(r)

    def release(self, stream: str, holder: str = "default") -> int:
        """Forget ``holder`` (e.g. its window was unregistered); returns batches freed."""
        with self._lock:
            r = self._rings.get(stream)
            if r is None or r.holders.pop(holder, None) is None:
                return 0
            return self._collect(r)

    def _collect(self, r: _Ring) -> int:
        if not r.holders:
            return 0  # nobody said what is needed: only ``capacity`` bounds the ring
        floor = min(r.holders.values())
        n = bisect_left(r.ts, floor)
        return self._drop(r, n, forced=False) if n else 0

    def _drop(self, r: _Ring, n: int, *, forced: bool) -> int:
        """Free the ``n`` oldest batches and their stream-index entries."""
        if forced and r.holders:
            floor = min(r.holders.values())
            needed = len(r.ts[:n]) - bisect_left(r.ts, floor, 0, n)
            if needed:
                r.dropped_needed += needed
                _log.warning("transient ring over capacity: dropped %d batches a window still needed", needed)
        del r.ts[:n]
        del r.data[:n]
        del r.starts[:n]
        r.head += n
        r.freed += n
        k = 0
        while k < len(r.slots) and r.index[r.slots[k]][1] <= r.head:
            del r.index[r.slots[k]]
            k += 1
        del r.slots[:k]
        if r.slots:
            first = r.index[r.slots[0]]
            first[0] = max(first[0], r.head)
        return n
