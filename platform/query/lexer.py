"""Tokens of a continuous query, with their offsets, and the token-level rewrite.

The token grammar is the reference evaluator's (``shared/tools/oracle.py``): keywords are
recognised only as bare words (case-insensitive), never inside IRIs, strings, variable
names or prefixed names (two refinements: IRIs may hold ``\\u`` escapes, and a comment
also ends at a carriage return, as in SPARQL).  On top of it this module rejects, at their exact position, the
characters that can never start a SPARQL token (control characters, undecodable bytes,
non-SPARQL white space, unterminated strings, ``\\u`` escapes outside strings and IRIs)
and checks escape sequences and IRIs the way the reference evaluator (Oxigraph) does.
:class:`TokenStream` rewrites a query token by token and maps offsets of the rewritten
text back to the original, so that errors found later still name the original position.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Callable, Collection
from typing import NamedTuple, NoReturn

from linkstream.query.errors import QueryError
from linkstream.rdf.lazyre import lazy
from linkstream.rdf.ntriples import is_simple_iri

_TOKEN_PATTERN = r"""
  (?P<ws>\s+)
| (?P<comment>\#[^\n\r]*)
| (?P<iri><(?:[^<>"{}|^`\\\x00-\x20]|\\u[0-9A-Fa-f]{4}|\\U[0-9A-Fa-f]{8})*>)
| (?P<string>'''(?:[^'\\]|\\.|'(?!''))*'''|\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"|'(?:[^'\\\n\r]|\\.)*'|"(?:[^"\\\n\r]|\\.)*")
| (?P<var>[?$][A-Za-z0-9_\u00B7\u00C0-\uFFFF]+)
| (?P<word>[A-Za-z0-9_:\u00C0-\uFFFF](?:(?:[A-Za-z0-9_:%\-.\u00B7\u00C0-\uFFFF]|\\[_~.\-!$&'()*+,;=/?\#@%])*(?:[A-Za-z0-9_:%\-\u00B7\u00C0-\uFFFF]|\\[_~.\-!$&'()*+,;=/?\#@%]))?)
| (?P<punct>.)
"""

#: :data:`_TOKEN_PATTERN` without groups: ``findall`` then returns the token texts alone, and
#: the kind of a token follows from its first character (and its length), see
#: :func:`_kind_of`; no match objects are made for the millions of tokens of thousands
#: of registered queries.
#: (The named pattern itself is documentation: compiling it too cost 7 ms of every start-up.)
_SPLIT_PATTERN = "(?:".join(  # (no re.sub: the package compiles no expression at import)
    part.split(">", 1)[1] if k else part for k, part in enumerate(_TOKEN_PATTERN.split("(?P<"))
)
#: The same for ASCII text: without its non-ASCII ranges (which match nothing in ASCII text,
#: so the tokens are the same) it compiles in 0.4 ms instead of 10 ms; the full pattern is
#: compiled only when a query holds a non-ASCII character (:func:`_split_re`).
#: Not ``re.ASCII``: that would narrow ``\s``, which also matches ``\x1c``-``\x1f``.
_SPLIT_ASCII_RE = lazy(
    _SPLIT_PATTERN.replace(r"\u00B7\u00C0-\uFFFF", "").replace(r"\u00C0-\uFFFF", ""),
    re.VERBOSE | re.DOTALL,
)


@functools.cache
def _split_unicode_re() -> re.Pattern[str]:
    return re.compile(_SPLIT_PATTERN, re.VERBOSE | re.DOTALL)


def _split_re(text: str) -> re.Pattern[str]:
    """The token splitter for ``text``: the ASCII one when ``text`` is ASCII."""
    return _SPLIT_ASCII_RE if text.isascii() else _split_unicode_re()


#: Kinds that a token of length > 1 has instead of ``punct``, by first character.
_LONG_KIND = {"<": "iri", "'": "string", '"': "string", "?": "var", "$": "var"}


def _kind_of(ch: str) -> str:
    """The kind of the tokens that start with ``ch`` (``"?"``: see :data:`_LONG_KIND`).

    The alternatives of :data:`_TOKEN_PATTERN` are tried in order: white space (``\\s``, which
    is :meth:`str.isspace`), then a comment (``#``), an IRI (``<``), a string (a quote) or
    a variable (``?``, ``$``), each longer than one character or else punctuation, then a
    word (its first-character class), and punctuation for any other character.
    """
    if ch.isspace():
        return "ws"
    if ch == "#":
        return "comment"
    if ch in _LONG_KIND:
        return "?"
    if ch.isascii():
        return "word" if (ch.isalnum() or ch in "_:") else "punct"
    return "word" if "\u00c0" <= ch <= "\uffff" else "punct"


_FIRST_KIND = {chr(c): _kind_of(chr(c)) for c in range(128)}
_SPARQL_WS = frozenset(" \t\r\n")
_INSIGNIFICANT = frozenset(("ws", "comment"))
#: Punctuation that needs no check (see :func:`_check_punct`).
_PLAIN_PUNCT = frozenset("{}()[].,;*+-/<>=!&|^?@")
_SURROGATE_RE = lazy("[\ud800-\udfff]")
_ECHAR = frozenset("tbnrf\"'\\")
_ESCAPE_RE = lazy(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8}))")
_STRING_ESCAPE_RE = lazy(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))", re.DOTALL)
_AGGREGATE_WORDS = frozenset(("COUNT", "SUM", "MIN", "MAX", "AVG", "SAMPLE", "GROUP_CONCAT"))
_IRIREF_FORBIDDEN = frozenset('<>"{}|^`\\')
#: The characters a backslash may escape in the local part of a prefixed name (PN_LOCAL_ESC).
_PN_LOCAL_ESC = frozenset("_~.-!$&'()*+,;=/?#@%")
_PN_LOCAL_ESC_RE = lazy(r"\\([_~.\-!$&'()*+,;=/?#@%])")
#: Characters a string escape must keep escaped when it is decoded for the SPARQL parser.
_KEEP_ESCAPED = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}


class Token(NamedTuple):
    """One lexical token (an immutable tuple: thousands of queries make millions of them).

    Attributes:
        kind: ``ws``, ``comment``, ``iri``, ``string``, ``var``, ``word`` or ``punct``.
        text: The token's source text.
        start: Offset of its first character in the query text.
        end: Offset just after its last character.
        key: The upper-cased text of a bare word (a possible keyword), else ``""``.
    """

    kind: str
    text: str
    start: int
    end: int
    key: str = ""

    def kw(self, *words: str) -> bool:
        """True if this token is one of the bare keywords ``words`` (upper case), any case."""
        return bool(self.key) and self.key in words

    @property
    def significant(self) -> bool:
        """False for white space and comments."""
        return self.kind not in ("ws", "comment")

    def is_punct(self, char: str) -> bool:
        """True if this token is the punctuation character ``char``."""
        return self.kind == "punct" and self.text == char


class LineIndex:
    """Maps character offsets of a text to 1-based (line, column) pairs."""

    def __init__(self, text: str) -> None:
        self._starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self._length = len(text)

    def line_col(self, offset: int) -> tuple[int, int]:
        """Returns the 1-based (line, column) of ``offset`` (clamped to the text)."""
        offset = max(0, min(offset, self._length))
        line = bisect.bisect_right(self._starts, offset) - 1
        return line + 1, offset - self._starts[line] + 1


def _describe_char(ch: str) -> str:
    if 0xDC80 <= ord(ch) <= 0xDCFF:
        return "invalid UTF-8 byte 0x%02X" % (ord(ch) - 0xDC00)
    if 0xD800 <= ord(ch) <= 0xDFFF:
        return "unpaired surrogate U+%04X" % ord(ch)
    return "invalid character U+%04X" % ord(ch)


def _bad_char(ch: str) -> bool:
    code = ord(ch)
    return (code < 0x20 and ch not in _SPARQL_WS) or 0x7F <= code <= 0x9F or 0xD800 <= code <= 0xDFFF


def tokenize(text: str) -> list[Token]:
    """Splits ``text`` into tokens (white space and comments included).

    Args:
        text: The query text.

    Returns:
        The tokens, covering ``text`` without gaps.

    Raises:
        QueryError: At the first character that cannot occur in a query outside strings
            (the error's ``column`` is filled in, ``line`` too), so that binary input
            fails fast.
    """
    tokens: list[Token] = []
    surrogate = _SURROGATE_RE.search(text)
    first_surrogate = surrogate.start() if surrogate else len(text)
    new = tuple.__new__
    append = tokens.append
    # the alternatives cover every character (``punct`` matches any), so the matches of
    # findall are contiguous; words and plain punctuation (most tokens) need no check
    first_kind = _FIRST_KIND.get
    end = 0
    for tok_text in _split_re(text).findall(text):
        start = end
        end = start + len(tok_text)
        ch = tok_text[0]
        kind = first_kind(ch) or _kind_of(ch)
        if kind == "?":
            kind = _LONG_KIND[ch] if end - start > 1 else "punct"
        if end > first_surrogate and kind != "ws":
            raise _error(LineIndex(text), first_surrogate, _describe_char(text[first_surrogate]))
        if kind == "word":
            append(new(Token, (kind, tok_text, start, end, "" if ":" in tok_text else tok_text.upper())))
            continue
        if kind == "ws":
            if tok_text != " " and tok_text.strip(" \t\r\n"):
                k = next(k for k, ch in enumerate(tok_text) if ch not in _SPARQL_WS)
                ch = tok_text[k]
                what = _describe_char(ch) if _bad_char(ch) else "white space U+%04X" % ord(ch)
                raise _error(LineIndex(text), start + k, "%s is not allowed here" % what)
        elif kind == "punct":
            if tok_text in _PLAIN_PUNCT:
                append(new(Token, ("punct", tok_text, start, end, "")))
                continue
            _check_punct(text, LineIndex(text), tok_text, start)
        elif kind == "string" and "\\" in tok_text:
            _check_string_escapes(LineIndex(text), tok_text, start)
        elif kind == "iri" and "\\" in tok_text:
            _check_iri_escapes(LineIndex(text), tok_text, start)
        append(new(Token, (kind, tok_text, start, end, "")))
    return tokens


def _error(index: LineIndex, offset: int, message: str) -> QueryError:
    line, col = index.line_col(offset)
    return QueryError(message, line, col)


def _check_punct(text: str, index: LineIndex, ch: str, start: int) -> None:
    if _bad_char(ch):
        raise _error(index, start, "%s is not allowed here" % _describe_char(ch))
    if ch in ("'", '"'):
        raise _error(index, start, "unterminated string literal")
    if ch == "\\" and text.startswith(("\\u", "\\U"), start):
        raise _error(index, start, "\\u escape sequences are only allowed in strings and IRIs")
    if ch == "\\" and text[start + 1 : start + 2] not in _PN_LOCAL_ESC:
        # never valid outside a string: e.g. an IRI <http://x/\q>, which then lexes as '<' ...
        raise _error(
            index,
            start,
            "invalid escape '%s': a backslash is only allowed in strings, as "
            "\\uXXXX in IRIs and before punctuation in prefixed names" % text[start : start + 2],
        )


def _escape_value(body: str, k: int) -> tuple[int | None, int]:
    """Decodes the ``\\u``/``\\U`` escape at ``body[k]``; returns (code point or None, length)."""
    m = _ESCAPE_RE.match(body, k)
    if m is None:
        return None, 2
    code = int(m.group(1) or m.group(2), 16)
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return None, m.end() - k
    return code, m.end() - k


def _check_string_escapes(index: LineIndex, tok_text: str, start: int) -> None:
    k = tok_text.find("\\")
    while k >= 0:
        nxt = tok_text[k + 1 : k + 2]
        if nxt in ("u", "U"):
            code, length = _escape_value(tok_text, k)
            if code is None:
                raise _error(index, start + k, "invalid \\%s escape sequence in string" % nxt)
            k = tok_text.find("\\", k + length)
        elif nxt in _ECHAR:
            k = tok_text.find("\\", k + 2)
        else:
            raise _error(index, start + k, "invalid escape sequence '\\%s' in string" % nxt)


def _check_iri_escapes(index: LineIndex, tok_text: str, start: int) -> None:
    for m in _ESCAPE_RE.finditer(tok_text):
        code, _ = _escape_value(tok_text, m.start())
        if code is None or chr(code) in _IRIREF_FORBIDDEN or code <= 0x20:
            raise _error(index, start + m.start(), "escape sequence %s is not allowed in an IRI" % m.group())


def decode_escapes(tok: Token) -> str:
    """Returns the token text with ``\\u``/``\\U`` escapes decoded for the SPARQL parser.

    In strings a decoded backslash, line break or delimiting quote stays escaped (``\\\\``,
    ``\\n``, ``\\'``), so that the literal's value is the escaped code point, as in
    Oxigraph; the other quote is written bare, also when escaped in the source (rdflib only
    accepts an escaped quote of the delimiting kind).  Other tokens are returned unchanged.

    Args:
        tok: A token that passed :func:`tokenize`.

    Returns:
        The text to give to the SPARQL parser for this token.
    """
    if tok.kind not in ("string", "iri") or "\\" not in tok.text:
        return tok.text
    if tok.kind == "iri":
        return _ESCAPE_RE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), tok.text)
    delimiter = tok.text[0]

    def repl(m: re.Match[str]) -> str:
        if m.group(3) is not None:  # an ECHAR; an escaped backslash never starts a \u sequence
            return m.group(3) if m.group(3) in "'\"" and m.group(3) != delimiter else m.group()
        ch = chr(int(m.group(1) or m.group(2), 16))
        if ch in "'\"":
            return "\\" + ch if ch == delimiter else ch
        return _KEEP_ESCAPED.get(ch, ch)

    return _STRING_ESCAPE_RE.sub(repl, tok.text)


# --------------------------------------------------------------------------- token streams

#: ``(rewritten start, original start, length)`` per piece of a rewritten text; length
#: ``-1`` marks inserted text, which maps to the start of the token it replaced.
OffsetMap = tuple[tuple[int, int, int], ...]
#: A rewritten stretch of a text: ``(start, end, new text)``.
Span = tuple[int, int, str]


def unescape_local(local: str) -> str:
    """The local part of a prefixed name with its PN_LOCAL_ESC escapes removed (SPARQL 1.1
    §19.8: ``ex:a\\.b`` names ``…a.b``); ``%XX`` stays as written."""
    return _PN_LOCAL_ESC_RE.sub(r"\1", local) if "\\" in local else local


def quote(text: str) -> str:
    """Quotes a token for an error message (shortened, escaped, single line)."""
    text = text if len(text) <= 40 else text[:37] + "..."
    return "'%s'" % text.encode("unicode_escape").decode("ascii").replace("'", "\\'")


def map_offset(pieces: OffsetMap, offset: int, text_length: int) -> int:
    """Maps an offset of a rewritten text back to the original text.

    Args:
        pieces: The rewritten text's offset map (see :data:`OffsetMap`), ending with a
            ``(rewritten length, text_length, 0)`` sentinel.
        offset: The offset in the rewritten text.
        text_length: Length of the original text.

    Returns:
        The offset in the original text (``text_length`` past the end).
    """
    if not pieces or offset >= pieces[-1][0]:
        return text_length
    k = max(0, bisect.bisect_right(pieces, (offset, float("inf"), 0)) - 1)
    out_start, src_start, length = pieces[k]
    return src_start if length < 0 else src_start + min(offset - out_start, length)


class TokenStream:
    """A tokenized query that is navigated by significant token and rewritten token by token.

    Indices called ``j`` count significant tokens (no white space, no comments);
    ``self.sig[j]`` is the index of that token in ``self.toks``.  Comments are blanked in
    the rewrite from the start.

    Args:
        text: The query text.

    Raises:
        QueryError: If the text does not tokenize (see :func:`tokenize`).
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.index = LineIndex(text)
        self.toks = tokenize(text)
        self.sig = [i for i, t in enumerate(self.toks) if t.kind not in _INSIGNIFICANT]
        self.repl: dict[int, str] = {}
        if "#" in text:  # a comment starts with '#'
            self.repl = {i: " " * len(t.text) for i, t in enumerate(self.toks) if t.kind == "comment"}

    def tok(self, j: int | None) -> Token | None:
        """The ``j``-th significant token, or ``None`` past the end."""
        return self.toks[self.sig[j]] if j is not None and 0 <= j < len(self.sig) else None

    def fail(self, message: str, at: Token | int | None) -> NoReturn:
        """Raises a QueryError at a token, at a text offset, or (``None``) at the end."""
        offset = len(self.text) if at is None else at if isinstance(at, int) else at.start
        raise QueryError(message, *self.index.line_col(offset))

    def need(self, j: int, what: str) -> Token:
        """The ``j``-th significant token; fails with "expected ``what``" past the end."""
        t = self.tok(j)
        if t is None:
            self.fail("unexpected end of query, expected %s" % what, None)
        return t

    def blank(self, j0: int, j1: int) -> None:
        """Blanks the significant tokens ``j0..j1`` (inclusive) in the rewrite."""
        for k in range(self.sig[j0], self.sig[j1] + 1):
            if self.toks[k].significant:
                self.repl[k] = " "

    def after(self, j: int | None, pred: Callable[[Token], bool], nth: int = 1) -> int | None:
        """Index of the ``nth`` significant token after ``j`` that satisfies ``pred``."""
        if j is None:
            return None
        for k in range(j + 1, len(self.sig)):
            if pred(self.toks[self.sig[k]]):
                nth -= 1
                if nth == 0:
                    return k
        return None

    def find_var(self, j: int | None, name: str, mode: str = "any", nth: int = 1) -> int | None:
        """Index of the ``nth`` occurrence of variable ``?name`` after ``j``, for error positions.

        Args:
            j: Start after this significant token (e.g. a SELECT keyword).
            name: The variable name without ``?``.
            mode: ``"any"``; ``"as"``: the target of an ``AS``; ``"plain"``: outside
                parentheses (a projected variable); ``"expr"``: inside parentheses but not
                inside an aggregate call.  Modes other than ``"any"`` stop at the first
                top-level ``{``, WHERE or FROM (the end of a projection), except ``"as"``.
            nth: Which occurrence.
        """
        if j is None:
            return None
        depth, agg_depth, prev = 0, -1, None
        for k in range(j + 1, len(self.sig)):
            t = self.toks[self.sig[k]]
            if mode in ("plain", "expr") and depth == 0 and (t.is_punct("{") or t.kw("WHERE", "FROM")):
                break
            if t.is_punct("("):
                depth += 1
            elif t.is_punct(")"):
                depth -= 1
                agg_depth = -1 if depth < agg_depth else agg_depth
            elif t.key in _AGGREGATE_WORDS and agg_depth < 0:
                agg_depth = depth + 1
            elif t.kind == "var" and t.text[1:] == name:
                is_as = prev is not None and prev.kw("AS")
                if (
                    mode == "any"
                    or (mode == "as" and is_as)
                    or (mode == "plain" and depth == 0)
                    or (mode == "expr" and depth > 0 and not is_as and agg_depth < 0)
                ):
                    nth -= 1
                    if nth == 0:
                        return k
            prev = t
        return None if mode == "any" else self.find_var(j, name)

    def deepest_bracket(self) -> Token | None:
        """The first bracket (``(``, ``[``, ``{``) at the deepest nesting level."""
        depth, deepest, worst = 0, 0, None
        for t in self.toks:
            if t.kind == "punct" and t.text in "([{":
                depth += 1
                if depth > deepest:
                    deepest, worst = depth, t
            elif t.kind == "punct" and t.text in ")]}":
                depth -= 1
        return worst

    def token_at(self, offset: int, keep: Collection[int] = ()) -> int | None:
        """Index (in ``toks``) of the first kept significant token ending after ``offset``.

        Rewritten tokens are skipped, except those in ``keep``.
        """
        k = max(0, bisect.bisect_right([t.start for t in self.toks], offset) - 1)
        if k < len(self.toks) and self.toks[k].end <= offset:
            k += 1
        while k < len(self.toks) and (not self.toks[k].significant or (k in self.repl and k not in keep)):
            k += 1
        return k if k < len(self.toks) else None

    def render(self, decode: bool = False, extra: dict[int, str] | None = None) -> tuple[str, OffsetMap]:
        """The rewritten text and its offset map.

        Only the changed tokens are visited (the text between them is copied in one
        slice), which keeps registering thousands of queries cheap.  A run of tokens whose
        rewrite keeps their length is one linear piece of the map; every other rewritten
        token is a piece of its own (length ``-1``).

        Args:
            decode: Decode ``\\u`` escapes of strings and IRIs (see :func:`decode_escapes`).
            extra: Further replacements (token index -> text) for this rendering only.
        """
        return render_spans(self.text, self.change_spans(decode, extra))

    def change_spans(self, decode: bool = False, extra: dict[int, str] | None = None) -> list[Span]:
        """The rewritten tokens of :meth:`render`: ``(start, end, new text)`` in text order."""
        changes = dict(self.repl)
        if extra:
            changes.update(extra)
        toks = self.toks
        if decode:
            for k, t in enumerate(toks):
                if k not in changes and (t.kind == "string" or t.kind == "iri") and "\\" in t.text:
                    changes[k] = decode_escapes(t)
        return [(toks[k].start, toks[k].end, changes[k]) for k in sorted(changes)]


def render_spans(text: str, spans: list[Span]) -> tuple[str, OffsetMap]:
    """``text`` with each span (sorted, disjoint) replaced, and the offset map of the result
    (see :meth:`TokenStream.render`)."""
    parts: list[str] = []
    pieces: list[tuple[int, int, int]] = []
    cur = 0  # original offset copied so far
    run_orig = run_pos = 0  # start of the current linear run (original, rewritten)
    for start, end, s in spans:
        if start > cur:
            parts.append(text[cur:start])
        parts.append(s)
        cur = end
        if len(s) != end - start:
            if start > run_orig:
                pieces.append((run_pos, run_orig, start - run_orig))
            pos = run_pos + (start - run_orig)
            pieces.append((pos, start, -1))
            run_orig, run_pos = end, pos + len(s)
    if cur < len(text):
        parts.append(text[cur:])
    if len(text) > run_orig:
        pieces.append((run_pos, run_orig, len(text) - run_orig))
    pieces.append((run_pos + len(text) - run_orig, len(text), 0))
    return "".join(parts), tuple(pieces)


# --------------------------------------------------------------------------- IRIs (RFC 3987)

_UCS = (
    "\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"
    "\U00010000-\U0001fffd\U00020000-\U0002fffd\U00030000-\U0003fffd\U00040000-\U0004fffd"
    "\U00050000-\U0005fffd\U00060000-\U0006fffd\U00070000-\U0007fffd\U00080000-\U0008fffd"
    "\U00090000-\U0009fffd\U000a0000-\U000afffd\U000b0000-\U000bfffd\U000c0000-\U000cfffd"
    "\U000d0000-\U000dfffd\U000e1000-\U000efffd"
)
_PRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"


def _iri_ref_pattern(ucs: str, private: str) -> str:
    """The RFC 3987 IRI-reference grammar as a regular expression over the given
    ``ucschar`` and ``iprivate`` classes."""
    unres = "A-Za-z0-9\\-._~" + ucs
    sub = "!$&'()*+,;="
    pct = "%[0-9A-Fa-f]{2}"
    pchar = "(?:[%s%s:@]|%s)" % (unres, sub, pct)
    auth = (
        "(?:(?:[%s%s:]|%s)*@)?" % (unres, sub, pct)
        + "(?:\\[(?:[0-9A-Fa-f:.]+|v[0-9A-Fa-f]+\\.[A-Za-z0-9\\-._~%s:]+)\\]|(?:[%s%s]|%s)*)"
        % (sub, unres, sub, pct)
        + "(?::[0-9]*)?"
    )
    abempty = "(?:/%s*)*" % pchar
    tail = "(?:\\?(?:%s|[/?%s])*)?(?:#(?:%s|[/?])*)?" % (pchar, private, pchar)
    return (
        "(?:[A-Za-z][A-Za-z0-9+\\-.]*:(?://%s%s|/(?:%s+%s)?|%s+%s|)"
        % (auth, abempty, pchar, abempty, pchar, abempty)
        + "|(?://%s%s|/(?:%s+%s)?|(?:[%s%s@]|%s)+%s|))"
        % (auth, abempty, pchar, abempty, unres, sub, pct, abempty)
        + tail
    )


#: ASCII IRIs (nearly all) are checked with a small expression compiled at import; the full
#: one, whose Unicode classes take ~25 ms to compile, only once a non-ASCII IRI turns up.
_IRI_REF_ASCII_RE = lazy(_iri_ref_pattern("", ""))


@functools.cache
def _iri_ref_unicode_re() -> re.Pattern[str]:
    return re.compile(_iri_ref_pattern(_UCS, _PRIVATE))


def iri_problem(iri: str) -> str | None:
    """Checks an IRI reference (absolute or relative) against RFC 3987.

    Args:
        iri: The IRI, without angle brackets and with escapes decoded.

    Returns:
        ``None`` if it is valid, else a short reason.
    """
    if iri in _VALID_IRIS:  # the same few prefix and namespace IRIs, query after query
        return None
    # most IRIs are in the readers' simple subset (valid; a small expression to compile)
    if is_simple_iri(iri) or (_IRI_REF_ASCII_RE if iri.isascii() else _iri_ref_unicode_re()).fullmatch(iri):
        if len(_VALID_IRIS) >= 65536:
            _VALID_IRIS.clear()
        _VALID_IRIS.add(iri)
        return None
    if re.search("%(?![0-9A-Fa-f]{2})", iri):
        return "bad percent-encoding"
    return "not a valid IRI"


_VALID_IRIS: set[str] = set()


# --------------------------------------------------------------------------- language tags (BCP 47)

_AN = "[A-Za-z0-9]"
_LANGTAG_RE = lazy(
    "(?:(?:[A-Za-z]{2,3}(?:-[A-Za-z]{3}){0,3}|[A-Za-z]{4,8})"  # language, extlang
    "(?:-[A-Za-z]{4})?(?:-(?:[A-Za-z]{2}|[0-9]{3}))?"  # script, region
    "(?:-(?:%s{5,8}|[0-9]%s{3}))*"
    % (_AN, _AN)  # variants
    + "(?:-[0-9A-WYZa-wyz](?:-%s{2,8})+)*" % _AN  # extensions
    + "(?:-[xX](?:-%s{1,8})+)?" % _AN  # private use
    + "|[xX](?:-%s{1,8})+)" % _AN
)
_GRANDFATHERED = frozenset(
    "en-gb-oed i-ami i-bnn i-default i-enochian i-hak i-klingon i-lux i-mingo i-navajo i-pwn i-tao "
    "i-tay i-tsu sgn-be-fr sgn-be-nl sgn-ch-de art-lojban cel-gaulish no-bok no-nyn zh-guoyu "
    "zh-hakka zh-min zh-min-nan zh-xiang".split()
)


def langtag_problem(tag: str) -> str | None:
    """Checks that a language tag is well-formed (RFC 5646), as Oxigraph does.

    Args:
        tag: The tag without ``@``.

    Returns:
        ``None`` if it is well-formed, else a short reason.
    """
    if _LANGTAG_RE.fullmatch(tag) or tag.lower() in _GRANDFATHERED:
        return None
    return "not a well-formed BCP 47 language tag"
