"""``POST /queries`` with a JSON array on embedded ``run``: one worker command per batch, each
text parsed once (the API's validating parse is what gets registered).  Names, errors and
results are those of registering the items one by one."""

from __future__ import annotations

import queue

from starlette.testclient import TestClient

from linkstream.api.app import create_app
from linkstream.api.server import build_live
from linkstream.engine.live.runtime import LiveEngine
from linkstream.engine.live.state import BatchFailed, QueryConflict
from linkstream.query.continuous import parse_continuous

EX = "http://example.org/"
NAMED = (
    "PREFIX ex: <http://example.org/> REGISTER RSTREAM <{name}> AS SELECT ?s ?o "
    "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT2S STEP PT1S] WHERE {{ WINDOW ex:w {{ ?s ex:p{k} ?o }} }}"
)
UNNAMED = (
    "PREFIX ex: <http://example.org/> SELECT ?s ?o "
    "FROM NAMED WINDOW ex:w ON ex:s [RANGE PT3S STEP PT1S] WHERE {{ WINDOW ex:w {{ ?s ex:p{k} ?o }} }}"
)
ITEMS = [
    {"query": NAMED.format(name="a", k=0)},  # its REGISTER name
    {"query": NAMED.format(name="b", k=1), "name": "renamed"},  # name overrides REGISTER
    {"query": UNNAMED.format(k=0), "default_name": "dflt"},  # default_name without REGISTER
    {"query": NAMED.format(name="c", k=2), "default_name": "unused"},  # REGISTER wins
    {"query": UNNAMED.format(k=1)},  # q<N>
    {"query": UNNAMED.format(k=2), "name": "x"},
]


def drain(live: LiveEngine, names: list[str]) -> dict[str, list[tuple[int, tuple[str, ...]]]]:
    """Pushes three elements, fires every report up to 6 s, returns each query's reports."""
    subs = {n: live.subscribe(n) for n in names}
    for t in (500, 1500, 2500):
        for k in range(3):
            live.push(EX + "s", t, [(f"<{EX}n{t}>", f"<{EX}p{k}>", f'"{t}"')])
    live.advance_to(6000)
    out: dict[str, list[tuple[int, tuple[str, ...]]]] = {}
    for n, sub in subs.items():
        got = out[n] = []
        while True:
            try:
                got.append(sub.get_report(timeout=0.3))
            except queue.Empty:
                break
    return out


def test_batch_registers_as_one_by_one_and_gives_the_same_results() -> None:
    batch_live, single_live = build_live(idle_ms=None), build_live(idle_ms=None)
    with TestClient(create_app(batch_live)) as b, TestClient(create_app(single_live)) as s:
        r = b.post("/queries", json=ITEMS)
        assert r.status_code == 201, r.text
        batch_names = [q["name"] for q in r.json()["queries"]]
        single_names = []
        for item in ITEMS:
            r = s.post("/queries", json=item)
            assert r.status_code == 201, r.text
            single_names.append(r.json()["name"])
        assert batch_names == single_names, (batch_names, single_names)
        assert batch_names == ["a", "renamed", "dflt", "c", "q1", "x"]
        listed = [b.get("/queries").json()["queries"], s.get("/queries").json()["queries"]]
        assert listed[0] == listed[1] and [q["name"] for q in listed[0]] == batch_names
        got, want = drain(batch_live, batch_names), drain(single_live, single_names)
        assert got == want
        assert sum(len(lines) for reports in got.values() for _, lines in reports) > 0


def test_batch_errors_stop_at_the_item_and_keep_those_before() -> None:
    live = build_live(idle_ms=None)
    with TestClient(create_app(live)) as http:
        # a name taken by an earlier item of the same batch: 409 at that item
        r = http.post("/queries", json=[ITEMS[0], ITEMS[4], {"query": UNNAMED.format(k=3), "name": "a"}])
        assert r.status_code == 409, r.text
        assert r.json()["index"] == 2 and r.json()["registered"] == ["a", "q1"]
        assert r.json()["error"] == "item 2: a query named 'a' is already registered"
        # a one-shot query (no window) in a batch: 400 at that item, nothing after it
        one_shot = {"query": "SELECT ?s WHERE { ?s ?p ?o }"}
        r = http.post("/queries", json=[ITEMS[3], one_shot, ITEMS[5]])
        assert r.status_code == 400 and r.json()["index"] == 1 and r.json()["registered"] == ["c"]
        assert "not a continuous query" in r.json()["error"]
        # a bad name
        r = http.post("/queries", json=[{"query": UNNAMED.format(k=4), "name": "bad\nname"}])
        assert r.status_code == 400 and r.json()["index"] == 0 and not r.json().get("registered")
        assert [q["name"] for q in http.get("/queries").json()["queries"]] == ["a", "q1", "c"]
        # an explicit q<N> name earlier in the batch: the auto name skips it, as one by one
        r = http.post(
            "/queries", json=[{"query": UNNAMED.format(k=5), "name": "q2"}, {"query": UNNAMED.format(k=6)}]
        )
        assert r.status_code == 201 and [q["name"] for q in r.json()["queries"]] == ["q2", "q3"]


def test_register_many_takes_the_parsed_queries() -> None:
    live = build_live(idle_ms=None)
    texts = [NAMED.format(name="p", k=0), UNNAMED.format(k=0)]
    parsed = [parse_continuous(t, default_name="", base=live.base) for t in texts]
    with live:
        assert live.register_many([(texts[0], None, None), (texts[1], None, "d")], parsed=parsed) == [
            "p",
            "d",
        ]
        assert live.view("p").cq.algebra is parsed[0].algebra  # not parsed again
        try:
            live.register_many([(texts[1], "p", None)])
        except BatchFailed as e:
            assert e.index == 0 and e.registered == [] and isinstance(e.error, QueryConflict)
        else:
            raise AssertionError("a taken name must fail")


def test_batch_with_an_ingest_log_is_logged_and_recovered(tmp_path) -> None:
    """``run --state-dir``: a batch is logged query by query (a replay registers the same ones,
    between the same elements) and queries.json, rewritten once per batch, lists them."""
    from linkstream.engine.live.ingestlog import IngestLog

    items = [(NAMED.format(name="a", k=0), None, None), (UNNAMED.format(k=1), "u", None)]
    items.append((NAMED.format(name="a", k=2), None, None))  # taken by item 0: stops there
    live = build_live(idle_ms=None)
    with live:
        live.recover(IngestLog(str(tmp_path)))
        try:
            live.register_many(items)
        except BatchFailed as e:
            assert e.index == 2 and e.registered == ["a", "u"] and isinstance(e.error, QueryConflict)
        else:
            raise AssertionError("a taken name must fail")
        before = drain(live, ["a", "u"])
        assert [q["name"] for q in live._log.catalog()] == ["a", "u"]  # type: ignore[union-attr]
    again = build_live(idle_ms=None)
    with again:
        again.recover(IngestLog(str(tmp_path)))
        assert again.query_names() == ["a", "u"]
        assert [q["name"] for q in again._log.catalog()] == ["a", "u"]  # type: ignore[union-attr]
    assert sum(len(lines) for reports in before.values() for _, lines in reports) > 0
