"""``infra/local-cluster`` (``python -m linkstream.cluster.localcluster``): start, stop,
status, add and remove on a :class:`~linkstream.cluster.localcluster.LocalCluster`."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import time
from pathlib import Path

from linkstream.cluster.localcluster import DEFAULT_DIR, LocalCluster


def _interrupt(*_: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``infra/local-cluster``."""
    ap = argparse.ArgumentParser(
        prog="local-cluster", description="Run a LinkStream cluster on this machine."
    )
    ap.add_argument("action", choices=["start", "stop", "status", "add", "remove"])
    ap.add_argument("arg", nargs="?", help="number of containers (start, add) or container id (remove)")
    ap.add_argument("--dir", default=str(DEFAULT_DIR), help="state and log directory (default %(default)s)")
    ap.add_argument(
        "--coordinators", type=int, default=2, help="coordinators serving the API to start (default 2)"
    )
    ap.add_argument("--capacity", type=int, default=16, help="query slots per container (default 16)")
    ap.add_argument("--session-timeout", type=float, default=4.0, help="ZooKeeper session timeout (s)")
    ap.add_argument("--detach", action="store_true", help="start in the background and return")
    ap.add_argument(
        "--insecure",
        action="store_true",
        help="start: no ZooKeeper credential, open ACLs, plaintext ZeroMQ (local experiments only)",
    )
    ap.add_argument(
        "--store",
        default=None,
        metavar="DIR",
        help="start: a store directory (linkstream load) served by store nodes; containers "
        "read static graphs from them (--remote-store)",
    )
    ap.add_argument(
        "--store-nodes",
        type=int,
        default=None,
        metavar="M",
        help="start: store nodes to run with --store, each holding every partition (default 1)",
    )
    ap.add_argument(
        "--cache-mb",
        type=float,
        default=None,
        metavar="MB",
        help="start: each container's block cache of the store nodes' data (default the container's)",
    )
    ap.add_argument(
        "--static",
        action="append",
        default=[],
        metavar="[IRI=]PATH",
        help="start: a static graph every coordinator loads and gives the containers (repeatable; "
        "IRI=PATH binds a named graph, PATH adds to the default graph)",
    )
    ap.add_argument(
        "--ingest-log",
        action="store_true",
        help="start: the coordinators share a durable ingest log in DIR/ingest (their --state-dir): "
        "a push is acknowledged once fsynced there and the death of the leader loses nothing",
    )
    args = ap.parse_args(argv)
    statics: list[str] = []
    for arg in args.static:
        iri, eq, path = arg.rpartition("=") if "=" in arg else ("", "", arg)
        if not Path(path).is_file():
            ap.error(f"--static {arg}: no such file {path!r}")
        statics += ["--static", f"{iri}{eq}{Path(path).resolve()}"]
    if args.store_nodes is not None and (args.store is None or args.store_nodes < 1):
        ap.error("--store-nodes needs --store DIR and a count >= 1")
    if args.store is not None and not (Path(args.store) / "store.json").is_file():
        ap.error(f"--store {args.store}: not a LinkStream store (no store.json)")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    if args.action == "start":
        cluster = LocalCluster(
            args.dir,
            session_timeout=args.session_timeout,
            capacity=args.capacity,
            insecure=args.insecure,
            store=args.store,
            store_nodes=args.store_nodes or 1,
            cache_mb=args.cache_mb,
            api_token=True,
            coordinator_args=statics
            + (["--state-dir", str((Path(args.dir) / "ingest").resolve())] if args.ingest_log else []),
        )
        try:
            cluster.start(int(args.arg or 3), args.coordinators)
        except (RuntimeError, TimeoutError) as e:
            cluster.stop()
            print(f"error: the local cluster did not start: {e}", file=sys.stderr)
            return 1
        except BaseException:
            cluster.stop()
            raise
        print(cluster.describe(), flush=True)
        urls = sorted(cluster.api_urls(timeout=30).items())
        for cid, url in urls:
            print(f"api: {url}  (coordinator {cid}; any coordinator answers)", flush=True)
        token = cluster.api_token
        if token is not None:
            print(
                f"token: {token}  (admin; in {cluster.state.api_tokens_file}; send 'Authorization: "
                "Bearer TOKEN', or export LINKSTREAM_API_TOKEN=TOKEN for linkstream queries)",
                flush=True,
            )
        else:
            print("token: none (--insecure: the API is open to this machine)", flush=True)
        if urls:
            env = cluster.write_api_env(urls[0][1])
            print(f"env: . {env}  (sets API and LINKSTREAM_API_TOKEN for your shell)", flush=True)
        print(
            f"replay with: linkstream replay ... --zk {cluster.hosts} {' '.join(cluster.security_args())}",
            flush=True,
        )
        if args.detach:
            return 0
        try:
            signal.signal(signal.SIGTERM, _interrupt)
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopping", flush=True)
        finally:
            cluster.stop()
        return 0
    try:
        cluster = LocalCluster.load(args.dir)
    except FileNotFoundError:
        print(f"no local cluster recorded in {args.dir}", file=sys.stderr)
        return 1
    if args.action == "stop":
        cluster.stop()
    elif args.action == "status":
        print(cluster.describe())
    elif args.action == "add":
        print(" ".join(cluster.add_containers(int(args.arg or 1))))
    elif args.action == "remove":
        if not args.arg:
            ap.error("remove needs a container id")
        cluster.remove_container(args.arg)
    return 0
