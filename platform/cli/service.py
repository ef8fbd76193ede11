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
import socket
import sys
from typing import Any

from linkstream.cli.args import DEFAULT_BASE, base_error, err, run_number_error, split_binding
from linkstream.config import load as load_config

TOKEN_ENV = "LINKSTREAM_API_TOKEN"


def add_parsers(sub: Any) -> None:
    """Adds ``run``, ``restore`` and ``queries`` to the ``linkstream`` subcommand parsers."""
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
        "--state-dir",
        default=None,
        metavar="DIR",
        help="durable ingest log and query catalog: a push is acknowledged once fsynced there; a "
        "restart with the same DIR replays it (queries, elements, watermarks) before serving; with "
        "--zk every coordinator names the same DIR (a shared filesystem) and a new leader replays "
        "it, so the death of the leader loses no acknowledged push and no report",
    )
    rp.add_argument(
        "--checkpoint-interval",
        type=float,
        default=10.0,
        metavar="S",
        help="with --state-dir: checkpoint the engine state every S seconds and truncate the log "
        "segments it covers; a restart restores the latest complete checkpoint and replays only "
        "the log after it; with --zk the leader checkpoints the cluster's state and a new leader "
        "restores it and replays only the log after it (0: no new checkpoints; default %(default)s)",
    )
    rp.add_argument(
        "--checkpoints",
        default=None,
        metavar="URI",
        help="with --state-dir: where checkpoints go, file:///path or s3://bucket/prefix (S3 endpoint, "
        "region and credentials from the standard AWS configuration; default $LINKSTREAM_CHECKPOINTS, "
        "else DIR/checkpoints)",
    )
    rp.add_argument(
        "--log-ship-interval",
        type=float,
        default=1.0,
        metavar="S",
        help="with --state-dir and checkpoints outside DIR (--checkpoints): upload the durable ingest "
        "log to the checkpoint store every S seconds and at each checkpoint, so that a restart whose "
        "DIR is lost (or a new --zk leader without a shared DIR) restores the latest checkpoint and "
        "replays the shipped log after it; an acknowledged push is in the store at most S seconds "
        "plus two uploads after it is acknowledged (0: no shipping; default %(default)s)",
    )
    rp.add_argument(
        "--token",
        action=_TokenAction,
        default=None,
        metavar="[NAME:SCOPE:]SECRET",
        help="require 'Authorization: Bearer SECRET' on every endpoint but /healthz; SCOPE is read, "
        "write or admin (a bare SECRET: one admin token); repeatable (default: $%s, one admin token)"
        % TOKEN_ENV,
    )
    rp.add_argument(
        "--tokens-file",
        default=None,
        metavar="PATH",
        help='JSON list of tokens [{"name", "scope", "secret"}] (with or instead of --token)',
    )
    rp.add_argument("--tls-cert", default=None, metavar="PEM", help="serve HTTPS with this certificate chain")
    rp.add_argument("--tls-key", default=None, metavar="PEM", help="private key of --tls-cert")
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
    rp.add_argument(
        "--results-retention",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds of each query's results kept for subscribers that resume with Last-Event-ID or "
        "?after= (with --zk: on every coordinator; default 300)",
    )
    from linkstream.cli.main import add_max_time_jump

    add_max_time_jump(rp)  # also refuses a POST /watermark that far ahead
    rp.add_argument("--base", default=DEFAULT_BASE, help="base IRI for relative IRIs (default %(default)s)")
    rp.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="(default info)"
    )
    from linkstream.cli.clusteropts import add_cluster_options

    add_cluster_options(rp)
    from linkstream.api.limits import ApiLimits

    ApiLimits.add_arguments(
        rp.add_argument_group(
            "limits",
            "resource limits of the HTTP API; a request over one is answered "
            "with the status given and an error naming the limit",
        )
    )
    rp.error = _one_line_error(rp)
    rp.set_defaults(func=cmd_run)

    sp = sub.add_parser(
        "restore",
        help="rebuild the state of a stopped run --state-dir from its last checkpoint + log, or a store "
        "directory from its log (PySpark)",
        description="Rebuild the engine state of a stopped `linkstream run --state-dir DIR`: restore the "
        "latest complete checkpoint, replay the ingest log records after it (read and checked by a Spark "
        "job) and write the result as a new checkpoint, which the next `run` loads (replaying nothing "
        "before it). Give the same --static, --default-step and --base as `run`. With --store DIR instead, a "
        "Spark job writes the batches a store directory absorbed (its log) into its partitions.",
    )
    what = sp.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--log",
        metavar="DIR",
        help="the state directory of run --state-dir (or its log/); "
        "the log shipped to the --checkpoint store is read too (a lost DIR: name a new one)",
    )
    what.add_argument(
        "--store",
        metavar="DIR",
        help="instead: rebuild the store directory DIR (linkstream load, run --store DIR --absorb) from its "
        "log: a Spark job writes the absorbed batches of DIR/delta/log.bin into its partitions, then the "
        "log is emptied (as a checkpoint of the store would)",
    )
    sp.add_argument(
        "--checkpoint",
        default=None,
        metavar="URI",
        help="checkpoint location, file:///path or s3://bucket/prefix (default $LINKSTREAM_CHECKPOINTS, "
        "else DIR/checkpoints)",
    )
    sp.add_argument(
        "--spark", default="local[2]", metavar="MASTER", help="Spark master (default %(default)s)"
    )
    sp.add_argument(
        "--static", action="append", default=[], metavar="[IRI=]PATH", help="static graph, as for run"
    )
    sp.add_argument("--default-step", type=int, default=1000, metavar="MS", help="as for run (default 1000)")
    sp.add_argument(
        "--retention-ms", type=int, default=60_000, metavar="MS", help="as for run (default 60000)"
    )
    sp.add_argument(
        "--results-retention", type=float, default=300.0, metavar="S", help="as for run (default 300)"
    )
    sp.add_argument("--base", default=DEFAULT_BASE, help="base IRI (default %(default)s)")
    sp.add_argument(
        "--log-level",
        default="warning",
        choices=["debug", "info", "warning", "error"],
        help="(default warning)",
    )
    sp.error = _one_line_error(sp)
    sp.set_defaults(func=cmd_restore)

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


def _one_line_error(parser: argparse.ArgumentParser) -> Any:
    """A parser's ``error``: one line and exit status 2, without the long usage text."""

    def error(message: str) -> Any:
        print(f"error: {message} (see {parser.prog} --help)", file=sys.stderr)
        sys.exit(2)

    return error


class _TokenAction(argparse.Action):
    """``--token``: collects every value in ``token_specs``; ``token`` keeps the last one."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: Any = None) -> None:
        specs = [*(getattr(namespace, "token_specs", None) or []), values]
        namespace.token_specs = specs
        namespace.token = values


def static_bindings(args: argparse.Namespace) -> list[tuple[str | None, str]] | str:
    """``(graph IRI or None, path)`` of every ``--static``, or the one-line error."""
    statics = []
    for arg in args.static:
        iri, path = split_binding(arg, args.base)
        if not os.path.exists(path):
            return f"static graph file {path!r} does not exist"
        statics.append((iri, path))
    return statics


def api_settings(args: argparse.Namespace) -> tuple[list[Any], Any] | str:
    """The tokens and limits ``run`` flags give, or a one-line error.

    Tokens come from ``--token`` (repeatable) and ``--tokens-file``, else from
    ``LINKSTREAM_API_TOKEN`` (one admin token).  An empty token is an error: it would
    silently turn authentication off.
    """
    from linkstream.api.auth import check_tokens, load_tokens_file, parse_token
    from linkstream.api.limits import ApiLimits

    try:
        tokens = [parse_token(spec) for spec in getattr(args, "token_specs", None) or []]
        if getattr(args, "tokens_file", None):
            tokens += load_tokens_file(args.tokens_file)
        if not tokens:
            env = load_config().api.token
            if env is not None:
                tokens = [parse_token(env, "$" + TOKEN_ENV)]
        check_tokens(tokens)
        limits = ApiLimits.from_args(args)
    except (ValueError, OSError) as e:
        return str(e)
    return tokens, limits


def _check_serving(args: argparse.Namespace) -> str | None:
    """A one-line error for a bad port, TLS file or unreadable path, else ``None``."""
    if not 0 <= args.port <= 65535:
        return f"--port must be 0-65535, got {args.port}"
    problem = run_number_error(args) or base_error(args.base)
    if problem:
        return problem
    try:  # uvicorn would log a traceback-free error but exit 1 at startup, after loading everything
        family, _, _, _, addr = socket.getaddrinfo(args.host, args.port, type=socket.SOCK_STREAM)[0]
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(addr)
    except OSError as e:
        return f"cannot listen on {args.host}:{args.port}: {e.strerror or e}"
    if bool(args.tls_cert) != bool(args.tls_key):
        return "--tls-cert and --tls-key go together"
    for flag, path in (
        ("--tls-cert", args.tls_cert),
        ("--tls-key", args.tls_key),
        ("--tokens-file", args.tokens_file),
    ):
        if path and not os.access(path, os.R_OK):
            return f"{flag} {path!r} is not a readable file"
    if args.tls_cert:
        import ssl

        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(args.tls_cert, args.tls_key)
        except (ssl.SSLError, OSError) as e:
            return f"cannot use --tls-cert/--tls-key: {e}"
    return None


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 1


def cmd_run(args: argparse.Namespace) -> int:
    """``linkstream run``: load the static graphs and serve until interrupted (``--zk``: as a
    coordinator of a cluster, :func:`linkstream.cli.cluster.cmd_run_cluster`)."""
    if args.ingest != "leader" and not args.zk:
        return err(f"--ingest {args.ingest} is a cluster setting (it needs --zk)")
    if args.zk:
        if args.store or args.absorb or args.dictionary != "memory:":
            return err("--store, --absorb and --dictionary are not supported with --zk yet")
        if args.checkpoints and not args.state_dir:
            return err("--checkpoints needs --state-dir (checkpoints cover the ingest log kept there)")
        if args.checkpoint_interval < 0:
            return err(f"--checkpoint-interval must be >= 0 seconds, got {args.checkpoint_interval}")
        if args.state_dir:  # the cluster's checkpoint location, checked before anything starts
            from linkstream.config import ConfigError
            from linkstream.store.checkpoints import open_checkpoints

            try:
                open_checkpoints(checkpoint_uri(args))
            except (ConfigError, ValueError, OSError) as e:
                return err(f"cannot use the checkpoints: {e}")
        from linkstream.cli.cluster import cmd_run_cluster

        return cmd_run_cluster(args)
    from linkstream.api.app import create_app
    from linkstream.api.server import build_live, serve

    problem = _check_serving(args)
    settings = api_settings(args)
    if problem or isinstance(settings, str):
        return err(problem or str(settings))
    tokens, limits = settings
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    statics = static_bindings(args)
    if isinstance(statics, str):
        return err(statics)
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
    live.results_retention_s = args.results_retention  # (before any query: its ring takes it)
    if args.state_dir:  # restore + replay the durable ingest log before serving, then log every input
        problem = _recover_state(live, args)
        if problem:
            live.close()
            return err(problem)
    elif args.checkpoints:
        live.close()
        return err("--checkpoints needs --state-dir (checkpoints cover the ingest log kept there)")
    if args.store:  # the store's stable timestamp, snapshot age and delta at /metrics
        from linkstream.metrics import StoreCollector

        live.metrics.registry.register(StoreCollector(live.engine.store))  # type: ignore[attr-defined]  # set on the engine by api/server.py
    app = create_app(live, tokens=tokens, limits=limits, base=args.base)
    try:
        serve(
            app,
            args.host,
            args.port,
            args.log_level,
            on_shutdown=live.close,
            limits=limits,
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
        )
    except OSError as e:  # the port is taken, the host cannot be bound
        live.close()
        return err(f"cannot serve on {args.host}:{args.port}: {e}")
    return 0


def checkpoint_uri(args: argparse.Namespace) -> str:
    """``--checkpoints``, else ``LINKSTREAM_CHECKPOINTS``, else ``file://DIR/checkpoints``."""
    uri = args.checkpoints or load_config().checkpoints.uri
    return uri or "file://" + os.path.join(os.path.abspath(args.state_dir), "checkpoints")


def _recover_state(live: Any, args: argparse.Namespace) -> str | None:
    """Opens ``--state-dir``, restores the latest checkpoint, replays the log after it and
    starts the checkpointer; a one-line error, or ``None``."""
    import time

    from linkstream.config import ConfigError
    from linkstream.engine.live.checkpoint import Checkpointer, checkpoint_support
    from linkstream.engine.live.ingestlog import IngestLog
    from linkstream.engine.live.logship import LogShipper, adopt_shipped, ship_enabled
    from linkstream.store.checkpoints import CheckpointError, open_checkpoints

    logger = logging.getLogger(__name__)
    if args.checkpoint_interval < 0:
        return f"--checkpoint-interval must be >= 0 seconds, got {args.checkpoint_interval}"
    why = checkpoint_support(live)
    store = None
    try:
        uri = checkpoint_uri(args)
        if why is None:
            store = open_checkpoints(uri)
        elif args.checkpoints or args.checkpoint_interval > 0:
            logger.warning(
                "state dir %s: %s; the whole ingest log is replayed at restart", args.state_dir, why
            )
    except (ConfigError, ValueError, OSError) as e:
        return f"cannot use the checkpoints: {e}"
    if args.log_ship_interval < 0:
        return f"--log-ship-interval must be >= 0 seconds, got {args.log_ship_interval}"
    ship = store is not None and args.log_ship_interval > 0 and ship_enabled(store.uri, args.state_dir)
    t0 = time.perf_counter()
    try:
        ingest_log = IngestLog(args.state_dir)
    except OSError as e:
        return f"cannot use --state-dir {args.state_dir}: {e}"
    try:
        if ship and store is not None:  # what the local log lacks (a lost disk) comes from the shipped log
            adopt_shipped(ingest_log, store.backend)
        n = live.recover(ingest_log, checkpoints=store)
    except (CheckpointError, OSError) as e:
        ingest_log.close()
        return f"cannot recover from --state-dir {args.state_dir}: {e}"
    logger.info("state dir %s: replayed %d log records (%.2fs)", args.state_dir, n, time.perf_counter() - t0)
    if store is not None and args.checkpoint_interval > 0:
        ck = Checkpointer(live, ingest_log, store, args.checkpoint_interval)
        if ship:
            ck.shipper = LogShipper(ingest_log, store.backend, args.log_ship_interval, live.metrics.registry)
            ck.shipper.start()
            logger.info("ingest log shipped every %gs to %s", args.log_ship_interval, store.uri)
        live.checkpointer = ck.start()
        logger.info("checkpoints every %gs to %s", args.checkpoint_interval, store.uri)
    return None


def cmd_restore(args: argparse.Namespace) -> int:
    """``linkstream restore``: checkpoint + log replayed (records read by Spark) -> new checkpoint."""
    import fcntl

    from linkstream.api.server import build_live
    from linkstream.bulk.restore import has_shipped_log
    from linkstream.config import ConfigError
    from linkstream.engine.live.checkpoint import checkpoint_support, write_checkpoint
    from linkstream.engine.live.logship import ship_enabled
    from linkstream.engine.live.recovery import dropped_pushes, replay_records, restore_latest
    from linkstream.store.checkpoints import CheckpointError, open_checkpoints

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.store:
        return _restore_store(args)
    state_dir = os.path.abspath(args.log)
    if os.path.basename(state_dir) == "log" and not os.path.isdir(os.path.join(state_dir, "log")):
        state_dir = os.path.dirname(state_dir)
    log_dir = os.path.join(state_dir, "log")
    try:
        uri = args.checkpoint or load_config().checkpoints.uri
    except ConfigError as e:
        return err(str(e))
    if not os.path.isdir(log_dir) and not (uri and ship_enabled(uri, state_dir) and has_shipped_log(uri)):
        return err(
            f"--log {args.log}: no ingest log there (expected {log_dir}/, or a log shipped to --checkpoint)"
        )
    try:  # the same lock run --state-dir holds: never rebuild under a running server
        os.makedirs(state_dir, exist_ok=True)
        lock_fd = os.open(os.path.join(state_dir, "lock"), os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return err(f"--log {args.log}: {state_dir} is in use by another process (stop linkstream run first)")
    statics = static_bindings(args)
    if isinstance(statics, str):
        return err(statics)
    try:
        store = open_checkpoints(uri or "file://" + os.path.join(state_dir, "checkpoints"))
        live = build_live(
            statics,
            default_step=args.default_step,
            idle_ms=None,
            retention_ms=args.retention_ms,
            base=args.base,
        )
    except (ConfigError, ValueError, OSError) as e:
        return err(str(e))
    live.max_time_jump_ms = None  # every record was accepted once already
    live.results_retention_s = args.results_retention
    why = checkpoint_support(live)
    if why:
        return err(why)
    spark = None
    try:
        covered, ck = restore_latest(live, store)
        from linkstream.bulk.restore import log_dirs, spark_log_records
        from linkstream.bulk.session import SparkUnavailable, spark_session

        try:
            spark = spark_session(args.spark, app_name="linkstream-restore")
        except SparkUnavailable as e:
            return err(str(e))
        offsets = {s: int(o) for s, o in (ck.meta.get("offsets") or {}).items()} if ck else {}

        def tracked(records: Any) -> Any:
            for rec in records:
                if rec.kind == "push":
                    s = rec.header["s"]
                    offsets[s] = max(offsets.get(s, 0), int(rec.header["o"]) + 1)
                yield rec

        dirs = log_dirs(store, state_dir, covered, os.path.join(state_dir, "shipped"))  # local + shipped
        # in memory already (the job's table): the drop records name the pushes not to apply
        records = list(spark_log_records(spark, dirs, covered))
        n, last = replay_records(live, tracked(records), covered, state_dir, dropped=dropped_pushes(records))
        live.flush()
        if n == 0:
            print(
                "nothing to replay after %s; no new checkpoint"
                % ("checkpoint %s (log records through %d)" % (ck.id, covered) if ck else "an empty log")
            )
            return 0
        extra = {"restored_by": "linkstream restore", "spark": args.spark, "from": ck.id if ck else None}
        cid = write_checkpoint(live, store, last, offsets, extra)
    except (CheckpointError, OSError) as e:
        return err(f"cannot restore {state_dir}: {e}")
    finally:
        live.close()
        if spark is not None:
            spark.stop()
        os.close(lock_fd)
    print(
        "checkpoint %s in %s: %s + %d log records (through record %d), %d queries"
        % (cid, store.uri, "checkpoint %s" % ck.id if ck else "empty state", n, last, len(live.query_names()))
    )
    return 0


def _restore_store(args: argparse.Namespace) -> int:
    """``linkstream restore --store DIR``: the store's log written into its partitions by Spark."""
    from linkstream.bulk.session import SparkUnavailable, spark_session
    from linkstream.bulk.store_rebuild import describe, rebuild_store
    from linkstream.store.layout import MANIFEST, StoreError
    from linkstream.store.storelock import StoreLockedError

    if not os.path.isfile(os.path.join(args.store, MANIFEST)):
        return err(
            f"--store {args.store}: not a store directory (no {MANIFEST}; make one with linkstream load)"
        )
    try:
        spark = spark_session(args.spark, app_name="linkstream-restore-store")
    except SparkUnavailable as e:
        return err(str(e))
    try:
        print(describe(rebuild_store(spark, args.store)))
    except (StoreError, StoreLockedError, OSError) as e:
        return err(f"cannot rebuild {args.store}: {e}")
    finally:
        spark.stop()
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
        message = e.message
        if e.line is not None:  # a query error: FILE:LINE:COL: message (the server's text may hold LINE:COL)
            loc = f"{e.line}:{e.column}: " if e.column is not None else f"{e.line}: "
            source = getattr(args, "file", None)
            message = f"{source if source and source != '-' else 'query'}:{loc}{message.removeprefix(loc)}"
        return err(f"{e.status}: {message}")
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
