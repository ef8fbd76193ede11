"""Operator-level placement without ZooKeeper: task cutting, placement, messages, one edge.

The cluster test (``test_operator_placement.py``) runs the whole thing on container
processes; these check the pieces in one process: the sans-IO cut and placement of
:mod:`linkstream.engine.cutting`, the ``optasks`` message, and a producer engine feeding
a consumer engine over a real ZeroMQ edge while their dictionaries disagree on ids.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from linkstream.containers.placement.tasks import (
    HostedProducer,
    OperatorPlane,
    OperatorPlaneError,
    OpTasks,
    RemoteCut,
    RemoteInput,
    decode_optasks,
    edge_endpoint,
    encode_optasks,
    header_kind,
)
from linkstream.engine.cutting import (
    cut_points,
    partition_coverage,
    partition_join,
    partition_var,
    place_producers,
    plan_tasks,
    producer_specs,
    spread_queries,
)
from linkstream.engine.embedded import Engine
from linkstream.query.continuous import ContinuousQuery, parse_continuous
from linkstream.rdf.static import load_graph
from linkstream.rdf.streams import StreamReader
from tests.shared_paths import shared_or_skip

IDS = ["cqels-Q1", "cqels-Q1_win_1", "cqels-Q3", "csparql-Q1", "csparql-Q2", "cqels-Q11"]


def _manifest() -> tuple[Path, dict, str]:
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    return shared, {q["id"]: q for q in manifest["queries"]}, manifest.get("base", "http://localhost/")


def _engine(shared: Path, entries: list[dict], junk: int = 0) -> Engine:
    eng = Engine(default_step=1000)
    if junk:  # a dictionary whose ids differ from every other engine's
        eng.dictionary.encode_many([f'"junk {i}"' for i in range(junk)])
    seen: set[str] = set()
    for q in entries:
        for s in q["statics"]:
            if s["iri"] not in seen:
                seen.add(s["iri"])
                eng.add_static(s["iri"], load_graph(str(shared / s["path"]), eng.dictionary))
    eng.declare_streams({s["iri"] for q in entries for s in q["streams"]})
    return eng


def _query(shared: Path, entry: dict, base: str) -> ContinuousQuery:
    return parse_continuous((shared / entry["query"]).read_text(), default_name=entry["id"], base=base)


def test_cuts_are_shared_by_signature_and_equal_in_a_lone_plan() -> None:
    shared, by_id, base = _manifest()
    eng = _engine(shared, [by_id[i] for i in IDS])
    roots = {i: eng.register(_query(shared, by_id[i], base)).root for i in sorted(IDS)}
    plan = plan_tasks(roots)
    assert all(plan.cuts[i] for i in IDS), plan.cuts
    # Q1 and Q3 of CQELS hold one route signature: one producer task for both.
    assert plan.cuts["cqels-Q1"] == plan.cuts["cqels-Q3"]
    assert set(plan.consumers(plan.cuts["cqels-Q1"][0])) == {"cqels-Q1", "cqels-Q3"}
    # Q1_win_1 has other ranges over the same join: its own route, the same join group.
    win = plan.cuts["cqels-Q1_win_1"][0]
    assert win != plan.cuts["cqels-Q1"][0]
    assert plan.groups[win] is not None and plan.groups[win] == plan.groups[plan.cuts["cqels-Q1"][0]]
    # A container planning one query alone finds the same cuts at the same positions.
    for qid in ("cqels-Q3", "csparql-Q2"):
        alone = _engine(shared, [by_id[qid]], junk=7)
        cuts = cut_points(alone.register(_query(shared, by_id[qid], base)).root)
        assert [c.describe().split(" consts")[0] for c in cuts] == [
            plan.describe[p].split(" consts")[0] for p in plan.cuts[qid]
        ]


def test_producers_are_placed_by_the_core_away_from_a_full_container() -> None:
    shared, by_id, base = _manifest()
    eng = _engine(shared, [by_id[i] for i in IDS])
    plan = plan_tasks({i: eng.register(_query(shared, by_id[i], base)).root for i in sorted(IDS)})
    consumers = {q: "oc-1" for q in IDS}
    caps = {"oc-1": 8, "oc-2": 8, "oc-3": 8}
    hosts = place_producers(plan, consumers, caps)
    assert hosts == place_producers(plan, consumers, caps)  # deterministic
    assert set(hosts) == set(plan.producers)
    assert "oc-1" not in set(hosts.values())  # the consumers' container is the busiest
    assert spread_queries(plan, consumers, hosts) == sorted(IDS)
    groups: dict[str, set[str]] = {}
    for pid, g in plan.groups.items():
        if g is not None:
            groups.setdefault(g, set()).add(hosts[pid])
    assert groups and all(len(h) == 1 for h in groups.values())  # routes of a join together
    # No free slot anywhere: a producer stays with its first consumer.
    assert set(place_producers(plan, consumers, {"oc-1": len(IDS)}).values()) == {"oc-1"}


def test_optasks_round_trip_and_rejections() -> None:
    m = OpTasks("r1", "oc-2", [HostedProducer("op-1", "q", 0, "select ...", [("oc-1", "tcp://x:1")])], [])
    m2 = OpTasks("r1", "oc-1", [], [RemoteCut("q", 0, "op-1")])
    for msg in (m, m2):
        frames = encode_optasks(msg)
        assert header_kind(frames) == "optasks"
        assert decode_optasks(frames) == msg
    assert header_kind([b"\x01\x02"]) is None
    # The edge socket sits next to the data-plane socket, on a port of its own.
    assert edge_endpoint("tcp://10.0.0.5:5601") == "tcp://10.0.0.5:*"
    assert edge_endpoint("ipc:///run/oc1") == "ipc:///run/oc1-ops"
    with pytest.raises(OperatorPlaneError):
        decode_optasks([b"\x81\xa4kind\xa7optasks"])


def _edge(
    shared: Path, entry: dict, base: str, junk_before: int
) -> tuple[Engine, Engine, OperatorPlane, OperatorPlane]:
    """A producer engine and a consumer engine of ``entry`` joined by one edge."""
    producer_eng = _engine(shared, [entry])
    consumer_eng = _engine(shared, [entry], junk=junk_before)
    consumer_eng.register(_query(shared, entry, base))
    producer, consumer = OperatorPlane(wait_timeout=5.0), OperatorPlane(wait_timeout=5.0)
    text = (shared / entry["query"]).read_text()
    hosted = HostedProducer("op-1", entry["id"], 0, text, [("consumer", consumer.address)])
    producer.configure("producer", "run", producer_eng, base, OpTasks("run", "producer", [hosted], []))
    remote = [RemoteCut(entry["id"], 0, "op-1")]
    consumer.configure("consumer", "run", consumer_eng, base, OpTasks("run", "consumer", [], remote))
    return producer_eng, consumer_eng, producer, consumer


def test_a_remote_input_equals_the_local_plan_across_dictionaries() -> None:
    shared, by_id, base = _manifest()
    qid = "cqels-Q1"
    entry = by_id[qid]
    producer_eng, consumer_eng, producer, consumer = _edge(shared, entry, base, 0)
    reference = _engine(shared, [entry])
    reference.register(_query(shared, entry, base))
    # Constants have equal ids everywhere (RunReplica.preplan sees to it); stream terms
    # and computed terms do not: shift the consumer's and the reference's later ids.
    consumer_eng.dictionary.encode_many([f'"junk {i}"' for i in range(1000)])
    reference.dictionary.encode_many([f'"other {i}"' for i in range(3)])
    try:
        rq = consumer_eng.queries[qid]
        assert any(isinstance(o, RemoteInput) for o in rq.root.walk())
        assert not any(type(o).__name__ == "RouterOperator" for o in rq.root.walk())
        assert not producer_eng.queries  # the producer's query is hidden: only its cut runs

        elements: dict[int, list[tuple[int, np.ndarray]]] = {}
        for k, s in enumerate(entry["streams"]):
            for eng_no, eng in enumerate((producer_eng, consumer_eng, reference)):
                reader = StreamReader(str(shared / s["path"]), eng.dictionary, bnode_prefix=f"st{k}_")
                for el in reader:
                    elements.setdefault(eng_no, []).append((s["iri"], el.t, el.triples))
        t0 = min(t for _, t, _ in elements[2])
        rows = 0
        for seq in range(1, 121):
            c = (t0 // 1000 + seq) * 1000
            for eng_no, eng in enumerate((producer_eng, consumer_eng, reference)):
                for iri, t, triples in elements[eng_no]:
                    if c - 1000 <= t < c:
                        eng.ingest(iri, t, triples)
            producer.before_tick(seq, c)
            producer_eng.tick(c, ())
            producer.after_tick()
            consumer.before_tick(seq, c)
            got = consumer_eng.tick(c, (qid,))[qid]
            want = reference.tick(c, (qid,))[qid]
            assert sorted(got) == sorted(want), f"tick {seq}"
            rows += len(want)
        assert rows > 0
        assert producer.counters.batches_sent == 120 == consumer.counters.batches_received
        assert producer.counters.terms_sent > 0
        assert not producer.errors and not consumer.errors
    finally:
        producer.close()
        consumer.close()


def test_a_producer_planned_with_other_constant_ids_is_refused() -> None:
    shared, by_id, base = _manifest()
    entry = by_id["cqels-Q1"]
    producer_eng, consumer_eng, producer, consumer = _edge(shared, entry, base, 1000)
    errors: list[str] = []
    consumer.on_error = errors.append
    try:
        producer.before_tick(1, 10_000)
        producer_eng.tick(10_000, ())
        producer.after_tick()
        consumer.before_tick(1, 10_000)
        consumer_eng.tick(10_000, ())
        assert consumer.counters.mismatches == 1
        assert errors and "another plan" in errors[0]
    finally:
        producer.close()
        consumer.close()


def test_partitioned_producers_are_planned_per_join_and_placed_as_instances() -> None:
    shared, by_id, base = _manifest()
    eng = _engine(shared, [by_id[i] for i in IDS])
    roots = {i: eng.register(_query(shared, by_id[i], base)).root for i in sorted(IDS)}
    assert plan_tasks(roots).partition == {}  # parallelism 1: nothing is partitioned
    plan = plan_tasks(roots, 3)
    q1 = plan.cuts["cqels-Q1"][0]
    win = plan.cuts["cqels-Q1_win_1"][0]
    # Routes of one shared join agree on the variable (they share the join's filters).
    assert plan.partition[q1] == plan.partition[win]
    assert plan.channels(q1) == [f"{q1}.{i}" for i in range(3)]
    ops = {pid: op for q, pids in plan.cuts.items() for pid, op in zip(pids, cut_points(roots[q]))}
    assert set(plan.partition) == set(ops)  # every CityBench join here can be partitioned
    for pid, var in plan.partition.items():
        cover = partition_coverage(ops[pid])  # inputs binding each candidate variable
        assert cover[var] >= 2 and var == min(cover, key=lambda v: (-cover[v], v))
    # Q11's join: every input binds the variable (no input is broadcast).
    q11 = cut_points(roots["cqels-Q11"])[0]
    j = partition_join(q11)
    assert j is not None and partition_coverage(q11)[partition_var(q11) or ""] == len(j.children)
    specs = producer_specs(plan)
    assert [s.id for s in specs] == plan.all_channels()
    by_id_ = {s.id: s for s in specs}
    assert by_id_[f"{q1}.1"].colocate_with == f"{plan.groups[q1]}.1"  # instance i with instance i
    assert by_id_[f"{q1}.1"].weight == len(plan.consumers(q1)) / 3
    hosts = place_producers(plan, {q: "oc-1" for q in IDS}, {"oc-1": 8, "oc-2": 8, "oc-3": 8})
    assert set(hosts) == set(plan.all_channels())
    assert len({hosts[ch] for ch in plan.channels(q1)}) > 1  # instances spread
