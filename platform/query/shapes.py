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
  an absolute IRI or a prefixed name inside a group, or a number,

each exactly one token, of a strict character class (ASCII word characters; an IRI that
passes the IRI check; a number of the same SPARQL terminal), between neighbours that end a
token (white space, brackets, ``,`` ``;``).  Every other run, and all the text between runs,
is fixed.  A query with the same fixed text and runs, and slot values of the slots' classes,
then tokenizes into the same tokens but the slots' texts, and the dialect pass takes the
same path: its windows, dataset clauses, form and dialect are the shape's, its name is its
own name token's, and its rewrite is the shape's rewrite of the same tokens, shifted by how
much longer or shorter each slot value is (:func:`linkstream.query.lexer.render_spans`).
Its algebra comes from the algebra cache or the shape's template, as for a full parse.

Anything else (another name class, a value the class does not hold, constants whose
equalities differ from the shape's, non-ASCII text, escapes) is parsed in full, so errors
are always found and located by the full parse.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from typing import Any

from linkstream.query.lexer import Span, render_spans
from linkstream.query.template import _NUMBERS, AlgebraTemplate, _valid_iri

#: Word-like runs: IRIs, and words (names, prefixed names, numbers, keywords).
_CANDIDATES = re.compile(r"(<[^<>\s]*>|[A-Za-z0-9_:][A-Za-z0-9_.:\-]*)")
_BEFORE_OK = frozenset(" \t\r\n({,;")
_AFTER_OK = frozenset(" \t\r\n)},;")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_IRI_WORD = re.compile(r"<[A-Za-z0-9_\-]+>")
_IRI = re.compile(r"<[A-Za-z0-9:/._~%#\-]+>")
_LOCAL = r"[A-Za-z0-9_][A-Za-z0-9_\-]*"
SHAPES_SIZE = 4096


@dataclass(frozen=True)
class Slot:
    """A run of the shape that may vary: its run index, class, and place in the shape's text."""

    run: int
    pattern: re.Pattern[str]
    start: int
    end: int
    placeholder: int  # the template's placeholder index; -1: the REGISTER name


@dataclass(frozen=True)
class Shape:
    """What a full parse of a shape's first query found (see the module docstring)."""

    runs: int
    slots: tuple[Slot, ...]
    #: per template placeholder: the run that gives its text, or its fixed text
    texts: tuple[int | str, ...]
    sparql_spans: tuple[Span, ...]
    parse_spans: tuple[Span, ...]
    template: AlgebraTemplate | None
    compiled: Any
    name: str | None  # the fixed REGISTER name (None: the name slot, or no REGISTER)
    registered: bool
    fields: dict[str, Any]  # the ContinuousQuery fields that every query of the shape shares


@dataclass(frozen=True)
class Instance:
    """A query of a known shape: its own name, rewrite and template values."""

    shape: Shape
    name: str | None
    sparql: str
    offset_map: Any
    parse_text: str
    texts: list[str]


#: shapes by (text between runs, base), then by which runs are fixed and their texts
_SHAPES: dict[tuple[str, str], dict[tuple[int, ...], tuple[Any, dict[Any, Shape]]]] = {}


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
    if prefix not in prefixes or not re.fullmatch(_LOCAL, local):
        return None
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
        if rx is None:
            blocked.add(k)
        else:
            chosen.setdefault(k, []).append(Slot(run, rx, t.start, t.end, k))  # type: ignore[arg-type]
    varying = sorted((s for k, ss in chosen.items() if k not in blocked for s in ss), key=lambda s: s.start)
    sparql_spans = tuple(scan.change_spans(decode=False))
    parse_spans = tuple(scan.change_spans(decode=True, extra=spacing))
    starts_of = {s.start for s in varying if s.placeholder >= 0}
    if any(sp[0] in starts_of for sp in sparql_spans + parse_spans):
        return  # never expected: a template's constant is not rewritten
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
        sparql_spans=sparql_spans,
        parse_spans=parse_spans,
        template=template,
        compiled=cq.algebra,
        name=None if name_slot else fixed_name,
        registered=name_token is not None,
        fields=fields,
    )
    global _COUNT
    if _COUNT >= SHAPES_SIZE:
        _SHAPES.clear()
        _COUNT = 0
    by_fixed = _SHAPES.setdefault((between, base), {})
    getter = operator.itemgetter(*fixed_runs) if fixed_runs else (lambda xs: ())
    shapes = by_fixed.setdefault(fixed_runs, (getter, {}))[1]
    if shapes.setdefault(getter(runs), shape) is shape:
        _COUNT += 1


_COUNT = 0


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
    for fixed_runs, (getter, shapes) in by_fixed.items():
        if not fixed_runs or fixed_runs[-1] < len(runs):
            shape = shapes.get(getter(runs))
            if shape is not None and shape.runs == len(runs):
                break
            shape = None
    if shape is None:
        return None
    name = shape.name
    deltas: list[tuple[int, int]] = []  # (start in the shape's text, length change)
    seen: dict[int, str] = {}
    for s in shape.slots:
        v = runs[s.run]
        if not s.pattern.fullmatch(v):
            return None
        if s.placeholder < 0:
            name = v[1:-1] if v[0] == "<" else v
        elif seen.setdefault(s.placeholder, v) != v:
            return None  # equal constants of the shape must stay equal
        deltas.append((s.start, len(v) - (s.end - s.start)))
    texts = [runs[t] if isinstance(t, int) else t for t in shape.texts]
    if len(set(texts)) != len(texts):
        return None  # unequal constants of the shape must stay unequal
    sparql, offset_map = render_spans(text, _shift(shape.sparql_spans, deltas))
    parse_text = render_spans(text, _shift(shape.parse_spans, deltas))[0]
    return Instance(shape, name, sparql, offset_map, parse_text, texts)


def _shift(spans: tuple[Span, ...], deltas: list[tuple[int, int]]) -> list[Span]:
    """The shape's rewritten spans in a query whose slots are ``deltas`` longer."""
    if not any(d for _, d in deltas):
        return list(spans)
    out: list[Span] = []
    k, shift, n = 0, 0, len(deltas)
    for start, end, new in spans:
        while k < n and deltas[k][0] < start:
            shift += deltas[k][1]
            k += 1
        own = deltas[k][1] if k < n and deltas[k][0] == start else 0  # the blanked name itself
        out.append((start + shift, end + shift + own, new))
    return out
