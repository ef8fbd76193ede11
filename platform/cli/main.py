"""The ``linkstream`` command: the parser of every subcommand and the dispatch to their modules."""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from collections import Counter

from linkstream.cli.args import (
    DEFAULT_BASE,
    base_error,
    err,
    number_error,
    one_line_errors,
    split_binding,
    stream_bindings,
    use_parse_cache,
)
from linkstream.query.errors import QueryError


def _time_jump(text: str) -> int:
    from linkstream.rdf.eventtime import parse_time_jump

    try:
        return parse_time_jump(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_max_time_jump(p: argparse.ArgumentParser) -> None:
    """``--max-time-jump`` (``linkstream replay`` and ``linkstream run``)."""
    p.add_argument(
        "--max-time-jump",
        type=_time_jump,
        default="1d",
        metavar="DURATION",
        help="reject an element more than this ahead of its stream's current time: MS or "
        "a number with ms/s/m/h/d (default 1d; 0: no limit)",
    )


def _percentile(xs: list[float], p: float) -> float:
    if not xs:
        return 0.0
    ys = sorted(xs)
    k = min(len(ys) - 1, max(0, int(round(p / 100.0 * (len(ys) - 1)))))
    return ys[k]


def cmd_replay(args: argparse.Namespace) -> int:
    import numpy as np

    from linkstream.engine.embedded import Engine
    from linkstream.engine.replay import replay
    from linkstream.query.continuous import parse_continuous
    from linkstream.rdf.dictionary import open_dictionary
    from linkstream.rdf.static import load_graph, reusable_key

    quiet = args.quiet

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    problem = (
        number_error("--default-step", args.default_step, 1)
        or number_error("--lateness", args.lateness, 0)
        or number_error("--max-reports", args.max_reports, 0)
        or number_error("--cluster", args.cluster, 1)
        or number_error("--answer-timeout", args.answer_timeout, 0, strict=True)
        or base_error(args.base)
    )
    if problem:
        return err(problem)
    if args.zk_auth_file and not (args.cluster or args.zk):
        return err(
            "--zk-auth-file needs --cluster N or --zk HOST:PORT (an embedded replay uses no ZooKeeper)"
        )
    if getattr(args, "placement", "queries") != "queries" and not (args.cluster or args.zk):
        return err("--placement operators needs --cluster N or --zk HOST:PORT")
    if getattr(args, "parallelism", 1) != 1 and getattr(args, "placement", "queries") != "operators":
        return err("--parallelism needs --placement operators")
    if getattr(args, "parallelism", 1) < 1:
        return err("--parallelism must be at least 1")
    if args.store and (args.cluster or args.zk):
        return err("--store works for embedded replays; cluster containers load --static files")
    if args.cluster or args.zk:
        _collect_from_here()
    if args.cluster:
        from linkstream.cli.livereplay import cmd_replay_live, needs_driver

        if not needs_driver(args):
            return cmd_replay_live(args, log)
    if args.cluster or args.zk:
        from linkstream.cli.cluster import cmd_replay_cluster

        return cmd_replay_cluster(args, log)
    store = None
    try:
        if args.store:
            if args.dictionary != "memory:":
                return err("--store uses the store's own dictionary; do not also give --dictionary")
            from linkstream.store.hybrid import HybridStore

            store = HybridStore.open(args.store)  # windows keep their streams in its transient ring
            dictionary = store.dictionary
        else:
            dictionary = open_dictionary(args.dictionary)
    except (ValueError, OSError) as e:
        what = f"--store {args.store}" if args.store else f"--dictionary {args.dictionary}"
        return err(f"cannot open {what}: {e}")
    transient = store.transient if store is not None else None
    # one process: a join alone with its routed signature is planned directly (Engine docs)
    engine = Engine(
        dictionary, default_step=args.default_step, log_fn=log, transient=transient, lone_joins=True
    )
    if store is not None:
        snap = store.snapshot()
        for g in snap.graphs():
            triples = snap.triples(g)
            engine.add_static(g, triples)
            if not quiet:
                log(
                    f"static {'<' + g + '>' if g else 'default graph'}: {len(triples)} triples from store {args.store}"
                )
    loaded: dict[tuple, np.ndarray] = {}  # a file bound twice (default and named graph) is read once
    # (only such a file is read beforehand for blank node labels: reusable_key reads it whole)
    bindings = Counter(os.path.realpath(split_binding(a, args.base)[1]) for a in args.static)
    rejected = [0]  # lines rejected so far (a file with one is read again: its log repeats)

    def log_line(msg: str) -> None:
        rejected[0] += 1
        log(msg)

    for k, arg in enumerate(args.static):
        iri, path = split_binding(arg, args.base)
        if not os.path.exists(path):
            return err(f"static graph file {path!r} does not exist")
        t0 = time.perf_counter()
        key = reusable_key(path) if bindings[os.path.realpath(path)] > 1 else None
        reused = loaded.get(key) if key is not None else None
        if reused is not None:
            triples = reused
        else:
            n_rejected = rejected[0]
            try:
                triples = load_graph(path, dictionary, bnode_prefix=f"s{k}_", log=log_line)
            except (ValueError, OSError) as e:
                return err(f"static graph file {path}: {' '.join(str(e).split())}")
            if key is not None and rejected[0] == n_rejected:
                loaded[key] = triples
        engine.add_static(iri, triples)
        if not quiet:
            log(
                f"static {'<' + iri + '>' if iri else 'default graph'}: {len(triples)} triples from {path} "
                f"({time.perf_counter() - t0:.2f}s)"
            )
    streams = stream_bindings(args.stream, args.base)
    if isinstance(streams, str):
        return err(streams)
    engine.declare_streams({i for i, _ in streams})
    use_parse_cache()
    queries = []
    for path in args.query:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            return err(f"cannot read query {path}: {e}")
        stem = os.path.splitext(os.path.basename(path))[0]
        try:
            cq = parse_continuous(text, default_name=stem, base=args.base, source=path)
            rq = engine.register(cq)
        except QueryError as e:
            msg = str(e)
            if not msg.startswith(path):
                msg = f"{path}: {msg}"
            return err(msg)
        queries.append(rq)
        if args.explain:
            log(f"---- {rq.name} ({cq.dialect}, {cq.mode})\n{rq.explain()}")
    if args.stats and args.stats != "-" and (os.path.isdir(args.stats) or not _writable(args.stats)):
        return err(f"cannot write --stats {args.stats}: not a writable file")
    try:
        out = open(args.out, "w", encoding="utf-8") if args.out != "-" else sys.stdout
    except OSError as e:
        return err(f"cannot write --out {args.out}: {e.strerror or e}")
    _collect_from_here()
    try:
        res = replay(
            engine,
            queries,
            streams,
            out,
            lateness_ms=args.lateness,
            max_reports=args.max_reports,
            log=log,
            max_time_jump_ms=args.max_time_jump,
        )
    finally:
        if out is not sys.stdout:
            out.close()
    for iri, st in res.streams.items():
        if not quiet:
            log(
                f"stream <{iri}>: {st.elements} elements, {st.triples} triples, {st.rejected} rejected lines, "
                f"{st.late} late elements, {st.rejected_elements} elements rejected for their time"
            )
    paths = dict(streams)
    for iri, st in res.streams.items():
        if not st.elements:
            log(
                f"warning: stream file {paths.get(iri, iri)}: no element accepted "
                f"({st.rejected} rejected lines, {st.late} late, {st.rejected_elements} rejected for their time)"
            )
    if res.rejected:
        log(f"rejected lines in stream files: {res.rejected}")
    if res.rejected_elements:
        log(
            f"elements rejected for their time (outside 0 <= t < 2^53 ms, or more than "
            f"--max-time-jump ahead): {res.rejected_elements}"
        )
    late = sum(st.late for st in res.streams.values())
    if late:
        log(f"late elements dropped: {late}")
    if args.stats or not quiet:
        rate = res.triples / res.seconds if res.seconds > 0 else 0.0
        report = []
        for q in queries:
            qs = q.stats
            report.append(
                {
                    "query": q.name,
                    "reports": qs.reports,
                    "rows": qs.rows,
                    "eval_seconds": round(qs.eval_seconds, 4),
                    "latency_ms_p50": round(_percentile(qs.latencies, 50) * 1e3, 4),
                    "latency_ms_p95": round(_percentile(qs.latencies, 95) * 1e3, 4),
                    "latency_ms_p99": round(_percentile(qs.latencies, 99) * 1e3, 4),
                }
            )
        if not quiet or args.stats:
            for r in report:
                log(
                    f"{r['query']:<24} reports={r['reports']:<6} rows={r['rows']:<8} "
                    f"p50={r['latency_ms_p50']:.3f}ms p99={r['latency_ms_p99']:.3f}ms"
                )
            log(
                f"replayed {res.triples} triples in {res.elements} elements in {res.seconds:.2f}s "
                f"({rate:,.0f} triples/s), {res.rows} result rows"
            )
        if args.stats and args.stats != "-":
            with open(args.stats, "w", encoding="utf-8") as f:
                json.dump(
                    {
                        "triples": res.triples,
                        "seconds": res.seconds,
                        "triples_per_s": rate,
                        "queries": report,
                    },
                    f,
                    indent=1,
                )
    if store is not None:
        store.close()
    else:
        dictionary.close()
    return 0


def _collect_from_here() -> None:
    """Turn garbage collection back on (:func:`main` turns it off for a replay's start-up).

    Start-up (numpy, rdflib's SPARQL grammar, the query plans, static graphs and their
    dictionary) makes a few hundred thousand objects that live as long as the process; a
    collection during it scans all of them and finds next to nothing (one full collection
    cost 40-50 ms of a 10-element replay's 0.3 s of CPU). :func:`linkstream.engine.replay.replay`
    then freezes them out of the collections of the evaluation.
    """
    gc.enable()


def _writable(path: str) -> bool:
    """Whether ``path`` can be created or overwritten (its folder exists and is writable)."""
    if os.path.exists(path):
        return os.access(path, os.W_OK)
    folder = os.path.dirname(os.path.abspath(path))
    return os.path.isdir(folder) and os.access(folder, os.W_OK)


def cmd_demo(args: argparse.Namespace) -> int:
    from linkstream.cli.demo import run_demo

    return run_demo(args)


#: Which subcommands each group of :func:`build_parser` adds: ``linkstream sparql`` builds
#: (and imports) only the ``sparql`` group, not the flags of thirteen other commands
#: (about 40 ms of a one-shot query's start-up).
_GROUPS: dict[str, tuple[str, ...]] = {
    "replay": ("replay",),
    "cluster": ("container", "coordinator", "status", "containers", "autoscaler"),
    "store-node": ("store-node",),
    "demo": ("demo",),
    "service": ("run", "restore", "queries"),
    "sparql": ("sparql", "store"),
    "load": ("load",),
}


def _command_of(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names (its first word; the top-level parser has no other
    argument than ``-h``), or None when it names none we know."""
    first = argv[0] if argv else None
    known = {name for names in _GROUPS.values() for name in names}
    return first if first in known else None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The ``linkstream`` argument parser; with ``only``, just that subcommand's group
    (the top-level ``--help`` and unknown commands need the whole one)."""
    ap = argparse.ArgumentParser(
        prog="linkstream", description="LinkStream: continuous queries over RDF streams."
    )
    sub = ap.add_subparsers(dest="command", metavar="COMMAND")

    def want(group: str) -> bool:
        return only is None or only in _GROUPS[group]

    if want("replay"):
        _add_replay(sub)
    if want("cluster"):
        _add_cluster_commands(sub)
    if want("store-node"):
        from linkstream.cli.storenode import add_parser as add_store_node_parser

        add_store_node_parser(sub, add_security_options)
    if want("demo"):
        dp = sub.add_parser(
            "demo", help="replay the bundled CityBench slice and print results and throughput"
        )
        dp.add_argument(
            "--data", default=None, help="folder with the demo data (default: examples/citybench)"
        )
        dp.add_argument("--rows", type=int, default=3, help="result rows to print per query (default 3)")
        dp.add_argument(
            "--cluster",
            type=int,
            default=None,
            metavar="N",
            help="run it through the HTTP API of a local cluster (ZooKeeper, 2 coordinators, N containers)",
        )
        dp.set_defaults(func=cmd_demo)
    if want("service"):
        from linkstream.cli.service import add_parsers  # run, restore, queries add|ls|rm

        add_parsers(sub)
    if want("sparql"):
        from linkstream.cli.sparql import add_parsers as add_store_parsers  # sparql, store verify

        add_store_parsers(sub)
    if want("load"):
        from linkstream.cli.load import add_parsers as add_bulk_parsers  # load

        add_bulk_parsers(sub)
    return ap


def _add_replay(sub: argparse._SubParsersAction) -> None:
    rp = sub.add_parser(
        "replay",
        help="replay timestamped N-Quads streams through continuous queries",
        description="Replay stream files (docs/semantics.md §2) through C-SPARQL / CQELS-QL / RSP-QL "
        "queries and write JSON Lines results (§6).",
    )
    rp.add_argument("--query", action="append", required=True, metavar="Q.rq", help="query file (repeatable)")
    rp.add_argument(
        "--stream", action="append", default=[], metavar="IRI=PATH", help="stream file (repeatable)"
    )
    rp.add_argument(
        "--static",
        action="append",
        default=[],
        metavar="[IRI=]PATH",
        help="static graph: IRI=PATH binds a named graph, PATH adds to the default graph",
    )
    rp.add_argument(
        "--store",
        default=None,
        metavar="DIR",
        help="store directory (linkstream load --store): each of its graphs is a static graph "
        "(N-Quads graph names become named graphs) and its dictionary is used",
    )
    rp.add_argument(
        "--default-step",
        type=int,
        default=1000,
        metavar="MS",
        help="report step for windows without STEP/SLIDE, [TRIPLES n] and [NOW] (default 1000)",
    )
    rp.add_argument("--lateness", type=int, default=0, metavar="MS", help="allowed lateness (default 0)")
    add_max_time_jump(rp)
    rp.add_argument("--base", default=DEFAULT_BASE, help="base IRI for relative IRIs (default %(default)s)")
    rp.add_argument("--out", required=True, help="output JSON Lines file ('-' for stdout)")
    rp.add_argument(
        "--stats",
        nargs="?",
        const="-",
        default=None,
        metavar="FILE",
        help="print per-query statistics (and write them as JSON to FILE)",
    )
    rp.add_argument(
        "--dictionary",
        default="memory:",
        metavar="URI",
        help="term dictionary: memory: (default), lmdb:PATH, hbase://HOST:PORT/TABLE",
    )
    rp.add_argument(
        "--max-reports",
        type=int,
        default=None,
        metavar="N",
        help="evaluate only the first N report times of each query (testing aid)",
    )
    rp.add_argument("--explain", action="store_true", help="print each query's operator plan")
    rp.add_argument("--quiet", action="store_true", help="no progress output")
    where = rp.add_mutually_exclusive_group()
    where.add_argument(
        "--cluster",
        type=int,
        default=None,
        metavar="N",
        help="run on a throw-away local cluster of N containers as a client of its HTTP API "
        "(queries registered, files pushed, results read back; with --lateness, --placement "
        "operators, --route broadcast or --no-affinity the replay drives the containers itself)",
    )
    where.add_argument("--zk", default=None, metavar="HOST:PORT", help="run on the cluster of this ZooKeeper")
    rp.add_argument(
        "--placement",
        choices=("queries", "operators"),
        default="queries",
        help="cluster mode: place whole queries (default) or also their shared join/scan "
        "operators as tasks of their own, exchanging deltas over ZeroMQ",
    )
    rp.add_argument(
        "--parallelism",
        type=int,
        default=1,
        metavar="K",
        help="operator placement: run every shared join whose inputs bind a common variable "
        "as K instances, each joining one hash partition of it (default 1: unpartitioned)",
    )
    rp.add_argument(
        "--route",
        choices=("streams", "broadcast"),
        default="streams",
        help="cluster mode: send each stream element only to the containers whose queries "
        "read its stream (default) or to every container",
    )
    rp.add_argument(
        "--no-affinity",
        action="store_true",
        help="cluster mode: do not tell the scheduler which streams each query reads "
        "(placement by load and colocation only; default: prefer containers already "
        "receiving a query's streams)",
    )
    rp.add_argument(
        "--answer-timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="cluster mode: seconds to wait for a container's report before it is recomputed on "
        "another live container (or, if none can, counted lost: exit status 3) (default 60)",
    )
    add_security_options(rp)
    rp.set_defaults(func=cmd_replay)


def _delegate(name: str):
    def run(args: argparse.Namespace) -> int:
        from linkstream.cli import cluster as commands

        return getattr(commands, name)(args)

    return run


def add_security_options(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--zk-auth-file`` and ``--insecure`` (every command that talks to a cluster)."""
    p.add_argument(
        "--zk-auth-file",
        default=None,
        metavar="FILE",
        help="the cluster's ZooKeeper credential: one line user:password, mode 0600 "
        "(default: $LINKSTREAM_CLUSTER_ZK_AUTH or $LINKSTREAM_CLUSTER_ZK_AUTH_FILE); "
        "every process of a cluster uses the same one",
    )
    p.add_argument(
        "--zk-tls-ca",
        metavar="PEM",
        default=None,
        help="encrypt ZooKeeper connections with TLS, verifying the server against this CA "
        "(default: $LINKSTREAM_CLUSTER_ZK_TLS_CA; a local cluster passes its own)",
    )
    p.add_argument(
        "--insecure",
        action="store_true",
        help="no ZooKeeper authentication, open ACLs, plaintext ZeroMQ (local experiments only)",
    )


def _zk_options(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument(
        "--zk", required=required, metavar="HOST:PORT[/CHROOT]", help="ZooKeeper connection string"
    )
    add_security_options(p)
    p.add_argument(
        "--root", default="/linkstream", help="cluster root inside the chroot (default %(default)s)"
    )
    p.add_argument(
        "--session-timeout", type=float, default=10.0, metavar="S", help="ZooKeeper session timeout"
    )
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    p.add_argument(
        "--metrics-port", type=int, default=None, metavar="PORT", help="serve /metrics here (0: a free port)"
    )


def _add_cluster_commands(sub: argparse._SubParsersAction) -> None:
    from linkstream.config import LOCAL_CLUSTER_DIR as DEFAULT_DIR

    cp = sub.add_parser(
        "container", help="run an operator container", description="Serve as an operator container."
    )
    _zk_options(cp)
    cp.add_argument("--id", default=None, help="container id (default: numbered by ZooKeeper)")
    cp.add_argument("--capacity", type=int, default=16, help="query slots (default 16)")
    cp.add_argument(
        "--bind", default="tcp://127.0.0.1:*", help="data-plane endpoint to bind (default %(default)s)"
    )
    cp.add_argument(
        "--remote-store",
        action="store_true",
        help="read static graphs from the store nodes advertised in ZooKeeper (linkstream store-node) "
        "instead of loading the run's static files; the store's dictionary is shared, not copied",
    )
    cp.add_argument(
        "--cache-mb",
        type=float,
        default=64.0,
        help="bound of --remote-store's cache of static data in MiB: index blocks, 1/8 for lookup results "
        "(default 64)",
    )
    cp.set_defaults(func=_delegate("cmd_container"))

    op = sub.add_parser(
        "coordinator",
        help="run a coordinator (leader or standby): an alias of `run --zk` serving the API on a free port",
    )
    _zk_options(op)
    op.add_argument("--id", default=None, help="identifier in the leader election (default host-pid)")
    op.add_argument(
        "--tick-interval", type=float, default=1.0, metavar="S", help="scheduler tick (default 1 s)"
    )
    op.add_argument("--tolerance", type=float, default=0.25, help="rebalance tolerance (default 0.25)")
    op.add_argument("--max-moves", type=int, default=4, help="tasks moved per rebalance round (default 4)")
    op.add_argument(
        "--no-affinity",
        action="store_true",
        help="place tasks by load and colocation only, ignoring the streams they read",
    )
    op.set_defaults(func=_delegate("cmd_coordinator"))

    sp = sub.add_parser("status", help="print containers, tasks, queries and coordinators")
    sp.add_argument(
        "--zk", default=None, metavar="HOST:PORT[/CHROOT]", help="ZooKeeper (default: the local cluster)"
    )
    sp.add_argument("--dir", default=str(DEFAULT_DIR), help="local cluster directory (default %(default)s)")
    sp.add_argument(
        "--root", default="/linkstream", help="cluster root inside the chroot (default %(default)s)"
    )
    sp.add_argument("--json", action="store_true", help="print JSON")
    add_security_options(sp)
    sp.set_defaults(func=_delegate("cmd_status"))

    kp = sub.add_parser("containers", help="add or gracefully remove containers of a local cluster")
    kp.add_argument("action", choices=["add", "remove"])
    kp.add_argument("target", metavar="N|ID", help="how many containers to add, or the id to remove")
    kp.add_argument("--dir", default=str(DEFAULT_DIR), help="local cluster directory (default %(default)s)")
    kp.add_argument("--capacity", type=int, default=None, help="query slots of added containers")
    kp.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for a drain (default 120)")
    kp.set_defaults(func=_delegate("cmd_containers"))

    from linkstream.cli.autoscaler import add_autoscaler_parser

    add_autoscaler_parser(sub, _zk_options, str(DEFAULT_DIR))


def _describe(e: BaseException, args: argparse.Namespace) -> str:
    """One line saying what failed (no traceback): the last resort of :func:`main`."""
    if type(e).__name__ == "KazooTimeoutError":  # kazoo is only imported by cluster commands
        hint = "" if getattr(args, "zk_tls_ca", None) else " (a server that takes TLS only needs --zk-tls-ca)"
        return f"cannot reach ZooKeeper at {getattr(args, 'zk', None) or 'the local cluster'}: connection time-out{hint}"
    if isinstance(e, OSError) and e.filename:
        return f"{e.filename}: {e.strerror or e}"
    return " ".join(f"{type(e).__name__}: {e}".split())


def main(argv: list[str] | None = None) -> int:
    command = _command_of(sys.argv[1:] if argv is None else argv)
    if command is not None:
        # numpy's OpenBLAS starts a thread per core when numpy is imported, and they spin for
        # a while: ~0.1 s of CPU per process on two cores. LinkStream calls no BLAS routine
        # (no matrix product, no linalg), so one thread; the processes a command starts
        # (a cluster's nodes) inherit it. A value the user set stays.
        from linkstream.config import set_default_environment

        set_default_environment(OPENBLAS_NUM_THREADS="1")
    if command == "replay":
        gc.disable()  # until the replay's start-up is done: see _collect_from_here
    try:
        return _main(command, argv)
    finally:
        gc.enable()


def _main(command: str | None, argv: list[str] | None) -> int:
    ap = build_parser(command)
    one_line_errors(ap)
    args = ap.parse_args(argv)
    if not getattr(args, "func", None):
        ap.print_help()
        return 1
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # no traceback reaches a user unless --log-level debug
        if str(getattr(args, "log_level", "")).lower() == "debug":
            raise
        hint = " (--log-level debug shows the traceback)" if hasattr(args, "log_level") else ""
        print(f"error: {_describe(e, args)}{hint}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
