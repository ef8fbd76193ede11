"""A network namespace a test puts one process into, and cuts off and restores.

:class:`Netns` creates a named network namespace (``ip netns add``) with only its own
loopback, and bridges chosen TCP ports between it and the host's loopback: each
bridge is a listening socket on one side whose connections are relayed, byte for byte,
to the same port on the other side (the test process opens the namespace's sockets
from a thread that entered it with ``setns``).  A process started with
:meth:`Netns.command` (``ip netns exec``) thus reaches ZooKeeper and the driver at the
same ``127.0.0.1`` addresses as everyone else, and is reached at its own.

:meth:`Netns.cut` loads an nftables table into the namespace whose input and output
hooks drop every packet: the kernel silently discards all traffic of the process
(connections stay open, nothing is reset, new connects hang), as a pulled cable or a
partition would; :meth:`Netns.heal` deletes the table and TCP retransmits what was
held back.  The relay never stops forwarding: the cut is the kernel's.

Needs root (``CAP_NET_ADMIN``), ``ip`` (iproute2) and ``nft`` (nftables, both installed
by ``infra/install-system-deps.sh``) and a kernel with network namespaces and
nf_tables; :func:`netns_or_skip` skips the test, saying which is missing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from typing import TypeVar

import pytest

CLONE_NEWNET = 0x40000000
CUT_TABLE = "linkstream_cut"
CUT_RULES = f"""table inet {CUT_TABLE} {{
  chain input {{ type filter hook input priority -300; policy drop; }}
  chain output {{ type filter hook output priority -300; policy drop; }}
}}
"""

T = TypeVar("T")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=False, timeout=30)


class Netns:
    """A named network namespace with TCP port bridges to the host (see the module doc)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.path = f"/run/netns/{name}"
        self._libc = ctypes.CDLL(None, use_errno=True)
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.cut_active = False
        self.relayed = 0  # connections relayed so far

    # ------------------------------------------------------------------ set-up

    def create(self) -> None:
        """Adds the namespace and brings its loopback up (raises ``RuntimeError``)."""
        for args in (("ip", "netns", "add", self.name), ("ip", "-n", self.name, "link", "set", "lo", "up")):
            done = _run(*args)
            if done.returncode != 0:
                raise RuntimeError(f"{' '.join(args)}: {done.stderr.strip()}")

    def command(self, argv: list[str]) -> list[str]:
        """``argv`` run inside the namespace."""
        return ["ip", "netns", "exec", self.name, *argv]

    def inside(self, fn: Callable[[], T]) -> T:
        """Runs ``fn`` on a thread that entered the namespace (sockets it makes live there)."""
        out: list[T] = []
        err: list[BaseException] = []

        def run() -> None:
            try:
                fd = os.open(self.path, os.O_RDONLY)
                try:
                    if self._libc.setns(fd, CLONE_NEWNET) != 0:
                        raise OSError(ctypes.get_errno(), f"setns({self.path})")
                finally:
                    os.close(fd)
                out.append(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                err.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join()
        if err:
            raise err[0]
        return out[0]

    def _listen(self, port: int) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(64)
        sock.settimeout(0.2)
        return sock

    def forward_out(self, port: int) -> None:
        """Connections to 127.0.0.1:``port`` inside the namespace reach the host's."""
        listener = self.inside(lambda: self._listen(port))
        self._serve(listener, lambda: socket.create_connection(("127.0.0.1", port), timeout=5))

    def forward_in(self, port: int) -> None:
        """Connections to the host's 127.0.0.1:``port`` reach the namespace's."""
        listener = self._listen(port)
        self._serve(
            listener, lambda: self.inside(lambda: socket.create_connection(("127.0.0.1", port), timeout=5))
        )

    def _serve(self, listener: socket.socket, dial: Callable[[], socket.socket]) -> None:
        with self._lock:
            self._sockets.append(listener)

        def accept_loop() -> None:
            while not self._stop.is_set():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                threading.Thread(target=self._relay, args=(conn, dial), daemon=True).start()

        threading.Thread(target=accept_loop, daemon=True).start()

    def _relay(self, conn: socket.socket, dial: Callable[[], socket.socket]) -> None:
        try:
            peer = dial()
        except OSError:
            conn.close()  # nothing listens on the other side (yet): as a refused connect
            return
        for s in (conn, peer):
            s.settimeout(None)
        with self._lock:
            self._sockets += [conn, peer]
            self.relayed += 1
        threading.Thread(target=self._pump, args=(peer, conn), daemon=True).start()
        self._pump(conn, peer)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
            dst.shutdown(socket.SHUT_WR)
        except OSError:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.close()

    # ------------------------------------------------------------------ the cut

    def cut(self) -> None:
        """Drops every packet in and out of the namespace from now on."""
        done = subprocess.run(
            ["ip", "netns", "exec", self.name, "nft", "-f", "-"],
            input=CUT_RULES,
            capture_output=True,
            text=True,
            check=False,
            timeout=30,
        )
        if done.returncode != 0:
            raise RuntimeError(f"nft (cut {self.name}): {done.stderr.strip()}")
        self.cut_active = True

    def heal(self) -> None:
        """Removes the cut."""
        done = _run("ip", "netns", "exec", self.name, "nft", "delete", "table", "inet", CUT_TABLE)
        if done.returncode != 0:
            raise RuntimeError(f"nft (heal {self.name}): {done.stderr.strip()}")
        self.cut_active = False

    def close(self) -> None:
        """Stops the bridges and deletes the namespace."""
        self._stop.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.close()
        _run("ip", "netns", "del", self.name)


def netns_or_skip(name: str) -> Netns:
    """A created :class:`Netns` with a cut that works, or a skipped test saying why not."""
    if os.geteuid() != 0:
        pytest.skip("the network cut needs root (CAP_NET_ADMIN) for a network namespace and nftables")
    for tool, package in (("ip", "iproute2"), ("nft", "nftables")):
        if shutil.which(tool) is None:
            pytest.skip(f"the network cut needs '{tool}' (Debian package {package}; make system-deps)")
    ns = Netns(name)
    try:
        ns.create()
        ns.cut()  # the kernel must accept the rules, or the test would assert nothing
        ns.heal()
    except (RuntimeError, OSError) as exc:
        ns.close()
        pytest.skip(f"the kernel refused the network namespace or its nftables cut: {exc}")
    return ns
