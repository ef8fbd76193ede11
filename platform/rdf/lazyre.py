"""Regular expressions compiled on first use, not when their module is imported.

Compiling a pattern costs 0.05-1 ms (the ones with Unicode ranges much more), and a
``linkstream replay`` imports some eighty modules whose module-level patterns are mostly
for inputs it never meets (escapes, malformed lines, other datatypes): ~10 ms of every
process's start-up.  :func:`lazy` returns an object that stands for the compiled pattern:
its first attribute access compiles it and copies the pattern's methods and attributes onto
the object, so later calls cost what a compiled pattern's do (an instance attribute).

Use it for module-level patterns that are called through their methods (``P.match(s)``,
``P.sub(f, s)``, ``P.pattern``); a pattern given to ``re.*`` functions as an argument must
stay a real :class:`re.Pattern` (``re.compile``).  Threads may share one: two first uses at
once compile it twice and set the same attributes (no lock needed).
"""

from __future__ import annotations

import re
from typing import Any, cast

#: the attributes of a compiled pattern copied onto the stand-in when it compiles
_ATTRS = (
    "match",
    "fullmatch",
    "search",
    "sub",
    "subn",
    "split",
    "findall",
    "finditer",
    "scanner",
    "pattern",
    "flags",
    "groups",
    "groupindex",
)


class _LazyPattern:
    """A stand-in for ``re.compile(pattern, flags)``, compiled by its first attribute access."""

    def __init__(self, pattern: str, flags: int) -> None:
        self._source = (pattern, flags)

    def __getattr__(self, name: str) -> Any:  # only called for attributes not yet set
        if name.startswith("__"):
            raise AttributeError(name)
        compiled = re.compile(*self._source)
        for attr in _ATTRS:
            setattr(self, attr, getattr(compiled, attr))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source[0]!r}, {self._source[1]})"


def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, done by the first use of the result (see the module)."""
    return cast(re.Pattern[str], _LazyPattern(pattern, flags))
