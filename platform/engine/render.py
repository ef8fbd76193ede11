"""Report text assembly: the report time put into a whole report, and the blocks of a
group's members, in compiled code when it is built (``platform/engine/_render.c``).

A report of thousands of queries is megabytes of ASCII made of many small strings: each
query's block of lines (with :data:`TIME_MARK` where the report time goes), each line a
head and a rendered row.  :func:`join_timed` and :func:`member_blocks` build such a text
with one allocation and one copy in the compiled module; without it (installed without a
C compiler, or turned off by :func:`use_native`), or when a string is not ASCII, the
Python code here gives the same text.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

_render: ModuleType | None
try:  # the compiled module (platform/engine/_render.c), built by ``pip install``
    import linkstream.engine._render as _built

    _render = _built
except ImportError:  # installed without a C compiler: the Python code below does the same
    _render = None

#: the compiled module in use, or ``None`` (see :func:`use_native`)
_native = _render

#: where the report time goes in a :meth:`~linkstream.engine.output.QueryOutput.block`
#: (never in a JSON text: JSON escapes control characters)
TIME_MARK = "\x00"
_MARK_BYTES = TIME_MARK.encode("ascii")
#: characters of a report substituted at a time (:func:`timed_text`)
_SLICE = 1 << 14


def native() -> bool:
    """Whether the compiled renderer is in use."""
    return _native is not None


def use_native(on: bool) -> bool:
    """Turn the compiled renderer on or off (tests and benchmarks compare both paths; the
    text is the same); returns whether it is now in use."""
    global _native
    _native = _render if on else None
    return _native is not None


def timed_text(text: str, t_text: str) -> str:
    """``text`` with every :data:`TIME_MARK` replaced by ``t_text`` (the report time).

    A report is hundreds of KB of ASCII: ``bytes.replace`` substitutes about 4x faster
    than ``str.replace`` (25 us against 97 us on a 284 KB report with 2,011 marks), but
    a round trip through bytes of the whole report allocates three more buffers of its
    size, which the allocator hands back to the system and takes again at every report
    (page faults cost more than the substitution saves).  So the text goes through in
    slices of :data:`_SLICE` characters that stay in the cache and in the small-object
    heap, and one join puts them together."""
    n = len(text)
    if n <= _SLICE or not text.isascii() or not t_text.isascii():
        if n <= _SLICE and text.isascii() and t_text.isascii():
            return text.encode("ascii").replace(_MARK_BYTES, t_text.encode("ascii")).decode("ascii")
        return text.replace(TIME_MARK, t_text)
    tb = t_text.encode("ascii")
    mark = _MARK_BYTES
    return "".join(
        [text[i : i + _SLICE].encode("ascii").replace(mark, tb).decode("ascii") for i in range(0, n, _SLICE)]
    )


def join_timed(parts: Sequence[str], t_text: str) -> str:
    """``timed_text("".join(parts), t_text)``: in one pass over the parts when compiled."""
    nat = _native
    if nat is not None:
        got = nat.join_timed(parts, t_text)
        if got is not None:
            return got
    text = "".join(parts)
    return timed_text(text, t_text) if text else text


def member_blocks(heads: list[str], lines: list[int], bodies: list[str]) -> list[str] | None:
    """Member ``i``'s block: ``lines[i]`` lines, each ``heads[i]``, the next of ``bodies``
    and a newline (compiled); ``None`` when not compiled or a string is not ASCII (the
    caller builds the blocks itself)."""
    nat = _native
    if nat is None:
        return None
    got: list[str] | None = nat.blocks(heads, lines, bodies)
    return got


def put(target: list[str], at: list[int], values: list[str]) -> None:
    """``target[p] = v`` for each ``p, v`` of ``at, values`` (one call when compiled)."""
    nat = _native
    if nat is not None:
        nat.put(target, at, values)
        return
    for p, v in zip(at, values, strict=True):
        target[p] = v


class _SplitLines(Sequence[str]):
    """Lines kept as text, split on the first read (:meth:`lines`): they read as the tuple
    of them (equal to it, sliced, iterated)."""

    __slots__ = ()

    def lines(self) -> tuple[str, ...]:
        raise NotImplementedError

    def __getitem__(self, i):  # int -> str, slice -> tuple
        return self.lines()[i]

    def __iter__(self):
        return iter(self.lines())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _SplitLines):
            return self.lines() == other.lines()
        return isinstance(other, tuple | list) and self.lines() == tuple(other)

    __hash__ = None  # type: ignore[assignment]  # (a sequence compared by value)


class BlockLines(_SplitLines):
    """A report's lines kept as the text block they were rendered into (each line ended
    by a newline, :data:`TIME_MARK` where the report time goes), split on first read.

    The live engine keeps every report of every query for readers that resume, and most
    are never read: splitting each block into lines when it is delivered cost ~9% of the
    live worker's time with 10,000 queries.  It reads as the tuple of its lines (equal to
    it, sliced, iterated); the number of lines is known without splitting.
    """

    __slots__ = ("_block", "_t", "_n", "_lines")

    def __init__(self, block: str, t_text: str, n: int | None = None) -> None:
        self._block: str | None = block
        self._t = t_text
        self._n = block.count("\n") if n is None else n  # (``n``: its lines, when known)
        self._lines: tuple[str, ...] | None = None

    def lines(self) -> tuple[str, ...]:
        """The lines (split once, then kept instead of the block)."""
        got = self._lines
        if got is None:
            assert self._block is not None
            got = self._lines = tuple(self._block.replace(TIME_MARK, self._t).split("\n")[:-1])
            self._block = None
        return got

    def __len__(self) -> int:
        return self._n

    def __repr__(self) -> str:
        return "BlockLines(%r)" % (self.lines(),)


class JoinedLines(_SplitLines):
    """A report's lines kept as one text, the lines joined by ``"\\n"`` (as a container sends
    them, :mod:`linkstream.containers.protocol`), split on first read.

    A cluster leader takes every query's report of every tick from the containers and keeps
    it for readers (result log, rings, standbys); few are ever read line by line.  Splitting
    each into one string per line when it arrived was the leader's largest cost (29-33% of
    its CPU with 4,000 queries): the text goes through as it came (:attr:`text`, also what
    a standby is sent) and reads as the tuple of its lines (equal to it, sliced, iterated).
    A line holds no ``"\\n"`` (result lines are JSON or CSV rows); no lines is ``""``.
    """

    __slots__ = ("text", "_n", "_lines")

    def __init__(self, text: str, n: int | None = None) -> None:
        #: the lines joined by ``"\\n"`` (kept after a split: it is what goes on the wire)
        self.text = text
        self._n = n  # (counted on the first ``len``)
        self._lines: tuple[str, ...] | None = None

    def lines(self) -> tuple[str, ...]:
        """The lines (split once, then kept)."""
        got = self._lines
        if got is None:
            got = self._lines = tuple(self.text.split("\n")) if self.text else ()
        return got

    def __len__(self) -> int:
        n = self._n
        if n is None:
            n = self._n = self.text.count("\n") + 1 if self.text else 0
        return n

    def __bool__(self) -> bool:  # (without counting the lines)
        return bool(self.text)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, JoinedLines):
            return self.text == other.text
        return super().__eq__(other)

    __hash__ = None  # (a sequence compared by value)

    def __repr__(self) -> str:
        return "JoinedLines(%r)" % (self.text,)


def joined_text(lines: Sequence[str]) -> str:
    """``"\\n".join(lines)``, without splitting lines that are still one text."""
    if isinstance(lines, JoinedLines):
        return lines.text
    return "\n".join(lines)
