"""kill -9 of a container after a complete cluster checkpoint: its tasks restored and fed forward.

One coordinator taking cluster checkpoints (``--state-dir``, ``--checkpoint-interval``)
and two containers; the CityBench slice of ``tests/api`` is pushed over HTTP.  Once a
checkpoint holding the containers' task snapshots is complete, the container that holds
the most queries is killed with SIGKILL.  The driver sends each of its queries' new owner a
``forward`` message (:mod:`linkstream.cluster.recovery`): the new owner restores the
query's snapshot, feeds it forward over the ticks since the checkpoint, answers the owed
report and keeps the state (:mod:`linkstream.containers.forwarding`).  The results read
from the coordinator equal an embedded ``run`` fed the same pushes -- 0 lines lost, 0
duplicated -- and the logs show the restored path was taken, not the plain recompute:
the new owner waited for the forward (the coordinator reassigned the queries with
``restored_from``), kept every query forwarded to it and rebuilt none from its stream
buffers (its ``linkstream_container_task_moves_total`` counts them ``restored``, no ``in``).
"""

from __future__ import annotations

import re
import signal
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from linkstream.cluster.driverstate import task_id
from linkstream.cluster.localcluster import LocalCluster
from linkstream.scheduler.status import cluster_status
from tests.api.corpus import corpus_or_skip
from tests.cluster.test_failover_live import _owners, assert_same_results, start_collecting
from tests.cluster.test_live_service import SESSION_S
from tests.durability.test_cluster_checkpoints import SNAPSHOTTED

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

NAMES = ["rspql-avg-congestion", *SNAPSHOTTED]


def _moves(cluster: LocalCluster, container: str) -> dict[str, float]:
    """``linkstream_container_task_moves_total`` of ``container`` by direction (non-zero ones)."""
    client = cluster.client()
    try:
        status = cluster_status(client, cluster.state.root)
    finally:
        client.stop()
        client.close()
    url = next(c["metrics"] for c in status["containers"] if c["id"] == container)
    text = httpx.get(f"http://{url}/metrics", timeout=10).text
    return {
        s.labels["direction"]: s.value
        for f in text_string_to_metric_families(text)
        if f.name == "linkstream_container_task_moves"
        for s in f.samples
        if s.name.endswith("_total") and s.value
    }


def test_kill_9_after_a_checkpoint_restores_the_tasks_and_feeds_them_forward(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    corpus = corpus_or_skip(tmp_path)
    texts = {**corpus.texts(["rspql-avg-congestion"]), **SNAPSHOTTED}
    statics = corpus.static_args()
    until = corpus.last_report(1000)
    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    try:
        state = ["--state-dir", str(tmp_path / "state"), "--checkpoint-interval", "0.25"]
        url, cl, emb, got, threads = start_collecting(
            cluster, [*state, *statics], 2, texts, NAMES, until, embedded.url
        )
        n = len(corpus.elements)
        victim = ""
        counted: dict[str, dict[str, float]] = {}
        for k, el in enumerate(corpus.elements):
            if k == n // 2:
                # after a checkpoint with the containers' task snapshots (several by now)
                deadline = time.monotonic() + 20
                while (ck := httpx.get(url + "/status", timeout=10).json()["checkpoints"])["tasks"][
                    "snapshotted"
                ] < len(NAMES):
                    assert time.monotonic() < deadline, ck
                    time.sleep(0.1)
                held = Counter(o for t, o in _owners(cluster).items() if t in {task_id(q) for q in NAMES})
                victim = sorted(held, key=lambda o: (-held[o], o or ""))[0] or ""
                assert victim, held
                counted = {c: _moves(cluster, c) for c in ("oc-1", "oc-2")}
                cluster.kill(victim, signal.SIGKILL)
            assert cl.push(el.stream, el.ntriples, t=el.t)["elements"] == 1
            emb.push(el.stream, el.ntriples, t=el.t)
            time.sleep(0.05)
        deadline = time.monotonic() + 10 * SESSION_S  # (its session expires SESSION_S after the kill)
        while victim in cluster.members():
            assert time.monotonic() < deadline, f"{victim} is still a member"
            time.sleep(0.2)
        assert_same_results(cl, emb, until, threads, got, NAMES, victim)
        assert all(got[f"emb/{q}"] for q in NAMES), "a query without result lines"
        # The restored path was taken: the driver forwarded the victim's queries from the
        # checkpoint and their new owner restored them (not the plain recompute).
        # The results may be complete (the owed reports recomputed) before the forward is sent
        # or kept: the driver sends it once the new owner receives the queries' streams (its
        # subscription answered, between two ticks), so the logs are read until it is kept.
        logs = cluster.dir / "logs"
        survivor = next(c for c in ("oc-1", "oc-2") if c != victim)
        deadline = time.monotonic() + 20
        while True:
            log = (logs / "coord-1.log").read_text()
            clog = (logs / f"{survivor}.log").read_text()
            forwarded = re.findall(r"driver: (.+) restored on (\S+) from the checkpoint at t=(\d+)", log)
            moved = {q for names, dst, _ in forwarded if dst == survivor for q in names.split(", ")}
            kept = [int(m) for m in re.findall(r"restored-forward path: (\d+) of \d+ queries kept", clog)]
            if (moved and sum(kept) >= len(moved)) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert "no live container recomputed" not in log
        assert forwarded, log[-3000:]
        # every snapshot restored in the scratch replica (none rebuilt from the history there)
        runs = re.findall(r"restored (\d+) of (\d+) queries from the checkpoint", clog)
        assert runs and all(a == b for a, b in runs), clog[-3000:]
        # Kept on the new owner, which waited for the forward (its assignment names the dead
        # container, ``restored_from``) instead of rebuilding the queries from its buffers:
        # every query forwarded there is kept, none registered (rebuilt) there after the kill.
        assert moved, log[-3000:]
        # each kept once: a query is forwarded again only if its forward was not kept (a second
        # forward before the new owner's answer or ready announcement restored it there twice)
        assert sum(kept) == len(moved), clog[-3000:]
        rebuilt = [q for q in moved if re.search(rf"registered {re.escape(q)} \(after tick", clog)]
        assert not rebuilt and "rebuilt from the stream buffers" not in clog, clog[-3000:]
        # ... and counted: since the kill the survivor's metrics show the restored tasks and no
        # move-in rebuilt (before it, a query whose streams came late may have counted one)
        now, then = _moves(cluster, survivor), counted[survivor]
        assert {k: now.get(k, 0) - then.get(k, 0) for k in ("restored", "in")} == {
            "restored": len(moved),
            "in": 0,
        }
    finally:
        cluster.stop()
        embedded.stop()
