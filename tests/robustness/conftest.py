"""Fixtures of the robustness tests: small real uvicorn servers with tight limits and tokens."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from linkstream.api.app import create_app
from linkstream.api.auth import Token
from linkstream.api.limits import ApiLimits
from linkstream.api.server import BackgroundServer, build_live

#: the tokens of the corpus server: name -> (scope, secret)
TOKENS = {
    "admin": ("admin", "admin-secret-0001"),
    "writer": ("write", "writer-secret-0002"),
    "other": ("write", "other-secret-0003"),
    "reader": ("read", "reader-secret-0004"),
    "quota": ("write", "quota-secret-0005"),
}

#: tight limits, so that each can be reached cheaply
LIMITS = ApiLimits(
    max_body_bytes=256 * 1024,
    max_query_bytes=16 * 1024,
    compile_seconds=1.0,
    max_queries_per_token=3,
    sparql_seconds=5.0,
    sparql_max_rows=5,
    max_json_depth=16,
    max_push_elements=5,
    max_push_triples=20,
    max_subscribers=2,
    body_seconds=1.0,
    header_seconds=1.0,
    max_header_bytes=8 * 1024,
)


def auth(name: str) -> dict[str, str]:
    """The ``Authorization`` header of a corpus token."""
    return {"Authorization": "Bearer " + TOKENS[name][1]}


@pytest.fixture(scope="module")
def static_graph(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten triples, so that a one-shot SELECT over them passes ``sparql_max_rows``."""
    path = tmp_path_factory.mktemp("static") / "g.nt"
    path.write_text("".join(f'<http://ex.org/s{i}> <http://ex.org/p> "{i}" .\n' for i in range(10)))
    return path


@pytest.fixture(scope="module")
def make_server(static_graph: Path) -> Iterator[Callable[..., BackgroundServer]]:
    """Starts real uvicorn servers over the ten-triple graph; all stopped at the end."""
    servers: list[BackgroundServer] = []

    def make(
        limits: ApiLimits = LIMITS, tokens: dict[str, tuple[str, str]] | None = TOKENS
    ) -> BackgroundServer:
        live = build_live([(None, str(static_graph))], idle_ms=None)
        toks = [Token(n, scope, secret) for n, (scope, secret) in (tokens or {}).items()]
        app = create_app(live, tokens=toks, limits=limits)
        srv = BackgroundServer(app, on_shutdown=live.close, limits=limits).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.stop()
