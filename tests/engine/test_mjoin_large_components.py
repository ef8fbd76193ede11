"""A shared join whose component join was too large to diff (more than COMPONENT_MAX rows)
probes input by input at the next epochs without joining the component again to find that
out; the replay writes the same bytes as one that tries the component join every epoch."""

from __future__ import annotations

from pathlib import Path

from linkstream.operators import mjoin as M
from tests.engine.lsbench_replay import lsbench as lsbench_module
from tests.engine.lsbench_replay import mixed_replay


def test_skipping_large_component_joins_writes_the_same(tmp_path: Path, monkeypatch) -> None:
    lsbench = lsbench_module()
    lsbench.generate(tmp_path, 300, 12, 1.0, 5, 3)
    joins = M.MJoinOperator._component_join
    calls: list[M.MJoinOperator] = []

    def spy(self, comp):
        calls.append(self)
        return joins(self, comp)

    monkeypatch.setattr(M.MJoinOperator, "_component_join", spy)
    digests = []
    for retry in (M.LARGE_RETRY, 0):  # 0: the component joined at every epoch
        monkeypatch.setattr(M, "LARGE_RETRY", retry)
        calls.clear()
        skipped = []
        digest, _ = mixed_replay(tmp_path)
        assert digest[2] > 1000
        for op in {id(j): j for j in calls}.values():
            skipped.extend(op.__dict__.get("_large_comps", {}).values())
        digests.append((*digest, len(calls)))
        if retry:
            assert skipped, "no component join was found too large"
    assert digests[0][:3] == digests[1][:3]
    assert digests[0][3] < digests[1][3]  # fewer component joins
