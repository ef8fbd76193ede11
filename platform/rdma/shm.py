"""Shared-memory regions: one-sided reads between processes of one host.

The server copies each published array into its own POSIX shared-memory segment; a
reader maps the segment once and every read is a memcpy of the slice -- the server's
CPU never takes part, as with an RDMA READ.  Segments are read-only by convention
(published arrays are immutable); the server unlinks them on :meth:`ShmServer.close`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping
from multiprocessing import resource_tracker, shared_memory

import numpy as np

from linkstream.rdma.regions import (
    RegionDescriptor,
    RegionError,
    RegionInfo,
    Transport,
    as_region,
    check_range,
    register,
)


def _attach(name: str) -> shared_memory.SharedMemory:
    try:
        seg = shared_memory.SharedMemory(name=name, create=False)
    except FileNotFoundError:
        raise RegionError(f"shared-memory segment {name!r} does not exist (server gone?)") from None
    # Python < 3.13 registers attached segments with this process's resource tracker, which
    # would unlink them when the reader exits; the server owns them.
    try:
        resource_tracker.unregister(seg._name, "shared_memory")  # type: ignore[attr-defined]  # private SharedMemory name
    except Exception:  # noqa: BLE001 - tracker details differ between versions
        pass
    return seg


class ShmServer:
    """Publishes arrays as shared-memory segments."""

    def __init__(self, prefix: str = "ls") -> None:
        self._prefix = f"{prefix}-{os.getpid()}-{secrets.token_hex(4)}"
        self._segments: dict[str, shared_memory.SharedMemory] = {}
        self._infos: dict[str, RegionInfo] = {}

    def publish(self, name: str, array: np.ndarray) -> None:
        if name in self._infos:
            raise RegionError(f"region {name!r} is already published")
        a = as_region(array)
        seg = shared_memory.SharedMemory(
            name=f"{self._prefix}-{len(self._segments)}", create=True, size=max(a.nbytes, 1)
        )
        np.frombuffer(seg.buf, dtype=a.dtype, count=len(a))[:] = a  # type: ignore[arg-type]  # ``buf`` is None only once closed
        self._segments[name] = seg
        self._infos[name] = RegionInfo(a.dtype.str, len(a), {"segment": seg.name})

    def descriptor(self) -> RegionDescriptor:
        return RegionDescriptor("shm", {"host": os.uname().nodename}, dict(self._infos))

    def close(self) -> None:
        for seg in self._segments.values():
            seg.close()
            try:
                seg.unlink()
            except FileNotFoundError:
                pass
        self._segments.clear()
        self._infos.clear()


class ShmReader:
    """Maps a server's segments (lazily) and copies slices out of them."""

    def __init__(self, descriptor: RegionDescriptor) -> None:
        self.regions: Mapping[str, RegionInfo] = descriptor.regions
        self._maps: dict[str, shared_memory.SharedMemory] = {}

    def _segment(self, name: str) -> shared_memory.SharedMemory:
        seg = self._maps.get(name)
        if seg is None:
            info = self.regions.get(name)
            if info is None:
                raise RegionError(f"unknown region {name!r}")
            seg_name = info.location.get("segment")
            if not isinstance(seg_name, str):
                raise RegionError(f"region {name!r}: no segment name")
            seg = _attach(seg_name)
            if seg.size < info.length * info.itemsize:
                seg.close()
                raise RegionError(f"region {name!r}: segment smaller than its declared length")
            self._maps[name] = seg
        return seg

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        seg = self._segment(name)
        info = self.regions[name]
        check_range(info, name, start, stop)
        # a temporary view (no export outlives the call, so close() can unmap)
        return np.frombuffer(
            seg.buf,  # type: ignore[arg-type]  # ``buf`` is None only once closed
            dtype=np.dtype(info.dtype),
            count=stop - start,
            offset=start * info.itemsize,
        ).copy()

    def read_many(self, requests: list[tuple[str, int, int]]) -> list[np.ndarray]:
        return [self.read(n, a, b) for n, a, b in requests]

    def close(self) -> None:
        maps, self._maps = self._maps, {}
        for seg in maps.values():
            seg.close()


def _available() -> tuple[bool, str]:
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        return True, "POSIX shared memory"
    return False, "/dev/shm is not writable"


register(Transport("shm", ShmServer, ShmReader, _available, rank=1, same_host_only=True))
