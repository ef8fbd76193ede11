"""A replay of LSBench-shaped mixed queries (routed blocks over shared joins' routers)
writes the same bytes with the compiled code (the router's count merge ``rows_merge`` and
the routed members' blocks ``member_blocks``) as with the Python / numpy fallbacks."""

from __future__ import annotations

from pathlib import Path

import pytest

from linkstream.engine import render
from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators import batch as B
from linkstream.operators.relation import Relation
from linkstream.query.continuous import parse_continuous
from linkstream.rdf.static import load_graph
from tests.engine.lsbench_replay import HashSink
from tests.engine.lsbench_replay import lsbench as lsbench_module


@pytest.mark.skipif(B._kernels is None or not render.native(), reason="compiled code not built")
def test_mixed_replay_writes_the_same_bytes_compiled_or_not(tmp_path: Path, monkeypatch) -> None:
    lsbench = lsbench_module()
    lsbench.generate(tmp_path, 300, 12, 1.0, 5, 3)
    merged = []
    counted = Relation.counted_apply

    def spy(self, delta):
        merged.append(B._native is not None)
        return counted(self, delta)

    monkeypatch.setattr(Relation, "counted_apply", spy)
    digests = []
    try:
        for native in (True, False):
            B.use_native(native)
            render.use_native(native)
            eng = Engine()
            eng.add_static(None, load_graph(str(tmp_path / "social.nt"), eng.dictionary))
            texts = lsbench.workload("mixed", 400, 300, "time", 3)
            rqs = [eng.register(parse_continuous(t, default_name=n)) for n, t in texts.items()]
            assert eng._rgrouped, "no routed block members: the test would not reach the code"
            sink = HashSink()
            streams = [(lsbench.STREAMS[s], str(tmp_path / f"{s}.nq")) for s in lsbench.streams_of("mixed")]
            res = replay(eng, rqs, streams, sink)
            assert res.rows > 1000
            digests.append((sink.h.hexdigest(), sink.chars, res.rows))
    finally:
        B.use_native(True)
        render.use_native(True)
    assert digests[0] == digests[1]
    # the router's count merge ran with the compiled kernels and without them
    assert merged.count(True) > 0 and merged.count(False) > 0, merged[:10]
