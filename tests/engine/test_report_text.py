"""The report time put into a whole report (engine/output.py ``timed_text``): in slices
through bytes for ASCII reports, ``str.replace`` otherwise; always the same text."""

from __future__ import annotations

import random

import numpy as np

from linkstream.engine import render
from linkstream.engine.embedded import Engine
from linkstream.engine.render import TIME_MARK, timed_text
from linkstream.query.continuous import parse_continuous

EX = "http://ex.org/"
S = EX + "s"


def test_timed_text_equals_str_replace_at_every_slice_boundary() -> None:
    n = render._SLICE
    line = '{"query": "q", "t": ' + TIME_MARK + ', "binding": {}}\n'
    texts = [
        "",
        TIME_MARK,
        line,
        line * (3 * n // len(line) + 7),  # several slices
        TIME_MARK * (2 * n + 1),  # marks on both sides of every boundary
        ("x" * (n - 1) + TIME_MARK) * 3,  # a mark last in each slice
        ("é" + line) * (n // len(line) + 2),  # not ASCII: str.replace
        line * 40 + "\udcff" + line * (n // len(line)),  # a surrogate escape (a stream file's bad byte)
    ]
    for text in texts:
        for t in ("1700000031000", "7", "-12", ""):
            assert timed_text(text, t) == text.replace(TIME_MARK, t), (len(text), t)


def _report_texts(grouped: bool, accent: str) -> tuple[list[tuple[int, str]], Engine]:
    eng = Engine()
    eng.group_keyed = grouped
    for i in range(300):  # 300 queries on 6 constants: reports of several slices each
        text = f"SELECT ?p ?o WHERE {{ STREAM <{S}> [RANGE 3s SLIDE 1s] {{ <{EX}u{i % 6}> ?p ?o }} }}"
        eng.register(parse_continuous(text, default_name=f"q{i:03d}"))
    rnd = random.Random(5)
    enc = eng.dictionary.encode
    got = []
    for step in range(8):
        rows = [
            [enc(f"<{EX}u{rnd.randrange(6)}>"), enc(f"<{EX}p{rnd.randrange(3)}>"), enc(f"<{EX}o{k}{accent}>")]
            for k in range(rnd.randrange(2, 9))
        ]
        eng.ingest(S, 1000 * step + 10, np.array(rows, dtype=np.int64))
        got.append(eng.tick(1000 * (step + 1), list(eng.queries), blocks=True).text())
    return got, eng


def test_long_grouped_reports_equal_the_per_query_path() -> None:
    for accent in ("", "é"):  # ASCII reports (through bytes) and others
        (got, eng), (want, ref) = _report_texts(True, accent), _report_texts(False, accent)
        assert got == want, accent
        assert len(eng._grouped) == 300 and not ref._grouped
        assert max(len(t) for _, t in got) > 3 * render._SLICE
        assert all(n == t.count("\n") and t.isascii() == (not accent) for n, t in got)
