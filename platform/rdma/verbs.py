"""RDMA regions through pyverbs (rdma-core): one-sided RDMA READ of remote memory.

The server listens with the RDMA connection manager (``RDMA_PS_TCP``, a reliable
connected QP per reader).  For each accepted reader it registers every published
region as a memory region with ``IBV_ACCESS_REMOTE_READ`` and sends one message with
the regions' remote addresses and rkeys; from then on the reader posts RDMA READs
straight into its own registered buffer and the server's CPU is never involved -- the
access pattern of Wukong's graph exploration.

Hardware: needs an RDMA device (``/sys/class/infiniband`` non-empty: InfiniBand,
RoCE, AWS EFA with the verbs provider, or soft-RoCE).  Debian's ``python3-pyverbs`` is
built for the system python; :func:`_import_pyverbs` finds it from a venv without
putting all of ``dist-packages`` on ``sys.path``.  Machines without a device get the
shared-memory or TCP transports from :func:`~linkstream.rdma.regions.best_transport`.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgpack
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

log = logging.getLogger(__name__)

SYS_INFINIBAND = Path("/sys/class/infiniband")
DIST_PACKAGES = Path("/usr/lib/python3/dist-packages")
#: size of the one message that carries the regions' addresses and keys
_INFO_BYTES = 1 << 16


def _import_pyverbs() -> Any:
    """Imports pyverbs, adding a private path that holds only Debian's package if needed."""
    try:
        return importlib.import_module("pyverbs")
    except ImportError:
        pass
    src = DIST_PACKAGES / "pyverbs"
    if not src.is_dir():
        raise ImportError("pyverbs is not installed (apt-get install -y python3-pyverbs rdma-core)")
    shim = Path(tempfile.gettempdir()) / f"linkstream-pyverbs-{os.getuid()}"
    shim.mkdir(exist_ok=True)
    link = shim / "pyverbs"
    if not link.exists():
        link.symlink_to(src)
    sys.path.append(str(shim))
    return importlib.import_module("pyverbs")


def rdma_devices() -> list[str]:
    """Names of the RDMA devices of this host (empty without InfiniBand/RoCE/EFA)."""
    if not SYS_INFINIBAND.is_dir():
        return []
    return sorted(p.name for p in SYS_INFINIBAND.iterdir())


def _available() -> tuple[bool, str]:
    devices = rdma_devices()
    if not devices:
        return False, f"no RDMA device ({SYS_INFINIBAND} is absent or empty; no InfiniBand/RoCE/EFA here)"
    try:
        _import_pyverbs()
    except ImportError as e:
        return False, str(e)
    return True, f"RDMA devices: {', '.join(devices)}"


class RdmaServer:
    """Publishes arrays for one-sided RDMA READs by connected readers."""

    def __init__(self, host: str, port: int = 0) -> None:
        ok, why = _available()
        if not ok:
            raise RegionError(why)
        self._pv = _import_pyverbs()
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo
        from pyverbs.qp import QPCap, QPInitAttr

        self._ce, self._CMID, self._AddrInfo = ce, CMID, AddrInfo
        self._qp_init = QPInitAttr(cap=QPCap(max_send_wr=4, max_recv_wr=4))
        self.host = host
        self.port = port or _free_port(host)
        self._listener = CMID(
            creator=AddrInfo(host, str(self.port), ce.RDMA_PS_TCP, ce.RAI_PASSIVE),
            qp_init_attr=self._qp_init,
        )
        self._listener.listen()
        self._arrays: dict[str, np.ndarray] = {}
        self._infos: dict[str, RegionInfo] = {}
        self._conns: list[tuple[Any, list[Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept_loop, name="rdma-accept", daemon=True)
        self._thread.start()

    def publish(self, name: str, array: np.ndarray) -> None:
        if name in self._infos:
            raise RegionError(f"region {name!r} is already published")
        a = as_region(array).copy()
        self._arrays[name] = a
        self._infos[name] = RegionInfo(a.dtype.str, len(a), {})

    def descriptor(self) -> RegionDescriptor:
        return RegionDescriptor("rdma", {"host": self.host, "port": self.port}, dict(self._infos))

    def _accept_loop(self) -> None:
        import pyverbs.enums as e

        while not self._stop.is_set():
            try:
                conn = self._listener.get_request()
                mrs, table = [], {}
                for name, a in self._arrays.items():
                    mr = conn.reg_read(max(a.nbytes, 1))
                    if a.nbytes:
                        mr.write(a.tobytes(), a.nbytes, 0)
                    mrs.append(mr)
                    table[name] = [int(mr.buf), int(mr.rkey)]
                conn.accept()
                msg = msgpack.packb({"regions": table})
                out = conn.reg_msgs(_INFO_BYTES)
                out.write(msg, len(msg), 0)
                conn.post_send(out, e.IBV_SEND_SIGNALED, len(msg))
                conn.get_send_comp()
                mrs.append(out)
                self._conns.append((conn, mrs))
            except Exception as ex:  # noqa: BLE001 - a failed reader must not stop the server
                if not self._stop.is_set():
                    log.warning("RDMA reader connection failed: %s", ex)

    def close(self) -> None:
        self._stop.set()
        for conn, mrs in self._conns:
            for mr in mrs:
                mr.close()
            conn.close()
        self._listener.close()


class RdmaReader:
    """Connects to an :class:`RdmaServer` and reads slices with one-sided RDMA READs."""

    def __init__(self, descriptor: RegionDescriptor) -> None:
        _import_pyverbs()
        import pyverbs.cm_enums as ce
        from pyverbs.cmid import CMID, AddrInfo
        from pyverbs.qp import QPCap, QPInitAttr

        host, port = descriptor.endpoint.get("host"), descriptor.endpoint.get("port")
        if not isinstance(host, str) or not isinstance(port, int):
            raise RegionError("rdma descriptor needs endpoint.host and endpoint.port")
        self.regions: Mapping[str, RegionInfo] = descriptor.regions
        self._id = CMID(
            creator=AddrInfo(host, str(port), ce.RDMA_PS_TCP),
            qp_init_attr=QPInitAttr(cap=QPCap(max_send_wr=64, max_recv_wr=4)),
        )
        info = self._id.reg_msgs(_INFO_BYTES)
        self._id.post_recv(info, _INFO_BYTES)
        self._id.connect()
        wc = None
        while wc is None:
            wc = self._id.get_recv_comp()
        table = msgpack.unpackb(info.read(wc.byte_len, 0), raw=False)["regions"]
        self._remote = {n: (int(v[0]), int(v[1])) for n, v in table.items()}
        info.close()
        self._buf = None
        self._buf_size = 0

    def _local(self, nbytes: int) -> Any:
        if self._buf is None or self._buf_size < nbytes:
            if self._buf is not None:
                self._buf.close()
            self._buf_size = max(nbytes, 1 << 20)
            self._buf = self._id.reg_msgs(self._buf_size)
        return self._buf

    def read(self, name: str, start: int, stop: int) -> np.ndarray:
        import pyverbs.enums as e

        info = self.regions.get(name)
        if info is None or name not in self._remote:
            raise RegionError(f"unknown region {name!r}")
        check_range(info, name, start, stop)
        nbytes = (stop - start) * info.itemsize
        if nbytes == 0:
            return np.empty(0, dtype=np.dtype(info.dtype))
        addr, rkey = self._remote[name]
        buf = self._local(nbytes)
        self._id.post_read(buf, nbytes, addr + start * info.itemsize, rkey, e.IBV_SEND_SIGNALED)
        wc = None
        while wc is None:
            wc = self._id.get_send_comp()
        if wc.status != 0:
            raise RegionError(f"RDMA READ of {name!r} failed with status {wc.status}")
        return np.frombuffer(buf.read(nbytes, 0), dtype=np.dtype(info.dtype)).copy()

    def read_many(self, requests: list[tuple[str, int, int]]) -> list[np.ndarray]:
        return [self.read(n, a, b) for n, a, b in requests]

    def close(self) -> None:
        if self._buf is not None:
            self._buf.close()
        self._id.close()


def _free_port(host: str) -> int:
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


register(Transport("rdma", RdmaServer, RdmaReader, _available, rank=0))
