"""Data classes without compiling code at import: :func:`record`.

``@dataclasses.dataclass`` writes the source of each generated method (``__init__``,
``__repr__``, ``__eq__``, ``__hash__``, a frozen class's ``__setattr__`` / ``__delattr__``)
and compiles it with ``exec`` when the class is created: ~0.5 ms per class on Python 3.11,
and a ``linkstream replay`` creates some fifty of them before it reads a line (~25 ms of a
~0.2 s process).  :func:`record` makes the same class from methods written once in this
module (closures over the class's fields, compiled into its ``.pyc``): ``dataclasses`` still
builds the fields (``dataclasses.fields``, ``replace``, ``asdict`` and ``is_dataclass`` work
as before) but generates no method, and the class costs ~0.05 ms.

The methods behave as the generated ones do: ``__init__`` takes the init fields by position
or keyword with their defaults and default factories and calls ``__post_init__``;
``__repr__`` is ``Name(a=..., b=...)`` over the ``repr`` fields (with the same guard against
recursion); ``__eq__`` compares the tuples of the ``compare`` fields of two instances of the
same class; ``__hash__`` follows the dataclass rules (frozen and eq: the tuple of the hashed
fields; eq and not frozen: unhashable; a ``__hash__`` of the class body is kept); a frozen
class raises ``dataclasses.FrozenInstanceError`` on assignment; ``slots=True`` gives
``__slots__`` (and, frozen, the ``__getstate__`` / ``__setstate__`` copy and pickle need).
A method the class body defines is kept, as ``dataclass`` keeps it.  Options not listed
(``order``, ``unsafe_hash``, ``kw_only``, ``InitVar``) are not supported: use ``dataclass``.
One difference: an attribute that is not a field, set on a frozen record with slots, raises
``FrozenInstanceError`` (Python 3.11's frozen slots dataclass raises ``TypeError`` there).
The messages of a wrong call to the generic ``__init__`` are worded slightly differently.

The generic ``__init__`` costs ~1.5 us a call against the generated one's ~0.3 us, and the
``__eq__`` / ``__hash__`` closures are 1.6-2.5x slower than generated ones: a class made or
compared in a hot loop writes those methods out in its body (``Batch``, the terms).
``tests/rdf/test_records.py`` compares each record class of the package with the dataclass
of the same declaration.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

T = TypeVar("T")

_MISSING = dataclasses.MISSING

#: every class made by :func:`record`, with its options and the methods it was given
#: (``tests/rdf/test_records.py`` compares each with the dataclass of the same declaration)
RECORDS: list[tuple[type, bool, bool, bool, tuple[str, ...]]] = []


def _key(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    """``obj -> (obj.a, obj.b, ...)``, always a tuple (as the generated methods compare)."""
    if not names:
        return lambda obj: ()
    get = attrgetter(*names)
    if len(names) == 1:
        return lambda obj: (get(obj),)
    return get  # a tuple already


def _init_fn(cls: type, frozen: bool, slots: bool) -> Callable[..., None]:
    fields = dataclasses.fields(cls)
    params = [f for f in fields if f.init]
    names = tuple(f.name for f in params)
    n = len(names)
    # a field outside __init__ is set from its factory, or (slots) its default; else the
    # class attribute holding the default answers (as the generated __init__ does)
    rest = [
        (f.name, f.default, f.default_factory)
        for f in fields
        if not f.init and (f.default_factory is not _MISSING or (slots and f.default is not _MISSING))
    ]
    defaults = {f.name: (f.default, f.default_factory) for f in params}
    required = {f.name for f in params if f.default is _MISSING and f.default_factory is _MISSING}
    post_init = getattr(cls, "__post_init__", None) is not None
    setter = object.__setattr__ if frozen else setattr
    qualname = cls.__qualname__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if len(args) > n:
            raise TypeError(
                f"{qualname}.__init__() takes {n + 1} positional arguments but {len(args) + 1} were given"
            )
        if len(args) == n and not kwargs:
            for name, value in zip(names, args):
                setter(self, name, value)
        else:
            for name in names[: len(args)]:
                if name in kwargs:
                    raise TypeError(f"{qualname}.__init__() got multiple values for argument '{name}'")
            for name in kwargs:
                if name not in defaults:
                    raise TypeError(f"{qualname}.__init__() got an unexpected keyword argument '{name}'")
            missing = [m for m in names[len(args) :] if m in required and m not in kwargs]
            if missing:
                listed = ", ".join(repr(m) for m in missing)
                raise TypeError(
                    f"{qualname}.__init__() missing {len(missing)} required argument(s): {listed}"
                )
            for i, name in enumerate(names):
                if i < len(args):
                    value = args[i]
                elif name in kwargs:
                    value = kwargs[name]
                else:
                    default, factory = defaults[name]
                    value = factory() if factory is not _MISSING else default
                setter(self, name, value)
        for name, default, factory in rest:
            setter(self, name, factory() if factory is not _MISSING else default)
        if post_init:
            self.__post_init__()

    return __init__


def _repr_fn(cls: type) -> Callable[[Any], str]:
    names = tuple(f.name for f in dataclasses.fields(cls) if f.repr)

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
        return f"{self.__class__.__qualname__}({inner})"

    return __repr__


def _eq_fn(cls: type) -> Callable[[Any, Any], Any]:
    key = _key(tuple(f.name for f in dataclasses.fields(cls) if f.compare))

    def __eq__(self: Any, other: Any) -> Any:
        if other.__class__ is self.__class__:
            return key(self) == key(other)
        return NotImplemented

    return __eq__


def _hash_fn(cls: type) -> Callable[[Any], int]:
    fields = dataclasses.fields(cls)
    key = _key(tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash)))

    def __hash__(self: Any) -> int:
        return hash(key(self))

    return __hash__


def _frozen_fns(cls: Any) -> tuple[Callable[..., None], Callable[..., None]]:
    names = frozenset(f.name for f in dataclasses.fields(cls))

    def __setattr__(self: Any, name: str, value: Any) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
        super(cls, self).__setattr__(name, value)

    def __delattr__(self: Any, name: str) -> None:
        if type(self) is cls or name in names:
            raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
        super(cls, self).__delattr__(name)

    return __setattr__, __delattr__


def _getstate(self: Any) -> list[Any]:
    return [getattr(self, f.name) for f in dataclasses.fields(self)]


def _setstate(self: Any, state: list[Any]) -> None:
    for f, value in zip(dataclasses.fields(self), state):
        object.__setattr__(self, f.name, value)


def _put(cls: type, name: str, value: object) -> None:
    setattr(cls, name, value)


def _set(cls: type, name: str, fn: Any, given: list[str]) -> bool:
    """Set a method unless the class body defines it (``True``: it did)."""
    if name in cls.__dict__:
        return True
    fn.__qualname__ = f"{cls.__qualname__}.{fn.__name__}"
    setattr(cls, name, fn)
    given.append(name)
    return False


def _process(cls: type, frozen: bool, eq: bool, slots: bool) -> type:
    body = cls.__dict__
    if not body.get("__doc__"):
        raise TypeError(f"record {cls.__qualname__}: give it a docstring (dataclass would make one)")
    class_hash = body.get("__hash__", _MISSING)
    explicit_hash = class_hash is not _MISSING and not (class_hash is None and "__eq__" in body)
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False, match_args=False, slots=slots)
    given: list[str] = []
    _set(cls, "__init__", _init_fn(cls, frozen, slots), given)
    _set(cls, "__repr__", _repr_fn(cls), given)
    if eq:
        _set(cls, "__eq__", _eq_fn(cls), given)
        if not explicit_hash:
            # dataclass: frozen and eq -> hash of the fields; eq alone -> unhashable
            if frozen:
                fn = _hash_fn(cls)
                fn.__qualname__ = f"{cls.__qualname__}.__hash__"
                _put(cls, "__hash__", fn)
            else:
                _put(cls, "__hash__", None)
            given.append("__hash__")
    if frozen:
        for method in _frozen_fns(cls):
            if _set(cls, method.__name__, method, given):
                raise TypeError(f"Cannot overwrite attribute {method.__name__} in class {cls.__name__}")
        if slots:
            _put(cls, "__getstate__", _getstate)
            _put(cls, "__setstate__", _setstate)
            given += ["__getstate__", "__setstate__"]
    if "__match_args__" not in body:
        _put(cls, "__match_args__", tuple(f.name for f in dataclasses.fields(cls) if f.init))
        given.append("__match_args__")
    RECORDS.append((cls, frozen, eq, slots, tuple(given)))
    return cls


@overload
def record(cls: type[T], /) -> type[T]: ...


@overload
def record(*, frozen: bool = False, eq: bool = True, slots: bool = False) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(field_specifiers=(dataclasses.field, dataclasses.Field))
def record(
    cls: type[T] | None = None, /, *, frozen: bool = False, eq: bool = True, slots: bool = False
) -> type[T] | Callable[[type[T]], type[T]]:
    """``@dataclass`` / ``@dataclass(frozen=..., eq=..., slots=...)`` without code generation
    (fields through ``dataclasses.field``)."""

    def wrap(c: type[T]) -> type[T]:
        return _process(c, frozen, eq, slots)

    return wrap if cls is None else wrap(cls)
