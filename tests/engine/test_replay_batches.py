"""The replay ingests each stream's elements in runs (arrays from the reader's batches, one
run per stream between two report times) instead of one element at a time in event-time
order.  Its results must be those of the reference evaluator, also when the runs are not in
time order: several streams interleaving, elements out of order within the allowed lateness,
elements dropped as too late, quads of an element after later timestamps (continuations),
a hand-over from the compiled reader to the line-by-line one; and the same with the compiled
reader off (batches of one element)."""

from __future__ import annotations

import io
import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from linkstream.engine.embedded import Engine
from linkstream.engine.replay import replay
from linkstream.query.continuous import parse_continuous
from linkstream.rdf import ntfast
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.streams import StreamReader, in_time_order
from tests.result_compare import load
from tests.shared_paths import load_tool

EX = "http://example.org/"
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"
XSD_DT = "<http://www.w3.org/2001/XMLSchema#dateTime>"
LATENESS = 1500

QUERIES = {
    "a": f"""PREFIX ex: <{EX}>
SELECT ?o ?v WHERE {{ STREAM <{EX}a> [RANGE 2s SLIDE 1s] {{ ?o ex:v ?v }} }}""",
    "b": f"""PREFIX ex: <{EX}>
SELECT ?o ?w WHERE {{ STREAM <{EX}b> [RANGE 3s SLIDE 500ms] {{ ?o ex:w ?w }} }}""",
    "join": f"""PREFIX ex: <{EX}>
SELECT ?o ?v ?w WHERE {{ STREAM <{EX}a> [RANGE 4s SLIDE 1s] {{ ?o ex:v ?v }}
  STREAM <{EX}b> [RANGE 4s SLIDE 1s] {{ ?o ex:w ?w }} }}""",
    "count": f"""PREFIX ex: <{EX}>
SELECT (COUNT(?o) AS ?n) WHERE {{ STREAM <{EX}b> [RANGE 1s SLIDE 1s] {{ ?o ex:w ?w }} }}""",
}


def _iso(ms: int) -> str:
    s, f = divmod(ms, 1000)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return f"2020-01-01T{h:02d}:{m:02d}:{s:02d}.{f:03d}Z"


def _stream(seed: int, name: str, pred: str, *, late: bool, continuations: bool) -> str:
    """A stream file of ~300 elements, out of order within (and, if ``late``, beyond) the
    lateness, and, if ``continuations``, with quads of earlier elements after later ones."""
    rnd = random.Random(seed)
    lines: list[str] = []
    t = 0
    for k in range(300):
        t += rnd.choice([0, 37, 120, 400, 900])
        at = t - rnd.randrange(0, LATENESS) if rnd.random() < 0.3 else t
        if late and rnd.random() < 0.03:
            at = t - LATENESS - 200 - rnd.randrange(500)  # dropped: too late
        g = f"<{EX}{name}/g{k}>"
        lines.append(f'{g} {PROV} "{_iso(max(at, 0))}"^^{XSD_DT} .')
        for _ in range(rnd.choice([0, 1, 1, 2, 3])):
            lines.append(f'<{EX}o{rnd.randrange(12)}> <{EX}{pred}> "{rnd.randrange(5)}" {g} .')
        if continuations and k > 3 and rnd.random() < 0.05:
            back = f"<{EX}{name}/g{k - rnd.randrange(1, 4)}>"
            lines.append(f'<{EX}o{rnd.randrange(12)}> <{EX}{pred}> "late{k}" {back} .')
    return "\n".join(lines) + "\n"


@pytest.fixture(autouse=True)
def _scanner_back_on() -> Iterator[None]:
    yield
    ntfast.use_native(True)


def _files(tmp_path: Path, late: bool, continuations: bool) -> list[tuple[str, str]]:
    a, b = tmp_path / "a.nq", tmp_path / "b.nq"
    a.write_text(_stream(1, "a", "v", late=late, continuations=continuations))
    b.write_text(_stream(2, "b", "w", late=late, continuations=continuations))
    return [(f"{EX}a", str(a)), (f"{EX}b", str(b))]


def _replay(streams: list[tuple[str, str]], native: bool, lateness: int) -> str:
    ntfast.use_native(native)
    eng = Engine(log_fn=lambda m: None)
    qs = [eng.register(parse_continuous(text, default_name=name)) for name, text in QUERIES.items()]
    buf = io.StringIO()
    replay(eng, qs, streams, buf, lateness_ms=lateness, log=lambda m: None)
    return buf.getvalue()


def _oracle(streams: list[tuple[str, str]], tmp_path: Path, lateness: int) -> Path:
    qdir = tmp_path / "q"
    qdir.mkdir(exist_ok=True)
    args: list[str] = []
    for name, text in QUERIES.items():
        (qdir / f"{name}.rq").write_text(text, encoding="utf-8")
        args += ["--query", str(qdir / f"{name}.rq")]
    for iri, path in streams:
        args += ["--stream", f"{iri}={path}"]
    want = tmp_path / "want.jsonl"
    assert load_tool("oracle").main([*args, "--lateness", str(lateness), "--out", str(want), "--quiet"]) == 0
    return want


def test_replay_in_runs_equals_the_reference_evaluator(tmp_path: Path) -> None:
    """Streams in time order: read in bulk (runs of many elements) or one element at a time,
    the results are the reference evaluator's."""
    streams = [(iri, _sorted_copy(Path(path), tmp_path)) for iri, path in _files(tmp_path, False, False)]
    fast = _replay(streams, True, 0)
    assert fast == _replay(streams, False, 0)
    got = tmp_path / "got.jsonl"
    got.write_text(fast)
    assert len(fast.splitlines()) > 1000
    assert load(got) == load(_oracle(streams, tmp_path, 0))


@pytest.mark.parametrize(
    ("late", "continuations"), [(False, False), (True, False), (False, True), (True, True)]
)
def test_runs_out_of_time_order_equal_the_reference_evaluator(
    tmp_path: Path, late: bool, continuations: bool
) -> None:
    """With lateness the compiled reader gives runs out of time order (until a late element or
    a continuation hands the file over): the replay writes exactly what it writes from the
    line-by-line reader's batches of one element each, and what the reference evaluator
    (which sorts the accepted elements on time) writes: the replay holds each stream's
    elements until nothing earlier can come (``in_time_order``)."""
    streams = _files(tmp_path, late, continuations)
    fast = _replay(streams, True, LATENESS)
    assert len(fast.splitlines()) > 1000
    assert fast == _replay(streams, False, LATENESS)
    got = tmp_path / "got.jsonl"
    got.write_text(fast)
    assert load(got) == load(_oracle(streams, tmp_path, LATENESS))


def test_in_time_order_sorts_stably_however_the_elements_are_batched(tmp_path: Path) -> None:
    """``in_time_order`` gives the reader's accepted elements sorted on time, ties in file
    order, with their own triples, whether the reader batches them in chunks or one by one;
    without lateness it passes the batches through."""
    path = _files(tmp_path, late=True, continuations=False)[0][1]
    want = sorted(
        (
            (e.t, e.seq, e.triples.tolist())
            for e in StreamReader(path, MemoryDictionary(), lateness_ms=LATENESS)
        ),
        key=lambda x: (x[0], x[1]),
    )
    for native, chunk in ((True, 64), (True, 65536), (False, 65536)):
        ntfast.use_native(native)
        reader = StreamReader(path, MemoryDictionary(), lateness_ms=LATENESS, chunk_lines=chunk)
        got = []
        for b in in_time_order(reader.batches(), LATENESS):
            ends = [0, *b.counts.cumsum().tolist()]
            got += [(t, b.ids[ends[i] : ends[i + 1]].tolist()) for i, t in enumerate(b.t.tolist())]
        assert got == [(t, ids) for t, _, ids in want]
        assert [t for t, _ in got] != [
            e.t for e in StreamReader(path, MemoryDictionary(), lateness_ms=LATENESS)
        ]
    batches = list(StreamReader(path, MemoryDictionary()).batches())
    assert list(in_time_order(iter(batches), 0)) == batches


def _sorted_copy(path: Path, tmp_path: Path) -> str:
    """``path`` with its elements in time order (a continuation stays with the element before it)."""
    els: list[tuple[str, list[str]]] = []
    for line in path.read_text().splitlines():
        if PROV in line:
            els.append((line.split('"')[1], [line]))
        else:
            els[-1][1].append(line)
    els.sort(key=lambda e: e[0])
    out = tmp_path / ("sorted_" + path.name)
    out.write_text("".join(x + "\n" for _, ls in els for x in ls))
    return str(out)


def test_batches_hold_the_elements_of_the_reader(tmp_path: Path) -> None:
    """``StreamReader.batches`` (arrays per chunk of lines) give the elements the reader
    gives one by one: times, triples, ids, seqs, continuations; with the compiled reader
    on (in bulk for a file in time order, else up to its hand-over) and off."""
    files = [path for _, path in _files(tmp_path, late=True, continuations=True)]
    ordered = _sorted_copy(Path(files[0]), tmp_path)
    for native in (True, False):
        ntfast.use_native(native)
        for path in [ordered, *files]:
            kw = {"lateness_ms": LATENESS}
            one = [
                (e.t, e.seq, e.continuation, e.triples.tolist())
                for e in StreamReader(path, MemoryDictionary(), **kw)
            ]
            got = []
            sizes = set()
            for b in StreamReader(path, MemoryDictionary(), chunk_lines=64, **kw).batches():
                ends = [0, *b.counts.cumsum().tolist()]
                sizes.add(len(b.t))
                for i, t in enumerate(b.t.tolist()):
                    cont = b.element is not None and b.element.continuation
                    got.append((t, b.seq0 + i, cont, b.ids[ends[i] : ends[i + 1]].tolist()))
            assert got == one
            assert len(one) > 200
            assert any(c for _, _, c, _ in one)  # (quads of earlier elements: continuations)
            if native and path == ordered:
                assert max(sizes) > 1  # read in bulk
