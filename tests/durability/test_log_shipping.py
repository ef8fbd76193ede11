"""Log shipping: the durable ingest log uploaded to the checkpoint store and read back.

Real components only: the ingest log on disk, the store on a moto S3 server (server mode)
through the real boto3 client, and for recovery a real `linkstream run` subprocess that is
killed with SIGKILL and restarted on a *new, empty* state directory: everything it
acknowledged (and shipped) is back, and the results equal those of a run that never stopped.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import boto3
import httpx
import pytest
from botocore.config import Config
from prometheus_client import CollectorRegistry

from linkstream.api.client import Client
from linkstream.engine.live.ingestlog import IngestLog
from linkstream.engine.live.logship import (
    LogShipper,
    adopt_shipped,
    read_manifest,
    ship_enabled,
    shipped_records,
)
from linkstream.store.checkpoint_backends import FileBackend, S3Backend
from linkstream.store.checkpoints import CheckpointError
from tests.durability.test_checkpoint_recovery import (
    END,
    FOLLOWED,
    QUERIES,
    STREAMS,
    N,
    Reader,
    _free_port,
    _start,
    _triples,
    _uninterrupted,
)


def _push(lg: IngestLog, k: int, start: int = 0) -> int:
    seq = -1
    for i in range(start, start + k):
        seq = lg.append_push("http://example.org/s", i, [("<http://x/a>", "<http://x/p>", '"%d"' % i)])
        lg.wait(seq)
    return seq


def _until(cond, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_ship_truncate_and_read_back_on_s3(tmp_path: Path, moto_s3: SimpleNamespace, s3_bucket: str) -> None:
    backend = S3Backend(s3_bucket, "run1", client=moto_s3.client())
    lg = IngestLog(str(tmp_path / "state"), segment_bytes=4000)
    registry = CollectorRegistry()
    sh = LogShipper(lg, backend, 0.05, registry).start()
    try:
        last = _push(lg, 300)
        _until(lambda: sh.stats()["shipped_seq"] == last)
        pieces = read_manifest(backend)
        assert pieces[0].first == 0 and pieces[-1].last == last
        assert all(b.first == a.last + 1 for a, b in zip(pieces, pieces[1:]))  # contiguous
        assert len(pieces) >= 3  # closed segments and tails
        assert [r.seq for r in shipped_records(backend)] == list(range(300))
        assert registry.get_sample_value("linkstream_log_segments_shipped_total") == len(pieces)
        assert registry.get_sample_value("linkstream_log_ship_lag_seconds") == 0.0
        # a kept checkpoint covers records through 150: pieces wholly before it go, here and locally
        local_before = len(os.listdir(lg.log_dir))
        lg.truncate_through(150)
        sh.checkpointed(150)
        _until(lambda: sh.stats()["truncated"] > 0)
        left = read_manifest(backend)
        assert left and left[0].first <= 151 <= left[0].last and left[-1].last == last
        keys = [o["Key"] for o in moto_s3.client().list_objects_v2(Bucket=s3_bucket)["Contents"]]
        assert sorted(k for k in keys if k.endswith(".log")) == sorted("run1/" + p.key for p in left)
        assert len(os.listdir(lg.log_dir)) < local_before
        assert registry.get_sample_value("linkstream_log_shipped_truncated_total") == len(pieces) - len(left)
    finally:
        sh.stop()
        lg.close()
    # a corrupt piece is one clear error naming it
    p = left[-1]
    moto_s3.client().put_object(Bucket=s3_bucket, Key="run1/" + p.key, Body=b"x" * p.size)
    with pytest.raises(
        CheckpointError, match=r"shipped log piece log/%020d-%020d\.log is corrupt" % (p.first, p.last)
    ):
        list(shipped_records(backend))


def test_a_lost_local_log_continues_from_the_store(tmp_path: Path) -> None:
    backend = FileBackend(str(tmp_path / "store"))
    state = str(tmp_path / "state")
    lg = IngestLog(state, segment_bytes=3000)
    sh = LogShipper(lg, backend, 0.05).start()
    last = _push(lg, 120)
    _until(lambda: sh.stats()["shipped_seq"] == last)
    sh.stop()
    lg.close()
    shutil.rmtree(state)
    lg = IngestLog(state)
    try:
        assert adopt_shipped(lg, backend) == 120
        assert [r.seq for r in lg.pending_records()] == list(range(120))
        assert lg.offsets() == {"http://example.org/s": 120}
        assert _push(lg, 1, 500) == 120  # numbering goes on after the shipped log
    finally:
        lg.close()
    lg = IngestLog(state)  # and the local log now holds it all, in order
    try:
        assert [r.seq for r in lg.records()] == list(range(121))
    finally:
        lg.close()


def test_a_diverged_local_log_is_set_aside(tmp_path: Path) -> None:
    """A coordinator's old local log (it led before) does not continue the log another leader
    shipped since: its segments are set aside, the store's records are taken."""
    backend = FileBackend(str(tmp_path / "store"))
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    lg = IngestLog(a)
    sh = LogShipper(lg, backend, 0.05).start()
    _push(lg, 10)
    _until(lambda: sh.stats()["shipped_seq"] == 9)
    sh.stop()
    _push(lg, 3, 100)  # 10..12 never shipped: this leader dies
    lg.close()
    lg = IngestLog(b)  # the next leader
    adopt_shipped(lg, backend)
    list(lg.records())
    sh = LogShipper(lg, backend, 0.05).start()
    _push(lg, 5, 200)  # its own 10..14
    _until(lambda: sh.stats()["shipped_seq"] == 14)
    sh.stop()
    lg.close()
    lg = IngestLog(a)  # the first one leads again
    try:
        adopt_shipped(lg, backend)
        recs = lg.pending_records()
        assert [r.header["t"] for r in recs] == [*range(10), *range(200, 205)]
        assert any(f.endswith(".stale") for f in os.listdir(lg.log_dir))
    finally:
        lg.close()


def test_an_unreachable_store_never_blocks_acknowledgements(
    tmp_path: Path, moto_s3: SimpleNamespace, s3_bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    """No bucket yet (the store refuses): pushes are acknowledged at local fsync speed, the
    failures are logged and counted, and once the bucket exists the log is shipped."""
    client = boto3.client("s3", config=Config(retries={"max_attempts": 1}))
    backend = S3Backend(s3_bucket + "-later", "", client=client)
    lg = IngestLog(str(tmp_path / "state"))
    registry = CollectorRegistry()
    sh = LogShipper(lg, backend, 0.05, registry).start()
    try:
        t0 = time.perf_counter()
        last = _push(lg, 200)
        assert time.perf_counter() - t0 < 5.0
        _until(lambda: sh.failures >= 1)
        assert registry.get_sample_value("linkstream_log_ship_failures_total") >= 1
        assert registry.get_sample_value("linkstream_log_ship_lag_seconds") > 0
        assert "NoSuchBucket" in (sh.last_error or "")
        assert any(
            "log shipping to s3://%s-later/ failed" % s3_bucket in r.getMessage() for r in caplog.records
        )
        client.create_bucket(Bucket=s3_bucket + "-later")
        _until(lambda: sh.stats()["shipped_seq"] == last, timeout=15)
        assert [r.seq for r in shipped_records(backend)] == list(range(last + 1))
        assert registry.get_sample_value("linkstream_log_ship_lag_seconds") == 0.0
    finally:
        sh.stop()
        lg.close()


def test_ship_enabled() -> None:
    assert not ship_enabled("file:///d/state/checkpoints", "/d/state")
    assert ship_enabled("file:///d/ckpt", "/d/state")
    assert ship_enabled("s3://b/p", "/d/state")


def test_kill_9_and_a_lost_state_dir_recover_from_the_store(
    tmp_path: Path, moto_s3: SimpleNamespace, s3_bucket: str
) -> None:
    """`run --state-dir A` with checkpoints and the shipped log on S3 is killed after its last
    acknowledged push has been shipped; `run --state-dir B` (empty) restores the checkpoint,
    replays the shipped log after it, and the whole run's results equal an uninterrupted one."""
    env = {**moto_s3.env, "LINKSTREAM_CHECKPOINTS": f"s3://{s3_bucket}/run"}
    errlog = tmp_path / "server.log"
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    ship = ["--checkpoint-interval", "0.3", "--log-ship-interval", "0.1"]
    proc = _start(["--state-dir", str(tmp_path / "a"), *ship], port, errlog, env)
    try:
        with Client(url) as c:
            for name, text in QUERIES.items():
                c.register(text, name)
            for i in range(1, N + 1):
                for s in STREAMS:
                    assert c.push_triples(s, 1000 * i, _triples(s, i))["elements"] == 1
                if i == N // 2:
                    time.sleep(0.5)  # a checkpoint mid-way
        durable = httpx.get(url + "/status").json()["ingest_log"]["durable_seq"]
        _until(lambda: httpx.get(url + "/status").json()["checkpoints"]["shipping"]["shipped_seq"] == durable)
        st = httpx.get(url + "/status").json()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        assert st["checkpoints"]["checkpoints"] >= 1 and st["checkpoints"]["shipping"]["failures"] == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    shutil.rmtree(tmp_path / "a")  # the disk is lost
    proc = _start(["--state-dir", str(tmp_path / "b"), *ship], port, errlog, env)
    try:
        with Client(url) as c:
            st = c.status()
            assert {s: st["streams"][s]["elements"] for s in STREAMS} == {s: N for s in STREAMS}
            assert [q["name"] for q in c.queries()] == list(QUERIES)
            assert st["ingest_log"]["next_seq"] == durable + 1
            text = httpx.get(url + "/metrics").text
            assert (
                "linkstream_log_segments_shipped_total" in text and "linkstream_log_ship_lag_seconds" in text
            )
            whole = [Reader(url, n, "0", END) for n in FOLLOWED]
            for r in whole:
                r.start()
                r.ready.wait(10)
            c.advance(END)
            for r in whole:
                r.join(60)
                assert not r.is_alive() and r.error is None, r.error
    finally:
        proc.kill()
        proc.wait(30)
    log_text = errlog.read_text()
    assert "restored from the shipped log" in log_text, log_text[-3000:]
    assert "restored checkpoint" in log_text
    want = _uninterrupted()
    for r in whole:
        assert [row for _, row in r.got] == want[r.name], r.name


def test_a_deposed_shipper_stops_instead_of_overwriting_the_new_one(tmp_path: Path) -> None:
    """Two leaders for a moment (the old one has not noticed it was deposed): once the new
    shipper has written the manifest, the old one's next ship finds it is not its own and
    stops; the manifest keeps the new leader's pieces."""
    backend = FileBackend(str(tmp_path / "store"))
    old = IngestLog(str(tmp_path / "a"))
    sa = LogShipper(old, backend, 0.05).start()
    _push(old, 5)
    _until(lambda: sa.stats()["shipped_seq"] == 4)
    new = IngestLog(str(tmp_path / "b"))
    adopt_shipped(new, backend)
    list(new.records())
    sb = LogShipper(new, backend, 0.05).start()
    _push(new, 3, 100)
    _until(lambda: sb.stats()["shipped_seq"] == 7)
    _push(old, 2, 50)  # the deposed leader still takes a push
    _until(lambda: sa.superseded)
    try:
        assert "is written by another shipper (%s) now: this one stops" % sb.writer in (sa.last_error or "")
        assert [r.header["t"] for r in shipped_records(backend)] == [0, 1, 2, 3, 4, 100, 101, 102]
        assert sb.stats()["superseded"] is False
    finally:
        sa.stop()
        sb.stop()
        old.close()
        new.close()


def test_a_gap_in_the_shipped_log_keeps_the_run_after_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Pieces before a gap (a crash between a ship and the truncation of what a checkpoint
    covers) are not used: the local log takes the run after the gap, with a warning."""
    import msgpack

    from linkstream.engine.live.logship import MANIFEST

    backend = FileBackend(str(tmp_path / "store"))
    lg = IngestLog(str(tmp_path / "a"), segment_bytes=1500)
    sh = LogShipper(lg, backend, 0.05).start()
    last = _push(lg, 60)
    _until(lambda: sh.stats()["shipped_seq"] == last)
    sh.stop()
    lg.close()
    pieces = read_manifest(backend)
    assert len(pieces) >= 3
    doc = msgpack.unpackb(backend.get(MANIFEST), raw=False)
    doc["pieces"] = [p.row() for p in pieces if p != pieces[1]]
    backend.put(MANIFEST, msgpack.packb(doc, use_bin_type=True))
    lg = IngestLog(str(tmp_path / "b"))
    try:
        adopt_shipped(lg, backend)
        assert [r.seq for r in lg.pending_records()] == list(range(pieces[2].first, last + 1))
        assert "the shipped log jumps from record %d to %d" % (pieces[0].last, pieces[2].first) in caplog.text
    finally:
        lg.close()


def test_an_endpoint_nobody_answers_never_blocks_acknowledgements(tmp_path: Path) -> None:
    """An S3 endpoint where nothing listens: pushes are acknowledged at local fsync speed,
    each failed attempt is counted and retried with a growing backoff."""
    client = boto3.client(
        "s3",
        endpoint_url="http://127.0.0.1:%d" % _free_port(),
        region_name="us-east-1",
        aws_access_key_id="wrong",
        aws_secret_access_key="wrong",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1),
    )
    lg = IngestLog(str(tmp_path / "state"))
    registry = CollectorRegistry()
    sh = LogShipper(lg, S3Backend("nobody", "p", client=client), 0.05, registry).start()
    try:
        t0 = time.perf_counter()
        _push(lg, 200)
        assert time.perf_counter() - t0 < 5.0
        _until(lambda: sh.failures >= 2, timeout=10)
        assert "Could not connect to the endpoint URL" in (sh.last_error or "")
        assert registry.get_sample_value("linkstream_log_ship_failures_total") >= 2
        assert (
            sh.stats()["shipped_seq"] == -1
            and registry.get_sample_value("linkstream_log_ship_lag_seconds") > 0
        )
    finally:
        sh.stop()
        lg.close()


def test_a_shorter_local_log_with_an_empty_newer_segment_continues_in_order(tmp_path: Path) -> None:
    """The local log lost its last records and holds an empty segment named further on (a
    crash right after a rotation): the shipped records it lacks go into a segment of their
    own, and the log reads back whole and in order after a restart."""
    backend = FileBackend(str(tmp_path / "store"))
    state = str(tmp_path / "state")
    lg = IngestLog(state)
    sh = LogShipper(lg, backend, 0.05).start()
    _push(lg, 15)
    _until(lambda: sh.stats()["shipped_seq"] == 14)
    sh.stop()
    lg.close()
    [seg] = os.listdir(os.path.join(state, "log"))
    local = IngestLog(str(tmp_path / "short"))
    _push(local, 10)
    local.close()
    shutil.rmtree(os.path.join(state, "log"))
    shutil.copytree(os.path.join(tmp_path, "short", "log"), os.path.join(state, "log"))
    open(os.path.join(state, "log", "%020d.log" % 50), "wb").close()
    lg = IngestLog(state)
    try:
        assert adopt_shipped(lg, backend) == 5
        assert [r.seq for r in lg.pending_records()] == list(range(15))
        assert _push(lg, 1, 99) == 15
    finally:
        lg.close()
    lg = IngestLog(state)
    try:
        assert [r.seq for r in lg.records()] == list(range(16))
        assert sorted(os.listdir(lg.log_dir)) == [seg, "%020d.log" % 10]
    finally:
        lg.close()
