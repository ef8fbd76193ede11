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
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

import numpy as np

_log = logging.getLogger(__name__)
_I64 = np.int64


@dataclass(frozen=True)
class TimedBatch:
    """One stream batch: sequence number, local timestamp and its triples."""

    seq: int
    ts: int
    triples: np.ndarray


@dataclass
class _Ring:
    head: int = 0  # sequence number of ts[0] / data[0]
    ts: list[int] = field(default_factory=list)
    data: list[np.ndarray] = field(default_factory=list)
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

    def streams(self) -> list[str]:
        """Streams with a ring."""
        with self._lock:
            return list(self._rings)

    def stats(self, stream: str) -> dict[str, int]:
        """Batches held, triples held, batches freed so far, first/last sequence numbers."""
        with self._lock:
            r = self._rings.get(stream)
            if r is None:
                return {"batches": 0, "triples": 0, "freed": 0, "head": 0, "end": 0}
            return {
                "batches": len(r.ts),
                "triples": sum(len(d) for d in r.data),
                "freed": r.freed,
                "head": r.head,
                "end": r.end,
                "slots": len(r.slots),
                "dropped_needed": r.dropped_needed,
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
