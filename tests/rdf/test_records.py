"""``linkstream.rdf.records.record`` against ``dataclasses.dataclass``: every record class of the
package behaves as the dataclass of the same declaration (construction by position, keyword
and defaults, ``__post_init__``, repr, equality, hash, frozen assignment, copy and pickle,
``dataclasses.fields`` / ``replace`` / ``asdict``).  That a replay creates no other
dataclass, and imports only what it needs: ``tests/cli/test_replay_imports.py``."""

from __future__ import annotations

import copy
import dataclasses
import functools
import importlib
import pickle
import types
from typing import Any

import pytest

from linkstream.rdf import records
from linkstream.rdf.records import record

#: the modules that declare records (all of them are imported by a replay)
MODULES = (
    "linkstream.engine.embedded",
    "linkstream.operators.batch",
    "linkstream.operators.evaluate",
    "linkstream.engine.output",
    "linkstream.engine.planner",
    "linkstream.engine.routeplan",
    "linkstream.engine.sharing",
    "linkstream.operators.aggregate",
    "linkstream.operators.state",
    "linkstream.query.continuous",
    "linkstream.query.expressions",
    "linkstream.query.rules",
    "linkstream.query.functions.dates",
    "linkstream.rdf.terms",
    "linkstream.query.shapes",
    "linkstream.query.windows",
    "linkstream.rdf.streams",
    "linkstream.store.static_results",
    "linkstream.store.transient",
)
for _m in MODULES:
    importlib.import_module(_m)


class V:
    """A test value: hashable, ordered by label, with any attribute (a ``__post_init__``
    reading ``self.cq.name`` gets ``V('cq.name')``)."""

    def __init__(self, label: str) -> None:
        self.label = label

    def __getattr__(self, name: str) -> V:
        if name.startswith("__"):
            raise AttributeError(name)
        return V(f"{self.label}.{name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, V) and other.label == self.label

    def __hash__(self) -> int:
        return hash(("V", self.label))

    def __repr__(self) -> str:
        return f"V({self.label!r})"


def _twin(cls: type, frozen: bool, eq: bool, slots: bool, given: tuple[str, ...]) -> type:
    """The dataclass of ``cls``'s declaration: its fields, bases and the methods its body
    defines but ``__init__``, ``__eq__`` and ``__hash__`` (a record's written-out ones must do
    what the generated ones do)."""
    skip = {*given, "__init__", "__eq__", "__hash__", "__dict__", "__weakref__", "__slots__"}
    skip.add("__dataclass_fields__")
    skip.add("__dataclass_params__")
    fields = dataclasses.fields(cls)
    names = {f.name for f in fields}
    ns = {
        k: v
        for k, v in cls.__dict__.items()
        if k not in skip and k not in names and not isinstance(v, types.MemberDescriptorType)
    }
    spec = []
    for f in fields:
        kw: dict[str, Any] = {"init": f.init, "repr": f.repr, "hash": f.hash, "compare": f.compare}
        if f.default is not dataclasses.MISSING:
            kw["default"] = f.default
        if f.default_factory is not dataclasses.MISSING:
            kw["default_factory"] = f.default_factory
        spec.append((f.name, f.type, dataclasses.field(**kw)))
    d = dataclasses.make_dataclass(
        cls.__name__, spec, bases=cls.__bases__, namespace=ns, frozen=frozen, eq=eq, slots=slots
    )
    d.__qualname__ = cls.__qualname__
    return d


def _outcome(fn: Any) -> tuple[str, object]:
    try:
        return ("ok", fn())
    except Exception as e:  # compared by type: the two may word a wrong call differently
        return ("raised", type(e))


def _state(x: object) -> object:
    """What an instance holds: its fields, and its instance dict when it has one."""
    held = tuple(repr(getattr(x, f.name, "<unset>")) for f in dataclasses.fields(x))  # type: ignore[arg-type]
    return held, sorted(getattr(x, "__dict__", {}))


def test_every_replay_record_is_checked() -> None:
    made = {c.__qualname__ for c, *_ in records.RECORDS}
    assert {"Var", "Exists", "ContinuousQuery", "RegisteredQuery", "QueryStats", "Shape", "Batch"} <= made
    assert len(made) >= 40


@pytest.mark.parametrize(
    "entry", records.RECORDS, ids=[f"{c.__module__}.{c.__qualname__}" for c, *_ in records.RECORDS]
)
def test_a_record_behaves_as_its_dataclass(entry: tuple) -> None:
    cls, frozen, eq, slots, given = entry
    twin = _twin(*entry)
    fields = dataclasses.fields(cls)
    assert [(f.name, f.init, f.repr, f.compare, f.hash) for f in fields] == [
        (f.name, f.init, f.repr, f.compare, f.hash) for f in dataclasses.fields(twin)
    ]
    assert cls.__match_args__ == twin.__match_args__
    assert dataclasses.is_dataclass(cls) and (cls.__hash__ is None) == (twin.__hash__ is None)
    assert hasattr(cls, "__dict__") == hasattr(twin, "__dict__") or slots
    init = [f for f in fields if f.init]
    required = [
        f for f in init if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    full = [V(f.name) for f in init]
    other = [V(f.name + "'") for f in init]
    calls: list[tuple[tuple, dict]] = [
        (tuple(full), {}),
        ((), {f.name: v for f, v in zip(init, full)}),
        (tuple(full[:1]), {f.name: v for f, v in zip(init[1:], full[1:])}),
        (tuple(V(f.name) for f in required), {}),
        (tuple(full) + (V("extra"),), {}),
        ((), {"no_such_field": 1}),
        (tuple(full[:1]), {init[0].name: full[0]} if init else {}),
        ((), {}),
    ]
    for args, kwargs in calls:
        a = _outcome(functools.partial(cls, *args, **kwargs))
        b = _outcome(functools.partial(twin, *args, **kwargs))
        assert a[0] == b[0], (args, kwargs, a, b)
        if a[0] == "raised":
            assert a[1] is b[1]
            continue
        x, y = a[1], b[1]
        assert repr(x) == repr(y)
        assert _state(x) == _state(y)
        assert dataclasses.asdict(x) == dataclasses.asdict(y)  # type: ignore[call-overload]
        # equality with a copy of itself, and with one field changed
        assert (x == cls(*args, **kwargs)) == (y == twin(*args, **kwargs))
        assert (x == object()) == (y == object())
        for i, f in enumerate(init):
            changed = {f.name: other[i]}
            x2 = dataclasses.replace(x, **changed)
            y2 = dataclasses.replace(y, **changed)
            assert repr(x2) == repr(y2)
            assert (x == x2) == (y == y2) and (x != x2) == (y != y2)
            if twin.__hash__ is not None:
                assert (hash(x) == hash(x2)) == (hash(y) == hash(y2))
        if "__hash__" in given and twin.__hash__ is not None:
            assert hash(x) == hash(y)  # the same tuple of the same values
        # copies (the twin is not importable by name: the record's pickle round trip alone)
        assert repr(copy.copy(x)) == repr(copy.copy(y))
        assert _pickled(x) == repr(x)
        # assignment to and deletion of a field and of another attribute
        for name in (fields[0].name if fields else "a", "not_a_field"):
            sx = _outcome(functools.partial(setattr, x, name, V("set")))
            sy = _outcome(functools.partial(setattr, y, name, V("set")))
            assert sx[0] == sy[0] and (sx[0] == "ok" or _same_error(sx[1], sy[1], frozen and slots))
            dx = _outcome(functools.partial(delattr, x, name))
            dy = _outcome(functools.partial(delattr, y, name))
            assert dx[0] == dy[0] and (dx[0] == "ok" or _same_error(dx[1], dy[1], frozen and slots))
        assert _outcome(functools.partial(_state, x)) == _outcome(functools.partial(_state, y))


def _same_error(mine: object, theirs: object, frozen_slots: bool) -> bool:
    """The same exception type; but a frozen dataclass with slots raises ``TypeError`` for an
    attribute that is not a field (Python 3.11: its ``__setattr__`` names the class from before
    the slots were added) where a record raises ``FrozenInstanceError`` as the
    dataclass without slots does."""
    if mine is theirs:
        return True
    return frozen_slots and theirs is TypeError and mine is dataclasses.FrozenInstanceError


def _pickled(x: object) -> str:
    return repr(pickle.loads(pickle.dumps(x)))  # noqa: S301 -- bytes this test made


def test_record_options_that_dataclass_has() -> None:
    """A small declaration with every option the package uses, frozen and slots."""

    @record(frozen=True, slots=True)
    class P:
        """A point."""

        x: int
        y: int = 2
        tags: list[int] = dataclasses.field(default_factory=list, compare=False)
        note: str = dataclasses.field(default="", repr=False)

    p = P(1)
    assert repr(p) == "test_record_options_that_dataclass_has.<locals>.P(x=1, y=2, tags=[])"
    assert p == P(1, 2, [5]) and p != P(1, 3) and hash(p) == hash((1, 2, ""))
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.x = 3  # type: ignore[misc]
    assert not hasattr(p, "__dict__")
    assert copy.deepcopy(p) == p and copy.deepcopy(p) is not p
    assert P.__match_args__ == ("x", "y", "tags", "note")
    assert dataclasses.replace(p, y=5) == P(1, 5)

    @record(eq=False)
    class E:
        """An entity."""

        n: int
        name: str = dataclasses.field(init=False, default="")

        def __post_init__(self) -> None:
            self.name = f"e{self.n}"

    e = E(4)
    assert e.name == "e4" and e != E(4) and hash(e) != hash(E(4)) or e is not E(4)
    with pytest.raises(TypeError, match="docstring"):

        @record
        class NoDoc:
            n: int
