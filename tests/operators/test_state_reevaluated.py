"""A restored query evaluated once more at its snapshot's report time is unchanged.

A new cluster leader restores each container's task snapshot after report time ``c`` and
then sends one silent tick at that same ``c`` (it rebuilds the queries that have no
snapshot; :mod:`linkstream.cluster.tasksnapshots`).  For a restored query that tick must
change nothing: windows already at ``c``, no delta, the same previous result for an
IStream query.  As ``tests/operators/test_state.py``, with that extra evaluation: the
lines of the whole replay equal a replay in which the query never moved.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest

from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous
from tests.operators.test_state import QUERIES, MovingEngine, make_engine
from tests.shared_paths import shared_or_skip


class Reevaluated(MovingEngine):
    """B evaluates the report time of the move again, silently, after the restore."""

    def tick(self, c: int, names: list[str]) -> dict[str, list[str]]:
        out = super().tick(c, names)
        if self.ticks == self.move_at and self.name in self.b.queries:
            self.b.tick(c, [])
        return out


@pytest.mark.parametrize("mode", ["RSTREAM", "ISTREAM"])
@pytest.mark.parametrize(("qid", "move_at", "max_reports", "migrated"), QUERIES)
def test_a_restored_query_is_unchanged_by_the_silent_tick(
    qid: str, move_at: int, max_reports: int, migrated: bool, mode: str
) -> None:
    shared = shared_or_skip()
    manifest = json.loads((shared / "citybench" / "manifest.json").read_text())
    q = next(x for x in manifest["queries"] if x["id"] == qid)
    text = (shared / q["query"]).read_text()
    streams = [(s["iri"], str(shared / s["path"])) for s in q["streams"]]
    cq = replace(parse_continuous(text, default_name=qid, base=manifest["base"]), mode=mode)
    ref = make_engine(shared, q, text, manifest["base"], 0)
    rq = ref.register(cq)
    assert rq.cq.mode == mode
    expected = io.StringIO()
    replay(ref, [rq], streams, expected, max_reports=max_reports)
    a = make_engine(shared, q, text, manifest["base"], 0)
    b = make_engine(shared, q, text, manifest["base"], 37)
    rq = a.register(cq)
    moving = Reevaluated(a, b, qid, move_at)
    got = io.StringIO()
    replay(moving, [rq], streams, got, max_reports=max_reports)  # type: ignore[arg-type]  # the engine interface
    assert (moving.state is not None) == migrated
    assert got.getvalue().splitlines() == expected.getvalue().splitlines()
