"""The per-partition work of the Spark bulk loader, run inside Spark's Python workers.

Each function maps an iterator of Arrow record batches (one Spark partition) to an
iterator of Arrow record batches, as ``DataFrame.mapInArrow`` wants.  They are plain
module functions bound with :func:`functools.partial` to JSON-like arguments (paths,
URIs, numbers), so Spark ships only a reference to this module plus those values.

* :func:`parse_lines`   text lines -> (s, p, o, g) canonical N-Triples strings, or an error;
* :func:`assign_ids`    distinct terms -> ids, publishing new terms through the dictionary
  backend (opened by URI in the worker: the partition-wise dictionary writer);
* :func:`write_partitions` sorted (gid, part, s, p, o) rows -> the store's ``.npy``
  partition files, deduplicated while streaming, so no partition is held in memory.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from typing import IO
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from linkstream.rdf import ntfast
from linkstream.rdf.dictionary import open_dictionary
from linkstream.rdf.ntriples import LINE_STRIP, LineParser, NTriplesError, parse_file_line, parser_for

PARSED_SCHEMA = "s string, p string, o string, g string, err string"
IDS_SCHEMA = "t string, h long, id long, new boolean"
WRITTEN_SCHEMA = "gid int, part int, n long"

_EXCERPT = 160
_NPY_HEADER = 128  # bytes of a version-1.0 .npy header of an (n, 3) int64 array, any n


def file_key(path: str) -> str:
    """A local file path in the form :func:`spark_file_key` gives it."""
    return os.path.normpath(os.path.abspath(path))


def spark_file_key(uri: str) -> str:
    """The local path of a ``_metadata.file_path`` URI (``file:/a%20b.nt`` -> ``/a b.nt``)."""
    if uri.startswith("file:"):
        uri = unquote(uri[5:])
        while uri.startswith("//"):
            uri = uri[1:]
    return os.path.normpath(uri)


def spark_glob_escape(path: str) -> str:
    """``path`` with Hadoop glob characters escaped, so Spark reads exactly that file."""
    return re.sub(r"([\\\[\]{}*?])", r"\\\1", path)


def parse_lines(
    batches: Iterator[pa.RecordBatch], prefixes: dict[str, str], default_graph: bool
) -> Iterator[pa.RecordBatch]:
    """Parse N-Triples / N-Quads lines (columns ``value``, ``file_path``).

    The compiled scanner (:mod:`linkstream.rdf.ntfast`) reads the common lines of each run
    of one file's lines; the Python parser reads the others (and every line without it).

    Args:
        batches: the partition's lines.
        prefixes: :func:`file_key` of each input file -> its blank-node prefix.
        default_graph: put every quad in the default graph.

    Yields:
        Batches of :data:`PARSED_SCHEMA`: a statement per row, or a malformed line as
        ``err`` = ``"PATH: rejected: REASON: LINE"`` with the terms null.
    """
    parsers: dict[str, LineParser] = {}
    for batch in batches:
        values, paths = batch.column("value"), batch.column("file_path")
        if not len(values):
            continue
        change = np.flatnonzero(np.asarray(pc.not_equal(paths[1:], paths[:-1]).fill_null(True), dtype=bool))
        bounds = [0, *(change + 1).tolist(), len(values)]
        parts: list[list[pa.Array]] = []
        for a, b in zip(bounds, bounds[1:]):
            path = paths[a].as_py()
            parser = parsers.get(path)
            if parser is None:
                parser = parsers[path] = parser_for(prefixes.get(spark_file_key(path), ""))
            parts.extend(_parsed_run(values.slice(a, b - a), path, parser, default_graph))
        if len(parts) > 1:
            yield pa.RecordBatch.from_arrays(
                [pa.concat_arrays([x[k] for x in parts]) for k in range(5)], names=_PARSED
            )
        elif parts:
            yield pa.RecordBatch.from_arrays(parts[0], names=_PARSED)


_PARSED = ["s", "p", "o", "g", "err"]


def _parsed_run(
    values: pa.Array, path: str, parser: LineParser, default_graph: bool
) -> Iterator[list[pa.Array]]:
    """Column sets of :data:`PARSED_SCHEMA` for lines of one file, in order."""
    scanner = ntfast.scanner()
    data = _joined_lines(values) if scanner is not None else None
    if scanner is None or data is None:
        yield _python_rows(values.to_pylist(), path, parser, default_graph)
        return
    prefix = parser.bnode_prefix.encode("utf-8")
    pos = 0
    while pos < len(data):
        terms, idx, pos, _, stopped = scanner.scan(data, pos, prefix, True, parser._langs, None, None)
        if terms:
            ix = np.frombuffer(idx, dtype=np.int64).reshape(-1, 4)
            table = pa.array(terms, pa.string())
            cols = [table.take(pa.array(ix[:, k])) for k in range(3)]
            n = len(ix)
            if default_graph:
                cols.append(pa.nulls(n, pa.string()))
            else:
                cols.append(table.take(pa.array(ix[:, 3], mask=ix[:, 3] < 0)))
            cols.append(pa.nulls(n, pa.string()))
            yield cols
        if stopped:  # one line for the Python parser
            end = data.find(b"\n", pos)
            raw = data[pos:end].decode("utf-8", "surrogatepass")
            pos = end + 1
            yield _python_rows([raw], path, parser, default_graph)


def _joined_lines(values: pa.Array) -> bytes | None:
    """The UTF-8 bytes of the lines of a string array, each followed by a line end (None:
    not a plain string array)."""
    if values.null_count or values.type not in (pa.string(), pa.large_string()):
        return None
    width = np.int32 if values.type == pa.string() else np.int64
    offsets = np.frombuffer(values.buffers()[1], dtype=width)[values.offset : values.offset + len(values) + 1]
    body = np.frombuffer(values.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
    ends = (offsets[1:] - offsets[0]).astype(np.int64) + np.arange(len(values))
    out = np.full(len(body) + len(values), 10, dtype=np.uint8)
    keep = np.ones(len(out), dtype=bool)
    keep[ends] = False
    out[keep] = body
    return out.tobytes()


def _python_rows(lines: list[str], path: str, parser: LineParser, default_graph: bool) -> list[pa.Array]:
    """Columns of :data:`PARSED_SCHEMA` for ``lines`` read by the Python parser."""
    s_col: list[str | None] = []
    p_col: list[str | None] = []
    o_col: list[str | None] = []
    g_col: list[str | None] = []
    e_col: list[str | None] = []
    for raw in lines:
        try:
            quads = parse_file_line(parser, raw)
        except NTriplesError as e:
            line = raw.strip(LINE_STRIP)
            excerpt = line if len(line) <= _EXCERPT else line[:_EXCERPT] + "..."
            s_col.append(None)
            p_col.append(None)
            o_col.append(None)
            g_col.append(None)
            e_col.append(f"{spark_file_key(path)}: rejected: {e}: {excerpt}")
            continue
        for s, p, o, g in quads:
            s_col.append(s)
            p_col.append(p)
            o_col.append(o)
            g_col.append(None if default_graph else g)
            e_col.append(None)
    return [pa.array(c, pa.string()) for c in (s_col, p_col, o_col, g_col, e_col)]


def assign_ids(batches: Iterator[pa.RecordBatch], dictionary_uri: str) -> Iterator[pa.RecordBatch]:
    """Ids of distinct terms (column ``t``, and ``h`` passed through), publishing the new ones.

    Terms the dictionary already holds keep their ids.  For the others the task reserves
    a block of fresh ids from the dictionary, numbers them in order and publishes them
    with ``put_many``; a term another writer published meanwhile keeps that writer's id.
    Re-running the task (a Spark retry) finds its terms published and returns the same ids.

    Yields:
        Batches of :data:`IDS_SCHEMA` (``new``: published by this task).
    """
    dictionary = open_dictionary(dictionary_uri)
    try:
        if not hasattr(dictionary, "reserve") or not hasattr(dictionary, "put_many"):
            raise TypeError(f"dictionary {dictionary_uri!r} cannot reserve ids (no reserve/put_many)")
        for batch in batches:
            terms = batch.column("t").to_pylist()
            ids = dictionary.lookup_many(terms)
            absent = np.flatnonzero(ids == 0)
            new = np.zeros(len(terms), dtype=bool)
            if len(absent):
                first = dictionary.reserve(len(absent))
                fresh = np.arange(first, first + len(absent), dtype=np.int64)
                got = dictionary.put_many([terms[k] for k in absent.tolist()], fresh)
                ids[absent] = got
                new[absent] = got == fresh
            yield pa.RecordBatch.from_arrays(
                [batch.column("t"), batch.column("h"), pa.array(ids, pa.int64()), pa.array(new, pa.bool_())],
                names=["t", "h", "id", "new"],
            )
    finally:
        dictionary.close()


class _NpyWriter:
    """Streams (n, 3) int64 rows into a ``.npy`` file whose header is written at the end."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.tmp = path + ".tmp"
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.f: IO[bytes] = open(self.tmp, "wb")  # noqa: SIM115
        self.f.write(b"\0" * _NPY_HEADER)
        self.rows = 0

    def write(self, rows: np.ndarray) -> None:
        self.f.write(np.ascontiguousarray(rows, dtype=np.int64).tobytes())
        self.rows += len(rows)

    def close(self) -> int:
        self.f.seek(0)
        header: dict[str, object] = {
            "descr": np.lib.format.dtype_to_descr(np.dtype(np.int64)),
            "fortran_order": False,
        }
        header["shape"] = (self.rows, 3)
        np.lib.format.write_array_header_1_0(self.f, header)
        if self.f.tell() != _NPY_HEADER:  # the numpy header format changed: fail loudly
            raise RuntimeError(f".npy header of {self.path} is {self.f.tell()} bytes, expected {_NPY_HEADER}")
        self.f.close()
        os.replace(self.tmp, self.path)
        return self.rows


def write_partitions(
    batches: Iterator[pa.RecordBatch], store_dir: str, gdirs: dict[int, str]
) -> Iterator[pa.RecordBatch]:
    """Write partition files from rows sorted by (gid, part, s, p, o).

    Every (gid, part) key of the input lives in this Spark partition only (the rows were
    repartitioned by that key), so each key's file is written whole here.  Repeated rows
    are adjacent after the sort and dropped while streaming.

    Args:
        batches: columns ``gid``, ``part``, ``s``, ``p``, ``o`` (int), sorted.
        store_dir: the store directory (shared with the driver).
        gdirs: graph number -> its folder under ``graphs/``.

    Yields:
        One batch of :data:`WRITTEN_SCHEMA`: rows written per (gid, part).
    """
    from linkstream.store.layout import partition_path

    done_g: list[int] = []
    done_k: list[int] = []
    done_n: list[int] = []
    writer: _NpyWriter | None = None
    key: tuple[int, int] | None = None
    prev: np.ndarray | None = None  # last row written, to drop a repeat across batches
    for batch in batches:
        if batch.num_rows == 0:
            continue
        cols = [batch.column(c).to_numpy(zero_copy_only=False) for c in ("gid", "part", "s", "p", "o")]
        gid = cols[0].astype(np.int64)
        part = cols[1].astype(np.int64)
        rows = np.column_stack(cols[2:]).astype(np.int64, copy=False)
        keys = gid * (1 << 32) + part
        cut = np.flatnonzero(keys[1:] != keys[:-1]) + 1
        for a, b in zip(np.concatenate(([0], cut)).tolist(), np.concatenate((cut, [len(keys)])).tolist()):
            k = (int(gid[a]), int(part[a]))
            if k != key:
                if writer is not None and key is not None:
                    done_g.append(key[0])
                    done_k.append(key[1])
                    done_n.append(writer.close())
                key = k
                writer = _NpyWriter(str(partition_path(store_dir, gdirs[k[0]], k[1])))
                prev = None
            seg = rows[a:b]
            keep = np.ones(len(seg), dtype=bool)
            if len(seg) > 1:
                keep[1:] = np.any(seg[1:] != seg[:-1], axis=1)
            if prev is not None and np.array_equal(seg[0], prev):
                keep[0] = False
            prev = seg[-1].copy()
            assert writer is not None
            writer.write(seg[keep])
    if writer is not None and key is not None:
        done_g.append(key[0])
        done_k.append(key[1])
        done_n.append(writer.close())
    yield pa.RecordBatch.from_arrays(
        [pa.array(done_g, pa.int32()), pa.array(done_k, pa.int32()), pa.array(done_n, pa.int64())],
        names=["gid", "part", "n"],
    )
