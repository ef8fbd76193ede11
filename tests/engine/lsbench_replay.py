"""Helpers of the tests that replay LSBench-shaped data (``bench/lsbench.py``) and compare
output bytes: the generator module and a sink that hashes what is written."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Any


def lsbench() -> ModuleType:
    """``bench/lsbench.py`` as a module (the generator and the workloads)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        import lsbench as mod
    finally:
        sys.path.pop(0)
    return mod


class HashSink:
    """A text sink keeping the sha256 and the length of what is written."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()
        self.chars = 0

    def write(self, s: str) -> int:
        self.h.update(s.encode("utf-8"))
        self.chars += len(s)
        return len(s)


def mixed_replay(data: Path, queries: int = 400, users: int = 300) -> tuple[tuple[str, int, int], list[Any]]:
    """A replay of ``queries`` LSBench mixed queries (time windows) over the data generated
    in ``data`` (``lsbench().generate(data, users, ...)``): the output's (sha256, chars,
    rows) and the registered queries."""
    from linkstream.engine.embedded import Engine
    from linkstream.engine.replay import replay
    from linkstream.query.continuous import parse_continuous
    from linkstream.rdf.static import load_graph

    mod = lsbench()
    eng = Engine()
    eng.add_static(None, load_graph(str(data / "social.nt"), eng.dictionary))
    texts = mod.workload("mixed", queries, users, "time", 3)
    rqs = [eng.register(parse_continuous(t, default_name=n)) for n, t in texts.items()]
    sink = HashSink()
    streams = [(mod.STREAMS[s], str(data / f"{s}.nq")) for s in mod.streams_of("mixed")]
    res = replay(eng, rqs, streams, sink)
    return (sink.h.hexdigest(), sink.chars, res.rows), rqs
