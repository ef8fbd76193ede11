"""The queries of a run live in ZooKeeper nodes of bounded size (issue 15: a run node rewritten
whole per registration batch grew O(n^2) in bytes and passed ZooKeeper's 1 MB node limit
near 25,000 queries).  Real ZooKeeper; a reader in another session sees exactly the run the
driver published, batch after batch, and no node grows with the number of queries."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import replace

import pytest
from kazoo.client import KazooClient

from linkstream.cluster.driverstate import task_id
from linkstream.scheduler.runparts import PART_BYTES, TEXT_MOST
from linkstream.scheduler.runs import RunActiveError, RunNode, RunSpec

pytestmark = pytest.mark.zookeeper

#: ZooKeeper's default node limit (jute.maxbuffer)
NODE_LIMIT = 1024 * 1024


def _spec(queries: dict[str, str]) -> RunSpec:
    return RunSpec(
        id="live-test", driver="tcp://127.0.0.1:1", base="http://ex.org/", default_step=1000, queries=queries
    )


def _node_sizes(client: KazooClient, node: RunNode) -> dict[str, int]:
    sizes = {node.path: client.exists(node.path).dataLength}
    for child in client.get_children(node.parts_path):
        path = f"{node.parts_path}/{child}"
        sizes[path] = client.exists(path).dataLength
    return sizes


def test_a_run_larger_than_a_node_is_read_back_whole_and_no_node_grows(
    kazoo_factory: Callable[..., KazooClient],
) -> None:
    driver, reader = kazoo_factory(), kazoo_factory()
    node = RunNode(driver)
    names = [f"http://example.org/queries/a-fairly-long-query-name-{i:06d}" for i in range(40_000)]
    queries = {task_id(n): n for n in names}
    # the old format (the whole task -> name list in the run node) would not fit in one node
    assert len(json.dumps(_spec(queries).to_json())) > NODE_LIMIT
    seen: list[RunSpec | None] = []
    changed = threading.Event()

    def on_run(spec: RunSpec | None) -> None:
        seen.append(spec)
        changed.set()

    RunNode(reader).watch(on_run)
    published: dict[str, str] = {}
    texts = {task_id(n): f"REGISTER RSTREAM <{n}> AS SELECT * WHERE {{ ?s ?p ?o }}" for n in names[:3000]}
    step = 4000
    for i in range(0, len(names), step):  # one write per registration batch, as a live service does
        published.update({task_id(n): n for n in names[i : i + step]})
        batch_texts = {t: x for t, x in texts.items() if t in published}
        if i == 0:
            node.claim(replace(_spec(dict(published)), texts=batch_texts))
        else:
            node.update(replace(_spec(dict(published)), texts=batch_texts))
        sizes = _node_sizes(driver, node)
        assert max(sizes.values()) <= PART_BYTES + 4096, sizes
        assert sizes[node.path] < 4096  # the run node names the parts, not the queries
    got = RunNode(reader).get()
    assert got is not None and got.queries == queries and got.texts == texts
    assert got == _spec(queries)
    # the watcher ends up with the same run
    assert changed.wait(10)
    for _ in range(100):
        if seen[-1] is not None and seen[-1].queries == queries:
            break
        changed.clear()
        changed.wait(0.1)
    assert seen[-1] is not None and seen[-1].queries == queries and seen[-1].texts == texts
    # removing queries rewrites only the parts naming them; an emptied part goes
    before = _node_sizes(driver, node)
    gone = set(list(queries)[:2000])
    rest = {t: n for t, n in queries.items() if t not in gone}
    node.update(_spec(rest))
    after = _node_sizes(driver, node)
    assert len(after) < len(before)
    got = RunNode(reader).get()
    assert got is not None and got.queries == rest
    assert got.texts == {t: x for t, x in texts.items() if t in rest}
    # a renamed task (same id, other name) is published with its new name
    some = next(iter(rest))
    node.update(_spec({**rest, some: "renamed"}))
    got = RunNode(reader).get()
    assert got is not None and got.queries[some] == "renamed" and len(got.queries) == len(rest)
    # the run ends: its parts go with it
    node.release()
    assert RunNode(reader).get() is None
    assert driver.get_children(node.parts_path) == []


def test_parts_are_ephemeral_and_published_again_after_a_new_claim(
    kazoo_factory: Callable[..., KazooClient],
) -> None:
    first, other, reader = kazoo_factory(), kazoo_factory(), kazoo_factory()
    big = "x" * (TEXT_MOST + 1)
    queries = {task_id(f"q{i}"): f"q{i}" for i in range(500)}
    texts = {t: f"text of {n}" for t, n in queries.items()}
    texts[task_id("q0")] = big  # too large to copy: the container reads the registry for it
    RunNode(first).claim(replace(_spec(queries), texts=texts))
    got = RunNode(reader).get()
    assert got is not None and got.queries == queries
    assert task_id("q0") not in got.texts and got.texts[task_id("q1")] == "text of q1"
    # another driver cannot claim the cluster meanwhile, and leaves no parts behind
    with pytest.raises(RunActiveError, match="replay live-test is already running"):
        RunNode(other).claim(_spec({task_id("z"): "z"}))
    got = RunNode(reader).get()
    assert got is not None and got.queries == queries
    # the driver's session ends: the run node and its parts vanish with it
    first.stop()
    first.close()
    assert RunNode(reader).get() is None
    assert reader.get_children(RunNode(reader).parts_path) == []
    # the same run claimed again by a node that published it before (a new session)
    node = RunNode(other)
    node.claim(_spec(queries))
    other.delete(node.path)
    for child in other.get_children(node.parts_path):
        other.delete(f"{node.parts_path}/{child}")
    node.claim(_spec(queries))  # as keep_across_expiry does after an expiry
    got = RunNode(reader).get()
    assert got is not None and got.queries == queries
