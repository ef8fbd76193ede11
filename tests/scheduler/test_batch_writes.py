"""Batched ZooKeeper writes of the query registry and the assignment table (issue 15: 10,000
queries registered through the API in seconds): the same outcome as one write per query, in
few transactions, on a real ZooKeeper."""

from __future__ import annotations

import pytest
from kazoo.client import KazooClient

from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.registry import QueryExistsError, QueryRegistry, chunks
from linkstream.scheduler.state import TaskSpec

pytestmark = pytest.mark.zookeeper


def test_chunks_keep_order_and_stay_under_the_size() -> None:
    items = [(f"/q/{i}", b"x" * 100) for i in range(50)]
    groups = chunks(items, 1000)
    assert [p for g in groups for p, _ in g] == [p for p, _ in items]
    assert all(sum(len(d) + len(p) for p, d in g) <= 1000 for g in groups)
    assert [len(g) for g in groups] == [9, 9, 9, 9, 9, 5]  # 104-105 bytes an item: 9 fit in 1000
    assert chunks([("/big", b"x" * 5000)], 1000) == [[("/big", b"x" * 5000)]]  # alone, never dropped


def test_register_many_stores_all_and_stops_at_a_taken_id(kazoo_client: KazooClient) -> None:
    reg = QueryRegistry(kazoo_client)
    rows = [(f"q-{i:03d}", f"text {i}", "rsp-ql", {"name": f"n{i}", "order": i}) for i in range(300)]
    assert reg.register_many(rows[:250]) == 250
    assert reg.list() == [r[0] for r in rows[:250]]
    assert reg.get("q-007").text == "text 7" and reg.get("q-007").metadata == {"name": "n7", "order": 7}
    # q-260 is taken meanwhile: the ones before it go in, it and the rest do not
    reg.register("q-260", "other", "sparql", {})
    with pytest.raises(QueryExistsError) as exc:
        reg.register_many(rows[250:])
    assert exc.value.args[0] == "q-260"
    assert reg.list() == sorted([r[0] for r in rows[:261]])  # 0-259, and the other q-260
    assert reg.get("q-260").text == "other"
    with pytest.raises(ValueError):
        reg.register_many([("bad/id", "t", "rsp-ql", {})])


def test_update_states_merges_metadata_and_skips_missing(kazoo_client: KazooClient) -> None:
    reg = QueryRegistry(kazoo_client)
    reg.register_many(
        [(f"q{i}", f"t{i}", "rsp-ql", {"name": f"n{i}", "state": "pending"}) for i in range(40)]
    )
    reg.update("q3", metadata={"owner": "tok-1"})  # another version than the others
    reg.update_states({f"q{i}": {"state": "running"} for i in range(40)} | {"gone": {"state": "x"}})
    for i in range(40):
        rec = reg.get(f"q{i}")
        assert rec.metadata["state"] == "running" and rec.metadata["name"] == f"n{i}", rec
    assert reg.get("q3").metadata["owner"] == "tok-1"
    assert reg.get_many(["q1", "gone", "q2"])[1] is None
    assert [r.text for r in reg.get_many(["q1", "q2"]) if r is not None] == ["t1", "t2"]


def test_submit_many_and_set_owners_equal_one_by_one(kazoo_client: KazooClient) -> None:
    table = AssignmentTable(kazoo_client)
    specs = [TaskSpec(f"t{i:03d}", colocate_with=f"p{i % 3}", stateful=True) for i in range(200)]
    table.submit(specs[5])  # one exists already: kept (its owner too), its spec updated
    table.set_owner("t005", "oc-9")
    table.submit_many(specs)
    assert sorted(table.all()) == [s.id for s in specs]
    assert table.get("t005").container == "oc-9"  # type: ignore[union-attr]
    owners = {s.id: ("oc-1" if i % 2 else "oc-2") for i, s in enumerate(specs)}
    owners["t005"] = "oc-1"  # owned by oc-9: moved one by one, as set_owner does
    table.set_owners(owners)
    got = table.all()
    assert {t: a.container for t, a in got.items()} == owners
    assert all(a.migrating_from is None for a in got.values())
    assert sorted(table.of_container("oc-1")) == sorted(t for t, c in owners.items() if c == "oc-1")
    assert sorted(table.of_container("oc-2")) == sorted(t for t, c in owners.items() if c == "oc-2")
    assert table.of_container("oc-9") == {}
