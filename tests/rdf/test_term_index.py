"""The compiled term index of the memory dictionary (``platform/rdf/_termindex.c``) against
its Python fallback (a ``dict``, what an install without a C compiler runs): every operation
gives the same ids, the same terms and the same length.  (The N-Triples scanner filling the
index in place is compared with the Python parser filling the ``dict`` in test_ntfast.py.)"""

from __future__ import annotations

import random

import numpy as np
import pytest

from linkstream.rdf import dictionary as dictionary_module
from linkstream.rdf.dictionary import MemoryDictionary

pytestmark = pytest.mark.skipif(
    dictionary_module._TermIndex is None, reason="the compiled term index is not built (no C compiler)"
)

_PIECES = [
    "<http://ex.org/a>",
    "<http://ex.org/b>",
    '"x"',
    '"x"@en',
    '"1"^^<http://www.w3.org/2001/XMLSchema#integer>',
    "_:b1",
    '"caf\u00e9"',
    '"\U0001f600"',
    "\ud800",  # a lone surrogate: a str all the same
    "",
    "a\x00b",  # a NUL inside: texts are compared by length too
    "a",
    '"' + "long " * 300 + '"',
]


def _term(rnd: random.Random) -> str:
    if rnd.random() < 0.5:
        return rnd.choice(_PIECES)
    return f"<http://ex.org/{rnd.randrange(3000)}>" if rnd.random() < 0.8 else f'"{rnd.randrange(50)}\u00e9"'


def _same(a: MemoryDictionary, b: MemoryDictionary) -> None:
    assert len(a) == len(b)
    assert a._terms == b._terms


def test_every_operation_gives_the_same_ids() -> None:
    rnd = random.Random(7)
    c, p = MemoryDictionary(compiled=True), MemoryDictionary(compiled=False)
    assert c.compiled and not p.compiled
    for step in range(400):
        op = rnd.random()
        terms = [_term(rnd) for _ in range(rnd.randrange(0, 40))]
        if op < 0.45:
            got, want = c.encode_many(terms), p.encode_many(terms)
            assert got.dtype == want.dtype == np.int64 and got.tolist() == want.tolist(), step
            got[:] = 0  # (writable, as the dict path's array)
        elif op < 0.6:
            t = _term(rnd)
            assert c.encode(t) == p.encode(t)
        elif op < 0.8:
            assert c.lookup_many(terms).tolist() == p.lookup_many(terms).tolist()
        else:
            n = rnd.randrange(1, 5)
            first = c.reserve(n)
            assert p.reserve(n) == first
            fresh = [f"<urn:reserved:{step}:{k}>" for k in range(n - 1)] + [_term(rnd)]
            ids = np.arange(first, first + n)
            assert c.put_many(fresh, ids).tolist() == p.put_many(fresh, ids).tolist()
        _same(c, p)
    ids = np.arange(1, len(c._terms))
    known = [t for t in c._terms[1:] if t is not None]
    assert c.lookup_many(known).tolist() == p.lookup_many(known).tolist()
    assert 0 not in c.lookup_many(known).tolist()
    assert len(ids) > 1000


def test_growth_keeps_every_id() -> None:
    c, p = MemoryDictionary(compiled=True), MemoryDictionary(compiled=False)
    terms = [f"<http://ex.org/t{i}>" for i in range(150_000)]
    rnd = random.Random(3)
    for k in range(0, len(terms), 10_000):
        batch = terms[k : k + 10_000] + rnd.sample(terms[: k + 1], min(k + 1, 2_000))
        assert c.encode_many(batch).tolist() == p.encode_many(batch).tolist()
    assert c.lookup_many(terms).tolist() == list(range(1, len(terms) + 1))
    _same(c, p)
    assert c._index is not None and c._index.__sizeof__() > 150_000 * 16


def test_a_term_that_is_not_a_str_is_named() -> None:
    c = MemoryDictionary(compiled=True)
    with pytest.raises(TypeError, match="a term must be a str, not int"):
        c.encode_many(["<a>", 3])  # type: ignore[list-item]  # (the wrong type on purpose)
    assert c.lookup_many(["<a>"]).tolist() == [1] and len(c) == 1


def test_compiled_asked_for_where_it_is_not_built(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dictionary_module, "_TermIndex", None)
    with pytest.raises(RuntimeError, match="not built"):
        MemoryDictionary(compiled=True)
    assert not MemoryDictionary().compiled
