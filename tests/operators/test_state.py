"""Operator-state migration (``linkstream.operators.state``) between two real engines.

Engine A runs a CityBench query; after a few report times its state is snapshotted,
sent through the wire form, and restored into engine B, which was fed the same streams
but whose dictionary numbers terms differently.  From then on B answers; the lines of
the whole replay must equal an embedded replay in which the query never moved.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.mjoin import MJoinOperator
from linkstream.operators.state import (
    QueryState,
    StateError,
    decode_state,
    encode_state,
    restore_query,
    snapshot_query,
)
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.shared_paths import shared_or_skip

MOVE_AT = 6  # report times evaluated on A before the move
MAX_REPORTS = 25
QUERIES = [  # (query, reports before the move, reports in all, state migrated)
    ("csparql-Q10", MOVE_AT, MAX_REPORTS, True),
    ("csparql-Q9", MOVE_AT, MAX_REPORTS, True),  # static join
    ("csparql-Q6", MOVE_AT, MAX_REPORTS, True),
    ("csparql-pollution_weather_1", MOVE_AT, MAX_REPORTS, True),
    ("csparql-Q3", 110, 140, True),  # aggregates: their traffic stream starts late
    # Queries on a shared join's router are rebuilt, not migrated: still equal results.
    ("csparql-Q11", MOVE_AT, MAX_REPORTS, False),
    ("cqels-Q11", MOVE_AT, MAX_REPORTS, False),
]


def make_engine(shared: Path, q: dict, text: str, base: str, junk: int) -> Engine:
    """An engine with the query's static graphs, its constants encoded, then ``junk`` terms.

    Like a container's replica: statics first, then every query of the run planned once
    (so the constants, hence the canonical plans, get equal ids everywhere), then terms
    that differ between engines (values that expressions computed, in another order).
    """
    eng = Engine(default_step=1000, log_fn=lambda _m: None)
    for k, s in enumerate(q["statics"]):
        eng.add_static(s["iri"], load_graph(str(shared / s["path"]), eng.dictionary, bnode_prefix=f"s{k}_"))
    eng.register(parse_continuous(text, default_name="preplan", base=base))
    eng.unregister("preplan")
    eng.dictionary.encode_many([f"<urn:junk:{i}>" for i in range(junk)])
    return eng


class MovingEngine:
    """The engine interface of ``replay``: A answers until ``MOVE_AT`` reports, then B."""

    def __init__(self, a: Engine, b: Engine, name: str, move_at: int) -> None:
        self.a, self.b, self.name, self.move_at = a, b, name, move_at
        self.dictionary = a.dictionary
        self.ticks = 0
        self.state: QueryState | None = None
        self.moved_after = 0  # report time of the last tick A evaluated
        self.result_rows = 0
        self.join_rows: list[int] = []

    def buffer(self, iri: str) -> None:
        self.a.buffer(iri)
        self.b.buffer(iri)

    def ingest(self, stream: str, t: int, triples: np.ndarray) -> None:
        self.a.ingest(stream, t, triples)
        terms = self.a.dictionary.decode_many(triples.reshape(-1)) if len(triples) else []
        local = np.asarray(self.b.dictionary.encode_many(terms), dtype=np.int64).reshape(-1, 3)
        self.b.ingest(stream, t, local)

    def gc(self) -> None:
        self.a.gc()
        self.b.gc()

    def tick(self, c: int, names: list[str]) -> dict[str, list[str]]:
        holder = self.a if self.name in self.a.queries else self.b
        other = self.b if holder is self.a else self.a
        out = holder.tick(c, names)
        other.tick(c, [])
        self.ticks += 1
        if self.ticks == self.move_at:
            self.moved_after = c
            try:
                snap = snapshot_query(self.a, self.name, c)
            except StateError:  # the target rebuilds the query from its stream buffers
                self.b.register(self.a.queries[self.name].cq)
                self.a.unregister(self.name)
                return out
            self.state = decode_state([bytes(f) for f in encode_state(snap)])
            self.b.register(self.a.queries[self.name].cq)
            restore_query(self.b, self.name, self.state, c)
            # Restored, not re-derived: before B evaluates anything, it holds A's result
            # and A's join/aggregate relations (a fresh registration holds nothing yet).
            ra, rb = self.a.queries[self.name], self.b.queries[self.name]
            self.result_rows = len(ra.output.result.rows)
            assert len(rb.output.result.rows) == self.result_rows
            self.join_rows = [
                sum(map(len, op.state)) for op in ra.root.walk() if isinstance(op, MJoinOperator)
            ]
            assert [sum(map(len, op.state)) for op in rb.root.walk() if isinstance(op, MJoinOperator)] == (
                self.join_rows
            )
            self.a.unregister(self.name)
        return out


@pytest.mark.parametrize(("qid", "move_at", "max_reports", "migrated"), QUERIES)
def test_migrated_state_continues_like_an_unmoved_query(
    qid: str, move_at: int, max_reports: int, migrated: bool
) -> None:
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    q = next(x for x in manifest["queries"] if x["id"] == qid)
    text = (shared / q["query"]).read_text()
    streams = [(s["iri"], str(shared / s["path"])) for s in q["streams"]]

    ref = make_engine(shared, q, text, manifest["base"], 0)
    rq = ref.register(parse_continuous(text, default_name=qid, base=manifest["base"]))
    expected = io.StringIO()
    replay(ref, [rq], streams, expected, max_reports=max_reports)

    a = make_engine(shared, q, text, manifest["base"], 0)
    b = make_engine(shared, q, text, manifest["base"], 37)
    rq = a.register(parse_continuous(text, default_name=qid, base=manifest["base"]))
    moving = MovingEngine(a, b, qid, move_at)
    got = io.StringIO()
    replay(moving, [rq], streams, got, max_reports=max_reports)  # type: ignore[arg-type]

    assert qid in b.queries and qid not in a.queries
    lines = expected.getvalue().splitlines()
    assert got.getvalue().splitlines() == lines
    assert any(json.loads(x)["t"] > moving.moved_after for x in lines), "B answered nothing"
    assert (moving.state is not None) == migrated
    if migrated:
        assert moving.state is not None
        assert moving.state.rows > 0 and moving.state.nbytes > 0  # state moved, not re-derived
        assert moving.result_rows > 0 or sum(moving.join_rows) > 0


def test_rebuild_is_required_for_a_different_plan_or_time() -> None:
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    q = next(x for x in manifest["queries"] if x["id"] == "csparql-Q10")
    text = (shared / q["query"]).read_text()
    a = make_engine(shared, q, text, manifest["base"], 0)
    b = make_engine(shared, q, text, manifest["base"], 0)
    a.register(parse_continuous(text, default_name="q", base=manifest["base"]))
    snap = snapshot_query(a, "q", 5000)
    b.register(parse_continuous(text, default_name="q", base=manifest["base"]))
    with pytest.raises(StateError, match="t=5000"):
        restore_query(b, "q", snap, 6000)
    with pytest.raises(StateError, match="not a snapshot of this query"):
        restore_query(b, "other", snap, 5000)
    with pytest.raises(StateError):
        decode_state([b"\x93junk"])
