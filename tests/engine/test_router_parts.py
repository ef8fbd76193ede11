"""A router's join state as a base and a recent part (the recent part merged into the base
once it outgrows a fraction of it) gives the same output as a state merged at every epoch:
a row in both parts with cancelling counts changes no group's result."""

from __future__ import annotations

from pathlib import Path

from linkstream.operators import router as R
from tests.engine.lsbench_replay import lsbench as lsbench_module
from tests.engine.lsbench_replay import mixed_replay


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
        digest, rqs = mixed_replay(tmp_path)
        assert digest[2] > 1000
        digests.append(digest)
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
