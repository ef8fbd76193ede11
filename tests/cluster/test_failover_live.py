"""kill -9 of a container while elements are pushed to the live service (``run --zk``).

One coordinator and three containers; the CityBench slice of ``tests/api`` is pushed over
HTTP while a container that holds queries is killed with SIGKILL.  The reports it owed are
recomputed on a live container (:mod:`linkstream.cluster.recovery`) until its queries are
ready on their new owners, so the JSON Lines results read from the coordinator equal an
embedded ``run`` fed the same pushes: none lost, none twice.  Run with ``--ingest leader``
and with ``--ingest direct`` (a ``--state-dir``: the bodies in the owner's stream logs); the
latter also takes cluster checkpoints and kills **two** containers at once (the survivor
restores both one's queries from the checkpoint, or rebuilds them, and loses nothing).
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from linkstream.api.client import Client
from linkstream.cluster.driverstate import task_id
from linkstream.cluster.localcluster import LocalCluster
from linkstream.scheduler.assignment import AssignmentTable
from tests.api.corpus import corpus_or_skip
from tests.cluster.test_live_service import QUERIES, SESSION_S, TIMEOUT, _collect, _roles
from tests.cluster.test_streamlog import assert_direct

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]


def _owners(cluster: LocalCluster) -> dict[str, str | None]:
    client = cluster.client()
    try:
        return {t: a.container for t, a in AssignmentTable(client).all().items()}
    finally:
        client.stop()
        client.close()


def start_collecting(
    cluster: LocalCluster,
    extra: list[str],
    containers: int,
    texts: dict[str, str],
    names: list[str],
    until: int,
    embedded: str,
) -> tuple[str, Client, Client, dict[str, object], list[threading.Thread]]:
    """One coordinator (``extra`` arguments) leading ``containers`` containers, ``names``
    registered there and on the ``embedded`` server, each one's results followed on both
    (``got["cl/q"]``, ``got["emb/q"]``) until report time ``until``."""
    cluster.start(0, coordinators=0)
    cluster.start_coordinator(["--idle-ms", "0", *extra])
    cluster.add_containers(containers)
    (cid, url), *_ = cluster.api_urls(timeout=30).items()
    deadline = time.monotonic() + 30
    while _roles({cid: url})[cid] != "leader":
        assert time.monotonic() < deadline, "the coordinator does not lead"
        time.sleep(0.2)
    cl, emb = Client(url, timeout=TIMEOUT), Client(embedded)
    for q in names:
        cl.register(texts[q], q)
        emb.register(texts[q], q)
    got: dict[str, object] = {}
    threads = []
    for q in names:
        for key, client in ((f"emb/{q}", emb), (f"cl/{q}", cl)):
            th = threading.Thread(target=_collect, args=(client, q, until, False, got, key), daemon=True)
            th.start()
            threads.append(th)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(
        v["subscribers"] >= 1 for v in [cl.query(q) for q in names] + [emb.query(q) for q in names]
    ):
        time.sleep(0.1)
    return url, cl, emb, got, threads


def assert_same_results(
    cl: Client,
    emb: Client,
    until: int,
    threads: list[threading.Thread],
    got: dict[str, object],
    names: list[str],
    victim: str,
) -> None:
    """Both advanced to ``until``; each query's lines on the cluster equal the embedded ones."""
    cl.advance(until)
    emb.advance(until)
    for th in threads:
        th.join(TIMEOUT)
    for key, value in got.items():
        assert not isinstance(value, Exception), f"{key}: {value!r}"
    for q in names:
        want, have = Counter(got[f"emb/{q}"]), Counter(got[f"cl/{q}"])  # type: ignore[arg-type]
        lost, dup = sum((want - have).values()), sum((have - want).values())
        assert (lost, dup) == (0, 0), f"{q}: {lost} lines lost, {dup} duplicated (victim {victim})"


@pytest.mark.parametrize("ingest", ["leader", "direct"])
def test_kill_9_of_a_container_during_pushes_loses_nothing(
    tmp_path: Path, zk_server: str, zk_chroot: str, ingest: str
) -> None:
    corpus = corpus_or_skip(tmp_path)
    texts = corpus.texts(QUERIES)
    statics = corpus.static_args()
    until = corpus.last_report(1000)
    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    try:
        two = ingest == "direct"  # two containers killed at once, with cluster checkpoints
        durable = ["--state-dir", str(tmp_path / "state"), "--ingest", "direct"] if two else []
        durable += ["--checkpoint-interval", "0.5"] if two else []
        url, cl, emb, got, threads = start_collecting(
            cluster, [*durable, *statics], 3, texts, QUERIES, until, embedded.url
        )
        held = {o for t, o in _owners(cluster).items() if t in {task_id(q) for q in QUERIES}}
        victims = sorted(h for h in held if h is not None)[:1]
        if two:
            victims += [c for c in sorted(held - {None}) + cluster.names("container") if c not in victims][:1]
        n = len(corpus.elements)
        for k, el in enumerate(corpus.elements):
            if k == n // 3:
                for victim in victims:
                    cluster.kill(victim, signal.SIGKILL)
            assert cl.push(el.stream, el.ntriples, t=el.t)["elements"] == 1
            emb.push(el.stream, el.ntriples, t=el.t)
            time.sleep(0.05)
        for victim in victims:
            assert victim not in cluster.members()
            assert victim not in set(_owners(cluster).values())
        assert_same_results(cl, emb, until, threads, got, QUERIES, " and ".join(victims))
        assert sum(len(got[f"emb/{q}"]) for q in QUERIES) > 0, "no result lines at all"  # type: ignore[arg-type]
        # The victim's owed reports were recomputed on a live container (the driver says so).
        log = (cluster.dir / "logs" / "coord-1.log").read_text()
        assert "driver: recomputed" in log and "no live container recomputed" not in log
        if ingest == "direct":
            assert_direct(tmp_path / "state", sorted({el.stream for el in corpus.elements}))
    finally:
        cluster.stop()
        embedded.stop()
