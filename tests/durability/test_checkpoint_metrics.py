"""A checkpointer's Prometheus series: what the ``LinkStreamCheckpointsFailing`` alert reads.

A real embedded engine with its ingest log and a file checkpoint store: periodic
checkpoints count up and keep the age below an interval; a store that refuses writes counts
failures while the age grows past the interval; a periodic checkpoint skipped because
nothing changed still counts as covered; stopping takes the series off the registry.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from linkstream.engine.live.checkpoint import Checkpointer
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.runtime import LiveEngine
from linkstream.store.checkpoints import CheckpointStore, open_checkpoints

EX = "http://example.org/"
QUERY = f"""PREFIX ex: <{EX}>
SELECT (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s [RANGE 5s SLIDE 1s] {{ ?x ex:p ?v }} }}"""
INTERVAL = 0.2
Engine = tuple[LiveEngine, IngestLog, CheckpointStore]


def _wait(cond: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    lg = IngestLog(str(tmp_path / "state"))
    store = open_checkpoints(str(tmp_path / "state" / "checkpoints"))
    live = LiveEngine(idle_ms=None)
    live.recover(lg, checkpoints=store)
    live.register(QUERY, "agg")
    yield live, lg, store
    live.close()


def _push(live: LiveEngine, i: int) -> None:
    live.push(EX + "s", 1000 * i, [(f"<{EX}x{i}>", f"<{EX}p>", f'"{i}"')])
    live.sync()


def test_periodic_checkpoints_count_and_keep_the_age_low(engine: Engine) -> None:
    live, lg, store = engine
    reg = live.metrics.registry
    ck = Checkpointer(live, lg, store, INTERVAL).start()
    try:
        assert reg.get_sample_value("linkstream_checkpoint_interval_seconds") == INTERVAL
        for i in range(1, 6):
            _push(live, i)
        _wait(lambda: (reg.get_sample_value("linkstream_checkpoints_total") or 0) >= 1, "a checkpoint")
        assert reg.get_sample_value("linkstream_checkpoint_failures_total") == 0
        # nothing changes now: skipped checkpoints still count as covering the state
        time.sleep(5 * INTERVAL)
        age = reg.get_sample_value("linkstream_checkpoint_age_seconds")
        assert age is not None and age < 3 * INTERVAL, age
        assert ck.stats()["age_s"] < 3 * INTERVAL
    finally:
        ck.stop()
    # the next checkpointer (a new leadership) registers its own series
    assert reg.get_sample_value("linkstream_checkpoints_total") is None
    assert reg.get_sample_value("linkstream_checkpoint_age_seconds") is None


def test_a_store_that_refuses_writes_counts_failures_and_the_age_grows(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    live, lg, store = engine
    reg = live.metrics.registry

    def refuse(*args: object, **kwargs: object) -> str:
        raise OSError("No space left on device")

    monkeypatch.setattr(store, "write", refuse)
    ck = Checkpointer(live, lg, store, INTERVAL).start()
    try:
        i = 0

        def failed_twice() -> bool:
            nonlocal i
            i += 1
            _push(live, i)  # something changed: every period tries (and fails) a checkpoint
            return (reg.get_sample_value("linkstream_checkpoint_failures_total") or 0) >= 2

        _wait(failed_twice, "two failed checkpoints")
        assert reg.get_sample_value("linkstream_checkpoints_total") == 0
        age = reg.get_sample_value("linkstream_checkpoint_age_seconds")
        assert age is not None and age > INTERVAL, age
        assert ck.stats()["failures"] >= 2
    finally:
        ck.stop()


def test_no_periodic_checkpoints_no_interval_series(engine: Engine) -> None:
    live, lg, store = engine
    reg = live.metrics.registry
    ck = Checkpointer(live, lg, store, 0)
    try:
        _push(live, 1)
        assert ck.checkpoint() is not None
        assert reg.get_sample_value("linkstream_checkpoints_total") == 1
        # no interval: the alert's division has no series to fire on
        assert reg.get_sample_value("linkstream_checkpoint_interval_seconds") is None
    finally:
        ck.stop()
