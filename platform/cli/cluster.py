"""What the cluster-mode subcommands of ``linkstream`` do (the parsers live in ``cli/main.py``).

``container`` and ``coordinator`` (an alias of ``run --zk``: a coordinator that serves the
HTTP API, :mod:`linkstream.cluster.service`) run a process until SIGTERM/SIGINT (a container also
ends once its graceful drain completes); ``status`` prints a snapshot; ``containers
add|remove`` change a running local cluster; ``replay --zk|--cluster`` runs a replay
through :func:`linkstream.cluster.replay.replay_on_cluster`.  What these commands share
(logging, signals, flag checks, ZooKeeper security) is :mod:`linkstream.cli.clusterproc`;
``autoscaler`` is :mod:`linkstream.cli.autoscaler`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from linkstream.cli.clusterproc import (
    cluster_security,
    exit_if_stuck,
    refuse_bad_options,
    setup_logging,
    stop_on_signals,
    zk_connect_timeout,
)

if TYPE_CHECKING:  # the parsers are built on every command; zmq loads only when used
    from linkstream.containers.security import Security

SHUTDOWN_S = 5.0


def cmd_container(args: argparse.Namespace) -> int:
    """``linkstream container``: serve as an operator container."""
    from linkstream.cli.args import preload_query_parser
    from linkstream.containers.runtime import ContainerRuntime, serve

    if refuse_bad_options(args):
        return 2
    security = cluster_security(args)
    if security is None:
        return 2
    setup_logging(args.log_level)
    preload_query_parser()
    runtime = ContainerRuntime(
        args.zk,
        container_id=args.id,
        capacity=args.capacity,
        bind=args.bind,
        session_timeout=args.session_timeout,
        root=args.root,
        metrics_port=args.metrics_port,
        security=security,
        remote_store=bool(getattr(args, "remote_store", False)),
        cache_bytes=int(float(getattr(args, "cache_mb", 64.0)) * (1 << 20)),
    )
    return exit_if_stuck(serve(runtime, stop_on_signals()))


def cmd_coordinator(args: argparse.Namespace) -> int:
    """``linkstream coordinator``: an alias of ``run --zk`` with the API on a free loopback port.

    Every coordinator of a cluster serves the HTTP API (a coordinator without one could
    win the election and leave the API without a leader); this one binds 127.0.0.1 on a
    free port and publishes the URL in ZooKeeper (``linkstream status`` shows it).
    """
    args.host = getattr(args, "host", None) or "127.0.0.1"
    args.port = getattr(args, "port", None) or 0
    return cmd_run_cluster(args)


def _checkpoint_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The cluster checkpoints of ``run --zk --state-dir`` (``--checkpoints``, ``--checkpoint-interval``)."""
    if not getattr(args, "state_dir", None):
        return {}
    from linkstream.cli.service import checkpoint_uri

    return {
        "checkpoints": checkpoint_uri(args),
        "checkpoint_interval": args.checkpoint_interval,
        "log_ship_interval": args.log_ship_interval,
    }


def cmd_run_cluster(args: argparse.Namespace) -> int:
    """``linkstream run --zk``: a coordinator (leader or standby) serving the HTTP API."""
    if refuse_bad_options(args):
        return 2
    security = cluster_security(args)  # refused before anything is loaded
    if security is None:
        return 2
    import socket
    import ssl

    import uvicorn

    from linkstream.api.server import raise_fd_limit, uvicorn_config
    from linkstream.cli.args import DEFAULT_BASE, preload_query_parser, split_binding
    from linkstream.cli.service import api_settings
    from linkstream.cluster.proxy import create_service_app
    from linkstream.cluster.results import tune_gc
    from linkstream.cluster.service import ClusterService
    from linkstream.metrics import CoordinatorMetrics, serve_metrics
    from linkstream.scheduler.state import Policy

    preload_query_parser()

    # the same tokens (scopes), request limits and TLS as embedded `run`, checked before anything starts
    settings = api_settings(args)
    if isinstance(settings, str):
        print(f"error: {settings}", file=sys.stderr)
        return 2
    tokens, limits = settings
    tls_cert, tls_key = getattr(args, "tls_cert", None), getattr(args, "tls_key", None)
    peer_verify: object = True
    if bool(tls_cert) != bool(tls_key):
        print("error: --tls-cert and --tls-key go together", file=sys.stderr)
        return 2
    if tls_cert:
        try:
            ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(tls_cert, tls_key)
            peer_verify = ssl.create_default_context()  # the other coordinators' certificates:
            peer_verify.load_verify_locations(cafile=tls_cert)  # the system's CAs, or this chain
        except (ssl.SSLError, OSError) as e:
            print(f"error: cannot use --tls-cert/--tls-key: {e}", file=sys.stderr)
            return 2

    setup_logging(args.log_level)
    base = getattr(args, "base", None) or DEFAULT_BASE
    statics = []
    for arg in getattr(args, "static", None) or []:
        iri, path = split_binding(arg, base)
        if not os.path.exists(path):
            print(f"error: static graph file {path!r} does not exist", file=sys.stderr)
            return 2
        statics.append((iri, os.path.abspath(path)))
    identifier = args.id or f"{os.uname().nodename}-{os.getpid()}"
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # TCP_NODELAY
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    host, port = sock.getsockname()[:2]
    advertised = host if host not in ("0.0.0.0", "") else socket.gethostname()
    api_url = f"{'https' if tls_cert else 'http'}://{advertised}:{port}"
    metrics = CoordinatorMetrics()
    meta: dict[str, object] = {"pid": os.getpid(), "host": os.uname().nodename}
    mserver = None
    if getattr(args, "metrics_port", None) is not None:
        mserver, mport = serve_metrics(metrics.registry, args.metrics_port)
        meta["metrics"] = f"127.0.0.1:{mport}"
    policy = Policy(
        tolerance=getattr(args, "tolerance", 0.25),
        max_moves=getattr(args, "max_moves", 4),
        affinity=not getattr(args, "no_affinity", False),
    )
    idle = getattr(args, "idle_ms", 5000)
    service = ClusterService(
        args.zk,
        identifier=identifier,
        api_url=api_url,
        statics=statics,
        base=base,
        default_step=getattr(args, "default_step", 1000),
        idle_ms=idle or None,
        retention_ms=getattr(args, "retention_ms", 60_000),
        results_retention_s=getattr(args, "results_retention", 300.0),
        root=args.root,
        session_timeout=args.session_timeout,
        tick_interval=getattr(args, "tick_interval", 1.0),
        policy=policy,
        meta=meta,
        coordinator_metrics=metrics,
        security=security,
        state_dir=os.path.abspath(args.state_dir) if getattr(args, "state_dir", None) else None,
        **_checkpoint_settings(args),
    )
    from linkstream.cluster.streamlog import set_ingest

    if problem := set_ingest(
        service, getattr(args, "ingest", "leader"), getattr(args, "stream_segment_mb", 64.0)
    ):
        print(f"error: {problem}", file=sys.stderr)
        return 2
    service.client.add_listener(metrics.zookeeper_state)
    service.peer_verify = peer_verify
    app = create_service_app(service, tokens=tokens, limits=limits)
    tune_gc()  # (the result log's heap: see its docstring)
    print(f"coordinator {identifier}: API at {api_url}", file=sys.stderr, flush=True)

    class Server(uvicorn.Server):
        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            service.close()  # ends the result streams first, so they finish cleanly
            await super().shutdown(sockets)

    config, _ = uvicorn_config(
        app,
        raise_fd_limit(limits),
        log_level=str(args.log_level).lower(),
        tls_cert=tls_cert,
        tls_key=tls_key,
        lifespan="on",
    )
    try:
        Server(config).run(sockets=[sock])
    finally:
        bounded = threading.Thread(target=service.close, name="shutdown", daemon=True)
        bounded.start()
        bounded.join(SHUTDOWN_S)
        if mserver is not None:
            mserver.shutdown()
    return exit_if_stuck(-1 if bounded.is_alive() else 0)


def _hosts(args: argparse.Namespace) -> tuple[str, Security | None]:
    """ZooKeeper of ``--zk`` (security from the flags) or of the local cluster in ``--dir``."""
    if args.zk:
        return args.zk, cluster_security(args)
    from linkstream.cluster.localcluster import LocalCluster

    cluster = LocalCluster.load(args.dir)
    if args.insecure or args.zk_auth_file or args.zk_tls_ca:
        return cluster.hosts, cluster_security(args)
    return cluster.hosts, cluster.security


def cmd_status(args: argparse.Namespace) -> int:
    """``linkstream status``: containers, tasks, queries, coordinators, run."""
    from linkstream.scheduler.status import cluster_status, format_status

    if refuse_bad_options(args):
        return 2
    try:
        hosts, security = _hosts(args)
    except FileNotFoundError:
        print(f"error: no --zk and no local cluster in {args.dir}", file=sys.stderr)
        return 2
    if security is None:
        return 2
    client = security.connect(hosts, 10.0, zk_connect_timeout())
    try:
        status = cluster_status(client, args.root)
    finally:
        client.stop()
        client.close()
    print(json.dumps(status, indent=1) if args.json else format_status(status))
    return 0


def cmd_containers(args: argparse.Namespace) -> int:
    """``linkstream containers add N`` / ``containers remove ID`` on a local cluster."""
    from linkstream.cluster.localcluster import LocalCluster

    if refuse_bad_options(args):
        return 2
    if args.action == "add" and not (args.target.isdigit() and int(args.target) >= 1):
        print(f"error: containers add needs a count >= 1, got {args.target!r}", file=sys.stderr)
        return 2
    try:
        cluster = LocalCluster.load(args.dir)
    except FileNotFoundError:
        print(
            f"error: no local cluster recorded in {args.dir} (start one with infra/local-cluster)",
            file=sys.stderr,
        )
        return 2
    cluster.connect_timeout = zk_connect_timeout()
    if args.action == "add":
        print(" ".join(cluster.add_containers(int(args.target), capacity=args.capacity)))
        return 0
    try:
        cluster.remove_container(args.target, timeout=args.timeout)
    except TimeoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{args.target} drained and stopped")
    return 0


def cmd_replay_cluster(args: argparse.Namespace, log: Callable[[str], None]) -> int:
    """``linkstream replay --zk HOSTS`` or ``--cluster N``: the replay on operator containers."""
    from linkstream.cli.args import err, finish_replay, split_binding, stream_bindings
    from linkstream.cluster.localcluster import LocalCluster
    from linkstream.cluster.replay import ClusterError, replay_on_cluster
    from linkstream.engine.embedded import Engine
    from linkstream.query.continuous import parse_continuous
    from linkstream.query.errors import QueryError
    from linkstream.rdf.dictionary import open_dictionary
    from linkstream.scheduler.runs import RunActiveError

    security: Security | None = None  # --cluster: the local cluster's own credential (or --insecure)
    if not args.cluster:
        security = cluster_security(args)
        if security is None:
            return 2
    statics: list[tuple[str | None, str]] = []
    for arg in args.static:
        iri, path = split_binding(arg, args.base)
        if not os.path.exists(path):
            return err(f"static graph file {path!r} does not exist")
        statics.append((iri, os.path.abspath(path)))
    streams = stream_bindings(args.stream, args.base)
    if isinstance(streams, str):
        return err(streams)
    queries = []
    scratch = Engine(default_step=args.default_step, log_fn=lambda _msg: None)
    for path in args.query:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            stem = os.path.splitext(os.path.basename(path))[0]
            cq = parse_continuous(text, default_name=stem, base=args.base, source=path)
            scratch.register(cq)  # plan once here so that errors are reported as in embedded mode
        except (OSError, UnicodeDecodeError) as e:
            return err(f"cannot read query {path}: {e}")
        except QueryError as e:
            msg = str(e)
            return err(msg if msg.startswith(path) else f"{path}: {msg}")
        queries.append(cq)
    try:
        dictionary = open_dictionary(args.dictionary)
    except (ValueError, OSError) as e:
        return err(str(e))
    cluster = None
    hosts = args.zk
    if args.cluster:
        # Room for every query even on one container; the scheduler still spreads them.
        cluster = LocalCluster(
            tempfile.mkdtemp(prefix="linkstream-cluster-"),
            capacity=max(16, len(queries)),
            insecure=args.insecure,
        )
        try:
            cluster.start(args.cluster)
        except (RuntimeError, TimeoutError) as e:
            cluster.stop()
            return err(f"local cluster did not start: {e} (logs in {cluster.dir})")
        hosts = cluster.hosts
        security = cluster.security
        if not args.quiet:
            log(cluster.describe())
    out = open(args.out, "w", encoding="utf-8") if args.out != "-" else sys.stdout
    try:
        result = replay_on_cluster(
            hosts,
            queries,
            streams,
            statics,
            out,
            base=args.base,
            default_step=args.default_step,
            lateness_ms=args.lateness,
            max_reports=args.max_reports,
            dictionary=dictionary,
            answer_timeout=args.answer_timeout,
            log=log,
            placement=getattr(args, "placement", "queries"),
            parallelism=getattr(args, "parallelism", 1),
            route=getattr(args, "route", "streams"),
            affinity=not getattr(args, "no_affinity", False),
            security=security,
            connect_timeout=zk_connect_timeout() if args.zk else 30.0,
        )
    except (ClusterError, RunActiveError) as e:
        return err(str(e))
    finally:
        if out is not sys.stdout:
            out.close()
        if cluster is not None:
            cluster.stop()
            shutil.rmtree(cluster.dir, ignore_errors=True)
        dictionary.close()
    finish_replay(
        args,
        result.replay,
        log,
        where=(
            f"on {len(result.containers)} container(s), {result.replay.rows} result rows, "
            f"{len(result.switches)} placements/moves"
        ),
        stats={
            "containers": result.containers,
            "answerers": {sw.query: sw.dst for sw in result.switches},
            "moves": len(result.switches),
            "placement": result.placement,
            "route": result.route,
            "bytes_sent": result.bytes_sent,
            "elements_by_container": result.elements_by_container,
            "lost": [[x.query, x.t, x.container, x.reason] for x in result.lost],
            "recovered": [[r.query, r.t, r.src, r.dst] for r in result.recovered],
            "migrations": [
                {"query": m.query, "src": m.src, "dst": m.dst, "seq": m.seq, "bytes": m.bytes, "rows": m.rows}
                for m in result.migrations
            ],
        },
    )
    if result.lost:
        queries_lost = sorted({x.query for x in result.lost})
        log(f"lost: {len(result.lost)} report(s) of {', '.join(queries_lost)} (a container died or stalled)")
        return 3
    return 0
