"""LatestGraph's window delta and a router's shared aggregate cut the rows of the changed
triples / groups out of their sorted relations by key (``rows_of_keys``); with that turned
off (the join and hash lookups they used before) an LSBench mixed replay writes the same
bytes, and the cuts were taken."""

from __future__ import annotations

from pathlib import Path

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators import aggregate as A
from linkstream.operators import relation as REL
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.engine.lsbench_replay import HashSink
from tests.engine.lsbench_replay import lsbench as lsbench_module


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
        eng = Engine()
        eng.add_static(None, load_graph(str(tmp_path / "social.nt"), eng.dictionary))
        texts = lsbench.workload("mixed", 400, 300, "time", 3)
        rqs = [eng.register(parse_continuous(t, default_name=n)) for n, t in texts.items()]
        sink = HashSink()
        streams = [(lsbench.STREAMS[s], str(tmp_path / f"{s}.nq")) for s in lsbench.streams_of("mixed")]
        res = replay(eng, rqs, streams, sink)
        assert res.rows > 1000
        digests.append((sink.h.hexdigest(), sink.chars, res.rows))
        if cut is spy:
            assert sum(taken) > 20, taken[:20]
    assert digests[0] == digests[1]
