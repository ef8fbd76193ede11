"""Rebuilding a store directory from its log with PySpark (``linkstream restore --store DIR``).

A store directory that ``linkstream run --store DIR --absorb STREAM`` writes into keeps
the absorbed stream batches in its write-ahead log (``DIR/delta/log.bin``: per batch its
stream, timestamp, graph and triple ids in the store's dictionary) until a checkpoint
writes them into the graphs' partitions.  Every process that opens the directory replays
the log first.  :func:`rebuild_store` is that checkpoint done by a Spark job, for a log
too long to replay in one process or a store whose graphs do not fit in one:

1. **log** -- the log file is read as a binary file and each record is exploded into
   rows ``(graph, stream, ts, s, p, o)`` (:func:`explode_log`; a torn tail ends the log,
   as when a process opens it); the graphs and streams it names, with each stream's last
   timestamp, are the only things collected to the driver;
2. **old partitions** -- the ``.npy`` partition files of every graph the log adds to are
   read as binary files (:func:`read_partitions`);
3. **write** -- both sets of rows, keyed by (graph number, ``s % P``), are repartitioned
   by key and sorted, and each task writes its keys' partition files into a *new* graph
   folder, dropping repeated rows (:func:`linkstream.bulk.tasks.write_partitions`, the
   bulk loader's writer).

The driver then writes ``store.json`` naming the new folders (and the streams' stable
timestamps, so a process that opens the store skips what is already in the partitions),
deletes the old folders and their index caches, and empties the log, all under the
directory's lock (:class:`~linkstream.store.storelock.StoreLock`).  Until the manifest is
replaced the store is unchanged; the dictionary is untouched (the log holds ids).

On a real cluster the store directory must be on a filesystem every executor mounts at
the same path, as for ``linkstream load --spark``.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from linkstream.store.deltalog import LOG_PATH, DeltaLog, read_batches
from linkstream.store.layout import (
    GRAPHS,
    INDEX,
    GraphEntry,
    partition_path,
    read_manifest,
    write_manifest,
    write_partition,
)
from linkstream.store.storelock import StoreLock

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

__all__ = ["LOG_SCHEMA", "RebuildResult", "explode_log", "read_partitions", "rebuild_store"]

#: one absorbed triple of the log
LOG_SCHEMA = "rec long, graph string, stream string, ts long, s long, p long, o long"
#: one stored triple of an old partition file
ROWS_SCHEMA = "gid int, part int, s long, p long, o long"


@dataclass
class RebuildResult:
    """What :func:`rebuild_store` did.

    Attributes:
        store_dir: The store directory.
        batches: Log records folded into the partitions.
        triples: Per rewritten graph (``None``: the default graph), its distinct triples now.
        vts: The streams' stable timestamps recorded in the manifest.
        seconds: Wall time of the job.
    """

    store_dir: str
    batches: int = 0
    triples: dict[str | None, int] = field(default_factory=dict)
    vts: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0


def explode_log(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Spark task: the triples of every record of the log file in ``batches`` (one
    ``binaryFile`` row), as :data:`LOG_SCHEMA` rows (``rec``: the record's number), in log order."""
    import pyarrow as pa

    k = 0  # record number in the log
    for batch in batches:
        for content in batch.column("content").to_pylist():
            for rec in read_batches(content or b""):
                k += 1
                n = len(rec.triples)
                if not n:
                    continue
                t = rec.triples
                yield pa.RecordBatch.from_arrays(
                    [
                        pa.array(np.full(n, k, dtype=np.int64)),
                        pa.array([rec.graph] * n, pa.string()),
                        pa.array([rec.stream] * n, pa.string()),
                        pa.array(np.full(n, rec.ts, dtype=np.int64)),
                        pa.array(t[:, 0]),
                        pa.array(t[:, 1]),
                        pa.array(t[:, 2]),
                    ],
                    names=["rec", "graph", "stream", "ts", "s", "p", "o"],
                )


def read_partitions(
    batches: Iterator[pa.RecordBatch], keys: dict[str, tuple[int, int]]
) -> Iterator[pa.RecordBatch]:
    """Spark task: the rows of partition files (``binaryFile`` rows) as :data:`ROWS_SCHEMA`;
    ``keys`` maps each file's path to its (graph number, partition)."""
    import io

    import pyarrow as pa

    from linkstream.bulk.tasks import spark_file_key

    for batch in batches:
        for path, content in zip(batch.column("path").to_pylist(), batch.column("content").to_pylist()):
            gid, part = keys[spark_file_key(str(path))]
            rows = np.load(io.BytesIO(content or b""), allow_pickle=False).reshape(-1, 3)
            n = len(rows)
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(np.full(n, gid, dtype=np.int32)),
                    pa.array(np.full(n, part, dtype=np.int32)),
                    pa.array(rows[:, 0].astype(np.int64)),
                    pa.array(rows[:, 1].astype(np.int64)),
                    pa.array(rows[:, 2].astype(np.int64)),
                ],
                names=["gid", "part", "s", "p", "o"],
            )


def _free_dirs(store_dir: Path, taken: set[str], n: int) -> list[str]:
    out: list[str] = []
    k = 0
    while len(out) < n:
        name = f"g{k}"
        if name not in taken and not (store_dir / GRAPHS / name).exists():
            out.append(name)
        k += 1
    return out


def rebuild_store(spark: SparkSession, store_dir: str, *, lock_timeout: float | None = 30.0) -> RebuildResult:
    """Writes the batches of ``store_dir``'s log into its partitions (see the module doc).

    Raises:
        StoreError: The store directory is not valid.
        StoreLockedError: Another process held the directory's lock past ``lock_timeout``.
    """
    from pyspark.sql import functions as F

    from linkstream.bulk import tasks

    t0 = time.perf_counter()
    root = Path(store_dir).resolve()
    res = RebuildResult(str(root))
    lock = StoreLock(root, lock_timeout)
    lock.acquire()
    try:
        m = read_manifest(root)
        log_path = root / LOG_PATH
        if not log_path.exists() or log_path.stat().st_size == 0:
            return res
        P = m.partitions
        log_rows = (
            spark.read.format("binaryFile")
            .load(tasks.spark_glob_escape(str(log_path)))
            .select("content")
            .mapInArrow(explode_log, LOG_SCHEMA)
            .persist()
        )
        try:
            meta = (
                log_rows.groupBy("graph", "stream")
                .agg(F.max("ts").alias("ts"), F.countDistinct("rec").alias("n"))
                .collect()
            )
            if not meta:
                return res
            graphs = sorted({r["graph"] for r in meta}, key=lambda g: (g is not None, g or ""))
            old_vts = m.extra.get("vts")
            vts = {str(k): int(v) for k, v in old_vts.items()} if isinstance(old_vts, dict) else {}
            for r in meta:
                vts[r["stream"]] = max(vts.get(r["stream"], -1), int(r["ts"]))
                res.batches += int(r["n"])
            entries = {g.iri: g for g in m.graphs}
            new_dirs = _free_dirs(root, {g.dir for g in m.graphs}, len(graphs))
            gdirs = dict(enumerate(new_dirs))
            keys: dict[str, tuple[int, int]] = {}
            for gid, g in enumerate(graphs):
                old = entries.get(g)
                if old is not None:
                    for k in range(P):
                        path = partition_path(root, old.dir, k)
                        if path.exists():
                            keys[tasks.file_key(str(path))] = (gid, k)
            ids = spark.createDataFrame([(g, gid) for gid, g in enumerate(graphs)], "graph string, gid int")
            rows = log_rows.join(F.broadcast(ids), log_rows["graph"].eqNullSafe(ids["graph"])).select(
                F.col("gid"),
                F.pmod(F.col("s"), F.lit(P)).cast("int").alias("part"),
                "s",
                "p",
                "o",
            )
            if keys:
                old_rows = (
                    spark.read.format("binaryFile")
                    .load([tasks.spark_glob_escape(p) for p in sorted(keys)])
                    .mapInArrow(partial(read_partitions, keys=keys), ROWS_SCHEMA)
                )
                rows = rows.unionByName(old_rows)
            n_tasks = max(1, min(len(graphs) * P, 4096))
            ordered = rows.repartition(n_tasks, "gid", "part").sortWithinPartitions(
                "gid", "part", "s", "p", "o"
            )
            written = ordered.mapInArrow(
                partial(tasks.write_partitions, store_dir=str(root), gdirs=gdirs), tasks.WRITTEN_SCHEMA
            ).collect()
        finally:
            log_rows.unpersist()
        counts = {(int(r["gid"]), int(r["part"])): int(r["n"]) for r in written}
        for gid, g in enumerate(graphs):
            for k in range(P):
                if (gid, k) not in counts:  # no row in this partition: an empty file, as load writes
                    counts[(gid, k)] = write_partition(root, gdirs[gid], k, np.empty((0, 3), dtype=np.int64))
            n = sum(counts[(gid, k)] for k in range(P))
            entries[g] = GraphEntry(g, gdirs[gid], n)
            res.triples[g] = n
        extra = {k: v for k, v in m.extra.items() if k != "vts"}
        write_manifest(
            root,
            dictionary=m.dictionary,
            partitions=P,
            graphs=list(entries.values()),
            sources=m.sources,
            loader=m.loader,
            vts=vts,
            **extra,
        )
        res.vts = vts
        for g in graphs:  # the folders the new manifest no longer names
            old = next((e for e in m.graphs if e.iri == g), None)
            if old is not None:
                shutil.rmtree(root / GRAPHS / old.dir, ignore_errors=True)
                shutil.rmtree(root / INDEX / old.dir, ignore_errors=True)
        log = DeltaLog(log_path)
        try:
            log.truncate()  # processes holding the old file see it replaced and reload
        finally:
            log.close()
    finally:
        lock.release()
        res.seconds = time.perf_counter() - t0
    return res


def describe(res: RebuildResult) -> str:
    """One line saying what :func:`rebuild_store` did."""
    if not res.triples:
        return f"{res.store_dir}: the log is empty; nothing to rebuild"
    graphs = ", ".join(
        f"{'default graph' if g is None else '<' + g + '>'}: {n:,}" for g, n in res.triples.items()
    )
    return (
        f"{res.store_dir}: {res.batches} log batches written into the partitions ({graphs} triples), "
        f"log emptied in {res.seconds:.1f}s"
    )
