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
        seen.append((len(self._base), len(self._recent) + self._nlazy))
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
            assert not len(op._recent) and not op._lazy and len(op.state) == len(rows)
    assert digests[0] == digests[1]


def test_rows_leaving_by_expiry_write_what_testing_every_row_writes(tmp_path: Path, monkeypatch) -> None:
    """Rows already joined leave their groups by their expiry (pairs ordered by when they
    stop qualifying) or by testing every row against its groups at every epoch: the
    same bytes, and the expiry path was taken (built from the joined rows, then kept)."""
    lsbench = lsbench_module()
    lsbench.generate(tmp_path, 300, 12, 1.0, 5, 3)
    left: list[int] = []  # pairs taken out of an expiry, per call
    built: list[int] = []
    leave, rebuild = R.Expiry.leave, R.RouterOperator._expiry_of

    def spy_leave(self, close):
        out = leave(self, close)
        left.append(sum(len(n) for _, n, _ in out))
        return out

    def spy_build(self, old, t, close):
        built.append(close)
        return rebuild(self, old, t, close)

    monkeypatch.setattr(R.Expiry, "leave", spy_leave)
    monkeypatch.setattr(R.RouterOperator, "_expiry_of", spy_build)
    digests = []
    for on in (True, False):
        monkeypatch.setattr(R, "EXPIRY", on)
        left.clear()
        built.clear()
        digest, _ = mixed_replay(tmp_path)
        assert digest[2] > 1000
        digests.append(digest)
        if on:
            assert sum(left) > 1000 and built, (sum(left), built)
        else:
            assert not left and not built
    assert digests[0] == digests[1]
