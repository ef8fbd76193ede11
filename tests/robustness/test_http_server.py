"""The server under connection floods: idle sockets (slowloris), the connection cap, and
1,000 concurrent Server-Sent Events subscribers; one-shot deadlines."""

from __future__ import annotations

import asyncio
import resource
import socket
import statistics
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from linkstream.api.limits import ApiLimits, DeadlineExceeded, Interruptible, call_with_deadline
from linkstream.api.server import BackgroundServer

IDLE = 2000


@pytest.fixture(autouse=True)
def enough_fds() -> Iterator[None]:
    """Both ends of every socket live in this process: raise the open-files soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * IDLE + 1024
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"open-files hard limit {hard} < {want}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def healthz_seconds(srv: BackgroundServer) -> float:
    """Seconds from connecting to the complete ``/healthz`` answer, over a new connection."""
    t0 = time.perf_counter()
    with socket.create_connection((srv.host, srv.port), timeout=10) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(4096):
            data += chunk
    took = time.perf_counter() - t0
    assert data.startswith(b"HTTP/1.1 200") and data.endswith(b'{"status":"ok"}'), data
    return took


def open_idle(srv: BackgroundServer, n: int) -> list[socket.socket]:
    """``n`` slowloris connections: half silent, half with a request head trickled half-way."""
    socks = []
    for i in range(n):
        s = socket.create_connection((srv.host, srv.port), timeout=10)
        if i % 2:
            s.sendall(b"GET /queries HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        socks.append(s)
    return socks


def test_healthz_answers_under_2000_idle_connections(make_server: Any, capsys: Any) -> None:
    srv = make_server(limits=ApiLimits(header_seconds=60.0))
    socks = open_idle(srv, IDLE)
    try:
        time.sleep(0.5)
        assert srv.guard.open >= IDLE
        took = [healthz_seconds(srv) for _ in range(50)]
    finally:
        for s in socks:
            s.close()
    with capsys.disabled():
        print(
            "\n/healthz under %d idle connections: median %.1f ms, max %.1f ms"
            % (IDLE, statistics.median(took) * 1e3, max(took) * 1e3)
        )
    assert max(took) < 1.0
    assert statistics.median(took) < 0.1


def test_connection_cap_evicts_idle_connections(make_server: Any) -> None:
    srv = make_server(limits=ApiLimits(header_seconds=60.0, max_connections=500))
    socks = open_idle(srv, 1000)
    try:
        time.sleep(0.5)
        assert healthz_seconds(srv) < 1.0
        assert srv.guard.evicted >= 500 and srv.guard.open <= 500
    finally:
        for s in socks:
            s.close()


def test_idle_connections_time_out(make_server: Any) -> None:
    srv = make_server(limits=ApiLimits(header_seconds=0.5))
    socks = open_idle(srv, 200)
    try:
        time.sleep(1.5)
        closed = 0
        for s in socks:
            s.settimeout(2)
            data = s.recv(4096)
            closed += data.startswith(b"HTTP/1.1 408") or data == b""
        assert closed == len(socks)
        assert srv.guard.timed_out >= len(socks)
    finally:
        for s in socks:
            s.close()


def test_1000_sse_subscribers_are_served(make_server: Any) -> None:
    srv = make_server(tokens=None, limits=ApiLimits())
    q = "SELECT ?x WHERE { STREAM <http://ex.org/s> [RANGE 3s] { ?x ?p ?o } }"
    assert httpx.post(srv.url + "/queries", params={"name": "q"}, content=q.encode()).status_code == 201
    socks = []
    try:
        for _ in range(1000):
            s = socket.create_connection((srv.host, srv.port), timeout=20)
            s.sendall(b"GET /queries/q/results HTTP/1.1\r\nHost: x\r\n\r\n")
            socks.append(s)
        for s in socks:
            got = b""
            while b"subscribed" not in got:
                more = s.recv(4096)
                assert more, got
                got += more
        assert httpx.get(srv.url + "/status").json()["subscribers"] == 1000
        assert healthz_seconds(srv) < 1.0
        r = httpx.post(
            srv.url + "/streams",
            params={"iri": "http://ex.org/s", "t": "1000"},
            content=b"<http://ex.org/a> <http://ex.org/p> <http://ex.org/b> .\n",
        )
        assert r.status_code == 202
        assert httpx.post(srv.url + "/watermark", params={"t": "5000"}, timeout=60).status_code == 200
        for s in socks:  # every subscriber gets the row
            got = b""
            while b"ex.org/a" not in got:
                more = s.recv(65536)
                assert more, got
                got += more
    finally:
        for s in socks:
            s.close()


def test_deadline_interrupts_python_code() -> None:
    def spin() -> None:
        while True:
            pass

    async def main() -> float:
        t0 = time.perf_counter()
        with pytest.raises(DeadlineExceeded):
            await call_with_deadline(spin, 0.2)
        return time.perf_counter() - t0

    assert asyncio.run(main()) < 1.0
    guard = Interruptible()
    guard.interrupt()
    with pytest.raises(DeadlineExceeded):  # interrupted before it started: never runs
        guard.run(lambda: 1)
    assert Interruptible().run(lambda: 2) == 2


def test_tls(tmp_path: Any) -> None:
    """``tls_cert``/``tls_key`` (``run --tls-cert/--tls-key``) serve HTTPS."""
    import shutil
    import ssl
    import subprocess

    from linkstream.api.app import create_app
    from linkstream.api.server import build_live

    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate")
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    live = build_live(idle_ms=None)
    with BackgroundServer(
        create_app(live), on_shutdown=live.close, tls_cert=str(cert), tls_key=str(key)
    ) as srv:
        assert srv.url.startswith("https://")
        r = httpx.get(srv.url + "/healthz", verify=ssl.create_default_context(cafile=str(cert)))
        assert r.json() == {"status": "ok"}
        with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port gets no answer
            httpx.get(srv.url.replace("https", "http") + "/healthz", timeout=2)
