"""Fixtures of the durability tests: a real moto S3 server (server mode, its own process).

boto3 talks HTTP to it exactly as to AWS; the endpoint reaches boto3 through the standard
``AWS_ENDPOINT_URL_S3`` variable (set for this process and handed to subprocesses).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

boto3 = pytest.importorskip("boto3", reason="boto3 is not installed (test extra)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _moto_command(port: int) -> list[str]:
    exe = os.path.join(os.path.dirname(sys.executable), "moto_server")
    if not os.path.exists(exe):
        exe = shutil.which("moto_server") or ""
    if not exe:
        pytest.skip("moto[server] is not installed (test extra)")
    return [exe, "-H", "127.0.0.1", "-p", str(port)]


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[SimpleNamespace]:
    """A moto S3 server: ``.endpoint``, ``.env`` (AWS variables for boto3) and ``.client()``."""
    port = _free_port()
    proc = subprocess.Popen(_moto_command(port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL_S3": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise AssertionError("moto_server did not start") from None
                time.sleep(0.1)

        def client() -> object:
            return boto3.client("s3")

        yield SimpleNamespace(endpoint=endpoint, env=env, client=client, port=port)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.fixture
def s3_bucket(moto_s3: SimpleNamespace, request: pytest.FixtureRequest) -> str:
    """A fresh bucket on the moto server, named after the test."""
    name = "ls-" + "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:50].strip("-")
    moto_s3.client().create_bucket(Bucket=name)
    return name
