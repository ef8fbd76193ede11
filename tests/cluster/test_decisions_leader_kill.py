"""``--ingest direct``: kill -9 of the leader after its worker dropped an element as late,
before the stream's owner heard the decision (issue 15, item 3).

Real processes: the session's ZooKeeper, two API coordinators sharing a ``--state-dir``
(``--ingest direct --idle-ms``) and one operator container.  The standby owns stream s2.
Rounds: s1 jumps far ahead, s2 goes idle, and an element of s2 behind s1 is pushed just
as the leader's worker fires the reports the idle stream lets through -- until one such
element is taken on the push side (answered not late) and then dropped by the worker
(a *worker-late drop*: the leader's late count grows by one the answers did not report).
Right after each answer the owner is stopped (SIGSTOP: its poller cannot ask for the
decision); once a round produced a worker-late drop the leader is killed with SIGKILL
and the owner continued: it takes the lead, replays the shared ingest log, and must get
the decisions on every body of s2 -- decided up to its next offset, none lost, the
applied count the old worker's (the new leader rebuilds the decisions from its replay) --
and the late counts the old leader showed: the worker's drops (``drop`` records) and an
element the push side refused as late (a ``late`` record); and its rejected count (an
element refused for its event time, ``r`` of a ``late`` record).
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest

from linkstream.cluster.localcluster import LocalCluster
from tests.cluster.test_live_service import SESSION_S, TIMEOUT, _wait_roles

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

EX = "http://example.org/"
S1, S2 = EX + "s1", EX + "s2"
QUERY = (
    f"PREFIX ex: <{EX}>\nSELECT (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s1 [RANGE 1s SLIDE 1s] {{ ?x ex:p ?v }} "
    f"STREAM ex:s2 [RANGE 1s SLIDE 1s] {{ ?x ex:q ?w }} }}"
)
IDLE_MS = 300
ROUNDS = 40


def _push(url: str, stream: str, t: int) -> dict:
    p = "p" if stream == S1 else "q"
    r = httpx.post(
        url + "/streams",
        params={"iri": stream, "t": str(t)},
        content=f'<{EX}x{t}> <{EX}{p}> "{t}" .\n',
        headers={"content-type": "application/n-triples"},
        timeout=TIMEOUT,
    )
    assert r.status_code == 202, r.text
    return r.json()


def _status(url: str) -> dict:
    return httpx.get(url + "/status", timeout=TIMEOUT).json()


def test_a_new_leader_gives_the_owner_the_decisions_the_dead_one_owed(
    tmp_path: Path, zk_server: str, zk_chroot: str
) -> None:
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=SESSION_S)
    state = tmp_path / "state"
    stopped: str | None = None
    try:
        cluster.start(0, coordinators=0)
        for _ in range(2):
            cluster.start_coordinator(
                ["--idle-ms", str(IDLE_MS), "--state-dir", str(state), "--ingest", "direct"]
            )
        cluster.add_containers(1)
        urls = cluster.api_urls(timeout=30)
        leader, owner = _wait_roles(urls)
        r = httpx.post(
            urls[leader] + "/queries",
            json=[{"query": QUERY, "name": f"q{k}"} for k in range(10)],  # reports take a while
            timeout=TIMEOUT,
        )
        assert r.status_code == 201, r.text
        # s2 first to the standby: it owns s2 (a push's coordinator wins among the least loaded)
        assert _push(urls[owner], S2, 1000)["late"] == 0
        assert _push(urls[leader], S1, 1000)["late"] == 0
        owned = _status(urls[owner])["ingest"]["owned"]
        assert S2 in owned, owned
        sent, late_answers, t1, t2 = 1, 0, 1000, 1000
        dropped = False
        for k in range(ROUNDS):
            time.sleep(IDLE_MS / 1000 + 0.05)  # s2 is idle: nothing holds back s1's time
            t2 = t1 + 500  # ahead of every report fired so far
            t1 += 256_000  # 256 report times per query the leader's worker fires at once
            _push(urls[leader], S1, t1)
            time.sleep(0.004 * (k % 10))  # the next s2 element, while they are evaluated
            answer = _push(urls[owner], S2, t2)
            cluster.kill(owner, signal.SIGSTOP)  # its poller must not ask for the decision
            stopped = owner
            sent += 1
            late_answers += answer["late"]
            deadline = time.monotonic() + 30
            while True:  # the leader's worker has decided on the element
                st = _status(urls[leader])
                if st["ingest"]["applied"].get(S2, {}).get("offset") == sent:
                    figures = st["streams"][S2]
                    count = st["ingest"]["applied"][S2]["count"]
                    # every element taken (``elements``) is applied or dropped by the worker
                    if count + figures["late"] - late_answers == figures["elements"]:
                        break
                assert time.monotonic() < deadline, f"{k} {sent} {st['ingest']['applied']} {st['streams']}"
                time.sleep(0.02)
            if figures["late"] > late_answers:  # taken, then dropped by the worker
                dropped = True
                break
            cluster.kill(owner, signal.SIGCONT)
            stopped = None
        assert dropped, f"no worker-late drop in {ROUNDS} rounds (late answers {late_answers})"
        # and one refused on the push side (behind s1's watermark): answered late, logged as such
        assert _push(urls[leader], S1, 1000)["late"] == 1
        # and one refused for its event time (more than a day ahead): 422, logged as such
        far = t1 + 10 * 86_400_000
        r = httpx.post(
            urls[leader] + "/streams",
            params={"iri": S1, "t": str(far)},
            content=f'<{EX}x{far}> <{EX}p> "{far}" .\n',
            headers={"content-type": "application/n-triples"},
            timeout=TIMEOUT,
        )
        assert r.status_code == 422, r.text
        s1_late = _status(urls[leader])["streams"][S1]["late"]
        assert s1_late >= 1
        assert _status(urls[leader])["streams"][S1]["rejected"] == 1

        cluster.kill(leader, signal.SIGKILL)
        cluster.kill(owner, signal.SIGCONT)
        stopped = None
        deadline = time.monotonic() + 60
        while True:  # the owner leads now, and knows every decision on s2
            try:
                st = _status(urls[owner])
                mine = st["ingest"]["owned"].get(S2, {})
                if st.get("role") == "leader" and mine.get("decided") == sent:
                    break
            except httpx.HTTPError:
                mine = {}
            assert time.monotonic() < deadline, mine
            time.sleep(0.2)
        assert mine["lost"] == 0, mine
        assert mine["applied"] == count, (mine, count)
        assert st["ingest"]["applied"][S2]["count"] == count  # the replay applied what the worker did
        # the worker's drops and the push side's late elements are logged and counted again
        assert st["streams"][S2]["late"] == figures["late"]
        assert st["streams"][S1]["late"] == s1_late
        assert st["streams"][S1]["rejected"] == 1  # and the one refused for its event time
    finally:
        if stopped is not None:
            cluster.kill(stopped, signal.SIGCONT)
        cluster.stop()
