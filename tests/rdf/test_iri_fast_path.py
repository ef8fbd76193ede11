"""The fast IRI check of the readers accepts only what the full RFC 3987 grammar accepts."""

from __future__ import annotations

import random

from linkstream.query import lexer
from linkstream.rdf import ntriples


def test_simple_iris_are_valid_by_the_full_grammar(monkeypatch) -> None:
    rnd = random.Random(7)
    alpha = "abcXYZ019+.-:/@!$&'()*,;=_~?#%[]<> \\"
    heads = ["", "http://", "a://", "x+y-z.w://", "h://1.2.3.4", "h://[::1]", "urn:x"]
    corpus = [
        rnd.choice(heads) + "".join(rnd.choice(alpha) for _ in range(rnd.randrange(0, 25)))
        for _ in range(40000)
    ]
    corpus += ["http://lsbench.example/ev/123", "http://ex.org:8080/a/b;c=d/@x", "h://a..b/"]
    fast = [s for s in corpus if ntriples._SIMPLE_IRI.fullmatch(s)]
    assert len(fast) > 500  # the fast path is taken ...
    with_fast = [ntriples.iri_error(s) for s in corpus]
    # ... and gives what the full grammar gives, for every string
    monkeypatch.setattr(ntriples, "_SIMPLE_IRI", ntriples.re.compile(r"(?!)"))
    assert [ntriples.iri_error(s) for s in corpus] == with_fast
    assert all(ntriples.iri_error(s) is None for s in fast)
    # the query lexer takes the same fast path for IRI references: valid by its grammar too
    assert all(lexer._IRI_REF_ASCII_RE.fullmatch(s) for s in fast)
    assert all(lexer.iri_problem(s) is None for s in fast)
