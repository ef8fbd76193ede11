"""Query shapes: the dialect pass and rendering paid once per shape, not once per query.

Thousands of registered queries usually come from a few templates and differ only in
constants: the REGISTER name, IRIs and numbers in the query's patterns and filters.
:mod:`.template` already pays rdflib's parse once per shape; this module does the same for
the front end (tokenizing, the dialect pass, the rewrite into SPARQL).

A text is split by one regular expression (:data:`_CANDIDATES`) into the text between
word-like runs (IRIs, names, numbers, keywords) and those runs.  A *shape* is learnt from a
query that parsed: the runs that may vary (*slots*) are those the full parse shows to be

* the REGISTER name (a plain word, or an IRI of word characters), or
* a constant that the query's algebra template stands for (see :func:`constant_slots`):
  an absolute IRI or a prefixed name inside a group, or a number, or
* a window's stream IRI (a prefixed name or an absolute IRI) or a number of its window
  (``3000ms``, ``PT3S``, ``5``): the dialect pass blanks window clauses from the rewrite,
  so a value of the same length changes only the query's windows, which are read again
  from the values (:func:`_windows`; streams that are equal must stay equal, and a window
  the full parse rejects is parsed in full); a value of another length is another shape,

each exactly one token, of a strict character class (ASCII word characters; an IRI that
passes the IRI check; a number of the same SPARQL terminal), between neighbours that end a
token (white space, brackets, ``,`` ``;``).  Every other run, and all the text between runs,
is fixed.  A query with the same fixed text and runs, and slot values of the slots' classes,
then tokenizes into the same tokens but the slots' texts, and the dialect pass takes the
same path: its dataset clauses, form and dialect are the shape's, its windows the shape's
with its own window slots' values, its name is its own name token's, and its rewrite is the shape's rewrite with its own constants put in
(the template's constants stay verbatim in the rewrite, the name is blanked) and the offset
map of :func:`linkstream.query.lexer.render_spans` shifted by how much longer or shorter each
constant is (a one-character name, blanked to one space of the same length, is no slot).
Its algebra comes from the algebra cache or the shape's template, as for a full parse.

Anything else (another name class, a value the class does not hold, constants whose
equalities differ from the shape's, non-ASCII text, escapes) is parsed in full, so errors
are always found and located by the full parse.
"""

from __future__ import annotations

import dataclasses
import functools
import operator
import re
from collections.abc import Iterator, Sequence
from typing import Any

from linkstream.query.lexer import render_spans
from linkstream.query.template import _NUMBERS, AlgebraTemplate, _valid_iri
from linkstream.query.windows import window_of
from linkstream.rdf.lazyre import lazy
from linkstream.rdf.records import record

#: Word-like runs: IRIs, and words (names, prefixed names, numbers, keywords).
_CANDIDATES = lazy(r"(<[^<>\s]*>|[A-Za-z0-9_:][A-Za-z0-9_.:\-]*)")
_BEFORE_OK = frozenset(" \t\r\n({,;")
_AFTER_OK = frozenset(" \t\r\n)},;")
_WORD = lazy(r"[A-Za-z_][A-Za-z0-9_]*")
_IRI_WORD = lazy(r"<[A-Za-z0-9_\-]+>")
_IRI = lazy(r"<[A-Za-z0-9:/._~%#\-]+>")
_LOCAL = r"[A-Za-z0-9_][A-Za-z0-9_\-]*"
_LOCAL_RE = lazy(_LOCAL)
_ABSOLUTE = lazy(r"[A-Za-z][A-Za-z0-9+.\-]*:")
#: a window word that may vary: digits with fixed letters around them (``3000ms``, ``PT3S``, ``5``)
_WINDOW_WORD = lazy(r"([A-Za-z]*)([0-9]+)([A-Za-z]*)")
_BEFORE_WINDOW = _BEFORE_OK | {"["}
_AFTER_WINDOW = _AFTER_OK | {"]"}
#: :attr:`Slot.placeholder` of a window's stream IRI or window word
WINDOW_SLOT = -2
SHAPES_SIZE = 4096


@record(frozen=True)
class Slot:
    """A run of the shape that may vary: its run index, class, and place in the shape's text."""

    run: int
    pattern: re.Pattern[str]
    start: int
    end: int
    placeholder: int  # the template's placeholder index; -1: the REGISTER name; WINDOW_SLOT


@record(frozen=True)
class Shape:
    """What a full parse of a shape's first query found (see the module docstring)."""

    runs: int
    slots: tuple[Slot, ...]
    #: per template placeholder: the run that gives its text, or its fixed text
    texts: tuple[int | str, ...]
    #: the shape's SPARQL and parser texts cut at its constants (which both keep verbatim)
    sparql_parts: tuple[str, ...]
    parse_parts: tuple[str, ...]
    offset_map: tuple[tuple[int, int, int], ...]  # the shape's (of its SPARQL text)
    template: AlgebraTemplate | None
    compiled: Any
    name: str | None  # the fixed REGISTER name (None: the name slot, or no REGISTER)
    registered: bool
    fields: dict[str, Any]  # the ContinuousQuery fields that every query of the shape shares
    #: per window (of ``fields["windows"]``): its stream's slot (run, prefix IRI or None for
    #: an IRI) or None, and its words (run of a slot, or fixed text) or None (all fixed);
    #: None: no window varies
    window_slots: tuple[tuple[tuple[int, str | None] | None, tuple[int | str, ...] | None], ...] | None = None
    #: which windows' streams are equal (each stream's first index among them)
    stream_eq: tuple[int, ...] = ()


@record(frozen=True)
class Instance:
    """A query of a known shape: its own name, rewrite and template values."""

    shape: Shape
    name: str | None
    sparql: str
    offset_map: Any
    parse_text: str
    texts: list[str]
    windows: tuple[Any, ...] | None = None  # the query's WindowDecls when a window varies


#: shapes by (text between runs, base), then by which runs are fixed and their texts
_SHAPES: dict[
    tuple[str, str], dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[Any, dict[Any, Shape]]]
] = {}


def _split(text: str) -> tuple[str, list[str]] | None:
    if not text.isascii() or "\\" in text:
        return None
    parts = _CANDIDATES.split(text)
    return "\x00".join(parts[0::2]), parts[1::2]


def _class(value: str, placeholder: int, prefixes: dict[str, str]) -> re.Pattern[str] | None:
    """The strict class of a slot's value (None: the value cannot be a slot)."""
    if placeholder < 0:
        return next((rx for rx in (_WORD, _IRI_WORD) if rx.fullmatch(value)), None)
    if value[0] == "<":
        return _IRI if _IRI.fullmatch(value) and _valid_iri(value[1:-1]) else None
    if value[0].isdigit():
        return next((rx for rx, _ in reversed(_NUMBERS) if rx.fullmatch(value)), None)
    prefix, _, local = value.partition(":")
    if prefix not in prefixes or not _LOCAL_RE.fullmatch(local):
        return None
    return _pname_class(prefix)


@functools.lru_cache(maxsize=1024)
def _pname_class(prefix: str) -> re.Pattern[str]:
    return re.compile(re.escape(prefix + ":") + _LOCAL)


#: the ContinuousQuery fields that every query of a shape shares (and its REGISTER name)
_FIELDS = ("name", "dialect", "mode", "form", "windows", "static_from", "static_named", "base")


def learn(
    cq: Any,
    base: str,
    scan: Any,
    spacing: dict[int, str],
    template: AlgebraTemplate | None,
    slots: dict[int, str],
    texts: list[str],
) -> None:
    """Records the shape of a query that parsed in full (see the module docstring).

    Args:
        cq: The query (a ContinuousQuery); ``scan`` its dialect pass, ``spacing`` the
            parser text's extra changes.
        template: The algebra template of the query (None: its parser text is its own),
            ``slots`` its constant tokens (token index -> placeholder), ``texts`` their
            distinct texts in placeholder order.
    """
    text = cq.text
    name_token = None
    if scan.register is not None:
        name_token = scan.sig[scan.sig.index(scan.toks.index(scan.register)) + 2]
    prefixes = scan.prefixes
    fields = {f: getattr(cq, f) for f in _FIELDS}
    split = _split(text)
    if split is None:
        return
    fixed_name = fields.pop("name")
    between, runs = split
    starts: dict[int, int] = {}
    pos = 0
    for k, part in enumerate(_CANDIDATES.split(text)):
        if k % 2:
            starts[pos] = k // 2
        pos += len(part)
    toks = scan.toks
    occurrences: list[tuple[int, int]] = [(i, texts.index(toks[i].text)) for i in slots] if template else []
    if name_token is not None:
        occurrences.append((name_token, -1))
    chosen: dict[int, list[Slot]] = {}
    blocked: set[int] = set()
    for i, k in occurrences:
        t = toks[i]
        run = starts.get(t.start)
        rx = None
        if (
            run is not None
            and runs[run] == t.text
            and 0 < t.start
            and t.end < len(text)
            and text[t.start - 1] in _BEFORE_OK
            and text[t.end] in _AFTER_OK
        ):
            rx = _class(t.text, k, prefixes)
        if k < 0 and len(t.text) == 1:  # blanked to one space: no piece of its own in the map
            rx = None
        if rx is None or run is None:  # (a class is only chosen for a run)
            blocked.add(k)
        else:
            chosen.setdefault(k, []).append(Slot(run, rx, t.start, t.end, k))
    window_slots, wslots = _window_slots(scan, text, runs, starts, prefixes)
    varying = sorted(
        [*(s for k, ss in chosen.items() if k not in blocked for s in ss), *wslots], key=lambda s: s.start
    )
    sparql_spans = scan.change_spans(decode=False)
    parse_spans = scan.change_spans(decode=True, extra=spacing)
    verbatim = [s for s in varying if s.placeholder >= 0]
    starts_of = {s.start for s in verbatim}
    if any(sp[0] in starts_of for sp in sparql_spans + parse_spans):
        return  # never expected: a template's constant is not rewritten
    sparql, offset_map = render_spans(text, sparql_spans)
    parse_text, parse_map = render_spans(text, parse_spans)
    sparql_parts = _cut(sparql, offset_map, verbatim, text)
    parse_parts = _cut(parse_text, parse_map, verbatim, text)
    if sparql_parts is None or parse_parts is None or sparql != cq.sparql:
        return  # never expected: a constant outside the linear pieces of the map
    slot_runs = {s.run for s in varying}
    fixed_runs = tuple(k for k in range(len(runs)) if k not in slot_runs)
    per_placeholder: list[int | str] = list(texts) if template else []
    for s in varying:
        if s.placeholder >= 0:
            per_placeholder[s.placeholder] = s.run
    name_slot = -1 in chosen and -1 not in blocked
    shape = Shape(
        runs=len(runs),
        slots=tuple(varying),
        texts=tuple(per_placeholder),
        sparql_parts=sparql_parts,
        parse_parts=parse_parts,
        offset_map=offset_map,
        template=template,
        compiled=cq.algebra,
        name=None if name_slot else fixed_name,
        registered=name_token is not None,
        fields=fields,
        window_slots=window_slots if wslots else None,
        stream_eq=_equalities([d.stream for d in fields["windows"]]),
    )
    global _COUNT
    if _COUNT >= SHAPES_SIZE:
        _SHAPES.clear()
        _COUNT = 0
    by_fixed = _SHAPES.setdefault((between, base), {})
    # a window slot's value keeps its length (see :func:`_window_slots`): the lengths are
    # part of the key, so a window of another length has a shape of its own
    sized = tuple(sl.run for sl in varying if sl.placeholder == WINDOW_SLOT)
    getter = _key_getter(fixed_runs, sized)
    shapes = by_fixed.setdefault((fixed_runs, sized), (getter, {}))[1]
    if shapes.setdefault(getter(runs), shape) is shape:
        _COUNT += 1


_COUNT = 0


def _window_slots(
    scan: Any, text: str, runs: list[str], starts: dict[int, int], prefixes: dict[str, str]
) -> tuple[tuple[tuple[tuple[int, str | None] | None, tuple[int | str, ...] | None], ...], list[Slot]]:
    """The runs of the query's window clauses that may vary: each window's stream IRI (a
    prefixed name of a declared prefix, or an absolute IRI) and its numbers (``3000ms``,
    ``PT3S``, ``5``), each one token between neighbours that end a token.  The dialect pass
    blanks window clauses from the rewrite, so a value of the slot's length leaves the
    rewrite and its offset map as they are; only the query's windows change."""
    toks, sig = scan.toks, scan.sig

    def run_of(j: int) -> tuple[int | None, Any]:
        t = toks[sig[j]]
        run = starts.get(t.start)
        if (
            run is None
            or runs[run] != t.text
            or t.start == 0
            or t.end >= len(text)
            or text[t.start - 1] not in _BEFORE_WINDOW
            or text[t.end] not in _AFTER_WINDOW
        ):
            return None, t
        return run, t

    per_window = []
    slots: list[Slot] = []
    for js, jo, jc in scan.window_toks:
        stream: tuple[int, str | None] | None = None
        run, t = run_of(js)
        if run is not None:
            v = t.text
            if v[0] == "<":
                if _IRI.fullmatch(v) and _ABSOLUTE.match(v, 1):
                    stream = (run, None)
                    slots.append(Slot(run, _IRI, t.start, t.end, WINDOW_SLOT))
            else:
                prefix, _, local = v.partition(":")
                if prefix in prefixes and _LOCAL_RE.fullmatch(local):
                    stream = (run, prefixes[prefix])
                    slots.append(Slot(run, _pname_class(prefix), t.start, t.end, WINDOW_SLOT))
        words: list[int | str] = []
        for j in range(jo + 1, jc):
            run, t = run_of(j)
            m = _WINDOW_WORD.fullmatch(t.text) if run is not None else None
            if run is None or m is None:
                words.append(t.text)
            else:
                words.append(run)
                slots.append(Slot(run, _word_class(m[1], m[3]), t.start, t.end, WINDOW_SLOT))
        varying = any(isinstance(w, int) for w in words)
        per_window.append((stream, tuple(words) if varying else None))
    return tuple(per_window), slots


def _key_getter(fixed_runs: tuple[int, ...], sized: tuple[int, ...]) -> Any:
    """The key of a query's runs among the shapes of ``fixed_runs`` and ``sized``: the
    fixed runs' texts, and the lengths of the window slots' values."""
    fixed = operator.itemgetter(*fixed_runs) if fixed_runs else (lambda xs: ())
    if not sized:
        return fixed
    return lambda xs: (fixed(xs), tuple(len(xs[r]) for r in sized))


@functools.lru_cache(maxsize=256)
def _word_class(before: str, after: str) -> re.Pattern[str]:
    return re.compile(re.escape(before) + "[0-9]+" + re.escape(after))


def _equalities(values: list[str]) -> tuple[int, ...]:
    return tuple(values.index(v) for v in values)


def _windows(shape: Shape, runs: list[str]) -> tuple[Any, ...] | None:
    """The windows of a query of ``shape`` whose window clauses vary (None: parse it in
    full: a window the parse rejects, or streams whose equalities differ from the shape's)."""
    assert shape.window_slots is not None
    out = []
    for decl, (stream, words) in zip(shape.fields["windows"], shape.window_slots, strict=True):
        s, spec = decl.stream, decl.spec
        if stream is not None:
            v = runs[stream[0]]
            if stream[1] is None:
                s = v[1:-1]
                if not _ABSOLUTE.match(s):
                    return None
            else:
                s = stream[1] + v.partition(":")[2]
        if words is not None:
            spec = window_of(tuple(runs[w] if isinstance(w, int) else w for w in words))
            if spec is None:
                return None
        out.append(
            decl if s == decl.stream and spec == decl.spec else dataclasses.replace(decl, stream=s, spec=spec)
        )
    if _equalities([d.stream for d in out]) != shape.stream_eq:
        return None
    return tuple(out)


def instance(text: str, base: str) -> Instance | None:
    """The query ``text`` as an instance of a known shape, or None (parse it in full)."""
    split = _split(text)
    if split is None:
        return None
    between, runs = split
    by_fixed = _SHAPES.get((between, base))
    if not by_fixed:
        return None
    shape = None
    for (fixed_runs, sized), (getter, shapes) in list(by_fixed.items()):  # (learn may add one meanwhile)
        if (not fixed_runs or fixed_runs[-1] < len(runs)) and (not sized or sized[-1] < len(runs)):
            shape = shapes.get(getter(runs))
            if shape is not None and shape.runs == len(runs):
                break
            shape = None
    if shape is None:
        return None
    name = shape.name
    deltas: list[tuple[int, int, bool]] = []  # (start in the shape's text, length change, verbatim)
    values: list[str] = []  # of the verbatim constants, in text order
    seen: dict[int, str] = {}
    for s in shape.slots:
        v = runs[s.run]
        if not s.pattern.fullmatch(v):
            return None
        if s.placeholder == WINDOW_SLOT:
            if len(v) != s.end - s.start:
                return None  # the blanked window clause would change length
            continue
        if s.placeholder < 0:
            if len(v) == 1:
                return None  # blanked to one space: no piece of its own in the map
            name = v[1:-1] if v[0] == "<" else v
        else:
            if seen.setdefault(s.placeholder, v) != v:
                return None  # equal constants of the shape must stay equal
            values.append(v)
        deltas.append((s.start, len(v) - (s.end - s.start), s.placeholder >= 0))
    texts = [runs[t] if isinstance(t, int) else t for t in shape.texts]
    if len(set(texts)) != len(texts):
        return None  # unequal constants of the shape must stay unequal
    windows = None
    if shape.window_slots is not None:
        windows = _windows(shape, runs)
        if windows is None:
            return None
    sparql = _join(shape.sparql_parts, values)
    parse_text = _join(shape.parse_parts, values)
    return Instance(shape, name, sparql, ShiftedMap(shape.offset_map, deltas), parse_text, texts, windows)


def _cut(out: str, pieces: Any, slots: list[Slot], text: str) -> tuple[str, ...] | None:
    """``out`` (a rendering of the shape's text) without its verbatim constants ``slots``."""
    parts, at = [], 0
    for s in slots:
        o = next((p + s.start - src for p, src, n in pieces if n >= 0 and src <= s.start < src + n), None)
        if o is None or out[o : o + s.end - s.start] != text[s.start : s.end]:
            return None
        parts.append(out[at:o])
        at = o + s.end - s.start
    parts.append(out[at:])
    return tuple(parts)


def _join(parts: tuple[str, ...], values: list[str]) -> str:
    if not values:
        return parts[0]
    out = [parts[0]]
    for v, p in zip(values, parts[1:], strict=True):
        out.append(v)
        out.append(p)
    return "".join(out)


class ShiftedMap(Sequence[tuple[int, int, int]]):
    """An instance's offset map (:data:`~linkstream.query.lexer.OffsetMap`): the shape's,
    shifted by :func:`_shift` when first read.  Only an error located in the rewritten text
    reads it, so most queries never pay for it (shifting every instance's map was ~15% of a
    coordinator's CPU while 10,000 queries were registered).  Equal to the tuple it stands
    for; unhashable (``__eq__`` without ``__hash__``), as a list."""

    __slots__ = ("_pieces", "_deltas", "_done")

    def __init__(self, pieces: Any, deltas: list[tuple[int, int, bool]]) -> None:
        self._pieces, self._deltas = pieces, deltas
        self._done: tuple[tuple[int, int, int], ...] | None = None

    def _map(self) -> tuple[tuple[int, int, int], ...]:
        if self._done is None:
            self._done = tuple(_shift(self._pieces, self._deltas))
        return self._done

    def __len__(self) -> int:
        return len(self._map())

    def __getitem__(self, i: Any) -> Any:
        return self._map()[i]

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return iter(self._map())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ShiftedMap):
            other = other._map()
        return self._map() == other

    def __repr__(self) -> str:
        return repr(self._map())


def _shift(pieces: Any, deltas: list[tuple[int, int, bool]]) -> Any:
    """The shape's offset map for a query whose constants are ``deltas`` longer (what
    :func:`render_spans` gives: a verbatim constant lengthens its linear piece and moves
    what follows; the blanked name, in a piece of its own, moves only the text after it)."""
    if not any(d for _, d, _ in deltas):
        return pieces
    out = []
    k, n, cum_src, cum_out = 0, len(deltas), 0, 0
    for pos, src, length in pieces:
        while k < n and deltas[k][0] < src:
            cum_src += deltas[k][1]
            cum_out += deltas[k][1] if deltas[k][2] else 0
            k += 1
        inner = 0
        if length > 0:
            j = k
            while j < n and deltas[j][0] < src + length:
                inner += deltas[j][1] if deltas[j][2] else 0
                j += 1
        out.append((pos + cum_out, src + cum_src, length + inner if length >= 0 else length))
    return tuple(out)
