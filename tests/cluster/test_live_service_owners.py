"""Issue 15, item 3: every stream has an owner coordinator that sequences its elements.

Real processes: the session's ZooKeeper, two API coordinators (``run --zk``) and two
operator containers.  The first element of each of the two CityBench streams of
``tests/api`` is pushed to a different coordinator, which places the streams on
different owners (ephemeral nodes under ``<root>/ingest``).  Every later element of a
stream is pushed to the coordinator that does *not* own it, which forwards it to the
owner; the owner gives it the next offset and hands the body to the leader.  The JSONL
results read on both coordinators must equal an embedded ``run`` fed the same pushes,
each owner's offset must count its stream's elements, and the leader must have applied
the same offsets.  Then the owner of one stream is killed (SIGKILL): its node goes with
its session, and the next push of that stream is taken by the survivor, which owns it
under a newer epoch.  Run twice: ``--ingest leader`` and ``--ingest direct`` (with a shared
``--state-dir``: each owner epoch of a stream writes its own stream log).
"""

from __future__ import annotations

import signal
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
from kazoo.client import KazooClient

from linkstream.api.client import Client
from linkstream.cluster.ingest import stream_key
from linkstream.cluster.localcluster import LocalCluster
from linkstream.scheduler.layout import decode
from tests.api.corpus import corpus_or_skip
from tests.cluster.test_live_service import QUERIES, SESSION_S, TIMEOUT, _collect, _wait_roles
from tests.cluster.test_streamlog import assert_direct

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]


def _owners(zk: KazooClient, root: str, streams: list[str]) -> dict[str, tuple[str, int]]:
    """``{stream: (owner coordinator, epoch)}`` from the owner nodes."""
    out = {}
    for iri in streams:
        path = f"{root}/ingest/{stream_key(iri)}"
        if zk.exists(path):
            data, stat = zk.get(path)
            out[iri] = (decode(data)["owner"], stat.czxid)
    return out


@pytest.mark.parametrize("ingest", ["leader", "direct", "owners"])
def test_each_stream_has_its_own_owner(tmp_path: Path, zk_server: str, zk_chroot: str, ingest: str) -> None:
    corpus = corpus_or_skip(tmp_path)
    texts = corpus.texts(QUERIES)
    statics = corpus.static_args()
    until = corpus.last_report(1000)
    streams = list(dict.fromkeys(el.stream for el in corpus.elements))
    assert len(streams) == 2, streams

    embedded = corpus.embedded_server()
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    zk: KazooClient | None = None
    try:
        cluster.start(0, coordinators=0)
        zk = cluster.client()  # the cluster's credential: its nodes are private to it
        for _ in range(2):
            durable = (
                ["--state-dir", str(tmp_path / "state"), "--ingest", ingest] if ingest != "leader" else []
            )
            cluster.start_coordinator(["--idle-ms", "0", *durable, *statics])
        cluster.add_containers(2)
        urls = cluster.api_urls(timeout=30)
        leader, standby = _wait_roles(urls)
        root = cluster.state.root
        clients = {cid: Client(url, timeout=TIMEOUT) for cid, url in urls.items()}
        emb = Client(embedded.url)
        r = httpx.post(
            urls[leader] + "/queries", json=[{"query": texts[q], "name": q} for q in QUERIES], timeout=TIMEOUT
        )
        assert r.status_code == 201, r.text
        for q in QUERIES:
            emb.register(texts[q], q)

        got: dict[str, object] = {}
        threads = []
        for q in QUERIES:
            for key, client in (
                (f"emb/{q}", emb),
                (f"lead/{q}", clients[leader]),
                (f"std/{q}", clients[standby]),
            ):
                th = threading.Thread(target=_collect, args=(client, q, until, False, got, key), daemon=True)
                th.start()
                threads.append(th)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not all(
            c.query(q)["subscribers"] >= 1 for c in (*clients.values(), emb) for q in QUERIES
        ):
            time.sleep(0.1)

        # the first element of each stream goes to a different coordinator: two owners
        first = {s: next(el for el in corpus.elements if el.stream == s) for s in streams}
        for s, cid in zip(streams, (leader, standby)):
            assert clients[cid].push(s, first[s].ntriples, t=first[s].t)["elements"] == 1
            emb.push(s, first[s].ntriples, t=first[s].t)
        owners = _owners(zk, root, streams)
        assert set(owners) == set(streams), owners
        assert {owners[s][0] for s in streams} == {leader, standby}, f"one owner for both streams: {owners}"

        # every other element goes to the coordinator that does not own its stream (forwarded)
        other = {s: (standby if owners[s][0] == leader else leader) for s in streams}
        sent = Counter(el.stream for el in first.values())
        for el in corpus.elements:
            if el is first[el.stream]:
                continue
            assert clients[other[el.stream]].push(el.stream, el.ntriples, t=el.t)["elements"] == 1
            emb.push(el.stream, el.ntriples, t=el.t)
            sent[el.stream] += 1
        clients[standby].advance(until)
        emb.advance(until)
        for th in threads:
            th.join(TIMEOUT)
        for key, value in got.items():
            assert not isinstance(value, Exception), f"{key}: {value!r}"
        for q in QUERIES:
            want = Counter(got[f"emb/{q}"])
            for side in ("lead", "std"):
                have = Counter(got[f"{side}/{q}"])
                assert have == want, (
                    f"{q} on {side}: {sum(have.values())} lines, embedded {sum(want.values())}"
                )
        assert sum(len(got[f"emb/{q}"]) for q in QUERIES) > 0, "no result lines at all"  # type: ignore[arg-type]
        # --ingest direct: the leader's ticks name their cuts and every container waited for them
        # (elements beyond a cut would be logged as an error); --ingest leader ticks name none
        logs = [Path(r.log).read_text() for r in cluster.state.processes.values() if r.kind == "container"]
        assert len(logs) == 2 and not any("beyond its cuts" in text for text in logs)
        assert all(("ticks wait for their cuts" in text) == (ingest != "leader") for text in logs), ingest

        # each owner sequenced its stream (one offset per element), the leader applied them all
        if ingest != "leader":
            # the leader's decisions reach the owners out of band (the last bodies' by polls: no
            # push follows them): every offset decided, none lost, the worker's applied count
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and any(
                clients[owners[s][0]].status()["ingest"]["owned"][s].get("decided") != sent[s]
                for s in streams
            ):
                time.sleep(0.2)
        status = {cid: c.status() for cid, c in clients.items()}
        routed = status[leader]["ingest"]["routed"]
        if ingest == "owners":  # the owners sent the elements: the leader only the sync backlogs
            assert routed["elements"] == 0, routed
            for cid in (leader, standby):  # each owner sent its stream's taken elements to both containers
                sender = status[cid]["ingest"]["sender"]
                assert sender["elements_sent"] > 0 and sender["waiting_bodies"] == 0, (cid, sender)
                assert sender["dropped"] == 0 and sender["unsent"] == 0, (cid, sender)
        else:
            assert routed["elements"] > 0 and "sender" not in status[leader]["ingest"], status[leader][
                "ingest"
            ]
        counts = {}
        for s in streams:
            owned = status[owners[s][0]]["ingest"]["owned"]
            if ingest != "leader":
                count = counts[s] = status[leader]["ingest"]["applied"][s].pop("count")
                figures = status[leader]["streams"][s]
                assert figures["elements"] - figures["late"] <= count <= figures["elements"], figures
                decided = {k: owned[s].pop(k, None) for k in ("decided", "lost", "applied", "failed")}
                assert decided == {"decided": sent[s], "lost": 0, "applied": count, "failed": None}, s
            assert owned[s] == {"epoch": owners[s][1], "offset": sent[s]}, owned
            assert status[leader]["ingest"]["applied"][s] == owned[s]
            assert s not in status[other[s]]["ingest"]["owned"]

        # the standby's stream survives its owner: after kill -9 the leader owns it, newer epoch
        (gone,) = [s for s in streams if owners[s][0] == standby]
        cluster.kill(standby, signal.SIGKILL)
        late_t = max(el.t for el in corpus.elements) + 1
        deadline = time.monotonic() + 30
        while True:
            r = httpx.post(
                urls[leader] + "/streams",
                params={"iri": gone, "t": str(late_t)},
                content=first[gone].ntriples,
                headers={"content-type": "application/n-triples"},
                timeout=TIMEOUT,
            )
            if r.status_code == 202:
                break
            assert r.status_code == 503 and r.headers.get("retry-after"), r.text
            assert time.monotonic() < deadline, f"no new owner for <{gone}>: {r.text}"
            time.sleep(0.3)
        new_owner, new_epoch = _owners(zk, root, [gone])[gone]
        assert new_owner == leader and new_epoch > owners[gone][1]
        owned_now = clients[leader].status()["ingest"]["owned"][gone]
        if ingest != "leader":  # a new epoch: its own decisions (the leader decides in-process)
            deadline = time.monotonic() + 15
            while owned_now.get("decided") != 1 and time.monotonic() < deadline:
                time.sleep(0.2)
                owned_now = clients[leader].status()["ingest"]["owned"][gone]
            assert owned_now.pop("decided") == 1 and owned_now.pop("lost") == 0, owned_now
            if r.json()["late"] == 0:  # applied: numbered after the old owner's elements
                assert owned_now.pop("applied") == counts[gone] + 1
        assert owned_now == {"epoch": new_epoch, "offset": 1}
        if ingest != "leader":  # one stream log per owner epoch: the dead owner's, then the new one's
            assert_direct(tmp_path / "state", streams)
            logs = sorted(p.name for p in (tmp_path / "state" / "streams" / stream_key(gone)).glob("*.log"))
            assert logs == ["%020d.log" % owners[gone][1], "%020d.log" % new_epoch], logs
    finally:
        if zk is not None:
            zk.stop()
            zk.close()
        cluster.stop()
        embedded.stop()
