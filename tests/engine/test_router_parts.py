"""A router's join state as a base and a recent part (the recent part merged into the base
once it outgrows a fraction of it) gives the same output as a state merged at every epoch:
a row in both parts with cancelling counts changes no group's result."""

from __future__ import annotations

from pathlib import Path

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators import router as R
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.engine.lsbench_replay import HashSink
from tests.engine.lsbench_replay import lsbench as lsbench_module


def test_base_and_recent_part_write_what_a_state_merged_every_epoch_writes(
    tmp_path: Path, monkeypatch
) -> None:
    lsbench = lsbench_module()
    lsbench.generate(tmp_path, 300, 12, 1.0, 5, 3)
    seen: list[tuple[int, int]] = []  # (rows in the base, in the recent part) after each epoch
    compute = R.RouterOperator.compute

    def spy(self, epoch):
        out = compute(self, epoch)
        seen.append((len(self._base), len(self._recent)))
        return out

    monkeypatch.setattr(R.RouterOperator, "compute", spy)
    digests = []
    always = -(2**62)  # the recent part merged at every epoch (one part)
    for floor in (R.RECENT_FLOOR, always):
        monkeypatch.setattr(R, "RECENT_FLOOR", floor)
        seen.clear()
        eng = Engine()
        eng.add_static(None, load_graph(str(tmp_path / "social.nt"), eng.dictionary))
        texts = lsbench.workload("mixed", 400, 300, "time", 3)
        rqs = [eng.register(parse_continuous(t, default_name=n)) for n, t in texts.items()]
        sink = HashSink()
        streams = [(lsbench.STREAMS[s], str(tmp_path / f"{s}.nq")) for s in lsbench.streams_of("mixed")]
        res = replay(eng, rqs, streams, sink)
        assert res.rows > 1000
        digests.append((sink.h.hexdigest(), sink.chars, res.rows))
        if floor == always:
            assert seen and not any(r for _, r in seen), [x for x in seen if x[1]][:10]
        else:  # both parts held rows at some epoch: the split was exercised
            assert any(b and r for b, r in seen), seen[:20]
        routers = {id(op): op for q in rqs for op in q.root.walk() if isinstance(op, R.RouterOperator)}
        assert routers
        for op in routers.values():  # rows() merges the parts: state and rows agree
            rows = op.rows()
            assert not len(op._recent) and len(op.state) == len(rows)
    assert digests[0] == digests[1]
