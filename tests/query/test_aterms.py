"""The algebra's own term and path classes (``linkstream.query.aterms``): what a query read
back from the parse cache is made of, instead of rdflib's.  Each behaves as rdflib's class
of its name does for the readers of an algebra (value, equality, hash, repr, attributes),
``isinstance`` with them also accepts rdflib's objects, and a term of one kind never equals
one of the other (two rdflib classes never compare equal either)."""

from __future__ import annotations

import pytest
import rdflib
from rdflib import paths as rpaths

from linkstream.query import aterms as A

EX = "http://example.org/"
XSD_INT = EX + "int"


def pairs() -> list[tuple[object, object]]:
    return [
        (A.URIRef(EX + "a"), rdflib.URIRef(EX + "a")),
        (A.Variable("x"), rdflib.Variable("x")),
        (A.BNode("b0"), rdflib.BNode("b0")),
        (A.Literal("01", datatype=A.URIRef(XSD_INT)), rdflib.Literal("01", datatype=rdflib.URIRef(XSD_INT))),
        (A.Literal("chat", lang="fr"), rdflib.Literal("chat", lang="fr")),
        (A.Literal("plain"), rdflib.Literal("plain")),
    ]


@pytest.mark.parametrize("ours, theirs", pairs(), ids=lambda x: repr(x))
def test_a_term_behaves_as_rdflibs(ours: object, theirs: object) -> None:
    assert str(ours) == str(theirs) and repr(ours) == repr(theirs) and hash(ours) == hash(theirs)
    assert isinstance(ours, str)
    assert isinstance(theirs, getattr(A, type(theirs).__name__))  # rdflib's passes our check
    assert not isinstance(ours, type(theirs))  # (rdflib's own check is rdflib's business)
    assert ours == type(ours)(*_args(ours)) and not ours != type(ours)(*_args(ours))
    assert ours != theirs and theirs != ours and ours != str(ours)  # kinds never mix
    if isinstance(theirs, rdflib.Literal):
        assert (ours.language, str(ours.datatype) if ours.datatype is not None else None) == (  # type: ignore[attr-defined]
            theirs.language,
            str(theirs.datatype) if theirs.datatype is not None else None,
        )


def _args(t: object) -> tuple[object, ...]:
    if isinstance(t, A.Literal):
        return (str(t), t.language, t.datatype)
    return (str(t),)


def test_terms_of_one_class_only_are_equal() -> None:
    a, v, b = A.URIRef("x"), A.Variable("x"), A.BNode("x")
    assert len({a, v, b}) == 3 and a != v and v != b and a != b
    assert A.Literal("1", datatype=A.URIRef(XSD_INT)) != A.Literal("1")
    assert A.Literal("a", lang="EN") == A.Literal("a", lang="en")  # (as rdflib: case-blind tags)
    assert A.Literal("a", lang="en") != A.Literal("a", lang="de")
    assert A.Literal("a", lang="EN") in {A.Literal("a", lang="en")}


def test_paths_behave_as_rdflibs() -> None:
    p, q = rdflib.URIRef(EX + "p"), rdflib.URIRef(EX + "q")
    theirs = [
        rpaths.InvPath(p),
        rpaths.SequencePath(p, q),
        rpaths.AlternativePath(p, q),
        rpaths.MulPath(p, "*"),
        rpaths.NegatedPath(rpaths.AlternativePath(p, rpaths.InvPath(q))),
    ]
    for t in theirs:
        ours = A.PATHS[type(t).__name__].__new__(A.PATHS[type(t).__name__])
        ours.__dict__.update(t.__dict__)
        assert repr(ours) == repr(t) and hash(ours) == hash(t) and ours == t
        assert isinstance(t, A.Path) and isinstance(t, type(ours)) and isinstance(ours, A.Path)
        assert not any(isinstance(t, c) for c in A.PATHS.values() if c is not type(ours))
    assert (A.ZeroOrMore, A.OneOrMore, A.ZeroOrOne) == (rpaths.ZeroOrMore, rpaths.OneOrMore, rpaths.ZeroOrOne)
