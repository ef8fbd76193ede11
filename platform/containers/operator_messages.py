"""Messages of operator-level placement (see :mod:`linkstream.containers.operator_tasks`).

``optasks`` goes from the driver to a container on its driver data-plane socket;
``ophello``, ``opterms`` and :mod:`linkstream.containers.wire` batches go between
containers on their operator-edge sockets.  Every message is msgpack headers plus raw
int64 frames; nothing is pickled, and decoding never trusts its input.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgpack
import numpy as np

from linkstream.containers.wire import Frame

VERSION = 1
MAX_HEADER_BYTES = 16 * 1024 * 1024
_I8 = np.dtype("<i8")


class OperatorPlaneError(ValueError):
    """A malformed operator-placement message, or a plan that does not fit it."""


@dataclass(frozen=True)
class HostedProducer:
    """A producer task a container runs: cut ``cut`` of ``query`` (planned from ``text``)."""

    id: str
    query: str
    cut: int
    text: str
    to: list[tuple[str, str]]


@dataclass(frozen=True)
class RemoteCut:
    """Cut ``cut`` of local query ``query`` reads producer ``id`` from another container."""

    query: str
    cut: int
    id: str


@dataclass(frozen=True)
class OpTasks:
    """The ``optasks`` message (see the module docstring)."""

    run: str
    container: str
    host: list[HostedProducer]
    remote: list[RemoteCut]


def header_kind(frames: list[Frame]) -> str | None:
    """The ``kind`` of a message of this module, or ``None`` for any other message."""
    if not frames:
        return None
    try:
        h = msgpack.unpackb(memoryview(frames[0]), raw=False)
    except (ValueError, TypeError, msgpack.UnpackException):
        return None
    kind = h.get("kind") if isinstance(h, dict) else None
    return kind if kind in ("optasks", "opterms", "ophello") else None


def encode_optasks(m: OpTasks) -> list[Frame]:
    """Frames of an ``optasks`` message."""
    header = {
        "v": VERSION,
        "kind": "optasks",
        "run": m.run,
        "container": m.container,
        "host": [
            {"id": h.id, "query": h.query, "cut": h.cut, "text": h.text, "to": [list(t) for t in h.to]}
            for h in m.host
        ],
        "remote": [{"query": r.query, "cut": r.cut, "id": r.id} for r in m.remote],
    }
    return [msgpack.packb(header, use_bin_type=True)]


def decode_optasks(frames: list[Frame]) -> OpTasks:
    """Parses an ``optasks`` message (raises :class:`OperatorPlaneError`)."""
    if len(frames) != 1 or memoryview(frames[0]).nbytes > MAX_HEADER_BYTES:
        raise OperatorPlaneError("optasks: expected one header frame")
    try:
        h = msgpack.unpackb(memoryview(frames[0]), raw=False)
        host = [
            HostedProducer(
                str(x["id"]),
                str(x["query"]),
                int(x["cut"]),
                str(x["text"]),
                [(str(c), str(a)) for c, a in x["to"]],
            )
            for x in h["host"]
        ]
        remote = [RemoteCut(str(x["query"]), int(x["cut"]), str(x["id"])) for x in h["remote"]]
        if h.get("v") != VERSION or h.get("kind") != "optasks":
            raise OperatorPlaneError("optasks: not a version-1 optasks header")
        return OpTasks(str(h["run"]), str(h["container"]), host, remote)
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
        raise OperatorPlaneError(f"optasks: malformed: {exc}") from exc


def encode_terms(run: str, src: str, ids: np.ndarray, terms: list[str]) -> list[Frame]:
    """Frames of an ``opterms`` message: sender ids and their N-Triples terms."""
    header = {"v": VERSION, "kind": "opterms", "run": run, "src": src, "n": len(ids)}
    ids = np.ascontiguousarray(ids, dtype=_I8)
    return [
        msgpack.packb(header, use_bin_type=True),
        memoryview(ids),
        msgpack.packb(terms, use_bin_type=True),
    ]


def decode_terms(frames: list[Frame]) -> tuple[str, str, np.ndarray, list[str]]:
    """``(run, sender, ids, terms)`` of an ``opterms`` message (raises :class:`OperatorPlaneError`)."""
    try:
        h = msgpack.unpackb(memoryview(frames[0]), raw=False)
        n = int(h["n"])
        ids = np.frombuffer(memoryview(frames[1]), dtype=_I8)
        terms = msgpack.unpackb(memoryview(frames[2]), raw=False)
    except (ValueError, TypeError, KeyError, IndexError, msgpack.UnpackException) as exc:
        raise OperatorPlaneError(f"opterms: malformed: {exc}") from exc
    if len(frames) != 3 or len(ids) != n or type(terms) is not list or len(terms) != n:
        raise OperatorPlaneError("opterms: ids and terms do not match the header")
    if n and int(ids.min()) <= 0:
        raise OperatorPlaneError("opterms: ids must be positive")
    if not all(type(t) is str for t in terms):
        raise OperatorPlaneError("opterms: terms must be strings")
    return str(h["run"]), str(h["src"]), ids, terms
