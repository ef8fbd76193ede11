"""`linkstream run --store DIR --absorb STREAM`: static graphs from a store directory,
one-shot /sparql on the store's consistent snapshots, pushed elements absorbed into it."""

from __future__ import annotations

import pyoxigraph
import pytest

from linkstream.api.app import create_app
from linkstream.api.client import Client
from linkstream.api.server import BackgroundServer, build_live
from linkstream.store.loader import load_store

STREAM = "http://example.org/stream/obs"
EX = "http://example.org/"


@pytest.fixture
def store_dir(corpus, tmp_path):
    d = tmp_path / "store"
    load_store(d, [corpus.static], default_graph=True, partitions=4)
    return d


def _server(store_dir, **kw):
    live = build_live(store=str(store_dir), idle_ms=None, absorb=[STREAM], **kw)
    return BackgroundServer(create_app(live), on_shutdown=live.close).start()


def test_sparql_on_the_store_equals_pyoxigraph_and_sees_absorbed_elements(corpus, store_dir):
    ox = pyoxigraph.Store()
    ox.bulk_load(path=str(corpus.static), format=pyoxigraph.RdfFormat.N_TRIPLES)
    q_types = "SELECT ?t (COUNT(*) AS ?n) WHERE { ?s a ?t } GROUP BY ?t ORDER BY ?t"
    expected = [(str(r["t"].value), int(r["n"].value)) for r in ox.query(q_types)]
    srv = _server(store_dir)
    try:
        with Client(srv.url) as c:
            got = c.sparql(q_types)["results"]["bindings"]
            assert [(b["t"]["value"], int(b["n"]["value"])) for b in got] == expected
            count = "SELECT (COUNT(*) AS ?n) WHERE { ?o <%svalue> ?v ; <%sat> ?t }" % (EX, EX)
            assert int(c.sparql(count)["results"]["bindings"][0]["n"]["value"]) == 0
            for i in range(20):
                c.push_triples(
                    STREAM,
                    1000 * (i + 1),
                    [
                        (
                            f"<{EX}obs{i}>",
                            f"<{EX}value>",
                            f'"{i}"^^<http://www.w3.org/2001/XMLSchema#integer>',
                        ),
                        (f"<{EX}obs{i}>", f"<{EX}at>", f'"{i}"'),
                    ],
                )
            # the one-shot query is served after every element pushed before it
            rows = c.sparql(count)["results"]["bindings"]
            assert int(rows[0]["n"]["value"]) == 20
            total = c.sparql("SELECT (SUM(?v) AS ?s) WHERE { ?o <%svalue> ?v }" % EX, method="POST")[
                "results"
            ]["bindings"][0]["s"]["value"]
            assert int(total) == sum(range(20))
    finally:
        srv.stop()


def test_absorb_needs_a_store_and_store_excludes_dictionary(store_dir):
    with pytest.raises(ValueError, match="--absorb needs --store"):
        build_live(absorb=[STREAM])
    with pytest.raises(ValueError, match="own dictionary"):
        build_live(store=str(store_dir), dictionary="lmdb:/tmp/x")
