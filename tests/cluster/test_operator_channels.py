"""Producer channels without ZooKeeper: generations, resets, partitioned instances, a move.

:class:`~linkstream.containers.placement.channels.Channel` is checked on hand-made
batches; then real operator planes (real ZeroMQ edges, one engine each, dictionaries
that disagree on ids) run a CityBench join as two hash-partitioned instances whose
union a consumer reads, and one instance moves to a third plane mid-stream: the
consumer's results must equal a local evaluation at every tick.
"""

from __future__ import annotations

import time

import numpy as np

from linkstream.containers.placement.channels import Channel
from linkstream.containers.placement.tasks import HostedProducer, OperatorPlane, OpTasks, RemoteCut
from linkstream.engine.cutting import cut_points, partition_var
from linkstream.operators.batch import Batch, consolidate
from linkstream.rdf.streams import StreamReader
from tests.cluster.test_operator_tasks import _engine, _manifest, _query


def _b(*rows: tuple[int, int]) -> Batch:
    """A one-variable batch of ``(value, count)`` rows."""
    return Batch(("x",), np.array([[v for v, _ in rows]], dtype=np.int64), np.array([c for _, c in rows]))


def _rows(b: Batch) -> dict[int, int]:
    b = consolidate(b)
    return {int(v): int(c) for v, c in zip(b.cols[0], b.counts)}


def test_a_channel_applies_deltas_and_turns_a_new_generation_into_a_correction() -> None:
    ch = Channel("op-1", ("x",))
    assert not ch.ready(1)
    ch.offer(1, 1, _b((1, 1), (2, 1)))
    assert ch.ready(1) and _rows(ch.take(1)) == {1: 1, 2: 1}
    ch.offer(1, 2, _b((3, 1)))
    assert _rows(ch.take(2)) == {3: 1}
    # The host moves: the new one's first batch (tick 2) is the whole state; its tick 3
    # follows.  The old host's late tick-3 batch is dropped, whenever it arrives.
    ch.offer(2, 2, _b((1, 1), (3, 1), (4, 1)))
    assert not ch.offer(1, 3, _b((9, 1)))
    assert not ch.ready(3)
    ch.offer(2, 3, _b((5, 1)))
    # acc was {1, 2, 3}: the correction removes 2 and adds 4 and 5, nothing twice.
    assert _rows(ch.take(3)) == {2: -1, 4: 1, 5: 1}
    assert _rows(ch.state()) == {1: 1, 3: 1, 4: 1, 5: 1}
    assert ch.resets == 1 and ch.dropped == 1


def test_a_lagging_consumer_takes_a_reset_from_ahead_once() -> None:
    ch = Channel("op-1", ("x",))
    ch.offer(1, 1, _b((1, 1)))
    ch.take(1)
    ch.offer(2, 5, _b((7, 1)))  # rebuilt on a host already at tick 5
    assert ch.ready(2)
    assert _rows(ch.take(2)) == {1: -1, 7: 1}
    for t in (3, 4, 5):  # ticks the reset covered
        assert ch.ready(t) and len(ch.take(t)) == 0
    assert not ch.ready(6)
    ch.offer(2, 6, _b((8, 1)))
    assert _rows(ch.take(6)) == {8: 1}


def test_partitioned_instances_union_to_the_local_join_while_one_moves() -> None:
    shared, by_id, base = _manifest()
    qid = "cqels-Q11"
    entry = by_id[qid]
    text = (shared / entry["query"]).read_text()
    scratch = _engine(shared, [entry])
    var = partition_var(cut_points(scratch.register(_query(shared, entry, base)).root)[0])
    assert var is not None
    # Producers and the consumer each with their own dictionary: the query's constants
    # are planned first everywhere (as RunReplica.preplan does), later ids differ.
    engines = [_engine(shared, [entry]) for _ in range(3)]
    consumer_eng, reference = _engine(shared, [entry]), _engine(shared, [entry])
    for eng in engines:
        eng.register(_query(shared, entry, base))
        eng.unregister(qid)
    consumer_eng.register(_query(shared, entry, base))
    reference.register(_query(shared, entry, base))
    for j, eng in zip((0, 11, 23, 5), [*engines, consumer_eng]):
        eng.dictionary.encode_many([f'"junk {i}"' for i in range(j)])
    planes = [OperatorPlane(wait_timeout=10.0) for _ in engines]
    consumer = OperatorPlane(wait_timeout=10.0)
    channels = [f"op-1.{i}" for i in range(2)]
    to = [("consumer", consumer.address)]
    peers = [(f"p{i}", p.address) for i, p in enumerate(planes)]

    def spec(i: int, gen: int = 1) -> HostedProducer:
        return HostedProducer(channels[i], qid, 0, text, to, gen=gen, part=i, parts=2, var=var, peers=peers)

    try:
        for i, (plane, eng) in enumerate(zip(planes, engines)):
            hosted = [spec(i)] if i < 2 else []
            plane.configure(f"p{i}", "run", eng, base, OpTasks("run", f"p{i}", hosted, []))
        remote = [RemoteCut(qid, 0, "op-1", channels, var)]
        consumer.configure("consumer", "run", consumer_eng, base, OpTasks("run", "consumer", [], remote))

        everyone = [*engines, consumer_eng, reference]
        elements: dict[int, list[tuple[str, int, np.ndarray]]] = {}
        for k, s in enumerate(entry["streams"]):
            for n, eng in enumerate(everyone):
                for el in StreamReader(str(shared / s["path"]), eng.dictionary, bnode_prefix=f"st{k}_"):
                    elements.setdefault(n, []).append((s["iri"], el.t, el.triples))
        t0 = min(t for _, t, _ in elements[len(everyone) - 1])
        rows = 0
        for seq in range(1, 81):
            c = (t0 // 1000 + seq) * 1000
            for n, eng in enumerate(everyone):
                for iri, t, triples in elements[n]:
                    if c - 1000 <= t < c:
                        eng.ingest(iri, t, triples)
            if seq == 41:
                # Instance 0 moves to plane 2, which has seen tick 40 only: it catches up,
                # sends its whole partition as generation 2 and tells plane 0 to stop.
                planes[2].before_tick(40, c - 1000)
                planes[2].host(spec(0, gen=2))
                deadline = time.monotonic() + 10
                while "op-1.0" in planes[0].producers and time.monotonic() < deadline:
                    planes[0].poll()
                assert "op-1.0" not in planes[0].producers and "op-1.0" in planes[2].producers
            for plane in planes:
                plane.before_tick(seq, c)
                plane.after_tick()
            consumer.before_tick(seq, c)
            got = consumer_eng.tick(c, (qid,))[qid]
            consumer.after_tick()
            want = reference.tick(c, (qid,))[qid]
            assert sorted(got) == sorted(want), f"tick {seq}"
            rows += len(want)
        assert rows > 0
        cc = consumer.counters
        assert cc.partition_rows > 0 and cc.foreign_rows == 0  # each instance sent its partition only
        assert cc.resets == 1 and planes[0].counters.released == 1
        kept = [
            sum(p.rows_kept for p in plane.producers[ch].partitions or [])
            for plane, ch in ((planes[1], "op-1.1"), (planes[2], "op-1.0"))
        ]
        assert all(k > 0 for k in kept)  # both partitions hold rows
        assert not any(p.errors for p in [*planes, consumer])
    finally:
        for p in [*planes, consumer]:
            p.close()
