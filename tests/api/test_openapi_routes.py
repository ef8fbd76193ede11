"""The OpenAPI document describes every route the servers answer, and the answers match it."""

from __future__ import annotations

import re

from starlette.routing import Route
from starlette.testclient import TestClient

from linkstream.api.app import create_app
from linkstream.api.openapi import openapi_schema
from linkstream.api.server import build_live
from linkstream.cluster.ingest import INGEST_PATH
from linkstream.cluster.results import LOG_PATH

Q = (
    "PREFIX ex: <http://example.org/> REGISTER RSTREAM <q{n}> AS SELECT ?s "
    "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S] WHERE {{ WINDOW ex:w {{ ?s ex:p ?o }} }}"
)


def test_every_route_is_in_the_schema_with_its_methods() -> None:
    app = create_app(build_live(idle_ms=None), guard=False)
    served: dict[str, set[str]] = {}
    for route in app.routes:  # type: ignore[attr-defined]
        assert isinstance(route, Route)
        path = re.sub(r"\{(\w+):\w+\}", r"{\1}", route.path)
        served.setdefault(path, set()).update(m.lower() for m in route.methods or () if m != "HEAD")
    served[LOG_PATH] = {"get"}  # every coordinator of run --zk (cluster/proxy.py)
    served[INGEST_PATH] = {"post"}  # the leader of run --zk, for stream owners (cluster/proxy.py)
    paths = openapi_schema()["paths"]
    assert {p: set(ops) for p, ops in paths.items()} == served


def test_state_and_batch_answers_match_the_schema() -> None:
    doc = openapi_schema()
    pattern = doc["components"]["schemas"]["QuerySummary"]["properties"]["state"]["pattern"]
    live = build_live(idle_ms=None)
    with TestClient(create_app(live)) as http:
        r = http.post("/queries", json=[{"query": Q.format(n=i)} for i in range(3)])
        assert r.status_code == 201 and [q["name"] for q in r.json()["queries"]] == ["q0", "q1", "q2"]
        assert all(re.match(pattern, q["state"]) for q in r.json()["queries"])
        r = http.post("/queries", json=[{"query": Q.format(n=3)}, {"query": Q.format(n=1)}])
        batch_error = doc["components"]["schemas"]["BatchError"]["allOf"][1]["properties"]
        assert r.status_code == 409 and set(r.json()) <= {"error", "where", *batch_error}
        assert r.json()["index"] == 1 and r.json()["registered"] == ["q3"]
        listed = http.get("/queries").json()["queries"]
        assert [q["name"] for q in listed] == ["q0", "q1", "q2", "q3"]
        assert all(re.match(pattern, q["state"]) for q in listed)


def test_client_register_many() -> None:
    import pytest

    from linkstream.api.client import ApiError, Client
    from linkstream.api.server import BackgroundServer

    live = build_live(idle_ms=None)
    with BackgroundServer(create_app(live), on_shutdown=live.close) as srv:
        client = Client(srv.url)
        got = client.register_many([{"query": Q.format(n=i), "name": f"n{i}"} for i in range(3)])
        assert [q["name"] for q in got] == ["n0", "n1", "n2"]
        with pytest.raises(ApiError) as exc:
            client.register_many(
                [{"query": Q.format(n=9), "name": "n9"}, {"query": Q.format(n=1), "name": "n1"}]
            )
        assert (
            exc.value.status == 409
            and exc.value.body["index"] == 1
            and exc.value.body["registered"] == ["n9"]
        )
        assert [q["name"] for q in client.queries()] == ["n0", "n1", "n2", "n9"]
