"""The ``linkstream load`` command: build a store directory from RDF files (pure Python or Spark)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from linkstream.bulk.session import DEFAULT_MASTER


def add_parsers(sub: Any) -> None:
    """Add the ``load`` subcommand to the ``linkstream`` argument parser."""
    lp = sub.add_parser(
        "load",
        help="load RDF files into a store directory (pure Python, or a Spark job with --spark)",
        description="Build a LinkStream store directory (dictionary + subject-partitioned graphs) from "
        "N-Triples / N-Quads files or folders of them. Without --spark the files are loaded by this "
        "process (other RDF formats too); with --spark a Spark job parses, encodes and writes them in "
        "parallel, for inputs larger than memory. Quads go to their named graph unless --default-graph.",
    )
    lp.add_argument("inputs", nargs="+", metavar="FILE.nt|.nq|DIR", help="RDF files or folders")
    lp.add_argument("--store", required=True, metavar="DIR", help="store directory to create")
    lp.add_argument(
        "--spark",
        default=None,
        metavar="MASTER",
        help=f"load with a Spark job on MASTER, e.g. {DEFAULT_MASTER} (a cluster URL such as "
        "spark://HOST:7077 needs the files, the store and an lmdb: dictionary on a shared filesystem)",
    )
    lp.add_argument("--master", default=None, metavar="MASTER", help="same as --spark MASTER")
    lp.add_argument(
        "--partitions", type=int, default=8, metavar="P", help="subject-hash partitions per graph (default 8)"
    )
    lp.add_argument(
        "--dictionary",
        default=None,
        metavar="URI",
        help="term dictionary: lmdb:PATH (default lmdb:dict inside the store), hbase://HOST:PORT/TABLE; "
        "terms it already holds keep their ids",
    )
    lp.add_argument(
        "--default-graph", action="store_true", help="put N-Quads statements in the default graph"
    )
    lp.add_argument("--quiet", action="store_true", help="no progress output")
    lp.set_defaults(func=cmd_load)


def cmd_load(args: argparse.Namespace) -> int:
    """Run ``linkstream load``."""

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    def err(msg: str) -> int:
        print("error: " + msg, file=sys.stderr)
        return 2

    if args.partitions < 1:
        return err(f"--partitions must be >= 1, got {args.partitions}")
    master = args.master or args.spark
    t0 = time.perf_counter()
    try:
        if master:
            from linkstream.bulk.session import SparkUnavailable

            try:
                from linkstream.bulk.spark_load import spark_load
            except ImportError as e:
                return err(
                    f"the Spark loader needs pyspark and pyarrow: pip install 'linkstream[spark]' ({e})"
                )

            try:
                res = spark_load(
                    args.store,
                    args.inputs,
                    master=master,
                    partitions=args.partitions,
                    dictionary=args.dictionary,
                    default_graph=args.default_graph,
                    log=say,
                )
            except SparkUnavailable as e:
                return err(str(e))
            triples, graphs, rejected = res.total_triples, len(res.triples), res.rejected
        else:
            from linkstream.store.loader import load_store

            rejected = 0

            def reject(msg: str) -> None:
                nonlocal rejected
                rejected += 1
                if rejected <= 20:
                    say(msg)

            entries = load_store(
                args.store,
                args.inputs,
                dictionary_uri=args.dictionary,
                partitions=args.partitions,
                default_graph=args.default_graph,
                progress=say,
                log=reject,
            )
            triples, graphs = sum(e.triples for e in entries), len(entries)
    except (FileExistsError, FileNotFoundError, ValueError, OSError) as e:
        return err(str(e))
    say(
        f"loaded {triples:,} triples in {graphs} graph(s) into {args.store} "
        f"({rejected:,} rejected lines, {time.perf_counter() - t0:.1f}s)"
    )
    return 0
