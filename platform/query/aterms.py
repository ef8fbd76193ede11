"""The terms and property paths of a query's algebra, without importing rdflib.

rdflib's parser builds an algebra of ``rdflib.term`` objects (``URIRef``, ``Variable``,
``BNode``, ``Literal``) and ``rdflib.paths`` objects.  A query read back from the parse
cache (:mod:`.algebra_json`) is made of the classes below instead, so that a replay whose
queries are all cached never imports rdflib (~0.07 s of a short process's 0.26 s).

They behave as rdflib's do for every reader of an algebra: ``str`` subclasses with the
same value, equality (same class and string; literals: datatype and language too), hash,
``repr`` and attributes (``Literal.datatype`` / ``.language``; a path's ``arg`` / ``args``
/ ``path`` / ``mod``).  And ``isinstance(x, URIRef)`` with *these* classes also holds for
rdflib's class of the same name when rdflib is loaded (as :func:`.algebra_json.is_node`
does for nodes), so code that walks an algebra imports its classes from here and reads
both kinds of tree.  A term of one kind never equals one of the other (as two rdflib
classes never compare equal); the planner turns both into the same plan.
"""

from __future__ import annotations

import sys
from typing import Any


class _Kind(type):
    """``isinstance(x, K)``: ``x`` is a ``K``, or an object of rdflib's class of K's name
    (module ``K._rdflib``) when that module is loaded."""

    _rdflib: str

    def __instancecheck__(cls, x: Any) -> bool:
        if type.__instancecheck__(cls, x):
            return True
        m = sys.modules.get(cls._rdflib)
        return m is not None and isinstance(x, getattr(m, cls.__name__))


class _Ident(str, metaclass=_Kind):
    _rdflib = "rdflib.term"
    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    __hash__ = str.__hash__  # (as rdflib's)

    def __repr__(self) -> str:
        return f"rdflib.term.{type(self).__name__}({str.__repr__(self)})"


class URIRef(_Ident):
    """An IRI of an algebra (rdflib's ``URIRef``)."""

    __slots__ = ()


class Variable(_Ident):
    """A variable of an algebra (rdflib's ``Variable``: the name without ``?``)."""

    __slots__ = ()


class BNode(_Ident):
    """A blank node label of an algebra (rdflib's ``BNode``)."""

    __slots__ = ()


class Literal(_Ident):
    """A literal of an algebra (rdflib's ``Literal`` made with ``normalize=False``: the
    lexical form as written)."""

    __slots__ = ("datatype", "language")
    datatype: URIRef | None
    language: str | None

    def __new__(cls, value: str, lang: str | None = None, datatype: URIRef | None = None) -> Literal:
        self = str.__new__(cls, value)
        self.language = lang
        self.datatype = datatype
        return self

    def __eq__(self, other: object) -> bool:
        if type(other) is not Literal:
            return False
        return (
            self.datatype == other.datatype
            and (self.language.lower() if self.language else None)
            == (other.language.lower() if other.language else None)
            and str.__eq__(self, other)
        )

    def __hash__(self) -> int:
        res = str.__hash__(self)
        if self.language:
            res ^= hash(self.language.lower())
        if self.datatype is not None:
            res ^= hash(self.datatype)
        return res

    def __repr__(self) -> str:
        args = [str.__repr__(self)]
        if self.language is not None:
            args.append("lang=" + repr(self.language))
        if self.datatype is not None:
            args.append("datatype=" + repr(self.datatype))
        return f"rdflib.term.Literal({', '.join(args)})"


class Path(metaclass=_Kind):
    """A property path of an algebra (rdflib's ``rdflib.paths`` classes); its attributes
    are the rdflib object's, set by :mod:`.algebra_json`."""

    _rdflib = "rdflib.paths"
    arg: Any
    args: list[Any]
    path: Any
    mod: str

    def __hash__(self) -> int:
        return hash(repr(self))

    def __eq__(self, other: object) -> bool:
        return repr(self) == repr(other)


class InvPath(Path):
    def __repr__(self) -> str:
        return "Path(~%s)" % (self.arg,)


class SequencePath(Path):
    def __repr__(self) -> str:
        return "Path(%s)" % " / ".join(str(x) for x in self.args)


class AlternativePath(Path):
    def __repr__(self) -> str:
        return "Path(%s)" % " | ".join(str(x) for x in self.args)


class MulPath(Path):
    def __repr__(self) -> str:
        return "Path(%s%s)" % (self.path, self.mod)


class NegatedPath(Path):
    def __repr__(self) -> str:
        return "Path(! %s)" % ",".join(str(x) for x in self.args)


#: the modifiers of a ``MulPath`` (rdflib's ``ZeroOrMore``, ``OneOrMore``, ``ZeroOrOne``)
ZeroOrMore, OneOrMore, ZeroOrOne = "*", "+", "?"

PATHS: dict[str, type[Path]] = {
    c.__name__: c for c in (InvPath, SequencePath, AlternativePath, MulPath, NegatedPath)
}
