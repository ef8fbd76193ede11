"""A fast line parser for N-Triples and N-Quads that yields normalised N-Triples term strings.

One statement per line, as the W3C grammars (RDF 1.1, plus the RDF 1.2 additions that
Oxigraph 0.5 accepts: triple terms ``<<( s p o )>>`` in object position and
directional language tags ``"x"@en--ltr``).  Accept/reject decisions follow
Oxigraph (Python binding), the reference parser of ``tools/oracle.py``:

* IRIs must be absolute RFC 3987 IRIs (scheme, percent-encodings, port, IPv6 host
  checked), ``\\uXXXX`` escapes in IRIs are decoded and the result re-checked;
* language tags must be well-formed BCP 47 tags and are lower-cased;
* string escapes are validated (``\\q`` or an escaped surrogate is an error);
* ``rdf:langString`` / ``rdf:dirLangString`` without a language tag are errors;
* a literal subject, a non-IRI predicate, a literal graph name, a missing final
  ``.``, or anything but a comment after it are errors.

The output strings are dictionary keys (see :mod:`linkstream.rdf.terms`): literals whose
lexical form holds escapes are re-escaped canonically with ``Literal(...).n3()`` (the
same lexical form, one spelling of it), typed literals keep their lexical form and
datatype exactly as written (``"01"^^xsd:integer`` stays ``"01"``: it is another RDF
term than ``"1"^^xsd:integer``), and blank-node labels get the caller's prefix
(``_:b1`` -> ``_:<prefix>b1``) so that labels of different files never collide.

Hot path: one anchored regular expression per line plus dictionary caches of the
IRIs, literals and language tags already validated; anything the fast expression does
not cover (escaped IRIs, triple terms, errors) goes to a small recursive-descent parser.
"""

from __future__ import annotations

import functools
import ipaddress
import re

from linkstream.rdf.lazyre import lazy
from linkstream.rdf.terms import RDF, RDF_LANGSTRING, XSD_STRING, Literal

Quad = tuple[str, str, str, str | None]

#: what ``bytes.strip()`` removes (the oracle strips each raw line this way)
LINE_STRIP = " \t\n\r\x0b\x0c"

_RDF_DIRLANGSTRING = RDF + "dirLangString"
_CACHE_MAX = 1 << 16
#: triple terms nested deeper than this are an error (not a RecursionError)
MAX_TRIPLE_TERM_DEPTH = 64


class NTriplesError(ValueError):
    """A malformed N-Triples / N-Quads statement; ``str(err)`` is the reason."""


_UNDECODED_RE = lazy("[\udc80-\udcff]")


def utf8_error(line: str) -> str | None:
    """Why a line read with ``errors="surrogateescape"`` is not UTF-8, or ``None``.

    The reason names the first undecodable byte: its 1-based position in the line's bytes
    and its value.  Only called for a line that failed to parse (no hot-path cost).
    """
    m = _UNDECODED_RE.search(line)
    if m is None:
        return None
    at = len(line[: m.start()].encode("utf-8", "surrogateescape")) + 1
    return "invalid UTF-8 at byte %d of the line (0x%02X)" % (at, ord(m.group()) - 0xDC00)


# ------------------------------------------------------------------ character classes

_PN_BASE = (
    "A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u02ff\u0370-\u037d\u037f-\u1fff\u200c-\u200d"
    "\u2070-\u218f\u2c00-\u2fef\u3001-\ud7ff\uf900-\ufdcf\ufdf0-\ufffd\U00010000-\U000effff"
)
_PN_U = _PN_BASE + "_"
_PN = _PN_U + "\\-0-9\u00b7\u0300-\u036f\u203f-\u2040"
_LABEL = f"[{_PN_U}0-9](?:[{_PN}.]*[{_PN}])?"
#: the same for ASCII text (its non-ASCII ranges match nothing there): compiled in
#: microseconds, where the full one took 10-30 ms of every replay with a blank node
_ASCII_LABEL_RE = lazy(r"[A-Za-z_0-9](?:[A-Za-z_\-0-9.]*[A-Za-z_\-0-9])?")

# RFC 3987
_UCS = (
    "\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef"
    "\U00010000-\U0001fffd\U00020000-\U0002fffd\U00030000-\U0003fffd\U00040000-\U0004fffd"
    "\U00050000-\U0005fffd\U00060000-\U0006fffd\U00070000-\U0007fffd\U00080000-\U0008fffd"
    "\U00090000-\U0009fffd\U000a0000-\U000afffd\U000b0000-\U000bfffd\U000c0000-\U000cfffd"
    "\U000d0000-\U000dfffd\U000e1000-\U000efffd"
)
_PRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
_SUB = "!$&'()*+,;="
_PCT = "%[0-9A-Fa-f]{2}"


def _run(chars: str) -> str:
    # "(?:[c]|%hh)*" unrolled so that the engine never backtracks into it
    return f"[{chars}]*(?:{_PCT}[{chars}]*)*"


def _iri_pattern(ucs: str, private: str) -> str:
    unres = "A-Za-z0-9\\-._~" + ucs
    seg = _run(unres + _SUB + ":@")
    seg_nz = f"(?:[{unres + _SUB}:@]|{_PCT})" + seg
    return (
        "[A-Za-z][A-Za-z0-9+\\-.]*:"
        "(?:"
        f"//(?:{_run(unres + _SUB + ':')}@)?(?:\\[(?P<ip>[^\\]]*)\\]|{_run(unres + _SUB)})(?::[0-9]*)?(?:/{seg})*"
        f"|/?(?:{seg_nz}(?:/{seg})*)?"
        ")"
        f"(?:\\?{_run(unres + _SUB + ':@/?' + private)})?"
        f"(?:#{_run(unres + _SUB + ':@/?')})?"
    )


_IRI = _iri_pattern(_UCS, _PRIVATE)
#: the same grammar without its non-ASCII ranges: the same verdict on an ASCII IRI, and
#: cheap to compile (the Unicode ranges take most of a command's start-up otherwise)
_IRI_ASCII = _iri_pattern("", "")
_IPVFUTURE_RE = lazy(f"[vV][0-9A-Fa-f]+\\.[A-Za-z0-9\\-._~{_SUB}:]+")
_IRI_ESC_RE = lazy(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.?))")
_IRIREF_BAD = lazy('[<>"{}|^`\\\\\x00-\x20]')

# BCP 47 (RFC 5646), as oxilangtag checks it; matched lower-cased
_GRANDFATHERED = (
    "en-gb-oed|i-ami|i-bnn|i-default|i-enochian|i-hak|i-klingon|i-lux|i-mingo|i-navajo|i-pwn|i-tao|"
    "i-tay|i-tsu|sgn-be-fr|sgn-be-nl|sgn-ch-de|art-lojban|cel-gaulish|no-bok|no-nyn|zh-guoyu|"
    "zh-hakka|zh-min|zh-min-nan|zh-xiang"
)
_LANGTAG = (
    "(?:(?:[a-z]{2,3}(?:-[a-z]{3}){0,3}|[a-z]{4}|[a-z]{5,8})"
    "(?:-[a-z]{4})?"
    "(?:-(?:[a-z]{2}|[0-9]{3}))?"
    "(?:-(?:[a-z0-9]{5,8}|[0-9][a-z0-9]{3}))*"
    "(?:-[0-9a-wyz](?:-[a-z0-9]{2,8})+)*"
    "(?:-x(?:-[a-z0-9]{1,8})+)?"
    "|x(?:-[a-z0-9]{1,8})+"
    f"|{_GRANDFATHERED})"
)

_LEX_CHARS = '[^"\\\\\n\r\ud800-\udfff]*'
_LEX = f"{_LEX_CHARS}(?:\\\\.{_LEX_CHARS})*"
_LANGTOK = "[a-zA-Z]+(?:-[a-zA-Z0-9]+)*(?:--[a-zA-Z]+)?"
_FAST_IRI = '<[^<>"{}|^`\\\\\x00-\x20\ud800-\udfff]*>'
_W = "[ \t]*"

# s p o [g] . [# comment] -- the shapes that occur in practice, IRIs without escapes
_FAST = (
    f"{_W}(?:({_FAST_IRI})|_:({_LABEL})){_W}({_FAST_IRI}){_W}"
    f'(?:({_FAST_IRI})|_:({_LABEL})|("({_LEX})"(?:{_W}@({_LANGTOK})|{_W}\\^\\^{_W}({_FAST_IRI}))?))'
    f"{_W}(?:({_FAST_IRI})|_:({_LABEL}))?{_W}\\.{_W}(?:#.*)?"
)

# whole tokens of the split path
_FAST_IRI_TOKEN_RE = lazy(_FAST_IRI)
_LITTOK_RE = lazy(f'"({_LEX})"(?:@({_LANGTOK})|\\^\\^({_FAST_IRI}))?')

# tokens of the slow path (matched at a position)
_IRITOK_RE = lazy('<((?:[^<>"{}|^`\\\\\x00-\x20\ud800-\udfff]|\\\\u[0-9A-Fa-f]{4}|\\\\U[0-9A-Fa-f]{8})*)>')
_LIT_RE = lazy(f'"({_LEX})"')
_LANG_RE = lazy(f"@({_LANGTOK})")
_DT_RE = lazy(f"\\^\\^{_W}")
_TAIL_RE = lazy(f"{_W}(?:#.*)?")
_ECHAR = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}
_STR_ESC_RE = lazy(r"\\(?:u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.?))")


class _Patterns:
    """The expressions with Unicode ranges, each compiled on first use (together ~170 ms
    of start-up otherwise, for a ``linkstream`` command that never parses a statement)."""

    @functools.cached_property
    def iri(self) -> re.Pattern[str]:
        return re.compile(_IRI)

    @functools.cached_property
    def iri_ascii(self) -> re.Pattern[str]:
        return re.compile(_IRI_ASCII)

    @functools.cached_property
    def fast(self) -> re.Pattern[str]:
        return re.compile(_FAST)

    @functools.cached_property
    def label(self) -> re.Pattern[str]:
        return re.compile(_LABEL)

    @functools.cached_property
    def langtag(self) -> re.Pattern[str]:
        return re.compile(_LANGTAG)


@functools.cache
def _patterns() -> _Patterns:
    return _Patterns()


# ------------------------------------------------------------------ term checks


def _skip_ws(s: str, pos: int) -> int:
    n = len(s)
    while pos < n and s[pos] in " \t":
        pos += 1
    return pos


#: a subset of the RFC 3987 grammar that most IRIs of a stream are in (scheme, "//", a
#: registered name of letters, digits and ``.-_~``, a port, a path of unreserved
#: characters, sub-delims, ":" and "@", a query and a fragment of those and "/" and "?";
#: no percent sign or IP literal): an IRI it matches is valid without the full expression
#: (3-4x faster per new IRI, and the full expression is never compiled for such IRIs)
_SIMPLE_IRI_SOURCE = (
    r"[A-Za-z][A-Za-z0-9+.\-]*://[A-Za-z0-9._~\-]+(?::[0-9]*)?(?:/[A-Za-z0-9._~!$&'()*+,;=:@/\-]*)?"
    r"(?:\?[A-Za-z0-9._~!$&'()*+,;=:@/?\-]*)?(?:#[A-Za-z0-9._~!$&'()*+,;=:@/?\-]*)?"
)
_SIMPLE_IRI = lazy(_SIMPLE_IRI_SOURCE)
#: an ``<iri>`` token whose IRI is in :data:`_SIMPLE_IRI` (one match for the token's
#: lexical check and the IRI's validity)
_SIMPLE_IRI_TOKEN = lazy("<" + _SIMPLE_IRI_SOURCE + ">")
#: blank-node prefixes of ASCII label characters (checked without the Unicode classes)
_ASCII_PREFIX = lazy(r"[A-Za-z0-9_.\-]*")


def is_simple_iri(iri: str) -> bool:
    """Whether ``iri`` is in the simple subset of RFC 3987 above (then it is a valid IRI; a
    ``False`` says nothing: the full grammar decides)."""
    return _SIMPLE_IRI.fullmatch(iri) is not None


def iri_error(iri: str) -> str | None:
    """Why ``iri`` (already unescaped) is not an absolute RFC 3987 IRI, or ``None`` if it is."""
    if _SIMPLE_IRI.fullmatch(iri):
        return None
    bad = _IRIREF_BAD.search(iri)
    if bad:
        return f"invalid IRI code point {bad.group()!r}"
    pats = _patterns()
    m = (pats.iri_ascii if iri.isascii() else pats.iri).fullmatch(iri)
    if m is None:
        if ":" not in iri or not re.match("[A-Za-z][A-Za-z0-9+\\-.]*:", iri):
            return f"no scheme in IRI <{iri}> (IRIs must be absolute)"
        return f"invalid IRI <{iri}>"
    ip = m.group("ip")
    if ip is not None:
        if ip[:1] in ("v", "V"):
            if not _IPVFUTURE_RE.fullmatch(ip):
                return f"invalid IPvFuture host in <{iri}>"
        else:
            try:
                if "%" in ip:
                    raise ValueError(ip)
                ipaddress.IPv6Address(ip)
            except ValueError:
                return f"invalid IPv6 host in <{iri}>"
    return None


def _unescape_iri(raw: str) -> str:
    def repl(m: re.Match[str]) -> str:
        code = m.group(1) or m.group(2)
        if code is None:
            raise NTriplesError(f"unexpected escape '\\{m.group(3)}' in IRI")
        c = int(code, 16)
        if c > 0x10FFFF or 0xD800 <= c <= 0xDFFF:
            raise NTriplesError(f"escape {m.group()} is not a Unicode scalar value")
        return chr(c)

    return _IRI_ESC_RE.sub(repl, raw)


def unescape_literal(raw: str) -> str:
    """Decode the escapes of a string literal's body, validating them (``NTriplesError``)."""

    def repl(m: re.Match[str]) -> str:
        code = m.group(1) or m.group(2)
        if code is None:
            c = m.group(3)
            if c in _ECHAR:
                return _ECHAR[c]
            raise NTriplesError(f"unexpected escape character '\\{c}' in string")
        v = int(code, 16)
        if v > 0x10FFFF or 0xD800 <= v <= 0xDFFF:
            raise NTriplesError(f"escape {m.group()} is not a Unicode scalar value")
        return chr(v)

    return _STR_ESC_RE.sub(repl, raw)


def _check_lang(tok: str) -> str:
    """Canonical (lower-case) form of a language tag token, with an optional base direction."""
    tag, sep, direction = tok.partition("--")
    if sep and direction not in ("ltr", "rtl"):
        raise NTriplesError(f"the allowed base directions are --ltr and --rtl, found --{direction}")
    low = tag.lower()
    if not _patterns().langtag.fullmatch(low):
        raise NTriplesError(f"invalid language tag {tag!r}")
    return low + sep + direction


# ------------------------------------------------------------------ the parser


class LineParser:
    """Parses N-Triples/N-Quads statements into canonical term strings, with term caches.

    Args:
        bnode_prefix: prepended to every blank-node label (made of label characters).
    """

    def __init__(self, bnode_prefix: str = "") -> None:
        if (
            bnode_prefix
            and not _ASCII_PREFIX.fullmatch(bnode_prefix)
            and not re.fullmatch(f"[{_PN}.]*", bnode_prefix)
        ):
            raise ValueError(f"blank node prefix {bnode_prefix!r} has characters a label cannot hold")
        self.bnode_prefix = bnode_prefix
        self._iris: dict[str, str] = {}  # "<iri>" token -> canonical term (itself)
        self._lits: dict[str, str] = {}  # literal token -> canonical term
        self._bnodes: dict[str, str] = {}  # "_:label" token -> canonical term (prefixed)
        self._langs: dict[str, str] = {}
        self._re = _patterns()

    def with_prefix(self, bnode_prefix: str) -> LineParser:
        """A parser for ``bnode_prefix`` sharing this one's IRI, literal and language tag
        caches (what they hold does not depend on the prefix; only blank nodes do): a
        parser per request (its own blank node scope) does not start cold."""
        p = LineParser(bnode_prefix)
        p._iris, p._lits, p._langs = self._iris, self._lits, self._langs
        return p

    # -- public API

    def parse_line(self, line: str) -> Quad | None:
        """Parse one line; ``None`` for a blank or comment line.

        The line is stripped the way the oracle strips raw lines.  A line whose
        statements are separated by a bare CR holds several statements: use
        :meth:`parse_statements` for those.

        Raises:
            NTriplesError: the line is malformed (or holds several statements).
        """
        s = line.strip(LINE_STRIP)
        if not s or s[0] == "#":
            return None
        if "\r" in s:
            quads = self.parse_statements(s)
            if len(quads) > 1:
                raise NTriplesError("several statements on one line (separated by CR)")
            return quads[0] if quads else None
        return self.parse_statement(s)

    def parse_statements(self, line: str) -> list[Quad]:
        """Every statement of a line (a CR ends a statement as a line feed does).

        Raises:
            NTriplesError: one of the statements is malformed (the whole line is rejected).
        """
        s = line.strip(LINE_STRIP)
        if not s or s[0] == "#":
            return []
        out = []
        for piece in s.split("\r"):
            q = self.parse_statement(piece)
            if q is not None:
                out.append(q)
        return out

    def parse_statement(self, s: str) -> Quad | None:
        """Parse one statement of a line already stripped, holding no CR or LF (the hot path).

        Raises:
            NTriplesError: the statement is malformed.
        """
        # most lines are terms separated by single spaces: split, look the tokens up
        parts = s.split(" ")
        if 4 <= len(parts) <= 5 and parts[-1] == ".":
            q = self._split_statement(parts)
            if q is not None:
                return q
        m = self._re.fast.fullmatch(s)
        if m is None:
            return self._slow(s)
        si, sb, p, oi, ob, ol, lex, lang, dt, gi, gb = m.groups()
        iris = self._iris
        prefix = self.bnode_prefix
        if si is not None:
            subj = iris.get(si) or self._iri_token(si)
        else:
            subj = "_:" + prefix + sb
        pred = iris.get(p) or self._iri_token(p)
        if oi is not None:
            obj = iris.get(oi) or self._iri_token(oi)
        elif ob is not None:
            obj = "_:" + prefix + ob
        else:
            obj = self._lits.get(ol) or self._literal_token(ol, lex, lang, dt)
        if gi is not None:
            graph: str | None = iris.get(gi) or self._iri_token(gi)
        elif gb is not None:
            graph = "_:" + prefix + gb
        else:
            graph = None
        return subj, pred, obj, graph

    def _split_statement(self, parts: list[str]) -> Quad | None:
        """Terms of single-space separated tokens, or ``None`` to let the regular path decide.

        Every token must be one whole term on its own (a token that is not, such as half
        of a literal holding a space, sends the line to the regular path), so a result
        here is the statement the grammar reads.
        """
        iris = self._iris
        p = iris.get(parts[1])
        if p is None:
            p = self._split_term(parts[1], False)
            if p is None or p[0] != "<":
                return None
        bnodes = self._bnodes
        s = iris.get(parts[0]) or bnodes.get(parts[0]) or self._split_term(parts[0], False)
        if s is None:
            return None
        tok = parts[2]
        o = iris.get(tok) or self._lits.get(tok) or bnodes.get(tok) or self._split_term(tok, True)
        if o is None:
            return None
        if len(parts) == 5:
            g = iris.get(parts[3]) or bnodes.get(parts[3]) or self._split_term(parts[3], False)
            if g is None:
                return None
            return s, p, o, g
        return s, p, o, None

    def _split_term(self, tok: str, literal_ok: bool) -> str | None:
        c = tok[:1]
        if c == "<":
            if _SIMPLE_IRI_TOKEN.fullmatch(tok):  # valid: cached without further checks
                iris = self._iris
                if len(iris) >= _CACHE_MAX:
                    iris.clear()
                iris[tok] = tok
                return tok
            if _FAST_IRI_TOKEN_RE.fullmatch(tok):
                return self._iri_token(tok)
        elif c == "_":
            if tok[1:2] == ":" and (_ASCII_LABEL_RE if tok.isascii() else self._re.label).fullmatch(tok, 2):
                term = self._bnodes[tok] = "_:" + self.bnode_prefix + tok[2:]
                if len(self._bnodes) > _CACHE_MAX:
                    self._bnodes.clear()
                return term
        elif c == '"' and literal_ok:
            m = _LITTOK_RE.fullmatch(tok)
            if m is not None:
                return self._literal_token(tok, m.group(1), m.group(2), m.group(3))
        return None

    def _iri_token(self, tok: str) -> str:
        """Validate an escape-free ``<iri>`` token and cache it."""
        err = iri_error(tok[1:-1])
        if err:
            raise NTriplesError(err)
        if len(self._iris) >= _CACHE_MAX:
            self._iris.clear()
        self._iris[tok] = tok
        return tok

    def _literal_token(self, tok: str, lex: str, lang: str | None, dt: str | None) -> str:
        has_esc = "\\" in lex
        value = unescape_literal(lex) if has_esc else lex
        if lang is not None:
            tag = self._langs.get(lang)
            if tag is None:
                tag = _check_lang(lang)
                self._langs[lang] = tag
            out = Literal(value, RDF_LANGSTRING, tag).n3() if has_esc else '"' + lex + '"@' + tag
        elif dt is not None:
            dtok = self._iris.get(dt) or self._iri_token(dt)
            out = self._typed(value, dtok[1:-1], has_esc, lex)
        else:
            out = Literal(value).n3() if has_esc else tok
        if len(self._lits) >= _CACHE_MAX:
            self._lits.clear()
        self._lits[tok] = out
        return out

    @staticmethod
    def _typed(value: str, dt: str, has_esc: bool, raw: str) -> str:
        if dt == XSD_STRING:
            return Literal(value).n3() if has_esc else '"' + raw + '"'
        if dt == RDF_LANGSTRING:
            raise NTriplesError("the datatype of a literal without a language tag must not be rdf:langString")
        if dt == _RDF_DIRLANGSTRING:
            raise NTriplesError(
                "the datatype of a literal without a base direction must not be rdf:dirLangString"
            )
        if has_esc:
            return Literal(value, dt).n3()
        return '"' + raw + '"^^<' + dt + ">"

    # -- slow path: recursive descent, precise error reasons

    def _slow(self, s: str) -> Quad | None:
        pos = _skip_ws(s, 0)
        if pos == len(s) or s[pos] == "#":
            return None
        subj, pos = self._term(s, pos, "subject")
        pos = _skip_ws(s, pos)
        pred, pos = self._term(s, pos, "predicate")
        pos = _skip_ws(s, pos)
        obj, pos = self._term(s, pos, "object")
        pos = _skip_ws(s, pos)
        graph: str | None = None
        if s[pos : pos + 1] in ("<", "_", '"'):
            graph, pos = self._term(s, pos, "graph")
            pos = _skip_ws(s, pos)
        if pos >= len(s) or s[pos] != ".":
            if pos >= len(s):
                raise NTriplesError("statement not terminated by '.'")
            raise NTriplesError(f"expected '.' at column {pos + 1}, found {s[pos : pos + 10]!r}")
        tail = _TAIL_RE.match(s, pos + 1)
        if tail is None or tail.end() != len(s):
            end = tail.end() if tail else pos + 1
            raise NTriplesError(f"only one statement per line: unexpected {s[end : end + 10]!r} after '.'")
        return subj, pred, obj, graph

    def _term(self, s: str, pos: int, role: str, depth: int = 0) -> tuple[str, int]:
        c = s[pos : pos + 1]
        if s.startswith("<<(", pos):
            if role != "object":
                raise NTriplesError(f"a triple term cannot be the {role}")
            return self._triple_term(s, pos, depth + 1)
        if c == "<":
            m = _IRITOK_RE.match(s, pos)
            if m is None:
                raise NTriplesError(self._iri_lex_error(s, pos))
            raw = m.group(1)
            iri = _unescape_iri(raw) if "\\" in raw else raw
            err = iri_error(iri)
            if err:
                raise NTriplesError(err)
            return "<" + iri + ">", m.end()
        if c == "_" and s.startswith("_:", pos):
            if role == "predicate":
                raise NTriplesError("the predicate must be an IRI, not a blank node")
            m = (_ASCII_LABEL_RE if s.isascii() else self._re.label).match(s, pos + 2)
            if m is None:
                raise NTriplesError(f"empty or invalid blank node label at column {pos + 1}")
            return "_:" + self.bnode_prefix + m.group(), m.end()
        if c == '"':
            if role != "object":
                raise NTriplesError(f"a literal cannot be the {role}")
            return self._literal(s, pos)
        if not c:
            raise NTriplesError(f"the statement ends before its {role}")
        raise NTriplesError(f"expected the {role} at column {pos + 1}, found {s[pos : pos + 10]!r}")

    def _literal(self, s: str, pos: int) -> tuple[str, int]:
        m = _LIT_RE.match(s, pos)
        if m is None:
            raise NTriplesError(f"unterminated or invalid string literal at column {pos + 1}")
        raw = m.group(1)
        has_esc = "\\" in raw
        value = unescape_literal(raw) if has_esc else raw
        end = m.end()
        after = _skip_ws(s, end)
        lm = _LANG_RE.match(s, after)
        if lm is not None:
            return Literal(value, RDF_LANGSTRING, _check_lang(lm.group(1))).n3(), lm.end()
        if s.startswith("@", after):
            raise NTriplesError(f"invalid language tag at column {after + 1}")
        dm = _DT_RE.match(s, after)
        if dm is not None:
            if not s.startswith("<", dm.end()) or s.startswith("<<", dm.end()):
                raise NTriplesError("a literal datatype must be an IRI")
            dtok, end = self._term(s, dm.end(), "datatype")
            return self._typed(value, dtok[1:-1], True, raw), end
        return Literal(value).n3(), end

    def _triple_term(self, s: str, pos: int, depth: int) -> tuple[str, int]:
        if depth > MAX_TRIPLE_TERM_DEPTH:  # the descent would run out of stack
            raise NTriplesError(
                f"triple terms nested more than {MAX_TRIPLE_TERM_DEPTH} deep at column {pos + 1}"
            )
        pos = _skip_ws(s, pos + 3)
        parts = []
        for role in ("subject", "predicate", "object"):
            t, pos = self._term(s, pos, role, depth)
            parts.append(t)
            pos = _skip_ws(s, pos)
        if not s.startswith(")>>", pos):
            raise NTriplesError(f"triple term not closed by ')>>' at column {pos + 1}")
        return "<<( " + " ".join(parts) + " )>>", pos + 3

    @staticmethod
    def _iri_lex_error(s: str, pos: int) -> str:
        end = s.find(">", pos + 1)
        body = s[pos + 1 : end] if end >= 0 else s[pos + 1 :]
        if end < 0:
            return f"unterminated IRI at column {pos + 1}"
        bad = re.search('[<"{}|^`\x00-\x20\ud800-\udfff]|\\\\(?!u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8})', body)
        what = repr(bad.group()) if bad else "text"
        return f"invalid character {what} in IRI <{body}>"


_PARSERS: dict[str, LineParser] = {}  # the "" parser is created on first use, then kept


def parser_for(bnode_prefix: str = "") -> LineParser:
    """A shared :class:`LineParser` for ``bnode_prefix`` (its caches are reused)."""
    p = _PARSERS.get(bnode_prefix)
    if p is None:
        if len(_PARSERS) > 64:
            default = _PARSERS.get("")
            _PARSERS.clear()
            if default is not None:
                _PARSERS[""] = default
        p = _PARSERS[bnode_prefix] = LineParser(bnode_prefix)
    return p


def parse_line(line: str, bnode_prefix: str = "") -> Quad | None:
    """Parse one N-Triples/N-Quads line into canonical term strings.

    Args:
        line: the line (surrounding whitespace and the line end are ignored).
        bnode_prefix: prepended to blank-node labels (``_:b1`` -> ``_:<prefix>b1``).

    Returns:
        ``(subject, predicate, object, graph)`` as N-Triples strings, ``graph`` ``None`` for
        the default graph; ``None`` for a blank or comment line.

    Raises:
        NTriplesError: the line is malformed; ``str(err)`` says why.
    """
    return parser_for(bnode_prefix).parse_line(line)


def parse_file_line(parser: LineParser, raw: str) -> list[tuple[str, str, str, str | None]]:
    """The statements of one raw line of an N-Triples / N-Quads file.

    Blank lines and comments give ``[]``; a line with a bare carriage return inside is
    split there (old Mac line ends), as the stream reader does.

    Raises:
        NTriplesError: The line is malformed.
    """
    line = raw.strip(LINE_STRIP)
    if not line or line[0] == "#":
        return []
    if "\r" in line:
        return parser.parse_statements(line)
    q = parser.parse_statement(line)
    return [q] if q is not None else []
