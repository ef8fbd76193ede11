"""TermInfo reads a term only when one of its ids is first asked for: its arrays, asked for in
pieces while the dictionary grows, equal those of the per-term parse, and a term is decoded once."""

from __future__ import annotations

import numpy as np

from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.terminfo import TermInfo, numeric_code
from linkstream.rdf.terms import KIND_BNODE, KIND_IRI, KIND_LITERAL, XSD_BOOLEAN, Literal, parse_term

XSD = "http://www.w3.org/2001/XMLSchema#"


def _terms(n: int, tag: str) -> list[str]:
    out = []
    for i in range(n):
        out += [
            f"<http://example.org/{tag}{i}>",
            f"_:{tag}{i}",
            f'"{i}.5"^^<{XSD}double>',
            f'"{i}"^^<{XSD}integer>',
            f'"{tag}{i}"@en',
            f'"{"true" if i % 2 else "0"}"^^<{XSD}boolean>',
            f'"{i}\\u0031"^^<{XSD}integer>',
        ]
    return out


class CountingDictionary(MemoryDictionary):
    def __init__(self) -> None:
        super().__init__()
        self.decoded: list[int] = []

    def decode_many(self, ids):  # type: ignore[no-untyped-def]
        self.decoded += np.asarray(ids).tolist()
        return super().decode_many(ids)


def _check(info: TermInfo, ids: np.ndarray, terms: list[str]) -> None:
    for i, s in zip(ids.tolist(), terms):
        t = parse_term(s)
        kind = KIND_IRI if s[0] == "<" else KIND_BNODE if s[0] == "_" else KIND_LITERAL
        code, v = numeric_code(t)
        b = -1
        if isinstance(t, Literal) and t.datatype == XSD_BOOLEAN:
            b = 1 if t.lex in ("true", "1") else 0 if t.lex in ("false", "0") else -1
        assert (info.kind[i], info.num_type[i], info.num_val[i], info.bool_val[i]) == (kind, code, v, b), s


def test_read_on_demand_equals_the_parse() -> None:
    d = CountingDictionary()
    first = _terms(30, "a")
    ids = d.encode_many(first)
    info = TermInfo(d)
    part = ids[::4]
    info.ensure(np.concatenate([part, part, [0]]))  # repeated ids and the unbound 0
    assert sorted(d.decoded) == sorted(set(part.tolist()))  # only the ids asked for, once
    _check(info, part, first[::4])
    assert info.size > int(ids.max())  # the arrays cover the dictionary
    unread = np.setdiff1d(ids, part)
    assert not info.kind[unread].any()  # not read yet
    d.decoded.clear()
    info.ensure(part)  # all known: nothing decoded
    assert d.decoded == []
    info.ensure(ids)
    assert sorted(d.decoded) == sorted(unread.tolist())
    _check(info, ids, first)
    # the dictionary grows after the arrays did: new ids beyond them and within them
    more = _terms(10, "b")  # (its numeric and boolean literals are also in ``first``)
    ids2 = d.encode_many(more)
    fresh = sorted(set(ids2.tolist()) - set(ids.tolist()))
    assert fresh and len(fresh) < len(set(ids2.tolist()))
    d.decoded.clear()
    info.ensure(ids2[5:9])
    _check(info, ids2[5:9], more[5:9])
    info.ensure(ids2)
    _check(info, ids2, more)
    _check(info, ids, first)
    assert sorted(d.decoded) == fresh
    assert info.num_type[ids2].any() and (info.bool_val[ids2] >= 0).any()


def test_truncate_forgets_the_ids_beyond() -> None:
    d = CountingDictionary()
    terms = _terms(5, "c")
    ids = d.encode_many(terms)
    info = TermInfo(d)
    info.ensure(ids)
    keep = int(ids[10])
    info.truncate(keep)
    assert info.size == keep
    d.decoded.clear()
    info.ensure(ids)  # the forgotten ids are read again, the kept ones not
    assert sorted(d.decoded) == sorted({i for i in ids.tolist() if i >= keep})
    _check(info, ids, terms)
