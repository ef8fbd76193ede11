"""The fields of a data-plane message header (:mod:`linkstream.containers.protocol`): the
header frame read and written, and each field checked as it is read -- a malformed
message raises :class:`ProtocolError` naming the field, never anything else."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np

from linkstream.containers.wire import Frame, WireError, byte_view

VERSION = 2  # 2: result lines in one frame with "sizes"
#: what a container's ``recomputed`` answer says it does (``caps``; a header key an older
#: container does not send): ``owe`` -- a plain ``recompute`` answers report time ``owe``
#: and the ticks after it in ``later`` (one pass), not the last tick only; ``kept`` -- a
#: ``forward``'s answer names the queries it kept; ``from`` -- (also in its ``hello``) a tick
#: naming it to answer a query it holds but cannot answer yet (kept from a ``forward`` the
#: driver sent before the tick, not announced ready yet) lists the query in the result's
#: ``missing`` and, in ``from``, the first tick it answers
CAPS = ("owe", "kept", "from")
MAX_HEADER_BYTES = 4 * 1024 * 1024
_I8 = np.dtype("<i8")


class ProtocolError(WireError):
    """A driver/container message that does not follow this module's format."""


def pack_header(header: dict[str, Any]) -> bytes:
    return msgpack.packb({"v": VERSION, **header}, use_bin_type=True)


def as_i8(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=_I8)


def view(frame: Frame) -> memoryview:
    return byte_view(frame, ProtocolError)


def int_field(h: dict[str, Any], key: str, lo: int = -(2**63)) -> int:
    x = h.get(key)
    if type(x) is not int or not lo <= x < 2**63:
        raise ProtocolError(f"{h.get('kind')}: {key} must be an int >= {lo}, got {x!r}")
    return x


def str_field(h: dict[str, Any], key: str) -> str:
    x = h.get(key)
    if type(x) is not str or len(x) > 65536:
        raise ProtocolError(f"{h.get('kind')}: {key} must be a string, got {type(x).__name__}")
    return x


def strs_field(h: dict[str, Any], key: str) -> list[str]:
    x = h.get(key)
    if type(x) is not list or not set(map(type, x)) <= {str}:  # (C speed: thousands of names a tick)
        raise ProtocolError(f"{h.get('kind')}: {key} must be a list of strings")
    return x


def str_map_field(h: dict[str, Any], key: str, value: type) -> dict[str, Any]:
    x = h.get(key)
    if type(x) is not dict or not all(type(k) is str and type(v) is value for k, v in x.items()):
        raise ProtocolError(f"{h.get('kind')}: {key} must map strings to {value.__name__}")
    return x


def int64_frame(frame: Frame, count: int, what: str) -> np.ndarray:
    buf = view(frame)
    if buf.nbytes != count * 8:
        raise ProtocolError(f"{what} frame holds {buf.nbytes} bytes, header implies {count * 8}")
    a = np.frombuffer(buf, dtype=_I8)
    if sys.byteorder != "little":  # pragma: no cover - big-endian hosts only
        a = a.astype(np.int64)
    return a


def read_header(frames: Sequence[Frame]) -> dict[str, Any]:
    if not frames:
        raise ProtocolError("empty message")
    raw = view(frames[0])
    if raw.nbytes > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {raw.nbytes} bytes exceeds {MAX_HEADER_BYTES}")
    try:
        header = msgpack.unpackb(raw, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise ProtocolError(f"header is not valid msgpack: {exc}") from exc
    if not isinstance(header, dict) or header.get("v") != VERSION:
        raise ProtocolError(
            f"header is not a version-{VERSION} map (got v={header.get('v') if isinstance(header, dict) else None!r})"
        )
    return header


def check_frames(frames: Sequence[Frame], n: int, kind: str) -> None:
    if len(frames) != n:
        raise ProtocolError(f"{kind} message has {len(frames)} frames, expected {n}")


def ints_field(h: dict[str, Any], key: str) -> tuple[int, ...]:
    x = h.get(key)
    if type(x) is not list or not all(type(i) is int and 0 <= i < 2**31 for i in x):
        raise ProtocolError(f"{h.get('kind')}: {key} must be a list of non-negative ints")
    return tuple(x)


def counts_field(h: dict[str, Any], key: str) -> tuple[int, ...]:
    x = h.get(key)
    if type(x) is not list or not all(type(i) is int and 0 <= i < 2**63 for i in x):
        raise ProtocolError(f"{h.get('kind')}: {key} must be a list of non-negative ints")
    return tuple(x)


def later_field(h: dict[str, Any]) -> dict[int, dict[str, list[str]]]:
    """A ``recomputed`` header's ``later``: ``[[report time, {query: lines joined by newlines}]]``."""
    x = h.get("later", [])
    if type(x) is not list or not all(
        type(e) is list
        and len(e) == 2
        and type(e[0]) is int
        and type(e[1]) is dict
        and all(type(k) is str and type(v) is str for k, v in e[1].items())
        for e in x
    ):
        raise ProtocolError(f"{h.get('kind')}: later must be a list of [int, {{str: str}}]")
    return {c: {n: v.split("\n") if v else [] for n, v in ls.items()} for c, ls in x}
