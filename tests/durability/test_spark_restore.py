"""`linkstream restore --checkpoint URI --log DIR --spark local[2]`: checkpoint replay with Spark.

An engine with an ingest log takes one checkpoint mid-way, ingests more, and crashes.
`linkstream restore` (a real subprocess running a Spark ``local[2]`` job that reads and
checks the log segments) writes a new checkpoint from the old one plus the log after it,
the ``late`` records among them (elements refused as late or for their event time after
the checkpoint: the restored counts and watermarks are the crashed run's).
A restarted engine then restores that checkpoint and replays nothing; its results, after
those delivered before the crash, equal an engine that never stopped.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from linkstream.bulk.session import java_available
from linkstream.engine.live.checkpoint import Checkpointer
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.logship import LogShipper, adopt_shipped
from linkstream.engine.live.runtime import LiveEngine
from linkstream.store.checkpoints import open_checkpoints
from tests.durability.test_checkpoint_recovery import (
    END,
    FOLLOWED,
    QUERIES,
    STREAMS,
    N,
    _triples,
    _uninterrupted,
)

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not java_available(), reason="no Java runtime: Spark cannot start"),
]


def _drain(subs: dict[str, Any], into: dict[str, list[dict[str, Any]]]) -> None:
    for n, sub in subs.items():
        while True:
            try:
                into[n].append(json.loads(sub.get(timeout=0.3)))
            except queue.Empty:
                break


def _restore(d: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "linkstream.cli", "restore", "--log", str(d), "--spark", "local[2]", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=dict(os.environ))


def _feed(live: LiveEngine, ck: Checkpointer) -> tuple[dict[str, Any], Any]:
    """Registers the queries, pushes every element (a checkpoint after element 30) and waits
    until all is applied; returns the subscriptions and that checkpoint's id."""
    for name, text in QUERIES.items():
        live.register(text, name)
    subs = {n: live.subscribe(n) for n in FOLLOWED}
    first = None
    for i in range(1, N + 1):
        for s in STREAMS:
            live.push(s, 1000 * i, _triples(s, i))
        if i == 30:
            live.sync()
            first = ck.checkpoint()
        if i in (40, 80):  # after the checkpoint: elements refused as late, for their time
            assert live.push(STREAMS[0], 1000 * (i - 5), _triples(STREAMS[0], i)) is False
            with pytest.raises(ValueError):  # more than the maximum jump (a day) ahead
                live.push(STREAMS[1], 1000 * i + 2 * 86_400_000, _triples(STREAMS[1], i))
    live.sync()
    live.flush()
    return subs, first


@pytest.mark.slow  # ~30 s: a Spark JVM in the restore subprocess
def test_spark_restore_writes_a_checkpoint_run_loads(tmp_path: Path) -> None:
    d = tmp_path / "state"
    lg = IngestLog(str(d))
    store = open_checkpoints(str(d / "checkpoints"))
    live = LiveEngine(idle_ms=None)
    live.recover(lg, checkpoints=store)
    ck = Checkpointer(live, lg, store, 0)
    subs, first = _feed(live, ck)
    total = lg.last_seq()
    before = live.status()["streams"]  # watermarks, late and rejected counts among them
    assert (before[STREAMS[0]]["late"], before[STREAMS[1]]["rejected"]) == (2, 2)
    got: dict[str, list[dict[str, Any]]] = {n: [] for n in FOLLOWED}
    _drain(subs, got)
    live._closed = True  # a crash: nothing is closed in order
    live._queue.put(("stop",))
    lg.close()

    p = _restore(d)
    assert p.returncode == 0, p.stderr[-3000:]
    new = store.latest_id()
    assert new is not None and new != first
    meta = store.meta(new)
    assert meta["from"] == first and meta["spark"] == "local[2]" and meta["seq"] == total
    assert (
        "checkpoint %s in file://%s: checkpoint %s + %d log records (through record %d), %d queries"
        % (new, d / "checkpoints", first, total - store.meta(first)["seq"], total, len(QUERIES))
        in p.stdout
    )

    # the state dir is locked while restore runs: refused by a second one while run holds it
    lg = IngestLog(str(d))
    busy = _restore(d)
    assert busy.returncode == 2 and "is in use by another process (stop linkstream run first)" in busy.stderr
    live = LiveEngine(idle_ms=None)
    assert live.recover(lg, checkpoints=store) == 0  # nothing left to replay
    st = live.status()
    assert {s: st["streams"][s]["elements"] for s in STREAMS} == {s: N for s in STREAMS}
    # the log's late records were read: the counts (and watermarks) of the run that crashed
    assert st["streams"] == before
    # and the watermarks decide as that run's would: behind s1's, late
    assert live.push(STREAMS[0], 1000 * (N - 1), _triples(STREAMS[0], N)) is False
    subs = {n: live.subscribe(n) for n in FOLLOWED}
    live.advance_to(END)
    live.flush()
    _drain(subs, got)
    live.close()
    assert got == _uninterrupted()


def test_restore_refuses_a_missing_log(tmp_path: Path) -> None:
    p = _restore(tmp_path / "nothing")
    assert p.returncode == 2 and "no ingest log there" in p.stderr and "Traceback" not in p.stderr


def test_run_path_imports_neither_spark_nor_boto3(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from linkstream.cli.main import main\n"
        "import linkstream.cli.service, linkstream.engine.live.checkpoint, linkstream.engine.live.recovery\n"
        "from linkstream.engine.live.ingestlog import IngestLog\n"
        "from linkstream.engine.live.runtime import LiveEngine\n"
        "from linkstream.store.checkpoints import open_checkpoints\n"
        "live = LiveEngine(idle_ms=None)\n"
        "live.recover(IngestLog(sys.argv[1]), checkpoints=open_checkpoints(sys.argv[1] + '/ck'))\n"
        "live.close()\n"
        "print(sorted(m for m in ('pyspark', 'boto3', 'botocore') if m in sys.modules))\n"
    )
    p = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


@pytest.mark.slow  # ~30 s: a Spark JVM in the restore subprocess
def test_spark_restore_reads_the_shipped_log_of_a_lost_state_dir(
    tmp_path: Path, moto_s3: SimpleNamespace, s3_bucket: str
) -> None:
    """The state dir is lost after a crash; its log was shipped to S3 (moto server, real
    boto3): `restore --log NEW --checkpoint s3://...` reads the shipped pieces with Spark and
    writes a checkpoint covering every record; a run on a new dir then replays nothing."""
    uri = f"s3://{s3_bucket}/r"
    d = tmp_path / "state"
    lg = IngestLog(str(d))
    store = open_checkpoints(uri)
    live = LiveEngine(idle_ms=None)
    live.recover(lg, checkpoints=store)
    ck = Checkpointer(live, lg, store, 0)
    ck.shipper = LogShipper(lg, store.backend, 0.05).start()
    subs, first = _feed(live, ck)
    total = lg.last_seq()
    ck.shipper.stop()  # one last ship
    assert ck.shipper.stats()["shipped_seq"] == total
    got: dict[str, list[dict[str, Any]]] = {n: [] for n in FOLLOWED}
    _drain(subs, got)
    live._closed = True  # a crash: nothing is closed in order
    live._queue.put(("stop",))
    lg.close()
    shutil.rmtree(d)  # and the disk is lost

    p = _restore(tmp_path / "new", "--checkpoint", uri)
    assert p.returncode == 0, p.stderr[-3000:]
    new = store.latest_id()
    assert new is not None and new != first and store.meta(new)["seq"] == total
    assert "+ %d log records (through record %d)" % (total - store.meta(first)["seq"], total) in p.stdout

    lg = IngestLog(str(tmp_path / "again"))
    adopt_shipped(lg, store.backend)
    live = LiveEngine(idle_ms=None)
    assert live.recover(lg, checkpoints=store) == 0  # the restored checkpoint covers it all
    st = live.status()
    assert {s: st["streams"][s]["elements"] for s in STREAMS} == {s: N for s in STREAMS}
    subs = {n: live.subscribe(n) for n in FOLLOWED}
    live.advance_to(END)
    live.flush()
    _drain(subs, got)
    live.close()
    assert got == _uninterrupted()
