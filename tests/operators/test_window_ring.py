"""Windows over the transient store's ring (``RingBuffer``) vs over ``StreamBuffer``.

* a property test: the same elements (empty ones included), windows and report times give
  the same deltas over both buffers, equal to the window contents SEMANTICS.md §3 defines,
  while garbage collection frees ring batches;
* CityBench queries replayed with ring-backed windows equal the oracle's results, for
  time windows (the manifest's expected files), and for count (``[TRIPLES n]``,
  ``[RANGE TRIPLES n]``) and ``[NOW]`` windows (the oracle run on the same queries), also
  with many queries sharing joins through routers; GC frees batches meanwhile.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.operators.window import RingBuffer, StreamBuffer, WindowOperator
from linkstream.query.continuous import parse_continuous
from linkstream.query.windows import WindowSpec
from linkstream.rdf.static import load_graph
from linkstream.store.transient import TransientStore
from tests.shared_paths import load_tool, run_oracle, shared_or_skip, trim_citybench_streams

# ----------------------------------------------------------------------------- property


def _model(elements: list[tuple[int, np.ndarray]], spec: WindowSpec, step: int, c: int) -> list[tuple]:
    """The window's content at report time ``c`` straight from SEMANTICS.md §3."""
    rows = [(t, tuple(r)) for t, tr in elements for r in tr.tolist()]
    if spec.kind == "time":
        close = (c // step) * step
        return sorted(r for t, r in rows if close - spec.range_ms <= t < close)
    before = [(t, r) for t, r in rows if t < c]
    if spec.kind == "count":
        return sorted(r for _, r in before[max(0, len(before) - spec.count) :])
    stamps = [t for t, _ in elements if t < c]
    if not stamps:
        return []
    latest = max(stamps)
    return sorted(r for t, r in before if t == latest)


def _rows(batches) -> list[tuple]:
    out = []
    for b in batches:
        for col, n in zip(b.cols.T.tolist(), b.counts.tolist()):
            out.append((tuple(col), n))
    return out


specs = st.one_of(
    st.builds(
        lambda r, s: WindowSpec("time", r, s), st.integers(1, 2500), st.sampled_from([None, 250, 500, 1000])
    ),
    st.builds(lambda n: WindowSpec("count", count=n), st.integers(1, 9)),
    st.just(WindowSpec("now")),
)
steps = st.lists(
    st.tuples(
        st.integers(0, 700),  # gap to the previous element
        st.sampled_from([0, 0, 1, 2, 3, 5]),  # its triples (0: an empty element)
        st.sampled_from([0, 0, 1, 300, 1000, 2500]),  # then a report this much later (0: none)
        st.booleans(),  # then collect
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(ws=st.lists(specs, min_size=1, max_size=3), ops=steps, slot=st.sampled_from([1, 100, 1000, 5000]))
def test_ring_windows_equal_stream_buffer_windows_and_the_spec(ws, ops, slot):
    store = TransientStore(slot_ms=slot)
    ring, flat = RingBuffer("s", store), StreamBuffer("s")
    wr = [WindowOperator(ring, w, 1000) for w in ws]
    wf = [WindowOperator(flat, w, 1000) for w in ws]
    elements: list[tuple[int, np.ndarray]] = []
    held: list[list[tuple]] = [[] for _ in ws]
    t, c, k = 0, 0, 0
    for gap, n, after, collect in ops:
        t = max(t + gap, c)  # replay order: an element never arrives before a done report
        tr = np.array([[k + i + 1, 1, (k + i) % 3] for i in range(n)], dtype=np.int64).reshape(-1, 3)
        k += n
        elements.append((t, tr))
        ring.append(t, tr)
        flat.append(t, tr)
        if after:
            c = max(c + 1, t + after)
            for i, w in enumerate(ws):
                wr[i].advance(c)
                wf[i].advance(c)
                got_r, got_f = _rows(wr[i]._pending), _rows(wf[i]._pending)
                wr[i]._pending, wf[i]._pending = [], []
                assert got_r == got_f
                for row, sign in got_r:
                    if sign > 0:
                        held[i].append(row)
                    else:
                        held[i].remove(row)
                assert sorted(held[i]) == _model(elements, w, wr[i].step, c), (w, c)
                # the router's timed reads see the same rows and element times
                a_tr, a_ts = ring.slice_timed(wr[i].lo, wr[i].hi)
                b_tr, b_ts = flat.slice_timed(wf[i].lo, wf[i].hi)
                assert a_tr.tolist() == b_tr.tolist() and a_ts.tolist() == b_ts.tolist()
        if collect:
            ring.gc()
            flat.gc()
            assert ring.base <= min(w.lo for w in wr)
    # every batch before the oldest window's batch is collectable, and collected
    ring.gc()
    stats = store.stats("s")
    assert stats["head"] + stats["batches"] == len(elements)
    if elements:
        floor = min(store.floor("s", w.lo) for w in wr)
        assert all(b.ts >= floor for b in store.batches("s", -(10**12), 10**12))
        assert stats["freed"] == sum(1 for te, _ in elements if te < floor)
    for w in wr:
        w.close()
    assert not ring.windows and not any(h.startswith("ring") for h in store._rings["s"].holders)


# ----------------------------------------------------------------------------- CityBench


def _run(q: dict, root: Path, base: str, transient: TransientStore) -> tuple[str, Engine]:
    eng = Engine(default_step=q.get("default_step") or 1000, transient=transient)
    for k, s in enumerate(q["statics"]):
        eng.add_static(s["iri"], load_graph(str(root / s["path"]), eng.dictionary, bnode_prefix=f"s{k}_"))
    cq = parse_continuous((root / q["query"]).read_text(), default_name=q["name"], base=base)
    rq = eng.register(cq)
    out = io.StringIO()
    streams = [(s["iri"], str(root / s["path"])) for s in q["streams"]]
    replay(eng, [rq], streams, out, max_reports=q.get("max_reports"))
    return out.getvalue(), eng


def _compare(expected: Path, got: str, tmp_path: Path, times: Path | None = None) -> None:
    p = tmp_path / "got.jsonl"
    p.write_text(got)
    argv = [str(expected), str(p)] + (["--times", str(times)] if times else [])
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = load_tool("compare_results").main(argv)
    assert rc == 0, buf.getvalue()


@pytest.mark.parametrize(
    "qid",
    ["csparql-Q1", "cqels-Q5", "csparql-Q7", "cqels-Q6", "cqels-Q11", "cqels-traffic_parking_1"],
)
def test_citybench_time_windows_on_the_ring_equal_the_oracle(qid, tmp_path):
    root = shared_or_skip()
    man = json.loads((root / "citybench" / "manifest.json").read_text())
    q = next(x for x in man["queries"] if x["id"] == qid)
    store = TransientStore(slot_ms=1000)
    got, eng = _run(q, root, man["base"], store)
    assert all(isinstance(b, RingBuffer) for b in eng.buffers.values())
    exp = root / q["expected"]
    times = exp.with_name(exp.name + ".times")
    _compare(exp, got, tmp_path, times if q.get("max_reports") and times.exists() else None)
    assert got.strip(), "no rows: the comparison would be vacuous"
    eng.gc()  # (replay collects every 256 elements: short streams may not have got there)
    for s in q["streams"]:
        stats = store.stats(s["iri"])
        assert stats["freed"] > 0, (s["iri"], stats)  # GC ran while results stayed right
        if not q.get("max_reports"):  # windows slid to the end: only their last seconds remain
            assert stats["batches"] < 0.2 * (stats["batches"] + stats["freed"]), stats


SES = "http://www.insight-centre.org/dataset/SampleEventService#"
REPO = "http://127.0.0.1:9000/WebGlCity/RDF/SensorRepository.rdf"
TRAFFIC = ["AarhusTrafficData182955", "AarhusTrafficData158505"]
PFX = """PREFIX ssn: <http://purl.oclc.org/NET/ssnx/ssn#>
PREFIX sao: <http://purl.oclc.org/NET/sao/>
PREFIX ct: <http://www.insight-centre.org/citytraffic#>
PREFIX ses: <http://www.insight-centre.org/dataset/SampleEventService#>
"""
OB = "?o ssn:observedProperty ?p . ?o sao:hasValue ?v . ?o ssn:observedBy ?s ."
COUNT_NOW = {
    "cq_triples": f"{PFX}SELECT ?o ?v WHERE {{ STREAM ses:{TRAFFIC[0]} [TRIPLES 40] {{ {OB} }} }}",
    "cq_triples_static": f"{PFX}SELECT ?o ?v WHERE {{ ?p a ct:CongestionLevel . "
    f"STREAM ses:{TRAFFIC[1]} [TRIPLES 25] {{ {OB} }} }}",
    "cs_range_triples": f"{PFX}REGISTER QUERY cs_range_triples AS SELECT ?o ?v "
    f"FROM STREAM ses:{TRAFFIC[0]} [RANGE TRIPLES 13] FROM <{REPO}> WHERE {{ {OB} }}",
    "cq_now": f"{PFX}SELECT ?o ?v WHERE {{ STREAM ses:{TRAFFIC[0]} [NOW] {{ {OB} }} }}",
    "cq_now_join": f"{PFX}SELECT ?o1 ?o2 ?v1 ?v2 WHERE {{ "
    f"STREAM ses:{TRAFFIC[0]} [NOW] {{ ?o1 sao:hasValue ?v1 }} "
    f"STREAM ses:{TRAFFIC[1]} [RANGE 3000ms SLIDE 1000ms] {{ ?o2 sao:hasValue ?v2 }} FILTER(?v1 < ?v2) }}",
    "cq_count_agg": f"{PFX}SELECT (COUNT(?o) AS ?n) (MAX(?v) AS ?m) WHERE {{ "
    f"STREAM ses:{TRAFFIC[1]} [TRIPLES 30] {{ ?o sao:hasValue ?v }} }}",
    "cq_time": f"{PFX}SELECT ?o ?v WHERE {{ STREAM ses:{TRAFFIC[1]} [RANGE 2000ms SLIDE 1000ms] {{ {OB} }} }}",
}


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory):
    """The first 60 elements of two traffic streams (keeps the oracle run short)."""
    shared = shared_or_skip()
    d = tmp_path_factory.mktemp("ring_trimmed")
    trim_citybench_streams(d, TRAFFIC, 60)
    return d, shared / "citybench" / "static" / "SensorRepository.nt"


def _oracle(queries: dict[str, str], streams, static: Path, tmp_path: Path) -> Path:
    return run_oracle(queries, streams, [str(static), f"{REPO}={static}"], tmp_path)


def _run_many(queries: dict[str, str], streams, static: Path, store: TransientStore) -> tuple[str, Engine]:
    eng = Engine(transient=store)
    tr = load_graph(str(static), eng.dictionary)
    eng.add_static(None, tr)
    eng.add_static(REPO, tr)
    rqs = [eng.register(parse_continuous(text, default_name=name)) for name, text in queries.items()]
    out = io.StringIO()
    replay(eng, rqs, streams, out)
    eng.gc()  # (replay collects every 256 elements; these streams are shorter)
    return out.getvalue(), eng


def test_count_and_now_windows_on_the_ring_equal_the_oracle(trimmed, tmp_path):
    d, static = trimmed
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    store = TransientStore(slot_ms=500)
    got, _ = _run_many(COUNT_NOW, streams, static, store)
    want = _oracle(COUNT_NOW, streams, static, tmp_path)
    _compare(want, got, tmp_path)
    produced = {json.loads(ln)["query"] for ln in want.read_text().splitlines()}
    assert produced == set(COUNT_NOW)  # every query has rows: not vacuous
    for iri, _ in streams:
        assert store.stats(iri)["freed"] > 0


def test_many_queries_sharing_joins_and_routers_on_the_ring_equal_the_oracle(trimmed, tmp_path):
    from linkstream.operators.router import RouterOperator
    from tests.engine.test_sharing import generate

    d, static = trimmed
    names = {f"AarhusTrafficData{x}" for x in ("192707",)}
    queries = {n: q for n, q in generate(40, seed=11).items() if not any(x in q for x in names)}
    assert len(queries) >= 8
    streams = [(SES + s, str(d / f"{s}.nq")) for s in TRAFFIC]
    store = TransientStore(slot_ms=1000)
    got, eng = _run_many(queries, streams, static, store)
    assert any(isinstance(op, RouterOperator) for op in eng.operators.values())
    want = _oracle(queries, streams, static, tmp_path)
    _compare(want, got, tmp_path)
    assert len({json.loads(ln)["query"] for ln in want.read_text().splitlines()}) >= len(queries) // 2
    for iri, _ in streams:
        assert store.stats(iri)["freed"] > 0
