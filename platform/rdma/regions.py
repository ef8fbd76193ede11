"""One-sided reads of remote memory regions: the protocol and the transport registry.

A *region* is a flat, read-only numpy array (a column of the persistent store: CSR
offsets, neighbour ids, sorted keys ...) that one process publishes and others read in
slices, the way Wukong's workers read remote graph partitions with one-sided RDMA READs:
the reader names the region and a row range, the owner's CPU is not involved (RDMA,
shared memory) or only answers a plain read request (TCP fallback).

A server publishes regions and hands out a :class:`RegionDescriptor` (plain JSON, e.g.
in the container's ZooKeeper membership data); a reader is opened from a descriptor by
:func:`open_reader`, which picks the transport named in it.  Transports register
themselves in :data:`TRANSPORTS` by name (``"rdma"``, ``"shm"``, ``"tcp"``), like
rdflib's plugin registry; :func:`best_transport` chooses the fastest one usable between
two peers (RDMA where a device exists, shared memory on one host, TCP otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

#: dtypes a region may have (ids, offsets, timestamps, counts)
ALLOWED_DTYPES = frozenset({"<i8", "<u8", "<i4", "<u4", "<f8", "|u1"})


class RegionError(ValueError):
    """A descriptor or a read request is malformed or out of range."""


@dataclass(frozen=True)
class RegionInfo:
    """Where one published region lives and what it holds.

    Attributes:
        dtype: numpy dtype string (little-endian, one of :data:`ALLOWED_DTYPES`).
        length: number of elements.
        location: transport-specific address (segment name, remote address + rkey ...).
    """

    dtype: str
    length: int
    location: dict[str, Any] = field(default_factory=dict)

    @property
    def itemsize(self) -> int:
        return np.dtype(self.dtype).itemsize


@dataclass(frozen=True)
class RegionDescriptor:
    """What a reader needs to reach a server's regions: transport, endpoint, regions."""

    transport: str
    endpoint: dict[str, Any]
    regions: dict[str, RegionInfo]

    def to_json(self) -> str:
        return json.dumps(
            {
                "transport": self.transport,
                "endpoint": self.endpoint,
                "regions": {
                    n: {"dtype": r.dtype, "length": r.length, "location": r.location}
                    for n, r in self.regions.items()
                },
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str | bytes) -> RegionDescriptor:
        """Parses and validates a descriptor (it crossed a process boundary).

        Raises:
            RegionError: Not a well-formed descriptor.
        """
        try:
            d = json.loads(text)
        except (ValueError, UnicodeDecodeError) as e:
            raise RegionError(f"descriptor is not JSON: {e}") from None
        if not isinstance(d, dict) or not isinstance(d.get("transport"), str):
            raise RegionError("descriptor needs a 'transport' name")
        endpoint = d.get("endpoint", {})
        regions = d.get("regions")
        if not isinstance(endpoint, dict) or not isinstance(regions, dict):
            raise RegionError("descriptor needs an 'endpoint' object and a 'regions' object")
        out: dict[str, RegionInfo] = {}
        for name, r in regions.items():
            if not isinstance(r, dict):
                raise RegionError(f"region {name!r}: not an object")
            dtype, length, loc = r.get("dtype"), r.get("length"), r.get("location", {})
            if dtype not in ALLOWED_DTYPES:
                raise RegionError(f"region {name!r}: dtype {dtype!r} not allowed")
            if not isinstance(length, int) or isinstance(length, bool) or length < 0:
                raise RegionError(f"region {name!r}: bad length {length!r}")
            if not isinstance(loc, dict):
                raise RegionError(f"region {name!r}: location must be an object")
            out[str(name)] = RegionInfo(dtype, length, loc)
        return cls(d["transport"], endpoint, out)


def check_range(info: RegionInfo, name: str, start: int, stop: int) -> None:
    """Raises :class:`RegionError` unless ``0 <= start <= stop <= length``."""
    if not (0 <= start <= stop <= info.length):
        raise RegionError(f"region {name!r}: range [{start}, {stop}) outside [0, {info.length})")


class RegionServer(Protocol):
    """The owner's side: publishes arrays for one-sided reads."""

    def publish(self, name: str, array: np.ndarray) -> None:
        """Makes a (copied, immutable) region ``name`` readable by remote readers."""
        ...

    def descriptor(self) -> RegionDescriptor:
        """What readers need to open this server's regions."""
        ...

    def close(self) -> None: ...


class RegionReader(Protocol):
    """The reader's side: one-sided reads of slices of remote regions."""

    regions: Mapping[str, RegionInfo]

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        """Elements ``[start, stop)`` of region ``name`` as a new local array."""
        ...

    def read_many(self, requests: list[tuple[str, int, int]]) -> list[np.ndarray]:
        """Several reads, pipelined where the transport can (one round trip for TCP)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class Transport:
    """A registered transport: how to serve, how to read, and whether it works here."""

    name: str
    server: Callable[..., RegionServer]
    reader: Callable[[RegionDescriptor], RegionReader]
    available: Callable[[], tuple[bool, str]]
    #: lower is preferred by :func:`best_transport`
    rank: int
    #: True when only processes of the same host can read (shared memory)
    same_host_only: bool = False


TRANSPORTS: dict[str, Transport] = {}


def register(t: Transport) -> None:
    TRANSPORTS[t.name] = t


def _load_builtin() -> None:
    # importing the modules registers them; kept lazy so that `import regions` stays cheap
    from linkstream.rdma import shm, tcp, verbs  # noqa: F401


def transport(name: str) -> Transport:
    """The transport registered as ``name``.

    Raises:
        RegionError: Unknown transport.
    """
    _load_builtin()
    try:
        return TRANSPORTS[name]
    except KeyError:
        raise RegionError(f"unknown transport {name!r} (known: {', '.join(sorted(TRANSPORTS))})") from None


def best_transport(same_host: bool) -> Transport:
    """The most preferred transport usable here (RDMA > shared memory > TCP)."""
    _load_builtin()
    for t in sorted(TRANSPORTS.values(), key=lambda t: t.rank):
        if t.same_host_only and not same_host:
            continue
        if t.available()[0]:
            return t
    raise RegionError("no transport is available")


def open_reader(descriptor: RegionDescriptor | str | bytes) -> RegionReader:
    """Opens a reader for a descriptor (object or its JSON text)."""
    d = descriptor if isinstance(descriptor, RegionDescriptor) else RegionDescriptor.from_json(descriptor)
    t = transport(d.transport)
    ok, why = t.available()
    if not ok:
        raise RegionError(f"transport {d.transport!r} is not usable here: {why}")
    return t.reader(d)


def as_region(array: np.ndarray) -> np.ndarray:
    """A 1-d, C-contiguous, little-endian array of an allowed dtype (copying only if needed).

    Raises:
        RegionError: dtype not allowed.
    """
    a = np.ascontiguousarray(np.asarray(array).reshape(-1))
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    if a.dtype.str not in ALLOWED_DTYPES:
        raise RegionError(f"dtype {a.dtype.str} cannot be published (allowed: {sorted(ALLOWED_DTYPES)})")
    return a
