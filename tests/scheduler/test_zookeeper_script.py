"""``infra/zookeeper.sh`` in its background mode: prints the PID, serves, stops.

(The session fixture uses its ``--foreground`` mode; ``infra/local-cluster`` and people
use this one.)
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.zookeeper

SCRIPT = Path(__file__).resolve().parents[2] / "infra" / "zookeeper.sh"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _ask(port: int, word: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
        sock.sendall(word.encode("ascii"))
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode()


def test_script_starts_a_standalone_server_and_stops_it(zk_server: str, tmp_path: Path) -> None:
    # Depending on zk_server makes sure the package is installed (or fails clearly).
    port = _free_port()
    result = subprocess.run(
        ["bash", str(SCRIPT), "--port", str(port), "--data-dir", str(tmp_path), "--tick-time", "200"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    pid = int(result.stdout.strip())
    try:
        assert (tmp_path / "zookeeper.pid").read_text().strip() == str(pid)
        assert _ask(port, "ruok") == "imok"
        assert "Mode: standalone" in _ask(port, "srvr")
        config = (tmp_path / "zoo.cfg").read_text()
        assert "clientPortAddress=127.0.0.1" in config and "admin.enableServer=false" in config
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", "--data-dir", str(tmp_path)], check=False, timeout=30)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
