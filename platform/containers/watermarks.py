"""Combined watermark of a task's upstream partitions.

A partition's watermark ``w`` promises that it will send no element with a timestamp
below ``w`` (the engine's stream watermark is the latest timestamp seen, and elements
arrive in non-decreasing order; spec section 1).  A window instance closing at ``c``
holds ``t < c``, so it is complete, and may fire, once **every** upstream partition has
reached ``c``: when the minimum of their watermarks is ``>= c``.

:class:`WatermarkTracker` keeps that minimum while partitions join, leave and finish:

* A partition that joins without a watermark holds the minimum back until its first
  report (it may still send anything not yet declared late).
* A partition that finishes (end of stream) stops holding the minimum back.
* A partition that leaves (its task moved or was removed) is forgotten.
* The combined watermark never goes backwards: windows that already fired cannot be
  unfired.  A report below a partition's own watermark is ignored; a partition whose
  first watermark is behind the combined one is tracked, but the combined value stays.  Both are
  counted in :attr:`WatermarkTracker.regressions` (data they send below the combined
  watermark is late).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

FINISHED = 2**63 - 1  # the watermark of a partition that will send nothing more


@dataclass
class WatermarkTracker:
    """Per-partition watermarks and their monotone minimum.

    Attributes:
        regressions: Reports that tried to move a partition's watermark backwards
            (ignored), plus partitions whose first watermark was behind the combined one.
    """

    _marks: dict[Hashable, int | None] = field(default_factory=dict)
    _combined: int | None = None
    regressions: int = 0

    @classmethod
    def of(cls, partitions: Iterable[Hashable]) -> WatermarkTracker:
        """A tracker expecting ``partitions``, none of which has reported yet."""
        tracker = cls()
        for p in partitions:
            tracker.add(p)
        return tracker

    @property
    def partitions(self) -> frozenset[Hashable]:
        """The partitions currently tracked (finished ones included)."""
        return frozenset(self._marks)

    @property
    def watermark(self) -> int | None:
        """The combined watermark: ``None`` until every partition has reported once."""
        return self._combined

    def partition_watermark(self, partition: Hashable) -> int | None:
        """One partition's own watermark (``None`` before its first report)."""
        return self._marks[partition]

    def add(self, partition: Hashable, watermark: int | None = None) -> None:
        """Starts tracking ``partition``, optionally at a known ``watermark``.

        Raises:
            KeyError: The partition is tracked already.
        """
        if partition in self._marks:
            raise KeyError(f"partition {partition!r} is tracked already")
        if watermark is not None:
            self._note_first(partition, watermark)
        self._marks[partition] = watermark
        self._recompute()

    def remove(self, partition: Hashable) -> None:
        """Stops tracking ``partition`` (the minimum may then advance); unknown ones are ignored."""
        if partition in self._marks:
            del self._marks[partition]
            self._recompute()

    def update(self, partition: Hashable, watermark: int) -> int | None:
        """Records a report of ``partition`` (tracking it if new) and returns the combined
        watermark."""
        if partition not in self._marks:
            self.add(partition, watermark)
            return self._combined
        old = self._marks[partition]
        if old is not None and watermark < old:
            self.regressions += 1
            logger.debug("watermark of %r went back from %d to %d; ignored", partition, old, watermark)
            return self._combined
        if old is None:
            self._note_first(partition, watermark)
        self._marks[partition] = watermark
        self._recompute()
        return self._combined

    def finish(self, partition: Hashable) -> int | None:
        """Marks ``partition`` finished (end of stream) and returns the combined watermark."""
        return self.update(partition, FINISHED)

    def can_fire(self, close_time: int) -> bool:
        """Whether a window instance closing at ``close_time`` is complete."""
        return self._combined is not None and self._combined >= close_time

    @property
    def finished(self) -> bool:
        """Whether every tracked partition has finished (and there is at least one)."""
        return bool(self._marks) and all(w == FINISHED for w in self._marks.values())

    def _note_first(self, partition: Hashable, watermark: int) -> None:
        """Counts a partition whose first watermark is behind the combined one."""
        if self._combined is not None and watermark < self._combined:
            self.regressions += 1
            logger.debug(
                "partition %r starts at %d, behind the combined %d", partition, watermark, self._combined
            )

    def _recompute(self) -> None:
        if not self._marks:
            return  # no inputs: nothing can advance the watermark, keep what was promised
        marks = self._marks.values()
        if any(w is None for w in marks):
            return
        low = min(w for w in marks if w is not None)
        if self._combined is None or low > self._combined:
            self._combined = low
