"""The Spark bulk loader: N-Triples / N-Quads files -> a LinkStream store directory.

The job never brings triples to the driver; only counts, graph names and a few sample
error lines are collected.  Stages:

1. **parse** -- the input files are read as text (split across tasks), every line goes
   through LinkStream's own line parser (:mod:`linkstream.rdf.ntriples`) in the Python
   workers; malformed lines are counted, a sample is reported, and they are skipped.
   The parsed statements are cached (memory, spilling to disk).
2. **terms** -- the distinct terms (subjects, predicates, objects) are computed by Spark.
3. **ids** -- each task looks its terms up in the dictionary (opened by URI in the
   worker); terms already there keep their ids, new ones get ids from a block the task
   reserves from the dictionary and are published partition-wise (``reserve`` +
   ``put_many`` of :class:`~linkstream.rdf.dictionary.BulkDictionary`).
4. **encode** -- statements are joined with the term -> id table (in the JVM).
5. **write** -- rows are repartitioned by (graph, ``s % P``), sorted, and each task
   streams its keys into the store's ``.npy`` partition files, dropping repeated rows.
   Then the driver writes ``store.json`` (``"loader": "spark"``).

On a real cluster (``master`` other than ``local``), the input files, the store
directory and an ``lmdb:`` dictionary must be on a filesystem every executor mounts
at the same path; an ``hbase://`` dictionary needs no shared filesystem.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING

from linkstream.bulk import tasks
from linkstream.bulk.inputs import InputFile, expand_inputs
from linkstream.bulk.progress import StageProgress
from linkstream.bulk.session import DEFAULT_MASTER, spark_session
from linkstream.store import layout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: the most graphs whose names are kept on the driver (they become manifest entries)
MAX_GRAPHS = 100_000
#: sample of malformed lines kept for the report
ERROR_SAMPLE = 20
#: term tables up to this size are broadcast to the encoding joins (else shuffle joins);
#: three broadcast copies of a larger table can exhaust a 2 GB driver
BROADCAST_TERMS = 1_000_000
#: work folder inside the store directory (removed when the load ends)
WORK_DIR = ".spark-work"


@dataclass
class SparkLoadResult:
    """What a Spark load did.

    Attributes:
        store_dir: the store directory written.
        statements: statements parsed (repeats included).
        rejected: malformed lines skipped.
        errors: a sample of the rejected lines (``PATH: rejected: REASON: LINE``).
        terms: distinct terms of the input.
        new_terms: terms this load added to the dictionary.
        triples: distinct triples written per graph IRI (``None`` = default graph).
        seconds: wall time per stage.
    """

    store_dir: str
    statements: int = 0
    rejected: int = 0
    errors: list[str] = field(default_factory=list)
    terms: int = 0
    new_terms: int = 0
    triples: dict[str | None, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def total_triples(self) -> int:
        return sum(self.triples.values())


def spark_load(
    store_dir: str,
    inputs: Sequence[str],
    *,
    master: str = DEFAULT_MASTER,
    partitions: int = 8,
    dictionary: str | None = None,
    default_graph: bool = False,
    spark: SparkSession | None = None,
    log: Callable[[str], None] | None = None,
    join_on_hash: bool = True,
) -> SparkLoadResult:
    """Load N-Triples / N-Quads files (or folders of them) into a new store directory with Spark.

    Args:
        store_dir: the store directory (created; must not hold a ``store.json`` yet).
        inputs: files (``.nt``, ``.ntriples``, ``.nq``, ``.nquads``) and folders of such files.
        master: Spark master when no ``spark`` session is given.
        partitions: subject-hash partitions per graph (``P``).
        dictionary: dictionary URI (default ``lmdb:dict`` inside the store directory); its
            existing terms keep their ids.
        default_graph: put N-Quads statements in the default graph instead of their named graph.
        spark: a running session to use (default: the active one, else one is started for
            ``master`` and stopped at the end).
        log: receives progress lines.
        join_on_hash: join statements with the term table on 64-bit term hashes (the job
            falls back to the strings by itself on a collision; ``False`` always uses them).

    Raises:
        FileExistsError: the directory already holds a store.
        FileNotFoundError: an input does not exist.
        ValueError: bad arguments or inputs, or a dictionary the workers cannot share.
    """
    say = log or (lambda _msg: None)
    if partitions < 1:
        raise ValueError(f"--partitions must be >= 1, got {partitions}")
    store_dir = os.path.abspath(store_dir)
    if os.path.exists(os.path.join(store_dir, layout.MANIFEST)):
        raise FileExistsError(
            f"{store_dir} already holds a store ({layout.MANIFEST}); load into a new directory"
        )
    files = expand_inputs(inputs)
    uri_in_manifest = dictionary or layout.DEFAULT_DICTIONARY
    if uri_in_manifest.split(":", 1)[0].lower() == "memory":
        raise ValueError(
            "the Spark loader needs a dictionary its workers share: lmdb:PATH or hbase://HOST:PORT/TABLE"
        )
    os.makedirs(store_dir, exist_ok=True)
    dict_uri = layout.resolve_dictionary_uri(store_dir, uri_in_manifest)
    own_session = False
    if spark is None:
        spark = _active_session()
    if spark is None:
        say(f"starting Spark ({master})")
        spark = spark_session(master)
        own_session = True
    try:
        return _run(
            spark, store_dir, files, uri_in_manifest, dict_uri, partitions, default_graph, join_on_hash, say
        )
    finally:
        if own_session:
            spark.stop()


def _run(
    spark: SparkSession,
    store_dir: str,
    files: list[InputFile],
    uri_in_manifest: str,
    dict_uri: str,
    partitions: int,
    default_graph: bool,
    join_on_hash: bool,
    say: Callable[[str], None],
) -> SparkLoadResult:
    """The job (stages 1-5) on a running session."""
    res = SparkLoadResult(store_dir)
    t_all = time.perf_counter()
    from pyspark.sql import functions as F

    say(f"loading {len(files)} file(s), {sum(f.size for f in files):,} bytes, into {store_dir}")

    # 1. parse, once: statements and their term hashes go to a Parquet work folder that
    # the later stages read column-wise (the input may not fit in memory)
    t0 = time.perf_counter()
    work = os.path.join(store_dir, WORK_DIR)
    shutil.rmtree(work, ignore_errors=True)
    # graph files without a store.json are left over by a failed load: never mix them in
    shutil.rmtree(os.path.join(store_dir, layout.GRAPHS), ignore_errors=True)
    lines = (
        spark.read.option("lineSep", "\n")
        .text([tasks.spark_glob_escape(f.path) for f in files])
        .select("value", F.col("_metadata.file_path").alias("file_path"))
    )
    prefixes = {tasks.file_key(f.path): f.bnode_prefix for f in files}
    parsed = lines.mapInArrow(
        partial(tasks.parse_lines, prefixes=prefixes, default_graph=default_graph), tasks.PARSED_SCHEMA
    )
    with StageProgress(spark, "parse", say):
        # uncompressed: the folder lives for one load, compressing it costs more CPU than it saves
        hashed = parsed.select("*", *(F.xxhash64(c).alias(c + "h") for c in "spo"))
        hashed.write.option("compression", "none").parquet(work)
    try:
        parsed = spark.read.parquet(work)
        counts = parsed.agg(F.count("s").alias("ok"), F.count("err").alias("bad")).collect()[0]
        res.statements, res.rejected = int(counts["ok"]), int(counts["bad"])
        if res.rejected:
            sample = parsed.where(F.col("err").isNotNull()).select("err").limit(ERROR_SAMPLE).collect()
            res.errors = [r["err"] for r in sample]
            for e in res.errors:
                say(e)
        res.seconds["parse"] = time.perf_counter() - t0
        say(
            f"parse: {res.statements:,} statements, {res.rejected:,} rejected lines "
            f"({res.seconds['parse']:.1f}s)"
        )
        good = parsed.where(F.col("err").isNull()).drop("err")
        graph_dirs = _load_parsed(spark, good, res, store_dir, dict_uri, partitions, join_on_hash, say)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    layout.write_manifest(
        store_dir,
        dictionary=uri_in_manifest,
        partitions=partitions,
        graphs=[layout.GraphEntry(iri, gdir, res.triples.get(iri, 0)) for iri, gdir in graph_dirs.items()],
        sources=[f.path for f in files],
        loader="spark",
    )
    res.seconds["total"] = time.perf_counter() - t_all
    say(
        f"done: {res.total_triples:,} triples in {len(res.triples)} graph(s), {res.terms:,} terms "
        f"({res.new_terms:,} new), {res.seconds['total']:.1f}s"
    )
    return res


def _load_parsed(
    spark: SparkSession,
    good: DataFrame,
    res: SparkLoadResult,
    store_dir: str,
    dict_uri: str,
    partitions: int,
    join_on_hash: bool,
    say: Callable[[str], None],
) -> dict[str | None, str]:
    """Stages 2-5 over the parsed statements ``good`` (columns s, p, o, g); returns graph -> folder."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    # graphs: few names, numbered on the driver
    graph_names = [r["g"] for r in good.select("g").distinct().limit(MAX_GRAPHS + 1).collect()]
    if len(graph_names) > MAX_GRAPHS:
        raise ValueError(f"more than {MAX_GRAPHS} named graphs: not supported by the store layout")
    graph_names.sort(key=lambda g: (g is not None, g or ""))
    gdirs = {gid: f"g{gid}" for gid in range(len(graph_names))}

    # 2 + 3. distinct terms -> ids (published partition-wise through the dictionary backend)
    t0 = time.perf_counter()
    terms = good.select(F.explode(F.array("s", "p", "o")).alias("t")).distinct()
    terms = terms.select("t", F.xxhash64("t").alias("h"))
    ids = terms.mapInArrow(partial(tasks.assign_ids, dictionary_uri=dict_uri), tasks.IDS_SCHEMA).persist(
        StorageLevel.MEMORY_AND_DISK
    )
    try:
        with StageProgress(spark, "ids", say):
            c = ids.agg(
                F.count("t").alias("n"),
                F.sum(F.col("new").cast("long")).alias("new"),
                F.countDistinct("h").alias("hashes"),
            ).collect()[0]
        res.terms, res.new_terms = int(c["n"]), int(c["new"] or 0)
        # statements are joined with the term table on 64-bit term hashes; a collision
        # (two distinct terms, one hash) makes the job join on the strings instead
        by_hash = join_on_hash and int(c["hashes"]) == res.terms
        res.seconds["ids"] = time.perf_counter() - t0
        say(
            f"ids: {res.terms:,} distinct terms, {res.new_terms:,} new in the dictionary "
            f"({res.seconds['ids']:.1f}s)"
            + ("" if by_hash or not join_on_hash else "; term hash collision: joining on strings")
        )

        # 4. encode: join each position with the term table (in the JVM)
        t0 = time.perf_counter()
        key = "h" if by_hash else "t"
        table = ids.select(key, "id")
        if res.terms <= BROADCAST_TERMS:
            table = F.broadcast(table)
        gmap = spark.createDataFrame([(g, gid) for gid, g in enumerate(graph_names)], "g string, gid int")
        enc = good.join(F.broadcast(gmap), good["g"].eqNullSafe(gmap["g"]))
        for pos in "spo":
            col = pos + "h" if by_hash else pos
            enc = enc.join(table.withColumnRenamed(key, col).withColumnRenamed("id", pos + "i"), col)
        enc = enc.select(
            "gid",
            F.pmod(F.col("si"), F.lit(partitions)).cast("int").alias("part"),
            F.col("si").alias("s"),
            F.col("pi").alias("p"),
            F.col("oi").alias("o"),
        )
        # 5. write: one (graph, partition) key per task, sorted so repeats are adjacent
        n_tasks = max(1, min(len(graph_names) * partitions, 4096))
        ordered = enc.repartition(n_tasks, "gid", "part").sortWithinPartitions("gid", "part", "s", "p", "o")
        with StageProgress(spark, "encode+write", say):
            written = ordered.mapInArrow(
                partial(tasks.write_partitions, store_dir=store_dir, gdirs=gdirs), tasks.WRITTEN_SCHEMA
            ).collect()
    finally:
        ids.unpersist()
    per_graph = dict.fromkeys(range(len(graph_names)), 0)
    keys = set()
    for r in written:
        done = (r["gid"], r["part"])
        if done in keys:  # would mean a key was split over tasks: the files would be wrong
            raise RuntimeError(f"partition {done} written by two tasks")
        keys.add(done)
        per_graph[r["gid"]] += int(r["n"])
    res.triples = {_graph_iri(graph_names[gid]): n for gid, n in per_graph.items()}
    res.seconds["encode+write"] = time.perf_counter() - t0
    say(
        f"encode+write: {res.total_triples:,} distinct triples in {len(graph_names)} graph(s) x "
        f"{partitions} partitions ({res.seconds['encode+write']:.1f}s)"
    )
    return {_graph_iri(g): gdirs[gid] for gid, g in enumerate(graph_names)}


def _active_session() -> SparkSession | None:
    """The session already running in this process (e.g. a test's), if any."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None
    return SparkSession.getActiveSession()


def _graph_iri(g: str | None) -> str | None:
    """Manifest name of a graph term: an IRI without brackets (blank-node names kept as ``_:x``)."""
    if g is not None and g.startswith("<") and g.endswith(">"):
        return g[1:-1]
    return g
