"""Cluster checkpoints bound the leader take-over (``run --zk --state-dir --checkpoint-interval``).

Real processes: the session's ZooKeeper, two API coordinators on one shared ``--state-dir``
(checkpoints every 0.25 s to ``DIR/checkpoints`` or to S3 through a moto server with the real
boto3 client) and two operator containers.  Three CityBench queries are registered on the
standby (and an IStream variant of one), the first two thirds of the slice are pushed to the leader (several checkpoints are
taken meanwhile and the log segments they cover are deleted), the leader is killed with
SIGKILL and the rest is pushed to the survivor.  The survivor restores the latest complete
checkpoint and replays only the log records after it -- counted exactly -- and every query's
results equal an embedded ``run`` fed the same pushes: 0 lines lost, 0 duplicated.

With the newest checkpoint corrupted after the kill, the survivor says so in one log line,
restores the previous complete checkpoint and replays the suffix after it (the log is
truncated only up to what the oldest kept checkpoint covers): the results are still exact.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from linkstream.api.client import Client
from linkstream.cluster.checkpoints import read_pointer
from linkstream.cluster.localcluster import LocalCluster
from linkstream.store.checkpoints import open_checkpoints
from tests.api.corpus import corpus_or_skip
from tests.cluster.test_leader_kill_live import collect, push_retrying
from tests.cluster.test_live_service import QUERIES, SESSION_S, TIMEOUT, _wait_roles

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

INTERVAL = "0.25"
ISTREAM = "istream-avg-congestion"
NAMES = [*QUERIES, ISTREAM]
_SINGLE = """PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ses: <http://www.insight-centre.org/dataset/SampleEventService#>
PREFIX : <http://linkstream.example/windows#>
REGISTER {mode} <{name}> AS
SELECT (COUNT(?ob) AS ?n) (SUM(?v) AS ?sum) (MAX(?v) AS ?max)
FROM NAMED WINDOW :w ON ses:{stream} [RANGE PT{range}S STEP PT1S]
WHERE {{ WINDOW :w {{ ?ob sao:hasValue ?v }} }}
"""
#: queries whose whole operator state is snapshotted (one pattern: no join, hence no router)
SNAPSHOTTED = {
    f"{mode.lower()}-{stream[-6:]}": _SINGLE.format(
        mode=mode, name=f"{mode.lower()}-{stream[-6:]}", stream=stream, range=r
    )
    for mode, stream, r in (
        ("RSTREAM", "AarhusTrafficData182955", 5),
        ("ISTREAM", "AarhusTrafficData182955", 3),
        ("RSTREAM", "AarhusTrafficData158505", 4),
        ("ISTREAM", "AarhusTrafficData158505", 6),
    )
}


def _status(url: str) -> dict:
    return httpx.get(url + "/status", timeout=10).json()


def _push_keyed(url: str, el: Any) -> int:
    r = httpx.post(
        f"{url}/streams/{quote(el.stream, safe='')}",
        params={"t": str(el.t)},
        content=el.ntriples.encode("utf-8"),
        headers={"Content-Type": "application/n-triples", "Idempotency-Key": "keyed-element"},
        timeout=30.0,
    )
    return r.status_code


def _scenario(
    tmp_path: Path,
    zk: str,
    location: str | None,
    corrupt: bool | str,
    separate: bool = False,
    queries: dict[str, str] | None = None,
    ingest: str = "leader",
) -> None:
    """``separate``: each coordinator has a state dir of its own (no shared filesystem); the
    leader ships the log to ``location`` and is killed once its last acknowledged push is
    shipped.  ``corrupt``: damage the newest checkpoint's ``queries`` object (``True``) or
    one of its task snapshots (``"task"``) after the kill.  ``queries``: these instead of
    the CityBench ones (and every one of them must be restored from its task snapshot).
    ``ingest="direct"``: the owners log the bodies in segments of 1 KiB (one per push), which
    the checkpoints prune; the new leader replays the references left."""
    corpus = corpus_or_skip(tmp_path)
    qnames = list(queries) if queries else NAMES
    texts = corpus.texts(QUERIES)
    # an IStream query: its first report after the take-over is the difference to the report
    # before, which the containers of the new run get from the silent evaluation
    texts[ISTREAM] = texts["rspql-avg-congestion"].replace("REGISTER RSTREAM", "REGISTER ISTREAM")
    assert texts[ISTREAM] != texts["rspql-avg-congestion"]
    texts.update(queries or {})
    statics = corpus.static_args()
    state = tmp_path / "state"
    uri = location or "file://" + str(state / "checkpoints")
    extra = ["--idle-ms", "0", "--checkpoint-interval", INTERVAL, *statics]
    if location:
        extra += ["--checkpoints", location, "--log-ship-interval", "0.1"]
    if ingest == "direct":
        extra += ["--ingest", "direct", "--stream-segment-mb", "0.001"]
    until = corpus.last_report(1000)
    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp_path / "cluster", zk=zk, session_timeout=SESSION_S)
    try:
        cluster.start(0, coordinators=0)
        dirs = [str(tmp_path / f"state-{k}") if separate else str(state) for k in range(2)]
        names = [cluster.start_coordinator([*extra, "--state-dir", d]) for d in dirs]
        cluster.add_containers(2)
        urls = cluster.api_urls(timeout=30)
        assert sorted(urls) == sorted(names), urls
        leader, standby = _wait_roles(urls)
        deadline = time.monotonic() + 30
        while True:  # 503 while a ZooKeeper hiccup of the loaded box moves the leadership: retry
            r = httpx.post(
                urls[standby] + "/queries",
                json=[{"query": texts[q], "name": q} for q in qnames],
                timeout=TIMEOUT,
            )
            if r.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert r.status_code == 201, r.text
        leader, standby = _wait_roles(urls)
        emb, std = Client(embedded.url), Client(urls[standby], timeout=TIMEOUT)
        for q in qnames:
            emb.register(texts[q], q)
        got: dict[str, object] = {}
        threads = []
        for q in qnames:
            for key, client in ((f"emb/{q}", emb), (f"std/{q}", std)):
                th = threading.Thread(target=collect, args=(client, q, until, got, key), daemon=True)
                th.start()
                threads.append(th)

        n = len(corpus.elements)
        kill_at = 2 * n // 3
        order = [urls[leader], urls[standby]]
        before: dict = {}
        for k, el in enumerate(corpus.elements):
            if k == kill_at:
                before = _status(urls[leader])
                ck = before["checkpoints"]
                assert ck["checkpoints"] >= 3 and ck["failures"] == 0, ck
                # the containers' operator state is in them (not the queries on a shared join's
                # router: those are listed without a snapshot, and evaluated at a take-over)
                assert ck["tasks"]["snapshotted"] >= 3, ck
                assert before["ingest_log"]["truncated_segments"] > 0, before["ingest_log"]
                if ingest == "direct":  # the bodies the checkpoints cover went with the log
                    assert ck["stream_segments_deleted"] > 0, ck
                    files = list((state / "streams").rglob("*.log"))
                    assert 0 < len(files) < kill_at // 2, len(files)
                if separate:  # what is guaranteed: an acknowledged push survives once shipped
                    durable = before["ingest_log"]["durable_seq"]
                    deadline = time.monotonic() + 10
                    while _status(urls[leader])["checkpoints"]["shipping"]["shipped_seq"] < durable:
                        assert time.monotonic() < deadline, _status(urls[leader])["checkpoints"]
                        time.sleep(0.05)
                if corrupt:  # the leader frozen first: it takes no newer checkpoint, and the
                    # standby does not take over a live process (its port still takes connections)
                    cluster.kill(leader, signal.SIGSTOP)
                    # the checkpoint ZooKeeper names (the leader may have stopped between a
                    # checkpoint's manifest and the pointer: then a newer one is on the store)
                    zk = cluster.client()
                    try:
                        bad = (read_pointer(zk, cluster.state.root) or {})["id"]
                    finally:
                        zk.stop()
                        zk.close()
                    damaged = f"ckpt-{bad}/queries"
                    if corrupt == "task":  # an operator container's object of that checkpoint
                        manifest = open_checkpoints(uri).load_id(bad).meta
                        damaged = "shared/" + sorted(manifest["tasks"].values())[0]
                    open_checkpoints(uri).backend.put(damaged, b"LSCK garbage")
                cluster.kill(leader)  # SIGKILL
                order = [urls[standby]]
            if k == kill_at // 2:  # with an idempotency key: a checkpoint covers it before the kill
                keyed = el
                assert _push_keyed(urls[leader], el) == 202
                keyed_seq = _status(urls[leader])["ingest_log"]["next_seq"] - 1
            else:
                push_retrying(order, el.stream, el.ntriples, el.t)
            emb.push(el.stream, el.ntriples, t=el.t)
            time.sleep(0.05 if k < kill_at else 0.02)
        # a retry of the keyed push reaches the new leader: taken once (the key came with the
        # checkpoint), neither counted again nor as late
        counts = _status(urls[standby])["streams"][keyed.stream]
        assert _push_keyed(urls[standby], keyed) == 202
        assert _status(urls[standby])["streams"][keyed.stream] == counts
        std.advance(until)
        emb.advance(until)
        for th in threads:
            th.join(TIMEOUT)
        for key, value in got.items():
            assert not isinstance(value, Exception), f"{key}: {value!r}"
        for q in qnames:
            want, have = Counter(got[f"emb/{q}"]), Counter(got[f"std/{q}"])
            lost, dup = sum((want - have).values()), sum((have - want).values())
            assert (lost, dup) == (0, 0), f"{q}: {lost} lines lost, {dup} duplicated"
        assert all(got[f"emb/{q}"] for q in ([ISTREAM, QUERIES[1]] if not queries else qnames)), (
            "no result lines"
        )

        # the take-over restored a checkpoint and replayed exactly the records after it
        records = before["ingest_log"]["next_seq"]  # the log held records 0 .. records-1 at the kill
        after = _status(urls[standby])
        take = after["takeover"]
        assert take["checkpoint"] is not None, take
        assert before["checkpoints"]["last_seq"] >= keyed_seq, (before["checkpoints"], keyed_seq)
        assert take["covered"] >= before["checkpoints"]["last_seq"] - (1 if corrupt else 0) * records, take
        assert take["replayed"] == records - 1 - take["covered"], (take, records)
        log = (cluster.dir / "logs" / f"{standby}.log").read_text()
        # the containers' operators came from the task snapshots, not from an evaluation
        # (queries on shared joins' routers through their router units; a snapshot whose
        # plan differs in the new run, sharing operators with other queries placed on the
        # same container there, is rebuilt by the silent evaluation)
        assert take["tasks_restored"] + take["tasks_rebuilt"] == take["tasks_in_checkpoint"], take
        assert take["tasks_without_snapshot"] == len(qnames) - take["tasks_in_checkpoint"], take
        containers = "".join((cluster.dir / "logs" / f).read_text() for f in ("oc-1.log", "oc-2.log"))
        if queries:
            assert take["tasks_restored"] == len(qnames), take
            assert "restored from the cluster checkpoint" in containers
        else:  # the average-congestion queries read two routers each: a router unit holds
            # both (before, they had no snapshot: "RouteOperator state is not migrated")
            assert take["tasks_in_checkpoint"] == len(qnames), take
            assert "RouteOperator state is not migrated" not in containers
            assert "routed queries restored from" in containers
        if corrupt:
            assert take["checkpoint"] != bad, take
            assert f"checkpoint {bad}: object {damaged} is corrupt" in log, log[-3000:]
            assert "falling back to the previous complete checkpoint" in log, log[-3000:]
            assert f"restored from checkpoint {take['checkpoint']}, not the latest" in log, log[-3000:]
        else:
            assert take["covered"] >= before["checkpoints"]["last_seq"], take
            assert take["replayed"] < records // 4, (take, records)  # only the suffix, not the run
        assert after["checkpoints"]["checkpoints"] >= 1, after["checkpoints"]  # the new leader goes on
        if separate:
            assert "records restored from the shipped log" in log, log[-3000:]
            assert after["checkpoints"]["shipping"]["failures"] == 0, after["checkpoints"]
    finally:
        cluster.stop()
        embedded.stop()


def test_leader_kill_restores_the_latest_checkpoint_and_replays_the_suffix(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    _scenario(tmp_path, f"{zk_server}{zk_chroot}", None, corrupt=False)


def test_direct_ingest_stream_logs_are_pruned_by_checkpoints_and_a_new_leader_replays(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    _scenario(tmp_path, f"{zk_server}{zk_chroot}", None, corrupt=False, ingest="direct")


def test_a_new_leader_without_a_shared_state_dir_replays_the_shipped_log(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    _scenario(tmp_path, f"{zk_server}{zk_chroot}", "file://" + str(tmp_path / "store"), False, separate=True)


@pytest.mark.slow  # as the one above, with a moto S3 server
def test_a_new_leader_without_a_shared_state_dir_on_s3(
    tmp_path: Path, zk_server: str, zk_chroot: str, moto_s3: SimpleNamespace
) -> None:
    bucket = "cluster-ship-" + os.urandom(4).hex()
    moto_s3.client().create_bucket(Bucket=bucket)
    _scenario(tmp_path, f"{zk_server}{zk_chroot}", f"s3://{bucket}/run1", False, separate=True)


@pytest.mark.slow  # 12-16 s on an idle 2-core box, 20-30 s under load (the fallback logic: in process below)
def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_one(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    _scenario(tmp_path, f"{zk_server}{zk_chroot}", None, corrupt=True)


def test_a_corrupt_task_snapshot_falls_back_to_the_previous_checkpoint(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    _scenario(tmp_path, f"{zk_server}{zk_chroot}", None, corrupt="task", queries=SNAPSHOTTED)


def test_a_new_leader_restores_the_containers_from_their_task_snapshots(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    _scenario(tmp_path, f"{zk_server}{zk_chroot}", None, corrupt=False, queries=SNAPSHOTTED)


@pytest.mark.slow  # as above
def test_cluster_checkpoints_on_s3(
    tmp_path: Path, zk_server: str, zk_chroot: str, moto_s3: SimpleNamespace
) -> None:
    bucket = "cluster-ck-" + os.urandom(4).hex()
    moto_s3.client().create_bucket(Bucket=bucket)
    _scenario(tmp_path, f"{zk_server}{zk_chroot}", f"s3://{bucket}/run1", corrupt=False)


def test_cluster_checkpoint_flags_are_checked(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = [sys.executable, "-m", "linkstream.cli", "run", "--port", "0", "--zk", "127.0.0.1:1"]
    for extra, msg in (
        (["--checkpoints", "file:///tmp/x"], "error: --checkpoints needs --state-dir"),
        (
            ["--state-dir", str(tmp_path / "s"), "--checkpoint-interval", "-1"],
            "--checkpoint-interval must be >= 0",
        ),
        (["--state-dir", str(tmp_path / "s"), "--checkpoints", "gs://b/p"], "unknown scheme 'gs'"),
    ):
        p = subprocess.run(run + extra, capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and msg in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


def test_the_pointer_names_the_checkpoint_tried_first_and_damage_falls_back(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """In process: :func:`_load` takes the checkpoint ZooKeeper names, else the newest usable
    one, with one error line per unusable one; an embedded checkpoint is not a cluster one."""
    import numpy as np

    from linkstream.cluster.checkpointbacklog import backlog_blob
    from linkstream.cluster.checkpoints import LAYOUT, _load
    from linkstream.store.checkpoints import Blob, CheckpointError

    store = open_checkpoints("file://" + str(tmp_path / "ck"))
    tr = np.arange(12, dtype=np.int64).reshape(4, 3)
    backlog = [("http://s/a", 1, [(10, tr[:1]), (20, tr[1:3]), (30, tr[3:])]), ("http://s/b", 0, [])]
    ids = [
        store.write(
            {"backlog": backlog_blob(backlog), "x": Blob({"k": k}, [])}, {"cluster": LAYOUT, "seq": k}
        )
        for k in range(3)
    ]
    got = _load(store, ids[1])  # the pointer's, not the newest
    assert got is not None and got.id == ids[1]
    bl = got.blob("backlog")
    assert bl.header["streams"] == [["http://s/a", 1, 0], ["http://s/b", 0, 3]]
    times, sizes, triples = bl.arrays[:3]
    assert times.tolist() == [10, 20, 30] and sizes.tolist() == [1, 2, 1] and (triples == tr).all()
    store.backend.put(f"ckpt-{ids[1]}/x", b"LSCK garbage")
    with caplog.at_level("ERROR"):
        got = _load(store, ids[1])
    assert got is not None and got.id == ids[2]
    assert f"checkpoint {ids[1]}: object ckpt-{ids[1]}/x is corrupt" in caplog.text
    assert f"falling back to the previous complete checkpoint {ids[2]}" in caplog.text
    embedded = store.write({"x": Blob({}, [])}, {"engine": 1, "seq": 9})
    for cid in ids:
        store.backend.put(f"ckpt-{cid}/x", b"LSCK garbage")
    with pytest.raises(
        CheckpointError, match=f"checkpoint {embedded} is not a cluster checkpoint of layout 1"
    ):
        _load(store, embedded)


def test_the_first_checkpoint_can_come_before_the_interval(tmp_path: Path) -> None:
    """``Checkpointer.first_s``: a new leader that replayed log records checkpoints 1 s after its
    take-over (``TAKEOVER_CHECKPOINT_S``), not an interval later -- the next take-over does not
    replay them again."""
    from linkstream.engine.live.checkpoint import Checkpointer
    from linkstream.engine.live.ingestlog import IngestLog
    from linkstream.engine.live.runtime import LiveEngine

    state = tmp_path / "state"
    lg = IngestLog(str(state))
    store = open_checkpoints(str(state / "checkpoints"))
    live = LiveEngine(idle_ms=None)
    live.recover(lg, checkpoints=store)
    ck = None
    try:
        live.register(
            "PREFIX ex: <http://ex/>\nSELECT ?x WHERE { STREAM ex:s [RANGE 5s SLIDE 1s] { ?x ex:p ?v } }",
            "q",
        )
        live.push("http://ex/s", 1000, [("<http://ex/a>", "<http://ex/p>", "<http://ex/b>")])
        live.sync()
        ck = Checkpointer(live, lg, store, 60.0)
        ck.first_s = 0.3
        t0 = time.monotonic()
        ck.start()
        while ck.checkpoints == 0:
            assert time.monotonic() - t0 < 20, "no checkpoint 20 s after the start (interval 60 s)"
            time.sleep(0.05)
        assert store.ids() == [ck.last_id] and ck.last_seq == lg.last_seq(), (store.ids(), ck.stats())
        time.sleep(0.5)
        assert ck.checkpoints == 1  # then the interval again
    finally:
        if ck is not None:
            ck.stop()
        live.close()


def test_damaged_task_snapshots_everywhere_restore_without_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """In process: a corrupt task snapshot makes :func:`_load` take the previous complete
    checkpoint; when every checkpoint has one, the newest is restored without its task
    snapshots (the silent evaluation rebuilds the containers' state), with an error line."""
    from linkstream.cluster.checkpoints import LAYOUT, _load
    from linkstream.store.checkpoints import Blob, digest, encode_blob

    store = open_checkpoints("file://" + str(tmp_path / "ck"))
    ids = []
    for k in range(2):
        name = f"tasks-{k:08d}-ab/t{k}"
        data = encode_blob(Blob({"query": "q", "c": 1000}, []))
        store.backend.put("shared/" + name, data)  # as a container writes it
        store.adopt(name, digest(data))
        meta = {"cluster": LAYOUT, "seq": k, "tasks": {"q": name}}
        ids.append(store.write({"x": Blob({"k": k}, [])}, meta, {name: lambda: b""}))
    got = _load(store, ids[1])
    assert got is not None and got.id == ids[1] and f"shared/tasks-{1:08d}-ab/t1" in got.objects
    store.backend.put(f"shared/tasks-{1:08d}-ab/t1", b"LSCK garbage")
    with caplog.at_level("ERROR"):
        got = _load(store, ids[1])
    assert got is not None and got.id == ids[0] and got.meta["tasks"] == {"q": f"tasks-{0:08d}-ab/t0"}
    assert f"object shared/tasks-{1:08d}-ab/t1 is corrupt" in caplog.text
    assert f"falling back to the previous complete checkpoint {ids[0]}" in caplog.text
    store.backend.put(f"shared/tasks-{0:08d}-ab/t0", b"LSCK garbage")
    caplog.clear()
    with caplog.at_level("ERROR"):
        got = _load(store, ids[1])
    assert got is not None and got.id == ids[1] and got.meta["tasks"] == {}
    assert not any(k.startswith("shared/tasks-") for k in got.objects)
    assert f"restoring checkpoint {ids[1]} without its task snapshots" in caplog.text
