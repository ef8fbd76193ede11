"""Batched registry and assignment writes whose transactions are sent together (pipelined):
the outcome equals one transaction after the other, also when one in the middle fails.
Real ZooKeeper; the payloads are large enough that each batch takes several transactions."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kazoo.client import KazooClient

from linkstream.scheduler.assignment import AssignmentTable
from linkstream.scheduler.layout import encode
from linkstream.scheduler.registry import TRANSACTION_BYTES, QueryExistsError, QueryRegistry, chunks
from linkstream.scheduler.state import TaskSpec

pytestmark = pytest.mark.zookeeper

TEXT = "x" * 20_000  # ~12 records per transaction


def _rows(first: int, n: int) -> list[tuple[str, str, str, dict[str, object]]]:
    return [
        (f"q-{i:03d}", f"{i} {TEXT}", "rsp-ql", {"name": f"n{i}", "order": i})
        for i in range(first, first + n)
    ]


def test_register_many_in_several_transactions_stops_at_a_taken_id_in_the_middle(
    kazoo_client: KazooClient,
) -> None:
    reg = QueryRegistry(kazoo_client)
    rows = _rows(0, 60)
    payloads = [
        (reg.layout.query(q), encode({"text": t, "language": lg, "metadata": m})) for q, t, lg, m in rows
    ]
    assert len(chunks(payloads)) >= 4  # several transactions, sent together
    reg.register("q-030", "other", "sparql", {})  # in the third transaction
    with pytest.raises(QueryExistsError) as exc:
        reg.register_many(rows)
    assert exc.value.args[0] == "q-030"
    # exactly the ones before it are stored; none of the later transactions applied
    assert reg.list() == [r[0] for r in rows[:31]]
    assert reg.get("q-030").text == "other"
    assert reg.get("q-029").text == rows[29][1] and reg.get("q-029").metadata == {"name": "n29", "order": 29}
    assert kazoo_client.get_children("/linkstream/txmarks") == []  # no marker left
    # all in one go when nothing is taken; the rest of a batch stored after a taken id is gone
    reg.unregister("q-030")
    assert reg.register_many(rows[30:]) == 30
    assert reg.list() == [r[0] for r in rows]
    assert [r.text for r in reg.get_many([r[0] for r in rows]) if r is not None] == [r[1] for r in rows]
    assert kazoo_client.get_children("/linkstream/txmarks") == []


def test_update_states_and_assignments_in_several_transactions(kazoo_client: KazooClient) -> None:
    reg = QueryRegistry(kazoo_client)
    rows = _rows(0, 60)
    assert reg.register_many(rows) == 60
    reg.update("q-040", metadata={"owner": "tok"})  # another version than the others: still merged
    reg.update_states({r[0]: {"state": "running"} for r in rows})
    for rec in reg.get_many([r[0] for r in rows]):
        assert rec is not None and rec.metadata["state"] == "running" and rec.text.endswith(TEXT)
    assert reg.get("q-040").metadata["owner"] == "tok"
    table = AssignmentTable(kazoo_client)
    streams = tuple(f"http://example.org/stream/{k}/" + "s" * 2000 for k in range(20))  # ~40 KB a task
    specs = [TaskSpec(f"t{i:03d}", stateful=True, streams=streams) for i in range(40)]
    table.submit(TaskSpec("t005", stateful=False))  # exists: updated on its own, keeps going
    table.submit_many(specs)
    got = table.all()
    assert sorted(got) == [s.id for s in specs]
    assert all(got[s.id].task == s and got[s.id].container is None for s in specs)
    table.set_owners({s.id: ("c1" if i % 2 else "c2") for i, s in enumerate(specs)})
    assert {t: a.container for t, a in table.all().items()} == {
        s.id: ("c1" if i % 2 else "c2") for i, s in enumerate(specs)
    }
    assert sorted(table.of_container("c1")) == [s.id for i, s in enumerate(specs) if i % 2]
    assert len(encode(table.all()["t000"].to_json())) * 40 > 2 * TRANSACTION_BYTES  # several transactions


def test_first_state_written_without_a_read_never_overwrites_a_newer_record(
    kazoo_factory: Callable[..., KazooClient],
) -> None:
    leader, other = QueryRegistry(kazoo_factory()), QueryRegistry(kazoo_factory())
    rows = _rows(0, 30)
    assert leader.register_many(rows) == 30
    other.update("q-005", metadata={"owner": "tok"})  # written since: the leader's copy is stale
    other.unregister("q-007")
    other.register("q-007", "a new text", "sparql", {"name": "n7"})  # version 0 again
    leader.forget_written()  # (a new leader term: another leader may have written)
    leader.update_states({r[0]: {"state": "running"} for r in rows})
    recs = {r.id: r for r in other.get_many([r[0] for r in rows]) if r is not None}
    assert all(r.metadata["state"] == "running" for r in recs.values())
    assert recs["q-005"].metadata["owner"] == "tok" and recs["q-005"].text == rows[5][1]
    assert recs["q-007"].text == "a new text" and recs["q-007"].language == "sparql"
    assert recs["q-008"].text == rows[8][1] and recs["q-008"].metadata["name"] == "n8"
    # kept records are used once; a later update reads the record again
    other.update("q-009", metadata={"owner": "tok2"})
    leader.update_states({"q-009": {"state": "failed: x"}})
    assert other.get("q-009").metadata == {"name": "n9", "order": 9, "state": "failed: x", "owner": "tok2"}


def test_set_owners_after_a_remembered_read_of_a_task_changed_since(
    kazoo_factory: Callable[..., KazooClient],
) -> None:
    coord, other = AssignmentTable(kazoo_factory()), AssignmentTable(kazoo_factory())
    specs = [TaskSpec(f"t{i}") for i in range(6)]
    coord.submit_many(specs)
    assert all(
        a is not None and a.container is None for a in coord.get_many([s.id for s in specs], remember=True)
    )
    other.set_owner("t2", "c9")  # placed by someone else since the read
    coord.set_owners({s.id: "c1" for s in specs})
    table = other.all()
    # as without the remembered read: the write of t2's group fails on t2's newer version and
    # the group goes one by one (set_owner, as for a task found owned): t2's index entry moves too
    assert {t: a.container for t, a in table.items()} == {s.id: "c1" for s in specs}
    assert sorted(other.of_container("c1")) == [s.id for s in specs] and other.of_container("c9") == {}
