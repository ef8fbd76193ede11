"""The tokenizer: its fast path (``findall`` + kind by first character) gives the tokens
of the reference regex, alternative by alternative, and every token's offsets."""

from __future__ import annotations

import re
import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.query import lexer as L
from linkstream.query.errors import QueryError

#: The reference regex: the named alternatives the fast path must reproduce.
_TOKEN_RE = re.compile(L._TOKEN_PATTERN, re.VERBOSE | re.DOTALL)


def _reference(text: str) -> list[tuple[str, str, int, int]]:
    return [(m.lastgroup or "punct", m.group(), m.start(), m.end()) for m in _TOKEN_RE.finditer(text)]


def test_kind_by_first_character_is_the_regex_alternative():
    chars = [chr(c) for c in range(0x10000)] + [chr(c) for c in range(0x10000, sys.maxunicode, 997)]
    for ch in chars:
        want = _TOKEN_RE.match(ch).lastgroup
        got = L._kind_of(ch)
        assert (got if got != "?" else "punct") == want, repr(ch)
        assert L._FIRST_KIND.get(ch, got) == got


ALPHABET = st.sampled_from(
    list(" \t\r\n#<>'\"?$:._-%\\{}()[];,=!^|@aAzZ09éθ·\u2028\u3000\u00a0\x85\x01\x7f")
    + ["'''", '"""', "\\u0041"]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(ALPHABET, max_size=40).map("".join))
def test_tokens_equal_the_reference_regex(text: str):
    try:
        toks = L.tokenize(text)
    except QueryError as e:
        assert e.line is not None and e.column is not None  # errors stay located
        return
    assert [(t.kind, t.text, t.start, t.end) for t in toks] == _reference(text)
    assert all(t.key == (t.text.upper() if t.kind == "word" and ":" not in t.text else "") for t in toks)


def test_a_query_tokenizes_as_before():
    text = "PREFIX ex: <http://ex.org/>\nSELECT ?s # note\nWHERE { ?s ex:p 'x'@en, 1.5e3 }"
    toks = L.tokenize(text)
    assert [(t.kind, t.text, t.start, t.end) for t in toks] == _reference(text)
    assert [t.text for t in toks if t.kind not in ("ws",)][:6] == [
        "PREFIX",
        "ex:",
        "<http://ex.org/>",
        "SELECT",
        "?s",
        "# note",
    ]


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from([chr(c) for c in range(128)] + ["'''", '"""', "\\u0041", "<a:b>"]), max_size=40
    ).map("".join)
)
def test_ascii_splitter_splits_ascii_text_as_the_full_one(text: str):
    """The ASCII splitter (compiled at import) and the full one (compiled on the first
    non-ASCII query) give the same tokens for every ASCII text."""
    assert L._split_re(text) is L._SPLIT_ASCII_RE
    assert L._SPLIT_ASCII_RE.findall(text) == L._split_unicode_re().findall(text)


def test_non_ascii_text_uses_the_full_splitter():
    assert L._split_re("SELECT ?é WHERE {}") is L._split_unicode_re()
    assert [t.text for t in L.tokenize("?é ?a·b")] == ["?é", " ", "?a·b"]
