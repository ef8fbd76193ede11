"""The compiled report renderer (platform/engine/_render.c, wrapped by engine/render.py)
and its Python fallback write the same text: on reports of grouped pattern queries over
terms of every kind (IRIs, blank nodes, literals with escapes, language tags, datatypes,
non-ASCII text) and on replayed LSBench-shaped data."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from linkstream.engine import render
from linkstream.engine.embedded import Engine
from linkstream.engine.render import TIME_MARK
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous
from tests.engine.lsbench_replay import HashSink
from tests.engine.lsbench_replay import lsbench as lsbench_module

EX = "http://ex.org/"
S = EX + "s"
XSD = "http://www.w3.org/2001/XMLSchema#"

#: objects of every kind: the JSON of some needs escapes, some is not ASCII
OBJECTS = [
    f"<{EX}o1>",
    "_:b1",
    '"plain"',
    '"quote \\" back\\\\slash tab\\t nl\\n"',
    '"chat"@fr',
    '"colour"@en-GB',
    f'"42"^^<{XSD}integer>',
    f'"2023-11-14T22:13:20Z"^^<{XSD}dateTime>',
    '"ctrl \\u0001 end"',
]
NON_ASCII = ['"caf\\u00E9"', '"日本語"@ja', f"<{EX}ñ>"]


@pytest.fixture
def both() -> Iterator[None]:
    assert render.native(), "the compiled renderer is not built (make venv)"
    yield
    render.use_native(True)


def _reports(native: bool, objects: list[str]) -> list[tuple[int, str]]:
    render.use_native(native)
    eng = Engine()
    for i in range(120):  # 120 queries on 5 constants: grouped, several lines per key
        text = f"SELECT ?p ?o WHERE {{ STREAM <{S}> [RANGE 3s SLIDE 1s] {{ <{EX}u{i % 5}> ?p ?o }} }}"
        eng.register(parse_continuous(text, default_name=f"q{i:03d}"))
    assert eng._grouped
    rnd = random.Random(11)
    enc = eng.dictionary.encode
    got = []
    for step in range(10):
        rows = []
        for _ in range(rnd.randrange(3, 12)):
            row = [
                enc(f"<{EX}u{rnd.randrange(5)}>"),
                enc(f"<{EX}p{rnd.randrange(2)}>"),
                enc(rnd.choice(objects)),
            ]
            rows += [row] * rnd.choice((1, 1, 2))  # a bag: a row repeated in the window
        eng.ingest(S, 1000 * step + 10, np.array(rows, dtype=np.int64))
        got.append(eng.tick(1000 * (step + 1), list(eng.queries), blocks=True).text())
    return got


@pytest.mark.parametrize("extra", [[], NON_ASCII], ids=["ascii", "non-ascii"])
def test_compiled_and_python_reports_are_the_same_text(both: None, extra: list[str]) -> None:
    objects = OBJECTS + extra
    fast, slow = _reports(True, objects), _reports(False, objects)
    assert fast == slow
    text = "".join(t for _, t in fast)
    assert '\\"' in text and "@fr" in text and "^^" in text and "_:b1" in text and "\\u0001" in text
    assert text.isascii() == (not extra)
    assert sum(n for n, _ in fast) == text.count("\n") > 1000


def test_join_timed_blocks_and_put_equal_the_python_code(both: None) -> None:
    parts = ["", TIME_MARK, 'a {"t": ' + TIME_MARK + "}\n", TIME_MARK * 3, "x" * 40000 + TIME_MARK]
    # marks denser than the compiled join sizes its text for at first (it grows the text
    # while copying), and marks only (a text shorter than its parts when ``t`` is empty)
    dense = ["ab" + TIME_MARK * 5000, "c", TIME_MARK + "d" * 70, TIME_MARK * 300]
    for ps in (parts, dense):
        for t in ("1700000031000", "", "7"):
            want = "".join(ps).replace(TIME_MARK, t)
            assert render.join_timed(ps, t) == want
            render.use_native(False)
            assert render.join_timed(ps, t) == want
            render.use_native(True)
    assert render._native is not None
    assert render._native.join_timed(["é"], "1") is None  # not ASCII: the Python path
    heads, lines, bodies = ["h" + TIME_MARK + ":", "", "k:"], [2, 0, 1], ["a", "b", "c"]
    assert render.member_blocks(heads, lines, bodies) == ["h\x00:a\nh\x00:b\n", "", "k:c\n"]
    with pytest.raises(ValueError):
        render.member_blocks(heads, [2, 0, 2], bodies)
    target = ["a", "b", "c"]
    render.put(target, [2, 0], ["C", "A"])
    assert target == ["A", "b", "C"]
    render.use_native(False)
    assert render.member_blocks(heads, lines, bodies) is None


def test_lsbench_replay_writes_the_same_bytes(both: None, tmp_path: Path) -> None:
    lsbench = lsbench_module()
    lsbench.generate(tmp_path, 300, 12, 1.0, 5, 3)
    digests = []
    for native in (True, False):
        render.use_native(native)
        eng = Engine()
        texts = lsbench.workload("q1", 400, 300, "time", 3)
        rqs = [eng.register(parse_continuous(t, default_name=n)) for n, t in texts.items()]
        sink = HashSink()
        res = replay(eng, rqs, [(lsbench.STREAMS["posts"], str(tmp_path / "posts.nq"))], sink)
        assert res.rows > 1000
        digests.append((sink.h.hexdigest(), sink.chars, res.rows))
    assert digests[0] == digests[1]
