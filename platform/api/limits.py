"""The HTTP API's resource limits, and the tools that enforce them.

:class:`ApiLimits` holds every limit in one place (each a ``linkstream run`` flag, see
:func:`linkstream.cli.service.add_parsers`); :class:`LimitExceeded` is the answer when one
is reached, naming the limit: 413 for sizes, 422 for JSON nesting and compile time, 429
for counts (queries per token, subscribers), 503 for busy server resources.

Two enforcement tools live here too:

* :class:`JsonDepthScanner` measures the nesting of a JSON document chunk by chunk, so that
  a deep document is rejected while it streams in, before any recursive parser sees it;
* :class:`Interruptible` and :func:`call_with_deadline` run Python code that may be cut
  short: when the deadline passes, an exception is raised asynchronously in the thread
  running it (``PyThreadState_SetAsyncExc``), which stops pure-Python work such as the
  SPARQL parser at its next bytecode; a long C call finishes first.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

KIB = 1024
MIB = 1024 * KIB


def _limit(default: float, unit: str, help: str) -> Any:
    return dataclasses.field(default=default, metadata={"unit": unit, "help": help})


@dataclass(frozen=True)
class ApiLimits:
    """Every limit of the HTTP API and its server, each a ``linkstream run`` flag.

    The flag of a field is its name with dashes (``max_body_bytes``: ``--max-body-bytes``);
    the field's ``help`` metadata says what it limits and with which status a request over
    it is answered.  Every limit is a positive number.
    """

    max_body_bytes: int = _limit(64 * MIB, "BYTES", "request body size, counted while it streams in (413)")
    max_query_bytes: int = _limit(256 * KIB, "BYTES", "query text of POST /queries and /sparql (413)")
    compile_seconds: float = _limit(5.0, "S", "time to parse a query before it is refused (422)")
    max_compiles: int = _limit(4, "N", "queries being parsed at once, cut-short ones included (503)")
    max_queries_per_token: int = _limit(10_000, "N", "continuous queries registered per token (429)")
    sparql_seconds: float = _limit(30.0, "S", "time of a one-shot /sparql query, queueing included (503)")
    sparql_max_rows: int = _limit(1_000_000, "N", "result rows or triples of a one-shot query (413)")
    max_json_depth: int = _limit(64, "N", "nesting of a JSON request body (422)")
    max_push_elements: int = _limit(100_000, "N", "elements in one POST /streams body (413)")
    max_push_triples: int = _limit(1_000_000, "N", "triples in one POST /streams body (413)")
    max_subscribers: int = _limit(10_000, "N", "open result streams over all queries (429)")
    body_seconds: float = _limit(60.0, "S", "time to receive a request body after its head (408)")
    header_seconds: float = _limit(10.0, "S", "time to receive a request head; then 408 and closed")
    keepalive_seconds: float = _limit(5.0, "S", "idle time of a kept-alive connection before it is closed")
    max_connections: int = _limit(
        4096,
        "N",
        "open connections; beyond, the oldest idle one is closed, or, with none idle, "
        "requests but /healthz are answered 503",
    )
    max_header_bytes: int = _limit(64 * KIB, "BYTES", "request line plus headers (431)")

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v > 0 or v != v:
                raise ValueError("limit %s must be a positive number, got %r" % (f.name, v))
            if f.type in ("int", int) and not isinstance(v, int):
                raise ValueError("limit %s must be an integer, got %r" % (f.name, v))

    @staticmethod
    def flag(name: str) -> str:
        """The ``linkstream run`` flag of a limit (``max_body_bytes`` -> ``--max-body-bytes``)."""
        return "--" + name.replace("_", "-")

    @classmethod
    def add_arguments(cls, group: argparse._ActionsContainer) -> None:
        """Adds one flag per limit to an argparse parser or group (defaults: the field defaults)."""
        for f in dataclasses.fields(cls):
            group.add_argument(
                cls.flag(f.name),
                dest="limit_" + f.name,
                type=float if f.type in ("float", float) else int,
                default=f.default,
                metavar=f.metadata["unit"],
                help="%s (default %s)" % (f.metadata["help"], f.default),
            )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> ApiLimits:
        """The limits given by :meth:`add_arguments` flags.

        Raises:
            ValueError: A limit that is not a positive number (names the flag).
        """
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            v: Any = getattr(args, "limit_" + f.name, f.default)
            if not v > 0 or v != v:
                raise ValueError("%s must be a positive number, got %s" % (cls.flag(f.name), v))
            values[f.name] = v
        return cls(**values)


class LimitExceeded(Exception):
    """A request over one of the :class:`ApiLimits`.

    Attributes:
        status: HTTP status (413, 422, 429, 503, 408).
        limit: The :class:`ApiLimits` field reached.
        value: Its configured value.
        message: One line saying what was too large, naming the limit.
        where: The part of the request at fault (``"body"``, ``"query"``, ...).
    """

    def __init__(self, status: int, limit: str, value: Any, what: str, where: str) -> None:
        self.status = status
        self.limit = limit
        self.value = value
        self.where = where
        self.message = "%s (limit %s=%s, flag %s)" % (what, limit, value, ApiLimits.flag(limit))
        super().__init__(self.message)


# ---------------------------------------------------------------- JSON nesting

_JSON_TOKENS = re.compile(rb'[\\"\[\]{}]')
_OPEN = frozenset(b"[{")
_CLOSE = frozenset(b"]}")


class JsonTooDeep(ValueError):
    """A JSON document nested deeper than allowed; ``offset`` is the byte that went too deep."""

    def __init__(self, max_depth: int, offset: int) -> None:
        super().__init__("JSON nested deeper than %d levels (at byte %d)" % (max_depth, offset))
        self.max_depth = max_depth
        self.offset = offset


class JsonDepthScanner:
    """Tracks the bracket nesting of a JSON document fed in chunks (strings skipped).

    It does not validate JSON (the parser does, afterwards); it only guarantees that a
    document it accepted is nested at most ``max_depth`` levels, so that no recursive
    parser runs out of stack on it.
    """

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.depth = 0
        self.in_string = False
        self._skip = 0  # bytes of the next chunk that an escape consumed
        self._offset = 0

    def feed(self, chunk: bytes) -> None:
        """Scans the next chunk.

        Raises:
            JsonTooDeep: The document went deeper than ``max_depth``.
        """
        skip = self._skip
        for m in _JSON_TOKENS.finditer(chunk):
            j = m.start()
            if j < skip:
                continue
            c = chunk[j]
            if self.in_string:
                if c == 0x5C:  # backslash: the next byte is escaped
                    skip = j + 2
                elif c == 0x22:
                    self.in_string = False
            elif c == 0x22:
                self.in_string = True
            elif c in _OPEN:
                self.depth += 1
                if self.depth > self.max_depth:
                    raise JsonTooDeep(self.max_depth, self._offset + j)
            elif c in _CLOSE:
                self.depth -= 1
        self._skip = max(0, skip - len(chunk))
        self._offset += len(chunk)


def check_json_depth(data: bytes | str, max_depth: int) -> None:
    """Raises :class:`JsonTooDeep` if ``data`` nests deeper than ``max_depth``."""
    scanner = JsonDepthScanner(max_depth)
    scanner.feed(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)


# ---------------------------------------------------------------- deadlines


class DeadlineExceeded(BaseException):
    """Raised inside code whose deadline passed.

    A ``BaseException`` so that ``except Exception`` clauses of the interrupted code do not
    swallow it.
    """


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = [ctypes.c_ulong, ctypes.py_object]
_set_async_exc.restype = ctypes.c_int
_clear_async_exc = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p)(
    ("PyThreadState_SetAsyncExc", ctypes.pythonapi)
)


class Interruptible:
    """One call that :meth:`interrupt` may cut short, in whichever thread it runs.

    The asynchronous exception is raised only while :meth:`run` is on the stack: any
    exception still pending when the call ends is cleared, so a thread that runs other
    work afterwards (the live engine's worker) never sees it.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: int | None = None
        self.interrupted = False

    def run(self, fn: Callable[[], T]) -> T:
        """Calls ``fn``; raises :class:`DeadlineExceeded` if interrupted (before or during)."""
        with self._lock:
            if self.interrupted:
                raise DeadlineExceeded()
            self._thread = threading.get_ident()
        try:
            return fn()
        finally:
            with self._lock:
                self._thread = None
                _clear_async_exc(threading.get_ident(), None)

    def interrupt(self) -> None:
        """Cuts the call short (at once if it runs, at its start if it has not begun)."""
        with self._lock:
            if self.interrupted:
                return
            self.interrupted = True
            if self._thread is not None:
                _set_async_exc(self._thread, DeadlineExceeded)


class _Slots:
    """A count of threads running interruptible calls (cut-short ones until they end)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.running = 0

    def take(self, most: int) -> bool:
        with self._lock:
            if self.running >= most:
                return False
            self.running += 1
            return True

    def give(self) -> None:
        with self._lock:
            self.running -= 1


COMPILE_SLOTS = _Slots()


async def call_with_deadline(
    fn: Callable[[], T], seconds: float, *, slots: _Slots = COMPILE_SLOTS, most: int = 4
) -> T:
    """Runs ``fn`` in a thread of its own; interrupts it ``seconds`` later.

    A thread of its own rather than the shared thread pool: a call cut short inside a long
    C function keeps its thread until that returns, and must not hold a pool thread.

    Raises:
        DeadlineExceeded: ``fn`` did not return in time (it is being interrupted).
        BusyError: ``most`` calls are already running.
        Whatever ``fn`` raises.
    """
    if not slots.take(most):
        raise BusyError()
    import asyncio  # not at import: the CLI builds its parsers from this module

    loop = asyncio.get_running_loop()
    fut: asyncio.Future[T] = loop.create_future()
    guard = Interruptible()

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def target() -> None:
        try:
            value: Any
            try:
                value, ok = guard.run(fn), True
            except BaseException as e:  # handed to the awaiting task
                value, ok = e, False
            with _suppress_closed_loop():
                loop.call_soon_threadsafe(settle, ok, value)
        finally:
            slots.give()

    threading.Thread(target=target, name="linkstream-deadline", daemon=True).start()
    try:
        return await asyncio.wait_for(asyncio.shield(fut), seconds)
    except TimeoutError:
        fut.cancel()  # whatever the thread hands over later is dropped
        guard.interrupt()
        raise DeadlineExceeded() from None


class ItemFailed(Exception):
    """Call ``index`` of :func:`call_each_with_deadline` raised ``error`` (or ran out of time:
    :class:`DeadlineExceeded`); the calls after it did not run."""

    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(f"item {index}: {error!r}")
        self.index = index
        self.error = error


async def call_each_with_deadline(
    fns: Sequence[Callable[[], T]], seconds: float, *, slots: _Slots = COMPILE_SLOTS, most: int = 4
) -> list[T]:
    """Runs ``fns`` in order in one thread of its own, each within ``seconds`` (interrupted
    otherwise): :func:`call_with_deadline` for a batch, with one thread hand-over in all.

    Raises:
        ItemFailed: A call raised or ran out of time (its index and error).
        BusyError: ``most`` calls are already running.
    """
    if not slots.take(most):
        raise BusyError()
    import asyncio  # not at import: the CLI builds its parsers from this module

    loop = asyncio.get_running_loop()
    fut: asyncio.Future[list[T]] = loop.create_future()
    guard = Interruptible()
    at: list[Any] = [0, time.monotonic()]  # the call running, since when

    def settle(ok: bool, value: Any) -> None:
        if fut.done():
            return
        if ok:
            fut.set_result(value)
        else:
            fut.set_exception(value)

    def target() -> None:
        out: list[T] = []
        try:

            def each() -> None:
                for i, fn in enumerate(fns):
                    at[:] = [i, time.monotonic()]
                    try:
                        out.append(fn())
                    except Exception as e:
                        raise ItemFailed(i, e) from None

            try:
                guard.run(each)
                value: Any
                value, ok = out, True
            except ItemFailed as e:
                value, ok = e, False
            except DeadlineExceeded as e:
                value, ok = ItemFailed(int(at[0]), e), False
            with _suppress_closed_loop():
                loop.call_soon_threadsafe(settle, ok, value)
        finally:
            slots.give()

    threading.Thread(target=target, name="linkstream-deadline", daemon=True).start()
    while True:
        i, since = int(at[0]), float(at[1])
        left = since + seconds - time.monotonic()
        if left <= 0 and at[0] == i:
            fut.cancel()
            guard.interrupt()
            raise ItemFailed(i, DeadlineExceeded())
        try:
            return await asyncio.wait_for(asyncio.shield(fut), max(left, 0.001))
        except TimeoutError:
            continue


class BusyError(Exception):
    """Every slot for interruptible calls is taken."""


class _suppress_closed_loop:
    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> bool:
        return typ is RuntimeError  # the loop closed while the call ran


__all__ = [
    "ApiLimits",
    "BusyError",
    "DeadlineExceeded",
    "Interruptible",
    "ItemFailed",
    "JsonDepthScanner",
    "JsonTooDeep",
    "LimitExceeded",
    "call_each_with_deadline",
    "call_with_deadline",
    "check_json_depth",
]
