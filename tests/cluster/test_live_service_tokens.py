"""Issue 15: token scopes, request limits and TLS in cluster mode (``run --zk``).

Two API coordinators and one container, started with the options of embedded ``run``:
``--tokens-file`` (a ``read``, two ``write`` and an ``admin`` token), ``--max-queries-per-token 2``
and ``--tls-cert/--tls-key`` (HTTPS; the standby forwards to the leader over HTTPS, checking its
certificate).  Every answer of the standby equals the answer of an embedded ``run`` with the
same tokens and limits: a read token cannot register, no token is 401, the third query of a
token is 429 naming the limit, another write token cannot remove a query it did not register
(also after the leader changed), an admin token can.
"""

from __future__ import annotations

import json
import shutil
import signal
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from linkstream.api.app import create_app
from linkstream.api.auth import load_tokens_file
from linkstream.api.limits import ApiLimits
from linkstream.api.server import BackgroundServer, build_live
from linkstream.cluster.localcluster import LocalCluster

pytestmark = [pytest.mark.cluster, pytest.mark.zookeeper]

TOKENS = [
    {"name": "reader", "scope": "read", "secret": "r-secret-0123456789"},
    {"name": "writer", "scope": "write", "secret": "w-secret-0123456789"},
    {"name": "other", "scope": "write", "secret": "o-secret-0123456789"},
    {"name": "boss", "scope": "admin", "secret": "a-secret-0123456789"},
]
Q = (
    "PREFIX ex: <http://example.org/> REGISTER RSTREAM <{name}> AS SELECT ?s ?o "
    "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S] WHERE {{ WINDOW ex:w {{ ?s ex:p ?o }} }}"
)


def _auth(name: str) -> dict[str, str]:
    secret = next(t["secret"] for t in TOKENS if t["name"] == name)
    return {"Authorization": "Bearer " + secret}


def _cert(tmp: Path) -> tuple[Path, Path]:
    cert, key = tmp / "c.pem", tmp / "k.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return cert, key


def _role(http: httpx.Client, url: str) -> str:
    try:
        return str(http.get(url + "/status", headers=_auth("reader"), timeout=5).json().get("role", "?"))
    except (httpx.HTTPError, ValueError):
        return "down"


def _answers(http: httpx.Client, url: str) -> list[tuple[int, Any]]:
    """The same requests on a server; ``(status, body)`` of each."""
    out: list[tuple[int, Any]] = []

    def call(method: str, path: str, who: str | None, **kw: Any) -> httpx.Response:
        r = http.request(method, url + path, headers=_auth(who) if who else {}, timeout=30, **kw)
        out.append((r.status_code, r.json() if r.content else None))
        return r

    call("GET", "/queries", None)  # 401
    call("GET", "/queries", "reader")  # 200, empty
    call("POST", "/queries", "reader", json={"query": Q.format(name="a1")})  # 403
    call("POST", "/queries", "writer", json=[{"query": Q.format(name=n)} for n in ("a1", "a2", "a3")])  # 429
    call("POST", "/queries", "writer", json={"query": Q.format(name="a1")})  # 201
    call("POST", "/queries", "writer", json={"query": Q.format(name="a2")})  # 201
    call("POST", "/queries", "writer", json={"query": Q.format(name="a3")})  # 429: the third
    call("POST", "/queries", "other", json={"query": Q.format(name="b1")})  # 201: another token
    call("DELETE", "/queries/a1", "other")  # 403: not its query
    call("DELETE", "/queries/a1", "reader")  # 403: scope
    return out


def _normal(answers: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """Answers without what differs by nature between a cluster and one process (states)."""
    out = []
    for status, body in answers:
        if isinstance(body, dict):
            body = {k: v for k, v in body.items() if k not in ("state", "next_report", "first_report")}
        out.append((status, body))
    return out


def test_tokens_limits_and_tls_as_embedded_run(tmp_path: Path, zk_server: str, zk_chroot: str) -> None:
    if shutil.which("openssl") is None:
        pytest.skip("no openssl to make a certificate")
    cert, key = _cert(tmp_path)
    tokens_file = tmp_path / "tokens.json"
    tokens_file.write_text(json.dumps(TOKENS), encoding="utf-8")
    verify = ssl.create_default_context(cafile=str(cert))
    flags = ["--tokens-file", str(tokens_file), "--max-queries-per-token", "2"]
    flags += ["--tls-cert", str(cert), "--tls-key", str(key), "--idle-ms", "0"]

    live = build_live(idle_ms=None)
    app = create_app(
        live, tokens=load_tokens_file(str(tokens_file)), limits=ApiLimits(max_queries_per_token=2)
    )
    embedded = BackgroundServer(app, on_shutdown=live.close, tls_cert=str(cert), tls_key=str(key)).start()
    cluster = LocalCluster(tmp_path / "cluster", zk=f"{zk_server}{zk_chroot}", session_timeout=2.0)
    try:
        cluster.start(0, coordinators=0)
        for _ in range(2):
            cluster.start_coordinator(flags)
        cluster.add_containers(1)
        urls = cluster.api_urls(timeout=30)
        assert len(urls) == 2 and all(u.startswith("https://") for u in urls.values()), urls
        with httpx.Client(verify=verify) as http:
            deadline = time.monotonic() + 30
            while True:
                roles = {c: _role(http, u) for c, u in urls.items()}
                if sorted(roles.values()) == ["leader", "standby"]:
                    break
                assert time.monotonic() < deadline, roles
                time.sleep(0.2)
            leader = next(c for c, r in roles.items() if r == "leader")
            standby = next(c for c, r in roles.items() if r == "standby")

            have = _answers(http, urls[standby])  # through the standby: forwarded over HTTPS
            want = _answers(http, embedded.url)
            assert [s for s, _ in have] == [401, 200, 403, 429, 201, 201, 429, 201, 403, 403], have
            assert _normal(have) == _normal(want)
            assert "needs scope write" in have[2][1]["error"]
            assert have[3][1]["limit"] == "max_queries_per_token"
            r = http.get(urls[standby] + "/queries/a1", headers=_auth("reader"))
            assert r.status_code == 200 and r.json()["name"] == "a1"
            with pytest.raises(httpx.HTTPError):  # plain HTTP on the TLS port gets no answer
                httpx.get(urls[standby].replace("https", "http") + "/healthz", timeout=2)

            # the leader dies: the new one knows who registered a1 from the registry
            cluster.kill(leader, signal.SIGKILL)
            deadline = time.monotonic() + 30
            while _role(http, urls[standby]) != "leader":
                assert time.monotonic() < deadline, "the standby did not take over"
                time.sleep(0.2)
            r = http.delete(urls[standby] + "/queries/a1", headers=_auth("other"))
            assert r.status_code == 403 and "registered with token 'writer'" in r.json()["error"], r.text
            assert http.delete(urls[standby] + "/queries/a1", headers=_auth("boss")).status_code == 204
            assert http.delete(urls[standby] + "/queries/a2", headers=_auth("writer")).status_code == 204
            names = [
                q["name"]
                for q in http.get(urls[standby] + "/queries", headers=_auth("reader")).json()["queries"]
            ]
            assert names == ["b1"]
    finally:
        cluster.stop()
        embedded.stop()
