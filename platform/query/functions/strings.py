"""String helpers of the SPARQL expression library: SUBSTR, langMatches, regexes.

SPARQL specifies XPath regular expressions; the reference evaluator (oxigraph) hands the
pattern to Rust's ``regex`` crate instead, and this module follows it: a pattern is read
with Rust ``regex`` syntax and translated to Python :mod:`re` (``\\p{L}`` classes,
``(?<name>...)`` groups, ``$`` as the end of the text, no look-around or
back-references), matches are enumerated as Rust does (no empty match right after a
match), and REPLACE's replacement string uses Rust's ``$name`` / ``${name}`` syntax.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterator
from functools import lru_cache

from linkstream.query.functions.base import ExprError
from linkstream.query.functions.numeric import I64_MAX, I64_MIN
from linkstream.rdf.lazyre import lazy

# ------------------------------------------------------------------ SUBSTR & co


def substring(source: str, start: int, length: int | None) -> str:
    """fn:substring on code points with integer arguments (as oxigraph's ``substring``)."""
    start0 = start - 1
    if start0 < I64_MIN:
        raise ExprError("SUBSTR start overflow")
    lo = max(start0, 0)
    if length is None:
        return source[lo:]
    end = start0 + length
    if not I64_MIN <= end <= I64_MAX:
        raise ExprError("SUBSTR length overflow")
    return source[lo:end] if end > lo else ""


def lang_matches(tag: str, language_range: str) -> bool:
    """RFC 4647 basic filtering, as SPARQL's langMatches."""
    tag, language_range = tag.lower(), language_range.lower()
    if language_range == "*":
        return tag != ""
    rparts, tparts = language_range.split("-"), tag.split("-")
    if len(rparts) > len(tparts):
        return False
    return all(r == t for r, t in zip(rparts, tparts))


_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")


def encode_for_uri(s: str) -> str:
    """fn:encode-for-uri: percent-encode every UTF-8 byte but the unreserved characters."""
    return "".join(chr(b) if b in _UNRESERVED else "%%%02X" % b for b in s.encode("utf-8"))


_ALNUM = "[a-z0-9]"
_LANGTAG_RE = lazy(
    r"(?:"
    r"(?:[a-z]{2,3}(?:-[a-z]{3}){0,3}|[a-z]{4,8})"  # language (+ extlang)
    r"(?:-[a-z]{4})?"  # script
    r"(?:-(?:[a-z]{2}|[0-9]{3}))?"  # region
    r"(?:-(?:" + _ALNUM + r"{5,8}|[0-9]" + _ALNUM + r"{3}))*"  # variants
    r"(?:-[0-9a-wyz](?:-" + _ALNUM + r"{2,8})+)*"  # extensions
    r"(?:-x(?:-" + _ALNUM + r"{1,8})+)?"  # private use
    r"|x(?:-" + _ALNUM + r"{1,8})+"  # private use only
    r"|en-gb-oed|i-(?:ami|bnn|default|enochian|hak|klingon|lux|mingo|navajo|pwn|tao|tay|tsu)"
    r"|sgn-(?:be-fr|be-nl|ch-de)|art-lojban|cel-gaulish|no-(?:bok|nyn)|zh-(?:guoyu|hakka|min|min-nan|xiang)"
    r")"
)


def is_language_tag(tag: str) -> bool:
    """Whether ``tag`` is a well-formed BCP 47 language tag (case-insensitive)."""
    return tag.isascii() and _LANGTAG_RE.fullmatch(tag.lower()) is not None


# ------------------------------------------------------------------ regex translation

_FLAGS = {"i": re.IGNORECASE, "s": re.DOTALL, "m": re.MULTILINE, "x": re.VERBOSE, "q": 0}
_CATEGORY_NAMES = {
    "letter": "L",
    "lowercase_letter": "Ll",
    "uppercase_letter": "Lu",
    "titlecase_letter": "Lt",
    "modifier_letter": "Lm",
    "other_letter": "Lo",
    "mark": "M",
    "number": "N",
    "decimal_number": "Nd",
    "digit": "Nd",
    "letter_number": "Nl",
    "other_number": "No",
    "punctuation": "P",
    "symbol": "S",
    "separator": "Z",
    "space_separator": "Zs",
    "other": "C",
    "control": "Cc",
}
_POSIX_CLASSES = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7F",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1F\\x7F",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}


#: Rust's ``\\s``: the Unicode White_Space property (Python's also has U+001C..U+001F).
_WHITE_SPACE = "\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"
_REPETITION = lazy(r"\{[0-9]+(?:,[0-9]*)?\}")
_POSIX_CLASS_RE = lazy(r"\[:(\^?)([a-z]+):\]")
_FLAG_GROUP_RE = lazy(r"\(\?([A-Za-z]*(?:-[A-Za-z]*)?)([:)])")


def _class_char(cp: int) -> str:
    return "\\U%08X" % cp if cp > 0xFFFF else "\\u%04X" % cp


@lru_cache(maxsize=64)
def _category_ranges(category: str) -> str:
    """The content of a character class matching a Unicode general category."""
    parts: list[str] = []
    start = prev = -2
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)).startswith(category):
            if cp != prev + 1:
                if start >= 0:
                    parts.append(_range(start, prev))
                start = cp
            prev = cp
    if start >= 0:
        parts.append(_range(start, prev))
    return "".join(parts)


def _range(lo: int, hi: int) -> str:
    return _class_char(lo) if lo == hi else _class_char(lo) + "-" + _class_char(hi)


def _category(name: str) -> str:
    key = name.replace(" ", "").replace("-", "_")
    cat = _CATEGORY_NAMES.get(key.lower(), key)
    if len(cat) in (1, 2) and cat[0] in "LMNPSZC" and (len(cat) == 1 or cat[1].islower()):
        ranges = _category_ranges(cat)
        if ranges:
            return ranges
    raise ExprError("unsupported Unicode class \\p{%s}" % name)


def _read_hex_escape(pattern: str, i: int) -> tuple[str, int]:
    """Translate ``\\x{..}``/``\\u{..}`` at ``pattern[i]`` (the letter); return (text, next index)."""
    if i + 1 < len(pattern) and pattern[i + 1] == "{":
        j = pattern.find("}", i + 2)
        if j < 0:
            raise ExprError("bad hex escape")
        try:
            cp = int(pattern[i + 2 : j], 16)
            return _class_char(cp) if cp <= sys.maxunicode else "", j + 1
        except ValueError as e:
            raise ExprError("bad hex escape") from e
    return "\\" + pattern[i], i + 1


def _translate_escape(pattern: str, i: int, in_class: bool) -> tuple[str, int]:
    """Translate the escape sequence at ``pattern[i]`` (a backslash); return (text, next index)."""
    n = len(pattern)
    if i + 1 >= n:
        raise ExprError("trailing backslash in regex")
    e = pattern[i + 1]
    if e in "pP":
        if i + 2 < n and pattern[i + 2] == "{":
            j = pattern.find("}", i + 3)
            if j < 0:
                raise ExprError("bad \\p class")
            name, i = pattern[i + 3 : j], j + 1
        else:
            name, i = pattern[i + 2 : i + 3], i + 3
        negated = e == "P"
        if name.startswith("^"):
            name, negated = name[1:], not negated
        ranges = _category(name)
        if not in_class:
            return ("[^" if negated else "[") + ranges + "]", i
        if negated:
            raise ExprError("negated \\P inside a class is not supported")
        return ranges, i
    if e in "xu":
        return _read_hex_escape(pattern, i + 1)
    if e.isdigit() or e in "kZ":
        raise ExprError("unsupported escape \\%s" % e)
    if e == "s":
        return (_WHITE_SPACE if in_class else "[" + _WHITE_SPACE + "]"), i + 2
    if e == "S":
        if in_class:
            raise ExprError("\\S inside a class is not supported")
        return "[^" + _WHITE_SPACE + "]", i + 2
    if not in_class and e in "z<>":
        return {"z": "\\Z", "<": "\\b(?=\\w)", ">": "\\b(?<=\\w)"}[e], i + 2
    return "\\" + e, i + 2


def _translate_class(pattern: str, i: int) -> tuple[str, int]:
    """Translate the character class opening at ``pattern[i]``; return (text, next index)."""
    out, n = ["["], len(pattern)
    i += 1
    if i < n and pattern[i] == "^":
        out.append("^")
        i += 1
    if i < n and pattern[i] == "]":
        out.append("\\]")
        i += 1
    while i < n:
        c = pattern[i]
        if c == "\\":
            text, i = _translate_escape(pattern, i, True)
            out.append(text)
            continue
        if c == "[":
            m = _POSIX_CLASS_RE.match(pattern, i)
            if not m or m.group(2) not in _POSIX_CLASSES or m.group(1):
                raise ExprError("nested character classes are not supported")
            out.append(_POSIX_CLASSES[m.group(2)])
            i = m.end()
            continue
        if pattern.startswith(("&&", "--", "~~"), i):
            raise ExprError("character class set operations are not supported")
        out.append(c)
        i += 1
        if c == "]":
            return "".join(out), i
    raise ExprError("unclosed character class")


class _Group:
    """A group being translated: inline flag groups ``(?i)`` opened in it, and ``$``'s meaning."""

    __slots__ = ("flags", "multiline")

    def __init__(self, multiline: bool) -> None:
        self.flags: list[str] = []
        self.multiline = multiline

    def set_flags(self, flags: str) -> None:
        on, _, off = flags.partition("-")
        if "m" in on:
            self.multiline = True
        if "m" in off:
            self.multiline = False


def translate_regex(pattern: str, multiline: bool) -> str:
    """Translate a Rust ``regex`` pattern to Python :mod:`re` syntax (error if unsupported).

    Rust's inline flags ``(?i)`` apply to the rest of the enclosing group, alternatives
    included; they become scoped groups ``(?i:...)``, closed with the enclosing group and
    reopened after each ``|``.
    """
    out: list[str] = []
    groups = [_Group(multiline)]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            text, i = _translate_escape(pattern, i, False)
            out.append(text)
        elif c == "[":
            text, i = _translate_class(pattern, i)
            out.append(text)
        elif c == "(":
            if pattern.startswith(("(?=", "(?!", "(?<=", "(?<!", "(?>", "(?#", "(?(", "(?P="), i):
                raise ExprError("unsupported group syntax")
            m = _FLAG_GROUP_RE.match(pattern, i)
            if m and m.group(2) == ")":  # (?flags): to the end of the enclosing group
                groups[-1].flags.append(m.group(1))
                groups[-1].set_flags(m.group(1))
                out.append("(?%s:" % m.group(1))
                i = m.end()
                continue
            groups.append(_Group(groups[-1].multiline))
            if m:  # (?flags:...)
                groups[-1].set_flags(m.group(1))
                out.append(m.group())
                i = m.end()
            elif pattern.startswith("(?<", i):
                out.append("(?P<")
                i += 3
            else:
                out.append("(")
                i += 1
        elif c == ")":
            if len(groups) == 1:
                raise ExprError("unbalanced parenthesis")
            out.append(")" * (len(groups.pop().flags) + 1))
            i += 1
        elif c == "|":
            flags = groups[-1].flags
            out.append(")" * len(flags) + "|" + "".join("(?%s:" % f for f in flags))
            i += 1
        elif c == "{":
            m = _REPETITION.match(pattern, i)
            if m is None:
                raise ExprError("invalid repetition")
            out.append(m.group())
            i = m.end()
        else:
            out.append("\\Z" if c == "$" and not groups[-1].multiline else c)
            i += 1
    if len(groups) != 1:
        raise ExprError("unbalanced parenthesis")
    out.append(")" * len(groups[0].flags))
    return "".join(out)


@lru_cache(maxsize=1024)
def compile_regex(pattern: str, flags: str = "") -> re.Pattern[str]:
    """Compile a SPARQL REGEX/REPLACE pattern with its flags; :class:`ExprError` if invalid."""
    reflags = 0
    for f in flags:
        if f not in _FLAGS:
            raise ExprError("invalid regex flag %r" % f)
        reflags |= _FLAGS[f]
    text = re.escape(pattern) if "q" in flags else translate_regex(pattern, "m" in flags)
    try:
        return re.compile(text, reflags)
    except (re.error, OverflowError, ValueError) as e:
        raise ExprError("invalid regex: %s" % e) from e


def iter_matches(rx: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """Matches of ``rx`` in ``text`` as Rust enumerates them.

    Each search starts where the previous match ended; an empty match found at that very
    position is dropped and the search restarts one character later (Python's
    ``finditer`` would instead look for a non-empty match at the same position).
    """
    pos, last_end, n = 0, -1, len(text)
    while pos <= n:
        m = rx.search(text, pos)
        if m is None:
            return
        if m.start() == m.end() == last_end:
            pos = m.end() + 1
            continue
        yield m
        pos = last_end = m.end()


_CAP_NAME_RE = lazy(r"[_0-9A-Za-z]+")


def _group(m: re.Match[str], name: str) -> str:
    if name.isascii() and name.isdigit():
        idx = int(name)
        return (m.group(idx) or "") if idx <= (m.re.groups or 0) else ""
    return (m.group(name) or "") if name in m.re.groupindex else ""


def expand_replacement(m: re.Match[str], replacement: str) -> str:
    """Expand a Rust ``regex`` replacement string (``$1``, ``$name``, ``${name}``, ``$$``)."""
    if "$" not in replacement:
        return replacement
    out: list[str] = []
    i, n = 0, len(replacement)
    while i < n:
        c = replacement[i]
        if c != "$" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = replacement[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "{":
            j = replacement.find("}", i + 2)
            if j < 0:
                out.append("$")
                i += 1
            else:
                out.append(_group(m, replacement[i + 2 : j]))
                i = j + 1
        else:
            cm = _CAP_NAME_RE.match(replacement, i + 1)
            if cm is None:
                out.append("$")
                i += 1
            else:
                out.append(_group(m, cm.group()))
                i = cm.end()
    return "".join(out)


def regex_replace(rx: re.Pattern[str], text: str, replacement: str) -> str:
    """Replace every (Rust-enumerated) match of ``rx`` in ``text``."""
    out: list[str] = []
    pos = 0
    for m in iter_matches(rx, text):
        out.append(text[pos : m.start()])
        out.append(expand_replacement(m, replacement))
        pos = m.end()
    out.append(text[pos:])
    return "".join(out)
