"""The kazoo recipes against a real ZooKeeper server, one fresh chroot per test."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kazoo.client import KazooClient, KazooState

from linkstream.scheduler.assignment import Assignment, AssignmentTable
from linkstream.scheduler.config import ClusterConfigNode
from linkstream.scheduler.election import LeaderElection
from linkstream.scheduler.layout import ClusterLayout, decode
from linkstream.scheduler.membership import Member, MemberExistsError, Membership
from linkstream.scheduler.registry import (
    QueryConflictError,
    QueryExistsError,
    QueryNotFoundError,
    QueryRegistry,
)
from linkstream.scheduler.state import TaskSpec

pytestmark = pytest.mark.zookeeper

Factory = Callable[..., KazooClient]


def wait_until(predicate: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


class Recorder:
    """Collects watch callbacks from kazoo's thread."""

    def __init__(self) -> None:
        self.calls: list[object] = []
        self._lock = threading.Lock()

    def __call__(self, value: object) -> None:
        with self._lock:
            self.calls.append(value)

    @property
    def last(self) -> object:
        with self._lock:
            return self.calls[-1] if self.calls else None


def four_letter_word(port: int, word: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def expire_session(client: KazooClient, hosts: str) -> None:
    """Makes the server expire ``client``'s session, as after a crash or partition.

    A second connection that presents the same session id and password and then
    closes ends the session on the server; the original client learns it on its next
    request or ping and reports ``LOST``.
    """
    twin = KazooClient(hosts=hosts, client_id=client.client_id)
    twin.start(timeout=10)
    twin.stop()
    twin.close()


def test_server_answers_four_letter_words(zk_server: str) -> None:
    port = int(zk_server.rsplit(":", 1)[1])
    assert four_letter_word(port, "ruok") == "imok"
    assert "Mode: standalone" in four_letter_word(port, "srvr")


# ---------------------------------------------------------------------- membership


def test_membership_join_leave_and_close(kazoo_factory: Factory) -> None:
    observer = Membership(kazoo_factory())
    seen = Recorder()
    watch = observer.watch(seen)
    assert seen.last == {}

    named_client, sequential_client = kazoo_factory(), kazoo_factory()
    named = Membership(named_client)
    assert named.join(4, "tcp://127.0.0.1:5601", member_id="oc-a", meta={"host": "h1"}) == "oc-a"
    sequential_id = Membership(sequential_client).join(2, "tcp://127.0.0.1:5602")
    assert sequential_id.startswith("oc-") and sequential_id != "oc-a"

    wait_until(lambda: len(seen.last) == 2, what="two members")  # type: ignore[arg-type]
    members = observer.members()
    assert members["oc-a"] == Member(
        "oc-a", 4, "tcp://127.0.0.1:5601", False, {"host": "h1"}, named_client.client_id[0]
    )
    assert members[sequential_id].capacity == 2

    named.leave()
    wait_until(lambda: set(seen.last) == {sequential_id}, what="named member gone")  # type: ignore[arg-type]

    # Closing the client ends the session: the ephemeral node vanishes at once.
    sequential_client.stop()
    wait_until(lambda: seen.last == {}, what="sequential member gone")
    assert observer.members() == {}
    watch.stop()


def test_membership_survives_session_expiry_by_rejoining(
    kazoo_factory: Factory, zk_server: str, zk_chroot: str, zk_session_timeout: float
) -> None:
    observer = Membership(kazoo_factory())
    seen = Recorder()
    observer.watch(seen)
    client = kazoo_factory()
    states: list[str] = []
    client.add_listener(states.append)
    Membership(client).join(3, "tcp://127.0.0.1:5603", member_id="oc-x")
    wait_until(lambda: "oc-x" in seen.last, what="join")  # type: ignore[operator]
    first_session = client.client_id[0]

    expire_session(client, f"{zk_server}{zk_chroot}")
    # The server deletes the ephemeral node; the watcher sees the container go ...
    wait_until(lambda: any("oc-x" not in c for c in seen.calls[1:]), what="expiry seen")  # type: ignore[operator]
    # ... the client notices its loss, gets a new session and registers again.
    wait_until(lambda: KazooState.LOST in states, timeout=zk_session_timeout * 3, what="LOST")
    wait_until(lambda: "oc-x" in seen.last, timeout=zk_session_timeout * 3, what="rejoin")  # type: ignore[operator]
    rejoined = observer.members()["oc-x"]
    assert rejoined.capacity == 3 and rejoined.session == client.client_id[0] != first_session


def test_membership_refuses_an_id_held_by_another_session(kazoo_factory: Factory) -> None:
    Membership(kazoo_factory()).join(1, "a", member_id="oc-dup")
    with pytest.raises(MemberExistsError):
        Membership(kazoo_factory()).join(1, "b", member_id="oc-dup")
    with pytest.raises(ValueError):
        Membership(kazoo_factory()).join(1, "c", member_id="bad/id")


def test_drain_request_is_seen_and_completion_is_signalled(kazoo_factory: Factory) -> None:
    container_side = Membership(kazoo_factory())
    container_side.join(2, "tcp://127.0.0.1:5604", member_id="oc-d")
    drain_states = Recorder()
    container_side.watch_drain("oc-d", drain_states)
    operator = Membership(kazoo_factory())
    seen = Recorder()
    operator.watch(seen)

    operator.request_drain("oc-d")
    operator.request_drain("oc-d")  # idempotent
    wait_until(lambda: seen.last["oc-d"].draining, what="draining flag")  # type: ignore[index]
    wait_until(lambda: drain_states.last == "requested", what="requested")
    operator.mark_drained("oc-d")
    wait_until(lambda: drain_states.last == "complete", what="complete")
    assert operator.drain_state("oc-d") == "complete"
    operator.clear_drain("oc-d")
    assert operator.drain_state("oc-d") is None


# ---------------------------------------------------------------------- assignment


def test_assignment_moves_are_atomic_and_watched_per_container(kazoo_factory: Factory) -> None:
    writer = AssignmentTable(kazoo_factory())
    reader = AssignmentTable(kazoo_factory())
    on_a, on_b, markers = Recorder(), Recorder(), Recorder()
    reader.watch_container("oc-a", on_a)
    reader.watch_container("oc-b", on_b)
    reader.watch_migrations(markers)

    join = TaskSpec("sig-join", weight=2.0, colocate_with="q1", stateful=True)
    writer.submit(join)
    writer.submit(TaskSpec("sig-scan"))
    assert writer.get("sig-join") == Assignment(join)
    assert writer.set_owner("sig-join", "oc-a")
    wait_until(lambda: set(on_a.last) == {"sig-join"}, what="task on oc-a")  # type: ignore[arg-type]

    # A stateful move: index entry, owner and migration marker change together.
    assert writer.set_owner("sig-join", "oc-b", migrating_from="oc-a")
    wait_until(lambda: on_a.last == {} and "sig-join" in on_b.last, what="moved")  # type: ignore[operator]
    assert on_b.last["sig-join"].migrating_from == "oc-a"  # type: ignore[index]
    wait_until(lambda: markers.last == {"sig-join"}, what="migration marker")
    assert reader.of_container("oc-b")["sig-join"].task == join

    # The new owner acknowledges after restoring the snapshot.
    assert AssignmentTable(kazoo_factory()).complete_migration("sig-join")
    wait_until(lambda: markers.last == set(), what="marker gone")
    assert reader.get("sig-join") == Assignment(join, "oc-b", None)

    # Updating a spec keeps the owner; withdrawing removes the index entry too.
    writer.submit(TaskSpec("sig-join", weight=5.0, colocate_with="q1", stateful=True))
    assert reader.get("sig-join").container == "oc-b"  # type: ignore[union-attr]
    assert writer.withdraw("sig-join")
    wait_until(lambda: on_b.last == {}, what="withdrawn")
    assert not writer.withdraw("sig-join")
    assert not writer.set_owner("sig-join", "oc-a")
    assert set(reader.all()) == {"sig-scan"}


def test_payloads_are_json(kazoo_client: KazooClient) -> None:
    table = AssignmentTable(kazoo_client, root="/cluster-7")
    table.submit(TaskSpec("sig-1"))
    table.set_owner("sig-1", "oc-1")
    layout = ClusterLayout("/cluster-7")
    data, _ = kazoo_client.get(layout.task("sig-1"))
    assert decode(data)["container"] == "oc-1"
    data, _ = kazoo_client.get(layout.assignment("oc-1", "sig-1"))
    assert decode(data)["task"]["id"] == "sig-1"


# ---------------------------------------------------------------------- election


def test_leader_election_fails_over_to_the_standby(kazoo_factory: Factory, zk_session_timeout: float) -> None:
    events: list[str] = []
    first_client, second_client = kazoo_factory(), kazoo_factory()
    first = LeaderElection(first_client, "coord-1", lambda: events.append("1+"), lambda: events.append("1-"))
    second = LeaderElection(
        second_client, "coord-2", lambda: events.append("2+"), lambda: events.append("2-")
    )
    first.start()
    wait_until(lambda: first.is_leader, what="first leads")
    second.start()
    wait_until(
        lambda: second.leader() == "coord-1" and len(second._election.contenders()) == 2, what="standby"
    )
    assert not second.is_leader

    started = time.monotonic()
    first_client.stop()  # the leader's session ends
    wait_until(lambda: second.is_leader, timeout=zk_session_timeout, what="standby takes over")
    assert time.monotonic() - started < zk_session_timeout
    assert second.leader() == "coord-2"
    assert events[:2] == ["1+", "2+"] or events[:3] == ["1+", "1-", "2+"]
    second.stop()
    assert events[-1] == "2-" and not second.is_leader
    first.stop()


def test_leader_crash_is_replaced_within_the_session_timeout(
    kazoo_factory: Factory, zk_server: str, zk_chroot: str, zk_session_timeout: float
) -> None:
    script = Path(__file__).with_name("leader_proc.py")
    proc = subprocess.Popen(
        [sys.executable, str(script), f"{zk_server}{zk_chroot}", "coord-crash", str(zk_session_timeout)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "LEADER"
        standby = LeaderElection(kazoo_factory(), "coord-standby")
        standby.start()
        wait_until(lambda: len(standby._election.contenders()) == 2, what="standby queued")
        assert not standby.is_leader
        proc.kill()  # no goodbye to ZooKeeper: the session must time out
        killed = time.monotonic()
        wait_until(lambda: standby.is_leader, timeout=zk_session_timeout + 2.0, what="takeover")
        took = time.monotonic() - killed
        # The server expires the session after the timeout (rounded to its ticks).
        assert took < zk_session_timeout + 1.0, took
        standby.stop()
    finally:
        proc.kill()
        proc.wait(timeout=10)


# ---------------------------------------------------------------------- registry and config


def test_query_registry_crud_and_watch(kazoo_factory: Factory) -> None:
    registry = QueryRegistry(kazoo_factory())
    ids = Recorder()
    registry.watch(ids)
    text = "REGISTER QUERY q1 AS SELECT ?s WHERE { STREAM <http://s> [RANGE 10s] { ?s ?p ?o } }"
    record = registry.register("q1", text, metadata={"owner": "alice"})
    assert record.version == 0
    with pytest.raises(QueryExistsError):
        registry.register("q1", "SELECT * {}")
    assert registry.get("q1").text == text

    updated = registry.update("q1", metadata={"plan": ["sig-1", "sig-2"]})
    assert updated.metadata == {"owner": "alice", "plan": ["sig-1", "sig-2"]}
    with pytest.raises(QueryConflictError):
        registry.update("q1", text="stale", expected_version=record.version)
    assert registry.update("q1", metadata={"owner": None}, expected_version=updated.version).metadata == {
        "plan": ["sig-1", "sig-2"]
    }

    registry.register("q0", "SELECT * {}", language="sparql")
    assert registry.list() == ["q0", "q1"]
    wait_until(lambda: ids.last == ["q0", "q1"], what="watch sees both")
    assert registry.unregister("q1") and not registry.unregister("q1")
    with pytest.raises(QueryNotFoundError):
        registry.get("q1")
    wait_until(lambda: ids.last == ["q0"], what="watch sees removal")


def test_cluster_config_merges_and_notifies(kazoo_factory: Factory) -> None:
    one, two = ClusterConfigNode(kazoo_factory()), ClusterConfigNode(kazoo_factory())
    seen = Recorder()
    two.watch(seen)
    assert one.get() == {}
    one.update({"tolerance": 0.2})
    two.update({"checkpoint_ms": 5000})
    assert one.get() == {"tolerance": 0.2, "checkpoint_ms": 5000}
    one.update({"tolerance": None})
    wait_until(lambda: seen.last == {"checkpoint_ms": 5000}, what="config watch")
    one.set({"max_moves": 2})
    assert two.get() == {"max_moves": 2}
