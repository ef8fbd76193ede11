"""LatestGraph's window delta and a router's shared aggregate cut the rows of the changed
triples / groups out of their sorted relations by key (``rows_of_keys``); with that turned
off (the join and hash lookups they used before) an LSBench mixed replay writes the same
bytes, and the cuts were taken."""

from __future__ import annotations

from pathlib import Path

from linkstream.operators import aggregate as A
from linkstream.operators import relation as REL
from tests.engine.lsbench_replay import lsbench as lsbench_module
from tests.engine.lsbench_replay import mixed_replay


def test_sorted_cuts_write_what_joins_and_hashes_write(tmp_path: Path, monkeypatch) -> None:
    lsbench = lsbench_module()
    lsbench.generate(tmp_path, 300, 12, 1.0, 5, 3)
    rows_of_keys = REL.rows_of_keys
    taken: list[int] = []

    def spy(cols, keys):
        got = rows_of_keys(cols, keys)
        taken.append(got is not None)
        return got

    digests = []
    for cut in (spy, lambda cols, keys: None):
        monkeypatch.setattr(REL, "rows_of_keys", cut)
        monkeypatch.setattr(A, "rows_of_keys", cut)
        taken.clear()
        digest, _ = mixed_replay(tmp_path)
        assert digest[2] > 1000
        digests.append(digest)
        if cut is spy:
            assert sum(taken) > 20, taken[:20]
    assert digests[0] == digests[1]
