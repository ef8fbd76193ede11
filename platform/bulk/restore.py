"""Checkpoint replay with PySpark: read an ingest log's records after a checkpoint.

``linkstream restore --checkpoint URI --log DIR [--spark MASTER]`` rebuilds the state of an
embedded ``run --state-dir DIR`` while it is stopped -- for a cold start, or to compact a
long log into a new checkpoint -- and writes it back as a checkpoint that ``run`` loads.
The Spark job is the read side: :func:`spark_log_records` loads every segment of
``DIR/log`` as a binary file (``binaryFile`` source: local paths, HDFS, S3A alike), scans
and CRC-checks each one in its own task (``mapInArrow``: records cross to the driver as
Arrow buffers, nothing is pickled), keeps the records after the checkpoint's sequence
number and returns them ordered.  The driver (``linkstream.cli.service``) restores the
checkpoint into an engine, replays the records in order and writes the new checkpoint.

PySpark is imported only here, and only by ``restore``: never on the ``run`` path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from functools import partial
from typing import TYPE_CHECKING

import msgpack

from linkstream.engine.live.ingestlog import LogRecord, scan_records

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

    from linkstream.store.checkpoints import CheckpointStore

__all__ = ["RECORD_SCHEMA", "scan_segments", "spark_log_records"]

#: one log record: its sequence number, msgpack header, payload, and the segment it is in
RECORD_SCHEMA = "seq long, header binary, payload binary, segment string"


def scan_segments(batches: Iterator[pa.RecordBatch], after: int) -> Iterator[pa.RecordBatch]:
    """Spark task: the records (sequence number > ``after``) of each segment file in
    ``batches`` (``binaryFile`` rows: ``path``, ``content``); a segment's torn or damaged
    tail ends it, as when ``run`` opens the log."""
    import pyarrow as pa

    schema = pa.schema(
        [("seq", pa.int64()), ("header", pa.binary()), ("payload", pa.binary()), ("segment", pa.string())]
    )
    for batch in batches:
        seqs: list[int] = []
        headers: list[bytes] = []
        payloads: list[bytes] = []
        segs: list[str] = []
        paths = batch.column("path").to_pylist()
        for path, content in zip(paths, batch.column("content").to_pylist()):
            for rec in scan_records(content or b""):
                if rec.seq > after:
                    seqs.append(rec.seq)
                    headers.append(msgpack.packb(rec.header, use_bin_type=True))
                    payloads.append(rec.payload)
                    segs.append(os.path.basename(str(path)))
        yield pa.RecordBatch.from_arrays(
            [
                pa.array(seqs, pa.int64()),
                pa.array(headers, pa.binary()),
                pa.array(payloads, pa.binary()),
                pa.array(segs, pa.string()),
            ],
            schema=schema,
        )


def has_shipped_log(uri: str) -> bool:
    """Whether the checkpoint store at ``uri`` holds a shipped ingest log."""
    from linkstream.engine.live.logship import read_manifest
    from linkstream.store.checkpoint_backends import open_backend
    from linkstream.store.checkpoints import CheckpointError

    try:
        return bool(read_manifest(open_backend(uri)))
    except (OSError, CheckpointError):  # unreadable: no shipped log to use
        return False


def log_dirs(store: CheckpointStore, state_dir: str, after: int, scratch: str) -> list[str]:
    """The directories of segment files to read: ``state_dir/log`` (if it exists) and, when
    ``store`` is not inside ``state_dir``, ``scratch`` holding the verified pieces of the log
    shipped to it (:mod:`~linkstream.engine.live.logship`) after record ``after``."""
    from linkstream.engine.live.logship import download_pieces, ship_enabled

    out = [d for d in [os.path.join(state_dir, "log")] if os.path.isdir(d)]
    if ship_enabled(store.uri, state_dir):
        shutil.rmtree(scratch, ignore_errors=True)
        if download_pieces(store.backend, after, scratch):
            out.append(scratch)
    return out


def spark_log_records(spark: SparkSession, log_dirs: str | list[str], after: int) -> Iterator[LogRecord]:
    """The records of the ingest log in ``log_dirs`` (``DIR/log``, directories of shipped
    pieces) after sequence number ``after``, in order (a record found twice once), read by a
    Spark job (see the module docstring)."""
    from pyspark.sql import functions as F

    dirs = [os.path.abspath(d) for d in ([log_dirs] if isinstance(log_dirs, str) else log_dirs)]
    segs = [f for d in dirs for f in os.listdir(d) if f.endswith(".log")]
    if not segs:
        return iter(())
    df = (
        spark.read.format("binaryFile")
        .option("pathGlobFilter", "*.log")
        .load(dirs)
        .select("path", "content")
        .repartition(min(len(segs), 64))
    )
    table = df.mapInArrow(partial(scan_segments, after=after), RECORD_SCHEMA).orderBy(F.col("seq")).toArrow()
    return _records(table)


def _records(table: pa.Table) -> Iterator[LogRecord]:
    seqs = table.column("seq").to_pylist()
    headers = table.column("header").to_pylist()
    payloads = table.column("payload").to_pylist()
    prev = None
    for seq, h, payload in zip(seqs, headers, payloads):
        if seq == prev:  # in the local log and in a shipped piece
            continue
        prev = seq
        header = msgpack.unpackb(h, raw=False)
        yield LogRecord(int(seq), str(header.get("k")), header, payload)
