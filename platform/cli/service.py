"""The ``linkstream run`` and ``linkstream queries add|ls|rm`` subcommands.

``run`` serves the HTTP API with uvicorn (``run --zk``: as a coordinator of a cluster); ``queries`` talks to a running server through
:class:`linkstream.api.client.Client`.  The bearer token defaults to the environment
variable ``LINKSTREAM_API_TOKEN`` (read by :mod:`linkstream.config`, the only reader of the
environment).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from typing import Any

from linkstream.cli.args import DEFAULT_BASE, err, split_binding
from linkstream.config import load as load_config

TOKEN_ENV = "LINKSTREAM_API_TOKEN"


def add_parsers(sub: Any) -> None:
    """Adds ``run`` and ``queries`` to the ``linkstream`` subcommand parsers."""
    rp = sub.add_parser(
        "run",
        help="serve the HTTP API (register queries, push streams, subscribe to results)",
        description="Serve the LinkStream HTTP API with uvicorn (OpenAPI schema at /openapi.json).",
    )
    rp.add_argument("--host", default="127.0.0.1", help="interface to bind (default %(default)s)")
    rp.add_argument("--port", type=int, default=8080, help="port (default %(default)s)")
    rp.add_argument(
        "--static",
        action="append",
        default=[],
        metavar="[IRI=]PATH",
        help="static graph: IRI=PATH binds a named graph, PATH adds to the default graph (repeatable)",
    )
    rp.add_argument(
        "--dictionary",
        default="memory:",
        metavar="URI",
        help="term dictionary: memory: (default), lmdb:PATH, hbase://HOST:PORT/TABLE",
    )
    rp.add_argument(
        "--store",
        default=None,
        metavar="DIR",
        help="store directory (linkstream load --store): static graphs + dictionary; /sparql runs on its snapshots",
    )
    rp.add_argument(
        "--absorb",
        action="append",
        default=[],
        metavar="STREAM",
        help="also absorb this stream's elements into the store, visible to /sparql (repeatable; needs --store)",
    )
    rp.add_argument(
        "--token",
        default=None,
        help=f"require 'Authorization: Bearer TOKEN' on every endpoint but /healthz (default: ${TOKEN_ENV})",
    )
    rp.add_argument(
        "--default-step",
        type=int,
        default=1000,
        metavar="MS",
        help="report step for windows without STEP/SLIDE, [TRIPLES n] and [NOW] (default 1000)",
    )
    rp.add_argument(
        "--idle-ms",
        type=int,
        default=5000,
        metavar="MS",
        help="a stream silent for MS of wall-clock time stops holding back reports; 0: never (default 5000)",
    )
    rp.add_argument(
        "--retention-ms",
        type=int,
        default=60_000,
        metavar="MS",
        help="event time of stream history kept for queries registered later (default 60000)",
    )
    from linkstream.cli.main import add_max_time_jump

    add_max_time_jump(rp)  # also refuses a POST /watermark that far ahead
    rp.add_argument("--base", default=DEFAULT_BASE, help="base IRI for relative IRIs (default %(default)s)")
    rp.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="(default info)"
    )
    cl = rp.add_argument_group(
        "cluster",
        "with --zk this process is a coordinator of a cluster (leader election, scheduling) that "
        "serves the same API; standbys forward requests to the leader, which feeds the operator "
        "containers (`linkstream container`); queries live in ZooKeeper",
    )
    cl.add_argument(
        "--zk", default=None, metavar="HOST:PORT[/CHROOT]", help="serve the cluster of this ZooKeeper"
    )
    cl.add_argument("--id", default=None, help="identifier in the leader election (default host-pid)")
    cl.add_argument(
        "--root", default="/linkstream", help="cluster root inside the chroot (default %(default)s)"
    )
    cl.add_argument(
        "--session-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="ZooKeeper session timeout (default 10)",
    )
    cl.add_argument(
        "--tick-interval", type=float, default=1.0, metavar="S", help="scheduler tick (default 1 s)"
    )
    cl.add_argument(
        "--metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="scheduler /metrics here (0: a free port)",
    )
    rp.set_defaults(func=cmd_run)

    qp = sub.add_parser(
        "queries",
        help="add, list or remove continuous queries of a running server",
        description="Manage the continuous queries of a running `linkstream run` server.",
    )
    qsub = qp.add_subparsers(dest="queries_command", metavar="ACTION")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--url", default="http://127.0.0.1:8080", help="server URL (default %(default)s)")
    common.add_argument("--token", default=None, help=f"bearer token (default: ${TOKEN_ENV})")
    add = qsub.add_parser(
        "add", parents=[common], help="register a query file", description="Register a query."
    )
    add.add_argument("file", metavar="FILE", help="query file ('-' for stdin)")
    add.add_argument("--name", default=None, help="query name (default: REGISTER name, else the file stem)")
    add.set_defaults(func=cmd_queries_add)
    ls = qsub.add_parser("ls", parents=[common], help="list queries", description="List registered queries.")
    ls.add_argument("--json", action="store_true", help="print the JSON answer")
    ls.set_defaults(func=cmd_queries_ls)
    rm = qsub.add_parser("rm", parents=[common], help="unregister a query", description="Unregister a query.")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(func=cmd_queries_rm)
    qp.set_defaults(func=lambda args: _usage(qp))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 1


def cmd_run(args: argparse.Namespace) -> int:
    """``linkstream run``: load the static graphs and serve until interrupted (``--zk``: as a
    coordinator of a cluster, :func:`linkstream.cli.cluster.cmd_run_cluster`)."""
    if args.zk:
        if args.store or args.absorb or args.dictionary != "memory:":
            return err("--store, --absorb and --dictionary are not supported with --zk yet")
        from linkstream.cli.cluster import cmd_run_cluster

        return cmd_run_cluster(args)
    from linkstream.api.app import create_app
    from linkstream.api.server import build_live, serve

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    statics = []
    for arg in args.static:
        iri, path = split_binding(arg, args.base)
        if not os.path.exists(path):
            return err(f"static graph file {path!r} does not exist")
        statics.append((iri, path))
    try:
        live = build_live(
            statics,
            dictionary=args.dictionary,
            default_step=args.default_step,
            idle_ms=args.idle_ms or None,
            retention_ms=args.retention_ms,
            base=args.base,
            process_metrics=True,
            store=args.store,
            absorb=[a.strip().strip("<>") for a in args.absorb],
        )
    except (ValueError, OSError) as e:
        return err(str(e))
    live.max_time_jump_ms = args.max_time_jump  # event-time rules: pushes and POST /watermark
    if args.store:  # the store's stable timestamp, snapshot age and delta at /metrics
        from linkstream.metrics import StoreCollector

        live.metrics.registry.register(StoreCollector(live.engine.store))  # type: ignore[attr-defined]
    token = args.token or load_config().api.token or None
    app = create_app(live, token=token, base=args.base)
    serve(app, args.host, args.port, args.log_level, on_shutdown=live.close)
    return 0


def _client(args: argparse.Namespace) -> Any:
    from linkstream.api.client import Client

    return Client(args.url, token=args.token or load_config().api.token or None)


def _call(args: argparse.Namespace, fn: Any) -> int:
    import httpx

    from linkstream.api.client import ApiError

    try:
        with _client(args) as c:
            return int(fn(c) or 0)
    except ApiError as e:
        where = ":%s:%s" % (e.line, e.column) if e.line is not None else ""
        return err(f"{e.status}{where}: {e.message}")
    except httpx.HTTPError as e:
        return err(f"cannot reach {args.url}: {e}")


def cmd_queries_add(args: argparse.Namespace) -> int:
    """``linkstream queries add FILE``."""
    try:
        if args.file == "-":
            text = sys.stdin.read()
            stem = None
        else:
            with open(args.file, encoding="utf-8") as f:
                text = f.read()
            stem = os.path.splitext(os.path.basename(args.file))[0]
    except (OSError, UnicodeDecodeError) as e:
        return err(f"cannot read {args.file}: {e}")

    def run(c: Any) -> int:
        q = c.register(text, args.name, default_name=stem)
        windows = ", ".join("<%s> %s" % (w["stream"], w["window"]) for w in q["windows"])
        print(f"{q['name']}\t{q['dialect']}\t{q['form']}\t{windows}")
        return 0

    return _call(args, run)


def cmd_queries_ls(args: argparse.Namespace) -> int:
    """``linkstream queries ls``."""

    def run(c: Any) -> int:
        qs = c.queries()
        if args.json:
            print(json.dumps(qs, indent=1))
            return 0
        for q in qs:
            print(f"{q['name']}\t{q['dialect']}\t{q['form']}\t{q['mode']}\tnext={q.get('next_report')}")
        return 0

    return _call(args, run)


def cmd_queries_rm(args: argparse.Namespace) -> int:
    """``linkstream queries rm NAME``."""

    def run(c: Any) -> int:
        c.unregister(args.name)
        print(f"removed {args.name}")
        return 0

    return _call(args, run)
