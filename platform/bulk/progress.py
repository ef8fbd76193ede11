"""Progress lines for long Spark stages, read from Spark's status tracker."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class StageProgress:
    """While active, reports the running Spark stages' finished / total tasks every ``interval`` s.

    Use as a context manager around a Spark action::

        with StageProgress(spark, "parse", log):
            df.write.parquet(path)

    Args:
        spark: the session whose jobs are watched.
        label: what the job does, printed first on each line.
        log: receives the lines.
        interval: seconds between lines (a line is printed only when something changed).
    """

    def __init__(
        self, spark: SparkSession, label: str, log: Callable[[str], None], interval: float = 10.0
    ) -> None:
        self._tracker = spark.sparkContext.statusTracker()
        self._label = label
        self._log = log
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"progress-{label}", daemon=True)
        self._last = ""

    def __enter__(self) -> StageProgress:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                parts = []
                for sid in sorted(self._tracker.getActiveStageIds()):
                    info = self._tracker.getStageInfo(sid)
                    if info is not None:
                        parts.append(f"stage {sid}: {info.numCompletedTasks}/{info.numTasks} tasks")
            except Exception:  # the session is stopping: nothing more to report
                return
            line = ", ".join(parts)
            if line and line != self._last:
                self._last = line
                self._log(f"  {self._label}: {line}")
