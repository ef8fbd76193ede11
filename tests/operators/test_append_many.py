"""StreamBuffer.append_many (several elements of one stream in one copy, as a replay
ingests the elements that arrive between two report times) leaves the buffer exactly as
one append per element does, across growth of both arrays and with empty elements."""

from __future__ import annotations

import random

import numpy as np

from linkstream.operators.window import StreamBuffer


def _state(b: StreamBuffer) -> tuple:
    tr, t = b.slice_timed(b.base, b.end)
    ets = [b.latest_element_before(c) for c in range(0, 3000, 7)]
    return (b.base, b.n, b.watermark, tr.tolist(), t.tolist(), b._et[: b._ne].tolist(), ets)


def test_append_many_equals_one_append_per_element() -> None:
    rnd = random.Random(4)
    one, many = StreamBuffer("urn:s"), StreamBuffer("urn:s")
    t = 0
    for _ in range(60):
        ts, parts = [], []
        for _ in range(rnd.randrange(1, 40)):  # past 256 elements and 1,024 triples: both grow
            t += rnd.randrange(0, 5)
            late = t - rnd.randrange(0, 3)  # out of order too (allowed lateness)
            k = rnd.choice([0, 0, 1, 2, 5, 30])
            tr = np.array([[rnd.randrange(9) for _ in range(3)] for _ in range(k)], dtype=np.int64).reshape(
                -1, 3
            )
            ts.append(late)
            parts.append(tr)
            one.append(late, tr)
        many.append_many(ts, parts)
        assert _state(one) == _state(many)
    assert one.n > 1024 and one._ne > 256
