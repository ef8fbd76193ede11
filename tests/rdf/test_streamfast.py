"""The compiled stream reader (rdf/streamfast.py) against the line-by-line reader.

Both must give the same elements (times, order, triples, ids), the same dictionary (terms in
the same order), the same log lines and counters: on real files, on random files with every
oddity the reader knows (where the compiled reader hands over to the line-by-line one), with
chunks of any size and with several readers sharing one dictionary.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from linkstream.rdf import ntfast
from linkstream.rdf.dictionary import MemoryDictionary
from linkstream.rdf.streamfast import _stamps, read_fast
from linkstream.rdf.streams import ReadState, StreamReader, parse_datetime_ms
from tests.rdf.test_streams import citybench_stream, shared_dir

needs_scanner = pytest.mark.skipif(not ntfast.native(), reason="the compiled scanner is not built")
pytestmark = needs_scanner

XSD = "http://www.w3.org/2001/XMLSchema#"
PROV = "<http://www.w3.org/ns/prov#generatedAtTime>"


@pytest.fixture(autouse=True)
def _scanner_back_on() -> Iterator[None]:
    yield
    ntfast.use_native(True)


def read(path: Path, native: bool, **kw: object) -> tuple[list, list, list[str], dict]:
    """Elements (t, seq, continuation, triples), dictionary terms, log lines and counters."""
    ntfast.use_native(native)
    d = MemoryDictionary()
    logs: list[str] = []
    r = StreamReader(str(path), d, log=logs.append, **kw)  # type: ignore[arg-type]  # keyword args
    els = [(e.t, e.seq, e.continuation, e.triples.tolist()) for e in r]
    return els, list(d.tables()[1]), logs, vars(r.stats)


def assert_same(path: Path, **kw: object) -> list:
    slow = read(path, False, **kw)
    fast = read(path, True, **kw)
    assert fast[2] == slow[2]  # log lines
    assert fast[3] == slow[3]  # counters
    assert fast[1] == slow[1]  # dictionary, in id order
    assert fast[0] == slow[0]  # elements
    return fast[0]


def citybench_files() -> list[str]:
    shared = shared_dir()
    d = shared / "citybench" / "streams" if shared else None
    return sorted(p.name for p in d.glob("*.nq")) if d and d.is_dir() else ["missing.nq"]


@pytest.mark.parametrize("name", citybench_files())
def test_citybench_streams_read_in_bulk(name: str) -> None:
    path = citybench_stream(name)
    assert assert_same(path)
    # the whole file by the compiled reader: no hand-over to the line-by-line one
    r = StreamReader(str(path), MemoryDictionary())
    gen = read_fast(r, ReadState())
    with pytest.raises(StopIteration) as stop:
        while True:
            next(gen)
    assert stop.value.value is None


def test_small_chunks_and_shared_dictionary(tmp_path: Path) -> None:
    """Readers interleaved over one dictionary (as a replay reads its streams): the same ids
    whichever reader is used, for chunks of every size."""
    a, b = (
        citybench_stream("AarhusTrafficData158505.nq"),
        citybench_stream("AarhusParkingDataKALKVAERKSVEJ.nq"),
    )
    for chunk in (1, 7, 1000):
        got = []
        for native in (False, True):
            ntfast.use_native(native)
            d = MemoryDictionary()
            ra = iter(StreamReader(str(a), d, chunk_lines=chunk, bnode_prefix="a_"))
            rb = iter(StreamReader(str(b), d, chunk_lines=chunk, bnode_prefix="b_"))
            out = []
            for ea, eb in zip(ra, rb, strict=False):  # one element of each in turn
                out.append((ea.t, ea.triples.tolist(), eb.t, eb.triples.tolist()))
            got.append((out, list(d.tables()[1])))
        assert got[0] == got[1], chunk


# ------------------------------------------------------------------ random files with odd lines


def _stamp(ms: int, rnd: random.Random) -> str:
    """A dateTime lexical form of ``ms``, in one of the spellings the reader meets."""
    base = np.datetime64(ms, "ms").astype(str)  # YYYY-MM-DDThh:mm:ss.fff
    kind = rnd.random()
    if kind < 0.6:
        return base + "Z"
    if kind < 0.7:
        return base[:19] + "Z" if ms % 1000 == 0 else base + "Z"
    if kind < 0.75:
        return base + "123Z"  # more fraction digits than milliseconds
    if kind < 0.8:
        return base + "+00:00"
    if kind < 0.83:
        return base[:10] + "T24:00:00Z"
    if kind < 0.86:
        return base  # no time zone
    if kind < 0.88:
        return base[:5] + "13" + base[7:] + "Z"  # no such month
    return base + "Z"


def random_stream(rnd: random.Random, n: int) -> list[str | bytes]:
    """A stream file of ``n`` elements, mostly contiguous and in time order, with each kind of
    line that makes the compiled reader hand over (or reject) now and then."""
    lines: list[str | bytes] = []
    t = 1406851200000
    graphs: list[str] = []
    rare = rnd.random() * 0.2  # how odd this file is
    for k in range(n):
        r = rnd.random()
        if r < rare * 0.2:
            t -= rnd.randint(1, 3000)  # late (or within lateness)
        elif r < rare * 0.25:
            t += 10**12  # a jump past the limit
        else:
            t += rnd.randint(0, 1500)
        g = rnd.choice(graphs) if graphs and rnd.random() < rare * 0.1 else f"<http://ex.org/el-{k}>"
        if rnd.random() < rare * 0.1:
            g = f"_:g{k}"
        graphs.append(g)
        lines.append(f'{g} {PROV} "{_stamp(t, rnd)}"^^<{XSD}dateTime> .')
        for j in range(rnd.randint(0, 4)):
            s = f"<http://ex.org/ob-{k}-{j % 2}>"
            o = f'"{rnd.randint(0, 9)}"^^<{XSD}integer>'
            gg = g
            x = rnd.random()
            if x < rare * 0.1 and graphs:
                gg = rnd.choice(graphs)  # a quad of an earlier element
            elif x < rare * 0.15:
                gg = "<http://ex.org/never-stamped>"
            y = rnd.random()
            if y < rare * 0.1:
                o = f'"caf\\u00e9 \\"q\\""@{rnd.choice(["en", "fr", "de-CH"])}'
            elif y < rare * 0.15:
                s = f"<http://ex.org/ob-é-{k}>"  # not the simple IRI form
            elif y < rare * 0.2:
                s = "<relative>"  # malformed
            elif y < rare * 0.25:
                o = f"_:b{j}"
            line = f"{s} <http://ex.org/value> {o} {gg} ."
            z = rnd.random()
            if z < rare * 0.05:
                line += "\r"
            elif z < rare * 0.08:
                line = "   " + line + "  # note"
            elif z < rare * 0.1:
                lines.append(b'<http://ex.org/s> <http://ex.org/p> "\xff" ' + gg.encode() + b" .")
            lines.append(line)
            if rnd.random() < 0.1:
                lines.append(line)  # a repeat within the element
        if rnd.random() < rare * 0.1:
            lines.append(
                rnd.choice(["", "# comment", "<http://ex.org/s> <http://ex.org/p> <http://ex.org/o> ."])
            )
    return lines


def write(path: Path, lines: list[str | bytes], bom: bool = False, last_newline: bool = True) -> Path:
    data = b"\n".join(x.encode() if isinstance(x, str) else x for x in lines)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data + (b"\n" if last_newline else b""))
    return path


@pytest.mark.parametrize("seed", range(40))
def test_random_files_read_the_same(tmp_path: Path, seed: int) -> None:
    rnd = random.Random(seed)
    path = write(
        tmp_path / "s.nq",
        random_stream(rnd, rnd.choice([5, 50, 400])),
        bom=rnd.random() < 0.2,
        last_newline=rnd.random() < 0.8,
    )
    for chunk in (1, 5, 65536):
        for lateness in (0, 2000):
            assert_same(path, chunk_lines=chunk, lateness_ms=lateness, bnode_prefix="p_")
    assert_same(path, max_time_jump_ms=None)


def test_clean_random_files_are_read_in_bulk(tmp_path: Path) -> None:
    """Without odd lines the compiled reader reads every line itself."""
    rnd = random.Random(1)
    t = 1406851200000
    clean: list[str | bytes] = []
    for k in range(500):
        t += rnd.randint(0, 999)
        g = f"<http://ex.org/el-{k}>"
        clean.append(f'{g} {PROV} "{np.datetime64(t, "ms").astype(str)}Z"^^<{XSD}dateTime> .')
        clean += [f'<http://ex.org/o{k % 7}> <http://ex.org/v> "{j}" {g} .' for j in range(k % 3)]
    path = write(tmp_path / "clean.nq", clean)
    assert len(assert_same(path, chunk_lines=64)) == 500
    gen = read_fast(StreamReader(str(path), MemoryDictionary(), chunk_lines=64), ReadState())
    with pytest.raises(StopIteration) as stop:
        while True:
            next(gen)
    assert stop.value.value is None


def test_bulk_timestamps_equal_the_reader_s(tmp_path: Path) -> None:
    rnd = random.Random(3)
    ms = [rnd.randint(-(10**12), 10**13) for _ in range(2000)] + [0, 951782400000, 4107542400000]
    for digits in ("", ".5", ".123", ".123456"):
        lex = [np.datetime64(m, "s").astype(str) + digits + "Z" for m in ms]
        lex = [x for x in lex if x[0] != "-" and len(x.split("-")[0]) == 4]
        terms = [f'"{x}"^^<{XSD}dateTime>' for x in lex] + [PROV, "<http://ex.org/g>"]
        n = len(lex)
        ts = np.array([[n + 1, n, k] for k in range(n)], dtype=np.int64)
        got = _stamps(terms, ts)
        assert got is not None
        assert got.tolist() == [parse_datetime_ms(x) for x in lex]
    # forms left to the one-by-one reading
    for bad in (
        "2014-02-29T00:00:00Z",
        "2014-08-01T24:00:00Z",
        "2014-08-01T00:00:00",
        "0000-01-01T00:00:00Z",
    ):
        terms = [f'"{bad}"^^<{XSD}dateTime>', PROV, "<http://ex.org/g>"]
        assert _stamps(terms, np.array([[2, 1, 0]])) is None, bad


def test_a_pipe_is_read_as_a_file_is(tmp_path: Path) -> None:
    """A stream read from a pipe (no seeking back for a hand-over) gives what the same lines
    give from a file, also with lines that the compiled reader hands over (late, earlier
    element)."""
    import os
    import threading

    lines = [x for x in random_stream(random.Random(11), 300) if isinstance(x, str)]
    path = write(tmp_path / "s.nq", lines)
    want = read(path, True, lateness_ms=500)
    fifo = tmp_path / "live.nq"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(path.read_bytes()), daemon=True)
    writer.start()
    out: list = []
    reader = threading.Thread(target=lambda: out.append(read(fifo, True, lateness_ms=500)), daemon=True)
    reader.start()
    reader.join(60)
    assert out, "the pipe was not read to its end within 60 s"
    got = out[0]
    assert got[2] == [m.replace(str(path), str(fifo)) for m in want[2]]  # log lines
    assert (got[0], got[1], got[3]) == (want[0], want[1], want[3])
    assert want[3]["late"] or want[3]["rejected"]  # (lines the compiled reader hands over)
