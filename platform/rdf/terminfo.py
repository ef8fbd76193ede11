"""Per-id facts about terms that expression evaluation needs, as numpy arrays.

For every dictionary id the engine has seen, :class:`TermInfo` keeps the term kind and,
for numeric literals, the value and the numeric type, so that comparisons and arithmetic
over id columns are numpy operations.  Decoding to :class:`~linkstream.rdf.terms.Term`
objects happens only on the slow path (string functions, ordering) and is cached.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from linkstream.rdf.dictionary import Dictionary
from linkstream.rdf.terms import (
    INTEGER_TYPES,
    IRI,
    KIND_BNODE,
    KIND_IRI,
    KIND_LITERAL,
    NUMERIC_TYPES,
    XSD_BOOLEAN,
    XSD_DECIMAL,
    XSD_DOUBLE,
    XSD_FLOAT,
    BNode,
    Literal,
    Term,
    parse_term,
)

NUM_NONE, NUM_INTEGER, NUM_DECIMAL, NUM_FLOAT, NUM_DOUBLE = 0, 1, 2, 3, 4
NUM_TYPE_IRI = {
    NUM_INTEGER: INTEGER_TYPES,
    NUM_DECIMAL: XSD_DECIMAL,
    NUM_FLOAT: XSD_FLOAT,
    NUM_DOUBLE: XSD_DOUBLE,
}


def numeric_code(t: Term) -> tuple[int, float]:
    if isinstance(t, Literal) and t.lang is None:
        return numeric_code_of(t.lex, t.datatype)
    return NUM_NONE, 0.0


def numeric_code_of(lex: str, dt: str) -> tuple[int, float]:
    """:func:`numeric_code` of the literal ``lex`` typed ``dt`` (no language tag)."""
    try:
        if dt in INTEGER_TYPES:
            return NUM_INTEGER, float(int(lex.strip()))
        if dt == XSD_DECIMAL:
            s = lex.strip()
            if "e" in s.lower() or "n" in s.lower():
                return NUM_NONE, 0.0
            return NUM_DECIMAL, float(s)
        if dt == XSD_DOUBLE or dt == XSD_FLOAT:
            s = lex.strip()
            v = float({"INF": "inf", "-INF": "-inf", "+INF": "inf"}.get(s, s))
            if s.lower() in ("infinity", "-infinity", "+infinity", "nan") and s != "NaN":
                return NUM_NONE, 0.0
            return (NUM_DOUBLE if dt == XSD_DOUBLE else NUM_FLOAT), v
    except (ValueError, OverflowError):
        return NUM_NONE, 0.0
    return NUM_NONE, 0.0


#: the datatypes whose literals :meth:`TermInfo._grow` reads (numeric and boolean)
_READ_TYPES = NUMERIC_TYPES | {XSD_BOOLEAN}
_KIND_OF_FIRST = np.full(256, KIND_LITERAL, dtype=np.int8)
_KIND_OF_FIRST[ord("<")] = KIND_IRI
_KIND_OF_FIRST[ord("_")] = KIND_BNODE


class TermInfo:
    """Per-id arrays ``kind``, ``num_type``, ``num_val``, ``bool_val``, filled on demand.

    :meth:`ensure` makes the arrays cover the ids asked for: they grow to the dictionary's
    size at once, but a term is decoded and read only when an id of it is first asked for
    (``_known``) -- a query's filter reads the few terms of its columns, not every term of
    a 40k-term static graph at its first report.
    """

    def __init__(self, dictionary: Dictionary) -> None:
        self.dictionary = dictionary
        self.kind = np.zeros(1, dtype=np.int8)
        self.num_type = np.zeros(1, dtype=np.int8)
        self.num_val = np.zeros(1, dtype=np.float64)
        self.bool_val = np.full(1, -1, dtype=np.int8)  # -1: not a valid xsd:boolean
        #: whether an id's entries are read (id 0, unbound, is: kind 0, not numeric)
        self._known = np.ones(1, dtype=bool)
        self._terms: dict[int, Term] = {}
        self._true = 0
        self._false = 0

    @property
    def size(self) -> int:
        return int(self.kind.shape[0])

    def ensure(self, ids: np.ndarray) -> None:
        """Make sure the arrays hold the entries of every id in ``ids``."""
        if len(ids) == 0:
            return
        top = int(ids.max())
        if top >= self.size:
            self._extend(top + 1)
        elif self._known.take(ids).all():
            return
        self._read(ids)

    def truncate(self, keep: int) -> None:
        """Forgets the ids from ``keep`` on (the arrays end there)."""
        self.kind = self.kind[:keep]
        self.num_type = self.num_type[:keep]
        self.num_val = self.num_val[:keep]
        self.bool_val = self.bool_val[:keep]
        self._known = self._known[:keep]

    def _extend(self, n: int) -> None:
        """Arrays of at least ``n`` entries (the new ones not read yet)."""
        n = max(n, len(self.dictionary) + 1, self.size)
        m = n - self.size
        if m <= 0:
            return
        self.kind = np.concatenate([self.kind, np.zeros(m, dtype=np.int8)])
        self.num_type = np.concatenate([self.num_type, np.zeros(m, dtype=np.int8)])
        self.num_val = np.concatenate([self.num_val, np.zeros(m, dtype=np.float64)])
        self.bool_val = np.concatenate([self.bool_val, np.full(m, -1, dtype=np.int8)])
        self._known = np.concatenate([self._known, np.zeros(m, dtype=bool)])

    def _read(self, ids: np.ndarray) -> None:
        """Reads the terms of the ids in ``ids`` not read yet."""
        ids = np.asarray(ids, dtype=np.int64).ravel()
        new = np.sort(ids.compress(~self._known.take(ids)))
        if not len(new):
            return
        if len(new) > 1:  # (np.unique would import numpy.ma: 0.08 s once)
            new = new.compress(np.concatenate(([True], new[1:] != new[:-1])))
        texts = self.dictionary.decode_many(new)
        # a term's kind is its first character's (every rendering starts with an ASCII one)
        firsts = "".join([t[:1] for t in texts]).encode("ascii", "replace")
        self.kind[new] = _KIND_OF_FIRST[np.frombuffer(firsts, dtype=np.uint8)]
        ntype, nval, bval = self.num_type, self.num_val, self.bool_val
        # typed literals: the only terms that can be numeric / boolean
        at = new.tolist()
        for k in [k for k, t in enumerate(texts) if t[-1:] == ">" and t[:1] == '"']:
            s = texts[k]
            j = s.rfind('"^^<')
            if j > 0 and "\\" not in s:  # as the dictionary renders it: no escape to undo
                lex, dt = s[1:j], s[j + 4 : -1]
            else:
                t = parse_term(s)
                if not isinstance(t, Literal) or t.lang is not None:
                    continue
                lex, dt = t.lex, t.datatype
            if dt not in _READ_TYPES:
                continue
            i = at[k]
            ntype[i], nval[i] = numeric_code_of(lex, dt)
            if dt == XSD_BOOLEAN:
                bval[i] = 1 if lex in ("true", "1") else 0 if lex in ("false", "0") else -1
        self._known[new] = True

    def term(self, i: int) -> Term:
        t = self._terms.get(i)
        if t is None:
            t = parse_term(self.dictionary.decode_many([i])[0])
            if len(self._terms) > 500_000:
                self._terms.clear()
            self._terms[i] = t
        return t

    def terms(self, ids: Sequence[int]) -> list[Term | None]:
        return [None if i == 0 else self.term(int(i)) for i in ids]

    def encode(self, terms: Sequence[Term]) -> np.ndarray:
        ids = self.dictionary.encode_many([t.n3() for t in terms])
        for i, t in zip(ids.tolist(), terms):
            self._terms.setdefault(i, t)
        return ids

    def encode_one(self, t: Term) -> int:
        return int(self.encode([t])[0])

    def boolean_ids(self) -> tuple[int, int]:
        if not self._true:
            self._true = self.encode_one(Literal("true", XSD_BOOLEAN))
            self._false = self.encode_one(Literal("false", XSD_BOOLEAN))
        return self._true, self._false


__all__ = ["TermInfo", "numeric_code", "IRI", "BNode", "Literal"]
