"""A container's assignment watch outlives its index node and its ZooKeeper session.

A coordinator that takes a container for dead unassigns its tasks and deletes its
emptied index node (``AssignmentTable.forget_container``).  kazoo's ``ChildrenWatch``
stops for good once its node is missing, so a container that came back after its
session expired never saw a task given to it again: the next replay waited for
queries that were never placed.  Real ZooKeeper, one chroot per test.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kazoo.client import KazooClient, KazooState

from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.state import TaskSpec
from tests.scheduler.test_recipes import Recorder, wait_until

pytestmark = pytest.mark.zookeeper

Factory = Callable[..., KazooClient]


def test_the_watch_reports_a_deleted_index_as_empty_and_resumes_when_it_comes_back(
    kazoo_factory: Factory,
) -> None:
    coordinator = AssignmentTable(kazoo_factory())
    container = AssignmentTable(kazoo_factory())
    seen = Recorder()
    container.watch_container("oc-a", seen)
    wait_until(lambda: seen.last == {}, what="the first (empty) call")

    coordinator.submit(TaskSpec("q-1"))
    coordinator.submit(TaskSpec("q-2"))
    assert coordinator.set_owner("q-1", "oc-a")
    wait_until(lambda: set(seen.last) == {"q-1"}, what="q-1 on oc-a")  # type: ignore[arg-type]

    # Taken for dead: unassigned, and its emptied index deleted.
    assert coordinator.set_owner("q-1", None)
    coordinator.forget_container("oc-a")
    assert coordinator.client.exists(coordinator.layout.assignments("oc-a")) is None
    wait_until(lambda: seen.last == {}, what="the emptied index")

    # Given tasks again: the index is created anew and the watch sees it.
    assert coordinator.set_owner("q-2", "oc-a")
    wait_until(lambda: set(seen.last or {}) == {"q-2"}, what="q-2 on the re-created index")
    assert coordinator.set_owner("q-1", "oc-a")
    wait_until(lambda: set(seen.last or {}) == {"q-1", "q-2"}, what="q-1 and q-2")
    assert seen.last["q-2"].container == "oc-a"  # type: ignore[index]


def test_after_a_session_expiry_the_watch_reads_the_index_again(
    kazoo_factory: Factory, zk_server: str, zk_chroot: str
) -> None:
    coordinator = AssignmentTable(kazoo_factory())
    client = kazoo_factory(timeout=2.0)
    states: list[str] = []
    client.add_listener(states.append)
    seen = Recorder()
    AssignmentTable(client).watch_container("oc-a", seen)
    coordinator.submit(TaskSpec("q-1"))
    assert coordinator.set_owner("q-1", "oc-a")
    wait_until(lambda: set(seen.last or {}) == {"q-1"}, what="q-1 on oc-a")

    # The session ends on the server (a second client joins it and closes it) while the
    # index is deleted (the coordinator took the container for dead) ...
    assert coordinator.set_owner("q-1", None)
    coordinator.forget_container("oc-a")
    wait_until(lambda: seen.last == {}, what="the emptied index")
    calls = len(seen.calls)
    other = kazoo_factory(timeout=2.0, client_id=client.client_id)
    other.stop()
    wait_until(lambda: KazooState.LOST in states and client.connected, 15.0, "a new session")
    # ... so the watch reads again under the new session (nothing assigned) ...
    wait_until(lambda: len(seen.calls) > calls, what="a read after the expiry")
    assert seen.last == {}
    # ... and still follows the index once it comes back.
    assert coordinator.set_owner("q-1", "oc-a")
    wait_until(lambda: set(seen.last or {}) == {"q-1"}, what="q-1 on oc-a again")


def test_the_watch_reads_each_entry_once_and_sees_an_entry_rewritten_in_place(
    kazoo_factory: Factory,
) -> None:
    coordinator = AssignmentTable(kazoo_factory())
    client = kazoo_factory()
    reads: list[str] = []
    get_async = client.get_async

    def counted(path: str, watch: object = None) -> object:
        reads.append(path)
        return get_async(path, watch)

    client.get_async = counted  # type: ignore[method-assign]
    seen = Recorder()
    AssignmentTable(client).watch_container("oc-a", seen)
    ids = [f"q-{i:02d}" for i in range(30)]
    for t in ids:
        coordinator.submit(TaskSpec(t))
    for t in ids:  # one children change each
        assert coordinator.set_owner(t, "oc-a")
    wait_until(lambda: sorted(seen.last or {}) == ids, what="30 tasks on oc-a")  # type: ignore[arg-type]
    entries = [p for p in reads if "/assignments/" in p]
    assert sorted(entries) == sorted(coordinator.layout.assignment("oc-a", t) for t in ids)  # once each

    # a hand-over marker set and cleared on the same owner rewrites the entry in place (no
    # children change): the entry's data watch reads it again
    assert coordinator.set_owner("q-03", "oc-a", migrating_from="oc-b")
    wait_until(lambda: seen.last["q-03"].migrating_from == "oc-b", what="the marker")  # type: ignore[index]
    assert coordinator.complete_migration("q-03")
    wait_until(lambda: seen.last["q-03"].migrating_from is None, what="the marker cleared")  # type: ignore[index]
    assert coordinator.withdraw("q-04")
    wait_until(lambda: "q-04" not in seen.last, what="q-04 withdrawn")  # type: ignore[operator]
    assert sorted(seen.last) == [t for t in ids if t != "q-04"]  # type: ignore[call-overload]
    assert seen.last["q-05"] == coordinator.get("q-05")  # type: ignore[index]
    entries = [p for p in reads if "/assignments/" in p]
    assert len(entries) == 32, entries[30:]  # the rewritten entry twice more, nothing else again
