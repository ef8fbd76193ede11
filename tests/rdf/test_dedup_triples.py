"""The two triple deduplications (a static file's rows in first-seen order; a graph's
static rows sorted) equal ``np.unique(axis=0)`` on packable ids (below 2**21, one int64
key per row) and on ids too large to pack, and an ASCII blank-node label is read by
the ASCII expression exactly as by the full one."""

from __future__ import annotations

import re

import numpy as np
import pytest

from linkstream.operators.graph import dedup_triples as sorted_unique
from linkstream.rdf import ntriples as N
from linkstream.rdf.static import dedup_triples as first_seen_unique


@pytest.mark.parametrize(
    ("n", "high"),
    [(0, 1), (1, 5), (2, 2), (50, 3), (5000, 40), (20000, 1 << 21), (3000, (1 << 21) + 2), (500, 1 << 40)],
)
def test_dedups_equal_numpy_unique(n: int, high: int) -> None:
    rng = np.random.default_rng(n + high)
    a = rng.integers(max(0, high - 60) if high > 1000 else 0, high, (n, 3), dtype=np.int64)
    if n > 10:
        a[n // 2 :] = a[: n - n // 2]  # repeats for sure
    want_sorted = np.unique(a, axis=0) if n else a.reshape(0, 3)
    got = sorted_unique(a)
    assert got.dtype == np.int64 and got.flags.c_contiguous
    assert np.array_equal(got, want_sorted)
    if n:
        _, first = np.unique(a, axis=0, return_index=True)
        assert np.array_equal(first_seen_unique(a), a[np.sort(first)])


def test_ascii_blank_node_labels_read_as_with_the_full_expression() -> None:
    full = re.compile(N._LABEL)
    rng = np.random.default_rng(7)
    alphabet = [chr(c) for c in range(128)] + list("ab_-.9")
    for _ in range(20000):
        text = "".join(alphabet[k] for k in rng.integers(0, len(alphabet), rng.integers(0, 7)))
        assert bool(full.fullmatch(text)) == bool(N._ASCII_LABEL_RE.fullmatch(text)), repr(text)
        m1, m2 = full.match(text), N._ASCII_LABEL_RE.match(text)
        assert (m1 and m1.end()) == (m2 and m2.end()), repr(text)
    parser = N.parser_for("p_")
    assert parser.parse_line("_:a.b-1 <http://x.org/p> _:é .") == (
        "_:p_a.b-1",
        "<http://x.org/p>",
        "_:p_é",
        None,
    )
    with pytest.raises(N.NTriplesError):
        parser.parse_line("_:a. <http://x.org/p> <http://x.org/o> .")


def test_a_cached_blank_node_is_still_no_predicate(tmp_path) -> None:
    """Blank-node tokens are cached apart from IRIs: once seen as a subject, a label is
    still rejected as a predicate; statements and rejections keep their lines."""
    from linkstream.rdf.dictionary import open_dictionary
    from linkstream.rdf.static import load_graph

    parser = N.parser_for("k_")
    assert parser.parse_line("_:b1 <http://x.org/p> _:b2 .") == ("_:k_b1", "<http://x.org/p>", "_:k_b2", None)
    with pytest.raises(N.NTriplesError):
        parser.parse_line("<http://x.org/s> _:b1 <http://x.org/o> .")
    f = tmp_path / "g.nt"
    f.write_text(
        "_:b1 <http://x.org/p> _:b2 .\n<http://x.org/s> _:b1 <http://x.org/o> .\n# c\n"
        "_:b2 <http://x.org/p> _:b1 .\r_:b1 <http://x.org/p> _:b1 .\n"
    )
    d = open_dictionary("memory:")
    logs: list[str] = []
    ids = load_graph(str(f), d, bnode_prefix="k_", log=logs.append)
    assert [tuple(d.decode_many(row)) for row in ids.tolist()] == [
        ("_:k_b1", "<http://x.org/p>", "_:k_b2"),
        ("_:k_b2", "<http://x.org/p>", "_:k_b1"),
        ("_:k_b1", "<http://x.org/p>", "_:k_b1"),
    ]
    assert len(logs) == 1 and logs[0].startswith(f"{f}:2: rejected: ")
