"""Fixtures of the HTTP API tests: a CityBench slice and real uvicorn servers on free ports.

The slice is the first elements of two road-traffic streams of the shared CityBench
corpus (``$LINKSTREAM_SHARED`` or ``../shared``) with the full sensor repository, or,
without the shared corpus, the repository's ``examples/citybench`` demo slice.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from linkstream.api.app import create_app
from linkstream.api.server import BackgroundServer, build_live
from tests.api.corpus import REPO, REPO_GRAPH, Corpus, build_corpus


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """The CityBench slice (skips when no CityBench data is found)."""
    shared = Path(os.environ.get("LINKSTREAM_SHARED") or REPO.parent / "shared").resolve()
    got = build_corpus(shared, tmp_path_factory.mktemp("slice"))
    if got is None:
        pytest.skip(f"no CityBench data: neither {shared} nor examples/citybench")
    return got


@pytest.fixture
def make_server(corpus: Corpus) -> Iterator[Callable[..., BackgroundServer]]:
    """Starts real uvicorn servers (static sensor repository loaded); all stopped at the end.

    Streams never go idle (``idle_ms=None``) unless asked, so that report times depend on
    event time only and results are deterministic.
    """
    servers: list[BackgroundServer] = []

    def make(token: str | None = None, **kw: object) -> BackgroundServer:
        kw.setdefault("idle_ms", None)
        live = build_live([(None, str(corpus.static)), (REPO_GRAPH, str(corpus.static))], **kw)  # type: ignore[arg-type]
        srv = BackgroundServer(create_app(live, token=token), on_shutdown=live.close).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.stop()
