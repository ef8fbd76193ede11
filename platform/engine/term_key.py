"""Operator signatures with dictionary ids replaced by their terms' text.

Sharing orders a join's canonically renamed inputs by their signatures (the canonical
variable names and the shared operators follow from that order).  A signature holds
dictionary ids (a scan's ``("const", id)`` slots, a filter's :class:`Const`, a route's
hidden constants), and two engines number terms differently: a live run numbers them as
queries and elements come, a new leader's run plans every query first.  Ordered by the
ids, the same query got its inputs in another order in the two engines, so its task
snapshot did not fit the new plan (the state check, :func:`linkstream.operators.state`'s
fingerprints, catches it: the query is rebuilt, not restored).  Ordered by
:func:`term_key`, the order depends on the terms only: the same in every engine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from linkstream.query.expressions import Const, Expr

#: decodes one dictionary id to its term's text
Decode = Callable[[int], str]


def term_key(sig: object, text: Decode) -> str:
    """A sort key for operator signature ``sig`` that holds terms where ``sig`` holds ids."""
    return repr(_sig(sig, text))


def _sig(sig: object, text: Decode) -> object:
    # an interned operator's signature: (class name, variables, configuration, children's)
    if not (
        isinstance(sig, tuple) and len(sig) == 4 and isinstance(sig[0], str) and isinstance(sig[3], tuple)
    ):
        return _value(sig, text)
    name, vars_, cfg, kids = sig
    if name == "RouteOperator":  # ((ranges, ((hidden variable, id), ...)), certain)
        (ranges, consts), certain = cfg
        cfg = ((ranges, tuple((h, ("const", v)) for h, v in consts)), certain)
    return (name, vars_, _value(cfg, text), tuple(_sig(k, text) for k in kids))


def _value(x: Any, text: Decode) -> object:
    if isinstance(x, (tuple, list)):
        if len(x) == 2 and x[0] == "const" and _is_id(x[1]):
            return ("const", text(int(x[1])))  # a pattern slot
        return tuple(_value(y, text) for y in x)
    if isinstance(x, Const):
        return ("Const", repr(x.term))
    if isinstance(x, Expr) and dataclasses.is_dataclass(x):
        return (type(x).__name__, tuple(_value(getattr(x, f.name), text) for f in dataclasses.fields(x)))
    if isinstance(x, frozenset):
        return tuple(sorted(repr(_value(y, text)) for y in x))
    return x


def _is_id(v: object) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def decoder(dictionary: Any) -> Decode:
    """A memoised id -> text function over ``dictionary`` (an id it cannot decode -- 0, a
    placeholder -- stands for itself)."""
    memo: dict[int, str] = {}

    def text(i: int) -> str:
        t = memo.get(i)
        if t is None:
            try:
                t = memo[i] = dictionary.decode_many([i])[0]
            except (KeyError, IndexError):
                return f"#{i}"
        return t

    return text


#: entries :class:`TermKeys` keeps for plain keys before it starts again (keys of leaves
#: and windows: a few per query shape and constant)
PLAIN_KEYS_MAX = 50_000


class TermKeys:
    """:func:`term_key` over one decoder, remembered where the answer cannot change.

    Registration asks for the same keys again and again: every query of a shape sorts the
    inputs of its join by their shared operators' signatures, and its routed leaves by
    keys made of a stream IRI and a pattern.  Re-rendering them was ~13% of the engine's
    CPU while 10,000 CityBench template queries were registered.

    * :meth:`of_op`: an interned operator's signature is a tuple set once (a switch gets a
      new one), so its key is kept on the operator with the signature object and the
      decoder it was made for, and reused only while both are the same objects;
    * :meth:`plain`: a key built of strings, ints (ids, not bools) and tuples of them only
      (:func:`plain_value`) is kept in a dict: equal such values render equally (a
      ``bool``, equal to ``0``/``1`` but rendered otherwise, or any other type, is never
      looked up).

    A dictionary gives a term one id for the life of a deployment, so the text of an id
    does not change.
    """

    def __init__(self, text: Decode) -> None:
        self.text = text
        self._plain: dict[tuple, str] = {}

    def of_op(self, op: Any) -> str:
        """``term_key(op.sig, text)`` for an interned operator ``op``."""
        sig = op.sig
        got = op.__dict__.get("_term_key")
        if got is not None and got[0] is sig and got[1] is self.text:
            return got[2]
        key = term_key(sig, self.text)
        op._term_key = (sig, self.text, key)
        return key

    def plain(self, sig: tuple) -> str:
        """``term_key(sig, text)``, remembered when ``sig`` is a :func:`plain_value`."""
        if not plain_value(sig):
            return term_key(sig, self.text)
        got = self._plain.get(sig)
        if got is None:
            if len(self._plain) >= PLAIN_KEYS_MAX:
                self._plain.clear()
            got = self._plain[sig] = term_key(sig, self.text)
        return got


def plain_value(x: object) -> bool:
    """Whether ``x`` is a ``str``, an ``int`` (not a ``bool``) or a tuple of such values."""
    if not isinstance(x, tuple) or type(x) is not tuple:
        return type(x) is str or type(x) is int
    for y in x:  # (a loop, not all() over a generator: this runs for every routed leaf)
        t = type(y)
        if t is tuple:
            if not plain_value(y):
                return False
        elif t is not str and t is not int:
            return False
    return True
