"""One hybrid store for everything: windows in its transient ring, one-shots on its graphs.

* an engine built on a :class:`HybridStore` keeps its stream elements in the store's
  transient part (``Engine(transient=...)``), gives the oracle's CityBench results, and
  the same store answers one-shot SPARQL on its persistent part meanwhile (static graphs
  plus timeless batches absorbed during the replay), equal to pyoxigraph;
* ``linkstream replay --store`` and ``linkstream run --store`` (``build_live``) wire
  their windows to the opened store's ring.
"""

from __future__ import annotations

import contextlib
import io
import json
import queue

import numpy as np
import pyoxigraph
import pytest

from linkstream.api.server import build_live
from linkstream.cli import main as cli_main
from linkstream.engine.embedded import Engine
from linkstream.engine.oneshot.store import run_sparql
from linkstream.engine.replay import replay
from linkstream.operators.window import RingBuffer
from linkstream.query.continuous import parse_continuous
from linkstream.store.hybrid import HybridStore
from linkstream.store.loader import load_store
from tests.shared_paths import load_tool, shared_or_skip

QID = "csparql-Q1"


def _query(shared) -> dict:
    man = json.loads((shared / "citybench" / "manifest.json").read_text())
    return next(x for x in man["queries"] if x["id"] == QID)


@pytest.fixture(scope="module")
def citybench_store(tmp_path_factory):
    """A store directory holding the statics of CityBench Q1, each in its graph."""
    shared = shared_or_skip()
    q = _query(shared)
    d = tmp_path_factory.mktemp("hybrid")
    quads = d / "statics.nq"
    with quads.open("w") as out:
        for st in q["statics"]:
            for line in (shared / st["path"]).read_text().splitlines():
                line = line.strip()
                if line and not line.startswith("#"):
                    out.write(line[:-1].rstrip() + (f" <{st['iri']}> .\n" if st["iri"] else " .\n"))
    load_store(d / "store", [quads], partitions=2)
    return shared, q, d / "store", quads


def _compare_expected(shared, q: dict, got: str, tmp_path) -> None:
    exp = shared / q["expected"]
    p = tmp_path / "got.jsonl"
    p.write_text(got)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = load_tool("compare_results").main([str(exp), str(p), "--times", str(exp) + ".times"])
    assert rc == 0, buf.getvalue()
    assert got.strip()


def _count(res: dict) -> int:
    return int(res["results"]["bindings"][0]["n"]["value"])


def test_one_store_answers_oneshots_on_its_graphs_while_windows_read_its_ring(citybench_store, tmp_path):
    shared, q, store_dir, quads = citybench_store
    (graph,) = [st["iri"] for st in q["statics"]]
    ox = pyoxigraph.Store()
    ox.bulk_load(path=str(quads), format=pyoxigraph.RdfFormat.N_QUADS)
    count_q = "SELECT (COUNT(*) AS ?n) WHERE { GRAPH <%s> { ?s ?p ?o } }" % graph
    want_static = int(next(iter(ox.query(count_q)))["n"].value)
    absorbed_q = "SELECT (COUNT(*) AS ?n) WHERE { ?x <urn:ex:seen> ?t }"

    h = HybridStore.open(store_dir, slot_ms=1000)
    try:
        eng = Engine(h.dictionary, transient=h.transient)
        snap = h.snapshot()
        for g in snap.graphs():
            eng.add_static(g, snap.triples(g))
        rq = eng.register(parse_continuous((shared / q["query"]).read_text(), default_name=q["name"]))
        seen = h.dictionary.encode_many(["<urn:ex:seen>"])[0]
        answers: list[tuple[int, int, int]] = []

        def sink(_q, c: int, _lines: list[str]) -> None:
            # a timeless batch per report goes to the graphs; the one-shot sees all of them
            x = h.dictionary.encode_many([f"<urn:ex:report{c}>", f'"{c}"'])
            h.absorb("urn:ex:reports", c, np.array([[x[0], seen, x[1]]], dtype=np.int64))
            answers.append(
                (len(answers) + 1, _count(run_sparql(h, count_q)), _count(run_sparql(h, absorbed_q)))
            )

        out = io.StringIO()
        streams = [(s["iri"], str(shared / s["path"])) for s in q["streams"]]
        replay(eng, [rq], streams, out, max_reports=q["max_reports"], sink=sink)
        _compare_expected(shared, q, out.getvalue(), tmp_path)
        assert len(answers) == q["max_reports"]
        assert all(n_static == want_static and n_abs == k for k, n_static, n_abs in answers)
        # the windows' elements went to the store's ring, nowhere else, and GC freed some
        assert all(isinstance(b, RingBuffer) and b.store is h.transient for b in eng.buffers.values())
        assert set(h.transient.streams()) == {s["iri"] for s in q["streams"]}
        for s in q["streams"]:
            st = h.transient.stats(s["iri"])
            assert st["end"] > 256 and st["freed"] > 0 and st["holders"] >= 1, st
        # a window's range read straight from the store equals what the engine's window holds
        w = rq.windows[0]
        tr, _ = h.window(w.buffer.iri, *_time_range(w))
        assert sorted(map(tuple, tr.tolist())) == sorted(map(tuple, w.content().T.tolist()))
        eng.unregister(rq.name)
        assert all(h.transient.stats(s["iri"])["holders"] == 0 for s in q["streams"])
    finally:
        h.close()


def _time_range(w) -> tuple[int, int]:
    """``[a, b)`` of a time window at its last report time (from its own content's ends)."""
    ts = w.buffer.slice_timed(w.lo, w.hi)[1]
    return int(ts[0]), int(ts[-1]) + 1


def test_cli_replay_with_store_keeps_the_windows_in_the_store_ring(citybench_store, tmp_path, monkeypatch):
    shared, q, store_dir, _ = citybench_store
    opened: list[HybridStore] = []
    real_open = HybridStore.open.__func__

    def spy(cls, *a, **kw):
        h = real_open(cls, *a, **kw)
        opened.append(h)
        return h

    monkeypatch.setattr(HybridStore, "open", classmethod(spy))
    out = tmp_path / "out.jsonl"
    args = ["replay", "--query", str(shared / q["query"]), "--store", str(store_dir), "--out", str(out)]
    for s in q["streams"]:
        args += ["--stream", f"{s['iri']}={shared / s['path']}"]
    args += ["--max-reports", str(q["max_reports"]), "--quiet"]
    assert cli_main(args) == 0
    _compare_expected(shared, q, out.read_text(), tmp_path)
    (h,) = opened
    for s in q["streams"]:
        elements = sum(1 for line in open(shared / s["path"]) if "generatedAtTime" in line)
        st = h.transient.stats(s["iri"])
        assert st["end"] == elements and st["freed"] > 0, st


EX = "http://ex.org/"


def test_live_run_with_store_keeps_windows_in_the_store_ring(citybench_store):
    _, q, store_dir, _ = citybench_store
    live = build_live(store=str(store_dir), idle_ms=None, retention_ms=2000)
    eng = live.engine
    assert eng.transient is eng.store.transient  # one transient store: the hybrid store's
    count = f"PREFIX ex: <{EX}>\nSELECT (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s1 [RANGE 3s SLIDE 1s] {{ ?x ex:p ?v }} }}"
    now = f"PREFIX ex: <{EX}>\nSELECT (COUNT(?x) AS ?n) WHERE {{ STREAM ex:s1 [NOW] {{ ?x ex:p ?v }} }}"
    with live:
        live.register(count, "range")
        live.register(now, "now")
        subs = {n: live.subscribe(n) for n in ("range", "now")}
        for k in range(1, 301):
            # two triples per element; every third element is empty ([NOW] must see it)
            tr = (
                []
                if k % 3 == 0
                else [(f"<{EX}o{k}>", f"<{EX}p>", f'"{k}"'), (f"<{EX}q{k}>", f"<{EX}p>", '"0"')]
            )
            assert live.push(EX + "s1", k * 1000, tr)
            live.flush()  # one command batch per element: the worker collects every 64 batches
        assert live.advance_to(301_000) == 301_000
        got = {}
        for n, sub in subs.items():
            got[n] = []
            while True:
                try:
                    c, lines = sub.get_report(timeout=0)
                except queue.Empty:
                    break
                got[n].append((c, int(json.loads(lines[0])["binding"]["n"].split('"')[1])))

        def elements(a: int, b: int) -> list[int]:
            return [k for k in range(1, 301) if a <= k * 1000 < b]

        assert got["range"] == [
            (c, 2 * sum(k % 3 != 0 for k in elements(c - 3000, c))) for c, _ in got["range"]
        ]
        assert got["now"] == [(c, 0 if (c // 1000 - 1) % 3 == 0 else 2) for c, _ in got["now"]]
        assert len(got["range"]) == len(got["now"]) == 300
        st = eng.store.transient.stats(EX + "s1")
        assert st["end"] == 300 and st["triples"] < 200 and st["freed"] > 200, st
        # and /sparql-style one-shots run on the same store's graphs
        (graph,) = [s["iri"] for s in q["statics"]]
        res = live.one_shot("SELECT (COUNT(*) AS ?n) WHERE { GRAPH <%s> { ?s ?p ?o } }" % graph)
        assert int(res["results"]["bindings"][0]["n"]["value"]) > 1000
