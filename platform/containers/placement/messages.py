"""Messages of operator-level placement (see :mod:`linkstream.containers.placement.tasks`).

``optasks`` goes from the driver to a container on its driver data-plane socket;
``ophost`` and ``opdrop`` from the driver to a container on its operator-edge socket
(they must reach a container that is blocked waiting for a producer's batch);
``ophello``, ``ophosting``, ``opterms`` and :mod:`linkstream.containers.wire` batches go
between containers on their operator-edge sockets.  Every message is msgpack headers
plus raw int64 frames; nothing is pickled, and decoding never trusts its input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgpack
import numpy as np

from linkstream.containers.wire import Frame

VERSION = 1
MAX_HEADER_BYTES = 16 * 1024 * 1024
_I8 = np.dtype("<i8")


class OperatorPlaneError(ValueError):
    """A malformed operator-placement message, or a plan that does not fit it."""


KINDS = ("optasks", "opterms", "ophello", "ophost", "ophosting", "opdrop")


@dataclass(frozen=True)
class HostedProducer:
    """A producer channel a container runs: cut ``cut`` of ``query`` (planned from ``text``).

    Attributes:
        id: The channel id (the producer id, or ``<producer>.<i>`` for instance ``i``).
        query: A query reading the producer (its text is planned to obtain the cut).
        cut: The cut's position in that query's plan.
        text: The query's text.
        to: ``(container, edge address)`` of every container reading the channel.
        gen: Generation of this hosting (consumers keep the newest one's batches).
        part: Partition index of the instance (0 when unpartitioned).
        parts: Number of instances of the producer (1: unpartitioned).
        var: Partition variable (``""`` when unpartitioned).
        peers: ``(container, edge address)`` of the other containers, told with
            ``ophosting`` once this hosting runs, so an older host of the channel stops.
    """

    id: str
    query: str
    cut: int
    text: str
    to: list[tuple[str, str]]
    gen: int = 1
    part: int = 0
    parts: int = 1
    var: str = ""
    peers: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class RemoteCut:
    """Cut ``cut`` of local query ``query`` reads producer ``id`` through its channels.

    Attributes:
        query: The local query.
        cut: The cut's position in its plan.
        id: The producer id.
        channels: The producer's channel ids (one per instance).
        var: Partition variable of the instances (``""``: unpartitioned).
    """

    query: str
    cut: int
    id: str
    channels: list[str] = field(default_factory=list)
    var: str = ""

    def __post_init__(self) -> None:
        if not self.channels:
            object.__setattr__(self, "channels", [self.id])


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
    return kind if kind in KINDS else None


def _hosted_json(h: HostedProducer) -> dict[str, Any]:
    return {
        "id": h.id,
        "query": h.query,
        "cut": h.cut,
        "text": h.text,
        "to": [list(t) for t in h.to],
        "gen": h.gen,
        "part": h.part,
        "parts": h.parts,
        "var": h.var,
        "peers": [list(t) for t in h.peers],
    }


def _hosted(x: dict[str, Any]) -> HostedProducer:
    h = HostedProducer(
        str(x["id"]),
        str(x["query"]),
        int(x["cut"]),
        str(x["text"]),
        [(str(c), str(a)) for c, a in x["to"]],
        int(x.get("gen", 1)),
        int(x.get("part", 0)),
        int(x.get("parts", 1)),
        str(x.get("var", "")),
        [(str(c), str(a)) for c, a in x.get("peers", [])],
    )
    if h.gen < 1 or h.parts < 1 or not 0 <= h.part < h.parts or (h.parts > 1 and not h.var):
        raise OperatorPlaneError(f"producer {h.id}: bad generation or partition")
    return h


def _remote(x: dict[str, Any]) -> RemoteCut:
    pid = str(x["id"])
    channels = [str(c) for c in x.get("channels", [pid])]
    if not channels:
        raise OperatorPlaneError(f"remote cut of {pid} without channels")
    return RemoteCut(str(x["query"]), int(x["cut"]), pid, channels, str(x.get("var", "")))


def encode_optasks(m: OpTasks) -> list[Frame]:
    """Frames of an ``optasks`` message."""
    header = {
        "v": VERSION,
        "kind": "optasks",
        "run": m.run,
        "container": m.container,
        "host": [_hosted_json(h) for h in m.host],
        "remote": [
            {"query": r.query, "cut": r.cut, "id": r.id, "channels": list(r.channels), "var": r.var}
            for r in m.remote
        ],
    }
    return [msgpack.packb(header, use_bin_type=True)]


def decode_optasks(frames: list[Frame]) -> OpTasks:
    """Parses an ``optasks`` message (raises :class:`OperatorPlaneError`)."""
    if len(frames) != 1 or memoryview(frames[0]).nbytes > MAX_HEADER_BYTES:
        raise OperatorPlaneError("optasks: expected one header frame")
    try:
        h = msgpack.unpackb(memoryview(frames[0]), raw=False)
        host = [_hosted(x) for x in h["host"]]
        remote = [_remote(x) for x in h["remote"]]
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
        ids.data,  # ``memoryview(ids)`` (numpy types the buffer protocol only for Python >= 3.12)
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


# ----------------------------------------------------------------------------- moves


def encode_host(run: str, h: HostedProducer) -> list[Frame]:
    """Frames of an ``ophost`` message: host channel ``h.id`` from generation ``h.gen`` on."""
    header = {"v": VERSION, "kind": "ophost", "run": run, "producer": _hosted_json(h)}
    return [msgpack.packb(header, use_bin_type=True)]


def encode_hosting(run: str, src: str, channel: str, gen: int) -> list[Frame]:
    """Frames of an ``ophosting`` message: ``src`` runs generation ``gen`` of ``channel``."""
    header = {"v": VERSION, "kind": "ophosting", "run": run, "src": src, "id": channel, "gen": gen}
    return [msgpack.packb(header, use_bin_type=True)]


def encode_drop(run: str, container: str) -> list[Frame]:
    """Frames of an ``opdrop`` message: ``container`` left the run (send it nothing more)."""
    header = {"v": VERSION, "kind": "opdrop", "run": run, "container": container}
    return [msgpack.packb(header, use_bin_type=True)]


def decode_control(frames: list[Frame]) -> tuple[str, str, Any]:
    """``(kind, run, body)`` of an ``ophost`` / ``ophosting`` / ``opdrop`` message.

    ``body`` is a :class:`HostedProducer`, ``(src, channel, gen)`` or a container id.

    Raises:
        OperatorPlaneError: The message is malformed.
    """
    if len(frames) != 1 or memoryview(frames[0]).nbytes > MAX_HEADER_BYTES:
        raise OperatorPlaneError("control message: expected one header frame")
    try:
        h = msgpack.unpackb(memoryview(frames[0]), raw=False)
        if h.get("v") != VERSION:
            raise OperatorPlaneError("control message: not version 1")
        kind, run = str(h["kind"]), str(h["run"])
        if kind == "ophost":
            return kind, run, _hosted(h["producer"])
        if kind == "ophosting":
            return kind, run, (str(h["src"]), str(h["id"]), int(h["gen"]))
        if kind == "opdrop":
            return kind, run, str(h["container"])
    except (ValueError, TypeError, KeyError, AttributeError, msgpack.UnpackException) as exc:
        raise OperatorPlaneError(f"control message: malformed: {exc}") from exc
    raise OperatorPlaneError(f"control message: unknown kind {kind!r}")
