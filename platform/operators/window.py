"""Stream buffers and time / count / NOW windows (SEMANTICS.md §3).

A stream buffer holds the elements of one stream, in arrival order, and numbers their
triples with absolute *positions* (stable across garbage collection).  A
:class:`WindowOperator` is a view on one: at report time ``c`` it finds the positions
``[lo, hi)`` of the window's content and emits the triples entering it (+1) and leaving
it (-1).  Expiry is a delta like any other, so nothing downstream ever recomputes a
window from scratch.

Two buffers implement :class:`WindowBuffer`:

* :class:`StreamBuffer` -- a growable int64 array with ``searchsorted`` (the default);
* :class:`RingBuffer` -- the stream's ring in a
  :class:`~linkstream.store.transient.TransientStore` (the hybrid store's transient
  part): bounds come from its stream index, deltas are read batch by batch, and every
  window is a retention holder of the ring, so collection frees the batches no window
  needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from linkstream.operators.base import Operator
from linkstream.operators.batch import Batch
from linkstream.query.windows import WindowSpec

if TYPE_CHECKING:
    from linkstream.operators.state import StateReader, StateWriter
    from linkstream.store.transient import TransientStore

TRIPLE_VARS = ("_s", "_p", "_o")


class WindowReader(Protocol):
    """What a buffer needs of a reader in its ``windows`` list: the oldest position read."""

    lo: int


class WindowBuffer(Protocol):
    """The elements of one stream as windows read them (positions are absolute triple indices).

    ``windows`` lists the readers (window operators, retention guards): collection keeps
    every position from the smallest ``lo`` among them on.
    """

    iri: str
    windows: list
    watermark: int | None

    @property
    def base(self) -> int:
        """Position of the oldest triple held."""
        ...

    @property
    def end(self) -> int:
        """Position one past the last triple."""
        ...

    @property
    def n(self) -> int:
        """Number of triples held."""
        ...

    def append(self, t: int, triples: np.ndarray) -> None: ...

    def append_arrays(self, ts: np.ndarray, triples: np.ndarray, counts: np.ndarray) -> None:
        """:meth:`append` of the elements ``i`` at ``ts[i]`` with ``counts[i]`` triples, one
        after the other in ``triples``."""
        ...

    def search(self, t: int) -> int:
        """Position of the first triple with time >= ``t``."""
        ...

    def slice(self, lo: int, hi: int) -> np.ndarray:
        """Triples at positions ``[lo, hi)`` as a (3, n) array (may be a view)."""
        ...

    def slice_timed(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Triples at ``[lo, hi)`` as (3, n) and their element timestamps (n,)."""
        ...

    def latest_element_before(self, c: int) -> int | None:
        """Timestamp of the latest element (empty or not) with time < ``c``."""
        ...

    def gc(self) -> None:
        """Free what no reader in ``windows`` needs any more."""
        ...

    def detach(self, reader: object) -> None:
        """Remove ``reader`` from ``windows`` (it reads nothing any more)."""
        ...


class StreamBuffer:
    """Append-only triples of one stream, with garbage collection of expired prefixes."""

    def __init__(self, iri: str) -> None:
        self.iri = iri
        self._tr = np.empty((3, 1024), dtype=np.int64)
        self._t = np.empty(1024, dtype=np.int64)
        self.base = 0  # absolute index of self._tr[:, 0]
        self.n = 0  # number of triples held
        self.watermark: int | None = None
        self.windows: list[WindowOperator] = []
        # timestamps of every element, empty ones included ([NOW] looks at elements)
        self._et = np.empty(256, dtype=np.int64)
        self._ne = 0

    @property
    def end(self) -> int:
        """Absolute index one past the last triple."""
        return self.base + self.n

    def append(self, t: int, triples: np.ndarray) -> None:
        """Append one element (``triples`` shape (n, 3)) with timestamp ``t``."""
        k = len(triples)
        if self.watermark is None or t > self.watermark:
            self.watermark = t
        if self._ne == self._et.shape[0]:
            self._et = np.concatenate([self._et, np.empty(self._ne, dtype=np.int64)])
        self._et[self._ne] = t
        self._ne += 1
        if k == 0:
            return
        need = self.n + k
        if need > self._t.shape[0]:
            self._grow(need)
        self._tr[:, self.n : need] = triples.T
        self._t[self.n : need] = t
        self.n = need

    def _grow(self, need: int) -> None:
        """Room for ``need`` triples (at least double the capacity: appends stay amortised O(1))."""
        cap = max(need, 2 * self._t.shape[0])
        tr = np.empty((3, cap), dtype=np.int64)
        tr[:, : self.n] = self._tr[:, : self.n]
        tt = np.empty(cap, dtype=np.int64)
        tt[: self.n] = self._t[: self.n]
        self._tr, self._t = tr, tt

    def append_many(self, ts: list[int], parts: list[np.ndarray]) -> None:
        """:meth:`append` of several elements (``ts[i]``, ``parts[i]``) in one copy each."""
        counts = np.array([len(p) for p in parts], dtype=np.int64)
        tr = np.concatenate(parts) if parts else np.empty((0, 3), dtype=np.int64)
        self.append_arrays(np.array(ts, dtype=np.int64), tr, counts)

    def append_arrays(self, ts: np.ndarray, triples: np.ndarray, counts: np.ndarray) -> None:
        """:meth:`append` of the elements ``i`` at times ``ts[i]`` with ``counts[i]`` triples,
        one after the other in ``triples`` (n, 3), in one copy (no object per element)."""
        m = len(ts)
        if not m:
            return
        top = int(ts.max())
        if self.watermark is None or top > self.watermark:
            self.watermark = top
        ne = self._ne
        while ne + m > self._et.shape[0]:
            self._et = np.concatenate([self._et, np.empty(self._et.shape[0], dtype=np.int64)])
        self._et[ne : ne + m] = ts
        self._ne = ne + m
        k = len(triples)
        if k == 0:
            return
        need = self.n + k
        if need > self._t.shape[0]:
            self._grow(need)
        self._tr[:, self.n : need] = triples.T
        self._t[self.n : need] = np.repeat(ts, counts)
        self.n = need

    def times(self) -> np.ndarray:
        return self._t[: self.n]

    def export_state(self) -> tuple[dict[str, Any], list[np.ndarray]]:
        """Copies of what the buffer holds, for a checkpoint: ``({"base", "watermark"},
        [triples (3, n), triple times (n,), element times])`` (windows are not included)."""
        return (
            {"base": int(self.base), "watermark": self.watermark},
            [self._tr[:, : self.n].copy(), self._t[: self.n].copy(), self._et[: self._ne].copy()],
        )

    def import_state(self, header: dict[str, Any], arrays: list[np.ndarray]) -> None:
        """Puts back what :meth:`export_state` gave (into a buffer no window reads yet)."""
        tr, tt, et = arrays
        if tr.ndim != 2 or tr.shape[0] != 3 or tt.shape != (tr.shape[1],) or et.ndim != 1:
            raise ValueError("stream buffer state of <%s> has inconsistent shapes" % self.iri)
        n = tr.shape[1]
        self._tr = np.empty((3, max(1024, n)), dtype=np.int64)
        self._tr[:, :n] = tr
        self._t = np.empty(max(1024, n), dtype=np.int64)
        self._t[:n] = tt
        self._et = np.empty(max(256, len(et)), dtype=np.int64)
        self._et[: len(et)] = et
        self._ne = len(et)
        self.n = n
        self.base = int(header["base"])
        wm = header.get("watermark")
        self.watermark = None if wm is None else int(wm)

    def slice_timed(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Triples at ``[lo, hi)`` as (3, n) and their element timestamps."""
        return self._tr[:, lo - self.base : hi - self.base], self._t[lo - self.base : hi - self.base]

    def search(self, t: int) -> int:
        """Absolute index of the first triple with time >= t."""
        return self.base + int(np.searchsorted(self._t[: self.n], t, "left"))

    def slice(self, lo: int, hi: int) -> np.ndarray:
        """Triples with absolute indices in [lo, hi) as a (3, n) array."""
        return self._tr[:, lo - self.base : hi - self.base]

    def latest_element_before(self, c: int) -> int | None:
        """Timestamp of the latest element (empty or not) with time < c."""
        i = int(np.searchsorted(self._et[: self._ne], c, "left"))
        return int(self._et[i - 1]) if i else None

    def gc(self) -> None:
        """Drop the prefix no window needs any more."""
        if not self.windows:
            return
        keep = min(w.lo for w in self.windows)
        drop = keep - self.base
        if drop <= 0 or drop < self.n // 2:
            return
        self._tr[:, : self.n - drop] = self._tr[:, drop : self.n]
        self._t[: self.n - drop] = self._t[drop : self.n]
        self.n -= drop
        self.base = keep
        if self.n:
            # element times older than every kept triple are needed by no [NOW] window
            first = int(np.searchsorted(self._et[: self._ne], self._t[0], "left"))
            if first > self._ne // 2:
                self._et[: self._ne - first] = self._et[first : self._ne]
                self._ne -= first

    def detach(self, reader: object) -> None:
        """Remove ``reader`` from ``windows``."""
        if reader in self.windows:
            self.windows.remove(reader)


class RingBuffer:
    """A stream's elements in the ring of a :class:`~linkstream.store.transient.TransientStore`.

    Every element is one ring batch (empty ones too: ``[NOW]`` looks at elements).  The
    buffer holds no triples itself: window bounds are positions found through the ring's
    stream index (:meth:`TransientStore.position`), deltas are read by batch sequence
    ranges (:meth:`TransientStore.slice`), and :meth:`gc` declares each reader in
    ``windows`` a retention holder of the ring with the timestamp of the oldest batch it
    still reads -- the ring then frees every batch older than all of them.

    Args:
        iri: The stream.
        store: The transient store (shared, e.g. a ``HybridStore``'s transient part);
            this buffer must be the only writer of ``iri`` in it.
    """

    def __init__(self, iri: str, store: TransientStore) -> None:
        self.iri = iri
        self.store = store
        self.windows: list = []
        self.watermark: int | None = store.last_ts(iri)
        self._holder = f"ring{id(self):x}:"

    @property
    def base(self) -> int:
        """Position of the oldest triple held."""
        return self.store.extent(self.iri)[0]

    @property
    def end(self) -> int:
        """Position one past the last triple."""
        return self.store.extent(self.iri)[1]

    @property
    def n(self) -> int:
        """Number of triples held."""
        a, b = self.store.extent(self.iri)
        return b - a

    def append(self, t: int, triples: np.ndarray) -> None:
        """Append one element (``triples`` shape (n, 3)) with timestamp ``t`` as a ring batch.

        Raises:
            ValueError: ``t`` is older than the stream's last element.
        """
        self.store.append(self.iri, t, triples)
        if self.watermark is None or t > self.watermark:
            self.watermark = t

    def append_arrays(self, ts: np.ndarray, triples: np.ndarray, counts: np.ndarray) -> None:
        """:meth:`append` of each element (a ring batch each, empty ones too)."""
        ends = np.cumsum(counts).tolist()
        if not ends:
            return
        for t, a, b in zip(ts.tolist(), [0, *ends[:-1]], ends, strict=True):
            self.append(t, triples[a:b])

    def search(self, t: int) -> int:
        """Position of the first triple with time >= ``t``."""
        return self.store.position(self.iri, t)

    def slice(self, lo: int, hi: int) -> np.ndarray:
        """Triples at positions ``[lo, hi)`` as a (3, n) array (a read-only view)."""
        return self.store.slice(self.iri, lo, hi)[0].T

    def slice_timed(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Triples at ``[lo, hi)`` as (3, n) and their element timestamps."""
        tr, ts = self.store.slice(self.iri, lo, hi, times=True)
        assert ts is not None
        return tr.T, ts

    def latest_element_before(self, c: int) -> int | None:
        """Timestamp of the latest element (empty or not) with time < ``c``."""
        return self.store.last_before(self.iri, c)

    def _name(self, reader: object) -> str:
        return f"{self._holder}{id(reader):x}"

    def gc(self) -> None:
        """Make every reader a retention holder at its oldest batch; the ring frees the rest."""
        floors: dict[str, int] = {}
        for w in self.windows:
            f = self.store.floor(self.iri, w.lo)
            if f is not None:
                floors[self._name(w)] = f
        # (no reader left: only this buffer's holds are dropped, nothing is freed for it)
        self.store.retain_many(self.iri, floors, prefix=self._holder)

    def detach(self, reader: object) -> None:
        """Remove ``reader`` from ``windows`` and release its hold on the ring."""
        if reader in self.windows:
            self.windows.remove(reader)
        self.store.release(self.iri, self._name(reader))


class WindowOperator(Operator):
    """The content of one window over one stream, as +/- triple deltas per report time."""

    vars: tuple[str, ...] = TRIPLE_VARS
    certain = frozenset(TRIPLE_VARS)

    def __init__(self, buffer: WindowBuffer, spec: WindowSpec, default_step: int) -> None:
        super().__init__()
        self.buffer = buffer
        self.spec = spec
        self.step = spec.step_or(default_step)
        self.lo = buffer.base
        self.hi = buffer.base
        self._pending: list[Batch] = []
        buffer.windows.append(self)

    def describe(self) -> str:
        s = self.spec
        if s.kind == "time":
            return f"Window <{self.buffer.iri}> [RANGE {s.range_ms}ms STEP {self.step}ms]"
        if s.kind == "count":
            return f"Window <{self.buffer.iri}> [TRIPLES {s.count}]"
        return f"Window <{self.buffer.iri}> [NOW]"

    def snapshot(self, w: StateWriter) -> dict[str, Any]:
        """None: a window's content is in the stream buffer, which the target holds too."""
        return {}

    def restore(self, r: StateReader, entries: dict[str, Any]) -> None:
        """Moves to the source's last report time ``r.c`` without emitting anything (its
        next delta is that of the next report only)."""
        r.expect(self, entries)
        lo, hi = self.bounds(r.c)
        self.lo, self.hi = max(lo, self.buffer.base), max(hi, self.buffer.base)
        self._pending = []

    def bounds(self, c: int) -> tuple[int, int]:
        """Absolute [lo, hi) of the window's content at report time ``c``."""
        s, b = self.spec, self.buffer
        if s.kind == "time":
            close = (c // self.step) * self.step
            assert s.range_ms is not None
            return b.search(close - s.range_ms), b.search(close)
        hi = b.search(c)
        if s.kind == "count":
            assert s.count is not None
            return max(b.base, hi - s.count), hi
        latest = b.latest_element_before(c)
        if latest is None:
            return hi, hi
        return b.search(latest), hi

    def advance(self, c: int) -> None:
        """Move to report time ``c``; the change becomes this epoch's delta."""
        lo, hi = self.bounds(c)
        lo, hi = max(lo, self.lo), max(hi, self.hi)  # windows never move backwards
        parts = []
        if hi > self.hi:
            add = self.buffer.slice(max(self.hi, lo), hi)
            if add.shape[1]:
                parts.append(Batch(TRIPLE_VARS, add.copy(), np.ones(add.shape[1], dtype=np.int64)))
        if lo > self.lo:
            rem = self.buffer.slice(self.lo, min(self.hi, lo))
            if rem.shape[1]:
                parts.append(Batch(TRIPLE_VARS, rem.copy(), -np.ones(rem.shape[1], dtype=np.int64)))
        self._pending.extend(parts)
        self.lo, self.hi = lo, hi

    def size(self) -> int:
        return self.hi - self.lo

    def content(self) -> np.ndarray:
        return self.buffer.slice(self.lo, self.hi)

    def compute(self, epoch: int) -> Batch:
        from linkstream.operators.batch import concat

        if not self._pending:
            return Batch.empty(TRIPLE_VARS)
        out = concat(self._pending, TRIPLE_VARS)
        self._pending = []
        return out

    def current(self) -> Batch:
        c = self.content()
        return Batch(TRIPLE_VARS, c.copy(), np.ones(c.shape[1], dtype=np.int64))

    def config_key(self) -> object:
        return (self.buffer.iri, self.spec, self.step)

    def discard(self) -> None:
        self.close()

    def close(self) -> None:
        self.buffer.detach(self)
