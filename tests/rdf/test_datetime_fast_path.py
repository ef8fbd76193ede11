"""The stream reader's fast path for ``YYYY-MM-DDThh:mm:ss[.f]Z`` timestamps gives what the
oracle's full expression gives (a value or the same error), for every string."""

from __future__ import annotations

import random

from linkstream.rdf import streams


def _outcome(fn, lex: str) -> int | str:
    try:
        return fn(lex)
    except ValueError as e:
        return "error: " + str(e)


def test_fast_datetimes_equal_the_full_parse() -> None:
    rnd = random.Random(3)
    corpus = []
    for _ in range(30000):
        parts = [
            rnd.choice(["2023", "0000", "9999", "1970", "2024", "0001", "12345", "-2023"]),
            rnd.choice(["01", "02", "12", "13", "00"]),
            rnd.choice(["01", "28", "29", "30", "31", "32"]),
            rnd.choice(["00", "23", "24", "12", "25"]),
            rnd.choice(["00", "59", "60", "30"]),
            rnd.choice(["00", "59", "60", "61", "07"]),
        ]
        lex = "%s-%s-%sT%s:%s:%s" % tuple(parts)
        lex += rnd.choice(["", ".1", ".12", ".123", ".1234", ".", ".9999999"])
        lex += rnd.choice(["Z", "", "+01:00", "Z ", " Z", "z", "Z\n"])
        if rnd.random() < 0.05:
            lex = lex.replace("1", "\u0661")  # a non-ASCII digit: \d of the full expression
        corpus.append(lex)
    corpus += ["2023-11-14T22:13:20.023Z", "2024-02-29T24:00:00Z", "2023-02-29T10:00:00Z"]
    streams._MINUTES.clear()
    full = [_outcome(streams._parse_datetime_ms, lex) for lex in corpus]
    fast = [_outcome(streams.parse_datetime_ms, lex) for lex in corpus]
    assert fast == full
    assert sum(isinstance(x, int) for x in full) > 1000  # valid ones are common ...
    assert len(streams._MINUTES) > 100  # ... and went through the fast path
    assert streams.parse_datetime_ms("2023-11-14T22:13:20.023Z") == 1_700_000_000_023
